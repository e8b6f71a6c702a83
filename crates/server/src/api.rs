//! The JSON API: one table of routes, each a plain function from the request's
//! parameters to a JSON body. Adding an analysis is one entry in [`ROUTES`] and one
//! small function.
//!
//! Analyses answer with exactly the JSON `stepscope <command> --json` prints for the
//! same parameters (`top` defaults to the CLI's 10; `top=all` lists every row).

use std::collections::HashMap;

use serde::Serialize;
use stepscope_analysis::ops::{self, GroupBy};
use stepscope_analysis::{kernels, summary};

use crate::cache::Entry;
use crate::App;

/// A failed request: HTTP status and a one-line message.
#[derive(Debug)]
pub struct ApiError {
    pub status: u16,
    pub message: String,
}

impl ApiError {
    pub fn bad(message: impl Into<String>) -> ApiError {
        ApiError { status: 400, message: message.into() }
    }
    pub fn not_found(message: impl Into<String>) -> ApiError {
        ApiError { status: 404, message: message.into() }
    }
}

type Reply = Result<Vec<u8>, ApiError>;
type Handler = fn(&App, &Params) -> Reply;

/// Every API route, by its path under `api/`.
pub const ROUTES: &[(&str, Handler)] = &[
    ("runs", runs),
    ("summary", summary),
    ("steps", steps),
    ("ops", ops),
    ("kernels", kernels),
    ("timeline/tracks", timeline_tracks),
    ("timeline/tile", timeline_tile),
    ("timeline/event", timeline_event),
    ("timeline/search", timeline_search),
];

/// The handler for `path` (under `api/`), if there is one.
pub fn route(path: &str) -> Option<Handler> {
    ROUTES.iter().find(|(p, _)| *p == path).map(|(_, h)| *h)
}

/// Query parameters (the last value of a repeated name wins).
pub struct Params(HashMap<String, String>);

impl Params {
    pub fn new(pairs: Vec<(String, String)>) -> Params {
        Params(pairs.into_iter().collect())
    }

    fn str(&self, name: &str) -> Option<&str> {
        self.0.get(name).map(String::as_str)
    }

    fn req<T: std::str::FromStr>(&self, name: &str) -> Result<T, ApiError> {
        let v = self.str(name).ok_or_else(|| ApiError::bad(format!("missing parameter {name}")))?;
        v.parse().map_err(|_| ApiError::bad(format!("parameter {name}={v:?} is not a valid number")))
    }

    fn opt<T: std::str::FromStr>(&self, name: &str, default: T) -> Result<T, ApiError> {
        match self.str(name) {
            None | Some("") => Ok(default),
            Some(_) => self.req(name),
        }
    }

    /// `top`: rows to keep (default the CLI's 10; `all` keeps every row).
    fn top(&self) -> Result<usize, ApiError> {
        match self.str("top") {
            Some("all") => Ok(usize::MAX),
            _ => self.opt("top", 10),
        }
    }

    /// The run (`run`, `host`) the request is about, loaded.
    fn entry(&self, app: &App) -> Result<std::sync::Arc<Entry>, ApiError> {
        let host = self.str("host").filter(|h| !h.is_empty());
        let run = self.str("run").filter(|r| !r.is_empty());
        app.cache.get(&app.root, run, host).map_err(ApiError::not_found)
    }
}

fn json<T: Serialize>(value: &T) -> Reply {
    serde_json::to_vec(value).map_err(|e| ApiError { status: 500, message: format!("cannot encode JSON: {e}") })
}

fn runs(app: &App, _: &Params) -> Reply {
    let runs = app.root.runs().map_err(|e| ApiError::not_found(e.to_string()))?;
    json(&crate::root::runs_json(&runs))
}

fn summary(app: &App, q: &Params) -> Reply {
    let e = q.entry(app)?;
    json(&summary::summary(&e.profile, q.top()?))
}

fn steps(app: &App, q: &Params) -> Reply {
    json(q.entry(app)?.steps())
}

fn ops(app: &App, q: &Params) -> Reply {
    let by = match q.str("by").unwrap_or("op") {
        "op" | "" => GroupBy::Op,
        "category" => GroupBy::Category,
        "module" => GroupBy::Module,
        "scope" => GroupBy::Scope,
        other => return Err(ApiError::bad(format!("by={other:?}: use op, category, module or scope"))),
    };
    let e = q.entry(app)?;
    let mut result = ops::ops(&e.profile, by, q.opt("depth", 0)?);
    result.ops.truncate(q.top()?);
    json(&result)
}

fn kernels(app: &App, q: &Params) -> Reply {
    let e = q.entry(app)?;
    let mut result = kernels::kernels(&e.profile);
    result.kernels.truncate(q.top()?);
    json(&result)
}

fn timeline_tracks(app: &App, q: &Params) -> Reply {
    let e = q.entry(app)?;
    json(&e.timeline().tracks(&e.profile))
}

fn timeline_tile(app: &App, q: &Params) -> Reply {
    let (track, start, end, px) = (q.req("track")?, q.req("start_ps")?, q.req("end_ps")?, q.req("px")?);
    let e = q.entry(app)?;
    json(&e.timeline().tile(&e.profile, track, start, end, px).map_err(ApiError::bad)?)
}

fn timeline_event(app: &App, q: &Params) -> Reply {
    let (track, index) = (q.req("track")?, q.req("index")?);
    let e = q.entry(app)?;
    let detail = e.timeline().event(&e.profile, &e.steps().steps, track, index).map_err(ApiError::not_found)?;
    json(&detail)
}

fn timeline_search(app: &App, q: &Params) -> Reply {
    let query = q.str("q").unwrap_or("");
    let limit = q.opt("limit", 100)?;
    let e = q.entry(app)?;
    json(&e.timeline().search(&e.profile, query, limit))
}
