//! `dominant-op`: One op takes more of the op time than the threshold.

use stepscope_analysis::ops::OpRow;

use crate::context::Context;
use crate::evidence::*;
use stepscope_model::device_time::{op_kind, Part};

use crate::finding::{of_step_share, Finding};
use crate::rule::Rule;

pub const RULE: Rule = Rule { id: "dominant-op", threshold: Some("dominant_op_pct"), needs_steps: true, check };

/// The ops that compute, most op time first: the ones this rule may name.
pub fn computing(rows: &[OpRow]) -> impl Iterator<Item = &OpRow> {
    rows.iter()
        .filter(|r| op_kind(&r.name, &r.category, "") == Part::Compute && !crate::rules::data_movement::moves_data(r))
}

fn check(cx: &Context, out: &mut Vec<Finding>) {
    let (th, op_rows) = (cx.th, cx.op_rows());
    // The op with most op time that computes: a host callback, a collective, a copy or a
    // layout change is no op to optimise by its shapes and dtype (`host-callbacks`,
    // `collectives-exposed`, `data-movement` and the copy rules say what they are).
    if let Some(top) = computing(&op_rows.ops).next() {
        if top.device_time_pct > th.dominant_op_pct {
            // Its share of the step: of the time the devices were busy.
            let step_pct = top.device_time_pct * cx.overview.device_utilization_pct / 100.0;
            out.push(Finding {
                gain: None,
                caveats: Vec::new(),
                rule: RULE.id,
                severity: of_step_share(step_pct),
                title: format!(
                    "{} takes {:.1}% of op time (about {step_pct:.0}% of the step)",
                    top.name, top.device_time_pct
                ),
                value: top.device_time_pct,
                threshold: th.dominant_op_pct,
                unit: "pct",
                evidence: vec![{
                    let mut e = ev(
                        format!(
                            "{} × {} in {} (avg {})",
                            top.executions,
                            top.name,
                            or_unknown(&top.module),
                            ms(top.avg_ps)
                        ),
                        "",
                    );
                    e.detail = top.category.clone();
                    e
                }],
                advice: if top.category == "command buffer" {
                    "these are library kernels (cuBLAS, cuDNN) that XLA ran inside a command buffer (a CUDA graph), \
                     where the profile does not say which HLO op launched each: `stepscope kernels PATH` lists them \
                     with their grid and time; XLA_FLAGS=--xla_gpu_enable_command_buffer= (empty) turns command \
                     buffers off for a capture that names every op"
                        .to_string()
                } else {
                    format!(
                        "optimise this op first: `stepscope hlo PATH {}` shows its HLO, fusion and source line; check \
                         its shapes, dtype (bf16 on accelerators) and layout",
                        top.name
                    )
                },
            }.with_gain(cx.gain(&crate::gains::remove_ops(&[top]))));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::RULE;
    use crate::testing::Run;

    #[test]
    fn fires_on_one_op_taking_most_op_time() {
        // A GEMM of the GPU programs capture; a sort that is nearly all of its step (a
        // note before: severity comes from the share of the step).
        for name in ["gpu-programs", "cpu-sort"] {
            let run = Run::of(name);
            let top = run.profile_ops()[0].clone();
            let f = run.one(&RULE);
            assert_eq!(f.value, top.device_time_pct);
            assert!(f.title.starts_with(&top.name), "{}", f.title);
            assert_eq!(f.severity, crate::finding::Severity::Critical, "{f:?}");
        }
        let run = Run::of("gpu-programs");
        let top = run.profile_ops()[0].clone();
        let f = run.one(&RULE);
        assert_eq!(f.value, top.device_time_pct);
        assert!(f.title.starts_with(&top.name), "{}", f.title);
        // One op at most of the op time of a busy device is most of the step: not a note.
        let step_pct = top.device_time_pct * run.overview.device_utilization_pct / 100.0;
        assert_eq!(f.severity, crate::finding::of_step_share(step_pct), "{f:?}");
        assert!(Run::of("cpu-clean").check(&RULE).is_empty());
        // A copy taking most of the op time is the copies' finding.
        assert!(Run::of("gpu-host").check(&RULE).is_empty());
        // A collective taking most of the op time is the collectives' finding, not this
        // one's: its advice (shapes, dtype) would be wrong for it.
        let dp4 = Run::of("cpu-dp4");
        assert!(super::op_kind(&dp4.profile_ops()[0].name, "", "") == super::Part::Collective);
        assert!(dp4.check(&RULE).iter().all(|f| !f.title.starts_with("all-reduce")), "{:?}", dp4.check(&RULE));
    }
}
