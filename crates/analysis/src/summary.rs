//! The overview: step time, where the average step went, utilisation, top ops and
//! the run's environment. Its JSON is the baseline format `check` compares against.

use rayon::prelude::*;
use serde::Serialize;
use stepscope_xspace::Line;

use crate::advise::{self, Finding, Thresholds};
use crate::cache::{FastMap, OpRec};
use crate::ops::{self, GroupBy, OpRow};
use crate::profile::{host_cpu_plane, Device, DeviceKind, OpSource, Profile};
use crate::stats::{sum_ps, Cursor, Distribution, Intervals};
use crate::steps::{self, StepSource};

/// What one average step spent its time on, ps. The parts add up to `step_ps`.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Breakdown {
    /// Mean step duration.
    pub step_ps: i64,
    /// Device running ops other than collectives and copies.
    pub device_compute_ps: i64,
    pub collectives_ps: i64,
    pub host_to_device_ps: i64,
    pub device_to_host_ps: i64,
    /// Device idle while the host compiled.
    pub compile_ps: i64,
    /// Device idle otherwise: waiting on the host (input, Python, dispatch).
    pub device_idle_ps: i64,
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
}

/// The overview of a run.
#[derive(Clone, Debug, Serialize)]
pub struct Summary {
    pub schema: &'static str,
    pub run: String,
    pub step_source: StepSource,
    pub step_count: u64,
    pub step_time: Distribution,
    pub breakdown: Breakdown,
    /// Device busy share of step time (mean over devices), percent.
    pub device_utilization_pct: f64,
    pub environment: Environment,
    pub top_ops: Vec<OpRow>,
    /// The most important findings of [`advise`](crate::advise::findings) (at most 3).
    pub findings: Vec<Finding>,
}

/// What kind of work an op is, for the breakdown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Class {
    Collective,
    HostToDevice,
    DeviceToHost,
}

fn class_of(name: &str, category: &str, line: &str) -> Option<Class> {
    let hay = [name, category, line];
    let has = |pat: &str| hay.iter().any(|s| s.contains(pat));
    if has("H2D") || has("HtoD") || has("host-to-device") {
        Some(Class::HostToDevice)
    } else if has("D2H") || has("DtoH") || has("device-to-host") {
        Some(Class::DeviceToHost)
    } else if is_collective(name) || is_collective(category) {
        Some(Class::Collective)
    } else {
        None
    }
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

/// True for XLA collective op names and categories (`all-reduce.3`, `all-gather-start`, …).
pub fn is_collective(s: &str) -> bool {
    let s = s.to_ascii_lowercase();
    ["all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute", "allreduce", "nccl", "rccl"]
        .iter()
        .any(|p| s.contains(p))
}

/// Per device: time in each class (busy time per step comes from [`steps::steps`]).
struct DeviceTime {
    host: String,
    classes: [Intervals; 3],
}

/// Ops classified per piece of this many, pieces in parallel.
const CLASS_PIECE: usize = if cfg!(debug_assertions) { 1 << 10 } else { 1 << 16 };

fn device_time(d: &Device) -> DeviceTime {
    let ops = d.cached_ops();
    let pieces: Vec<[Vec<(i64, i64)>; 3]> = (0..ops.recs.len().div_ceil(CLASS_PIECE))
        .into_par_iter()
        .map(|k| classify(d, k * CLASS_PIECE..ops.recs.len().min((k + 1) * CLASS_PIECE)))
        .collect();
    let mut classes: [Vec<(i64, i64)>; 3] = Default::default();
    for (k, class) in classes.iter_mut().enumerate() {
        *class = pieces.iter().flat_map(|p| p[k].iter().copied()).collect();
    }
    let [c, h, dh] = classes;
    DeviceTime { host: d.host.to_string(), classes: [Intervals::new(c), Intervals::new(h), Intervals::new(dh)] }
}

/// The spans of the ops `range` of `d` that are collectives, host-to-device copies
/// and device-to-host copies, in op order.
fn classify(d: &Device, range: std::ops::Range<usize>) -> [Vec<(i64, i64)>; 3] {
    let mut classes: [Vec<(i64, i64)>; 3] = Default::default();
    let ops = d.cached_ops();
    let look = d.plane.stat_lookup([d.keys.hlo_category]);
    let category = |r: &OpRec, line: &Line| {
        let [category] = d.plane.stats_of(&look, line, r.index as usize);
        category.and_then(|s| d.plane.stat_str(&s)).unwrap_or("")
    };
    let class = |r: &OpRec, line: &Line, meta: u32, category: &str| {
        class_of(&ops.names[r.name as usize], category, one_kind(&line.name))
            .or_else(|| class_of(d.plane.event_name(meta), "", ""))
    };
    // The class depends only on (name id, category text, line, event metadata). An op
    // whose event holds no category of its own takes its metadata's, so (name id,
    // line, metadata) decide it: remembered by that, and per name id the last such
    // key (ops come line by line, so nearly always the key of the name's next op
    // too). An op with a category of its own is remembered by its text.
    let mut by_meta: FastMap<(u32, u32, u32), Option<Class>> = FastMap::default();
    let mut last: Vec<Option<(u32, u32, Option<Class>)>> = vec![None; ops.names.len()];
    let mut by_text: FastMap<(u32, usize, usize, u32, u32), Option<Class>> = FastMap::default();
    for (i, r) in ops.recs[range.clone()].iter().enumerate().map(|(k, r)| (range.start + k, r)) {
        let line = &d.plane.lines[r.line as usize];
        let meta = line.meta(r.index as usize);
        let own = d.keys.hlo_category.and_then(|k| line.event_stats(r.index as usize).find(|s| s.meta() == k));
        let class = if let Some(own) = own {
            let category = d.plane.stat_str(&own).unwrap_or("");
            let key = (r.name, category.as_ptr() as usize, category.len(), r.line, meta);
            *by_text.entry(key).or_insert_with(|| class(r, line, meta, category))
        } else {
            match last[r.name as usize] {
                Some((l, m, c)) if (l, m) == (r.line, meta) => c,
                _ => {
                    let key = (r.name, r.line, meta);
                    let c = *by_meta.entry(key).or_insert_with(|| class(r, line, meta, category(r, line)));
                    last[r.name as usize] = Some((r.line, meta, c));
                    c
                }
            }
        };
        let at = match class {
            Some(Class::Collective) => 0,
            Some(Class::HostToDevice) => 1,
            Some(Class::DeviceToHost) => 2,
            None => continue,
        };
        let (_, start, end, _) = ops.span(d.plane, i);
        classes[at].push((start, end));
    }
    classes
}

/// Host-side transfers of a host whose XLA device is its CPU (XLA:CPU copies on
/// host threads: `H2D Dispatch`, `DevicePut…`; `D2H…`), as (to device, to host).
pub fn host_transfers(profile: &Profile, host_index: usize) -> (Intervals, Intervals) {
    let Some(plane) = profile.hosts.get(host_index).and_then(host_cpu_plane) else {
        return Default::default();
    };
    let kind: Vec<Option<Class>> = plane
        .event_meta
        .iter()
        .map(|m| {
            let n = plane.text(m.name);
            if n.starts_with("H2D") || n.contains("DevicePut") || n.starts_with("TransferToDevice") {
                Some(Class::HostToDevice)
            } else if n.starts_with("D2H") || n.starts_with("TransferFromDevice") {
                Some(Class::DeviceToHost)
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
                Some(Class::HostToDevice) => h2d.push((line.start_ps(i), line.end_ps(i))),
                Some(Class::DeviceToHost) => d2h.push((line.start_ps(i), line.end_ps(i))),
                _ => {}
            }
        }
    }
    (Intervals::new(h2d), Intervals::new(d2h))
}

/// Builds the overview with its top findings; `top` ops are listed.
pub fn summary(profile: &Profile, top: usize) -> Summary {
    let (mut s, inputs) = overview_and_inputs(profile, top);
    s.findings = advise::findings_with(profile, &s, &Thresholds::default(), &inputs);
    s.findings.truncate(3);
    s
}

/// The overview and what the rules read besides, side by side. The memory analysis
/// needs none of what [`warm`] builds: it runs meanwhile.
pub(crate) fn overview_and_inputs(profile: &Profile, top: usize) -> (Summary, advise::Inputs) {
    profile.prepare();
    let ((), memory) = rayon::join(|| warm(profile), || crate::memory::memory(profile, None, 3));
    rayon::join(|| overview(profile, top), || advise::Inputs::gather_with(profile, memory))
}

/// Builds what the overview and the rules share: the profile's shared work
/// ([`Profile::prepare`], asked for here when the caller has not) and the op profile.
/// Analyses run after this (even side by side) never wait on each other for them.
pub(crate) fn warm(profile: &Profile) {
    profile.prepare();
    ops::warm(profile);
}

/// The overview without findings (what the rules read).
pub fn overview(profile: &Profile, top: usize) -> Summary {
    warm(profile);
    let devices = profile.devices();
    let steps = steps::cached(profile);
    let (times, host_copies) = rayon::join(
        || devices.par_iter().map(device_time).collect::<Vec<_>>(),
        || {
            // XLA:CPU hosts copy on host threads while the device (the CPU) is otherwise idle.
            (0..profile.hosts.len())
                .into_par_iter()
                .map(|hi| {
                    let cpu = devices.iter().any(|d| d.host_index == hi && d.source == OpSource::HostOps);
                    cpu.then(|| host_transfers(profile, hi))
                })
                .collect::<Vec<Option<(Intervals, Intervals)>>>()
        },
    );
    let durations: Vec<i64> = steps.steps.iter().map(|s| s.duration_ps).collect();
    let step_time = Distribution::of(&durations);

    // Sum each part over steps (averaged over a step's devices), then divide by steps.
    let mut sum = Breakdown::default();
    // Steps come in time order: each query starts where the last one ended.
    let mut classes: Vec<[Cursor; 3]> = times.iter().map(|t| t.classes.each_ref().map(Intervals::cursor)).collect();
    for step in &steps.steps {
        let (lo, hi) = (step.start_ps, step.end_ps());
        let mut here: Vec<&mut [Cursor; 3]> =
            times.iter().zip(&mut classes).filter(|(t, _)| t.host == step.host).map(|(_, c)| c).collect();
        let n = here.len().max(1) as i64;
        let mut part = |class: usize| sum_ps(here.iter_mut().map(|c| c[class].overlap(lo, hi))) / n;
        let busy = step.device_busy_ps;
        let (coll, h2d, d2h) = (part(0), part(1), part(2));
        let idle = step.duration_ps.saturating_sub(busy).max(0);
        let compile = step.compile_ps.min(idle);
        let (mut host_h2d, mut host_d2h) = (0, 0);
        if let Some(Some((to_dev, to_host))) =
            profile.hosts.iter().position(|h| h.host == step.host).map(|hi| &host_copies[hi])
        {
            host_h2d = to_dev.overlap(lo, hi).min(idle - compile);
            host_d2h = to_host.overlap(lo, hi).min(idle - compile - host_h2d);
        }
        // Saturating: a damaged profile may hold durations near i64::MAX.
        let compute = busy.saturating_sub(coll).saturating_sub(h2d).saturating_sub(d2h).max(0);
        sum.step_ps = sum.step_ps.saturating_add(step.duration_ps);
        sum.collectives_ps = sum.collectives_ps.saturating_add(coll);
        sum.host_to_device_ps = sum.host_to_device_ps.saturating_add(h2d).saturating_add(host_h2d);
        sum.device_to_host_ps = sum.device_to_host_ps.saturating_add(d2h).saturating_add(host_d2h);
        sum.device_compute_ps = sum.device_compute_ps.saturating_add(compute);
        sum.compile_ps = sum.compile_ps.saturating_add(compile);
        sum.device_idle_ps = sum.device_idle_ps.saturating_add(idle - compile - host_h2d - host_d2h);
    }
    let n = steps.steps.len().max(1) as i64;
    let breakdown = Breakdown {
        step_ps: sum.step_ps / n,
        device_compute_ps: sum.device_compute_ps / n,
        collectives_ps: sum.collectives_ps / n,
        host_to_device_ps: sum.host_to_device_ps / n,
        device_to_host_ps: sum.device_to_host_ps / n,
        compile_ps: sum.compile_ps / n,
        device_idle_ps: sum.device_idle_ps / n,
    };
    let busy_total = sum_ps(steps.steps.iter().map(|s| s.device_busy_ps));
    let device_utilization_pct = if sum.step_ps > 0 { 100.0 * busy_total as f64 / sum.step_ps as f64 } else { 0.0 };
    let mut top_ops = ops::ops(profile, GroupBy::Op, 0).ops;
    top_ops.truncate(top);
    Summary {
        schema: "stepscope.summary/1",
        run: profile.run.clone(),
        step_source: steps.source,
        step_count: steps.steps.len() as u64,
        step_time,
        breakdown,
        device_utilization_pct,
        environment: environment(profile, &devices),
        top_ops,
        findings: Vec::new(),
    }
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
    Environment { hosts: profile.hosts.iter().map(|h| h.host.clone()).collect(), devices: groups, versions }
}

#[cfg(test)]
mod tests {
    use super::{class_of, one_kind, Class};

    #[test]
    fn a_stream_line_classifies_its_events_only_when_it_holds_one_kind() {
        assert_eq!(one_kind("Stream #15(MemcpyH2D)"), "Stream #15(MemcpyH2D)");
        assert_eq!(one_kind("Stream #14(MemcpyH2D,Memset,Compute,MemcpyD2D,MemcpyOther)"), "");
        assert_eq!(one_kind("XLA Ops"), "XLA Ops");
        assert_eq!(class_of("fusion.3", "", one_kind("Stream #15(MemcpyH2D)")), Some(Class::HostToDevice));
        assert_eq!(class_of("fusion.3", "", one_kind("Stream #14(MemcpyH2D,Compute)")), None);
    }
}
