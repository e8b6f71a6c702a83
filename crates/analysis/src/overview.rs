//! The overview: step time, where the average step went, utilisation, top ops and
//! the run's environment. The rules read it (`stepscope-judge`); with their top
//! findings it is the summary (`stepscope-report`), whose JSON is the baseline format
//! `check` compares against.

use serde::Serialize;

use crate::ops::{self, GroupBy, OpRow};
use crate::roofline::StepFlops;
use crate::steps::{self, StepSource, StepTiming, StepVotes};
use stepscope_model::device_time::{DeviceTimeline, Part};
use stepscope_model::stats::{pct, sum_ps, Distribution};
use stepscope_model::wire::Packed;
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
    /// Host callbacks (`jax.pure_callback`, `io_callback`, `jax.debug.callback` /
    /// `print`): the program waited on the host's Python.
    pub host_callback_ps: i64,
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

/// The capture as a whole, beyond its steps: how long it ran and how much of it XLA
/// spent compiling, wherever that fell (in a step, before the first, with no step at
/// all). A one-off capture without warm-up is mostly compilation, which the average
/// step never shows.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Capture {
    /// First event to last, of the host that compiled longest.
    pub span_ps: i64,
    /// The time XLA compiled during the capture: the union of a host's compile events,
    /// the longest of the hosts'.
    pub compile_ps: i64,
    /// Of `compile_ps` (that host's), the time that fell outside its steps.
    pub compile_outside_steps_ps: i64,
    /// `compile_ps` over `span_ps`, percent.
    pub compile_pct: f64,
}

/// How much of the op time the op profile can explain: what ran in kernels without an
/// HLO op (no cost, no source line), and what ran in XLA command buffers and was
/// credited back to its ops ([`stepscope_model::command_buffer`]).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Attribution {
    /// Self time of every op row.
    pub op_ps: i64,
    /// Of it, ops with no HLO that compute (not a runtime copy or memset): library,
    /// autotuning and runtime kernels, kernels no instruction was found for.
    pub no_hlo_ps: i64,
    /// The largest of those by self time, each name once (at most 3).
    pub no_hlo_ops: Vec<String>,
    /// Of `op_ps`, kernels that ran in command buffers, credited to their HLO ops.
    pub command_buffer_ps: i64,
}

impl Attribution {
    /// Of the op profile `rows` (by op, every row).
    fn of(rows: &[OpRow]) -> Attribution {
        let mut a = Attribution::default();
        let mut unexplained: Vec<(i64, &str)> = Vec::new();
        for r in rows {
            a.op_ps = a.op_ps.saturating_add(r.self_ps);
            if r.command_buffer.is_some() {
                a.command_buffer_ps = a.command_buffer_ps.saturating_add(r.self_ps);
            }
            let computes = stepscope_model::kinds::op_kind(&r.name, &r.category, "") == Part::Compute
                && !r.name.starts_with("Memset");
            if r.multiplies_matrices.is_none() && computes {
                a.no_hlo_ps = a.no_hlo_ps.saturating_add(r.self_ps);
                unexplained.push((r.self_ps, &r.name));
            }
        }
        unexplained.sort_by_key(|&(ps, _)| std::cmp::Reverse(ps));
        for (_, name) in unexplained {
            if a.no_hlo_ops.len() < 3 && !a.no_hlo_ops.iter().any(|n| n == name) {
                a.no_hlo_ops.push(name.to_string());
            }
        }
        a
    }
}

/// A host's clock against the run's first host's (that ran collectives), after the
/// hosts were put on one clock by their session starts: how much later its events read
/// than the same instant on the first host's.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ClockSkew {
    pub host: String,
    /// The host it is compared with: the run's first that ran collectives.
    pub against: String,
    /// The median of (its collective's end − the first host's same collective's end).
    pub skew_ps: i64,
    /// The collectives paired.
    pub collectives: usize,
    /// Their robust spread (1.4826 × the median absolute deviation): how sure.
    pub spread_ps: i64,
    /// The median of (its step's host start − the first host's same step's host start),
    /// over the steps both hold: how far apart their steps start on the clocks as read.
    /// Less `skew_ps`, how far apart they start with its clock corrected.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub steps_apart_ps: Option<i64>,
}

/// Paired collectives past which a host's skew is estimated.
const MIN_PAIRED_COLLECTIVES: usize = 3;
/// How far the k-th collective of one host may be from the k-th of the other (ones cut
/// at the capture's edges), in collectives.
const MAX_COLLECTIVE_SHIFT: i64 = 4;

/// Each host's clock against the first host with collectives (`ends`: per host, its
/// collectives' ends in time order). The k-th collective of a host is paired with the
/// (k+s)-th of the first, for the shift `s` (a few collectives either way: a host whose
/// capture started or stopped at another time holds more or fewer) whose differences
/// agree best; the skew is their median.
/// `starts`: per host, its steps' (number, host start).
fn clock_skews(hosts: &[String], ends: &[Vec<i64>], starts: &[Vec<(i64, i64)>]) -> Vec<ClockSkew> {
    let Some(first) = ends.iter().position(|e| e.len() >= MIN_PAIRED_COLLECTIVES) else { return Vec::new() };
    let median = |v: &mut Vec<i64>| {
        v.sort_unstable();
        v[v.len() / 2]
    };
    let mut out = Vec::new();
    for (h, mine) in ends.iter().enumerate().filter(|&(h, e)| h != first && e.len() >= MIN_PAIRED_COLLECTIVES) {
        let reference = &ends[first];
        let best = (-MAX_COLLECTIVE_SHIFT..=MAX_COLLECTIVE_SHIFT)
            .filter_map(|s| {
                let mut d: Vec<i64> = (0..mine.len() as i64)
                    .filter_map(|k| {
                        reference.get(usize::try_from(k + s).ok()?).map(|r| mine[k as usize].saturating_sub(*r))
                    })
                    .collect();
                if d.len() < MIN_PAIRED_COLLECTIVES {
                    return None;
                }
                let skew = median(&mut d);
                let mut dev: Vec<i64> = d.iter().map(|x| x.saturating_sub(skew).saturating_abs()).collect();
                let mad = median(&mut dev);
                Some((mad, std::cmp::Reverse(d.len()), skew))
            })
            .min();
        if let Some((mad, std::cmp::Reverse(n), skew)) = best {
            let none = Vec::new();
            let theirs = starts.get(first).unwrap_or(&none);
            let mut apart: Vec<i64> = (starts.get(h).unwrap_or(&none).iter())
                .filter_map(|(num, at)| theirs.iter().find(|(n, _)| n == num).map(|(_, t)| at.saturating_sub(*t)))
                .collect();
            out.push(ClockSkew {
                host: hosts.get(h).cloned().unwrap_or_default(),
                against: hosts.get(first).cloned().unwrap_or_default(),
                skew_ps: skew,
                collectives: n,
                spread_ps: (1.4826 * mad as f64) as i64,
                steps_apart_ps: (!apart.is_empty()).then(|| median(&mut apart)),
            });
        }
    }
    out
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
    /// Some host was read from trace JSON: it holds no HLO (no costs, no source lines),
    /// and XProf's converter may have capped it.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub trace_json: bool,
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
    /// Steps (of those timed) that are cold: the host compiled in them, or they are the
    /// first run after a compile the capture holds outside any step (a one-off
    /// capture's call). Their time is a first call's.
    #[serde(skip_serializing_if = "stepscope_model::steps::is_zero")]
    pub cold_steps: u64,
    /// The numbers of the cold steps and of those cut, each sorted once: where a
    /// finding's evidence sits in one, it says so ([`Overview::cold_steps`]).
    #[serde(skip)]
    pub cold_step_nums: Vec<i64>,
    #[serde(skip)]
    pub cut_step_nums: Vec<i64>,
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
    /// The capture as a whole, where it holds compilation (absent where no host
    /// compiled): its span and the compilation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capture: Option<Capture>,
    pub environment: Environment,
    /// What of the op time the op profile can explain.
    pub attribution: Attribution,
    /// Of a run of several hosts whose devices ran collectives: each other host's clock
    /// against the first's, estimated from collectives that end together. Empty
    /// otherwise.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub clock_skews: Vec<ClockSkew>,
    /// What the Python tracer cost the steps, where it ran ([`crate::tracer`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub python_tracer: Option<crate::tracer::PythonTracer>,
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
    let steps = steps::cached(profile);
    let part = OverviewPart::of(profile, crate::roofline::step_flops(profile, &steps.steps));
    let rows = ops::ops(profile, GroupBy::Op, 0).ops;
    assemble(&profile.run, vec![part], rows, top, profile.unread_hosts.clone())
}

/// What the overview reads of a profile: of a whole run, or of one host of a run
/// read a host at a time, measured under the run's decisions
/// ([`stepscope_model::steps::RunDecisions`]). Owned: a run read a host at a time
/// keeps only its hosts' parts, and [`assemble`] makes of them the overview the run
/// read whole has.
#[derive(Clone, Debug)]
pub struct OverviewPart {
    pub hosts: Vec<String>,
    /// Per host: when its collectives ended ([`crate::collectives::ends_by_host`]).
    collective_ends: Vec<Vec<i64>>,
    /// The decisions taken, and what the run's are decided from.
    pub source: StepSource,
    pub timing: StepTiming,
    pub votes: StepVotes,
    pub none_took_part: bool,
    /// The steps, in time order; as bytes (a third of their size) until the run's
    /// overview is made of its hosts' parts (a pod keeps every host's until then).
    steps: Packed<Vec<StepTimes>>,
    dispatched_not_run: u64,
    launches_not_run: u64,
    /// Per device: its timeline's sums.
    windows: Vec<Window>,
    left_out: Vec<crate::devices::LeftOut>,
    /// Per device: its kind and model.
    device_models: Vec<(DeviceKind, String)>,
    versions: Vec<String>,
    host_tracer_level: Option<u32>,
    trace_json: bool,
    python_calls: crate::tracer::PythonCalls,
    input: crate::scopes::InputSums,
    /// Per host that compiled: (compile time, of it outside the host's steps, the
    /// host's span: first event to last).
    compile: Vec<(i64, i64, i64)>,
}
stepscope_model::wire_struct!(OverviewPart {
    hosts,
    collective_ends,
    source,
    timing,
    votes,
    none_took_part,
    steps,
    dispatched_not_run,
    launches_not_run,
    windows,
    left_out,
    device_models,
    versions,
    host_tracer_level,
    trace_json,
    python_calls,
    input,
    compile,
});

/// A step, as the overview reads it.
#[derive(Clone, Copy, Debug)]
struct StepTimes {
    /// Its host, by its place in the run's hosts.
    host: usize,
    step_num: i64,
    start_ps: i64,
    duration_ps: i64,
    host_start_ps: i64,
    host_duration_ps: i64,
    /// It compiled, or is the first step after a compile its host ran outside any step
    /// (a one-off capture's first call): a first run's time, not a warm step's.
    cold: bool,
    cut: bool,
    /// Its FLOPs ([`crate::roofline::step_flops`]).
    flops: Option<StepFlops>,
}
stepscope_model::wire_struct!(StepTimes {
    host,
    step_num,
    start_ps,
    duration_ps,
    host_start_ps,
    host_duration_ps,
    cold,
    cut,
    flops
});

/// A device's timeline, as the overview reads it.
#[derive(Clone, Copy, Debug)]
struct Window {
    took_part: bool,
    window_ps: i64,
    parts_ps: [i64; Part::ALL.len()],
    busy_ps: i64,
    idle_queued_ps: Option<i64>,
    idle_launching_ps: Option<i64>,
}
stepscope_model::wire_struct!(Window { took_part, window_ps, parts_ps, busy_ps, idle_queued_ps, idle_launching_ps });

impl Window {
    fn part_ps(&self, part: Part) -> i64 {
        self.parts_ps[part.index()]
    }

    /// Taken into the run's aggregates ([`stepscope_model::device_time::DeviceTime::working`]).
    fn working(&self) -> bool {
        self.took_part && self.window_ps > 0
    }
}

impl OverviewPart {
    /// Its steps' FLOPs, in the order of its profile's steps.
    pub fn step_flops(&self) -> impl Iterator<Item = Option<StepFlops>> {
        self.steps.get().unwrap_or_default().into_iter().map(|s| s.flops)
    }

    /// Its hosts' input work in their steps ([`crate::scopes::input_sums`]).
    pub fn input_sums(&self) -> &crate::scopes::InputSums {
        &self.input
    }

    /// The part of `profile`, whose steps ran `flops` (per step, in order).
    pub fn of(profile: &Profile, flops: Vec<Option<StepFlops>>) -> OverviewPart {
        let steps = steps::cached(profile);
        let base = profile.time_base();
        let devices = profile.devices();
        let windows = (profile.device_time().devices.iter())
            .map(|t: &DeviceTimeline| Window {
                took_part: t.took_part,
                window_ps: t.window_ps(),
                parts_ps: t.parts_ps,
                busy_ps: t.busy_ps,
                idle_queued_ps: t.idle_queued_ps,
                idle_launching_ps: t.idle_launching_ps,
            })
            .collect();
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
        OverviewPart {
            collective_ends: crate::collectives::ends_by_host(profile),
            hosts: profile.hosts.iter().map(|h| h.host.clone()).collect(),
            source: steps.source,
            timing: steps.timing,
            votes: base.votes,
            none_took_part: base.none_took_part,
            steps: Packed::new(
                &(steps.steps.iter().zip(flops).zip(first_runs(profile, &steps.steps)))
                    .map(|((s, flops), first_run)| StepTimes {
                        host: profile.hosts.iter().position(|h| h.host == s.host).unwrap_or(0),
                        step_num: s.step_num,
                        start_ps: s.start_ps,
                        duration_ps: s.duration_ps,
                        host_start_ps: s.host_start_ps,
                        host_duration_ps: s.host_duration_ps,
                        cold: s.compile_ps > 0 || first_run,
                        cut: s.cut,
                        flops,
                    })
                    .collect(),
            ),
            dispatched_not_run: steps.dispatched_not_run,
            launches_not_run: steps.launches_not_run,
            windows,
            left_out: crate::devices::left_out(profile),
            device_models: devices.iter().map(|d| (d.kind, device_model(d))).collect(),
            versions,
            host_tracer_level: host_tracer_level(profile),
            trace_json: profile.hosts.iter().any(|h| h.format == stepscope_xspace::Format::TraceJson),
            python_calls: crate::tracer::python_calls(profile, &steps.steps),
            input: crate::scopes::input_sums(profile),
            // A host's span is read (a pass over its events) only where it compiled.
            compile: (profile.hosts.iter().zip(&base.hosts))
                .filter(|(_, h)| h.compile.total() > 0)
                .map(|(space, h)| {
                    let total = h.compile.total();
                    let in_steps = sum_ps(steps.steps.iter().filter(|s| s.host == space.host).map(|s| s.compile_ps));
                    let span = space.time_span_ps().map_or(0, |(lo, hi)| hi.saturating_sub(lo).max(0));
                    (total, total.saturating_sub(in_steps).max(0), span)
                })
                .collect(),
        }
    }
}

/// The overview of a run from its parts (in host order, each measured under the
/// run's decisions), its op profile by op (`rows`) and the host files it could not
/// read; `top` ops are listed.
pub fn assemble(
    run: &str,
    parts: Vec<OverviewPart>,
    rows: Vec<OpRow>,
    top: usize,
    hosts_unread: Vec<stepscope_xspace::discover::Unread>,
) -> Overview {
    let (source, timing) = parts.first().map_or((StepSource::None, StepTiming::Host), |p| (p.source, p.timing));
    let several = parts.len() > 1;
    let mut all = OverviewPart {
        hosts: Vec::new(),
        collective_ends: Vec::new(),
        source,
        timing,
        votes: StepVotes::default(),
        none_took_part: true,
        steps: Packed::new(&Vec::new()),
        dispatched_not_run: 0,
        launches_not_run: 0,
        windows: Vec::new(),
        left_out: Vec::new(),
        device_models: Vec::new(),
        versions: Vec::new(),
        host_tracer_level: None,
        trace_json: false,
        python_calls: Default::default(),
        input: Default::default(),
        compile: Vec::new(),
    };
    let mut steps: Vec<StepTimes> = Vec::new();
    for p in parts {
        let base = all.hosts.len();
        all.hosts.extend(p.hosts);
        all.collective_ends.extend(p.collective_ends);
        steps.extend(p.steps.get().unwrap_or_default().into_iter().map(|s| StepTimes { host: base + s.host, ..s }));
        all.dispatched_not_run += p.dispatched_not_run;
        all.launches_not_run += p.launches_not_run;
        all.windows.extend(p.windows);
        all.left_out.extend(p.left_out);
        all.device_models.extend(p.device_models);
        all.versions.extend(p.versions);
        all.host_tracer_level = match (all.host_tracer_level, p.host_tracer_level) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        all.trace_json |= p.trace_json;
        all.python_calls.add(p.python_calls);
        all.input.add(p.input);
        all.compile.extend(p.compile);
    }
    let capture = capture(&all.compile);
    if several {
        in_run_order(&mut steps, timing, |s| (s.host_start_ps, s.step_num), |s| (s.start_ps, s.step_num));
    }
    let timed = || steps.iter().filter(|s| !s.cut);
    let durations: Vec<i64> = timed().map(|s| s.duration_ps).collect();
    let step_time = Distribution::of(&durations);
    let host_step_time = (timing == StepTiming::Device)
        .then(|| Distribution::of(&timed().map(|s| s.host_duration_ps).collect::<Vec<_>>()));
    let warm: Vec<i64> = timed().filter(|s| !s.cold).map(|s| s.duration_ps).collect();
    let cold_steps = (durations.len() - warm.len()) as u64;
    let warm_step_time = (cold_steps > 0 && !warm.is_empty()).then(|| Distribution::of(&warm));
    let mut breakdown = breakdown(&all.windows, if durations.is_empty() { 0 } else { step_time.mean_ps });
    // Only its times are read here: the shares the scopes give are theirs.
    let means =
        crate::scopes::StepMeans { timed: durations.len(), sum_ps: sum_ps(durations.iter().copied()), host_sum_ps: 0 };
    if let Some(input) = all.input.per_step(steps.len(), &means) {
        breakdown.host_input_ps = Some(input.host_input_ps);
        breakdown.device_idle_input_ps = Some(input.device_idle_input_ps.clamp(0, breakdown.device_idle_ps));
    }
    let mean_pct = |of: &dyn Fn(&Window) -> f64| {
        let (sum, n) = all.windows.iter().filter(|w| w.working()).fold((0.0, 0usize), |(s, n), w| (s + of(w), n + 1));
        if n == 0 {
            0.0
        } else {
            sum / n as f64
        }
    };
    let device_utilization_pct = mean_pct(&|w| pct(w.busy_ps, w.window_ps));
    let device_compute_pct = mean_pct(&|w| pct(w.part_ps(Part::Compute), w.window_ps));
    let per_step: Vec<StepFlops> = steps.iter().filter_map(|s| s.flops).collect();
    let flops_per_step =
        (!per_step.is_empty()).then(|| per_step.iter().map(|f| f.flops as f64).sum::<f64>() / per_step.len() as f64);
    let capacity: f64 = per_step.iter().map(|f| f.capacity_flops).sum();
    let flops_utilization_pct =
        (capacity > 0.0).then(|| 100.0 * per_step.iter().map(|f| f.flops as f64).sum::<f64>() / capacity);
    let nums = |keep: &dyn Fn(&StepTimes) -> bool| {
        let mut n: Vec<i64> = steps.iter().filter(|s| keep(s)).map(|s| s.step_num).collect();
        n.sort_unstable();
        n.dedup();
        n
    };
    let (cold_step_nums, cut_step_nums) = (nums(&|s| s.cold && !s.cut), nums(&|s| s.cut));
    let attribution = Attribution::of(&rows);
    let mut starts = vec![Vec::new(); all.hosts.len()];
    for s in steps.iter().filter(|s| !s.cut) {
        if let Some(v) = starts.get_mut(s.host) {
            v.push((s.step_num, s.host_start_ps));
        }
    }
    let clock_skews = clock_skews(&all.hosts, &all.collective_ends, &starts);
    let host_step_ps = host_step_time.as_ref().unwrap_or(&step_time).median_ps;
    let python_tracer = crate::tracer::PythonTracer::of(all.python_calls, host_step_ps);
    let mut top_ops = rows;
    top_ops.truncate(top);
    all.versions.sort();
    all.versions.dedup();
    Overview {
        schema: "stepscope.summary/1",
        run: run.to_string(),
        step_source: source,
        step_count: durations.len() as u64,
        step_timing: timing,
        step_time,
        host_step_time,
        steps_cut: (steps.len() - durations.len()) as u64,
        cold_steps,
        cold_step_nums,
        cut_step_nums,
        warm_step_time,
        dispatched_not_run: all.dispatched_not_run,
        launches_not_run: all.launches_not_run,
        breakdown,
        device_utilization_pct,
        device_compute_pct,
        devices_left_out: all.left_out,
        hosts_unread,
        flops_per_step,
        flops_utilization_pct,
        capture,
        environment: Environment {
            hosts: all.hosts,
            devices: device_groups(&all.device_models),
            versions: all.versions,
            host_tracer_level: all.host_tracer_level,
            trace_json: all.trace_json,
        },
        attribution,
        clock_skews,
        python_tracer,
        top_ops,
    }
}

/// Puts the steps of a run's hosts (each host's in its order, hosts in order) in the
/// order of the run's: the order they are found in (by host span, `found`; hosts in
/// order), then, where steps are timed on the device, the order of their timing
/// (`timed`), as [`stepscope_model::time_base`] orders them.
pub fn in_run_order<T>(
    steps: &mut [T],
    timing: StepTiming,
    found: impl Fn(&T) -> (i64, i64),
    timed: impl Fn(&T) -> (i64, i64),
) {
    steps.sort_by_key(found);
    if timing == StepTiming::Device {
        steps.sort_by_key(timed);
    }
}

/// The average step of `step_ps` split as the devices' windows are: each part's share
/// of each device's window, averaged over the working devices ([`stepscope_model::device_time::DeviceTime::working`]). The shares are
/// rounded as running totals (each part is the rounded total up to it less the one
/// before it), and idle takes what is left: the parts add up to `step_ps` exactly and
/// none is negative.
fn breakdown(windows: &[Window], step_ps: i64) -> Breakdown {
    let working: Vec<&Window> = windows.iter().filter(|w| w.working()).collect();
    let mut ps = [0i64; Part::ALL.len()];
    if !working.is_empty() {
        let (mut share_so_far, mut ps_so_far) = (0.0f64, 0i64);
        for part in Part::ALL.into_iter().filter(|p| *p != Part::Idle) {
            let mean: f64 =
                working.iter().map(|t| t.part_ps(part) as f64 / t.window_ps as f64).sum::<f64>() / working.len() as f64;
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
    let share = |of: fn(&Window) -> Option<i64>| {
        let shares: Vec<f64> = working.iter().filter_map(|t| of(t).map(|q| q as f64 / t.window_ps as f64)).collect();
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
        host_callback_ps: part(Part::HostCallback),
        runtime_overhead_ps: part(Part::RuntimeOverhead),
        compile_ps: part(Part::Compile),
        device_idle_ps,
        device_idle_queued_ps,
        device_idle_launching_ps,
        host_input_ps: None,
        device_idle_input_ps: None,
    }
}

/// Per step of `steps` (in order): whether it is the first on its host after a compile
/// that ended outside every step of that host, since the step before it (the first
/// run of a program compiled before it: a one-off capture's call, whose compile the
/// step does not hold).
fn first_runs(profile: &Profile, steps: &[stepscope_model::steps::Step]) -> Vec<bool> {
    let base = profile.time_base();
    let mut out = vec![false; steps.len()];
    for (space, host) in profile.hosts.iter().zip(&base.hosts) {
        let compiles = host.compile.spans();
        if compiles.is_empty() {
            continue;
        }
        let mut mine: Vec<usize> = (0..steps.len()).filter(|&i| steps[i].host == space.host).collect();
        mine.sort_by_key(|&i| steps[i].host_start_ps);
        let mut since = i64::MIN;
        for i in mine {
            let st = &steps[i];
            let start = st.host_start_ps;
            // A compile that ended after the last step and by this one's start.
            let k = compiles.partition_point(|&(_, end)| end <= since);
            out[i] = compiles[k..].iter().any(|&(_, end)| end <= start);
            since = since.max(start.saturating_add(st.host_duration_ps));
        }
    }
    out
}

/// The compilation the capture holds and its share, of the host that compiled longest
/// (over that host's span); `None` where no host compiled.
fn capture(compile: &[(i64, i64, i64)]) -> Option<Capture> {
    let (compile_ps, compile_outside_steps_ps, span_ps) = compile.iter().copied().max()?;
    Some(Capture { span_ps, compile_ps, compile_outside_steps_ps, compile_pct: pct(compile_ps, span_ps) })
}

/// The lowest `host_tracer_level` of the hosts' captures, where recorded.
pub fn host_tracer_level(profile: &Profile) -> Option<u32> {
    profile.hosts.iter().filter_map(stepscope_xspace::xplane::tracer_levels).map(|l| l.host).min()
}

/// A device's model: its plane's type or vendor; the host CPU's, named so.
fn device_model(d: &Device) -> String {
    ["device_type_string", "device_vendor"]
        .iter()
        .find_map(|k| d.plane.plane_stat(k).map(|s| d.plane.stat_display(&s)))
        .unwrap_or_else(|| if d.kind == DeviceKind::Cpu { "host CPU".into() } else { String::new() })
}

/// Devices of one kind and model counted, in the order first met.
fn device_groups(models: &[(DeviceKind, String)]) -> Vec<DeviceGroup> {
    let mut groups: Vec<DeviceGroup> = Vec::new();
    for (kind, model) in models {
        match groups.iter_mut().find(|g| g.kind == *kind && g.model == *model) {
            Some(g) => g.count += 1,
            None => groups.push(DeviceGroup { kind: *kind, model: model.clone(), count: 1 }),
        }
    }
    groups
}
