//! `step-jitter`: The p90 step time above the median by more than the threshold.

use stepscope_analysis::steps;
use stepscope_model::stats::pct;

use crate::context::Context;
use crate::evidence::*;
use crate::finding::{Finding, Severity};
use crate::rule::Rule;

pub const RULE: Rule = Rule { id: "step-jitter", threshold: Some("step_jitter_pct"), needs_steps: true, check };

fn check(cx: &Context, out: &mut Vec<Finding>) {
    let (s, th, steps) = (cx.overview, cx.th, cx.steps);
    // --- jitter
    let d = &s.step_time;
    if d.count >= 3 && d.median_ps > 0 {
        let cv = pct(d.p90_ps - d.median_ps, d.median_ps);
        if cv > th.step_jitter_pct {
            // The device work each step launched tells a step timed on its host that
            // ran work queued by earlier ones (a loop that dispatches ahead now and
            // then) from a slow one. Steps the capture cut are not in the statistics.
            let mut slow: Vec<&steps::Step> = steps.timed().collect();
            slow.sort_by_key(|st| std::cmp::Reverse(st.duration_ps));
            let mut held_earlier = false;
            out.push(Finding {
                gain: None,
                caveats: Vec::new(),
                rule: RULE.id,
                severity: Severity::Warning,
                title: format!(
                    "slow steps: p90 step time is {cv:.1}% above the median (slowest {} vs median {})",
                    ms(d.max_ps),
                    ms(d.median_ps)
                ),
                value: cv,
                threshold: th.step_jitter_pct,
                unit: "pct",
                evidence: slow
                    .iter()
                    .take(3)
                    .map(|st| {
                        let mut e = in_step(
                            format!("step {} took {}", st.step_num, ms(st.duration_ps)),
                            st,
                            st.start_ps,
                            st.duration_ps,
                        );
                        e.detail = format!("device idle {}, compile {}", ms(st.device_idle_ps), ms(st.compile_ps));
                        // Busy a quarter beyond the work it launched: earlier steps' work ran in it.
                        if let Some(w) = st.device_work_ps.filter(|&w| st.device_busy_ps > w.saturating_mul(5) / 4) {
                            held_earlier = true;
                            e.detail.push_str(&format!(
                                "; its device ran {} but it launched {}: work queued by earlier steps ran in it",
                                ms(st.device_busy_ps),
                                ms(w)
                            ));
                        }
                        e
                    })
                    .collect(),
                advice: match held_earlier {
                    false => "uneven steps point at periodic host work (checkpointing, logging, eval, garbage \
                              collection), recompilation, or input stalls: compare the slow steps' timelines with a \
                              median one"
                        .into(),
                    true => "a slow step here ran device work that earlier steps launched (the loop dispatches \
                             ahead, and the device caught up in it): judge steps by the work each launched \
                             (`stepscope steps PATH`, LAUNCHED), or block on each step's result while profiling; \
                             otherwise uneven steps point at periodic host work, recompilation or input stalls"
                        .into(),
                },
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::RULE;
    use crate::testing::Run;

    use stepscope_model::stats::pct;

    #[test]
    fn fires_on_slow_steps() {
        let run = Run::of("cpu-slow");
        let d = &run.overview.step_time;
        let f = run.one(&RULE);
        assert_eq!(f.value, pct(d.p90_ps - d.median_ps, d.median_ps));
        // The slowest steps, longest first.
        let slowest = run.profile.time_base().steps.steps.iter().map(|s| s.duration_ps).max().unwrap();
        assert_eq!(f.evidence[0].duration_ps, Some(slowest));
        assert!(Run::of("cpu-clean").check(&RULE).is_empty());
    }
}
