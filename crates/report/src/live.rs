//! A snapshot of a short capture, for a live view (`stepscope top`): step time,
//! device utilisation and idle share, top ops and memory in use.

use serde::Serialize;

use stepscope_analysis::ops::OpRow;
use stepscope_analysis::steps::{busy_intervals, StepSource};
use stepscope_analysis::{memory, overview};
use stepscope_model::stats::Distribution;
use stepscope_model::Profile;

/// What one short capture shows.
#[derive(Clone, Debug, Serialize)]
pub struct Snapshot {
    pub schema: &'static str,
    /// Time covered by the capture's events (longest host), ps.
    pub window_ps: i64,
    pub step_source: StepSource,
    pub step_count: u64,
    pub step_time: Distribution,
    /// Device busy share: of step time when there are steps, else of the window
    /// (mean over devices), percent.
    pub device_utilization_pct: f64,
    /// Device idle share of step time not explained by compilation (the host-bound
    /// share), percent; without steps, `100 - device_utilization_pct`.
    pub idle_pct: f64,
    pub top_ops: Vec<OpRow>,
    /// Allocator state from `MemoryAllocation`/`MemoryDeallocation` host events;
    /// absent when the capture has none (XLA:CPU records none).
    pub memory: Option<Memory>,
}

/// Memory in use at the end of a capture, summed over allocators.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Memory {
    /// `bytes_allocated` of each allocator's last event.
    pub in_use_bytes: u64,
    /// Largest `peak_bytes_in_use` seen per allocator.
    pub peak_in_use_bytes: u64,
    pub allocators: u64,
}

/// Builds the snapshot of `profile`, listing `top` ops.
pub fn snapshot(profile: &Profile, top: usize) -> Snapshot {
    let s = overview::overview(profile, top);
    let window_ps = profile.hosts.iter().filter_map(|h| h.time_span_ps()).map(|(a, b)| b - a).max().unwrap_or(0);
    let (utilization, idle) = if s.step_count > 0 && s.breakdown.step_ps > 0 {
        (s.device_utilization_pct, 100.0 * s.breakdown.device_idle_ps as f64 / s.breakdown.step_ps as f64)
    } else {
        let devices = profile.devices();
        let shares: Vec<f64> = devices
            .iter()
            .filter_map(|d| {
                let (lo, hi) = profile.hosts.get(d.host_index)?.time_span_ps()?;
                (hi > lo).then(|| 100.0 * busy_intervals(profile, d).overlap(lo, hi) as f64 / (hi - lo) as f64)
            })
            .collect();
        let u = if shares.is_empty() { 0.0 } else { shares.iter().sum::<f64>() / shares.len() as f64 };
        (u, if shares.is_empty() { 0.0 } else { 100.0 - u })
    };
    Snapshot {
        schema: "stepscope.top/1",
        window_ps,
        step_source: s.step_source,
        step_count: s.step_count,
        step_time: s.step_time,
        device_utilization_pct: utilization,
        idle_pct: idle,
        top_ops: s.top_ops,
        memory: memory_in_use(profile),
    }
}

/// Memory in use, summed over the allocators of the memory analysis (`stepscope_analysis::memory`).
pub fn memory_in_use(profile: &Profile) -> Option<Memory> {
    let m = memory::memory(profile, None, 0);
    if m.allocators.is_empty() {
        return None;
    }
    let mut total = Memory::default();
    for a in &m.allocators {
        total.in_use_bytes = total.in_use_bytes.saturating_add(a.last_in_use_bytes);
        total.peak_in_use_bytes =
            total.peak_in_use_bytes.saturating_add(a.lifetime_peak_bytes.max(a.peak_in_use_bytes));
        total.allocators += 1;
    }
    Some(total)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::summary;

    fn load(rel: &str) -> Profile {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures").join(rel);
        let run = stepscope_xspace::discover::resolve(&root, None).expect("fixture run");
        let spaces = run.load(&stepscope_xspace::Progress::default()).expect("load");
        Profile::new(run.rel, spaces)
    }

    #[test]
    fn cpu_snapshot_matches_summary() {
        let p = load("cpu-transformer");
        let snap = snapshot(&p, 3);
        let s = summary::summary(&p, 3);
        assert_eq!(snap.schema, "stepscope.top/1");
        assert_eq!(snap.step_count, s.step_count);
        assert!(snap.step_count > 0);
        assert_eq!(snap.device_utilization_pct, s.device_utilization_pct);
        let idle = 100.0 * s.breakdown.device_idle_ps as f64 / s.breakdown.step_ps as f64;
        assert!((snap.idle_pct - idle).abs() < 1e-9);
        assert_eq!(snap.top_ops.len(), 3);
        assert!(snap.window_ps >= s.step_time.max_ps);
        // XLA:CPU writes no allocator events.
        assert_eq!(snap.memory, None);
    }

    // Expected values computed independently from the fixtures with the Python
    // reference reader (tests/support/xspace_ref.py): per allocator (name, else
    // index_on_host) the last event's bytes_allocated and the largest
    // peak_bytes_in_use, summed. Both captures end with everything freed.
    #[test]
    fn memory_from_allocator_events() {
        let rocm = memory_in_use(&load("rocm-mi300x-gemm")).expect("ROCm capture has allocator events");
        assert_eq!(rocm, Memory { in_use_bytes: 0, peak_in_use_bytes: 738_197_760, allocators: 2 });
        let tpu = memory_in_use(&load("tpu-v6e-inference")).expect("TPU capture has allocator events");
        assert_eq!(tpu, Memory { in_use_bytes: 0, peak_in_use_bytes: 48_319_008_256, allocators: 4 });
    }
}
