//! `input-bound`: The device waiting on the host's input work more of the step than the threshold.

use stepscope_model::stats::{pct, sum_ps};

use crate::context::Context;
use crate::evidence::*;
use crate::facts::Kind;
use crate::finding::{of_step_share, Finding, Severity};
use crate::rule::Rule;

pub const RULE: Rule = Rule { id: "input-bound", threshold: Some("input_bound_pct"), needs_steps: true, check };

/// Both measures of input-bound steps give the same advice.
const ADVICE: &str = "the input pipeline is on the critical path: prefetch batches on a background thread (e.g. a \
                      double-buffered iterator with jax.device_put ahead of time) and keep data loading out of the step";

fn check(cx: &Context, out: &mut Vec<Finding>) {
    let (th, steps, inputs, device_time) = (cx.th, cx.steps, cx.inputs, cx.device_time);
    let b = &cx.overview.breakdown;
    if let Some(idle_input) = b.device_idle_input_ps.filter(|_| device_time) {
        // Measured: the device idle while the host did input work (scopes, transfers).
        let input_pct = cx.step_pct(idle_input);
        if input_pct > th.input_bound_pct {
            let sc = cx.scopes();
            let mut worst: Vec<&stepscope_analysis::scopes::ScopeRow> = sc.scopes.iter().filter(|r| r.input).collect();
            worst.sort_by_key(|r| std::cmp::Reverse(r.per_step_ps.unwrap_or(0)));
            // The host's input work as a share of the step on the host, where it ran.
            let host_pct = sc.input.host_input_pct;
            out.push(
                Finding {
                    gain: None,
                    caveats: Vec::new(),
                    rule: RULE.id,
                    severity: if input_pct > 2.5 * th.input_bound_pct { Severity::Critical } else { Severity::Warning },
                    title: format!("the device waits on input {input_pct:.1}% of the step"),
                    value: input_pct,
                    threshold: th.input_bound_pct,
                    unit: "pct",
                    evidence: std::iter::once(ev(
                        format!(
                        "input work ({}) takes {} of the {} step on the host ({host_pct:.1}%); no op ran for {} of it",
                        sc.input.names.join(", "),
                        ms(b.host_input_ps.unwrap_or(0)),
                        ms(sc.host_step_ps),
                        ms(idle_input)
                    ),
                        "",
                    ))
                    .chain(worst.iter().take(3).map(|r| {
                        ev(
                            format!(
                                "scope {}: {} a step ({:.1}% of the step), the device busy {} during it",
                                r.path,
                                ms(r.per_step_ps.unwrap_or(0)),
                                r.step_pct.unwrap_or(0.0),
                                ms(r.device_busy_ps / r.count.max(1) as i64)
                            ),
                            &r.host,
                        )
                    }))
                    .collect(),
                    advice: ADVICE.into(),
                }
                .with_gain(cx.gain(&crate::gains::remove_input())),
            );
        }
    } else {
        let input = inputs.steps.leading_idle.iter().filter(|&&(i, _)| i < steps.steps.len());
        let input_pct = pct(sum_ps(input.map(|(_, ps)| *ps)), sum_ps(steps.steps.iter().map(|s| s.duration_ps)));
        if device_time && input_pct > th.input_bound_pct {
            out.push(
                Finding {
                    gain: None,
                    caveats: Vec::new(),
                    rule: RULE.id,
                    severity: of_step_share(input_pct),
                    title: format!("steps wait {input_pct:.1}% of their time before they dispatch work to the device"),
                    value: input_pct,
                    threshold: th.input_bound_pct,
                    unit: "pct",
                    evidence: cx.facts.cited(Kind::LeadingIdle),
                    advice: ADVICE.into(),
                }
                .with_gain(cx.gain(&crate::gains::remove_input())),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::RULE;
    use crate::testing::Run;

    #[test]
    fn fires_when_the_device_waits_on_input() {
        let run = Run::of("cpu-device-put");
        let f = run.one(&RULE);
        let idle_input = run.overview.breakdown.device_idle_input_ps.expect("input work is recorded");
        assert_eq!(f.value, run.step_pct(idle_input));
        assert!(f.value > f.threshold);
        assert!(Run::of("cpu-clean").check(&RULE).is_empty());
    }
}
