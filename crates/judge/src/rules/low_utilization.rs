//! `low-utilization`: Devices busy less of the step than the threshold; in a capture
//! without steps, less of their own span (first op to last), which then names the
//! idlest devices: a capture mostly idle says so even where it has no steps to judge.

use crate::facts::Kind;
use stepscope_analysis::steps;

use crate::context::Context;
use crate::evidence::*;
use crate::finding::{Finding, Severity};
use crate::rule::Rule;

pub const RULE: Rule = Rule { id: "low-utilization", threshold: Some("utilization_pct"), needs_steps: false, check };

fn check(cx: &Context, out: &mut Vec<Finding>) {
    let (s, th, steps, device_time) = (cx.overview, cx.th, cx.steps, cx.device_time);
    if device_time && steps.steps.is_empty() && s.device_utilization_pct < th.utilization_pct {
        out.push(without_steps(cx));
    } else if device_time && s.device_utilization_pct < th.utilization_pct {
        let mut worst: Vec<&steps::Step> = steps.steps.iter().collect();
        worst.sort_by_key(|st| std::cmp::Reverse(st.device_idle_ps));
        out.push(Finding {
            gain: None,
            caveats: Vec::new(),
            rule: RULE.id,
            severity: if s.device_utilization_pct < th.utilization_pct / 2.0 {
                Severity::Critical
            } else {
                Severity::Warning
            },
            title: format!("devices are busy {:.1}% of the step", s.device_utilization_pct),
            value: s.device_utilization_pct,
            threshold: th.utilization_pct,
            unit: "pct",
            evidence: worst
                .iter()
                .take(3)
                .map(|st| {
                    in_step(
                        format!("step {}: device idle {}", st.step_num, ms(st.device_idle_ps)),
                        st,
                        st.start_ps,
                        st.duration_ps,
                    )
                })
                .collect(),
            advice: "see the rules below for where the idle time goes (host work, copies, compile); larger batches \
                     or fusing more work per jitted step raise utilisation"
                .into(),
        });
    }
}

/// The finding of a capture without steps: each working device measured over its own
/// span, the idlest named. A warning at most: the span may hold what the capture
/// caught around the work (warm-up, the wait before the first step).
fn without_steps(cx: &Context) -> Finding {
    let (s, th) = (cx.overview, cx.th);
    Finding {
        gain: None,
        caveats: Vec::new(),
        rule: RULE.id,
        severity: Severity::Warning,
        title: format!(
            "devices are busy {:.1}% of their own span (first op to last: no steps to measure in)",
            s.device_utilization_pct
        ),
        value: s.device_utilization_pct,
        threshold: th.utilization_pct,
        unit: "pct",
        evidence: cx.facts.cited(Kind::Idlest),
        advice: "mark the steps (jax.profiler.StepTraceAnnotation) to tell the work's own idle time from the \
                 capture's: a span that holds the wait before the first step or after the last looks idle; \
                 `stepscope devices PATH` splits each device's span"
            .into(),
    }
}

#[cfg(test)]
mod tests {
    use super::RULE;
    use crate::finding::Severity;
    use crate::testing::Run;

    #[test]
    fn fires_below_the_utilization_threshold() {
        let run = Run::of("cpu-compile");
        let f = run.one(&RULE);
        assert_eq!(f.value, run.overview.device_utilization_pct);
        assert_eq!(f.severity, Severity::Critical, "{} is under half of {}", f.value, f.threshold);
        assert!(Run::of("cpu-clean").check(&RULE).is_empty());
    }

    #[test]
    fn a_capture_without_steps_is_judged_over_the_devices_spans() {
        // Two MI300X GPUs, no step annotations (and host runs on eight threads, of
        // which the capture holds one GPU's kernels: no rounds to make steps of): GPU 7
        // is busy a fifth of its own span, GPU 0 only copies and is left out. The
        // finding says so (a warning: the span may hold the capture's own wait), with
        // the idlest device that took part as `devices` measures it.
        let run = Run::of("rocm-mi300x-conv-2gpu");
        assert!(run.profile.time_base().steps.steps.is_empty());
        let f = run.one(&RULE);
        assert_eq!(f.value, run.overview.device_utilization_pct);
        assert_eq!(f.severity, Severity::Warning);
        let rows: Vec<_> = run.inputs.devices.devices.iter().filter(|r| r.took_part).collect();
        assert_eq!((rows.len(), f.evidence.len()), (1, 1));
        let lowest = rows.iter().map(|r| r.utilization_pct).fold(f64::INFINITY, f64::min);
        let first = rows.iter().find(|r| f.evidence[0].what.starts_with(&format!("{}:", r.device))).unwrap();
        assert_eq!(first.utilization_pct, lowest);
        assert_eq!(f.evidence[0].duration_ps, Some(first.window_ps));
    }
}
