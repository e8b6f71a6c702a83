//! `host-callbacks`: the step waits on host callbacks (`jax.pure_callback`,
//! `io_callback`, `jax.debug.callback`/`print`) more than the threshold: a round trip
//! to the host's Python inside the compiled step, never compute.

use stepscope_model::device_time::Part;

use crate::context::Context;
use crate::evidence::*;
use crate::finding::{of_step_share, Finding};
use crate::rule::Rule;
use crate::rules::async_waits::top_ops_of_kind;

pub const RULE: Rule = Rule { id: "host-callbacks", threshold: Some("host_callback_pct"), needs_steps: true, check };

fn check(cx: &Context, out: &mut Vec<Finding>) {
    let callback_pct = cx.step_pct(cx.overview.breakdown.host_callback_ps);
    if callback_pct > cx.th.host_callback_pct {
        out.push(
            Finding {
                gain: None,
                caveats: Vec::new(),
                rule: RULE.id,
                severity: of_step_share(callback_pct),
                title: format!(
                    "host callbacks take {callback_pct:.1}% of the step ({} a step): the device waits on Python",
                    ms(cx.overview.breakdown.host_callback_ps)
                ),
                value: callback_pct,
                threshold: cx.th.host_callback_pct,
                unit: "pct",
                evidence: top_ops_of_kind(cx, Part::HostCallback, 3),
                advice: "each call stops the compiled step, hands its operands to a Python function on the host and \
                     waits for it: move the callback out of the jitted step (return the values and log them \
                     after, every N steps), write it with jax.numpy so XLA compiles it, and drop \
                     jax.debug.print/callback once debugging is done; an ordered io_callback also serialises the \
                     steps around it"
                    .into(),
            }
            .with_gain(cx.gain(&crate::gains::remove_callbacks())),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::RULE;
    use crate::finding::Severity;
    use crate::testing::Run;

    #[test]
    fn fires_on_a_callback_in_the_step_and_not_on_its_fixed_twin() {
        let run = Run::of("cpu-callback");
        let f = run.one(&RULE);
        assert_eq!(f.value, run.step_pct(run.overview.breakdown.host_callback_ps));
        // The Python function runs 6 ms of the ~14 ms step (capture_problems.py).
        assert!(f.value > 25.0 && f.severity == Severity::Critical, "{f:?}");
        assert!(f.evidence[0].what.starts_with("io_callback"), "{f:?}");
        assert!(Run::of("cpu-callback-fixed").check(&RULE).is_empty());
    }
}
