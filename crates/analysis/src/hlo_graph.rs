//! An op's neighbourhood in its program's HLO as a graph (XProf's graph viewer): the
//! instructions it reads (operands, and theirs, `depth` levels up), those that read
//! it (users, `depth` levels down), and, for a fusion, its fused body; each node with
//! its shape, its time in the op profile where it ran and its FLOPs by the cost model.
//!
//! Levels: the op is 0, its operands -1, their operands -2, its users 1, …; a node is
//! put at the level nearest the op it is reached at. In the fused body, a node's level
//! is the length of the longest path to it from an instruction with no operands (a
//! parameter, a constant), so edges always go to a higher level.

use std::collections::{HashMap, HashSet, VecDeque};

use serde::Serialize;
use stepscope_model::Profile;
use stepscope_xspace::hlo::{HloComputation, HloInstruction, HloModule};

use crate::hlo_context::{self, Found};
use crate::ops::OpRow;

/// Most neighbours of one node followed (operands or users); the rest are counted in
/// [`HloGraph::nodes_cut`].
pub const MAX_FANOUT: usize = 16;
/// Most nodes of the neighbourhood, and of a fused body.
pub const MAX_NODES: usize = 200;
/// Deepest `depth` asked for.
pub const MAX_DEPTH: u32 = 6;

/// An op's neighbourhood.
#[derive(Clone, Debug, Serialize)]
pub struct HloGraph {
    pub schema: &'static str,
    pub host: String,
    /// The program (`jit_train_step(52)`) and its module's name.
    pub program: String,
    pub module: String,
    pub computation: String,
    pub op: String,
    pub depth: u32,
    pub nodes: Vec<Node>,
    pub edges: Vec<Edge>,
    /// Neighbours left out (past [`MAX_FANOUT`] of a node or [`MAX_NODES`] in all).
    pub nodes_cut: u64,
    /// The op's fused body, for a fusion.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fused: Option<Subgraph>,
}

/// A fused computation drawn whole (up to [`MAX_NODES`]).
#[derive(Clone, Debug, Serialize)]
pub struct Subgraph {
    pub computation: String,
    pub nodes: Vec<Node>,
    pub edges: Vec<Edge>,
    pub nodes_cut: u64,
}

/// One instruction.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Node {
    pub name: String,
    pub opcode: String,
    pub shape: String,
    pub shape_bytes: u64,
    pub level: i32,
    /// `kLoop`, `kInput`, … for a fusion.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub fusion_kind: String,
    /// In a fused body: a parameter's number, the fusion's operand it reads.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parameter_number: Option<i64>,
    /// The JAX name stack.
    pub op_name: String,
    /// One execution's FLOPs and bytes by stepscope's cost model.
    pub flops: u64,
    pub bytes: u64,
    /// Its op-profile row's numbers, where it ran in the capture (this program's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub executions: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub total_ps: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub self_ps: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device_time_pct: Option<f64>,
}

/// `from` is an operand of `to` (`operand`: its position among `to`'s operands).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Edge {
    pub from: String,
    pub to: String,
    pub operand: u32,
}

/// The neighbourhood of `op` (found as [`hlo_context::find`] finds it), `depth`
/// levels each way (clamped to 1..=[`MAX_DEPTH`]).
pub fn graph(profile: &Profile, op: &str, module: Option<&str>, depth: u32) -> Option<HloGraph> {
    graph_with(profile, (op, module, depth), || crate::ops::ops(profile, crate::ops::GroupBy::Op, 0).ops)
}

/// [`graph`] of `op` found in `profile` (a host of a run read a host at a time), its
/// nodes' op profile rows among the run's (`rows`, by op, largest first).
pub fn graph_with(
    profile: &Profile,
    (op, module, depth): (&str, Option<&str>, u32),
    rows: impl FnOnce() -> Vec<crate::ops::OpRow>,
) -> Option<HloGraph> {
    let f = hlo_context::find(profile, op, module)?;
    let depth = depth.clamp(1, MAX_DEPTH);
    let rows = hlo_context::program_rows_of(&rows(), &f);
    let (levels, cut) = neighbourhood(f.module, f.computation, f.instruction, depth);
    let mut nodes: Vec<Node> = (levels.iter())
        .filter_map(|(&id, &level)| {
            let (_, i) = f.module.instruction_by_id(id)?;
            Some(make_node(f.module, i, level, rows.get(&i.name)))
        })
        .collect();
    nodes.sort_by(|a, b| a.level.cmp(&b.level).then_with(|| a.name.cmp(&b.name)));
    Some(HloGraph {
        schema: "stepscope.hlo_graph/1",
        host: f.host.to_string(),
        program: f.entry.metadata_name.clone(),
        module: f.module.name.clone(),
        computation: f.computation.name.clone(),
        op: f.instruction.name.clone(),
        depth,
        edges: edges_among(f.module, f.computation, &|id| levels.contains_key(&id)),
        nodes,
        nodes_cut: cut,
        fused: f.module.fused_body(f.instruction).map(|body| fused(&f, body)),
    })
}

/// Each instruction of the op's neighbourhood (by id) and its level, and how many
/// neighbours were left out.
fn neighbourhood(m: &HloModule, c: &HloComputation, op: &HloInstruction, depth: u32) -> (HashMap<i64, i32>, u64) {
    // An instruction of this computation (ids are the module's).
    let here = |id: i64| m.instruction_by_id(id).filter(|(comp, _)| comp.id == c.id).map(|(_, i)| i);
    let mut users: HashMap<i64, Vec<i64>> = HashMap::new();
    for i in &c.instructions {
        for &o in &i.operand_ids {
            let list = users.entry(o).or_default();
            // An instruction reading one operand twice is one user.
            if list.last() != Some(&i.id) {
                list.push(i.id);
            }
        }
    }
    let mut level: HashMap<i64, i32> = HashMap::from([(op.id, 0)]);
    let mut cut = 0u64;
    // Operands up, users down; breadth first, so a node keeps its nearest level.
    for dir in [-1i32, 1] {
        let mut queue = VecDeque::from([(op.id, 0i32)]);
        while let Some((id, at)) = queue.pop_front() {
            if at.unsigned_abs() >= depth {
                continue;
            }
            let next: Vec<i64> = match dir {
                -1 => here(id).map(|i| dedup(&i.operand_ids)).unwrap_or_default(),
                _ => users.get(&id).cloned().unwrap_or_default(),
            };
            let next: Vec<i64> = next.into_iter().filter(|&n| here(n).is_some()).collect();
            for (k, &n) in next.iter().enumerate() {
                if level.contains_key(&n) {
                    continue;
                }
                if k >= MAX_FANOUT || level.len() >= MAX_NODES {
                    cut += 1;
                    continue;
                }
                level.insert(n, at + dir);
                queue.push_back((n, at + dir));
            }
        }
    }
    (level, cut)
}

/// `ids` in order, each once.
fn dedup(ids: &[i64]) -> Vec<i64> {
    let mut seen = HashSet::new();
    ids.iter().copied().filter(|i| seen.insert(*i)).collect()
}

/// Every operand edge of `c` between two of its instructions that `shown` keeps (by id).
fn edges_among(m: &HloModule, c: &HloComputation, shown: &dyn Fn(i64) -> bool) -> Vec<Edge> {
    let mut out = Vec::new();
    for i in c.instructions.iter().filter(|i| shown(i.id)) {
        for (k, &o) in i.operand_ids.iter().enumerate() {
            if let Some((_, from)) = m.instruction_by_id(o).filter(|_| shown(o)) {
                out.push(Edge { from: from.name.clone(), to: i.name.clone(), operand: k as u32 });
            }
        }
    }
    out
}

/// A fused body drawn whole: levels by longest path from its sources.
fn fused(f: &Found, body: &HloComputation) -> Subgraph {
    let shown: Vec<&HloInstruction> = body.instructions.iter().take(MAX_NODES).collect();
    let ids: HashSet<i64> = shown.iter().map(|i| i.id).collect();
    // The proto lists a computation's instructions operands first (XLA's post
    // order); a damaged one that does not is still levelled, by repeated passes
    // bounded by the node count.
    let mut level: HashMap<i64, i32> = HashMap::new();
    for _ in 0..shown.len().max(1) {
        let mut changed = false;
        for i in &shown {
            let l = (i.operand_ids.iter().filter(|o| ids.contains(o)))
                .map(|o| level.get(o).copied().unwrap_or(0) + 1)
                .max()
                .unwrap_or(0)
                .min(shown.len() as i32);
            if level.insert(i.id, l) != Some(l) {
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    let mut nodes: Vec<Node> =
        shown.iter().map(|i| make_node(f.module, i, level.get(&i.id).copied().unwrap_or(0), None)).collect();
    nodes.sort_by(|a, b| a.level.cmp(&b.level).then_with(|| a.name.cmp(&b.name)));
    Subgraph {
        computation: body.name.clone(),
        nodes,
        edges: edges_among(f.module, body, &|id| ids.contains(&id)),
        nodes_cut: (body.instructions.len() - shown.len()) as u64,
    }
}

fn make_node(m: &HloModule, i: &HloInstruction, level: i32, row: Option<&OpRow>) -> Node {
    let cost = crate::cost::cost(m, i);
    Node {
        name: i.name.clone(),
        opcode: i.opcode.clone(),
        shape: i.shape.to_string(),
        shape_bytes: i.shape.bytes_size(),
        level,
        fusion_kind: i.fusion_kind.clone(),
        parameter_number: (i.opcode == "parameter").then_some(i.parameter_number),
        op_name: i.op_name.clone(),
        flops: cost.flops,
        bytes: cost.bytes,
        executions: row.map(|r| r.executions),
        total_ps: row.map(|r| r.total_ps),
        self_ps: row.map(|r| r.self_ps),
        device_time_pct: row.map(|r| r.device_time_pct),
    }
}
