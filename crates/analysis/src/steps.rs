//! Training steps, as the `steps` command shows them: the model's steps
//! ([`stepscope_model::steps`]), with the device work each launched and its FLOPs.

pub use stepscope_model::profile::{active_intervals, busy_intervals, cached, host_compile_events, took_part};
pub use stepscope_model::stats::Distribution;
pub use stepscope_model::steps::*;
use stepscope_model::Profile;

/// Finds the steps of `profile` and measures each (once per profile; later calls
/// return a copy), with their FLOPs.
pub fn steps(profile: &Profile) -> Steps {
    let mut s = cached(profile).clone();
    for (step, f) in s.steps.iter_mut().zip(crate::roofline::step_flops(profile, &cached(profile).steps)) {
        step.flops = f.map(|f| f.flops);
        step.flops_utilization_pct = f.and_then(|f| f.utilization_pct);
    }
    s
}
