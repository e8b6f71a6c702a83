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
}

impl Advice {
    pub fn new(run: &str, th: &Thresholds, findings: Vec<Finding>) -> Advice {
        Advice { schema: "stepscope.advise/1", run: run.to_string(), thresholds: th.clone(), findings }
    }
}

/// Runs every rule.
pub fn advise(profile: &Profile, th: &Thresholds) -> Advice {
    let (s, inputs) = overview_and_inputs(profile, TOP_OPS);
    Advice::new(&profile.run, th, findings_with(profile, &s, th, &inputs))
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
