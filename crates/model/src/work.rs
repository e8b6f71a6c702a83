//! The device work a host window launched (a step, a scope): on GPUs the kernels and
//! copies whose `correlation_id` links them to a launch in the window; on XLA:CPU the
//! program runs started by the window's dispatches ([`crate::dispatch`]); on TPUs the
//! runs enqueued by its calls ([`crate::enqueue`]). Where a loop
//! dispatches ahead, that work runs after the window has closed: this follows it.

use std::sync::atomic::{AtomicU32, Ordering};

use rayon::prelude::*;

use crate::device::{Device, OpSource};
use crate::dispatch::Dispatches;
use crate::records::FastMap;
use crate::stats::Intervals;
use crate::steps::{Launches, LAUNCH_SCAN_PIECE};

/// The device work one window launched.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Work {
    /// The time an op of it ran, mean over the host's devices that took part in the
    /// run's work.
    pub busy_ps: i64,
    /// Its first op's start and its last op's end, over the host's devices.
    pub start_ps: i64,
    pub end_ps: i64,
    /// The capture holds only part of it: a program run it cut at its start or end, or
    /// a dispatch whose run came after it stopped.
    pub cut: bool,
}

/// What links a host's windows to their device work.
#[derive(Clone, Copy)]
pub struct Links<'p> {
    pub devices: &'p [Device<'p>],
    /// Per device: whether it took part in the run's work.
    pub took_part: &'p [bool],
    /// Per host: its GPU launches; its XLA:CPU dispatches or TPU runs' calls.
    pub launches: &'p [Launches],
    pub dispatches: &'p [Dispatches],
}

/// The device work each of a host's windows launched.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Launched {
    /// Per window: its work; `None` for a window that launched none the capture holds.
    pub work: Vec<Option<Work>>,
    /// GPU launches in the windows whose work the capture does not hold: it stopped
    /// before they ran.
    pub not_run: u64,
}

impl Links<'_> {
    /// The work launched in each of `windows` (host `hi`'s spans, by start, none
    /// inside another); `None` for a window that launched none, and every `None`
    /// where the host's work is not linked to its launches.
    pub fn work_in(&self, hi: usize, windows: &[(i64, i64)]) -> Launched {
        let on_host: Vec<&Device> = self.devices.iter().filter(|d| d.host_index == hi).collect();
        let working = on_host.iter().any(|d| self.took_part[d.index]);
        let counted = |d: &Device| self.took_part[d.index] || !working;
        let none = || Launched { work: vec![None; windows.len()], not_run: 0 };
        let window_at = |t: i64| {
            let k = windows.partition_point(|w| w.0 <= t).checked_sub(1)?;
            (t < windows[k].1).then_some(k)
        };
        let gpus: Vec<&Device> = on_host.iter().filter(|d| d.source == OpSource::Kernels).copied().collect();
        if let Some(host) = self.launches.get(hi).filter(|l| !l.is_empty() && gpus.iter().any(|d| counted(d))) {
            // The launches in a window: each its window, its id's index in `launched`.
            let mut ins: Vec<(usize, i64)> = Vec::new();
            let launched: FastMap<i64, u32> = host
                .iter()
                .filter_map(|(c, (start, _))| window_at(start).map(|k| (c, k)))
                .map(|(c, k)| {
                    ins.push((k, c));
                    (c, ins.len() as u32 - 1)
                })
                .collect();
            if launched.is_empty() {
                return none();
            }
            let ops_of: Vec<AtomicU32> = ins.iter().map(|_| AtomicU32::new(0)).collect();
            let mut per_device: Vec<Vec<Reach>> = Vec::new();
            let mut last = Vec::new();
            for d in gpus.iter().filter(|d| d.cached_ops().has_correlation_ids()) {
                let (spans, its_last) = gpu_spans(d, &launched, &ins, &ops_of, windows.len());
                last.extend(its_last);
                if counted(d) {
                    per_device.push(spans.iter().map(Reach::of).collect());
                }
            }
            let n = gpus.iter().filter(|d| counted(d)).count();
            let (cut, not_run) = not_run(host, &ins, &ops_of, &last, windows.len());
            return Launched { work: summed(&per_device, n, &cut), not_run };
        }
        let Some(host) = self.dispatches.get(hi).filter(|d| !d.is_empty()) else { return none() };
        let mut cut = vec![false; windows.len()];
        let mut runs_of: Vec<Vec<(u32, i64)>> = vec![Vec::new(); windows.len()];
        for &(start, key, run) in &host.linked {
            if let Some(k) = window_at(start) {
                runs_of[k].push((key, run));
            }
        }
        for &start in &host.unran {
            if let Some(k) = window_at(start) {
                cut[k] = true;
            }
        }
        // The counted devices' runs, each with its device (its ops' spans are read from
        // its records).
        let counted_runs: Vec<(&Device, &crate::dispatch::DeviceRuns)> = (host.runs.iter())
            .filter_map(|(di, runs)| on_host.iter().find(|d| d.index == *di && counted(d)).map(|d| (*d, runs)))
            .collect();
        let mut per_device: Vec<Vec<Reach>> = Vec::new();
        for &(d, runs) in &counted_runs {
            let ops = d.cached_ops();
            let span = |i: &u32| {
                let (_, start, end, _) = ops.span(d.plane, *i as usize);
                (start, end)
            };
            per_device.push(
                runs_of
                    .iter()
                    .zip(&mut cut)
                    .map(|(wanted, cut)| {
                        let mine: Vec<&crate::dispatch::Run> = wanted.iter().filter_map(|k| runs.get(k)).collect();
                        *cut |= mine.iter().any(|r| r.cut);
                        Reach::of(&Intervals::new(mine.iter().flat_map(|r| r.recs.iter().map(span)).collect()))
                    })
                    .collect(),
            );
        }
        Launched { work: summed(&per_device, counted_runs.len(), &cut), not_run: 0 }
    }
}

/// Which windows launched work the capture does not hold, and how many launches it
/// holds no work of. CUPTI also numbers what XLA records into a command buffer (its
/// kernels' and memsets' launch calls while the buffer is built), which never runs as
/// such: so a launch counts as not run only where it launched what ran elsewhere in the
/// windows (its event's name: a command buffer's `cuGraphLaunch (CudaGraph:N)`, a
/// copy, a kernel launched alone) and the capture holds no op of it. A device's last
/// launch to run (`last`) is cut where it holds fewer ops than another launch of its
/// kind: the capture stopped while it ran.
fn not_run(
    host: &Launches,
    ins: &[(usize, i64)],
    ops_of: &[AtomicU32],
    last: &[u32],
    windows: usize,
) -> (Vec<bool>, u64) {
    let ops_of: Vec<u32> = ops_of.iter().map(|n| n.load(Ordering::Relaxed)).collect();
    // Per kind that ran: the most ops a launch of it ran.
    let mut most: FastMap<u32, u32> = FastMap::default();
    for ((_, c), &n) in ins.iter().zip(&ops_of).filter(|(_, n)| **n > 0) {
        if let Some(m) = host.meta(*c) {
            let e = most.entry(m).or_default();
            *e = (*e).max(n);
        }
    }
    let mut cut = vec![false; windows];
    let mut count = 0;
    for ((k, c), _) in ins.iter().zip(&ops_of).filter(|(_, n)| **n == 0) {
        if host.meta(*c).is_some_and(|m| most.contains_key(&m)) {
            cut[*k] = true;
            count += 1;
        }
    }
    for &i in last {
        let (k, c) = ins[i as usize];
        if host.meta(c).and_then(|m| most.get(&m)).is_some_and(|&m| ops_of[i as usize] < m) {
            cut[k] = true;
        }
    }
    (cut, count)
}

/// Per window: the devices' work summed into a [`Work`] (busy as the mean over `n`
/// devices), `None` where no device ran any.
fn summed(per_device: &[Vec<Reach>], n: usize, cut: &[bool]) -> Vec<Option<Work>> {
    (0..cut.len())
        .map(|k| {
            let spans: Vec<&(i64, i64, i64)> = per_device.iter().filter_map(|d| d[k].0.as_ref()).collect();
            let start_ps = spans.iter().map(|s| s.0).min()?;
            let end_ps = spans.iter().map(|s| s.1).max()?;
            let busy: i64 = crate::stats::sum_ps(spans.iter().map(|s| s.2));
            Some(Work { busy_ps: busy / n.max(1) as i64, start_ps, end_ps, cut: cut[k] })
        })
        .collect()
}

/// What [`summed`] reads of a device's work in a window: its first op's start, its
/// last op's end and the time an op ran (`None`: no op), kept instead of the spans
/// (a step's hundreds, for each of thousands of steps).
struct Reach(Option<(i64, i64, i64)>);

impl Reach {
    fn of(spans: &Intervals) -> Reach {
        let s = spans.spans();
        Reach(s.first().zip(s.last()).map(|(first, last)| (first.0, last.1, spans.total())))
    }
}

/// One GPU's kernels and copies, per window, by the window their launch is in. Its
/// op records and the windows are read in parallel pieces (a piece's ops are in time
/// order on their line, so they fall in few runs of one window).
/// Counts in `ops_of` the op records of each launch (an index in `ins`) it holds;
/// returns them by window, and the launch of its last op to end (the one the capture
/// may have cut short).
fn gpu_spans(
    d: &Device,
    launched: &FastMap<i64, u32>,
    ins: &[(usize, i64)],
    ops_of: &[AtomicU32],
    windows: usize,
) -> (Vec<Intervals>, Option<u32>) {
    let ops = d.cached_ops();
    type Runs = Vec<(usize, Vec<(i64, i64)>)>;
    let found: Vec<(Runs, Option<(i64, u32)>)> = crate::records::pieces(ops.recs.len(), LAUNCH_SCAN_PIECE)
        .collect::<Vec<_>>()
        .into_par_iter()
        .map(|range| {
            let mut runs: Runs = Vec::new();
            let mut last: Option<(i64, u32)> = None;
            // Consecutive records of one launch (a command buffer's kernels) are counted once.
            let mut count: Option<(u32, u32)> = None;
            for at in range {
                let Some(&i) = ops.correlation_id(&ops.recs[at]).and_then(|c| launched.get(&c)) else {
                    continue;
                };
                match &mut count {
                    Some((j, n)) if *j == i => *n += 1,
                    _ => {
                        if let Some((j, n)) = count.replace((i, 1)) {
                            ops_of[j as usize].fetch_add(n, Ordering::Relaxed);
                        }
                    }
                }
                let k = ins[i as usize].0;
                let (_, start, end, _) = ops.span(d.plane, at);
                if last.is_none_or(|(e, _)| end >= e) {
                    last = Some((end, i));
                }
                match runs.last_mut() {
                    Some((run_k, spans)) if *run_k == k => spans.push((start, end)),
                    _ => runs.push((k, vec![(start, end)])),
                }
            }
            if let Some((j, n)) = count {
                ops_of[j as usize].fetch_add(n, Ordering::Relaxed);
            }
            (runs, last)
        })
        .collect();
    let last = found.iter().filter_map(|f| f.1).max_by_key(|&(end, _)| end).map(|(_, i)| i);
    let mut spans: Vec<Vec<(i64, i64)>> = vec![Vec::new(); windows];
    for (k, run) in found.into_iter().flat_map(|f| f.0) {
        if spans[k].is_empty() {
            spans[k] = run;
        } else {
            spans[k].extend(run);
        }
    }
    (spans.into_par_iter().map(Intervals::new).collect(), last)
}
