//! N runs side by side (optimizers, device counts): step time, breakdown,
//! utilisation, top ops and memory peak of each; and, row by row, the op profile
//! grouped some way (name-stack scope, Python line, …) and the user's host scopes,
//! each run's time per step.

use serde::Serialize;

use crate::side::Side;
use stepscope_analysis::ops::{GroupBy, OpRow};
use stepscope_analysis::overview::{Breakdown, DeviceGroup};
use stepscope_model::stats::Distribution;
use stepscope_model::Profile;

/// Several runs side by side.
#[derive(Clone, Debug, Serialize)]
pub struct Compare {
    pub schema: &'static str,
    pub runs: Vec<CompareRun>,
    /// How `rows` group the op profile.
    pub by: GroupBy,
    /// The op profile grouped `by`, each row's time per step in every run (in `runs`
    /// order; `None` where a run lacks it), the largest differences first.
    pub rows: Vec<CompareRow>,
    /// The user's host scopes by path, likewise.
    pub scopes: Vec<CompareRow>,
    /// What [`CompareRun::scaling_efficiency_pct`] counts as throughput: `flops` (the
    /// FLOPs a step ran over its median time: weak and strong scaling alike) where
    /// every run's FLOPs are known, else `steps` (steps a second: the same work a step
    /// in every run, strong scaling); absent where the device counts are the same.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scaling_basis: Option<&'static str>,
    /// The run the efficiencies are against: the first with the fewest devices.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scaling_base: Option<String>,
}

/// One row (op, scope, line, host scope) across the runs.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CompareRow {
    pub name: String,
    /// Per run: the row's time (self time for ops, total for host scopes) divided by
    /// the run's steps.
    pub per_step_ps: Vec<Option<i64>>,
    /// The largest per-step time less the smallest (a run without the row counts 0).
    pub spread_ps: i64,
}

/// One run's headline numbers.
#[derive(Clone, Debug, Serialize)]
pub struct CompareRun {
    /// What the user called it (the PATH given).
    pub label: String,
    pub run: String,
    pub step_count: u64,
    /// The step time runs are ranked by: over the warm steps where some steps
    /// compiled ([`Overview::ranked_step_time`](overview::Overview::ranked_step_time)).
    pub step_time: Distribution,
    /// Steps in which the host compiled (left out of `step_time` where others did not).
    #[serde(skip_serializing_if = "stepscope_model::steps::is_zero")]
    pub cold_steps: u64,
    pub breakdown: Breakdown,
    pub device_utilization_pct: f64,
    pub devices: Vec<DeviceGroup>,
    /// Highest allocator peak, when the profile records allocations.
    pub memory_peak_bytes: Option<u64>,
    /// Median step time relative to the first run, percent (100 for the first).
    pub step_time_vs_first_pct: f64,
    /// The devices that took part in the run's work.
    pub device_count: u64,
    /// FLOPs the devices ran per step, where known (see [`overview::Overview::flops_per_step`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flops_per_step: Option<f64>,
    /// Where the runs' device counts differ: the run's throughput per device against
    /// the run with the fewest devices, percent (100: linear scaling; see
    /// [`Compare::scaling_basis`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scaling_efficiency_pct: Option<f64>,
    /// Against the first run: the share of either run's op time in ops both ran
    /// ([`crate::diff::matched_op_time_pct`]); under
    /// [`crate::diff::SAME_PROGRAM_MIN_PCT`], they ran different programs. Absent for the
    /// first run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub matched_op_time_pct: Option<f64>,
    pub top_ops: Vec<OpRow>,
}

/// Compares `runs` (label, profile); `top` ops are listed per run.
pub fn compare(runs: &[(String, &Profile)], top: usize) -> Compare {
    compare_by(runs, top, GroupBy::Op)
}

/// [`compare`] with the rows grouped `by`; `top` rows of each list are kept (the
/// largest spreads).
pub fn compare_by(runs: &[(String, &Profile)], top: usize, by: GroupBy) -> Compare {
    let sides: Vec<(String, Side)> =
        runs.iter().map(|(label, p)| (label.clone(), Side::of(p, by, top, false))).collect();
    compare_sides(&sides, top)
}

/// [`compare_by`] of runs as `compare` reads them ([`Side`]: held whole or read a host
/// at a time, each with `top` ops, their op profiles grouped alike).
pub fn compare_sides(runs: &[(String, Side)], top: usize) -> Compare {
    let by = runs.first().map_or(GroupBy::Op, |(_, s)| s.by);
    let mut out: Vec<CompareRun> = runs.iter().map(|(label, s)| run_row(label, s)).collect();
    let first = out.first().map_or(0, |r| r.step_time.median_ps);
    for r in &mut out {
        r.set_vs_first(first);
    }
    if let Some((_, base)) = runs.first() {
        for (r, (_, side)) in out.iter_mut().zip(runs).skip(1) {
            r.matched_op_time_pct = Some(crate::diff::sides_matched_op_time_pct(base, side));
        }
    }
    let (scaling_basis, scaling_base) = scale(&mut out);
    let steps: Vec<i64> = out.iter().map(|r| r.step_count.max(1) as i64).collect();
    let op_rows: Vec<Vec<(String, i64)>> =
        runs.iter().map(|(_, s)| s.in_steps.iter().map(|r| (r.name.clone(), r.self_ps)).collect()).collect();
    let scope_rows: Vec<Vec<(String, i64)>> =
        runs.iter().map(|(_, s)| s.scopes.iter().map(|r| (r.path.clone(), r.total_ps)).collect()).collect();
    Compare {
        schema: "stepscope.compare/1",
        runs: out,
        by,
        rows: side_by_side(&op_rows, &steps, top),
        scopes: side_by_side(&scope_rows, &steps, top),
        scaling_basis,
        scaling_base,
    }
}

/// One run's row (its side's top ops), alone: its step time against the first run's
/// and its scaling are set where runs are set side by side.
pub fn run_row(label: &str, side: &Side) -> CompareRun {
    let s = side.overview.clone();
    let step_time = s.ranked_step_time().clone();
    let all: u64 = s.environment.devices.iter().map(|d| d.count).sum();
    let device_count = all.saturating_sub(s.devices_left_out.len() as u64).max(1);
    CompareRun {
        label: label.to_string(),
        run: s.run,
        step_count: s.step_count,
        step_time,
        cold_steps: s.cold_steps,
        breakdown: s.breakdown,
        device_utilization_pct: s.device_utilization_pct,
        devices: s.environment.devices,
        memory_peak_bytes: side.memory_peak_bytes,
        step_time_vs_first_pct: 0.0,
        device_count,
        flops_per_step: s.flops_per_step.filter(|f| *f > 0.0),
        scaling_efficiency_pct: None,
        matched_op_time_pct: None,
        top_ops: s.top_ops,
    }
}

impl CompareRun {
    /// Sets [`CompareRun::step_time_vs_first_pct`] against the first run's median step.
    pub fn set_vs_first(&mut self, first_median_ps: i64) {
        self.step_time_vs_first_pct =
            if first_median_ps > 0 { 100.0 * self.step_time.median_ps as f64 / first_median_ps as f64 } else { 0.0 };
    }
}

/// Sets each run's scaling efficiency where the device counts differ: its throughput
/// per device over that of the first run with the fewest devices. Returns the basis
/// and that run's label.
fn scale(runs: &mut [CompareRun]) -> (Option<&'static str>, Option<String>) {
    let Some(base) = runs.iter().min_by_key(|r| r.device_count) else { return (None, None) };
    if runs.iter().all(|r| r.device_count == base.device_count) {
        return (None, None);
    }
    let flops = runs.iter().all(|r| r.flops_per_step.is_some());
    let per_device = |r: &CompareRun| -> Option<f64> {
        let seconds = r.step_time.median_ps as f64 / 1e12;
        let work = if flops { r.flops_per_step? } else { 1.0 };
        (seconds > 0.0).then(|| work / seconds / r.device_count as f64)
    };
    let (label, reference) = (base.label.clone(), per_device(base));
    for r in runs.iter_mut() {
        r.scaling_efficiency_pct = match (per_device(r), reference) {
            (Some(x), Some(base)) if base > 0.0 => Some(100.0 * x / base),
            _ => None,
        };
    }
    (Some(if flops { "flops" } else { "steps" }), Some(label))
}

/// Rows of every run by name, per step, the `top` largest spreads first.
fn side_by_side(runs: &[Vec<(String, i64)>], steps: &[i64], top: usize) -> Vec<CompareRow> {
    let mut index: std::collections::HashMap<&str, usize> = Default::default();
    let mut rows: Vec<CompareRow> = Vec::new();
    for (k, run) in runs.iter().enumerate() {
        for (name, ps) in run {
            let at = *index.entry(name).or_insert_with(|| {
                rows.push(CompareRow { name: name.clone(), per_step_ps: vec![None; runs.len()], spread_ps: 0 });
                rows.len() - 1
            });
            let v = rows[at].per_step_ps[k].get_or_insert(0);
            *v += ps / steps[k];
        }
    }
    for r in &mut rows {
        let vals: Vec<i64> = r.per_step_ps.iter().map(|v| v.unwrap_or(0)).collect();
        r.spread_ps = vals.iter().max().unwrap_or(&0) - vals.iter().min().unwrap_or(&0);
    }
    rows.sort_by(|a, b| b.spread_ps.cmp(&a.spread_ps).then_with(|| a.name.cmp(&b.name)));
    rows.truncate(top);
    rows
}
