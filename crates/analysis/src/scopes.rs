//! The user's own host scopes: `jax.profiler.TraceAnnotation` (what `stepscope.scope`
//! and the guides' `profile_scope` helpers make) and the step annotations around
//! them, nested, per step, with the device time each scope kept busy or launched;
//! and the host's input work (data-loading scopes, `device_put`), which gives the
//! step an input share.
//!
//! A host event is a user scope when
//! - it is on a thread of the program: one that calls into JAX (a `PjitFunction(f)`
//!   dispatch, a transfer to the device, a step annotation or a Python-tracer event is
//!   on it), not one of XLA's, the runtime's or CUPTI's own (`tf_*`, `pjrt_*`,
//!   `Host Threads`, `py_xla_callback`);
//! - it is not a Python-tracer event (`$file.py:12 f`) and carries no XLA op;
//! - its name is none the JAX runtime uses (`PjitFunction(f)`, `DevicePut`, `Wait for
//!   usage holds`, `X::Y`, …: see [`is_runtime_name`]);
//! - no runtime event holds it: what the runtime does inside a `PjitFunction`
//!   (compile passes) or an execution (thunks) is never a scope, nor is user code
//!   run by the runtime (a host callback's annotations).

use rayon::prelude::*;
use serde::Serialize;
use stepscope_xspace::Plane;

use crate::profile::{host_cpu_plane, Device, Keys, Profile};
use crate::stats::{sum_ps, Intervals};
use crate::steps::{self, Step};

/// One scope path of one host.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ScopeRow {
    /// The scope's own name, `data_loading`.
    pub name: String,
    /// Its place among the scopes around it, outermost first: `train/data_loading`.
    pub path: String,
    /// 0 for a scope with no user scope around it.
    pub depth: usize,
    pub host: String,
    pub count: u64,
    /// Time inside the scope, summed over its occurrences.
    pub total_ps: i64,
    /// `total_ps` less the time in the user scopes directly inside it.
    pub self_ps: i64,
    pub avg_ps: i64,
    /// The scope's time inside steps, divided by the host's steps: what it costs a
    /// step. Absent where the profile has no steps.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub per_step_ps: Option<i64>,
    /// `per_step_ps` as a share of the mean step, percent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step_pct: Option<f64>,
    /// Time a device of the host ran an op while the scope was open (mean over the
    /// host's devices).
    pub device_busy_ps: i64,
    /// GPUs: the device time of the kernels and copies launched inside the scope,
    /// linked by `correlation_id` (mean over the host's GPUs). Absent elsewhere.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device_work_ps: Option<i64>,
    /// The scope is input work (see [`is_input_name`]).
    pub input: bool,
}

/// The host's input work and what it cost the device.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct InputWork {
    /// Time per step the host spent in input work: data-loading scopes and JAX's
    /// transfers to the device (`DevicePut`, batched copies), their union inside the
    /// steps, divided by the steps.
    pub host_input_ps: i64,
    /// `host_input_ps` as a share of the mean step, percent.
    pub host_input_pct: f64,
    /// Of that, the time per step no op ran on the device (mean over the host's
    /// devices): the device waited on input. XProf's "input time".
    pub device_idle_input_ps: i64,
    /// `device_idle_input_ps` as a share of the mean step, percent.
    pub device_idle_input_pct: f64,
    /// The names counted as input work.
    pub names: Vec<String>,
}

/// The host scopes of a run.
#[derive(Clone, Debug, Serialize)]
pub struct Scopes {
    pub schema: &'static str,
    /// Steps the per-step figures divide by (all hosts).
    pub step_count: usize,
    /// The mean step.
    pub step_ps: i64,
    pub input: InputWork,
    /// Depth first: each scope followed by the scopes inside it, larger first.
    pub scopes: Vec<ScopeRow>,
}

/// Scope paths and occurrences of one host, found once per profile.
#[derive(Default)]
pub(crate) struct HostScopes {
    /// Per path: (path, own name, depth, parent path index, input work).
    paths: Vec<(String, String, usize, Option<u32>, bool)>,
    /// Each occurrence: (path index, start, end, parent occurrence).
    occurrences: Vec<(u32, i64, i64, Option<u32>)>,
    /// Input work on the host: input scopes and transfer dispatches, as a union.
    input: Intervals,
    /// Names counted as input work.
    input_names: Vec<String>,
}

/// What a host event is, for finding scopes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// A user scope, if everything around it is one.
    Scope,
    /// Runtime work; nothing inside it is a scope.
    Runtime,
    /// Runtime work that moves input to the device (`DevicePut`, batched copies).
    Transfer,
    /// A Python-tracer event: ignored (they do not nest with the scopes).
    Python,
}

/// Prefixes of names the JAX runtime gives its own host events on the program's
/// threads (the captures' Python threads hold these around and beside the scopes).
const RUNTIME_PREFIXES: &[&str] = &[
    "PjitFunction(",
    "shard_args",
    "ParseArguments",
    "np.asarray",
    "Wait for ",
    "MemoryAllocation",
    "MemoryDeallocation",
    "Memset",
    "Memcpy",
    "ExecuteReplicated",
    "backend_compile",
    "ComputeSemaphore",
    "Handle input",
    "Handle inputs",
    "Build buffer",
    "Resolve constant",
    "AllocateOutput",
    "PJRT_",
    "Thunks",
    "command_buffer",
    "HLO Transforms",
    "BUFFER_FLUSH",
    "<UNKNOWN>",
    "ThenExecuteCallback",
    "Transpose",
    "D2H ",
    "H2D ",
    "cuLaunch",
    "cuGraph",
    "cuMem",
    "cuStream",
    "cuEvent",
    "cuCtx",
    "hipLaunch",
    "hipMemcpy",
    "hipGraph",
    "ArrayImpl.",
];

/// Prefixes of the runtime's transfers of input to the device.
const TRANSFER_PREFIXES: &[&str] = &["DevicePut", "BatchedCopyToDevice", "batched_copy_array_to_devices", "Iterator::"];

/// True for a name the JAX/XLA runtime gives its own host events (see
/// [`RUNTIME_PREFIXES`]), a C++ name (`A::B`), or a bracketed tag (`[0] …`).
pub fn is_runtime_name(name: &str) -> bool {
    name.contains("::") || name.starts_with('[') || RUNTIME_PREFIXES.iter().any(|p| name.starts_with(p))
}

/// True for a scope name that says it loads or moves input: a word such as `data`,
/// `input`, `batch`, `load`, `fetch`, `prefetch`, `dataloader`, `preprocess`,
/// `augment`, `tokenize`, `pipeline`, or `device_put`/`to_device`/`h2d` (checkpoint
/// loading is not input).
pub fn is_input_name(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    if ["checkpoint", "ckpt", "save", "restore"].iter().any(|w| lower.contains(w)) {
        return false;
    }
    if ["device_put", "to_device", "h2d", "dataloader", "data_loader", "dataset"].iter().any(|w| lower.contains(w)) {
        return true;
    }
    const WORDS: &[&str] = &[
        "data",
        "input",
        "inputs",
        "batch",
        "batches",
        "load",
        "loading",
        "loader",
        "fetch",
        "prefetch",
        "infeed",
        "preprocess",
        "preprocessing",
        "augment",
        "augmentation",
        "tokenize",
        "tokenization",
        "pipeline",
    ];
    lower.split(|c: char| !c.is_ascii_alphanumeric()).any(|w| WORDS.contains(&w))
}

fn kind_of(name: &str) -> Kind {
    if name.starts_with('$') {
        Kind::Python
    } else if TRANSFER_PREFIXES.iter().any(|p| name.starts_with(p)) {
        Kind::Transfer
    } else if is_runtime_name(name) {
        Kind::Runtime
    } else {
        Kind::Scope
    }
}

/// Threads of XLA, the PjRt runtime and CUPTI, which hold no user scopes.
fn is_runtime_thread(line_name: &str) -> bool {
    ["tf_", "pjrt_", "Host Threads", "py_xla_callback"].iter().any(|p| line_name.starts_with(p))
}

/// Finds every host's scopes (once per profile, outside the rayon pool: see
/// [`crate::cache`]); hosts in parallel.
pub(crate) fn find(profile: &Profile) -> Vec<HostScopes> {
    profile.hosts.par_iter().map(|space| host_cpu_plane(space).map(plane_scopes).unwrap_or_default()).collect()
}

fn plane_scopes(plane: &Plane) -> HostScopes {
    let keys = Keys::of(plane);
    let kinds: Vec<Kind> = plane.event_meta.iter().map(|m| kind_of(plane.text(m.name))).collect();
    let mask = |f: &dyn Fn(Kind, &str) -> bool| -> Vec<bool> {
        (plane.event_meta.iter().zip(&kinds)).map(|(m, &k)| f(k, plane.text(m.name))).collect()
    };
    let scope = mask(&|k, _| k == Kind::Scope);
    let transfer = mask(&|k, _| k == Kind::Transfer);
    let calls_jax = mask(&|k, n| matches!(k, Kind::Transfer | Kind::Python) || n.starts_with("PjitFunction("));
    let runtime = mask(&|k, _| matches!(k, Kind::Runtime | Kind::Transfer));
    // Per candidate metadata, whether its events are XLA ops (`hlo_op`: XLA:CPU runs
    // small ops inline on the calling thread) or step annotations (`step_num`), read
    // from its first event: the stats stay in the file, and reading every event's
    // would map a page of it per event.
    let mut marks: std::collections::HashMap<u32, (bool, bool)> = Default::default();
    let mut marks_of = |line: &stepscope_xspace::Line, i: usize| {
        *marks.entry(line.meta(i)).or_insert_with(|| {
            let has = |k: Option<u32>| k.and_then(|k| plane.event_stat(line, i, k)).is_some();
            (has(keys.hlo_op), has(keys.step_num))
        })
    };
    let mut out = HostScopes::default();
    // (parent path, name's metadata) -> path
    let mut index: std::collections::HashMap<(Option<u32>, u32), u32> = Default::default();
    let mut input = Vec::new();
    let mut input_names = std::collections::BTreeSet::new();
    for line in plane.lines.iter().filter(|l| !is_runtime_thread(&l.name)) {
        for i in line.events_with_meta(&transfer) {
            input.push((line.start_ps(i), line.end_ps(i)));
            input_names.insert(plane.event_name(line.meta(i)).to_string());
        }
        let mut candidates: Vec<(i64, i64, usize)> =
            line.events_with_meta(&scope).map(|i| (line.start_ps(i), line.end_ps(i), i)).collect();
        let program_thread = line.events_with_meta(&calls_jax).next().is_some()
            || candidates.iter().any(|&(_, _, i)| marks_of(line, i).1);
        if candidates.is_empty() || !program_thread {
            continue;
        }
        candidates.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
        // A candidate inside runtime work (a compile pass inside `PjitFunction`, an
        // XLA:CPU op run inline, a thunk inside an execution, a buffer allocation
        // inside a transfer) is none: a runtime event it starts inside, and that does
        // not start with it and end first, blocks it, as a stack of the line's events
        // would nest them.
        let mut blocked: Vec<bool> = candidates.iter().map(|&(_, _, i)| marks_of(line, i).0).collect();
        block_inside_runtime(line, &runtime, &candidates, &mut blocked);
        // Nest the candidates; the ones inside a blocked one are blocked too.
        let mut open: Vec<(i64, Option<u32>)> = Vec::new();
        for (&(start, end, i), &is_blocked) in candidates.iter().zip(&blocked) {
            while open.last().is_some_and(|&(e, _)| e <= start) {
                open.pop();
            }
            let parent = match open.last() {
                Some(&(_, None)) => {
                    open.push((end, None));
                    continue;
                }
                Some(&(_, Some(o))) => Some(o),
                None => None,
            };
            if is_blocked {
                open.push((end, None));
                continue;
            }
            let meta = line.meta(i);
            let parent_path = parent.map(|o| out.occurrences[o as usize].0);
            let at = *index.entry((parent_path, meta)).or_insert_with(|| {
                let name = plane.event_name(meta);
                let (path, depth) = match parent_path {
                    Some(p) => (format!("{}/{name}", out.paths[p as usize].0), out.paths[p as usize].2 + 1),
                    None => (name.to_string(), 0),
                };
                out.paths.push((path, name.to_string(), depth, parent_path, is_input_name(name)));
                out.paths.len() as u32 - 1
            });
            if out.paths[at as usize].4 {
                input.push((start, end));
                input_names.insert(out.paths[at as usize].1.clone());
            }
            out.occurrences.push((at, start, end, parent));
            open.push((end, Some(out.occurrences.len() as u32 - 1)));
        }
    }
    out.input = Intervals::new(input);
    out.input_names = input_names.into_iter().collect();
    out
}

/// Marks the candidates (by start, longer first) that start inside a runtime event of
/// `line` that does not start with them and end first. A sweep when the line's runtime
/// events come in time order (the usual case: one pass, nothing kept per event);
/// otherwise each runtime event looks its candidates up.
fn block_inside_runtime(
    line: &stepscope_xspace::Line,
    runtime: &[bool],
    candidates: &[(i64, i64, usize)],
    blocked: &mut [bool],
) {
    let in_order = line.events_with_meta(runtime).map(|i| line.start_ps(i)).is_sorted();
    if !in_order {
        for i in line.events_with_meta(runtime) {
            let (lo, hi) = (line.start_ps(i), line.end_ps(i));
            let from = candidates.partition_point(|c| c.0 < lo);
            for (c, b) in candidates[from..].iter().zip(&mut blocked[from..]) {
                if c.0 >= hi {
                    break;
                }
                *b |= c.0 > lo || hi >= c.1;
            }
        }
        return;
    }
    let mut events = line.events_with_meta(runtime).map(|i| (line.start_ps(i), line.end_ps(i))).peekable();
    // The latest end of the runtime events that started before the candidate, and
    // the ones that start with it.
    let (mut end_before, mut ties): (i64, Vec<(i64, i64)>) = (i64::MIN, Vec::new());
    for (c, b) in candidates.iter().zip(blocked.iter_mut()) {
        if ties.first().is_some_and(|t| t.0 < c.0) {
            end_before = ties.drain(..).fold(end_before, |e, t| e.max(t.1));
        }
        while let Some(&(lo, hi)) = events.peek() {
            if lo > c.0 {
                break;
            }
            events.next();
            if lo < c.0 {
                end_before = end_before.max(hi);
            } else {
                ties.push((lo, hi));
            }
        }
        *b |= end_before > c.0 || ties.iter().any(|t| t.1 >= c.1 && t.1 > c.0);
    }
}

/// The host scopes of `profile`, with their device time and the input work.
pub fn scopes(profile: &Profile) -> Scopes {
    let found = profile.host_scopes();
    let st = steps::cached(profile);
    let devices = profile.devices();
    let base = profile.time_base();
    let step_count = st.steps.len();
    let step_ps = if step_count > 0 { sum_ps(st.steps.iter().map(|s| s.duration_ps)) / step_count as i64 } else { 0 };
    let mut rows = Vec::new();
    for (hi, (space, h)) in profile.hosts.iter().zip(found).enumerate() {
        let on_host: Vec<&Device> = devices.iter().filter(|d| d.host_index == hi).collect();
        let busy: Vec<&Intervals> = on_host.iter().map(|d| &base.busy[d.index]).collect();
        let mine: Vec<&Step> = st.steps.iter().filter(|s| s.host == space.host).collect();
        let windows = Intervals::new(mine.iter().map(|s| (s.start_ps, s.end_ps())).collect());
        let mean_busy = |lo: i64, hi: i64| match busy.len() {
            0 => 0,
            n => sum_ps(busy.iter().map(|b| b.overlap(lo, hi))) / n as i64,
        };
        // Per path: count, total, time in child scopes, time in steps, busy.
        let mut acc = vec![(0u64, 0i64, 0i64, 0i64, 0i64); h.paths.len()];
        for &(p, lo, hi, parent) in &h.occurrences {
            let a = &mut acc[p as usize];
            a.0 += 1;
            a.1 = a.1.saturating_add(hi - lo);
            a.3 = a.3.saturating_add(windows.overlap(lo, hi));
            a.4 = a.4.saturating_add(mean_busy(lo, hi));
            if let Some(o) = parent {
                let (pp, plo, phi, _) = h.occurrences[o as usize];
                let inside = hi.min(phi) - lo.max(plo);
                acc[pp as usize].2 = acc[pp as usize].2.saturating_add(inside.max(0));
            }
        }
        let work = launched_per_path(profile, &space.host, h);
        let n_steps = mine.len() as i64;
        let mut host_rows: Vec<ScopeRow> = h
            .paths
            .iter()
            .zip(&acc)
            .enumerate()
            .map(|(p, ((path, name, depth, _, is_input), &(count, total, children, in_steps, busy)))| ScopeRow {
                name: name.clone(),
                path: path.clone(),
                depth: *depth,
                host: space.host.clone(),
                count,
                total_ps: total,
                self_ps: (total - children).max(0),
                avg_ps: if count > 0 { total / count as i64 } else { 0 },
                per_step_ps: (n_steps > 0).then(|| in_steps / n_steps),
                step_pct: (n_steps > 0 && step_ps > 0).then(|| 100.0 * (in_steps / n_steps) as f64 / step_ps as f64),
                device_busy_ps: busy,
                device_work_ps: work.as_ref().map(|w| w[p]),
                input: *is_input,
            })
            .collect();
        order_depth_first(&mut host_rows, &h.paths);
        rows.extend(host_rows);
    }
    let input = input_work(profile).unwrap_or_default();
    Scopes { schema: "stepscope.scopes/1", step_count, step_ps, input, scopes: rows }
}

/// The input work of the run's steps (see [`InputWork`]); `None` where there are no
/// steps or no host records any input work.
pub fn input_work(profile: &Profile) -> Option<InputWork> {
    let found = profile.host_scopes();
    let st = steps::cached(profile);
    let devices = profile.devices();
    let base = profile.time_base();
    let step_count = st.steps.len() as i64;
    if step_count == 0 || found.iter().all(|h| h.input.total() == 0) {
        return None;
    }
    let step_ps = sum_ps(st.steps.iter().map(|s| s.duration_ps)) / step_count;
    let (mut host_input, mut idle_input) = (0i64, 0i64);
    let mut names = std::collections::BTreeSet::new();
    for (hi, (space, h)) in profile.hosts.iter().zip(found).enumerate() {
        let busy: Vec<&Intervals> =
            devices.iter().filter(|d| d.host_index == hi).map(|d| &base.busy[d.index]).collect();
        let windows = Intervals::new(
            st.steps.iter().filter(|s| s.host == space.host).map(|s| (s.start_ps, s.end_ps())).collect(),
        );
        // Input work inside the steps, and the part of it no op ran.
        let inside = h.input.within(windows.spans());
        host_input = host_input.saturating_add(inside.total());
        if !busy.is_empty() {
            idle_input =
                idle_input.saturating_add(sum_ps(busy.iter().map(|b| inside.minus(b).total())) / busy.len() as i64);
        }
        if inside.total() > 0 {
            names.extend(h.input_names.iter().cloned());
        }
    }
    let pct = |ps: i64| if step_ps > 0 { 100.0 * ps as f64 / step_ps as f64 } else { 0.0 };
    let (host_input_ps, device_idle_input_ps) = (host_input / step_count, idle_input / step_count);
    Some(InputWork {
        host_input_ps,
        host_input_pct: pct(host_input_ps),
        device_idle_input_ps,
        device_idle_input_pct: pct(device_idle_input_ps),
        names: names.into_iter().collect(),
    })
}

/// GPUs: per path, the device work launched in its occurrences (see
/// [`steps::launched_work`]), measured depth by depth (occurrences of one depth do
/// not nest). `None` where the host's work is not linked to launches.
fn launched_per_path(profile: &Profile, host: &str, h: &HostScopes) -> Option<Vec<i64>> {
    let max_depth = h.paths.iter().map(|p| p.2).max()?;
    let mut per_path = vec![0i64; h.paths.len()];
    let mut any = false;
    for depth in 0..=max_depth {
        let at: Vec<usize> =
            (0..h.occurrences.len()).filter(|&o| h.paths[h.occurrences[o].0 as usize].2 == depth).collect();
        let mut spans: Vec<Step> = at
            .iter()
            .map(|&o| {
                let (_, lo, hi, _) = h.occurrences[o];
                steps::span_as_step(host, lo, hi - lo)
            })
            .collect();
        steps::launched_work(profile, &mut spans);
        for (&o, s) in at.iter().zip(&spans) {
            if let Some(w) = s.device_work_ps {
                any = true;
                per_path[h.occurrences[o].0 as usize] += w;
            }
        }
    }
    any.then_some(per_path)
}

/// Orders one host's rows depth first, children after their parent, larger first.
fn order_depth_first(rows: &mut Vec<ScopeRow>, paths: &[(String, String, usize, Option<u32>, bool)]) {
    let mut children: Vec<Vec<usize>> = vec![Vec::new(); rows.len()];
    let mut roots = Vec::new();
    for (i, p) in paths.iter().enumerate() {
        match p.3 {
            Some(parent) => children[parent as usize].push(i),
            None => roots.push(i),
        }
    }
    let by_size = |v: &mut Vec<usize>| v.sort_by(|&a, &b| rows[b].total_ps.cmp(&rows[a].total_ps).then(a.cmp(&b)));
    by_size(&mut roots);
    for c in children.iter_mut() {
        by_size(c);
    }
    let mut order = Vec::with_capacity(rows.len());
    let mut stack: Vec<usize> = roots.into_iter().rev().collect();
    while let Some(i) = stack.pop() {
        order.push(i);
        stack.extend(children[i].iter().rev());
    }
    let mut taken: Vec<Option<ScopeRow>> = rows.drain(..).map(Some).collect();
    rows.extend(order.into_iter().filter_map(|i| taken[i].take()));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        for n in ["data", "data_loading", "fetch_batch", "to_device", "input_pipeline", "DataLoader", "next-batch"] {
            assert!(is_input_name(n), "{n}");
        }
        for n in ["train_step", "forward_pass", "load_checkpoint", "lm_head", "layer_3", "update"] {
            assert!(!is_input_name(n), "{n}");
        }
        assert!(is_runtime_name("PjitFunction(train_step)"));
        assert!(is_runtime_name("PythonRefManager::CollectGarbage"));
        assert!(is_runtime_name("[0] GpuExecutable::ExecuteThunks"));
        assert!(!is_runtime_name("forward_pass"));
        assert!(kind_of("DevicePut") == Kind::Transfer);
        assert!(kind_of("$train.py:12 step") == Kind::Python);
    }
}
