//! `data-movement`: ops that move memory and compute nothing — copies, transposes
//! and the other layout changes (HLO `copy`, `transpose`, and fusions of them with no
//! FLOPs) — take more of the step than the threshold. XLA copies a buffer a step
//! returns unchanged (it may not alias an input it was not given), and converts
//! layouts between ops that want different ones.

use stepscope_analysis::ops::OpRow;

use crate::context::Context;
use crate::evidence::*;
use crate::finding::{of_step_share, Finding};
use crate::rule::Rule;

pub const RULE: Rule = Rule { id: "data-movement", threshold: Some("data_movement_pct"), needs_steps: true, check };

/// True for an op that only moves or re-lays memory: a copy or a layout change by its
/// category, a fusion of them that computes nothing, or a runtime copy within or
/// between devices (`MemcpyD2D`, ROCm's `CopyDeviceToDevice`).
pub fn moves_data(r: &OpRow) -> bool {
    let base = r.name.split('.').next().unwrap_or(&r.name);
    let kind = stepscope_model::device_time::op_kind(&r.name, &r.category, "");
    r.category == "copy"
        || kind == stepscope_model::device_time::Part::DeviceToDevice
        || r.category == "data formatting"
        || (r.flops == Some(0)
            && r.category.ends_with("fusion")
            && (base.contains("transpose") || base.contains("copy")))
}

/// The ops this rule names: those that move data, most op time first.
pub fn moving(rows: &[OpRow]) -> Vec<&OpRow> {
    rows.iter().filter(|r| moves_data(r)).collect()
}

fn check(cx: &Context, out: &mut Vec<Finding>) {
    let rows = &cx.op_rows().ops;
    let moving: Vec<&OpRow> = moving(rows);
    let op_pct: f64 = moving.iter().map(|r| r.device_time_pct).sum();
    // Their share of the step: of the time the devices were busy.
    let step_pct = op_pct * cx.overview.device_utilization_pct / 100.0;
    if step_pct <= cx.th.data_movement_pct {
        return;
    }
    let evidence = (moving.iter().take(3))
        .map(|r| {
            let rate = r.bytes_per_s.map(|b| format!(" at {:.2} GB/s", b / 1e9)).unwrap_or_default();
            ev(
                format!(
                    "{} ({}): {} over {} executions{rate} ({:.1}% of op time)",
                    r.name,
                    r.category,
                    ms(r.self_ps),
                    r.executions,
                    r.device_time_pct
                ),
                "",
            )
        })
        .collect();
    out.push(
        Finding {
            gain: None,
            caveats: Vec::new(),
            rule: RULE.id,
            severity: of_step_share(step_pct),
            title: format!(
            "copies and layout changes take {op_pct:.1}% of op time (about {step_pct:.0}% of the step) and compute \
             nothing"
        ),
            value: step_pct,
            threshold: cx.th.data_movement_pct,
            unit: "pct",
            evidence,
            advice: "a step that returns a buffer it did not change (optimizer state, a frozen parameter, a \
                 schedule) makes XLA copy it into a new output: return only what changed, or donate the inputs \
                 (jax.jit(step, donate_argnums=...)) so outputs reuse their buffers; transposes come from \
                 layouts that differ between ops: keep one layout (e.g. the same dimension order for a weight \
                 in forward and backward); `stepscope hlo PATH OP` shows each copy's operand and users"
                .into(),
        }
        .with_gain(cx.gain(&crate::gains::remove_ops(&moving))),
    );
}

#[cfg(test)]
mod tests {
    use super::RULE;
    use crate::finding::Severity;
    use crate::testing::Run;

    #[test]
    fn fires_on_unchanged_state_copied_each_step_and_not_on_its_donated_twin() {
        let run = Run::of("cpu-stale-state");
        let f = run.one(&RULE);
        assert!(f.value > 30.0 && f.severity == Severity::Critical, "{f:?}");
        assert!(f.evidence.iter().all(|e| e.what.starts_with("copy")), "{f:?}");
        assert!(Run::of("cpu-stale-state-fixed").check(&RULE).is_empty());
        assert!(Run::of("cpu-clean").check(&RULE).is_empty());
    }
}
