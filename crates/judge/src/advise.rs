//! `advise`: runs every rule ([`crate::rules::ALL`]) over a run and its analyses, and
//! orders what they found. The rules' ids (stable) are listed in docs/architecture.md
//! and in each rule's file under `rules/`.

use serde::Serialize;
use stepscope_analysis::overview::Overview;
use stepscope_model::Profile;

pub use crate::evidence::{HOST_TRACING_OFF, NO_OPS_WHY};
pub use crate::finding::{Evidence, Finding, Gain, Severity};
pub use crate::inputs::{overview_and_inputs, Inputs};
pub use crate::thresholds::Thresholds;

use crate::context::Context;
use crate::finding::finish;
use crate::rules;

/// All findings of a run.
#[derive(Clone, Debug, Serialize)]
pub struct Advice {
    pub schema: &'static str,
    pub run: String,
    pub thresholds: Thresholds,
    /// Most severe first, then by how far past the threshold.
    pub findings: Vec<Finding>,
    /// Whether the capture can be trusted, and for what: what every finding rests on
    /// ([`crate::health`]).
    pub health: crate::health::Health,
}

impl Advice {
    /// The findings of the run `overview` is of, with the capture's health.
    pub fn new(overview: &Overview, th: &Thresholds, mut findings: Vec<Finding>) -> Advice {
        let health = crate::health::judged(overview, &mut findings);
        Advice { schema: "stepscope.advise/1", run: overview.run.clone(), thresholds: th.clone(), findings, health }
    }
}

/// Runs every rule.
pub fn advise(profile: &Profile, th: &Thresholds) -> Advice {
    let (s, inputs) = overview_and_inputs(profile, TOP_OPS);
    let findings = findings_with(profile, &s, th, &inputs);
    Advice::new(&s, th, findings)
}

/// The ops the overview `advise` judges lists.
pub const TOP_OPS: usize = 10;

/// The findings for a run whose overview is `s` (rules share its numbers).
pub fn findings(profile: &Profile, s: &Overview, th: &Thresholds) -> Vec<Finding> {
    findings_with(profile, s, th, &Inputs::gather(profile))
}

/// [`findings`] with the other analyses already made: every rule, in order (the rules
/// that judge steps only where there are steps), then the findings sorted.
pub fn findings_with(profile: &Profile, s: &Overview, th: &Thresholds, inputs: &Inputs) -> Vec<Finding> {
    judge(&Context::new(profile, s, th, inputs))
}

/// Every rule over `cx`, in order (the rules that judge steps only where there are
/// steps), then the findings sorted.
pub fn judge(cx: &Context) -> Vec<Finding> {
    let mut out = Vec::new();
    for rule in rules::ALL {
        if rule.needs_steps && cx.steps.steps.is_empty() {
            continue;
        }
        (rule.check)(cx, &mut out);
    }
    finish(&mut out);
    out
}
