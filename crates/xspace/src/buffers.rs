//! A compiled program's buffer assignment: the `buffer_assignment` of its `xla.HloProto`
//! (field 3, beside the module), which XProf's memory viewer reads.
//!
//! Field numbers, as the public `xla/service/hlo.proto` gives them:
//!
//! - `BufferAssignmentProto`: 1 logical_buffers · 3 buffer_allocations ·
//!   4 heap_simulator_traces (2 buffer_aliases is not read).
//! - `LogicalBufferProto`: 1 id · 2 size · 3 defined_at (`Location`: 4 instruction_id ·
//!   2 instruction_name (deprecated) · 3 shape_index, repeated) · 4 color.
//! - `BufferAllocationProto`: 1 index · 2 size · 3 is_thread_local · 11 is_tuple ·
//!   5 is_entry_computation_parameter · 12 is_constant · 6 parameter_number ·
//!   7 maybe_live_out · 8 color · 9 assigned (`Assigned`: 1 logical_buffer_id · 2 offset
//!   · 3 size).
//! - `HeapSimulatorTrace`: 1 events (`Event`: 1 kind (0 ALLOC, 1 FREE, 2 SHARE_WITH) ·
//!   2 buffer_id · 3 computation_name · 4 instruction_name · 5 share_with_canonical_id)
//!   · 2 whole_module_simulation · 3 buffer_allocation_index.
//!
//! A trace's `buffer_allocation_index` does not name the allocation its buffers are
//! assigned to in the captures seen (JAX 0.4–0.8, CPU, GPU and TPU: it is the index
//! before allocations were renumbered); [`BufferAssignment::trace_allocation`] finds it
//! from the allocations' `assigned` lists instead.

use std::collections::HashMap;

use crate::wire::{Wire, WireError, WireResult};
use crate::{Error, Result};

/// One logical buffer: a value some instruction defines.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LogicalBuffer {
    pub id: i64,
    pub size_bytes: u64,
    /// The defining instruction's id (unique in the module), 0 when absent.
    pub instruction_id: i64,
    /// The defining instruction's name, where the proto still writes it (older XLA).
    pub instruction_name: String,
    /// Where in the instruction's (tuple) shape the value is; empty for an array.
    pub shape_index: Vec<i64>,
    /// The memory space (0: the device's default memory).
    pub color: i64,
}

/// One buffer placed in an allocation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Assigned {
    pub buffer_id: i64,
    pub offset_bytes: u64,
    pub size_bytes: u64,
}

/// One allocation: a block of memory the program holds while it runs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BufferAllocation {
    pub index: i64,
    pub size_bytes: u64,
    pub is_thread_local: bool,
    pub is_tuple: bool,
    pub is_entry_computation_parameter: bool,
    pub is_constant: bool,
    pub parameter_number: i64,
    pub maybe_live_out: bool,
    pub color: i64,
    pub assigned: Vec<Assigned>,
}

/// What the heap simulator did to a buffer, in program order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HeapEventKind {
    Alloc,
    Free,
    /// The buffer took the memory of another (canonical) buffer.
    ShareWith,
}

/// One heap simulator event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeapEvent {
    pub kind: HeapEventKind,
    pub buffer_id: i64,
    /// The instruction the simulator was at.
    pub computation: String,
    pub instruction: String,
    /// For [`HeapEventKind::ShareWith`]: the buffer whose memory is shared.
    pub share_with: i64,
}

/// One heap simulator run over (part of) the program.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HeapTrace {
    pub events: Vec<HeapEvent>,
    pub whole_module: bool,
    /// As written; see the module's note on why it is not read.
    pub buffer_allocation_index: i64,
}

/// A program's buffer assignment.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BufferAssignment {
    pub buffers: Vec<LogicalBuffer>,
    pub allocations: Vec<BufferAllocation>,
    pub traces: Vec<HeapTrace>,
}

impl BufferAssignment {
    /// The logical buffers by id.
    pub fn buffers_by_id(&self) -> HashMap<i64, &LogicalBuffer> {
        self.buffers.iter().map(|b| (b.id, b)).collect()
    }

    /// For each buffer id, the position in [`BufferAssignment::allocations`] of the
    /// allocation it is assigned to.
    pub fn allocation_of_buffers(&self) -> HashMap<i64, usize> {
        let mut out = HashMap::new();
        for (at, a) in self.allocations.iter().enumerate() {
            for s in &a.assigned {
                out.entry(s.buffer_id).or_insert(at);
            }
        }
        out
    }

    /// The position in [`BufferAssignment::allocations`] of the allocation a trace's
    /// buffers are assigned to: the one holding most of the buffers its events name
    /// (lowest position on a tie); `None` when it names none that is assigned.
    pub fn trace_allocation(&self, trace: &HeapTrace, owners: &HashMap<i64, usize>) -> Option<usize> {
        let mut counts: HashMap<usize, usize> = HashMap::new();
        for e in &trace.events {
            if let Some(&at) = owners.get(&e.buffer_id) {
                *counts.entry(at).or_default() += 1;
            }
        }
        counts.into_iter().max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(&a.0))).map(|(at, _)| at)
    }
}

fn damaged(e: WireError) -> Error {
    Error::new(
        format!("a program's buffer assignment in the profile is not readable: {e}"),
        "the profile's /host:metadata plane is damaged; capture the profile again",
    )
}

/// The buffer assignment of a serialized `xla.HloProto` (the bytes of an `Hlo Proto`
/// stat); `None` where the proto holds none.
pub fn decode_buffer_assignment(hlo_proto: &[u8]) -> Result<Option<BufferAssignment>> {
    decode(hlo_proto, true)
}

/// The allocations alone of [`decode_buffer_assignment`] (the logical buffers and
/// heap traces, most of its bytes, skipped): what sizing a program's plan needs.
pub fn decode_buffer_allocations(hlo_proto: &[u8]) -> Result<Option<Vec<BufferAllocation>>> {
    Ok(decode(hlo_proto, false)?.map(|a| a.allocations))
}

/// `whole`: the logical buffers and heap traces too.
fn decode(hlo_proto: &[u8], whole: bool) -> Result<Option<BufferAssignment>> {
    let mut w = Wire::new(hlo_proto);
    let mut out = None;
    while !w.done() {
        let (field, wt) = w.key().map_err(damaged)?;
        match field {
            3 => {
                let r = w.bytes(wt).map_err(damaged)?;
                out = Some(assignment(w.sub(r), whole).map_err(damaged)?);
            }
            _ => w.skip(wt).map_err(damaged)?,
        }
    }
    Ok(out)
}

/// A size as written: negative sizes (a damaged file) count 0.
fn size(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

fn assignment(mut w: Wire<'_>, whole: bool) -> WireResult<BufferAssignment> {
    let mut a = BufferAssignment::default();
    while !w.done() {
        let (field, wt) = w.key()?;
        match field {
            1 if whole => {
                let r = w.bytes(wt)?;
                a.buffers.push(logical_buffer(w.sub(r))?);
            }
            3 => {
                let r = w.bytes(wt)?;
                a.allocations.push(allocation(w.sub(r))?);
            }
            4 if whole => {
                let r = w.bytes(wt)?;
                a.traces.push(trace(w.sub(r))?);
            }
            _ => w.skip(wt)?,
        }
    }
    Ok(a)
}

fn logical_buffer(mut w: Wire<'_>) -> WireResult<LogicalBuffer> {
    let mut b = LogicalBuffer::default();
    while !w.done() {
        let (field, wt) = w.key()?;
        match field {
            1 => b.id = w.int(wt)?,
            2 => b.size_bytes = size(w.int(wt)?),
            3 => {
                let r = w.bytes(wt)?;
                let mut l = w.sub(r);
                while !l.done() {
                    let (f, wt) = l.key()?;
                    match f {
                        2 => b.instruction_name = l.string(wt)?,
                        3 => l.repeated_int(wt, &mut b.shape_index)?,
                        4 => b.instruction_id = l.int(wt)?,
                        _ => l.skip(wt)?,
                    }
                }
            }
            4 => b.color = w.int(wt)?,
            _ => w.skip(wt)?,
        }
    }
    Ok(b)
}

fn allocation(mut w: Wire<'_>) -> WireResult<BufferAllocation> {
    let mut a = BufferAllocation::default();
    while !w.done() {
        let (field, wt) = w.key()?;
        match field {
            1 => a.index = w.int(wt)?,
            2 => a.size_bytes = size(w.int(wt)?),
            3 => a.is_thread_local = w.int(wt)? != 0,
            5 => a.is_entry_computation_parameter = w.int(wt)? != 0,
            6 => a.parameter_number = w.int(wt)?,
            7 => a.maybe_live_out = w.int(wt)? != 0,
            8 => a.color = w.int(wt)?,
            9 => {
                let r = w.bytes(wt)?;
                let mut s = w.sub(r);
                let mut v = Assigned::default();
                while !s.done() {
                    let (f, wt) = s.key()?;
                    match f {
                        1 => v.buffer_id = s.int(wt)?,
                        2 => v.offset_bytes = size(s.int(wt)?),
                        3 => v.size_bytes = size(s.int(wt)?),
                        _ => s.skip(wt)?,
                    }
                }
                a.assigned.push(v);
            }
            11 => a.is_tuple = w.int(wt)? != 0,
            12 => a.is_constant = w.int(wt)? != 0,
            _ => w.skip(wt)?,
        }
    }
    Ok(a)
}

fn trace(mut w: Wire<'_>) -> WireResult<HeapTrace> {
    let mut t = HeapTrace::default();
    while !w.done() {
        let (field, wt) = w.key()?;
        match field {
            1 => {
                let r = w.bytes(wt)?;
                let mut e = w.sub(r);
                let mut ev = HeapEvent {
                    kind: HeapEventKind::Alloc,
                    buffer_id: 0,
                    computation: String::new(),
                    instruction: String::new(),
                    share_with: 0,
                };
                while !e.done() {
                    let (f, wt) = e.key()?;
                    match f {
                        1 => {
                            ev.kind = match e.int(wt)? {
                                1 => HeapEventKind::Free,
                                2 => HeapEventKind::ShareWith,
                                _ => HeapEventKind::Alloc,
                            }
                        }
                        2 => ev.buffer_id = e.int(wt)?,
                        3 => ev.computation = e.string(wt)?,
                        4 => ev.instruction = e.string(wt)?,
                        5 => ev.share_with = e.int(wt)?,
                        _ => e.skip(wt)?,
                    }
                }
                t.events.push(ev);
            }
            2 => t.whole_module = w.int(wt)? != 0,
            3 => t.buffer_allocation_index = w.int(wt)?,
            _ => w.skip(wt)?,
        }
    }
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hlo::hlo_modules;

    fn gpu_transformer() -> crate::Space {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/fixtures/gpu-transformer/plugins/profile");
        let run = std::fs::read_dir(dir).unwrap().next().unwrap().unwrap().path();
        crate::xplane::read_xspace(&run.join("vm.xplane.pb"), &crate::Progress::default()).unwrap()
    }

    #[test]
    fn every_program_of_a_capture_has_one_and_cut_bytes_are_errors() {
        let space = gpu_transformer();
        let mods = hlo_modules(&space);
        assert!(!mods.is_empty());
        for e in mods.entries() {
            let a = decode_buffer_assignment(e.bytes()).expect("decodes").expect("has one");
            assert!(!a.allocations.is_empty(), "{}", e.metadata_name);
            // Every assigned buffer is a logical buffer of the assignment.
            let ids = a.buffers_by_id();
            assert!(a.allocations.iter().flat_map(|x| &x.assigned).all(|s| ids.contains_key(&s.buffer_id)));
        }
        let bytes = mods.entries_named("jit_train_step")[0].bytes().to_vec();
        for cut in [bytes.len() - 1, bytes.len() - 10, bytes.len() - 1000] {
            assert!(decode_buffer_assignment(&bytes[..cut]).is_err(), "cut at {cut}");
        }
    }
}
