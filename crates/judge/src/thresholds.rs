//! The rules' thresholds ([`Thresholds`]), each a field named with its unit; any may
//! be overridden from a TOML file.

use serde::{Deserialize, Serialize};
use stepscope_analysis::devices;

/// Rule thresholds; any may be overridden from a TOML file (`[thresholds]` table or
/// top-level keys with these names).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Thresholds {
    /// Device utilisation below this is low, percent.
    pub utilization_pct: f64,
    /// Device idle (not compiling, not copying) above this share of the step, percent.
    pub host_overhead_pct: f64,
    /// Device idle with launched work not started above this share of the step, percent.
    pub launch_queued_pct: f64,
    /// Compile time above this, seconds.
    pub compile_s: f64,
    /// Compilation at or above this share of the capture (wherever it fell) makes the
    /// capture "mostly compilation", percent.
    pub capture_compile_pct: f64,
    /// A program compiled in more steps than this is recompiled, count.
    pub recompile_steps: f64,
    /// Ops shorter than this are "small", µs (user guide 003's KPI: kernels under 0.1 ms
    /// are bad).
    pub small_op_us: f64,
    /// Small ops above this share of op executions, percent…
    pub small_op_share_pct: f64,
    /// …and above this share of op time, percent.
    pub small_op_time_pct: f64,
    /// More XLA program launches per step than this (each is a host dispatch).
    pub dispatches_per_step: f64,
    /// Host↔device copies above this share of the step, percent.
    pub copies_pct: f64,
    /// Copies and layout changes (ops that compute nothing) above this share of the
    /// step, percent.
    pub data_movement_pct: f64,
    /// One op above this share of op time, percent.
    pub dominant_op_pct: f64,
    /// Exposed collective time above this share of the step, percent.
    pub collectives_exposed_pct: f64,
    /// Devices waiting on async copies (`copy-done`) above this share of the step, percent.
    pub async_wait_pct: f64,
    /// Host callbacks (a round trip to the host's Python) above this share of the step, percent.
    pub host_callback_pct: f64,
    /// XLA:CPU runtime time between the ops of a program above this share of the step, percent.
    pub runtime_overhead_pct: f64,
    /// Memory peak above this share of the allocator's capacity, percent.
    pub memory_capacity_pct: f64,
    /// Achieved bandwidth of memory-bound ops below this share of peak, percent.
    pub memory_bandwidth_pct: f64,
    /// Kernels below this occupancy, percent (user guide 003: above 50% for
    /// compute-bound kernels), are noted where their ops fall short of their roof.
    pub occupancy_pct: f64,
    /// Ops shorter than this are left out of `memory-bandwidth` (launch and tail effects
    /// dominate them), µs.
    pub bandwidth_min_op_us: f64,
    /// Slow steps: p90 step time above the median by more than this, percent.
    pub step_jitter_pct: f64,
    /// Device idle before a step's first op above this share of the step, percent.
    pub input_bound_pct: f64,
    /// A loop that waits for its accelerator every step, where dispatching ahead would
    /// save more than this share of the step, percent.
    pub sync_every_step_pct: f64,
    /// Fewer steps than this cannot be judged.
    pub min_steps: u64,
    /// A device computing this much longer than its peers' median, percent.
    pub straggler_pct: f64,
    /// The devices' peak compute, FLOP/s, where the profile has none (a CPU) or you
    /// know better (`stepscope_analysis::peaks`); applied with [`Thresholds::peaks`].
    pub peak_flops_per_s: Option<f64>,
    /// The devices' peak memory bandwidth, bytes/s.
    pub peak_bytes_per_s: Option<f64>,
}

impl Thresholds {
    /// Why these thresholds cannot be used, if they cannot: every threshold is a finite
    /// number of at least 0 (NaN compares false, so a rule given one never fires, and
    /// a negative share always does), every peak a finite rate above 0.
    pub fn check(&self) -> Result<(), String> {
        let limits = [
            ("utilization_pct", self.utilization_pct),
            ("host_overhead_pct", self.host_overhead_pct),
            ("launch_queued_pct", self.launch_queued_pct),
            ("compile_s", self.compile_s),
            ("capture_compile_pct", self.capture_compile_pct),
            ("recompile_steps", self.recompile_steps),
            ("small_op_us", self.small_op_us),
            ("small_op_share_pct", self.small_op_share_pct),
            ("small_op_time_pct", self.small_op_time_pct),
            ("dispatches_per_step", self.dispatches_per_step),
            ("copies_pct", self.copies_pct),
            ("data_movement_pct", self.data_movement_pct),
            ("dominant_op_pct", self.dominant_op_pct),
            ("collectives_exposed_pct", self.collectives_exposed_pct),
            ("async_wait_pct", self.async_wait_pct),
            ("host_callback_pct", self.host_callback_pct),
            ("runtime_overhead_pct", self.runtime_overhead_pct),
            ("memory_capacity_pct", self.memory_capacity_pct),
            ("memory_bandwidth_pct", self.memory_bandwidth_pct),
            ("bandwidth_min_op_us", self.bandwidth_min_op_us),
            ("occupancy_pct", self.occupancy_pct),
            ("step_jitter_pct", self.step_jitter_pct),
            ("input_bound_pct", self.input_bound_pct),
            ("sync_every_step_pct", self.sync_every_step_pct),
            ("straggler_pct", self.straggler_pct),
        ];
        for (name, v) in limits {
            if !v.is_finite() || v < 0.0 {
                return Err(format!("{name} = {v} is not a threshold: give a finite number of at least 0"));
            }
        }
        for (name, v) in [("peak_flops_per_s", self.peak_flops_per_s), ("peak_bytes_per_s", self.peak_bytes_per_s)] {
            if let Some(v) = v.filter(|v| !v.is_finite() || *v <= 0.0) {
                return Err(format!("{name} = {v} is not a peak: give a rate above 0, e.g. 3.5e12"));
            }
        }
        Ok(())
    }

    /// The peaks this file gives, for [`Profile::set_peaks`] (before analysing).
    pub fn peaks(&self) -> stepscope_analysis::peaks::UserPeaks {
        stepscope_analysis::peaks::UserPeaks { flops_per_s: self.peak_flops_per_s, bytes_per_s: self.peak_bytes_per_s }
    }
}

impl Default for Thresholds {
    fn default() -> Thresholds {
        Thresholds {
            utilization_pct: 80.0,
            host_overhead_pct: 10.0,
            launch_queued_pct: 10.0,
            compile_s: 2.0,
            capture_compile_pct: 50.0,
            recompile_steps: 1.0,
            small_op_us: 100.0,
            small_op_share_pct: 50.0,
            small_op_time_pct: 20.0,
            dispatches_per_step: 20.0,
            copies_pct: 10.0,
            data_movement_pct: 10.0,
            dominant_op_pct: 50.0,
            collectives_exposed_pct: 10.0,
            async_wait_pct: 20.0,
            host_callback_pct: 5.0,
            runtime_overhead_pct: 10.0,
            memory_capacity_pct: 90.0,
            memory_bandwidth_pct: 60.0,
            bandwidth_min_op_us: 10.0,
            occupancy_pct: 50.0,
            step_jitter_pct: 20.0,
            input_bound_pct: 20.0,
            sync_every_step_pct: 10.0,
            min_steps: 3,
            straggler_pct: devices::STRAGGLER_EXCESS_PCT,
            peak_flops_per_s: None,
            peak_bytes_per_s: None,
        }
    }
}
