//! The roofline: each device's roofs (peak FLOP/s, memory bandwidth, the ridge point
//! between them) and every op placed under them by its arithmetic intensity — the
//! op profile's rows by op that have FLOPs and bytes (see [`crate::cost`]).

use serde::Serialize;

use crate::ops::{self, GroupBy, OpRow};
use crate::profile::Profile;

/// One device's roofs.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Roofs {
    pub device: String,
    /// The headline peak: the plane's (TPU) or a known GPU's bf16 tensor rate.
    pub peak_flops_per_s: Option<f64>,
    pub peak_bytes_per_s: Option<f64>,
    /// FLOPs per byte where the two roofs meet.
    pub ridge_flops_per_byte: Option<f64>,
    /// A known GPU's model, whose per-type rates give each op its own roof.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpu_model: Option<&'static str>,
}

/// The roofline of a run.
#[derive(Clone, Debug, Serialize)]
pub struct Roofline {
    pub schema: &'static str,
    pub devices: Vec<Roofs>,
    /// Ops with an arithmetic intensity, by self time.
    pub ops: Vec<OpRow>,
}

/// The roofline of `profile`: devices with distinct roofs once each.
pub fn roofline(profile: &Profile) -> Roofline {
    let mut devices: Vec<Roofs> = Vec::new();
    for d in profile.devices().iter() {
        let p = ops::peaks(d);
        let roofs = Roofs {
            device: d.id(),
            peak_flops_per_s: p.flops_per_s,
            peak_bytes_per_s: p.bytes_per_s,
            ridge_flops_per_byte: p.flops_per_s.zip(p.bytes_per_s).map(|(f, b)| f / b),
            gpu_model: p.gpu.map(|g| g.model),
        };
        let same = |r: &Roofs| {
            r.peak_flops_per_s == roofs.peak_flops_per_s
                && r.peak_bytes_per_s == roofs.peak_bytes_per_s
                && r.gpu_model == roofs.gpu_model
        };
        if !devices.iter().any(same) {
            devices.push(roofs);
        }
    }
    let ops = ops::ops(profile, GroupBy::Op, 0).ops.into_iter().filter(|r| r.arithmetic_intensity.is_some()).collect();
    Roofline { schema: "stepscope.roofline/1", devices, ops }
}
