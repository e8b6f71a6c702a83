//! Stage 2 of the model: what is measured against time, from stage 1 — each device's
//! busy and active time and its ops' kinds, the hosts' compile events and copies, the
//! GPU launches, and the steps, measured.

use rayon::prelude::*;
use stepscope_xspace::hlo::HloModules;
use stepscope_xspace::Space;

use crate::busy::{launched, measure_ops, Launched, OpKinds};
use crate::device::Device;
use crate::discover::DeviceSet;
use crate::dispatch::Dispatches;
use crate::records::FastMap;
use crate::stats::{sum_ps, Intervals};
use crate::steps::{
    find_steps, host_events, own_module_runs, HostTime, Launches, RunDecisions, Step, StepSource, StepTiming,
    StepVotes, Steps,
};
use crate::work::Links;

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
    /// No device took part (before every device was made to count): what the run
    /// decides [`RunDecisions::every_device_counts`] from.
    pub none_took_part: bool,
    /// The annotated steps' votes on their timing (the run's decision is taken over
    /// every host's: [`RunDecisions::timing`]); none where steps are not annotated.
    pub votes: StepVotes,
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
    dispatches: &[Dispatches],
    decided: RunDecisions,
) -> TimeBase {
    let (source, mut steps) = find_steps(spaces, set, devices, launches, decided.source);
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
    let none_took_part = !took_part.contains(&true);
    if decided.every_device_counts.unwrap_or(none_took_part) {
        took_part.fill(true);
    }
    let mut launches_not_run = 0;
    let (timing, votes) = match source {
        // Steps the host annotated: the host's spans, which launched the work.
        StepSource::Annotation => {
            let links = Links { devices, took_part: &took_part, launches, dispatches };
            time_steps(&mut steps, spaces, links, &mut launches_not_run, decided.timing)
        }
        _ => (StepTiming::Host, StepVotes::default()),
    };
    let own = own_steps(devices, source, &steps);
    // Steps come in time order: each query starts where the last one ended.
    let mut busy_at: Vec<_> = busy.iter().map(|b| b.cursor()).collect();
    let mut compile_at: Vec<_> = hosts.iter().map(|h| h.compile.cursor()).collect();
    let mut nth_on_host: FastMap<&str, usize> = FastMap::default();
    for step in &mut steps {
        let nth = nth_on_host.entry(step.host.as_str()).or_default();
        let (k, (lo, hi)) = (*nth, (step.start_ps, step.end_ps()));
        *nth += 1;
        let on_host: Vec<OnDevice> = devices
            .iter()
            .zip(&mut busy_at)
            .filter(|(d, _)| d.host == step.host)
            .map(|(d, b)| {
                let (lo, hi) = own[d.index].as_ref().map_or((lo, hi), |runs| runs[k]);
                OnDevice { working: took_part[d.index], busy_ps: b.overlap(lo, hi), span_ps: hi.saturating_sub(lo) }
            })
            .collect();
        (step.device_busy_ps, step.device_idle_ps) = busy_and_idle(&on_host, step.duration_ps);
        if let Some(hi_idx) = spaces.iter().position(|h| h.host == step.host) {
            // Compilation runs on the host: measured in the host's span.
            let host_end = step.host_start_ps.saturating_add(step.host_duration_ps);
            step.compile_ps = match timing {
                StepTiming::Host => compile_at[hi_idx].overlap(lo, hi),
                StepTiming::Device => hosts[hi_idx].compile.overlap(step.host_start_ps, host_end),
            };
        }
    }
    let dispatched_not_run = dispatches.iter().map(|d| (d.unran.len() + d.unran_at_least) as u64).sum();
    let steps = Steps { schema: "stepscope.steps/1", source, timing, dispatched_not_run, launches_not_run, steps };
    TimeBase { busy, active, kinds, took_part, none_took_part, votes, hosts, launched, steps }
}

/// One device's part of a step: whether it took part in the run's work, its busy time
/// in the step (in its own run of the step where it has one) and that span's length.
struct OnDevice {
    working: bool,
    busy_ps: i64,
    span_ps: i64,
}

/// A step's device busy and idle time: the means over its host's devices that took
/// part in the run's work (all of them where none did), each over its own span, less
/// those that ran nothing in the step where another did (a device whose part of the
/// step ran at another time, or that waited the step out, is not half as busy as its
/// peers). Idle is each device's span less its busy time, so where the devices run the
/// step at their own times it need not be the step's duration less the busy time.
fn busy_and_idle(on_host: &[OnDevice], duration_ps: i64) -> (i64, i64) {
    let working = on_host.iter().any(|d| d.working);
    let counted: Vec<&OnDevice> = on_host.iter().filter(|d| d.working || !working).collect();
    let ran = counted.iter().any(|d| d.busy_ps > 0);
    let counted: Vec<&OnDevice> = counted.into_iter().filter(|d| d.busy_ps > 0 || !ran).collect();
    if counted.is_empty() {
        return (0, duration_ps.max(0));
    }
    let n = counted.len() as i64;
    let busy_ps = sum_ps(counted.iter().map(|d| d.busy_ps)) / n;
    let idle_ps = sum_ps(counted.iter().map(|d| d.span_ps.saturating_sub(d.busy_ps).max(0))) / n;
    (busy_ps, idle_ps)
}

/// Per device, its own runs of the step module where the steps are a module's
/// executions, it ran the module once a step of its host ([`own_module_runs`]) and ran
/// some of them at another time than its host's steps (one thread a device); `None`
/// where its runs fall in the steps (devices that run the step together).
fn own_steps(devices: &[Device], source: StepSource, steps: &[Step]) -> Vec<Option<Vec<(i64, i64)>>> {
    devices
        .par_iter()
        .map(|d| {
            // A host's only device ran the steps' runs itself.
            devices.iter().filter(|o| o.host_index == d.host_index).nth(1)?;
            let runs = own_module_runs(d, source, steps)?;
            let windows: Vec<(i64, i64)> =
                steps.iter().filter(|s| s.host == d.host).map(|s| (s.start_ps, s.end_ps())).collect();
            let apart = runs.len() == windows.len() && runs.iter().zip(&windows).any(|(r, w)| r.1 <= w.0 || r.0 >= w.1);
            Some(runs).filter(|_| apart)
        })
        .collect()
}

/// Links each step to the device work it launched ([`crate::work`]) and decides what
/// its time is. Where the loop dispatches ahead ([`dispatches_ahead`]), a step is
/// timed on its device: it ends when its work does, and starts when the step before
/// it ended on the device, or, where the host began it later (a pause between steps),
/// when the host began it or its work began, whichever came first; the first step
/// starts with its work. So where the device runs the steps back to back each is
/// timed by its work, first op to last, and where the device waits for a late
/// dispatch the wait is in the step. Steps never overlap: where a step's work began
/// before the last one's ended (devices that run the steps a little apart, a copy
/// queued on another stream) it starts where that one ended, so the steps' times add
/// up to the time the device took. A step whose work the capture cut (or does not
/// hold) is marked [`Step::cut`]. Steps stay in time order. The timing is `decided`
/// where it is given (the run's); returned with the steps' votes.
fn time_steps(
    steps: &mut [Step],
    spaces: &[Space],
    links: Links,
    launches_not_run: &mut u64,
    decided: Option<StepTiming>,
) -> (StepTiming, StepVotes) {
    let mut per_host: Vec<Vec<usize>> = Vec::new();
    for (hi, space) in spaces.iter().enumerate() {
        let mine: Vec<usize> = (0..steps.len()).filter(|&i| steps[i].host == space.host).collect();
        let windows: Vec<(i64, i64)> = mine.iter().map(|&i| (steps[i].start_ps, steps[i].end_ps())).collect();
        if windows.windows(2).any(|w| w[1].0 < w[0].1) {
            continue; // annotations that overlap: no step can be told the work of another
        }
        let launched = links.work_in(hi, &windows);
        *launches_not_run += launched.not_run;
        for (&i, work) in mine.iter().zip(launched.work) {
            let Some(w) = work else { continue };
            let step = &mut steps[i];
            step.device_work_ps = Some(w.busy_ps);
            step.work_start_ps = Some(w.start_ps);
            step.work_duration_ps = Some(w.end_ps.saturating_sub(w.start_ps));
            step.cut = w.cut;
        }
        per_host.push(mine);
    }
    let votes = StepVotes::of(steps);
    if decided.unwrap_or(if votes.ahead() { StepTiming::Device } else { StepTiming::Host }) == StepTiming::Host {
        steps.iter_mut().for_each(|s| s.cut = false);
        return (StepTiming::Host, votes);
    }
    for mine in per_host {
        let mut previous_end: Option<i64> = None;
        for i in mine {
            let step = &mut steps[i];
            let (Some(start), Some(duration)) = (step.work_start_ps, step.work_duration_ps) else {
                step.cut = true;
                previous_end = None;
                continue;
            };
            let end = start.saturating_add(duration);
            let from = match previous_end {
                Some(p) => p.max(start.min(step.host_start_ps)).min(end),
                None => start,
            };
            (step.start_ps, step.duration_ps) = (from, end.saturating_sub(from));
            previous_end = Some(previous_end.map_or(end, |p| p.max(end)));
        }
    }
    steps.sort_by_key(|s| (s.start_ps, s.step_num));
    (StepTiming::Device, votes)
}
