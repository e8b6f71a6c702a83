//! N runs side by side (optimizers, device counts): step time, breakdown,
//! utilisation, top ops and memory peak of each.

use serde::Serialize;

use crate::memory;
use crate::ops::OpRow;
use crate::profile::Profile;
use crate::stats::Distribution;
use crate::summary::{self, Breakdown, DeviceGroup};

/// Several runs side by side.
#[derive(Clone, Debug, Serialize)]
pub struct Compare {
    pub schema: &'static str,
    pub runs: Vec<CompareRun>,
}

/// One run's headline numbers.
#[derive(Clone, Debug, Serialize)]
pub struct CompareRun {
    /// What the user called it (the PATH given).
    pub label: String,
    pub run: String,
    pub step_count: u64,
    pub step_time: Distribution,
    pub breakdown: Breakdown,
    pub device_utilization_pct: f64,
    pub devices: Vec<DeviceGroup>,
    /// Highest allocator peak, when the profile records allocations.
    pub memory_peak_bytes: Option<u64>,
    /// Median step time relative to the first run, percent (100 for the first).
    pub step_time_vs_first_pct: f64,
    pub top_ops: Vec<OpRow>,
}

/// Compares `runs` (label, profile); `top` ops are listed per run.
pub fn compare(runs: &[(String, &Profile)], top: usize) -> Compare {
    let mut out: Vec<CompareRun> = runs
        .iter()
        .map(|(label, p)| {
            let s = summary::overview(p, top);
            CompareRun {
                label: label.clone(),
                run: s.run,
                step_count: s.step_count,
                step_time: s.step_time,
                breakdown: s.breakdown,
                device_utilization_pct: s.device_utilization_pct,
                devices: s.environment.devices,
                memory_peak_bytes: memory::memory(p, None, 0).allocators.iter().map(|a| a.peak_in_use_bytes).max(),
                step_time_vs_first_pct: 0.0,
                top_ops: s.top_ops,
            }
        })
        .collect();
    let first = out.first().map_or(0, |r| r.step_time.median_ps);
    for r in &mut out {
        r.step_time_vs_first_pct = if first > 0 { 100.0 * r.step_time.median_ps as f64 / first as f64 } else { 0.0 };
    }
    Compare { schema: "stepscope.compare/1", runs: out }
}
