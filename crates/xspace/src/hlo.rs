//! The part of `xla.HloProto` stepscope uses: modules, computations, instructions,
//! shapes and op metadata (the JAX name stack and source line).
//!
//! JAX stores one serialized `HloProto` per compiled module on the `/host:metadata`
//! plane (stat `Hlo Proto` of an event metadata named like `jit_train_step(52)`).
//! [`hlo_modules`] finds them without decoding; each module is decoded on first use.
//! Field numbers are those in `shared/formats.md`; unknown fields are skipped.

use std::collections::HashMap;
use std::fmt;
use std::ops::Range;
use std::sync::{Arc, OnceLock};

use crate::model::{Plane, Source, Space, StatValue};
use crate::wire::{Wire, WireError, WireResult};
use crate::{Error, Result};

/// Deepest nesting of tuple shapes accepted; deeper is reported as damage.
pub const MAX_SHAPE_DEPTH: usize = 64;

/// `PrimitiveType` value of a tuple shape.
pub const TUPLE: i32 = 13;

/// The XLA text name of a `PrimitiveType` (`f32`, `bf16`, `pred`, …), if known.
pub fn primitive_type_name(element_type: i32) -> Option<&'static str> {
    Some(match element_type {
        1 => "pred",
        2 => "s8",
        3 => "s16",
        4 => "s32",
        5 => "s64",
        6 => "u8",
        7 => "u16",
        8 => "u32",
        9 => "u64",
        10 => "f16",
        11 => "f32",
        12 => "f64",
        13 => "tuple",
        14 => "opaque",
        15 => "c64",
        16 => "bf16",
        17 => "token",
        18 => "c128",
        19 => "f8e5m2",
        20 => "f8e4m3fn",
        21 => "s4",
        22 => "u4",
        23 => "f8e4m3b11fnuz",
        24 => "f8e5m2fnuz",
        25 => "f8e4m3fnuz",
        _ => return None,
    })
}

/// Bits one element of a `PrimitiveType` takes in memory, if known (0 for tuple,
/// token and opaque).
#[inline]
pub fn primitive_type_bits(element_type: i32) -> Option<u64> {
    Some(match element_type {
        21 | 22 => 4,
        1 | 2 | 6 | 19 | 20 | 23 | 24 | 25 => 8,
        3 | 7 | 10 | 16 => 16,
        4 | 8 | 11 => 32,
        5 | 9 | 12 | 15 => 64,
        18 => 128,
        13 | 14 | 17 => 0,
        _ => return None,
    })
}

/// An XLA shape: an array of one element type, or a tuple of shapes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Shape {
    /// `PrimitiveType` number (11 = f32, 13 = tuple, …).
    pub element_type: i32,
    /// Array dimensions, major to minor as written; empty for scalars and tuples.
    pub dims: Vec<i64>,
    /// Element shapes of a tuple.
    pub tuple: Vec<Shape>,
}

impl Shape {
    /// True for a tuple shape.
    #[inline]
    pub fn is_tuple(&self) -> bool {
        self.element_type == TUPLE || !self.tuple.is_empty()
    }

    /// Number of array elements (1 for a scalar; 0 for a tuple).
    #[inline]
    pub fn element_count(&self) -> u64 {
        if self.is_tuple() {
            return 0;
        }
        self.dims.iter().fold(1u64, |n, &d| n.saturating_mul(u64::try_from(d).unwrap_or(0)))
    }

    /// Number of array elements, a tuple's summed over its arrays.
    #[inline]
    pub fn array_elements(&self) -> u64 {
        if self.is_tuple() {
            return self.tuple.iter().map(Shape::array_elements).fold(0, u64::saturating_add);
        }
        self.element_count()
    }

    /// Bytes of the array data: element size × number of elements, rounded up to whole
    /// bytes; a tuple is the sum of its elements. Unknown element types count 0.
    #[inline]
    pub fn bytes_size(&self) -> u64 {
        if self.is_tuple() {
            return self.tuple.iter().fold(0u64, |n, s| n.saturating_add(s.bytes_size()));
        }
        let bits = primitive_type_bits(self.element_type).unwrap_or(0);
        self.element_count().saturating_mul(bits).div_ceil(8)
    }
}

impl fmt::Display for Shape {
    /// XLA's text form without layout: `f32[8,32,64]`, `s32[]`, `(f32[2], pred[])`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_tuple() {
            f.write_str("(")?;
            for (i, s) in self.tuple.iter().enumerate() {
                if i > 0 {
                    f.write_str(", ")?;
                }
                write!(f, "{s}")?;
            }
            return f.write_str(")");
        }
        match primitive_type_name(self.element_type) {
            Some(name) => f.write_str(name)?,
            None => write!(f, "type{}", self.element_type)?,
        }
        f.write_str("[")?;
        for (i, d) in self.dims.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{d}")?;
        }
        f.write_str("]")
    }
}

/// One HLO instruction (an `HloInstructionProto`).
#[derive(Clone, Debug, Default)]
pub struct HloInstruction {
    /// Unique within the module, e.g. `copy_rsqrt_fusion`, `dot_general.62`.
    pub name: String,
    /// `fusion`, `dot`, `all-reduce`, `custom-call`, …
    pub opcode: String,
    pub shape: Shape,
    /// `OpMetadata.op_type` (empty in JAX-produced modules seen so far).
    pub op_type: String,
    /// `OpMetadata.op_name`: the JAX name stack, e.g. `jit(train_step)/jvp(mlp)/dot_general`;
    /// fused ops may join several with `;`.
    pub op_name: String,
    /// `OpMetadata.source_file` / `source_line`: older JAX's one source line. Newer JAX
    /// leaves them empty and writes [`HloInstruction::stack_frame_id`] instead.
    pub source_file: String,
    pub source_line: i32,
    /// `OpMetadata.stack_frame_id`: the innermost frame of the Python stack that made
    /// the instruction, 1-based into the module's [`StackFrameIndex`] (0: none).
    pub stack_frame_id: i32,
    /// `kLoop`, `kInput`, `kOutput`, `kCustom` for fusions; empty otherwise.
    pub fusion_kind: String,
    pub custom_call_target: String,
    /// `dimensions`: of a reduce, broadcast, transpose, … (field 14).
    pub dimensions: Vec<i64>,
    /// A dot's `dot_dimension_numbers` (field 30).
    pub dot: Option<DotDims>,
    /// A convolution's or reduce-window's window (field 15), per spatial dimension.
    pub window: Vec<WindowDim>,
    /// A convolution's `convolution_dimension_numbers` (field 16).
    pub conv: Option<ConvDims>,
    /// `feature_group_count` / `batch_group_count` (fields 50, 58; 0 when absent).
    pub feature_group_count: i64,
    pub batch_group_count: i64,
    /// A `parameter`'s number (field 9): in a fusion's body, parameter k is the
    /// fusion's operand k.
    pub parameter_number: i64,
    /// `backend_config` (field 43): JSON text on GPU (a gemm's dimension numbers, …).
    pub backend_config: String,
    /// Unique within the module (XLA puts the computation id in the top 32 bits).
    pub id: i64,
    pub operand_ids: Vec<i64>,
    pub called_computation_ids: Vec<i64>,
    /// A collective's participants per group: the size of its first replica group
    /// (`replica_groups`, field 49, each a `ReplicaGroup` of `replica_ids` 1; or
    /// `collective_device_list`, field 87: explicit groups 1, or an iota list 2 whose
    /// `num_devices_per_group` is 2). 0 when the instruction names none (every device).
    pub group_size: i64,
    /// A `collective-permute`'s `source_target_pairs` (field 52).
    pub source_target_pairs: i64,
}

impl HloInstruction {
    /// True for a `fusion` instruction.
    #[inline]
    pub fn is_fusion(&self) -> bool {
        self.opcode == "fusion"
    }
}

/// `DotDimensionNumbers`: 1 lhs_contracting, 2 rhs_contracting, 3 lhs_batch, 4 rhs_batch.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DotDims {
    pub lhs_contracting: Vec<i64>,
    pub rhs_contracting: Vec<i64>,
    pub lhs_batch: Vec<i64>,
    pub rhs_batch: Vec<i64>,
}

/// `ConvolutionDimensionNumbers`, the kernel's side: 3 kernel_input_feature,
/// 4 kernel_output_feature, 6 kernel_spatial (what a convolution's FLOPs need).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ConvDims {
    pub kernel_input_feature: i64,
    pub kernel_output_feature: i64,
    pub kernel_spatial: Vec<i64>,
    pub input_spatial: Vec<i64>,
    pub output_spatial: Vec<i64>,
}

/// One dimension of a `Window` (`WindowDimension`: 1 size, 2 stride, 3 padding_low,
/// 4 padding_high, 5 window_dilation, 6 base_dilation; dilations and strides of 0
/// read as 1).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WindowDim {
    pub size: i64,
    pub stride: i64,
    pub padding_low: i64,
    pub padding_high: i64,
    pub window_dilation: i64,
    pub base_dilation: i64,
}

/// One HLO computation (an `HloComputationProto`).
#[derive(Clone, Debug, Default)]
pub struct HloComputation {
    pub name: String,
    pub id: i64,
    /// Id of the root instruction.
    pub root_id: i64,
    /// Set on the body of a fusion instruction.
    pub is_fusion: bool,
    pub instructions: Vec<HloInstruction>,
}

impl HloComputation {
    /// The root instruction, if present.
    #[inline]
    pub fn root(&self) -> Option<&HloInstruction> {
        self.instructions.iter().find(|i| i.id == self.root_id)
    }
}

/// `StackFrameIndexProto.FileLocation`: 1-based ids into the index's names.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FileLocation {
    pub file_id: i32,
    pub function_id: i32,
    pub line: i32,
    pub column: i32,
}

/// `StackFrameIndexProto.StackFrame`: its location and its caller (1-based; 0 none).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StackFrame {
    pub location_id: i32,
    pub parent_id: i32,
}

/// A module's interned Python stacks (`HloModuleProto.stack_frame_index`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StackFrameIndex {
    pub file_names: Vec<String>,
    pub function_names: Vec<String>,
    pub locations: Vec<FileLocation>,
    pub frames: Vec<StackFrame>,
}

/// One frame of an instruction's Python stack.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Frame<'a> {
    pub file: &'a str,
    pub function: &'a str,
    pub line: i32,
    pub column: i32,
}

impl StackFrameIndex {
    /// The stack whose innermost frame is `frame_id` (1-based), innermost first. A
    /// frame that names no location or a caller out of range ends the stack; a cycle
    /// cannot make it longer than the index.
    pub fn stack(&self, frame_id: i32) -> Vec<Frame<'_>> {
        let mut out = Vec::new();
        let mut id = frame_id;
        while id > 0 && out.len() < self.frames.len() {
            let Some(f) = self.frames.get(id as usize - 1) else { break };
            let Some(loc) = usize::try_from(f.location_id - 1).ok().and_then(|i| self.locations.get(i)) else {
                break;
            };
            out.push(Frame {
                file: name(&self.file_names, loc.file_id),
                function: name(&self.function_names, loc.function_id),
                line: loc.line,
                column: loc.column,
            });
            id = f.parent_id;
        }
        out
    }
}

/// The name with 1-based id `id` (empty when out of range).
fn name(names: &[String], id: i32) -> &str {
    usize::try_from(id - 1).ok().and_then(|i| names.get(i)).map_or("", String::as_str)
}

/// One decoded HLO module with name and id indexes.
#[derive(Clone, Debug, Default)]
pub struct HloModule {
    pub name: String,
    pub id: i64,
    pub entry_computation_name: String,
    pub entry_computation_id: i64,
    pub computations: Vec<HloComputation>,
    /// The module's schedule, where it has one: per computation id, its instruction
    /// ids in execution order (`HloScheduleProto`).
    pub schedule: HashMap<i64, Vec<i64>>,
    /// The module's Python stack frames (`stack_frame_index`), which instructions
    /// point into by [`HloInstruction::stack_frame_id`].
    pub stack_frames: StackFrameIndex,
    /// instruction name → (computation index, instruction index)
    by_name: HashMap<String, (u32, u32)>,
    /// instruction id → (computation index, instruction index)
    by_instr_id: HashMap<i64, (u32, u32)>,
    /// computation id → computation index
    by_comp_id: HashMap<i64, u32>,
}

/// Collective opcodes; each also occurs with `-start` / `-done` (async) suffixes.
const COLLECTIVES: &[&str] = &[
    "all-reduce",
    "all-gather",
    "reduce-scatter",
    "all-to-all",
    "ragged-all-to-all",
    "collective-permute",
    "collective-broadcast",
];

/// The collective an opcode belongs to (`all-reduce-start` → `all-reduce`).
fn collective_of(opcode: &str) -> Option<&'static str> {
    let base = opcode
        .strip_suffix("-start")
        .or_else(|| opcode.strip_suffix("-done"))
        .or_else(|| opcode.strip_suffix("-update"))
        .unwrap_or(opcode);
    COLLECTIVES.iter().copied().find(|c| *c == base)
}

/// What a custom-call target computes, when it is a known library matmul or convolution.
/// The category of a custom call into the host's Python: JAX's `pure_callback`,
/// `io_callback` and `jax.debug.callback`/`print` lower to custom calls whose target is
/// `xla_python_{cpu,gpu}_callback` or its FFI spelling `xla_ffi_python_{cpu,gpu}_callback`
/// (also `xla_ffi_partitioned_python_…`).
pub const HOST_CALLBACK: &str = "host callback";

fn custom_call_kind(target: &str) -> Option<&'static str> {
    let t = target.to_ascii_lowercase();
    if t.contains("python") && t.contains("callback") {
        Some(HOST_CALLBACK)
    } else if t.contains("gemm") || t.contains("matmul") {
        Some("dot")
    } else if t.contains("$conv") || t.contains("convolution") {
        Some("convolution")
    } else {
        None
    }
}

impl HloModule {
    /// Builds the indexes; used by the decoder and by tests that make modules by hand.
    pub fn new(name: String, id: i64, entry_computation_id: i64, computations: Vec<HloComputation>) -> HloModule {
        let mut m = HloModule { name, id, entry_computation_id, computations, ..HloModule::default() };
        m.index();
        m
    }

    fn index(&mut self) {
        let n: usize = self.computations.iter().map(|c| c.instructions.len()).sum();
        self.by_name = HashMap::with_capacity(n);
        self.by_instr_id = HashMap::with_capacity(n);
        self.by_comp_id = HashMap::with_capacity(self.computations.len());
        for (ci, c) in self.computations.iter().enumerate() {
            self.by_comp_id.entry(c.id).or_insert(ci as u32);
            for (ii, instr) in c.instructions.iter().enumerate() {
                let at = (ci as u32, ii as u32);
                self.by_name.entry(instr.name.clone()).or_insert(at);
                self.by_instr_id.entry(instr.id).or_insert(at);
            }
        }
    }

    fn at(&self, (ci, ii): (u32, u32)) -> Option<(&HloComputation, &HloInstruction)> {
        let c = self.computations.get(ci as usize)?;
        Some((c, c.instructions.get(ii as usize)?))
    }

    /// The instruction called `name` and the computation holding it.
    #[inline]
    pub fn instruction(&self, name: &str) -> Option<(&HloComputation, &HloInstruction)> {
        self.at(*self.by_name.get(name)?)
    }

    /// The instruction with id `id` (ids are unique within a module).
    #[inline]
    pub fn instruction_by_id(&self, id: i64) -> Option<(&HloComputation, &HloInstruction)> {
        self.at(*self.by_instr_id.get(&id)?)
    }

    /// The operands of `instr` that the module holds, in order.
    pub fn operands<'m>(&'m self, instr: &'m HloInstruction) -> impl Iterator<Item = &'m HloInstruction> + 'm {
        instr.operand_ids.iter().filter_map(move |&id| self.instruction_by_id(id).map(|(_, i)| i))
    }

    /// The computation with id `id`.
    #[inline]
    pub fn computation(&self, id: i64) -> Option<&HloComputation> {
        self.computations.get(*self.by_comp_id.get(&id)? as usize)
    }

    /// A computation that calls itself, directly or through others, when the module
    /// has such a cycle (XLA never makes one: the module is damaged). Walks that
    /// follow calls visit each computation once, so a cycle cannot make them loop.
    pub fn call_cycle(&self) -> Option<&HloComputation> {
        // Depth-first over the call graph with an explicit stack: 1 = on the path, 2 = done.
        let mut state = vec![0u8; self.computations.len()];
        for root in 0..self.computations.len() {
            if state[root] != 0 {
                continue;
            }
            state[root] = 1;
            let mut stack = vec![(root, self.callees(root))];
            while let Some((at, callees)) = stack.last_mut() {
                let at = *at;
                match callees.next() {
                    Some(next) if state[next] == 1 => return self.computations.get(next),
                    Some(next) if state[next] == 0 => {
                        state[next] = 1;
                        let it = self.callees(next);
                        stack.push((next, it));
                    }
                    Some(_) => {}
                    None => {
                        state[at] = 2;
                        stack.pop();
                    }
                }
            }
        }
        None
    }

    /// The indexes of the computations that computation `index` calls.
    fn callees(&self, index: usize) -> std::vec::IntoIter<usize> {
        let c = &self.computations[index];
        let ids = c.instructions.iter().flat_map(|i| i.called_computation_ids.iter());
        ids.filter_map(|id| self.by_comp_id.get(id).map(|&k| k as usize)).collect::<Vec<_>>().into_iter()
    }

    /// The entry computation.
    #[inline]
    pub fn entry(&self) -> Option<&HloComputation> {
        self.computation(self.entry_computation_id)
    }

    /// Number of instructions in all computations.
    #[inline]
    pub fn instruction_count(&self) -> usize {
        self.computations.iter().map(|c| c.instructions.len()).sum()
    }

    /// Every instruction with its computation, computation by computation.
    #[inline]
    pub fn instructions(&self) -> impl Iterator<Item = (&HloComputation, &HloInstruction)> {
        self.computations.iter().flat_map(|c| c.instructions.iter().map(move |i| (c, i)))
    }

    /// For a fusion instruction, its fused computation: the first called computation,
    /// when it is marked as a fusion body or the caller is a `fusion`.
    #[inline]
    pub fn fused_body(&self, instr: &HloInstruction) -> Option<&HloComputation> {
        let callee = self.computation(*instr.called_computation_ids.first()?)?;
        (callee.is_fusion || instr.is_fusion()).then_some(callee)
    }

    /// The category stepscope shows for an op when the profile carries no `hlo_category`:
    /// - `dot`, `convolution` (also library custom-calls such as `__cublas$gemm`),
    /// - `dot fusion` / `convolution fusion` for fusions whose body does a matmul/conv,
    /// - `loop fusion`, `input fusion`, `output fusion`, `custom fusion` from the fusion kind,
    /// - the collective (`all-reduce`, `all-gather`, … also for `-start`/`-done` and
    ///   async wrappers of them),
    /// - `copy` (copy, copy-start, copy-done), `host callback` (a custom call into the
    ///   host's Python), `custom-call`,
    /// - `data formatting` for transpose, bitcast, reshape, broadcast,
    /// - else the opcode.
    pub fn category(&self, instr: &HloInstruction) -> String {
        let op = instr.opcode.as_str();
        if let Some(c) = collective_of(op) {
            return c.to_string();
        }
        let cat = match op {
            "dot" => "dot",
            "convolution" => "convolution",
            "fusion" => return self.fusion_category(instr),
            "custom-call" => custom_call_kind(&instr.custom_call_target).unwrap_or("custom-call"),
            "copy" | "copy-start" | "copy-done" => "copy",
            "transpose" | "bitcast" | "reshape" | "broadcast" => "data formatting",
            "async-start" | "async-update" | "async-done" => {
                let wrapped = instr
                    .called_computation_ids
                    .first()
                    .and_then(|&id| self.computation(id))
                    .and_then(HloComputation::root);
                match wrapped.and_then(|r| collective_of(&r.opcode)) {
                    Some(c) => c,
                    None => op,
                }
            }
            _ => op,
        };
        cat.to_string()
    }

    fn fusion_category(&self, instr: &HloInstruction) -> String {
        if let Some(kind) = self.fused_body(instr).and_then(|b| self.matmul_kind(b)) {
            return format!("{kind} fusion");
        }
        match instr.fusion_kind.as_str() {
            "kLoop" => "loop fusion".into(),
            "kInput" => "input fusion".into(),
            "kOutput" => "output fusion".into(),
            "kCustom" => "custom fusion".into(),
            _ => "fusion".into(),
        }
    }

    /// `convolution` or `dot` when `body`, or a computation it calls (a few levels down),
    /// does a convolution or matmul; convolution wins.
    fn matmul_kind(&self, body: &HloComputation) -> Option<&'static str> {
        let mut stack = vec![(body, 0usize)];
        let mut seen = vec![body.id];
        let mut found = None;
        while let Some((c, depth)) = stack.pop() {
            for i in &c.instructions {
                let kind = match i.opcode.as_str() {
                    "convolution" => Some("convolution"),
                    "dot" => Some("dot"),
                    "custom-call" => custom_call_kind(&i.custom_call_target).filter(|&k| k != HOST_CALLBACK),
                    _ => None,
                };
                match kind {
                    Some("convolution") => return Some("convolution"),
                    Some(k) => found = Some(k),
                    None => {}
                }
                if depth < 4 {
                    for &id in &i.called_computation_ids {
                        if let Some(callee) = self.computation(id) {
                            if !seen.contains(&id) {
                                seen.push(id);
                                stack.push((callee, depth + 1));
                            }
                        }
                    }
                }
            }
        }
        found
    }
}

// ------------------------------------------------------------------ decoding

fn damaged(e: WireError) -> Error {
    Error::new(
        format!("an HLO module in the profile is not readable: {e}"),
        "the profile's /host:metadata plane is damaged; capture the profile again",
    )
}

/// Decodes a serialized `xla.HloProto` (the bytes of an `Hlo Proto` stat).
pub fn decode_hlo_proto(bytes: &[u8]) -> Result<HloModule> {
    let mut w = Wire::new(bytes);
    let mut module = None;
    while !w.done() {
        let (field, wt) = w.key().map_err(damaged)?;
        match field {
            1 => {
                let r = w.bytes(wt).map_err(damaged)?;
                module = Some(decode_module(w.sub(r)).map_err(damaged)?);
            }
            _ => w.skip(wt).map_err(damaged)?,
        }
    }
    module.ok_or_else(|| {
        Error::new(
            "an HLO proto in the profile holds no module",
            "the profile's /host:metadata plane is damaged; capture the profile again",
        )
    })
}

fn decode_module(mut w: Wire<'_>) -> WireResult<HloModule> {
    let mut m = HloModule::default();
    while !w.done() {
        let (field, wt) = w.key()?;
        match field {
            1 => m.name = w.string(wt)?,
            2 => m.entry_computation_name = w.string(wt)?,
            3 => {
                let r = w.bytes(wt)?;
                m.computations.push(decode_computation(w.sub(r))?);
            }
            5 => m.id = w.int(wt)?,
            6 => m.entry_computation_id = w.int(wt)?,
            7 => {
                let r = w.bytes(wt)?;
                decode_schedule(w.sub(r), &mut m.schedule)?;
            }
            17 => {
                let r = w.bytes(wt)?;
                m.stack_frames = decode_stack_frames(w.sub(r))?;
            }
            _ => w.skip(wt)?,
        }
    }
    m.index();
    Ok(m)
}

/// `HloScheduleProto`: 1 sequences, a map of computation id (entry field 1) to an
/// `InstructionSequence` (entry field 2) whose field 1 is the instruction ids.
fn decode_schedule(mut w: Wire<'_>, out: &mut HashMap<i64, Vec<i64>>) -> WireResult<()> {
    w.each_message(1, |mut entry| {
        let (mut computation, mut ids) = (0i64, Vec::new());
        while !entry.done() {
            let (f, wt) = entry.key()?;
            match f {
                1 => computation = entry.int(wt)?,
                2 => {
                    let r = entry.bytes(wt)?;
                    let mut seq = entry.sub(r);
                    while !seq.done() {
                        let (f, wt) = seq.key()?;
                        match f {
                            1 => seq.repeated_int(wt, &mut ids)?,
                            _ => seq.skip(wt)?,
                        }
                    }
                }
                _ => entry.skip(wt)?,
            }
        }
        out.insert(computation, ids);
        Ok(())
    })
}

/// `StackFrameIndexProto`: 1 file_names, 2 function_names, 3 file_locations
/// (`FileLocation`: 1 file_name_id, 2 function_name_id, 3 line, 4 column), 4
/// stack_frames (`StackFrame`: 1 file_location_id, 2 parent_frame_id); ids are 1-based.
fn decode_stack_frames(mut w: Wire<'_>) -> WireResult<StackFrameIndex> {
    let mut x = StackFrameIndex::default();
    while !w.done() {
        let (field, wt) = w.key()?;
        match field {
            1 => x.file_names.push(w.string(wt)?),
            2 => x.function_names.push(w.string(wt)?),
            3 | 4 => {
                let r = w.bytes(wt)?;
                let mut m = w.sub(r);
                let mut v = [0i32; 4];
                while !m.done() {
                    let (f, wt) = m.key()?;
                    match f {
                        1..=4 => v[f as usize - 1] = m.int(wt)? as i32,
                        _ => m.skip(wt)?,
                    }
                }
                if field == 3 {
                    x.locations.push(FileLocation { file_id: v[0], function_id: v[1], line: v[2], column: v[3] });
                } else {
                    x.frames.push(StackFrame { location_id: v[0], parent_id: v[1] });
                }
            }
            _ => w.skip(wt)?,
        }
    }
    Ok(x)
}

fn decode_computation(mut w: Wire<'_>) -> WireResult<HloComputation> {
    let mut c = HloComputation::default();
    while !w.done() {
        let (field, wt) = w.key()?;
        match field {
            1 => c.name = w.string(wt)?,
            2 => {
                let r = w.bytes(wt)?;
                c.instructions.push(decode_instruction(w.sub(r))?);
            }
            5 => c.id = w.int(wt)?,
            6 => c.root_id = w.int(wt)?,
            7 => c.is_fusion = w.int(wt)? != 0,
            _ => w.skip(wt)?,
        }
    }
    Ok(c)
}

fn decode_instruction(mut w: Wire<'_>) -> WireResult<HloInstruction> {
    let mut i = HloInstruction::default();
    while !w.done() {
        let (field, wt) = w.key()?;
        match field {
            1 => i.name = w.string(wt)?,
            2 => i.opcode = w.string(wt)?,
            3 => {
                let r = w.bytes(wt)?;
                i.shape = decode_shape(w.sub(r), 0)?;
            }
            7 => {
                let r = w.bytes(wt)?;
                decode_metadata(w.sub(r), &mut i)?;
            }
            11 => i.fusion_kind = w.string(wt)?,
            14 => w.repeated_int(wt, &mut i.dimensions)?,
            15 => {
                let r = w.bytes(wt)?;
                decode_window(w.sub(r), &mut i.window)?;
            }
            16 => {
                let r = w.bytes(wt)?;
                let mut c = ConvDims::default();
                let mut m = w.sub(r);
                while !m.done() {
                    let (f, wt) = m.key()?;
                    match f {
                        3 => c.kernel_input_feature = m.int(wt)?,
                        4 => c.kernel_output_feature = m.int(wt)?,
                        6 => m.repeated_int(wt, &mut c.kernel_spatial)?,
                        11 => m.repeated_int(wt, &mut c.input_spatial)?,
                        12 => m.repeated_int(wt, &mut c.output_spatial)?,
                        _ => m.skip(wt)?,
                    }
                }
                i.conv = Some(c);
            }
            28 => i.custom_call_target = w.string(wt)?,
            30 => {
                let r = w.bytes(wt)?;
                let mut d = DotDims::default();
                let mut m = w.sub(r);
                while !m.done() {
                    let (f, wt) = m.key()?;
                    match f {
                        1 => m.repeated_int(wt, &mut d.lhs_contracting)?,
                        2 => m.repeated_int(wt, &mut d.rhs_contracting)?,
                        3 => m.repeated_int(wt, &mut d.lhs_batch)?,
                        4 => m.repeated_int(wt, &mut d.rhs_batch)?,
                        _ => m.skip(wt)?,
                    }
                }
                i.dot = Some(d);
            }
            43 => i.backend_config = w.string(wt)?,
            50 => i.feature_group_count = w.int(wt)?,
            58 => i.batch_group_count = w.int(wt)?,
            9 => i.parameter_number = w.int(wt)?,
            35 => i.id = w.int(wt)?,
            36 => w.repeated_int(wt, &mut i.operand_ids)?,
            38 => w.repeated_int(wt, &mut i.called_computation_ids)?,
            49 => {
                let r = w.bytes(wt)?;
                if i.group_size == 0 {
                    i.group_size = replica_group_size(w.sub(r))?;
                }
            }
            52 => {
                w.skip(wt)?;
                i.source_target_pairs += 1;
            }
            87 => {
                let r = w.bytes(wt)?;
                let mut m = w.sub(r);
                while !m.done() {
                    let (f, wt) = m.key()?;
                    match f {
                        1 => {
                            let r = m.bytes(wt)?;
                            if i.group_size == 0 {
                                i.group_size = replica_group_size(m.sub(r))?;
                            }
                        }
                        2 => {
                            let r = m.bytes(wt)?;
                            let mut iota = m.sub(r);
                            while !iota.done() {
                                let (f, wt) = iota.key()?;
                                match f {
                                    2 => i.group_size = iota.int(wt)?,
                                    _ => iota.skip(wt)?,
                                }
                            }
                        }
                        _ => m.skip(wt)?,
                    }
                }
            }
            _ => w.skip(wt)?,
        }
    }
    Ok(i)
}

/// The number of `replica_ids` (field 1, packed or not) of a `ReplicaGroup`.
fn replica_group_size(mut w: Wire<'_>) -> WireResult<i64> {
    let mut ids = Vec::new();
    while !w.done() {
        let (f, wt) = w.key()?;
        match f {
            1 => w.repeated_int(wt, &mut ids)?,
            _ => w.skip(wt)?,
        }
    }
    Ok(ids.len() as i64)
}

/// `Window`: 1 dimensions, each a [`WindowDim`].
fn decode_window(mut w: Wire<'_>, dims: &mut Vec<WindowDim>) -> WireResult<()> {
    w.each_message(1, |mut d| {
        let mut x = WindowDim::default();
        while !d.done() {
            let (f, wt) = d.key()?;
            match f {
                1 => x.size = d.int(wt)?,
                2 => x.stride = d.int(wt)?,
                3 => x.padding_low = d.int(wt)?,
                4 => x.padding_high = d.int(wt)?,
                5 => x.window_dilation = d.int(wt)?,
                6 => x.base_dilation = d.int(wt)?,
                _ => d.skip(wt)?,
            }
        }
        for v in [&mut x.stride, &mut x.window_dilation, &mut x.base_dilation] {
            *v = (*v).max(1);
        }
        dims.push(x);
        Ok(())
    })
}

fn decode_metadata(mut w: Wire<'_>, i: &mut HloInstruction) -> WireResult<()> {
    while !w.done() {
        let (field, wt) = w.key()?;
        match field {
            1 => i.op_type = w.string(wt)?,
            2 => i.op_name = w.string(wt)?,
            3 => i.source_file = w.string(wt)?,
            4 => i.source_line = w.int(wt)? as i32,
            15 => i.stack_frame_id = w.int(wt)? as i32,
            _ => w.skip(wt)?,
        }
    }
    Ok(())
}

fn decode_shape(mut w: Wire<'_>, depth: usize) -> WireResult<Shape> {
    if depth > MAX_SHAPE_DEPTH {
        return Err(WireError { at: w.pos(), what: "tuple shapes nested more than 64 deep" });
    }
    let mut s = Shape::default();
    while !w.done() {
        let (field, wt) = w.key()?;
        match field {
            2 => s.element_type = w.int(wt)? as i32,
            3 => w.repeated_int(wt, &mut s.dims)?,
            4 => {
                let r = w.bytes(wt)?;
                s.tuple.push(decode_shape(w.sub(r), depth + 1)?);
            }
            _ => w.skip(wt)?,
        }
    }
    Ok(s)
}

// ------------------------------------------------------------------ finding modules

/// Where a module's serialized bytes live.
enum HloBytes {
    /// A range of the profile's own bytes (the usual case: no copy).
    Shared(Arc<Source>, Range<usize>),
    /// A copy (bytes that were not in the source, e.g. decompressed).
    Owned(Vec<u8>),
}

/// One compiled module found on `/host:metadata`, decoded on first use.
pub struct HloEntry {
    /// The event metadata name, e.g. `jit_train_step(52)`.
    pub metadata_name: String,
    /// The module name: the metadata name without its `(N)` suffix, e.g. `jit_train_step`.
    pub name: String,
    /// The `program_id` stat; else the number in the `(N)` suffix (TPU writes a u64
    /// fingerprint there, kept as its i64 bit pattern); else the metadata id.
    pub program_id: i64,
    bytes: HloBytes,
    module: OnceLock<Result<HloModule>>,
    signature: OnceLock<Option<u64>>,
}

impl fmt::Debug for HloEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HloEntry")
            .field("metadata_name", &self.metadata_name)
            .field("program_id", &self.program_id)
            .field("bytes", &self.bytes().len())
            .finish()
    }
}

impl HloEntry {
    /// The serialized `HloProto`.
    #[inline]
    pub fn bytes(&self) -> &[u8] {
        match &self.bytes {
            HloBytes::Shared(src, r) => src.get(r.clone()).unwrap_or(&[]),
            HloBytes::Owned(v) => v,
        }
    }

    /// The program's buffer assignment (decoded on each call); `None` where the
    /// proto holds none.
    #[inline]
    pub fn buffer_assignment(&self) -> Result<Option<crate::buffers::BufferAssignment>> {
        crate::buffers::decode_buffer_assignment(self.bytes())
    }

    /// The decoded module (decoded on the first call, then cached).
    #[inline]
    pub fn module(&self) -> Result<&HloModule, &Error> {
        self.module.get_or_init(|| decode_hlo_proto(self.bytes())).as_ref()
    }

    /// What the program is in any process: a hash of its module's name and program
    /// shape (its parameters' and result's shapes), the same where two processes of a
    /// run compiled one jitted function for the same arguments, whatever number each
    /// gave it, whichever device it placed it on and whatever its autotuning chose.
    /// Computed on the first call; `None` where the proto cannot be read.
    #[inline]
    pub fn signature(&self) -> Option<u64> {
        *self.signature.get_or_init(|| signature(self.bytes()).ok())
    }
}

/// [`HloEntry::signature`] of a serialized `HloProto`.
fn signature(bytes: &[u8]) -> WireResult<u64> {
    let mut h = Fingerprint::default();
    Wire::new(bytes).each_message(1, |mut m| {
        while !m.done() {
            let at = m.pos();
            let (field, wt) = m.key()?;
            m.skip(wt)?;
            // 1: the module's name; 4: its program shape.
            if field == 1 || field == 4 {
                h.add(&bytes[at..m.pos()]);
            }
        }
        Ok(())
    })?;
    Ok(h.0)
}

/// A 64-bit hash of bytes, the same in every process and run (FNV-1a over 8-byte
/// words, then the rest byte by byte).
struct Fingerprint(u64);

impl Default for Fingerprint {
    fn default() -> Fingerprint {
        Fingerprint(0xcbf2_9ce4_8422_2325)
    }
}

impl Fingerprint {
    const PRIME: u64 = 0x0000_0100_0000_01b3;

    fn add(&mut self, bytes: &[u8]) {
        let mut words = bytes.chunks_exact(8);
        for w in &mut words {
            let v = u64::from_le_bytes(w.try_into().unwrap_or_default());
            self.0 = (self.0 ^ v).wrapping_mul(Self::PRIME).rotate_left(29);
        }
        for &b in words.remainder() {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(Self::PRIME);
        }
    }
}

/// Every HLO module of a space, by program id and by name; see [`hlo_modules`].
#[derive(Debug, Default)]
pub struct HloModules {
    entries: Vec<HloEntry>,
    by_program_id: HashMap<i64, usize>,
    by_name: HashMap<String, Vec<usize>>,
}

impl HloModules {
    /// All modules found, in metadata order.
    #[inline]
    pub fn entries(&self) -> &[HloEntry] {
        &self.entries
    }

    /// Number of modules found.
    #[inline]
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when the space holds no HLO modules.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The programs whose HLO cannot be decoded (a damaged profile), each with why:
    /// their ops have no category, cost or source line from the HLO.
    #[inline]
    pub fn unreadable(&self) -> Vec<(&str, String)> {
        self.entries.iter().filter_map(|e| Some((e.metadata_name.as_str(), e.module().err()?.to_string()))).collect()
    }

    /// The entry with program id `id`.
    #[inline]
    pub fn entry(&self, program_id: i64) -> Option<&HloEntry> {
        self.by_program_id.get(&program_id).map(|&i| &self.entries[i])
    }

    /// The module with program id `id`, decoded; `None` when absent or unreadable.
    #[inline]
    pub fn by_program_id(&self, program_id: i64) -> Option<&HloModule> {
        self.entry(program_id)?.module().ok()
    }

    /// Entries for `name`: a module name (`jit_train_step`; all compilations of it,
    /// ordered by program id) or a full metadata name (`jit_train_step(52)`).
    #[inline]
    pub fn entries_named(&self, name: &str) -> Vec<&HloEntry> {
        if let Some(ix) = self.by_name.get(name) {
            return ix.iter().map(|&i| &self.entries[i]).collect();
        }
        self.entries.iter().filter(|e| e.metadata_name == name).collect()
    }

    /// The module called `name` (see [`entries_named`](Self::entries_named)), decoded;
    /// with several compilations of one name, the one with the highest program id
    /// (the latest) that decodes.
    pub fn by_name(&self, name: &str) -> Option<&HloModule> {
        self.entries_named(name).into_iter().rev().find_map(|e| e.module().ok())
    }
}

/// Splits `jit_train_step(52)` into (`jit_train_step`, Some(52)); a u64 number is
/// kept as its i64 bit pattern.
fn split_suffix(name: &str) -> (&str, Option<i64>) {
    if let Some(body) = name.strip_suffix(')') {
        if let Some(open) = body.rfind('(') {
            let num = &body[open + 1..];
            let id = num.parse::<i64>().ok().or_else(|| num.parse::<u64>().ok().map(|v| v as i64));
            if id.is_some() {
                return (&body[..open], id);
            }
        }
    }
    (name, None)
}

/// Keeps `bytes` as a range of the plane's source when they lie in it, else copies them.
fn hold(plane: &Plane, bytes: &[u8]) -> HloBytes {
    let src: &[u8] = &plane.source;
    let (s, b) = (src.as_ptr() as usize, bytes.as_ptr() as usize);
    if b >= s && b + bytes.len() <= s + src.len() {
        let off = b - s;
        HloBytes::Shared(Arc::clone(&plane.source), off..off + bytes.len())
    } else {
        HloBytes::Owned(bytes.to_vec())
    }
}

/// Finds every module on the space's `/host:metadata` plane without decoding it.
pub fn hlo_modules(space: &Space) -> HloModules {
    let mut out = HloModules::default();
    let Some(plane) = space.plane("/host:metadata") else {
        return out;
    };
    let (Some(hlo_stat), pid_stat) = (plane.stat_id("Hlo Proto"), plane.stat_id("program_id")) else {
        return out;
    };
    for (idx, meta) in plane.event_meta.iter().enumerate() {
        let stats = plane.metadata_stats(idx as u32);
        let Some(bytes) = stats
            .iter()
            .find(|s| s.meta() == hlo_stat && matches!(s.value(), StatValue::Bytes(_) | StatValue::Str(_)))
            .and_then(|s| plane.stat_bytes(s))
        else {
            continue;
        };
        let metadata_name = plane.text(meta.name).to_string();
        let (name, suffix_id) = split_suffix(&metadata_name);
        let stat_id = pid_stat.and_then(|p| stats.iter().find(|s| s.meta() == p)).and_then(|s| match s.value() {
            StatValue::U64(v) => Some(v as i64),
            _ => plane.stat_i64(s),
        });
        let program_id = stat_id.or(suffix_id).unwrap_or(meta.id);
        let entry = HloEntry {
            name: name.to_string(),
            metadata_name: metadata_name.clone(),
            program_id,
            bytes: hold(plane, bytes),
            module: OnceLock::new(),
            signature: OnceLock::new(),
        };
        let i = out.entries.len();
        out.by_program_id.entry(program_id).or_insert(i);
        out.by_name.entry(entry.name.clone()).or_default().push(i);
        out.entries.push(entry);
    }
    for ix in out.by_name.values_mut() {
        ix.sort_by_key(|&i| out.entries[i].program_id);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stacks_follow_callers_and_stop_at_damage() {
        let loc = |file_id, function_id, line| FileLocation { file_id, function_id, line, column: 1 };
        let x = StackFrameIndex {
            file_names: vec!["train.py".into(), "model.py".into()],
            function_names: vec!["<module>".into(), "mlp".into()],
            locations: vec![loc(1, 1, 10), loc(2, 2, 42), loc(9, 9, 7)],
            frames: vec![
                StackFrame { location_id: 1, parent_id: 0 },
                StackFrame { location_id: 2, parent_id: 1 },
                // A cycle and a location out of range: damage, never a hang.
                StackFrame { location_id: 2, parent_id: 4 },
                StackFrame { location_id: 2, parent_id: 3 },
                StackFrame { location_id: 3, parent_id: 0 },
                StackFrame { location_id: 40, parent_id: 0 },
            ],
        };
        let s = x.stack(2);
        assert_eq!(
            s.iter().map(|f| (f.file, f.function, f.line)).collect::<Vec<_>>(),
            [("model.py", "mlp", 42), ("train.py", "<module>", 10)]
        );
        assert_eq!(x.stack(3).len(), x.frames.len(), "a cycle stops at the index's length");
        assert_eq!(
            x.stack(5).iter().map(|f| (f.file, f.line)).collect::<Vec<_>>(),
            [("", 7)],
            "unknown names are empty"
        );
        assert!(x.stack(6).is_empty() && x.stack(0).is_empty() && x.stack(99).is_empty() && x.stack(-3).is_empty());
    }
    use crate::xplane::read_xspace;
    use crate::Progress;

    const CPU: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/fixtures/cpu-transformer/plugins/profile");
    const ROCM: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/fixtures/rocm-mi300x-gemm/tw003.xplane.pb");
    const TPU: &str =
        concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/fixtures/tpu-v6e-inference/tpu_inference_2.xplane.pb");

    fn cpu_space() -> Space {
        let run = std::fs::read_dir(CPU).unwrap().next().unwrap().unwrap().path();
        read_xspace(&run.join("vm.xplane.pb"), &Progress::default()).unwrap()
    }

    #[test]
    fn cpu_train_step_module() {
        let space = cpu_space();
        let mods = hlo_modules(&space);
        // 27 `Hlo Proto` metadata entries, counted with Python protobuf (dynamic
        // message classes, as tests/support/xspace_ref.py builds them).
        assert_eq!(mods.len(), 27);
        let m = mods.by_name("jit_train_step").expect("jit_train_step decodes");
        assert_eq!(m.name, "jit_train_step");
        assert!(std::ptr::eq(m, mods.by_program_id(52).unwrap()));
        assert!(std::ptr::eq(m, mods.by_name("jit_train_step(52)").unwrap()));
        // Independent count: Python protobuf with a dynamic HloProto class built from the
        // field numbers in shared/formats.md, sum(len(c.instructions) for c in
        // module.computations) = 3648 over 309 computations, entry computation id 89.
        assert_eq!(m.computations.len(), 309);
        assert_eq!(m.instruction_count(), 3648);
        assert_eq!(m.entry_computation_id, 89);
        assert_eq!(m.entry().unwrap().name, "main.89");
        assert_eq!(m.entry().unwrap().instructions.len(), 359);

        let (comp, f) = m.instruction("copy_rsqrt_fusion").unwrap();
        assert_eq!(comp.id, 89);
        assert_eq!(f.opcode, "fusion");
        assert_eq!(f.fusion_kind, "kLoop");
        assert_eq!(f.shape.to_string(), "f32[8,32,1]");
        assert_eq!(f.shape.bytes_size(), 8 * 32 * 4);
        assert!(f.op_name.contains("jit(train_step)"), "{}", f.op_name);
        assert_eq!(f.op_name, "jit(train_step)/jvp(head)/rsqrt");
        let body = m.fused_body(f).expect("fused body");
        assert!(body.is_fusion);
        assert_eq!(body.name, "fused_computation.211");
        assert_eq!(body.root().unwrap().opcode, "rsqrt");
        assert_eq!(m.category(f), "loop fusion");
        assert_eq!(m.operands(f).count(), 1);
        assert_eq!(m.instruction_by_id(f.id).unwrap().1.name, "copy_rsqrt_fusion");

        let (_, y) = m.instruction("ynn_fusion.71").unwrap();
        assert_eq!(y.fusion_kind, "kCustom");
        assert_eq!(m.category(y), "dot fusion");
        let (_, y) = m.instruction("ynn_fusion.74").unwrap();
        assert_eq!(m.category(y), "custom fusion");
        let (_, d) = m.instruction("dot_general.62").unwrap();
        assert_eq!(m.category(d), "dot");
        assert_eq!(d.shape.to_string(), "f32[8,4,32,16]");
        let (_, b) = m.instruction("wrapped_broadcast").unwrap();
        assert_eq!(m.category(b), "loop fusion");
        assert!(m.instruction("add_add_fusion").is_some());
        assert!(m.instruction("no_such_op").is_none());

        // Every module of the run decodes.
        for e in mods.entries() {
            e.module().unwrap();
        }
        // Five compilations of jit__normal, ordered by program id.
        let pids: Vec<i64> = mods.entries_named("jit__normal").iter().map(|e| e.program_id).collect();
        assert_eq!(pids, vec![8, 12, 20, 24, 28]);
    }

    #[test]
    fn rocm_and_tpu_modules() {
        let space = read_xspace(ROCM.as_ref(), &Progress::default()).unwrap();
        let mods = hlo_modules(&space);
        assert_eq!(mods.len(), 16);
        // No program_id stat on ROCm: the `(N)` suffix is the id device events carry.
        let m = mods.by_program_id(5).unwrap();
        assert_eq!(m.name, "jit_dot");
        let (_, g) = m.instruction("gemm_fusion_dot_general.1").unwrap();
        assert_eq!(m.category(g), "dot fusion");
        let m = mods.by_program_id(64).unwrap();
        let (_, cc) = m.instruction("custom-call.1").unwrap();
        assert_eq!(cc.custom_call_target, "__cublas$gemm");
        assert_eq!(m.category(cc), "dot");
        assert_eq!(cc.source_line, 37);
        assert!(cc.source_file.ends_with("generate_gemm_trace.py"));
        assert!(cc.shape.is_tuple());

        let space = read_xspace(TPU.as_ref(), &Progress::default()).unwrap();
        let mods = hlo_modules(&space);
        assert_eq!(mods.len(), 4);
        let m = mods.by_program_id(9646411105960254074u64 as i64).unwrap();
        assert_eq!(m.name, "jit__psum");
        let (_, ar) = m.instruction("all-reduce").unwrap();
        assert_eq!(m.category(ar), "all-reduce");
        let m = mods.by_name("jit_f").unwrap();
        assert_eq!(m.instruction_count(), 31);
    }

    #[test]
    fn gpu_modules_hold_their_schedule() {
        const GPU: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/fixtures/gpu-bf16/plugins/profile");
        let run = std::fs::read_dir(GPU).unwrap().next().unwrap().unwrap().path();
        let space = read_xspace(&run.join("vm.xplane.pb"), &Progress::default()).unwrap();
        let m = hlo_modules(&space).by_name("jit_train_step").unwrap().clone();
        let entry = m.entry().unwrap();
        // The entry computation's sequence orders each of its instructions once.
        let seq = &m.schedule[&m.entry_computation_id];
        assert_eq!(seq.len(), entry.instructions.len());
        let mut ids: Vec<i64> = seq.clone();
        ids.sort_unstable();
        let mut theirs: Vec<i64> = entry.instructions.iter().map(|i| i.id).collect();
        theirs.sort_unstable();
        assert_eq!(ids, theirs);
        // Operands come before their users.
        let at: HashMap<i64, usize> = seq.iter().enumerate().map(|(p, &id)| (id, p)).collect();
        for i in &entry.instructions {
            for o in &i.operand_ids {
                assert!(at[o] < at[&i.id], "{} before its operand", i.name);
            }
        }
        // Fusion bodies have no sequence of their own; CPU and TPU modules here have one too.
        assert!(m.computations.iter().filter(|c| c.is_fusion).all(|c| !m.schedule.contains_key(&c.id)));
        assert!(!hlo_modules(&cpu_space()).by_name("jit_train_step").unwrap().schedule.is_empty());
    }

    #[test]
    fn modules_are_shareable_across_threads() {
        fn shareable<T: Send + Sync>() {}
        shareable::<HloModules>();
        shareable::<HloModule>();
    }

    #[test]
    fn shapes_print_like_xla() {
        let s = |t, d: &[i64]| Shape { element_type: t, dims: d.to_vec(), tuple: vec![] };
        assert_eq!(s(11, &[8, 32, 64]).to_string(), "f32[8,32,64]");
        assert_eq!(s(4, &[]).to_string(), "s32[]");
        assert_eq!(s(16, &[2]).bytes_size(), 4);
        assert_eq!(s(21, &[3]).bytes_size(), 2);
        let t = Shape { element_type: TUPLE, dims: vec![], tuple: vec![s(11, &[2]), s(4, &[])] };
        assert_eq!(t.to_string(), "(f32[2], s32[])");
        assert_eq!(t.bytes_size(), 12);
        assert_eq!(s(99, &[1]).to_string(), "type99[1]");
    }

    #[test]
    fn damaged_input_is_an_error() {
        let space = cpu_space();
        let mods = hlo_modules(&space);
        let good = mods.entries_named("jit_train_step")[0].bytes().to_vec();
        assert!(decode_hlo_proto(&good).is_ok());
        for cut in [1, 2, 10, 100, 1000, good.len() / 2, good.len() - 1] {
            assert!(decode_hlo_proto(&good[..cut]).is_err(), "cut at {cut}");
        }
        assert!(decode_hlo_proto(&[]).is_err());
        assert!(decode_hlo_proto(&[0xff; 64]).is_err());
        // Flipping bytes must never panic (errors are fine).
        for i in (0..good.len()).step_by(997) {
            let mut bad = good.clone();
            bad[i] ^= 0xa5;
            let _ = decode_hlo_proto(&bad);
        }
    }

    #[test]
    fn deep_tuple_nesting_is_an_error() {
        // ShapeProto nested 200 deep through field 4, inside instruction field 3,
        // computation field 2, module field 3, HloProto field 1.
        fn wrap(field: u8, inner: Vec<u8>) -> Vec<u8> {
            let mut v = vec![(field << 3) | 2];
            let mut n = inner.len();
            loop {
                let b = (n & 0x7f) as u8;
                n >>= 7;
                if n == 0 {
                    v.push(b);
                    break;
                }
                v.push(b | 0x80);
            }
            v.extend(inner);
            v
        }
        let mut shape = vec![0x10, 11];
        for _ in 0..200 {
            shape = wrap(4, shape);
        }
        let proto = wrap(1, wrap(3, wrap(2, wrap(3, shape))));
        let e = decode_hlo_proto(&proto).unwrap_err();
        assert!(e.to_string().contains("nested"), "{e}");
        // 10 levels are fine.
        let mut shape = vec![0x10, 11];
        for _ in 0..10 {
            shape = wrap(4, shape);
        }
        let proto = wrap(1, wrap(3, wrap(2, wrap(3, shape))));
        let m = decode_hlo_proto(&proto).unwrap();
        assert_eq!(m.computations[0].instructions[0].shape.to_string(), "((((((((((f32[]))))))))))");
    }
}
