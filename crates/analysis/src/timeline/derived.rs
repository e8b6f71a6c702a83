//! Lines the timeline derives for a GPU from its kernels, as XProf's trace viewer
//! draws them above a device's streams: `XLA Modules` (a box per execution of a
//! module) and `XLA Ops` (a box per execution of an op).
//!
//! Each kernel or copy is credited to the op the op profile gives it (the kernels of a
//! command buffer to their own instructions, see [`crate::command_buffer`]), so the
//! lines and the op profile agree:
//! - consecutive kernels of one XLA op on one stream that one execution launched make
//!   one box (a library GEMM with its memset), as the op profile counts executions
//!   ([`stepscope_model::executions`]); a copy or kernel of no module (`MemcpyH2D` of
//!   a `device_put`) is one on its own;
//! - consecutive kernels of one module launched in one step, in time order over all
//!   of the device's streams, make one module execution;
//! - `Framework Ops`: each op execution named by the JAX primitive that made its HLO
//!   instruction (the last part of its `op_name`: `dot_general`), and `Framework Name
//!   Scope`: the name scopes around it (`op_name` with its transforms opened, as
//!   `ops --by scope` reads it), consecutive executions of one scope one box, nested by
//!   depth; `Source code`: each op execution named by the line of the user's code that
//!   made it (as `ops --by line` reads it). An op whose program's HLO names nothing is
//!   left out of them.
//!
//! A kernel's step is the step its host launch falls in (the launch found by
//! `correlation_id`), else the step its own start falls in, so that when the loop
//! dispatches ahead a step's work that runs during the next step stays one box.

use std::sync::Arc;

use rayon::prelude::*;

use stepscope_xspace::{EventMeta, Line, Plane, Source, Span, Stat, StatMeta, StatValue};

use stepscope_model::executions::{same_execution, Execution};
use stepscope_model::records::FastMap;
use stepscope_model::{OpSource, Profile};

/// A plane the timeline made: the derived lines of device plane `plane` of host `host`.
pub(super) struct DerivedPlane {
    pub host: usize,
    pub plane: usize,
    pub lines: Plane,
}

/// Names of the derived lines, in the order they are drawn.
pub const MODULES_LINE: &str = "XLA Modules";
pub const OPS_LINE: &str = "XLA Ops";
pub const NAME_SCOPE_LINE: &str = "Framework Name Scope";
pub const FRAMEWORK_OPS_LINE: &str = "Framework Ops";
pub const SOURCE_LINE: &str = "Source code";

/// The module id of a module's own box (its events name no module).
const NO_MODULE: u32 = u32::MAX;

/// One kernel as the derived lines read it.
#[derive(Clone, Copy)]
struct Kernel {
    start_ps: i64,
    end_ps: i64,
    op: u32,
    module: u32,
    /// Its stream: the index of its line in the device plane.
    line: u32,
    /// Index of its step among the host's steps by start; `usize::MAX` outside them.
    step: usize,
    /// The op execution it belongs to, where its launch tells
    /// ([`stepscope_model::executions`]).
    execution: Option<Execution>,
}

/// The derived lines of every GPU whose ops are its kernels (a GPU profile that has
/// its own `XLA Ops` line keeps that one).
pub(super) fn gpu_op_lines(profile: &Profile) -> Vec<DerivedPlane> {
    let devices = profile.devices();
    let base = profile.time_base();
    let mut out = Vec::new();
    for d in devices.iter().filter(|d| d.source == OpSource::Kernels) {
        let ops = d.cached_ops();
        let space = &profile.hosts[d.host_index];
        let Some(plane) = space.planes.iter().position(|p| std::ptr::eq(p, d.plane)) else { continue };
        if ops.recs.is_empty() {
            continue;
        }
        // The host's steps by start, and the step a time falls in.
        let mut steps: Vec<(i64, i64)> =
            (base.steps.steps.iter()).filter(|s| s.host == space.host).map(|s| s.host_span()).collect();
        steps.sort_unstable();
        let step_at = |t: i64| {
            let k = steps.partition_point(|s| s.0 <= t);
            match k.checked_sub(1) {
                Some(k) if t < steps[k].1 => k,
                _ => usize::MAX,
            }
        };
        let launches = profile.launches().get(d.host_index);
        let executions = stepscope_model::profile::executions(profile, d);
        let mut kernels: Vec<Kernel> = (0..ops.recs.len())
            .into_par_iter()
            .map(|i| {
                let r = &ops.recs[i];
                let (line, start_ps, end_ps, _) = ops.span(d.plane, i);
                let launched = (ops.correlation_id(r))
                    .and_then(|c| launches.and_then(|l| l.get(c)))
                    .map_or(start_ps, |(at, _)| at);
                let execution = executions.of(ops.correlation_id(r), r.name);
                Kernel { start_ps, end_ps, op: r.name, module: r.module, line, step: step_at(launched), execution }
            })
            .collect();
        let names = |id: u32| &*ops.names[id as usize];
        let mut lines = Lines::new(d.plane);
        // Ops: the records are in stream order, then time order.
        let op_runs = runs(&kernels, |a, b| {
            let of = |k: &Kernel| ((k.op, k.module, k.line), k.execution);
            same_execution(of(a), of(b), names(b.module))
        });
        let mut op_runs: Vec<(Run, (u32, u32))> =
            op_runs.into_iter().map(|r| (r, (kernels[r.first].op, kernels[r.first].module))).collect();
        // In the order the timeline indexes a line (by start, longer first), which the
        // streams' runs nearly are: a stable sort merges them, and indexing sorts nothing.
        op_runs.sort_by_key(|(r, _)| (r.start_ps, std::cmp::Reverse(r.end_ps)));
        // Each stream's records are in time order already: a stable sort merges the runs.
        kernels.sort_by_key(|k| (k.start_ps, k.end_ps));
        let modules = runs(&kernels, |a, b| (a.module, a.step) == (b.module, b.step));
        let module_runs = modules.into_iter().filter(|r| !names(kernels[r.first].module).is_empty());
        let module_runs = module_runs.map(|r| (r, (kernels[r.first].module, NO_MODULE)));
        let line = lines.line(MODULES_LINE, -2, module_runs, names);
        lines.plane.lines.push(line);
        let framework = framework_lines(profile, d.host_index, &op_runs, names, &mut lines);
        let line = lines.line(OPS_LINE, -1, op_runs.into_iter(), names);
        lines.plane.lines.push(line);
        lines.plane.lines.extend(framework);
        out.push(DerivedPlane { host: d.host_index, plane, lines: lines.plane });
    }
    out
}

/// What the framework says of an op: its name scopes (`train_step`, `layer0`, `mlp`)
/// and the primitive that made it (`dot_general`), where its `op_name` gives them; and
/// the line of the user's code that made it (`model.py:172`), where its stack does.
struct JaxName {
    named: Option<(Vec<String>, String)>,
    source: Option<String>,
}

/// The JAX name of an op of host `host` (by its place in the run), from its program's
/// HLO on that host (another host's program of the name may be another program), the
/// latest compilation first.
fn jax_name(profile: &Profile, host: usize, op: &str, module: &str) -> Option<JaxName> {
    let modules = profile.hlo_modules().get(host)?;
    let (m, instruction) = (modules.entries().iter().rev()).find_map(|entry| {
        let m = entry.module().ok()?;
        if module != m.name && module != entry.metadata_name {
            return None;
        }
        m.instruction(op).map(|(_, i)| (m, i))
    })?;
    let stack = crate::source::op_stack(m, instruction);
    let source = crate::source::user_frame(&stack).map(|f| f.location());
    // A fused instruction may name several (`a/mul;b/add`): its first.
    let op_name = instruction.op_name.split(';').next().unwrap_or("");
    let last = op_name.rsplit('/').next().unwrap_or("").trim_end_matches(')');
    let primitive = last.rsplit('(').next().unwrap_or(last);
    let named = (!op_name.is_empty() && !primitive.is_empty()).then(|| {
        let scope = crate::ops::scope_of(op_name);
        (scope.split('/').filter(|p| !p.is_empty()).map(str::to_string).collect(), primitive.to_string())
    });
    Some(JaxName { named, source })
}

/// The `Framework Name Scope`, `Framework Ops` and `Source code` lines of a device's op
/// executions (`op_runs`, each with its (op, module) name ids, `names` reading them).
fn framework_lines<'n>(
    profile: &Profile,
    host: usize,
    op_runs: &[(Run, (u32, u32))],
    names: impl Fn(u32) -> &'n str,
    lines: &mut Lines,
) -> Vec<Line> {
    let mut known: FastMap<(u32, u32), Option<JaxName>> = FastMap::default();
    let mut runs: Vec<(Run, &JaxName)> = Vec::new();
    for &(_, key) in op_runs {
        known.entry(key).or_insert_with(|| jax_name(profile, host, names(key.0), names(key.1)));
    }
    for (r, key) in op_runs {
        if let Some(Some(j)) = known.get(key) {
            runs.push((*r, j));
        }
    }
    runs.sort_by_key(|(r, _)| (r.start_ps, std::cmp::Reverse(r.end_ps)));
    // The lines of the user's code, each execution a box.
    let mut source_line = Line::default();
    (source_line.id, source_line.display_id, source_line.name) = (-5, -5, SOURCE_LINE.to_string());
    for (r, j) in &runs {
        if let Some(at) = &j.source {
            let meta = lines.meta_text(at);
            source_line.push_event(r.start_ps, r.end_ps - r.start_ps, meta, &[]);
        }
    }
    source_line.finish();
    let runs: Vec<(Run, &(Vec<String>, String))> =
        runs.into_iter().filter_map(|(r, j)| j.named.as_ref().map(|n| (r, n))).collect();
    // Scopes: at each depth, consecutive executions under one scope path make a box.
    let mut scoped: Vec<(i64, i64, String)> = Vec::new();
    let deepest = runs.iter().map(|(_, j)| j.0.len()).max().unwrap_or(0);
    for depth in 0..deepest {
        let mut open: Option<(i64, i64, &[String])> = None;
        for (r, j) in &runs {
            let path = j.0.get(..=depth);
            match (&mut open, path) {
                (Some((_, end, p)), Some(q)) if *p == q => *end = (*end).max(r.end_ps),
                (_, q) => {
                    if let Some((a, b, p)) = open.take() {
                        scoped.push((a, b, p[depth].clone()));
                    }
                    open = q.map(|q| (r.start_ps, r.end_ps, q));
                }
            }
        }
        if let Some((a, b, p)) = open {
            scoped.push((a, b, p[depth].clone()));
        }
    }
    scoped.sort_by_key(|(a, b, _)| (*a, std::cmp::Reverse(*b)));
    let mut scope_line = Line::default();
    (scope_line.id, scope_line.display_id, scope_line.name) = (-3, -3, NAME_SCOPE_LINE.to_string());
    for (a, b, name) in scoped {
        let meta = lines.meta_text(&name);
        scope_line.push_event(a, b - a, meta, &[]);
    }
    scope_line.finish();
    let mut ops_line = Line::default();
    (ops_line.id, ops_line.display_id, ops_line.name) = (-4, -4, FRAMEWORK_OPS_LINE.to_string());
    for (r, j) in &runs {
        let meta = lines.meta_text(&j.1);
        ops_line.push_event(r.start_ps, r.end_ps - r.start_ps, meta, &[]);
    }
    ops_line.finish();
    [scope_line, ops_line, source_line].into_iter().filter(|l| !l.is_empty()).collect()
}

/// Consecutive kernels that `same` puts together.
#[derive(Clone, Copy)]
struct Run {
    first: usize,
    kernels: u64,
    start_ps: i64,
    end_ps: i64,
}

fn runs(kernels: &[Kernel], same: impl Fn(&Kernel, &Kernel) -> bool) -> Vec<Run> {
    let mut out: Vec<Run> = Vec::new();
    for (i, k) in kernels.iter().enumerate() {
        match out.last_mut() {
            Some(r) if same(&kernels[r.first], k) => {
                r.kernels += 1;
                r.end_ps = r.end_ps.max(k.end_ps);
            }
            _ => out.push(Run { first: i, kernels: 1, start_ps: k.start_ps, end_ps: k.end_ps }),
        }
    }
    out
}

/// A derived plane being filled: event metadata per (name, module), its stats'
/// metadata (`hlo_module` on an op's metadata, `kernels` on each event).
struct Lines {
    plane: Plane,
    /// By (name id, module id) of the device's op names ([`NO_MODULE`]: a module's own).
    metas: FastMap<(u32, u32), u32>,
    /// By framework name (a scope, a primitive).
    texts: FastMap<String, u32>,
    hlo_module: u32,
    kernels: u32,
}

impl Lines {
    fn new(device: &Plane) -> Lines {
        let mut plane = Plane::new(device.id, device.name.clone(), Arc::new(Source::Owned(Vec::new())));
        let mut stat = |name: &str| {
            let name = plane.push_arena(name.as_bytes());
            plane.stat_meta.push(StatMeta { id: plane.stat_meta.len() as i64, name, description: Span::EMPTY });
            plane.stat_meta.len() as u32 - 1
        };
        let (hlo_module, kernels) = (stat("hlo_module"), stat("kernels"));
        Lines { plane, metas: FastMap::default(), texts: FastMap::default(), hlo_module, kernels }
    }

    /// The metadata of events named by name id `name` of module id `module` (a
    /// module's own: [`NO_MODULE`]), `names` reading the ids.
    fn meta<'n>(&mut self, (name, module): (u32, u32), names: impl Fn(u32) -> &'n str) -> u32 {
        if let Some(&m) = self.metas.get(&(name, module)) {
            return m;
        }
        let p = &mut self.plane;
        let span = p.push_arena(names(name).as_bytes());
        let first = p.meta_stats.len() as u32;
        let module_name = if module == NO_MODULE { "" } else { names(module) };
        if !module_name.is_empty() {
            let module = p.push_arena(module_name.as_bytes());
            p.meta_stats.push(Stat::new(self.hlo_module, StatValue::Str(module)));
        }
        let stats = first..p.meta_stats.len() as u32;
        let m = p.event_meta.len() as u32;
        p.event_meta.push(EventMeta {
            id: i64::from(m),
            name: span,
            display_name: Span::EMPTY,
            stats,
            child_ids: Vec::new(),
        });
        self.metas.insert((name, module), m);
        m
    }

    /// The metadata of events named `name` (a framework name), made once.
    fn meta_text(&mut self, name: &str) -> u32 {
        if let Some(&m) = self.texts.get(name) {
            return m;
        }
        let p = &mut self.plane;
        let span = p.push_arena(name.as_bytes());
        let first = p.meta_stats.len() as u32;
        let m = p.event_meta.len() as u32;
        p.event_meta.push(EventMeta {
            id: i64::from(m),
            name: span,
            display_name: Span::EMPTY,
            stats: first..first,
            child_ids: Vec::new(),
        });
        self.texts.insert(name.to_string(), m);
        m
    }

    /// A line of one event per run, named by the (name id, module id) beside it.
    fn line<'n>(
        &mut self,
        name: &str,
        id: i64,
        runs: impl Iterator<Item = (Run, (u32, u32))>,
        names: impl Fn(u32) -> &'n str + Copy,
    ) -> Line {
        let mut line = Line::default();
        (line.id, line.display_id, line.name) = (id, id, name.to_string());
        for (r, key) in runs {
            let meta = self.meta(key, names);
            let kernels = Stat::new(self.kernels, StatValue::U64(r.kernels));
            line.push_event(r.start_ps, r.end_ps - r.start_ps, meta, &[kernels]);
        }
        line.finish();
        line
    }
}
