//! `host-bound-gaps`: The device idle, waiting on the host, more of the step than the
//! threshold — never where the loop dispatched its work ahead of the device (that idle
//! is no wait for work not yet dispatched).

use crate::context::Context;
use crate::evidence::*;
use crate::facts::Kind;
use crate::finding::{Finding, Severity};
use crate::rule::Rule;

pub const RULE: Rule = Rule { id: "host-bound-gaps", threshold: Some("host_overhead_pct"), needs_steps: true, check };

fn check(cx: &Context, out: &mut Vec<Finding>) {
    let (th, device_time) = (cx.th, cx.device_time);
    let b = &cx.overview.breakdown;
    // Where kernels are linked to their launches, idle in which launched work had not
    // started is not the host's doing: it has its own rule. So has idle while the host
    // did recorded input work (`input-bound`).
    let queued_ps = b.device_idle_queued_ps.unwrap_or(0);
    let input_ps = b.device_idle_input_ps.unwrap_or(0);
    let host_overhead = cx.step_pct((b.device_idle_ps - queued_ps - input_ps).max(0));
    if device_time && host_overhead > th.host_overhead_pct && !dispatched_ahead(cx) {
        out.push(Finding {
            gain: None,
            caveats: Vec::new(),
            rule: RULE.id,
            severity: if host_overhead > 3.0 * th.host_overhead_pct { Severity::Critical } else { Severity::Warning },
            title: title(host_overhead, [b.device_idle_ps, input_ps, queued_ps].map(|t| cx.step_pct(t))),
            value: host_overhead,
            threshold: th.host_overhead_pct,
            unit: "pct",
            evidence: {
                let mut evidence = cx.facts.cited(Kind::IdleGaps);
                if let Some(launching) = b.device_idle_launching_ps.filter(|&l| l > 0) {
                    let what = format!(
                        "of the mean step's idle {}, {} with the host inside launch calls ({}) of work not started",
                        ms(b.device_idle_ps),
                        ms(launching),
                        launch_calls(cx)
                    );
                    evidence.insert(0, ev(what, ""));
                }
                if input_ps > 0 {
                    let what = format!(
                        "not counted: {} of the mean step's idle {} with the host loading input (input-bound)",
                        ms(input_ps),
                        ms(b.device_idle_ps)
                    );
                    evidence.insert(0, ev(what, ""));
                }
                evidence
            },
            advice: "the host is the bottleneck between device work: move Python work (logging, metrics, data \
                     preparation, `float(loss)` syncs) out of the step, prefetch input, and dispatch the next step \
                     before blocking on this one's result"
                .into(),
        });
    }
}

/// True where the loop dispatched its steps well ahead of its device (steps timed on
/// the device, the host's dispatch of them under half their device time): the work
/// was there before the device went idle, so its idle is not a wait on the host.
/// The launch calls of the run's GPUs' runtime, as its host events name them: HIP's on
/// AMD GPUs (ROCm), CUDA's on others.
fn launch_calls(cx: &Context) -> &'static str {
    let amd = (cx.overview.environment.devices.iter())
        .any(|d| d.kind == stepscope_model::device::DeviceKind::Gpu && d.model.to_ascii_uppercase().contains("AMD"));
    match amd {
        true => "hipModuleLaunchKernel, hipExtModuleLaunchKernel, hipGraphLaunch",
        false => "cuLaunchKernel, cuGraphLaunch",
    }
}

fn dispatched_ahead(cx: &Context) -> bool {
    let o = cx.overview;
    match (&o.host_step_time, o.step_timing) {
        (Some(host), stepscope_analysis::steps::StepTiming::Device) => {
            let sum = |d: &stepscope_model::stats::Distribution| d.mean_ps as f64 * d.count as f64;
            sum(host) < 0.5 * sum(&o.step_time)
        }
        _ => false,
    }
}

/// The finding's title: the share, and where it is less than the breakdown's idle line,
/// what that line holds besides (the two read as one number otherwise).
fn title(host_pct: f64, [idle_pct, input_pct, queued_pct]: [f64; 3]) -> String {
    let mut less = Vec::new();
    if input_pct >= 0.05 {
        less.push(format!("{input_pct:.1}% waiting on input"));
    }
    if queued_pct >= 0.05 {
        less.push(format!("{queued_pct:.1}% with launched work not started"));
    }
    if less.is_empty() {
        return format!("the device waits on the host {host_pct:.1}% of the step");
    }
    format!(
        "the device waits on the host {host_pct:.1}% of the step (idle {idle_pct:.1}%, less {})",
        less.join(" and ")
    )
}

#[cfg(test)]
mod tests {
    use super::RULE;
    use crate::testing::Run;

    #[test]
    fn fires_when_the_device_waits_on_the_host() {
        let run = Run::of("cpu-tiny-ops");
        let b = &run.overview.breakdown;
        let f = run.one(&RULE);
        let waited = b.device_idle_ps - b.device_idle_queued_ps.unwrap_or(0) - b.device_idle_input_ps.unwrap_or(0);
        assert_eq!(f.value, run.step_pct(waited));
        // Evidence: a note of the idle not counted (input work), then the longest idle
        // stretches inside steps, longest first, each placed in its step.
        let input = b.device_idle_input_ps.unwrap_or(0);
        assert_eq!(f.evidence[0].what.starts_with("not counted"), input > 0, "{f:?}");
        let gaps: Vec<i64> = f.evidence.iter().filter(|e| e.step_num.is_some()).filter_map(|e| e.duration_ps).collect();
        assert!(!gaps.is_empty() && gaps.windows(2).all(|w| w[0] >= w[1]), "{f:?}");
        assert!(Run::of("cpu-clean").check(&RULE).is_empty());
        // The title names what the breakdown's idle line holds besides.
        let idle =
            format!("(idle {:.1}%, less {:.1}% waiting on input)", run.step_pct(b.device_idle_ps), run.step_pct(input));
        assert!(input > 0 && f.title.ends_with(&idle), "{} / {idle}", f.title);
    }

    /// A loop that dispatched every step long before its device ran it: the device's
    /// idle is no wait for work not yet dispatched (the host was done). A loop whose
    /// dispatch takes as long as the work still waits on its host.
    #[test]
    fn never_where_the_loop_dispatched_ahead_of_its_device() {
        let th = crate::thresholds::Thresholds { host_overhead_pct: 1.0, ..Default::default() };
        let ahead = Run::of("gpu-nosync-cut");
        let (host, device) = (ahead.overview.host_step_time.as_ref().unwrap(), &ahead.overview.step_time);
        assert!(host.mean_ps * (host.count as i64) * 2 < device.mean_ps * device.count as i64, "{host:?}");
        let b = &ahead.overview.breakdown;
        assert!(ahead.step_pct(b.device_idle_ps - b.device_idle_queued_ps.unwrap_or(0)) > th.host_overhead_pct);
        assert!(ahead.check_with(&RULE, &th).is_empty());
        // Paced by its host: the dispatch as long as the work.
        let paced = Run::of("gpu-async");
        assert!(paced.overview.host_step_time.is_some());
        assert_eq!(paced.check_with(&RULE, &th).len(), 1);
    }

    #[test]
    fn the_title_shows_what_the_idle_line_holds_besides() {
        assert_eq!(super::title(44.2, [44.2, 0.0, 0.0]), "the device waits on the host 44.2% of the step");
        assert_eq!(
            super::title(42.0, [44.2, 2.2, 0.0]),
            "the device waits on the host 42.0% of the step (idle 44.2%, less 2.2% waiting on input)"
        );
        assert_eq!(
            super::title(40.0, [45.0, 2.0, 3.0]),
            "the device waits on the host 40.0% of the step (idle 45.0%, less 2.0% waiting on input and 3.0% with \
             launched work not started)"
        );
    }
}
