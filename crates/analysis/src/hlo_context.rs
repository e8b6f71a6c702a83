//! HLO context of an op: its instruction, operands, fusion body, shapes and source
//! line, from the module's `HloProto` (the seeds' use of XProf's graph viewer), with
//! the op's row of the op profile beside it.

use serde::Serialize;
use stepscope_xspace::hlo::{HloInstruction, HloModule};

use crate::cost::Cost;
use crate::ops::{self, GroupBy, OpRow};
use crate::source::{self, SourceFrame};
use stepscope_model::programs::split_label;
use stepscope_model::Profile;

/// Where an op lives and what it does.
#[derive(Clone, Debug, Serialize)]
pub struct HloContext {
    pub schema: &'static str,
    pub host: String,
    pub module: String,
    pub computation: String,
    pub instruction: Instruction,
    pub operands: Vec<Instruction>,
    /// The fused computation's instructions (root last), for a fusion.
    pub fused_body: Vec<Instruction>,
    /// One execution's FLOPs, transcendentals and bytes by stepscope's cost model over
    /// the HLO ([`crate::cost`]), whatever the profile records.
    pub cost: Cost,
    /// The op's op-profile row, when it ran in the capture: this program's.
    pub profile: Option<OpRow>,
    /// The program shown (`jit_dot(49)`, the module's metadata name).
    pub program: String,
    /// Other programs of the module's name that hold an instruction of this name
    /// (a jitted function compiled for several shapes), newest first: `--module
    /// jit_dot(34)` shows one of them. Absent where there are none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub other_programs: Vec<String>,
    /// A computation of the module that calls itself, directly or through others (a
    /// damaged module: XLA makes none); absent where there is none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub call_cycle: Option<String>,
}

/// One HLO instruction.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Instruction {
    pub name: String,
    pub opcode: String,
    pub shape: String,
    pub shape_bytes: u64,
    pub operands: Vec<String>,
    pub fusion_kind: String,
    pub custom_call_target: String,
    /// JAX name stack (`jit(train_step)/layer0/mlp/dot_general`).
    pub op_name: String,
    /// The line of the user's code that made it (innermost frame outside libraries;
    /// older JAX's `source_file`/`source_line`; for a fusion that does a matmul or
    /// convolution, that instruction's line, as `ops --by line` counts it); empty / 0
    /// when unknown.
    pub source_file: String,
    pub source_line: i32,
    /// The function of that line, where the stack names it.
    pub source_function: String,
    /// The whole Python stack, outermost first (empty when unknown).
    pub stack: Vec<SourceFrame>,
    /// HLO text, `%name = shape opcode(%a, %b)`.
    pub text: String,
}

fn instruction(m: &HloModule, i: &HloInstruction) -> Instruction {
    let operands: Vec<String> = m.operands(i).map(|o| o.name.clone()).collect();
    let mut text = format!(
        "%{} = {} {}({})",
        i.name,
        i.shape,
        i.opcode,
        operands.iter().map(|o| format!("%{o}")).collect::<Vec<_>>().join(", ")
    );
    if !i.fusion_kind.is_empty() {
        text.push_str(&format!(", kind={}", i.fusion_kind));
    }
    if !i.custom_call_target.is_empty() {
        text.push_str(&format!(", custom_call_target=\"{}\"", i.custom_call_target));
    }
    let stack = source::op_stack(m, i);
    let user = source::user_frame(&stack).cloned();
    Instruction {
        source_file: user.as_ref().map(|f| f.file.clone()).unwrap_or_default(),
        source_line: user.as_ref().map_or(0, |f| f.line),
        source_function: user.map(|f| f.function).unwrap_or_default(),
        stack,
        name: i.name.clone(),
        opcode: i.opcode.clone(),
        shape: i.shape.to_string(),
        shape_bytes: i.shape.bytes_size(),
        operands,
        fusion_kind: i.fusion_kind.clone(),
        custom_call_target: i.custom_call_target.clone(),
        op_name: i.op_name.clone(),
        text,
    }
}

/// Where an op was found: its host, its program's entry and decoded module, the
/// computation holding it and the instruction.
pub struct Found<'p> {
    pub host: &'p str,
    pub modules: &'p stepscope_xspace::hlo::HloModules,
    pub entry: &'p stepscope_xspace::hlo::HloEntry,
    pub module: &'p HloModule,
    pub computation: &'p stepscope_xspace::hlo::HloComputation,
    pub instruction: &'p HloInstruction,
}

/// Finds `op` (an HLO instruction name, e.g. `fusion.12`) in the run's modules;
/// `module` narrows the search to modules of that name, or to one program
/// (`jit_dot(49)`, or `jit_dot(49) on host2`: that host's). The latest compilation of a
/// module wins.
pub fn find<'p>(profile: &'p Profile, op: &str, module: Option<&str>) -> Option<Found<'p>> {
    // A program kept apart from another host's of its name and number is labelled
    // with its host, `jit_f(10) on host2` (`stepscope_model::programs`).
    let (module, host) = match module.and_then(split_label) {
        Some((m, host)) => (Some(m), Some(host)),
        None => (module, None),
    };
    for (space, modules) in profile.hosts.iter().zip(profile.hlo_modules()) {
        if host.is_some_and(|h| h != space.host) {
            continue;
        }
        for entry in modules.entries().iter().rev() {
            let Ok(m) = entry.module() else { continue };
            if module.is_some_and(|want| want != m.name && want != entry.metadata_name) {
                continue;
            }
            let Some((computation, instruction)) = m.instruction(op) else { continue };
            return Some(Found { host: &space.host, modules, entry, module: m, computation, instruction });
        }
    }
    None
}

/// What an op's HLO is read beside, of a whole run: its op profile by op, whether any
/// host holds HLO modules, and the programs whose HLO cannot be read (each with why).
#[derive(Default)]
pub struct RunHlo {
    pub ops: Vec<OpRow>,
    pub has_modules: bool,
    pub unreadable: Vec<(String, String)>,
}

impl RunHlo {
    /// Of `profile` (its hosts').
    pub fn of(profile: &Profile) -> RunHlo {
        let mut run = RunHlo::default();
        run.add_modules(profile);
        run.ops = ops::ops(profile, GroupBy::Op, 0).ops;
        run
    }

    /// Adds whether `profile`'s hosts hold HLO modules, and those that cannot be read.
    pub fn add_modules(&mut self, profile: &Profile) {
        let modules = profile.hlo_modules();
        self.has_modules |= modules.iter().any(|m| !m.is_empty());
        let bad = modules.iter().flat_map(|m| m.unreadable());
        self.unreadable.extend(bad.map(|(program, why)| (program.to_string(), why)));
    }
}

/// The op profile's rows of `f`'s program among `rows`, the run's op profile by op
/// (largest first), by op name (a row of no program id: the only one of its name; of
/// several rows of one name, the largest).
pub fn program_rows_of(rows: &[OpRow], f: &Found) -> std::collections::HashMap<String, OpRow> {
    let (m, entry) = (f.module, f.entry);
    let mut out = std::collections::HashMap::new();
    // A row of a program kept apart from an earlier host's of its number is its host's.
    let mine = |r: &&OpRow| {
        (r.module.is_empty() || r.module == m.name || entry.metadata_name.starts_with(&r.module))
            && r.program_id.is_none_or(|p| p as i64 == entry.program_id)
            && r.program_host.as_deref().is_none_or(|host| host == f.host)
    };
    // Rows come largest first: the first of a name is kept.
    for r in rows.iter().filter(mine) {
        out.entry(r.name.clone()).or_insert_with(|| r.clone());
    }
    out
}

/// The HLO context of `op` (see [`find`]).
pub fn hlo_context(profile: &Profile, op: &str, module: Option<&str>) -> Option<HloContext> {
    hlo_context_with(profile, op, module, || ops::ops(profile, GroupBy::Op, 0).ops)
}

/// [`hlo_context`] of `op` found in `profile` (a host of a run read a host at a time),
/// its op profile row among the run's (`rows`, by op, largest first).
pub fn hlo_context_with(
    profile: &Profile,
    op: &str,
    module: Option<&str>,
    rows: impl FnOnce() -> Vec<OpRow>,
) -> Option<HloContext> {
    let f = find(profile, op, module)?;
    let (m, entry, instr) = (f.module, f.entry, f.instruction);
    let fused_body = m
        .fused_body(instr)
        .map(|body| body.instructions.iter().map(|i| instruction(m, i)).collect())
        .unwrap_or_default();
    let row = program_rows_of(&rows(), &f).remove(op);
    let other_programs = (f.modules.entries().iter().rev())
        .filter(|e| e.name == m.name && e.program_id != entry.program_id)
        .filter(|e| e.module().is_ok_and(|o| o.instruction(op).is_some()))
        .map(|e| e.metadata_name.clone())
        .collect();
    Some(HloContext {
        schema: "stepscope.hlo/1",
        host: f.host.to_string(),
        module: m.name.clone(),
        computation: f.computation.name.clone(),
        instruction: instruction(m, instr),
        operands: m.operands(instr).map(|o| instruction(m, o)).collect(),
        fused_body,
        cost: crate::cost::cost(m, instr),
        profile: row,
        program: entry.metadata_name.clone(),
        other_programs,
        call_cycle: m.call_cycle().map(|c| c.name.clone()),
    })
}
