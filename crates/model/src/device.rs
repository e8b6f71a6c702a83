//! A device of a run: what it is (TPU, GPU, the host CPU acting as XLA's device),
//! where its ops come from, the stat keys its plane uses, and its op records.

use stepscope_xspace::{Line, Plane, Space, Stat};

use crate::records::{DeviceOps, OpEvent};

/// Stat-metadata indexes a plane uses, looked up once per plane.
#[derive(Clone, Copy, Debug, Default)]
pub struct Keys {
    pub hlo_op: Option<u32>,
    pub hlo_module: Option<u32>,
    pub hlo_category: Option<u32>,
    pub program_id: Option<u32>,
    pub run_id: Option<u32>,
    pub tf_op: Option<u32>,
    pub flops: Option<u32>,
    pub model_flops: Option<u32>,
    pub bytes_accessed: Option<u32>,
    pub step_num: Option<u32>,
    pub root: Option<u32>,
    pub kernel_details: Option<u32>,
    pub memcpy_details: Option<u32>,
    pub device_ordinal: Option<u32>,
    pub group_id: Option<u32>,
    pub device_duration_ps: Option<u32>,
    pub cuda_graph_id: Option<u32>,
    pub cuda_graph_node_id: Option<u32>,
    pub correlation_id: Option<u32>,
    /// `_p`: the flow an event starts (XLA:CPU: an op's link to its completion).
    pub flow_out: Option<u32>,
    /// `_c`: the flow an event ends (XLA:CPU: an `end: <op>` event's link to its op).
    pub flow_in: Option<u32>,
}

impl Keys {
    /// Resolves the keys of `plane`.
    pub fn of(plane: &Plane) -> Keys {
        let mut k = Keys::default();
        for (i, m) in plane.stat_meta.iter().enumerate() {
            let slot = match plane.text(m.name) {
                "hlo_op" => &mut k.hlo_op,
                "hlo_module" => &mut k.hlo_module,
                "hlo_category" => &mut k.hlo_category,
                "program_id" => &mut k.program_id,
                "run_id" => &mut k.run_id,
                "tf_op" => &mut k.tf_op,
                "flops" => &mut k.flops,
                "model_flops" => &mut k.model_flops,
                "bytes_accessed" => &mut k.bytes_accessed,
                "step_num" => &mut k.step_num,
                "_r" => &mut k.root,
                "kernel_details" => &mut k.kernel_details,
                "memcpy_details" => &mut k.memcpy_details,
                "device_ordinal" => &mut k.device_ordinal,
                "group_id" => &mut k.group_id,
                "device_duration_ps" => &mut k.device_duration_ps,
                "cuda_graph_id" => &mut k.cuda_graph_id,
                "cuda_graph_node_id" => &mut k.cuda_graph_node_id,
                "correlation_id" => &mut k.correlation_id,
                "_p" => &mut k.flow_out,
                "_c" => &mut k.flow_in,
                _ => continue,
            };
            // Ref stats make stat metadata for string values too; the first entry of
            // a name is the key itself (values with the same text are rare and later).
            slot.get_or_insert(i as u32);
        }
        k
    }
}

/// What kind of processor a device is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum DeviceKind {
    Tpu,
    Gpu,
    Cpu,
    Other,
}
crate::wire_enum!(DeviceKind { Tpu, Gpu, Cpu, Other });

/// Where a device's ops come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpSource {
    /// The device plane's `XLA Ops` line.
    XlaOpsLine,
    /// GPU kernels on stream lines, rolled up by `hlo_op`.
    Kernels,
    /// Host events carrying `hlo_op` (XLA:CPU).
    HostOps,
}

/// One device (or the host CPU acting as the XLA device) of one host.
pub struct Device<'a> {
    pub host: &'a str,
    /// The device's name: its plane's (`/device:TPU:0`), or for XLA:CPU with several
    /// devices `/device:CPU:N` from the ops' `device_ordinal`, else `/host:CPU`.
    pub name: String,
    /// XLA:CPU only: the `device_ordinal` this device's ops carry (its plane holds the
    /// ops of every CPU device).
    pub ordinal: Option<i64>,
    /// Host index in [`Profile::hosts`].
    pub host_index: usize,
    /// Index in [`Profile::devices`].
    pub index: usize,
    pub plane: &'a Plane,
    pub keys: Keys,
    pub kind: DeviceKind,
    pub source: OpSource,
    /// The descriptor and ops of this device.
    pub(crate) slot: &'a Slot,
    /// The profile's [`UserPeaks`].
    pub(crate) user_peaks: UserPeaks,
}

impl<'a> Device<'a> {
    /// `host/plane`, unique within a profile.
    pub fn id(&self) -> String {
        format!("{}{}", self.host, self.name)
    }

    /// Lines holding this device's ops.
    pub fn op_lines(&self) -> impl Iterator<Item = (usize, &'a Line)> + '_ {
        self.plane.lines.iter().enumerate().filter(move |(_, l)| match self.source {
            OpSource::XlaOpsLine => l.name == "XLA Ops",
            OpSource::Kernels => is_stream_line(l),
            OpSource::HostOps => true,
        })
    }

    /// A stat of event `i` on `line` (event first, then its metadata).
    pub fn stat(&self, line: &Line, i: usize, key: Option<u32>) -> Option<Stat> {
        self.plane.event_stat(line, i, key?)
    }

    /// A string stat of event `i` on `line`.
    pub fn stat_str(&self, line: &'a Line, i: usize, key: Option<u32>) -> Option<&'a str> {
        let s = self.stat(line, i, key)?;
        self.plane.stat_str(&s)
    }

    /// Every executed op on this device, in line order then time order.
    pub fn ops(&self) -> Vec<OpEvent<'a>> {
        self.op_iter().collect()
    }

    /// The ops of [`Device::ops`], without collecting them.
    pub fn op_iter(&self) -> impl ExactSizeIterator<Item = OpEvent<'a>> + 'a {
        let ops = self.cached_ops();
        let plane = self.plane;
        (0..ops.recs.len()).map(move |i| ops.event(plane, i))
    }

    /// The peaks the user gave for the profile ([`crate::Profile::set_peaks`]).
    pub fn user_peaks(&self) -> UserPeaks {
        self.user_peaks
    }

    /// The device's op records (built with the devices).
    pub fn cached_ops(&self) -> &'a DeviceOps {
        &self.slot.ops
    }
}

/// One device's descriptor and its op records.
pub struct Slot {
    pub host_index: usize,
    pub plane_index: usize,
    pub name: String,
    pub ordinal: Option<i64>,
    pub keys: Keys,
    pub kind: DeviceKind,
    pub source: OpSource,
    pub ops: DeviceOps,
}

/// Peaks the user gives (flags or a thresholds file); they override the profile's
/// and the data sheets' on every device.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct UserPeaks {
    pub flops_per_s: Option<f64>,
    pub bytes_per_s: Option<f64>,
}

/// True for GPU stream lines (`Stream #12(Compute)`, `Stream #16(Kernel)`, …).
pub fn is_stream_line(line: &Line) -> bool {
    line.name.starts_with("Stream #")
}

/// The host's CPU plane (`/host:CPU`; in trace JSON, the first plane with host threads).
pub fn host_cpu_plane(space: &Space) -> Option<&Plane> {
    space
        .plane("/host:CPU")
        .or_else(|| space.planes.iter().find(|p| p.name.contains("/host:CPU") || p.name.starts_with("Host Threads")))
}

/// The (metadata id, start) of every event of `plane` whose name `pick` keeps, each
/// name tested once.
pub fn events_named(plane: &Plane, pick: impl Fn(&str) -> bool) -> Vec<(u32, i64)> {
    let keep: Vec<bool> = (0..plane.event_meta.len()).map(|m| pick(plane.event_name(m as u32))).collect();
    let mut found = Vec::new();
    for line in &plane.lines {
        for i in (0..line.len()).filter(|&i| keep.get(line.meta(i) as usize) == Some(&true)) {
            found.push((line.meta(i), line.start_ps(i)));
        }
    }
    found
}

/// The starts of a host's calls of jitted functions (`PjitFunction(f)`: JAX's C++
/// dispatch of a call), sorted.
pub fn jit_calls(space: &Space) -> Vec<i64> {
    let Some(plane) = host_cpu_plane(space) else { return Vec::new() };
    let mut starts: Vec<i64> =
        events_named(plane, |name| name.starts_with("PjitFunction(")).into_iter().map(|(_, start)| start).collect();
    starts.sort_unstable();
    starts
}

pub fn device_kind(plane_name: &str) -> DeviceKind {
    let rest = plane_name.strip_prefix("/device:").unwrap_or(plane_name);
    if rest.starts_with("TPU") {
        DeviceKind::Tpu
    } else if rest.starts_with("GPU") {
        DeviceKind::Gpu
    } else if rest.starts_with("CPU") {
        DeviceKind::Cpu
    } else {
        DeviceKind::Other
    }
}
