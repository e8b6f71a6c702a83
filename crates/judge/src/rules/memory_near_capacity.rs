//! `memory-near-capacity`: An allocator peaking above the threshold share of its capacity.

use crate::context::Context;
use crate::evidence::*;
use crate::finding::{Finding, Severity};
use crate::rule::Rule;

pub const RULE: Rule =
    Rule { id: "memory-near-capacity", threshold: Some("memory_capacity_pct"), needs_steps: true, check };

fn check(cx: &Context, out: &mut Vec<Finding>) {
    let (th, inputs) = (cx.th, cx.inputs);
    // --- memory
    let mem = &inputs.memory;
    for a in &mem.allocators {
        let Some(share) = a.capacity_pct() else { continue };
        if share > th.memory_capacity_pct {
            out.push(Finding {
                gain: None,
                caveats: Vec::new(),
                rule: RULE.id,
                severity: if share > 98.0 { Severity::Critical } else { Severity::Warning },
                title: format!("{} {} peaks at {share:.1}% of its capacity", a.host, a.name),
                value: share,
                threshold: th.memory_capacity_pct,
                unit: "pct",
                evidence: a
                    .live_at_peak
                    .iter()
                    .map(|l| {
                        let mut e = at(
                            ev(format!("{} bytes live: {} {}", l.bytes, or_unknown(&l.op), l.shape), &a.host),
                            l.allocated_at_ps,
                            0,
                        );
                        e.detail = a.name.clone();
                        e
                    })
                    .collect(),
                advice: "close to out-of-memory: donate buffers (jit donate_argnums), rematerialise activations \
                         (jax.checkpoint), shard parameters/optimizer state, or lower the batch size"
                    .into(),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::RULE;
    use crate::testing::Run;

    use stepscope_model::stats::pct;

    use crate::thresholds::Thresholds;

    #[test]
    fn fires_per_allocator_near_its_capacity() {
        let run = Run::of("gpu-bf16");
        let with_capacity: Vec<_> =
            run.inputs.memory.allocators.iter().filter(|a| a.capacity_bytes.is_some_and(|c| c > 0)).collect();
        assert!(!with_capacity.is_empty());
        assert!(run.check(&RULE).is_empty());
        let found = run.check_with(&RULE, &Thresholds { memory_capacity_pct: 0.0, ..Thresholds::default() });
        assert_eq!(found.len(), with_capacity.iter().filter(|a| a.peak_in_use_bytes > 0).count());
        for (f, a) in found.iter().zip(with_capacity.iter().filter(|a| a.peak_in_use_bytes > 0)) {
            assert_eq!(f.value, pct(a.peak_in_use_bytes as i64, a.capacity_bytes.unwrap() as i64));
        }
    }
}
