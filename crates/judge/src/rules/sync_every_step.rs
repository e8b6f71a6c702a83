//! `sync-every-step`: the loop waits for its GPU or TPU at the end of every step
//! (`float(loss)`, `block_until_ready`, a device→host read), so the device waits in turn
//! for the next step's Python and launches; dispatching ahead would save more of the
//! step than the threshold (the what-if model's `--dispatch-ahead`).

use stepscope_analysis::steps::StepTiming;
use stepscope_model::DeviceKind;

use crate::context::Context;
use crate::evidence::*;
use crate::finding::{of_step_share, Finding};
use crate::rule::Rule;

pub const RULE: Rule = Rule { id: "sync-every-step", threshold: Some("sync_every_step_pct"), needs_steps: true, check };

fn check(cx: &Context, out: &mut Vec<Finding>) {
    // Steps timed on their host hold their device's work: the host waited for it. Only
    // an accelerator runs beside its host (XLA:CPU runs on the host's own cores), and
    // dispatching ahead gains at most the device's idle time.
    let o = cx.overview;
    let accelerator = o.environment.devices.iter().any(|g| g.kind != DeviceKind::Cpu);
    let idle_pct = cx.step_pct(o.breakdown.device_idle_ps);
    if !cx.device_time || o.step_timing != StepTiming::Host || !accelerator || idle_pct <= cx.th.sync_every_step_pct {
        return;
    }
    let Some(gain) = cx.gain(&crate::gains::dispatch_ahead()) else { return };
    if gain.gain_pct <= cx.th.sync_every_step_pct {
        return;
    }
    let b = &cx.overview.breakdown;
    out.push(
        Finding {
            gain: None,
            caveats: Vec::new(),
            rule: RULE.id,
            severity: of_step_share(gain.gain_pct),
            title: format!(
                "every step waits for its device, then the device waits {:.1}% of the step for the next launch",
                cx.step_pct(b.device_idle_ps)
            ),
            value: gain.gain_pct,
            threshold: cx.th.sync_every_step_pct,
            unit: "pct",
            evidence: vec![ev(
                format!(
                    "each step's host span holds its device's work (the host waited for it): the device is idle {} \
                     of the mean {} step, while the host finishes the step and launches the next",
                    ms(b.device_idle_ps),
                    ms(cx.overview.step_time.mean_ps)
                ),
                "",
            )],
            advice: "do not wait for the device every step: read the loss and metrics every N steps (or \
                     accumulate them on the device), drop the per-step jax.block_until_ready / float(loss) / \
                     np.asarray, and let JAX's asynchronous dispatch queue the next step while this one runs"
                .into(),
        }
        .with_gain(Some(gain)),
    );
}

#[cfg(test)]
mod tests {
    use super::RULE;
    use crate::testing::Run;

    /// A device-bound GPU loop that reads its loss every step, against the same loop
    /// that never waits (captured 18 s apart on one H200).
    #[test]
    fn fires_on_a_loop_that_syncs_every_step_and_not_on_its_twin_that_never_waits() {
        let f = Run::of("gpu-sync").one(&RULE);
        assert!(f.value > 10.0 && f.gain.as_ref().is_some_and(|g| g.gain_pct == f.value), "{f:?}");
        assert!(Run::of("gpu-nosync").check(&RULE).is_empty());
        // XLA:CPU runs on its host's own cores: nothing to dispatch ahead of.
        assert!(Run::of("cpu-sync").check(&RULE).is_empty());
    }
}
