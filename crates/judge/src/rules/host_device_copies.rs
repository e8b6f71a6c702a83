//! `host-device-copies`: Copies between host and device take more of the step than the threshold.

use stepscope_model::device_time::Part;
use stepscope_model::Profile;

use crate::context::Context;
use crate::evidence::*;
use crate::finding::{Evidence, Finding, Severity};
use crate::rule::Rule;

pub const RULE: Rule = Rule { id: "host-device-copies", threshold: Some("copies_pct"), needs_steps: true, check };

fn check(cx: &Context, out: &mut Vec<Finding>) {
    let (profile, th) = (cx.profile, cx.th);
    let b = &cx.overview.breakdown;
    // --- copies
    let copies_pct = cx.step_pct(b.host_to_device_ps + b.device_to_host_ps + b.device_to_device_ps);
    if copies_pct > th.copies_pct {
        out.push(Finding {
            rule: RULE.id,
            severity: Severity::Warning,
            title: format!("copies take {copies_pct:.1}% of the step"),
            value: copies_pct,
            threshold: th.copies_pct,
            unit: "pct",
            evidence: largest_copies(profile, 3),
            advice: "keep data on the device between steps, transfer once (jax.device_put outside the loop), \
                     prefetch the next batch asynchronously, and avoid pulling values to the host (float(x), \
                     np.asarray) inside the step"
                .into(),
        });
    }
}

/// The longest copy events: device copy ops, else host-side transfers.
fn largest_copies(profile: &Profile, n: usize) -> Vec<Evidence> {
    let mut found: Vec<(i64, i64, String, String)> = Vec::new();
    let base = profile.time_base();
    for d in profile.devices() {
        let ops = d.cached_ops();
        for (i, kind) in base.kinds[d.index].of_op.iter().enumerate() {
            if matches!(kind, Part::HostToDevice | Part::DeviceToHost | Part::DeviceToDevice) {
                let op = ops.event(d.plane, i);
                found.push((op.duration_ps, op.start_ps, op.name.to_string(), d.host.to_string()));
            }
        }
    }
    for (h, time) in profile.hosts.iter().zip(&base.hosts) {
        for (iv, what) in [(&time.to_device, "host → device transfer"), (&time.to_host, "device → host transfer")] {
            for &(a, b) in iv.spans() {
                found.push((b.saturating_sub(a), a, what.to_string(), h.host.clone()));
            }
        }
    }
    found.sort_by_key(|f| std::cmp::Reverse(f.0));
    found.into_iter().take(n).map(|(d, s, name, host)| at(ev(format!("{name}: {}", ms(d)), &host), s, d)).collect()
}

#[cfg(test)]
mod tests {
    use super::RULE;
    use crate::testing::Run;

    #[test]
    fn fires_on_copies_taking_much_of_the_step() {
        let run = Run::of("cpu-device-put");
        let b = &run.overview.breakdown;
        let f = run.one(&RULE);
        assert_eq!(f.value, run.step_pct(b.host_to_device_ps + b.device_to_host_ps + b.device_to_device_ps));
        assert!(f.evidence.len() <= 3 && !f.evidence.is_empty());
        assert!(Run::of("cpu-clean").check(&RULE).is_empty());
    }
}
