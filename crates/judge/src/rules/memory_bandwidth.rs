//! `memory-bandwidth`: Memory-bound ops reach less of the peak bandwidth than the threshold.

use stepscope_analysis::ops;
use stepscope_model::stats::sum_ps;

use crate::context::Context;
use crate::evidence::*;
use crate::finding::{Finding, Severity};
use crate::rule::Rule;

pub const RULE: Rule =
    Rule { id: "memory-bandwidth", threshold: Some("memory_bandwidth_pct"), needs_steps: true, check };

/// Memory-bound ops below peak bandwidth are a warning when they take this share of
/// op time, percent (a note below it).
const MEMORY_BOUND_TIME_PCT: f64 = 10.0;

fn check(cx: &Context, out: &mut Vec<Finding>) {
    let (th, op_rows) = (cx.th, cx.op_rows());
    // Memory bandwidth of memory-bound ops, where peaks are known. Ops shorter than
    // `bandwidth_min_op_us` cannot approach peak bandwidth (launch and tail effects
    // dominate): their cost is their count, which `many-small-ops` judges.
    let small_ps = (th.bandwidth_min_op_us * 1e6) as i64;
    let mem_bound: Vec<&ops::OpRow> = op_rows
        .ops
        .iter()
        .filter(|r| r.bound == Some("memory") && r.bytes_per_s.is_some() && r.avg_ps >= small_ps)
        .collect();
    let peak = cx.facts.peak_bytes_per_s();
    let t = sum_ps(mem_bound.iter().map(|r| r.self_ps));
    if let (Some(peak), true) = (peak, t > 0) {
        let bytes: f64 = mem_bound.iter().filter_map(|r| r.bytes_accessed).map(|b| b as f64).sum();
        let share = 100.0 * bytes / (t as f64 / 1e12) / peak;
        let time_pct = if op_rows.op_time_ps > 0 { 100.0 * t as f64 / op_rows.op_time_ps as f64 } else { 0.0 };
        if share < th.memory_bandwidth_pct {
            // The ops that lose the most time to the bandwidth they leave unused.
            let lost = |r: &ops::OpRow| r.self_ps as f64 * (1.0 - r.bytes_per_s.unwrap_or(0.0) / peak).max(0.0);
            let mut worst = mem_bound.clone();
            worst.sort_by(|a, b| lost(b).total_cmp(&lost(a)));
            out.push(Finding {
                gain: None,
                caveats: Vec::new(),
                rule: RULE.id,
                severity: if time_pct >= MEMORY_BOUND_TIME_PCT { Severity::Warning } else { Severity::Info },
                title: format!(
                    "memory-bound ops reach {share:.0}% of peak bandwidth ({} GB/s of {:.0}), in {time_pct:.0}% of op time",
                    (share * peak / 100.0 / 1e9).round(),
                    peak / 1e9
                ),
                value: share,
                threshold: th.memory_bandwidth_pct,
                unit: "pct",
                evidence: worst
                    .iter()
                    .take(3)
                    .map(|r| {
                        let b = r.bytes_per_s.unwrap_or(0.0);
                        let mut e = ev(
                            format!(
                                "{}: {:.0} GB/s ({:.0}% of peak), {} in {} × {}",
                                r.name,
                                b / 1e9,
                                100.0 * b / peak,
                                ms(r.self_ps),
                                r.count,
                                ms(r.avg_ps)
                            ),
                            "",
                        );
                        e.detail = r.category.clone();
                        e
                    })
                    .collect(),
                advice: "these ops move data well below the memory's peak: check their layouts (`stepscope hlo PATH OP` \
                         shows shapes; transposes and padding to the hardware tile), fuse the elementwise chains \
                         around them, and use bf16 where f32 is not needed, which halves the bytes"
                    .into(),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::RULE;
    use crate::testing::Run;

    #[test]
    fn fires_on_memory_bound_ops_far_from_peak() {
        // A known GPU: its peak bandwidth comes from the data sheets.
        let run = Run::of("gpu-async");
        let f = run.one(&RULE);
        assert!(f.value < f.threshold && f.value > 0.0, "{f:?}");
        assert!(!f.evidence.is_empty());
        // A CPU has no known peak: nothing to judge.
        assert!(Run::of("cpu-clean").check(&RULE).is_empty());
    }
}
