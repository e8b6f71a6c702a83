//! The device work a host window launched (a step, a scope): on GPUs the kernels and
//! copies whose `correlation_id` links them to a launch in the window; on XLA:CPU the
//! program runs started by the window's dispatches ([`crate::dispatch`]). Where a loop
//! dispatches ahead, that work runs after the window has closed: this follows it.

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
    /// Per host: its GPU launches, its XLA:CPU dispatches.
    pub launches: &'p [Launches],
    pub dispatches: &'p [Dispatches],
}

impl Links<'_> {
    /// The work launched in each of `windows` (host `hi`'s spans, by start, none
    /// inside another); `None` for a window that launched none, and every `None`
    /// where the host's work is not linked to its launches.
    pub fn work_in(&self, hi: usize, windows: &[(i64, i64)]) -> Vec<Option<Work>> {
        let on_host: Vec<&Device> = self.devices.iter().filter(|d| d.host_index == hi).collect();
        let working = on_host.iter().any(|d| self.took_part[d.index]);
        let counted = |d: &&&Device| self.took_part[d.index] || !working;
        let gpus: Vec<&Device> =
            on_host.iter().filter(|d| d.source == OpSource::Kernels).filter(counted).copied().collect();
        // Per window, per counted device: the spans of its work.
        let mut per_device: Vec<Vec<Intervals>> = Vec::new();
        let mut cut = vec![false; windows.len()];
        let window_at = |t: i64| {
            let k = windows.partition_point(|w| w.0 <= t).checked_sub(1)?;
            (t < windows[k].1).then_some(k)
        };
        if let Some(host) = self.launches.get(hi).filter(|l| !l.is_empty() && !gpus.is_empty()) {
            let launched: FastMap<i64, usize> =
                host.iter().filter_map(|(c, (start, _))| window_at(start).map(|k| (c, k))).collect();
            if launched.is_empty() {
                return vec![None; windows.len()];
            }
            for d in gpus.iter().filter(|d| d.cached_ops().has_correlation_ids()) {
                per_device.push(gpu_spans(d, &launched, windows.len()));
            }
            let n = gpus.len();
            return summed(&per_device, n, &cut);
        }
        let Some(host) = self.dispatches.get(hi).filter(|d| !d.is_empty()) else { return vec![None; windows.len()] };
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
        let counted_cpu: Vec<usize> =
            (on_host.iter()).filter(|d| d.source == OpSource::HostOps).filter(counted).map(|d| d.index).collect();
        for (_, runs) in host.runs.iter().filter(|(d, _)| counted_cpu.contains(d)) {
            per_device.push(
                runs_of
                    .iter()
                    .zip(&mut cut)
                    .map(|(wanted, cut)| {
                        let mine: Vec<&crate::dispatch::Run> = wanted.iter().filter_map(|k| runs.get(k)).collect();
                        *cut |= mine.iter().any(|r| r.cut);
                        Intervals::new(mine.iter().flat_map(|r| r.spans.iter().copied()).collect())
                    })
                    .collect(),
            );
        }
        summed(&per_device, counted_cpu.len(), &cut)
    }
}

/// Per window: the devices' work summed into a [`Work`] (busy as the mean over `n`
/// devices), `None` where no device ran any.
fn summed(per_device: &[Vec<Intervals>], n: usize, cut: &[bool]) -> Vec<Option<Work>> {
    (0..cut.len())
        .map(|k| {
            let spans: Vec<&Intervals> = per_device.iter().map(|d| &d[k]).filter(|s| !s.spans().is_empty()).collect();
            let start_ps = spans.iter().map(|s| s.spans()[0].0).min()?;
            let end_ps = spans.iter().filter_map(|s| s.spans().last().map(|l| l.1)).max()?;
            let busy: i64 = crate::stats::sum_ps(spans.iter().map(|s| s.total()));
            Some(Work { busy_ps: busy / n.max(1) as i64, start_ps, end_ps, cut: cut[k] })
        })
        .collect()
}

/// One GPU's kernels and copies, per window, by the window their launch is in. Its
/// op records and the windows are read in parallel pieces (a piece's ops are in time
/// order on their line, so they fall in few runs of one window).
fn gpu_spans(d: &Device, launched: &FastMap<i64, usize>, windows: usize) -> Vec<Intervals> {
    let ops = d.cached_ops();
    type Runs = Vec<(usize, Vec<(i64, i64)>)>;
    let runs: Vec<Runs> = crate::records::pieces(ops.recs.len(), LAUNCH_SCAN_PIECE)
        .collect::<Vec<_>>()
        .into_par_iter()
        .map(|range| {
            let mut runs: Runs = Vec::new();
            for at in range {
                let Some(&k) = ops.correlation_id(&ops.recs[at]).and_then(|c| launched.get(&c)) else {
                    continue;
                };
                let (_, start, end, _) = ops.span(d.plane, at);
                match runs.last_mut() {
                    Some((run_k, spans)) if *run_k == k => spans.push((start, end)),
                    _ => runs.push((k, vec![(start, end)])),
                }
            }
            runs
        })
        .collect();
    let mut spans: Vec<Vec<(i64, i64)>> = vec![Vec::new(); windows];
    for (k, run) in runs.into_iter().flatten() {
        if spans[k].is_empty() {
            spans[k] = run;
        } else {
            spans[k].extend(run);
        }
    }
    spans.into_par_iter().map(Intervals::new).collect()
}
