//! FLOPs and bytes from the HLO where the profile records none (XLA:CPU, NVIDIA,
//! AMD): dots and dot fusions equal 2 × output elements × contracting sizes as the
//! reference reader computes them from the HloProto itself; rates and the roofline
//! bound follow from the self time and the device's peaks.

use std::collections::HashMap;

use crate::util::*;

const WITH_DOTS: [&str; 2] = [
    "cpu-transformer/plugins/profile/2026_11_21_22_29_17/vm.xplane.pb",
    "gpu-nocb/plugins/profile/2026_11_23_08_00_08/vm.xplane.pb",
];

#[test]
fn dot_flops_equal_the_shapes_times_the_count() {
    for rel in WITH_DOTS {
        let f = fixture(rel).to_str().unwrap().to_string();
        let want: HashMap<String, HashMap<String, u64>> =
            serde_json::from_value(reference(&["dot-flops", &f])).unwrap();
        let ops = json(&["ops", &f, "--top", "0"]);
        let mut checked = 0;
        for r in ops["ops"].as_array().unwrap() {
            let (name, module) = (r["name"].as_str().unwrap(), r["module"].as_str().unwrap());
            let Some(&one) = want.get(module).and_then(|m| m.get(name)) else { continue };
            let count = r["executions"].as_u64().unwrap();
            let got = r["flops"].as_u64().unwrap();
            if r["category"] == "dot" {
                assert_eq!(got, one * count, "{rel} {name}: {r}");
            } else {
                // A dot fusion adds its elementwise work (one FLOP an element) to the dots'.
                assert!(
                    got >= one * count && got <= one * count + one * count / 10,
                    "{rel} {name}: {got} vs {}",
                    one * count
                );
            }
            let self_s = r["self_ps"].as_f64().unwrap() / 1e12;
            let rate = r["flops_per_s"].as_f64().unwrap();
            assert!((rate - got as f64 / self_s).abs() <= rate * 1e-9, "{r}");
            assert!(r["bytes_accessed"].as_u64().unwrap() > 0, "{r}");
            checked += 1;
        }
        assert!(checked >= 10, "{rel}: {checked} dot rows checked");
    }
}

#[test]
fn a_known_gpu_gets_a_roof_and_each_op_a_bound() {
    let f = fixture(WITH_DOTS[1]).to_str().unwrap().to_string();
    let ops = json(&["ops", &f, "--top", "0"]);
    let rows = ops["ops"].as_array().unwrap();
    // The H100's HBM bandwidth from the plane (3.35 TB/s) and its TF32 tensor roof
    // (494.7 TFLOP/s): an op is compute-bound when its FLOPs per byte pass the ratio.
    let ridge = 494.7e12 / 3_352_320_000_000.0;
    let mut seen = (0, 0);
    for r in rows.iter().filter(|r| r["category"] == "dot" || r["category"] == "loop fusion") {
        let (Some(fl), Some(b)) = (r["flops"].as_f64(), r["bytes_accessed"].as_f64()) else { continue };
        let want = if fl / b >= ridge { "compute" } else { "memory" };
        if r["category"] == "dot" {
            assert!(r["bound"].is_string(), "{r}");
            if r["bound"] == want {
                seen.0 += 1;
            }
        } else {
            assert_eq!(r["bound"], "memory", "elementwise fusions are memory-bound: {r}");
            seen.1 += 1;
        }
    }
    assert!(seen.0 > 0 && seen.1 > 0, "{seen:?}");
    // No compute-bound op beats its compute roof: a split-K GEMM's two kernels are one
    // execution, not two. (A memory-bound op may pass the HBM roof when its operands
    // sit in the 50 MB L2.)
    for r in rows {
        if let (Some(pct), Some(ai), Some(roof)) =
            (r["roof_pct"].as_f64(), r["arithmetic_intensity"].as_f64(), r["roof_flops_per_s"].as_f64())
        {
            assert!(roof <= 989.4e12 && (roof - (ai * 3_352_320_000_000.0).min(roof)).abs() < 1.0, "{r}");
            if r["bound"] == "compute" {
                assert!(pct <= 100.0, "{r}");
            }
        }
    }
    let gemms = rows.iter().filter(|r| r["name"].as_str().unwrap().starts_with("custom-call") && r["flops"].is_u64());
    assert!(gemms.count() > 10, "cuBLAS GEMMs get FLOPs from their backend config");
}

#[test]
fn roofline_lists_the_roofs_and_the_ops_under_them() {
    let f = fixture(WITH_DOTS[1]).to_str().unwrap().to_string();
    let r = json(&["roofline", &f, "--top", "0"]);
    assert_eq!(r["schema"], "stepscope.roofline/1");
    let d = &r["devices"][0];
    assert_eq!(d["gpu_model"], "H100 SXM");
    assert_eq!(d["peak_bytes_per_s"].as_f64(), Some(3_352_320_000_000.0));
    assert!((d["ridge_flops_per_byte"].as_f64().unwrap() - 989.4e12 / 3_352_320_000_000.0).abs() < 1e-6);
    // The ops with an intensity, as `ops` has them.
    let ops = json(&["ops", &f, "--top", "0"]);
    let want: Vec<&serde_json::Value> =
        ops["ops"].as_array().unwrap().iter().filter(|o| o["arithmetic_intensity"].is_f64()).collect();
    assert_eq!(r["ops"].as_array().unwrap().iter().collect::<Vec<_>>(), want);
    let text = ok(&["roofline", &f]);
    assert!(text.contains("(H100 SXM): peak 989 TFLOP/s · memory 3.35 TB/s · ridge 295 FLOP/byte"), "{text}");
    // A capture whose device has no known roofs says so.
    let cpu = ok(&["roofline", &fixture(WITH_DOTS[0]).to_string_lossy()]);
    assert!(cpu.contains("roofs unknown"), "{cpu}");
}

/// XProf 2.24's per-op costs, saved beside each GPU capture by
/// bench/fidelity/save_costs.py (module, op, kernel occurrences, FLOPs and bytes per
/// occurrence).
fn xprof_costs(dir: &str) -> Vec<(String, String, u64, f64, f64)> {
    let text = std::fs::read_to_string(fixture(&format!("{dir}/xprof_op_costs.csv"))).unwrap();
    text.lines()
        .skip(1)
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            (f[0].into(), f[1].into(), f[2].parse().unwrap(), f[3].parse().unwrap(), f[4].parse().unwrap())
        })
        .collect()
}

/// Ops whose bytes differ from XProf's for a reason traced by hand (docs/fidelity.md):
/// the gathered embedding rows feed two outputs (XProf counts them twice, the whole
/// table); a broadcast operand XProf scales by the share of the broadcast used.
const BYTES_APART: [(&str, &str); 2] =
    [("gpu-nocb", "input_add_reduce_fusion"), ("gpu-compile", "loop_select_fusion")];

#[test]
fn costs_equal_xprofs_per_op() {
    let within = |a: f64, b: f64| (a - b).abs() <= 0.01 * b.abs().max(1.0);
    let mut checked = (0, 0, 0);
    for dir in ["gpu-nocb", "gpu-scan-nocb", "gpu-compile", "rocm-mi300x-gemm", "rocm-mi300x-conv-2gpu"] {
        let file = fixture_files()
            .into_iter()
            .find(|p| p.starts_with(fixture(dir)) && p.to_string_lossy().ends_with(".xplane.pb"))
            .unwrap();
        let f = file.to_str().unwrap().to_string();
        let ops = json(&["ops", &f, "--top", "0"]);
        let dots: HashMap<String, HashMap<String, u64>> = serde_json::from_value(reference(&["dot-flops", &f])).unwrap();
        let rows: HashMap<(String, String), &serde_json::Value> = ops["ops"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| ((r["module"].as_str().unwrap().to_string(), r["name"].as_str().unwrap().to_string()), r))
            .collect();
        for (module, op, occurrences, flops, bytes) in xprof_costs(dir) {
            let Some(r) = rows.get(&(module.clone(), op.clone())) else { continue };
            let cat = r["category"].as_str().unwrap();
            if cat.ends_with("-start") || cat.ends_with("-done") {
                continue;
            }
            // XProf counts kernels; a split-K GEMM runs two an execution, each carrying
            // the op's whole cost in XProf: compare one execution with one of its kernels.
            assert_eq!(r["count"].as_u64(), Some(occurrences), "{dir} {op}");
            let n = r["executions"].as_u64().unwrap() as f64;
            if let Some(b) = r["bytes_accessed"].as_f64().filter(|_| bytes > 0.0) {
                if BYTES_APART.contains(&(dir, op.as_str())) {
                    assert!(!within(b / n, bytes), "{dir} {op}: now equal to XProf's, update docs/fidelity.md");
                } else {
                    assert!(within(b / n, bytes), "{dir} {op}: {} bytes vs XProf's {bytes}", b / n);
                    checked.0 += 1;
                }
            }
            let Some(fl) = r["flops"].as_f64().filter(|_| flops > 0.0) else { continue };
            let ours = fl / n;
            match dots.get(&module).and_then(|m| m.get(&op)) {
                // A dot fusion: its dots agree; XProf weights its elementwise ops by
                // XLA's measured GPU cost per element, so its total is no smaller.
                Some(&dot) if !within(ours, flops) => {
                    assert!(ours >= dot as f64 && flops > dot as f64, "{dir} {op}: {ours} vs {flops}, dots {dot}");
                    checked.2 += 1;
                }
                _ if r["multiplies_matrices"] == true => {
                    assert!(within(ours, flops), "{dir} {op}: {ours} FLOPs vs XProf's {flops}");
                    checked.1 += 1;
                }
                // Elementwise: XProf's weights are at least 1 FLOP an operation.
                _ => assert!(ours <= flops * 1.01, "{dir} {op}: {ours} vs {flops}"),
            }
        }
    }
    // bytes equal, matrix FLOPs equal, dot fusions' dots equal.
    assert!(checked.0 >= 500 && checked.1 >= 50 && checked.2 >= 10, "{checked:?}");
}

#[test]
fn the_cost_model_equals_a_tpu_profiles_own_costs() {
    // TPU op events carry XLA's own `flops` and `bytes_accessed`: the cost model over
    // the same HLO (`hlo --json`'s `cost`, one execution) must give them back.
    let f = fixture_files()
        .into_iter()
        .find(|p| p.starts_with(fixture("tpu-v6e-inference")) && p.to_string_lossy().ends_with(".xplane.pb"))
        .unwrap();
    let f = f.to_str().unwrap().to_string();
    let ops = json(&["ops", &f, "--top", "0"]);
    let mut checked = 0;
    for r in ops["ops"].as_array().unwrap() {
        let cat = r["category"].as_str().unwrap();
        if cat.ends_with("-start") || cat.ends_with("-done") {
            continue;
        }
        let n = r["executions"].as_f64().unwrap();
        let h = json(&["hlo", &f, r["name"].as_str().unwrap()]);
        let cost = &h["cost"];
        if let Some(fl) = r["flops"].as_f64() {
            let model = cost["flops"].as_f64().unwrap();
            assert!((model * n - fl).abs() <= 0.01 * fl, "{}: model {model} x {n} vs the profile's {fl}", r["name"]);
            checked += 1;
        }
        if let Some(b) = r["bytes_accessed"].as_f64() {
            let model = cost["bytes"].as_f64().unwrap();
            assert!((model * n - b).abs() <= 0.01 * b, "{}: model {model} x {n} vs the profile's {b}", r["name"]);
            checked += 1;
        }
    }
    assert!(checked >= 8, "{checked} costs checked");
}
