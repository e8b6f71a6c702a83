//! Training steps, as the `steps` command shows them: the model's steps
//! ([`stepscope_model::steps`]), with the device work each launched and its FLOPs.

use rayon::prelude::*;

use stepscope_model::device::{Device, OpSource};
pub use stepscope_model::profile::{active_intervals, busy_intervals, cached, host_compile_events, took_part};
use stepscope_model::records::FastMap;
use stepscope_model::stats::Intervals;
pub use stepscope_model::steps::*;
use stepscope_model::Profile;

/// Finds the steps of `profile` and measures each (once per profile; later calls
/// return a copy), with the device work each step launched on GPUs.
pub fn steps(profile: &Profile) -> Steps {
    let mut s = cached(profile).clone();
    launched_work(profile, &mut s.steps);
    for (step, f) in s.steps.iter_mut().zip(crate::roofline::step_flops(profile, &cached(profile).steps)) {
        step.flops = f.map(|f| f.flops);
        step.flops_utilization_pct = f.and_then(|f| f.utilization_pct);
    }
    s
}

/// Fills [`Step::device_work_ps`]: per host, its launches (host events with a
/// `correlation_id`, found in stage 2) are placed in the step whose span holds them,
/// then each GPU's kernels and copies are summed (as a union of intervals) into their
/// launch's step. Op records and steps are read in parallel pieces.
pub(crate) fn launched_work(profile: &Profile, steps: &mut [Step]) {
    let devices = profile.devices();
    let launches = profile.launches();
    for (hi, space) in profile.hosts.iter().enumerate() {
        let gpus: Vec<&Device> =
            devices.iter().filter(|d| d.host_index == hi && d.source == OpSource::Kernels).collect();
        let Some(host) = launches.get(hi).filter(|l| !l.is_empty() && !gpus.is_empty()) else { continue };
        // This host's steps, by start.
        let mut mine: Vec<usize> = (0..steps.len()).filter(|&i| steps[i].host == space.host).collect();
        mine.sort_by_key(|&i| steps[i].start_ps);
        let step_at = |t: i64| {
            let k = mine.partition_point(|&i| steps[i].start_ps <= t).checked_sub(1)?;
            (t < steps[mine[k]].end_ps()).then_some(k)
        };
        let launched: FastMap<i64, usize> =
            host.iter().filter_map(|(c, (start, _))| step_at(start).map(|k| (c, k))).collect();
        if launched.is_empty() {
            continue;
        }
        let mut work = vec![0i64; mine.len()];
        for d in gpus.iter().filter(|d| d.cached_ops().has_correlation_ids()) {
            let ops = d.cached_ops();
            // Per piece of records: runs of spans launched in one step (a piece's ops
            // are in time order on their line, so they fall in few runs).
            type Runs = Vec<(usize, Vec<(i64, i64)>)>;
            let runs: Vec<Runs> = stepscope_model::records::pieces(ops.recs.len(), LAUNCH_SCAN_PIECE)
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
            let mut spans: Vec<Vec<(i64, i64)>> = vec![Vec::new(); mine.len()];
            for (k, run) in runs.into_iter().flatten() {
                if spans[k].is_empty() {
                    spans[k] = run;
                } else {
                    spans[k].extend(run);
                }
            }
            let totals: Vec<i64> = spans.into_par_iter().map(|s| Intervals::new(s).total()).collect();
            for (w, t) in work.iter_mut().zip(totals) {
                *w = w.saturating_add(t);
            }
        }
        for (k, &i) in mine.iter().enumerate() {
            steps[i].device_work_ps = Some(work[k] / gpus.len() as i64);
        }
    }
}
