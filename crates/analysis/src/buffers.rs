//! A program's memory as XLA planned it (XProf's memory viewer): its allocations by
//! kind, the heap simulator's replay of its temporaries over program order, the peak
//! and the buffers live at it, each with the HLO instruction that defines it, its
//! shape and its source line. From the program's buffer assignment
//! ([`stepscope_xspace::buffers`]), whatever ran.
//!
//! How the peak is found:
//! - The allocations other than the heap's (parameters, outputs, constants,
//!   thread-local and temporaries the simulator did not trace) are held whole for the
//!   whole run: their buffers are live throughout (buffers at one offset of one
//!   allocation alias each other and count once).
//! - The heap is the temporary allocation whose trace has the most events (the one
//!   the trace's buffers are assigned to). Its trace is replayed in order: an `ALLOC`
//!   takes the buffer's size, a `SHARE_WITH` takes nothing (the buffer lives in its
//!   canonical buffer's memory, which lives on until every buffer sharing it is
//!   freed), a `FREE` gives the memory back once no buffer holds it.
//! - The peak is the first event after which the heap holds the most; the buffers
//!   live there are the heap's live canonical buffers and every buffer of the held
//!   allocations.
//!
//! A live buffer's size is its logical buffer's (what the value needs); the heap's
//! allocation also holds padding and fragmentation, so its size can exceed the heap's
//! peak.

use std::collections::HashMap;

use serde::Serialize;
use stepscope_model::Profile;
use stepscope_xspace::buffers::{
    decode_buffer_allocations, BufferAllocation, BufferAssignment, HeapEvent, HeapEventKind, HeapTrace, LogicalBuffer,
};
use stepscope_xspace::hlo::{HloEntry, HloModule, HloModules};

use crate::ops::{self, GroupBy, OpRow};
use crate::source;

/// Most points of [`Buffers::usage`]: a longer replay is thinned to this many, its
/// peak kept.
pub const MAX_USAGE_POINTS: usize = 2000;

/// One program's memory plan.
#[derive(Clone, Debug, Serialize)]
pub struct Buffers {
    pub schema: &'static str,
    pub run: String,
    pub host: String,
    /// The program (`jit_train_step(52)`, as `hlo --module` takes it).
    pub program: String,
    pub module: String,
    pub program_id: i64,
    /// The memory space shown (0: the device's default memory).
    pub memory_space: i64,
    /// The sizes of the allocations in this memory space, summed, and by kind.
    pub allocated_bytes: u64,
    pub parameter_bytes: u64,
    pub output_bytes: u64,
    pub constant_bytes: u64,
    pub thread_local_bytes: u64,
    pub temporary_bytes: u64,
    /// The most the program holds at once: the held allocations (whole) and the
    /// heap's live buffers at its peak.
    pub peak_bytes: u64,
    /// The heap's replay; absent where the program has no traced heap in this space.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub heap: Option<Heap>,
    /// Buffers live at the peak, largest first (at most `top`).
    pub live_at_peak: Vec<LiveBuffer>,
    /// How many buffers are live at the peak, and their bytes (all of them; buffers
    /// sharing memory counted once).
    pub live_at_peak_count: u64,
    pub live_at_peak_bytes: u64,
    /// The allocations of this memory space, largest first (at most `top`).
    pub allocations: Vec<AllocationRow>,
    pub allocation_count: u64,
    /// The other memory spaces the program allocates in, with their bytes.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub other_memory_spaces: Vec<MemorySpace>,
    /// Every program of the host with a buffer assignment, the largest first.
    pub programs: Vec<ProgramRow>,
}

/// The heap simulator's replay of the program's temporaries.
#[derive(Clone, Debug, Serialize)]
pub struct Heap {
    /// The allocation the heap lives in, and its size.
    pub allocation: i64,
    pub size_bytes: u64,
    /// The most its live buffers hold at once.
    pub peak_live_bytes: u64,
    /// The event of the peak (0-based, program order) and the instruction there.
    pub peak_event: u64,
    pub peak_instruction: String,
    pub events: u64,
    /// What the program holds after each event: the held allocations plus the heap's
    /// live bytes (thinned to [`MAX_USAGE_POINTS`], the peak kept).
    pub usage: Vec<UsagePoint>,
    /// The heap's buffers over program order, the largest [`MAX_LIFETIMES`] (by size,
    /// then id): each from the event that took its memory to the one that freed it
    /// (buffers sharing memory are one, the canonical one named).
    pub lifetimes: Vec<Lifetime>,
    /// The heap's buffers in all.
    pub lifetime_count: u64,
}

/// The heap buffers a plan lists over program order, at most.
pub const MAX_LIFETIMES: usize = 256;

/// One heap buffer over program order.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Lifetime {
    /// The heap events (0-based, program order) that took and freed its memory.
    pub from_event: u64,
    pub to_event: u64,
    #[serde(flatten)]
    pub buffer: LiveBuffer,
}

/// The memory held after one heap event.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct UsagePoint {
    pub event: u64,
    pub instruction: String,
    pub bytes: u64,
}

/// A buffer live at the peak.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LiveBuffer {
    pub buffer_id: i64,
    pub size_bytes: u64,
    /// `parameter`, `output`, `constant`, `thread_local` or `temporary`.
    pub kind: &'static str,
    pub allocation: i64,
    /// The defining instruction, its opcode and the shape of this value of it.
    pub instruction: String,
    /// Which value of a tuple-shaped instruction (`[1]`: its second element); empty
    /// for an array.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub shape_index: Vec<i64>,
    pub opcode: String,
    pub shape: String,
    /// The JAX name stack and the user's line that made it (empty where unknown).
    pub op_name: String,
    pub source: String,
    /// Other buffers living in its memory (heap buffers shared with it, buffers of a
    /// held allocation at its offset).
    #[serde(skip_serializing_if = "stepscope_model::steps::is_zero")]
    pub shared_by: u64,
}

/// One allocation.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AllocationRow {
    pub index: i64,
    pub kind: &'static str,
    pub size_bytes: u64,
    pub buffers: u64,
    /// The entry parameter it holds, for a parameter.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parameter_number: Option<i64>,
    /// The instruction of its largest buffer.
    pub instruction: String,
}

/// Another memory space's allocations.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MemorySpace {
    pub memory_space: i64,
    pub allocated_bytes: u64,
    pub allocations: u64,
}

/// A program, for choosing one.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ProgramRow {
    pub program: String,
    pub module: String,
    pub program_id: i64,
    pub allocated_bytes: u64,
}

/// An allocation's kind, as the memory viewer groups them.
pub fn allocation_kind(a: &BufferAllocation) -> &'static str {
    if a.is_entry_computation_parameter {
        "parameter"
    } else if a.maybe_live_out {
        "output"
    } else if a.is_constant {
        "constant"
    } else if a.is_thread_local {
        "thread_local"
    } else {
        "temporary"
    }
}

/// Why a program's memory plan cannot be shown.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Missing {
    /// The profile holds no program with a buffer assignment.
    NoPrograms,
    /// No program is called this; the programs there are.
    NoSuchProgram(Vec<String>),
    /// The program's HLO cannot be read (the reason).
    Unreadable(String),
}

impl Missing {
    /// Why there is no plan to show, and what to do (`asked`: the program asked for).
    pub fn message(&self, asked: &str) -> String {
        match self {
            Missing::NoPrograms => "this profile holds no program's buffer assignment (no `Hlo Proto` on a \
                 `/host:metadata` plane) — capture an .xplane.pb with jax.profiler.trace; trace JSON files do \
                 not carry HLO"
                .into(),
            Missing::NoSuchProgram(there) => {
                let shown: Vec<&str> = there.iter().take(8).map(String::as_str).collect();
                let more = if there.len() > shown.len() {
                    format!(" and {} more", there.len() - shown.len())
                } else {
                    String::new()
                };
                format!("no program named {asked:?} — give one of: {}{more}", shown.join(", "))
            }
            Missing::Unreadable(why) => format!("{why} — capture the profile again, or copy it whole"),
        }
    }
}

/// The memory plan of `program` (a module name, the latest compilation of it, or a
/// program's full name `jit_f(12)`), by default the program that ran longest (else
/// the one that allocates most), in `memory_space` (0: device memory); `top` rows of
/// each list (0: all).
pub fn buffers(profile: &Profile, program: Option<&str>, memory_space: i64, top: usize) -> Result<Buffers, Missing> {
    let programs = ProgramsPart::of(profile, memory_space, 0);
    let by_module = || ops::ops(profile, GroupBy::Module, 0).ops;
    let (chosen, rows) = programs.choose(program, by_module)?;
    let entry = &profile.hlo_modules()[chosen.host].entries()[chosen.entry];
    plan_of(entry, (memory_space, top), (&profile.run, &profile.hosts[chosen.host].host), rows)
}

/// The plan of program `entry` (`memory_space`, `top`) of host `host` of run `run`,
/// among the run's programs `programs`.
pub fn plan_of(
    entry: &HloEntry,
    (memory_space, top): (i64, usize),
    (run, host): (&str, &str),
    programs: Vec<ProgramRow>,
) -> Result<Buffers, Missing> {
    let module = entry.module().map_err(|e| Missing::Unreadable(e.to_string()))?;
    let assignment = match entry.buffer_assignment() {
        Ok(Some(a)) => a,
        Ok(None) => return Err(Missing::NoPrograms),
        Err(e) => return Err(Missing::Unreadable(e.to_string())),
    };
    let mut out = plan(module, &assignment, memory_space, top);
    out.run = run.to_string();
    out.host = host.to_string();
    out.program = entry.metadata_name.clone();
    out.module = entry.name.clone();
    out.program_id = entry.program_id;
    out.programs = programs;
    Ok(out)
}

/// The programs with a buffer assignment of some hosts of a run, and those whose HLO
/// cannot be read: a run read a host at a time adds each host's ([`ProgramsPart::add`])
/// and chooses among them as the run read whole does.
#[derive(Default)]
pub struct ProgramsPart {
    found: Vec<Program>,
    /// Each unreadable program's name, full name and why.
    unreadable: Vec<(String, String, String)>,
}

/// A program with a buffer assignment: its host (its index in the run), its entry (its
/// index among the host's), its names and id, and its allocated bytes.
pub struct Program {
    pub host: usize,
    pub entry: usize,
    name: String,
    metadata_name: String,
    program_id: i64,
    allocated_bytes: u64,
}

impl ProgramsPart {
    /// The programs of `profile`'s hosts, their bytes in `memory_space`, its first host
    /// being host `first_host` of the run.
    pub fn of(profile: &Profile, memory_space: i64, first_host: usize) -> ProgramsPart {
        let mut part = ProgramsPart::default();
        for (host, modules) in profile.hlo_modules().iter().enumerate() {
            for (at, entry) in modules.entries().iter().enumerate() {
                match decode_buffer_allocations(entry.bytes()) {
                    Ok(Some(a)) => part.found.push(Program {
                        host: first_host + host,
                        entry: at,
                        name: entry.name.clone(),
                        metadata_name: entry.metadata_name.clone(),
                        program_id: entry.program_id,
                        allocated_bytes: space_bytes(&a, memory_space),
                    }),
                    Ok(None) => {}
                    Err(e) => part.unreadable.push((entry.name.clone(), entry.metadata_name.clone(), e.to_string())),
                }
            }
        }
        part
    }

    /// Adds a later host's.
    pub fn add(&mut self, other: ProgramsPart) {
        self.found.extend(other.found);
        self.unreadable.extend(other.unreadable);
    }

    /// The program `program` names (by default the one whose module ran longest on
    /// the devices, `by_module` the run's op profile by module; else the one that
    /// allocates most), and every program's row.
    pub fn choose(
        &self,
        program: Option<&str>,
        by_module: impl FnOnce() -> Vec<OpRow>,
    ) -> Result<(&Program, Vec<ProgramRow>), Missing> {
        let named = |name: &str, metadata_name: &str, want: &str| name == want || metadata_name == want;
        let unreadable = |want: &str| self.unreadable.iter().find(|(n, m, _)| named(n, m, want));
        if let Some((_, _, why)) = program.and_then(unreadable) {
            return Err(Missing::Unreadable(why.clone()));
        }
        if self.found.is_empty() {
            return Err(match self.unreadable.first() {
                Some((_, _, why)) => Missing::Unreadable(why.clone()),
                None => Missing::NoPrograms,
            });
        }
        let mut programs: Vec<ProgramRow> = (self.found.iter())
            .map(|p| ProgramRow {
                program: p.metadata_name.clone(),
                module: p.name.clone(),
                program_id: p.program_id,
                allocated_bytes: p.allocated_bytes,
            })
            .collect();
        programs.sort_by(|a, b| b.allocated_bytes.cmp(&a.allocated_bytes).then_with(|| a.program.cmp(&b.program)));
        programs.dedup_by(|a, b| a.program == b.program);
        let chosen = match program {
            Some(want) => (self.found.iter().filter(|p| named(&p.name, &p.metadata_name, want)))
                .max_by_key(|p| (p.metadata_name == want, p.program_id)),
            None => longest_running(&by_module(), &self.found)
                .or_else(|| self.found.iter().max_by_key(|p| (p.allocated_bytes, std::cmp::Reverse(p.program_id)))),
        };
        match chosen {
            Some(chosen) => Ok((chosen, programs)),
            None => Err(Missing::NoSuchProgram(programs.iter().map(|p| p.program.clone()).collect())),
        }
    }
}

/// The bytes allocated in `memory_space`.
fn space_bytes(allocations: &[BufferAllocation], memory_space: i64) -> u64 {
    (allocations.iter().filter(|x| x.color == memory_space)).fold(0u64, |n, x| n.saturating_add(x.size_bytes))
}

/// The found program whose module ran longest on the devices (`rows`: the op profile
/// by module).
fn longest_running<'a>(rows: &[OpRow], found: &'a [Program]) -> Option<&'a Program> {
    rows.iter().find_map(|r| {
        (found.iter().filter(|p| p.name == r.name))
            .max_by_key(|p| (r.program_id.is_some_and(|id| id as i64 == p.program_id), p.program_id))
    })
}

/// Where a live buffer's bytes are: in a held allocation, or in the heap at the peak.
struct Live<'a> {
    buffer: &'a LogicalBuffer,
    allocation: &'a BufferAllocation,
    shared_by: u64,
}

/// The memory plan of one program from its module and buffer assignment (the
/// [`Buffers`] fields naming the run, host and program left empty).
pub fn plan(module: &HloModule, a: &BufferAssignment, memory_space: i64, top: usize) -> Buffers {
    let by_id = a.buffers_by_id();
    let owners = a.allocation_of_buffers();
    let mine: Vec<usize> = (0..a.allocations.len()).filter(|&i| a.allocations[i].color == memory_space).collect();
    // The heap: the traced temporary allocation of this space with the most events.
    let heap_trace = (a.traces.iter())
        .filter_map(|t| Some((t, a.trace_allocation(t, &owners)?)))
        .filter(|(_, at)| mine.contains(at) && allocation_kind(&a.allocations[*at]) == "temporary")
        .max_by_key(|(t, at)| (t.events.len(), std::cmp::Reverse(*at)));
    let heap_at = heap_trace.map(|(_, at)| at);
    let mut live: Vec<Live> = Vec::new();
    let mut held_bytes = 0u64;
    for &i in mine.iter().filter(|&&i| Some(i) != heap_at) {
        let alloc = &a.allocations[i];
        held_bytes = held_bytes.saturating_add(alloc.size_bytes);
        live.extend(held_buffers(alloc, &by_id));
    }
    let heap = heap_trace.map(|(t, at)| {
        let (replay, peak_live) = replay(t, &by_id);
        for (id, shared_by) in peak_live {
            if let Some(b) = by_id.get(&id) {
                live.push(Live { buffer: b, allocation: &a.allocations[at], shared_by });
            }
        }
        let mut lived: Vec<(i64, usize, usize, u64)> = (replay.lived.iter())
            .map(|&(id, from, to)| (id, from, to, by_id.get(&id).map_or(0, |b| b.size_bytes)))
            .collect();
        let lifetime_count = lived.len() as u64;
        lived.sort_by(|x, y| y.3.cmp(&x.3).then(x.0.cmp(&y.0)));
        lived.truncate(MAX_LIFETIMES);
        let lifetimes = (lived.iter())
            .filter_map(|&(id, from, to, _)| {
                let buffer = by_id.get(&id)?;
                let l = Live { buffer, allocation: &a.allocations[at], shared_by: 0 };
                Some(Lifetime { from_event: from as u64, to_event: to as u64, buffer: live_row(module, &l) })
            })
            .collect();
        Heap {
            lifetimes,
            lifetime_count,
            allocation: a.allocations[at].index,
            size_bytes: a.allocations[at].size_bytes,
            peak_live_bytes: replay.peak_bytes,
            peak_event: replay.peak_event as u64,
            peak_instruction: t.events.get(replay.peak_event).map(|e| e.instruction.clone()).unwrap_or_default(),
            events: t.events.len() as u64,
            usage: thin(&replay.after, replay.peak_event)
                .into_iter()
                .map(|k| UsagePoint {
                    event: k as u64,
                    instruction: t.events[k].instruction.clone(),
                    bytes: held_bytes.saturating_add(replay.after[k]),
                })
                .collect(),
        }
    });
    let by_kind = |kind: &str| {
        (mine.iter().map(|&i| &a.allocations[i]))
            .filter(|x| allocation_kind(x) == kind)
            .fold(0u64, |n, x| n.saturating_add(x.size_bytes))
    };
    live.sort_by(|x, y| y.buffer.size_bytes.cmp(&x.buffer.size_bytes).then(x.buffer.id.cmp(&y.buffer.id)));
    let live_at_peak_bytes = live.iter().fold(0u64, |n, l| n.saturating_add(l.buffer.size_bytes));
    let mut allocations: Vec<AllocationRow> =
        mine.iter().map(|&i| allocation_row(module, &a.allocations[i], &by_id)).collect();
    allocations.sort_by(|x, y| y.size_bytes.cmp(&x.size_bytes).then(x.index.cmp(&y.index)));
    let mut spaces: Vec<MemorySpace> = Vec::new();
    for x in a.allocations.iter().filter(|x| x.color != memory_space) {
        match spaces.iter_mut().find(|s| s.memory_space == x.color) {
            Some(s) => {
                s.allocated_bytes = s.allocated_bytes.saturating_add(x.size_bytes);
                s.allocations += 1;
            }
            None => spaces.push(MemorySpace { memory_space: x.color, allocated_bytes: x.size_bytes, allocations: 1 }),
        }
    }
    spaces.sort_by_key(|s| s.memory_space);
    let cap = |n: usize| if top == 0 { n } else { n.min(top) };
    Buffers {
        schema: "stepscope.buffers/1",
        run: String::new(),
        host: String::new(),
        program: String::new(),
        module: String::new(),
        program_id: 0,
        memory_space,
        allocated_bytes: space_bytes(&a.allocations, memory_space),
        parameter_bytes: by_kind("parameter"),
        output_bytes: by_kind("output"),
        constant_bytes: by_kind("constant"),
        thread_local_bytes: by_kind("thread_local"),
        temporary_bytes: by_kind("temporary"),
        peak_bytes: held_bytes.saturating_add(heap.as_ref().map_or(0, |h| h.peak_live_bytes)),
        heap,
        live_at_peak_count: live.len() as u64,
        live_at_peak_bytes,
        live_at_peak: live.iter().take(cap(live.len())).map(|l| live_row(module, l)).collect(),
        allocation_count: allocations.len() as u64,
        allocations: allocations.into_iter().take(cap(mine.len())).collect(),
        other_memory_spaces: spaces,
        programs: Vec::new(),
    }
}

/// The buffers of a held allocation, one per offset: buffers at one offset alias one
/// another (a parameter and its bitcast, a tuple and its first element); the largest
/// stands for them, the others counted as sharing its memory.
fn held_buffers<'a>(alloc: &'a BufferAllocation, by_id: &HashMap<i64, &'a LogicalBuffer>) -> Vec<Live<'a>> {
    let mut at: Vec<(u64, &LogicalBuffer)> =
        (alloc.assigned.iter()).filter_map(|s| Some((s.offset_bytes, *by_id.get(&s.buffer_id)?))).collect();
    at.sort_by(|x, y| x.0.cmp(&y.0).then(y.1.size_bytes.cmp(&x.1.size_bytes)).then(x.1.id.cmp(&y.1.id)));
    let mut out: Vec<Live> = Vec::new();
    let mut last_offset = None;
    for (offset, buffer) in at {
        match out.last_mut() {
            Some(l) if last_offset == Some(offset) => l.shared_by += 1,
            _ => out.push(Live { buffer, allocation: alloc, shared_by: 0 }),
        }
        last_offset = Some(offset);
    }
    out
}

/// A heap trace replayed.
struct Replay {
    /// The heap's live bytes after each event.
    after: Vec<u64>,
    peak_bytes: u64,
    peak_event: usize,
    /// Each canonical buffer: (id, the event it was taken at, the event it was freed
    /// at; the last event for one never freed).
    lived: Vec<(i64, usize, usize)>,
}

/// The heap between two events of a replay.
#[derive(Default)]
struct HeapState {
    /// Per canonical buffer live now: how many buffers hold its memory.
    holders: HashMap<i64, u64>,
    /// Per buffer live now: the canonical buffer whose memory it holds.
    canonical_of: HashMap<i64, i64>,
    live_bytes: u64,
    /// The event being applied, and per canonical buffer live now the event it was
    /// taken at; each canonical buffer freed: (id, taken at, freed at).
    now: usize,
    born: HashMap<i64, usize>,
    lived: Vec<(i64, usize, usize)>,
}

impl HeapState {
    fn take(&mut self, id: i64, size: u64) {
        self.canonical_of.insert(id, id);
        self.holders.insert(id, 1);
        self.born.insert(id, self.now);
        self.live_bytes = self.live_bytes.saturating_add(size);
    }

    /// One event (see the module's note); a damaged trace's impossible event (a
    /// buffer allocated twice, freed while not live) changes nothing, and a buffer
    /// sharing memory no buffer holds takes its own.
    fn apply(&mut self, e: &HeapEvent, size: impl Fn(i64) -> u64) {
        if self.canonical_of.contains_key(&e.buffer_id) && e.kind != HeapEventKind::Free {
            return;
        }
        match e.kind {
            HeapEventKind::Alloc => self.take(e.buffer_id, size(e.buffer_id)),
            HeapEventKind::ShareWith => match self.canonical_of.get(&e.share_with).copied() {
                Some(root) => {
                    self.canonical_of.insert(e.buffer_id, root);
                    *self.holders.entry(root).or_default() += 1;
                }
                None => self.take(e.buffer_id, size(e.buffer_id)),
            },
            HeapEventKind::Free => {
                let Some(root) = self.canonical_of.remove(&e.buffer_id) else { return };
                let n = self.holders.entry(root).or_default();
                *n = n.saturating_sub(1);
                if *n == 0 {
                    self.holders.remove(&root);
                    self.live_bytes = self.live_bytes.saturating_sub(size(root));
                    if let Some(at) = self.born.remove(&root) {
                        self.lived.push((root, at, self.now));
                    }
                }
            }
        }
    }
}

/// Replays a heap trace (see the module's note); returns it and, for each canonical
/// buffer live at the peak, how many other buffers share its memory there.
fn replay(t: &HeapTrace, by_id: &HashMap<i64, &LogicalBuffer>) -> (Replay, Vec<(i64, u64)>) {
    let size = |id: i64| by_id.get(&id).map_or(0, |b| b.size_bytes);
    let mut heap = HeapState::default();
    let (mut peak_bytes, mut peak_event) = (0u64, 0usize);
    let mut after = Vec::with_capacity(t.events.len());
    for (k, e) in t.events.iter().enumerate() {
        heap.now = k;
        heap.apply(e, size);
        after.push(heap.live_bytes);
        if heap.live_bytes > peak_bytes {
            (peak_bytes, peak_event) = (heap.live_bytes, k);
        }
    }
    let last = t.events.len().saturating_sub(1);
    let mut lived = std::mem::take(&mut heap.lived);
    lived.extend(heap.born.iter().map(|(&id, &at)| (id, at, last)));
    // Again up to the peak, for what is live there.
    let mut at_peak = HeapState::default();
    for e in t.events.iter().take(peak_event + 1) {
        at_peak.apply(e, size);
    }
    let live = at_peak.holders.into_iter().map(|(id, n)| (id, n.saturating_sub(1))).collect();
    (Replay { after, peak_bytes, peak_event, lived }, live)
}

/// At most [`MAX_USAGE_POINTS`] event positions of `after`, in order: evenly spaced,
/// each bucket kept by its largest value, and the peak always.
fn thin(after: &[u64], peak: usize) -> Vec<usize> {
    if after.len() <= MAX_USAGE_POINTS {
        return (0..after.len()).collect();
    }
    let buckets = MAX_USAGE_POINTS - 1;
    let mut out: Vec<usize> = (0..buckets)
        .filter_map(|b| {
            let (lo, hi) = (b * after.len() / buckets, ((b + 1) * after.len() / buckets).min(after.len()));
            (lo..hi).max_by(|&x, &y| after[x].cmp(&after[y]).then(y.cmp(&x)))
        })
        .collect();
    if !out.contains(&peak) {
        out.push(peak);
        out.sort_unstable();
    }
    out
}

fn allocation_row(module: &HloModule, x: &BufferAllocation, by_id: &HashMap<i64, &LogicalBuffer>) -> AllocationRow {
    let largest = (x.assigned.iter().filter_map(|s| by_id.get(&s.buffer_id)))
        .max_by(|p, q| p.size_bytes.cmp(&q.size_bytes).then(q.id.cmp(&p.id)));
    AllocationRow {
        index: x.index,
        kind: allocation_kind(x),
        size_bytes: x.size_bytes,
        buffers: x.assigned.len() as u64,
        parameter_number: x.is_entry_computation_parameter.then_some(x.parameter_number),
        instruction: largest.map(|b| defined_by(module, b).0).unwrap_or_default(),
    }
}

/// The instruction defining a buffer (its name, the instruction when the module has it).
fn defined_by<'m>(
    module: &'m HloModule,
    b: &LogicalBuffer,
) -> (String, Option<&'m stepscope_xspace::hlo::HloInstruction>) {
    let found = (b.instruction_id != 0)
        .then(|| module.instruction_by_id(b.instruction_id))
        .flatten()
        .or_else(|| (!b.instruction_name.is_empty()).then(|| module.instruction(&b.instruction_name)).flatten());
    match found {
        Some((_, i)) => (i.name.clone(), Some(i)),
        None => (b.instruction_name.clone(), None),
    }
}

fn live_row(module: &HloModule, l: &Live) -> LiveBuffer {
    let (instruction, instr) = defined_by(module, l.buffer);
    let shape = instr.map(|i| {
        let mut s = &i.shape;
        for &k in &l.buffer.shape_index {
            match usize::try_from(k).ok().and_then(|k| s.tuple.get(k)) {
                Some(inner) => s = inner,
                None => break,
            }
        }
        s.to_string()
    });
    let stack = instr.map(|i| source::op_stack(module, i)).unwrap_or_default();
    LiveBuffer {
        buffer_id: l.buffer.id,
        size_bytes: l.buffer.size_bytes,
        kind: allocation_kind(l.allocation),
        allocation: l.allocation.index,
        opcode: instr.map(|i| i.opcode.clone()).unwrap_or_default(),
        shape: shape.unwrap_or_default(),
        op_name: instr.map(|i| i.op_name.clone()).unwrap_or_default(),
        source: source::user_frame(&stack).map(|f| f.location()).unwrap_or_default(),
        shared_by: l.shared_by,
        shape_index: l.buffer.shape_index.clone(),
        instruction,
    }
}

/// The programs' buffer assignments of one host, decoded on first use, for naming the
/// allocator's allocations a program's run made ([`Plans::planned_as`]).
pub struct Plans<'a> {
    modules: &'a HloModules,
    decoded: std::sync::Mutex<HashMap<String, Option<std::sync::Arc<BufferAssignment>>>>,
}

impl<'a> Plans<'a> {
    pub fn new(modules: &'a HloModules) -> Plans<'a> {
        Plans { modules, decoded: Default::default() }
    }

    /// True when the host holds a program of the module `name`.
    pub fn has(&self, name: &str) -> bool {
        !self.modules.entries_named(name).is_empty()
    }

    /// The latest compilation of `module` with a buffer assignment, decoded once.
    fn of(&self, module: &str) -> Option<std::sync::Arc<BufferAssignment>> {
        let mut decoded = self.decoded.lock().unwrap_or_else(|poison| poison.into_inner());
        decoded
            .entry(module.to_string())
            .or_insert_with(|| {
                let entries = self.modules.entries_named(module);
                entries.into_iter().rev().find_map(|e| e.buffer_assignment().ok().flatten()).map(std::sync::Arc::new)
            })
            .clone()
    }

    /// What an allocation of `requested_bytes` that a run of `module` made is in the
    /// module's plan, among its outputs and temporaries (what a run allocates):
    /// `temporaries` (the temporary allocation of that size, holding several buffers),
    /// `output NAME` / `temporary NAME` (the only one of that size, by the instruction
    /// of its largest buffer), `output (one of N)` where several of one kind have the
    /// size, `one of N allocations` of both kinds; `None` where none in device memory
    /// has that size (or the module is not there).
    pub fn planned_as(&self, module: &str, requested_bytes: u64) -> Option<String> {
        let a = self.of(module)?;
        // A run allocates its outputs and temporaries; its parameters and constants
        // are there before it starts.
        let matching: Vec<&BufferAllocation> = (a.allocations.iter())
            .filter(|x| x.color == 0 && x.size_bytes == requested_bytes)
            .filter(|x| matches!(allocation_kind(x), "output" | "temporary"))
            .collect();
        let kinds: Vec<&str> = matching.iter().map(|x| allocation_kind(x)).collect();
        match matching.as_slice() {
            [] => None,
            [one] if kinds[0] == "temporary" && one.assigned.len() > 1 => Some("temporaries".into()),
            [one] => {
                let by_id = a.buffers_by_id();
                let module = self.modules.by_name(module);
                let name = module.map(|m| allocation_row(m, one, &by_id).instruction).unwrap_or_default();
                Some(format!("{} {name}", kinds[0].replace('_', "-")).trim_end().to_string())
            }
            many if kinds.iter().all(|k| *k == kinds[0]) => {
                Some(format!("{} (one of {})", kinds[0].replace('_', "-"), many.len()))
            }
            many => Some(format!("one of {} allocations", many.len())),
        }
    }
}
