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

/// Tells the executions of a device's kernels apart: its host's launches and the plane
/// they were read from.
#[derive(Clone, Copy, Default)]
pub struct Executions<'p> {
    launches: Option<&'p Launches>,
    host: Option<&'p Plane>,
}

impl<'p> Executions<'p> {
    pub fn new(launches: Option<&'p Launches>, host: Option<&'p Plane>) -> Executions<'p> {
        Executions { launches: launches.filter(|l| !l.is_empty()), host }
    }

    /// The execution of op `op`'s kernel launched as `corr`; `None` where the kernel
    /// is not linked to a launch.
    #[inline]
    pub fn of(&self, corr: Option<i64>, op: &str) -> Option<Execution> {
        let (corr, launches) = (corr?, self.launches?);
        let launch = launches.launch(corr)?;
        match (launch.scope, self.host) {
            (Some((start, meta)), Some(plane)) if names_op(plane.event_name(meta), op) => {
                Some(Execution::InScope(start))
            }
            _ => Some(Execution::Launch(corr)),
        }
    }
}

/// Whether a host event's name is op `op`'s annotation: the op's name, alone or with
/// TraceMe's metadata (`custom-call.35:#hlo_module=…#`).
fn names_op(event: &str, op: &str) -> bool {
    !op.is_empty() && event.strip_prefix(op).is_some_and(|rest| rest.is_empty() || rest.starts_with(":#"))
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

#[cfg(test)]
mod tests {
    use super::names_op;

    #[test]
    fn an_annotation_names_its_op_alone_or_with_metadata() {
        assert!(names_op("custom-call.35", "custom-call.35"));
        assert!(names_op("custom-call.35:#hlo_module=jit_f#", "custom-call.35"));
        assert!(!names_op("custom-call.350", "custom-call.35"));
        assert!(!names_op("jit_f:XLA GPU module", "custom-call.35"));
        assert!(!names_op("", ""));
    }
}
