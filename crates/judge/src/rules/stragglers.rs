//! `stragglers`: a device or host computing longer than its peers' median by more than
//! the threshold, told apart by its work: given more work than its peers (ops run), or
//! slower at the same work (contention, clocks).

use stepscope_analysis::devices;

use crate::context::Context;
use crate::evidence::*;
use crate::finding::{Evidence, Finding, Severity};
use crate::rule::Rule;

pub const RULE: Rule = Rule { id: "stragglers", threshold: Some("straggler_pct"), needs_steps: true, check };

fn check(cx: &Context, out: &mut Vec<Finding>) {
    let (th, inputs) = (cx.th, cx.inputs);
    let over: Vec<&devices::Straggler> =
        inputs.devices.stragglers.iter().filter(|s| s.excess_pct > th.straggler_pct).collect();
    // A device given more work holds its peers back; one as slow at the same work is
    // held back itself (cores it shares, its clocks): two findings, never confused.
    let (same, more): (Vec<&devices::Straggler>, Vec<&devices::Straggler>) =
        over.into_iter().partition(|s| s.same_work);
    let found = [
        (
            more,
            Severity::Warning,
            "compute up to {worst}% longer than their peers, with more work",
            "a device or host given more work holds every collective back: look for uneven shards (batch or \
             sequence padding, a sharding that splits unevenly) or work only it runs (a metric, a logger, an \
             extra program)",
        ),
        (
            same,
            Severity::Info,
            "are up to {worst}% slower at the same work as their peers",
            "it runs the same ops as its peers, slower: not a straggler by work but by speed — devices sharing \
             cores (XLA:CPU devices of one host: --xla_force_host_platform_device_count above the cores), a host \
             busier with other processes, or thermal/clock differences",
        ),
    ];
    // The what-if model balances the devices of a step, and the hosts of a run joined
    // at their collectives: where they could not be joined, what balancing the hosts
    // gains is not known. Projected once, where a straggler is found.
    let gain = std::sync::OnceLock::new();
    for (list, severity, what, advice) in found.into_iter().filter(|(list, ..)| !list.is_empty()) {
        let gain = gain.get_or_init(|| cx.gain(&crate::gains::balance()).filter(|g| !g.hosts_apart)).clone();
        let worst = list.iter().map(|s| s.excess_pct).fold(0.0, f64::max);
        out.push(
            Finding {
                gain: None,
                caveats: Vec::new(),
                rule: RULE.id,
                severity,
                title: format!("{} device(s)/host(s) {}", list.len(), what.replace("{worst}", &format!("{worst:.0}"))),
                value: worst,
                threshold: th.straggler_pct,
                unit: "pct",
                evidence: list.iter().map(|s| evidence(s)).collect(),
                advice: advice.into(),
            }
            .with_gain(gain),
        );
    }
}

fn evidence(s: &devices::Straggler) -> Evidence {
    let mut e = ev(
        format!(
            "{}: compute {} vs peers' median {}; work {:+.1}% of theirs",
            format!("{} {}", s.host, s.device).trim_end(),
            ms(s.compute_ps),
            ms(s.peer_median_ps),
            s.work_excess_pct
        ),
        &s.host,
    );
    e.detail = format!("peers spend {} in collectives", ms(s.peer_collective_ps));
    e
}

#[cfg(test)]
mod tests {
    use super::RULE;
    use crate::testing::Run;

    #[test]
    fn fires_on_a_device_slower_than_its_peers() {
        let run = Run::of("cpu-dp4");
        let over: Vec<f64> = run.inputs.devices.stragglers.iter().map(|s| s.excess_pct).filter(|&e| e > 10.0).collect();
        let found = run.check(&RULE);
        let worst = found.iter().map(|f| f.value).fold(0.0, f64::max);
        assert_eq!(worst, over.iter().copied().fold(0.0, f64::max));
        assert_eq!(found.iter().map(|f| f.evidence.len()).sum::<usize>(), over.len());
        // Each device is named by its work: the same ops as its peers is speed, not work.
        for f in &found {
            let same = f.title.contains("at the same work");
            let want: Vec<bool> =
                run.inputs.devices.stragglers.iter().filter(|s| s.excess_pct > 10.0).map(|s| s.same_work).collect();
            assert!(want.contains(&same), "{f:?}");
            assert_eq!(f.severity == crate::finding::Severity::Info, same, "{f:?}");
        }
        assert!(Run::of("cpu-clean").check(&RULE).is_empty());
    }
}
