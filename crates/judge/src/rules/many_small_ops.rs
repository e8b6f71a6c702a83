//! `many-small-ops`: Most op executions shorter than a small op (user guide 003's KPI:
//! kernels under 0.1 ms), in much of the op time. A warning where the devices are not
//! kept busy (utilisation under `utilization_pct`: the launches cost time); a note
//! where they are (short ops run back to back, in command buffers say: fusing them
//! may still save memory traffic, not launch time).

use stepscope_analysis::ops;
use stepscope_model::stats::{pct, sum_ps};

use crate::context::Context;
use crate::evidence::*;
use crate::finding::{Finding, Severity};
use crate::rule::Rule;

pub const RULE: Rule = Rule { id: "many-small-ops", threshold: Some("small_op_share_pct"), needs_steps: true, check };

fn check(cx: &Context, out: &mut Vec<Finding>) {
    let (th, steps) = (cx.th, cx.steps);
    // --- ops
    let op_rows = cx.op_rows();
    let total_execs: u64 = op_rows.ops.iter().map(|r| r.executions).sum();
    let small_us = th.small_op_us;
    let small: Vec<&ops::OpRow> = op_rows.ops.iter().filter(|r| (r.avg_ps as f64) < small_us * 1e6).collect();
    let small_execs: u64 = small.iter().map(|r| r.executions).sum();
    let small_share = pct(small_execs as i64, total_execs as i64);
    let small_time = pct(sum_ps(small.iter().map(|r| r.self_ps)), op_rows.op_time_ps);
    let per_step = total_execs / steps.steps.len().max(1) as u64;
    if small_share > th.small_op_share_pct && small_time > th.small_op_time_pct && per_step >= 100 {
        let mut by_count = small.clone();
        by_count.sort_by_key(|r| std::cmp::Reverse(r.executions));
        let busy = cx.overview.device_utilization_pct >= th.utilization_pct;
        let advice = if busy {
            format!(
                "the devices are busy {:.0}% of the step, so these short ops cost little launch time; fusing them \
                 (larger jitted functions, lax.scan) may still save the memory traffic between them",
                cx.overview.device_utilization_pct
            )
        } else {
            "launch overhead dominates small ops: jit larger functions (whole train step, lax.scan over layers or \
             micro-steps) so XLA can fuse them, and avoid calling many tiny jitted functions per step"
                .to_string()
        };
        out.push(Finding {
            gain: None,
            caveats: Vec::new(),
            rule: RULE.id,
            severity: if busy { Severity::Info } else { Severity::Warning },
            title: format!(
                "{small_share:.0}% of {per_step} ops per step run under {small_us} µs ({small_time:.0}% of op time)"
            ),
            value: small_share,
            threshold: th.small_op_share_pct,
            unit: "pct",
            evidence: by_count
                .iter()
                .take(5)
                .map(|r| {
                    let mut e = ev(format!("{} × {} (avg {})", r.executions, r.name, ms(r.avg_ps)), "");
                    e.detail = r.module.clone();
                    e
                })
                .collect(),
            advice,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::RULE;
    use crate::testing::Run;

    use stepscope_model::stats::pct;

    #[test]
    fn fires_on_many_short_ops() {
        let run = Run::of("gpu-async");
        let f = run.one(&RULE);
        let ops = &run.profile_ops();
        let all: u64 = ops.iter().map(|r| r.executions).sum();
        // Guide 003's KPI: ops under 0.1 ms, an execution (a GEMM and its memset are one).
        let small: u64 = ops.iter().filter(|r| (r.avg_ps as f64) < 100.0 * 1e6).map(|r| r.executions).sum();
        assert_eq!(f.value, pct(small as i64, all as i64));
        // gpu-async's GPU is busy 38% of the step: the launches cost it time.
        assert_eq!(f.severity, crate::finding::Severity::Warning);
        assert!(Run::of("cpu-clean").check(&RULE).is_empty());
        // gpu-nosync runs the same short kernels back to back (busy 96%): a note.
        let busy = Run::of("gpu-nosync").one(&RULE);
        assert_eq!(busy.severity, crate::finding::Severity::Info);
        assert!(busy.advice.contains("cost little launch time"), "{}", busy.advice);
    }
}
