//! `low-utilization`: Devices busy less of the step than the threshold.

use stepscope_analysis::steps;

use crate::context::Context;
use crate::evidence::*;
use crate::finding::{Finding, Severity};
use crate::rule::Rule;

pub const RULE: Rule = Rule { id: "low-utilization", threshold: Some("utilization_pct"), needs_steps: true, check };

fn check(cx: &Context, out: &mut Vec<Finding>) {
    let (s, th, steps, device_time) = (cx.overview, cx.th, cx.steps, cx.device_time);
    if device_time && s.device_utilization_pct < th.utilization_pct {
        let mut worst: Vec<&steps::Step> = steps.steps.iter().collect();
        worst.sort_by_key(|st| std::cmp::Reverse(st.device_idle_ps));
        out.push(Finding {
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
}
