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
    assert_eq!(d["peak_bytes_per_s"].as_f64(), Some(3.35e12));
    assert!((d["ridge_flops_per_byte"].as_f64().unwrap() - 989.4e12 / 3.35e12).abs() < 1e-6);
    // The ops with an intensity, as `ops` has them.
    let ops = json(&["ops", &f, "--top", "0"]);
    let want: Vec<&serde_json::Value> =
        ops["ops"].as_array().unwrap().iter().filter(|o| o["arithmetic_intensity"].is_f64()).collect();
    assert_eq!(r["ops"].as_array().unwrap().iter().collect::<Vec<_>>(), want);
    let text = ok(&["roofline", &f]);
    assert!(
        text.contains(
            "(H100 SXM): peak 989 TFLOP/s (data sheet) · memory 3.35 TB/s (data sheet) · ridge 295 FLOP/byte"
        ),
        "{text}"
    );
    // A capture whose device has no known roofs says so.
    let cpu = ok(&["roofline", &fixture(WITH_DOTS[0]).to_string_lossy()]);
    assert!(cpu.contains("roofs unknown"), "{cpu}");
    // Roofs given too low (1 GFLOP/s, 1 GB/s for a CPU that does tens): every op over
    // its roof is marked and counted under the table, never shown as if possible.
    let low = ["roofline", &fixture(WITH_DOTS[0]).to_string_lossy(), "--peak-flops", "1G", "--peak-bandwidth", "1G"]
        .map(|s| s.to_string());
    let low: Vec<&str> = low.iter().map(|s| s.as_str()).collect();
    let rows = json(&[&low[..], &["--top", "0"]].concat());
    let above =
        rows["ops"].as_array().unwrap().iter().filter(|o| o["roof_pct"].as_f64().unwrap_or(0.0) > 100.0).count();
    assert!(above > 0, "{rows}");
    let text = ok(&[&low[..], &["--top", "0"]].concat());
    let marked = |l: &&str| l.contains(" !  ") || l.trim_end().ends_with(" !");
    assert_eq!(text.lines().filter(marked).count(), above, "{text}");
    assert!(text.contains(&format!("! {above} op(s) above 100% of their roof")), "{text}");
    // Within the roofs: no mark.
    assert!(!ok(&["roofline", &f]).contains("above 100% of their roof"));
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
const BYTES_APART: [(&str, &str); 2] = [("gpu-nocb", "input_add_reduce_fusion"), ("gpu-compile", "loop_select_fusion")];

#[test]
fn costs_equal_xprofs_per_op() {
    let within = |a: f64, b: f64| (a - b).abs() <= 0.01 * b.abs().max(1.0);
    let mut checked = (0, 0, 0);
    for dir in ["gpu-nocb", "gpu-scan-nocb", "gpu-compile", "rocm-mi300x-gemm", "rocm-mi300x-conv-2gpu"] {
        let f = xplane(dir);
        let ops = json(&["ops", &f, "--top", "0"]);
        let dots: HashMap<String, HashMap<String, u64>> =
            serde_json::from_value(reference(&["dot-flops", &f])).unwrap();
        // XProf's table merges the programs of one module name: so do the rows here.
        let mut rows: HashMap<(String, String), serde_json::Value> = HashMap::new();
        for r in ops["ops"].as_array().unwrap() {
            let key = (r["module"].as_str().unwrap().to_string(), r["name"].as_str().unwrap().to_string());
            match rows.get_mut(&key) {
                None => drop(rows.insert(key, r.clone())),
                Some(m) => {
                    for k in ["count", "executions", "bytes_accessed", "flops"] {
                        if let (Some(x), Some(y)) = (m[k].as_u64(), r[k].as_u64()) {
                            m[k] = (x + y).into();
                        }
                    }
                }
            }
        }
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
    let f = xplane("tpu-v6e-inference");
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

#[test]
fn peaks_come_from_the_user_the_profile_or_a_data_sheet() {
    // TPU: the plane's own stats, as the reference reader reads them.
    let tpu = xplane("tpu-v6e-inference");
    let stats = reference(&["plane-stats", &tpu, "--plane", "/device:TPU:0"]);
    let d = &json(&["roofline", &tpu])["devices"][0];
    assert_eq!(d["peak_flops_per_s"].as_f64(), Some(stats["peak_teraflops_per_second"].as_f64().unwrap() * 1e12));
    assert_eq!(d["peak_bytes_per_s"].as_f64(), Some(stats["peak_hbm_bw_gigabytes_per_second"].as_f64().unwrap() * 1e9));
    assert_eq!(
        (&d["peak_flops_source"], &d["peak_bytes_source"], &d["model"]),
        (&"profile".into(), &"profile".into(), &"TPU v6e".into())
    );
    // H100: the data sheet's 3.35 TB/s, which the plane's `memory_bandwidth` agrees with.
    let h100 = xplane("gpu-nocb");
    let plane = reference(&["plane-stats", &h100, "--plane", "/device:GPU:0"])["memory_bandwidth"].as_f64().unwrap();
    let d = &json(&["roofline", &h100])["devices"][0];
    assert!((d["peak_bytes_per_s"].as_f64().unwrap() / plane - 1.0).abs() < 0.001, "{d} vs {plane}");
    // MI300X: the plane says half the data sheet's 5.3 TB/s (bus width x memory clock
    // x 2, without HBM3's rate): the data sheet is taken.
    let mi = xplane("rocm-mi300x-gemm");
    let plane = reference(&["plane-stats", &mi, "--plane", "/device:GPU:0"])["memory_bandwidth"].as_f64().unwrap();
    let d = &json(&["roofline", &mi])["devices"][0];
    assert_eq!(
        (d["peak_bytes_per_s"].as_f64(), &d["peak_bytes_source"], &d["model"]),
        (Some(5.3e12), &"data_sheet".into(), &"MI300X".into())
    );
    assert!((5.3e12 / plane - 2.0).abs() < 0.01, "{plane}");
    // CPU: none but the user's, from the flags or the thresholds file; each op's roof
    // is then the lesser of the peak and its intensity times the bandwidth.
    let cpu = fixture(WITH_DOTS[0]).to_str().unwrap().to_string();
    assert!(json(&["roofline", &cpu])["devices"][0]["peak_flops_per_s"].is_null());
    assert!(json(&["ops", &cpu])["ops"].as_array().unwrap().iter().all(|o| o["bound"].is_null()));
    let r = json(&["roofline", &cpu, "--top", "0", "--peak-flops", "2T", "--peak-bandwidth", "100GB/s"]);
    let d = &r["devices"][0];
    assert_eq!((d["peak_flops_per_s"].as_f64(), d["peak_bytes_per_s"].as_f64()), (Some(2e12), Some(1e11)));
    assert_eq!((&d["peak_flops_source"], &d["peak_bytes_source"]), (&"user".into(), &"user".into()));
    assert!(r["ops"].as_array().unwrap().len() > 10);
    for o in r["ops"].as_array().unwrap() {
        let ai = o["arithmetic_intensity"].as_f64().unwrap();
        let roof = o["roof_flops_per_s"].as_f64().unwrap();
        assert!((roof - (2e12f64).min(ai * 1e11)).abs() <= 1e-6 * roof, "{o}");
        assert_eq!(o["bound"], if ai >= 20.0 { "compute" } else { "memory" }, "{o}");
    }
    let dir = tempfile::tempdir().unwrap();
    let kpi = dir.path().join("kpi.toml");
    std::fs::write(&kpi, "peak_flops_per_s = 2e12\npeak_bytes_per_s = 1e11\n").unwrap();
    let a = json(&["advise", &cpu, "--thresholds", kpi.to_str().unwrap()]);
    assert_eq!(a["thresholds"]["peak_flops_per_s"].as_f64(), Some(2e12));
    // The flag wins over the file.
    let summary = |extra: &[&str]| {
        let mut args = vec!["summary", cpu.as_str()];
        args.extend(extra);
        json(&args)["flops_utilization_pct"].as_f64()
    };
    let (at2, at4) = (summary(&["--peak-flops", "2T"]).unwrap(), summary(&["--peak-flops", "4T"]).unwrap());
    assert!((at2 / at4 - 2.0).abs() < 1e-9, "{at2} {at4}");
    assert_eq!(summary(&[]), None);
    assert_clean_error(&["roofline", &cpu, "--peak-flops", "fast"]);
}

#[test]
fn flops_per_step_equal_the_profiles_own_op_flops() {
    // The TPU ops carry XLA's `flops`: summed, by the reference reader, over each
    // TPU's `XLA Ops` events that start in a step, they are the step's FLOPs, and
    // over the step's time at the four chips' peak, its utilisation.
    let f = xplane("tpu-v6e-inference");
    let steps = json(&["steps", &f]);
    let steps = steps["steps"].as_array().unwrap();
    let mut want = vec![0f64; steps.len()];
    let mut peak = 0.0;
    for dev in 0..4 {
        let plane = format!("/device:TPU:{dev}");
        peak +=
            reference(&["plane-stats", &f, "--plane", &plane])["peak_teraflops_per_second"].as_f64().unwrap() * 1e12;
        for e in reference_lines(&["dump", &f, "--plane", &plane, "--line", "XLA Ops", "--limit", "100000000"]) {
            let start = e["start_ps"].as_i64().unwrap();
            let flops = e["stats"]["flops"].as_f64().unwrap_or(0.0);
            for (k, s) in steps.iter().enumerate() {
                let (s0, d) = (s["start_ps"].as_i64().unwrap(), s["duration_ps"].as_i64().unwrap());
                if start >= s0 && start < s0 + d {
                    want[k] += flops;
                }
            }
        }
    }
    assert!(want.iter().filter(|&&w| w > 0.0).count() >= 90, "steps with FLOPs");
    for (s, w) in steps.iter().zip(&want) {
        let got = s["flops"].as_f64().unwrap();
        assert!((got - w).abs() <= 1e-6 * w.max(1.0), "step {}: {got} vs the events' {w}", s["step_num"]);
        let secs = s["duration_ps"].as_f64().unwrap() / 1e12;
        let util = s["flops_utilization_pct"].as_f64().unwrap();
        assert!((util - 100.0 * w / (secs * peak)).abs() <= 1e-9 + 1e-6 * util, "{s}");
    }
    // The summary's are the steps': their mean FLOPs, and all their FLOPs over all
    // their time at peak.
    let sm = json(&["summary", &f]);
    let total: f64 = want.iter().sum();
    let time: f64 = steps.iter().map(|s| s["duration_ps"].as_f64().unwrap() / 1e12).sum();
    assert!((sm["flops_per_step"].as_f64().unwrap() - total / steps.len() as f64).abs() <= 1e-6 * total);
    assert!((sm["flops_utilization_pct"].as_f64().unwrap() / (100.0 * total / (time * peak)) - 1.0).abs() < 1e-9);
}

#[test]
fn gpu_steps_carry_flops_of_the_ops_inside_them() {
    // On a GPU the step's FLOPs are its kernels' (cost model): every step of
    // gpu-bf16 runs the same program, so the same FLOPs, and the steps together hold
    // every FLOP of the op profile whose kernels ran inside a step.
    let f = xplane("gpu-bf16");
    let steps = json(&["steps", &f]);
    let steps = steps["steps"].as_array().unwrap();
    let flops: Vec<u64> = steps.iter().map(|s| s["flops"].as_u64().unwrap()).collect();
    assert!(flops.iter().all(|&x| x == flops[0] && x > 1_000_000_000_000), "{flops:?}");
    let total: u64 =
        json(&["ops", &f, "--top", "0"])["ops"].as_array().unwrap().iter().filter_map(|o| o["flops"].as_u64()).sum();
    let in_steps: u64 = flops.iter().sum();
    assert!(in_steps <= total && in_steps as f64 >= 0.95 * total as f64, "{in_steps} of {total}");
    let text = ok(&["summary", &f]);
    assert!(text.contains("FLOPs utilisation"), "{text}");
}

#[test]
fn gpu_step_flops_take_each_programs_own_op() {
    // gpu-programs: `custom-call.1` is the cuBLAS GEMM of three programs (jit_dot
    // compiled for 4096 and 8192, and one of two programs named jit_update), each
    // launched after its memset. A step's FLOPs are those of the GEMMs that started in
    // it, each at its own program's FLOPs as the reference reader computes them from
    // the HloProto, plus the element-wise fusions' (under 0.1% here).
    let f = xplane("gpu-programs");
    let per_program = reference(&["dot-flops", &f, "--by-program"]);
    let steps = json(&["steps", &f]);
    let steps = steps["steps"].as_array().unwrap();
    let mut want = vec![0f64; steps.len()];
    let mut gemms = 0;
    for e in reference_plane_events(&f, "/device:GPU:0") {
        let s = &e["stats"];
        let (Some(op), Some(module), Some(program)) =
            (s["hlo_op"].as_str(), s["hlo_module"].as_str(), s["program_id"].as_u64())
        else {
            continue;
        };
        let Some(flops) = per_program[format!("{module}({program})")][op].as_f64() else { continue };
        if e["name"].as_str().unwrap().starts_with("Memset") {
            continue;
        }
        gemms += 1;
        let start = e["start_ps"].as_i64().unwrap();
        for (k, s) in steps.iter().enumerate() {
            let (s0, d) = (s["start_ps"].as_i64().unwrap(), s["duration_ps"].as_i64().unwrap());
            if start >= s0 && start < s0 + d {
                want[k] += flops;
            }
        }
    }
    // 4 steps of 4 + 1 + 1 dots and one matrix-product update.
    assert_eq!((steps.len(), gemms), (4, 28));
    for (s, w) in steps.iter().zip(&want) {
        let got = s["flops"].as_f64().unwrap();
        assert!(got >= *w && got <= w * 1.001, "step {}: {got} FLOPs, its GEMMs {w}", s["step_num"]);
    }
}

#[test]
fn memory_bandwidth_judges_ops_long_enough_to_reach_it() {
    // gpu-async: memory-bound ops of at least 10 µs move data at under 60% of the
    // H100's 3.35 TB/s; the finding's value is their bytes over their time.
    let f = xplane("gpu-async");
    let a = json(&["advise", &f]);
    let finding = a["findings"].as_array().unwrap().iter().find(|x| x["rule"] == "memory-bandwidth").expect("fires");
    let ops = json(&["ops", &f, "--top", "0"]);
    let long: Vec<&serde_json::Value> = ops["ops"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|o| o["bound"] == "memory" && o["bytes_per_s"].is_f64() && o["avg_ps"].as_i64().unwrap() >= 10_000_000)
        .collect();
    let bytes: f64 = long.iter().map(|o| o["bytes_accessed"].as_f64().unwrap()).sum();
    let secs: f64 = long.iter().map(|o| o["self_ps"].as_f64().unwrap()).sum::<f64>() / 1e12;
    let want = 100.0 * bytes / secs / 3.35e12;
    assert!((finding["value"].as_f64().unwrap() - want).abs() < 1e-6, "{finding} vs {want}");
    assert!(want < 60.0);
    // gpu-host's memory-bound ops all last under 3 µs: no verdict on their bandwidth.
    let a = json(&["advise", &xplane("gpu-host")]);
    assert!(a["findings"].as_array().unwrap().iter().all(|x| x["rule"] != "memory-bandwidth"), "{a}");
}

#[test]
fn tensor_core_eligibility_comes_from_the_ops_hlo() {
    // Every kernel of an op that multiplies matrices is judged, no other is.
    for dir in ["gpu-nocb", "rocm-mi300x-gemm"] {
        let f = xplane(dir);
        let matrix: HashMap<(String, String), bool> = json(&["ops", &f, "--top", "0"])["ops"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| {
                (
                    (o["module"].as_str().unwrap().into(), o["name"].as_str().unwrap().into()),
                    o["multiplies_matrices"] == true,
                )
            })
            .collect();
        let k = json(&["kernels", &f, "--top", "0"]);
        for r in k["kernels"].as_array().unwrap() {
            let key = (r["module"].as_str().unwrap().to_string(), r["op"].as_str().unwrap().to_string());
            let is_matrix = matrix.get(&key).copied().unwrap_or(false);
            assert_eq!(r["tensor_core_eligible"].is_boolean(), is_matrix, "{dir}: {r}");
        }
    }
    // The Triton GEMM fusion's name cannot tell; its HLO (bf16[256,256] x bf16[256,256])
    // can: it uses matrix cores, as XProf says.
    let k = json(&["kernels", &xplane("rocm-mi300x-gemm"), "--top", "0"]);
    let triton = k["kernels"].as_array().unwrap().iter().find(|r| r["name"] == "gemm_fusion_dot_general_1.kd").unwrap();
    assert_eq!((&triton["tensor_core"], &triton["tensor_core_eligible"]), (&true.into(), &true.into()), "{triton}");
}

/// The bytes of an HLO text's shapes, e.g. `(f32[256,64], f32[])` (4-byte types only).
fn f32_bytes(shapes: &str) -> u64 {
    shapes
        .split("f32[")
        .skip(1)
        .map(|s| {
            s.split(']')
                .next()
                .unwrap()
                .split(',')
                .filter(|d| !d.is_empty())
                .map(|d| d.trim().parse::<u64>().unwrap())
                .product::<u64>()
                * 4
        })
        .sum()
}

#[test]
fn collectives_move_their_bus_bytes() {
    // TPU: the profile's own event gives the all-reduce's data (half its
    // bytes_accessed: read once, written once) and, in its HLO text, its groups
    // (`replica_groups=[4,2]`: groups of 2): each participant sends 2(n-1)/n of it.
    let f = xplane("tpu-v6e-inference");
    let e = reference_lines(&["dump", &f, "--plane", "/device:TPU:0", "--line", "XLA Ops", "--limit", "100000"])
        .into_iter()
        .find(|e| e["name"].as_str().unwrap().starts_with("%all-reduce = "))
        .unwrap();
    let text = e["name"].as_str().unwrap();
    let groups = text.split("replica_groups=[").nth(1).unwrap().split(']').next().unwrap();
    let n: f64 = groups.split(',').nth(1).unwrap().parse().unwrap();
    let data = e["stats"]["bytes_accessed"].as_f64().unwrap() / 2.0;
    let cost = &json(&["hlo", &f, "all-reduce"])["cost"];
    assert_eq!(cost["collective_bytes"].as_f64(), Some(2.0 * (n - 1.0) / n * data), "{text}");
    // CPU, 4 devices, an all-reduce that names no groups (every device): its
    // operands' bytes from its HLO, 2 x 3/4 of them an execution, over its executions.
    let f = fixture("cpu-dp4").to_str().unwrap().to_string();
    let c = json(&["collectives", &f]);
    let row = &c["ops"][0];
    let h = json(&["hlo", &f, row["name"].as_str().unwrap()]);
    let operands: u64 = h["operands"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| f32_bytes(o["text"].as_str().unwrap().split(" = ").nth(1).unwrap().split(' ').next().unwrap()))
        .sum();
    assert!(operands > 300_000, "{h}");
    let devices = row["devices"].as_u64().unwrap() as f64;
    assert_eq!(devices, 4.0);
    let want = (2.0 * (devices - 1.0) / devices * operands as f64).round() as u64 * row["count"].as_u64().unwrap();
    assert_eq!(row["bytes_moved"].as_u64(), Some(want), "{row}");
    let bw = row["bus_bytes_per_s"].as_f64().unwrap();
    assert!(bw > 0.0 && bw <= want as f64 / (row["total_ps"].as_f64().unwrap() / 1e12) * 1.0001, "{row}");
    assert!(ok(&["collectives", &f]).contains("BUS BW"));
}

/// A collective's reduction is arithmetic too (issue 44): a reduce-scatter folds in
/// n - 1 participants' values per element of its result, an all-reduce (a tuple of
/// 16 arrays here) applies its reducer once per element of each. Each op's FLOPs over
/// its executions equal the reference reader's, from the HLO's shapes.
#[test]
fn collectives_count_their_reduction_flops() {
    let f = fixture("cpu-dp8-collectives").to_str().unwrap().to_string();
    let want = reference(&["collective-flops", &xplane("cpu-dp8-collectives")]);
    let ops = json(&["ops", &f, "--top", "0"]);
    let mut seen = 0;
    for (module, by_op) in want.as_object().unwrap() {
        for (op, flops) in by_op.as_object().unwrap() {
            let row = (ops["ops"].as_array().unwrap().iter())
                .find(|r| r["name"] == op.as_str() && r["module"] == module.as_str())
                .unwrap_or_else(|| panic!("{module} {op}"));
            let runs = row["executions"].as_u64().unwrap();
            assert_eq!(row["flops"].as_u64(), Some(flops.as_u64().unwrap() * runs), "{row}");
            seen += 1;
        }
    }
    // reduce_scatter.7, psum_invariant.7 (an all-reduce) and the 16-array all-reduce.16.
    assert_eq!(seen, 3);
    let rs = &json(&["hlo", &f, "reduce_scatter.7"])["cost"];
    assert_eq!(rs["flops"].as_u64(), want["jit_collect"]["reduce_scatter.7"].as_u64());
    assert!(rs["flops"].as_u64().unwrap() > 100_000, "{rs}");
}

#[test]
fn ops_of_programs_sharing_a_name_are_rows_apart() {
    // This MI300X capture runs `jit_dot` for five shapes: five programs whose GEMM is
    // named `custom-call.1` in each. Each program's op is its own row, counted from
    // the kernels of that program (the reference reader's events by `program_id`) and
    // costed by its own HLO (2 × M × N × K, from the reference reader's HloProto).
    let f = xplane("rocm-mi300x-gemm");
    let mut want: HashMap<(String, String, u64), (u64, i64)> = HashMap::new();
    for ev in reference_plane_events(&f, "/device:GPU:0") {
        let st = &ev["stats"];
        let (Some(op), Some(module), Some(id)) =
            (st["hlo_op"].as_str(), st["hlo_module"].as_str(), st["program_id"].as_u64())
        else {
            continue;
        };
        let w = want.entry((module.into(), op.into(), id)).or_default();
        w.0 += 1;
        w.1 += ev["duration_ps"].as_i64().unwrap();
    }
    let flops: HashMap<String, HashMap<String, u64>> =
        serde_json::from_value(reference(&["dot-flops", "--by-program", &f])).unwrap();
    let ops = json(&["ops", &f, "--top", "0"]);
    let rows = ops["ops"].as_array().unwrap();
    let gemms: Vec<&(String, String, u64)> =
        want.keys().filter(|k| k.0 == "jit_dot" && k.1 == "custom-call.1").collect();
    assert_eq!(gemms.len(), 5, "{gemms:?}");
    for (module, op, id) in gemms {
        let r = rows
            .iter()
            .find(|r| r["name"] == op.as_str() && r["module"] == module.as_str() && r["program_id"] == *id)
            .unwrap_or_else(|| panic!("no row for {op} of {module}({id})"));
        let (count, total_ps) = want[&(module.clone(), op.clone(), *id)];
        assert_eq!((r["count"].as_u64(), r["total_ps"].as_i64()), (Some(count), Some(total_ps)), "{r}");
        let program = format!("{module}({id})");
        assert_eq!(r["program"], program.as_str(), "{r}");
        let one = flops[&program][op];
        assert_eq!(r["flops"].as_u64(), Some(one * r["executions"].as_u64().unwrap()), "{r}");
    }
    // No two rows are one op of one program; an op of one program has no label.
    let mut seen = std::collections::HashSet::new();
    for r in rows {
        assert!(seen.insert((r["name"].to_string(), r["module"].to_string(), r["program_id"].to_string())), "{r}");
    }
    let copy = rows.iter().find(|r| r["name"] == "copy.1").expect("copy.1");
    assert!(copy.get("program").is_none() && copy["program_id"].is_u64(), "{copy}");
    // The table tells them apart by program.
    let text = ok(&["ops", &f, "--wide"]);
    assert!(text.contains("custom-call.1 in jit_dot(49)"), "{text}");
}

#[test]
fn an_execution_is_what_one_thunk_launched() {
    // XLA annotates each thunk it runs on the host (an event named after the op) and
    // the kernels it launches inside it: a cuBLAS GEMM with the memset before it is
    // one execution of its op; two launches of `jit_stage`'s copy 1.2 ms apart are
    // two, however close on their stream. Every op of a module, by name where one row
    // holds it, runs as many times as the reference reader finds its annotations
    // (the host events of its name that are not launch calls themselves).
    let f = xplane("gpu-nocb");
    let info = reference(&["info", &f]);
    let mut thunks: HashMap<String, u64> = HashMap::new();
    for plane in info["hosts"][0]["planes"].as_array().unwrap().iter().filter(|p| p["name"] == "/host:CPU") {
        // `dump` reads every line of a name (two are called `python3`): each name once.
        let mut lines: Vec<&str> =
            plane["lines"].as_array().unwrap().iter().map(|l| l["name"].as_str().unwrap()).collect();
        lines.sort_unstable();
        lines.dedup();
        for line in lines {
            for ev in reference_lines(&["dump", &f, "--plane", "/host:CPU", "--line", line, "--limit", "10000000"]) {
                if ev["stats"].get("correlation_id").is_none() {
                    *thunks.entry(ev["name"].as_str().unwrap().to_string()).or_default() += 1;
                }
            }
        }
    }
    let ops = json(&["ops", &f, "--top", "0"]);
    let rows = ops["ops"].as_array().unwrap();
    let mut names: HashMap<&str, u32> = HashMap::new();
    for r in rows {
        *names.entry(r["name"].as_str().unwrap()).or_default() += 1;
    }
    let (mut checked, mut several_kernels) = (0, 0);
    for r in rows.iter().filter(|r| r["module"] != "" && names[r["name"].as_str().unwrap()] == 1) {
        let Some(&n) = thunks.get(r["name"].as_str().unwrap()) else { continue };
        assert_eq!(r["executions"].as_u64(), Some(n), "{r}");
        checked += 1;
        several_kernels += usize::from(r["count"].as_u64().unwrap() > n);
    }
    assert!(checked >= 250 && several_kernels >= 10, "{checked} {several_kernels}");
    let copy = rows.iter().find(|r| r["name"] == "copy.1" && r["module"] == "jit_stage").expect("jit_stage's copy");
    assert_eq!(copy["executions"], copy["count"], "{copy}");
    assert_eq!(copy["executions"].as_u64(), thunks.get("copy.1").copied(), "{copy}");
    // Back-to-back launches of one GEMM (ROCm, whose launch calls sit on a line of
    // their own): one execution each, 3 per program, as their correlation ids count.
    let g = json(&["ops", &xplane("rocm-mi300x-gemm"), "--top", "0"]);
    for r in g["ops"].as_array().unwrap().iter().filter(|r| r["name"] == "custom-call.1") {
        assert_eq!((r["count"].as_u64(), r["executions"].as_u64()), (Some(3), Some(3)), "{r}");
    }
}

/// In a run whose hosts ran different programs of one name under their own ids, each
/// program's row by op is costed from that program's HLO: the row of `dot.15` of
/// each host's `jit_train_step` has the FLOPs it has with its host read alone (the
/// first host's module of that name once costed them all).
#[test]
fn each_programs_op_is_costed_from_its_own_hlo_in_a_run_of_hosts() {
    let tmp = tempfile::tempdir().unwrap();
    run_of_fixtures(tmp.path(), "2026_11_01_00_00_00", &THREE_CPU_HOSTS);
    let dir = tmp.path().to_str().unwrap();
    let rows = |args: &[&str]| -> Vec<(u64, u64)> {
        let ops = json(&[&["ops", "--top", "0"][..], args].concat());
        (ops["ops"].as_array().unwrap().iter())
            .filter(|r| r["name"] == "dot.15" && r["module"] == "jit_train_step")
            .map(|r| (r["program_id"].as_u64().unwrap(), r["flops"].as_u64().unwrap()))
            .collect()
    };
    let mut alone: Vec<(u64, u64)> = ["a", "b", "c"].iter().flat_map(|h| rows(&[dir, "--host", h])).collect();
    let mut together = rows(&[dir]);
    alone.sort();
    together.sort();
    let mut costs: Vec<u64> = together.iter().map(|r| r.1).collect();
    costs.dedup();
    assert_eq!((together.len(), costs.len()), (3, 3), "three programs, three costs: {together:?}");
    assert_eq!(together, alone);
}
