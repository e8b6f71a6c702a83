//! `runtime-overhead`: The XLA:CPU runtime between the ops of a program more of the step than the threshold.

use crate::context::Context;
use crate::finding::{Finding, Severity};
use crate::rule::Rule;

pub const RULE: Rule =
    Rule { id: "runtime-overhead", threshold: Some("runtime_overhead_pct"), needs_steps: true, check };

fn check(cx: &Context, out: &mut Vec<Finding>) {
    let th = cx.th;
    let b = &cx.overview.breakdown;
    let overhead_pct = cx.step_pct(b.runtime_overhead_ps);
    if overhead_pct > th.runtime_overhead_pct {
        out.push(Finding {
            gain: None,
            caveats: Vec::new(),
            rule: RULE.id,
            severity: Severity::Info,
            title: format!("the XLA:CPU runtime spends {overhead_pct:.1}% of the step between ops"),
            value: overhead_pct,
            threshold: th.runtime_overhead_pct,
            unit: "pct",
            evidence: vec![],
            advice: "inside each program the executor hands ops to host threads; many small ops make that \
                     overhead show: fuse them (larger jitted functions, fewer tiny ops), or use a larger batch"
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
    fn fires_on_xla_cpu_runtime_time_between_ops() {
        // cpu-dp4's executor spends 6.3% of the step between its ops: over a 5% bar.
        let run = Run::of("cpu-dp4");
        let th = Thresholds { runtime_overhead_pct: 5.0, ..Thresholds::default() };
        let f = run.one_with(&RULE, &th);
        assert_eq!(f.value, run.step_pct(run.overview.breakdown.runtime_overhead_ps));
        assert!(run.check(&RULE).is_empty());
        // A GPU has no runtime between the ops of a program.
        let gpu = Run::of("gpu-bf16");
        assert_eq!(gpu.overview.breakdown.runtime_overhead_ps, 0);
        assert!(gpu.check(&RULE).is_empty());
    }

    /// The time XLA:CPU's intra-op pool spends finishing the dots it was handed is the
    /// ops' (their `end:` events), not the runtime's: on cpu-sleep and cpu-clean the
    /// rule fired on it (11.7% and 10.5% of the step), and the runtime between ops is
    /// now 1.7% and 1.3%.
    #[test]
    fn the_pools_work_is_not_runtime_overhead() {
        for name in ["cpu-sleep", "cpu-clean"] {
            let run = Run::of(name);
            let pct = run.step_pct(run.overview.breakdown.runtime_overhead_ps);
            assert!(pct < 2.0, "{name}: {pct}");
            assert!(run.check(&RULE).is_empty(), "{name}");
        }
    }
}
