//! The summary: the overview of a run (`stepscope_analysis::overview`) with the most
//! important findings of the rules (`stepscope_judge`). Its JSON is the baseline
//! format `check` compares against.

use std::ops::Deref;

use serde::Serialize;
use stepscope_judge::advise::{self, Finding, Thresholds};
use stepscope_model::Profile;

pub use stepscope_analysis::overview::{
    host_tracer_level, is_collective, Breakdown, DeviceGroup, Environment, Overview,
};

/// The overview of a run and its top findings.
#[derive(Clone, Debug, Serialize)]
pub struct Summary {
    #[serde(flatten)]
    pub overview: Overview,
    /// The allocator nearest its capacity (user guide 003: peak under 90% of device
    /// memory); absent where the profile records no allocations.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_peak: Option<MemoryPeak>,
    /// The most important findings of [`advise`] (at most 3).
    pub findings: Vec<Finding>,
}

/// One allocator's peak against its capacity.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MemoryPeak {
    pub host: String,
    pub allocator: String,
    pub peak_bytes: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capacity_bytes: Option<u64>,
    /// The peak as a share of the capacity, percent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capacity_pct: Option<f64>,
}

/// The allocator nearest its capacity; where none records one, the highest peak.
fn memory_peak(memory: &stepscope_analysis::memory::Memory) -> Option<MemoryPeak> {
    let share = |a: &stepscope_analysis::memory::Allocator| a.capacity_pct().unwrap_or(-1.0);
    let a = (memory.allocators.iter().filter(|a| a.peak_in_use_bytes > 0))
        .max_by(|x, y| share(x).total_cmp(&share(y)).then(x.peak_in_use_bytes.cmp(&y.peak_in_use_bytes)))?;
    Some(MemoryPeak {
        host: a.host.clone(),
        allocator: a.name.clone(),
        peak_bytes: a.peak_in_use_bytes,
        capacity_bytes: a.capacity_bytes.filter(|c| *c > 0),
        capacity_pct: a.capacity_pct(),
    })
}

/// A summary reads as its overview: `s.step_time`, `s.breakdown`, …
impl Deref for Summary {
    type Target = Overview;

    fn deref(&self) -> &Overview {
        &self.overview
    }
}

/// Builds the overview with its top findings; `top` ops are listed.
pub fn summary(profile: &Profile, top: usize) -> Summary {
    let (overview, inputs) = advise::overview_and_inputs(profile, top);
    let mut findings = advise::findings_with(profile, &overview, &Thresholds::default(), &inputs);
    findings.truncate(3);
    Summary { overview, memory_peak: memory_peak(&inputs.memory), findings }
}

/// The overview without findings, as a summary (what `diff`, `compare` and `check`
/// read).
pub fn overview(profile: &Profile, top: usize) -> Summary {
    Summary { overview: stepscope_analysis::overview::overview(profile, top), memory_peak: None, findings: Vec::new() }
}
