//! The JSON API: one table of routes, each a plain function from the request's
//! parameters to a JSON body. Adding an analysis is one entry in [`ROUTES`] and one
//! small function.
//!
//! Analyses answer with exactly the JSON `stepscope <command> --json` prints for the
//! same parameters (`top` defaults to the CLI's 10; `top=all` lists every row).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Serialize;
use stepscope_analysis::hlo_context::RunHlo;
use stepscope_analysis::ops::{self, GroupBy, OpRow};
use stepscope_analysis::Profile;
use stepscope_analysis::{buffers, collectives, compile, devices, hlo_context, hlo_graph, kernels, memory, whatif};
use stepscope_judge::advise::{self, Thresholds};
use stepscope_report::history::{History, HISTORY_TOP};
use stepscope_report::side::Side;
use stepscope_report::{diff, summary};
use stepscope_xspace::discover::{self, Run, Unread};
use stepscope_xspace::pprof;

use crate::cache::Entry;
use crate::App;

mod timeline;

/// A failed request: HTTP status and a one-line message.
#[derive(Debug)]
pub struct ApiError {
    pub status: u16,
    pub message: String,
}

/// A failure to build an answer (a table that could not be written): the server's.
impl From<std::io::Error> for ApiError {
    fn from(e: std::io::Error) -> ApiError {
        ApiError { status: 500, message: e.to_string() }
    }
}

/// A failure as the caches keep it: status and message.
impl From<ApiError> for (u16, String) {
    fn from(e: ApiError) -> (u16, String) {
        (e.status, e.message)
    }
}

impl From<(u16, String)> for ApiError {
    fn from((status, message): (u16, String)) -> ApiError {
        ApiError { status, message }
    }
}

impl ApiError {
    pub fn bad(message: impl Into<String>) -> ApiError {
        ApiError { status: 400, message: message.into() }
    }
    pub fn not_found(message: impl Into<String>) -> ApiError {
        ApiError { status: 404, message: message.into() }
    }
    /// A run that could not be loaded: 507 where its hosts do not fit in memory
    /// together (the web UI then offers them one at a time), else 404.
    pub fn unloaded(e: crate::cache::LoadError) -> ApiError {
        ApiError { status: if e.too_large { 507 } else { 404 }, message: e.message }
    }
}

type Reply = Result<Vec<u8>, ApiError>;
pub(crate) type Handler = fn(&App, &Params) -> Reply;

/// Every API route, by its path under `api/`.
pub const ROUTES: &[(&str, Handler)] = &[
    ("runs", runs),
    ("summary", summary),
    ("summary/hosts", summary_hosts),
    ("steps", steps),
    ("ops", ops),
    ("scopes", scopes),
    ("roofline", roofline),
    ("kernels", kernels),
    ("memory", memory),
    ("memory/live", memory_live),
    ("memory/buffers", memory_buffers),
    ("collectives", collectives),
    ("compile", compile),
    ("devices", devices),
    ("hlo", hlo),
    ("hlo/graph", hlo_graph),
    ("advise", advise),
    ("whatif", whatif),
    ("diff", diff),
    ("history", history),
    ("sql", sql),
    ("timeline/tracks", timeline::tracks),
    ("timeline/tile", timeline::tile),
    ("timeline/tiles", timeline::tiles),
    ("timeline/event", timeline::event),
    ("timeline/search", timeline::search),
    ("timeline/select", timeline::select),
    ("timeline/busy", timeline::busy),
];

/// The handler for `path` (under `api/`), if there is one.
pub fn route(path: &str) -> Option<Handler> {
    ROUTES.iter().find(|(p, _)| *p == path).map(|(_, h)| *h)
}

/// Query parameters (the last value of a repeated name wins), and the runs the
/// request read.
pub struct Params {
    pairs: HashMap<String, String>,
    read: Mutex<Vec<Arc<Entry>>>,
}

/// An error naming the hosts of run `e` whose files changed under it, if any.
fn unchanged(e: &Entry) -> Result<(), ApiError> {
    let hosts = e.profile.changed_hosts();
    if hosts.is_empty() {
        return Ok(());
    }
    Err(ApiError { status: 409, message: changed_message(&hosts, &e.run.rel) })
}

/// What a 409 says of `hosts` of run `run`, whose files changed while they were read.
fn changed_message(hosts: &[&str], run: &str) -> String {
    format!(
        "the profile of {} in run {run:?} changed while it was read (a copy over it was under way) — reload once the \
         file is written whole",
        hosts.join(", ")
    )
}

/// Answers a request with `handler`, unless a profile file it read changed under it
/// (a new capture copied over it while it was served): then what it made was read
/// from zeros, and the answer is an error; the next request reads the run again.
pub fn answer(app: &App, handler: Handler, q: &Params) -> Reply {
    let reply = handler(app, q);
    q.changed_files()?;
    reply
}

impl Params {
    pub fn new(pairs: Vec<(String, String)>) -> Params {
        Params { pairs: pairs.into_iter().collect(), read: Mutex::new(Vec::new()) }
    }

    pub(crate) fn str(&self, name: &str) -> Option<&str> {
        self.pairs.get(name).map(String::as_str)
    }

    /// An error naming the hosts of the runs read so far whose files changed under them.
    pub(crate) fn changed_files(&self) -> Result<(), ApiError> {
        let read = self.read.lock().map(|r| r.clone()).unwrap_or_default();
        read.iter().try_for_each(|e| unchanged(e))
    }

    /// A tile's window: `start_ps`, `end_ps`, `px`.
    fn window(&self) -> Result<(i64, i64, u32), ApiError> {
        Ok((self.req("start_ps")?, self.req("end_ps")?, self.req("px")?))
    }

    /// `rows`: how many depth rows a tile draws, at least 1 (every row when absent).
    fn rows(&self) -> Result<usize, ApiError> {
        match self.opt("rows", usize::MAX)? {
            0 => Err(ApiError::bad("rows=0: ask for at least 1 row, or leave rows out for all")),
            n => Ok(n),
        }
    }

    /// A comma-separated list of track ids (empty when absent).
    fn ids(&self, name: &str) -> Result<Vec<u32>, ApiError> {
        match self.str(name).filter(|t| !t.is_empty()) {
            None => Ok(Vec::new()),
            Some(list) => list
                .split(',')
                .map(|t| {
                    t.trim().parse::<u32>().map_err(|_| {
                        ApiError::bad(format!(
                            "{name}: {t:?} is not a track id — pass ids from api/timeline/tracks, comma-separated"
                        ))
                    })
                })
                .collect(),
        }
    }

    /// A required text parameter.
    fn text(&self, name: &str) -> Result<&str, ApiError> {
        self.str(name).filter(|v| !v.is_empty()).ok_or_else(|| ApiError::bad(format!("missing parameter {name}")))
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

    /// `by`: how to group ops (`op` when absent or empty).
    fn group_by(&self) -> Result<GroupBy, ApiError> {
        match self.str("by").unwrap_or("") {
            "" => Ok(GroupBy::Op),
            name => GroupBy::parse(name).map_err(ApiError::bad),
        }
    }

    /// `top`: rows to keep (default the CLI's 10; `all` or 0 keeps every row, as the
    /// CLI's `--top 0`).
    fn top(&self) -> Result<usize, ApiError> {
        match self.str("top") {
            Some(t) if t.eq_ignore_ascii_case("all") => Ok(usize::MAX),
            _ => self.opt("top", DEFAULT_TOP).map(|n| if n == 0 { usize::MAX } else { n }),
        }
    }

    /// The run (`run`, `host`) the request is about, loaded.
    pub(crate) fn entry(&self, app: &App) -> Result<Arc<Entry>, ApiError> {
        self.run_named(app, "run")
    }

    /// The run named by parameter `name` (default: the newest), `host` only when given.
    fn run_named(&self, app: &App, name: &str) -> Result<Arc<Entry>, ApiError> {
        let host = self.str("host").filter(|h| !h.is_empty());
        let run = self.str(name).filter(|r| !r.is_empty());
        let entry = app.cache.get(&app.root, run, host).map_err(ApiError::unloaded)?;
        if let Ok(mut read) = self.read.lock() {
            read.push(entry.clone());
        }
        Ok(entry)
    }
}

fn json<T: Serialize>(value: &T) -> Reply {
    serde_json::to_vec(value).map_err(|e| ApiError { status: 500, message: format!("cannot encode JSON: {e}") })
}

fn runs(app: &App, _: &Params) -> Reply {
    let runs = app.root.runs().map_err(|e| ApiError::not_found(e.to_string()))?;
    json(&crate::root::runs_json(&runs))
}

/// The summary; of a run too large to read whole, read a host at a time (as the CLI's
/// `summary` reads it).
fn summary(app: &App, q: &Params) -> Reply {
    let top = q.top()?;
    match whole(app, q)? {
        Some(e) => json(&summary::summary(&e.profile, top)),
        None => view(app, q, top, View::Summary),
    }
}

/// The steps; of a run too large to read whole, read a host at a time.
fn steps(app: &App, q: &Params) -> Reply {
    match whole(app, q)? {
        Some(e) => json(e.steps()),
        None => view(app, q, DEFAULT_TOP, View::Steps),
    }
}

/// As `stepscope advise --json` with the default thresholds; of a run too large to
/// read whole, read a host at a time (as the CLI's `advise` reads it).
fn advise(app: &App, q: &Params) -> Reply {
    match whole(app, q)? {
        Some(e) => json(&advise::advise(&e.profile, &Thresholds::default())),
        None => view(app, q, DEFAULT_TOP, View::Advice),
    }
}

/// As `stepscope whatif --json`: the steps replayed with `edit` (the CLI's words, as a
/// finding's `gain_edit` holds them: `--remove compile`, `--scale dot.1=0.5`). The model
/// replays a run held whole: of a run too large for that, ask for one `host`.
fn whatif(app: &App, q: &Params) -> Reply {
    let words = q.text("edit")?;
    let edit = whatif::Edit::parse(words).map_err(|e| ApiError::bad(format!("edit={words:?}: {e}")))?;
    if edit.is_empty() {
        return Err(ApiError::bad(
            "edit= is empty — give a change: --remove compile|callbacks|input, --prefetch copies|input, \
             --scale NAME=FACTOR, --jit, --balance or --dispatch-ahead",
        ));
    }
    let Some(e) = loaded(app, q)? else {
        return Err(ApiError {
            status: 507,
            message: "this run is too large to read whole, and the what-if model replays a run held whole — \
                      ask for one host (host=NAME)"
                .into(),
        });
    };
    if let Some(t) = whatif::unknown_targets(&e.profile, &edit).first() {
        let listed = t.listed_by().map(|by| format!("?by={by}")).unwrap_or_default();
        return Err(ApiError::not_found(format!("no {} ran in this run — api/ops{listed} lists the names", t.what())));
    }
    json(&whatif::project(&e.profile, &edit))
}

/// The `top` where none is asked for.
const DEFAULT_TOP: usize = 10;

/// What the overview page asks of a run, side by side.
#[derive(Clone, Copy)]
enum View {
    Summary,
    Advice,
    Steps,
    /// Each host's own summary (`summary --per-host`): the hosts table.
    Hosts,
}

/// One of the overview's answers of a run read a host at a time: its summary (`top`
/// ops), findings, steps and hosts table (each host's own summary) are made by one
/// pass over its hosts ([`summary::views_by_host`]) and kept together, so that the
/// page's four requests read the hosts once.
fn view(app: &App, q: &Params, top: usize, which: View) -> Reply {
    let body = by_host(
        app,
        q,
        format!("views/by-host?top={top}"),
        |run, read, check| summary::views_by_host(&run.rel, run.hosts.len(), top, read, check),
        |mut v, unread| {
            if !unread.is_empty() {
                v.advice.health.recheck_hosts(0, &unread);
            }
            let rel = &v.summary.overview.run;
            let own = std::mem::take(&mut v.hosts).into_iter();
            let own = own.map(|(host, summary)| stepscope_report::hosts::HostSummary { host, summary }).collect();
            let hosts = json(&stepscope_report::hosts::hosts(rel, own, unread.clone()))?;
            v.summary.set_hosts_unread(unread);
            let parts = [json(&v.summary)?, json(&v.advice)?, json(&v.steps)?, hosts];
            // Each answer after its length.
            Ok(parts.iter().flat_map(|p| (p.len() as u64).to_le_bytes().into_iter().chain(p.iter().copied())).collect())
        },
    )?;
    let cut = || ApiError { status: 500, message: "a kept answer is cut short — restart stepscope serve".into() };
    let mut rest = body.as_slice();
    for at in 0..=which as usize {
        let (len, after) = rest.split_at_checked(8).ok_or_else(cut)?;
        let len = u64::from_le_bytes(len.try_into().map_err(|_| cut())?) as usize;
        let (part, after) = after.split_at_checked(len).ok_or_else(cut)?;
        if at == which as usize {
            return Ok(part.to_vec());
        }
        rest = after;
    }
    Err(cut())
}

/// The entry of the run `q` names, loaded; `None` where it has several hosts, or is too
/// large to read whole, and `q` asks for no one host (it is then read a host at a time:
/// [`by_host`]).
fn whole(app: &App, q: &Params) -> Result<Option<Arc<Entry>>, ApiError> {
    if q.str("host").is_none_or(str::is_empty) && !stepscope_analysis::ahead::read_together() {
        // A run of several hosts is read a host at a time, as the CLI reads it.
        let run = app.root.run(q.str("run").filter(|r| !r.is_empty())).map_err(ApiError::not_found)?;
        if run.hosts.len() > 1 {
            return Ok(None);
        }
    }
    loaded(app, q)
}

/// The entry of the run `q` names, loaded whole; `None` where it is too large to read
/// whole and `q` asks for no one host.
fn loaded(app: &App, q: &Params) -> Result<Option<Arc<Entry>>, ApiError> {
    match q.entry(app) {
        Ok(e) => Ok(Some(e)),
        Err(e) if e.status == 507 && q.str("host").is_none_or(str::is_empty) => Ok(None),
        Err(e) => Err(e),
    }
}

/// The answer `finish` makes of `whole_run` of the run `q` names, loaded; where it is
/// too large to read whole (and `q` asks for no one host), of `make` of it read a host
/// at a time (as the CLI's `--host-at-a-time`), made once per run as its files are now
/// and kept under `question` (a pod's hosts take a while). `make` sums the hosts up with
/// the reader the folds take (each host read alone, not kept) and a check that a host's
/// file did not change under it.
fn whole_or_by_host<T>(
    app: &App,
    q: &Params,
    question: String,
    whole_run: impl FnOnce(&Entry) -> Result<T, ApiError>,
    make: impl FnOnce(&Run, &mut Reader, &Check) -> Result<T, (u16, String)>,
    finish: impl Fn(T) -> Reply,
) -> Reply {
    match whole(app, q)? {
        Some(e) => finish(whole_run(&e)?),
        None => by_host(app, q, question, make, |t, _| finish(t)).map(|body| body.to_vec()),
    }
}

/// [`whole_or_by_host`] of a run too large to read whole: its answer read a host at a
/// time, made once and kept.
fn by_host<T>(
    app: &App,
    q: &Params,
    question: String,
    make: impl FnOnce(&Run, &mut Reader, &Check) -> Result<T, (u16, String)>,
    finish: impl FnOnce(T, Vec<Unread>) -> Reply,
) -> Result<Arc<Vec<u8>>, ApiError> {
    let run = app.root.run(q.str("run").filter(|r| !r.is_empty())).map_err(ApiError::not_found)?;
    let made = app.cache.answer(&run, question, || {
        let (sum, unread) = read_hosts(app, &run, make)?;
        // A host not read now (its file cut) may be read on the next request.
        let keep = unread.is_empty();
        Ok((finish(sum, unread)?, keep))
    });
    Ok(made?)
}

/// What `make` sums up of `run`'s hosts, each read alone (not kept) and checked, and
/// the hosts it could not read; an error where it could read none.
fn read_hosts<T>(
    app: &App,
    run: &Run,
    make: impl FnOnce(&Run, &mut Reader, &Check) -> Result<T, (u16, String)>,
) -> Result<(T, Vec<Unread>), (u16, String)> {
    let mut unread = Vec::new();
    // What the sum keeps of each host until its reduce goes to a spill file, as the
    // CLI's read of a pod does (stepscope_analysis::wire::Spilling).
    let _spilling = if run.hosts.len() > 1 { stepscope_analysis::wire::Spilling::start() } else { None };
    let file_bytes: Vec<u64> = run.hosts.iter().map(|h| h.bytes).collect();
    let raw = |i: usize| app.cache.read_host(run, &run.hosts[i].host).map_err(|e| (404, e.message));
    let refuse = |e: stepscope_xspace::Error| (507, e.to_string());
    let prepare = |p: &Profile| p.prepare();
    let check = |p: &Profile| {
        let hosts = p.changed_hosts();
        if hosts.is_empty() {
            Ok(())
        } else {
            Err((409, changed_message(&hosts, &run.rel)))
        }
    };
    let sum = stepscope_analysis::ahead::read_ahead(&file_bytes, &raw, &prepare, refuse, |take| {
        let mut read = |i: usize, again: bool| match take(i, again) {
            Ok(p) => Ok(Some(p)),
            Err((404, e)) if !again => {
                unread.push(Unread { host: run.hosts[i].host.clone(), error: e });
                Ok(None)
            }
            Err(e) => Err(e),
        };
        make(run, &mut read, &check)
    })??;
    if unread.len() == run.hosts.len() {
        return Err((404, unread.first().map(|u| u.error.clone()).unwrap_or_default()));
    }
    Ok((sum, unread))
}

/// How [`whole_or_by_host`] reads a host, and checks it.
type Reader<'a> = stepscope_analysis::fold::Reader<'a, (u16, String)>;
type Check<'a> = stepscope_analysis::fold::Check<'a, (u16, String)>;

/// As `stepscope summary PATH --per-host --json`: each host read alone (through the
/// cache, as the host picker reads it: its last few hosts stay loaded), one at a time.
fn summary_hosts(app: &App, q: &Params) -> Reply {
    let top = q.top()?;
    let name = q.str("run").filter(|r| !r.is_empty());
    let run = app.root.run(name).map_err(ApiError::not_found)?;
    if run.hosts.len() > 1 && !stepscope_analysis::ahead::read_together() {
        // The pass that makes the overview's other answers makes this one.
        return view(app, q, top, View::Hosts);
    }
    // Made once per run as its files are now (a pod's hosts take a while), then kept.
    let made = app.cache.answer(&run, format!("summary/hosts?top={top}"), || {
        let (mut rows, mut unread) = (Vec::with_capacity(run.hosts.len()), Vec::new());
        for h in &run.hosts {
            // A host whose file cannot be read is listed as such, as the CLI lists it.
            let e = match app.cache.get(&app.root, Some(&run.rel), Some(&h.host)) {
                Ok(e) => e,
                Err(e) => {
                    unread.push(stepscope_xspace::discover::Unread { host: h.host.clone(), error: e.message });
                    continue;
                }
            };
            unchanged(&e)?;
            rows.push(stepscope_report::hosts::HostSummary {
                host: h.host.clone(),
                summary: summary::summary(&e.profile, top),
            });
        }
        // A host not read now (its file cut, or no room) may be read on the next request.
        let keep = unread.is_empty();
        Ok((json(&stepscope_report::hosts::hosts(&run.rel, rows, unread))?, keep))
    });
    Ok(made?.to_vec())
}

/// The roofline; of a run too large to read whole, read a host at a time. `peak_flops`
/// and `peak_bandwidth` (rates as `--peak-flops` takes them: `2T`, `100G`) give roofs
/// over the profile's and the data sheets' (`stepscope roofline --peak-flops …`).
fn roofline(app: &App, q: &Params) -> Reply {
    let top = q.top()?;
    let rate = |name: &str| -> Result<Option<f64>, ApiError> {
        match q.str(name).filter(|v| !v.is_empty()) {
            None => Ok(None),
            Some(v) => stepscope_analysis::peaks::parse_rate(v)
                .map(Some)
                .map_err(|why| ApiError::bad(format!("{name}: {why}"))),
        }
    };
    let user =
        stepscope_analysis::peaks::UserPeaks { flops_per_s: rate("peak_flops")?, bytes_per_s: rate("peak_bandwidth")? };
    let top_rows = move |result: stepscope_analysis::roofline::Roofline| {
        let mut result = result.with_user_peaks(user);
        result.ops.truncate(top);
        json(&result)
    };
    whole_or_by_host(
        app,
        q,
        format!("roofline/by-host?top={top}"),
        |e| Ok(stepscope_analysis::roofline::roofline(&e.profile)),
        |run, read, check| stepscope_analysis::fold::roofline_by_host(run.hosts.len(), read, check),
        top_rows,
    )
}

/// The host scopes; every row unless `top` asks for fewer (as `stepscope scopes`).
fn scopes(app: &App, q: &Params) -> Reply {
    let top = match q.str("top").is_some_and(|t| !t.is_empty()) {
        true => Some(q.top()?).filter(|&n| n > 0),
        false => None,
    };
    let top_rows = |mut result: stepscope_analysis::scopes::Scopes| {
        if let Some(n) = top {
            result.scopes.truncate(n);
        }
        json(&result)
    };
    whole_or_by_host(
        app,
        q,
        format!("scopes/by-host?top={top:?}"),
        |e| Ok(stepscope_analysis::scopes::scopes(&e.profile)),
        |run, read, check| stepscope_analysis::fold::scopes_by_host(&run.rel, run.hosts.len(), read, check),
        top_rows,
    )
}

/// The op profile; of a run too large to read whole, read a host at a time.
fn ops(app: &App, q: &Params) -> Reply {
    let (by, depth, top) = (q.group_by()?, q.opt("depth", 0)?, q.top()?);
    let top_rows = |mut result: ops::Ops| {
        result.ops.truncate(top);
        json(&result)
    };
    whole_or_by_host(
        app,
        q,
        format!("ops/by-host?by={by:?}&depth={depth}&top={top}"),
        |e| Ok(ops::ops(&e.profile, by, depth)),
        |run, read, check| stepscope_analysis::fold::ops_by_host(run.hosts.len(), by, depth, read, check),
        top_rows,
    )
}

/// The kernels; of a run too large to read whole, read a host at a time.
fn kernels(app: &App, q: &Params) -> Reply {
    let top = q.top()?;
    let top_rows = |mut result: kernels::Kernels| {
        result.kernels.truncate(top);
        json(&result)
    };
    whole_or_by_host(
        app,
        q,
        format!("kernels/by-host?top={top}"),
        |e| Ok(kernels::kernels(&e.profile)),
        |run, read, check| stepscope_analysis::fold::kernels_by_host(run.hosts.len(), read, check),
        top_rows,
    )
}

/// As `stepscope memory --json`: the device-memory pprof is the run's first, as the CLI's default.
/// The memory analysis, with the device-memory profile found beside the run; of a run
/// too large to read whole, read a host at a time.
fn memory(app: &App, q: &Params) -> Reply {
    let top = q.top()?;
    let pprof_of = |run: &Run| match run.pprof.first() {
        Some(p) => match pprof::read_pprof(p) {
            Ok(pp) => Ok(Some((p.display().to_string(), pp))),
            Err(err) => Err(ApiError { status: 500, message: err.to_string() }),
        },
        None => Ok(None),
    };
    whole_or_by_host(
        app,
        q,
        format!("memory/by-host?top={top}"),
        |e| {
            let pp = pprof_of(&e.run)?;
            Ok(memory::memory(&e.profile, pp.as_ref().map(|(shown, p)| (shown.as_str(), p)), top))
        },
        |run, read, check| {
            let mut m = stepscope_analysis::fold::memory_by_host(&run.rel, run.hosts.len(), top, read, check)?;
            if let Some((shown, p)) = pprof_of(run)? {
                m.device_memory_profile = memory::pprof_only(&shown, &p, top).device_memory_profile;
            }
            Ok(m)
        },
        |m| json(&m),
    )
}

/// The allocations live at `time_ps` in allocator `allocator` of host `allocator_host`
/// (default: the run's only host).
fn memory_live(app: &App, q: &Params) -> Reply {
    let (allocator, time_ps): (&str, i64) = (q.text("allocator")?, q.req("time_ps")?);
    let top = q.top()?;
    let allocator_host = q.str("allocator_host").filter(|h| !h.is_empty());
    // Of a run too large to read whole, the allocator's host alone (on the run's clock).
    let e = match (whole(app, q)?, allocator_host) {
        (Some(e), _) => e,
        (None, Some(h)) => {
            let run = q.str("run").filter(|r| !r.is_empty());
            app.cache.get(&app.root, run, Some(h)).map_err(ApiError::unloaded)?
        }
        (None, None) => return Err(ApiError::bad("this run has several hosts — pass allocator_host")),
    };
    let host = match allocator_host {
        Some(h) => h.to_string(),
        None => match e.profile.hosts.as_slice() {
            [only] => only.host.clone(),
            _ => return Err(ApiError::bad("this run has several hosts — pass allocator_host")),
        },
    };
    let live = memory::live_at(&e.profile, &host, allocator, time_ps, top).ok_or_else(|| {
        ApiError::not_found(format!("no allocator {allocator:?} on host {host:?} — api/memory lists them"))
    })?;
    unchanged(&e)?;
    json(&live)
}

/// As `stepscope buffers PATH [--program P] [--memory-space N] --json`.
fn memory_buffers(app: &App, q: &Params) -> Reply {
    let top = q.top()?;
    let memory_space: i64 = q.opt("memory_space", 0)?;
    let program = q.str("program").filter(|p| !p.is_empty());
    whole_or_by_host(
        app,
        q,
        format!("buffers/by-host?program={program:?}&memory_space={memory_space}&top={top}"),
        |e| Ok(buffers::buffers(&e.profile, program, memory_space, top)),
        |run, read, check| {
            stepscope_analysis::fold::buffers_by_host(
                &run.rel,
                run.hosts.len(),
                (program, memory_space, top),
                read,
                check,
            )
        },
        |plan| match plan {
            Ok(b) => json(&b),
            Err(missing) => Err(ApiError::not_found(missing.message(program.unwrap_or("")))),
        },
    )
}

/// The collectives; of a run too large to read whole, read a host at a time.
fn collectives(app: &App, q: &Params) -> Reply {
    let top = q.top()?;
    let top_rows = |mut c: collectives::Collectives| {
        c.ops.truncate(top);
        json(&c)
    };
    whole_or_by_host(
        app,
        q,
        format!("collectives/by-host?top={top}"),
        |e| Ok(collectives::collectives(&e.profile)),
        |run, read, check| stepscope_analysis::fold::collectives_by_host(&run.rel, run.hosts.len(), read, check),
        top_rows,
    )
}

/// The compiles; of a run too large to read whole, read a host at a time.
fn compile(app: &App, q: &Params) -> Reply {
    whole_or_by_host(
        app,
        q,
        "compile/by-host".into(),
        |e| Ok(compile::compile(&e.profile)),
        |run, read, check| stepscope_analysis::fold::compile_by_host(&run.rel, run.hosts.len(), read, check),
        |c| json(&c),
    )
}

/// The device and host rows; of a run too large to read whole, read a host at a time.
fn devices(app: &App, q: &Params) -> Reply {
    whole_or_by_host(
        app,
        q,
        "devices/by-host".into(),
        |e| Ok(devices::devices(&e.profile)),
        |run, read, check| stepscope_analysis::fold::devices_by_host(&run.rel, run.hosts.len(), read, check),
        |d| json(&d),
    )
}

/// As `stepscope hlo PATH OP --graph [--module M] [--depth N] --json`.
fn hlo_graph(app: &App, q: &Params) -> Reply {
    let op = q.text("op")?;
    let module = q.str("module").filter(|m| !m.is_empty());
    let depth: u32 = q.opt("depth", 2)?;
    let show = |p: &Profile, rows: Vec<OpRow>| hlo_graph::graph_with(p, (op, module, depth), || rows);
    let finish = |graph: Option<hlo_graph::HloGraph>, _: bool| match graph {
        Some(g) => json(&g),
        None => Err(ApiError::not_found(format!(
            "no HLO instruction named {op:?}{} in this run's modules — api/hlo says why",
            module.map(|m| format!(" in module {m:?}")).unwrap_or_default()
        ))),
    };
    of_op(app, q, format!("hlo/graph?op={op}&module={module:?}&depth={depth}"), (op, module), show, finish)
}

/// As `stepscope hlo PATH OP [--module M] --json`.
fn hlo(app: &App, q: &Params) -> Reply {
    let op = q.text("op")?;
    let module = q.str("module").filter(|m| !m.is_empty());
    let show = |p: &Profile, rows: Vec<OpRow>| hlo_context::hlo_context_with(p, op, module, || rows);
    let finish = |ctx: Option<hlo_context::HloContext>, has_modules: bool| match ctx {
        Some(ctx) => json(&ctx),
        None if !has_modules => Err(ApiError::not_found(
            "this profile holds no HLO modules (no `/host:metadata` plane) — capture an .xplane.pb with \
             jax.profiler.trace; trace JSON files do not carry HLO",
        )),
        None => Err(ApiError::not_found(format!(
            "no HLO instruction named {op:?}{} in this run's modules — api/ops lists op names",
            module.map(|m| format!(" in module {m:?}")).unwrap_or_default()
        ))),
    };
    of_op(app, q, format!("hlo?op={op}&module={module:?}"), (op, module), show, finish)
}

/// `finish` of what `show` makes of the host that holds `op` (in `module` where given)
/// beside the run's op profile by op, and of whether any host holds HLO modules: of the
/// run `q` names read whole, or where it is too large, read a host at a time (made once
/// and kept under `question`).
fn of_op<T>(
    app: &App,
    q: &Params,
    question: String,
    (op, module): (&str, Option<&str>),
    show: impl Fn(&Profile, Vec<OpRow>) -> Option<T>,
    finish: impl Fn(Option<T>, bool) -> Reply,
) -> Reply {
    whole_or_by_host(
        app,
        q,
        question,
        |e| {
            let run = RunHlo::of(&e.profile);
            Ok((show(&e.profile, run.ops), run.has_modules))
        },
        |run, read, check| {
            let (made, hlo) = stepscope_analysis::fold::hlo_by_host(run.hosts.len(), (op, module), read, check, &show)?;
            Ok((made, hlo.has_modules))
        },
        |(made, has_modules)| finish(made, has_modules),
    )
}

/// As `stepscope diff A B --json`: runs `a` and `b` by their names in `api/runs`.
/// `stepscope history --json` over the served runs whose names start with `under`
/// (default: every run), in capture order. Runs are read one at a time through the
/// cache (a run too large to read whole, a host at a time), each checked for a file
/// copied over it once used and reduced to what the history compares of it: one run
/// is held at a time. Made once for the runs as their files are now, and kept (with
/// the first run's answers): a pod's history reads every host of every run.
fn history(app: &App, q: &Params) -> Reply {
    let under = q.str("under").unwrap_or("");
    let host = q.str("host").filter(|h| !h.is_empty());
    let mut runs = app.root.runs().map_err(|e| ApiError::not_found(e.to_string()))?;
    runs.retain(|r| r.rel.starts_with(under));
    if runs.is_empty() {
        return Err(ApiError::not_found(format!(
            "no run's name starts with {under:?} — pass under= a prefix of names api/runs lists, or leave it out"
        )));
    }
    runs.sort_by_cached_key(discover::capture_key);
    let files: Vec<String> = runs.iter().map(|r| format!("{}@{:?}", r.rel, r.modified)).collect();
    let question = format!("history?host={host:?}&runs={files:?}");
    kept(app, &runs[0], question, || history_of(app, &runs, host))
}

/// [`history`] of `runs`, in their order.
fn history_of(app: &App, runs: &[Run], host: Option<&str>) -> Reply {
    let mut h = History::default();
    let mut previous: Option<Side> = None;
    let mut first_error = None;
    for r in runs {
        // A run that cannot be read is listed as such; the others are compared.
        let side = match side(app, &r.rel, host, (GroupBy::Op, HISTORY_TOP, false)) {
            Ok(side) => side,
            Err(e) if e.status == 409 => return Err(e),
            Err(e) => {
                h.unread(r.rel.clone(), discover::captured(&r.rel), e.message.clone());
                first_error.get_or_insert(e);
                continue;
            }
        };
        h.add(r.rel.clone(), discover::captured(&r.rel), &side, previous.as_ref());
        previous = Some(side);
    }
    match first_error {
        Some(error) if h.runs.is_empty() => Err(error),
        _ => json(&h),
    }
}

/// What `diff` and `history` read of run `rel` (only `host` when given), `want` as
/// [`Side::by_host`] takes it: of the run read whole through the cache, checked for a
/// file copied over it once used and not kept past it; or, where it is too large to
/// read whole, of it read a host at a time (the same numbers).
fn side(app: &App, rel: &str, host: Option<&str>, want: (GroupBy, usize, bool)) -> Result<Side, ApiError> {
    let (by, top, with_kernels) = want;
    match app.cache.get(&app.root, Some(rel), host) {
        Ok(e) => {
            let side = Side::of(&e.profile, by, top, with_kernels);
            unchanged(&e)?;
            Ok(side)
        }
        Err(e) if e.too_large && host.is_none() => {
            let run = app.root.run(Some(rel)).map_err(ApiError::not_found)?;
            let made =
                read_hosts(app, &run, |run, read, check| Side::by_host(&run.rel, run.hosts.len(), want, read, check));
            Ok(made?.0)
        }
        Err(e) => Err(ApiError::unloaded(e)),
    }
}

/// The longest an `api/sql` query runs.
pub const SQL_TIMEOUT: Duration = Duration::from_secs(30);

/// The most rows `api/sql` answers with (`rows` asks for fewer).
pub const SQL_MAX_ROWS: usize = 10_000;

/// The most JSON `api/sql` answers with: rows past it are cut (`rows_cut`).
pub const SQL_MAX_BYTES: u64 = 32 << 20;

/// `api/sql` queries run at once; more wait [`SQL_QUEUE_WAIT`] for a turn, then are
/// refused (503).
pub const MAX_QUERIES: usize = 2;

/// How long an `api/sql` query waits for a turn.
pub const SQL_QUEUE_WAIT: Duration = Duration::from_secs(10);

/// `stepscope sql Q --json` over the served runs: `q` the query; `run` only that run
/// (default: every run); at most `rows` rows (default and most [`SQL_MAX_ROWS`]) and
/// [`SQL_MAX_BYTES`] of JSON (more are cut, `rows_cut` says so). Each host is read
/// through the cache, alone, for the tables the query names; a query stops after
/// [`SQL_TIMEOUT`]. (The HTTP layer runs it on a thread of its own, [`MAX_QUERIES`] at
/// once.)
fn sql(app: &App, q: &Params) -> Reply {
    let mut body = Vec::new();
    sql_to(app, q, &mut body)?;
    Ok(body)
}

/// [`sql`]'s answer written into `out` as it comes (the HTTP layer streams it). Where
/// the query fails once it has begun writing, the JSON is closed with `error` (and
/// `rows_cut`) and the error returned: a caller that has sent nothing yet answers with
/// the error instead.
pub(crate) fn sql_to(app: &App, q: &Params, out: &mut dyn std::io::Write) -> Result<(), ApiError> {
    let query = q.text("q")?;
    let max_rows = q.opt("rows", SQL_MAX_ROWS)?.clamp(1, SQL_MAX_ROWS);
    let wanted = stepscope_sql::referenced(query);
    let mut runs = app.root.runs().map_err(|e| ApiError::not_found(e.to_string()))?;
    if let Some(run) = q.str("run").filter(|r| !r.is_empty()) {
        runs.retain(|r| r.rel == run);
        if runs.is_empty() {
            return Err(ApiError::not_found(format!(
                "no run named {run:?} — pass run= a name api/runs lists, or leave it out for every run"
            )));
        }
    }
    runs.sort_by_cached_key(discover::capture_key);
    let failed = |e: String| ApiError { status: 500, message: e };
    let mut db = stepscope_sql::Db::for_query(query).map_err(failed)?;
    for r in &runs {
        db.add_run::<ApiError>(&r.rel, r, &wanted, &mut |put| {
            for h in &r.hosts {
                let e = app.cache.get(&app.root, Some(&r.rel), Some(&h.host)).map_err(ApiError::unloaded)?;
                put(&h.host, &e.profile)?;
                unchanged(&e)?;
            }
            Ok(())
        })?;
    }
    let mut results = stepscope_sql::JsonResults::bounded(out, max_rows, SQL_MAX_BYTES);
    let limits = stepscope_sql::Limits { timeout: Some(SQL_TIMEOUT) };
    let ran = db.query(query, &limits, &mut results).map_err(ApiError::bad).and_then(|()| q.changed_files());
    match ran {
        Ok(()) => results.finish().map(drop).map_err(|e| failed(e.to_string())),
        Err(e) => {
            results.finish_failed(&e.message).map_err(|e| failed(e.to_string()))?;
            Err(e)
        }
    }
}

/// Made once per pair of runs as their files are now, and kept: a pod's side is read a
/// host at a time, twice over.
fn diff(app: &App, q: &Params) -> Reply {
    let (a, b) = (q.text("a")?, q.text("b")?);
    let top = q.top()?;
    let by = q.group_by()?;
    let host = q.str("host").filter(|h| !h.is_empty());
    let (run_a, run_b) = (app.root.run(Some(a)), app.root.run(Some(b)));
    let (run_a, run_b) = (run_a.map_err(ApiError::not_found)?, run_b.map_err(ApiError::not_found)?);
    // `whatif=EDIT`: A's steps replayed with it, beside B as measured (`diff --whatif`).
    let words = q.str("whatif").filter(|w| !w.is_empty());
    let edit = match words {
        Some(w) => Some(whatif::Edit::parse(w).map_err(|e| ApiError::bad(format!("whatif={w:?}: {e}")))?),
        None => None,
    };
    let question =
        format!("diff?b={}@{:?}&by={by:?}&top={top}&host={host:?}&whatif={words:?}", run_b.rel, run_b.modified);
    kept(app, &run_a, question, || {
        let (sa, sb) = (side(app, a, host, (by, 0, true))?, side(app, b, host, (by, 0, true))?);
        let mut d = diff::diff_sides(&sa, &sb);
        d.truncate(top);
        if let Some(edit) = edit.filter(|e| !e.is_empty()) {
            d.whatif = Some(whatif_beside(app, q, &edit, &d)?);
        }
        json(&d)
    })
}

/// `diff?whatif=EDIT`: run `a`'s steps replayed with `edit` (held whole, as
/// `api/whatif` holds a run), beside `d`'s B.
fn whatif_beside(app: &App, q: &Params, edit: &whatif::Edit, d: &diff::Diff) -> Result<diff::WhatifBeside, ApiError> {
    let e = match q.run_named(app, "a") {
        Ok(e) => e,
        Err(e) if e.status == 507 => {
            return Err(ApiError {
                status: 507,
                message: "run a is too large to read whole, and the what-if model replays a run held whole — \
                          ask for one host (host=NAME)"
                    .into(),
            })
        }
        Err(e) => return Err(e),
    };
    diff::WhatifBeside::project(&e.profile, edit, d).map_err(|r| match r {
        diff::WhatifRefused::Unknown(t) => {
            ApiError::not_found(format!("whatif: no {} ran in run a — api/ops lists the names", t.what()))
        }
        diff::WhatifRefused::NoSteps { a } => ApiError::bad(format!(
            "whatif compares a's replayed steps with b's: {} has no timed steps",
            if a { "a" } else { "b" }
        )),
    })
}

/// The answer `make` gives to `question` about `run`, made once for the run as its
/// files are now and kept (a failure is not).
fn kept(app: &App, run: &Run, question: String, make: impl FnOnce() -> Reply) -> Reply {
    Ok(app.cache.answer(run, question, || Ok((make()?, true)))?.to_vec())
}
