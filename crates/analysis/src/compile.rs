//! Compilation: each time the host lowered and compiled an XLA module during the
//! capture, how long it took, and for which module.
//!
//! A compile is a top-level compile event on a host thread (`backend_compile`,
//! `backend_compile_and_load`, `PjRtCpuClient::Compile`, …); a `lower_…` event just
//! before it on the same thread is its lowering. The module is the `name`/`module`
//! stat of a compile event inside it (XLA:CPU records `jit_train_step` there), else
//! the first module that starts running on a device after the compile ends.

use std::collections::HashMap;

use serde::Serialize;
use stepscope_xspace::Plane;

use crate::steps::{host_compile_events, COMPILE, COMPILER};
use stepscope_model::device::host_cpu_plane;
use stepscope_model::{Device, Profile};

/// The compilations of a run.
#[derive(Clone, Debug, Serialize)]
pub struct Compile {
    pub schema: &'static str,
    pub run: String,
    /// Sum of all compiles' lowering and backend time.
    pub total_ps: i64,
    /// Per module, largest total first.
    pub modules: Vec<ModuleCompile>,
    /// Every compile in time order.
    pub compiles: Vec<CompileEvent>,
}

/// One module's compiles.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ModuleCompile {
    pub module: String,
    pub count: u64,
    pub total_ps: i64,
    pub max_ps: i64,
}

/// One compile.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CompileEvent {
    pub host: String,
    /// The module compiled; empty when the profile does not tell.
    pub module: String,
    /// How the module was found: `stat` (named by the compiler) or `next_run`
    /// (the first module run after the compile).
    pub module_from: &'static str,
    pub start_ps: i64,
    pub lowering_ps: i64,
    pub backend_ps: i64,
    pub total_ps: i64,
}
stepscope_model::wire_struct!(CompileEvent { host, module, module_from, start_ps, lowering_ps, backend_ps, total_ps });

fn is_lowering(name: &str) -> bool {
    name.starts_with("lower_")
}

/// Builds the compile analysis.
pub fn compile(profile: &Profile) -> Compile {
    assemble(&profile.run, compiles(profile))
}

/// The compiles of `profile`'s hosts, host by host (what [`assemble`] orders): a run
/// read a host at a time gathers each host's.
pub fn compiles(profile: &Profile) -> Vec<CompileEvent> {
    let devices = profile.devices();
    let mut compiles = Vec::new();
    let events = host_compile_events(profile);
    for ((host_index, space), hits) in profile.hosts.iter().enumerate().zip(events) {
        let Some(plane) = host_cpu_plane(space) else { continue };
        let named = named_compiles(plane, hits);
        // (lowering start, lowering length, backend start, end) of each thread's
        // top-level compiles.
        let mut spans: Vec<(i64, i64, i64, i64)> = Vec::new();
        let (mut pending_lowering, mut outer_end, mut on) = (None, i64::MIN, None);
        for &(l, i, _) in hits.iter().filter(|h| h.2 & COMPILE != 0) {
            if on != Some(l) {
                (pending_lowering, outer_end, on) = (None, i64::MIN, Some(l));
            }
            let (line, i) = (&plane.lines[l as usize], i as usize);
            let name = plane.event_name(line.meta(i));
            let (lo, hi) = (line.start_ps(i), line.end_ps(i));
            if lo < outer_end {
                continue; // nested in the compile being measured
            }
            outer_end = hi;
            if is_lowering(name) {
                pending_lowering = Some((lo, hi.saturating_sub(lo)));
            } else {
                let (start, lowering) = pending_lowering.take().unwrap_or((lo, 0));
                spans.push((start, lowering, lo, hi));
            }
        }
        // A compile inside another thread's compile (the compiler pool working for the
        // Python thread) is part of it.
        spans.sort_by(|a, b| a.2.cmp(&b.2).then(b.3.cmp(&a.3)));
        // Only compiles the compiler did not name need this.
        let mut runs: Option<Vec<(i64, &str)>> = None;
        let mut kept_end = i64::MIN;
        for (start, lowering, lo, hi) in spans {
            if hi <= kept_end {
                continue;
            }
            kept_end = hi;
            let (module, module_from) = match named.iter().find(|(t, _)| *t >= start && *t < hi) {
                Some((_, m)) => (m.to_string(), "stat"),
                None => {
                    match runs.get_or_insert_with(|| first_runs(&devices, host_index)).iter().find(|(t, _)| *t >= hi) {
                        Some((_, m)) => (m.to_string(), "next_run"),
                        None => (String::new(), "unknown"),
                    }
                }
            };
            compiles.push(CompileEvent {
                host: space.host.clone(),
                module,
                module_from,
                start_ps: start,
                lowering_ps: lowering,
                backend_ps: hi.saturating_sub(lo),
                total_ps: lowering.saturating_add(hi.saturating_sub(lo)),
            });
        }
    }
    compiles
}

/// The compile analysis of run `run` from its hosts' compiles ([`compiles`]).
pub fn assemble(run: &str, mut compiles: Vec<CompileEvent>) -> Compile {
    compiles.sort_by(|a, b| a.start_ps.cmp(&b.start_ps).then_with(|| a.host.cmp(&b.host)));
    let mut modules: Vec<ModuleCompile> = Vec::new();
    for c in &compiles {
        match modules.iter_mut().find(|m| m.module == c.module) {
            Some(m) => {
                m.count += 1;
                m.total_ps = m.total_ps.saturating_add(c.total_ps);
                m.max_ps = m.max_ps.max(c.total_ps);
            }
            None => modules.push(ModuleCompile {
                module: c.module.clone(),
                count: 1,
                total_ps: c.total_ps,
                max_ps: c.total_ps,
            }),
        }
    }
    modules.sort_by(|a, b| b.total_ps.cmp(&a.total_ps).then_with(|| a.module.cmp(&b.module)));
    Compile {
        schema: "stepscope.compile/1",
        run: run.to_string(),
        total_ps: stepscope_model::stats::sum_ps(compiles.iter().map(|c| c.total_ps)),
        modules,
        compiles,
    }
}

/// A program's name as JAX makes it (`jit_f`, `pmap_f`, `xmap_f`).
fn is_module_name(v: &str) -> bool {
    v.starts_with("jit_") || v.starts_with("pmap_") || v.starts_with("xmap_")
}

/// When each module first ran on host `host_index`'s devices, in time order.
fn first_runs<'a>(devices: &'a [Device], host_index: usize) -> Vec<(i64, &'a str)> {
    let mut first_run: HashMap<&str, i64> = HashMap::new();
    for d in devices.iter().filter(|d| d.host_index == host_index) {
        // Device planes name each module execution on their `XLA Modules` line.
        if let Some(line) = d.plane.line("XLA Modules") {
            for i in 0..line.len() {
                let e = first_run.entry(d.plane.event_name(line.meta(i))).or_insert(line.start_ps(i));
                *e = (*e).min(line.start_ps(i));
            }
        }
        // Per interned module name first, then by name; ops of no module are skipped
        // before their start is read.
        let ops = d.cached_ops();
        let named: Vec<bool> = ops.names.iter().map(|n| !n.is_empty()).collect();
        let mut first: Vec<Option<i64>> = vec![None; ops.names.len()];
        for r in ops.recs.iter().filter(|r| named[r.module as usize]) {
            let f = &mut first[r.module as usize];
            let t = r.start_ps(d.plane);
            *f = Some(f.map_or(t, |f| f.min(t)));
        }
        for (name, t) in ops.names.iter().zip(first).filter_map(|(n, t)| Some((n, t?))).filter(|(n, _)| !n.is_empty()) {
            let e = first_run.entry(name).or_insert(t);
            *e = (*e).min(t);
        }
    }
    let mut runs: Vec<(i64, &str)> = first_run.into_iter().map(|(m, t)| (t, m)).collect();
    runs.sort_unstable();
    runs
}

/// (start, module) of compile events that name their module in a `name` or `module`
/// stat, or in their own name's parentheses (only `jit_…`/`pmap_…`-style names: fusion
/// compilers name sub-modules too).
fn named_compiles<'p>(plane: &'p Plane, hits: &[(u32, u32, u8)]) -> Vec<(i64, &'p str)> {
    let keys: Vec<u32> = ["name", "module", "hlo_module"].iter().filter_map(|k| plane.stat_id(k)).collect();
    let mut out = Vec::new();
    for &(l, i, _) in hits.iter().filter(|h| h.2 & COMPILER != 0) {
        let (line, i) = (&plane.lines[l as usize], i as usize);
        let by_stat = keys
            .iter()
            .find_map(|&k| plane.event_stat(line, i, k).and_then(|s| plane.stat_str(&s)).filter(|v| is_module_name(v)));
        // Else the module the event's name holds: `PjRtCApiClient::CompileAndLoad(jit_f)`
        // (XLA:GPU through the PJRT C API names it so, with no stat).
        let by_name = || {
            let name = plane.event_name(line.meta(i));
            let inner = name.strip_suffix(')')?.rsplit_once('(')?.1;
            is_module_name(inner).then_some(inner)
        };
        if let Some(v) = by_stat.or_else(by_name) {
            out.push((line.start_ps(i), v));
        }
    }
    out.sort_unstable();
    out
}
