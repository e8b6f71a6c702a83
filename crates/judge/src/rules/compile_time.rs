//! `compile-time`: XLA compilation longer than the threshold, seconds.

use crate::context::Context;
use crate::evidence::*;
use crate::finding::{Finding, Severity};
use crate::rule::Rule;

pub const RULE: Rule = Rule { id: "compile-time", threshold: Some("compile_s"), needs_steps: false, check };

fn check(cx: &Context, out: &mut Vec<Finding>) {
    let (inputs, th) = (cx.inputs, cx.th);
    let comp = &inputs.compile;
    let compile_s = comp.total_ps as f64 / 1e12;
    if compile_s > th.compile_s {
        out.push(Finding {
            gain: None,
            caveats: Vec::new(),
            rule: RULE.id,
            severity: Severity::Warning,
            title: format!("XLA compilation took {compile_s:.2} s"),
            value: compile_s,
            threshold: th.compile_s,
            unit: "s",
            evidence: comp
                .compiles
                .iter()
                .take(3)
                .map(|c| at(ev(format!("compile of {}", or_unknown(&c.module)), &c.host), c.start_ps, c.total_ps))
                .collect(),
            advice: "cache compilations across runs (jax.config.update('jax_compilation_cache_dir', …)), avoid \
                     recompiles from changing shapes or Python scalars passed as static args"
                .into(),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::RULE;
    use crate::testing::Run;

    #[test]
    fn fires_on_long_compilation() {
        let run = Run::of("gpu-compile");
        let f = run.one(&RULE);
        assert_eq!(f.value, run.inputs.compile.total_ps as f64 / 1e12);
        assert!(f.value > f.threshold && f.unit == "s");
        assert!(Run::of("cpu-clean").check(&RULE).is_empty());
    }
}
