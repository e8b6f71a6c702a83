//! `collectives-exposed`: Collectives not overlapped with compute more of the step than the threshold.

use crate::context::Context;
use crate::evidence::*;
use crate::finding::{Finding, Severity};
use crate::rule::Rule;

pub const RULE: Rule =
    Rule { id: "collectives-exposed", threshold: Some("collectives_exposed_pct"), needs_steps: true, check };

fn check(cx: &Context, out: &mut Vec<Finding>) {
    let (th, inputs) = (cx.th, cx.inputs);
    let b = &cx.overview.breakdown;
    // --- collectives and devices
    let coll = &inputs.collectives;
    let exposed_pct = cx.step_pct(b.collectives_ps);
    if exposed_pct > th.collectives_exposed_pct {
        out.push(
            Finding {
                gain: None,
                caveats: Vec::new(),
                rule: RULE.id,
                severity: Severity::Warning,
                title: format!("collectives not overlapped with compute take {exposed_pct:.1}% of the step"),
                value: exposed_pct,
                threshold: th.collectives_exposed_pct,
                unit: "pct",
                evidence: coll
                    .ops
                    .iter()
                    .take(3)
                    .map(|r| {
                        ev(
                            format!(
                                "{} × {} ({}): {} exposed, {:.0}% overlapped",
                                r.count,
                                r.name,
                                r.kind,
                                ms(r.exposed_ps),
                                r.overlap_pct
                            ),
                            "",
                        )
                    })
                    .collect(),
                advice: "overlap communication with compute: enable XLA's async collectives and latency-hiding \
                     scheduler, shard so reductions happen per layer (not all at the end), and check for \
                     stragglers that make everyone wait"
                    .into(),
            }
            .with_gain(cx.gain(&crate::gains::overlap_collectives())),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::RULE;
    use crate::testing::Run;

    #[test]
    fn fires_on_collectives_not_overlapped() {
        let run = Run::of("cpu-dp4");
        let f = run.one(&RULE);
        assert_eq!(f.value, run.step_pct(run.overview.breakdown.collectives_ps));
        assert!(f.evidence.iter().all(|e| e.what.contains("exposed")), "{f:?}");
        assert!(Run::of("cpu-clean").check(&RULE).is_empty());
    }
}
