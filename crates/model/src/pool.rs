//! XLA:CPU's intra-op thread pool: when an op handed to it finished.
//!
//! An XLA:CPU op that runs on the intra-op pool (a `dot`) schedules its tasks there
//! while its event lasts: each is a `ThreadpoolListener::Record` event carrying a flow
//! id (`_p`), run later on a pool thread as the region from the
//! `ThreadpoolListener::StartRegion` carrying that id (`_c`) to that thread's next
//! `ThreadpoolListener::StopRegion`. A task recorded inside such a region is the same
//! op's. Where a region goes on to run the thunk executor (a `ThunkExecutor::Execute`
//! event, or an op), the op's own work is over: the executor is carrying on with the
//! op's successors, and the op's `end: <op>` event is written only once that is done
//! (and whatever the executor then waits on). So an op completed when the last of its
//! regions did, and never after its `end:`. Task ids are reused in a long capture: a
//! task ran in the first region carrying its id after it was recorded.
//!
//! The host scan gathers the events this needs while it reads each piece of a line
//! ([`PoolEvents::piece`]: the pool's events, and of the executor's events and ops only
//! those that may cut a region); [`tails`] then works from those alone.

use std::ops::Range;

use rayon::prelude::*;
use stepscope_xspace::{Line, Plane};

use crate::records::{stat_u64, DeviceOps, FastMap};

/// What an event is to the pool model.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    /// A task recorded (`ThreadpoolListener::Record`).
    Record,
    /// A task's run starts (`ThreadpoolListener::StartRegion`).
    Start,
    /// A run starts without saying which task's (no `_c`).
    StartUnknown,
    /// A run ends (`ThreadpoolListener::StopRegion`).
    Stop,
    /// The executor carries on (`ThunkExecutor::Execute…`, or an op): cuts an open run.
    Cut,
}

/// One event of a line that the pool model reads: where it starts, its index on the
/// line, what it is, and its task id (records and starts; 0 for the others).
#[derive(Clone, Copy, Debug)]
pub(crate) struct PoolEvent {
    at: i64,
    task: u64,
    index: u32,
    kind: Kind,
}

/// The metadata of a plane's pool events.
pub(crate) struct PoolEvents {
    /// Per event metadata: what its events are to the pool model, if anything (the
    /// executor's `ThunkExecutor::Execute…` events are cuts; ops are found by their
    /// `hlo_op` stat instead).
    kinds: Vec<Option<Kind>>,
    /// Per event metadata: whether `kinds` holds something for it.
    visit: Vec<bool>,
    /// The stat ids of the flow ids: `_p` (a record's task) and `_c` (a start's).
    flows: (u32, u32),
}

impl PoolEvents {
    /// The plane's pool events, where it has all three kinds. `flows`: the stat ids
    /// of `_p` and `_c`.
    pub(crate) fn of(plane: &Plane, flows: (u32, u32)) -> Option<PoolEvents> {
        let kind = |name: &str| match name {
            "ThreadpoolListener::Record" => Some(Kind::Record),
            "ThreadpoolListener::StartRegion" => Some(Kind::Start),
            "ThreadpoolListener::StopRegion" => Some(Kind::Stop),
            _ if name.starts_with("ThunkExecutor::Execute") => Some(Kind::Cut),
            _ => None,
        };
        let kinds: Vec<Option<Kind>> = (0..plane.event_meta.len() as u32).map(|m| kind(plane.event_name(m))).collect();
        let has = |k: Kind| kinds.contains(&Some(k));
        if !(has(Kind::Record) && has(Kind::Start) && has(Kind::Stop)) {
            return None;
        }
        let visit = kinds.iter().map(Option::is_some).collect();
        Some(PoolEvents { kinds, visit, flows })
    }

    /// Starts gathering the pool model's events among `events` of `line` (a piece of
    /// the host scan, which tells it of every op met: [`PieceScan::op`]). `sorted`:
    /// whether the whole line's events are in time order; then only the cuts that may
    /// end a run are kept.
    pub(crate) fn piece<'a>(
        &'a self,
        plane: &'a Plane,
        line: &'a Line,
        events: Range<usize>,
        sorted: bool,
    ) -> PieceScan<'a, impl Iterator<Item = usize> + 'a> {
        PieceScan {
            pool: self,
            plane,
            line,
            hits: line.events_with_meta_in(&self.visit, events).peekable(),
            kept: Gather::new(sorted),
        }
    }
}

/// Whether a run may be open at this point of a piece of a sorted line (what decides
/// whether a cut is kept).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Run {
    /// Not known yet: the piece's start (a run may have started in the piece before).
    Unknown,
    /// A run is open and not yet cut.
    Open,
    /// No run is open, or it was cut.
    Closed,
    /// The line's events are not in time order: every cut is kept (sorted later).
    KeepAll,
}

/// The pool model's events of one piece of a line, gathered during the host scan in
/// line order: every record, start and stop, and the cuts that may end a run.
pub(crate) struct PieceScan<'a, I: Iterator<Item = usize>> {
    pool: &'a PoolEvents,
    plane: &'a Plane,
    line: &'a Line,
    /// The piece's pool and executor events not yet taken.
    hits: std::iter::Peekable<I>,
    kept: Gather,
}

impl<I: Iterator<Item = usize>> PieceScan<'_, I> {
    /// Op event `i` (which starts at `at`), met by the host scan in line order.
    pub(crate) fn op(&mut self, i: usize, at: i64) {
        while let Some(j) = self.hits.next_if(|&j| j < i) {
            self.event(j);
        }
        self.kept.take(PoolEvent { at, task: 0, index: i as u32, kind: Kind::Cut });
    }

    /// The piece's pool model events, in line order.
    pub(crate) fn finish(mut self) -> Vec<PoolEvent> {
        while let Some(j) = self.hits.next() {
            self.event(j);
        }
        self.kept.out
    }

    /// Takes pool or executor event `i`.
    fn event(&mut self, i: usize) {
        let Some(kind) = self.pool.kinds[self.line.meta(i) as usize] else { return };
        let at = self.line.start_ps(i);
        let key = match kind {
            Kind::Record => Some(self.pool.flows.0),
            Kind::Start => Some(self.pool.flows.1),
            Kind::Stop | Kind::StartUnknown | Kind::Cut => None,
        };
        let task = key.and_then(|k| stat_u64(self.plane, self.plane.event_stat(self.line, i, k)));
        let kind = match (kind, task) {
            // A record without its id: no task to follow.
            (Kind::Record, None) => return,
            (Kind::Start, None) => Kind::StartUnknown,
            _ => kind,
        };
        self.kept.take(PoolEvent { at, task: task.unwrap_or(0), index: i as u32, kind });
    }
}

/// A piece's pool model events as they are met in line order: all but the cuts that
/// cannot end a run (where the line is in time order).
struct Gather {
    state: Run,
    out: Vec<PoolEvent>,
}

impl Gather {
    fn new(sorted: bool) -> Gather {
        Gather { state: if sorted { Run::Unknown } else { Run::KeepAll }, out: Vec::new() }
    }

    fn take(&mut self, e: PoolEvent) {
        let state = match (self.state, e.kind) {
            (Run::KeepAll, _) => Run::KeepAll,
            (_, Kind::Start | Kind::StartUnknown) => Run::Open,
            (_, Kind::Stop) => Run::Closed,
            // A cut where no run is open, or after its first cut: nothing to end.
            (Run::Closed, Kind::Cut) => return,
            (_, Kind::Cut) => Run::Closed,
            (state, Kind::Record) => state,
        };
        self.state = state;
        self.out.push(e);
    }
}

/// An op's place among its device's records and the flow id that links it to its
/// completion.
pub(crate) type Flow = (u32, u64);

/// Per device, per record of `devices` (XLA:CPU ops of `plane`), how long after
/// its event ended its op completed, ps: until the last of its pool tasks ended,
/// and never after the `end:` its flow id (`flows`, per device: each record that has
/// one, by its place) leads to (`ends`: flow id → start). Only ops whose `end:` comes after
/// their events have a tail. A device's list is empty where none has one.
/// `events`: per line, the pool model's events its pieces gathered
/// ([`PoolEvents::piece`]), in line order.
pub(crate) fn tails(
    plane: &Plane,
    devices: &[DeviceOps],
    flows: &[Vec<Flow>],
    ends: &FastMap<u64, i64>,
    events: Vec<Vec<PoolEvent>>,
) -> Vec<Vec<i64>> {
    let mut out = vec![Vec::new(); devices.len()];
    let (late_on, late) = late_ops(plane, devices, flows, ends);
    if late.is_empty() {
        return out;
    }
    let found: Vec<LinePool> = (plane.lines.par_iter().zip(events).zip(&late_on))
        .map(|((line, events), late)| scan_line(line, late, &events))
        .collect();
    // The regions by task id, then start: (task, start, line, region index).
    let mut ran: Vec<(u64, i64, u32, u32)> = (found.iter().enumerate())
        .flat_map(|(line, f)| f.regions.iter().enumerate().map(move |(k, r)| (r.task, r.start, line as u32, k as u32)))
        .collect();
    ran.par_sort_unstable();
    // Each late op's tasks, from those it recorded: where each ran (the first
    // region carrying its id that starts after it was recorded, no later than the
    // op's `end:`),
    // and the tasks recorded in that region before it was cut, in turn. Per late op,
    // when the last of its regions ended.
    let mut pool_end: Vec<i64> = vec![i64::MIN; late.len()];
    let ends_of: Vec<(u32, i64)> = (found.par_iter().flat_map_iter(|f| &f.by_late))
        .map(|&(r, owner)| {
            let end = late[owner as usize].end;
            let mut last = i64::MIN;
            let mut todo = vec![r];
            while let Some(r) = todo.pop() {
                // A region that starts after the record: each step of the chain
                // goes later, so a damaged file cannot make it loop.
                let Some(&(task, start, line, k)) = ran.get(ran.partition_point(|x| (x.0, x.1) <= (r.task, r.at)))
                else {
                    continue;
                };
                if task != r.task || start > end {
                    continue;
                }
                let region = &found[line as usize].regions[k as usize];
                last = last.max(region.until);
                let inside = &found[line as usize].in_regions;
                let from = inside.partition_point(|x| x.at < region.start);
                todo.extend(inside[from..].iter().take_while(|x| x.at <= region.until));
            }
            (owner, last)
        })
        .collect();
    for (owner, last) in ends_of {
        pool_end[owner as usize] = pool_end[owner as usize].max(last);
    }
    for (op, pool) in late.iter().zip(pool_end) {
        let tail = pool.min(op.end).saturating_sub(op.event_end);
        if tail > 0 {
            let tails = &mut out[op.device as usize];
            tails.resize(devices[op.device as usize].recs.len(), 0);
            tails[op.rec as usize] = tail;
        }
    }
    out
}

/// A line's tasks recorded inside late ops' events (`late`, by start), its regions,
/// each cut at its first executor event or op, and the tasks recorded inside those
/// before the cut. `events`: what the line's pieces gathered, in line order.
fn scan_line(line: &Line, late: &[Late], events: &[PoolEvent]) -> LinePool {
    let mut out = LinePool::default();
    if !events.iter().any(|e| e.kind == Kind::Start || e.kind == Kind::Record) {
        // No task recorded or run here (a Python thread's line).
        return out;
    }
    // The open region: (task, start, where it was cut).
    let mut open: Option<(Option<u64>, i64, Option<i64>)> = None;
    let mut visit = |e: &PoolEvent| match e.kind {
        Kind::Record => {
            let r = Recorded { at: e.at, task: e.task };
            if let Some(owner) = holder(late, e.at) {
                out.by_late.push((r, owner));
            } else if matches!(open, Some((_, _, None))) {
                // A task recorded after a region was cut is the executor's.
                out.in_regions.push(r);
            }
        }
        Kind::Start => open = Some((Some(e.task), e.at, None)),
        Kind::StartUnknown => open = Some((None, e.at, None)),
        Kind::Stop => {
            if let Some((Some(task), start, cut)) = open.take() {
                out.regions.push(Region { start, until: cut.unwrap_or(e.at), task });
            }
        }
        Kind::Cut => {
            if let Some((_, _, cut @ None)) = open.as_mut() {
                // An executor event or op: the region's task is done.
                *cut = Some(e.at);
            }
        }
    };
    // In time order (a line's events may be stored in any order; for a line in order
    // they already are): by start, then as stored, or the other way for a line stored
    // backwards.
    let reversed = line.len() > 1 && line.start_ps(0) > line.start_ps(line.len() - 1);
    let key = |e: &PoolEvent| (e.at, if reversed { -(e.index as i64) } else { e.index as i64 });
    if events.is_sorted_by_key(key) {
        events.iter().for_each(&mut visit);
    } else {
        let mut order = events.to_vec();
        order.sort_unstable_by_key(key);
        order.iter().for_each(&mut visit);
    }
    out
}

/// A task's run on a pool thread: from its `StartRegion` until its `StopRegion` or the
/// first executor event or op inside it, whichever comes first.
#[derive(Debug, PartialEq)]
struct Region {
    start: i64,
    until: i64,
    task: u64,
}

/// A task recorded on a line: when, and its id.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Recorded {
    at: i64,
    task: u64,
}

/// An op that completed after its event (a late op): its record, where its event
/// ends and where its `end:` starts.
struct LateOp {
    device: u32,
    rec: u32,
    event_end: i64,
    end: i64,
}

/// A late op's event on its line: (start, end, its index in the late ops).
type Late = (i64, i64, u32);

/// What one line's scan found: the tasks recorded inside late ops' events (with the
/// late op), the regions the line ran, and the tasks recorded inside those regions
/// before they were cut.
#[derive(Default, Debug, PartialEq)]
struct LinePool {
    by_late: Vec<(Recorded, u32)>,
    regions: Vec<Region>,
    in_regions: Vec<Recorded>,
}

/// The ops whose `end:` comes after their events (few: the pool's), and per line of
/// `plane` their events, by start.
fn late_ops(
    plane: &Plane,
    devices: &[DeviceOps],
    flows: &[Vec<Flow>],
    ends: &FastMap<u64, i64>,
) -> (Vec<Vec<Late>>, Vec<LateOp>) {
    let mut late_on: Vec<Vec<Late>> = vec![Vec::new(); plane.lines.len()];
    let mut late: Vec<LateOp> = Vec::new();
    for (d, (ops, flows)) in devices.iter().zip(flows).enumerate() {
        for &(i, flow) in flows {
            let (Some(&end), Some(r)) = (ends.get(&flow), ops.recs.get(i as usize)) else { continue };
            let start = r.start_ps(plane);
            let event_end = start.saturating_add(r.duration_ps(plane));
            if let Some(on) = late_on.get_mut(r.line as usize).filter(|_| end > event_end) {
                on.push((start, event_end, late.len() as u32));
                late.push(LateOp { device: d as u32, rec: i, event_end, end });
            }
        }
    }
    late_on.iter_mut().for_each(|on| on.sort_unstable());
    (late_on, late)
}

/// The late op whose event holds the instant `at` on its line (`late`: the line's, by
/// start).
fn holder(late: &[Late], at: i64) -> Option<u32> {
    let k = late.partition_point(|o| o.0 <= at);
    let &(_, end, owner) = late.get(k.checked_sub(1)?)?;
    (at <= end).then_some(owner)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A line's pool model events in time order, made up from `seed`: runs of tasks
    /// (some without an id) with records, executor events and ops before, inside and
    /// between them.
    fn made_up(mut seed: u64, n: usize) -> Vec<PoolEvent> {
        let mut next = move |m: u64| {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (seed >> 33) % m
        };
        let mut at = 0;
        (0..n)
            .map(|index| {
                at += 1 + next(9) as i64;
                let (kind, task) = match next(100) {
                    0..15 => (Kind::Start, 1 + next(20)),
                    15..17 => (Kind::StartUnknown, 0),
                    17..32 => (Kind::Stop, 0),
                    32..60 => (Kind::Record, 1 + next(20)),
                    _ => (Kind::Cut, 0),
                };
                PoolEvent { at, task, index: index as u32, kind }
            })
            .collect()
    }

    #[test]
    fn a_pieces_events_keep_every_cut_that_ends_a_run() {
        let line = Line::default();
        // Late ops' events on the line: (start, end, index), by start.
        let late: Vec<Late> = (0..40).map(|k| (k * 50, k * 50 + 20, k as u32)).collect();
        let mut dropped = 0;
        for seed in 0..300 {
            let all = made_up(seed, 400);
            let whole = scan_line(&line, &late, &all);
            assert!(!whole.regions.is_empty() && !whole.by_late.is_empty() && !whole.in_regions.is_empty());
            for piece in [1, 2, 3, 5, 64, 400] {
                let mut kept = Vec::new();
                for events in all.chunks(piece) {
                    let mut gather = Gather::new(true);
                    events.iter().for_each(|&e| gather.take(e));
                    kept.extend(gather.out);
                }
                assert_eq!(scan_line(&line, &late, &kept), whole, "seed {seed}, pieces of {piece}");
                dropped += all.len() - kept.len();
            }
            // A line out of time order keeps every event.
            let mut gather = Gather::new(false);
            all.iter().for_each(|&e| gather.take(e));
            assert_eq!(gather.out.len(), all.len());
        }
        assert!(dropped > 0);
    }
}
