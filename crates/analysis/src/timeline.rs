//! The timeline: every line of every plane as a track, and per-window tiles with
//! sub-pixel events merged per pixel, so a viewer can draw any window of any size of
//! profile without dropping or capping events.
//!
//! [`Timeline::build`] indexes a profile once: per line, events are sorted by start
//! (longest first on ties) and spread over depth rows so that events on one row never
//! overlap (nested XLA ops and Python frames land one row below their parent). Within a
//! row both starts and ends are then sorted, so a window is two binary searches away.
//!
//! [`Timeline::tile`] answers a window `[start_ps, end_ps)` drawn `px` pixels wide:
//! an event at least one pixel long comes back as itself; consecutive shorter events
//! starting in the same pixel come back as one merged box with their count. Each row
//! yields at most about `2 * px + 2` boxes, however many events the window holds, and
//! the counts of a tile's boxes add up to the events it covers.

use std::cmp::Reverse;
use std::collections::BTreeMap;

use rayon::prelude::*;
use serde::Serialize;
use stepscope_xspace::{Column, Line, Plane, Space, Stat, StatValue};

use crate::steps::Step;
use stepscope_model::Profile;

mod derived;
mod run;
mod window;
use derived::DerivedPlane;
pub use derived::{MODULES_LINE, OPS_LINE};
pub use run::{HostSearch, RunTracks, TracksPart};
pub use window::{Window, WindowTrack, MAX_WINDOW_TRACKS};

/// Most pixels a tile may be asked for.
pub const MAX_TILE_PX: u32 = 16_384;
/// The most tracks one [`Timeline::tiles`] answer holds.
pub const MAX_TILES: usize = 64;
/// The most rows times pixels one [`Timeline::tiles`] answer draws (a row yields at
/// most about 2 boxes a pixel): 64 rows at the widest tile.
pub const MAX_TILES_ROW_PX: u64 = 64 * MAX_TILE_PX as u64;
/// Most search matches one answer lists.
pub const MAX_SEARCH_MATCHES: usize = 10_000;
/// Events a merged box's name is sampled from (its dominant name).
const NAME_SAMPLES: usize = 16;

/// Where a track's events live in the profile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TrackRef {
    pub host: usize,
    pub plane: usize,
    pub line: usize,
}

/// The index of a profile's timeline: its tracks and their depth rows.
pub struct Timeline {
    tracks: Vec<TrackIndex>,
    /// Lines made from the profile's op records (a GPU's `XLA Modules` and `XLA Ops`).
    derived: Vec<DerivedPlane>,
}

struct TrackIndex {
    /// For a derived line: `plane` and `line` index [`Timeline::derived`] and its lines.
    at: TrackRef,
    derived: bool,
    rows: Vec<Row>,
    start_ps: i64,
    end_ps: i64,
}

/// One depth row of a track, with what a tile reads of its events kept beside their
/// indexes in row order, so that drawing a long track walks forward through a few
/// arrays of its own instead of wandering over the line's columns.
struct Row {
    /// Event indexes in the line, by start; events on a row do not overlap.
    events: Column,
    /// Their starts: ascending, and so are their ends.
    starts: Column,
    /// Their lengths, negative ones as 0.
    durations: Column,
    /// Each event's metadata index, where all of the plane's fit 16 bits (else empty).
    metas: Vec<u16>,
}

impl Row {
    fn new(line: &Line, events: &[u32], metas_fit: bool) -> Row {
        let n = events.len();
        let mut row = Row {
            events: Column::with_capacity(n),
            starts: Column::with_capacity(n),
            durations: Column::with_capacity(n),
            metas: Vec::with_capacity(if metas_fit { n } else { 0 }),
        };
        for &i in events {
            let i = i as usize;
            row.events.push(i as i64);
            row.starts.push(line.start_ps(i));
            row.durations.push(dur(line, i));
            if metas_fit {
                row.metas.push(line.meta(i) as u16);
            }
        }
        for c in [&mut row.events, &mut row.starts, &mut row.durations] {
            c.shrink_to_fit();
        }
        row
    }

    /// Line index of the row's event `k`.
    fn event(&self, k: usize) -> u32 {
        self.events.get(k) as u32
    }

    /// Start of the row's event `k`.
    fn start(&self, k: usize) -> i64 {
        self.starts.get(k)
    }

    /// Length of the row's event `k`.
    fn dur(&self, k: usize) -> i64 {
        self.durations.get(k)
    }

    /// End of the row's event `k`.
    fn end(&self, k: usize) -> i64 {
        self.start(k).saturating_add(self.dur(k))
    }
}

/// One track of the timeline (one line of one plane).
#[derive(Clone, Debug, Serialize)]
pub struct Track {
    /// Id used by tile, event and search requests.
    pub id: u32,
    /// `slices`: a line's events (tiles, events, search, selection answer for it).
    pub kind: &'static str,
    pub host: String,
    pub plane: String,
    /// The line's display name when it has one, else its name.
    pub line: String,
    pub line_id: i64,
    pub events: u64,
    /// True for a line the timeline derives rather than reads: a GPU's `XLA Modules`
    /// and `XLA Ops`, made from its kernels as the op profile credits them. Their
    /// events are not counted in [`Tracks::events`], nor in a selection of all tracks.
    pub derived: bool,
    /// Number of depth rows (nesting levels) the track needs.
    pub depth: u32,
    pub start_ps: i64,
    pub end_ps: i64,
}

/// A track the viewer derives from another analysis rather than from a line.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct DerivedTrack {
    /// `steps` (a box a step) or `counter` (a value over time).
    pub kind: &'static str,
    pub name: String,
    pub host: String,
    /// The API that holds its data: `api/steps`, `api/memory` (an allocator's
    /// `timeline`), `api/timeline/busy` (a device's busy share per pixel).
    pub source: &'static str,
    /// For a device's busy share: the device's id (`host/plane`), the `device` of
    /// `api/timeline/busy`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
}

/// The share of each pixel column of a window during which a device ran an op.
#[derive(Clone, Debug, Serialize)]
pub struct Busy {
    pub schema: &'static str,
    pub device: String,
    pub start_ps: i64,
    pub end_ps: i64,
    pub px: u32,
    /// Width of one pixel, ps.
    pub ps_per_px: f64,
    /// Per pixel column: percent of its time some op ran on the device (the union of
    /// its ops, as `device busy` everywhere else).
    pub busy_pct: Vec<f64>,
}

/// Every track of a run.
#[derive(Clone, Debug, Serialize)]
pub struct Tracks {
    pub schema: &'static str,
    pub run: String,
    /// The Steps track and the allocators' bytes-in-use counters, where the run has
    /// steps and allocator events ([`Timeline::derived_tracks`]).
    pub derived: Vec<DerivedTrack>,
    /// Earliest start and latest end over all tracks (0 when there are none).
    pub start_ps: i64,
    pub end_ps: i64,
    /// Events of the profile's own lines (derived tracks' are not counted).
    pub events: u64,
    /// True for a run too large to hold whole, read a host at a time: a track's tiles
    /// and events are read from its host alone, and an event's `occurrences` are its
    /// host's.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub read_a_host_at_a_time: bool,
    pub tracks: Vec<Track>,
}

/// The boxes to draw for one track over one window, as columns.
#[derive(Clone, Debug, Serialize)]
pub struct Tile {
    pub schema: &'static str,
    pub track: u32,
    pub start_ps: i64,
    pub end_ps: i64,
    pub px: u32,
    /// Width of one pixel, ps.
    pub ps_per_px: f64,
    /// Events overlapping the window (the sum of `box_count`).
    pub events: u64,
    /// Boxes, one entry per box in each column: depth row, start, duration,
    /// name id (a key of `names`), number of events merged (1 for an event shown
    /// as itself), and the index of its first event in the line.
    pub box_depth: Vec<u32>,
    pub box_start_ps: Vec<i64>,
    pub box_duration_ps: Vec<i64>,
    pub box_name: Vec<u32>,
    pub box_count: Vec<u64>,
    pub box_index: Vec<u32>,
    /// Names of the boxes by name id.
    pub names: BTreeMap<u32, String>,
}

/// The tiles of several tracks over one window, in the order asked.
#[derive(Clone, Debug, Serialize)]
pub struct Tiles {
    pub schema: &'static str,
    pub tiles: Vec<Tile>,
}

/// One stat of an event, rendered.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct StatEntry {
    pub name: String,
    pub value: String,
}

/// Everything known about one event.
#[derive(Clone, Debug, Serialize)]
pub struct EventDetail {
    pub schema: &'static str,
    pub track: u32,
    pub index: u32,
    pub host: String,
    pub plane: String,
    pub line: String,
    pub name: String,
    pub display_name: String,
    pub start_ps: i64,
    pub duration_ps: i64,
    /// The step the event starts in, when steps were found.
    pub step_num: Option<i64>,
    /// Stats on the event itself.
    pub stats: Vec<StatEntry>,
    /// Stats on the event's metadata (shared by all events of that name).
    pub metadata_stats: Vec<StatEntry>,
    /// Events linked to this one on the same host: by flow stats (`_p`/`_c`), and a
    /// GPU kernel or copy with its host launch by `correlation_id` (at most 64).
    pub flows: Vec<FlowLink>,
    /// Every event of the run with this event's shown name, on any track.
    pub occurrences: Occurrences,
    /// Of an XLA:CPU op's event: the op's run until its intra-op pool work completed,
    /// as the op profile credits it, and the op's runs so counted (the box drawn is its
    /// dispatch on the thread, often much shorter).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub until_done: Option<UntilDone>,
}

/// An XLA:CPU op's run until it was done ([`EventDetail::until_done`]).
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct UntilDone {
    /// When its work completed, and how long it ran until then.
    pub end_ps: i64,
    pub duration_ps: i64,
    /// Every run of the op, until done, as the op profile counts and sums them.
    pub op_count: u64,
    pub op_total_ps: i64,
    pub op_avg_ps: i64,
}

/// The events of one name across a run's tracks.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Occurrences {
    pub count: u64,
    pub total_ps: i64,
    pub min_ps: i64,
    pub avg_ps: i64,
    pub max_ps: i64,
    /// How many tracks they are on.
    pub tracks: u64,
    /// Where set, they were counted on this host alone: the run is too large to hold
    /// whole and is read a host at a time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
}

/// An event at the other end of a flow.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct FlowLink {
    /// `out` when this event produces the flow, `in` when it consumes it.
    pub direction: &'static str,
    pub flow_id: u64,
    pub track: u32,
    pub index: u32,
    pub name: String,
    pub start_ps: i64,
    pub duration_ps: i64,
}

/// The events of an area of the timeline: a span on some tracks, grouped by name.
#[derive(Clone, Debug, Serialize)]
pub struct Selection {
    pub schema: &'static str,
    pub start_ps: i64,
    pub end_ps: i64,
    /// `end_ps - start_ps`.
    pub span_ps: i64,
    /// The tracks searched (every track when none were named).
    pub tracks: Vec<u32>,
    /// Events that overlap the span (an instant one: that lies in it), each once.
    pub events: u64,
    /// By name, the most time within the span first.
    pub rows: Vec<SelectionRow>,
}

/// The events of one name in a [`Selection`].
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct SelectionRow {
    pub name: String,
    pub count: u64,
    /// Their whole lengths.
    pub total_ps: i64,
    /// Their lengths cut to the span.
    pub in_span_ps: i64,
    pub avg_ps: i64,
    pub min_ps: i64,
    pub max_ps: i64,
    /// How many tracks they are on.
    pub tracks: u64,
}

/// The events of an area on some tracks, by shown name, as [`Timeline::select`]
/// counts them: a host's, to be added to the other hosts' of a run read a host at a
/// time.
#[derive(Default)]
pub struct SelectionPart {
    by_name: BTreeMap<String, Tally>,
    events: u64,
}

/// Events of one name: how many, their whole and in-span lengths, the shortest and
/// longest, and the tracks they are on.
#[derive(Clone, Copy)]
struct Tally {
    count: u64,
    total: i64,
    in_span: i64,
    min: i64,
    max: i64,
    tracks: u64,
}

impl Default for Tally {
    fn default() -> Tally {
        Tally { count: 0, total: 0, in_span: 0, min: i64::MAX, max: i64::MIN, tracks: 0 }
    }
}

impl Tally {
    fn add(&mut self, o: &Tally) {
        self.count += o.count;
        self.total = self.total.saturating_add(o.total);
        self.in_span = self.in_span.saturating_add(o.in_span);
        self.min = self.min.min(o.min);
        self.max = self.max.max(o.max);
        self.tracks += o.tracks;
    }
}

impl SelectionPart {
    /// Adds another host's (whose tracks are not this one's).
    pub fn add(&mut self, other: SelectionPart) {
        self.events += other.events;
        for (name, tally) in other.by_name {
            self.by_name.entry(name).or_default().add(&tally);
        }
    }

    /// The selection of `[start_ps, end_ps)` on `tracks` (the ids read), its rows the
    /// most time within the span first.
    pub fn finish(self, start_ps: i64, end_ps: i64, tracks: Vec<u32>) -> Selection {
        let mut rows: Vec<SelectionRow> = (self.by_name.into_iter())
            .map(|(name, a)| SelectionRow {
                name,
                count: a.count,
                total_ps: a.total,
                in_span_ps: a.in_span,
                avg_ps: a.total / a.count.max(1) as i64,
                min_ps: a.min,
                max_ps: a.max,
                tracks: a.tracks,
            })
            .collect();
        rows.sort_by(|a, b| b.in_span_ps.cmp(&a.in_span_ps).then(b.count.cmp(&a.count)).then(a.name.cmp(&b.name)));
        Selection {
            schema: "stepscope.timeline_select/1",
            start_ps,
            end_ps,
            span_ps: end_ps - start_ps,
            tracks,
            events: self.events,
            rows,
        }
    }
}

/// Checks a request for the tiles of tracks `ids` of a run of `tracks` tracks (track
/// `id` has `depth(id)` rows), `px` wide, `max_rows` rows each: 1 to [`MAX_TILES`]
/// tracks that are there, and rows times `px` at most [`MAX_TILES_ROW_PX`].
pub fn check_tiles(
    ids: &[u32],
    tracks: usize,
    depth: impl Fn(u32) -> usize,
    px: u32,
    max_rows: usize,
) -> Result<(), String> {
    if ids.is_empty() || ids.len() > MAX_TILES {
        return Err(format!("{} tracks asked for: ask for 1 to {MAX_TILES} at a time", ids.len()));
    }
    if let Some(bad) = ids.iter().find(|&&id| id as usize >= tracks) {
        return Err(format!("no track {bad} (the run has {tracks})"));
    }
    let rows: usize = ids.iter().map(|&id| depth(id).min(max_rows)).sum();
    if rows as u64 * u64::from(px) > MAX_TILES_ROW_PX {
        return Err(format!(
            "{rows} rows × {px} px is more than {MAX_TILES_ROW_PX}: ask for fewer tracks, fewer rows or fewer px"
        ));
    }
    Ok(())
}

/// The tracks an area selection over `span` of `tracks` reads, of a run of `count`
/// tracks (`derived(id)` for a derived one): once the span and the ids are checked,
/// the tracks named (every track but the derived ones where none are), in order, each
/// once.
fn selected_ids(
    count: usize,
    derived: impl Fn(u32) -> bool,
    (start_ps, end_ps): (i64, i64),
    tracks: &[u32],
) -> Result<Vec<u32>, String> {
    if end_ps <= start_ps {
        return Err(format!("empty span: end_ps {end_ps} is not after start_ps {start_ps}"));
    }
    if let Some(bad) = tracks.iter().find(|&&t| t as usize >= count) {
        return Err(format!("no track {bad} (the run has {count})"));
    }
    let mut ids: Vec<u32> = match tracks.is_empty() {
        true => (0..count as u32).filter(|&id| !derived(id)).collect(),
        false => tracks.to_vec(),
    };
    ids.sort_unstable();
    ids.dedup();
    Ok(ids)
}

/// One search match.
#[derive(Clone, Debug, Serialize)]
pub struct Match {
    pub track: u32,
    pub index: u32,
    pub name: String,
    pub start_ps: i64,
    pub duration_ps: i64,
}

/// Events whose name contains a query.
#[derive(Clone, Debug, Serialize)]
pub struct Search {
    pub schema: &'static str,
    pub query: String,
    /// All matching events (not only those listed).
    pub total: u64,
    /// Where the matches listed start among all of them in time order (a page asked for
    /// with `offset`); absent for the first matches in track order.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub offset: Option<u64>,
    /// The first matches, in track order then time order; from `offset`, in time order
    /// (start, then track, then index).
    pub matches: Vec<Match>,
}

/// Checks a window `[start_ps, end_ps)` drawn `px` pixels wide, as a tile's.
pub fn check_window(start_ps: i64, end_ps: i64, px: u32) -> Result<(), String> {
    pixel_width(start_ps, end_ps, px).map(|_| ())
}

/// The width in ps of one of `px` pixel columns of window `[start_ps, end_ps)`, once
/// the window and `px` are checked.
fn pixel_width(start_ps: i64, end_ps: i64, px: u32) -> Result<f64, String> {
    if end_ps <= start_ps {
        return Err(format!("empty window: end_ps {end_ps} is not after start_ps {start_ps}"));
    }
    if px == 0 || px > MAX_TILE_PX {
        return Err(format!("px {px} is out of range 1..={MAX_TILE_PX}"));
    }
    Ok((end_ps as f64 - start_ps as f64) / f64::from(px))
}

impl Tracks {
    /// The tracks `tracks` of run `run`, with the tracks derived from other analyses.
    fn of(run: &str, derived: Vec<DerivedTrack>, tracks: Vec<Track>) -> Tracks {
        Tracks {
            schema: "stepscope.timeline_tracks/1",
            run: run.to_string(),
            derived,
            start_ps: tracks.iter().map(|t| t.start_ps).min().unwrap_or(0),
            end_ps: tracks.iter().map(|t| t.end_ps).max().unwrap_or(0),
            events: tracks.iter().filter(|t| !t.derived).map(|t| t.events).sum(),
            read_a_host_at_a_time: false,
            tracks,
        }
    }
}

/// A Steps track per host of `profile` with some of `steps`.
fn steps_tracks(profile: &Profile, steps: &[Step]) -> Vec<DerivedTrack> {
    let hosts = profile.hosts.iter().filter(|space| steps.iter().any(|s| s.host == space.host));
    hosts
        .map(|space| DerivedTrack {
            kind: "steps",
            name: "Steps".into(),
            host: space.host.clone(),
            source: "api/steps",
            device: None,
        })
        .collect()
}

/// A bytes-in-use counter per allocator of `allocators` (the memory analysis's, in its
/// order) whose timeline has two points or more.
fn counter_tracks(allocators: &[crate::memory::Allocator]) -> Vec<DerivedTrack> {
    (allocators.iter().filter(|a| a.timeline.len() > 1))
        .map(|a| DerivedTrack {
            kind: "counter",
            name: format!("{} in use", a.name),
            host: a.host.clone(),
            source: "api/memory",
            device: None,
        })
        .collect()
}

/// A busy-share counter per device of `profile` that ran an op.
fn busy_tracks(profile: &Profile) -> Vec<DerivedTrack> {
    (profile.devices().iter().filter(|d| crate::steps::busy_intervals(profile, d).total() > 0))
        .map(|d| DerivedTrack {
            kind: "counter",
            name: format!("{} busy", d.name),
            host: d.host.to_string(),
            source: "api/timeline/busy",
            device: Some(d.id()),
        })
        .collect()
}

/// The other end of a flow: event `e` of `line` (track `track`).
fn flow_link(direction: &'static str, flow_id: u64, track: usize, plane: &Plane, line: &Line, e: usize) -> FlowLink {
    FlowLink {
        direction,
        flow_id,
        track: track as u32,
        index: e as u32,
        name: shown_name(plane, line.meta(e)).to_string(),
        start_ps: line.start_ps(e),
        duration_ps: line.duration_ps(e),
    }
}

/// The display name of an event's metadata, else its name.
fn shown_name(plane: &Plane, meta: u32) -> &str {
    match plane.event_meta.get(meta as usize) {
        Some(m) if !m.display_name.is_empty() => plane.text(m.display_name),
        _ => plane.event_name(meta),
    }
}

fn dur(line: &Line, i: usize) -> i64 {
    line.duration_ps(i).max(0)
}

/// Spreads a line's events over rows so that no two events on a row overlap, each
/// event on the lowest free row (nested events one row below their parent).
fn index_line(line: &Line) -> Vec<Vec<u32>> {
    let n = line.len();
    let key = |i: usize| (line.start_ps(i), Reverse(dur(line, i)));
    let mut rows = RowFill::default();
    if (1..n).all(|i| key(i - 1) <= key(i)) {
        (0..n as u32).for_each(|i| rows.place(line, i));
    } else {
        let mut order: Vec<u32> = (0..n as u32).collect();
        order.sort_by_key(|&i| key(i as usize));
        order.into_iter().for_each(|i| rows.place(line, i));
    }
    rows.rows
}

/// The index of line `at.line` of `plane` (a derived plane's when `derived`).
fn index_track(at: TrackRef, derived: bool, plane: &Plane) -> TrackIndex {
    let line = &plane.lines[at.line];
    let metas_fit = plane.event_meta.len() <= usize::from(u16::MAX) + 1;
    let rows: Vec<Row> = index_line(line).into_par_iter().map(|events| Row::new(line, &events, metas_fit)).collect();
    // A row's starts and ends both ascend.
    let start_ps = rows.iter().map(|r| r.start(0)).min().unwrap_or(0);
    let end_ps = rows.iter().map(|r| r.end(r.starts.len() - 1)).max().unwrap_or(0);
    TrackIndex { at, derived, rows, start_ps, end_ps }
}

/// Rows being filled by events in order of start: a min-tree over the end of each
/// row's last event, rows in its leaves. A row is free for an event when that end is
/// at or before the event's start; rows not made yet are free (`i64::MIN`), so the
/// leftmost free leaf is the row to use, new or not.
struct RowFill {
    rows: Vec<Vec<u32>>,
    leaves: usize,
    tree: Vec<i64>,
}

impl Default for RowFill {
    fn default() -> RowFill {
        RowFill { rows: Vec::new(), leaves: 2, tree: vec![i64::MIN; 4] }
    }
}

impl RowFill {
    /// Puts event `i` on the lowest row free at its start.
    #[inline(always)]
    fn place(&mut self, line: &Line, i: u32) {
        let (leaves, start) = (self.leaves, line.start_ps(i as usize));
        if self.rows.len() == leaves {
            let mut wider = vec![i64::MIN; 4 * leaves];
            wider[2 * leaves..3 * leaves].copy_from_slice(&self.tree[leaves..]);
            for node in (1..2 * leaves).rev() {
                wider[node] = wider[2 * node].min(wider[2 * node + 1]);
            }
            (self.leaves, self.tree) = (2 * leaves, wider);
        }
        let (leaves, tree) = (self.leaves, &mut self.tree);
        let mut node = 1;
        while node < leaves {
            node = if tree[2 * node] <= start { 2 * node } else { 2 * node + 1 };
        }
        let row = node - leaves;
        if row == self.rows.len() {
            self.rows.push(Vec::new());
        }
        self.rows[row].push(i);
        tree[node] = start.saturating_add(dur(line, i as usize));
        while node > 1 {
            node /= 2;
            tree[node] = tree[2 * node].min(tree[2 * node + 1]);
        }
    }
}

impl Timeline {
    /// Indexes every non-empty, non-counter line of every plane, in parallel, with a
    /// GPU's derived `XLA Modules` and `XLA Ops` lines before its streams.
    pub fn build(profile: &Profile) -> Timeline {
        // What the derived lines read is found first, on this thread (never by a pool
        // thread); then they are made while the profile's own lines are indexed. A
        // profile without GPUs has none, and is not asked for it.
        let gpus = profile.hosts.iter().flat_map(|s| &s.planes).any(|p| p.name.starts_with("/device:GPU"));
        if gpus {
            profile.time_base();
        }
        let mut own = Vec::new();
        for (h, space) in profile.hosts.iter().enumerate() {
            for (p, plane) in space.planes.iter().enumerate() {
                for (l, line) in plane.lines.iter().enumerate() {
                    if !line.is_counter && !line.is_empty() {
                        own.push(TrackRef { host: h, plane: p, line: l });
                    }
                }
            }
        }
        let (derived, own) = rayon::join(
            || if gpus { derived::gpu_op_lines(profile) } else { Vec::new() },
            || own.into_par_iter().map(|at| index_track(at, false, &profile.hosts[at.host].planes[at.plane])).collect(),
        );
        let own: Vec<TrackIndex> = own;
        let mut made: Vec<TrackIndex> = (derived.iter().enumerate())
            .flat_map(|(k, d)| {
                let lines = d.lines.lines.iter().enumerate().filter(|(_, l)| !l.is_empty());
                lines.map(move |(l, _)| TrackRef { host: d.host, plane: k, line: l })
            })
            .collect::<Vec<_>>()
            .into_par_iter()
            .map(|at| index_track(at, true, &derived[at.plane].lines))
            .collect();
        // A GPU's derived lines come before its streams.
        let key = |t: &TrackIndex| match t.derived {
            true => (t.at.host, derived[t.at.plane].plane, 0, t.at.line),
            false => (t.at.host, t.at.plane, 1, t.at.line),
        };
        made.extend(own);
        made.sort_by_key(key);
        Timeline { tracks: made, derived }
    }

    /// Number of tracks.
    pub fn len(&self) -> usize {
        self.tracks.len()
    }

    /// True when the profile has no events to show.
    pub fn is_empty(&self) -> bool {
        self.tracks.is_empty()
    }

    /// Where track `id` lives, if there is such a track.
    pub fn track_ref(&self, id: u32) -> Option<TrackRef> {
        self.tracks.get(id as usize).map(|t| t.at)
    }

    fn parts<'a>(&'a self, profile: &'a Profile, id: u32) -> Option<(&'a TrackIndex, &'a Space, &'a Plane, &'a Line)> {
        let t = self.tracks.get(id as usize)?;
        let space = profile.hosts.get(t.at.host)?;
        let plane = match t.derived {
            true => &self.derived.get(t.at.plane)?.lines,
            false => space.planes.get(t.at.plane)?,
        };
        let line = plane.lines.get(t.at.line)?;
        Some((t, space, plane, line))
    }

    /// The list of tracks.
    pub fn tracks(&self, profile: &Profile) -> Tracks {
        let mut out = Vec::with_capacity(self.tracks.len());
        for id in 0..self.tracks.len() as u32 {
            let Some((t, space, plane, line)) = self.parts(profile, id) else { continue };
            out.push(Track {
                id,
                kind: "slices",
                host: space.host.clone(),
                plane: plane.name.clone(),
                line: line.label().to_string(),
                line_id: line.id,
                events: line.len() as u64,
                derived: t.derived,
                depth: t.rows.len() as u32,
                start_ps: t.start_ps,
                end_ps: t.end_ps,
            });
        }
        Tracks::of(&profile.run, Vec::new(), out)
    }

    /// The tracks derived from other analyses that a viewer draws above the lines: a
    /// Steps track per host with steps, a counter per allocator whose bytes in use
    /// change (the memory analysis's timeline has two points or more), and a device's
    /// busy share per device that ran an op.
    pub fn derived_tracks(profile: &Profile, steps: &[Step]) -> Vec<DerivedTrack> {
        let mut out = steps_tracks(profile, steps);
        out.extend(counter_tracks(&crate::memory::memory(profile, None, 1).allocators));
        out.extend(busy_tracks(profile));
        out
    }

    /// Device `device`'s (`host/plane`) busy share over `[start_ps, end_ps)` drawn
    /// `px` pixels wide.
    pub fn busy(profile: &Profile, device: &str, start_ps: i64, end_ps: i64, px: u32) -> Result<Busy, String> {
        let width = pixel_width(start_ps, end_ps, px)?;
        let devices = profile.devices();
        let Some(d) = devices.iter().find(|d| d.id() == device) else {
            let ids: Vec<String> = devices.iter().map(|d| d.id()).collect();
            return Err(format!("no device {device:?} — pick one of: {}", ids.join(", ")));
        };
        let busy = crate::steps::busy_intervals(profile, d);
        let edge = |k: u32| start_ps.saturating_add((f64::from(k) * width).round() as i64).min(end_ps);
        let busy_pct = (0..px)
            .map(|k| {
                let (lo, hi) = (edge(k), edge(k + 1));
                if hi <= lo {
                    return 0.0;
                }
                100.0 * busy.overlap(lo, hi) as f64 / (hi - lo) as f64
            })
            .collect();
        Ok(Busy {
            schema: "stepscope.timeline_busy/1",
            device: device.to_string(),
            start_ps,
            end_ps,
            px,
            ps_per_px: width,
            busy_pct,
        })
    }

    /// The boxes of track `id` over `[start_ps, end_ps)` drawn `px` pixels wide.
    /// Only the first `max_rows` depth rows are drawn (a page shows so many).
    pub fn tile(
        &self,
        profile: &Profile,
        id: u32,
        (start_ps, end_ps, px): (i64, i64, u32),
        max_rows: usize,
    ) -> Result<Tile, String> {
        let (t, _, plane, line) = self.parts(profile, id).ok_or_else(|| format!("no track {id}"))?;
        let width = pixel_width(start_ps, end_ps, px)?;
        // Rows side by side, then their boxes in row order.
        let rows: Vec<Boxes> = (t.rows.par_iter().take(max_rows).enumerate())
            .map(|(depth, row)| row_boxes(line, row, depth as u32, start_ps, end_ps, px, width))
            .collect();
        let boxes = rows.iter().map(|r| r.name.len()).sum();
        let mut tile = Tile {
            schema: "stepscope.timeline_tile/1",
            track: id,
            start_ps,
            end_ps,
            px,
            ps_per_px: width,
            events: rows.iter().map(|r| r.events).sum(),
            box_depth: Vec::with_capacity(boxes),
            box_start_ps: Vec::with_capacity(boxes),
            box_duration_ps: Vec::with_capacity(boxes),
            box_name: Vec::with_capacity(boxes),
            box_count: Vec::with_capacity(boxes),
            box_index: Vec::with_capacity(boxes),
            names: BTreeMap::new(),
        };
        for r in rows {
            tile.box_depth.extend(std::iter::repeat_n(r.depth, r.name.len()));
            tile.box_start_ps.extend(r.start_ps);
            tile.box_duration_ps.extend(r.duration_ps);
            tile.box_count.extend(r.count);
            tile.box_index.extend(r.index);
            for &name in &r.name {
                tile.names.entry(name).or_insert_with(|| shown_name(plane, name).to_string());
            }
            tile.box_name.extend(r.name);
        }
        Ok(tile)
    }

    /// The tiles of tracks `ids` (at most [`MAX_TILES`]) over one window, in the order
    /// asked: what a view draws, in one answer, the tracks made in parallel. The rows
    /// drawn times `px` is at most [`MAX_TILES_ROW_PX`], which bounds the answer.
    pub fn tiles(
        &self,
        profile: &Profile,
        ids: &[u32],
        window: (i64, i64, u32),
        max_rows: usize,
    ) -> Result<Tiles, String> {
        check_tiles(ids, self.tracks.len(), |id| self.tracks[id as usize].rows.len(), window.2, max_rows)?;
        let tiles = ids.par_iter().map(|&id| self.tile(profile, id, window, max_rows)).collect::<Result<_, _>>()?;
        Ok(Tiles::of(tiles))
    }

    /// The events overlapping `[start_ps, end_ps)` on `tracks` (when empty: every
    /// track but the derived ones, whose events restate the kernels'), each counted
    /// once, grouped by their shown name: a few binary searches per depth row (a row's
    /// starts and ends both ascend), then the events found.
    pub fn select(&self, profile: &Profile, start_ps: i64, end_ps: i64, tracks: &[u32]) -> Result<Selection, String> {
        let ids = self.selected(start_ps, end_ps, tracks)?;
        Ok(self.selection_part(profile, start_ps, end_ps, &ids).finish(start_ps, end_ps, ids))
    }

    /// The tracks [`Timeline::select`] reads for `tracks`, once the span and the ids
    /// are checked: in order, each once.
    pub fn selected(&self, start_ps: i64, end_ps: i64, tracks: &[u32]) -> Result<Vec<u32>, String> {
        selected_ids(self.tracks.len(), |id| self.tracks[id as usize].derived, (start_ps, end_ps), tracks)
    }

    /// The events of tracks `ids` (ascending, each once) overlapping
    /// `[start_ps, end_ps)`, by shown name, to be added to other hosts'.
    pub fn selection_part(&self, profile: &Profile, start_ps: i64, end_ps: i64, ids: &[u32]) -> SelectionPart {
        let mut part = SelectionPart::default();
        for &id in ids {
            let Some((t, _, plane, line)) = self.parts(profile, id) else { continue };
            // Per metadata: its events here (count, total, in span, min, max).
            let mut by_meta: BTreeMap<u32, (u64, i64, i64, i64, i64)> = BTreeMap::new();
            for row in &t.rows {
                let n = row.starts.len();
                // The first event ending at or after the span's start; then on to the
                // first starting at or after its end.
                let (mut lo, mut hi) = (0usize, n);
                while lo < hi {
                    let mid = (lo + hi) / 2;
                    if row.end(mid) < start_ps {
                        lo = mid + 1
                    } else {
                        hi = mid
                    }
                }
                let mut k = lo;
                while k < n && row.start(k) < end_ps {
                    let (a, d) = (row.start(k), row.dur(k));
                    let b = a.saturating_add(d);
                    // Overlapping: ends after the span's start, or an instant within it.
                    if b > start_ps || (d == 0 && a >= start_ps) {
                        let meta = line.meta(row.events.get(k) as usize);
                        let e = by_meta.entry(meta).or_insert((0, 0, 0, i64::MAX, i64::MIN));
                        e.0 += 1;
                        e.1 = e.1.saturating_add(d);
                        e.2 = e.2.saturating_add(b.min(end_ps) - a.max(start_ps).min(b.min(end_ps)));
                        e.3 = e.3.min(d);
                        e.4 = e.4.max(d);
                    }
                    k += 1;
                }
            }
            let mut named: BTreeMap<&str, Tally> = BTreeMap::new();
            for (meta, (count, total, in_span, min, max)) in by_meta {
                part.events += count;
                let a = named.entry(shown_name(plane, meta)).or_default();
                a.add(&Tally { count, total, in_span, min, max, tracks: 0 });
                a.tracks = 1;
            }
            for (name, tally) in named {
                part.by_name.entry(name.to_string()).or_default().add(&tally);
            }
        }
        part
    }

    /// Every stat of event `index` on track `id`, its step and its flow links.
    pub fn event(&self, profile: &Profile, steps: &[Step], id: u32, index: u32) -> Result<EventDetail, String> {
        let (_, space, plane, line) = self.parts(profile, id).ok_or_else(|| format!("no track {id}"))?;
        let i = index as usize;
        if i >= line.len() {
            return Err(no_event(id, line.len() as u64, index));
        }
        let meta = line.meta(i);
        let render = |stats: &mut dyn Iterator<Item = Stat>| -> Vec<StatEntry> {
            stats
                .map(|s| StatEntry { name: plane.stat_name(s.meta()).to_string(), value: plane.stat_display(&s) })
                .collect()
        };
        let start_ps = line.start_ps(i);
        // A device's event is in the step as measured; a host's in the step's host span.
        let span = |s: &Step| if plane.name.starts_with("/device:") { (s.start_ps, s.end_ps()) } else { s.host_span() };
        let step_num = steps
            .iter()
            .find(|s| s.host == space.host && span(s).0 <= start_ps && start_ps < span(s).1)
            .map(|s| s.step_num);
        Ok(EventDetail {
            schema: "stepscope.timeline_event/1",
            track: id,
            index,
            host: space.host.clone(),
            plane: plane.name.clone(),
            line: line.label().to_string(),
            name: plane.event_name(meta).to_string(),
            display_name: shown_name(plane, meta).to_string(),
            start_ps,
            duration_ps: line.duration_ps(i),
            step_num,
            stats: render(&mut line.event_stats(i)),
            metadata_stats: render(&mut plane.metadata_stats(meta).iter().copied()),
            flows: self.flows(profile, id, i),
            occurrences: self.occurrences(profile, shown_name(plane, meta), self.tracks[id as usize].derived),
            until_done: self.until_done(profile, id, i),
        })
    }

    /// Of event `i` of track `id`, where it is an XLA:CPU op the model recorded: its run
    /// until done, and the op's runs as the op profile sums them.
    fn until_done(&self, profile: &Profile, id: u32, i: usize) -> Option<UntilDone> {
        let t = self.tracks.get(id as usize).filter(|t| !t.derived)?;
        let (_, _, plane, _) = self.parts(profile, id)?;
        let devices = profile.devices();
        let d = (devices.iter())
            .find(|d| d.source == stepscope_model::OpSource::HostOps && std::ptr::eq(d.plane, plane))?;
        let ops = d.cached_ops();
        let k = (ops.recs.iter()).position(|r| r.line as usize == t.at.line && r.index as usize == i)?;
        let (_, start, end, _) = ops.span(d.plane, k);
        let r = &ops.recs[k];
        let (name, module) = (&*ops.names[r.name as usize], &*ops.names[r.module as usize]);
        let rows = crate::ops::ops(profile, crate::ops::GroupBy::Op, 0);
        let row = rows.ops.iter().find(|o| o.name == name && (o.module == module || o.module.is_empty()))?;
        let count = row.executions.max(row.count);
        Some(UntilDone {
            end_ps: end,
            duration_ps: end.saturating_sub(start),
            op_count: count,
            op_total_ps: row.total_ps,
            op_avg_ps: row.total_ps / count.max(1) as i64,
        })
    }

    /// Every event named `name` (shown name) on any track of the profile's own lines,
    /// or with `derived` on any derived one: one pass over the lines of the planes
    /// that have such a name.
    fn occurrences(&self, profile: &Profile, name: &str, derived: bool) -> Occurrences {
        let (mut count, mut total, mut min, mut max, mut tracks) = (0u64, 0i64, i64::MAX, 0i64, 0u64);
        let mut metas_of: Option<((usize, usize, bool), Vec<bool>)> = None;
        for id in 0..self.tracks.len() as u32 {
            let Some((t, _, plane, line)) = self.parts(profile, id) else { continue };
            if t.derived != derived {
                continue;
            }
            let key = (t.at.host, t.at.plane, t.derived);
            if metas_of.as_ref().map(|m| m.0) != Some(key) {
                let wanted = (0..plane.event_meta.len() as u32).map(|m| shown_name(plane, m) == name).collect();
                metas_of = Some((key, wanted));
            }
            let Some((_, wanted)) = &metas_of else { continue };
            if !wanted.iter().any(|&w| w) {
                continue;
            }
            let before = count;
            for e in 0..line.len() {
                if wanted.get(line.meta(e) as usize).copied().unwrap_or(false) {
                    let d = dur(line, e);
                    count += 1;
                    total = total.saturating_add(d);
                    min = min.min(d);
                    max = max.max(d);
                }
            }
            tracks += u64::from(count > before);
        }
        Occurrences {
            count,
            total_ps: total,
            min_ps: if count > 0 { min } else { 0 },
            avg_ps: total / count.max(1) as i64,
            max_ps: max,
            tracks,
            host: None,
        }
    }

    /// Events on the same host linked to event `i` of track `id`: a GPU op and its
    /// launch by `correlation_id`, then `_p`/`_c` flow stats.
    fn flows(&self, profile: &Profile, id: u32, i: usize) -> Vec<FlowLink> {
        let Some((t, _, plane, line)) = self.parts(profile, id) else { return Vec::new() };
        let ids = |plane: &Plane, line: &Line, e: usize, key: Option<u32>| -> Option<u64> {
            let s = plane.event_stat(line, e, key?)?;
            match s.value() {
                StatValue::U64(v) => Some(v),
                StatValue::I64(v) => Some(v as u64),
                _ => None,
            }
        };
        let (p, c) = (plane.stat_id("_p"), plane.stat_id("_c"));
        let produces = ids(plane, line, i, p);
        let consumes = ids(plane, line, i, c);
        let mut out = Vec::new();
        // GPU work and its host launch share a `correlation_id`: the launch (a
        // cuLaunchKernel, cuGraphLaunch or memcpy call on a host thread) flows out to
        // the kernels and copies it started on a device's streams.
        if let Some(corr) = ids(plane, line, i, plane.stat_id("correlation_id")) {
            let on_device = plane.name.starts_with("/device:");
            for (other_id, other) in self.tracks.iter().enumerate() {
                let Some((_, _, oplane, oline)) = self.parts(profile, other_id as u32) else { continue };
                if other.at.host != t.at.host || oplane.name.starts_with("/device:") == on_device {
                    continue;
                }
                let Some(key) = oplane.stat_id("correlation_id") else { continue };
                for e in 0..oline.len() {
                    if ids(oplane, oline, e, Some(key)) != Some(corr) {
                        continue;
                    }
                    out.push(flow_link(if on_device { "in" } else { "out" }, corr, other_id, oplane, oline, e));
                    if out.len() >= 64 {
                        return out;
                    }
                }
            }
        }
        if produces.is_none() && consumes.is_none() {
            return out;
        }
        for (other_id, other) in self.tracks.iter().enumerate() {
            if other.at.host != t.at.host {
                continue;
            }
            let Some((_, _, oplane, oline)) = self.parts(profile, other_id as u32) else { continue };
            let (op, oc) = (oplane.stat_id("_p"), oplane.stat_id("_c"));
            if op.is_none() && oc.is_none() {
                continue;
            }
            for e in 0..oline.len() {
                if other_id as u32 == id && e == i {
                    continue;
                }
                let link = match (produces, consumes) {
                    (Some(f), _) if ids(oplane, oline, e, oc) == Some(f) => Some(("out", f)),
                    (_, Some(f)) if ids(oplane, oline, e, op) == Some(f) => Some(("in", f)),
                    _ => None,
                };
                if let Some((direction, flow_id)) = link {
                    out.push(flow_link(direction, flow_id, other_id, oplane, oline, e));
                    if out.len() >= 64 {
                        return out;
                    }
                }
            }
        }
        out
    }

    /// Events whose name or display name contains `query` (ignoring case): the total
    /// and the first `limit` matches.
    pub fn search(&self, profile: &Profile, query: &str, limit: usize) -> Search {
        let limit = limit.min(MAX_SEARCH_MATCHES);
        let (mut total, mut matches) = (0u64, Vec::new());
        self.each_match(profile, query, |id, plane, line, i| {
            total += 1;
            if matches.len() < limit {
                matches.push(Match::of(id, plane, line, i));
            }
        });
        Search::of(query, total, None, matches)
    }

    /// The matches of `query` in time order (start, then track, then index), from the
    /// `offset`-th on, at most `limit` of them: a page of every match, however many.
    pub fn search_in_time(&self, profile: &Profile, query: &str, offset: usize, limit: usize) -> Search {
        let limit = limit.min(MAX_SEARCH_MATCHES);
        let (total, matches) = self.matches_in_time(profile, query, offset..offset.saturating_add(limit));
        Search::of(query, total, Some(offset.min(total as usize) as u64), matches)
    }

    /// All matches of `query`, and those at places `at` among them in time order
    /// (start, then track, then index).
    pub fn matches_in_time(&self, profile: &Profile, query: &str, at: std::ops::Range<usize>) -> (u64, Vec<Match>) {
        // 16 bytes a match, found once a page: every match can be paged to.
        let mut all: Vec<(i64, u32, u32)> = Vec::new();
        self.each_match(profile, query, |id, _, line, i| all.push((line.start_ps(i), id, i as u32)));
        let total = all.len();
        let from = at.start.min(total);
        let to = at.end.max(from).min(total);
        if from < total {
            all.select_nth_unstable(from);
            let rest = &mut all[from..];
            if to - from < rest.len() {
                rest.select_nth_unstable(to - from);
            }
            rest[..to - from].sort_unstable();
        }
        let matches = all[from..to]
            .iter()
            .filter_map(|&(_, id, i)| {
                let (_, _, plane, line) = self.parts(profile, id)?;
                Some(Match::of(id, plane, line, i as usize))
            })
            .collect();
        (total as u64, matches)
    }

    /// Calls `f(track, plane, line, index)` for every event whose name or display name
    /// holds `query` (ignoring case), track by track, in each track's order. XLA:CPU's
    /// `end: <op>` markers are not an op's runs: they match only a query for markers
    /// (one starting `end:`), so a search for an op counts its runs once.
    fn each_match(&self, profile: &Profile, query: &str, mut f: impl FnMut(u32, &Plane, &Line, usize)) {
        let q = query.to_lowercase();
        let markers = q.starts_with("end:");
        let mut cached: Option<((usize, usize, bool), Vec<bool>)> = None;
        for id in 0..self.tracks.len() as u32 {
            let Some((t, _, plane, line)) = self.parts(profile, id) else { continue };
            let key = (t.at.host, t.at.plane, t.derived);
            if cached.as_ref().map(|c| c.0) != Some(key) {
                let hit = (0..plane.event_meta.len() as u32)
                    .map(|m| {
                        let name = plane.event_name(m);
                        !q.is_empty()
                            && (markers || !name.starts_with("end: "))
                            && (name.to_lowercase().contains(&q) || shown_name(plane, m).to_lowercase().contains(&q))
                    })
                    .collect();
                cached = Some((key, hit));
            }
            let Some((_, hit)) = &cached else { continue };
            for i in 0..line.len() {
                if hit.get(line.meta(i) as usize).copied().unwrap_or(false) {
                    f(id, plane, line, i);
                }
            }
        }
    }
}

impl EventDetail {
    /// The event as its run has it, its host read alone: its track and its flows'
    /// tracks `first` (the id of the host's first track in the run) on, and its
    /// occurrences marked as its host's.
    pub fn in_run(mut self, first: u32) -> EventDetail {
        self.track += first;
        for f in &mut self.flows {
            f.track += first;
        }
        self.occurrences.host = Some(self.host.clone());
        self
    }
}

impl Tiles {
    /// The tiles `tiles`, in the order asked.
    pub fn of(tiles: Vec<Tile>) -> Tiles {
        Tiles { schema: "stepscope.timeline_tiles/1", tiles }
    }
}

impl Search {
    /// Of query `query`: `total` matches, `matches` listed (from `offset` in time order
    /// where given, else the first in track order).
    pub fn of(query: &str, total: u64, offset: Option<u64>, matches: Vec<Match>) -> Search {
        Search { schema: "stepscope.timeline_search/1", query: query.to_string(), total, offset, matches }
    }
}

/// Why there is no event `index` on track `id` of `events` events.
pub fn no_event(id: u32, events: u64, index: u32) -> String {
    format!("track {id} has {events} events; there is no event {index}")
}

impl Match {
    /// The match as its run has it, its host read alone: its track `first` (the id of
    /// the host's first track in the run) on.
    pub fn in_run(self, first: u32) -> Match {
        Match { track: self.track + first, ..self }
    }

    fn of(track: u32, plane: &Plane, line: &Line, i: usize) -> Match {
        Match {
            track,
            index: i as u32,
            name: shown_name(plane, line.meta(i)).to_string(),
            start_ps: line.start_ps(i),
            duration_ps: line.duration_ps(i),
        }
    }
}

/// One row's boxes in a tile, as columns.
#[derive(Default)]
struct Boxes {
    depth: u32,
    start_ps: Vec<i64>,
    duration_ps: Vec<i64>,
    name: Vec<u32>,
    count: Vec<u64>,
    index: Vec<u32>,
    events: u64,
}

impl Boxes {
    /// Appends one box covering the row's events `run` (consecutive).
    fn push(&mut self, line: &Line, row: &Row, run: std::ops::Range<usize>) {
        if run.is_empty() {
            return;
        }
        let first = row.event(run.start);
        let start = row.start(run.start);
        self.start_ps.push(start);
        self.duration_ps.push(row.end(run.end - 1).saturating_sub(start).max(0));
        self.name.push(match row.metas.get(run.clone()) {
            _ if run.len() == 1 => line.meta(first as usize),
            Some(metas) => dominant(metas.len(), |k| u32::from(metas[k])),
            None => dominant(run.len(), |k| line.meta(row.event(run.start + k) as usize)),
        });
        self.count.push(run.len() as u64);
        self.index.push(first);
        self.events += run.len() as u64;
    }
}

/// The boxes of one depth row over `[start_ps, end_ps)` drawn `px` pixels of `width`
/// ps wide.
fn row_boxes(line: &Line, row: &Row, depth: u32, start_ps: i64, end_ps: i64, px: u32, width: f64) -> Boxes {
    let mut out = Boxes { depth, ..Default::default() };
    // Pixel column of a time, clamped to the window.
    let pixel = |ts: i64| (((ts as f64 - start_ps as f64) / width).floor().max(0.0) as i64).min(px as i64);
    // First time of pixel column `p`.
    let pixel_start = |p: i64| start_ps.saturating_add((p as f64 * width).ceil() as i64);
    let n = row.starts.len();
    // Events on a row do not overlap: starts and ends are both sorted.
    let (mut lo, mut hi) = (0, n);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if row.end(mid) <= start_ps {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    let mut k = lo;
    let stop = row.starts.first_at_least(k, n, end_ps);
    // Zero-length events exactly at start_ps end there too; keep them.
    while k > 0 && row.start(k - 1) >= start_ps && row.dur(k - 1) == 0 {
        k -= 1;
    }
    while k < stop {
        if row.dur(k) as f64 >= width {
            out.push(line, row, k..k + 1);
            k += 1;
            continue;
        }
        // Events starting in the same pixel column as this one: all but maybe the last
        // are shorter than a pixel (they end before the next starts).
        let next_px = pixel_start(pixel(row.start(k)) + 1);
        let mut j = row.starts.first_at_least(k, stop, next_px).max(k + 1);
        if j - k > 1 && row.dur(j - 1) as f64 >= width {
            j -= 1;
        }
        out.push(line, row, k..j);
        k = j;
    }
    out
}

/// The most frequent of evenly spaced samples of a run's `n` metadata indexes, read
/// by `meta_at` (of those seen as often, the last seen first; 0 for an empty run).
fn dominant(n: usize, meta_at: impl Fn(usize) -> u32) -> u32 {
    let step = n.div_ceil(NAME_SAMPLES).max(1);
    let mut seen = [(0u32, 0u32); NAME_SAMPLES];
    let mut len = 0;
    for k in (0..n).step_by(step) {
        let m = meta_at(k);
        match seen[..len].iter_mut().find(|(x, _)| *x == m) {
            Some(e) => e.1 += 1,
            None if len < NAME_SAMPLES => {
                seen[len] = (m, 1);
                len += 1;
            }
            None => {}
        }
    }
    seen[..len].iter().max_by_key(|e| e.1).map_or(0, |e| e.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use stepscope_xspace::{EventMeta, Format, Source, Span};

    fn end(line: &Line, i: usize) -> i64 {
        line.start_ps(i).saturating_add(dur(line, i))
    }

    /// A one-host profile with one line holding `events` (start, duration, meta).
    fn profile(events: &[(i64, i64, u32)], names: &[&str]) -> Profile {
        let mut plane = Plane::new(1, "/host:CPU".into(), Arc::new(Source::Owned(Vec::new())));
        for (k, n) in names.iter().enumerate() {
            let name = plane.push_arena(n.as_bytes());
            plane.event_meta.push(EventMeta { id: k as i64, name, display_name: Span::EMPTY, ..Default::default() });
        }
        let mut line = Line::default();
        line.name = "t".into();
        for &(s, d, m) in events {
            line.push_event(s, d, m, &[]);
        }
        line.finish();
        plane.lines.push(line);
        let space = Space {
            host: "h".into(),
            format: Format::XSpace,
            planes: vec![plane],
            hostnames: vec![],
            errors: vec![],
            warnings: vec![],
            file_bytes: 0,
        };
        Profile::new("r", vec![space])
    }

    #[test]
    fn nesting_goes_to_rows() {
        // parent [0,100), child [10,50), grandchild [20,30), sibling [60,90), next [100,110)
        let p = profile(&[(0, 100, 0), (10, 40, 1), (20, 10, 2), (60, 30, 1), (100, 10, 0)], &["a", "b", "c"]);
        let tl = Timeline::build(&p);
        let t = &tl.tracks[0];
        assert_eq!(t.rows.iter().map(|r| r.events.to_vec()).collect::<Vec<_>>(), vec![vec![0, 4], vec![1, 3], vec![2]]);
        let tracks = tl.tracks(&p);
        assert_eq!(tracks.tracks[0].depth, 3);
        assert_eq!((tracks.start_ps, tracks.end_ps, tracks.events), (0, 110, 5));
    }

    #[test]
    fn unsorted_and_overlapping_events_keep_rows_disjoint() {
        let p = profile(&[(50, 100, 0), (0, 60, 0), (10, 10, 0), (55, 5, 0)], &["a"]);
        let tl = Timeline::build(&p);
        let line = &p.hosts[0].planes[0].lines[0];
        for row in &tl.tracks[0].rows {
            for w in row.events.to_vec().windows(2) {
                assert!(end(line, w[0] as usize) <= line.start_ps(w[1] as usize), "{:?}", row.events);
            }
        }
        let total: usize = tl.tracks[0].rows.iter().map(|r| r.events.len()).sum();
        assert_eq!(total, 4);
    }

    #[test]
    fn sub_pixel_events_merge_and_nothing_is_dropped() {
        // 10,000 events of 1 ps every 10 ps over [0, 100,000), plus one long event.
        let mut ev: Vec<(i64, i64, u32)> = (0..10_000).map(|k| (k * 10, 1, (k % 3) as u32)).collect();
        ev.push((100_000, 50_000, 2));
        let p = profile(&ev, &["x", "y", "z"]);
        let tl = Timeline::build(&p);
        let tile = tl.tile(&p, 0, (0, 150_000, 100), usize::MAX).unwrap();
        assert_eq!(tile.events, 10_001);
        assert_eq!(tile.box_count.iter().sum::<u64>(), 10_001);
        assert!(tile.box_count.len() <= 2 * 100 + 2, "{} boxes", tile.box_count.len());
        // The long event is its own box.
        let long = tile.box_start_ps.iter().position(|&s| s == 100_000).unwrap();
        assert_eq!((tile.box_count[long], tile.box_duration_ps[long], tile.box_index[long]), (1, 50_000, 10_000));
        // Zoomed in to 20 events over 200 px, every event is its own box.
        let tile = tl.tile(&p, 0, (1000, 1200, 200), usize::MAX).unwrap();
        assert_eq!(tile.box_count, vec![1; 20]);
        assert_eq!(tile.box_start_ps.first(), Some(&1000));
        assert_eq!(tile.names.len(), 3);
    }

    #[test]
    fn each_event_goes_to_the_lowest_free_row() {
        // Deep nesting (past 32 rows, so the row tree grows five times), ties,
        // zero and negative lengths, overlaps that do not nest, out of order.
        let mut ev: Vec<(i64, i64, u32)> = (0..40).map(|k| (k * 10, 1_000 - k * 20, 0)).collect();
        let mut x = 7u64;
        for _ in 0..3_000 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let start = ((x >> 33) % 5_000) as i64;
            let len = [0, -3, 1, 40, 400, 2_000][((x >> 20) % 6) as usize];
            ev.push((start, len, 0));
        }
        let p = profile(&ev, &["a"]);
        let line = &p.hosts[0].planes[0].lines[0];
        // By hand: events by (start, longest first), each on the first row whose last
        // event has ended by its start.
        let mut order: Vec<usize> = (0..ev.len()).collect();
        order.sort_by_key(|&i| (line.start_ps(i), Reverse(dur(line, i))));
        let mut want: Vec<Vec<i64>> = Vec::new();
        let mut ends: Vec<i64> = Vec::new();
        for i in order {
            let row = ends.iter().position(|&e| e <= line.start_ps(i)).unwrap_or(ends.len());
            if row == ends.len() {
                ends.push(0);
                want.push(Vec::new());
            }
            ends[row] = end(line, i);
            want[row].push(i as i64);
        }
        assert!(want.len() > 32, "{} rows", want.len());
        let tl = Timeline::build(&p);
        let got: Vec<Vec<i64>> = tl.tracks[0].rows.iter().map(|r| r.events.to_vec()).collect();
        assert_eq!(got, want);
        let t = &tl.tracks[0];
        let last_end = (0..ev.len()).map(|i| end(line, i)).max();
        assert_eq!((t.start_ps, Some(t.end_ps)), (0, last_end));
    }

    #[test]
    fn rows_keep_the_lines_starts_and_lengths() {
        // Nested and overlapping events, one with a negative length, past one block.
        let ev: Vec<(i64, i64, u32)> =
            (0..300).map(|k| ((k / 3) * 10, if k == 7 { -4 } else { (k % 3) * 7 }, 0)).collect();
        let p = profile(&ev, &["a"]);
        let tl = Timeline::build(&p);
        let line = &p.hosts[0].planes[0].lines[0];
        for row in &tl.tracks[0].rows {
            assert_eq!(row.starts.len(), row.events.len());
            for (k, i) in row.events.iter().enumerate() {
                let i = i as usize;
                assert_eq!((row.start(k), row.dur(k)), (line.start_ps(i), line.duration_ps(i).max(0)), "event {i}");
            }
        }
    }

    #[test]
    fn dominant_is_the_most_frequent_sample() {
        let of = |v: &'static [u32]| dominant(v.len(), |k| v[k]);
        assert_eq!(of(&[3, 5, 5, 3, 5]), 5);
        // Ties go to the name seen last, as before rows kept their names.
        assert_eq!(of(&[1, 2, 2, 1]), 2);
        // 64 names: only every fourth is a sample (16 in all).
        assert_eq!(dominant(64, |k| if k % 4 == 0 { 7 } else { 9 }), 7);
        // 100 names: every seventh is a sample (15 in all).
        assert_eq!(dominant(100, |k| if k % 7 == 0 { 7 } else { 9 }), 7);
        assert_eq!(of(&[]), 0);
    }

    #[test]
    fn window_edges_and_bad_requests() {
        let p = profile(&[(0, 100, 0), (100, 0, 0), (150, 10, 0)], &["a"]);
        let tl = Timeline::build(&p);
        // An event starting before the window and reaching into it is included.
        let t = tl.tile(&p, 0, (50, 120, 70), usize::MAX).unwrap();
        assert_eq!(t.box_index, vec![0, 1]);
        // Nothing after the window.
        assert_eq!(tl.tile(&p, 0, (200, 300, 10), usize::MAX).unwrap().events, 0);
        assert!(tl.tile(&p, 0, (10, 10, 10), usize::MAX).is_err());
        assert!(tl.tile(&p, 0, (0, 10, 0), usize::MAX).is_err());
        assert!(tl.tile(&p, 1, (0, 10, 10), usize::MAX).is_err());
        assert!(tl.event(&p, &[], 0, 3).is_err());
        let e = tl.event(&p, &[], 0, 2).unwrap();
        assert_eq!((e.name.as_str(), e.start_ps, e.duration_ps), ("a", 150, 10));
    }

    #[test]
    fn search_counts_all_and_lists_first() {
        let p = profile(&[(0, 1, 0), (1, 1, 1), (2, 1, 0)], &["Fusion.1", "copy"]);
        let tl = Timeline::build(&p);
        let s = tl.search(&p, "fusion", 1);
        assert_eq!(s.total, 2);
        assert_eq!(s.matches.len(), 1);
        assert_eq!(tl.search(&p, "", 10).total, 0);
    }
}
