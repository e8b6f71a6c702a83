//! `low-occupancy`: Much of the kernel time in kernels below `occupancy_pct` occupancy
//! (user guide 003: above 50% for compute-bound kernels) whose op, compute-bound,
//! reaches under half its roof. A note: library kernels (cuBLAS, cuDNN) choose a low
//! occupancy on purpose (large tiles) and reach their roof with it, so only kernels
//! that also fall short of it are counted, and the advice says what the user can
//! change.

use stepscope_analysis::kernels;
use stepscope_model::stats::pct;

use crate::context::Context;
use crate::evidence::*;
use crate::finding::{Finding, Severity};
use crate::rule::Rule;

pub const RULE: Rule = Rule { id: "low-occupancy", threshold: Some("occupancy_pct"), needs_steps: false, check };

/// Share of kernel time, percent, the low-occupancy kernels must take to be noted.
const KERNEL_TIME_PCT: f64 = 10.0;

/// Share of its roof, percent, under which a compute-bound op falls short of it.
const ROOF_PCT: f64 = 50.0;

fn check(cx: &Context, out: &mut Vec<Finding>) {
    let (th, op_rows) = (cx.th, cx.op_rows());
    // The kernel statistics cost a pass over every kernel: only where compute-bound ops
    // short of their roof take a share of op time that could reach the threshold.
    let short_time: i64 = (op_rows.ops.iter())
        .filter(|o| o.bound == Some("compute") && o.roof_pct.is_some_and(|p| p < ROOF_PCT))
        .map(|o| o.self_ps)
        .sum();
    if pct(short_time, op_rows.op_time_ps) <= KERNEL_TIME_PCT / 2.0 {
        return;
    }
    let k = kernels::kernels(cx.profile);
    if k.kernel_time_ps <= 0 {
        return;
    }
    let short_of_roof = |kr: &kernels::KernelRow| {
        op_rows.ops.iter().any(|o| {
            o.name == kr.op
                && o.module == kr.module
                && o.bound == Some("compute")
                && o.roof_pct.is_some_and(|p| p < ROOF_PCT)
        })
    };
    let mut low: Vec<&kernels::KernelRow> = (k.kernels.iter())
        .filter(|kr| kr.occupancy_pct.is_some_and(|o| o < th.occupancy_pct) && short_of_roof(kr))
        .collect();
    let share = pct(low.iter().map(|kr| kr.total_ps).sum(), k.kernel_time_ps);
    if share <= KERNEL_TIME_PCT {
        return;
    }
    low.sort_by_key(|kr| std::cmp::Reverse(kr.total_ps));
    out.push(Finding {
        rule: RULE.id,
        severity: Severity::Info,
        title: format!(
            "{share:.0}% of kernel time in kernels under {:.0}% occupancy whose ops reach under half their roof",
            th.occupancy_pct
        ),
        value: share,
        threshold: th.occupancy_pct,
        unit: "pct",
        evidence: low
            .iter()
            .take(5)
            .map(|kr| {
                let mut e = ev(
                    format!(
                        "{} ({}): occupancy {:.0}%, {} registers a thread, {} of kernel time",
                        short(&kr.name),
                        kr.op,
                        kr.occupancy_pct.unwrap_or(0.0),
                        kr.registers_per_thread.map_or("?".to_string(), |r| r.to_string()),
                        ms(kr.total_ps)
                    ),
                    "",
                );
                e.detail = kr.module.clone();
                e
            })
            .collect(),
        advice: "library kernels (cuBLAS, cuDNN) choose their occupancy and reach their roof with it where their \
                 inputs let them: give them bf16 (f32 runs as TF32 at half the rate), sizes that are multiples of \
                 128 and larger matrices; for XLA's own kernels, registers a thread limit occupancy \
                 (`stepscope kernels PATH` lists grid, block and registers)"
            .into(),
    });
}

/// A kernel name cut to 36 characters (a word the text cannot wrap).
fn short(name: &str) -> String {
    match name.char_indices().nth(36) {
        Some((at, _)) => format!("{}…", &name[..at]),
        None => name.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::RULE;
    use crate::testing::Run;

    #[test]
    fn notes_low_occupancy_kernels_short_of_their_roof() {
        // gpu-bf16's f32 GEMMs run as TF32 in cuBLAS kernels at 18.75% occupancy and
        // about half their roof; gpu-sync's bf16 GEMMs, at the same occupancy, reach
        // over 80% of it: nothing to say there.
        let f = Run::of("gpu-bf16").one(&RULE);
        assert_eq!(f.severity, crate::finding::Severity::Info);
        assert!(f.value > 10.0 && f.evidence[0].what.contains("occupancy 19%"), "{f:?}");
        assert!(Run::of("gpu-sync").check(&RULE).is_empty());
        assert!(Run::of("cpu-clean").check(&RULE).is_empty());
    }
}
