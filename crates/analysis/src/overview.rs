//! The overview: step time, where the average step went, utilisation, top ops and
//! the run's environment. The rules read it (`stepscope-judge`); with their top
//! findings it is the summary (`stepscope-report`), whose JSON is the baseline format
//! `check` compares against.

use serde::Serialize;

use crate::ops::{self, GroupBy, OpRow};
use crate::steps::{self, StepSource, StepTiming};
use stepscope_model::device_time::{DeviceTime, DeviceTimeline, Part};
use stepscope_model::stats::{sum_ps, Distribution};
use stepscope_model::{Device, DeviceKind, Profile};

pub use stepscope_model::device_time::is_collective;

/// What one average step spent its time on, ps: the device-time model's parts
/// ([`crate::device_time`]) as shares of each device's window, averaged over the
/// devices that took part in the work, times the mean step. The parts add up to `step_ps`.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Breakdown {
    /// Mean step duration.
    pub step_ps: i64,
    /// Device running ops other than collectives, copies and async waits.
    pub device_compute_ps: i64,
    /// Collectives not overlapped by compute.
    pub collectives_ps: i64,
    /// Host-to-device copies not overlapped by the above (on XLA:CPU, the host's
    /// copies to the device while it had nothing to run).
    pub host_to_device_ps: i64,
    pub device_to_host_ps: i64,
    /// Copies within or between devices.
    pub device_to_device_ps: i64,
    /// `*-done` ops waiting for async copies.
    pub async_wait_ps: i64,
    /// Inside a program with no op running (XLA:CPU executor time between ops).
    pub runtime_overhead_ps: i64,
    /// Device idle while the host compiled.
    pub compile_ps: i64,
    /// Device idle otherwise: waiting on the host (input, Python, dispatch).
    pub device_idle_ps: i64,
    /// Of `device_idle_ps`, the time work the host had launched had not started yet
    /// (launch latency, queueing): not part of the sum. GPUs whose kernels the profile
    /// links to their launches; absent elsewhere.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device_idle_queued_ps: Option<i64>,
    /// Of the rest of `device_idle_ps`, the time the host was inside launch calls of
    /// ops not started; not part of the sum; absent as above.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device_idle_launching_ps: Option<i64>,
    /// The host's input work per step: data-loading scopes and transfers to the
    /// device (see [`crate::scopes::InputWork`]). Host time, which device parts may
    /// overlap: not part of the sum. Absent where none is recorded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host_input_ps: Option<i64>,
    /// Of `device_idle_ps`, the time the host was doing that input work: the device
    /// waited on input. Not part of the sum; absent as above.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device_idle_input_ps: Option<i64>,
}

/// Devices of one kind and model.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DeviceGroup {
    pub kind: DeviceKind,
    pub model: String,
    pub count: u64,
}

/// The run's environment.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Environment {
    pub hosts: Vec<String>,
    pub devices: Vec<DeviceGroup>,
    /// Framework versions the profile records, `name = value`.
    pub versions: Vec<String>,
    /// The lowest `host_tracer_level` the hosts were captured with, where the profile
    /// records it (0: host tracing was off, so no step annotations, launches or
    /// XLA:CPU ops were recorded).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host_tracer_level: Option<u32>,
}

/// The overview of a run.
#[derive(Clone, Debug, Serialize)]
pub struct Overview {
    pub schema: &'static str,
    pub run: String,
    pub step_source: StepSource,
    /// The steps the step time is taken over (all but those [`Step::cut`](steps::Step::cut)).
    pub step_count: u64,
    /// What a step's time is: the host's span, or, where the loop dispatches ahead,
    /// the device work it launched.
    pub step_timing: StepTiming,
    pub step_time: Distribution,
    /// Where steps are timed on the device: the host's spans of the same steps (the
    /// time the loop took to dispatch them); absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host_step_time: Option<Distribution>,
    /// Steps left out of the step time because the capture cut their work.
    #[serde(skip_serializing_if = "stepscope_model::steps::is_zero")]
    pub steps_cut: u64,
    /// Steps (of those timed) in which the host compiled: cold steps, whose time is a
    /// first call's.
    #[serde(skip_serializing_if = "stepscope_model::steps::is_zero")]
    pub cold_steps: u64,
    /// Where some steps compiled and some did not: the step time over those that did
    /// not, which comparisons rank on ([`Overview::ranked_step_time`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warm_step_time: Option<Distribution>,
    /// Jitted calls whose work the capture does not hold, at least (it stopped first).
    #[serde(skip_serializing_if = "stepscope_model::steps::is_zero")]
    pub dispatched_not_run: u64,
    /// GPU launches in the steps whose work the capture does not hold (it stopped first).
    #[serde(skip_serializing_if = "stepscope_model::steps::is_zero")]
    pub launches_not_run: u64,
    pub breakdown: Breakdown,
    /// Device busy share of step time (mean over the devices that took part in the
    /// work), percent.
    pub device_utilization_pct: f64,
    /// Share of step time the devices computed (mean over the devices that took part
    /// in the work), percent: busy less collectives, copies and waits on async copies.
    pub device_compute_pct: f64,
    /// The devices that took no part in the work (they only copied), left out of the
    /// breakdown and utilisation; absent where none is.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub devices_left_out: Vec<crate::devices::LeftOut>,
    /// The run's host files that could not be read, each with why; the numbers are
    /// the other hosts'. Absent where every host was read.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub hosts_unread: Vec<stepscope_xspace::discover::Unread>,
    /// FLOPs the devices ran per step, mean over the steps (the executed program's,
    /// from the profile or the HLO); null where no device's peak FLOP/s is known.
    pub flops_per_step: Option<f64>,
    /// FLOPs utilisation: the steps' FLOPs over their durations times the devices'
    /// peak FLOP/s, percent ([`crate::roofline::step_flops`]); null where unknown.
    pub flops_utilization_pct: Option<f64>,
    pub environment: Environment,
    pub top_ops: Vec<OpRow>,
}

impl Overview {
    /// The step time runs are compared by: over the warm steps where some steps
    /// compiled and some did not, else over every step timed.
    pub fn ranked_step_time(&self) -> &Distribution {
        self.warm_step_time.as_ref().unwrap_or(&self.step_time)
    }
}

/// Builds what the overview and the rules share: the profile's shared work
/// ([`Profile::prepare`], asked for here when the caller has not) and the op profile.
/// Analyses run after this (even side by side) never wait on each other for them.
pub fn warm(profile: &Profile) {
    profile.prepare();
    profile.host_scopes();
    ops::warm(profile);
}

/// The overview (what the rules read).
pub fn overview(profile: &Profile, top: usize) -> Overview {
    warm(profile);
    let devices = profile.devices();
    let steps = steps::cached(profile);
    let model = profile.device_time();
    let durations: Vec<i64> = steps.timed().map(|s| s.duration_ps).collect();
    let step_time = Distribution::of(&durations);
    let host_step_time = (steps.timing == StepTiming::Device)
        .then(|| Distribution::of(&steps.timed().map(|s| s.host_duration_ps).collect::<Vec<_>>()));
    let warm: Vec<i64> = steps.timed().filter(|s| s.compile_ps == 0).map(|s| s.duration_ps).collect();
    let cold_steps = (durations.len() - warm.len()) as u64;
    let warm_step_time = (cold_steps > 0 && !warm.is_empty()).then(|| Distribution::of(&warm));
    let mut breakdown = breakdown(model, if durations.is_empty() { 0 } else { step_time.mean_ps });
    if let Some(input) = crate::scopes::input_work(profile) {
        breakdown.host_input_ps = Some(input.host_input_ps);
        breakdown.device_idle_input_ps = Some(input.device_idle_input_ps.clamp(0, breakdown.device_idle_ps));
    }
    let device_utilization_pct = model.utilization_pct();
    let per_step: Vec<_> = crate::roofline::step_flops(profile, &steps.steps).into_iter().flatten().collect();
    let flops_per_step =
        (!per_step.is_empty()).then(|| per_step.iter().map(|f| f.flops as f64).sum::<f64>() / per_step.len() as f64);
    let capacity: f64 = per_step.iter().map(|f| f.capacity_flops).sum();
    let flops_utilization_pct =
        (capacity > 0.0).then(|| 100.0 * per_step.iter().map(|f| f.flops as f64).sum::<f64>() / capacity);
    let mut top_ops = ops::ops(profile, GroupBy::Op, 0).ops;
    top_ops.truncate(top);
    Overview {
        schema: "stepscope.summary/1",
        run: profile.run.clone(),
        step_source: steps.source,
        step_count: durations.len() as u64,
        step_timing: steps.timing,
        step_time,
        host_step_time,
        steps_cut: (steps.steps.len() - durations.len()) as u64,
        cold_steps,
        warm_step_time,
        dispatched_not_run: steps.dispatched_not_run,
        launches_not_run: steps.launches_not_run,
        breakdown,
        device_utilization_pct,
        device_compute_pct: model.compute_pct(),
        devices_left_out: crate::devices::left_out(profile),
        hosts_unread: profile.unread_hosts.clone(),
        flops_per_step,
        flops_utilization_pct,
        environment: environment(profile, &devices),
        top_ops,
    }
}

/// The average step of `step_ps` split as the devices' windows are: each part's share
/// of each device's window, averaged over the working devices ([`DeviceTime::working`]). The shares are
/// rounded as running totals (each part is the rounded total up to it less the one
/// before it), and idle takes what is left: the parts add up to `step_ps` exactly and
/// none is negative.
fn breakdown(model: &DeviceTime, step_ps: i64) -> Breakdown {
    let working: Vec<&DeviceTimeline> = model.working().collect();
    let mut ps = [0i64; Part::ALL.len()];
    if !working.is_empty() {
        let (mut share_so_far, mut ps_so_far) = (0.0f64, 0i64);
        for part in Part::ALL.into_iter().filter(|p| *p != Part::Idle) {
            let mean: f64 = working.iter().map(|t| t.part_ps(part) as f64 / t.window_ps() as f64).sum::<f64>()
                / working.len() as f64;
            share_so_far = (share_so_far + mean).min(1.0);
            let upto = ((share_so_far * step_ps as f64).round() as i64).clamp(ps_so_far, step_ps.max(ps_so_far));
            ps[part.index()] = upto - ps_so_far;
            ps_so_far = upto;
        }
    }
    let part = |p: Part| ps[p.index()];
    let named = sum_ps(ps.iter().copied());
    let device_idle_ps = step_ps.saturating_sub(named).max(0);
    // The idle parts' mean shares of the windows, rounded as running totals too.
    let share = |of: fn(&DeviceTimeline) -> Option<i64>| {
        let shares: Vec<f64> = working.iter().filter_map(|t| of(t).map(|q| q as f64 / t.window_ps() as f64)).collect();
        (!shares.is_empty()).then(|| shares.iter().sum::<f64>() / working.len() as f64)
    };
    let queued_share = share(|t| t.idle_queued_ps);
    let device_idle_queued_ps = queued_share.map(|q| ((q * step_ps as f64).round() as i64).clamp(0, device_idle_ps));
    let device_idle_launching_ps =
        queued_share.zip(share(|t| t.idle_launching_ps)).zip(device_idle_queued_ps).map(|((q, l), queued_ps)| {
            (((q + l) * step_ps as f64).round() as i64).clamp(queued_ps, device_idle_ps) - queued_ps
        });
    Breakdown {
        step_ps,
        device_compute_ps: part(Part::Compute),
        collectives_ps: part(Part::Collective),
        host_to_device_ps: part(Part::HostToDevice) + part(Part::HostCopyToDevice),
        device_to_host_ps: part(Part::DeviceToHost) + part(Part::HostCopyToHost),
        device_to_device_ps: part(Part::DeviceToDevice),
        async_wait_ps: part(Part::AsyncWait),
        runtime_overhead_ps: part(Part::RuntimeOverhead),
        compile_ps: part(Part::Compile),
        device_idle_ps,
        device_idle_queued_ps,
        device_idle_launching_ps,
        host_input_ps: None,
        device_idle_input_ps: None,
    }
}

/// The lowest `host_tracer_level` of the hosts' captures, where recorded.
pub fn host_tracer_level(profile: &Profile) -> Option<u32> {
    profile.hosts.iter().filter_map(stepscope_xspace::xplane::tracer_levels).map(|l| l.host).min()
}

fn environment(profile: &Profile, devices: &[Device]) -> Environment {
    let mut groups: Vec<DeviceGroup> = Vec::new();
    for d in devices {
        let model = ["device_type_string", "device_vendor"]
            .iter()
            .find_map(|k| d.plane.plane_stat(k).map(|s| d.plane.stat_display(&s)))
            .unwrap_or_else(|| if d.kind == DeviceKind::Cpu { "host CPU".into() } else { String::new() });
        match groups.iter_mut().find(|g| g.kind == d.kind && g.model == model) {
            Some(g) => g.count += 1,
            None => groups.push(DeviceGroup { kind: d.kind, model, count: 1 }),
        }
    }
    let mut versions = Vec::new();
    for space in &profile.hosts {
        for plane in &space.planes {
            for s in &plane.stats {
                let name = plane.stat_name(s.meta());
                if name.contains("version") {
                    versions.push(format!("{name} = {}", plane.stat_display(s)));
                }
            }
        }
    }
    versions.sort();
    versions.dedup();
    Environment {
        hosts: profile.hosts.iter().map(|h| h.host.clone()).collect(),
        devices: groups,
        versions,
        host_tracer_level: host_tracer_level(profile),
    }
}
