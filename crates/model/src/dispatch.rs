//! Which host call dispatched each XLA:CPU program run (read before the steps are
//! measured).
//!
//! JAX returns from a jitted call before the program has run: a loop that never waits
//! dispatches steps ahead of the device, and the device runs a step's work while the
//! host is several steps further on. XLA:CPU ops carry the `run_id` of the program
//! execution they belong to; the host call that dispatched it (`PjitFunction(f)`, the
//! outermost such event on its line) carries none. A program's run ids count up in the
//! order its runs were dispatched, so the k-th dispatch of a program in the capture
//! started its (s + k)-th run, where the first s runs were dispatched before the
//! capture began. s is the smallest offset the profile allows: no run starts before
//! the call that dispatched it, and no dispatch in the capture started two runs (so at
//! least `runs - dispatches` came before). It is exact when the capture holds all the
//! work its dispatches started (a loop that waits at the end, stepscope's helpers) or
//! when the runs' start times tell. Where the capture stopped inside a run of the
//! program, later dispatches may have run after it, and s is not known: then no
//! dispatch of the host is tied to a run (a step's work would be known in part), and
//! what is known is counted (at least `dispatches - runs` of them ran after the
//! capture).
//!
//! A dispatch is tied to a program by name: `PjitFunction(train_step)` dispatches
//! `jit_train_step`. Names that two programs share (two functions called `step`, one
//! function compiled for two shapes) tie nothing.

use rayon::prelude::*;
use stepscope_xspace::{Plane, Space};

use crate::device::{host_cpu_plane, Device, OpSource};
use crate::records::FastMap;

/// One program run on one device: its ops' time.
pub struct Run {
    /// The first op's start and the last op's end.
    pub start_ps: i64,
    pub end_ps: i64,
    /// Its ops, counted.
    pub ops: u32,
    /// Its ops: their records' indices in the device's ops (their spans are read from
    /// the records where a window's work is measured, not kept twice).
    pub recs: Vec<u32>,
    /// The first or last run of its program on its device with fewer ops than the
    /// program's runs have at most: the capture began or ended inside it.
    pub cut: bool,
}

/// A host's calls, each linked to the program run it started: XLA:CPU dispatches, or
/// the calls that enqueued a TPU's runs ([`crate::enqueue`]).
#[derive(Default)]
pub struct Dispatches {
    /// Each dispatch whose run the capture holds, by start: (dispatch start, program
    /// key, run id).
    pub linked: Vec<(i64, u32, i64)>,
    /// The starts of dispatches whose run the capture does not hold (it stopped first).
    pub unran: Vec<i64>,
    /// Dispatches of programs whose runs could not be told apart (the capture stopped
    /// inside one of their runs, with more dispatched than it holds runs of): how many
    /// of them, at least, started no run the capture holds.
    pub unran_at_least: usize,
    /// Per device of the host (its index in the profile's devices): its runs.
    pub runs: Vec<(usize, DeviceRuns)>,
}

/// A program run: (program key, run id).
pub type RunKey = (u32, i64);

/// A device's program runs.
pub type DeviceRuns = FastMap<RunKey, Run>;

impl Dispatches {
    pub fn is_empty(&self) -> bool {
        self.linked.is_empty() && self.unran.is_empty()
    }
}

/// Per host (in `hosts` order): its XLA:CPU dispatches linked to their runs; empty on
/// a host whose device is not its CPU or whose ops carry no `run_id`.
pub fn host_dispatches(hosts: &[Space], devices: &[Device]) -> Vec<Dispatches> {
    (hosts.par_iter().enumerate())
        .map(|(hi, space)| {
            let cpu: Vec<&Device> =
                devices.iter().filter(|d| d.host_index == hi && d.source == OpSource::HostOps).collect();
            match host_cpu_plane(space) {
                Some(plane) if !cpu.is_empty() => dispatches(plane, &cpu),
                _ => Dispatches::default(),
            }
        })
        .collect()
}

/// The name a program is known by on both sides: `jit_train_step` and
/// `PjitFunction(train_step)` are `trainstep`; `jit__lambda` and `<lambda>` are
/// `lambda`.
fn program_key(name: &str) -> String {
    let name = ["jit_", "pmap_", "xmap_"].iter().find_map(|p| name.strip_prefix(p)).unwrap_or(name);
    name.chars().filter(|c| c.is_alphanumeric()).flat_map(char::to_lowercase).collect()
}

/// The function a dispatch event calls: `PjitFunction(f)` → `f`.
fn dispatched(event_name: &str) -> Option<&str> {
    ["PjitFunction(", "PmapFunction("]
        .iter()
        .find_map(|p| event_name.strip_prefix(p))
        .and_then(|rest| rest.strip_suffix(')'))
}

fn dispatches(plane: &Plane, cpu: &[&Device]) -> Dispatches {
    // Program keys, interned, and per key the runs' program ids (a key with several
    // programs ties nothing).
    let mut keys: FastMap<String, u32> = FastMap::default();
    let mut intern = |k: String| {
        let n = keys.len() as u32;
        *keys.entry(k).or_insert(n)
    };
    let mut runs: Vec<(usize, DeviceRuns)> = Vec::new();
    let mut programs: FastMap<u32, Vec<u64>> = FastMap::default();
    for d in cpu {
        let ops = d.cached_ops();
        let key_of: Vec<u32> = ops.names.iter().map(|n| intern(program_key(n))).collect();
        // The ops by run, each with its run's first start and last end; a run's ops
        // mostly come one after another.
        let mut gathered: FastMap<RunKey, Gathered> = FastMap::default();
        let mut current: Option<(RunKey, Gathered)> = None;
        for (i, r) in ops.recs.iter().enumerate() {
            let Some(run) = ops.run_id(r) else { continue };
            let at = (key_of[r.module as usize], run);
            let (_, start, end, _) = ops.span(d.plane, i);
            match &mut current {
                Some((k, v)) if *k == at => v.push(start, end, i as u32),
                _ => {
                    if let Some((k, v)) =
                        current.replace((at, Gathered { start_ps: start, end_ps: end, recs: vec![i as u32] }))
                    {
                        gathered.entry(k).or_default().extend(v);
                    }
                    if let crate::records::RecStats::Program(Some(p)) = ops.rec_stats(r) {
                        let seen = programs.entry(at.0).or_default();
                        if !seen.contains(&p) {
                            seen.push(p);
                        }
                    }
                }
            }
        }
        if let Some((k, v)) = current {
            gathered.entry(k).or_default().extend(v);
        }
        let mut mine: DeviceRuns = gathered
            .into_iter()
            .map(|(k, Gathered { start_ps, end_ps, recs })| {
                (k, Run { start_ps, end_ps, ops: recs.len() as u32, recs, cut: false })
            })
            .collect();
        mark_cut(&mut mine);
        runs.push((d.index, mine));
    }
    let tied = |key: u32| programs.get(&key).is_none_or(|p| p.len() <= 1);

    // The outermost dispatch events of each line, by program key.
    let mut calls: FastMap<u32, Vec<i64>> = FastMap::default();
    let meta_key: Vec<Option<u32>> = (plane.event_meta.iter())
        .map(|m| dispatched(plane.text(m.name)).and_then(|f| keys.get(&program_key(f)).copied()))
        .collect();
    let mask: Vec<bool> = meta_key.iter().map(Option::is_some).collect();
    for line in &plane.lines {
        let mut found: Vec<(i64, i64, u32)> = line
            .events_with_meta(&mask)
            .filter_map(|i| Some((line.start_ps(i), line.end_ps(i), meta_key[line.meta(i) as usize]?)))
            .collect();
        found.sort_unstable_by_key(|&(start, end, _)| (start, std::cmp::Reverse(end)));
        let mut outer_end = i64::MIN;
        for (start, end, key) in found {
            if start < outer_end {
                continue; // inside a dispatch: the same call's inner event, or a call made while tracing
            }
            outer_end = end;
            calls.entry(key).or_default().push(start);
        }
    }

    let mut out = Dispatches { runs, ..Dispatches::default() };
    for (key, mut starts) in calls {
        if !tied(key) {
            continue;
        }
        starts.sort_unstable();
        // The program's runs on the host (one run id on every device it ran on), in
        // dispatch order, each with its first op's start.
        let mut first: FastMap<i64, i64> = FastMap::default();
        for (_, runs) in &out.runs {
            for (&(_, run), r) in runs.iter().filter(|((k, _), _)| *k == key) {
                let e = first.entry(run).or_insert(r.start_ps);
                *e = (*e).min(r.start_ps);
            }
        }
        let mut order: Vec<(i64, i64)> = first.into_iter().collect();
        order.sort_unstable();
        if order.is_empty() {
            out.unran.extend(starts);
            continue;
        }
        let run_starts: Vec<i64> = order.iter().map(|r| r.1).collect();
        let s = offset(&starts, &run_starts);
        // A capture that stopped inside a run of the program may have stopped before
        // the runs of later dispatches, leaving s undecided (more runs than it counts
        // may have come before the capture): then no dispatch is tied to a run.
        let last = order.last().map(|r| r.0);
        let stopped_inside =
            out.runs.iter().any(|(_, runs)| last.and_then(|l| runs.get(&(key, l))).is_some_and(|r| r.cut));
        if stopped_inside && s < order.len() {
            out.unran_at_least += starts.len().saturating_sub(order.len());
            continue;
        }
        for (j, &start) in starts.iter().enumerate() {
            match order.get(j + s) {
                Some(&(run, _)) => out.linked.push((start, key, run)),
                None => out.unran.push(start),
            }
        }
    }
    if out.unran_at_least > 0 {
        // A window's work is known only where all its dispatches are tied: none is.
        out.unran_at_least += out.unran.len();
        out.linked.clear();
        out.unran.clear();
    }
    out.linked.sort_unstable();
    out.unran.sort_unstable();
    out
}

/// The number of runs dispatched before the capture: the smallest s with
/// `run_starts[j + s] >= dispatch_starts[j]` for every dispatch j that has a run, and
/// at least `runs - dispatches`. Run starts are taken as their running maximum (a run
/// starts after the runs dispatched before it, give or take a thread).
fn offset(dispatch_starts: &[i64], run_starts: &[i64]) -> usize {
    let n = run_starts.len();
    let mut rising = run_starts.to_vec();
    for k in 1..n {
        rising[k] = rising[k].max(rising[k - 1]);
    }
    let mut s = n.saturating_sub(dispatch_starts.len());
    for (j, &d) in dispatch_starts.iter().enumerate() {
        // The first run that starts no earlier than dispatch j.
        let k = rising.partition_point(|&t| t < d);
        if k >= n {
            break; // this dispatch and the later ones ran after the capture
        }
        s = s.max(k.saturating_sub(j));
    }
    s.min(n)
}

/// A run's ops as they are gathered: the first start, the last end, the records.
struct Gathered {
    start_ps: i64,
    end_ps: i64,
    recs: Vec<u32>,
}

impl Default for Gathered {
    fn default() -> Gathered {
        Gathered { start_ps: i64::MAX, end_ps: i64::MIN, recs: Vec::new() }
    }
}

impl Gathered {
    fn push(&mut self, start_ps: i64, end_ps: i64, rec: u32) {
        (self.start_ps, self.end_ps) = (self.start_ps.min(start_ps), self.end_ps.max(end_ps));
        self.recs.push(rec);
    }

    fn extend(&mut self, other: Gathered) {
        (self.start_ps, self.end_ps) = (self.start_ps.min(other.start_ps), self.end_ps.max(other.end_ps));
        self.recs.extend(other.recs);
    }
}

/// Marks the runs the capture cut: per program, its first and last run where it holds
/// fewer ops than the program's fullest run.
fn mark_cut(runs: &mut DeviceRuns) {
    /// Per program: the most ops a run has, its first and last run (start, id).
    struct Edges {
        most: u32,
        first: (i64, i64),
        last: (i64, i64),
    }
    let mut per_key: FastMap<u32, Edges> = FastMap::default();
    for (&(key, run), r) in runs.iter() {
        let at = (r.start_ps, run);
        let e = per_key.entry(key).or_insert(Edges { most: 0, first: at, last: at });
        e.most = e.most.max(r.ops);
        e.first = e.first.min(at);
        e.last = e.last.max(at);
    }
    for (key, e) in per_key {
        for (_, run) in [e.first, e.last] {
            if let Some(r) = runs.get_mut(&(key, run)) {
                r.cut = r.ops < e.most;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{dispatched, offset, program_key};

    #[test]
    fn a_call_and_its_program_share_a_key() {
        assert_eq!(program_key("jit_train_step"), program_key(dispatched("PjitFunction(train_step)").unwrap()));
        assert_eq!(program_key("jit__lambda"), program_key(dispatched("PjitFunction(<lambda>)").unwrap()));
        assert_ne!(program_key("jit_stage"), program_key("jit_train_step"));
        assert_eq!(dispatched("PjitFunction(stage)"), Some("stage"));
        assert_eq!(dispatched("CommonPjRtLoadedExecutable::Execute (jit_stage)"), None);
    }

    #[test]
    fn runs_dispatched_before_the_capture_are_counted_off() {
        // A loop that waits: each run starts right after its dispatch.
        assert_eq!(offset(&[10, 20, 30], &[12, 22, 32]), 0);
        // Two runs queued before the capture, then three dispatched in it and run.
        assert_eq!(offset(&[10, 11, 12], &[1, 50, 100, 150, 200]), 2);
        // A run that starts before the first dispatch came before the capture, even
        // where the capture stopped before the last dispatch's run.
        assert_eq!(offset(&[10, 11, 12], &[1, 50, 100]), 1);
        // The capture stopped before the last two dispatches ran.
        assert_eq!(offset(&[10, 20, 30, 40], &[12, 22]), 0);
        assert_eq!(offset(&[], &[1, 2]), 2);
        assert_eq!(offset(&[5], &[]), 0);
    }
}
