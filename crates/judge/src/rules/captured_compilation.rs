//! `captured-compilation`: Steps that include XLA compilation: the capture is not the steady state.

use stepscope_analysis::steps;
use stepscope_model::stats::sum_ps;

use crate::context::Context;
use crate::evidence::*;
use crate::finding::{Finding, Severity};
use crate::rule::Rule;

pub const RULE: Rule = Rule { id: "captured-compilation", threshold: None, needs_steps: false, check };

fn check(cx: &Context, out: &mut Vec<Finding>) {
    let steps = cx.steps;
    let compiled_in_steps: Vec<&steps::Step> = steps.steps.iter().filter(|st| st.compile_ps > 0).collect();
    if !compiled_in_steps.is_empty() {
        let total = sum_ps(compiled_in_steps.iter().map(|st| st.compile_ps));
        out.push(Finding {
            rule: RULE.id,
            severity: Severity::Warning,
            title: format!("{} step(s) include XLA compilation ({})", compiled_in_steps.len(), ms(total)),
            value: cx.step_pct(total / steps.steps.len().max(1) as i64),
            threshold: 0.0,
            unit: "pct",
            evidence: compiled_in_steps
                .iter()
                .take(3)
                .map(|st| {
                    in_step(
                        format!("step {} compiles for {}", st.step_num, ms(st.compile_ps)),
                        st,
                        st.start_ps,
                        st.duration_ps,
                    )
                })
                .collect(),
            advice: "the capture includes compilation, not the steady state: run a few warm-up steps before \
                     starting the trace (or start it at step 100), and check shapes/static args don't change per step"
                .into(),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::RULE;
    use crate::testing::Run;

    use stepscope_model::stats::sum_ps;

    #[test]
    fn fires_on_steps_that_compile() {
        let run = Run::of("cpu-compile");
        let steps = &run.profile.time_base().steps.steps;
        let compiling: Vec<_> = steps.iter().filter(|s| s.compile_ps > 0).collect();
        assert!(!compiling.is_empty());
        let f = run.one(&RULE);
        let total = sum_ps(compiling.iter().map(|s| s.compile_ps));
        assert_eq!(f.value, run.step_pct(total / steps.len() as i64));
        assert_eq!(f.evidence[0].step_num, Some(compiling[0].step_num));
        assert!(Run::of("cpu-clean").check(&RULE).is_empty());
    }
}
