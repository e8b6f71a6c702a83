//! `async-waits`: Devices waiting on async copies more of the step than the threshold.

use stepscope_model::device_time::Part;

use crate::context::Context;
use crate::evidence::*;
use crate::finding::{Evidence, Finding, Severity};
use crate::rule::Rule;

pub const RULE: Rule = Rule { id: "async-waits", threshold: Some("async_wait_pct"), needs_steps: true, check };

fn check(cx: &Context, out: &mut Vec<Finding>) {
    let th = cx.th;
    let b = &cx.overview.breakdown;
    let wait_pct = cx.step_pct(b.async_wait_ps);
    if wait_pct > th.async_wait_pct {
        out.push(Finding {
            gain: None,
            caveats: Vec::new(),
            rule: RULE.id,
            severity: Severity::Warning,
            title: format!("devices wait on async copies {wait_pct:.1}% of the step"),
            value: wait_pct,
            threshold: th.async_wait_pct,
            unit: "pct",
            evidence: top_ops_of_kind(cx, Part::AsyncWait, 3),
            advice: "the device sits in `copy-done` ops waiting for async copies (host offloading, memory-space \
                     moves): see what each step copies (`stepscope hlo PATH copy-start`), keep those buffers in \
                     device memory, or give the copies compute to overlap"
                .into(),
        });
    }
}

/// The `n` ops of `kind` ([`stepscope_model::device_time::op_kind`] of each op row's
/// name and category) with the most self time, as evidence.
pub fn top_ops_of_kind(cx: &Context, kind: Part, n: usize) -> Vec<Evidence> {
    let rows = &cx.op_rows().ops;
    rows.iter()
        .filter(|r| stepscope_model::device_time::op_kind(&r.name, &r.category, "") == kind)
        .take(n)
        .map(|r| {
            ev(
                format!(
                    "{}: {} of device time over {} executions ({:.1}% of op time)",
                    r.name,
                    ms(r.self_ps),
                    r.executions,
                    r.device_time_pct
                ),
                "",
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::RULE;
    use crate::testing::Run;

    #[test]
    fn fires_on_devices_waiting_for_async_copies() {
        let run = Run::of("tpu-v6e-inference");
        let f = run.one(&RULE);
        assert_eq!(f.value, run.step_pct(run.overview.breakdown.async_wait_ps));
        assert!(f.evidence.iter().all(|e| e.what.contains("done")), "{f:?}");
        assert!(Run::of("cpu-clean").check(&RULE).is_empty());
    }
}
