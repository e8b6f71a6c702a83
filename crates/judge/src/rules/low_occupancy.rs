//! `low-occupancy`: Much of the op time in kernels below `occupancy_pct` occupancy
//! (user guide 003: above 50% for compute-bound kernels) whose op, compute-bound,
//! reaches under half its roof. A note: library kernels (cuBLAS, cuDNN) choose a low
//! occupancy on purpose (large tiles) and reach their roof with it, so only kernels
//! that also fall short of it are counted, and the advice says what the user can
//! change.

use std::collections::HashSet;

use stepscope_analysis::{kernels, ops};
use stepscope_model::stats::pct;

use crate::context::Context;
use crate::evidence::*;
use crate::finding::{Finding, Severity};
use crate::rule::Rule;

pub const RULE: Rule = Rule { id: "low-occupancy", threshold: Some("occupancy_pct"), needs_steps: false, check };

/// Share of op time, percent, the low-occupancy kernels must take to be noted.
const KERNEL_TIME_PCT: f64 = 10.0;

/// Share of its roof, percent, under which a compute-bound op falls short of it.
const ROOF_PCT: f64 = 50.0;

fn check(cx: &Context, out: &mut Vec<Finding>) {
    let (th, op_rows) = (cx.th, cx.op_rows());
    // The compute-bound ops short of their roof: only their kernels are read, and only
    // where they take a share of op time that could reach the threshold.
    let short: Vec<&ops::OpRow> = (op_rows.ops.iter())
        .filter(|o| o.bound == Some("compute") && o.roof_pct.is_some_and(|p| p < ROOF_PCT))
        .collect();
    if pct(short.iter().map(|o| o.self_ps).sum(), op_rows.op_time_ps) <= KERNEL_TIME_PCT {
        return;
    }
    let wanted: HashSet<(&str, &str)> = short.iter().map(|o| (o.name.as_str(), o.module.as_str())).collect();
    let low: Vec<kernels::OpKernel> = cx
        .kernels_of_ops(&wanted)
        .into_iter()
        .filter(|k| k.occupancy_pct.is_some_and(|o| o < th.occupancy_pct))
        .collect();
    let share = pct(low.iter().map(|k| k.total_ps).sum(), op_rows.op_time_ps);
    if share <= KERNEL_TIME_PCT {
        return;
    }
    out.push(Finding {
        gain: None,
        caveats: Vec::new(),
        rule: RULE.id,
        severity: Severity::Info,
        title: format!(
            "{share:.0}% of op time in kernels under {:.0}% occupancy whose ops reach under half their roof",
            th.occupancy_pct
        ),
        value: share,
        threshold: th.occupancy_pct,
        unit: "pct",
        evidence: low
            .iter()
            .take(5)
            .map(|k| {
                let mut e = ev(
                    format!(
                        "{} ({}): occupancy {:.0}%, {} registers a thread, {}",
                        short_name(&k.name),
                        k.op,
                        k.occupancy_pct.unwrap_or(0.0),
                        k.registers_per_thread.map_or("?".to_string(), |r| r.to_string()),
                        ms(k.total_ps)
                    ),
                    "",
                );
                e.detail = k.module.clone();
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
fn short_name(name: &str) -> String {
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

    #[test]
    fn the_pass_over_a_few_ops_equals_the_kernel_table() {
        // kernels::of_ops reads only the records of the ops asked for: each of their
        // kernels' time, occupancy and registers equal the full table's rows.
        for fixture in ["gpu-bf16", "gpu-cudnn-attention"] {
            let run = Run::of(fixture);
            let all = stepscope_analysis::kernels::kernels(&run.profile);
            let wanted: std::collections::HashSet<(&str, &str)> =
                all.kernels.iter().step_by(3).map(|k| (k.op.as_str(), k.module.as_str())).collect();
            let mine = stepscope_analysis::kernels::of_ops(&run.profile, &wanted);
            let theirs: Vec<_> =
                all.kernels.iter().filter(|k| wanted.contains(&(k.op.as_str(), k.module.as_str()))).collect();
            assert!(theirs.len() > 5, "{fixture}");
            for k in &theirs {
                let same: Vec<_> = mine.iter().filter(|m| m.name == k.name && m.op == k.op).collect();
                let total: i64 = same.iter().map(|m| m.total_ps).sum();
                let table: i64 = theirs.iter().filter(|t| t.name == k.name && t.op == k.op).map(|t| t.total_ps).sum();
                assert_eq!(total, table, "{fixture} {} {}", k.name, k.op);
                assert!(same.iter().all(|m| m.occupancy_pct == k.occupancy_pct), "{fixture} {}", k.name);
            }
        }
    }
}
