//! `launch-queued`: Launched work waiting to start more of the step than the threshold (GPUs).

use crate::context::Context;
use crate::facts::Kind;
use crate::finding::{Finding, Severity};
use crate::rule::Rule;

pub const RULE: Rule = Rule { id: "launch-queued", threshold: Some("launch_queued_pct"), needs_steps: true, check };

fn check(cx: &Context, out: &mut Vec<Finding>) {
    let (th, device_time) = (cx.th, cx.device_time);
    let queued_ps = cx.overview.breakdown.device_idle_queued_ps.unwrap_or(0);
    let queued = cx.step_pct(queued_ps);
    if device_time && queued > th.launch_queued_pct {
        let evidence = cx.facts.cited(Kind::Queued);
        out.push(Finding {
            gain: None,
            caveats: Vec::new(),
            rule: RULE.id,
            severity: Severity::Warning,
            title: format!("launched work waits to start {queued:.1}% of the step"),
            value: queued,
            threshold: th.launch_queued_pct,
            unit: "pct",
            evidence,
            advice: "the host had launched the work but the device had not started it: each kernel launch costs \
                     microseconds, which many small kernels add up (fuse ops, keep XLA's command buffers — CUDA \
                     graphs — on), or kernels waited on a dependency: a host callback, a copy from pageable host \
                     memory, another stream. `stepscope steps PATH` shows the work each step launched"
                .into(),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::RULE;
    use crate::testing::Run;

    use crate::thresholds::Thresholds;

    #[test]
    fn fires_on_launched_work_not_started() {
        // The GPU capture links kernels to launches: queued time is measured, under
        // the default threshold.
        let run = Run::of("gpu-bf16");
        let queued = run.overview.breakdown.device_idle_queued_ps.expect("GPU kernels are linked to launches");
        assert!(queued > 0);
        assert!(run.check(&RULE).is_empty());
        let f = run.one_with(&RULE, &Thresholds { launch_queued_pct: 0.0, ..Thresholds::default() });
        assert_eq!(f.value, run.step_pct(queued));
        assert!(!f.evidence.is_empty());
        // XLA:CPU links no launches: never.
        let cpu = Run::of("cpu-tiny-ops");
        assert!(cpu.check_with(&RULE, &Thresholds { launch_queued_pct: 0.0, ..Thresholds::default() }).is_empty());
    }
}
