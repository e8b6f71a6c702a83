//! What a device can do at most: its peak FLOP/s and memory bandwidth, the two roofs
//! of the roofline ([`crate::roofline`]) and the denominators of FLOPs utilisation.
//!
//! Each comes, in this order, from:
//! 1. the user (`--peak-flops` / `--peak-bandwidth`, or `peak_flops_per_s` /
//!    `peak_bytes_per_s` in a thresholds file): the only source for a CPU;
//! 2. the device plane's own stats: a TPU's `peak_teraflops_per_second` and
//!    `peak_hbm_bw_gigabytes_per_second`;
//! 3. the data sheet of a known device ([`GPUS`], [`TPUS`]; docs/model.md gives the
//!    sources), by the plane's `gpu_device_name` / compute capability or its
//!    `device_type_string`;
//! 4. for memory bandwidth only, a GPU plane's `memory_bandwidth` stat. XLA derives it
//!    from the bus width and memory clock; on NVIDIA parts it equals the data sheet
//!    (H100 SXM: 3.352 TB/s), on the MI300X it is half of it (2.66 against 5.3 TB/s),
//!    so a known device's data sheet comes first.

use serde::Serialize;

use stepscope_model::Device;

/// A GPU's dense peak rates, FLOP/s: vector f32, and matrix (tensor-core) f32 as
/// TF32, bf16/f16 and fp8; and its memory bandwidth where one figure fits every
/// variant the name covers.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GpuPeaks {
    pub model: &'static str,
    pub f32_vector: f64,
    pub tf32_matrix: f64,
    pub bf16_matrix: f64,
    pub fp8_matrix: f64,
    pub hbm_bytes_per_s: Option<f64>,
}

/// A TPU chip's peak bf16 rate and HBM bandwidth.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TpuPeaks {
    pub model: &'static str,
    pub bf16_flops_per_s: f64,
    pub hbm_bytes_per_s: f64,
}

const T: f64 = 1e12;
const G: f64 = 1e9;

/// Known GPUs, from the vendors' data sheets (dense rates, no sparsity).
pub const GPUS: &[GpuPeaks] = &[
    GpuPeaks {
        model: "H100 SXM",
        f32_vector: 67.0 * T,
        tf32_matrix: 494.7 * T,
        bf16_matrix: 989.4 * T,
        fp8_matrix: 1978.9 * T,
        hbm_bytes_per_s: Some(3350.0 * G),
    },
    GpuPeaks {
        model: "H100 PCIe",
        f32_vector: 51.2 * T,
        tf32_matrix: 378.0 * T,
        bf16_matrix: 756.0 * T,
        fp8_matrix: 1513.0 * T,
        hbm_bytes_per_s: Some(2000.0 * G),
    },
    GpuPeaks {
        model: "H200",
        f32_vector: 67.0 * T,
        tf32_matrix: 494.7 * T,
        bf16_matrix: 989.4 * T,
        fp8_matrix: 1978.9 * T,
        hbm_bytes_per_s: Some(4800.0 * G),
    },
    // 40 and 80 GB, SXM and PCIe parts differ in bandwidth (1.56–2.04 TB/s): the
    // plane's `memory_bandwidth` says which.
    GpuPeaks {
        model: "A100",
        f32_vector: 19.5 * T,
        tf32_matrix: 156.0 * T,
        bf16_matrix: 312.0 * T,
        fp8_matrix: 312.0 * T,
        hbm_bytes_per_s: None,
    },
    GpuPeaks {
        model: "MI300X",
        f32_vector: 163.4 * T,
        tf32_matrix: 653.7 * T,
        bf16_matrix: 1307.4 * T,
        fp8_matrix: 2614.9 * T,
        hbm_bytes_per_s: Some(5300.0 * G),
    },
];

/// Known TPUs, per chip, from Google Cloud's system-architecture pages.
pub const TPUS: &[TpuPeaks] = &[
    TpuPeaks { model: "TPU v4", bf16_flops_per_s: 275.0 * T, hbm_bytes_per_s: 1200.0 * G },
    TpuPeaks { model: "TPU v5e", bf16_flops_per_s: 197.0 * T, hbm_bytes_per_s: 819.0 * G },
    TpuPeaks { model: "TPU v5p", bf16_flops_per_s: 459.0 * T, hbm_bytes_per_s: 2765.0 * G },
    TpuPeaks { model: "TPU v6e", bf16_flops_per_s: 918.0 * T, hbm_bytes_per_s: 1640.0 * G },
];

/// The known GPU a device plane describes: NVIDIA by `gpu_device_name` (`NVIDIA H100
/// 80GB HBM3` is the SXM part), AMD by compute capability 9.4 with 304 compute units
/// (MI300X).
pub fn gpu(name: &str, vendor: &str, compute_cap: (i64, i64), cores: i64) -> Option<&'static GpuPeaks> {
    let find = |m: &str| GPUS.iter().find(|g| g.model == m);
    if name.contains("H200") {
        return find("H200");
    }
    if name.contains("H100") {
        return find(if name.contains("PCIe") { "H100 PCIe" } else { "H100 SXM" });
    }
    if name.contains("A100") {
        return find("A100");
    }
    if vendor.eq_ignore_ascii_case("AMD") && compute_cap == (9, 4) && cores == 304 {
        return find("MI300X");
    }
    None
}

/// The known TPU a plane's `device_type_string` (or JAX's `device_kind`) names:
/// `TPU v6 Lite` is v6e, `TPU v5 lite` v5e, `TPU v5p` (or `TPU v5`) v5p, `TPU v4` v4.
pub fn tpu(device_type: &str) -> Option<&'static TpuPeaks> {
    let t: String = device_type.to_ascii_lowercase().chars().filter(|c| !c.is_whitespace()).collect();
    let model = if t.contains("v6lite") || t.contains("v6e") {
        "TPU v6e"
    } else if t.contains("v5lite") || t.contains("v5e") {
        "TPU v5e"
    } else if t.contains("v5") {
        "TPU v5p"
    } else if t.contains("v4") {
        "TPU v4"
    } else {
        return None;
    };
    TPUS.iter().find(|p| p.model == model)
}

impl GpuPeaks {
    /// The roof for an op of `element_type` (XLA's PrimitiveType) that multiplies
    /// matrices (`matrix`) or not: f32 matrices run as TF32 (XLA's default precision on
    /// these GPUs), 16-bit types at bf16's rate, 8-bit floats at fp8's.
    pub fn roof(&self, element_type: i32, matrix: bool) -> f64 {
        match (element_type, matrix) {
            (10 | 16, true) => self.bf16_matrix,
            (19 | 20 | 23 | 24 | 25, true) => self.fp8_matrix,
            (_, true) => self.tf32_matrix,
            _ => self.f32_vector,
        }
    }
}

/// Peaks the user gives (flags or a thresholds file), kept by the model.
pub use stepscope_model::UserPeaks;

/// A rate with an optional SI prefix (k, M, G, T, P) and unit (`3.5T`, `900GFLOP/s`,
/// `2e12`).
pub fn parse_rate(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let unitless = t.trim_end_matches(|c: char| c.is_ascii_alphabetic() || c == '/');
    let suffix = &t[unitless.len()..];
    let scale = match suffix.chars().next() {
        None => 1.0,
        Some('k' | 'K') => 1e3,
        Some('M') => 1e6,
        Some('G') => 1e9,
        Some('T') => 1e12,
        Some('P') => 1e15,
        Some(_) if suffix.starts_with("FLOP") || suffix.starts_with('B') => 1.0,
        Some(_) => return Err(format!("{s:?}: unknown prefix {suffix:?}; use k, M, G, T or P (e.g. 3.5T)")),
    };
    match unitless.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v * scale),
        _ => Err(format!("{s:?} is not a positive rate; e.g. 3.5T for 3.5e12 per second")),
    }
}

/// Where a peak was read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PeakSource {
    /// Given by the user.
    User,
    /// The device plane's own stats.
    Profile,
    /// A known device's data sheet.
    DataSheet,
}
stepscope_model::wire_enum!(PeakSource { User, Profile, DataSheet });

/// A device's peak compute and memory bandwidth, where known.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Peaks {
    pub flops_per_s: Option<f64>,
    pub bytes_per_s: Option<f64>,
    pub flops_source: Option<PeakSource>,
    pub bytes_source: Option<PeakSource>,
    /// The known device's model (`H100 SXM`, `TPU v6e`).
    pub model: Option<&'static str>,
    /// A known GPU's rates per data type: an op's roof is then chosen by its HLO's
    /// type and whether it multiplies matrices. None where the user gave the peak.
    pub gpu: Option<&'static GpuPeaks>,
}

impl stepscope_model::wire::Wire for Peaks {
    // The known device by its model's name, its GPU rates by their place in [`GPUS`]:
    // both are this build's data sheets.
    fn put(&self, out: &mut Vec<u8>) {
        // `usize::MAX` for a GPU not in the table (none is made): read back, an error.
        let gpu = self.gpu.map(|g| GPUS.iter().position(|k| k == g).unwrap_or(usize::MAX));
        let model = self.model.map(str::to_string);
        (self.flops_per_s, self.bytes_per_s, self.flops_source, self.bytes_source, (model, gpu)).put(out);
    }
    fn take(bytes: &mut stepscope_model::wire::Bytes<'_>) -> Result<Self, stepscope_model::wire::WireError> {
        use stepscope_model::wire::WireError;
        let (flops_per_s, bytes_per_s, flops_source, bytes_source, (model, gpu)) =
            <(_, _, _, _, (Option<String>, Option<usize>))>::take(bytes)?;
        let known = |m: &str| {
            let mut models = GPUS.iter().map(|g| g.model).chain(TPUS.iter().map(|t| t.model));
            models.find(|k| *k == m).ok_or_else(|| WireError(format!("{m:?} is no known device")))
        };
        Ok(Peaks {
            flops_per_s,
            bytes_per_s,
            flops_source,
            bytes_source,
            model: model.as_deref().map(known).transpose()?,
            gpu: gpu.map(|i| GPUS.get(i).ok_or_else(|| WireError(format!("{i} is no known GPU")))).transpose()?,
        })
    }
}

/// The peaks of device `d` (sources in the module's order).
pub fn of(d: &Device) -> Peaks {
    let stat = |name: &str| d.plane.plane_stat(name).and_then(|s| d.plane.stat_f64(&s)).filter(|v| *v > 0.0);
    let text = |name: &str| d.plane.plane_stat(name).map(|s| d.plane.stat_display(&s)).unwrap_or_default();
    let int = |name: &str| stat(name).map_or(0, |v| v as i64);
    let gpu = gpu(
        &text("gpu_device_name"),
        &text("device_vendor"),
        (int("compute_cap_major"), int("compute_cap_minor")),
        int("core_count"),
    );
    let tpu = tpu(&text("device_type_string"));
    let user = d.user_peaks();
    let pick = |candidates: &[(Option<f64>, PeakSource)]| {
        candidates.iter().find_map(|&(v, s)| v.filter(|v| v.is_finite() && *v > 0.0).map(|v| (v, s)))
    };
    use PeakSource::*;
    let flops = pick(&[
        (user.flops_per_s, User),
        (stat("peak_teraflops_per_second").map(|t| t * T), Profile),
        (gpu.map(|g| g.bf16_matrix).or(tpu.map(|t| t.bf16_flops_per_s)), DataSheet),
    ]);
    let bytes = pick(&[
        (user.bytes_per_s, User),
        (stat("peak_hbm_bw_gigabytes_per_second").map(|g| g * G), Profile),
        (gpu.and_then(|g| g.hbm_bytes_per_s).or(tpu.map(|t| t.hbm_bytes_per_s)), DataSheet),
        (stat("memory_bandwidth"), Profile),
    ]);
    Peaks {
        flops_per_s: flops.map(|f| f.0),
        bytes_per_s: bytes.map(|b| b.0),
        flops_source: flops.map(|f| f.1),
        bytes_source: bytes.map(|b| b.1),
        model: gpu.map(|g| g.model).or(tpu.map(|t| t.model)),
        gpu: gpu.filter(|_| user.flops_per_s.is_none()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tpu_names() {
        let m = |s| tpu(s).map(|p| p.model);
        assert_eq!(m("TPU v6 Lite"), Some("TPU v6e"));
        assert_eq!(m("TPU v5 lite"), Some("TPU v5e"));
        assert_eq!(m("TPU v5p"), Some("TPU v5p"));
        assert_eq!(m("TPU v5"), Some("TPU v5p"));
        assert_eq!(m("TPU v4"), Some("TPU v4"));
        assert_eq!(m("TPU v3"), None);
        assert_eq!(m(""), None);
    }

    #[test]
    fn gpu_names() {
        let m = |n, v, cc, c| gpu(n, v, cc, c).map(|p| p.model);
        assert_eq!(m("NVIDIA H100 80GB HBM3", "Nvidia", (9, 0), 132), Some("H100 SXM"));
        assert_eq!(m("NVIDIA H100 PCIe", "Nvidia", (9, 0), 114), Some("H100 PCIe"));
        assert_eq!(m("", "AMD", (9, 4), 304), Some("MI300X"));
        assert_eq!(m("", "AMD", (9, 4), 228), None);
    }
}
