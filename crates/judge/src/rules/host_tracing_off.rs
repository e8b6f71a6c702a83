//! `host-tracing-off`: The capture was taken with host tracing off: host-side findings cannot be judged.

use stepscope_analysis::steps;

use crate::context::Context;
use crate::evidence::*;
use crate::finding::{Finding, Severity};
use crate::rule::Rule;

pub const RULE: Rule = Rule { id: "host-tracing-off", threshold: None, needs_steps: false, check };

fn check(cx: &Context, out: &mut Vec<Finding>) {
    let steps = cx.steps;
    if !steps.steps.is_empty() && cx.host_tracing_off {
        out.push(Finding {
            gain: None,
            caveats: Vec::new(),
            rule: RULE.id,
            severity: Severity::Info,
            title: "host tracing was off (host_tracer_level=0)".into(),
            value: 0.0,
            threshold: 1.0,
            unit: "count",
            evidence: vec![],
            advice: format!(
                "the steps come from {} instead of the step annotations, and what the host did between device \
                 work (Python, input, launches) was not recorded: the host-side findings cannot be judged. {}",
                steps::source_words(steps.source),
                HOST_TRACING_OFF
            ),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::RULE;
    use crate::testing::Run;

    #[test]
    fn needs_steps_and_host_tracing_off() {
        // The capture with host tracing off has no steps: `no-steps` speaks for it.
        let off = Run::of("cpu-host-tracer-off");
        assert_eq!(stepscope_analysis::overview::host_tracer_level(&off.profile), Some(0));
        assert!(off.check(&RULE).is_empty());
        // A capture with steps and host tracing on.
        let clean = Run::of("cpu-clean");
        assert_ne!(stepscope_analysis::overview::host_tracer_level(&clean.profile), Some(0));
        assert!(clean.check(&RULE).is_empty());
    }
}
