//! `stragglers`: A device or host computing longer than its peers' median by more than the threshold.

use stepscope_analysis::devices;

use crate::context::Context;
use crate::evidence::*;
use crate::finding::{Finding, Severity};
use crate::rule::Rule;

pub const RULE: Rule = Rule { id: "stragglers", threshold: Some("straggler_pct"), needs_steps: true, check };

fn check(cx: &Context, out: &mut Vec<Finding>) {
    let (th, inputs) = (cx.th, cx.inputs);
    let dev = &inputs.devices;
    let stragglers: Vec<&devices::Straggler> =
        dev.stragglers.iter().filter(|s| s.excess_pct > th.straggler_pct).collect();
    if !stragglers.is_empty() {
        let worst = stragglers.iter().map(|s| s.excess_pct).fold(0.0, f64::max);
        out.push(Finding {
            rule: RULE.id,
            severity: Severity::Warning,
            title: format!("{} device(s)/host(s) compute up to {worst:.0}% longer than their peers", stragglers.len()),
            value: worst,
            threshold: th.straggler_pct,
            unit: "pct",
            evidence: stragglers
                .iter()
                .map(|s| {
                    let mut e = ev(
                        format!(
                            "{} {}: compute {} vs peers' median {}",
                            s.host,
                            s.device,
                            ms(s.compute_ps),
                            ms(s.peer_median_ps)
                        ),
                        &s.host,
                    );
                    e.detail = format!("peers spend {} in collectives", ms(s.peer_collective_ps));
                    e
                })
                .collect(),
            advice: "a slow device or host holds every collective back: look for uneven shards (batch or sequence \
                     padding), a host busier with input work, or thermal/clock differences"
                .into(),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::RULE;
    use crate::testing::Run;

    #[test]
    fn fires_on_a_device_slower_than_its_peers() {
        let run = Run::of("cpu-dp4");
        let over: Vec<f64> = run.inputs.devices.stragglers.iter().map(|s| s.excess_pct).filter(|&e| e > 10.0).collect();
        let f = run.one(&RULE);
        assert_eq!(f.value, over.iter().copied().fold(0.0, f64::max));
        assert_eq!(f.evidence.len(), over.len());
        assert!(Run::of("cpu-clean").check(&RULE).is_empty());
    }
}
