//! The roofline: each device's roofs (peak FLOP/s, memory bandwidth, the ridge point
//! between them) and every op placed under them by its arithmetic intensity — the
//! op profile's rows by op that have FLOPs and bytes (see [`crate::cost`]).

use serde::Serialize;

use crate::ops::{self, GroupBy, OpRow};
use crate::peaks::{self, PeakSource};
use stepscope_model::programs::ProgramIds;
use stepscope_model::records::{stat_u64, FastMap, RecStats};
use stepscope_model::Profile;

/// One device's roofs.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Roofs {
    pub device: String,
    /// The headline peak: the user's, the plane's (TPU) or a known device's bf16
    /// matrix rate.
    pub peak_flops_per_s: Option<f64>,
    pub peak_bytes_per_s: Option<f64>,
    /// Where each peak was read: `user`, `profile` or `data_sheet`.
    pub peak_flops_source: Option<PeakSource>,
    pub peak_bytes_source: Option<PeakSource>,
    /// FLOPs per byte where the two roofs meet.
    pub ridge_flops_per_byte: Option<f64>,
    /// A known device's model (`H100 SXM`, `TPU v6e`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<&'static str>,
    /// A known GPU's model, whose per-type rates give each op its own roof.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpu_model: Option<&'static str>,
}

/// The roofline of a run.
#[derive(Clone, Debug, Serialize)]
pub struct Roofline {
    pub schema: &'static str,
    pub devices: Vec<Roofs>,
    /// Ops with an arithmetic intensity, by self time.
    pub ops: Vec<OpRow>,
}

/// The roofline of `profile`: devices with distinct roofs once each.
pub fn roofline(profile: &Profile) -> Roofline {
    assemble([roofs(profile)], ops::ops(profile, GroupBy::Op, 0))
}

/// The roofline of a run from its hosts' roofs ([`roofs`], hosts in order) and its op
/// profile by op.
pub fn assemble(hosts: impl IntoIterator<Item = Vec<Roofs>>, ops: ops::Ops) -> Roofline {
    let mut devices: Vec<Roofs> = Vec::new();
    for roofs in hosts.into_iter().flatten() {
        if !devices.iter().any(|r| same_roofs(r, &roofs)) {
            devices.push(roofs);
        }
    }
    let ops = ops.ops.into_iter().filter(|r| r.arithmetic_intensity.is_some()).collect();
    Roofline { schema: "stepscope.roofline/1", devices, ops }
}

impl Roofline {
    /// The roofline under the peaks `user` gave (as `--peak-flops` and
    /// `--peak-bandwidth` give them, over the profile's and the data sheets'), for a
    /// page that asks for roofs without reading the run again: each device's roofs
    /// take them, and where every device has one set of roofs (a CPU's, or devices of
    /// one model) each op is placed again under them. Ops of devices with several sets
    /// keep their places unless the user gave both peaks.
    pub fn with_user_peaks(mut self, user: peaks::UserPeaks) -> Roofline {
        if user.flops_per_s.is_none() && user.bytes_per_s.is_none() {
            return self;
        }
        for d in &mut self.devices {
            if let Some(f) = user.flops_per_s {
                (d.peak_flops_per_s, d.peak_flops_source) = (Some(f), Some(PeakSource::User));
            }
            if let Some(b) = user.bytes_per_s {
                (d.peak_bytes_per_s, d.peak_bytes_source) = (Some(b), Some(PeakSource::User));
            }
            d.ridge_flops_per_byte = d.peak_flops_per_s.zip(d.peak_bytes_per_s).map(|(f, b)| f / b);
        }
        let one = match self.devices.as_slice() {
            [d] => Some(peaks::UserPeaks { flops_per_s: d.peak_flops_per_s, bytes_per_s: d.peak_bytes_per_s }),
            _ if user.flops_per_s.is_some() && user.bytes_per_s.is_some() => Some(user),
            _ => None,
        };
        if let Some(p) = one {
            for r in &mut self.ops {
                let placed = ops::place(r.flops, r.bytes_accessed, r.flops_per_s, r.bytes_per_s, p);
                (r.bound, r.roof_flops_per_s, r.roof_pct) = (placed.bound, placed.roof, placed.roof_pct);
            }
        }
        self
    }
}

/// Whether two devices have the same roofs.
fn same_roofs(a: &Roofs, b: &Roofs) -> bool {
    a.peak_flops_per_s == b.peak_flops_per_s
        && a.peak_bytes_per_s == b.peak_bytes_per_s
        && a.model == b.model
        && a.gpu_model == b.gpu_model
}

/// The roofs of `profile`'s devices, each set once, in the order first met.
pub fn roofs(profile: &Profile) -> Vec<Roofs> {
    let mut devices: Vec<Roofs> = Vec::new();
    for d in profile.devices().iter() {
        let p = peaks::of(d);
        let roofs = Roofs {
            device: d.id(),
            peak_flops_per_s: p.flops_per_s,
            peak_bytes_per_s: p.bytes_per_s,
            peak_flops_source: p.flops_source,
            peak_bytes_source: p.bytes_source,
            ridge_flops_per_byte: p.flops_per_s.zip(p.bytes_per_s).map(|(f, b)| f / b),
            model: p.model,
            gpu_model: p.gpu.map(|g| g.model),
        };
        if !devices.iter().any(|r| same_roofs(r, &roofs)) {
            devices.push(roofs);
        }
    }
    devices
}

/// The FLOPs each step ran and their share of what the devices could have run.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct StepFlops {
    /// FLOPs of the ops that started within the step, on the step's host's devices.
    pub flops: u64,
    /// The FLOPs the devices could have run in the step: its duration times their
    /// summed peak FLOP/s.
    pub capacity_flops: f64,
    /// `flops` over `capacity_flops`, percent: FLOPs utilisation.
    pub utilization_pct: Option<f64>,
}
stepscope_model::wire_struct!(StepFlops { flops, capacity_flops, utilization_pct });

/// Per step of `steps` (in its order): the FLOPs its host's devices ran and their
/// utilisation, for the hosts whose devices have a peak FLOP/s; None elsewhere.
///
/// Each op event is given its row's FLOPs per event (the op profile's by-op row of
/// its program: FLOPs over its events, so a GEMM split into two kernels gives each
/// half), and counted in the step whose span holds its start. The FLOPs are the
/// executed program's (from the profile's stats or the HLO): work XLA rematerialises
/// counts. An op of one name in several programs (`custom-call.1` of `jit_dot` for
/// each shape it was compiled for) takes its own program's FLOPs.
pub fn step_flops(profile: &Profile, steps: &[stepscope_model::steps::Step]) -> Vec<Option<StepFlops>> {
    let rows = ops::ops(profile, GroupBy::Op, 0);
    let ids = ops::run_program_ids(profile);
    step_flops_with(profile, steps, &flops_per_event(profile, &rows.ops, &ids), &ids)
}

/// Per (module, op name): each program's FLOPs per event, from the op profile by op.
pub type FlopsPerEvent<'r> = FastMap<(&'r str, &'r str), Vec<ProgramFlops>>;

/// The FLOPs per event of `profile`'s rows by op `rows`, each program by its number in
/// the run (`ids`, per host: [`ops::run_program_ids`]): a row shows a program kept
/// apart by its own host's number, which names it only with its host.
fn flops_per_event<'r>(profile: &Profile, rows: &'r [ops::OpRow], ids: &[ProgramIds]) -> FlopsPerEvent<'r> {
    let mut per_event: FlopsPerEvent = FastMap::default();
    for r in rows {
        if let Some(flops) = r.flops {
            let host = |name: &str| profile.hosts.iter().position(|s| s.host == name);
            let on = r.program_host.as_deref().and_then(|name| ids.get(host(name)?));
            let program = r.program_id.map(|p| on.map_or(p, |ids| ids.run(p, &r.module)));
            let slot = per_event.entry((r.module.as_str(), r.name.as_str())).or_default();
            slot.push((program, flops as f64 / r.count.max(1) as f64));
        }
    }
    per_event
}

/// [`step_flops`] with each event's FLOPs from `per_event` (the run's, where
/// `profile` is one host of it read alone), its programs numbered for the run: per
/// host of `profile`, `ids` renumbers the programs its events name (none: as on it).
pub fn step_flops_with(
    profile: &Profile,
    steps: &[stepscope_model::steps::Step],
    per_event: &FlopsPerEvent,
    ids: &[ProgramIds],
) -> Vec<Option<StepFlops>> {
    let mut out = vec![None; steps.len()];
    if per_event.is_empty() {
        return out;
    }
    let devices = profile.devices();
    for (hi, space) in profile.hosts.iter().enumerate() {
        let mine: Vec<(&crate::Device, f64)> = devices
            .iter()
            .filter(|d| d.host_index == hi)
            .filter_map(|d| peaks::of(d).flops_per_s.map(|p| (d, p)))
            .collect();
        if mine.is_empty() {
            continue;
        }
        let peak: f64 = mine.iter().map(|(_, p)| p).sum();
        let run = |p: Option<u64>, module: &str| p.map(|p| ids.get(hi).map_or(p, |ids| ids.run(p, module)));
        // A step the capture cut keeps its host span, which lies among the spans of
        // the steps timed on the device: it gets no FLOPs, and takes none of theirs.
        let mut order: Vec<usize> =
            (0..steps.len()).filter(|&i| steps[i].host == space.host && !steps[i].cut).collect();
        order.sort_by_key(|&i| steps[i].start_ps);
        if order.is_empty() {
            continue;
        }
        let mut flops = vec![0f64; order.len()];
        for (d, _) in &mine {
            let ops = d.cached_ops();
            // FLOPs per event by (module, name, program) ids, looked up once each.
            let mut by_ids: FastMap<(u32, u32, u32), f64> = FastMap::default();
            // Records are in time order per line: keep the step of the last one.
            let mut at = 0usize;
            let mut line = u32::MAX;
            let mut last = ((u32::MAX, u32::MAX, u32::MAX), 0.0);
            for r in &ops.recs {
                let ids = (r.module, r.name, r.program);
                if ids != last.0 {
                    let key = (&*ops.names[r.module as usize], &*ops.names[r.name as usize]);
                    let programs = per_event.get(&key).map_or(&[][..], |p| p.as_slice());
                    last = match (programs, ops.rec_stats(r)) {
                        ([], _) => (ids, 0.0),
                        ([(_, f)], _) => (ids, *f),
                        (_, RecStats::Program(p)) => {
                            (ids, *by_ids.entry(ids).or_insert_with(|| flops_of(programs, run(p, key.0))))
                        }
                        // The program is on the event itself, beside its other stats:
                        // read for each such event (not kept in `last`).
                        (_, RecStats::OnEvent) => {
                            let line = &d.plane.lines[r.line as usize];
                            let p = d.keys.program_id.and_then(|k| d.plane.event_stat(line, r.index as usize, k));
                            ((u32::MAX, u32::MAX, u32::MAX), flops_of(programs, run(stat_u64(d.plane, p), key.0)))
                        }
                    };
                }
                let f = last.1;
                if f == 0.0 {
                    continue;
                }
                let start = r.start_ps(d.plane);
                if r.line != line || steps[order[at]].start_ps > start {
                    line = r.line;
                    at = order.partition_point(|&i| steps[i].start_ps <= start).saturating_sub(1);
                }
                while at + 1 < order.len() && steps[order[at + 1]].start_ps <= start {
                    at += 1;
                }
                let s = &steps[order[at]];
                if start >= s.start_ps && start < s.end_ps() {
                    flops[at] += f;
                }
            }
        }
        for (k, &i) in order.iter().enumerate() {
            let capacity_flops = steps[i].duration_ps.max(0) as f64 / 1e12 * peak;
            out[i] = Some(StepFlops {
                flops: flops[k].round() as u64,
                capacity_flops,
                utilization_pct: (capacity_flops > 0.0).then(|| 100.0 * flops[k] / capacity_flops),
            });
        }
    }
    out
}

/// A program's id (none where the op has none) and its op's FLOPs per event.
pub type ProgramFlops = (Option<u64>, f64);

/// The FLOPs per event of the row of `programs` (each program's FLOPs per event, of
/// one op name and module) that is `program`'s; 0 where none is.
fn flops_of(programs: &[ProgramFlops], program: Option<u64>) -> f64 {
    programs.iter().find(|(p, _)| *p == program).map_or(0.0, |(_, f)| *f)
}
