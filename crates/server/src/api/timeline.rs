//! The timeline's routes: a run's tracks, a track's tiles, a device's busy share, an
//! event, a search and an area selection.
//!
//! A run too large to hold whole is read a host at a time: its tracks are listed once
//! from every host, each read alone and dropped ([`RunTracks`], kept), with the ids the
//! run read whole gives them; a request then reads only the hosts of the tracks it
//! names, through the cache, so the hosts on screen stay loaded and the others are not
//! held. A search, and an area over every track, read every host in turn; their
//! answers are kept.

use std::sync::Arc;

use stepscope_analysis::fold::tracks_by_host;
use stepscope_analysis::timeline::{self, HostSearch, RunTracks, SelectionPart, Tile, Tiles, Timeline};
use stepscope_xspace::discover::Run;

use super::{json, read_hosts, whole, ApiError, Params, Reply};
use crate::cache::Entry;
use crate::App;

/// A run's timeline: read whole, or a host at a time.
enum Of<'a> {
    Whole(Arc<Entry>),
    ByHost(Pod<'a>),
}

/// A run read a host at a time, for one request: its tracks, and where to read its
/// hosts.
struct Pod<'a> {
    app: &'a App,
    run: Run,
    tracks: Arc<RunTracks>,
}

/// The timeline of the run `q` names: whole, or where it is too large to read whole
/// (and `q` names no host), its tracks listed a host at a time (made once and kept).
fn of<'a>(app: &'a App, q: &Params) -> Result<Of<'a>, ApiError> {
    if let Some(e) = whole(app, q)? {
        return Ok(Of::Whole(e));
    }
    let run = app.root.run(q.str("run").filter(|r| !r.is_empty())).map_err(ApiError::not_found)?;
    let tracks = (app.cache.run_tracks(&run, || {
        // Kept even where a host could not be read (its file cut short), as every
        // request of the page asks for the tracks: the run is read again once its
        // files change.
        let (tracks, _) =
            read_hosts(app, &run, |run, read, check| tracks_by_host(&run.rel, run.hosts.len(), read, check))?;
        Ok((tracks, true))
    }))?;
    Ok(Of::ByHost(Pod { app, run, tracks }))
}

impl Pod<'_> {
    /// What `f` makes of host `host`, read alone under the run's decisions (through
    /// the cache, which keeps the last few: the hosts on screen are asked for again and
    /// again), once `f` is done with it checked as [`super::answer`] checks a run: an
    /// answer holds no host, so that one that reads every host holds one at a time.
    fn with_host<T>(&self, host: &str, f: impl FnOnce(&Entry) -> Result<T, ApiError>) -> Result<T, ApiError> {
        let e = self.app.cache.host_in_run(self.run.clone(), host, self.tracks.decisions);
        let e = e.map_err(ApiError::unloaded)?;
        let made = f(&e)?;
        super::unchanged(&e)?;
        Ok(made)
    }

    /// Track `track`'s tile, read from its host.
    fn tile(&self, track: u32, window: (i64, i64, u32), rows: usize) -> Result<Tile, ApiError> {
        let (host, local) = self.tracks.host_of(track).map_err(ApiError::bad)?;
        let tile =
            self.with_host(host, |e| e.timeline().tile(&e.profile, local, window, rows).map_err(ApiError::bad))?;
        Ok(Tile { track, ..tile })
    }

    /// The answer `make` gives to `question` (one that reads every host), made once for
    /// the run as its files are now and kept.
    fn kept(&self, question: String, make: impl FnOnce() -> Reply) -> Reply {
        super::kept(self.app, &self.run, question, make)
    }
}

/// Every track of the run, and the tracks derived from other analyses.
pub(super) fn tracks(app: &App, q: &Params) -> Reply {
    match of(app, q)? {
        Of::Whole(e) => {
            let mut tracks = e.timeline().tracks(&e.profile);
            tracks.derived = Timeline::derived_tracks(&e.profile, &e.steps().steps);
            json(&tracks)
        }
        Of::ByHost(pod) => json(&pod.tracks.tracks),
    }
}

/// One track's boxes: `track`, the window (`start_ps`, `end_ps`, `px`) and, optionally,
/// `rows` (the depth rows drawn; all when absent).
pub(super) fn tile(app: &App, q: &Params) -> Reply {
    let track = q.req("track")?;
    let (window, rows) = (q.window()?, q.rows()?);
    match of(app, q)? {
        Of::Whole(e) => json(&e.timeline().tile(&e.profile, track, window, rows).map_err(ApiError::bad)?),
        Of::ByHost(pod) => json(&pod.tile(track, window, rows)?),
    }
}

/// Several tracks' tiles over one window: `tracks` (comma-separated ids), `start_ps`,
/// `end_ps`, `px`, and optionally `rows`.
pub(super) fn tiles(app: &App, q: &Params) -> Reply {
    let tracks = q.ids("tracks")?;
    let (window, rows) = (q.window()?, q.rows()?);
    match of(app, q)? {
        Of::Whole(e) => json(&e.timeline().tiles(&e.profile, &tracks, window, rows).map_err(ApiError::bad)?),
        Of::ByHost(pod) => {
            pod.tracks.check_tiles(&tracks, window.2, rows).map_err(ApiError::bad)?;
            let tiles = tracks.iter().map(|&t| pod.tile(t, window, rows)).collect::<Result<_, _>>()?;
            json(&Tiles::of(tiles))
        }
    }
}

/// A device's busy share per pixel column: `device` (`host/plane`, as the busy
/// counters of `timeline/tracks` name it), `start_ps`, `end_ps`, `px`.
pub(super) fn busy(app: &App, q: &Params) -> Reply {
    let (start, end, px) = q.window()?;
    let device = q.str("device").ok_or_else(|| {
        ApiError::bad("device is missing: pass device=HOST/PLANE, the device of a busy counter in api/timeline/tracks")
    })?;
    let busy = |e: &Entry| Timeline::busy(&e.profile, device, start, end, px).map_err(ApiError::bad);
    match of(app, q)? {
        Of::Whole(e) => json(&busy(&e)?),
        Of::ByHost(pod) => {
            timeline::check_window(start, end, px).map_err(ApiError::bad)?;
            json(&pod.with_host(pod.tracks.host_of_device(device).map_err(ApiError::bad)?, busy)?)
        }
    }
}

/// Event `index` of track `track`: its stats, step, flows and occurrences (of a run
/// read a host at a time, its host's).
pub(super) fn event(app: &App, q: &Params) -> Reply {
    let (track, index) = (q.req("track")?, q.req("index")?);
    match of(app, q)? {
        Of::Whole(e) => {
            let detail = e.timeline().event(&e.profile, &e.steps().steps, track, index);
            json(&detail.map_err(ApiError::not_found)?)
        }
        Of::ByHost(pod) => {
            let (host, local) = pod.tracks.host_of(track).map_err(ApiError::not_found)?;
            let events = pod.tracks.tracks.tracks[track as usize].events;
            if u64::from(index) >= events {
                return Err(ApiError::not_found(timeline::no_event(track, events, index)));
            }
            let detail = pod.with_host(host, |e| {
                e.timeline().event(&e.profile, &e.steps().steps, local, index).map_err(ApiError::not_found)
            })?;
            json(&detail.in_run(track - local))
        }
    }
}

/// The events of an area: `start_ps`, `end_ps`, and `tracks` (comma-separated ids;
/// every track when absent).
pub(super) fn select(app: &App, q: &Params) -> Reply {
    let (start, end) = (q.req("start_ps")?, q.req("end_ps")?);
    let tracks = q.ids("tracks")?;
    let pod = match of(app, q)? {
        Of::Whole(e) => return json(&e.timeline().select(&e.profile, start, end, &tracks).map_err(ApiError::bad)?),
        Of::ByHost(pod) => pod,
    };
    let (ids, by_host) = pod.tracks.selected(start, end, &tracks).map_err(ApiError::bad)?;
    let make = || {
        let mut part = SelectionPart::default();
        for (host, locals) in by_host {
            part.add(pod.with_host(host, |e| Ok(e.timeline().selection_part(&e.profile, start, end, &locals)))?);
        }
        json(&part.finish(start, end, ids))
    };
    match tracks.is_empty() {
        true => pod.kept(format!("timeline/select?start_ps={start}&end_ps={end}"), make),
        false => make(),
    }
}

/// Events whose name holds `q`: the first `limit` in track order, or, with `offset`,
/// a page of every match in time order.
pub(super) fn search(app: &App, q: &Params) -> Reply {
    let query = q.str("q").unwrap_or("");
    let limit = q.opt("limit", 100)?;
    let offset: Option<usize> = match q.str("offset") {
        None | Some("") => None,
        Some(_) => Some(q.req("offset")?),
    };
    let pod = match of(app, q)? {
        Of::Whole(e) => {
            return match offset {
                Some(offset) => json(&e.timeline().search_in_time(&e.profile, query, offset, limit)),
                None => json(&e.timeline().search(&e.profile, query, limit)),
            }
        }
        Of::ByHost(pod) => pod,
    };
    let question = format!("timeline/search?q={query}&offset={offset:?}&limit={limit}");
    pod.kept(question, || {
        let mut found = HostSearch::new(query, offset, limit);
        for (host, first) in pod.tracks.hosts() {
            pod.with_host(host, |e| {
                found.add(e.timeline(), &e.profile, first);
                Ok(())
            })?;
        }
        json(&found.finish())
    })
}
