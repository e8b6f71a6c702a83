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

use serde::Serialize;
use stepscope_xspace::pprof::{Frame, Pprof};
use stepscope_xspace::{Line, Plane, Space, Stat, StatLookup};

use stepscope_model::records::FastMap;
use stepscope_model::Profile;
use stepscope_xspace::hlo::HloModules;

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
stepscope_model::wire_struct!(Allocator {
    host,
    name,
    allocations,
    deallocations,
    peak_in_use_bytes,
    peak_time_ps,
    lifetime_peak_bytes,
    capacity_bytes,
    fragmentation_at_peak,
    max_fragmentation,
    first_in_use_bytes,
    last_in_use_bytes,
    timeline,
    live_at_peak,
    untracked_at_peak_bytes,
});

impl Allocator {
    /// The peak as a share of the allocator's capacity, percent; `None` where it
    /// records none.
    pub fn capacity_pct(&self) -> Option<f64> {
        self.capacity_bytes.filter(|c| *c > 0).map(|c| 100.0 * self.peak_in_use_bytes as f64 / c as f64)
    }
}

/// In-use bytes after an allocator event.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct MemoryPoint {
    pub time_ps: i64,
    pub in_use_bytes: u64,
}
stepscope_model::wire_struct!(MemoryPoint { time_ps, in_use_bytes });

/// An allocation live at the peak.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LiveAllocation {
    pub bytes: u64,
    pub requested_bytes: u64,
    pub allocated_at_ps: i64,
    pub addr: u64,
    /// The op that asked for it (`tf_op`), when recorded.
    pub op: String,
    /// Where the event records no op: the XLA program whose run on the event's
    /// thread made it (`…Execute (jit_train_step)` around it), and what the
    /// allocation of its size is in that program's buffer assignment (`temporaries`,
    /// `output loop_add_fusion`, `output (one of 15)`; empty where no allocation of the
    /// plan has its size): `stepscope buffers --program PROGRAM` shows the plan.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub program: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub planned_as: String,
    pub shape: String,
    pub data_type: String,
    pub region_type: String,
}
stepscope_model::wire_struct!(LiveAllocation {
    bytes,
    requested_bytes,
    allocated_at_ps,
    addr,
    op,
    program,
    planned_as,
    shape,
    data_type,
    region_type,
});

/// The device-memory pprof, summarised.
#[derive(Clone, Debug, Serialize)]
pub struct DeviceMemoryProfile {
    pub path: String,
    pub total_bytes: i64,
    /// Allocations of buffers (samples not labelled `kind=executable`).
    pub buffer_count: i64,
    /// Allocations of executables (`kind=executable`, often of 0 bytes).
    pub executable_count: i64,
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

/// One allocator event, as read off the profile: the stats every event's replay
/// needs, read as the events are found; any other is looked up when read
/// ([`HostEvents::u64`]).
/// In 32 bytes: a large capture holds millions.
struct Event {
    time_ps: i64,
    /// `addr` (0 when absent).
    addr: u64,
    /// `bytes_allocated`: the allocator's bytes in use after the event (0 when absent).
    in_use_bytes: u64,
    /// The line's index in [`HostEvents::lines`], and [`ALLOC_BIT`] for an allocation.
    line_alloc: u32,
    /// The event's index on its line.
    i: u32,
}

/// The bit of [`Event::line_alloc`] that marks an allocation (else a free).
const ALLOC_BIT: u32 = 1 << 31;

impl Event {
    fn alloc(&self) -> bool {
        self.line_alloc & ALLOC_BIT != 0
    }

    /// Where the event was read: lines are numbered in reading order, so this orders
    /// events as they were read.
    fn read_at(&self) -> (u32, u32) {
        (self.line_alloc & !ALLOC_BIT, self.i)
    }
}

/// A host's allocator events, by allocator, with what reading their other stats takes.
struct HostEvents<'a> {
    space: &'a Space,
    /// The host's programs' plans, for naming allocations that record no op.
    plans: Option<crate::buffers::Plans<'a>>,
    /// The stat-metadata index of each [`K`], by plane index.
    keys: Vec<[Option<u32>; 13]>,
    /// Each line with allocator events and its plane's index, in reading order.
    lines: Vec<(u32, &'a Line)>,
    groups: Vec<AllocatorEvents>,
}

impl HostEvents<'_> {
    fn get(&self, e: &Event, key: K) -> Option<(&Plane, Stat)> {
        let &(plane_ix, line) = self.lines.get(e.read_at().0 as usize)?;
        let plane = self.space.planes.get(plane_ix as usize)?;
        let meta = self.keys.get(plane_ix as usize)?[key as usize]?;
        Some((plane, plane.event_stat(line, e.i as usize, meta)?))
    }
    fn u64(&self, e: &Event, key: K) -> Option<u64> {
        self.get(e, key).and_then(|(p, s)| p.stat_i64(&s)).map(|v| v.max(0) as u64)
    }
    fn f64(&self, e: &Event, key: K) -> Option<f64> {
        self.get(e, key).and_then(|(p, s)| p.stat_f64(&s))
    }
    fn text(&self, e: &Event, key: K) -> String {
        self.get(e, key).map(|(p, s)| p.stat_display(&s)).unwrap_or_default()
    }

    /// The XLA program whose run on the event's line holds the event: the latest
    /// event before it, within [`PROGRAM_LOOK_BACK`] events, that is still running
    /// and is named `…Execute… (MODULE)` for a module of the host.
    fn running_program(&self, e: &Event) -> Option<String> {
        let plans = self.plans.as_ref()?;
        let &(plane_ix, line) = self.lines.get(e.read_at().0 as usize)?;
        let plane = self.space.planes.get(plane_ix as usize)?;
        let at = e.i as usize;
        (at.saturating_sub(PROGRAM_LOOK_BACK)..at).rev().find_map(|i| {
            if line.end_ps(i) < e.time_ps {
                return None;
            }
            let name = plane.event_name(line.meta(i));
            let module = name.strip_suffix(')')?.rsplit_once(" (")?.1;
            (name.contains("Execute") && plans.has(module)).then(|| module.to_string())
        })
    }
}

/// How many events before an allocation on its line are searched for the program
/// run that made it (the runtime allocates as a run starts, a few events in).
const PROGRAM_LOOK_BACK: usize = 256;

/// An allocator's events, and what they say whatever their order.
#[derive(Default)]
struct AllocatorEvents {
    name: String,
    events: Vec<Event>,
    /// Largest `peak_bytes_in_use`.
    lifetime_peak_bytes: u64,
    /// Largest `fragmentation`.
    max_fragmentation: f64,
}

impl AllocatorEvents {
    /// Takes in `other`'s events (after this one's) and what they say.
    fn append(&mut self, mut other: AllocatorEvents) {
        self.events.append(&mut other.events);
        self.lifetime_peak_bytes = self.lifetime_peak_bytes.max(other.lifetime_peak_bytes);
        self.max_fragmentation = self.max_fragmentation.max(other.max_fragmentation);
    }
}

/// Builds the memory analysis; `pprof` is the device-memory profile to summarise (the
/// caller reads it), `top` bounds the live allocations and stacks listed.
pub fn memory(profile: &Profile, pprof: Option<(&str, &Pprof)>, top: usize) -> Memory {
    memory_with(profile, pprof, top, TIMELINE_MAX_POINTS)
}

/// A device-memory profile on its own (`stepscope memory FILE.prof`): no allocators,
/// the pprof summarised, `run` its file name.
pub fn pprof_only(path: &str, pprof: &Pprof, top: usize) -> Memory {
    let run = std::path::Path::new(path).file_name().map_or(path.to_string(), |n| n.to_string_lossy().into_owned());
    Memory {
        schema: "stepscope.memory/1",
        run,
        allocators: Vec::new(),
        device_memory_profile: Some(summarise_pprof(path, pprof, top)),
    }
}

/// [`memory`] with every point of every allocator timeline (for export), no pprof.
pub fn memory_full(profile: &Profile) -> Memory {
    memory_with(profile, None, 0, usize::MAX)
}

fn memory_with(profile: &Profile, pprof: Option<(&str, &Pprof)>, top: usize, max_points: usize) -> Memory {
    use rayon::prelude::*;
    let hlo = profile.hlo_modules();
    let hosts: Vec<HostEvents> =
        (profile.hosts.par_iter().zip(hlo)).map(|(space, modules)| events_by_allocator(space, modules)).collect();
    let groups: Vec<(&HostEvents, &AllocatorEvents)> =
        hosts.iter().flat_map(|h| h.groups.iter().map(move |g| (h, g))).collect();
    let allocators: Vec<Allocator> =
        groups.into_par_iter().map(|(host, group)| replay(host, group, top, max_points)).collect();
    let mut memory = assemble(&profile.run, allocators);
    memory.device_memory_profile = pprof.map(|(path, p)| summarise_pprof(path, p, top));
    memory
}

/// The memory analysis of run `run` from its allocators, hosts in order (a run read a
/// host at a time: each host's [`memory`] allocators), largest peak first.
pub fn assemble(run: &str, mut allocators: Vec<Allocator>) -> Memory {
    allocators.sort_by(|a, b| b.peak_in_use_bytes.cmp(&a.peak_in_use_bytes).then_with(|| a.name.cmp(&b.name)));
    Memory { schema: "stepscope.memory/1", run: run.to_string(), allocators, device_memory_profile: None }
}

/// The allocations live at `time_ps` in allocator `allocator` of host `host`: the
/// events up to and including that time replayed, largest `top` listed. `None` when
/// the host has no allocator of that name.
pub fn live_at(profile: &Profile, host: &str, allocator: &str, time_ps: i64, top: usize) -> Option<LiveAt> {
    let at = profile.hosts.iter().position(|s| s.host == host)?;
    let h = events_by_allocator(&profile.hosts[at], &profile.hlo_modules()[at]);
    let events = &h.groups.iter().find(|g| *g.name == *allocator)?.events[..];
    let n = events.partition_point(|e| e.time_ps <= time_ps);
    let mut live: FastMap<u64, usize> = FastMap::default();
    for (ix, e) in events[..n].iter().enumerate() {
        apply(&mut live, ix, e.alloc(), e.addr);
    }
    let state = n.checked_sub(1).map(|ix| &events[ix]);
    let in_use_bytes = state.map_or(0, |e| e.in_use_bytes);
    let ixs: Vec<usize> = live.into_values().collect();
    let (rows, tracked) = live_allocations(&h, events, &ixs, top);
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

/// A host's allocator events grouped by allocator (groups in order of their first
/// event in time), each group sorted by time.
fn events_by_allocator<'a>(space: &'a Space, modules: &'a HloModules) -> HostEvents<'a> {
    let mut h = allocator_events(space);
    h.plans = (!modules.is_empty()).then(|| crate::buffers::Plans::new(modules));
    h.groups.sort_by_key(|g| g.events.first().map(|e| (e.time_ps, e.read_at())));
    h
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
fn live_allocations(h: &HostEvents, events: &[Event], ixs: &[usize], top: usize) -> (Vec<LiveAllocation>, u64) {
    // Sizes of all first; the text of the `top` listed only.
    let mut keyed: Vec<(std::cmp::Reverse<u64>, i64, u64, usize)> = ixs
        .iter()
        .map(|&ix| {
            let e = &events[ix];
            let bytes = h.u64(e, K::AllocationBytes).unwrap_or(0);
            (std::cmp::Reverse(bytes), e.time_ps, e.addr, ix)
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
            let op = h.text(e, K::TfOp);
            let requested_bytes = h.u64(e, K::RequestedBytes).unwrap_or(0);
            let program = if op.is_empty() { h.running_program(e) } else { None };
            let planned_as =
                (program.as_deref()).and_then(|m| h.plans.as_ref()?.planned_as(m, requested_bytes)).unwrap_or_default();
            LiveAllocation {
                bytes,
                requested_bytes,
                allocated_at_ps,
                addr,
                op,
                program: program.unwrap_or_default(),
                planned_as,
                shape: h.text(e, K::Shape),
                data_type: data_type_name(h.u64(e, K::DataType).unwrap_or(0)),
                region_type: h.text(e, K::RegionType),
            }
        })
        .collect();
    (rows, tracked)
}

/// Events of a line scanned as one piece by [`allocator_events`] (a multiple of
/// the column block). Debug builds (the tests' binaries) cut the small fixtures' lines
/// too, so the joining of pieces is checked by every test that reads allocator events.
const ALLOC_SCAN_PIECE: usize = if cfg!(debug_assertions) { 1 << 7 } else { 1 << 16 };

/// How an allocator event names its allocator: by the `allocator_name` text, by what
/// a non-text name displays as, or by `index_on_host` (absent: unnamed).
#[derive(PartialEq)]
enum AllocatorKey<'a> {
    Text(&'a str),
    Shown(String),
    Index(Option<u64>),
}

/// A piece's allocator events grouped by key (groups in order of first event), and
/// how many events it found.
type PieceEvents<'a> = Vec<(AllocatorKey<'a>, AllocatorEvents)>;

/// Every allocator event of a host, from any plane and line, grouped by allocator in
/// read order, each group sorted by time. Pieces of lines are scanned in parallel,
/// then each allocator's are joined and sorted in parallel.
fn allocator_events(space: &Space) -> HostEvents<'_> {
    use rayon::prelude::*;
    let device_prefix = if space.planes.iter().any(|p| p.name.starts_with("/device:TPU")) {
        "TPU"
    } else if space.planes.iter().any(|p| p.name.starts_with("/device:GPU")) {
        "GPU"
    } else {
        "device"
    };
    let mut keys = vec![[None; 13]; space.planes.len()];
    // Per plane with allocator events: which metadata are allocations (true) or frees
    // (false), and the lookup of the stats read as events are found.
    let mut planes = Vec::new();
    for (k, plane) in space.planes.iter().enumerate() {
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
        keys[k] = K_NAMES.map(|n| plane.stat_id(n));
        let look = plane.stat_lookup(FOUND.map(|r| keys[k][r as usize]));
        let any: Vec<bool> = kinds.iter().map(Option::is_some).collect();
        planes.push((k as u32, plane, kinds, any, look));
    }
    // Lines numbered in reading order (planes, then their lines), then cut in pieces.
    let lines: Vec<(u32, &Line)> =
        planes.iter().flat_map(|(plane_ix, plane, ..)| plane.lines.iter().map(move |line| (*plane_ix, line))).collect();
    let plane_of_line: Vec<usize> =
        planes.iter().enumerate().flat_map(|(k, (_, plane, ..))| plane.lines.iter().map(move |_| k)).collect();
    let pieces: Vec<(usize, std::ops::Range<usize>)> = (lines.iter().enumerate())
        .flat_map(|(l, (_, line))| stepscope_model::records::pieces(line.len(), ALLOC_SCAN_PIECE).map(move |r| (l, r)))
        .collect();
    let found: Vec<PieceEvents> = pieces
        .into_par_iter()
        .map(|(l, range)| {
            let (_, plane, kinds, any, look) = &planes[plane_of_line[l]];
            allocator_events_in(plane, lines[l].1, l as u32, kinds, any, look, range)
        })
        .collect();
    // Each allocator's parts, in reading order, named; the indexes by name.
    let mut parts: Vec<(String, Vec<AllocatorEvents>)> = Vec::new();
    let mut ids: HashMap<String, usize> = HashMap::new();
    for piece in found {
        for (key, part) in piece {
            let name = match key {
                AllocatorKey::Text(text) => std::borrow::Cow::Borrowed(text),
                AllocatorKey::Shown(shown) => shown.into(),
                AllocatorKey::Index(Some(ix)) => format!("{device_prefix}:{ix}").into(),
                AllocatorKey::Index(None) => "unnamed".into(),
            };
            let id = *ids.entry(name.to_string()).or_insert_with(|| {
                parts.push((name.into_owned(), Vec::new()));
                parts.len() - 1
            });
            parts[id].1.push(part);
        }
    }
    let groups = parts
        .into_par_iter()
        .map(|(name, parts)| {
            // The first part's events grow in place to hold the rest (a large vector
            // is remapped, not copied), so the events are not held twice.
            let total: usize = parts.iter().map(|p| p.events.len()).sum();
            let mut parts = parts.into_iter();
            let mut g = parts.next().unwrap_or_default();
            g.name = name;
            g.events.reserve_exact(total - g.events.len());
            parts.for_each(|part| g.append(part));
            // Read line by line, so a few runs already in time order at most: the stable
            // sort merges them (and keeps read order among equal times).
            g.events.sort_by_key(|e| e.time_ps);
            g
        })
        .collect();
    HostEvents { space, plans: None, keys, lines, groups }
}

/// The allocator events among events `range` of `line` (line `l` of
/// [`HostEvents::lines`]), grouped by allocator: `kinds` marks each metadata an
/// allocation (true) or a free (false), `any` both.
#[inline(never)]
fn allocator_events_in<'a>(
    plane: &'a Plane,
    line: &'a Line,
    l: u32,
    kinds: &[Option<bool>],
    any: &[bool],
    look: &StatLookup<6>,
    range: std::ops::Range<usize>,
) -> PieceEvents<'a> {
    let mut groups: Vec<(AllocatorKey, AllocatorEvents)> = Vec::new();
    // Events of one allocator usually come in runs: `last` is the group of the last
    // event, and the stats that named it.
    let mut last = usize::MAX;
    let mut last_named_by = None;
    for i in line.events_with_meta_in(any, range.clone()) {
        let Some(alloc) = kinds[line.meta(i) as usize] else { continue };
        let [name, index, addr, in_use, peak, fragmentation] = plane.stats_of(look, line, i);
        if last_named_by != Some((name, index)) {
            last_named_by = Some((name, index));
            let key = match name {
                Some(s) => match plane.stat_str(&s) {
                    Some(text) => AllocatorKey::Text(text),
                    None => AllocatorKey::Shown(plane.stat_display(&s)),
                },
                None => AllocatorKey::Index(index.and_then(|s| plane.stat_i64(&s)).map(|v| v.max(0) as u64)),
            };
            last = match groups.iter().position(|g| g.0 == key) {
                Some(at) => at,
                None => {
                    groups.push((key, AllocatorEvents::default()));
                    groups.len() - 1
                }
            };
        }
        let u64_of = |s: Option<Stat>| s.and_then(|s| plane.stat_i64(&s)).map_or(0, |v| v.max(0) as u64);
        let g = &mut groups[last].1;
        g.lifetime_peak_bytes = g.lifetime_peak_bytes.max(u64_of(peak));
        g.max_fragmentation = g.max_fragmentation.max(fragmentation.and_then(|s| plane.stat_f64(&s)).unwrap_or(0.0));
        g.events.push(Event {
            time_ps: line.start_ps(i),
            addr: u64_of(addr),
            in_use_bytes: u64_of(in_use),
            line_alloc: l | if alloc { ALLOC_BIT } else { 0 },
            i: i as u32,
        });
    }
    line.release_stats(range);
    groups
}

/// The stats read as each allocator event is found (in one pass over its stats):
/// its allocator's name or index, and what the replay reads.
const FOUND: [K; 6] =
    [K::AllocatorName, K::IndexOnHost, K::Addr, K::BytesAllocated, K::PeakBytesInUse, K::Fragmentation];

/// Replays one allocator's events (sorted by time).
fn replay(h: &HostEvents, g: &AllocatorEvents, top: usize, max_points: usize) -> Allocator {
    let events = &g.events[..];
    let mut a = Allocator {
        host: h.space.host.clone(),
        name: g.name.clone(),
        allocations: 0,
        deallocations: 0,
        peak_in_use_bytes: 0,
        peak_time_ps: events.first().map_or(0, |e| e.time_ps),
        lifetime_peak_bytes: g.lifetime_peak_bytes,
        capacity_bytes: None,
        fragmentation_at_peak: 0.0,
        max_fragmentation: g.max_fragmentation,
        first_in_use_bytes: events.first().map_or(0, |e| e.in_use_bytes),
        last_in_use_bytes: events.last().map_or(0, |e| e.in_use_bytes),
        timeline: Vec::new(),
        live_at_peak: Vec::new(),
        untracked_at_peak_bytes: 0,
    };
    let mut peak_ix = 0usize;
    let mut points = Vec::with_capacity(events.len());
    for (ix, e) in events.iter().enumerate() {
        if e.alloc() {
            a.allocations += 1;
        } else {
            a.deallocations += 1;
        }
        points.push(MemoryPoint { time_ps: e.time_ps, in_use_bytes: e.in_use_bytes });
        if e.in_use_bytes > a.peak_in_use_bytes || ix == 0 {
            a.peak_in_use_bytes = e.in_use_bytes;
            a.peak_time_ps = e.time_ps;
            peak_ix = ix;
        }
    }
    if let Some(p) = events.get(peak_ix) {
        a.fragmentation_at_peak = h.f64(p, K::Fragmentation).unwrap_or(0.0);
        a.capacity_bytes = h.u64(p, K::BytesAvailable).map(|av| av.saturating_add(a.peak_in_use_bytes));
    }
    // The allocations live right after the peak's event.
    let mut live: FastMap<u64, usize> = FastMap::default();
    for (ix, e) in events.iter().enumerate().take(peak_ix + 1) {
        apply(&mut live, ix, e.alloc(), e.addr);
    }
    let peak_live: Vec<usize> = live.into_values().collect();
    let (live_at_peak, tracked) = live_allocations(h, events, &peak_live, top);
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
    let file = &*f.file;
    ["/jax/", "/jaxlib/", "/jax_plugins/", "/site-packages/", "<frozen", "/lib/python3"]
        .iter()
        .any(|p| file.contains(p))
        || file.is_empty()
}

fn frame_text(f: &Frame) -> String {
    if f.file.is_empty() {
        f.function.to_string()
    } else {
        format!("{} ({}:{})", f.function, f.file, f.line)
    }
}

fn summarise_pprof(path: &str, p: &Pprof, top: usize) -> DeviceMemoryProfile {
    let space = p.value_index("space");
    let bytes_of = |s: &stepscope_xspace::pprof::Sample| space.and_then(|ix| s.values.get(ix).copied()).unwrap_or(0);
    let count = p.value_index("allocations");
    let allocations = |keep: fn(Option<&str>) -> bool| {
        (p.samples.iter().filter(|s| keep(s.label("kind"))))
            .fold(0i64, |n, s| n.saturating_add(count.and_then(|ix| s.values.get(ix).copied()).unwrap_or(0)))
    };
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
        buffer_count: allocations(|kind| kind != Some("executable")),
        executable_count: allocations(|kind| kind == Some("executable")),
        by_device: ranked(by_device),
        by_kind: ranked(by_kind),
        by_site,
    }
}
