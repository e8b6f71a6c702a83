//! `many-dispatches`: More XLA program launches per step than the threshold.

use crate::context::Context;
use crate::evidence::*;
use crate::finding::{Finding, Severity};
use crate::rule::Rule;

pub const RULE: Rule = Rule { id: "many-dispatches", threshold: Some("dispatches_per_step"), needs_steps: true, check };

fn check(cx: &Context, out: &mut Vec<Finding>) {
    let th = cx.th;
    let (dispatches, by_module) = (cx.inputs.steps.dispatches.0, &cx.inputs.steps.dispatches.1);
    if dispatches > th.dispatches_per_step {
        out.push(
            Finding {
                gain: None,
                caveats: Vec::new(),
                rule: RULE.id,
                severity: Severity::Warning,
                title: format!("{dispatches:.0} XLA programs launched per step"),
                value: dispatches,
                threshold: th.dispatches_per_step,
                unit: "count",
                evidence: by_module
                    .iter()
                    .take(5)
                    .map(|(m, n)| ev(format!("{m}: {n:.1} launches per step"), ""))
                    .collect(),
                advice: "every jitted call is a separate dispatch from Python: jit the whole step (or lax.scan / vmap \
                     over the loop) instead of calling small jitted functions many times per step"
                    .into(),
            }
            .with_gain(cx.gain(&crate::gains::jit())),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::RULE;
    use crate::testing::Run;

    #[test]
    fn fires_on_many_launches_per_step() {
        // 200 tiny jitted calls per step, beside the train step.
        let run = Run::of("cpu-tiny-ops");
        let f = run.one(&RULE);
        assert!(f.value >= 200.0 && f.value == run.inputs.steps.dispatches.0, "{f:?}");
        assert!(f.evidence[0].what.starts_with("jit__lambda"), "{f:?}");
        assert!(Run::of("cpu-clean").check(&RULE).is_empty());
    }
}
