//! `many-small-ops`: Most op executions shorter than a small op, in much of the op time.

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
    let total_execs: u64 = op_rows.ops.iter().map(|r| r.count).sum();
    let small_us = th.small_op_us;
    let small: Vec<&ops::OpRow> = op_rows.ops.iter().filter(|r| (r.avg_ps as f64) < small_us * 1e6).collect();
    let small_execs: u64 = small.iter().map(|r| r.count).sum();
    let small_share = pct(small_execs as i64, total_execs as i64);
    let small_time = pct(sum_ps(small.iter().map(|r| r.self_ps)), op_rows.op_time_ps);
    let per_step = total_execs / steps.steps.len().max(1) as u64;
    if small_share > th.small_op_share_pct && small_time > th.small_op_time_pct && per_step >= 100 {
        let mut by_count = small.clone();
        by_count.sort_by_key(|r| std::cmp::Reverse(r.count));
        out.push(Finding {
            rule: RULE.id,
            severity: Severity::Warning,
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
                    let mut e = ev(format!("{} × {} (avg {})", r.count, r.name, ms(r.avg_ps)), "");
                    e.detail = r.module.clone();
                    e
                })
                .collect(),
            advice:
                "launch overhead dominates small ops: jit larger functions (whole train step, lax.scan over \
                     layers or micro-steps) so XLA can fuse them, and avoid calling many tiny jitted functions per step"
                    .into(),
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
        let all: u64 = ops.iter().map(|r| r.count).sum();
        let small: u64 = ops.iter().filter(|r| (r.avg_ps as f64) < 10.0 * 1e6).map(|r| r.count).sum();
        assert_eq!(f.value, pct(small as i64, all as i64));
        assert!(Run::of("cpu-clean").check(&RULE).is_empty());
    }
}
