//! One model of device time (docs/model.md): per device, the window it is measured in
//! and every instant of that window named with exactly one [`Part`].
//!
//! Each op a device ran is one of: compute, a collective, a copy (host→device,
//! device→host, device→device) or an async wait (a `*-done` op waiting for an async
//! copy) or a host callback. Where ops of several kinds overlap (streams, async work),
//! the instant is named by the first kind in this order: compute, collective, copy,
//! async wait — so a collective or a copy under compute is overlapped, not counted
//! twice — except a host callback, which names its time before compute (the program
//! waits on the host's Python, whatever else runs beside it). Time with
//! no op running is runtime overhead when the device was inside a program (XLA:CPU:
//! the executor between ops of one `run_id`), a host callback when a GPU's host was
//! running a callback's Python (the GPU waits between the copies of its operands and
//! its results), compile when the device's host was compiling, a host copy when an
//! XLA:CPU host was copying on its threads, and idle otherwise. The parts of a device
//! add up to its window exactly, and busy (the union of its op intervals) is the sum of
//! its op parts, on every backend, less a GPU's wait for its host's callbacks.
//! Where ops are linked to their host launches (`correlation_id`: GPUs), idle is
//! split further: launched work not started yet, the host inside a launch call, and
//! the rest ([`DeviceTimeline::idle_queued_ps`], [`DeviceTimeline::idle_launching_ps`]).
//!
//! A device's window is its host's steps when the steps are annotations on the host;
//! when they come from a device's `Steps` line or its module executions, each device
//! is measured in its own (its own `Steps` line, its own executions of the step
//! module); a device with none of these, or none in the profile's steps, is measured
//! over its own span (first op to last).
//!
//! Computed once per profile, after the steps (stage 3 of the model, [`crate::profile`]). The
//! summary's breakdown, the devices rows, the collectives' totals, the advise rules
//! and every surface built on them read it, so they cannot disagree.

use rayon::prelude::*;
use serde::Serialize;

pub use crate::kinds::{is_collective, op_kind, Part};

use crate::busy::{Launched, OpKinds};
use crate::device::{Device, OpSource};
use crate::stats::{pct, sum_ps, Intervals};
use crate::steps::{own_module_runs, StepSource, Steps};
use crate::time_base::TimeBase;

/// Where a device's window comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WindowSource {
    /// The steps of its host (step annotations).
    HostSteps,
    /// Its own `Steps` line, or its own executions of the step module.
    OwnSteps,
    /// Its own span, first op to last: it has no steps of its own.
    OwnSpan,
    /// It ran no op.
    Empty,
}
crate::wire_enum!(WindowSource { HostSteps, OwnSteps, OwnSpan, Empty });

/// One device's time.
pub struct DeviceTimeline {
    /// Whether the device took part in the run's work (ran a compute op or a
    /// collective: [`crate::time_base::TimeBase::took_part`]). The run's aggregates
    /// are taken over the devices that did ([`DeviceTime::working`]).
    pub took_part: bool,
    /// Where [`DeviceTimeline::window`] comes from.
    pub window_source: WindowSource,
    /// The spans the device is measured in, sorted and disjoint.
    pub window: Vec<(i64, i64)>,
    /// Per [`Part`] (in [`Part::ALL`] order): the time of the window it names. They
    /// add up to the window's length.
    pub parts_ps: [i64; Part::ALL.len()],
    /// The length of the union of the device's op intervals within the window (the sum
    /// of the op parts).
    pub busy_ps: i64,
    /// Every collective op's span within the window (under compute or not).
    pub collective_ops: Intervals,
    /// Of the idle time, the part in which work its host had launched (the launch
    /// call had returned) had not started yet: launch latency, or launched work
    /// waiting on earlier work. `None` where the profile does not link ops to their
    /// launches (`correlation_id`: GPUs).
    pub idle_queued_ps: Option<i64>,
    /// Of the rest of idle, the part in which the host was inside the launch call of
    /// an op that had not started (`cuLaunchKernel`, `cuGraphLaunch`); what is left of
    /// idle after both, the host launched nothing. `None` as above.
    pub idle_launching_ps: Option<i64>,
}

impl DeviceTimeline {
    /// The window's length.
    pub fn window_ps(&self) -> i64 {
        sum_ps(self.window.iter().map(|(a, b)| b.saturating_sub(*a)))
    }

    /// The time `part` names in the window.
    pub fn part_ps(&self, part: Part) -> i64 {
        self.parts_ps[part.index()]
    }

    /// Busy share of the window, percent.
    pub fn utilization_pct(&self) -> f64 {
        pct(self.busy_ps, self.window_ps())
    }
}

/// The device-time model of a profile: one timeline per device, as
/// [`Profile::devices`].
pub struct DeviceTime {
    pub devices: Vec<DeviceTimeline>,
}

impl DeviceTime {
    /// The devices the run's aggregates are taken over: those that took part in its
    /// work and have a window to be measured in.
    pub fn working(&self) -> impl Iterator<Item = &DeviceTimeline> {
        self.devices.iter().filter(|t| t.took_part && t.window_ps() > 0)
    }

    /// The run's utilisation: the mean of the working devices' busy shares.
    pub fn utilization_pct(&self) -> f64 {
        self.mean_pct(DeviceTimeline::utilization_pct)
    }

    /// The share of the run's time spent computing: the mean of the working devices'
    /// compute shares ([`Part::Compute`]; busy less collectives, copies and waits on
    /// async copies, which utilisation counts).
    pub fn compute_pct(&self) -> f64 {
        self.mean_pct(|t| pct(t.part_ps(Part::Compute), t.window_ps()))
    }

    /// The mean of `of` over the working devices (0 for none).
    fn mean_pct(&self, of: impl Fn(&DeviceTimeline) -> f64) -> f64 {
        let (sum, n) = self.working().fold((0.0, 0usize), |(s, n), t| (s + of(t), n + 1));
        if n == 0 {
            0.0
        } else {
            sum / n as f64
        }
    }
}

/// Stage 3 of the shared work ([`crate::profile`]): every device's timeline.
pub fn build(devices: &[Device], base: &TimeBase) -> DeviceTime {
    let devices = devices
        .par_iter()
        .map(|d| {
            let (busy, host) = (&base.busy[d.index], base.hosts.get(d.host_index));
            timeline(
                base.took_part[d.index],
                &base.kinds[d.index],
                window(d, &base.steps, busy),
                busy,
                &base.active[d.index],
                host.map(|h| [&h.callbacks, &h.compile, &h.to_device, &h.to_host]),
                base.launched[d.index].as_ref(),
            )
        })
        .collect();
    DeviceTime { devices }
}

/// The window of device `d`, whose ops ran in `busy` (see the module docs).
fn window(d: &Device, steps: &Steps, busy: &Intervals) -> (WindowSource, Vec<(i64, i64)>) {
    let spans = |s: Vec<(i64, i64)>| Intervals::new(s).spans().to_vec();
    let host_steps = || -> Vec<(i64, i64)> {
        steps.steps.iter().filter(|s| s.host == d.host).map(|s| (s.start_ps, s.end_ps())).collect()
    };
    match steps.source {
        StepSource::Annotation => {
            let mine = host_steps();
            if !mine.is_empty() {
                return (WindowSource::HostSteps, spans(mine));
            }
        }
        StepSource::DeviceSteps => {
            if let Some(line) = d.plane.line("Steps").filter(|l| !l.is_empty()) {
                let own = (0..line.len()).map(|i| (line.start_ps(i), line.end_ps(i))).collect();
                return (WindowSource::OwnSteps, spans(own));
            }
        }
        StepSource::ModuleExecutions => {
            if let Some(own) = own_module_runs(d, steps.source, &steps.steps) {
                return (WindowSource::OwnSteps, spans(own));
            }
            let modules_line = d.plane.line("XLA Modules").is_some_and(|l| !l.is_empty());
            if d.source == OpSource::Kernels && !modules_line {
                // A GPU: the steps are its host's runs of the step program, from the
                // kernels they launched (one launching thread a host).
                let own = host_steps();
                if !own.is_empty() {
                    return (WindowSource::OwnSteps, spans(own));
                }
            }
        }
        StepSource::None => {}
    }
    match (busy.spans().first(), busy.spans().last()) {
        (Some(first), Some(last)) => (WindowSource::OwnSpan, vec![(first.0, last.1)]),
        _ => (WindowSource::Empty, Vec::new()),
    }
}

/// One device's timeline in `window` (`took_part`: whether it took part in the work),
/// from its ops by kind, its busy and active time, its host's compile time and host
/// copies (to the device, to the host), and the spans between its ops and their
/// launches.
///
/// Each part is the time of its set in the window that no set before it covers. The
/// sets that can be as large as the ops are measured without being copied: compute
/// (or busy, when every op is compute) by its overlap with the window's spans, and
/// runtime overhead as active time beyond busy (busy lies within active). The other
/// sets (the other op kinds, compile, host copies) are mostly short: each is cut to the
/// window, less the sets before it.
fn timeline(
    took_part: bool,
    k: &OpKinds,
    (window_source, window): (WindowSource, Vec<(i64, i64)>),
    busy: &Intervals,
    active: &Intervals,
    host: Option<[&Intervals; 4]>,
    launched: Option<&Launched>,
) -> DeviceTimeline {
    let in_window = |set: &Intervals| {
        let mut at = set.cursor();
        sum_ps(window.iter().map(|&(lo, hi)| at.overlap(lo, hi)))
    };
    let mut parts_ps = [0i64; Part::ALL.len()];
    // A host callback names its time before compute: the program waits on the host's
    // Python for it, and what XLA:CPU runs beside it meanwhile (its other threads) does
    // not shorten that wait.
    let callbacks = &k.spans[Part::HostCallback.index()];
    let less_callbacks;
    let compute = match callbacks.spans().is_empty() {
        true => k.compute(busy),
        false => {
            less_callbacks = k.compute(busy).minus(callbacks);
            &less_callbacks
        }
    };
    parts_ps[Part::Compute.index()] = in_window(compute);
    // The op kinds after compute, each less compute and the kinds before it.
    let mut named: Vec<Intervals> = Vec::new();
    for (i, kind) in k.spans.iter().enumerate().skip(1) {
        if kind.spans().is_empty() {
            continue;
        }
        let part = named.iter().fold(kind.within(&window).minus(compute), |part, before| part.minus(before));
        parts_ps[i] = part.total();
        named.push(part);
    }
    let busy_ps = sum_ps(parts_ps[..Part::OPS.len()].iter().copied());
    debug_assert_eq!(busy_ps, in_window(busy), "the op parts add up to busy");
    parts_ps[Part::RuntimeOverhead.index()] = in_window(active).saturating_sub(busy_ps).max(0);
    // Then the host's Python callbacks (a GPU waits for them with no op running),
    // compiling, copying on the host: each what is left of its set. A callback's time
    // adds to its op pieces' (the copies of its operands and results).
    named.clear();
    let host_parts = [Part::HostCallback, Part::Compile, Part::HostCopyToDevice, Part::HostCopyToHost];
    for (part_of, set) in host_parts.into_iter().zip(host.into_iter().flatten()) {
        let part = named.iter().fold(set.within(&window).minus(active), |part, before| part.minus(before));
        parts_ps[part_of.index()] += part.total();
        named.push(part);
    }
    let window_ps = sum_ps(window.iter().map(|(a, b)| b.saturating_sub(*a)));
    parts_ps[Part::Idle.index()] = window_ps.saturating_sub(sum_ps(parts_ps.iter().copied())).max(0);
    // Idle is what no part above names: queued time less all of them, then launching
    // time less them and queued.
    let idle =
        |set: &Intervals| named.iter().fold(set.within(&window).minus(active), |idle, before| idle.minus(before));
    let (idle_queued_ps, idle_launching_ps) = match launched {
        Some(l) => {
            let queued = idle(&l.queued);
            (Some(queued.total()), Some(idle(&l.launching).minus(&queued).total()))
        }
        None => (None, None),
    };
    let collective_ops = k.spans[Part::Collective.index()].within(&window);
    DeviceTimeline {
        took_part,
        window_source,
        window,
        parts_ps,
        busy_ps,
        collective_ops,
        idle_queued_ps,
        idle_launching_ps,
    }
}

/// One device's time in a window, every instant named as [`DeviceTimeline`] names it:
/// per [`Part`] (in [`Part::ALL`] order) the set of instants that part names (they
/// partition the window), and of idle, the launched-not-started and launching time.
/// A step's what-if graph is these sets in time order (`stepscope_analysis::whatif`);
/// over the steps' windows, their lengths are [`build`]'s parts (tested).
pub struct NamedTime {
    pub parts: Vec<Intervals>,
    /// Of [`Part::Idle`]: work its host had launched had not started (empty where ops
    /// are not linked to launches).
    pub queued: Intervals,
    /// Of the rest of idle: the host was inside a launch call.
    pub launching: Intervals,
}

/// [`NamedTime`] of device `d` in `window` (sorted, disjoint spans), from stage 2's
/// sets, in the order [`timeline`] names them.
pub fn named_time(base: &TimeBase, d: &Device, window: &[(i64, i64)]) -> NamedTime {
    let (k, busy, active) = (&base.kinds[d.index], &base.busy[d.index], &base.active[d.index]);
    let mut parts = vec![Intervals::EMPTY; Part::ALL.len()];
    let callbacks = &k.spans[Part::HostCallback.index()];
    let compute = k.compute(busy).within(window).minus(callbacks);
    let mut named = vec![compute.clone()];
    parts[Part::Compute.index()] = compute;
    for (i, kind) in k.spans.iter().enumerate().skip(1) {
        if kind.spans().is_empty() {
            continue;
        }
        let part = named.iter().fold(kind.within(window), |part, before| part.minus(before));
        parts[i] = part.clone();
        named.push(part);
    }
    let active = active.within(window);
    parts[Part::RuntimeOverhead.index()] = active.minus(&busy.within(window));
    let mut host_named: Vec<Intervals> = Vec::new();
    if let Some(h) = base.hosts.get(d.host_index) {
        let sets = [&h.callbacks, &h.compile, &h.to_device, &h.to_host];
        let host_parts = [Part::HostCallback, Part::Compile, Part::HostCopyToDevice, Part::HostCopyToHost];
        for (part_of, set) in host_parts.into_iter().zip(sets) {
            let part = host_named.iter().fold(set.within(window).minus(&active), |part, before| part.minus(before));
            let i = part_of.index();
            parts[i] = Intervals::union(&[&parts[i], &part]);
            host_named.push(part);
        }
    }
    let idle_of = |set: &Intervals| host_named.iter().fold(set.within(window).minus(&active), |s, b| s.minus(b));
    parts[Part::Idle.index()] = idle_of(&Intervals::new(window.to_vec()));
    let (queued, launching) = match base.launched[d.index].as_ref() {
        Some(l) => {
            let queued = idle_of(&l.queued);
            let launching = idle_of(&l.launching).minus(&queued);
            (queued, launching)
        }
        None => (Intervals::EMPTY, Intervals::EMPTY),
    };
    NamedTime { parts, queued, launching }
}
