//! What-if: each step as a graph of what its devices did and what they waited for,
//! replayed with an edit (docs/whatif.md).
//!
//! A step's graph is, per device that took part, the chain of its time in the step's
//! window in time order, each piece a node named as the device-time model names it
//! ([`stepscope_model::device_time::named_time`]): the ops it ran (compute,
//! collectives, copies, waits on async copies, host callbacks), the runtime between
//! them, and what it waited for when it ran nothing — its host compiling, copying or
//! running a callback's Python, the host's work before it dispatched the step (input,
//! Python, sleeps), the host dispatching the step's programs, launched work not started
//! yet, and after the step's last op the host's sync and loop. The device runs its
//! chain in order (one FIFO); a wait for a launch ends when the host's launch comes.
//!
//! Replaying the chain reproduces the step: each node takes its measured time, and a
//! wait for the host ends when the host got there. An edit changes nodes — removes
//! compilation, callbacks, the host's work before dispatch, host copies (prefetched);
//! scales ops by name or kind (of an op, only its exclusive time: what ran beside it
//! still runs); jit (one launch: the dispatch waits go, and the elementwise ops of
//! one-op programs fuse into their neighbours); balance (every device given the median
//! device's busy time) — and the replayed step is the projection. Time the host no
//! longer spends (compile, its Python, callbacks) brings its later launches forward;
//! time the device no longer spends does not, so a host-bound step gains nothing from
//! faster ops. A step's time is its slowest device's.

use rayon::prelude::*;
use std::sync::Arc;

use serde::Serialize;
use stepscope_model::device_time::{named_time, Part};
use stepscope_model::stats::{pct, Intervals};
use stepscope_model::time_base::TimeBase;
use stepscope_model::wire::Packed;
use stepscope_model::{Device, Profile};

use crate::steps;

mod pod;

pub const SCHEMA: &str = "stepscope.whatif/1";

/// What a piece of a device's step was: an op part, or what the device waited for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Node {
    Compute,
    Collective,
    CopyToDevice,
    CopyToHost,
    CopyOnDevice,
    AsyncWait,
    /// A host callback: the op (XLA:CPU) or the wait for the host's Python (GPUs).
    Callback,
    /// Inside a program with no op running (XLA:CPU's executor).
    Runtime,
    /// The host compiling.
    Compile,
    /// The host copying to or from the device on its own threads.
    HostCopy,
    /// The step had begun and its host had not dispatched it yet: input, Python, sleeps.
    HostWork,
    /// Between the step's first dispatch and its last op, the device waited for the
    /// host to dispatch or launch.
    Dispatch,
    /// Work the host had launched (or dispatched, XLA:CPU) had not started yet.
    Queued,
    /// After the step's last op: the host's sync and its loop.
    Tail,
}

/// A node by its place in [`Node::ALL`] (every node is there: the graphs index their
/// parts by it).
impl stepscope_model::wire::Wire for Node {
    fn put(&self, out: &mut Vec<u8>) {
        out.push(Node::ALL.iter().position(|n| n == self).unwrap_or(Node::ALL.len()) as u8);
    }
    fn take(bytes: &mut stepscope_model::wire::Bytes<'_>) -> Result<Self, stepscope_model::wire::WireError> {
        let at = bytes.take_bytes(1)?[0] as usize;
        Node::ALL.get(at).copied().ok_or_else(|| stepscope_model::wire::WireError(format!("{at} is no node")))
    }
}

impl Node {
    pub const ALL: [Node; 14] = [
        Node::Compute,
        Node::Collective,
        Node::CopyToDevice,
        Node::CopyToHost,
        Node::CopyOnDevice,
        Node::AsyncWait,
        Node::Callback,
        Node::Runtime,
        Node::Compile,
        Node::HostCopy,
        Node::HostWork,
        Node::Dispatch,
        Node::Queued,
        Node::Tail,
    ];

    /// The node of an op part or of a host part ([`Part::Idle`] is split by position).
    fn of_part(p: Part) -> Node {
        match p {
            Part::Compute => Node::Compute,
            Part::Collective => Node::Collective,
            Part::HostToDevice => Node::CopyToDevice,
            Part::DeviceToHost => Node::CopyToHost,
            Part::DeviceToDevice => Node::CopyOnDevice,
            Part::AsyncWait => Node::AsyncWait,
            Part::HostCallback => Node::Callback,
            Part::RuntimeOverhead => Node::Runtime,
            Part::Compile => Node::Compile,
            Part::HostCopyToDevice | Part::HostCopyToHost => Node::HostCopy,
            Part::Idle => Node::Dispatch,
        }
    }

    /// An op ran (the device was busy).
    pub fn is_op(self) -> bool {
        matches!(
            self,
            Node::Compute
                | Node::Collective
                | Node::CopyToDevice
                | Node::CopyToHost
                | Node::CopyOnDevice
                | Node::AsyncWait
                | Node::Callback
        )
    }

    /// As JSON names it: `host_work`.
    pub fn id(self) -> &'static str {
        match self {
            Node::Compute => "compute",
            Node::Collective => "collective",
            Node::CopyToDevice => "copy_to_device",
            Node::CopyToHost => "copy_to_host",
            Node::CopyOnDevice => "copy_on_device",
            Node::AsyncWait => "async_wait",
            Node::Callback => "callback",
            Node::Runtime => "runtime",
            Node::Compile => "compile",
            Node::HostCopy => "host_copy",
            Node::HostWork => "host_work",
            Node::Dispatch => "dispatch",
            Node::Queued => "queued",
            Node::Tail => "tail",
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Node::Compute => "compute",
            Node::Collective => "collectives",
            Node::CopyToDevice => "host → device copies",
            Node::CopyToHost => "device → host copies",
            Node::CopyOnDevice => "copies on the device",
            Node::AsyncWait => "waits on async copies",
            Node::Callback => "host callbacks",
            Node::Runtime => "runtime between ops",
            Node::Compile => "compile",
            Node::HostCopy => "host copying",
            Node::HostWork => "host work before dispatch",
            Node::Dispatch => "waiting for dispatch",
            Node::Queued => "launched, not started",
            Node::Tail => "after the last op (sync)",
        }
    }
}

/// One piece of a device's step.
#[derive(Clone, Copy, Debug)]
pub struct Segment {
    pub start_ps: i64,
    pub end_ps: i64,
    pub node: Node,
    /// Of a callback: the time the compute beside it would take without it
    /// ([`beside_callbacks`]), which the step still spends.
    pub beside_ps: i64,
}

impl Segment {
    pub fn duration_ps(&self) -> i64 {
        self.end_ps.saturating_sub(self.start_ps)
    }
}

/// One device's chain in one step.
pub struct Chain {
    /// The device's index in [`Profile::devices`].
    pub device: usize,
    /// A device of its own (GPU, TPU), not the host's CPU (XLA:CPU): its host can
    /// dispatch ahead of it ([`Edit::dispatch_ahead`]).
    pub accelerator: bool,
    pub segments: Vec<Segment>,
}

/// The graph of one step.
pub struct StepGraph {
    /// Its index in the model's steps.
    pub step: usize,
    /// Its host, by its place in the profile's hosts.
    pub host: usize,
    pub step_num: i64,
    pub start_ps: i64,
    pub end_ps: i64,
    pub chains: Vec<Chain>,
    /// Its unchanged replay's time (`None` where no device worked in it), replayed once
    /// when the graph is made: every edit's projection is checked against it.
    pub replayed_ps: Option<i64>,
}

/// The graphs of a profile's timed steps (cut steps are left out).
pub struct Graphs {
    pub steps: Vec<StepGraph>,
}

/// The key [`graphs`] are kept under in the profile's memo.
#[derive(PartialEq)]
struct GraphsKey;

/// Every timed step's graph, made once per profile (kept in its memo: `advise`'s
/// findings, `whatif` and every surface replay the same graphs).
pub fn graphs(profile: &Profile) -> Arc<Graphs> {
    profile.memo().get_or_insert(GraphsKey, || Arc::new(build_graphs(profile)))
}

/// The graphs kept in the profile's memo, or made and not kept there: for replays kept
/// without their graphs ([`Settled`]), which would otherwise hold them as long as the
/// profile.
fn graphs_unkept(profile: &Profile) -> Arc<Graphs> {
    profile.memo().get(&GraphsKey).unwrap_or_else(|| Arc::new(build_graphs(profile)))
}

/// Builds every timed step's graph: one pass per device over its named time in all the
/// steps' windows.
fn build_graphs(profile: &Profile) -> Graphs {
    let model = steps::cached(profile);
    let base = profile.time_base();
    let timed: Vec<usize> = (0..model.steps.len()).filter(|&i| !model.steps[i].cut).collect();
    let mut out: Vec<StepGraph> = timed
        .iter()
        .map(|&i| {
            let s = &model.steps[i];
            StepGraph {
                step: i,
                host: profile.hosts.iter().position(|h| h.host == s.host).unwrap_or(0),
                step_num: s.step_num,
                start_ps: s.start_ps,
                end_ps: s.end_ps(),
                chains: Vec::new(),
                replayed_ps: None,
            }
        })
        .collect();
    let calls: Vec<HostCalls> = profile.hosts.iter().map(HostCalls::of).collect();
    for d in profile.devices().iter().filter(|d| steps::took_part(profile, d)) {
        let mut mine: Vec<usize> = (0..out.len()).filter(|&g| model.steps[out[g].step].host == d.host).collect();
        mine.sort_by_key(|&g| out[g].start_ps);
        // Steps timed by device work may overlap: they are named in batches whose
        // windows do not (each step in the first batch it fits, in time order).
        let mut batches: Vec<Vec<usize>> = Vec::new();
        for &g in &mine {
            let fits = |b: &Vec<usize>| b.last().is_none_or(|&l| out[l].end_ps <= out[g].start_ps);
            match batches.iter_mut().find(|b| fits(b)) {
                Some(b) => b.push(g),
                None => batches.push(vec![g]),
            }
        }
        for batch in batches {
            let windows: Vec<(i64, i64)> = batch.iter().map(|&g| (out[g].start_ps, out[g].end_ps)).collect();
            for (&g, segments) in batch.iter().zip(chain_of(base, d, &windows, &calls[d.host_index])) {
                let accelerator = d.source != stepscope_model::OpSource::HostOps;
                out[g].chains.push(Chain { device: d.index, accelerator, segments });
            }
        }
    }
    for g in &mut out {
        g.replayed_ps = replay_unchanged(g);
    }
    Graphs { steps: out }
}

/// Per window (sorted, disjoint), the chain of device `d`'s named time in it.
fn chain_of(base: &TimeBase, d: &Device, windows: &[(i64, i64)], calls: &HostCalls) -> Vec<Vec<Segment>> {
    let named = named_time(base, d, windows);
    let beside = beside_callbacks(base, d);
    let active = &base.active[d.index];
    // Each window's segments counted first, so that each is made once at its size.
    let mut counts = vec![0usize; windows.len()];
    for set in &named.parts {
        in_windows(set.spans(), windows, |w, _| counts[w] += 1);
    }
    let mut per: Vec<Vec<Segment>> = counts.iter().map(|&n| Vec::with_capacity(n)).collect();
    for (part, set) in Part::ALL.iter().zip(&named.parts) {
        let node = Node::of_part(*part);
        in_windows(set.spans(), windows, |w, (a, b)| {
            let beside_ps = match (&beside, node) {
                (Some((compute, share)), Node::Callback) => (compute.overlap(a, b) as f64 * share) as i64,
                _ => 0,
            };
            per[w].push(Segment { start_ps: a, end_ps: b, node, beside_ps });
        });
    }
    for (w, segs) in per.iter_mut().enumerate() {
        let (lo, hi) = windows[w];
        let first_op = active.spans().get(active.spans().partition_point(|s| s.1 <= lo)).map(|s| s.0.max(lo));
        let last_op = {
            let i = active.spans().partition_point(|s| s.0 < hi);
            i.checked_sub(1).map(|i| active.spans()[i].1.min(hi)).filter(|&e| e > lo)
        };
        let jit = &calls.jit;
        let first_call = jit.get(jit.partition_point(|&t| t < lo)).copied().filter(|&t| t < hi);
        // Where ops are not linked to their launches (XLA:CPU), a wait between ops is
        // for the host only if the host was dispatching in it.
        let linked = base.launched[d.index].is_some();
        let host_was_dispatching = |a: i64, b: i64| {
            let at = calls.executes.partition_point(|&t| t < a);
            calls.executes.get(at).is_some_and(|&t| t < b)
        };
        let mut split = Vec::with_capacity(segs.len() + 4);
        for s in segs.drain(..) {
            if s.node != Node::Dispatch {
                split.push(s);
                continue;
            }
            let host_wait = linked || host_was_dispatching(s.start_ps, s.end_ps);
            split_idle(s, (first_op, last_op, first_call), host_wait, &named, &mut split);
        }
        split.sort_unstable_by_key(|s| s.start_ps);
        *segs = merge_same(split);
    }
    per
}

/// Each of `spans` (in time order) that starts before the end of one of `windows`
/// (sorted, disjoint), with the index of the first such window: both walked once.
fn in_windows(spans: &[(i64, i64)], windows: &[(i64, i64)], mut f: impl FnMut(usize, (i64, i64))) {
    let mut w = 0usize;
    for &(a, b) in spans {
        while windows.get(w).is_some_and(|win| win.1 <= a) {
            w += 1;
        }
        if w >= windows.len() {
            break;
        }
        f(w, (a, b));
    }
}

/// Where XLA:CPU device `d` ran host callbacks (a callback holds one of its threads):
/// the compute that would still run without them, per instant of the compute beside
/// them. That compute ran on the threads the callback left; without it, it runs on all
/// of them: (threads − 1) / threads of its time. Its time is its ops' own events (not
/// the pool work XLA:CPU credits an op with after: pool work waiting for the thread a
/// callback holds is not running). None where the device ran no callback.
fn beside_callbacks(base: &TimeBase, d: &Device) -> Option<(Intervals, f64)> {
    let kinds = &base.kinds[d.index];
    if d.source != stepscope_model::OpSource::HostOps || kinds.spans[Part::HostCallback.index()].spans().is_empty() {
        return None;
    }
    let ops = d.cached_ops();
    let threads = op_threads(d);
    let spans = (ops.recs.iter().zip(&kinds.of_op))
        .filter(|(_, k)| **k == Part::Compute)
        .map(|(r, _)| (r.start_ps(d.plane), r.start_ps(d.plane).saturating_add(r.duration_ps(d.plane))))
        .collect();
    Some((Intervals::new(spans), (threads - 1.0) / threads))
}

/// Names an idle span: before the step's first op, host work until the host's first
/// jitted call (dispatch after it); after its last op, the tail; between, launched
/// work queued, or the host dispatching (`host_wait`: else queued, the work had been
/// dispatched before).
fn split_idle(
    s: Segment,
    (first_op, last_op, first_call): (Option<i64>, Option<i64>, Option<i64>),
    host_wait: bool,
    named: &stepscope_model::device_time::NamedTime,
    out: &mut Vec<Segment>,
) {
    let mut push = |a: i64, b: i64, node: Node| {
        if b > a {
            out.push(Segment { start_ps: a, end_ps: b, node, beside_ps: 0 });
        }
    };
    let (a, b) = (s.start_ps, s.end_ps);
    let first = first_op.unwrap_or(b);
    let last = last_op.unwrap_or(a);
    if b <= first {
        let call = first_call.unwrap_or(first).clamp(a, b);
        push(a, call, Node::HostWork);
        push(call, b, Node::Dispatch);
        return;
    }
    if a >= last {
        push(a, b, Node::Tail);
        return;
    }
    // Between the step's ops: queued where launched work waited, else dispatch.
    if !host_wait {
        push(a, b, Node::Queued);
        return;
    }
    let mut t = a;
    let q = named.queued.spans();
    for &(qa, qb) in &q[q.partition_point(|x| x.1 <= a)..] {
        if qa >= b {
            break;
        }
        let (qa, qb) = (qa.max(a), qb.min(b));
        push(t, qa, Node::Dispatch);
        push(qa, qb, Node::Queued);
        t = qb;
    }
    push(t, b, Node::Dispatch);
}

/// Adjacent segments of one node made one.
fn merge_same(segs: Vec<Segment>) -> Vec<Segment> {
    let mut out: Vec<Segment> = Vec::with_capacity(segs.len());
    for s in segs {
        match out.last_mut() {
            Some(l) if l.node == s.node && l.end_ps == s.start_ps => {
                l.end_ps = s.end_ps;
                l.beside_ps = l.beside_ps.saturating_add(s.beside_ps);
            }
            _ => out.push(s),
        }
    }
    out
}

/// A host's dispatches, sorted starts: its calls of jitted functions
/// (`PjitFunction(f)`: JAX's C++ dispatch of a call), and those with each request to
/// run a program (`CommonPjRtLoadedExecutable::Execute…`).
struct HostCalls {
    jit: Vec<i64>,
    executes: Vec<i64>,
}

impl HostCalls {
    fn of(space: &stepscope_xspace::Space) -> HostCalls {
        let Some(plane) = stepscope_model::device::host_cpu_plane(space) else {
            return HostCalls { jit: Vec::new(), executes: Vec::new() };
        };
        let (mut jit, mut executes) = (Vec::new(), Vec::new());
        let found = stepscope_model::device::events_named(plane, |name| {
            name.starts_with("PjitFunction(") || name.starts_with("CommonPjRtLoadedExecutable::Execute")
        });
        for (meta, start) in found {
            if plane.event_name(meta).starts_with("PjitFunction(") {
                jit.push(start);
            }
            executes.push(start);
        }
        jit.sort_unstable();
        executes.sort_unstable();
        HostCalls { jit, executes }
    }
}

/// What an edit scales.
#[derive(Clone, Debug, PartialEq)]
pub enum Target {
    /// Every op of this name (an HLO op: `dot.31`, `copy.2`).
    Op(String),
    /// Every op of these names, one set (`dot.31,copy.2`): where only they ran, beside
    /// each other, their time scales (each name a target of its own saves there only
    /// its thread's share).
    Ops(Vec<String>),
    /// Every op of this part (copies to the device, collectives, …).
    Part(Part),
    /// Every op of this HLO category, as `stepscope ops --by category` names it, with
    /// `_` for a space (`category:loop_fusion`; case does not matter).
    Category(String),
    /// Every op in this name-stack scope or one inside it, as `stepscope ops --by scope`
    /// names it (`scope:train_step/layer0`); the jitted function's name may be left off
    /// (`scope:layer0/mlp`).
    Scope(String),
    /// Every op of this program, as `stepscope ops --by module` names it
    /// (`module:jit_train_step`).
    Module(String),
}

impl Target {
    /// The target as `--scale` spells it (before `=FACTOR`).
    pub fn words(&self) -> String {
        match self {
            Target::Op(n) => n.clone(),
            Target::Ops(names) => names.join(","),
            Target::Part(p) => part_target_name(*p).to_string(),
            Target::Category(c) => format!("category:{c}"),
            Target::Scope(s) => format!("scope:{s}"),
            Target::Module(m) => format!("module:{m}"),
        }
    }

    /// What a device ran that it picks, in words: `op named "dot.3"`.
    pub fn what(&self) -> String {
        match self {
            Target::Op(n) => format!("op named {n:?}"),
            Target::Ops(names) => format!("op named any of {:?}", names.join(",")),
            Target::Part(p) => format!("op of kind {:?}", part_target_name(*p)),
            Target::Category(c) => format!("op of category {c:?}"),
            Target::Scope(s) => format!("op in scope {s:?}"),
            Target::Module(m) => format!("op of module {m:?}"),
        }
    }

    /// The grouping of the op profile that lists the names it takes (`None`: by op).
    pub fn listed_by(&self) -> Option<&'static str> {
        match self {
            Target::Op(_) | Target::Ops(_) | Target::Part(_) => None,
            Target::Category(_) => Some("category"),
            Target::Scope(_) => Some("scope"),
            Target::Module(_) => Some("module"),
        }
    }

    /// Per record of device `d`'s ops, whether it picks it (`of_op`: each record's part).
    fn picks(&self, profile: &Profile, d: &Device, of_op: &[Part]) -> Vec<bool> {
        let ops = d.cached_ops();
        let named = |id: u32, n: &str| ops.names.get(id as usize).is_some_and(|m| &**m == n);
        match self {
            Target::Op(n) => ops.recs.iter().map(|r| named(r.name, n)).collect(),
            Target::Ops(names) => ops.recs.iter().map(|r| names.iter().any(|n| named(r.name, n))).collect(),
            Target::Module(m) => ops.recs.iter().map(|r| named(r.module, m)).collect(),
            Target::Part(p) => (0..ops.recs.len()).map(|i| of_op.get(i) == Some(p)).collect(),
            Target::Category(c) => crate::ops::recs_where(profile, d, false, |cat, _| same_category(cat, c)),
            Target::Scope(s) => crate::ops::recs_where(profile, d, true, |_, scope| in_scope(scope, s)),
        }
    }
}

/// A category as the op profile names it (`loop fusion`) against one spelt with `_`
/// for its spaces, in any case.
fn same_category(category: &str, asked: &str) -> bool {
    category.len() == asked.len()
        && category.bytes().zip(asked.bytes()).all(|(a, b)| {
            let a = if a == b' ' { b'_' } else { a };
            a.eq_ignore_ascii_case(&b)
        })
}

/// Whether name-stack scope `scope` (`train_step/layer0/mlp`) is `asked` or inside it,
/// from its jitted function down or from the scope under it.
fn in_scope(scope: &str, asked: &str) -> bool {
    let under = |s: &str| s == asked || s.strip_prefix(asked).is_some_and(|r| r.starts_with('/'));
    !asked.is_empty() && (under(scope) || scope.split_once('/').is_some_and(|(_, rest)| under(rest)))
}

/// A change to the step: what the projection assumes fixed.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Edit {
    /// Remove the host's compilation.
    pub remove_compile: bool,
    /// Remove host callbacks (what ran beside them still runs).
    pub remove_callbacks: bool,
    /// Remove the host's work before it dispatched each step (input, Python, sleeps).
    pub remove_input: bool,
    /// Make copies between host and device asynchronous (prefetched a step ahead): the
    /// host's copying and the copy ops leave the step.
    pub prefetch_copies: bool,
    /// Ops scaled by a factor (0: removed).
    pub scale: Vec<(Target, f64)>,
    /// One launch a step: the waits for dispatch and between programs go, and the
    /// elementwise ops of small programs (three ops or fewer: op-by-op code) fuse
    /// into their neighbours.
    pub jit: bool,
    /// Every device given the median device's busy time in each step.
    pub balance: bool,
    /// The loop never waits for its accelerator (GPU, TPU): each step's host work (its
    /// Python, input, launches and the sync after it) runs while the device runs the
    /// step before, so a step takes its device's time or its host's, whichever is
    /// longer. Devices that are the host's own CPU (XLA:CPU) share its cores: unchanged.
    pub dispatch_ahead: bool,
}

impl Edit {
    /// Whether it scales ops (and so needs their time beside others: [`Replayer`]).
    pub fn scales_ops(&self) -> bool {
        !self.scale.is_empty() || self.jit || self.prefetch_copies
    }

    /// The edit in words, as `stepscope whatif`'s flags spell it (its scaled targets
    /// sorted: one edit has one spelling).
    pub fn describe(&self) -> String {
        let mut w: Vec<String> = Vec::new();
        let flags = [
            (self.remove_compile, "--remove compile"),
            (self.remove_callbacks, "--remove callbacks"),
            (self.remove_input, "--remove input"),
            (self.prefetch_copies, "--prefetch copies"),
            (self.jit, "--jit"),
            (self.balance, "--balance"),
            (self.dispatch_ahead, "--dispatch-ahead"),
        ];
        w.extend(flags.iter().filter(|f| f.0).map(|f| f.1.to_string()));
        let mut scaled: Vec<String> = self.scale.iter().map(|(t, f)| format!("--scale {}={f}", t.words())).collect();
        // One spelling of one edit, whatever order its targets came in.
        scaled.sort();
        w.extend(scaled);
        if w.is_empty() {
            "none".into()
        } else {
            w.join(" ")
        }
    }

    pub fn is_empty(&self) -> bool {
        *self == Edit::default()
    }
}

/// The names `--scale` takes for a part.
pub const PART_TARGETS: [(&str, Part); 5] = [
    ("compute", Part::Compute),
    ("collectives", Part::Collective),
    ("h2d", Part::HostToDevice),
    ("d2h", Part::DeviceToHost),
    ("d2d", Part::DeviceToDevice),
];

fn part_target_name(p: Part) -> &'static str {
    PART_TARGETS.iter().find(|t| t.1 == p).map_or("?", |t| t.0)
}

/// One part of a step, measured and projected (a step's mean, on its slowest device).
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct NodeTime {
    pub node: Node,
    pub name: &'static str,
    pub measured_ps: i64,
    pub projected_ps: i64,
}

/// One step replayed.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct StepProjection {
    pub step_num: i64,
    pub measured_ps: i64,
    /// The unmodified graph replayed.
    pub replayed_ps: i64,
    pub projected_ps: i64,
    /// Its host, by its place among the hosts replayed ([`Replayed::add`]).
    #[serde(skip)]
    host: usize,
    /// In a run of several hosts, its legs unchanged and with the edit, for its hosts'
    /// join ([`pod`]).
    #[serde(skip)]
    legs: Option<Box<(pod::Legs, pod::Legs)>>,
}
stepscope_model::wire_struct!(StepProjection { step_num, measured_ps, replayed_ps, projected_ps, host, legs });

/// What an edit projects for the step.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Projection {
    pub schema: &'static str,
    pub edit: String,
    /// Steps replayed (timed, not cut, within the replay tolerance).
    pub steps: usize,
    /// Steps left out: their replay missed the measured step by more than 5%.
    pub steps_left_out: usize,
    /// Medians over the replayed steps (`gain_ps` is their difference).
    pub step_ps: i64,
    pub projected_step_ps: i64,
    pub gain_ps: i64,
    pub gain_pct: f64,
    /// The largest replay error of a replayed step, percent of its time.
    pub replay_error_max_pct: f64,
    /// The mean replay error, percent.
    pub replay_error_mean_pct: f64,
    /// Each part's mean a step, on the step's slowest device as projected.
    pub parts: Vec<NodeTime>,
    pub per_step: Vec<StepProjection>,
    /// A run of several hosts whose steps hold collectives, replayed each host apart:
    /// their join did not reproduce them ([`Replayed::finish`]), so what one host's
    /// change does to the others is not in the projection.
    #[serde(skip)]
    pub hosts_apart: bool,
}

/// A step whose unmodified replay misses it by more than this share is left out.
pub const REPLAY_TOLERANCE_PCT: f64 = 5.0;

/// Projects `edit` over the steps of `profile`.
pub fn project(profile: &Profile, edit: &Edit) -> Projection {
    replay_steps(profile, edit).finish(edit)
}

/// The steps of a profile (a run, or one of its hosts) replayed with an edit, before
/// they are summed up: the parts of a run's hosts add up ([`Replayed::add`]) to the
/// run's, whose [`Replayed::finish`] is its projection.
#[derive(Clone, Debug, Default)]
pub struct Replayed {
    per_step: Vec<StepProjection>,
    measured_parts: [i64; Node::ALL.len()],
    projected_parts: [i64; Node::ALL.len()],
    left_out: usize,
    /// The hosts its steps are of.
    hosts: usize,
    /// Its hosts' steps hold collectives and were not joined ([`Projection::hosts_apart`]).
    hosts_apart: bool,
}
stepscope_model::wire_struct!(Replayed { per_step, measured_parts, projected_parts, left_out, hosts, hosts_apart });

impl Replayed {
    /// Another host's steps (or hosts').
    pub fn add(&mut self, other: Replayed) {
        let before = self.hosts;
        self.per_step.extend(other.per_step.into_iter().map(|mut s| {
            s.host += before;
            s
        }));
        for i in 0..Node::ALL.len() {
            self.measured_parts[i] = self.measured_parts[i].saturating_add(other.measured_parts[i]);
            self.projected_parts[i] = self.projected_parts[i].saturating_add(other.projected_parts[i]);
        }
        self.left_out += other.left_out;
        self.hosts += other.hosts;
    }

    /// The steps of a run's hosts joined at their collectives ([`pod::join`]): the steps
    /// every host holds, each with the run's most common number of collectives, joined
    /// unchanged and with the edit. Where the joined steps take the time the hosts'
    /// steps took (their mean, within the tolerance: [`REPLAY_TOLERANCE_PCT`]), each of
    /// those steps gains what the join gains a step, and its replay misses by the share
    /// the join's does. Other steps (and all, where the join misses) keep their own
    /// host's replay.
    fn join_hosts(&mut self, edit: &Edit) {
        if self.hosts < 2 {
            return;
        }
        let mut order: Vec<usize> = (0..self.per_step.len()).filter(|&i| self.per_step[i].legs.is_some()).collect();
        // Until joined, hosts that hold collectives are replayed apart.
        self.hosts_apart = !order.is_empty();
        order.sort_by_key(|&i| (self.per_step[i].step_num, self.per_step[i].host));
        let shape = |i: usize| self.per_step[i].legs.as_deref().map_or(0, |l| l.0.collectives());
        // The steps every host holds once, in order, each with the run's most common shape.
        let groups: Vec<&[usize]> = order
            .chunk_by(|&a, &b| self.per_step[a].step_num == self.per_step[b].step_num)
            .filter(|g| g.len() == self.hosts && g.iter().enumerate().all(|(h, &i)| self.per_step[i].host == h))
            .collect();
        let Some(n) = pod::most_common(groups.iter().map(|g| shape(g[0]))) else { return };
        let groups: Vec<&[usize]> = groups.into_iter().filter(|g| g.iter().all(|&i| shape(i) == n)).collect();
        let steps = |edited: bool| -> Vec<Vec<&pod::Legs>> {
            let legs = |i: usize| self.per_step[i].legs.as_deref().map(|l| if edited { &l.1 } else { &l.0 });
            groups.iter().map(|g| g.iter().filter_map(|&i| legs(i)).collect()).collect()
        };
        let measured: i64 = groups.iter().flat_map(|g| g.iter()).map(|&i| self.per_step[i].measured_ps).sum();
        let (count, hosts) = (groups.len().max(1) as i64, self.hosts as i64);
        let Some(replayed) = pod::join(&steps(false), &[]) else { return };
        let (replayed, mean) = (replayed / count, measured / count / hosts);
        let off = replayed.saturating_sub(mean);
        if pct(off.saturating_abs(), mean.max(1)) > REPLAY_TOLERANCE_PCT {
            return;
        }
        let edited = steps(true);
        let factors = if edit.balance {
            let work =
                (0..self.hosts).map(|h| pod::Legs::mean(edited.iter().filter_map(|s| s.get(h).copied())).work_ps());
            pod::balance_factors(&work.collect::<Vec<_>>())
        } else {
            Vec::new()
        };
        let Some(projected) = pod::join(&edited, &factors) else { return };
        let gain = replayed.saturating_sub(projected / count);
        self.hosts_apart = false;
        // Each step misses by the join's share (its replay error is the join's).
        let miss = off as f64 / mean.max(1) as f64;
        for &i in groups.iter().flat_map(|g| g.iter()) {
            let s = &mut self.per_step[i];
            let replayed = s.measured_ps.saturating_add((s.measured_ps as f64 * miss) as i64);
            (s.replayed_ps, s.projected_ps) = (replayed, s.measured_ps.saturating_sub(gain));
        }
    }

    /// The projection of the steps: medians, and each part's mean a step. The steps of
    /// a run's hosts are first joined at their collectives ([`pod`]).
    pub fn finish(mut self, edit: &Edit) -> Projection {
        self.join_hosts(edit);
        let Replayed { per_step, measured_parts, projected_parts, left_out, hosts_apart, .. } = self;
        let mut errors: Vec<f64> = per_step
            .iter()
            .map(|s| pct(s.replayed_ps.saturating_sub(s.measured_ps).saturating_abs(), s.measured_ps.max(1)))
            .collect();
        let n = per_step.len().max(1) as i64;
        let step_ps = median(per_step.iter().map(|s| s.measured_ps));
        let projected_step_ps = median(per_step.iter().map(|s| s.projected_ps));
        let gain_ps = step_ps.saturating_sub(projected_step_ps);
        let parts = (Node::ALL.iter().enumerate())
            .filter(|(i, _)| measured_parts[*i] != 0 || projected_parts[*i] != 0)
            .map(|(i, node)| NodeTime {
                node: *node,
                name: node.name(),
                measured_ps: measured_parts[i] / n,
                projected_ps: projected_parts[i] / n,
            })
            .collect();
        // Summed in one order, whichever order the hosts came in.
        errors.sort_by(f64::total_cmp);
        Projection {
            schema: SCHEMA,
            edit: edit.describe(),
            steps: per_step.len(),
            steps_left_out: left_out,
            step_ps,
            projected_step_ps,
            gain_ps,
            gain_pct: pct(gain_ps, step_ps.max(1)),
            replay_error_max_pct: errors.last().copied().unwrap_or(0.0),
            replay_error_mean_pct: if errors.is_empty() {
                0.0
            } else {
                errors.iter().sum::<f64>() / errors.len() as f64
            },
            parts,
            per_step,
            hosts_apart,
        }
    }
}

/// Replays every step of `profile` with `edit` (beside its unchanged replay, made
/// with its graph).
pub fn replay_steps(profile: &Profile, edit: &Edit) -> Replayed {
    let replayer = Replayer::new(profile, std::slice::from_ref(edit));
    replayer.replay(edit).unwrap_or_default()
}

/// A [`Replayer`]'s replays of some edits, made at once, kept without its graphs:
/// what a run read a host at a time keeps of each host (a host's graphs, each of its
/// steps' chains of segments, come to about a sixth of its file; these replays, every
/// edit's, to about 50 bytes a step of the bench capture).
pub struct Settled {
    features: Features,
    /// The steps replayed unchanged, for every edit that changes nothing of them.
    unchanged: Option<Packed<Replayed>>,
    /// Per edit (its words) that changes them, its replay as it differs from the
    /// unchanged one. Kept as bytes (a pod keeps every host's until its reduce asks
    /// for one).
    replays: Vec<(String, Packed<Beside>)>,
}
stepscope_model::wire_struct!(Settled { features, unchanged, replays });

/// An edit's replay beside the unchanged replay of the same steps: what the edit
/// changes of it (each step's projected time and legs, the parts), not what it shares
/// (which steps, their measured and replayed times, their hosts, their legs
/// unchanged): on the bench capture a host's replays of its edits came to 144 kB with
/// its unchanged one, from 412 kB whole. The whole where the steps differ.
#[derive(Default)]
struct Beside {
    measured_parts: [i64; Node::ALL.len()],
    projected_parts: [i64; Node::ALL.len()],
    left_out: usize,
    /// Per step, its projected time less the unchanged one's.
    projected_ps: Vec<i64>,
    /// Per step, its legs with the edit.
    legs: Vec<Option<pod::Legs>>,
    /// The replay whole, where its steps are not the unchanged replay's.
    whole: Option<Replayed>,
}
stepscope_model::wire_struct!(Beside { measured_parts, projected_parts, left_out, projected_ps, legs, whole });

impl Beside {
    /// `edited` as it differs from `unchanged`.
    fn of(unchanged: &Replayed, edited: Replayed) -> Beside {
        let same = |a: &StepProjection, b: &StepProjection| {
            (a.step_num, a.measured_ps, a.replayed_ps, a.host) == (b.step_num, b.measured_ps, b.replayed_ps, b.host)
                && a.legs.as_ref().map(|l| &l.0) == b.legs.as_ref().map(|l| &l.0)
        };
        let lined_up = unchanged.per_step.len() == edited.per_step.len()
            && unchanged.per_step.iter().zip(&edited.per_step).all(|(a, b)| same(a, b))
            && (unchanged.hosts, unchanged.hosts_apart) == (edited.hosts, edited.hosts_apart);
        if !lined_up {
            return Beside { whole: Some(edited), ..Default::default() };
        }
        let projected_ps = (unchanged.per_step.iter().zip(&edited.per_step))
            .map(|(a, b)| b.projected_ps.wrapping_sub(a.projected_ps))
            .collect();
        let legs = edited.per_step.into_iter().map(|s| s.legs.map(|l| l.1)).collect();
        let (measured_parts, projected_parts, left_out) =
            (edited.measured_parts, edited.projected_parts, edited.left_out);
        Beside { measured_parts, projected_parts, left_out, projected_ps, legs, whole: None }
    }

    /// The edit's replay, from the unchanged one (`None` where they do not line up:
    /// bytes not put by [`Beside::of`]).
    fn replayed(self, mut unchanged: Replayed) -> Option<Replayed> {
        if let Some(whole) = self.whole {
            return Some(whole);
        }
        if self.projected_ps.len() != unchanged.per_step.len() || self.legs.len() != unchanged.per_step.len() {
            return None;
        }
        for ((s, d), legs) in unchanged.per_step.iter_mut().zip(self.projected_ps).zip(self.legs) {
            s.projected_ps = s.projected_ps.wrapping_add(d);
            s.legs = match (s.legs.take(), legs) {
                (Some(l), Some(edited)) => Some(Box::new((l.0, edited))),
                _ => None,
            };
        }
        unchanged.measured_parts = self.measured_parts;
        unchanged.projected_parts = self.projected_parts;
        unchanged.left_out = self.left_out;
        Some(unchanged)
    }
}

impl Settled {
    /// `edits` of `profile` (a run of several hosts or one of them: `in_pod`, as
    /// [`Replayer::of_run`] takes it) replayed, the graphs then dropped. Each edit's
    /// cuts are made as it is replayed and let go after, not all held at once.
    pub fn of(profile: &Profile, edits: &[Edit], in_pod: bool) -> Settled {
        profile.prepare();
        let replayer = Replayer::of_graphs(profile, graphs_unkept(profile), &[], in_pod);
        let unchanged = replayer.replay(&Edit::default()).unwrap_or_default();
        let changing: Vec<&Edit> = edits.iter().filter(|e| !replayer.features.unchanged_by(e)).collect();
        let crowds = if changing.iter().any(|e| e.scales_ops()) { crowds(profile) } else { Vec::new() };
        let none = Cuts { per_device: Vec::new() };
        let replays = (changing.par_iter())
            .map(|e| {
                let made = e.scales_ops().then(|| cuts_of(profile, &crowds, e));
                let edited = replayer.replay_with(e, made.as_ref().unwrap_or(&none));
                (e.describe(), Packed::new(&Beside::of(&unchanged, edited)))
            })
            .collect();
        Settled { features: replayer.features, unchanged: Some(Packed::new(&unchanged)), replays }
    }

    /// Every step replayed with `edit`, as [`Replayer::replay`] replays it; `None`
    /// where `edit` changes the steps and was not one of the edits settled.
    pub fn replay(&self, edit: &Edit) -> Option<Replayed> {
        if self.features.unchanged_by(edit) {
            return self.unchanged.as_ref().and_then(Packed::get);
        }
        let key = edit.describe();
        let beside = self.replays.iter().find(|(k, _)| *k == key)?.1.get()?;
        beside.replayed(self.unchanged.as_ref()?.get()?)
    }

    /// `other`'s replays too: the same steps' (its profile read again), of more edits.
    pub fn absorb(&mut self, other: Settled) {
        for (key, replayed) in other.replays {
            if !self.replays.iter().any(|(k, _)| *k == key) {
                self.replays.push((key, replayed));
            }
        }
    }
}

/// What replaying a profile's steps with some edits needs, without the profile: its
/// graphs, what they hold, and for each edit that scales ops the time they save on each
/// device. A run read a host at a time keeps one a host, and replays an edit only when
/// a finding asks for its gain.
pub struct Replayer {
    graphs: Arc<Graphs>,
    /// What the steps hold: an edit that changes nothing of them replays as unchanged.
    features: Features,
    /// Per edit that scales ops (by its words), the cuts of its devices.
    cuts: Vec<(String, Cuts)>,
    /// The hosts its steps are of.
    hosts: usize,
    /// Of a host of a run of several (or a run of several read whole), each graph's
    /// legs unchanged, for the hosts' join ([`pod`]); else none.
    unchanged_legs: Vec<Option<pod::Legs>>,
}

impl Replayer {
    /// Ready to replay `edits` of `profile` (and any edit that scales no op). The
    /// devices' ops are counted once for all the edits.
    pub fn new(profile: &Profile, edits: &[Edit]) -> Replayer {
        Replayer::of_run(profile, edits, profile.hosts.len() > 1)
    }

    /// [`Replayer::new`] of `profile`, a run of several hosts or one of them
    /// (`in_pod`): its steps keep what joining them to the other hosts' needs.
    pub fn of_run(profile: &Profile, edits: &[Edit], in_pod: bool) -> Replayer {
        // The stages the edits' cuts read, made here (not inside the pool).
        profile.prepare();
        Replayer::of_graphs(profile, graphs(profile), edits, in_pod)
    }

    /// [`Replayer::of_run`] of `profile`'s `graphs`.
    fn of_graphs(profile: &Profile, graphs: Arc<Graphs>, edits: &[Edit], in_pod: bool) -> Replayer {
        let features = Features::of(&graphs);
        let scaling: Vec<&Edit> = edits.iter().filter(|e| e.scales_ops() && !features.unchanged_by(e)).collect();
        let mut cuts = Vec::new();
        if !scaling.is_empty() {
            let crowds = crowds(profile);
            cuts = scaling.par_iter().map(|e| (e.describe(), cuts_of(profile, &crowds, e))).collect();
        }
        let none = Cuts { per_device: Vec::new() };
        let unchanged_legs = if in_pod {
            graphs.steps.par_iter().map(|g| pod::step_legs(g, &Edit::default(), &none)).collect()
        } else {
            Vec::new()
        };
        Replayer { graphs, features, cuts, hosts: profile.hosts.len(), unchanged_legs }
    }

    /// Every step replayed with `edit`; `None` where `edit` scales ops and was not one
    /// of the edits it was made for.
    pub fn replay(&self, edit: &Edit) -> Option<Replayed> {
        let unchanged = Edit::default();
        let edit = if self.features.unchanged_by(edit) { &unchanged } else { edit };
        let none = Cuts { per_device: Vec::new() };
        let cuts = if edit.scales_ops() {
            let key = edit.describe();
            &self.cuts.iter().find(|(k, _)| *k == key)?.1
        } else {
            &none
        };
        Some(self.replay_with(edit, cuts))
    }

    /// Every step replayed with `edit`, which changes them, its devices cut by `cuts`.
    fn replay_with(&self, edit: &Edit, cuts: &Cuts) -> Replayed {
        let mut out = Replayed::default();
        for (k, g) in self.graphs.steps.iter().enumerate().filter(|(_, g)| !g.chains.is_empty()) {
            let measured = g.end_ps.saturating_sub(g.start_ps);
            let Some(replayed) = g.replayed_ps else { continue };
            let error = pct(replayed.saturating_sub(measured).saturating_abs(), measured.max(1));
            if error > REPLAY_TOLERANCE_PCT {
                out.left_out += 1;
                continue;
            }
            let Some((projected, r)) = replay_step(g, edit, cuts) else { continue };
            for s in &g.chains[r.chain].segments {
                let i = node_index(s.node);
                out.measured_parts[i] = out.measured_parts[i].saturating_add(s.duration_ps());
            }
            for (p, r) in out.projected_parts.iter_mut().zip(r.by_node) {
                *p = p.saturating_add(r);
            }
            let legs = (self.unchanged_legs.get(k).cloned().flatten())
                .and_then(|unchanged| Some(Box::new((unchanged, pod::step_legs(g, edit, cuts)?))));
            out.per_step.push(StepProjection {
                step_num: g.step_num,
                measured_ps: measured,
                replayed_ps: replayed,
                projected_ps: projected,
                host: g.host,
                legs,
            });
        }
        out.hosts = self.hosts;
        out
    }
}

/// Each device's crowd, for the cuts of edits that scale ops ([`cuts_of`]).
fn crowds(profile: &Profile) -> Vec<Crowd> {
    profile.devices().iter().map(Crowd::of).collect()
}

/// The cuts of `edit` (one that scales ops) on each device of `profile`.
fn cuts_of(profile: &Profile, crowds: &[Crowd], edit: &Edit) -> Cuts {
    let (devices, base) = (profile.devices(), profile.time_base());
    let mut per_device: Vec<Option<Vec<Cut>>> = Vec::new();
    for (d, crowd) in devices.iter().zip(crowds) {
        if per_device.len() <= d.index {
            per_device.resize_with(d.index + 1, || None);
        }
        per_device[d.index] = device_cuts(profile, d, &base.kinds[d.index].of_op, edit, crowd);
    }
    Cuts { per_device }
}

/// The least time any device of `g` waited after its last op: the host's sync and
/// loop after the step (the tail).
fn step_tail(g: &StepGraph) -> i64 {
    g.chains.iter().map(chain_tail).min().unwrap_or(0)
}

fn chain_tail(c: &Chain) -> i64 {
    c.segments.last().filter(|s| s.node == Node::Tail).map_or(0, Segment::duration_ps)
}

/// Where chain `r` ends as the step's end, from the step's start: less its own tail,
/// plus the step's.
fn step_end(g: &StepGraph, r: &Replay, tail: i64) -> i64 {
    if r.ahead {
        // Its tail ran beside its device's work.
        return r.end_ps.saturating_sub(g.start_ps);
    }
    let own_tail = chain_tail(&g.chains[r.chain]);
    r.end_ps.saturating_sub(own_tail).saturating_add(tail).saturating_sub(g.start_ps)
}

/// The chains of `g` with an op in them.
fn working(g: &StepGraph) -> impl Iterator<Item = (usize, &Chain)> {
    g.chains.iter().enumerate().filter(|(_, c)| c.segments.iter().any(|s| s.node.is_op()))
}

/// Replays `chains` joined at their collectives, or each alone where they cannot be.
fn replay_chains(start: i64, chains: &[ToReplay], edit: &Edit) -> Vec<Replay> {
    replay_joined(start, chains, edit).unwrap_or_else(|| {
        (chains.iter())
            .map(|&(ci, c, cut, b)| {
                let mut r = replay(start, c, edit, cut, b);
                r.chain = ci;
                r
            })
            .collect()
    })
}

/// A step's unchanged replay: its time (`None` where no device worked in it).
fn replay_unchanged(g: &StepGraph) -> Option<i64> {
    let unchanged: Vec<ToReplay> = working(g).map(|(ci, c)| (ci, c, None, None)).collect();
    let tail = step_tail(g);
    replay_chains(g.start_ps, &unchanged, &Edit::default()).iter().map(|r| step_end(g, r, tail)).max()
}

/// One step replayed with `edit`: its projected time, and the replay of its slowest
/// device as projected. A step ends when its slowest device's last op has, and the
/// host's sync and loop after it ([`step_tail`]).
fn replay_step(g: &StepGraph, edit: &Edit, cuts: &Cuts) -> Option<(i64, Replay)> {
    let changed = to_replay(g, edit, cuts);
    let tail = step_tail(g);
    let worst = replay_chains(g.start_ps, &changed, edit).into_iter().max_by_key(|r| step_end(g, r, tail))?;
    Some((step_end(g, &worst, tail), worst))
}

/// Per timed step of `profile` with a graph (by its index in the model's steps), its
/// critical path ([`critical_path`]).
pub fn critical_paths(profile: &Profile) -> Vec<(usize, [i64; Node::ALL.len()])> {
    let graphs = graphs(profile);
    graphs.steps.iter().filter_map(|g| Some((g.step, critical_path(g)?))).collect()
}

/// Gives each of `steps` (the model's steps of `profile`, in its order: [`steps::steps`]'s, or
/// a host's read alone) its critical path ([`steps::Step::critical_path`]). It replays the
/// steps' what-if graphs, which `advise` and `whatif` build too: asked for
/// (`steps --critical-path`), not made for every `steps`.
pub fn add_critical_paths(profile: &Profile, steps: &mut [steps::Step]) {
    for (i, path) in critical_paths(profile) {
        let mut parts: Vec<steps::PathPart> = (Node::ALL.iter().zip(path))
            .filter(|(_, ps)| *ps > 0)
            .map(|(n, ps)| steps::PathPart { node: n.id(), name: n.name(), ps })
            .collect();
        parts.sort_by_key(|p| std::cmp::Reverse(p.ps));
        if let Some(step) = steps.get_mut(i) {
            step.critical_path = parts;
        }
    }
}

/// The time by node along step `g`'s critical path, replayed as measured: on one
/// device, its chain; on devices joined at collectives, the chain of the device that
/// reached each collective last, up to it, and the transfer; after the last, the chain
/// that ended the step, with the step's tail. Adds up to the unchanged replay's time
/// (`None` where no device worked in the step).
fn critical_path(g: &StepGraph) -> Option<[i64; Node::ALL.len()]> {
    let chains: Vec<&Chain> = working(g).map(|(_, c)| c).collect();
    let edit = Edit::default();
    let count = |c: &Chain| c.segments.iter().filter(|s| s.node == Node::Collective).count();
    let n = count(chains.first()?);
    let joined = chains.len() > 1 && n > 0 && chains.iter().all(|c| count(c) == n);
    let mut cursors: Vec<Cursor> = chains.iter().map(|c| Cursor::new(g.start_ps, c, None, None)).collect();
    // Each chain's time by node where the path last left the chains (the last join).
    let mut marks: Vec<[i64; Node::ALL.len()]> = vec![[0; Node::ALL.len()]; cursors.len()];
    let mut path = [0i64; Node::ALL.len()];
    let add_since = |path: &mut [i64; Node::ALL.len()], mark: &[i64; Node::ALL.len()], now: &[i64; Node::ALL.len()]| {
        for ((p, m), t) in path.iter_mut().zip(mark).zip(now) {
            *p = p.saturating_add(t.saturating_sub(*m));
        }
    };
    for _ in 0..if joined { n } else { 0 } {
        let (mut last, mut transfer) = ((i64::MIN, 0usize), i64::MAX);
        for (i, cursor) in cursors.iter_mut().enumerate() {
            let s = cursor.run_until(&edit, |s| s.node == Node::Collective)?;
            if cursor.t > last.0 {
                last = (cursor.t, i);
            }
            transfer = transfer.min(cursor.op_time(s));
        }
        add_since(&mut path, &marks[last.1], &cursors[last.1].by_node);
        let i = node_index(Node::Collective);
        path[i] = path[i].saturating_add(transfer);
        for (cursor, mark) in cursors.iter_mut().zip(&mut marks) {
            cursor.advance_to(last.0.saturating_add(transfer), Node::Collective);
            *mark = cursor.by_node;
        }
    }
    for cursor in &mut cursors {
        cursor.run_until(&edit, |_| false);
    }
    // The chain that ended the step: its own tail is the step's ([`step_end`]).
    let tail = step_tail(g);
    let end = |c: &Cursor| c.t.saturating_sub(chain_tail(c.chain)).saturating_add(tail);
    let w = (0..cursors.len()).max_by_key(|&i| end(&cursors[i]))?;
    add_since(&mut path, &marks[w], &cursors[w].by_node);
    let t = node_index(Node::Tail);
    path[t] = path[t].saturating_sub(chain_tail(cursors[w].chain)).saturating_add(tail);
    Some(path)
}

/// The median of `values` (0 for none; the upper of the middle two).
fn median(values: impl Iterator<Item = i64>) -> i64 {
    let mut v: Vec<i64> = values.collect();
    v.sort_unstable();
    v.get(v.len() / 2).copied().unwrap_or(0)
}

/// A chain's work: its ops' nodes but collectives (where a device also waits for its
/// peers).
fn work_of(c: &Chain) -> i64 {
    let work = c.segments.iter().filter(|s| s.node.is_op() && s.node != Node::Collective);
    work.map(Segment::duration_ps).fold(0, i64::saturating_add)
}

/// The working chains of `g` as `edit` replays them: each with its device's cuts, and
/// (`--balance`) the factor that gives a chain busier than the step's median chain
/// the median's work.
fn to_replay<'g>(g: &'g StepGraph, edit: &Edit, cuts: &'g Cuts) -> Vec<ToReplay<'g>> {
    let median_work = if edit.balance { median_work(g) } else { 0 };
    working(g)
        .map(|(ci, c)| {
            let balance = edit.balance.then(|| work_of(c)).filter(|&w| w > median_work && w > 0);
            (ci, c, cuts.get(c.device), balance.map(|w| median_work as f64 / w as f64))
        })
        .collect()
}

/// The median of the work of a step's devices that did work in it (of an even count,
/// the lower middle: of two devices, the one that did less).
fn median_work(g: &StepGraph) -> i64 {
    let mut busy: Vec<i64> = g.chains.iter().map(work_of).filter(|&b| b > 0).collect();
    busy.sort_unstable();
    busy.get(busy.len().saturating_sub(1) / 2).copied().unwrap_or(0)
}

/// A chain replayed.
struct Replay {
    end_ps: i64,
    /// The time each node took in the replay.
    by_node: [i64; Node::ALL.len()],
    chain: usize,
    /// Replayed with its host dispatching ahead ([`Edit::dispatch_ahead`]).
    ahead: bool,
}

/// What scaling a set of a device's ops saves.
struct Cut {
    /// Their time with no other op of the device running.
    alone: Intervals,
    /// Their time beside other ops: level `j` where `j + 1` of them or more ran.
    beside: Vec<Intervals>,
    /// Of the time beside others, the share that scaling each of them saves: on XLA:CPU
    /// one thread's (of the device's threads), which the others get; elsewhere none.
    share: f64,
    factor: f64,
}

/// A [`Cut`] read along a chain: its windows come in time order.
struct CutCursor<'c> {
    alone: stepscope_model::stats::Cursor<'c>,
    beside: Vec<stepscope_model::stats::Cursor<'c>>,
    share: f64,
    factor: f64,
}

impl<'c> CutCursor<'c> {
    fn new(cut: &'c Cut) -> CutCursor<'c> {
        let beside = cut.beside.iter().map(Intervals::cursor).collect();
        CutCursor { alone: cut.alone.cursor(), beside, share: cut.share, factor: cut.factor }
    }

    /// The time scaling them saves in `[lo, hi)`.
    fn saved(&mut self, lo: i64, hi: i64) -> i64 {
        let beside: i64 = self.beside.iter_mut().map(|b| b.overlap(lo, hi)).sum();
        let time = self.alone.overlap(lo, hi) as f64 + self.share * beside as f64;
        ((1.0 - self.factor.clamp(0.0, 1.0)) * time) as i64
    }
}

/// The threads an XLA:CPU device ran ops on.
fn op_threads(d: &Device) -> f64 {
    let mut ran = vec![false; d.plane.lines.len()];
    for r in &d.cached_ops().recs {
        if let Some(line) = ran.get_mut(r.line as usize) {
            *line = true;
        }
    }
    ran.iter().filter(|&&l| l).count().max(1) as f64
}

/// Per device: the time scaled ops save.
struct Cuts {
    per_device: Vec<Option<Vec<Cut>>>,
}

impl Cuts {
    fn get(&self, device: usize) -> Option<&[Cut]> {
        self.per_device.get(device).and_then(|c| c.as_deref())
    }
}

/// The exclusive time of each scaled set of device `d`'s ops (what no other op
/// covers), with the factor it is scaled by: each target's ops are one set.
fn device_cuts(profile: &Profile, d: &Device, of_op: &[Part], edit: &Edit, crowd: &Crowd) -> Option<Vec<Cut>> {
    let ops = d.cached_ops();
    // Each target's records are one set: where only they ran, their time scales.
    let mut sets: Vec<(f64, Vec<bool>)> = edit.scale.iter().map(|(t, f)| (*f, t.picks(profile, d, of_op))).collect();
    if edit.jit {
        let fused = fused_under_jit(d);
        sets.push((0.0, ops.recs.iter().map(|r| fused.get(r.name as usize) == Some(&true)).collect()));
    }
    if edit.prefetch_copies {
        let copies = (0..ops.recs.len()).map(|i| matches!(of_op.get(i), Some(Part::HostToDevice | Part::DeviceToHost)));
        sets.push((0.0, copies.collect()));
    }
    // XLA:CPU: an op beside others held one of the device's threads; without it, they
    // have that thread too.
    let share = match d.source {
        stepscope_model::OpSource::HostOps => 1.0 / op_threads(d),
        _ => 0.0,
    };
    let mut out = Vec::new();
    for (f, picked) in &sets {
        let mine: Vec<(i64, i64)> = (0..ops.recs.len())
            .filter(|&i| picked[i])
            .map(|i| {
                let (_, a, b, _) = ops.span(d.plane, i);
                (a, b)
            })
            .collect();
        if mine.is_empty() {
            continue;
        }
        // Of the time beside others, each of them saves one thread's share: no more
        // levels than the device has threads.
        let levels = if share > 0.0 { (1.0 / share).round() as u32 } else { 0 };
        let (alone, beside) = crowd.alone_and_beside(&Crowd::count(mine), levels);
        out.push(Cut { alone, beside, share, factor: *f });
    }
    (!out.is_empty()).then_some(out)
}

/// How many of a device's ops run at each time: `counts[i]` ops from `times[i]` to
/// `times[i + 1]` (times increasing; 0 after the last). Two columns of their exact
/// length (a busy XLA:CPU device has two steps an op: a host's largest list while its
/// edits are cut).
struct Crowd {
    times: Vec<i64>,
    counts: Vec<u32>,
}

impl Crowd {
    /// Device `d`'s ops.
    fn of(d: &Device) -> Crowd {
        let ops = d.cached_ops();
        let (mut starts, mut ends) = (Vec::with_capacity(ops.recs.len()), Vec::with_capacity(ops.recs.len()));
        for i in 0..ops.recs.len() {
            let (_, a, b, _) = ops.span(d.plane, i);
            if b > a {
                starts.push(a);
                ends.push(b);
            }
        }
        Crowd::of_starts_and_ends(starts, ends)
    }

    /// The count of `spans` (empty ones are not counted).
    fn count(spans: impl IntoIterator<Item = (i64, i64)>) -> Crowd {
        let (starts, ends): (Vec<i64>, Vec<i64>) = spans.into_iter().filter(|(a, b)| b > a).unzip();
        Crowd::of_starts_and_ends(starts, ends)
    }

    /// The count of the spans whose starts and ends these are (each end after its start).
    fn of_starts_and_ends(mut starts: Vec<i64>, mut ends: Vec<i64>) -> Crowd {
        starts.sort_unstable();
        ends.sort_unstable();
        // At most a step a start and an end; the room not used is never touched, and
        // given back at the end.
        let most = starts.len() + ends.len();
        let (mut times, mut counts) = (Vec::with_capacity(most), Vec::with_capacity(most));
        // Each time's count after all its starts and ends (an op ends after it starts:
        // the count never goes below 0).
        let (mut i, mut j, mut n) = (0usize, 0usize, 0u32);
        while j < ends.len() {
            let t = match starts.get(i) {
                Some(&s) if s < ends[j] => s,
                _ => ends[j],
            };
            while starts.get(i) == Some(&t) {
                (n, i) = (n + 1, i + 1);
            }
            while ends.get(j) == Some(&t) {
                (n, j) = (n.saturating_sub(1), j + 1);
            }
            if counts.last() != Some(&n) {
                times.push(t);
                counts.push(n);
            }
        }
        drop((starts, ends));
        times.shrink_to_fit();
        counts.shrink_to_fit();
        Crowd { times, counts }
    }

    /// Step `i`'s count, and where the next step begins.
    fn at(&self, i: usize) -> (u32, i64) {
        (self.counts[i], self.times.get(i + 1).copied().unwrap_or(i64::MAX))
    }

    /// Where `some` (a count of some of this crowd's ops) runs: alone (no other op
    /// runs then) and beside others, by how many of them ran (the first `levels`
    /// levels: level `j` where `j + 1` or more did).
    fn alone_and_beside(&self, some: &Crowd, levels: u32) -> (Intervals, Vec<Intervals>) {
        let mut alone = Vec::new();
        let mut beside: Vec<Vec<(i64, i64)>> = vec![Vec::new(); levels as usize];
        let mut k = 0usize;
        for i in 0..some.times.len() {
            let (mine, end) = some.at(i);
            if mine == 0 {
                continue;
            }
            let mut t = some.times[i];
            // The step of all ops at t: the last that begins at or before t (it ends
            // after t).
            k = k.max(self.times.partition_point(|&s| s <= t).saturating_sub(1));
            while t < end && k < self.times.len() {
                let (all, next) = self.at(k);
                let to = next.min(end);
                if all > mine {
                    beside.iter_mut().take(mine as usize).for_each(|b| b.push((t, to)));
                } else {
                    alone.push((t, to));
                }
                t = to;
                if next <= end {
                    k += 1;
                }
            }
        }
        (Intervals::new(alone), beside.into_iter().map(Intervals::new).collect())
    }
}

/// Per op name: an elementwise or data-movement op of a program of three op names or
/// fewer (op-by-op code: `jit_mul`, `jit_convert_element_type`), which a jitted step
/// fuses into the ops around it. Matmuls, convolutions and library calls stay.
fn fused_under_jit(d: &Device) -> Vec<bool> {
    let ops = d.cached_ops();
    let mut names_of: stepscope_model::records::FastMap<u32, Vec<u32>> = Default::default();
    for r in &ops.recs {
        let v = names_of.entry(r.module).or_default();
        if !v.contains(&r.name) && v.len() <= 3 {
            v.push(r.name);
        }
    }
    let mut fused = vec![false; ops.names.len()];
    for names in names_of.values().filter(|v| v.len() <= 3) {
        for &n in names {
            let name = ops.names[n as usize].to_ascii_lowercase();
            let heavy =
                ["dot", "gemm", "conv", "ynn", "cublas", "cudnn", "custom-call", "custom_call", "matmul", "sort"]
                    .iter()
                    .any(|k| name.contains(k));
            fused[n as usize] = !heavy;
        }
    }
    fused
}

/// A chain to replay: its index in the step, the chain, the cuts of its device's
/// scaled ops, the factor its work is balanced by.
type ToReplay<'c> = (usize, &'c Chain, Option<&'c [Cut]>, Option<f64>);

/// One chain's replay under an edit, segment by segment: `t` where it is, `shift` the
/// host time the edit removed so far (the host's later launches come that much
/// earlier).
struct Cursor<'c> {
    chain: &'c Chain,
    at: usize,
    t: i64,
    shift: i64,
    by_node: [i64; Node::ALL.len()],
    cuts: Vec<CutCursor<'c>>,
    /// The factor its ops' time is scaled by (`--balance`).
    balance: Option<f64>,
    /// Where the step began, and with its host dispatching ahead
    /// ([`Edit::dispatch_ahead`]), the host's own time in it so far.
    start: i64,
    host_ps: i64,
}

impl<'c> Cursor<'c> {
    fn new(start: i64, chain: &'c Chain, cuts: Option<&'c [Cut]>, balance: Option<f64>) -> Cursor<'c> {
        let cuts = cuts.unwrap_or(&[]).iter().map(CutCursor::new).collect();
        Cursor { chain, at: 0, t: start, shift: 0, by_node: [0; Node::ALL.len()], cuts, balance, start, host_ps: 0 }
    }

    /// An op segment's time under the edit: less what scaled ops save, times the
    /// balance factor.
    fn op_time(&mut self, s: &Segment) -> i64 {
        let cut = self.cuts.iter_mut().fold(0i64, |c, cut| c.saturating_add(cut.saved(s.start_ps, s.end_ps)));
        let kept = s.duration_ps().saturating_sub(cut).max(0);
        match self.balance {
            Some(b) if s.node != Node::Collective => (kept as f64 * b) as i64,
            _ => kept,
        }
    }

    /// Replays segments up to the next one `stop` names (returned, not replayed) or to
    /// the end (`None`).
    fn run_until(&mut self, edit: &Edit, stop: impl Fn(&Segment) -> bool) -> Option<&'c Segment> {
        while let Some(s) = self.chain.segments.get(self.at) {
            if stop(s) {
                return Some(s);
            }
            self.replay_one(s, edit);
            self.at += 1;
        }
        None
    }

    /// Moves to `to` (the end of a segment replayed elsewhere), crediting `node`.
    fn advance_to(&mut self, to: i64, node: Node) {
        let before = self.t;
        self.t = self.t.max(to);
        let i = node_index(node);
        self.by_node[i] = self.by_node[i].saturating_add(self.t.saturating_sub(before));
        self.at += 1;
    }

    fn replay_one(&mut self, s: &Segment, edit: &Edit) {
        let dur = s.duration_ps();
        let before = self.t;
        if edit.dispatch_ahead && self.chain.accelerator {
            // The host's own time runs beside the device's (the step before's).
            let host = match s.node {
                Node::HostWork if edit.remove_input => Some(0),
                Node::Compile if edit.remove_compile => Some(0),
                Node::HostCopy if edit.prefetch_copies => Some(0),
                Node::HostWork | Node::Dispatch | Node::Tail | Node::HostCopy | Node::Compile => Some(dur),
                _ => None,
            };
            if let Some(h) = host {
                self.host_ps = self.host_ps.saturating_add(h);
                return;
            }
        }
        match s.node {
            // What ran beside the callback still runs (`beside_callbacks`).
            Node::Callback if edit.remove_callbacks => {
                let kept = s.beside_ps.min(dur);
                self.t = self.t.saturating_add(kept);
                self.shift = self.shift.saturating_add(dur - kept);
            }
            n if n.is_op() => self.t = self.t.saturating_add(self.op_time(s)),
            Node::Compile if edit.remove_compile => self.shift = self.shift.saturating_add(dur),
            Node::HostCopy if edit.prefetch_copies => self.shift = self.shift.saturating_add(dur),
            Node::HostWork if edit.remove_input => self.shift = self.shift.saturating_add(dur),
            Node::Dispatch | Node::Queued if edit.jit => {}
            Node::Dispatch => self.t = self.t.max(s.end_ps.saturating_sub(self.shift)),
            _ => self.t = self.t.saturating_add(dur),
        }
        let i = node_index(s.node);
        self.by_node[i] = self.by_node[i].saturating_add(self.t.saturating_sub(before));
    }

    fn done(mut self, chain: usize, edit: &Edit) -> Replay {
        let ahead = edit.dispatch_ahead && self.chain.accelerator;
        if ahead {
            // A step takes its device's time or its host's, whichever is longer: what
            // the host takes beyond its device's, the device waits for it.
            let host_end = self.start.saturating_add(self.host_ps);
            if host_end > self.t {
                let i = node_index(Node::Dispatch);
                self.by_node[i] = self.by_node[i].saturating_add(host_end - self.t);
                self.t = host_end;
            }
        }
        Replay { end_ps: self.t, by_node: self.by_node, chain, ahead }
    }
}

/// `node`'s place in [`Node::ALL`] (declared in that order).
fn node_index(node: Node) -> usize {
    node as usize
}

/// Replays chain `c` of a step starting at `start` under `edit` alone.
fn replay(start: i64, c: &Chain, edit: &Edit, cuts: Option<&[Cut]>, balance: Option<f64>) -> Replay {
    let mut cursor = Cursor::new(start, c, cuts, balance);
    cursor.run_until(edit, |_| false);
    cursor.done(0, edit)
}

/// Replays `chains` of a step together, joined at their collectives: the k-th
/// collective of every chain ends when the last device got to it plus the least time
/// any device spent in it (the transfer, which the last to arrive waits for alone).
/// `None` where the chains do not hold as many collectives each (then each is replayed
/// alone).
fn replay_joined(start: i64, chains: &[ToReplay], edit: &Edit) -> Option<Vec<Replay>> {
    let count = |c: &Chain| c.segments.iter().filter(|s| s.node == Node::Collective).count();
    let n = count(chains.first()?.1);
    if chains.len() < 2 || n == 0 || chains.iter().any(|c| count(c.1) != n) {
        return None;
    }
    let mut cursors: Vec<Cursor> = chains.iter().map(|&(_, c, cuts, b)| Cursor::new(start, c, cuts, b)).collect();
    for _ in 0..n {
        let mut last = i64::MIN;
        let mut transfer = i64::MAX;
        for cursor in &mut cursors {
            let s = cursor.run_until(edit, |s| s.node == Node::Collective)?;
            last = last.max(cursor.t);
            transfer = transfer.min(cursor.op_time(s));
        }
        let end = last.saturating_add(transfer);
        for cursor in &mut cursors {
            cursor.advance_to(end, Node::Collective);
        }
    }
    Some(
        cursors
            .into_iter()
            .zip(chains)
            .map(|(mut cursor, &(ci, ..))| {
                cursor.run_until(edit, |_| false);
                cursor.done(ci, edit)
            })
            .collect(),
    )
}

/// `NAME=FACTOR`: an op's HLO name or a kind of op ([`PART_TARGETS`]) and a factor
/// from 0 (removed) to 1 (as measured) or more (slower).
pub fn parse_scale(s: &str) -> Result<(Target, f64), String> {
    let (name, factor) = s.rsplit_once('=').ok_or_else(|| format!("{s:?}: write NAME=FACTOR, e.g. dot.31=0.5"))?;
    let factor: f64 =
        factor.trim().parse().ok().filter(|f: &f64| f.is_finite() && *f >= 0.0 && *f <= 1000.0).ok_or_else(|| {
            format!("{factor:?} is not a factor: give a number from 0 (removed) to 1 (as measured) or more")
        })?;
    let name = name.trim();
    if name.is_empty() {
        return Err(format!("{s:?}: name an op (dot.31) or a kind of op (compute, collectives, h2d, d2h, d2d)"));
    }
    let prefixed = |p: &str| name.strip_prefix(p).map(str::trim).filter(|n| !n.is_empty()).map(str::to_string);
    let target = if let Some(c) = prefixed("category:") {
        Target::Category(c)
    } else if let Some(sc) = prefixed("scope:") {
        Target::Scope(sc.trim_matches('/').to_string())
    } else if let Some(m) = prefixed("module:") {
        Target::Module(m)
    } else if let Some(t) = PART_TARGETS.iter().find(|t| t.0 == name) {
        Target::Part(t.1)
    } else if ["category:", "scope:", "module:"].iter().any(|p| name.starts_with(p)) {
        return Err(format!("{s:?}: name the {} after the colon", name.trim_end_matches(':')));
    } else if name.contains(',') {
        let mut names: Vec<String> = name.split(',').map(str::trim).map(str::to_string).collect();
        if names.iter().any(String::is_empty) {
            return Err(format!("{s:?}: name an op between each two commas (dot.31,copy.2=0.5)"));
        }
        // One spelling of one set.
        names.sort();
        names.dedup();
        Target::Ops(names)
    } else {
        Target::Op(name.to_string())
    };
    Ok((target, factor))
}

impl Edit {
    /// An edit from `stepscope whatif`'s words (what [`Edit::describe`] writes and a
    /// finding's `gain_edit` holds): `--remove compile|callbacks|input`, `--prefetch
    /// copies|input`, `--scale NAME=FACTOR`, `--jit`, `--balance`, `--dispatch-ahead`.
    pub fn parse(words: &str) -> Result<Edit, String> {
        let mut e = Edit::default();
        let mut it = words.split_whitespace();
        while let Some(w) = it.next() {
            let mut value = |flag: &str| it.next().ok_or_else(|| format!("{flag} needs a value"));
            match w {
                "--jit" => e.jit = true,
                "--balance" => e.balance = true,
                "--dispatch-ahead" => e.dispatch_ahead = true,
                "--remove" => match value(w)? {
                    "compile" => e.remove_compile = true,
                    "callbacks" => e.remove_callbacks = true,
                    "input" => e.remove_input = true,
                    other => return Err(format!("--remove {other:?}: remove compile, callbacks or input")),
                },
                "--prefetch" => match value(w)? {
                    "copies" => e.prefetch_copies = true,
                    "input" => (e.prefetch_copies, e.remove_input) = (true, true),
                    other => return Err(format!("--prefetch {other:?}: prefetch copies or input")),
                },
                "--scale" => e.scale.push(parse_scale(value(w)?)?),
                "none" if e.is_empty() => {}
                other => {
                    return Err(format!(
                        "{other:?} is not an edit: use --remove compile|callbacks|input, --prefetch copies|input, \
                         --scale NAME=FACTOR, --jit, --balance or --dispatch-ahead"
                    ))
                }
            }
        }
        Ok(e)
    }
}

/// The targets `edit` scales by name (an op, category, scope or module) that picks no
/// op any device of `profile` ran (a misspelt name would project nothing).
pub fn unknown_targets(profile: &Profile, edit: &Edit) -> Vec<Target> {
    let devices = profile.devices();
    let base = profile.time_base();
    // Each name of a set on its own: every one must have run.
    let each = |t: &Target| match t {
        Target::Ops(names) => names.iter().map(|n| Target::Op(n.clone())).collect(),
        Target::Part(_) => Vec::new(),
        t => vec![t.clone()],
    };
    (edit.scale.iter())
        .flat_map(|(t, _)| each(t))
        .filter(|t| !devices.iter().any(|d| t.picks(profile, d, &base.kinds[d.index].of_op).contains(&true)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An edit's words ([`Edit::describe`]) read back ([`Edit::parse`]) are the edit,
    /// whatever order its targets were given in: the key a run read a host at a time
    /// finds each host's replay by.
    #[test]
    fn an_edit_reads_back_from_its_words() {
        let edits = [
            Edit { remove_compile: true, ..Default::default() },
            Edit { remove_callbacks: true, remove_input: true, prefetch_copies: true, ..Default::default() },
            Edit { jit: true, balance: true, ..Default::default() },
            Edit {
                scale: vec![(Target::Op("dot.31".into()), 0.5), (Target::Part(Part::Collective), 0.0)],
                ..Default::default()
            },
            Edit {
                scale: vec![
                    (Target::Scope("train_step/layer0".into()), 0.5),
                    (Target::Module("jit_f".into()), 0.25),
                    (Target::Category("loop_fusion".into()), 0.0),
                    (Target::Ops(vec!["copy.2".into(), "dot.31".into()]), 0.5),
                ],
                ..Default::default()
            },
        ];
        for e in edits {
            let back = Edit::parse(&e.describe()).unwrap();
            assert_eq!(back.describe(), e.describe());
            let mut sorted = back.scale.clone();
            sorted.sort_by_key(|(t, _)| format!("{t:?}"));
            let mut want = e.scale.clone();
            want.sort_by_key(|(t, _)| format!("{t:?}"));
            assert_eq!(
                (back.remove_compile, back.jit, back.balance, sorted),
                (e.remove_compile, e.jit, e.balance, want)
            );
        }
        let a = Edit::parse("--scale b=0 --scale a=0").unwrap();
        let b = Edit::parse("--scale a=0 --scale b=0").unwrap();
        assert_eq!(a.describe(), b.describe());
        assert!(Edit::parse("none").unwrap().is_empty());
        // A set of ops has one spelling, whatever order its names came in.
        assert_eq!(Edit::parse("--scale dot.2,copy.1=0").unwrap().describe(), "--scale copy.1,dot.2=0");
        // A scope is a path: its slashes at either end are not part of it.
        assert_eq!(Edit::parse("--scale scope:/layer0/=0").unwrap().describe(), "--scale scope:layer0=0");
    }

    #[test]
    fn a_scope_holds_the_scopes_inside_it_from_its_function_or_below() {
        for (scope, asked, holds) in [
            ("train_step/layer0/mlp", "train_step/layer0", true),
            ("train_step/layer0/mlp", "layer0/mlp", true),
            ("train_step/layer0/mlp", "layer0", true),
            ("train_step/layer0/mlp", "mlp", false),
            ("train_step/layer01/mlp", "layer0", false),
            ("train_step/layer0", "train_step/layer0/mlp", false),
            ("", "layer0", false),
            ("train_step", "", false),
        ] {
            assert_eq!(in_scope(scope, asked), holds, "{scope} in {asked}");
        }
        assert!(same_category("loop fusion", "Loop_Fusion"));
        assert!(!same_category("loop fusion", "loop"));
    }

    /// A host of a pod keeps each edit's replay beside its unchanged one ([`Beside`]):
    /// read back, it is the replay made directly, step by step (legs included), in a
    /// fraction of the bytes. On the straggling host of a real two-process pod (its
    /// steps hold all-reduces, so each step has legs for the hosts' join).
    #[test]
    fn a_replay_kept_beside_the_unchanged_one_reads_back_whole() {
        let path = format!(
            "{}/../../tests/fixtures/cpu-pod-straggler/plugins/profile/2026_11_29_07_54_09/host1.xplane.pb",
            env!("CARGO_MANIFEST_DIR")
        );
        let space =
            stepscope_xspace::xplane::read_xspace(std::path::Path::new(&path), &stepscope_xspace::Progress::default())
                .unwrap();
        let profile = Profile::new("t", vec![space]);
        let top = crate::ops::ops(&profile, crate::ops::GroupBy::Op, 0).ops[0].name.clone();
        let edits = [
            Edit { balance: true, ..Default::default() },
            Edit { remove_compile: true, ..Default::default() },
            Edit { jit: true, ..Default::default() },
            Edit { scale: vec![(Target::Part(Part::Collective), 0.0)], ..Default::default() },
            Edit { scale: vec![(Target::Op(top), 0.0)], ..Default::default() },
        ];
        let settled = Settled::of(&profile, &edits, true);
        let unchanged = stepscope_model::wire::to_bytes(&settled.replay(&Edit::default()).unwrap());
        let mut changed = 0;
        for e in &edits {
            let direct = Replayer::of_run(&profile, std::slice::from_ref(e), true).replay(e).unwrap();
            assert!(direct.per_step.len() >= 15, "{}", direct.per_step.len());
            assert!(direct.per_step.iter().all(|s| s.legs.is_some()), "{}", e.describe());
            let kept = settled.replay(e).unwrap();
            let direct = stepscope_model::wire::to_bytes(&direct);
            assert_eq!(stepscope_model::wire::to_bytes(&kept), direct, "{}", e.describe());
            if direct != unchanged {
                changed += 1;
                let (_, beside) = settled.replays.iter().find(|(k, _)| *k == e.describe()).unwrap();
                let beside = stepscope_model::wire::to_bytes(beside);
                assert!(beside.len() * 2 < direct.len(), "{}: {} of {}", e.describe(), beside.len(), direct.len());
            }
        }
        assert!(changed >= 3, "{changed}");
    }

    #[test]
    fn the_time_some_ops_run_alone_is_theirs_less_every_other_ops() {
        // Spans of ten ops on a few threads (overlapping, touching, nested, empty),
        // from a fixed sequence; each set of them against the plain definition: alone,
        // their union less the union of the others; beside, where some of them and
        // some other ran, by how many of them.
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = |m: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % m) as i64
        };
        for _ in 0..200 {
            let spans: Vec<(i64, i64, u32)> = (0..40)
                .map(|_| {
                    let a = next(1000);
                    (a, a + next(120) - 5, next(10) as u32)
                })
                .collect();
            let all = Crowd::count(spans.iter().map(|&(a, b, _)| (a, b)));
            for picked in [vec![0u32], vec![1, 2], vec![3, 4, 5, 6, 7, 8, 9], vec![0, 1, 2, 3, 4, 5, 6, 7, 8, 9]] {
                let of = |p: bool| -> Vec<(i64, i64)> {
                    spans.iter().filter(|s| picked.contains(&s.2) == p).map(|&(a, b, _)| (a, b)).collect()
                };
                let mine = Intervals::new(of(true));
                let want_alone = mine.minus(&Intervals::new(of(false)));
                let (alone, beside) = all.alone_and_beside(&Crowd::count(of(true)), 3);
                let cover = |iv: &Intervals| (0..1200).map(|t| iv.overlap(t, t + 1)).collect::<Vec<_>>();
                assert_eq!(cover(&alone), cover(&want_alone), "{picked:?} {spans:?}");
                // Level j: j + 1 or more of them ran, beside one other or more.
                let running = |p: bool, t: i64| of(p).iter().filter(|&&(a, b)| a <= t && t < b).count();
                for (j, level) in beside.iter().enumerate() {
                    let want: Vec<i64> =
                        (0..1200).map(|t| i64::from(running(true, t) > j && running(false, t) > 0)).collect();
                    assert_eq!(cover(level), want, "level {j}: {picked:?} {spans:?}");
                }
            }
        }
    }

    #[test]
    fn a_nodes_index_is_its_place_in_all_and_its_id_is_its_json() {
        for (i, n) in Node::ALL.iter().enumerate() {
            assert_eq!(node_index(*n), i, "{n:?}");
            assert_eq!(serde_json::to_value(n).unwrap(), n.id(), "{n:?}");
        }
    }

    #[test]
    fn bad_words_say_what_to_write() {
        for (words, says) in [
            ("--remove everything", "remove compile, callbacks or input"),
            ("--prefetch", "needs a value"),
            ("--scale dot.1", "NAME=FACTOR"),
            ("--scale dot.1=-0.5", "not a factor"),
            ("--scale dot.1=NaN", "not a factor"),
            ("--faster", "is not an edit"),
            ("--scale scope:=0.5", "name the scope after the colon"),
            ("--scale dot.1,,dot.2=0.5", "between each two commas"),
        ] {
            let e = Edit::parse(words).unwrap_err();
            assert!(e.contains(says), "{words}: {e}");
        }
    }
}

/// What of the what-if graph an edit needs to change anything: the kinds of node the
/// steps hold, and whether some step has more than one device at work.
#[derive(Clone, Debug, Default)]
struct Features {
    nodes: Vec<Node>,
    several_devices: bool,
}
stepscope_model::wire_struct!(Features { nodes, several_devices });

impl Features {
    fn of(graphs: &Graphs) -> Features {
        let mut nodes: Vec<Node> = Vec::new();
        let mut several_devices = false;
        for g in &graphs.steps {
            let working = g.chains.iter().filter(|c| c.segments.iter().any(|s| s.node.is_op())).count();
            several_devices |= working > 1;
            for s in g.chains.iter().flat_map(|c| &c.segments) {
                if !nodes.contains(&s.node) {
                    nodes.push(s.node);
                }
            }
        }
        Features { nodes, several_devices }
    }

    /// True when `edit` cannot change a replay of these steps (it removes or scales
    /// nothing they hold): its replay is the unchanged one. An edit that scales ops
    /// (by name, or copies prefetched: a copy under compute still holds a thread on
    /// XLA:CPU), or jits, is never known to change nothing.
    fn unchanged_by(&self, edit: &Edit) -> bool {
        let has = |n: Node| self.nodes.contains(&n);
        let parts_scaled = edit.scale.iter().any(|(t, _)| match t {
            Target::Part(p) => has(Node::of_part(*p)),
            _ => true,
        });
        !(parts_scaled
            || edit.jit
            || (edit.remove_compile && has(Node::Compile))
            || (edit.remove_callbacks && has(Node::Callback))
            || (edit.remove_input && has(Node::HostWork))
            || edit.prefetch_copies
            || (edit.balance && self.several_devices)
            || edit.dispatch_ahead)
    }
}
