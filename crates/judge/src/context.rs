//! What every rule reads: the run, its overview, the thresholds and the analyses
//! gathered for the rules, computed before any rule runs.

use std::sync::OnceLock;

use stepscope_analysis::ops::{self, GroupBy, Ops};
use stepscope_analysis::overview::{self, Overview};
use stepscope_analysis::steps::{self, Steps};
use stepscope_model::stats::pct;
use stepscope_model::Profile;

use crate::inputs::Inputs;
use crate::thresholds::Thresholds;

/// The run and its analyses, as the rules read them.
pub struct Context<'a> {
    pub profile: &'a Profile,
    pub overview: &'a Overview,
    pub th: &'a Thresholds,
    pub inputs: &'a Inputs,
    /// The steps, measured (the model's).
    pub steps: &'a Steps,
    /// True when some device ran ops: the rules of device time can judge.
    pub device_time: bool,
    /// True when the capture was taken with `host_tracer_level=0`.
    pub host_tracing_off: bool,
    /// The op profile by op, read by the op rules (made on first use).
    op_rows: OnceLock<Ops>,
}

impl<'a> Context<'a> {
    pub fn new(profile: &'a Profile, overview: &'a Overview, th: &'a Thresholds, inputs: &'a Inputs) -> Context<'a> {
        Context {
            profile,
            overview,
            th,
            inputs,
            steps: steps::cached(profile),
            device_time: !profile.devices().is_empty(),
            host_tracing_off: overview::host_tracer_level(profile) == Some(0),
            op_rows: OnceLock::new(),
        }
    }

    /// `ps` as a share of the mean step, percent.
    pub fn step_pct(&self, ps: i64) -> f64 {
        pct(ps, self.overview.breakdown.step_ps)
    }

    /// The op profile by op.
    pub fn op_rows(&self) -> &Ops {
        self.op_rows.get_or_init(|| ops::ops(self.profile, GroupBy::Op, 0))
    }
}
