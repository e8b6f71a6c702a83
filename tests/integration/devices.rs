//! Collectives, devices, compile, HLO context and multi-host runs, checked against an
//! independent reading of the same captures (tests/support/xspace_ref.py).

use std::collections::BTreeMap;

use serde_json::Value;

use crate::util::*;

const DP4: &str = "cpu-dp4/plugins/profile/2026_11_21_23_24_47/vm.xplane.pb";
const CPU_RUN: &str = "cpu-transformer/plugins/profile/2026_11_21_22_29_17/vm.xplane.pb";
const COMPILE_RUN: &str = "cpu-compile/plugins/profile/2026_11_21_22_29_21/vm.xplane.pb";
const TPU: &str = "tpu-v6e-inference/tpu_inference_2.xplane.pb";
const DP2_OWN: &str = "cpu-dp2-own-steps/plugins/profile/2026_11_24_23_21_25/vm.xplane.pb";
const DP8_COLLECTIVES: &str = "cpu-dp8-collectives/plugins/profile/2026_11_25_15_58_45/vm.xplane.pb";

fn path(rel: &str) -> String {
    fixture(rel).to_str().unwrap().to_string()
}

/// Every event of every line of `plane`, as the reference reader sees them.
fn ref_plane_events(file: &str, plane: &str) -> Vec<(String, Value)> {
    let info = reference(&["info", file]);
    let mut out = Vec::new();
    for p in info["hosts"][0]["planes"].as_array().unwrap().iter().filter(|p| p["name"] == plane) {
        for l in p["lines"].as_array().unwrap() {
            let line = l["name"].as_str().unwrap();
            let script = root().join("tests/support/xspace_ref.py");
            let o = std::process::Command::new("python3")
                .arg(script)
                .args(["dump", file, "--plane", plane, "--line", line, "--limit", "100000000"])
                .output()
                .expect("python3");
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
            for ev in String::from_utf8(o.stdout).unwrap().lines() {
                out.push((line.to_string(), serde_json::from_str(ev).unwrap()));
            }
        }
    }
    out
}

#[test]
fn data_parallel_cpu_capture_splits_into_devices_and_counts_the_all_reduces() {
    let f = path(DP4);
    let events = ref_plane_events(&f, "/host:CPU");
    // Reference: XLA ops per device_ordinal, and all-reduce time per device.
    let mut ops_per_device: BTreeMap<i64, u64> = BTreeMap::new();
    let (mut ar_count, mut ar_ps) = (0u64, 0i64);
    for (_, ev) in &events {
        let st = &ev["stats"];
        let (Some(op), Some(ord)) = (st["hlo_op"].as_str(), st["device_ordinal"].as_i64()) else { continue };
        *ops_per_device.entry(ord).or_default() += 1;
        if op.starts_with("all-reduce") {
            ar_count += 1;
            ar_ps += ev["duration_ps"].as_i64().unwrap();
        }
    }
    assert_eq!(ops_per_device.len(), 4, "four CPU devices");
    assert!(ar_count > 0);

    let d = json(&["devices", &f]);
    assert_eq!(d["schema"], "stepscope.devices/1");
    let rows = d["devices"].as_array().unwrap();
    let ours: BTreeMap<i64, u64> = rows
        .iter()
        .map(|r| {
            let name = r["device"].as_str().unwrap();
            let ord: i64 = name.strip_prefix("/device:CPU:").expect(name).parse().unwrap();
            (ord, r["op_count"].as_u64().unwrap())
        })
        .collect();
    assert_eq!(ours, ops_per_device);
    for r in rows {
        assert!(r["collective_ps"].as_i64().unwrap() > 0, "every device all-reduces: {r}");
    }
    // Stragglers are exactly the devices flagged, each > 10% above its peers' median.
    for s in d["stragglers"].as_array().unwrap() {
        assert!(s["excess_pct"].as_f64().unwrap() > 10.0);
        assert!(rows.iter().any(|r| r["device"] == s["device"] && r["straggler"] == true));
    }

    let c = json(&["collectives", &f]);
    assert_eq!(c["schema"], "stepscope.collectives/1");
    let total: u64 = c["ops"].as_array().unwrap().iter().map(|r| r["count"].as_u64().unwrap()).sum();
    assert!(total > 0 && total <= ar_count, "{total} of {ar_count}");
    // Every all-reduce's time is in the steps or outside them, once.
    assert_eq!(c["total_ps"].as_i64().unwrap() + c["outside_window_ps"].as_i64().unwrap(), ar_ps);
    assert_eq!(c["ops"][0]["kind"], "all-reduce");
    assert_eq!(c["ops"][0]["devices"], 4);
    assert_eq!(c["overlapped_ps"].as_i64().unwrap() + c["exposed_ps"].as_i64().unwrap(), c["total_ps"]);

    // The summary's breakdown counts the same collectives.
    let s = json(&["summary", &f]);
    assert!(s["breakdown"]["collectives_ps"].as_i64().unwrap() > 0);
    assert_eq!(s["environment"]["devices"][0]["count"], 4);
}

/// JAX names the instructions of `psum_scatter` and `all_gather` `reduce_scatter.7` and
/// `all_gather.3`, and a `psum` inside a shard_map `psum_invariant.7`: each is a
/// collective by its HLO opcode, whatever its name says (issue 44).
#[test]
fn collectives_are_known_by_their_opcode_whatever_their_name() {
    let f = path(DP8_COLLECTIVES);
    let opcodes = reference(&["hlo-opcodes", &f]);
    // Reference: every XLA:CPU op whose instruction's opcode is a collective, per opcode:
    // executions and summed time.
    let mut by_kind: BTreeMap<String, (u64, i64)> = BTreeMap::new();
    for (_, ev) in ref_plane_events(&f, "/host:CPU") {
        let st = &ev["stats"];
        let (Some(op), Some(module)) = (st["hlo_op"].as_str(), st["hlo_module"].as_str()) else { continue };
        let Some(opcode) = opcodes[module][op].as_str() else { continue };
        if ["all-reduce", "all-gather", "reduce-scatter"].contains(&opcode) {
            let e = by_kind.entry(opcode.to_string()).or_default();
            e.0 += 1;
            e.1 += ev["duration_ps"].as_i64().unwrap();
        }
    }
    assert_eq!(by_kind.keys().collect::<Vec<_>>(), ["all-gather", "all-reduce", "reduce-scatter"]);
    let c = json(&["collectives", &f]);
    let mut ours: BTreeMap<String, u64> = BTreeMap::new();
    for r in c["ops"].as_array().unwrap() {
        *ours.entry(r["kind"].as_str().unwrap().to_string()).or_default() += r["count"].as_u64().unwrap();
    }
    let theirs: BTreeMap<String, u64> = by_kind.iter().map(|(k, v)| (k.clone(), v.0)).collect();
    assert_eq!(ours, theirs, "executions per kind");
    // Every collective's time is in the steps or outside them, once.
    let total: i64 = by_kind.values().map(|v| v.1).sum();
    assert_eq!(c["total_ps"].as_i64().unwrap() + c["outside_window_ps"].as_i64().unwrap(), total);
    // The device-time model counts the same ops: no device's compute includes them.
    let d = json(&["devices", &f]);
    let per_device: i64 = d["devices"].as_array().unwrap().iter().map(|r| r["collective_ps"].as_i64().unwrap()).sum();
    assert_eq!(per_device, c["exposed_ps"].as_i64().unwrap());
    for row in c["ops"].as_array().unwrap() {
        assert_eq!(row["devices"], 8, "{row}");
    }
}

/// Sorted, merged spans and their total length.
fn union_ps(mut spans: Vec<(i64, i64)>) -> (Vec<(i64, i64)>, i64) {
    spans.sort();
    let mut out: Vec<(i64, i64)> = Vec::new();
    for (a, b) in spans.into_iter().filter(|s| s.1 > s.0) {
        match out.last_mut() {
            Some(last) if a <= last.1 => last.1 = last.1.max(b),
            _ => out.push((a, b)),
        }
    }
    let total = out.iter().map(|s| s.1 - s.0).sum();
    (out, total)
}

#[test]
fn devices_without_step_annotations_are_measured_in_their_own_runs() {
    // Two XLA:CPU devices, steps not annotated: each device's window is its own runs of
    // the train step (first op to last op of each run_id), and its busy time the union
    // of its ops in that window, per the reference reader.
    let f = path(DP2_OWN);
    let events = ref_plane_events(&f, "/host:CPU");
    let mut runs: BTreeMap<(i64, i64), (i64, i64)> = BTreeMap::new();
    let mut ops: BTreeMap<i64, Vec<(i64, i64)>> = BTreeMap::new();
    for (_, ev) in &events {
        let st = &ev["stats"];
        let (Some(_), Some(ord)) = (st["hlo_op"].as_str(), st["device_ordinal"].as_i64()) else { continue };
        let start = ev["start_ps"].as_i64().unwrap();
        let end = start + ev["duration_ps"].as_i64().unwrap();
        ops.entry(ord).or_default().push((start, end));
        if st["hlo_module"] == "jit_train_step" {
            let span = runs.entry((ord, st["run_id"].as_i64().unwrap())).or_insert((start, end));
            *span = (span.0.min(start), span.1.max(end));
        }
    }
    assert_eq!(ops.len(), 2, "two CPU devices");
    let s = json(&["steps", &f]);
    assert_eq!(s["source"], "module_executions", "{s}");
    let d = json(&["devices", &f]);
    let rows = d["devices"].as_array().unwrap();
    let mut windows = Vec::new();
    for (ord, spans) in &ops {
        let r = rows.iter().find(|r| r["device"] == format!("/device:CPU:{ord}").as_str()).expect("a row per device");
        let (window, window_ps) = union_ps(runs.iter().filter(|(k, _)| k.0 == *ord).map(|(_, s)| *s).collect());
        let in_window: Vec<(i64, i64)> = (union_ps(spans.clone()).0.iter())
            .flat_map(|&(a, b)| window.iter().map(move |&(wa, wb)| (a.max(wa), b.min(wb))))
            .collect();
        assert_eq!(r["window_source"], "own_steps", "{r}");
        assert_eq!(r["window_ps"].as_i64().unwrap(), window_ps, "{r}");
        assert_eq!(r["busy_ps"].as_i64().unwrap(), union_ps(in_window).1, "{r}");
        assert_eq!(r["op_count"].as_u64().unwrap(), spans.len() as u64, "{r}");
        windows.push(window_ps);
    }
    assert_ne!(windows[0], windows[1], "each device in its own window");
}

#[test]
fn tpu_all_reduce_equals_the_xla_ops_line() {
    let f = path(TPU);
    let c = json(&["collectives", &f]);
    let mut want = (0u64, 0i64);
    for dev in 0..4 {
        let plane = format!("/device:TPU:{dev}");
        for (line, ev) in ref_plane_events(&f, &plane) {
            let name = ev["name"].as_str().unwrap();
            if line == "XLA Ops" && name.contains("all-reduce") {
                want.0 += 1;
                want.1 += ev["duration_ps"].as_i64().unwrap();
            }
        }
    }
    assert!(want.0 > 0);
    // The all-reduces run outside the steps (the step module's executions): counted
    // apart, not in the step's collectives, and the same nowhere else.
    let (total, outside) = (c["total_ps"].as_i64().unwrap(), c["outside_window_ps"].as_i64().unwrap());
    assert_eq!(total + outside, want.1);
    let d = json(&["devices", &f]);
    let in_devices: i64 = d["devices"].as_array().unwrap().iter().map(|r| r["collective_ps"].as_i64().unwrap()).sum();
    assert_eq!(in_devices, c["exposed_ps"].as_i64().unwrap());
}

/// The device-time model on every fixture: each device's parts add up to its window,
/// busy is the sum of its op parts (less a GPU's wait for host callbacks), a device
/// that ran ops is busy, and the summary,
/// the devices and the collectives read the same numbers.
#[test]
fn every_surface_reads_one_model_of_device_time() {
    for file in crate::util::fixture_files() {
        let f = file.to_str().unwrap();
        let (s, d, c) = (json(&["summary", f]), json(&["devices", f]), json(&["collectives", f]));
        let int = |v: &serde_json::Value, k: &str| v[k].as_i64().unwrap_or_else(|| panic!("{f}: {k} in {v}"));
        let rows = d["devices"].as_array().unwrap();
        let mut shares: Vec<(f64, f64, f64)> = Vec::new();
        for r in rows {
            let parts =
                ["compute_ps", "collective_ps", "copy_ps", "async_wait_ps", "host_callback_ps"].map(|k| int(r, k));
            let rest = ["runtime_overhead_ps", "compile_ps", "host_copy_ps", "idle_ps"].map(|k| int(r, k));
            let w = int(r, "window_ps");
            assert_eq!(parts.iter().sum::<i64>() + rest.iter().sum::<i64>(), w, "{f}: parts ≠ window: {r}");
            // Busy is the op parts, less a GPU's wait for its host's callbacks (part of
            // the host-callback part, in which no op ran).
            let wait = parts.iter().sum::<i64>() - int(r, "busy_ps");
            assert!(wait == 0 || (wait > 0 && wait <= parts[4]), "{f}: busy ≠ op parts: {r}");
            if int(r, "op_count") > 0 {
                assert!(int(r, "busy_ps") > 0 && w > 0, "{f}: a device with ops is idle: {r}");
                let u = r["utilization_pct"].as_f64().unwrap();
                assert!((u - 100.0 * int(r, "busy_ps") as f64 / w as f64).abs() < 1e-9, "{f}: {r}");
                // A device that computed or ran a collective in its window took part in
                // the work; the aggregates are over the devices that did.
                let worked = r["took_part"].as_bool().unwrap();
                assert!(worked || parts[0] + parts[1] == 0, "{f}: a working device left out: {r}");
                if worked {
                    let share = |k: &str| int(r, k) as f64 / w as f64;
                    shares.push((share("compute_ps"), share("collective_ps"), u));
                }
            }
        }
        // Utilisation: the same mean over working devices in the summary and the devices' aggregate,
        // and the computing share beside it, the mean of their compute shares.
        let mean_util = shares.iter().map(|s| s.2).sum::<f64>() / shares.len().max(1) as f64;
        let mean_compute = 100.0 * shares.iter().map(|s| s.0).sum::<f64>() / shares.len().max(1) as f64;
        assert!((s["device_compute_pct"].as_f64().unwrap() - mean_compute).abs() < 1e-9, "{f}");
        assert!((s["device_utilization_pct"].as_f64().unwrap() - mean_util).abs() < 1e-9, "{f}");
        assert!((d["all"]["utilization_pct"].as_f64().unwrap() - mean_util).abs() < 1e-9, "{f}");
        // Collectives: the analysis's exposed time is the devices' collective time.
        let coll: i64 = rows.iter().map(|r| int(r, "collective_ps")).sum();
        assert_eq!(int(&c, "exposed_ps"), coll, "{f}");
        assert_eq!(int(&c, "overlapped_ps") + int(&c, "exposed_ps"), int(&c, "total_ps"), "{f}");
        // The breakdown: parts add up to the mean step, and compute and collectives are
        // the devices' mean shares of their windows.
        let b = &s["breakdown"];
        let step = int(b, "step_ps");
        assert_eq!(crate::util::BREAKDOWN_PARTS.iter().map(|k| int(b, k)).sum::<i64>(), step, "{f}: {b}");
        if step > 0 && !shares.is_empty() {
            let n = shares.len() as f64;
            let compute = (shares.iter().map(|s| s.0).sum::<f64>() / n * step as f64).round() as i64;
            let collectives = (shares.iter().map(|s| s.1).sum::<f64>() / n * step as f64).round() as i64;
            assert!((int(b, "device_compute_ps") - compute).abs() <= 1, "{f}: {b} vs {compute}");
            assert!((int(b, "collectives_ps") - collectives).abs() <= 1, "{f}: {b} vs {collectives}");
        }
    }
}

#[test]
fn compile_of_the_train_step_equals_the_host_compile_events() {
    let f = path(COMPILE_RUN);
    let c = json(&["compile", &f]);
    assert_eq!(c["schema"], "stepscope.compile/1");
    // Reference: the python thread's top-level lowering and backend compile events.
    let python: Vec<Value> =
        ref_plane_events(&f, "/host:CPU").into_iter().filter(|(l, _)| l == "python3").map(|(_, e)| e).collect();
    let named = |n: &str| -> Vec<i64> {
        python.iter().filter(|e| e["name"] == n).map(|e| e["duration_ps"].as_i64().unwrap()).collect()
    };
    let lowering = named("lower_sharding_computation");
    let backend = named("backend_compile_and_load");
    let compiles = c["compiles"].as_array().unwrap();
    assert_eq!(compiles.len(), backend.len());
    let got: Vec<(i64, i64)> =
        compiles.iter().map(|e| (e["lowering_ps"].as_i64().unwrap(), e["backend_ps"].as_i64().unwrap())).collect();
    let want: Vec<(i64, i64)> = lowering.into_iter().zip(backend).collect();
    assert_eq!(got, want);
    let train = compiles.iter().find(|e| e["module"] == "jit_train_step").expect("jit_train_step compiled");
    assert_eq!(train["module_from"], "stat");
    assert_eq!(c["modules"][0]["module"], "jit_train_step", "the train step dominates compile time");
    // A steady-state capture compiles nothing.
    assert_eq!(json(&["compile", &path(CPU_RUN)])["compiles"].as_array().unwrap().len(), 0);
}

#[test]
fn hlo_shows_the_instruction_and_fusion_body_of_a_profiled_op() {
    let f = path(CPU_RUN);
    let ops = json(&["ops", &f, "--top", "1000"]);
    let fusion = ops["ops"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"].as_str().unwrap().contains("fusion") && r["category"] == "loop fusion")
        .expect("a loop fusion ran");
    let name = fusion["name"].as_str().unwrap();
    let h = json(&["hlo", &f, name]);
    assert_eq!(h["schema"], "stepscope.hlo/1");
    assert_eq!(h["instruction"]["name"], name);
    assert_eq!(h["instruction"]["opcode"], "fusion");
    assert_eq!(h["instruction"]["fusion_kind"], "kLoop");
    assert_eq!(h["module"], fusion["module"]);
    let body = h["fused_body"].as_array().unwrap();
    assert!(body.len() >= 2, "{h}");
    assert!(body.iter().any(|i| i["opcode"] == "parameter"));
    assert_eq!(h["operands"].as_array().unwrap().len(), h["instruction"]["operands"].as_array().unwrap().len());
    assert_eq!(h["profile"]["count"], fusion["count"]);
    assert_eq!(h["profile"]["total_ps"], fusion["total_ps"]);
    assert!(h["instruction"]["op_name"].as_str().unwrap().starts_with("jit(train_step)"));
    // The TPU module records the source line of its all-reduce.
    let t = json(&["hlo", &path(TPU), "all-reduce"]);
    assert_eq!(t["instruction"]["opcode"], "all-reduce");
    assert!(t["instruction"]["source_line"].as_i64().unwrap() > 0);
    // Unknown op: a one-line error naming the fix.
    let out = stepscope(&["hlo", &f, "no-such-op.1"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.starts_with("stepscope: no HLO instruction named") && err.contains("stepscope ops"), "{err}");
}

#[test]
fn a_two_host_run_shares_one_clock() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("plugins/profile/2026_11_21_23_00_00");
    std::fs::create_dir_all(&run).unwrap();
    std::fs::copy(fixture(CPU_RUN), run.join("host-a.xplane.pb")).unwrap();
    std::fs::copy(fixture(COMPILE_RUN), run.join("host-b.xplane.pb")).unwrap();
    let start = |rel: &str| {
        let st = reference(&["plane-stats", &path(rel), "--plane", "Task Environment"]);
        st["profile_start_time"].as_i64().unwrap()
    };
    let (a0, b0) = (start(CPU_RUN), start(COMPILE_RUN));
    let shift_b = (b0 - a0) * 1000;
    assert!(shift_b > 0, "host b started later");
    let both = json(&["steps", dir.path().to_str().unwrap()]);
    let alone_b = json(&["steps", &path(COMPILE_RUN)]);
    let b_steps: Vec<i64> = both["steps"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["host"] == "host-b")
        .map(|s| s["start_ps"].as_i64().unwrap())
        .collect();
    let want: Vec<i64> =
        alone_b["steps"].as_array().unwrap().iter().map(|s| s["start_ps"].as_i64().unwrap() + shift_b).collect();
    assert_eq!(b_steps, want);
    let d = json(&["devices", dir.path().to_str().unwrap()]);
    let hosts = d["hosts"].as_array().unwrap();
    assert_eq!(hosts.len(), 2);
    assert_eq!(hosts[0]["clock_offset_ps"], 0);
    assert_eq!(hosts[1]["clock_offset_ps"].as_i64().unwrap(), shift_b);
    // Nothing was written into the run folder.
    assert_eq!(std::fs::read_dir(&run).unwrap().count(), 2);
}

/// `spans` less `minus` (both sorted, disjoint).
fn minus_ps(spans: &[(i64, i64)], minus: &[(i64, i64)]) -> Vec<(i64, i64)> {
    let mut out = Vec::new();
    for &(mut a, b) in spans {
        for &(ma, mb) in minus.iter().filter(|m| m.1 > a && m.0 < b).copied().collect::<Vec<_>>().iter() {
            if ma > a {
                out.push((a, ma));
            }
            a = a.max(mb);
        }
        if a < b {
            out.push((a, b));
        }
    }
    out
}

#[test]
fn gpu_idle_is_split_by_what_the_host_was_doing_about_launches() {
    // Each kernel and copy is linked to its host launch by `correlation_id`. Idle time
    // (no op running in the steps) is "queued" where some linked op had been launched
    // (its launch call had returned) and had not started yet; "launching" where, of
    // the rest, the host was inside the launch call of an op not started; the rest,
    // the host launched nothing. Checked against the reference reader: windows from
    // its steps, busy from every op on the GPU's streams, the spans from each op's
    // launch call.
    for rel in [
        "gpu-async/plugins/profile/2026_11_23_08_00_30/vm.xplane.pb",
        "gpu-transformer/plugins/profile/2026_11_23_07_47_56/vm.xplane.pb",
    ] {
        let f = path(rel);
        let mut calls: BTreeMap<i64, (i64, i64)> = BTreeMap::new();
        for (_, ev) in ref_plane_events(&f, "/host:CPU") {
            if let Some(c) = ev["stats"]["correlation_id"].as_i64() {
                let start = ev["start_ps"].as_i64().unwrap();
                calls.insert(c, (start, start + ev["duration_ps"].as_i64().unwrap()));
            }
        }
        let (mut ops, mut queued, mut launching) = (Vec::new(), Vec::new(), Vec::new());
        for (_, ev) in ref_plane_events(&f, "/device:GPU:0") {
            let start = ev["start_ps"].as_i64().unwrap();
            ops.push((start, start + ev["duration_ps"].as_i64().unwrap()));
            if let Some(&(call, returned)) = ev["stats"]["correlation_id"].as_i64().and_then(|c| calls.get(&c)) {
                queued.push((returned, start));
                launching.push((call, returned.min(start)));
            }
        }
        // The steps as measured (gpu-async's are timed on the device: its loop
        // dispatches ahead; their host spans are the reference reader's steps).
        let steps = json(&["steps", &f])["steps"].clone();
        let window = union_ps(
            (steps.as_array().unwrap().iter())
                .map(|s| {
                    let a = s["start_ps"].as_i64().unwrap();
                    (a, a + s["duration_ps"].as_i64().unwrap())
                })
                .collect(),
        )
        .0;
        // The host's own copies (staging arrays for the device, `DevicePut…`, `H2D
        // Dispatch`) name the no-op time they cover: idle is the rest.
        let prefixes = "H2D,DevicePut,TransferToDevice,D2H,TransferFromDevice";
        let host_copies: Vec<(i64, i64)> =
            (crate::util::reference(&["host-events", &f, "--prefixes", prefixes]).as_array().unwrap().iter())
                .map(|e| {
                    let start = e["start_ps"].as_i64().unwrap();
                    (start, start + e["duration_ps"].as_i64().unwrap())
                })
                .collect();
        let no_op = minus_ps(&window, &union_ps(ops).0);
        let idle = minus_ps(&no_op, &union_ps(host_copies).0);
        let total = |spans: &[(i64, i64)]| spans.iter().map(|s| s.1 - s.0).sum::<i64>();
        let queued_idle: Vec<(i64, i64)> = minus_ps(&idle, &minus_ps(&idle, &union_ps(queued).0));
        let launching_idle = minus_ps(&minus_ps(&idle, &minus_ps(&idle, &union_ps(launching).0)), &queued_idle);
        let d = json(&["devices", &f]);
        let r = &d["devices"][0];
        let int = |k: &str| r[k].as_i64().unwrap();
        assert_eq!(r["compile_ps"], 0, "{rel}: no compile in the steps: {r}");
        assert_eq!(int("idle_ps"), total(&idle), "{rel}: {r}");
        assert_eq!(int("host_copy_ps"), total(&no_op) - total(&idle), "{rel}: {r}");
        assert_eq!(int("idle_queued_ps"), total(&queued_idle), "{rel}: {r}");
        assert_eq!(int("idle_launching_ps"), total(&launching_idle), "{rel}: {r}");
        assert!(int("idle_queued_ps") > 0 && int("idle_launching_ps") > 0, "{rel}: {r}");
        assert!(int("idle_queued_ps") + int("idle_launching_ps") < int("idle_ps"), "{rel}: {r}");
        // The summary's shares, one device: each share of the window × mean step.
        let b = json(&["summary", &f])["breakdown"].clone();
        let step = b["step_ps"].as_i64().unwrap();
        let of_step = |ps: i64| (ps as f64 / int("window_ps") as f64 * step as f64).round() as i64;
        let q = b["device_idle_queued_ps"].as_i64().unwrap();
        assert_eq!(q, of_step(int("idle_queued_ps")), "{rel}: {b}");
        let l = b["device_idle_launching_ps"].as_i64().unwrap();
        assert!((q + l - of_step(int("idle_queued_ps") + int("idle_launching_ps"))).abs() <= 1, "{rel}: {b}");
        // advise: the host waited for is idle less queued (launch calls are the
        // host's, and named in the evidence) less input (its own rule, as queued).
        let share = |ps: i64| 100.0 * ps as f64 / step as f64;
        let a = json(&["advise", &f]);
        let rule = |id: &str| a["findings"].as_array().unwrap().iter().find(|x| x["rule"] == id).cloned();
        let host = rule("host-bound-gaps").expect("host-bound");
        let input = b["device_idle_input_ps"].as_i64().unwrap_or(0);
        let host_ps = b["device_idle_ps"].as_i64().unwrap() - q - input;
        assert!((host["value"].as_f64().unwrap() - share(host_ps)).abs() < 1e-9);
        let evidence: Vec<&str> =
            host["evidence"].as_array().unwrap().iter().map(|e| e["what"].as_str().unwrap()).collect();
        assert!(evidence.iter().any(|e| e.contains("inside launch calls")), "{host}");
        assert_eq!(input > 0, evidence.iter().any(|e| e.contains("loading input")), "{host}");
        match rule("launch-queued") {
            Some(found) => assert!(share(q) > 10.0 && (found["value"].as_f64().unwrap() - share(q)).abs() < 1e-9),
            None => assert!(share(q) <= 10.0, "{rel}: launch-queued should fire at {}%", share(q)),
        }
    }
    // Nothing links XLA:CPU ops to launches: no split there.
    let d = json(&["devices", &path(CPU_RUN)]);
    assert!(d["devices"][0].get("idle_queued_ps").is_none(), "{d}");
    assert!(json(&["summary", &path(CPU_RUN)])["breakdown"].get("device_idle_queued_ps").is_none());
}

const CONV_2GPU: &str = "rocm-mi300x-conv-2gpu/chi-mi300x-013.ord.vultr.cpe.ice.amd.com.xplane.pb";
const CONV_8GPU: &str = "rocm-mi300x-conv-8gpu/tw003.xplane.pb";

#[test]
fn a_copy_only_gpu_has_no_compute_as_tracelens_says() {
    // GPU 0 of this MI300X capture only copies (`CopyDeviceToDevice` on `MemcpyOther`
    // streams); GPU 7 runs the convolution. TraceLens's own `gpu_timeline` for the
    // same file (copied beside it) gives each GPU's computation, exposed memcpy,
    // busy, idle and total time: stepscope's device rows must equal them.
    let csv = std::fs::read_to_string(fixture("rocm-mi300x-conv-2gpu/tracelens_gpu_timeline.csv")).unwrap();
    let mut peer: BTreeMap<(i64, String), i64> = BTreeMap::new();
    for line in csv.lines().skip(1) {
        let f: Vec<&str> = line.split(',').collect();
        let ms: f64 = f[1].parse().unwrap();
        peer.insert((f[3].parse().unwrap(), f[0].to_string()), (ms * 1e9).round() as i64);
    }
    let d = json(&["devices", &path(CONV_2GPU)]);
    let rows = d["devices"].as_array().unwrap();
    for pid in [1, 8] {
        let r = rows.iter().find(|r| r["device"] == format!("/device:GPU:{}", pid - 1).as_str()).expect("a row");
        let want = |k: &str| peer[&(pid, k.to_string())];
        let got = |k: &str| r[k].as_i64().unwrap();
        assert_eq!(got("compute_ps"), want("computation_time"), "{r}");
        assert_eq!(got("collective_ps"), want("exposed_comm_time"), "{r}");
        assert_eq!(got("copy_ps"), want("exposed_memcpy_time"), "{r}");
        assert_eq!(got("busy_ps"), want("busy_time"), "{r}");
        // The peer's idle is the device's: ours is split further by what the host did
        // (copying arrays for it on host threads is a part of its own).
        assert_eq!(got("idle_ps") + got("host_copy_ps"), want("idle_time"), "{r}");
        assert_eq!(got("window_ps"), want("total_time"), "{r}");
        assert_eq!(r["window_source"], "own_span");
    }
    let gpu0 = rows.iter().find(|r| r["device"] == "/device:GPU:0").unwrap();
    assert!(gpu0["compute_ps"] == 0 && gpu0["copy_ps"].as_i64().unwrap() > 0, "{gpu0}");
    // A device that only copies is no peer in compute: nothing is a straggler, and the
    // spread is over the one device that computed.
    assert!(d["stragglers"].as_array().unwrap().is_empty(), "{d}");
    assert_eq!(d["all"]["compute_spread_pct"].as_f64().unwrap(), 0.0);
    // A GPU that only copied took no part in the work: the run's utilisation is the
    // working GPU's (22.8%), not diluted by the copier's 3.2% to 13.0%, and every
    // surface names the GPU left out, with its busy time as TraceLens measures it.
    let gpu7 = rows.iter().find(|r| r["device"] == "/device:GPU:7").unwrap();
    assert_eq!((gpu0["took_part"].as_bool(), gpu7["took_part"].as_bool()), (Some(false), Some(true)));
    assert_eq!((d["all"]["device_count"].as_u64(), d["all"]["working_device_count"].as_u64()), (Some(2), Some(1)));
    let util = gpu7["utilization_pct"].as_f64().unwrap();
    assert!((d["all"]["utilization_pct"].as_f64().unwrap() - util).abs() < 1e-9, "{d}");
    let s = json(&["summary", &path(CONV_2GPU)]);
    assert!((s["device_utilization_pct"].as_f64().unwrap() - util).abs() < 1e-9, "{s}");
    for left in [&d["left_out"], &s["devices_left_out"]] {
        let left = left.as_array().expect("the GPU left out");
        assert_eq!(left.len(), 1, "{left:?}");
        assert_eq!(left[0]["device"], "/device:GPU:0");
        assert_eq!(left[0]["busy_ps"].as_i64(), Some(peer[&(1, "busy_time".to_string())]));
        assert_eq!(left[0]["op_count"], gpu0["op_count"]);
    }
    let text = ok(&["summary", &path(CONV_2GPU)]);
    let named = format!("left out: /device:GPU:0 ({} ops", gpu0["op_count"]);
    assert!(text.contains(&format!("device utilisation {util:.1}%")) && text.contains(&named), "{text}");
    // Where every device worked, nothing is left out and the key is absent.
    let d8 = json(&["devices", &path(CONV_8GPU)]);
    assert!(d8.get("left_out").is_none() && d8["all"]["working_device_count"] == 8, "{d8}");
}

#[test]
fn eight_gpus_are_each_measured_over_the_rounds_of_their_runs() {
    // No step annotations: the steps are the rounds of the program's runs, one on each
    // GPU's thread (gpu::one_thread_per_gpu_makes_a_step_of_each_round_of_runs), and
    // each of the 8 GPUs is measured in them. Its ops, busy time and copies (ROCm's
    // `__amd_rocclr_copyBuffer` kernels, not under compute) within the steps checked
    // against the reference reader.
    let f = path(CONV_8GPU);
    let d = json(&["devices", &f]);
    let rows = d["devices"].as_array().unwrap();
    assert_eq!(rows.len(), 8);
    let steps: Vec<(i64, i64)> = (json(&["steps", &f])["steps"].as_array().unwrap().iter())
        .map(|s| {
            (s["start_ps"].as_i64().unwrap(), s["start_ps"].as_i64().unwrap() + s["duration_ps"].as_i64().unwrap())
        })
        .collect();
    assert_eq!(steps.len(), 5);
    let in_steps = |spans: Vec<(i64, i64)>| -> Vec<(i64, i64)> {
        let (merged, _) = union_ps(spans);
        let mut out = Vec::new();
        for (a, b) in merged {
            for &(lo, hi) in &steps {
                if a.max(lo) < b.min(hi) {
                    out.push((a.max(lo), b.min(hi)));
                }
            }
        }
        out
    };
    for r in rows {
        let plane = r["device"].as_str().unwrap();
        let (mut all, mut copies, mut compute) = (Vec::new(), Vec::new(), Vec::new());
        for (_, ev) in ref_plane_events(&f, plane) {
            let start = ev["start_ps"].as_i64().unwrap();
            let span = (start, start + ev["duration_ps"].as_i64().unwrap());
            all.push(span);
            match ev["name"].as_str().unwrap().contains("copyBuffer") {
                true => copies.push(span),
                false => compute.push(span),
            }
        }
        let (_, busy_ps) = union_ps(in_steps(all.clone()));
        let window: i64 = steps.iter().map(|s| s.1 - s.0).sum();
        let exposed = minus_ps(&union_ps(in_steps(copies.clone())).0, &union_ps(in_steps(compute.clone())).0);
        let int = |k: &str| r[k].as_i64().unwrap();
        assert_eq!(r["window_source"], "own_steps", "{r}");
        assert_eq!(int("op_count"), all.len() as i64, "{r}");
        assert_eq!(int("window_ps"), window, "{r}");
        assert_eq!(int("busy_ps"), busy_ps, "{r}");
        assert_eq!(int("compute_ps"), union_ps(in_steps(compute)).1, "{r}");
        assert_eq!(int("copy_ps"), exposed.iter().map(|s| s.1 - s.0).sum::<i64>(), "{r}");
        assert_eq!(copies.is_empty(), plane != "/device:GPU:0", "{r}");
    }
    // The same work on every GPU: no straggler, a spread of a few percent.
    assert!(d["stragglers"].as_array().unwrap().is_empty(), "{d}");
    assert!(d["all"]["compute_spread_pct"].as_f64().unwrap() < 10.0, "{d}");
}

#[test]
fn a_device_busy_waiting_on_copies_is_not_said_to_compute() {
    // The TPU inference capture: its devices are busy the whole step, 97.9% of it
    // waiting on async copies. The headline says both: busy, and computing the share
    // the breakdown's compute bar shows.
    let f = path(TPU);
    let s = json(&["summary", &f]);
    let (util, compute) = (s["device_utilization_pct"].as_f64().unwrap(), s["device_compute_pct"].as_f64().unwrap());
    let b = &s["breakdown"];
    let bar = 100.0 * b["device_compute_ps"].as_f64().unwrap() / b["step_ps"].as_f64().unwrap();
    assert!(util > 99.0 && compute < 5.0 && (compute - bar).abs() < 0.05, "{util} {compute} {bar}");
    let text = ok(&["summary", &f]);
    assert!(text.contains(&format!("device utilisation {util:.1}% (computing {compute:.1}%)")), "{text}");
}

/// XLA:CPU hands a `dot` (and other thunks) to its intra-op thread pool and goes on
/// with other ops: the op's event covers only its start, and its tasks run on the pool
/// threads after it (the `ThreadpoolListener` regions its records lead to). That time
/// is the device's (the ops' own times: analyses::cpu_op_totals_…): its busy time in
/// the steps equals the union of the ops' spans until they completed, as the reference
/// reader finds them. The op's `end:` event comes later still, once the executor has
/// run what the op's completion let it run, and waited: on `cpu-tiny-ops` counting up
/// to it made the device look busy 69.1% and the host-bound step a warning.
#[test]
fn the_intra_op_pools_work_is_the_devices() {
    for name in ["cpu-tiny-ops", "cpu-transformer", "cpu-sync"] {
        let f = xplane(name);
        let theirs = reference(&["cpu-ops", &f]);
        assert!(theirs["busy_ps"].as_i64() > theirs["event_busy_ps"].as_i64(), "{name}: {theirs}");
        let devices = json(&["devices", &f]);
        assert_eq!(devices["devices"][0]["busy_ps"], theirs["busy_in_steps_ps"], "{name}");
    }
    let f = xplane("cpu-tiny-ops");
    let theirs = reference(&["cpu-ops", &f]);
    let pct = |key: &str| 100.0 * theirs[key].as_f64().unwrap() / theirs["steps_ps"].as_f64().unwrap();
    let util = json(&["devices", &f])["all"]["utilization_pct"].as_f64().unwrap();
    assert!((util - pct("busy_in_steps_ps")).abs() < 1e-6, "{util}");
    // The dots' pool work is busy time; the executor's carrying on after them until
    // their `end:` events (waits among it) is not: that would read 15 points more.
    assert!(util > pct("event_busy_in_steps_ps"), "{util} vs {}", pct("event_busy_in_steps_ps"));
    assert!(pct("ended_busy_in_steps_ps") - util > 15.0, "{util} vs {}", pct("ended_busy_in_steps_ps"));
    // So the step is host-bound: the device is idle over 40% of it; a symptom, ranked
    // after its cause (the many dispatches of tiny ops) where one was found.
    let advice = json(&["advise", &f]);
    let all = advice["findings"].as_array().unwrap();
    let host_bound = all.iter().find(|x| x["rule"] == "host-bound-gaps").unwrap();
    let caused = all.iter().position(|x| x["rule"] == "many-dispatches" || x["rule"] == "many-small-ops");
    let severity = if caused.is_some() { "warning" } else { "critical" };
    assert_eq!(host_bound["severity"], severity, "{all:?}");
    assert!(caused < all.iter().position(|x| x["rule"] == "host-bound-gaps"), "{all:?}");
    assert!(host_bound["value"].as_f64().unwrap() > 40.0, "{host_bound}");
}
