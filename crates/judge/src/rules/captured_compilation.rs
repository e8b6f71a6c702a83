//! `captured-compilation`: a capture that holds XLA compilation is not the steady
//! state: mostly compilation (at least `capture_compile_pct` of it, wherever it fell),
//! steps that include compilation, or compilation before the steps, whose first runs
//! they are.

use stepscope_analysis::overview::Capture;
use stepscope_analysis::steps;
use stepscope_model::stats::sum_ps;

use crate::context::Context;
use crate::evidence::*;
use crate::finding::{Finding, Severity};
use crate::rule::Rule;

pub const RULE: Rule =
    Rule { id: "captured-compilation", threshold: Some("capture_compile_pct"), needs_steps: false, check };

fn check(cx: &Context, out: &mut Vec<Finding>) {
    let steps = cx.steps;
    // A loop that compiles its program again step after step is its own steady state:
    // `recompilation` names it, and warming up would not help.
    let recompiled = crate::rules::recompilation::recompiled(cx);
    if recompiled.first().is_some_and(|r| r.steps.len() as f64 > cx.th.recompile_steps) {
        return;
    }
    let none = Capture::default();
    let capture = cx.overview.capture.as_ref().unwrap_or(&none);
    let compiled_in_steps: Vec<&steps::Step> = steps.steps.iter().filter(|st| st.compile_ps > 0).collect();
    // A capture that is mostly compilation, wherever it fell: first, since no step
    // time of it is a warm step's.
    if capture.compile_ps > 0 && capture.compile_pct >= cx.th.capture_compile_pct {
        out.push(Finding {
            gain: None,
            caveats: Vec::new(),
            rule: RULE.id,
            severity: Severity::Critical,
            title: format!(
                "this capture is mostly XLA compilation: {} of its {} ({:.1}%)",
                ms(capture.compile_ps),
                ms(capture.span_ps),
                capture.compile_pct
            ),
            value: capture.compile_pct,
            threshold: cx.th.capture_compile_pct,
            unit: "pct",
            evidence: compile_evidence(cx),
            advice: format!("{WARM_UP}; its steps are first calls: compare or gate on a capture of warm steps"),
        });
        return;
    }
    if !compiled_in_steps.is_empty() {
        let total = sum_ps(compiled_in_steps.iter().map(|st| st.compile_ps));
        out.push(Finding {
            gain: None,
            caveats: Vec::new(),
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
            advice: format!("the capture includes compilation, not the steady state: {WARM_UP}"),
        });
    } else if capture.compile_outside_steps_ps > 0 && cx.overview.cold_steps > 0 {
        // Compiled before the steps: the first of them is its program's first run; a
        // note where those are few among warm steps (the warm ones are ranked on).
        let cold = cx.overview.cold_steps;
        out.push(Finding {
            gain: None,
            caveats: Vec::new(),
            rule: RULE.id,
            severity: if cold * 2 >= cx.overview.step_count { Severity::Warning } else { Severity::Info },
            title: format!(
                "the capture compiles for {} before its steps ({:.1}% of the capture): {} step(s) are first runs",
                ms(capture.compile_outside_steps_ps),
                capture.compile_pct,
                cx.overview.cold_steps
            ),
            value: capture.compile_pct,
            threshold: 0.0,
            unit: "pct",
            evidence: compile_evidence(cx),
            advice: format!("the first run of a program is slower than the next (caches, allocations): {WARM_UP}"),
        });
    }
}

const WARM_UP: &str = "run a few warm-up steps before starting the trace (or start it at step 100), and check \
                       shapes/static args don't change per step";

/// The longest compiles, where they ran.
fn compile_evidence(cx: &Context) -> Vec<crate::finding::Evidence> {
    let mut compiles: Vec<_> = cx.inputs.compile.compiles.iter().collect();
    compiles.sort_by_key(|c| std::cmp::Reverse(c.total_ps));
    (compiles.into_iter().take(3))
        .map(|c| at(ev(format!("compile of {}", or_unknown(&c.module)), &c.host), c.start_ps, c.total_ps))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::RULE;
    use crate::testing::Run;

    use stepscope_model::stats::sum_ps;

    #[test]
    fn fires_on_steps_that_compile() {
        let run = Run::of("cpu-compile");
        // 78% of this 3-step capture from a cold start is compilation: that comes first.
        let mostly = run.one(&RULE);
        assert_eq!(mostly.severity, crate::finding::Severity::Critical);
        assert_eq!(mostly.value, run.overview.capture.as_ref().unwrap().compile_pct);
        assert!(mostly.value > 75.0, "{mostly:?}");
        // Below the share, the steps that compiled.
        let th = crate::thresholds::Thresholds { capture_compile_pct: 100.0, ..Default::default() };
        let steps = &run.profile.time_base().steps.steps;
        let compiling: Vec<_> = steps.iter().filter(|s| s.compile_ps > 0).collect();
        assert!(!compiling.is_empty());
        let f = run.one_with(&RULE, &th);
        let total = sum_ps(compiling.iter().map(|s| s.compile_ps));
        assert_eq!(f.value, run.step_pct(total / steps.len() as i64));
        assert_eq!(f.evidence[0].step_num, Some(compiling[0].step_num));
        assert!(Run::of("cpu-clean").check(&RULE).is_empty());
    }

    #[test]
    fn a_one_off_capture_that_is_mostly_compilation_says_so_first() {
        let run = Run::of("cpu-oneoff");
        let f = run.one(&RULE);
        let c = run.overview.capture.as_ref().unwrap();
        assert!(c.compile_pct >= 50.0 && c.compile_outside_steps_ps == c.compile_ps, "{c:?}");
        assert_eq!(f.severity, crate::finding::Severity::Critical);
        assert_eq!(f.value, c.compile_pct);
        assert!(Run::of("cpu-oneoff-fixed").check(&RULE).is_empty());
    }
}
