//! The user's own host scopes (`jax.profiler.TraceAnnotation`), found once per
//! profile on each host's CPU plane, and the host's input work.
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
use stepscope_xspace::{Plane, Space};

use crate::device::{host_cpu_plane, Keys};
use crate::stats::Intervals;

/// Scope paths and occurrences of one host, found once per profile.
#[derive(Default)]
pub struct HostScopes {
    /// Per path: (path, own name, depth, parent path index, input work).
    pub paths: Vec<(String, String, usize, Option<u32>, bool)>,
    /// Each occurrence: (path index, start, end, parent occurrence).
    pub occurrences: Vec<(u32, i64, i64, Option<u32>)>,
    /// Input work on the host: input scopes and transfer dispatches, as a union.
    pub input: Intervals,
    /// Names counted as input work.
    pub input_names: Vec<String>,
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
/// [`crate::profile`]); hosts in parallel.
pub fn find(hosts: &[Space]) -> Vec<HostScopes> {
    hosts.par_iter().map(|space| host_cpu_plane(space).map(plane_scopes).unwrap_or_default()).collect()
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
