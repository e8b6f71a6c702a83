//! Training steps: where they are, found once per profile (stage 2 of the model).
//!
//! Steps come, in order of preference, from `StepTraceAnnotation` roots on a host
//! (events with `step_num` and `_r` stats), from a device `Steps` line, or, failing
//! both, from repeated executions of the dominant XLA module. The host events the
//! steps are measured against (compile events, host-side copies, GPU launches) are
//! found here too.

use std::collections::HashMap;

use rayon::prelude::*;
use serde::Serialize;
use stepscope_xspace::{Format, Line, Space};

use crate::device::{host_cpu_plane, Device, Keys, OpSource};
use crate::discover::DeviceSet;
use crate::kinds::{host_transfer_kind, is_host_callback, Part};
use crate::records::{FastMap, OpRec, ReleaseBehind};
use crate::stats::Intervals;

/// Where the step boundaries were read from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StepSource {
    /// `jax.profiler.StepTraceAnnotation` roots.
    Annotation,
    /// A device plane's `Steps` line.
    DeviceSteps,
    /// Executions of the XLA module that ran longest.
    ModuleExecutions,
    /// No steps found.
    None,
}
crate::wire_enum!(StepSource { Annotation, DeviceSteps, ModuleExecutions, None });

/// Where steps were read from, in words: `StepTraceAnnotation`, `the device Steps
/// line`, `executions of the longest-running XLA module`.
pub fn source_words(s: StepSource) -> &'static str {
    match s {
        StepSource::Annotation => "StepTraceAnnotation",
        StepSource::DeviceSteps => "the device Steps line",
        StepSource::ModuleExecutions => "executions of the longest-running XLA module",
        StepSource::None => "nowhere",
    }
}

/// One step.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Step {
    pub step_num: i64,
    /// The annotation's or module's name.
    pub name: String,
    pub host: String,
    /// The step as measured: the host's span ([`Step::host_start_ps`]), or, where the
    /// loop dispatches ahead ([`StepTiming::Device`]), the device work it launched
    /// (first op to last op's end).
    pub start_ps: i64,
    pub duration_ps: i64,
    /// The step's span on its host (the annotation's, or the module run's).
    pub host_start_ps: i64,
    pub host_duration_ps: i64,
    /// The device work the step launched, first op to last op's end (GPU kernels by
    /// `correlation_id`, XLA:CPU runs by their dispatch: [`crate::work`]); absent where
    /// the profile links none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub work_start_ps: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub work_duration_ps: Option<i64>,
    /// Timed by its device work, the capture holds only part of it (cut at the
    /// capture's start or end): left out of the step time's statistics.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub cut: bool,
    /// Time some op ran on the device within the step (mean over the host's devices).
    pub device_busy_ps: i64,
    /// `duration_ps - device_busy_ps`.
    pub device_idle_ps: i64,
    /// Time XLA compilation ran on the host within the step.
    pub compile_ps: i64,
    /// The time the device work the step launched ran (mean over the host's devices
    /// that took part in the work). Unlike `device_busy_ps` it follows the step's work
    /// when the loop dispatches ahead and the device runs it during later steps.
    /// Absent where the profile links none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device_work_ps: Option<i64>,
    /// FLOPs of the ops that started in the step on its host's devices (the executed
    /// program's, the analyses' `roofline::step_flops`). Absent where no device's peak
    /// FLOP/s is known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flops: Option<u64>,
    /// `flops` over the step's duration times the devices' summed peak FLOP/s, percent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flops_utilization_pct: Option<f64>,
    /// What the step's time went to along its critical path, largest part first (the
    /// analyses' what-if graph of the step, replayed as measured: docs/whatif.md). On
    /// one device its parts; on devices joined at collectives, the device last to reach
    /// each collective up to it, then the device that ended the step. The parts add up
    /// to the replayed step. Empty where the step has no graph (cut, or no device
    /// worked in it).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub critical_path: Vec<PathPart>,
}
crate::wire_struct!(Step {
    step_num,
    name,
    host,
    start_ps,
    duration_ps,
    host_start_ps,
    host_duration_ps,
    work_start_ps,
    work_duration_ps,
    cut,
    device_busy_ps,
    device_idle_ps,
    compile_ps,
    device_work_ps,
    flops,
    flops_utilization_pct,
    critical_path,
});

/// One part of a step's critical path: a node of the what-if graph (`compute`,
/// `dispatch`, …) and its time on the path.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PathPart {
    pub node: &'static str,
    /// In words: `waiting for dispatch`.
    pub name: &'static str,
    pub ps: i64,
}
crate::wire_struct!(PathPart { node, name, ps });

impl Step {
    pub fn end_ps(&self) -> i64 {
        self.start_ps.saturating_add(self.duration_ps)
    }

    /// The step's span on its host: (start, end).
    pub fn host_span(&self) -> (i64, i64) {
        (self.host_start_ps, self.host_start_ps.saturating_add(self.host_duration_ps))
    }
}

/// What a step's time is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum StepTiming {
    /// The host's span: the loop waits for its work (or nothing links the work to it).
    #[default]
    Host,
    /// The device work each step launched: the loop dispatches ahead, so most steps'
    /// work ran after their host span had closed.
    Device,
}
crate::wire_enum!(StepTiming { Host, Device });

/// The steps of a profile.
#[derive(Clone, Debug, Serialize)]
pub struct Steps {
    pub schema: &'static str,
    pub source: StepSource,
    pub timing: StepTiming,
    /// Jitted calls (XLA:CPU dispatches) whose work the capture does not hold, at
    /// least: it stopped before their programs ran, so the steps that made them do not
    /// hold their work.
    #[serde(skip_serializing_if = "is_zero")]
    pub dispatched_not_run: u64,
    /// GPU launches made in the steps whose work the capture does not hold: it stopped
    /// before they ran (linked by `correlation_id`, [`crate::work`]).
    #[serde(skip_serializing_if = "is_zero")]
    pub launches_not_run: u64,
    pub steps: Vec<Step>,
}

/// For `#[serde(skip_serializing_if = …)]`: counts that are absent when zero.
pub fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Steps {
    /// The steps the step time's statistics read: all but those [`Step::cut`].
    pub fn timed(&self) -> impl Iterator<Item = &Step> {
        self.steps.iter().filter(|s| !s.cut)
    }

    /// Per step (in order): the host time that belongs to it, where host scopes (a
    /// batch loaded, `data_loading`) are credited to steps. An annotated step (or one
    /// of a device `Steps` line): its host span. A step from module executions holds
    /// only the module's run, while the loop feeds it between runs: it also gets the
    /// time since the step before it on its host ended (the first step, as long a time
    /// as the second got), so the batch loaded for a run is that run's step's.
    pub fn host_windows(&self) -> Vec<(i64, i64)> {
        let mut out: Vec<(i64, i64)> = self.steps.iter().map(Step::host_span).collect();
        if self.source != StepSource::ModuleExecutions {
            return out;
        }
        let mut hosts: Vec<&str> = self.steps.iter().map(|s| s.host.as_str()).collect();
        hosts.sort_unstable();
        hosts.dedup();
        for host in hosts {
            let mut mine: Vec<usize> = (0..self.steps.len()).filter(|&i| self.steps[i].host == host).collect();
            mine.sort_by_key(|&i| out[i].0);
            let spans: Vec<(i64, i64)> = mine.iter().map(|&i| out[i]).collect();
            for (k, &i) in mine.iter().enumerate() {
                let before = match k {
                    0 => spans.get(1).map_or(0, |next| next.0.saturating_sub(spans[0].1).max(0)),
                    _ => out[i].0.saturating_sub(spans[k - 1].1).max(0),
                };
                out[i].0 = out[i].0.saturating_sub(before);
            }
        }
        out
    }
}

/// True when most steps' launched work ended after their host span, by more than a
/// twentieth of it: the loop dispatches ahead of its device.
pub fn dispatches_ahead(steps: &[Step]) -> bool {
    StepVotes::of(steps).ahead()
}

/// The steps' votes on their timing ([`dispatches_ahead`]): how many are linked to
/// the work they launched, and how many of those ended late. Votes of a run's hosts
/// add up to the run's.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StepVotes {
    pub linked: u64,
    pub late: u64,
}
crate::wire_struct!(StepVotes { linked, late });

impl StepVotes {
    pub fn of(steps: &[Step]) -> StepVotes {
        let linked: Vec<&Step> = steps.iter().filter(|s| s.work_start_ps.is_some()).collect();
        let late = (linked.iter())
            .filter(|s| {
                let end = s.work_start_ps.unwrap_or(0).saturating_add(s.work_duration_ps.unwrap_or(0));
                let host_end = s.host_start_ps.saturating_add(s.host_duration_ps);
                end > host_end.saturating_add(s.host_duration_ps / 20)
            })
            .count();
        StepVotes { linked: linked.len() as u64, late: late as u64 }
    }

    /// Most linked steps ended late: the loop dispatches ahead.
    pub fn ahead(self) -> bool {
        self.linked > 0 && 2 * self.late > self.linked
    }
}

impl std::ops::Add for StepVotes {
    type Output = StepVotes;

    fn add(self, other: StepVotes) -> StepVotes {
        StepVotes { linked: self.linked + other.linked, late: self.late + other.late }
    }
}

/// What a profile decides for its run as a whole, each from every host: where the
/// steps come from, what a step's time is, and whether every device counts (no
/// device took part in the work). A profile of one host of a run read a host at a
/// time is given the run's ([`crate::Profile::set_decisions`]), so its numbers are
/// those the whole run's profile gives that host; `None`: decided from the profile.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RunDecisions {
    pub source: Option<StepSource>,
    pub timing: Option<StepTiming>,
    pub every_device_counts: Option<bool>,
}

/// The steps, from the first source in order of preference that has any (from
/// `source` alone where it is given: the run's, which this profile may have none of).
pub fn find_steps(
    hosts: &[Space],
    set: &DeviceSet,
    devices: &[Device],
    launches: &[Launches],
    source: Option<StepSource>,
) -> (StepSource, Vec<Step>) {
    let tried = |s: StepSource| source.is_none_or(|given| given == s);
    let take = |s: StepSource, steps: &Vec<Step>| tried(s) && (source.is_some() || !steps.is_empty());
    if tried(StepSource::Annotation) {
        let annotated = annotated_steps(hosts, set);
        if take(StepSource::Annotation, &annotated) {
            return (StepSource::Annotation, annotated);
        }
    }
    if tried(StepSource::DeviceSteps) {
        let device_steps = device_steps_line(devices);
        if take(StepSource::DeviceSteps, &device_steps) {
            return (StepSource::DeviceSteps, device_steps);
        }
    }
    if tried(StepSource::ModuleExecutions) {
        let runs = module_executions(hosts, devices, launches);
        if take(StepSource::ModuleExecutions, &runs) {
            return (StepSource::ModuleExecutions, runs);
        }
    }
    (StepSource::None, Vec::new())
}

fn blank_step(step_num: i64, name: &str, host: &str, start_ps: i64, duration_ps: i64) -> Step {
    Step {
        step_num,
        name: name.to_string(),
        host: host.to_string(),
        start_ps,
        duration_ps,
        host_start_ps: start_ps,
        host_duration_ps: duration_ps,
        work_start_ps: None,
        work_duration_ps: None,
        cut: false,
        device_busy_ps: 0,
        device_idle_ps: 0,
        compile_ps: 0,
        device_work_ps: None,
        flops: None,
        flops_utilization_pct: None,
        critical_path: Vec::new(),
    }
}

/// Host events with `step_num` and `_r` (StepTraceAnnotation roots), on any host plane.
fn annotated_steps(hosts: &[Space], set: &DeviceSet) -> Vec<Step> {
    // Finding the devices scans an XLA:CPU host plane's events once and keeps its roots.
    let scanned = &set.host_roots;
    let mut out = Vec::new();
    for (hi, space) in hosts.iter().enumerate() {
        for (pi, plane) in space.planes.iter().enumerate().filter(|(_, p)| !p.name.starts_with("/device:")) {
            if let Some((_, roots)) = scanned.iter().find(|(at, _)| *at == (hi, pi)) {
                out.extend(roots.iter().map(|&(step_num, li, i)| {
                    let (line, i) = (&plane.lines[li as usize], i as usize);
                    blank_step(
                        step_num,
                        plane.event_name(line.meta(i)),
                        &space.host,
                        line.start_ps(i),
                        line.duration_ps(i),
                    )
                }));
                continue;
            }
            let keys = Keys::of(plane);
            let Some(step_key) = keys.step_num else { continue };
            // JAX's trace JSON drops the roots' `_r` marker: there, the events with a
            // `step_num` are the annotations (no other event carries one).
            if keys.root.is_none() && space.format != Format::TraceJson {
                continue;
            }
            let root_needed = keys.root.is_some();
            let look = plane.stat_lookup([Some(step_key), keys.root]);
            let per_line: Vec<Vec<Step>> = plane
                .lines
                .par_iter()
                .map(|line| {
                    let mut found = Vec::new();
                    let mut release = ReleaseBehind::new(line);
                    for i in 0..line.len() {
                        release.at(i);
                        let [Some(num), root] = plane.stats_of(&look, line, i) else {
                            continue;
                        };
                        if root_needed && root.is_none() {
                            continue;
                        }
                        let step_num = plane.stat_i64(&num).unwrap_or(-1);
                        let name = plane.event_name(line.meta(i));
                        found.push(blank_step(step_num, name, &space.host, line.start_ps(i), line.duration_ps(i)));
                    }
                    release.done();
                    found
                })
                .collect();
            out.extend(per_line.into_iter().flatten());
        }
    }
    out.sort_by_key(|s| (s.start_ps, s.step_num));
    out
}

/// Events of a device `Steps` line (TPU runtimes write one).
fn device_steps_line(devices: &[Device]) -> Vec<Step> {
    // One device per host is enough: all devices of a host run the same steps.
    let mut seen_hosts = Vec::new();
    let mut out = Vec::new();
    for d in devices {
        if seen_hosts.contains(&d.host_index) {
            continue;
        }
        let Some(line) = d.plane.line("Steps").filter(|l| !l.is_empty()) else { continue };
        seen_hosts.push(d.host_index);
        for i in 0..line.len() {
            let name = d.plane.event_name(line.meta(i));
            let num = d
                .stat(line, i, d.keys.step_num.or(d.keys.group_id))
                .and_then(|s| d.plane.stat_i64(&s))
                .or_else(|| name.trim().parse().ok())
                .unwrap_or(i as i64);
            out.push(blank_step(num, name, d.host, line.start_ps(i), line.duration_ps(i)));
        }
    }
    out.sort_by_key(|s| (s.start_ps, s.step_num));
    out
}

/// Executions of the module with the most op time: on TPU/GPU from the `XLA Modules`
/// line, on CPU from the ops' `run_id`.
fn module_executions(hosts: &[Space], devices: &[Device], launches: &[Launches]) -> Vec<Step> {
    let mut seen_hosts = Vec::new();
    let mut out = Vec::new();
    for d in devices {
        if seen_hosts.contains(&d.host_index) {
            continue;
        }
        let steps = match (d.source, d.plane.line("XLA Modules").filter(|l| !l.is_empty())) {
            (_, Some(line)) => {
                let mut total: HashMap<u32, i64> = HashMap::new();
                for i in 0..line.len() {
                    let t = total.entry(line.meta(i)).or_default();
                    *t = t.saturating_add(line.duration_ps(i));
                }
                let Some((&top, _)) = total.iter().max_by_key(|(m, t)| (**t, std::cmp::Reverse(**m))) else { continue };
                let name = module_name(d.plane.event_name(top));
                (0..line.len())
                    .filter(|&i| line.meta(i) == top)
                    .enumerate()
                    .map(|(n, i)| blank_step(n as i64, name, d.host, line.start_ps(i), line.duration_ps(i)))
                    .collect::<Vec<_>>()
            }
            (OpSource::HostOps, None) => cpu_module_runs(d),
            (OpSource::Kernels, None) => match (hosts.get(d.host_index), launches.get(d.host_index)) {
                (Some(space), Some(l)) => {
                    let gpus: Vec<&Device> = (devices.iter())
                        .filter(|g| g.host_index == d.host_index && g.source == OpSource::Kernels)
                        .collect();
                    gpu_module_runs(space, d, &gpus, l)
                }
                _ => Vec::new(),
            },
            _ => Vec::new(),
        };
        if !steps.is_empty() {
            seen_hosts.push(d.host_index);
            out.extend(steps);
        }
    }
    out.sort_by_key(|s| (s.start_ps, s.step_num));
    out
}

/// `jit_train_step(123)` → `jit_train_step`.
pub fn module_name(event_name: &str) -> &str {
    match event_name.rfind('(') {
        Some(p) if event_name.ends_with(')') => &event_name[..p],
        _ => event_name,
    }
}

/// The op time of `d`'s ops of a named module, per `key` of their records.
fn op_time_by<K: std::hash::Hash + Eq>(d: &Device, key: impl Fn(&OpRec) -> K) -> FastMap<K, i64> {
    let ops = d.cached_ops();
    let mut time: FastMap<K, i64> = FastMap::default();
    for (i, r) in ops.recs.iter().enumerate().filter(|(_, r)| !ops.names[r.module as usize].is_empty()) {
        let t = time.entry(key(r)).or_default();
        *t = t.saturating_add(ops.duration_ps(d.plane, i));
    }
    time
}

/// The interned id of the module of `d` with the most op time, if any op has one.
fn top_module(d: &Device) -> Option<u32> {
    let names = &d.cached_ops().names;
    let time = op_time_by(d, |r| r.module);
    time.into_iter().max_by_key(|&(m, t)| (t, std::cmp::Reverse(&*names[m as usize]))).map(|(m, _)| m)
}

/// The (module id, record program) of `d` with the most op time, of a named module,
/// where it ran most of the device's op time (two thirds or more): a loop's step. A
/// jitted function compiled for several shapes is several programs, and a capture
/// whose time spreads over several (a benchmark of shapes) has no one step.
fn top_program(d: &Device) -> Option<(u32, u32)> {
    let time = op_time_by(d, |r| (r.module, r.program));
    let all = crate::stats::sum_ps(time.values().copied());
    let (top, t) = time.into_iter().max_by_key(|&(k, t)| (t, std::cmp::Reverse(k)))?;
    (t as f64 >= all as f64 * 2.0 / 3.0).then_some(top)
}

/// CPU: the span of each `run_id` of the module with the most op time.
fn cpu_module_runs(d: &Device) -> Vec<Step> {
    let Some(top_id) = top_module(d) else { return Vec::new() };
    let top = &*d.cached_ops().names[top_id as usize];
    let spans = module_runs(d, |m| m == top_id);
    spans.iter().enumerate().map(|(n, &(a, b))| blank_step(n as i64, top, d.host, a, b.saturating_sub(a))).collect()
}

/// GPU: each execution of the program with the most kernel time, as its host launched
/// it: the kernels whose launches lie inside one host event `<module>:XLA GPU module`
/// (XLA's annotation of a run of the module), from the first one's start to the last
/// one's end, in time order; the host event is the step's host span. None where the
/// profile does not link kernels to launches or holds no such host event.
///
/// A host with one thread per GPU (`gpus`, the host's) runs the program on each at
/// once, and the threads' events overlap: by time alone no launch can be told to be
/// one thread's run or another's, but each round of runs, the k-th on every thread,
/// can. A step is then one round: its host span from the first run's start to the
/// last one's end, its work the program's kernels launched in it on every GPU. Where
/// the events do not fall into such rounds (threads with more runs than others,
/// rounds that overlap), or the capture holds the work of some of them only (fewer
/// GPUs ran the program than threads ran it, a GPU with no kernel in a round), no
/// steps rather than wrong ones.
fn gpu_module_runs(space: &Space, d: &Device, gpus: &[&Device], launches: &Launches) -> Vec<Step> {
    let ops = d.cached_ops();
    if !ops.has_correlation_ids() || launches.is_empty() {
        return Vec::new();
    }
    let (Some(host), Some((top_id, program))) = (host_cpu_plane(space), top_program(d)) else { return Vec::new() };
    let top = &*ops.names[top_id as usize];
    let per_line = module_run_lines(host, &format!("{top}:XLA GPU module"));
    let mut runs = per_line.concat();
    runs.sort_unstable();
    if runs.windows(2).any(|w| w[1].0 < w[0].1) {
        let Some(rounds) = module_run_rounds(&per_line) else { return Vec::new() };
        let mut spans = vec![None; rounds.len()];
        let mut running = 0;
        for g in gpus {
            let ops = g.cached_ops();
            let mut mine = vec![None; rounds.len()];
            for (i, r) in ops.recs.iter().enumerate().filter(|(_, r)| &*ops.names[r.module as usize] == top) {
                let Some((launched, _)) = ops.correlation_id(r).and_then(|c| launches.get(c)) else { continue };
                let (_, start, end, _) = ops.span(g.plane, i);
                widen_run(&mut mine, &rounds, launched, (start, end));
            }
            if mine.iter().all(Option::is_none) {
                continue;
            }
            // A GPU that ran the program ran it in every round: else the capture
            // holds part of the work (some GPUs' planes, some rounds' kernels).
            if mine.iter().any(Option::is_none) {
                return Vec::new();
            }
            running += 1;
            for (all, (a, b)) in spans.iter_mut().zip(mine.into_iter().flatten()) {
                let span = all.get_or_insert((a, b));
                *span = (span.0.min(a), span.1.max(b));
            }
        }
        // One thread per GPU that ran it.
        if running != per_line.len() {
            return Vec::new();
        }
        return module_run_steps(spans, &rounds, top, d.host);
    }
    let mut spans = vec![None; runs.len()];
    for (i, r) in ops.recs.iter().enumerate().filter(|(_, r)| (r.module, r.program) == (top_id, program)) {
        let Some((launched, _)) = ops.correlation_id(r).and_then(|c| launches.get(c)) else { continue };
        let (_, start, end, _) = ops.span(d.plane, i);
        widen_run(&mut spans, &runs, launched, (start, end));
    }
    module_run_steps(spans, &runs, top, d.host)
}

/// Widens the work of the run of `runs` (host spans, by start, none inside another)
/// that holds `launched` by `(start, end)`; nothing where none holds it.
fn widen_run(spans: &mut [Option<(i64, i64)>], runs: &[(i64, i64)], launched: i64, (start, end): (i64, i64)) {
    let at = runs.partition_point(|&(start, _)| start <= launched);
    let Some(k) = at.checked_sub(1).filter(|&k| launched < runs[k].1) else { return };
    let span = spans[k].get_or_insert((start, end));
    *span = (span.0.min(start), span.1.max(end));
}

/// Steps from the work of each host run (`spans`, as `runs`): each run with work, in
/// time order, its host event the step's host span.
fn module_run_steps(spans: Vec<Option<(i64, i64)>>, runs: &[(i64, i64)], top: &str, host: &str) -> Vec<Step> {
    // Each run's kernels and its host event, which is the step's host span.
    let mut found: Vec<((i64, i64), (i64, i64))> =
        spans.into_iter().zip(runs.iter().copied()).filter_map(|(work, host)| Some((work?, host))).collect();
    found.sort_unstable();
    (found.iter().enumerate())
        .map(|(n, &((a, b), (host_start, host_end)))| Step {
            host_start_ps: host_start,
            host_duration_ps: host_end.saturating_sub(host_start),
            ..blank_step(n as i64, top, host, a, b.saturating_sub(a))
        })
        .collect()
}

/// The rounds of runs on several threads (`per_line`, one per GPU, each by start):
/// per round (each thread's k-th run) its span from the first one's start to the last
/// one's end. `None` unless every thread has as many and the rounds follow one another
/// without overlapping.
fn module_run_rounds(per_line: &[Vec<(i64, i64)>]) -> Option<Vec<(i64, i64)>> {
    let n = per_line.first()?.len();
    if per_line.iter().any(|runs| runs.len() != n) {
        return None;
    }
    let rounds: Vec<(i64, i64)> = (0..n)
        .map(|k| {
            let start = per_line.iter().map(|runs| runs[k].0).min().unwrap_or(0);
            (start, per_line.iter().map(|runs| runs[k].1).max().unwrap_or(start))
        })
        .collect();
    rounds.windows(2).all(|w| w[0].1 <= w[1].0).then_some(rounds)
}

/// The spans of the events named `name` on each line of `host` that has any, each
/// line's sorted by start.
fn module_run_lines(host: &stepscope_xspace::Plane, name: &str) -> Vec<Vec<(i64, i64)>> {
    let metas: Vec<u32> = (0..host.event_meta.len() as u32).filter(|&m| host.event_name(m) == name).collect();
    if metas.is_empty() {
        return Vec::new();
    }
    (host.lines.iter())
        .map(|line| {
            let mut runs: Vec<(i64, i64)> = (0..line.len())
                .filter(|&i| metas.contains(&line.meta(i)))
                .map(|i| (line.start_ps(i), line.end_ps(i)))
                .collect();
            runs.sort_unstable();
            runs
        })
        .filter(|runs| !runs.is_empty())
        .collect()
}

/// XLA:CPU: the span of each `run_id` of the ops whose module id `of_module` picks,
/// first op to last, in time order.
pub fn module_runs(d: &Device, of_module: impl Fn(u32) -> bool) -> Vec<(i64, i64)> {
    let ops = d.cached_ops();
    let mut runs: FastMap<i64, (i64, i64)> = FastMap::default();
    for (i, r) in ops.recs.iter().enumerate().filter(|(_, r)| of_module(r.module)) {
        let (_, start, end, _) = ops.span(d.plane, i);
        widen(&mut runs, ops.run_id(r).unwrap_or(0), (start, end));
    }
    let mut spans: Vec<(i64, i64)> = runs.into_values().collect();
    spans.sort_unstable();
    spans
}

/// Where the steps are executions of a module (`source`), device `d`'s own runs of
/// the module its host's steps are named after, in time order: from its `XLA Modules`
/// line, or on XLA:CPU from its ops' runs. Each device runs the module at its own time
/// where a host drives its devices from a thread each, so its k-th run, not the k-th
/// step's span (the first device's run), is its part of the k-th step. None where the
/// steps come from elsewhere or the device has no run of the module.
pub fn own_module_runs(d: &Device, source: StepSource, steps: &[Step]) -> Option<Vec<(i64, i64)>> {
    if source != StepSource::ModuleExecutions {
        return None;
    }
    let module = steps.iter().find(|s| s.host == d.host)?.name.as_str();
    let own = match d.plane.line("XLA Modules").filter(|l| !l.is_empty()) {
        Some(line) => (0..line.len())
            .filter(|&i| module_name(d.plane.event_name(line.meta(i))) == module)
            .map(|i| (line.start_ps(i), line.end_ps(i)))
            .collect(),
        None if d.source == OpSource::HostOps => {
            let names = &d.cached_ops().names;
            module_runs(d, |m| &*names[m as usize] == module)
        }
        None => return None,
    };
    let mut own: Vec<(i64, i64)> = own;
    own.sort_unstable();
    Some(own).filter(|o| !o.is_empty())
}

/// Widens run `run`'s span in `runs` to cover `(lo, hi)`.
pub fn widen(runs: &mut FastMap<i64, (i64, i64)>, run: i64, (lo, hi): (i64, i64)) {
    let e = runs.entry(run).or_insert((lo, hi));
    e.0 = e.0.min(lo);
    e.1 = e.1.max(hi);
}

/// True for host events that are XLA compilation (or lowering for it). For a method
/// (`Class::method(args)`) the method decides: `PjRtCApiCompiler::Compile` compiles,
/// `PjRtCApiCompiler::BufferFromHostBuffer` (JAX on GPU, a host-to-device copy) does not.
/// Python compiling its own bytecode on import (`_compile_bytecode`, `py_compile`,
/// `compile` of `re`) is not XLA's.
pub fn is_compile_event(name: &str) -> bool {
    let head = name.split('(').next().unwrap_or(name);
    let what = head.rsplit("::").next().unwrap_or(head);
    let lower = what.to_ascii_lowercase();
    let python =
        lower.contains("bytecode") || lower.contains("py_compile") || head.contains(".py") || head == "compile";
    !python && ((lower.contains("compile") && !lower.contains("compiled")) || lower.starts_with("lower_"))
}

/// What a host's CPU plane says of device time (stage 2).
#[derive(Default)]
pub struct HostTime {
    /// Its compile events (`steps::host_compile_events`).
    pub compile_events: Vec<(u32, u32, u8)>,
    /// The time XLA compilation ran.
    pub compile: Intervals,
    /// Host-side copies to its device: XLA:CPU's, and a GPU host's staging of a NumPy
    /// array into the device's layout (`H2D Dispatch` on its async work threads).
    pub to_device: Intervals,
    /// Likewise from its device.
    pub to_host: Intervals,
    /// On a host of GPUs, the time its threads ran a host callback's Python
    /// (`io_callback.3` inside the program's execution): its devices wait for it.
    /// (On XLA:CPU a callback is an op of the device itself.)
    pub callbacks: Intervals,
}

/// Per host, what its CPU plane says of device time: compile events and their time,
/// its host-side copies (XLA:CPU's, a GPU host's staging of arrays), on a host of GPUs
/// its host callbacks. One pass over the plane's lines, for the events whose names say
/// they are one of these.
pub fn host_events(hosts: &[Space], devices: &[Device]) -> Vec<HostTime> {
    const TO_DEVICE: u8 = 4;
    const TO_HOST: u8 = 8;
    const CALLBACK: u8 = 16;
    (hosts.par_iter().enumerate())
        .map(|(hi, space)| {
            let Some(plane) = host_cpu_plane(space) else { return HostTime::default() };
            let copies =
                devices.iter().any(|d| d.host_index == hi && matches!(d.source, OpSource::HostOps | OpSource::Kernels));
            let launches = devices.iter().any(|d| d.host_index == hi && d.source == OpSource::Kernels);
            let kinds: Vec<u8> = (plane.event_meta.iter())
                .map(|m| {
                    let name = plane.text(m.name);
                    let compile = is_compile_event(name);
                    let copy = match copies.then(|| host_transfer_kind(name)).flatten() {
                        Some(Part::HostToDevice) => TO_DEVICE,
                        Some(_) => TO_HOST,
                        None => 0,
                    };
                    let callback = u8::from(launches && is_host_callback(name)) * CALLBACK;
                    u8::from(compile) * COMPILE
                        + u8::from(compile && name.contains("Compile")) * COMPILER
                        + copy
                        + callback
                })
                .collect();
            let mask: Vec<bool> = kinds.iter().map(|&k| k != 0).collect();
            let mut host = HostTime::default();
            let (mut compile, mut to_device, mut to_host, mut callbacks) =
                (Vec::new(), Vec::new(), Vec::new(), Vec::new());
            for (l, line) in plane.lines.iter().enumerate() {
                for i in line.events_with_meta(&mask) {
                    let k = kinds[line.meta(i) as usize];
                    let span = (line.start_ps(i), line.end_ps(i));
                    if k & (COMPILE | COMPILER) != 0 {
                        host.compile_events.push((l as u32, i as u32, k & (COMPILE | COMPILER)));
                    }
                    if k & COMPILE != 0 {
                        compile.push(span);
                    }
                    if k & TO_DEVICE != 0 {
                        to_device.push(span);
                    }
                    if k & TO_HOST != 0 {
                        to_host.push(span);
                    }
                    if k & CALLBACK != 0 {
                        callbacks.push(span);
                    }
                }
            }
            host.compile = Intervals::new(compile);
            host.to_device = Intervals::new(to_device);
            host.to_host = Intervals::new(to_host);
            host.callbacks = Intervals::new(callbacks);
            host
        })
        .collect()
}

/// A [`host_compile_events`] hit that is an XLA compile or lowering
/// ([`is_compile_event`]).
pub const COMPILE: u8 = 1;

/// A [`host_compile_events`] hit whose name holds `Compile`: its stats may name the
/// module compiled.
pub const COMPILER: u8 = 2;

/// Per host (in `hosts` order), where its GPUs' work is linked to its launches
/// (`correlation_id` on both sides): each launch ([`launches`]); empty elsewhere.
pub fn host_launches(hosts: &[Space], devices: &[Device]) -> Vec<Launches> {
    (hosts.par_iter().enumerate())
        .map(|(hi, space)| match host_cpu_plane(space) {
            Some(plane) if devices.iter().any(|d| d.host_index == hi && d.source == OpSource::Kernels) => {
                launches(plane)
            }
            _ => Launches::default(),
        })
        .collect()
}

/// A host plane's launches of GPU work: each event with a `correlation_id`, its span
/// by the id (the last in reading order where an id repeats), and the innermost event
/// of its line that holds it (XLA's annotation of the thunk that launched it, where
/// the launch calls are recorded on the annotations' line). Read in parallel pieces.
fn launches(plane: &stepscope_xspace::Plane) -> Launches {
    let Some(corr) = plane.stat_id("correlation_id") else { return Launches::default() };
    let look = plane.stat_lookup([Some(corr)]);
    let pieces: Vec<(&Line, std::ops::Range<usize>)> = (plane.lines.iter())
        .flat_map(|line| crate::records::pieces(line.len(), LAUNCH_SCAN_PIECE).map(move |r| (line, r)))
        .collect();
    let found: Vec<Vec<(i64, Launch)>> = pieces
        .into_par_iter()
        .map(|(line, range)| {
            let mut found = Vec::new();
            let maybe: Vec<usize> = plane.events_maybe_with(&look, line, range.clone()).collect();
            if maybe.is_empty() {
                return found;
            }
            // A line of launch calls only (ROCm's, CUPTI's API lines) holds no annotation.
            let annotated = maybe.len() < range.len();
            let scopes = if annotated { innermost(line, range.clone(), &maybe) } else { Vec::new() };
            for (k, &i) in maybe.iter().enumerate() {
                let [c] = plane.stats_of(&look, line, i);
                if let Some(c) = c.and_then(|c| plane.stat_i64(&c)) {
                    let (start_ps, end_ps) = (line.start_ps(i), line.end_ps(i));
                    let scope = scopes.get(k).copied().flatten().map(|j| (line.start_ps(j), line.meta(j)));
                    found.push((c, Launch { start_ps, end_ps, scope, meta: line.meta(i) }));
                }
            }
            line.release_stats(range);
            found
        })
        .collect();
    Launches::new(found.concat())
}

/// For each of `wanted` (events of `range` of `line`, in order): the innermost event
/// of the line that holds its start (a launch call may end a clock tick after the
/// annotation holding it does), found in one walk over the range with a stack of the
/// events still open. The walk starts with the events before the range that hold its
/// first event, among the [`ENCLOSING_SCAN`] before it (a piece boundary).
fn innermost(line: &Line, range: std::ops::Range<usize>, wanted: &[usize]) -> Vec<Option<usize>> {
    let first = line.start_ps(range.start);
    let mut open: Vec<usize> = (range.start.saturating_sub(ENCLOSING_SCAN)..range.start)
        .filter(|&j| line.start_ps(j) <= first && line.end_ps(j) > first)
        .collect();
    let mut out = Vec::with_capacity(wanted.len());
    let mut next = wanted.iter().copied().peekable();
    for i in range {
        let start = line.start_ps(i);
        while open.last().is_some_and(|&j| line.end_ps(j) <= start) {
            open.pop();
        }
        if next.peek() == Some(&i) {
            next.next();
            out.push(open.last().copied());
            if next.peek().is_none() {
                break;
            }
        }
        open.push(i);
    }
    out
}

/// How many events before a piece of a host line [`innermost`] looks at for the
/// events that hold the piece's first one (the annotation of an op and the events
/// around it: a module's, a step's).
const ENCLOSING_SCAN: usize = 32;

/// Events of a host line, or a GPU's op records, read as one piece by
/// the analyses' `steps::launched_work`. Debug builds (the tests' binaries) cut the fixtures' too, so the
/// joining of pieces is checked by every test that reads launched work.
pub const LAUNCH_SCAN_PIECE: usize = if cfg!(debug_assertions) { 1 << 7 } else { 1 << 16 };

/// One host launch of GPU work, as read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Launch {
    pub start_ps: i64,
    pub end_ps: i64,
    /// The innermost event of the launch's line that holds its start: the event's
    /// start and metadata id on the host's CPU plane. `None` where none does (the
    /// launch calls are on a line of their own).
    pub scope: Option<(i64, u32)>,
    /// Its event's metadata id on the host's CPU plane: what it launched (a kernel's
    /// name where a kernel is launched alone, `cuGraphLaunch (CudaGraph:N)` for a
    /// command buffer, `MemcpyH2D`; CUPTI also numbers the kernels recorded into a
    /// command buffer, which never run as such).
    pub meta: u32,
}

/// Host launches by `correlation_id`. CUPTI numbers its calls one by one, so the
/// ids are nearly always a dense range (every id from 1 to N on the NVIDIA fixtures):
/// then tables indexed by id, at most twice as long as the launches (16 bytes a launch
/// for its span, 16 more for its scope where any launch has one); else (ROCm's: one id
/// in 6.6) a map.
#[derive(Default)]
pub struct Launches {
    /// The first id of `dense`.
    first: i64,
    /// Per id from `first` on: its launch's span, [`NO_LAUNCH`] for none.
    dense: Vec<(i64, i64)>,
    /// Per id as `dense`: its launch's scope, [`NO_SCOPE`] for none; empty where no
    /// launch has one.
    dense_scope: Vec<(i64, u32)>,
    /// Per id as `dense`: its launch event's metadata id (what it launched: a kernel's
    /// name, `cuGraphLaunch (CudaGraph:N)`, `MemcpyD2H`).
    dense_meta: Vec<u32>,
    sparse: FastMap<i64, Launch>,
}

/// A [`Launches::dense`] slot without a launch.
const NO_LAUNCH: (i64, i64) = (i64::MIN, i64::MIN);

/// A [`Launches::dense_scope`] slot without a scope.
const NO_SCOPE: (i64, u32) = (i64::MIN, u32::MAX);

impl Launches {
    /// From (id, launch) pairs in reading order: the last of an id wins.
    pub fn new(found: Vec<(i64, Launch)>) -> Launches {
        let lo = found.iter().map(|f| f.0).min().unwrap_or(0);
        let hi = found.iter().map(|f| f.0).max().unwrap_or(0);
        let span = (hi as i128 - lo as i128 + 1) as u128;
        if !found.is_empty() && span <= 2 * found.len() as u128 + 1024 {
            let mut dense = vec![NO_LAUNCH; span as usize];
            let mut dense_meta = vec![u32::MAX; span as usize];
            let scoped = found.iter().any(|f| f.1.scope.is_some());
            let mut dense_scope = if scoped { vec![NO_SCOPE; span as usize] } else { Vec::new() };
            for (c, l) in found {
                let at = (c - lo) as usize;
                dense[at] = (l.start_ps, l.end_ps);
                dense_meta[at] = l.meta;
                if scoped {
                    dense_scope[at] = l.scope.unwrap_or(NO_SCOPE);
                }
            }
            Launches { first: lo, dense, dense_scope, dense_meta, sparse: FastMap::default() }
        } else {
            Launches { sparse: found.into_iter().collect(), ..Launches::default() }
        }
    }

    pub fn is_empty(&self) -> bool {
        self.dense.is_empty() && self.sparse.is_empty()
    }

    /// Where launch `corr` sits in the dense tables.
    #[inline]
    fn slot(&self, corr: i64) -> Option<usize> {
        usize::try_from(corr.checked_sub(self.first)?).ok().filter(|&at| at < self.dense.len())
    }

    /// The span of launch `corr`.
    #[inline]
    pub fn get(&self, corr: i64) -> Option<(i64, i64)> {
        if self.dense.is_empty() {
            return self.sparse.get(&corr).map(|l| (l.start_ps, l.end_ps));
        }
        Some(self.dense[self.slot(corr)?]).filter(|&t| t != NO_LAUNCH)
    }

    /// Whether there is a launch `corr`, and its scope (see [`Launch::scope`]).
    #[inline]
    pub fn scope(&self, corr: i64) -> Option<Option<(i64, u32)>> {
        if self.dense.is_empty() {
            return self.sparse.get(&corr).map(|l| l.scope);
        }
        let at = self.slot(corr).filter(|&at| self.dense[at] != NO_LAUNCH)?;
        Some(self.dense_scope.get(at).copied().filter(|&s| s != NO_SCOPE))
    }

    /// The metadata id of launch `corr`'s event (see [`Launch::meta`]).
    #[inline]
    pub fn meta(&self, corr: i64) -> Option<u32> {
        if self.dense.is_empty() {
            return self.sparse.get(&corr).map(|l| l.meta);
        }
        self.slot(corr).filter(|&at| self.dense[at] != NO_LAUNCH).map(|at| self.dense_meta[at])
    }

    /// The metadata ids of the scopes of every launch, each once.
    pub fn scope_metas(&self) -> Vec<u32> {
        let mut metas: Vec<u32> = (self.dense_scope.iter().filter(|s| **s != NO_SCOPE).map(|s| s.1))
            .chain(self.sparse.values().filter_map(|l| l.scope.map(|s| s.1)))
            .collect();
        metas.sort_unstable();
        metas.dedup();
        metas
    }

    /// Every launch: (id, span).
    pub fn iter(&self) -> impl Iterator<Item = (i64, (i64, i64))> + '_ {
        let dense =
            (self.dense.iter().enumerate()).filter(|(_, &t)| t != NO_LAUNCH).map(|(k, &t)| (self.first + k as i64, t));
        dense.chain(self.sparse.iter().map(|(&c, l)| (c, (l.start_ps, l.end_ps))))
    }
}

#[cfg(test)]
mod tests {
    use super::{is_compile_event, Launch, Launches};

    #[test]
    fn launches_by_correlation_id_dense_or_sparse() {
        // CUPTI's ids count up: a table; the last of a repeated id wins.
        let at = |t: i64| (t, t + 5);
        let new = |found: Vec<(i64, (i64, i64))>| {
            Launches::new(
                found
                    .into_iter()
                    .map(|(c, (start_ps, end_ps))| (c, Launch { start_ps, end_ps, scope: None, meta: 0 }))
                    .collect(),
            )
        };
        let l = new(vec![(7, at(70)), (8, at(80)), (10, at(100)), (8, at(81))]);
        assert!(!l.dense.is_empty());
        assert_eq!(
            [6, 7, 8, 9, 10, 11, i64::MIN].map(|c| l.get(c)),
            [None, Some(at(70)), Some(at(81)), None, Some(at(100)), None, None]
        );
        let mut all: Vec<_> = l.iter().collect();
        all.sort();
        assert_eq!(all, [(7, at(70)), (8, at(81)), (10, at(100))]);
        // Ids far apart: a map, the same answers.
        let l = new(vec![(i64::MIN + 1, at(1)), (5, at(50)), (i64::MAX, at(2)), (5, at(51))]);
        assert!(l.dense.is_empty());
        assert_eq!([i64::MIN + 1, 5, i64::MAX, 6].map(|c| l.get(c)), [Some(at(1)), Some(at(51)), Some(at(2)), None]);
        assert_eq!(l.iter().count(), 3);
        assert!(Launches::new(Vec::new()).is_empty());
    }

    #[test]
    fn xla_compiles_are_compiles_and_python_bytecode_is_not() {
        for yes in ["PjRtCApiCompiler::Compile", "XlaCompile", "backend_compile", "lower_jaxpr_to_fun", "jit_compile"] {
            assert!(is_compile_event(yes), "{yes}");
        }
        for no in [
            "_compile_bytecode",
            "<frozen importlib._bootstrap_external>:_compile_bytecode",
            "PjRtCApiCompiler::BufferFromHostBuffer",
            "py_compile.compile",
            "compile",
            "re.py:compile",
            "PjRtLoadedExecutable::Execute (compiled)",
        ] {
            assert!(!is_compile_event(no), "{no}");
        }
    }
}
