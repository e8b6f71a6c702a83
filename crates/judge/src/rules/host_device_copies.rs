//! `host-device-copies`: Copies between host and device take more of the step than the
//! threshold. (Copies within a device compute nothing too, but their cause and fix are
//! others': `data-movement` judges them.)

use crate::context::Context;
use crate::facts::Kind;
use crate::finding::{of_step_share, Finding};
use crate::rule::Rule;

pub const RULE: Rule = Rule { id: "host-device-copies", threshold: Some("copies_pct"), needs_steps: true, check };

fn check(cx: &Context, out: &mut Vec<Finding>) {
    let th = cx.th;
    let b = &cx.overview.breakdown;
    // --- copies
    let copies_pct = cx.step_pct(b.host_to_device_ps + b.device_to_host_ps);
    if copies_pct > th.copies_pct {
        out.push(
            Finding {
                gain: None,
                caveats: Vec::new(),
                rule: RULE.id,
                severity: of_step_share(copies_pct),
                title: format!("copies between host and device take {copies_pct:.1}% of the step"),
                value: copies_pct,
                threshold: th.copies_pct,
                unit: "pct",
                evidence: cx.facts.cited(Kind::Copies),
                advice: "keep data on the device between steps, transfer once (jax.device_put outside the loop), \
                     prefetch the next batch asynchronously, and avoid pulling values to the host (float(x), \
                     np.asarray) inside the step"
                    .into(),
            }
            .with_gain(cx.gain(&crate::gains::prefetch_copies())),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::RULE;
    use crate::testing::Run;

    #[test]
    fn fires_on_copies_taking_much_of_the_step() {
        let run = Run::of("cpu-device-put");
        let b = &run.overview.breakdown;
        let f = run.one(&RULE);
        assert_eq!(f.value, run.step_pct(b.host_to_device_ps + b.device_to_host_ps));
        assert!(f.evidence.len() <= 3 && !f.evidence.is_empty());
        assert!(Run::of("cpu-clean").check(&RULE).is_empty());
        // Buffers copied within the GPU (a step returning its state unchanged): not
        // this rule's, data-movement's.
        let stale = Run::of("gpu-stale-state");
        assert!(stale.overview.breakdown.device_to_device_ps > 0);
        assert!(stale.check(&RULE).is_empty());
    }
}
