//! Which of a GPU op's kernels make one execution of it. A kernel's host launch (found
//! by `correlation_id`, stage 2) tells: the kernels launched inside one host event
//! named after the op (XLA's annotation of the thunk that ran it: a library GEMM with
//! the memset before it, a split-K GEMM's two kernels) are one execution; a launch
//! outside such an event is an execution of its own (the launch of a command buffer
//! runs each of its ops once). Kernels the profile does not link to a launch fall back
//! to adjacency: the same op on the same stream, one after the other. Back-to-back
//! executions of one op are never merged where launches tell them apart.

use stepscope_xspace::Plane;

use crate::steps::Launches;

/// What one execution of an op is known by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Execution {
    /// The start of the host event named after the op that launched the kernel.
    InScope(i64),
    /// The kernel's own launch (`correlation_id`).
    Launch(i64),
}

/// Tells the executions of a device's kernels apart: its host's launches and, per op
/// name id of the device ([`crate::records::DeviceOps::names`]), the host event
/// metadata of its annotation (resolved once, so no name is compared per kernel).
pub struct Executions<'p> {
    launches: Option<&'p Launches>,
    /// Per device name id: the metadata id of the host events named after it among the
    /// launches' scopes, [`u32::MAX`] for none.
    annotation: Vec<u32>,
}

impl<'p> Executions<'p> {
    /// For a device whose interned names are `names`, launched from `launches`, read
    /// from `host` (its host's CPU plane).
    pub fn new(launches: Option<&'p Launches>, host: Option<&Plane>, names: &[Box<str>]) -> Executions<'p> {
        let launches = launches.filter(|l| !l.is_empty());
        let mut annotation = Vec::new();
        if let (Some(l), Some(plane)) = (launches, host) {
            let metas = l.scope_metas();
            if !metas.is_empty() {
                // The scopes' names (few: one per op annotation), each matched to the
                // device's names once; TraceMe's metadata (`name:#k=v#`) is no part of it.
                let mut by_name: std::collections::HashMap<&str, u32> = std::collections::HashMap::new();
                for &m in &metas {
                    let name = plane.event_name(m);
                    by_name.entry(name.split(":#").next().unwrap_or(name)).or_insert(m);
                }
                annotation = names.iter().map(|n| by_name.get(&**n).copied().unwrap_or(u32::MAX)).collect();
            }
        }
        Executions { launches, annotation }
    }

    /// The execution of the kernel of op name id `op` launched as `corr`; `None` where
    /// the kernel is not linked to a launch.
    #[inline]
    pub fn of(&self, corr: Option<i64>, op: u32) -> Option<Execution> {
        let corr = corr?;
        match self.launches?.scope(corr)? {
            Some((start, meta)) if self.annotation.get(op as usize) == Some(&meta) => Some(Execution::InScope(start)),
            _ => Some(Execution::Launch(corr)),
        }
    }
}

/// Whether a GPU kernel continues the execution of the kernel before it in its
/// device's records: the same XLA op (name id, module id) on the same stream (line),
/// of a module (a kernel or copy of no module, `MemcpyH2D` of a `device_put`, is an
/// execution of its own), and, where both are linked to their launches, of the same
/// [`Execution`]. The op profile's `executions` and the timeline's `XLA Ops` boxes
/// both count by this.
#[inline]
pub fn same_execution(
    previous: ((u32, u32, u32), Option<Execution>),
    next: ((u32, u32, u32), Option<Execution>),
    module: &str,
) -> bool {
    previous.0 == next.0
        && !module.is_empty()
        && match (previous.1, next.1) {
            (Some(a), Some(b)) => a == b,
            _ => true,
        }
}
