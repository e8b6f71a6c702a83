//! `dominant-op`: One op takes more of the op time than the threshold.

use crate::context::Context;
use crate::evidence::*;
use crate::finding::{Finding, Severity};
use crate::rule::Rule;

pub const RULE: Rule = Rule { id: "dominant-op", threshold: Some("dominant_op_pct"), needs_steps: true, check };

fn check(cx: &Context, out: &mut Vec<Finding>) {
    let (th, op_rows) = (cx.th, cx.op_rows());
    if let Some(top) = op_rows.ops.first() {
        if top.device_time_pct > th.dominant_op_pct {
            out.push(Finding {
                rule: RULE.id,
                severity: Severity::Info,
                title: format!("{} takes {:.1}% of op time", top.name, top.device_time_pct),
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
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::RULE;
    use crate::testing::Run;

    #[test]
    fn fires_on_one_op_taking_most_op_time() {
        let run = Run::of("gpu-host");
        let top = run.profile_ops()[0].clone();
        let f = run.one(&RULE);
        assert_eq!(f.value, top.device_time_pct);
        assert!(f.title.starts_with(&top.name), "{}", f.title);
        assert!(Run::of("cpu-clean").check(&RULE).is_empty());
    }
}
