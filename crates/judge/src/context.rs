//! What every rule reads: the run's overview, the thresholds, the analyses gathered
//! for the rules and the facts of its events ([`crate::facts`]), computed before any
//! rule runs, or as a rule first asks where the run is held whole.

use std::collections::HashSet;
use std::sync::OnceLock;

use stepscope_analysis::kernels::{self, OpKernel, OpKernels};
use stepscope_analysis::ops::{self, GroupBy, Ops};
use stepscope_analysis::overview::Overview;
use stepscope_analysis::scopes::{self, Scopes};
use stepscope_analysis::steps::{self, Steps};
use stepscope_analysis::whatif;
use stepscope_model::stats::pct;
use stepscope_model::Profile;

use crate::facts::{Facts, RunFacts};
use crate::finding::Gain;
use crate::inputs::Inputs;
use crate::thresholds::Thresholds;

/// The run and its analyses, as the rules read them.
pub struct Context<'a> {
    pub overview: &'a Overview,
    pub th: &'a Thresholds,
    pub inputs: &'a Inputs,
    /// The steps, measured (the model's).
    pub steps: &'a Steps,
    /// True when some device ran ops: the rules of device time can judge.
    pub device_time: bool,
    /// True when the capture was taken with `host_tracer_level=0`.
    pub host_tracing_off: bool,
    /// The run's own events, where the rules find their evidence.
    pub facts: Facts<'a>,
    held: Held<'a>,
}

/// The analyses a few rules read, made as one first asks where the run is held whole;
/// made with the facts of a run read a host at a time.
enum Held<'a> {
    Whole { profile: &'a Profile, made: Box<Made> },
    Run(&'a ByHost),
}

/// What the rules ask of a run held whole, made on first asking.
#[derive(Default)]
struct Made {
    op_rows: OnceLock<Ops>,
    scopes: OnceLock<Scopes>,
}

/// What the rules read of a run read a host at a time besides its overview and
/// inputs: its facts, its op profile by op, its scopes and its kernels of every op.
pub struct ByHost {
    pub facts: RunFacts,
    pub op_rows: Ops,
    pub scopes: Scopes,
    /// [`kernels::of_every_op`] of every host, added up.
    pub kernels: OpKernels,
    pub steps: Steps,
    /// Each host's replays of the edits the rules may ask for
    /// ([`crate::gains::host_replays`]).
    pub whatif: Vec<crate::gains::HostReplays>,
}

impl<'a> Context<'a> {
    /// The context of a run held whole.
    pub fn new(profile: &'a Profile, overview: &'a Overview, th: &'a Thresholds, inputs: &'a Inputs) -> Context<'a> {
        let steps = steps::cached(profile);
        Context {
            overview,
            th,
            inputs,
            steps,
            device_time: !profile.devices().is_empty(),
            host_tracing_off: overview.environment.host_tracer_level == Some(0),
            facts: Facts::Whole { profile, steps, leading_idle: &inputs.steps.leading_idle },
            held: Held::Whole { profile, made: Box::default() },
        }
    }

    /// The context of a run read a host at a time.
    pub fn by_host(run: &'a ByHost, overview: &'a Overview, th: &'a Thresholds, inputs: &'a Inputs) -> Context<'a> {
        Context {
            overview,
            th,
            inputs,
            steps: &run.steps,
            device_time: !overview.environment.devices.is_empty(),
            host_tracing_off: overview.environment.host_tracer_level == Some(0),
            facts: Facts::Run(&run.facts),
            held: Held::Run(run),
        }
    }

    /// `ps` as a share of the mean step, percent.
    pub fn step_pct(&self, ps: i64) -> f64 {
        pct(ps, self.overview.breakdown.step_ps)
    }

    /// The op profile by op.
    pub fn op_rows(&self) -> &Ops {
        match &self.held {
            Held::Whole { profile, made } => made.op_rows.get_or_init(|| ops::ops(profile, GroupBy::Op, 0)),
            Held::Run(run) => &run.op_rows,
        }
    }

    /// What `edit` would gain: the what-if model's projection of the steps, of the run
    /// held whole, or added up from its hosts' replays (read a host at a time: of the
    /// edits [`crate::gains::candidate_edits`] names). `None` where no step could be
    /// replayed, or no host replayed the edit.
    pub fn gain(&self, edit: &whatif::Edit) -> Option<Gain> {
        let p = match &self.held {
            Held::Whole { profile, .. } => whatif::project(profile, edit),
            Held::Run(run) => crate::gains::run_replay(&run.whatif, edit)?.finish(edit),
        };
        (p.steps > 0).then(|| Gain {
            gain_ps: p.gain_ps.max(0),
            gain_pct: p.gain_pct.max(0.0),
            projected_step_ps: p.projected_step_ps,
            gain_edit: p.edit,
            hosts_apart: p.hosts_apart,
        })
    }

    /// The host scopes.
    pub fn scopes(&self) -> &Scopes {
        match &self.held {
            Held::Whole { profile, made } => made.scopes.get_or_init(|| scopes::scopes(profile)),
            Held::Run(run) => &run.scopes,
        }
    }

    /// The kernels of the ops `wanted` ((op, module) pairs), largest first
    /// ([`kernels::of_ops`]).
    pub fn kernels_of_ops(&self, wanted: &HashSet<(&str, &str)>) -> Vec<OpKernel> {
        match &self.held {
            Held::Whole { profile, .. } => kernels::of_ops(profile, wanted),
            Held::Run(run) => run.kernels.of_ops(wanted),
        }
    }
}
