//! One model of device time (docs/model.md): per device, the window it is measured in
//! and every instant of that window named with exactly one [`Part`].
//!
//! Each op a device ran is one of: compute, a collective, a copy (host→device,
//! device→host, device→device) or an async wait (a `*-done` op waiting for an async
//! copy). Where ops of several kinds overlap (streams, async work), the instant is
//! named by the first kind in this order: compute, collective, copy, async wait — so
//! a collective or a copy under compute is overlapped, not counted twice. Time with
//! no op running is runtime overhead when the device was inside a program (XLA:CPU:
//! the executor between ops of one `run_id`), compile when the device's host was
//! compiling, a host copy when an XLA:CPU host was copying on its threads, and idle
//! otherwise. The parts of a device add up to its window exactly, and busy (the union
//! of its op intervals) is the sum of its op parts, on every backend.
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
//! Computed once per profile, after the steps (stage 3 of [`crate::cache`]). The
//! summary's breakdown, the devices rows, the collectives' totals, the advise rules
//! and every surface built on them read it, so they cannot disagree.

use rayon::prelude::*;
use serde::Serialize;
use stepscope_xspace::Line;

use crate::cache::{FastMap, OpRec, TimeBase};
use crate::profile::{Device, OpSource, Profile};
use crate::stats::{sum_ps, Intervals};
use crate::steps::{StepSource, Steps};

/// What an instant of a device's window was spent on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Part {
    /// An op other than a collective, a copy or an async wait ran.
    Compute,
    /// A collective ran (all-reduce, all-gather, …, send/recv), and no compute.
    Collective,
    /// A host-to-device copy ran, and nothing above.
    HostToDevice,
    /// A device-to-host copy ran, and nothing above.
    DeviceToHost,
    /// A copy within the device or between devices (`MemcpyD2D`, `copyBuffer`).
    DeviceToDevice,
    /// A `*-done` op waited for async work other than a collective (`copy-done`).
    AsyncWait,
    /// Inside a program with no op running: the runtime between ops (XLA:CPU).
    RuntimeOverhead,
    /// Nothing ran while the host compiled.
    Compile,
    /// Nothing ran while an XLA:CPU host copied to its device on host threads
    /// (`H2D Dispatch`, `DevicePut…`).
    HostCopyToDevice,
    /// Likewise from its device (`D2H…`).
    HostCopyToHost,
    /// Nothing ran, and the host did none of the above.
    Idle,
}

impl Part {
    /// Every part, in the order an instant is named by.
    pub const ALL: [Part; 11] = [
        Part::Compute,
        Part::Collective,
        Part::HostToDevice,
        Part::DeviceToHost,
        Part::DeviceToDevice,
        Part::AsyncWait,
        Part::RuntimeOverhead,
        Part::Compile,
        Part::HostCopyToDevice,
        Part::HostCopyToHost,
        Part::Idle,
    ];
    /// The parts in which an op ran: the first six.
    pub const OPS: &'static [Part] = Self::ALL.split_at(6).0;

    /// Its place in [`Part::ALL`].
    pub(crate) fn index(self) -> usize {
        self as usize
    }
}

/// What an op's time is, from its name, its `hlo_category` and its line's name where
/// the line holds one kind only ([`one_kind`]): one of [`Part::OPS`].
pub fn op_kind(name: &str, category: &str, line: &str) -> Part {
    let hay = [name, category, line];
    let has = |pat: &str| hay.iter().any(|s| s.contains(pat));
    // CUPTI names copies `MemcpyH2D`, ROCm's tracer `CopyHostToDevice`.
    if has("H2D") || has("HtoD") || has("HostToDevice") || has("host-to-device") {
        Part::HostToDevice
    } else if has("D2H") || has("DtoH") || has("DeviceToHost") || has("device-to-host") {
        Part::DeviceToHost
    } else if has("D2D")
        || has("DtoD")
        || has("P2P")
        || has("PtoP")
        || has("DeviceToDevice")
        || has("device-to-device")
        || has("MemcpyOther")
        || is_copy_kernel(name)
    {
        // `MemcpyOther` streams hold copies of no one direction (peer, unknown).
        Part::DeviceToDevice
    } else if is_collective(name) || is_collective(category) || is_send_recv(name) {
        Part::Collective
    } else if is_async_wait(name) || is_async_wait(category) {
        Part::AsyncWait
    } else {
        Part::Compute
    }
}

/// True for XLA collective op names and categories (`all-reduce.3`, `all-gather-start`, …).
pub fn is_collective(s: &str) -> bool {
    let s = s.to_ascii_lowercase();
    ["all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute", "allreduce", "nccl", "rccl"]
        .iter()
        .any(|p| s.contains(p))
}

/// HLO point-to-point transfers: `send.1`, `recv-done.2`.
fn is_send_recv(name: &str) -> bool {
    let base = name.split('.').next().unwrap_or(name);
    matches!(base, "send" | "recv" | "send-done" | "recv-done")
}

/// Runtime copy kernels that move memory rather than compute (`__amd_rocclr_copyBuffer`,
/// CUDA's `memcpy` kernels).
fn is_copy_kernel(name: &str) -> bool {
    name.contains("copyBuffer")
        || name.contains("copyImage")
        || name.starts_with("Memcpy")
        || name.starts_with("memcpy")
}

/// The start or the wait of async work (`copy-start.3`, `copy-done`, `async-done`),
/// named by HLO's `-start`/`-done` suffixes.
fn is_async_wait(s: &str) -> bool {
    let base = s.split('.').next().unwrap_or(s);
    base.ends_with("-done") || base.ends_with("-start")
}

/// A stream line's name where it says what all its events are (`Stream #15(MemcpyH2D)`),
/// else "". A GPU stream lists every kind of work seen on it: on
/// `Stream #14(MemcpyH2D,Memset,Compute,MemcpyD2D,MemcpyOther)` (tests/fixtures/gpu-compile)
/// most events are kernels, each classified by its own name instead.
fn one_kind(line: &str) -> &str {
    match line.split_once('(') {
        Some((_, kinds)) if kinds.contains(',') => "",
        _ => line,
    }
}

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

/// One device's time.
pub struct DeviceTimeline {
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
        crate::collectives::pct(self.busy_ps, self.window_ps())
    }
}

/// The device-time model of a profile: one timeline per device, as
/// [`Profile::devices`].
pub struct DeviceTime {
    pub devices: Vec<DeviceTimeline>,
}

impl DeviceTime {
    /// The devices that have a window to be measured in.
    pub fn with_window(&self) -> impl Iterator<Item = &DeviceTimeline> {
        self.devices.iter().filter(|t| t.window_ps() > 0)
    }

    /// The run's utilisation: the mean over devices with a window of their busy share.
    pub fn utilization_pct(&self) -> f64 {
        let (sum, n) = self.with_window().fold((0.0, 0usize), |(s, n), t| (s + t.utilization_pct(), n + 1));
        if n == 0 {
            0.0
        } else {
            sum / n as f64
        }
    }
}

/// The device-time model of `profile` (computed once: see [`Profile::prepare`]).
pub fn device_time(profile: &Profile) -> &DeviceTime {
    profile.device_time()
}

/// Stage 3 of the shared work ([`crate::cache`]): every device's timeline.
pub(crate) fn build(devices: &[Device], base: &TimeBase) -> DeviceTime {
    let devices = devices
        .par_iter()
        .map(|d| {
            let (busy, host) = (&base.busy[d.index], base.hosts.get(d.host_index));
            timeline(
                &base.kinds[d.index],
                window(d, &base.steps, busy),
                busy,
                &base.active[d.index],
                host.map(|h| [&h.compile, &h.to_device, &h.to_host]),
                base.launched[d.index].as_ref(),
            )
        })
        .collect();
    DeviceTime { devices }
}

/// One device's ops by kind, from stage 2's pass over its ops.
pub(crate) struct OpKinds {
    /// The kind of each op record (as [`crate::cache::DeviceOps::recs`]): one of [`Part::OPS`].
    pub of_op: Vec<Part>,
    /// Per op part ([`Part::OPS`]): the time ops of that kind ran (whole capture);
    /// empty for compute when every op is compute (its time is then the busy time).
    spans: Vec<Intervals>,
}

impl OpKinds {
    /// The time compute ran, given the device's busy time.
    fn compute<'a>(&'a self, busy: &'a Intervals) -> &'a Intervals {
        match self.spans[1..].iter().all(|s| s.spans().is_empty()) {
            true => busy,
            false => &self.spans[Part::Compute.index()],
        }
    }
}

/// The time device `d` ran compute ops (whole capture): what ran under its
/// collectives.
pub(crate) fn compute_ops<'a>(profile: &'a Profile, d: &Device) -> &'a Intervals {
    let base = profile.time_base();
    base.kinds[d.index].compute(&base.busy[d.index])
}

/// What one pass over a device's ops measures (stage 2, [`measure_ops`]).
pub(crate) struct OpTime {
    /// The union of its op intervals.
    pub busy: Intervals,
    /// Busy, or inside a program (XLA:CPU: first op to last op of a `run_id`).
    pub active: Intervals,
    pub kinds: OpKinds,
}

/// Stage 2's pass over device `d`'s ops: its busy and active time, and each op's
/// kind, read once per op. Ops come in line order, then mostly in time order: each
/// piece of them is merged on its own (back-to-back ones as they come), in parallel,
/// and the pieces are joined after.
pub(crate) fn measure_ops(d: &Device) -> OpTime {
    let ops = d.cached_ops();
    let mut of_op = vec![Part::Compute; ops.recs.len()];
    let pieces: Vec<Piece> =
        (of_op.par_chunks_mut(OP_PIECE).enumerate()).map(|(k, kinds)| measure_piece(d, k * OP_PIECE, kinds)).collect();
    let mixed = pieces.iter().any(|p| p.other.iter().any(|s| !s.is_empty()));
    let mut runs: FastMap<i64, (i64, i64)> = FastMap::default();
    for p in &pieces {
        for (&run, &span) in &p.runs {
            crate::steps::widen(&mut runs, run, span);
        }
    }
    let ((busy, compute), (others, loose)) = rayon::join(
        || {
            rayon::join(
                || union_of(pieces.iter().map(|p| &p.busy)),
                // Compute's own time, where other kinds ran too (XLA:CPU ops, nearly
                // always all compute, are read again for it).
                || match (mixed, d.source) {
                    (false, _) => Intervals::default(),
                    (true, OpSource::HostOps) => compute_spans(d, &of_op),
                    (true, _) => union_of(pieces.iter().map(|p| &p.compute)),
                },
            )
        },
        || {
            let others: Vec<Intervals> =
                (0..Part::OPS.len() - 1).map(|k| union_of(pieces.iter().map(|p| &p.other[k]))).collect();
            (others, union_of(pieces.iter().map(|p| &p.loose)))
        },
    );
    // An op of a program lies within its program's span: active is the programs' spans
    // and the ops outside any.
    let active = match runs.is_empty() {
        true => busy.clone(),
        false => Intervals::union(&[&Intervals::new(runs.into_values().collect()), &loose]),
    };
    let spans = std::iter::once(compute).chain(others).collect();
    OpTime { busy, active, kinds: OpKinds { of_op, spans } }
}

/// What lies between a device's ops and their host launches.
pub(crate) struct Launched {
    /// The time some op had been launched (its launch call had returned) and had not
    /// started: the union of the spans from each launch call's end to its op's start.
    queued: Intervals,
    /// The time the host was inside the launch call of an op that had not started.
    launching: Intervals,
}

/// The spans between device `d`'s ops and their launches (each linked to its host's
/// launch in `launches` by `correlation_id`). `None` where nothing links them.
pub(crate) fn launched(d: &Device, launches: &crate::steps::Launches) -> Option<Launched> {
    let ops = d.cached_ops();
    if !ops.has_correlation_ids() || launches.is_empty() {
        return None;
    }
    // Per piece, in op order: the ops of a line, and those of one graph launch, come
    // together, so their spans mostly merge as they come.
    let waits: Vec<(Spans, Spans)> = crate::cache::pieces(ops.recs.len(), OP_PIECE)
        .collect::<Vec<_>>()
        .into_par_iter()
        .map(|range| {
            let (mut queued, mut launching) = (Spans::default(), Spans::default());
            for r in &ops.recs[range] {
                let Some((call, returned)) = ops.correlation_id(r).and_then(|c| launches.get(c)) else { continue };
                let start = d.plane.lines[r.line as usize].start_ps(r.index as usize);
                // Queued from the moment the launch call returned (HTA's launch delay
                // starts there too): before that, the host was still launching.
                if returned < start {
                    queued.push(returned, start);
                }
                if call < start {
                    launching.push(call, returned.min(start));
                }
            }
            (queued, launching)
        })
        .collect();
    Some(Launched { queued: union_of(waits.iter().map(|w| &w.0)), launching: union_of(waits.iter().map(|w| &w.1)) })
}

/// Op records read as one piece by [`measure_ops`] (debug builds cut the fixtures'
/// too, so the joining of pieces is checked by every test).
const OP_PIECE: usize = if cfg!(debug_assertions) { 1 << 8 } else { 1 << 16 };

/// One piece of [`measure_ops`].
struct Piece {
    /// Its ops' spans.
    busy: Spans,
    /// The spans of its ops without a `run_id`.
    loose: Spans,
    /// Per `run_id`: first start to last end.
    runs: FastMap<i64, (i64, i64)>,
    /// The spans of its compute ops (devices other than XLA:CPU).
    compute: Spans,
    /// The spans of the ops of each op part after compute.
    other: [Spans; 5],
}

/// Measures the ops from `first` on, one for each of `kinds`, which it fills.
fn measure_piece(d: &Device, first: usize, kinds: &mut [Part]) -> Piece {
    let ops = d.cached_ops();
    let mut p = Piece {
        busy: Spans { spans: Vec::with_capacity(kinds.len()), cuts: Vec::new() },
        loose: Spans::default(),
        runs: FastMap::default(),
        compute: Spans::default(),
        other: Default::default(),
    };
    let track_compute = d.source != OpSource::HostOps;
    let mut classify = Classifier::new(d);
    // The run being read (a run's ops mostly come together): (run, first start, last end).
    let mut current: Option<(i64, i64, i64)> = None;
    for (r, kind) in ops.recs[first..first + kinds.len()].iter().zip(kinds) {
        let line = &d.plane.lines[r.line as usize];
        let start = line.start_ps(r.index as usize);
        let end = start.saturating_add(line.duration_ps(r.index as usize).max(0));
        p.busy.push(start, end);
        *kind = classify.kind(r, line);
        match *kind {
            Part::Compute if track_compute => p.compute.push(start, end),
            Part::Compute => {}
            k => p.other[k.index() - 1].push(start, end),
        }
        match (ops.run_id(r), &mut current) {
            (Some(run), Some((cr, lo, hi))) if *cr == run => {
                *lo = (*lo).min(start);
                *hi = (*hi).max(end);
            }
            (Some(run), _) => {
                if let Some((done, lo, hi)) = current.replace((run, start, end)) {
                    crate::steps::widen(&mut p.runs, done, (lo, hi));
                }
            }
            (None, _) => p.loose.push(start, end),
        }
    }
    if let Some((done, lo, hi)) = current {
        crate::steps::widen(&mut p.runs, done, (lo, hi));
    }
    p
}

/// Spans of ops in op order, back-to-back ones merged as they come (so the lists stay
/// short), and where they go back in time (a new line) noted: runs sorted by start,
/// for [`Intervals::from_sorted_runs`].
#[derive(Default)]
struct Spans {
    spans: Vec<(i64, i64)>,
    /// Where each run after the first starts.
    cuts: Vec<usize>,
}

impl Spans {
    fn push(&mut self, start: i64, end: i64) {
        match self.spans.last_mut() {
            Some(last) if (last.0..=last.1).contains(&start) => last.1 = last.1.max(end),
            Some(last) if start < last.0 => {
                self.cuts.push(self.spans.len());
                self.spans.push((start, end));
            }
            _ => self.spans.push((start, end)),
        }
    }

    fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    /// The runs, each sorted by start.
    fn runs(&self) -> impl Iterator<Item = &[(i64, i64)]> {
        let mut from = 0;
        self.cuts.iter().copied().chain([self.spans.len()]).map(move |to| {
            let run = &self.spans[from..to];
            from = to;
            run
        })
    }
}

/// The union of lists of spans.
fn union_of<'a>(lists: impl Iterator<Item = &'a Spans>) -> Intervals {
    let runs: Vec<&[(i64, i64)]> = lists.flat_map(Spans::runs).collect();
    Intervals::from_sorted_runs(&runs)
}

/// The time device `d`'s compute ops ran, from each op's kind.
fn compute_spans(d: &Device, of_op: &[Part]) -> Intervals {
    let ops = d.cached_ops();
    let pieces: Vec<Spans> = crate::cache::pieces(ops.recs.len(), OP_PIECE)
        .collect::<Vec<_>>()
        .into_par_iter()
        .map(|range| {
            let mut spans = Spans::default();
            for i in range.filter(|&i| of_op[i] == Part::Compute) {
                let (_, start, end, _) = ops.span(d.plane, i);
                spans.push(start, end);
            }
            spans
        })
        .collect();
    union_of(pieces.iter())
}

/// The window of device `d`, whose ops ran in `busy` (see the module docs).
fn window(d: &Device, steps: &Steps, busy: &Intervals) -> (WindowSource, Vec<(i64, i64)>) {
    let spans = |s: Vec<(i64, i64)>| Intervals::new(s).spans().to_vec();
    match steps.source {
        StepSource::Annotation => {
            let mine: Vec<(i64, i64)> =
                steps.steps.iter().filter(|s| s.host == d.host).map(|s| (s.start_ps, s.end_ps())).collect();
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
            let module = steps.steps.iter().find(|s| s.host == d.host).map(|s| s.name.as_str());
            if let (Some(module), Some(line)) = (module, d.plane.line("XLA Modules").filter(|l| !l.is_empty())) {
                let own: Vec<(i64, i64)> = (0..line.len())
                    .filter(|&i| crate::steps::module_name(d.plane.event_name(line.meta(i))) == module)
                    .map(|i| (line.start_ps(i), line.end_ps(i)))
                    .collect();
                if !own.is_empty() {
                    return (WindowSource::OwnSteps, spans(own));
                }
            } else if let (Some(module), OpSource::HostOps) = (module, d.source) {
                // XLA:CPU: this device's own runs of the step module.
                let names = &d.cached_ops().names;
                let own = crate::steps::module_runs(d, |m| &*names[m as usize] == module);
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

/// One device's timeline in `window`, from its ops by kind, its busy and active time,
/// its host's compile time and host copies (to the device, to the host), and the spans
/// between its ops and their launches.
///
/// Each part is the time of its set in the window that no set before it covers. The
/// sets that can be as large as the ops are measured without being copied: compute
/// (or busy, when every op is compute) by its overlap with the window's spans, and
/// runtime overhead as active time beyond busy (busy lies within active). The other
/// sets (the other op kinds, compile, host copies) are mostly short: each is cut to the
/// window, less the sets before it.
fn timeline(
    k: &OpKinds,
    (window_source, window): (WindowSource, Vec<(i64, i64)>),
    busy: &Intervals,
    active: &Intervals,
    host: Option<[&Intervals; 3]>,
    launched: Option<&Launched>,
) -> DeviceTimeline {
    let in_window = |set: &Intervals| {
        let mut at = set.cursor();
        sum_ps(window.iter().map(|&(lo, hi)| at.overlap(lo, hi)))
    };
    let mut parts_ps = [0i64; Part::ALL.len()];
    let compute = k.compute(busy);
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
    // Then compiling, copying on the host: each what is left of its set.
    named.clear();
    let host_parts = [Part::Compile, Part::HostCopyToDevice, Part::HostCopyToHost];
    for (part_of, set) in host_parts.into_iter().zip(host.into_iter().flatten()) {
        let part = named.iter().fold(set.within(&window).minus(active), |part, before| part.minus(before));
        parts_ps[part_of.index()] = part.total();
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
    DeviceTimeline { window_source, window, parts_ps, busy_ps, collective_ops, idle_queued_ps, idle_launching_ps }
}

/// The kind of each op of a device ([`op_kind`] of its name, its category and its
/// line, or of its kernel's own name), remembered per what decides it.
struct Classifier<'d> {
    d: &'d Device<'d>,
    look: stepscope_xspace::StatLookup<1>,
    /// XLA:CPU ops (host events on the host's threads): the op's name alone says what
    /// it is (a thread's name says nothing of the work on it, and the event is the op):
    /// per name id.
    by_name: Vec<Part>,
    /// An op whose event holds no category of its own takes its metadata's, so (name
    /// id, line, metadata) decide it.
    by_meta: FastMap<(u32, u32, u32), Part>,
    /// Per name id, the last such key and kind (ops come line by line, so nearly always
    /// the key of the name's next op too).
    last: Vec<Option<(u32, u32, Part)>>,
    /// An op with a category of its own: remembered by its text.
    by_text: FastMap<(u32, usize, usize, u32, u32), Part>,
}

impl<'d> Classifier<'d> {
    fn new(d: &'d Device<'d>) -> Classifier<'d> {
        let names = &d.cached_ops().names;
        let by_name = match d.source {
            OpSource::HostOps => names.iter().map(|n| op_kind(n, "", "")).collect(),
            _ => Vec::new(),
        };
        Classifier {
            d,
            look: d.plane.stat_lookup([d.keys.hlo_category]),
            by_name,
            by_meta: FastMap::default(),
            last: vec![None; if d.source == OpSource::HostOps { 0 } else { names.len() }],
            by_text: FastMap::default(),
        }
    }

    fn kind(&mut self, r: &OpRec, line: &Line) -> Part {
        if let Some(&k) = self.by_name.get(r.name as usize) {
            return k;
        }
        let (d, ops) = (self.d, self.d.cached_ops());
        let meta = line.meta(r.index as usize);
        let kind_of = |category: &str| {
            match op_kind(&ops.names[r.name as usize], category, one_kind(&line.name)) {
                // A kernel credited to its op keeps what its own name says it is.
                Part::Compute => op_kind(d.plane.event_name(meta), "", ""),
                k => k,
            }
        };
        if let Some([Some(own)]) = d.plane.own_stats_of(&self.look, line, r.index as usize) {
            let category = d.plane.stat_str(&own).unwrap_or("");
            let key = (r.name, category.as_ptr() as usize, category.len(), r.line, meta);
            return *self.by_text.entry(key).or_insert_with(|| kind_of(category));
        }
        match self.last[r.name as usize] {
            Some((l, m, k)) if (l, m) == (r.line, meta) => k,
            _ => {
                let look = &self.look;
                let k = *self.by_meta.entry((r.name, r.line, meta)).or_insert_with(|| {
                    let [category] = d.plane.stats_of(look, line, r.index as usize);
                    kind_of(category.and_then(|s| d.plane.stat_str(&s)).unwrap_or(""))
                });
                self.last[r.name as usize] = Some((r.line, meta, k));
                k
            }
        }
    }
}

/// The names of host-side transfers of a host whose XLA device is its CPU (XLA:CPU
/// copies on host threads: `H2D Dispatch`, `DevicePut…`; `D2H…`).
pub(crate) fn host_transfer_kind(name: &str) -> Option<Part> {
    if name.starts_with("H2D") || name.contains("DevicePut") || name.starts_with("TransferToDevice") {
        Some(Part::HostToDevice)
    } else if name.starts_with("D2H") || name.starts_with("TransferFromDevice") {
        Some(Part::DeviceToHost)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::{one_kind, op_kind, Part};

    #[test]
    fn ops_are_named_by_what_they_do() {
        assert_eq!(one_kind("Stream #15(MemcpyH2D)"), "Stream #15(MemcpyH2D)");
        assert_eq!(one_kind("Stream #14(MemcpyH2D,Memset,Compute,MemcpyD2D,MemcpyOther)"), "");
        assert_eq!(op_kind("fusion.3", "", one_kind("Stream #15(MemcpyH2D)")), Part::HostToDevice);
        assert_eq!(op_kind("fusion.3", "", one_kind("Stream #14(MemcpyH2D,Compute)")), Part::Compute);
        assert_eq!(op_kind("__amd_rocclr_copyBuffer.kd", "", ""), Part::DeviceToDevice);
        assert_eq!(op_kind("MemcpyD2D", "", ""), Part::DeviceToDevice);
        // ROCm's tracer names copies in words, on `MemcpyOther` streams.
        assert_eq!(op_kind("CopyDeviceToDevice", "", one_kind("Stream #8(MemcpyOther)")), Part::DeviceToDevice);
        assert_eq!(op_kind("CopyHostToDevice", "", ""), Part::HostToDevice);
        assert_eq!(op_kind("CopyDeviceToHost", "", ""), Part::DeviceToHost);
        assert_eq!(op_kind("fusion.1", "", one_kind("Stream #8(MemcpyOther)")), Part::DeviceToDevice);
        assert_eq!(op_kind("all-reduce.1", "all-reduce", ""), Part::Collective);
        assert_eq!(op_kind("all-gather-done", "", ""), Part::Collective);
        assert_eq!(op_kind("recv-done.2", "", ""), Part::Collective);
        assert_eq!(op_kind("copy-done.2", "copy-done", ""), Part::AsyncWait);
        assert_eq!(op_kind("copy-start", "copy-start", ""), Part::AsyncWait);
        assert_eq!(op_kind("copy.1", "copy", ""), Part::Compute, "an HLO copy is a kernel computing a layout");
        assert_eq!(op_kind("broadcast_add_fusion", "loop fusion", ""), Part::Compute);
        assert_eq!(op_kind("sender_fusion", "", ""), Part::Compute);
    }
}
