//! `no-steps`: No training step was found: nothing per step can be judged.

use crate::context::Context;
use crate::evidence::*;
use crate::finding::{Finding, Severity};
use crate::rule::Rule;

pub const RULE: Rule = Rule { id: "no-steps", threshold: None, needs_steps: false, check };

fn check(cx: &Context, out: &mut Vec<Finding>) {
    let steps = cx.steps;
    let host_tracing_off = cx.host_tracing_off;
    if steps.steps.is_empty() {
        out.push(Finding {
            gain: None,
            caveats: Vec::new(),
            rule: RULE.id,
            severity: Severity::Warning,
            title: "no training steps found".into(),
            value: 0.0,
            threshold: 1.0,
            unit: "count",
            evidence: vec![],
            advice: match host_tracing_off {
                true => HOST_TRACING_OFF.into(),
                false => "wrap each training step in `with jax.profiler.StepTraceAnnotation(\"train\", step_num=i):` \
                          so step time and the breakdown can be measured"
                    .into(),
            },
        });
    }
}

#[cfg(test)]
mod tests {
    use super::RULE;
    use crate::finding::Severity;
    use crate::testing::Run;

    #[test]
    fn fires_where_no_step_was_found() {
        // The MI300X GEMM capture has no step annotation, Steps line or repeated module.
        let run = Run::of("rocm-mi300x-gemm");
        assert!(run.profile.time_base().steps.steps.is_empty());
        let f = run.one(&RULE);
        assert_eq!((f.value, f.threshold, f.severity), (0.0, 1.0, Severity::Warning));
        assert!(f.advice.contains("StepTraceAnnotation"), "{}", f.advice);
        // Captured with host tracing off: the advice says that instead.
        let off = Run::of("cpu-host-tracer-off").one(&RULE);
        assert!(off.advice.contains("host_tracer_level=0"), "{}", off.advice);
        assert!(Run::of("cpu-clean").check(&RULE).is_empty());
    }
}
