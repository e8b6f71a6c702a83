//! `recompilation`: a program compiled again in more of the steps than the threshold.
//! Its input shapes, dtypes or static arguments change from call to call, so jit
//! traces and compiles it anew (every step, at worst): the capture is this loop's
//! steady state, and no warm-up helps.

use stepscope_model::stats::sum_ps;

use crate::context::Context;
use crate::evidence::*;
use crate::finding::{of_step_share, Finding};
use crate::rule::Rule;

pub const RULE: Rule = Rule { id: "recompilation", threshold: Some("recompile_steps"), needs_steps: true, check };

/// A program compiled in more than one step.
pub struct Recompiled<'a> {
    pub module: &'a str,
    /// The steps (by index) that compiled it.
    pub steps: Vec<usize>,
    /// Its compile time in those steps.
    pub compile_ps: i64,
}

/// The programs compiled in two steps or more (by the compiles' starts, each in the
/// steps of its own host), most steps first. Compiles of no known module are left out.
pub fn recompiled<'a>(cx: &Context<'a>) -> Vec<Recompiled<'a>> {
    let steps = &cx.steps.steps;
    let mut found: Vec<Recompiled<'a>> = Vec::new();
    for c in cx.inputs.compile.compiles.iter().filter(|c| !c.module.is_empty()) {
        let holds = |s: &&stepscope_model::steps::Step| {
            let (lo, hi) = s.host_span();
            s.host == c.host && lo <= c.start_ps && c.start_ps < hi
        };
        let Some(k) = steps.iter().position(|s| holds(&s)) else { continue };
        let at = match found.iter().position(|r| r.module == c.module) {
            Some(at) => at,
            None => {
                found.push(Recompiled { module: &c.module, steps: Vec::new(), compile_ps: 0 });
                found.len() - 1
            }
        };
        let r = &mut found[at];
        if r.steps.last() != Some(&k) {
            r.steps.push(k);
        }
        r.compile_ps = r.compile_ps.saturating_add(c.total_ps);
    }
    found.retain(|r| r.steps.len() >= 2);
    found.sort_by(|a, b| b.steps.len().cmp(&a.steps.len()).then(b.compile_ps.cmp(&a.compile_ps)));
    found
}

fn check(cx: &Context, out: &mut Vec<Finding>) {
    let steps = &cx.steps.steps;
    let Some(worst) = recompiled(cx).into_iter().next() else { return };
    let n = worst.steps.len();
    if (n as f64) <= cx.th.recompile_steps {
        return;
    }
    let step_total = sum_ps(steps.iter().map(|s| s.duration_ps));
    let share = 100.0 * worst.compile_ps as f64 / step_total.max(1) as f64;
    let compiles = cx.inputs.compile.compiles.iter().filter(|c| c.module == worst.module);
    out.push(
        Finding {
            gain: None,
            caveats: Vec::new(),
            rule: RULE.id,
            severity: of_step_share(share),
            title: format!(
                "{} is compiled again in {n} of {} steps ({} a step, {share:.1}% of step time): its input shapes or \
             static arguments change",
                worst.module,
                steps.len(),
                ms(worst.compile_ps / steps.len().max(1) as i64)
            ),
            value: n as f64,
            threshold: cx.th.recompile_steps,
            unit: "count",
            evidence: compiles
                .take(3)
                .map(|c| at(ev(format!("compile of {}", c.module), &c.host), c.start_ps, c.total_ps))
                .collect(),
            advice: "jit compiles a program for each new input shape, dtype, pytree structure and static argument: \
                 pad batches to a few fixed sizes (and mask the padding), pass changing Python numbers as arrays \
                 rather than static_argnums, and keep the argument structure the same every step; \
                 jax.config.update('jax_explain_cache_misses', True) logs why each compile happened"
                .into(),
        }
        .with_gain(cx.gain(&crate::gains::remove_compile())),
    );
}

#[cfg(test)]
mod tests {
    use super::RULE;
    use crate::finding::Severity;
    use crate::testing::Run;

    #[test]
    fn fires_on_a_program_compiled_every_step_and_not_on_its_twin() {
        // The batch loses a row every step: jit_train_step is compiled in each of the 8.
        let run = Run::of("cpu-recompile");
        let f = run.one(&RULE);
        let steps = run.profile.time_base().steps.steps.len();
        assert_eq!(f.value, steps as f64, "{f:?}");
        assert!(f.title.starts_with("jit_train_step is compiled again"), "{f:?}");
        assert_eq!(f.severity, Severity::Critical);
        // The padded twin compiled once, before the trace; a cold start compiles once,
        // in its first step.
        assert!(Run::of("cpu-recompile-fixed").check(&RULE).is_empty());
        assert!(Run::of("cpu-compile").check(&RULE).is_empty());
    }
}
