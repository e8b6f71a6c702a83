//! Stage 2 of the model: what is measured against time, from stage 1 — each device's
//! busy and active time and its ops' kinds, the hosts' compile events and copies, the
//! GPU launches, and the steps, measured.

use rayon::prelude::*;
use stepscope_xspace::hlo::HloModules;
use stepscope_xspace::Space;

use crate::busy::{launched, measure_ops, Launched, OpKinds};
use crate::device::Device;
use crate::discover::DeviceSet;
use crate::stats::{sum_ps, Intervals};
use crate::steps::{find_steps, host_events, HostTime, Launches, Steps};

/// Stage 2 of the shared work: what is measured against time, from stage 1.
pub struct TimeBase {
    /// Per device (as [`DeviceSet::slots`]): the time it was busy (an op ran).
    pub busy: Vec<Intervals>,
    /// Per device: the time it was active (busy, or inside an XLA:CPU program).
    pub active: Vec<Intervals>,
    /// Per device: its ops by kind.
    pub kinds: Vec<OpKinds>,
    /// Per device: whether it took part in the run's work, that is ran a compute op
    /// or a collective ([`OpKinds::ran_work`]). A device that only copied (a few
    /// memcpys, a `device_put`) or ran nothing did not: the run's aggregates (its
    /// utilisation, the average step, each step's device busy, the stragglers) are
    /// taken over the devices that did, and the surfaces name the others. Where no
    /// device took part (a capture of copies only), every device counts.
    pub took_part: Vec<bool>,
    /// Per host: what its CPU plane says of device time.
    pub hosts: Vec<HostTime>,
    /// Per device: the spans between its ops and their host launches; `None` where the
    /// profile does not link ops to launches.
    pub launched: Vec<Option<Launched>>,
    /// The steps, measured (without the launched work, which `steps::steps` adds).
    pub steps: Steps,
}

/// Stage 2 of the shared work ([`crate::profile`]): each device's busy intervals, the
/// hosts' compile events and intervals, and the steps measured against them.
pub fn measure(
    spaces: &[Space],
    hlo: &[HloModules],
    set: &DeviceSet,
    devices: &[Device],
    launches: &[Launches],
) -> TimeBase {
    let (source, mut steps) = find_steps(spaces, set, devices);
    let (measured, hosts) = rayon::join(
        || devices.par_iter().map(|d| measure_ops(d, hlo)).collect::<Vec<_>>(),
        || host_events(spaces, devices),
    );
    let launched = devices.par_iter().map(|d| launches.get(d.host_index).and_then(|l| launched(d, l))).collect();
    let (mut busy, mut active, mut kinds) = (Vec::new(), Vec::new(), Vec::new());
    for m in measured {
        busy.push(m.busy);
        active.push(m.active);
        kinds.push(m.kinds);
    }
    let mut took_part: Vec<bool> = kinds.iter().zip(&busy).map(|(k, b)| k.ran_work(b)).collect();
    if !took_part.contains(&true) {
        took_part.fill(true);
    }
    // Steps come in time order: each query starts where the last one ended.
    let mut busy_at: Vec<_> = busy.iter().map(|b| b.cursor()).collect();
    let mut compile_at: Vec<_> = hosts.iter().map(|h| h.compile.cursor()).collect();
    for step in &mut steps {
        let (lo, hi) = (step.start_ps, step.end_ps());
        // The mean over the host's devices that took part (all of them where none did).
        let on_host: Vec<(bool, i64)> = devices
            .iter()
            .zip(&mut busy_at)
            .filter(|(d, _)| d.host == step.host)
            .map(|(d, b)| (took_part[d.index], b.overlap(lo, hi)))
            .collect();
        let working = on_host.iter().any(|(w, _)| *w);
        let counted: Vec<i64> = on_host.iter().filter(|(w, _)| *w || !working).map(|(_, b)| *b).collect();
        if !counted.is_empty() {
            step.device_busy_ps = sum_ps(counted.iter().copied()) / counted.len() as i64;
        }
        step.device_idle_ps = step.duration_ps.saturating_sub(step.device_busy_ps).max(0);
        if let Some(hi_idx) = spaces.iter().position(|h| h.host == step.host) {
            step.compile_ps = compile_at[hi_idx].overlap(lo, hi);
        }
    }
    let steps = Steps { schema: "stepscope.steps/1", source, steps };
    TimeBase { busy, active, kinds, took_part, hosts, launched, steps }
}
