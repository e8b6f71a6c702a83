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
use crate::profile::{host_cpu_plane, Device, OpSource, Profile};
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

    fn index(self) -> usize {
        self as usize
    }
}

/// What an op's time is, from its name, its `hlo_category` and its line's name where
/// the line holds one kind only ([`one_kind`]): one of [`Part::OPS`].
pub fn op_kind(name: &str, category: &str, line: &str) -> Part {
    let hay = [name, category, line];
    let has = |pat: &str| hay.iter().any(|s| s.contains(pat));
    if has("H2D") || has("HtoD") || has("host-to-device") {
        Part::HostToDevice
    } else if has("D2H") || has("DtoH") || has("device-to-host") {
        Part::DeviceToHost
    } else if has("D2D") || has("DtoD") || has("P2P") || has("PtoP") || has("device-to-device") || is_copy_kernel(name)
    {
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
    /// Per [`Part`] but idle (in [`Part::ALL`] order): the instants of the window it
    /// names. Idle is the rest of the window: [`DeviceTimeline::part_ps`] gives its length.
    pub parts: Vec<Intervals>,
    /// The window's time no other part names.
    pub idle_ps: i64,
    /// The length of the union of the device's op intervals within the window (the sum
    /// of the op parts).
    pub busy_ps: i64,
    /// Every collective op's span within the window (under compute or not).
    pub collective_ops: Intervals,
}

impl DeviceTimeline {
    /// The window's length.
    pub fn window_ps(&self) -> i64 {
        sum_ps(self.window.iter().map(|(a, b)| b.saturating_sub(*a)))
    }

    /// The time `part` names in the window.
    pub fn part_ps(&self, part: Part) -> i64 {
        match part {
            Part::Idle => self.idle_ps,
            _ => self.parts[part.index()].total(),
        }
    }

    /// The intervals `part` names (none for [`Part::Idle`]: the window's gaps).
    pub fn part(&self, part: Part) -> &Intervals {
        const NONE: &Intervals = &Intervals::EMPTY;
        self.parts.get(part.index()).unwrap_or(NONE)
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
pub(crate) fn build(profile: &Profile, devices: &[Device], base: &TimeBase, kinds: &[OpKinds]) -> DeviceTime {
    let (steps, compile) = (&base.steps, &base.compile);
    // XLA:CPU hosts copy on host threads while the device (the CPU) is otherwise idle.
    let host_copies: Vec<Option<(Intervals, Intervals)>> = (0..profile.hosts.len())
        .into_par_iter()
        .map(|hi| {
            let cpu = devices.iter().any(|d| d.host_index == hi && d.source == OpSource::HostOps);
            cpu.then(|| host_transfers(profile, hi))
        })
        .collect();
    let devices = (devices.par_iter().zip(kinds))
        .map(|(d, k)| {
            let busy = &base.busy[d.index];
            timeline(
                k,
                window(d, steps, busy),
                busy,
                &base.active[d.index],
                compile.get(d.host_index),
                host_copies[d.host_index].as_ref(),
            )
        })
        .collect();
    DeviceTime { devices }
}

/// A device's ops by kind: the time the ops of each op part ran (whole capture).
pub(crate) struct OpKinds {
    /// Per op part ([`Part::OPS`]); empty for compute when `only_compute`.
    kinds: Vec<Intervals>,
    /// Every op is compute: its time is the device's busy time.
    only_compute: bool,
}

/// Stage 2b of the shared work ([`crate::cache`]): every device's ops by kind. Needs
/// only the devices, so it is computed beside stage 2.
pub(crate) fn op_kinds(devices: &[Device]) -> Vec<OpKinds> {
    devices.par_iter().map(kinds_of).collect()
}

fn kinds_of(d: &Device) -> OpKinds {
    let ops = d.cached_ops();
    let pieces: Vec<[Vec<(i64, i64)>; 6]> = (0..ops.recs.len().div_ceil(CLASS_PIECE))
        .into_par_iter()
        .map(|k| classify(d, k * CLASS_PIECE..ops.recs.len().min((k + 1) * CLASS_PIECE)))
        .collect();
    let only_compute = pieces.iter().all(|p| p[1..].iter().all(Vec::is_empty));
    let kinds = (0..Part::OPS.len())
        .into_par_iter()
        .map(|k| match k {
            0 if only_compute => Intervals::default(),
            _ => Intervals::new(pieces.iter().flat_map(|p| p[k].iter().copied()).collect()),
        })
        .collect();
    OpKinds { kinds, only_compute }
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

/// Ops classified per piece of this many, pieces in parallel.
const CLASS_PIECE: usize = if cfg!(debug_assertions) { 1 << 10 } else { 1 << 16 };

/// One device's timeline in `window`, from its ops by kind, its busy and active time,
/// its host's compile time and host copies.
fn timeline(
    k: &OpKinds,
    (window_source, window): (WindowSource, Vec<(i64, i64)>),
    busy: &Intervals,
    active: &Intervals,
    compile: Option<&Intervals>,
    host_copies: Option<&(Intervals, Intervals)>,
) -> DeviceTimeline {
    let kinds: Vec<Intervals> = (k.kinds.iter().enumerate())
        .map(|(i, kind)| match i {
            // Every op is compute: its time is the busy time, already merged.
            0 if k.only_compute => busy.within(&window),
            _ => kind.within(&window),
        })
        .collect();
    let collective_ops = kinds[Part::Collective.index()].clone();
    // After the op parts, the time no op ran: inside a program (active time beyond
    // busy: XLA:CPU), compiling, copying on the host. Each part is its set's time in
    // the window that no part before it named; idle is the rest of the window.
    let (h2d, d2h) = host_copies.map_or((None, None), |(h2d, d2h)| (Some(h2d), Some(d2h)));
    let rest = [Some(active), compile, h2d, d2h].map(|of| of.map_or_else(Intervals::default, |of| of.within(&window)));
    let mut parts: Vec<Intervals> = Vec::with_capacity(Part::ALL.len() - 1);
    for set in kinds.into_iter().chain(rest) {
        let part = (parts.iter().filter(|p| !p.spans().is_empty())).fold(set, |part, before| {
            if part.spans().is_empty() {
                part
            } else {
                part.minus(before)
            }
        });
        parts.push(part);
    }
    let busy_ps = sum_ps(parts[..Part::OPS.len()].iter().map(Intervals::total));
    let named_ps = sum_ps(parts.iter().map(Intervals::total));
    let idle_ps = sum_ps(window.iter().map(|(a, b)| b.saturating_sub(*a))).saturating_sub(named_ps).max(0);
    DeviceTimeline { window_source, window, parts, idle_ps, busy_ps, collective_ops }
}

/// The spans of the ops `range` of `d` by op part ([`Part::OPS`]), in op order.
fn classify(d: &Device, range: std::ops::Range<usize>) -> [Vec<(i64, i64)>; 6] {
    let mut by_kind: [Vec<(i64, i64)>; 6] = Default::default();
    let ops = d.cached_ops();
    let look = d.plane.stat_lookup([d.keys.hlo_category]);
    let category = |r: &OpRec, line: &Line| {
        let [category] = d.plane.stats_of(&look, line, r.index as usize);
        category.and_then(|s| d.plane.stat_str(&s)).unwrap_or("")
    };
    let kind_of = |r: &OpRec, line: &Line, meta: u32, category: &str| {
        let by_name = op_kind(&ops.names[r.name as usize], category, one_kind(&line.name));
        match by_name {
            // A kernel credited to its op keeps what its own name says it is.
            Part::Compute => op_kind(d.plane.event_name(meta), "", ""),
            k => k,
        }
    };
    // The kind depends only on (name id, category text, line, event metadata). An op
    // whose event holds no category of its own takes its metadata's, so (name id,
    // line, metadata) decide it: remembered by that, and per name id the last such
    // key (ops come line by line, so nearly always the key of the name's next op
    // too). An op with a category of its own is remembered by its text.
    let mut by_meta: FastMap<(u32, u32, u32), Part> = FastMap::default();
    let mut last: Vec<Option<(u32, u32, Part)>> = vec![None; ops.names.len()];
    let mut by_text: FastMap<(u32, usize, usize, u32, u32), Part> = FastMap::default();
    for (i, r) in ops.recs[range.clone()].iter().enumerate().map(|(k, r)| (range.start + k, r)) {
        let line = &d.plane.lines[r.line as usize];
        let meta = line.meta(r.index as usize);
        let own = d.keys.hlo_category.and_then(|k| line.event_stats(r.index as usize).find(|s| s.meta() == k));
        let kind = if let Some(own) = own {
            let category = d.plane.stat_str(&own).unwrap_or("");
            let key = (r.name, category.as_ptr() as usize, category.len(), r.line, meta);
            *by_text.entry(key).or_insert_with(|| kind_of(r, line, meta, category))
        } else {
            match last[r.name as usize] {
                Some((l, m, k)) if (l, m) == (r.line, meta) => k,
                _ => {
                    let key = (r.name, r.line, meta);
                    let k = *by_meta.entry(key).or_insert_with(|| kind_of(r, line, meta, category(r, line)));
                    last[r.name as usize] = Some((r.line, meta, k));
                    k
                }
            }
        };
        let (_, start, end, _) = ops.span(d.plane, i);
        let spans = &mut by_kind[kind.index()];
        // Back-to-back ops of a kind merge as they come, so the lists stay short.
        match spans.last_mut() {
            Some(last) if (last.0..=last.1).contains(&start) => last.1 = last.1.max(end),
            _ => spans.push((start, end)),
        }
    }
    by_kind
}

/// Host-side transfers of a host whose XLA device is its CPU (XLA:CPU copies on
/// host threads: `H2D Dispatch`, `DevicePut…`; `D2H…`), as (to device, to host).
pub fn host_transfers(profile: &Profile, host_index: usize) -> (Intervals, Intervals) {
    let Some(plane) = profile.hosts.get(host_index).and_then(host_cpu_plane) else {
        return Default::default();
    };
    let kind: Vec<Option<Part>> = plane
        .event_meta
        .iter()
        .map(|m| {
            let n = plane.text(m.name);
            if n.starts_with("H2D") || n.contains("DevicePut") || n.starts_with("TransferToDevice") {
                Some(Part::HostToDevice)
            } else if n.starts_with("D2H") || n.starts_with("TransferFromDevice") {
                Some(Part::DeviceToHost)
            } else {
                None
            }
        })
        .collect();
    let (mut h2d, mut d2h) = (Vec::new(), Vec::new());
    let any: Vec<bool> = kind.iter().map(Option::is_some).collect();
    for line in &plane.lines {
        for i in line.events_with_meta(&any) {
            match kind[line.meta(i) as usize] {
                Some(Part::HostToDevice) => h2d.push((line.start_ps(i), line.end_ps(i))),
                Some(Part::DeviceToHost) => d2h.push((line.start_ps(i), line.end_ps(i))),
                _ => {}
            }
        }
    }
    (Intervals::new(h2d), Intervals::new(d2h))
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
