//! Which host call enqueued each program run of a device that records its runs with
//! flows (TPU: read before the steps are measured).
//!
//! A TPU's `XLA Modules` line holds each program run, and each run ends a flow (`_c`)
//! that a host event started (`_p`): the runtime's `DoEnqueueProgram`. That event is
//! seldom the user's call: JAX hands a jitted call's execution to other threads, each
//! hop a flow of its own (`TfrtTpuLoadedExecutable::Execute` on the calling thread
//! starts one that `Scheduled TfrtTpuLoadedExecutable::Execute` ends on an execute
//! thread, whose `tpu::System::Execute` starts one that a queue thread's event ends,
//! inside which `DoEnqueueProgram` runs). So a run is followed back: from the event
//! that started its flow to the innermost event on that event's line that holds it and
//! ends a flow, to the event that started that one, and on, until an event holds none.
//! The run was enqueued where that chain began: on the thread that made the call, at
//! its start. A loop that never waits returns from its calls long before their runs
//! (25 s ahead on the TPU v6e inference capture), and this ties each run to the call,
//! so a host window (a step, a scope) is credited the runs it enqueued.
//!
//! The links are kept as [`Dispatches`], as XLA:CPU's are: each run is keyed by its
//! program's event metadata and its flow's id, on the one device that ran it. A flow
//! start of a kind that enqueued runs elsewhere (its event's name) whose run the
//! capture does not hold was enqueued after the capture stopped: its window's work is
//! known in part.

use rayon::prelude::*;
use stepscope_xspace::{Plane, Space, Stat, StatValue};

use crate::device::{host_cpu_plane, Device, OpSource};
use crate::dispatch::{host_dispatches, DeviceRuns, Dispatches, Run};
use crate::records::{FastMap, ReleaseBehind};

/// The most hops followed from a run back to the call that enqueued it (the TPU
/// runtime takes three; a longer chain, or a loop of flows, stops there).
const MAX_HOPS: usize = 16;

/// A host event that starts or ends a flow, as read.
#[derive(Clone, Copy)]
struct FlowEvent {
    start_ps: i64,
    end_ps: i64,
    meta: u32,
    /// The flow it starts (`_p`).
    starts: Option<u64>,
    /// The flow it ends (`_c`).
    ends: Option<u64>,
}

/// A host event that starts a flow: its start, its metadata and the flow ended by the
/// innermost event of its line that holds it (itself included), if any.
#[derive(Clone, Copy)]
struct FlowStart {
    start_ps: i64,
    meta: u32,
    from: Option<u64>,
}

/// Per host (in `hosts` order): the calls linked to the program runs they started:
/// XLA:CPU's dispatches ([`host_dispatches`]), or on a host whose devices' runs end
/// flows (TPU), the calls that enqueued them.
pub fn host_calls(hosts: &[Space], devices: &[Device]) -> Vec<Dispatches> {
    let mut out = host_dispatches(hosts, devices);
    (out.par_iter_mut().zip(hosts).enumerate()).filter(|(_, (d, _))| d.runs.is_empty()).for_each(|(hi, (d, space))| {
        let flowing: Vec<&Device> =
            devices.iter().filter(|d| d.host_index == hi && d.source == OpSource::XlaOpsLine).collect();
        if let (Some(plane), false) = (host_cpu_plane(space), flowing.is_empty()) {
            *d = dispatches(plane, &flowing);
        }
    });
    out
}

/// The host's program runs on `devices` (those of one host whose `XLA Modules` line
/// ends flows) linked to the calls on `host` that enqueued them; empty where no run
/// ends a flow the host started.
fn dispatches(host: &Plane, devices: &[&Device]) -> Dispatches {
    let runs: Vec<(&Device, Vec<FlowRun>)> = devices.iter().map(|&d| (d, flow_runs(d))).collect();
    if runs.iter().all(|(_, r)| r.is_empty()) {
        return Dispatches::default();
    }
    let starts = flow_starts(host);
    let origin = |flow: u64| {
        let mut at = *starts.get(&flow)?;
        for _ in 0..MAX_HOPS {
            match at.from.and_then(|f| starts.get(&f)) {
                Some(&up) => at = up,
                None => break,
            }
        }
        Some(at.start_ps)
    };
    let mut out = Dispatches::default();
    // The kinds of flow start that enqueued a run the capture holds.
    let mut enqueuing: Vec<u32> = Vec::new();
    let mut ran: Vec<u64> = Vec::new();
    for (d, found) in runs {
        let mut mine = DeviceRuns::default();
        let spans = op_spans(d);
        for FlowRun { flow, meta, start_ps, end_ps } in found {
            let Some(from) = origin(flow) else { continue };
            if let Some(s) = starts.get(&flow).filter(|s| !enqueuing.contains(&s.meta)) {
                enqueuing.push(s.meta);
            }
            ran.push(flow);
            let run = flow as i64;
            out.linked.push((from, meta, run));
            // The run's ops: those that start inside it.
            let lo = spans.partition_point(|s| s.0 < start_ps);
            let hi = spans.partition_point(|s| s.0 < end_ps);
            let recs: Vec<u32> = spans[lo..hi.max(lo)].iter().map(|s| s.1).collect();
            mine.insert((meta, run), Run { start_ps, end_ps, ops: recs.len() as u32, recs, cut: false });
        }
        out.runs.push((d.index, mine));
    }
    ran.sort_unstable();
    for (&flow, s) in &starts {
        if enqueuing.contains(&s.meta) && ran.binary_search(&flow).is_err() {
            out.unran.extend(origin(flow));
        }
    }
    out.linked.sort_unstable();
    // A call enqueues a run on each chip it runs on: one call, one start.
    out.unran.sort_unstable();
    out.unran.dedup();
    out
}

/// A flow id as recorded: the runtime writes the 64 bits as a signed or an unsigned
/// integer (the device's and the host's sides may differ).
fn flow_id(plane: &Plane, s: Option<Stat>) -> Option<u64> {
    let s = s?;
    match s.value() {
        StatValue::I64(v) => Some(v as u64),
        StatValue::U64(v) => Some(v),
        _ => plane.stat_i64(&s).map(|v| v as u64),
    }
}

/// A device's program run that ends a flow.
struct FlowRun {
    flow: u64,
    /// Its event's metadata on the device plane (the program).
    meta: u32,
    start_ps: i64,
    end_ps: i64,
}

/// Device `d`'s program runs that end a flow.
fn flow_runs(d: &Device) -> Vec<FlowRun> {
    let Some(line) = d.plane.line("XLA Modules") else { return Vec::new() };
    let look = d.plane.stat_lookup([d.keys.flow_in]);
    let found = (d.plane.events_maybe_with(&look, line, 0..line.len()))
        .filter_map(|i| {
            let [c] = d.plane.stats_of(&look, line, i);
            Some(FlowRun {
                flow: flow_id(d.plane, c)?,
                meta: line.meta(i),
                start_ps: line.start_ps(i),
                end_ps: line.end_ps(i),
            })
        })
        .collect();
    line.release_stats(0..line.len());
    found
}

/// Device `d`'s ops by start: each op's start and record index.
fn op_spans(d: &Device) -> Vec<(i64, u32)> {
    let ops = d.cached_ops();
    let mut spans: Vec<(i64, u32)> = (0..ops.recs.len()).map(|i| (ops.span(d.plane, i).1, i as u32)).collect();
    spans.sort_unstable();
    spans
}

/// The host's flow starts by flow id, each with the flow ended by the innermost event
/// of its line that holds it. Lines are read in parallel; only events that start or
/// end a flow are looked at (an event that ends none cannot be a hop).
fn flow_starts(host: &Plane) -> FastMap<u64, FlowStart> {
    let look = host.stat_lookup([host.stat_id("_p"), host.stat_id("_c")]);
    let per_line: Vec<Vec<(u64, FlowStart)>> = (host.lines.par_iter())
        .map(|line| {
            let mut release = ReleaseBehind::new(line);
            let mut events: Vec<FlowEvent> = host
                .events_maybe_with(&look, line, 0..line.len())
                .filter_map(|i| {
                    release.at(i);
                    let [p, c] = host.stats_of(&look, line, i);
                    let (starts, ends) = (flow_id(host, p), flow_id(host, c));
                    (starts.is_some() || ends.is_some()).then(|| FlowEvent {
                        start_ps: line.start_ps(i),
                        end_ps: line.end_ps(i),
                        meta: line.meta(i),
                        starts,
                        ends,
                    })
                })
                .collect();
            release.done();
            holders(&mut events)
        })
        .collect();
    per_line.into_iter().flatten().collect()
}

/// For `events` of one line: each flow start with the flow ended by the innermost of
/// them that holds its start.
fn holders(events: &mut [FlowEvent]) -> Vec<(u64, FlowStart)> {
    events.sort_unstable_by_key(|e| (e.start_ps, std::cmp::Reverse(e.end_ps)));
    // The events still open that end a flow: (end, flow).
    let mut open: Vec<(i64, u64)> = Vec::new();
    let mut out = Vec::new();
    for e in events.iter() {
        while open.last().is_some_and(|&(end, _)| end <= e.start_ps) {
            open.pop();
        }
        let from = e.ends.or(open.last().map(|&(_, f)| f));
        if let Some(p) = e.starts {
            out.push((p, FlowStart { start_ps: e.start_ps, meta: e.meta, from }));
        }
        if let Some(c) = e.ends {
            open.push((e.end_ps, c));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{holders, FlowEvent, FlowStart};

    fn from_of(found: &[(u64, FlowStart)], flow: u64) -> Option<u64> {
        found.iter().find(|(f, _)| *f == flow).and_then(|(_, s)| s.from)
    }

    #[test]
    fn a_flow_start_is_held_by_the_innermost_event_that_ends_a_flow() {
        // An execute thread: `Scheduled Execute` (ends 5) holds `System::Execute`
        // (starts 7); a later event (starts 8) holds nothing; an event that both ends
        // 9 and starts 10 is its own holder.
        let event = |start_ps, end_ps, meta, starts, ends| FlowEvent { start_ps, end_ps, meta, starts, ends };
        let mut events = vec![
            event(100, 200, 0, Some(7), None),
            event(90, 300, 1, None, Some(5)),
            event(400, 450, 2, Some(8), None),
            event(500, 600, 3, Some(10), Some(9)),
            event(510, 520, 4, Some(11), None),
        ];
        let found = holders(&mut events);
        assert_eq!(from_of(&found, 7), Some(5));
        assert_eq!(from_of(&found, 8), None);
        assert_eq!(from_of(&found, 10), Some(9));
        assert_eq!(from_of(&found, 11), Some(9));
    }
}
