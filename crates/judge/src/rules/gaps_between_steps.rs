//! `gaps-between-steps`: Time between steps, outside any step, above the threshold.

use crate::evidence::host_activity;
use stepscope_analysis::steps::{self, Steps};
use stepscope_model::stats::{pct, sum_ps};

use crate::context::Context;
use crate::evidence::*;
use crate::finding::{Finding, Severity};
use crate::rule::Rule;

pub const RULE: Rule =
    Rule { id: "gaps-between-steps", threshold: Some("host_overhead_pct"), needs_steps: true, check };

fn check(cx: &Context, out: &mut Vec<Finding>) {
    let (profile, th, steps) = (cx.profile, cx.th, cx.steps);
    let between = between_steps(steps);
    let span: i64 = {
        let lo = steps.steps.iter().map(|s| s.start_ps).min().unwrap_or(0);
        let hi = steps.steps.iter().map(|s| s.end_ps()).max().unwrap_or(0);
        hi.saturating_sub(lo)
    };
    let between_pct = pct(sum_ps(between.iter().map(|g| g.1)), span);
    if between_pct > th.host_overhead_pct {
        let mut worst = between.clone();
        worst.sort_by_key(|g| std::cmp::Reverse(g.1));
        out.push(Finding {
            rule: RULE.id,
            severity: if between_pct > 3.0 * th.host_overhead_pct { Severity::Critical } else { Severity::Warning },
            title: format!("{between_pct:.1}% of the time passes between steps"),
            value: between_pct,
            threshold: th.host_overhead_pct,
            unit: "pct",
            evidence: worst
                .iter()
                .take(3)
                .map(|(st, gap)| {
                    let mut e = in_step(
                        format!("after step {}: {} until the next", st.step_num, ms(*gap)),
                        st,
                        st.end_ps(),
                        *gap,
                    );
                    e.detail = host_activity(profile, &st.host, st.end_ps(), st.end_ps() + gap);
                    e
                })
                .collect(),
            advice: match steps.source {
                // Steps found as the runs of the busiest program: the loop's own work
                // (loading the batch, dispatching) falls between them.
                steps::StepSource::ModuleExecutions => format!(
                    "no StepTraceAnnotation: each step is one run of {}, so the loop's host work (loading a \
                     batch, dispatching the next run, syncs) falls between steps; wrap each training step in \
                     jax.profiler.StepTraceAnnotation(\"train\", step_num=i) to measure it whole, and move \
                     what does not need the training thread off it",
                    steps.steps.first().map_or("the busiest program", |s| s.name.as_str())
                ),
                _ => "the loop does work outside the annotated step (sleeps, logging, checkpoints, evaluation, data \
                      loading): move it off the training thread, do it every N steps, or include it in the step \
                      annotation to see it"
                    .into(),
            },
        });
    }
}

/// Each step followed by a gap before the next step of its host: (step, gap).
fn between_steps(steps: &Steps) -> Vec<(&steps::Step, i64)> {
    let mut out = Vec::new();
    for (i, st) in steps.steps.iter().enumerate() {
        if let Some(next) = steps.steps[i + 1..].iter().find(|n| n.host == st.host) {
            let gap = next.start_ps.saturating_sub(st.end_ps());
            if gap > 0 {
                out.push((st, gap));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::RULE;
    use crate::testing::Run;

    use stepscope_model::stats::{pct, sum_ps};

    #[test]
    fn fires_on_time_between_steps() {
        // The loop sleeps between steps.
        let run = Run::of("cpu-sleep");
        let steps = run.profile.time_base().steps.steps.clone();
        let gaps = sum_ps(steps.windows(2).map(|w| (w[1].start_ps - w[0].end_ps()).max(0)));
        let span = steps.last().unwrap().end_ps() - steps[0].start_ps;
        let f = run.one(&RULE);
        assert_eq!(f.value, pct(gaps, span));
        assert!(f.evidence.iter().all(|e| e.detail.starts_with("host: ")), "{f:?}");
        assert!(Run::of("cpu-clean").check(&RULE).is_empty());
    }
}
