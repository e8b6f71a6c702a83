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

use std::ops::Range;

use rayon::prelude::*;
use stepscope_xspace::{Line, Plane};

use crate::records::{stat_u64, DeviceOps, FastMap};

/// The metadata of a plane's pool events.
pub(crate) struct PoolEvents {
    record: u32,
    start: u32,
    stop: u32,
    /// Per event metadata: whether it is a `Record` or a `StartRegion` (whose flow ids
    /// the host scan reads).
    flowing: Vec<bool>,
}

impl PoolEvents {
    /// The plane's pool events, where it has all three kinds.
    pub(crate) fn of(plane: &Plane) -> Option<PoolEvents> {
        let find = |name: &str| (0..plane.event_meta.len() as u32).find(|&m| plane.event_name(m) == name);
        let (record, start, stop) = (
            find("ThreadpoolListener::Record")?,
            find("ThreadpoolListener::StartRegion")?,
            find("ThreadpoolListener::StopRegion")?,
        );
        let flowing = (0..plane.event_meta.len() as u32).map(|m| m == record || m == start).collect();
        Some(PoolEvents { record, start, stop, flowing })
    }

    /// The flow ids of the `Record` (`_p`) and `StartRegion` (`_c`) events among
    /// `events` of `line`: (event index, flow id), in order. `flows`: the stat ids of
    /// `_p` and `_c`.
    pub(crate) fn flows_in(
        &self,
        plane: &Plane,
        line: &Line,
        events: Range<usize>,
        (flow_out, flow_in): (u32, u32),
    ) -> Vec<(u32, u64)> {
        (line.events_with_meta_in(&self.flowing, events))
            .filter_map(|i| {
                let key = if line.meta(i) == self.record { flow_out } else { flow_in };
                Some((i as u32, stat_u64(plane, plane.event_stat(line, i, key))?))
            })
            .collect()
    }

    /// Per device, per record of `devices` (XLA:CPU ops of `plane`), how long after
    /// its event ended its op completed, ps: until the last of its pool tasks ended,
    /// and never after the `end:` its flow id (`flows`, per device per record; 0 for
    /// none) leads to (`ends`: flow id → start). Only ops whose `end:` comes after
    /// their events have a tail. A device's list is empty where none has one.
    /// `pool_flows`: per line, what [`PoolEvents::flows_in`] read of it.
    pub(crate) fn tails(
        &self,
        plane: &Plane,
        devices: &[DeviceOps],
        flows: &[Vec<u64>],
        ends: &FastMap<u64, i64>,
        pool_flows: &[Vec<(u32, u64)>],
    ) -> Vec<Vec<i64>> {
        let mut out = vec![Vec::new(); devices.len()];
        let (late_on, late) = late_ops(plane, devices, flows, ends);
        if late.is_empty() {
            return out;
        }
        let mask = self.mask(plane, devices);
        let found: Vec<LinePool> = (plane.lines.par_iter().enumerate())
            .map(|(li, line)| self.scan_line(line, &mask, &late_on[li], &pool_flows[li]))
            .collect();
        // The regions by task id, then start: (task, start, line, region index).
        let mut ran: Vec<(u64, i64, u32, u32)> = (found.iter().enumerate())
            .flat_map(|(line, f)| {
                f.regions.iter().enumerate().map(move |(k, r)| (r.task, r.start, line as u32, k as u32))
            })
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

    /// Per event metadata: whether the pool scan visits its events: the pool's, and
    /// the thunk executor running ops (a `ThunkExecutor::Execute`, or an op: named as
    /// one of `devices`' ops).
    fn mask(&self, plane: &Plane, devices: &[DeviceOps]) -> Vec<bool> {
        let ops: std::collections::HashSet<&str> = devices.iter().flat_map(|d| d.names.iter().map(|n| &**n)).collect();
        (0..plane.event_meta.len() as u32)
            .map(|m| (m, plane.event_name(m)))
            .map(|(m, name)| {
                [self.record, self.start, self.stop].contains(&m)
                    || name.starts_with("ThunkExecutor::Execute")
                    || ops.contains(name)
            })
            .collect()
    }

    /// A line's tasks recorded inside late ops' events (`late`, by start), its
    /// regions, each cut at its first executor event or op (`mask`), and the tasks
    /// recorded inside those before the cut. `flows`: the line's pool events' flow ids.
    fn scan_line(&self, line: &Line, mask: &[bool], late: &[Late], flows: &[(u32, u64)]) -> LinePool {
        let mut out = LinePool::default();
        if flows.is_empty() {
            // No task recorded or run here (a Python thread's line).
            return out;
        }
        let flow = |i: usize| flows.binary_search_by_key(&(i as u32), |f| f.0).ok().map(|k| flows[k].1);
        // The open region: (task, start, where it was cut).
        let mut open: Option<(Option<u64>, i64, Option<i64>)> = None;
        let mut visit = |i: usize| {
            let meta = line.meta(i);
            if meta == self.record {
                let (at, Some(task)) = (line.start_ps(i), flow(i)) else { return };
                let r = Recorded { at, task };
                if let Some(owner) = holder(late, at) {
                    out.by_late.push((r, owner));
                } else if matches!(open, Some((_, _, None))) {
                    // A task recorded after a region was cut is the executor's.
                    out.in_regions.push(r);
                }
            } else if meta == self.start {
                open = Some((flow(i), line.start_ps(i), None));
            } else if meta == self.stop {
                if let Some((Some(task), start, cut)) = open.take() {
                    out.regions.push(Region { start, until: cut.unwrap_or_else(|| line.start_ps(i)), task });
                }
            } else if let Some((_, _, cut @ None)) = open.as_mut() {
                // An executor event or op: the region's task is done.
                *cut = Some(line.start_ps(i));
            }
        };
        // The events of interest in time order (a line's events may be stored in any order).
        let hits = line.events_with_meta(mask);
        if line.starts().is_sorted() {
            hits.for_each(&mut visit);
        } else {
            let reversed = line.len() > 1 && line.start_ps(0) > line.start_ps(line.len() - 1);
            let mut order: Vec<(i64, isize, usize)> =
                hits.map(|i| (line.start_ps(i), if reversed { -(i as isize) } else { i as isize }, i)).collect();
            order.sort_unstable();
            order.into_iter().for_each(|(_, _, i)| visit(i));
        }
        out
    }
}

/// A task's run on a pool thread: from its `StartRegion` until its `StopRegion` or the
/// first executor event or op inside it, whichever comes first.
struct Region {
    start: i64,
    until: i64,
    task: u64,
}

/// A task recorded on a line: when, and its id.
#[derive(Clone, Copy)]
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
#[derive(Default)]
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
    flows: &[Vec<u64>],
    ends: &FastMap<u64, i64>,
) -> (Vec<Vec<Late>>, Vec<LateOp>) {
    let mut late_on: Vec<Vec<Late>> = vec![Vec::new(); plane.lines.len()];
    let mut late: Vec<LateOp> = Vec::new();
    for (d, (ops, flows)) in devices.iter().zip(flows).enumerate() {
        for (i, &flow) in flows.iter().enumerate().filter(|(_, &f)| f != 0) {
            let (Some(&end), Some(r)) = (ends.get(&flow), ops.recs.get(i)) else { continue };
            let start = r.start_ps(plane);
            let event_end = start.saturating_add(r.duration_ps(plane));
            if let Some(on) = late_on.get_mut(r.line as usize).filter(|_| end > event_end) {
                on.push((start, event_end, late.len() as u32));
                late.push(LateOp { device: d as u32, rec: i as u32, event_end, end });
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
