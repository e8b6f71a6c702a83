//! GPU kernel stats: every kernel launch on a device's stream lines, grouped by
//! kernel and launch configuration, with time, launch shape, registers, shared
//! memory, occupancy and a tensor-core guess.
//!
//! A kernel launch is any event on a `Stream #…` line of a `/device:…` plane that
//! carries a `kernel_details` stat; memcpy/memset events (no `kernel_details`) are
//! not kernels. Launches with the same kernel name, grid, block, registers, shared
//! memory, owning `hlo_op`, `hlo_module` and `program_id` make one row: an op is one
//! instruction of one program, so the GEMM of `jit_dot` compiled for two shapes is two
//! rows, each named with its program where several programs hold the op.

use std::collections::HashMap;

use serde::Serialize;
use stepscope_xspace::{Span, Stat, StatValue};

use stepscope_model::device::is_stream_line;
use stepscope_model::programs::{HostPrograms, RunPrograms};
use stepscope_model::records::{stat_u64, FastMap, OpRec};
use stepscope_model::{Keys, OpSource, Profile};

use crate::keyed::Keyed;

/// The kernel stats of a run.
#[derive(Clone, Debug, Serialize)]
pub struct Kernels {
    pub schema: &'static str,
    /// Sum of all kernel launches' durations, ps.
    pub kernel_time_ps: i64,
    /// Rows by `total_ps` descending, then name.
    pub kernels: Vec<KernelRow>,
}

/// One kernel with one launch configuration.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct KernelRow {
    /// Kernel name as the tracer recorded it.
    pub name: String,
    /// The owning HLO op (`hlo_op` stat); empty when the launch has none.
    pub op: String,
    /// The owning XLA module (`hlo_module` stat); empty when the launch has none.
    pub module: String,
    /// Number of launches.
    pub count: u64,
    pub total_ps: i64,
    pub avg_ps: i64,
    pub min_ps: i64,
    pub max_ps: i64,
    /// Grid dimensions in blocks (`[0, 0, 0]` when unknown).
    pub grid: [u32; 3],
    /// Block dimensions in threads (`[0, 0, 0]` when unknown).
    pub block: [u32; 3],
    pub registers_per_thread: Option<u32>,
    /// Static plus dynamic shared memory per block (ROCm: `group_mem`, LDS), bytes.
    pub shared_mem_bytes: Option<u64>,
    /// Achieved theoretical occupancy, percent. `None` when the tracer wrote none or
    /// wrote 0 (ROCm always writes `occ_pct:0`: it does not compute occupancy).
    pub occupancy_pct: Option<f64>,
    /// Whether the kernel uses tensor cores / matrix cores: the profile's flag where it
    /// has one, else its name's ([`uses_tensor_cores`]) or, for a kernel whose name
    /// cannot tell, its op's eligibility.
    pub tensor_core: bool,
    /// Whether the kernel's op could run on tensor cores, from its HLO's types and sizes
    /// ([`crate::cost::tensor_core_eligible`]); absent for an op that multiplies no
    /// matrices or is not found. Eligible but not `tensor_core`: the op's sizes or
    /// precision kept the library off them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tensor_core_eligible: Option<bool>,
    /// Share of [`Kernels::kernel_time_ps`], percent.
    pub time_pct: f64,
    /// The owning XLA program (`program_id` stat), when the launch has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub program_id: Option<u64>,
    /// Where several programs hold an op of this name and module: this row's program,
    /// `jit_dot(49)`, as the op profile names it ([`crate::ops::OpRow::program`]).
    /// Absent where the op's name and module are one program's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub program: Option<String>,
}

/// The fields of a `kernel_details` stat. Every field is `None` (or zero dims) when
/// absent or unparsable.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct KernelDetails {
    /// `regs` / `registers_per_thread`.
    pub registers_per_thread: Option<u32>,
    /// `static_shared` / `static_shared_memory_usage`, bytes.
    pub static_shared_bytes: Option<u64>,
    /// `dynamic_shared` / `dynamic_shared_memory_usage`, bytes.
    pub dynamic_shared_bytes: Option<u64>,
    /// ROCm `private_mem` (scratch per work-item), bytes.
    pub private_mem_bytes: Option<u64>,
    /// ROCm `group_mem` (LDS per work-group), bytes.
    pub group_mem_bytes: Option<u64>,
    /// `grid:x,y,z` or `grid_x`/`grid_y`/`grid_z`; `[0, 0, 0]` when absent, and a
    /// dimension that is not given reads as 1 when another one is.
    pub grid: [u32; 3],
    /// `block:x,y,z` or `block_x`/`block_y`/`block_z`; as `grid`.
    pub block: [u32; 3],
    /// `occ_pct` / `occupancy_pct`, as written (0 included).
    pub occupancy_pct: Option<f64>,
    /// An explicit tensor-core flag (`tensor_core`, `is_tensor_core`,
    /// `uses_tensor_core`, `is_kernel_using_tensor_core`) when the tracer wrote one.
    pub tensor_core: Option<bool>,
}

impl KernelDetails {
    /// Static plus dynamic shared memory, else ROCm `group_mem`; `None` when none is known.
    pub fn shared_mem_bytes(&self) -> Option<u64> {
        match (self.static_shared_bytes, self.dynamic_shared_bytes) {
            (None, None) => self.group_mem_bytes,
            (s, d) => Some(s.unwrap_or(0).saturating_add(d.unwrap_or(0))),
        }
    }
}

/// Parses a `kernel_details` stat such as
/// `regs:64 static_shared:0 dynamic_shared:49152 grid:16,16,1 block:256,1,1 occ_pct:50`.
///
/// Fields are `key:value` (or `key=value`) separated by whitespace; spaces after `:`
/// or around `,` are allowed, unknown keys are skipped and values that do not parse
/// leave their field unset. Never panics.
pub fn parse_kernel_details(text: &str) -> KernelDetails {
    let mut d = KernelDetails::default();
    let mut grid: [Option<u32>; 3] = [None; 3];
    let mut block: [Option<u32>; 3] = [None; 3];
    for (key, value) in fields(text) {
        let value = value.as_str();
        let key = key.to_ascii_lowercase();
        match key.as_str() {
            "regs" | "registers_per_thread" | "registers" | "num_regs" => d.registers_per_thread = num(value),
            "static_shared" | "static_shared_memory_usage" | "static_shared_mem" => d.static_shared_bytes = num(value),
            "dynamic_shared" | "dynamic_shared_memory_usage" | "dynamic_shared_mem" => {
                d.dynamic_shared_bytes = num(value)
            }
            "private_mem" | "private_segment_size" => d.private_mem_bytes = num(value),
            "group_mem" | "group_segment_size" => d.group_mem_bytes = num(value),
            "grid" | "grid_dim" | "grid_size" => grid = dims(value),
            "block" | "block_dim" | "block_size" => block = dims(value),
            "grid_x" => grid[0] = num(value),
            "grid_y" => grid[1] = num(value),
            "grid_z" => grid[2] = num(value),
            "block_x" => block[0] = num(value),
            "block_y" => block[1] = num(value),
            "block_z" => block[2] = num(value),
            "occ_pct" | "occupancy_pct" | "occupancy" => {
                d.occupancy_pct = value.trim_end_matches('%').parse::<f64>().ok().filter(|v| v.is_finite())
            }
            "tensor_core" | "is_tensor_core" | "uses_tensor_core" | "is_kernel_using_tensor_core" => {
                d.tensor_core = flag(value)
            }
            _ => {}
        }
    }
    d.grid = finish_dims(grid);
    d.block = finish_dims(block);
    d
}

/// Splits `text` into `(key, value)` fields. A field starts at a token holding `:` or
/// `=`; a following token without one continues the value when the value is still
/// empty or a `,` list is open (`regs: 40`, `grid: 2, 3 ,4`), and is dropped otherwise.
fn fields(text: &str) -> Vec<(&str, String)> {
    let mut out: Vec<(&str, String)> = Vec::new();
    for token in text.split_whitespace() {
        if let Some((key, value)) = token.split_once([':', '=']) {
            out.push((key, value.to_string()));
        } else if let Some((_, value)) = out.last_mut() {
            if value.is_empty() || value.ends_with(',') || token.starts_with(',') {
                value.push_str(token);
            }
        }
    }
    out
}

fn num<T: std::str::FromStr>(v: &str) -> Option<T> {
    v.trim().parse().ok()
}

fn flag(v: &str) -> Option<bool> {
    match v.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "y" => Some(true),
        "0" | "false" | "no" | "n" => Some(false),
        _ => None,
    }
}

/// `x,y,z` (brackets allowed); a missing or bad dimension stays `None`.
fn dims(v: &str) -> [Option<u32>; 3] {
    let v = v.trim_matches(|c| matches!(c, '(' | ')' | '[' | ']' | '{' | '}'));
    let mut out = [None; 3];
    for (slot, part) in out.iter_mut().zip(v.split(',')) {
        *slot = num(part);
    }
    out
}

fn finish_dims(d: [Option<u32>; 3]) -> [u32; 3] {
    if d.iter().all(Option::is_none) {
        [0; 3]
    } else {
        d.map(|x| x.unwrap_or(1))
    }
}

/// A matrix kernel whose name carries no type hint: XLA's and Triton's own GEMM and
/// convolution fusions (`gemm_fusion_dot…`, `triton_gemm…`, `fusion…`) and cuBLAS's
/// generated Hopper kernels (`nvjet_sm90_tst_128x160_…`: a tile, no type), whose
/// tensor-core use their op's HLO tells.
fn name_cannot_tell(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    lower.contains("gemm_fusion")
        || lower.contains("triton_gemm")
        || lower.starts_with("fusion")
        || lower.starts_with("nvjet")
}

/// Tensor-core (NVIDIA) / matrix-core (AMD MFMA) guess from a kernel name, used when
/// `kernel_details` has no explicit flag. True when the name:
/// - has an MMA instruction marker: `hmma`, `wmma`, `xmma`, `imma`, `wgmma`, `mfma`,
///   `tensorop`/`tensor_op`, or a word that starts with `mma` (`mma`, `mma16816`,
///   but not `gamma`);
/// - is a ROCm Tensile/hipBLASLt kernel (`Cijk_…`) whose tile has an `MI<m>x<n>…`
///   part (MFMA instructions; the non-MFMA tiles have no `MI`);
/// - is a GEMM/convolution (`gemm`, `cutlass`, a word starting `conv`) with a low-precision or
///   tensor-core shape hint: `f16`/`fp16`/`bf16`/`tf32`/`half`/`fp8`/`e4m3`/`e5m2`,
///   or cuBLAS shape codes `h884`, `h1688`, `h16816`, `s1688`, `s16816`, `i8816`,
///   `i16832` (e.g. `ampere_bf16_s16816gemm_…`, `sm80_xmma_gemm_bf16bf16_…`,
///   `cutlass_80_tensorop_…`); CUTLASS `simt` kernels excepted.
///
/// - is a fused attention kernel (`fmha`, `flash_fwd`/`flash_bwd`/`flash_attn`:
///   CK tile's `FmhaFwdKernel`, FlashAttention), whose matrix products run on them.
///
/// Plain `gemm` names without a dtype hint (XLA/Triton `gemm_fusion_dot…`) read as
/// false: the name cannot tell. Eigen's kernels (`EigenMetaKernel<…TensorConversionOp
/// <Eigen::half…>>`: element-wise, a dtype conversion) never use them.
pub fn uses_tensor_cores(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    if lower.contains("eigen") {
        return false;
    }
    let words = || lower.split(|c: char| !c.is_ascii_alphanumeric()).filter(|w| !w.is_empty());
    const MARKERS: [&str; 12] = [
        "hmma",
        "wmma",
        "xmma",
        "imma",
        "wgmma",
        "mfma",
        "tensorop",
        "tensor_op",
        "fmha",
        "flash_fwd",
        "flash_bwd",
        "flash_attn",
    ];
    if MARKERS.iter().any(|m| lower.contains(m)) {
        return true;
    }
    if words().any(|w| w.strip_prefix("mma").is_some_and(|r| r.chars().all(|c| c.is_ascii_digit()))) {
        return true;
    }
    if name.starts_with("Cijk_") && name.split('_').any(is_mfma_tile) {
        return true;
    }
    // A convolution, not a conversion (`convert_element_type`, `TensorConversionOp`).
    let conv = words().any(|w| w.starts_with("conv") && !w.starts_with("conver"));
    let matmul = conv || ["gemm", "cutlass"].iter().any(|m| lower.contains(m));
    const HINTS: [&str; 15] = [
        "f16", "fp16", "bf16", "tf32", "half", "fp8", "e4m3", "e5m2", "h884", "h1688", "h16816", "s1688", "s16816",
        "i8816", "i16832",
    ];
    matmul && !lower.contains("simt") && HINTS.iter().any(|h| lower.contains(h))
}

/// `MI16x16x16x1`, `MI32x32x8x1`: a Tensile MFMA tile part.
fn is_mfma_tile(part: &str) -> bool {
    part.strip_prefix("MI").is_some_and(|r| r.starts_with(|c: char| c.is_ascii_digit()) && r.contains('x'))
}

/// Grouping key: one row per kernel and launch configuration.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
struct Key<'a> {
    name: &'a str,
    grid: [u32; 3],
    block: [u32; 3],
    regs: Option<u32>,
    shared: Option<u64>,
    op: &'a str,
    module: &'a str,
    program: Option<u64>,
}

#[derive(Default)]
struct Acc {
    count: u64,
    total: i64,
    min: i64,
    max: i64,
    occupancy: Option<f64>,
    flag: Option<bool>,
}
stepscope_model::wire_struct!(Acc { count, total, min, max, occupancy, flag });

/// What identifies a stat's text without reading it: a ref's index, or the place of
/// an inline string in the file.
type TextKey = Option<(bool, Span)>;

fn text_key(s: Option<Stat>) -> TextKey {
    s.and_then(|s| match s.value() {
        StatValue::Ref(r) => Some((true, Span::source(u64::from(r), 0))),
        StatValue::Str(span) => Some((false, span)),
        _ => None,
    })
}

/// An op or module: an id of the device's op records, else its stat.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum Owner {
    Id(u32),
    Stat(TextKey),
}

/// Launches grouped by what identifies them cheaply (kernel metadata, details, op,
/// module, program), before their texts are read: one slot per group, in first-seen
/// order.
type SlotKey = (u32, TextKey, Owner, Owner, Option<u64>);

/// One launch of a slot: its line, its event and its op record.
type Launch<'a> = (usize, usize, Option<&'a OpRec>);

impl Acc {
    fn add(&mut self, dur: i64) {
        if self.count == 0 {
            (self.min, self.max) = (dur, dur);
        }
        self.count += 1;
        self.total = self.total.saturating_add(dur);
        self.min = self.min.min(dur);
        self.max = self.max.max(dur);
    }

    fn merge(&mut self, o: &Acc) {
        if self.count == 0 {
            (self.min, self.max) = (o.min, o.max);
        }
        self.count += o.count;
        self.total = self.total.saturating_add(o.total);
        self.min = self.min.min(o.min);
        self.max = self.max.max(o.max);
    }
}

/// One kernel of an op asked for by [`of_ops`]: its time and occupancy.
#[derive(Clone, Debug, PartialEq)]
pub struct OpKernel {
    pub name: String,
    pub op: String,
    pub module: String,
    pub total_ps: i64,
    pub occupancy_pct: Option<f64>,
    pub registers_per_thread: Option<u32>,
}
stepscope_model::wire_struct!(OpKernel { name, op, module, total_ps, occupancy_pct, registers_per_thread });

/// The kernels of the ops `wanted` ((op, module) pairs), by kernel and op, largest
/// time first: a pass over those ops' records alone (where [`kernels`] reads every
/// kernel), for a question about a few ops.
pub fn of_ops(profile: &Profile, wanted: &std::collections::HashSet<(&str, &str)>) -> Vec<OpKernel> {
    let names: Vec<&str> = wanted.iter().map(|(op, _)| *op).collect();
    let mut out = op_kernels(profile, &|op| names.contains(&op), &|op, module| wanted.contains(&(op, module)));
    out.sort_by(|a, b| b.total_ps.cmp(&a.total_ps).then_with(|| a.name.cmp(&b.name)));
    out
}

/// The kernels of every op of `profile`, by kernel and op (unordered): what a run read
/// a host at a time keeps of each host ([`OpKernels`]).
pub fn of_every_op(profile: &Profile) -> Vec<OpKernel> {
    op_kernels(profile, &|_| true, &|_, _| true)
}

/// The kernels of every op of some hosts ([`of_every_op`]), added up host by host in
/// the run's order: [`of_ops`] of the run once the ops wanted are known.
#[derive(Clone, Debug, Default)]
pub struct OpKernels {
    rows: Keyed<(String, String, String), OpKernel>,
}
stepscope_model::wire_struct!(OpKernels { rows });

impl OpKernels {
    /// Adds the next host's: each kernel's time summed, its occupancy and registers the
    /// first host's that records them.
    pub fn add(&mut self, host: Vec<OpKernel>) {
        for k in host {
            let key = (k.name.clone(), k.op.clone(), k.module.clone());
            self.rows.add(key, k, |o, k| {
                o.total_ps = o.total_ps.saturating_add(k.total_ps);
                o.occupancy_pct = o.occupancy_pct.or(k.occupancy_pct);
                o.registers_per_thread = o.registers_per_thread.or(k.registers_per_thread);
            });
        }
    }

    /// [`of_ops`]: the kernels of the ops `wanted`, largest time first.
    pub fn of_ops(&self, wanted: &std::collections::HashSet<(&str, &str)>) -> Vec<OpKernel> {
        let mut out: Vec<OpKernel> = (self.rows.iter().map(|(_, k)| k))
            .filter(|k| wanted.contains(&(k.op.as_str(), k.module.as_str())))
            .cloned()
            .collect();
        out.sort_by(|a, b| b.total_ps.cmp(&a.total_ps).then_with(|| a.name.cmp(&b.name)));
        out
    }
}

/// The kernels of the ops whose (op, module) `wanted` takes (`named`: whose name may
/// be), by kernel and op, unordered.
fn op_kernels(profile: &Profile, named: &dyn Fn(&str) -> bool, wanted: &dyn Fn(&str, &str) -> bool) -> Vec<OpKernel> {
    let devices = profile.devices();
    // Per (kernel name, op, module), over the devices: time, occupancy, registers.
    type Sums = (i64, Option<f64>, Option<u32>);
    let mut groups: HashMap<(&str, &str, &str), Sums> = HashMap::new();
    for d in devices.iter().filter(|d| d.source == OpSource::Kernels) {
        let (ops, plane) = (d.cached_ops(), d.plane);
        let Some(details_id) = Keys::of(plane).kernel_details else { continue };
        let look = plane.stat_lookup([Some(details_id)]);
        // The device's name ids of the ops asked for.
        let want: Vec<bool> = ops.names.iter().map(|n| named(n)).collect();
        let mut parsed: HashMap<&str, KernelDetails> = HashMap::new();
        for r in ops.recs.iter().filter(|r| want.get(r.name as usize) == Some(&true)) {
            let (op, module) = (&*ops.names[r.name as usize], &*ops.names[r.module as usize]);
            if !wanted(op, module) {
                continue;
            }
            let (line, i) = (&plane.lines[r.line as usize], r.index as usize);
            let [details] = plane.stats_of(&look, line, i);
            let d = details
                .and_then(|s| plane.stat_str(&s))
                .map(|t| parsed.entry(t).or_insert_with(|| parse_kernel_details(t)));
            let e = groups.entry((plane.event_name(line.meta(i)), op, module)).or_insert((0, None, None));
            e.0 = e.0.saturating_add(line.duration_ps(i).max(0));
            if let Some(d) = d {
                e.1 = e.1.or(d.occupancy_pct.filter(|v| *v > 0.0));
                e.2 = e.2.or(d.registers_per_thread);
            }
        }
    }
    groups
        .into_iter()
        .map(|((name, op, module), (total_ps, occupancy_pct, registers_per_thread))| OpKernel {
            name: name.to_string(),
            op: op.to_string(),
            module: module.to_string(),
            total_ps,
            occupancy_pct,
            registers_per_thread,
        })
        .collect()
}

/// Computes the kernel stats of every GPU (any `/device:` plane with stream lines).
pub fn kernels(profile: &Profile) -> Kernels {
    assemble(KernelsPart::of(profile))
}

/// One kernel with one launch configuration, of one op: what [`KernelRow`]s are
/// grouped by.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct OwnedKey {
    name: String,
    grid: [u32; 3],
    block: [u32; 3],
    regs: Option<u32>,
    shared: Option<u64>,
    op: String,
    module: String,
    program: Option<u64>,
}
stepscope_model::wire_struct!(OwnedKey { name, grid, block, regs, shared, op, module, program });

/// The kernels of some hosts of a run, summed per kernel, launch configuration and
/// op, before they are ranked ([`assemble`]): a run read a host at a time adds up each
/// host's.
#[derive(Default)]
pub struct KernelsPart {
    /// Each group, its sums and whether its op could use tensor cores (from the HLO of
    /// the first host that ran it).
    rows: Keyed<OwnedKey, (Acc, Option<bool>)>,
    kernel_time_ps: i64,
    /// Of one host's kernels: the programs they name, numbered as on the host.
    host: Option<HostPrograms>,
    /// The programs of the hosts added, numbered for the run (as the op profile
    /// numbers them: [`stepscope_model::programs`]).
    programs: RunPrograms,
}
stepscope_model::wire_struct!(KernelsPart { rows, kernel_time_ps, host, programs });

impl KernelsPart {
    /// The kernels of every host of `profile`.
    pub fn of(profile: &Profile) -> KernelsPart {
        let mut part = KernelsPart::default();
        for host in 0..profile.hosts.len() {
            part.add(of_host(profile, host));
        }
        part
    }

    /// Adds another host's kernels (a host after those already added).
    pub fn add(&mut self, other: KernelsPart) {
        self.kernel_time_ps = self.kernel_time_ps.saturating_add(other.kernel_time_ps);
        let ids = other.host.as_ref().map(|h| self.programs.add(h)).unwrap_or_default();
        for (mut key, value) in other.rows.into_items() {
            key.program = key.program.map(|p| ids.run(p, &key.module));
            self.rows.add(key, value, |(mine, mine_eligible), (acc, eligible)| {
                mine.merge(&acc);
                mine.occupancy = mine.occupancy.or(acc.occupancy);
                mine.flag = mine.flag.or(acc.flag);
                *mine_eligible = mine_eligible.or(eligible);
            });
        }
    }
}

/// The kernels of host `host` (its index in `profile.hosts`), each op looked up in
/// its HLO.
fn of_host(profile: &Profile, host: usize) -> KernelsPart {
    let mut groups: HashMap<Key, Acc> = HashMap::new();
    let mut parsed: HashMap<&str, KernelDetails> = HashMap::new();
    let mut kernel_time_ps = 0i64;
    let devices = profile.devices();
    let space = &profile.hosts[host];
    for plane in space.planes.iter().filter(|p| p.name.starts_with("/device:")) {
        let keys = Keys::of(plane);
        if keys.kernel_details.is_none() {
            continue;
        }
        let look = plane.stat_lookup([keys.kernel_details, keys.hlo_op, keys.hlo_module, keys.program_id]);
        let text = |s: Option<Stat>| s.and_then(|s| plane.stat_str(&s));
        // The device's op records name each kernel's op, command-buffer kernels
        // credited to their own instructions (`command_buffer.rs`).
        let ops = (devices.iter())
            .find(|d| std::ptr::eq(d.plane, plane) && d.source == OpSource::Kernels)
            .map(|d| d.cached_ops());
        let mut slot_of: FastMap<SlotKey, usize> = FastMap::default();
        // Per slot: a launch of it and its sums.
        let mut slots: Vec<(Launch, Acc)> = Vec::new();
        let mut first_rec = 0usize;
        for (li, line) in plane.lines.iter().enumerate().filter(|(_, l)| is_stream_line(l)) {
            let at = first_rec;
            first_rec += line.len();
            if line.is_counter {
                continue;
            }
            for i in 0..line.len() {
                let [details, op, module, program] = plane.stats_of(&look, line, i);
                let Some(details) = details.filter(|s| plane.stat_str(s).is_some()) else { continue };
                let rec = ops.and_then(|o| o.recs.get(at + i)).filter(|r| r.index as usize == i);
                let (op, module) = match rec {
                    Some(r) => (op.map_or(Owner::Stat(None), |_| Owner::Id(r.name)), Owner::Id(r.module)),
                    None => (Owner::Stat(text_key(op)), Owner::Stat(text_key(module))),
                };
                let key = (line.meta(i), text_key(Some(details)), op, module, stat_u64(plane, program));
                let at_slot = *slot_of.entry(key).or_insert_with(|| {
                    slots.push(((li, i, rec), Acc::default()));
                    slots.len() - 1
                });
                let dur = line.duration_ps(i).max(0);
                kernel_time_ps = kernel_time_ps.saturating_add(dur);
                slots[at_slot].1.add(dur);
            }
        }
        // Each slot's texts, read once from one of its launches; slots of equal
        // texts (one kernel, its inline strings written again) are summed.
        for ((li, i, rec), slot) in slots {
            let line = &plane.lines[li];
            let [details, op, module, program] = plane.stats_of(&look, line, i);
            let Some(details) = text(details) else { continue };
            let op = op.and_then(|op| match (ops, rec) {
                (Some(o), Some(r)) => Some(&*o.names[r.name as usize]),
                _ => plane.stat_str(&op),
            });
            // Launches of one kernel repeat their details text: parsed once.
            let d = parsed.entry(details).or_insert_with(|| parse_kernel_details(details));
            let key = Key {
                name: plane.event_name(line.meta(i)),
                grid: d.grid,
                block: d.block,
                regs: d.registers_per_thread,
                shared: d.shared_mem_bytes(),
                op: op.unwrap_or(""),
                module: text(module).unwrap_or(""),
                program: stat_u64(plane, program),
            };
            let acc = groups.entry(key).or_default();
            acc.merge(&slot);
            acc.occupancy = acc.occupancy.or(d.occupancy_pct.filter(|v| *v > 0.0));
            acc.flag = acc.flag.or(d.tensor_core);
        }
    }
    let hlo = std::slice::from_ref(&profile.hlo_modules()[host]);
    let eligible = |k: &Key| {
        crate::ops::instruction(hlo, k.op, k.module, k.program)
            .and_then(|(m, i)| crate::cost::tensor_core_eligible(m, i))
    };
    let named = groups.keys().filter_map(|k| Some((k.program?, k.module)));
    let host_programs = HostPrograms::of(&space.host, &profile.hlo_modules()[host], named);
    let mut part = KernelsPart { kernel_time_ps, host: Some(host_programs), ..Default::default() };
    for (k, acc) in groups {
        let key = OwnedKey {
            name: k.name.to_string(),
            grid: k.grid,
            block: k.block,
            regs: k.regs,
            shared: k.shared,
            op: k.op.to_string(),
            module: k.module.to_string(),
            program: k.program,
        };
        let value = (acc, eligible(&k));
        part.rows.add(key, value, |_, _| {});
    }
    part
}

/// The kernel stats of a run from its hosts' kernels, summed.
pub fn assemble(part: KernelsPart) -> Kernels {
    let (kernel_time_ps, programs) = (part.kernel_time_ps, part.programs);
    let mut rows: Vec<KernelRow> = (part.rows.into_items().into_iter())
        .map(|(k, (a, tensor_core_eligible))| KernelRow {
            tensor_core: a.flag.unwrap_or_else(|| {
                uses_tensor_cores(&k.name) || (name_cannot_tell(&k.name) && tensor_core_eligible == Some(true))
            }),
            name: k.name,
            op: k.op,
            module: k.module,
            count: a.count,
            total_ps: a.total,
            avg_ps: a.total / a.count.max(1) as i64,
            min_ps: a.min,
            max_ps: a.max,
            grid: k.grid,
            block: k.block,
            registers_per_thread: k.regs,
            shared_mem_bytes: k.shared,
            occupancy_pct: a.occupancy,
            tensor_core_eligible,
            time_pct: if kernel_time_ps > 0 { a.total as f64 * 100.0 / kernel_time_ps as f64 } else { 0.0 },
            program_id: k.program,
            program: None,
        })
        .collect();
    rows.sort_by(|a, b| {
        b.total_ps
            .cmp(&a.total_ps)
            .then_with(|| a.name.cmp(&b.name))
            .then_with(|| a.module.cmp(&b.module))
            .then_with(|| a.op.cmp(&b.op))
            .then_with(|| a.program_id.cmp(&b.program_id))
            .then_with(|| a.grid.cmp(&b.grid))
            .then_with(|| a.block.cmp(&b.block))
            .then_with(|| a.registers_per_thread.cmp(&b.registers_per_thread))
            .then_with(|| a.shared_mem_bytes.cmp(&b.shared_mem_bytes))
    });
    label_programs(&mut rows, &programs);
    for r in &mut rows {
        r.program_id = r.program_id.map(|p| programs.shown(p));
    }
    Kernels { schema: "stepscope.kernels/1", kernel_time_ps, kernels: rows }
}

/// Rows whose op and module several programs hold get their program, `jit_dot(49)`.
fn label_programs(rows: &mut [KernelRow], programs: &RunPrograms) {
    let shared = crate::ops::shared_by_programs(rows, |r| (r.op.as_str(), r.module.as_str()), |r| r.program_id);
    for (r, shared) in rows.iter_mut().zip(shared) {
        if let Some(id) = r.program_id.filter(|&id| shared || programs.is_apart(id)) {
            r.program = Some(programs.label(&r.module, id));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn details_nvidia() {
        let d =
            parse_kernel_details("regs:64 static_shared:0 dynamic_shared:49152 grid:16,16,1 block:256,1,1 occ_pct:50");
        assert_eq!(d.registers_per_thread, Some(64));
        assert_eq!(d.static_shared_bytes, Some(0));
        assert_eq!(d.dynamic_shared_bytes, Some(49152));
        assert_eq!(d.shared_mem_bytes(), Some(49152));
        assert_eq!(d.grid, [16, 16, 1]);
        assert_eq!(d.block, [256, 1, 1]);
        assert_eq!(d.occupancy_pct, Some(50.0));
        assert_eq!(d.tensor_core, None);
        assert_eq!(d.group_mem_bytes, None);
    }

    #[test]
    fn details_older_form() {
        let d = parse_kernel_details(
            "registers_per_thread:32 static_shared_memory_usage:1024 dynamic_shared_memory_usage:2048 \
             grid_x:8 grid_y:4 grid_z:1 block_x:128 block_y:2 occupancy_pct:37.5 is_kernel_using_tensor_core:1",
        );
        assert_eq!(d.registers_per_thread, Some(32));
        assert_eq!(d.shared_mem_bytes(), Some(3072));
        assert_eq!(d.grid, [8, 4, 1]);
        // block_z absent: reads as 1.
        assert_eq!(d.block, [128, 2, 1]);
        assert_eq!(d.occupancy_pct, Some(37.5));
        assert_eq!(d.tensor_core, Some(true));
    }

    #[test]
    fn details_rocm() {
        let d = parse_kernel_details(" grid:256,1,1 block:256,1,1 private_mem:0 group_mem:29568 occ_pct:0");
        assert_eq!(d.grid, [256, 1, 1]);
        assert_eq!(d.block, [256, 1, 1]);
        assert_eq!(d.private_mem_bytes, Some(0));
        assert_eq!(d.group_mem_bytes, Some(29568));
        assert_eq!(d.shared_mem_bytes(), Some(29568));
        assert_eq!(d.registers_per_thread, None);
        assert_eq!(d.occupancy_pct, Some(0.0));
    }

    #[test]
    fn details_spacing_and_garbage() {
        let d = parse_kernel_details("  regs: 40   grid: 2, 3 ,4  block:(64,1,1)  frob:7  dynamic_shared:  ");
        assert_eq!(d.registers_per_thread, Some(40));
        assert_eq!(d.grid, [2, 3, 4]);
        assert_eq!(d.block, [64, 1, 1]);
        assert_eq!(d.dynamic_shared_bytes, None);
        // A missing value does not swallow the next field; a stray word is dropped.
        let d = parse_kernel_details("regs: static_shared:16 dynamic_shared:32 oops block:8");
        assert_eq!(d.registers_per_thread, None);
        assert_eq!(d.shared_mem_bytes(), Some(48));
        assert_eq!(d.block, [8, 1, 1]);

        for junk in [
            "",
            "   ",
            ":",
            "::::",
            "regs:",
            "regs:-1 grid:a,b,c block:,,, occ_pct:NaN",
            "grid:99999999999999999999,1",
            "regs:64regs:64",
            "\u{0}\u{FFFD}ü:ä grid:1,2,3,4,5",
            "=,=,:,",
        ] {
            let d = parse_kernel_details(junk);
            assert_eq!(d.registers_per_thread, None, "{junk:?}");
            assert_eq!(d.occupancy_pct, None, "{junk:?}");
        }
        assert_eq!(parse_kernel_details("regs:-1 grid:a,b,c").grid, [0, 0, 0]);
        assert_eq!(parse_kernel_details("grid:99999999999999999999,7").grid, [1, 7, 1]);
        assert_eq!(parse_kernel_details("x grid:1,2,3,4,5").grid, [1, 2, 3]);
    }

    #[test]
    fn tensor_core_names() {
        for yes in [
            "sm80_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x32_stage4_warpsize2x2x1_tensor16x8x16",
            "sm90_xmma_gemm_f16f16_f16f32_f32_nn_n_tilesize128x128x64",
            "ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_tn",
            "volta_h884gemm_128x128_ldg8_nn",
            "cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_32x6_tn_align8",
            "void cutlass::Kernel<cutlass_80_wmma_tensorop_f16_s161616gemm_f16_32x32_128x2_tn_align8>",
            "Cijk_Ailk_Bljk_BBS_BH_MT256x224x64_MI16x16x16x1_SN_1LDSB1.kd",
            "triton_mma_16816",
            "gemm_kernel_with_hmma",
            "_ZN7ck_tile6kentryILi256ELi1ENS_13FmhaFwdKernelINS_26BlockFmhaPipelineQRKSVSAsyncE",
            "flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, cutlass::bfloat16_t>>",
            "void cudnn::cnn::conv2d_grouped_direct_kernel<true, false, __half, float>",
        ] {
            assert!(uses_tensor_cores(yes), "{yes}");
        }
        for no in [
            "wrapped_broadcast.kd",
            "__amd_rocclr_copyBuffer.kd",
            "gemm_fusion_dot_general_1.kd",
            "loop_gamma_fusion",
            "Cijk_Ailk_Bljk_SB_MT64x64x8_SN_GRVW4",
            "cutlass_simt_sgemm_128x128_8x2_nn_align1",
            "sgemm_128x128x8_NN",
            "input_reduce_fusion_f16",
            "void Eigen::internal::EigenMetaKernel<Eigen::TensorEvaluator<Eigen::TensorAssignOp<Eigen::TensorMap<\
             Eigen::Tensor<float, 1, 1, long>, 16>, Eigen::TensorConversionOp<float, Eigen::TensorMap<Eigen::Tensor<\
             Eigen::half const, 1, 1, long>, 16> const> const> const, Eigen::GpuDevice>, long>",
            "convert_element_type_fusion_bf16",
        ] {
            assert!(!uses_tensor_cores(no), "{no}");
        }
    }

    fn load(rel: &str) -> Profile {
        let path = format!("{}/../../tests/fixtures/{rel}", env!("CARGO_MANIFEST_DIR"));
        let space =
            stepscope_xspace::xplane::read_xspace(std::path::Path::new(&path), &stepscope_xspace::Progress::default())
                .unwrap_or_else(|e| panic!("reading {path}: {e}"));
        Profile::new("t", vec![space])
    }

    /// Expected numbers from the independent Python reader:
    /// `python3 tests/support/xspace_ref.py dump tests/fixtures/rocm-mi300x-gemm/tw003.xplane.pb
    ///  --plane /device:GPU:0 --line "Stream #16(Kernel)" --limit 100` (and the same for
    /// `Stream #17(Kernel)`), then in Python: every event has a `kernel_details` stat
    /// (42 + 12 = 54 launches); sum(duration_ps) = 3_415_244_000 + 60_240_000 =
    /// 3_475_484_000; grouping by (name, kernel_details, hlo_op, hlo_module,
    /// program_id) gives 17 groups (13 without the program: `wrapped_broadcast` of
    /// `jit_broadcast_in_dim` is 9 programs' in 5 launch configs); the largest by sum(duration_ps) is the Tensile MT256x224x64 kernel with
    /// 3 launches, total 1_833_003_000, min 573_401_000, max 672_121_000,
    /// ` grid:32,37,1 block:256,1,1 private_mem:0 group_mem:29568 occ_pct:0`,
    /// hlo_op `custom-call.1`, hlo_module `jit_dot`. Per kernel name:
    /// `wrapped_broadcast.kd` 12 launches of 9 programs, total 153_720_000;
    /// `__amd_rocclr_copyBuffer.kd` 24 launches, total 87_880_000, in 2 rows: 12 on
    /// Stream #17 with no hlo_op (total 60_240_000) and 12 owned by `copy.1`
    /// (27_640_000); `gemm_fusion_dot_general_1.kd` 3 launches, 15_000_000.
    #[test]
    fn rocm_mi300x_fixture() {
        let p = load("rocm-mi300x-gemm/tw003.xplane.pb");
        let k = kernels(&p);
        assert_eq!(k.schema, "stepscope.kernels/1");
        assert_eq!(k.kernel_time_ps, 3_475_484_000);
        assert_eq!(k.kernels.iter().map(|r| r.count).sum::<u64>(), 54);
        assert_eq!(k.kernels.len(), 17);
        assert_eq!(k.kernels.iter().map(|r| r.total_ps).sum::<i64>(), k.kernel_time_ps);
        assert!(k.kernels.windows(2).all(|w| w[0].total_ps >= w[1].total_ps));

        let top = &k.kernels[0];
        assert!(top.name.starts_with("Cijk_Ailk_Bljk_BBS_BH_MT256x224x64_MI16x16x16x1_"), "{}", top.name);
        assert!(top.name.ends_with("_WGM1.kd"));
        assert_eq!(top.op, "custom-call.1");
        assert_eq!(top.module, "jit_dot");
        assert_eq!(top.count, 3);
        assert_eq!(top.total_ps, 1_833_003_000);
        assert_eq!(top.avg_ps, 611_001_000);
        assert_eq!(top.min_ps, 573_401_000);
        assert_eq!(top.max_ps, 672_121_000);
        assert_eq!(top.grid, [32, 37, 1]);
        assert_eq!(top.block, [256, 1, 1]);
        assert_eq!(top.registers_per_thread, None);
        assert_eq!(top.shared_mem_bytes, Some(29568));
        assert_eq!(top.occupancy_pct, None);
        assert!(top.tensor_core);
        assert!((top.time_pct - 1_833_003_000.0 * 100.0 / 3_475_484_000.0).abs() < 1e-9);

        let by_name = |n: &str| {
            let rows: Vec<_> = k.kernels.iter().filter(|r| r.name == n).collect();
            (rows.len(), rows.iter().map(|r| r.count).sum::<u64>(), rows.iter().map(|r| r.total_ps).sum::<i64>())
        };
        assert_eq!(by_name("wrapped_broadcast.kd"), (9, 12, 153_720_000));
        assert_eq!(by_name("__amd_rocclr_copyBuffer.kd"), (2, 24, 87_880_000));
        assert_eq!(by_name("gemm_fusion_dot_general_1.kd"), (1, 3, 15_000_000));

        let copy_no_op = k.kernels.iter().find(|r| r.name == "__amd_rocclr_copyBuffer.kd" && r.op.is_empty()).unwrap();
        assert_eq!((copy_no_op.count, copy_no_op.total_ps), (12, 60_240_000));
        assert_eq!(copy_no_op.block, [512, 1, 1]);
        assert!(!copy_no_op.tensor_core);
        let copy_op = k.kernels.iter().find(|r| r.name == "__amd_rocclr_copyBuffer.kd" && r.op == "copy.1").unwrap();
        assert_eq!((copy_op.count, copy_op.total_ps), (12, 27_640_000));
        assert_eq!(copy_op.module, "jit_convert_element_type");

        // Every Tensile kernel here uses MFMA tiles (by name); the Triton GEMM's name
        // tells no dtype, its HLO (a bf16 256×256×256 dot) says matrix cores; the
        // others multiply no matrices.
        for r in &k.kernels {
            let want = r.name.starts_with("Cijk_") || r.name == "gemm_fusion_dot_general_1.kd";
            assert_eq!(r.tensor_core, want, "{}", r.name);
            assert_eq!(r.tensor_core_eligible, want.then_some(true), "{}", r.name);
        }
    }
}
