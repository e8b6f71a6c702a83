//! Memory: per allocator, the in-use timeline from `MemoryAllocation` /
//! `MemoryDeallocation` events, the peak and when it happened, fragmentation, and the
//! largest allocations live at the peak; plus the device-memory pprof written by
//! `jax.profiler.save_device_memory_profile`, summarised by Python stack.
//!
//! Each allocator event carries the allocator's state right after it
//! (`bytes_allocated`, `bytes_available`, `fragmentation`, `peak_bytes_in_use`), so the
//! in-use timeline is read off directly. Live allocations are replayed by `addr`:
//! memory allocated before the capture started cannot be attributed and is reported as
//! `untracked_at_peak_bytes`.

use std::collections::HashMap;
use std::sync::Arc;

use serde::Serialize;
use stepscope_xspace::pprof::{Frame, Pprof};
use stepscope_xspace::{Line, Plane, Space, Stat, StatLookup};

use crate::cache::FastMap;
use crate::profile::Profile;

/// Most points kept per allocator timeline (the peak is always one of them).
pub const TIMELINE_MAX_POINTS: usize = 1000;

/// The memory analysis of a run.
#[derive(Clone, Debug, Serialize)]
pub struct Memory {
    pub schema: &'static str,
    pub run: String,
    /// One entry per (host, allocator), largest peak first.
    pub allocators: Vec<Allocator>,
    /// The device-memory pprof summary, when one was given or found beside the run.
    pub device_memory_profile: Option<DeviceMemoryProfile>,
}

/// One allocator's activity during the capture.
#[derive(Clone, Debug, Serialize)]
pub struct Allocator {
    pub host: String,
    /// `allocator_name` (e.g. `GPU_0_bfc`), else the device (`TPU:0`).
    pub name: String,
    pub allocations: u64,
    pub deallocations: u64,
    /// Highest in-use bytes seen during the capture, and when.
    pub peak_in_use_bytes: u64,
    pub peak_time_ps: i64,
    /// The allocator's own peak since the process started (`peak_bytes_in_use`);
    /// it may predate the capture.
    pub lifetime_peak_bytes: u64,
    /// In use plus available at the peak: the allocator's limit, when it reports one.
    pub capacity_bytes: Option<u64>,
    /// Fragmentation (0–1) at the peak and the highest seen.
    pub fragmentation_at_peak: f64,
    pub max_fragmentation: f64,
    pub first_in_use_bytes: u64,
    pub last_in_use_bytes: u64,
    /// In-use bytes over time (at most [`TIMELINE_MAX_POINTS`], peak kept).
    pub timeline: Vec<MemoryPoint>,
    /// The largest allocations live at the peak, largest first.
    pub live_at_peak: Vec<LiveAllocation>,
    /// In-use bytes at the peak that no allocation seen in the capture explains.
    pub untracked_at_peak_bytes: u64,
}

/// In-use bytes after an allocator event.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct MemoryPoint {
    pub time_ps: i64,
    pub in_use_bytes: u64,
}

/// An allocation live at the peak.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LiveAllocation {
    pub bytes: u64,
    pub requested_bytes: u64,
    pub allocated_at_ps: i64,
    pub addr: u64,
    /// The op that asked for it (`tf_op`), when recorded.
    pub op: String,
    pub shape: String,
    pub data_type: String,
    pub region_type: String,
}

/// The device-memory pprof, summarised.
#[derive(Clone, Debug, Serialize)]
pub struct DeviceMemoryProfile {
    pub path: String,
    pub total_bytes: i64,
    pub buffer_count: i64,
    /// Bytes per `device` label, largest first.
    pub by_device: Vec<Share>,
    /// Bytes per `kind` label (`buffer`, `executable`), largest first.
    pub by_kind: Vec<Share>,
    /// Bytes per user call site (the innermost frame outside JAX), largest first.
    pub by_site: Vec<StackShare>,
}

/// Bytes attributed to a label value.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Share {
    pub name: String,
    pub bytes: i64,
}

/// Bytes allocated from one user call site.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StackShare {
    pub bytes: i64,
    /// The innermost frame outside JAX itself: where user code allocated.
    pub site: String,
    /// The largest stack through the site, leaf first, `function (file:line)`.
    pub stack: Vec<String>,
}

/// The stats the memory analysis reads, by name (see [`K_NAMES`]).
#[derive(Clone, Copy)]
enum K {
    Addr,
    AllocationBytes,
    AllocatorName,
    BytesAllocated,
    BytesAvailable,
    DataType,
    Fragmentation,
    IndexOnHost,
    PeakBytesInUse,
    RegionType,
    RequestedBytes,
    Shape,
    TfOp,
}

const K_NAMES: [&str; 13] = [
    "addr",
    "allocation_bytes",
    "allocator_name",
    "bytes_allocated",
    "bytes_available",
    "data_type",
    "fragmentation",
    "index_on_host",
    "peak_bytes_in_use",
    "region_type",
    "requested_bytes",
    "shape",
    "tf_op",
];

/// One allocator event, as read off the profile; its stats are looked up when read.
struct Event<'a> {
    time_ps: i64,
    alloc: bool,
    /// Place in the order the host's allocator events were read.
    seq: u32,
    plane: &'a Plane,
    line: &'a Line,
    i: u32,
    /// The plane's stat-metadata index of each [`K`].
    keys: Arc<[Option<u32>; 13]>,
}

impl Event<'_> {
    fn get(&self, key: K) -> Option<Stat> {
        self.plane.event_stat(self.line, self.i as usize, self.keys[key as usize]?)
    }
    fn u64(&self, key: K) -> Option<u64> {
        self.get(key).and_then(|s| self.plane.stat_i64(&s)).map(|v| v.max(0) as u64)
    }
    fn text(&self, key: K) -> String {
        self.get(key).map(|s| self.plane.stat_display(&s)).unwrap_or_default()
    }
}

/// Builds the memory analysis; `pprof` is the device-memory profile to summarise (the
/// caller reads it), `top` bounds the live allocations and stacks listed.
pub fn memory(profile: &Profile, pprof: Option<(&str, &Pprof)>, top: usize) -> Memory {
    memory_with(profile, pprof, top, TIMELINE_MAX_POINTS)
}

/// [`memory`] with every point of every allocator timeline (for export), no pprof.
pub fn memory_full(profile: &Profile) -> Memory {
    memory_with(profile, None, 0, usize::MAX)
}

fn memory_with(profile: &Profile, pprof: Option<(&str, &Pprof)>, top: usize, max_points: usize) -> Memory {
    use rayon::prelude::*;
    let groups: Vec<(&str, AllocatorEvents)> = profile
        .hosts
        .par_iter()
        .flat_map_iter(|space| events_by_allocator(space).into_iter().map(|g| (space.host.as_str(), g)))
        .collect();
    let mut allocators: Vec<Allocator> = groups
        .into_par_iter()
        .map(|(host, (name, events))| replay(host, name.to_string(), events.as_slice(), top, max_points))
        .collect();
    allocators.sort_by(|a, b| b.peak_in_use_bytes.cmp(&a.peak_in_use_bytes).then_with(|| a.name.cmp(&b.name)));
    Memory {
        schema: "stepscope.memory/1",
        run: profile.run.clone(),
        allocators,
        device_memory_profile: pprof.map(|(path, p)| summarise_pprof(path, p, top)),
    }
}

/// The allocations live at `time_ps` in allocator `allocator` of host `host`: the
/// events up to and including that time replayed, largest `top` listed. `None` when
/// the host has no allocator of that name.
pub fn live_at(profile: &Profile, host: &str, allocator: &str, time_ps: i64, top: usize) -> Option<LiveAt> {
    let space = profile.hosts.iter().find(|s| s.host == host)?;
    let (_, events) = events_by_allocator(space).into_iter().find(|(n, _)| **n == *allocator)?;
    let events = &events[..];
    let n = events.partition_point(|e| e.time_ps <= time_ps);
    let mut live: FastMap<u64, usize> = FastMap::default();
    for (ix, e) in events[..n].iter().enumerate() {
        apply(&mut live, ix, e.alloc, e.u64(K::Addr).unwrap_or(0));
    }
    let state = n.checked_sub(1).map(|ix| &events[ix]);
    let in_use_bytes = state.and_then(|e| e.u64(K::BytesAllocated)).unwrap_or(0);
    let ixs: Vec<usize> = live.into_values().collect();
    let (rows, tracked) = live_allocations(events, &ixs, top);
    Some(LiveAt {
        schema: "stepscope.memory_live/1",
        run: profile.run.clone(),
        host: host.to_string(),
        allocator: allocator.to_string(),
        time_ps,
        event_time_ps: state.map(|e| e.time_ps),
        in_use_bytes,
        live_count: ixs.len() as u64,
        untracked_bytes: in_use_bytes.saturating_sub(tracked),
        live: rows,
    })
}

/// The allocations live at a chosen time ([`live_at`]).
#[derive(Clone, Debug, Serialize)]
pub struct LiveAt {
    pub schema: &'static str,
    pub run: String,
    pub host: String,
    pub allocator: String,
    /// The time asked for.
    pub time_ps: i64,
    /// The last allocator event at or before `time_ps`, whose state is shown; `None`
    /// before the first event.
    pub event_time_ps: Option<i64>,
    /// In-use bytes after that event.
    pub in_use_bytes: u64,
    /// Allocations seen in the capture and live then (all of them, not only those listed).
    pub live_count: u64,
    /// In-use bytes that no allocation seen in the capture explains.
    pub untracked_bytes: u64,
    /// The largest live allocations, largest first.
    pub live: Vec<LiveAllocation>,
}

/// An allocator's name and its events.
type AllocatorEvents<'a> = (Arc<str>, Vec<Event<'a>>);

/// A host's allocator events grouped by allocator (groups in order of their first
/// event in time), each group sorted by time.
fn events_by_allocator(space: &Space) -> Vec<AllocatorEvents<'_>> {
    let mut groups = allocator_events(space);
    for (_, events) in &mut groups {
        // Read line by line, so a few runs already in time order at most: the stable
        // sort merges them (and keeps read order among equal times).
        events.sort_by_key(|e| e.time_ps);
    }
    groups.sort_by_key(|(_, events)| events.first().map(|e| (e.time_ps, e.seq)));
    groups
}

/// Applies event `ix`, an allocation or a free at `addr`, to the live set (address →
/// allocating event).
fn apply(live: &mut FastMap<u64, usize>, ix: usize, alloc: bool, addr: u64) {
    if alloc {
        live.insert(addr, ix);
    } else {
        live.remove(&addr);
    }
}

/// The allocations made by events `ixs`, largest first, `top` kept, and the bytes of all.
fn live_allocations(events: &[Event], ixs: &[usize], top: usize) -> (Vec<LiveAllocation>, u64) {
    // Sizes of all first; the text of the `top` listed only.
    let mut keyed: Vec<(std::cmp::Reverse<u64>, i64, u64, usize)> = ixs
        .iter()
        .map(|&ix| {
            let e = &events[ix];
            let bytes = e.u64(K::AllocationBytes).unwrap_or(0);
            (std::cmp::Reverse(bytes), e.time_ps, e.u64(K::Addr).unwrap_or(0), ix)
        })
        .collect();
    let tracked: u64 = keyed.iter().map(|k| k.0 .0).sum();
    if keyed.len() > top {
        keyed.select_nth_unstable(top);
        keyed.truncate(top);
    }
    keyed.sort_unstable();
    let rows = keyed
        .into_iter()
        .map(|(std::cmp::Reverse(bytes), allocated_at_ps, addr, ix)| {
            let e = &events[ix];
            LiveAllocation {
                bytes,
                requested_bytes: e.u64(K::RequestedBytes).unwrap_or(0),
                allocated_at_ps,
                addr,
                op: e.text(K::TfOp),
                shape: e.text(K::Shape),
                data_type: data_type_name(e.u64(K::DataType).unwrap_or(0)),
                region_type: e.text(K::RegionType),
            }
        })
        .collect();
    (rows, tracked)
}

/// Every allocator event of a host, from any plane and line.
fn allocator_events(space: &Space) -> Vec<AllocatorEvents<'_>> {
    let device_prefix = if space.planes.iter().any(|p| p.name.starts_with("/device:TPU")) {
        "TPU"
    } else if space.planes.iter().any(|p| p.name.starts_with("/device:GPU")) {
        "GPU"
    } else {
        "device"
    };
    // Per allocator (by index): its name and events; the indexes by name text.
    let mut groups: Vec<AllocatorEvents> = Vec::new();
    let mut ids: HashMap<String, u32> = HashMap::new();
    let mut seq = 0u32;
    for plane in &space.planes {
        let kinds: Vec<Option<bool>> = plane
            .event_meta
            .iter()
            .map(|m| match plane.text(m.name) {
                "MemoryAllocation" => Some(true),
                "MemoryDeallocation" => Some(false),
                _ => None,
            })
            .collect();
        if kinds.iter().all(Option::is_none) {
            continue;
        }
        let keys = Arc::new(K_NAMES.map(|n| plane.stat_id(n)));
        let look = plane.stat_lookup([keys[K::AllocatorName as usize], keys[K::IndexOnHost as usize]]);
        // Allocator names looked up once: by name text, by index on host, else by what
        // the name stat displays as.
        let mut by_text: FastMap<&str, u32> = FastMap::default();
        let mut by_index: FastMap<Option<u64>, u32> = FastMap::default();
        let mut last: Option<(&str, u32)> = None;
        let any: Vec<bool> = kinds.iter().map(Option::is_some).collect();
        for line in &plane.lines {
            for i in line.events_with_meta(&any) {
                let Some(alloc) = kinds[line.meta(i) as usize] else { continue };
                let [name, index] = plane.stats_of(&look, line, i);
                let mut id_of = |text: &str| match ids.get(text) {
                    Some(&id) => id,
                    None => {
                        groups.push((Arc::from(text), Vec::new()));
                        ids.insert(text.to_string(), groups.len() as u32 - 1);
                        groups.len() as u32 - 1
                    }
                };
                let allocator = match name {
                    Some(s) => match plane.stat_str(&s) {
                        // Events of one allocator usually come in runs.
                        Some(text) if last.is_some_and(|(t, _)| t == text) => last.map_or(0, |(_, id)| id),
                        Some(text) => {
                            let id = *by_text.entry(text).or_insert_with(|| id_of(text));
                            last = Some((text, id));
                            id
                        }
                        None => id_of(&plane.stat_display(&s)),
                    },
                    None => {
                        let ix = index.and_then(|s| plane.stat_i64(&s)).map(|v| v.max(0) as u64);
                        *by_index.entry(ix).or_insert_with(|| match ix {
                            Some(ix) => id_of(&format!("{device_prefix}:{ix}")),
                            None => id_of("unnamed"),
                        })
                    }
                };
                groups[allocator as usize].1.push(Event {
                    time_ps: line.start_ps(i),
                    alloc,
                    seq,
                    plane,
                    line,
                    i: i as u32,
                    keys: keys.clone(),
                });
                seq += 1;
            }
        }
    }
    groups
}

/// Replays one allocator's events (sorted by time).
fn replay(host: &str, name: String, events: &[Event], top: usize, max_points: usize) -> Allocator {
    let mut a = Allocator {
        host: host.to_string(),
        name,
        allocations: 0,
        deallocations: 0,
        peak_in_use_bytes: 0,
        peak_time_ps: events.first().map_or(0, |e| e.time_ps),
        lifetime_peak_bytes: 0,
        capacity_bytes: None,
        fragmentation_at_peak: 0.0,
        max_fragmentation: 0.0,
        first_in_use_bytes: events.first().and_then(|e| e.u64(K::BytesAllocated)).unwrap_or(0),
        last_in_use_bytes: events.last().and_then(|e| e.u64(K::BytesAllocated)).unwrap_or(0),
        timeline: Vec::new(),
        live_at_peak: Vec::new(),
        untracked_at_peak_bytes: 0,
    };
    // The four stats read off every event, found in one pass over its stats.
    const READ: [K; 4] = [K::Addr, K::BytesAllocated, K::PeakBytesInUse, K::Fragmentation];
    let mut looks: Vec<(&Plane, StatLookup<4>)> = Vec::new();
    let mut peak_ix = 0usize;
    let mut addrs = Vec::with_capacity(events.len());
    let mut points = Vec::with_capacity(events.len());
    for (ix, e) in events.iter().enumerate() {
        let look = match looks.iter().position(|(p, _)| std::ptr::eq(*p, e.plane)) {
            Some(k) => &looks[k].1,
            None => {
                looks.push((e.plane, e.plane.stat_lookup(READ.map(|k| e.keys[k as usize]))));
                &looks[looks.len() - 1].1
            }
        };
        let [addr, in_use, peak, fragmentation] = e.plane.stats_of(look, e.line, e.i as usize);
        let u64_of = |s: Option<Stat>| s.and_then(|s| e.plane.stat_i64(&s)).map_or(0, |v| v.max(0) as u64);
        if e.alloc {
            a.allocations += 1;
        } else {
            a.deallocations += 1;
        }
        addrs.push(u64_of(addr));
        let in_use = u64_of(in_use);
        a.lifetime_peak_bytes = a.lifetime_peak_bytes.max(u64_of(peak));
        let fragmentation = fragmentation.and_then(|s| e.plane.stat_f64(&s)).unwrap_or(0.0);
        a.max_fragmentation = a.max_fragmentation.max(fragmentation);
        points.push(MemoryPoint { time_ps: e.time_ps, in_use_bytes: in_use });
        if in_use > a.peak_in_use_bytes || ix == 0 {
            a.peak_in_use_bytes = in_use;
            a.peak_time_ps = e.time_ps;
            a.fragmentation_at_peak = fragmentation;
            peak_ix = ix;
        }
    }
    if let Some(p) = events.get(peak_ix) {
        a.capacity_bytes = p.u64(K::BytesAvailable).map(|av| av.saturating_add(a.peak_in_use_bytes));
    }
    // The allocations live right after the peak's event.
    let mut live: FastMap<u64, usize> = FastMap::default();
    for (ix, e) in events.iter().enumerate().take(peak_ix + 1) {
        apply(&mut live, ix, e.alloc, addrs[ix]);
    }
    let peak_live: Vec<usize> = live.into_values().collect();
    let (live_at_peak, tracked) = live_allocations(events, &peak_live, top);
    a.untracked_at_peak_bytes = a.peak_in_use_bytes.saturating_sub(tracked);
    a.live_at_peak = live_at_peak;
    a.timeline = downsample(&points, peak_ix, max_points);
    a
}

/// At most `max` points: the highest of each time bucket, the peak always kept.
fn downsample(points: &[MemoryPoint], peak_ix: usize, max: usize) -> Vec<MemoryPoint> {
    if points.len() <= max {
        return points.to_vec();
    }
    let per = points.len().div_ceil(max);
    let mut out: Vec<MemoryPoint> = points
        .chunks(per)
        .enumerate()
        .map(|(c, chunk)| {
            let range = c * per..c * per + chunk.len();
            if range.contains(&peak_ix) {
                return points[peak_ix];
            }
            *chunk.iter().max_by_key(|p| p.in_use_bytes).unwrap_or(&chunk[0])
        })
        .collect();
    out.dedup();
    out
}

/// TensorFlow `DataType` names for the `data_type` stat (0: not recorded).
fn data_type_name(v: u64) -> String {
    let name = match v {
        0 => "",
        1 => "f32",
        2 => "f64",
        3 => "s32",
        4 => "u8",
        5 => "s16",
        6 => "s8",
        7 => "string",
        8 => "c64",
        9 => "s64",
        10 => "pred",
        14 => "bf16",
        17 => "u16",
        18 => "c128",
        19 => "f16",
        22 => "u32",
        23 => "u64",
        _ => return format!("dtype {v}"),
    };
    name.to_string()
}

/// Frames inside JAX, jaxlib or Python's own machinery: skipped to find the user site.
fn is_library_frame(f: &Frame) -> bool {
    let file = f.file.as_str();
    ["/jax/", "/jaxlib/", "/jax_plugins/", "/site-packages/", "<frozen", "/lib/python3"]
        .iter()
        .any(|p| file.contains(p))
        || file.is_empty()
}

fn frame_text(f: &Frame) -> String {
    if f.file.is_empty() {
        f.function.clone()
    } else {
        format!("{} ({}:{})", f.function, f.file, f.line)
    }
}

fn summarise_pprof(path: &str, p: &Pprof, top: usize) -> DeviceMemoryProfile {
    let space = p.value_index("space");
    let bytes_of = |s: &stepscope_xspace::pprof::Sample| space.and_then(|ix| s.values.get(ix).copied()).unwrap_or(0);
    let mut by_device: HashMap<String, i64> = HashMap::new();
    let mut by_kind: HashMap<String, i64> = HashMap::new();
    for s in &p.samples {
        let b = bytes_of(s);
        *by_device.entry(s.label("device").unwrap_or("").to_string()).or_default() += b;
        *by_kind.entry(s.label("kind").unwrap_or("").to_string()).or_default() += b;
    }
    let ranked = |m: HashMap<String, i64>| {
        let mut v: Vec<Share> =
            m.into_iter().filter(|(_, bytes)| *bytes > 0).map(|(name, bytes)| Share { name, bytes }).collect();
        v.sort_by(|a, b| b.bytes.cmp(&a.bytes).then_with(|| a.name.cmp(&b.name)));
        v
    };
    // Stacks that share a user site add up; the largest stack of a site is shown.
    let mut by_site: Vec<StackShare> = Vec::new();
    for (stack, bytes) in p.by_stack("space") {
        if bytes <= 0 {
            continue;
        }
        let site = stack.iter().find(|f| !is_library_frame(f)).or(stack.first()).map(frame_text).unwrap_or_default();
        match by_site.iter_mut().find(|s| s.site == site) {
            Some(s) => s.bytes = s.bytes.saturating_add(bytes),
            None => by_site.push(StackShare { bytes, site, stack: stack.iter().map(frame_text).collect() }),
        }
    }
    by_site.sort_by(|a, b| b.bytes.cmp(&a.bytes).then_with(|| a.site.cmp(&b.site)));
    by_site.truncate(top);
    DeviceMemoryProfile {
        path: path.to_string(),
        total_bytes: p.total("space"),
        buffer_count: p.total("allocations"),
        by_device: ranked(by_device),
        by_kind: ranked(by_kind),
        by_site,
    }
}
