//! `gaps-between-steps`: Time between steps, outside any step, above the threshold.

use stepscope_analysis::steps;
use stepscope_model::stats::{pct, sum_ps};

use crate::context::Context;
use crate::facts::{gaps_between_steps, Kind};
use crate::finding::{Finding, Severity};
use crate::rule::Rule;

pub const RULE: Rule =
    Rule { id: "gaps-between-steps", threshold: Some("host_overhead_pct"), needs_steps: true, check };

fn check(cx: &Context, out: &mut Vec<Finding>) {
    let (th, steps) = (cx.th, cx.steps);
    let between = gaps_between_steps(steps);
    // The gaps of every host over every host's span (its first step's start to its last
    // step's end): a pod's hosts each pass their own time between steps, side by side.
    let mut spans: Vec<(&str, i64, i64)> = Vec::new();
    for s in &steps.steps {
        match spans.iter_mut().find(|h| h.0 == s.host) {
            Some(h) => (h.1, h.2) = (h.1.min(s.start_ps), h.2.max(s.end_ps())),
            None => spans.push((&s.host, s.start_ps, s.end_ps())),
        }
    }
    let span = sum_ps(spans.iter().map(|h| h.2.saturating_sub(h.1)));
    let between_pct = pct(sum_ps(between.iter().map(|g| g.2)), span);
    if between_pct > th.host_overhead_pct {
        out.push(Finding {
            gain: None,
            caveats: Vec::new(),
            rule: RULE.id,
            severity: if between_pct > 3.0 * th.host_overhead_pct { Severity::Critical } else { Severity::Warning },
            title: format!("{between_pct:.1}% of the time passes between steps"),
            value: between_pct,
            threshold: th.host_overhead_pct,
            unit: "pct",
            evidence: cx.facts.cited(Kind::BetweenSteps),
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

    /// A pod's hosts pass their time between steps side by side: two hosts that each
    /// pass a share between steps pass that share, not twice it.
    #[test]
    fn hosts_side_by_side_pass_their_own_share_between_steps() {
        let one = Run::of("cpu-sleep").one(&RULE);
        let two = Run::of_hosts(&["cpu-sleep", "cpu-sleep"]).one(&RULE);
        assert!((two.value - one.value).abs() < 1e-9, "{} vs {}", two.value, one.value);
    }
}
