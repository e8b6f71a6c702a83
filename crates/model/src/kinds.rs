//! What an op's time is ([`Part`]): compute, a collective, a copy of some direction,
//! an async wait; and the parts of a device's window in which no op ran.

use serde::Serialize;

/// What an instant of a device's window was spent on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Part {
    /// An op other than a collective, a copy or an async wait ran.
    Compute,
    /// A collective ran (all-reduce, all-gather, …, send/recv), and no compute.
    Collective,
    /// A host-to-device copy ran, and nothing above.
    HostToDevice,
    /// A device-to-host copy ran, and nothing above.
    DeviceToHost,
    /// A copy within the device or between devices (`MemcpyD2D`, `copyBuffer`).
    DeviceToDevice,
    /// A `*-done` op waited for async work other than a collective (`copy-done`).
    AsyncWait,
    /// A host callback ran (`jax.pure_callback`, `io_callback`, `jax.debug.callback` /
    /// `print`: XLA's Python-callback custom calls), and nothing above: a round trip
    /// to the host's Python, never compute.
    HostCallback,
    /// Inside a program with no op running: the runtime between ops (XLA:CPU).
    RuntimeOverhead,
    /// Nothing ran while the host compiled.
    Compile,
    /// Nothing ran while the host copied to its device on host threads (`H2D
    /// Dispatch`, `DevicePut…`: XLA:CPU's copies, a GPU host's staging of arrays).
    HostCopyToDevice,
    /// Likewise from its device (`D2H…`).
    HostCopyToHost,
    /// Nothing ran, and the host did none of the above.
    Idle,
}

impl Part {
    /// Every part, in the order an instant is named by.
    pub const ALL: [Part; 12] = [
        Part::Compute,
        Part::Collective,
        Part::HostToDevice,
        Part::DeviceToHost,
        Part::DeviceToDevice,
        Part::AsyncWait,
        Part::HostCallback,
        Part::RuntimeOverhead,
        Part::Compile,
        Part::HostCopyToDevice,
        Part::HostCopyToHost,
        Part::Idle,
    ];
    /// The parts in which an op ran: the first seven.
    pub const OPS: &'static [Part] = Self::ALL.split_at(7).0;

    /// Its place in [`Part::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }
}

/// What an op's time is, from its name, its `hlo_category` and its line's name where
/// the line holds one kind only ([`one_kind`]): one of [`Part::OPS`].
pub fn op_kind(name: &str, category: &str, line: &str) -> Part {
    let hay = [name, category, line];
    let has = |pat: &str| hay.iter().any(|s| s.contains(pat));
    // CUPTI names copies `MemcpyH2D`, ROCm's tracer `CopyHostToDevice`.
    if has("H2D") || has("HtoD") || has("HostToDevice") || has("host-to-device") {
        Part::HostToDevice
    } else if has("D2H") || has("DtoH") || has("DeviceToHost") || has("device-to-host") {
        Part::DeviceToHost
    } else if has("D2D")
        || has("DtoD")
        || has("P2P")
        || has("PtoP")
        || has("DeviceToDevice")
        || has("device-to-device")
        || has("MemcpyOther")
        || is_copy_kernel(name)
    {
        // `MemcpyOther` streams hold copies of no one direction (peer, unknown).
        Part::DeviceToDevice
    } else if is_collective(name) || is_collective(category) || is_send_recv(name) || is_send_recv(category) {
        Part::Collective
    } else if is_async_wait(name) || is_async_wait(category) {
        Part::AsyncWait
    } else if is_host_callback(name) || category == HOST_CALLBACK {
        Part::HostCallback
    } else {
        Part::Compute
    }
}

/// True for XLA collective op names and categories in either spelling: HLO's opcodes
/// (`all-reduce.3`, `all-gather-start`, `ragged-all-to-all`, `collective-permute-done`)
/// and the instruction names JAX's primitives give them (`reduce_scatter.7`,
/// `all_gather.3`, `all_to_all`), and the runtimes' collective kernels (`nccl…`, `rccl…`).
pub fn is_collective(s: &str) -> bool {
    let s = s.to_ascii_lowercase().replace('_', "-");
    [
        "all-reduce",
        "all-gather",
        "reduce-scatter",
        "all-to-all",
        "collective-permute",
        "collective-broadcast",
        "allreduce",
        "nccl",
        "rccl",
    ]
    .iter()
    .any(|p| s.contains(p))
}

/// HLO point-to-point transfers: `send.1`, `recv-done.2` (`recv_done` as JAX names them).
fn is_send_recv(name: &str) -> bool {
    let base = name.split('.').next().unwrap_or(name);
    matches!(base, "send" | "recv" | "send-done" | "recv-done" | "send_done" | "recv_done")
}

/// Runtime copy kernels that move memory rather than compute (`__amd_rocclr_copyBuffer`,
/// CUDA's `memcpy` kernels).
fn is_copy_kernel(name: &str) -> bool {
    name.contains("copyBuffer")
        || name.contains("copyImage")
        || name.starts_with("Memcpy")
        || name.starts_with("memcpy")
}

/// The category of an op that calls back into the host's Python (its HLO custom call's
/// target, [`stepscope_xspace::hlo::HloModule::category`]).
pub const HOST_CALLBACK: &str = stepscope_xspace::hlo::HOST_CALLBACK;

/// The instruction names JAX gives its host callbacks (`io_callback.3`,
/// `pure_callback.1`, `debug_callback.1`, `debug_print.1`), for ops whose HLO the
/// profile does not hold.
pub fn is_host_callback(name: &str) -> bool {
    let base = name.split('.').next().unwrap_or(name);
    matches!(base, "io_callback" | "pure_callback" | "debug_callback" | "debug_print" | "python_callback")
}

/// The start or the wait of async work (`copy-start.3`, `copy-done`, `async-done`),
/// named by HLO's `-start`/`-done` suffixes.
fn is_async_wait(s: &str) -> bool {
    let base = s.split('.').next().unwrap_or(s);
    base.ends_with("-done") || base.ends_with("-start")
}

/// A stream line's name where it says what all its events are (`Stream #15(MemcpyH2D)`),
/// else "". A GPU stream lists every kind of work seen on it: on
/// `Stream #14(MemcpyH2D,Memset,Compute,MemcpyD2D,MemcpyOther)` (tests/fixtures/gpu-compile)
/// most events are kernels, each classified by its own name instead.
pub fn one_kind(line: &str) -> &str {
    match line.split_once('(') {
        Some((_, kinds)) if kinds.contains(',') => "",
        _ => line,
    }
}

/// The names of host-side transfers (XLA:CPU's copies on host threads, a GPU host's
/// staging of arrays: `H2D Dispatch`, `DevicePut…`; `D2H…`).
pub fn host_transfer_kind(name: &str) -> Option<Part> {
    if name.starts_with("H2D") || name.contains("DevicePut") || name.starts_with("TransferToDevice") {
        Some(Part::HostToDevice)
    } else if name.starts_with("D2H") || name.starts_with("TransferFromDevice") {
        Some(Part::DeviceToHost)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::{one_kind, op_kind, Part};

    #[test]
    fn ops_are_named_by_what_they_do() {
        assert_eq!(one_kind("Stream #15(MemcpyH2D)"), "Stream #15(MemcpyH2D)");
        assert_eq!(one_kind("Stream #14(MemcpyH2D,Memset,Compute,MemcpyD2D,MemcpyOther)"), "");
        assert_eq!(op_kind("fusion.3", "", one_kind("Stream #15(MemcpyH2D)")), Part::HostToDevice);
        assert_eq!(op_kind("fusion.3", "", one_kind("Stream #14(MemcpyH2D,Compute)")), Part::Compute);
        assert_eq!(op_kind("__amd_rocclr_copyBuffer.kd", "", ""), Part::DeviceToDevice);
        assert_eq!(op_kind("MemcpyD2D", "", ""), Part::DeviceToDevice);
        // ROCm's tracer names copies in words, on `MemcpyOther` streams.
        assert_eq!(op_kind("CopyDeviceToDevice", "", one_kind("Stream #8(MemcpyOther)")), Part::DeviceToDevice);
        assert_eq!(op_kind("CopyHostToDevice", "", ""), Part::HostToDevice);
        assert_eq!(op_kind("CopyDeviceToHost", "", ""), Part::DeviceToHost);
        assert_eq!(op_kind("fusion.1", "", one_kind("Stream #8(MemcpyOther)")), Part::DeviceToDevice);
        assert_eq!(op_kind("all-reduce.1", "all-reduce", ""), Part::Collective);
        assert_eq!(op_kind("all-gather-done", "", ""), Part::Collective);
        assert_eq!(op_kind("recv-done.2", "", ""), Part::Collective);
        assert_eq!(op_kind("copy-done.2", "copy-done", ""), Part::AsyncWait);
        assert_eq!(op_kind("copy-start", "copy-start", ""), Part::AsyncWait);
        assert_eq!(op_kind("copy.1", "copy", ""), Part::Compute, "an HLO copy is a kernel computing a layout");
        assert_eq!(op_kind("broadcast_add_fusion", "loop fusion", ""), Part::Compute);
        assert_eq!(op_kind("sender_fusion", "", ""), Part::Compute);
        // A Python callback, by its HLO category or (no HLO) its instruction's name.
        assert_eq!(op_kind("custom-call.4", super::HOST_CALLBACK, ""), Part::HostCallback);
        for name in ["io_callback.3", "pure_callback", "debug_callback.1", "debug_print.1"] {
            assert_eq!(op_kind(name, "custom-call", ""), Part::HostCallback, "{name}");
        }
        assert_eq!(op_kind("callback_fusion.2", "loop fusion", ""), Part::Compute);
    }

    #[test]
    fn collectives_in_either_spelling() {
        // JAX names the instructions of psum_scatter / all_gather / all_to_all with `_`.
        for name in ["reduce_scatter.7", "all_gather.3", "all_to_all.1", "ragged_all_to_all.2", "recv_done.4"] {
            assert_eq!(op_kind(name, "", ""), Part::Collective, "{name}");
        }
        for name in ["ragged-all-to-all.1", "collective-permute-start.2", "collective-broadcast", "send.5"] {
            assert_eq!(op_kind(name, "", ""), Part::Collective, "{name}");
        }
        // An op of another kind whose HLO category says collective is one too.
        assert_eq!(op_kind("fusion.9", "reduce-scatter", ""), Part::Collective);
        // A transfer is one by its opcode too (its category), whatever its name.
        assert_eq!(op_kind("ppermute_done.3", "recv-done", ""), Part::Collective);
        assert_eq!(op_kind("pipeline_send.1", "send", ""), Part::Collective);
        assert_eq!(op_kind("reduce.3", "", ""), Part::Compute);
        assert_eq!(op_kind("scatter.1", "", ""), Part::Compute);
    }
}
