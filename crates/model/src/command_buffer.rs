//! The HLO ops of kernels that ran inside XLA command buffers.
//!
//! XLA:GPU records a jitted program's kernels into command buffers (CUDA graphs) and
//! launches each as one unit. The profiler then tags every kernel of the buffer with
//! the buffer's thunk as its `hlo_op` (`command_buffer_1`), a name the module's
//! HloProto does not hold, so an op profile keyed by `hlo_op` shows one opaque row
//! for nearly all of a step's device time (XProf leaves these kernels out of its op
//! profile altogether). Two things in the profile give the ops back:
//!
//! - **Kernel names.** XLA names the kernels it emits after the instruction they
//!   compute, every character outside `[A-Za-z0-9_$]` made `_` (`fusion.230` runs as
//!   `fusion_230`). But identical fusions share one kernel, named after the first: in
//!   a 4-layer model `fusion.183`, `.187`, `.191` and `.195` all run `fusion_183`. A
//!   name alone is trusted only for a kernel met at one place in the graph.
//! - **The graph's node order.** Each kernel carries `cuda_graph_node_id`, whose low
//!   32 bits number the buffer's commands in the order XLA recorded them, which is the
//!   order of the module's schedule (`HloScheduleProto`) over the instructions that
//!   make a command (not `parameter`, `bitcast`, `get-tuple-element`, `async-done`, …).
//!   Kernels met once in the graph pin the alignment: each votes for its command
//!   number minus its rank among the scheduled instructions, and a strict majority
//!   must agree on that offset, or the graph is left alone (the outvoted ones are
//!   kernels shared with an instruction run elsewhere). Every command then maps to
//!   its instruction, shared kernels included; an `async-start` to the fusion it
//!   wraps, whose kernel it runs. Library calls (cuBLAS, cuDNN) and async fusions
//!   lowered to copies are recorded as child graphs: their command numbers never show,
//!   and their kernels come after all commands, in command order, a `Memset` before
//!   the kernel it prepares; a cuDNN graph begins with a node that runs no kernel (its
//!   number is skipped) and holds several kernels. Each group is credited to the next
//!   command no kernel showed, when the counts agree and each such command is a
//!   `custom-call` or `async-start`.
//!
//! Checked against captures of the same models with command buffers off, where XLA
//! tags each kernel with its own instruction (`tests/fixtures/gpu-nocb`,
//! `gpu-scan-nocb`; `tests/integration/gpu.rs`).

use stepscope_xspace::hlo::{HloInstruction, HloModule, HloModules};

use crate::records::FastMap;

/// Finds the instruction that owns a kernel, per module, remembering what it found.
pub struct KernelOwners<'m> {
    hlo: &'m HloModules,
    /// Per module name: its decoded HloProto (`None`: there is none) and, once asked
    /// for, its launchable instructions by kernel name (`None`: two share the name).
    modules: FastMap<String, Option<(&'m HloModule, Option<ByKernel<'m>>)>>,
}

type ByKernel<'m> = FastMap<String, Option<&'m str>>;

impl<'m> KernelOwners<'m> {
    pub fn new(hlo: &'m HloModules) -> KernelOwners<'m> {
        KernelOwners { hlo, modules: FastMap::default() }
    }

    /// True when `module` has an HloProto and `op` names none of its instructions (a
    /// command buffer's thunk): its kernels may belong to instructions of their own.
    pub fn is_foreign(&mut self, module: &str, op: &str) -> bool {
        self.module(module).is_some_and(|(m, _)| m.instruction(op).is_none())
    }

    /// The instruction whose name, made a kernel name, is `kernel` (`None` when no
    /// instruction or several have it).
    pub fn by_name(&mut self, module: &str, kernel: &str) -> Option<&'m str> {
        let (m, by_kernel) = self.module(module)?;
        let m: &'m HloModule = m;
        by_kernel.get_or_insert_with(|| launchable(m)).get(kernel).copied().flatten()
    }

    /// The instruction of each command of one command-buffer graph of `module`, from
    /// its kernels' (node index, kernel name), sorted by index with no index twice:
    /// (node index, instruction name) for every node it could place; empty when the
    /// graph does not line up with the module's schedule (see the module docs).
    pub fn graph(&mut self, module: &str, nodes: &[(u32, &str)]) -> Vec<(u32, &'m str)> {
        let Some((m, _)) = self.module(module) else { return Vec::new() };
        let m: &'m HloModule = m;
        let mut named: FastMap<&str, Option<&'m str>> = FastMap::default();
        for &(_, k) in nodes {
            if !named.contains_key(k) {
                named.insert(k, self.by_name(module, k));
            }
        }
        align(m, nodes, &named).unwrap_or_default()
    }

    fn module(&mut self, module: &str) -> Option<&mut (&'m HloModule, Option<ByKernel<'m>>)> {
        if module.is_empty() {
            return None;
        }
        if !self.modules.contains_key(module) {
            let found = self.hlo.by_name(module).map(|m| (m, None));
            self.modules.insert(module.to_string(), found);
        }
        self.modules.get_mut(module)?.as_mut()
    }
}

/// Opcodes that make no command of their own.
const NO_COMMAND: &[&str] = &[
    // The wait for an async fusion (its `async-start` runs the kernel).
    "async-done",
    "parameter",
    "constant",
    "get-tuple-element",
    "tuple",
    "bitcast",
    "after-all",
    "add-dependency",
    "opt-barrier",
    "partition-id",
    "replica-id",
];

/// The fusion an `async-start` runs: the root of the computation it calls.
fn wrapped<'m>(m: &'m HloModule, start: &HloInstruction) -> Option<&'m HloInstruction> {
    let root = m.computation(*start.called_computation_ids.first()?)?.root()?;
    (root.opcode == "fusion").then_some(root)
}

/// The commonest value and how often it occurs (the smallest of equally common ones).
fn mode(values: impl Iterator<Item = i64>) -> Option<(i64, usize)> {
    let mut counts: FastMap<i64, usize> = FastMap::default();
    for v in values {
        *counts.entry(v).or_default() += 1;
    }
    counts.into_iter().max_by_key(|&(v, c)| (c, std::cmp::Reverse(v)))
}

/// [`KernelOwners::graph`]; `named` holds each kernel name's instruction by name.
fn align<'m>(
    m: &'m HloModule,
    nodes: &[(u32, &str)],
    named: &FastMap<&str, Option<&'m str>>,
) -> Option<Vec<(u32, &'m str)>> {
    let mut seen: FastMap<&str, u32> = FastMap::default();
    for &(_, k) in nodes {
        *seen.entry(k).or_default() += 1;
    }
    let is_named = |k: &str| named.get(k).is_some_and(Option::is_some);
    // Child-graph kernels: the tail of nodes past the last named one.
    let tail = nodes.iter().rposition(|&(_, k)| is_named(k)).map_or(0, |p| p + 1);
    let (main, library) = nodes.split_at(tail);
    // Anchors: (command number, instruction) of kernels met once and named.
    let anchors: Vec<(u32, &HloInstruction, i64)> = main
        .iter()
        .filter(|(_, k)| seen.get(k) == Some(&1))
        .filter_map(|&(n, k)| {
            let (c, i) = m.instruction(named.get(k).copied().flatten()?)?;
            Some((n, i, c.id))
        })
        .collect();
    // A kernel met once in this graph may still be shared with an instruction run
    // elsewhere (identical fusions share one kernel): the anchors vote, and the ones
    // outvoted are placed like any shared kernel.
    let computation = mode(anchors.iter().map(|a| a.2))?.0;
    let anchors: Vec<_> = anchors.into_iter().filter(|a| a.2 == computation).collect();
    // The scheduled instructions that make a command, in order.
    let commands: Vec<&'m HloInstruction> = m
        .schedule
        .get(&computation)?
        .iter()
        .filter_map(|&id| m.instruction_by_id(id).map(|(_, i)| i))
        .filter(|i| !NO_COMMAND.contains(&i.opcode.as_str()))
        .collect();
    let rank: FastMap<i64, usize> = commands.iter().enumerate().map(|(r, i)| (i.id, r)).collect();
    // One offset (command number minus rank) for every anchor.
    let offset = |&(n, i, _): &(u32, &HloInstruction, i64)| Some(i64::from(n) - *rank.get(&i.id)? as i64);
    let (off, agree) = mode(anchors.iter().filter_map(offset))?;
    if agree < 2 || agree * 2 <= anchors.len() {
        return None;
    }
    let command = |n: u32| usize::try_from(i64::from(n) - off).ok().and_then(|r| commands.get(r).copied());
    // A copy XLA records as a memcpy node (`memcpy128`: a buffer copied whole) is a
    // command numbered among the others though no instruction names its kernel: the
    // memcpy nodes right after the last named kernel whose commands are copies belong
    // to the graph, not to its library calls.
    let copies = library
        .iter()
        .take_while(|&&(n, k)| k.starts_with("memcpy") && command(n).is_some_and(|i| i.opcode == "copy"))
        .count();
    let (main, library) = nodes.split_at(tail + copies);
    let mut out = Vec::with_capacity(nodes.len());
    for &(n, k) in main {
        let i = command(n)?;
        // An async fusion's kernel is the wrapped fusion's, and XLA tags it so.
        let i = if i.opcode == "async-start" { wrapped(m, i).unwrap_or(i) } else { i };
        // A kernel XLA emitted (its name is an instruction's) runs a fusion's body.
        if is_named(k) && named.get(k).copied().flatten() != Some(i.name.as_str()) && i.opcode != "fusion" {
            return None;
        }
        out.push((n, i.name.as_str()));
    }
    // Library calls: the commands no kernel showed, each credited with one group of
    // the child-graph kernels (a `Memset` joins the kernel after it).
    let last = main.last().map_or(0, |&(n, _)| n);
    let present: std::collections::HashSet<u32> = main.iter().map(|&(n, _)| n).collect();
    let groups = library_groups(library).unwrap_or_default();
    // Unseen commands up to the last kernel seen, then as many after it as groups
    // remain; only numbers that are commands (a damaged file may number its nodes
    // up to 2^32).
    let first = u32::try_from(off.max(0)).unwrap_or(u32::MAX);
    let past = u32::try_from(off.saturating_add(commands.len() as i64).max(0)).unwrap_or(u32::MAX);
    let mut unseen: Vec<u32> = (first..last.min(past)).filter(|n| !present.contains(n)).collect();
    let after = groups.len().saturating_sub(unseen.len()) as u32;
    unseen.extend((1..=after).filter_map(|d| last.checked_add(d)));
    let unseen: Vec<&HloInstruction> = unseen.into_iter().filter_map(command).collect();
    let child = |i: &&HloInstruction| matches!(i.opcode.as_str(), "custom-call" | "async-start");
    if !groups.is_empty() && groups.len() == unseen.len() && unseen.iter().all(child) {
        for (g, &i) in groups.iter().zip(&unseen) {
            let i = if i.opcode == "async-start" { wrapped(m, i).unwrap_or(i) } else { i };
            out.extend(g.iter().map(|&n| (n, i.name.as_str())));
        }
    }
    Some(out)
}

/// The child-graph kernels (node index, kernel name; by index, numbered after every
/// command) split into one group per library call: a `Memset` joins the kernel
/// after it, and a kernel after a kernel starts a call of its own (cuBLAS: one GEMM
/// kernel a call), except in a call whose child graph began with a node that ran no
/// kernel (a skipped index: cuDNN's graphs, whose several kernels, `compute_dot_do_o`,
/// the flash kernel, `convert_dq`, make one call) until the next `Memset` or skip.
/// `None` where a group would end in a `Memset`.
fn library_groups(library: &[(u32, &str)]) -> Option<Vec<Vec<u32>>> {
    let mut groups: Vec<Vec<u32>> = Vec::new();
    let mut open: Vec<u32> = Vec::new();
    // Whether the group being filled began after a skipped index, and whether it has
    // a kernel yet.
    let (mut skipped, mut kernel) = (false, false);
    let mut previous = library.first().map_or(0, |f| f.0.saturating_sub(1));
    for &(n, k) in library {
        let memset = k.starts_with("Memset");
        let skip = n > previous.saturating_add(1);
        let starts = skip || (kernel && (memset || !skipped));
        if starts && !open.is_empty() {
            if !kernel {
                return None;
            }
            groups.push(std::mem::take(&mut open));
        }
        if starts || open.is_empty() {
            (skipped, kernel) = (skip, false);
        }
        open.push(n);
        kernel |= !memset;
        previous = n;
    }
    if !open.is_empty() {
        if !kernel {
            return None;
        }
        groups.push(open);
    }
    Some(groups)
}

/// The instructions of `m` that can launch a kernel (those outside fusion bodies), by
/// the kernel name XLA gives them.
fn launchable(m: &HloModule) -> ByKernel<'_> {
    let fused: std::collections::HashSet<i64> = m
        .instructions()
        .filter(|(_, i)| i.is_fusion())
        .flat_map(|(_, i)| i.called_computation_ids.iter().copied())
        .collect();
    let mut by_kernel: ByKernel = FastMap::default();
    for c in m.computations.iter().filter(|c| !c.is_fusion && !fused.contains(&c.id)) {
        for i in &c.instructions {
            by_kernel.entry(kernel_name(&i.name)).and_modify(|e| *e = None).or_insert(Some(i.name.as_str()));
        }
    }
    by_kernel
}

/// The name XLA gives the kernel of instruction `name`: characters outside
/// `[A-Za-z0-9_$]` become `_`.
pub fn kernel_name(name: &str) -> String {
    name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '$' { c } else { '_' }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn library_kernels_group_by_call() {
        // cuBLAS: a memset joins its GEMM, a GEMM after a GEMM is a call of its own;
        // cuDNN's backward after a skipped number: four kernels, one call.
        let nodes = [
            (132, "Memset"),
            (133, "nvjet_a"),
            (134, "nvjet_b"),
            (136, "Memset"),
            (137, "compute_dot_do_o"),
            (138, "flash_bprop"),
            (139, "convert_dq"),
            (140, "Memset"),
            (141, "nvjet_a"),
        ];
        let groups = super::library_groups(&nodes).unwrap();
        assert_eq!(groups, [vec![132, 133], vec![134], vec![136, 137, 138, 139], vec![140, 141]]);
        // A memset that prepares nothing: no grouping.
        assert_eq!(super::library_groups(&[(1, "k"), (2, "Memset")]), None);
    }

    #[test]
    fn kernel_names_replace_what_ptx_names_cannot_hold() {
        assert_eq!(kernel_name("fusion.230"), "fusion_230");
        assert_eq!(kernel_name("gemm_fusion_dot.8"), "gemm_fusion_dot_8");
        assert_eq!(kernel_name("loop_add_fusion"), "loop_add_fusion");
        assert_eq!(kernel_name("all-reduce.3"), "all_reduce_3");
        assert_eq!(kernel_name("a$b"), "a$b");
    }

    #[test]
    fn the_commonest_value_wins_and_ties_go_to_the_smallest() {
        assert_eq!(mode([0i64, -24, 0, 3].into_iter()), Some((0, 2)));
        assert_eq!(mode([5i64, -1].into_iter()), Some((-1, 1)));
        assert_eq!(mode(std::iter::empty()), None);
    }
}
