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
    /// The most important findings of [`advise`] (at most 3).
    pub findings: Vec<Finding>,
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
    Summary { overview, findings }
}

/// The overview without findings, as a summary (what `diff`, `compare` and `check`
/// read).
pub fn overview(profile: &Profile, top: usize) -> Summary {
    Summary { overview: stepscope_analysis::overview::overview(profile, top), findings: Vec::new() }
}
