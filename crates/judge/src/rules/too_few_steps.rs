//! `too-few-steps`: Fewer steps than the threshold: averages mean little.

use crate::context::Context;
use crate::finding::{Finding, Severity};
use crate::rule::Rule;

pub const RULE: Rule = Rule { id: "too-few-steps", threshold: Some("min_steps"), needs_steps: false, check };

fn check(cx: &Context, out: &mut Vec<Finding>) {
    let (steps, th) = (cx.steps, cx.th);
    if !steps.steps.is_empty() && (steps.steps.len() as u64) < th.min_steps {
        out.push(Finding {
            gain: None,
            caveats: Vec::new(),
            rule: RULE.id,
            severity: Severity::Warning,
            title: format!("only {} step(s) captured", steps.steps.len()),
            value: steps.steps.len() as f64,
            threshold: th.min_steps as f64,
            unit: "count",
            evidence: vec![],
            advice: format!(
                "capture at least {} steady-state steps (e.g. steps 100–105) so averages mean something",
                th.min_steps
            ),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::RULE;
    use crate::testing::Run;

    use crate::thresholds::Thresholds;

    #[test]
    fn fires_below_the_minimum_step_count() {
        let run = Run::of("cpu-clean");
        let n = run.profile.time_base().steps.steps.len() as u64;
        assert!(n >= Thresholds::default().min_steps);
        assert!(run.check(&RULE).is_empty());
        let th = Thresholds { min_steps: n + 1, ..Thresholds::default() };
        let f = run.one_with(&RULE, &th);
        assert_eq!((f.value, f.threshold), (n as f64, (n + 1) as f64));
    }
}
