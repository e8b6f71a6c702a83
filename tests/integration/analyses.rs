//! Steps, op profile and summary: values equal an independent reading of the file.

use std::collections::HashMap;

use crate::util::*;

const CPU_RUN: &str = "cpu-transformer/plugins/profile/2026_11_21_22_29_17/vm.xplane.pb";
const COMPILE_RUN: &str = "cpu-compile/plugins/profile/2026_11_21_22_29_21/vm.xplane.pb";
const TPU: &str = "tpu-v6e-inference/tpu_inference_2.xplane.pb";

fn path(rel: &str) -> String {
    fixture(rel).to_str().unwrap().to_string()
}

/// Every event of `plane`/`line` as the reference reader sees it.
fn ref_events(file: &str, plane: &str, line: &str) -> Vec<serde_json::Value> {
    let script = root().join("tests/support/xspace_ref.py");
    let out = std::process::Command::new("python3")
        .arg(script)
        .args(["dump", file, "--plane", plane, "--line", line, "--limit", "100000000"])
        .output()
        .expect("python3");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

/// A `steps --json` answer as the reference reader gives steps: step_num, start and
/// duration of each.
fn step_spans(steps: &serde_json::Value) -> serde_json::Value {
    steps["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| serde_json::json!({"step_num": s["step_num"], "start_ps": s["start_ps"], "duration_ps": s["duration_ps"]}))
        .collect()
}

#[test]
fn annotated_steps_equal_the_reference_steps() {
    for rel in [CPU_RUN, COMPILE_RUN] {
        let f = path(rel);
        let ours = json(&["steps", &f]);
        assert_eq!(ours["schema"], "stepscope.steps/1");
        assert_eq!(ours["source"], "annotation");
        let theirs = reference(&["steps", &f]);
        assert_eq!(step_spans(&ours), theirs, "{rel}");
        for s in ours["steps"].as_array().unwrap() {
            let (d, busy, idle) = (
                s["duration_ps"].as_i64().unwrap(),
                s["device_busy_ps"].as_i64().unwrap(),
                s["device_idle_ps"].as_i64().unwrap(),
            );
            assert!(busy > 0 && busy <= d, "{s}");
            assert_eq!(busy + idle, d);
        }
    }
}

#[test]
fn trace_json_steps_are_the_annotated_steps_of_the_xspace() {
    // JAX's trace JSON (and Perfetto JSON) drop the `_r` marker of StepTraceAnnotation
    // roots; the steps read from them are still the annotations, equal to the
    // reference reader's steps of the XSpace written beside them.
    let mut checked = 0;
    for run in [
        "cpu-transformer/plugins/profile/2026_11_21_22_29_17",
        "cpu-compile/plugins/profile/2026_11_21_22_29_21",
        "cpu-dp4/plugins/profile/2026_11_21_23_24_47",
        "gpu-transformer/plugins/profile/2026_11_23_07_47_56",
    ] {
        let theirs = reference(&["steps", &path(&format!("{run}/vm.xplane.pb"))]);
        assert!(!theirs.as_array().unwrap().is_empty(), "{run}");
        for file in ["vm.trace.json.gz", "perfetto_trace.json.gz"] {
            let f = fixture(&format!("{run}/{file}"));
            if !f.exists() {
                continue;
            }
            let ours = json(&["steps", f.to_str().unwrap()]);
            assert_eq!(ours["source"], "annotation", "{run}/{file}");
            assert_eq!(step_spans(&ours), theirs, "{run}/{file}");
            checked += 1;
        }
    }
    assert_eq!(checked, 6);
}

#[test]
fn a_capture_of_compilation_shows_compile_time_in_its_first_step() {
    let v = json(&["steps", &path(COMPILE_RUN)]);
    let steps = v["steps"].as_array().unwrap();
    let first = steps[0]["compile_ps"].as_i64().unwrap();
    assert!(first > steps[0]["duration_ps"].as_i64().unwrap() / 10, "first step compiles: {}", steps[0]);
    let steady = json(&["steps", &path(CPU_RUN)]);
    assert!(steady["steps"].as_array().unwrap().iter().all(|s| s["compile_ps"] == 0), "warm-up excluded compilation");
}

/// Each XLA:CPU op's count and time (its executions until they completed: a `dot`
/// the intra-op pool finished after its event ended completes at its `end:` event)
/// equal the reference reader's.
#[test]
fn cpu_op_totals_equal_the_reference_sums_per_hlo_op() {
    for rel in ["cpu-tiny-ops", "cpu-sync"] {
        let f = xplane(rel);
        let ours = json(&["ops", &f, "--top", "0"]);
        let mut got: HashMap<(String, String), (u64, i64, i64)> = HashMap::new();
        for r in ours["ops"].as_array().unwrap() {
            let slot =
                got.entry((r["module"].as_str().unwrap().into(), r["name"].as_str().unwrap().into())).or_default();
            slot.0 += r["count"].as_u64().unwrap();
            slot.1 += r["total_ps"].as_i64().unwrap();
            slot.2 += r["self_ps"].as_i64().unwrap();
        }
        let theirs = reference(&["cpu-ops", &f]);
        let expected: HashMap<(String, String), (u64, i64, i64)> = (theirs["ops"].as_array().unwrap().iter())
            .map(|r| {
                let key = (r["module"].as_str().unwrap().into(), r["name"].as_str().unwrap().into());
                let self_ps = r["self_ps"].as_i64().unwrap();
                (key, (r["count"].as_u64().unwrap(), r["total_ps"].as_i64().unwrap(), self_ps))
            })
            .collect();
        assert_eq!(got, expected, "{rel}");
    }
    let f = path(CPU_RUN);
    let theirs = reference(&["cpu-ops", &f]);
    let mut expected: HashMap<String, (u64, i64, i64)> = HashMap::new();
    for r in theirs["ops"].as_array().unwrap() {
        let slot = expected.entry(r["name"].as_str().unwrap().to_string()).or_default();
        slot.0 += r["count"].as_u64().unwrap();
        slot.1 += r["total_ps"].as_i64().unwrap();
        slot.2 += r["self_ps"].as_i64().unwrap();
    }
    assert!(expected.len() > 50, "the transformer runs many ops");
    // Some ops, dots among them, were finished by the pool after their events ended.
    let pooled: Vec<&str> = (theirs["ops"].as_array().unwrap().iter())
        .filter(|r| r["total_ps"].as_i64() > r["event_ps"].as_i64())
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert!(pooled.iter().any(|n| n.starts_with("dot")), "{pooled:?}");
    let ours = json(&["ops", &f, "--top", "100000"]);
    assert_eq!(ours["schema"], "stepscope.ops/1");
    let rows = ours["ops"].as_array().unwrap();
    let mut got: HashMap<String, (u64, i64, i64)> = HashMap::new();
    for r in rows {
        let slot = got.entry(r["name"].as_str().unwrap().to_string()).or_default();
        slot.0 += r["count"].as_u64().unwrap();
        slot.1 += r["total_ps"].as_i64().unwrap();
        slot.2 += r["self_ps"].as_i64().unwrap();
        assert!(r["self_ps"].as_i64().unwrap() <= r["total_ps"].as_i64().unwrap());
    }
    assert_eq!(got, expected);
    // A dot's pool work is its time, but not the ops its thread ran meanwhile (they
    // are not inside it: its self time is all of its time), nor what the executor ran
    // on its completion before writing its `end:` (over 5 times the dot's own time).
    let dot = rows.iter().find(|r| r["name"] == "dot.32").unwrap();
    assert_eq!(dot["self_ps"], dot["total_ps"]);
    let their_dot = theirs["ops"].as_array().unwrap().iter().find(|r| r["name"] == "dot.32").unwrap();
    let total_ps = dot["total_ps"].as_i64().unwrap();
    assert!(total_ps > their_dot["event_ps"].as_i64().unwrap());
    assert!(5 * total_ps < their_dot["ended_ps"].as_i64().unwrap(), "{their_dot}");
    // Sorted by self time, largest first.
    let selfs: Vec<i64> = rows.iter().map(|r| r["self_ps"].as_i64().unwrap()).collect();
    assert!(selfs.windows(2).all(|w| w[0] >= w[1]));
}

#[test]
fn tpu_op_time_equals_the_xla_ops_lines() {
    let f = path(TPU);
    // TPU ops' own time is `device_duration_ps` (the device clock), not their
    // clock-aligned timeline length; XProf's op profile uses it too.
    let mut expected: HashMap<String, (u64, i64)> = HashMap::new();
    for dev in 0..4 {
        for e in ref_events(&f, &format!("/device:TPU:{dev}"), "XLA Ops") {
            let name = e["name"].as_str().unwrap();
            let op = name.trim_start_matches('%').split(" = ").next().unwrap().to_string();
            let d = expected.entry(op).or_default();
            d.0 += 1;
            d.1 += e["stats"]["device_duration_ps"].as_i64().expect("device_duration_ps");
        }
    }
    let v = json(&["ops", &f, "--top", "100000"]);
    let rows = v["ops"].as_array().unwrap();
    let ours: HashMap<String, (u64, i64)> = rows
        .iter()
        .map(|r| {
            (r["name"].as_str().unwrap().to_string(), (r["count"].as_u64().unwrap(), r["total_ps"].as_i64().unwrap()))
        })
        .collect();
    assert_eq!(ours, expected);
    // TPU puts cost stats on the event metadata: FLOPs and bytes reach the rows.
    assert!(rows.iter().any(|r| r["flops"].as_u64().unwrap_or(0) > 0));
    assert!(rows.iter().any(|r| r["bound"] == "memory"));
    let by_cat = json(&["ops", &f, "--by", "category"]);
    assert!(by_cat["ops"].as_array().unwrap().iter().any(|r| r["name"] == "all-reduce"));
}

#[test]
fn the_op_profile_does_not_depend_on_the_order_events_are_stored_in() {
    // The same captures with every line's events stored last to first: ops are then
    // sorted by time before self times are worked out from their nesting.
    let tmp = tempfile::tempdir().unwrap();
    for rel in [CPU_RUN, TPU] {
        let f = path(rel);
        let reversed = tmp.path().join("reversed.xplane.pb");
        let out = std::process::Command::new("python3")
            .arg(root().join("tests/support/xspace_ref.py"))
            .args(["reverse", &f, reversed.to_str().unwrap()])
            .output()
            .expect("python3");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        for by in ["op", "scope"] {
            let ours = json(&["ops", &f, "--by", by, "--top", "100000"]);
            assert_eq!(
                json(&["ops", reversed.to_str().unwrap(), "--by", by, "--top", "100000"]),
                ours,
                "{rel} by {by}"
            );
        }
        // The TPU capture nests ops on its XLA Ops lines (self time < total), so the
        // reversed copy checks nesting too; the XLA:CPU one has ops the intra-op pool
        // finished after their events (a dot's total is many times its event), which
        // the reversed copy must find the same, and none nested inside another's event.
        let rows = json(&["ops", &f, "--top", "100000"])["ops"].as_array().unwrap().clone();
        let nested = rows.iter().filter(|r| r["self_ps"].as_i64() < r["total_ps"].as_i64()).count();
        assert_eq!(nested > 0, rel == TPU, "{rel}: {nested} rows with nested ops");
    }
}

#[test]
fn summary_breakdown_adds_up_to_the_mean_step() {
    let f = path(CPU_RUN);
    let s = json(&["summary", &f]);
    assert_eq!(s["schema"], "stepscope.summary/1");
    let steps = reference(&["steps", &f]);
    let durations: Vec<i64> = steps.as_array().unwrap().iter().map(|s| s["duration_ps"].as_i64().unwrap()).collect();
    let mean = (durations.iter().sum::<i64>() as f64 / durations.len() as f64).round() as i64;
    assert_eq!(s["step_count"], durations.len());
    assert_eq!(s["step_time"]["mean_ps"], mean);
    assert_eq!(s["step_time"]["min_ps"], *durations.iter().min().unwrap());
    assert_eq!(s["step_time"]["max_ps"], *durations.iter().max().unwrap());
    let b = &s["breakdown"];
    let parts: i64 = crate::util::BREAKDOWN_PARTS.iter().map(|k| b[*k].as_i64().unwrap()).sum();
    let step = b["step_ps"].as_i64().unwrap();
    assert_eq!(parts, step);
    assert!(s["device_utilization_pct"].as_f64().unwrap() > 10.0);
    assert_eq!(s["environment"]["versions"][1], "jax_version = 0.10.2");
    assert_eq!(s["top_ops"].as_array().unwrap().len(), 10);
    let text = ok(&["summary", &f]);
    assert!(text.lines().all(|l| l.chars().count() <= 80), "{text}");
    assert!(text.contains("8 steps"), "{text}");
}

#[test]
fn csv_and_host_selection() {
    let f = path(CPU_RUN);
    let csv = ok(&["steps", &f, "--csv"]);
    let mut lines = csv.lines();
    assert_eq!(
        lines.next().unwrap(),
        "step_num,host,name,start_ps,duration_ps,host_start_ps,host_duration_ps,cut,device_busy_ps,device_idle_ps,\
         compile_ps,device_work_ps,flops,flops_utilization_pct"
    );
    assert_eq!(lines.count(), 8);
    let err = assert_clean_error(&["ops", &f, "--host", "nohost"]);
    assert!(err.contains("vm"), "names the hosts: {err}");
    assert_eq!(json(&["ops", &f, "--host", "vm", "--top", "3"])["ops"].as_array().unwrap().len(), 3);
}

#[test]
fn kernel_launches_equal_the_reference_kernel_events() {
    let f = path("rocm-mi300x-gemm/tw003.xplane.pb");
    let mut launches = 0u64;
    let mut total_ps = 0i64;
    for line in ["Stream #16(Kernel)", "Stream #17(Kernel)"] {
        for e in ref_events(&f, "/device:GPU:0", line) {
            if e["stats"].get("kernel_details").is_some() {
                launches += 1;
                total_ps += e["duration_ps"].as_i64().unwrap();
            }
        }
    }
    let v = json(&["kernels", &f, "--top", "1000"]);
    assert_eq!(v["schema"], "stepscope.kernels/1");
    let rows = v["kernels"].as_array().unwrap();
    assert_eq!(rows.iter().map(|r| r["count"].as_u64().unwrap()).sum::<u64>(), launches);
    assert_eq!(v["kernel_time_ps"], total_ps);
    assert_eq!(rows[0]["op"], "custom-call.1");
    assert_eq!(rows[0]["grid"], serde_json::json!([32, 37, 1]));
    let csv = ok(&["kernels", &f, "--csv"]);
    assert!(csv.starts_with("name,op,module,count,total_ps"));
    // No GPU in a CPU capture: a clear sentence, success.
    assert!(ok(&["kernels", &path(CPU_RUN)]).contains("no GPU kernels"));
}

#[test]
fn modules_are_keyed_by_program_where_names_repeat() {
    // A jitted function compiled for several shapes is one module name with several
    // programs: cpu-tiny-ops has 8 `jit__lambda`, the ROCm capture 6 `jit_dot`. Each
    // program is its own row, its count and time those of the ops the reference
    // reader finds with its `program_id`.
    for (rel, plane_prefix, repeated) in [
        ("cpu-tiny-ops/plugins/profile/2026_11_21_23_33_37/vm.xplane.pb", "/host:CPU", "jit__lambda"),
        ("rocm-mi300x-gemm/tw003.xplane.pb", "/device:GPU:", "jit_dot"),
    ] {
        let f = path(rel);
        let info = reference(&["info", &f]);
        let mut expected: HashMap<(String, u64), (u64, i64)> = HashMap::new();
        // XLA:CPU ops last until they completed (see cpu_op_totals_…).
        let cpu = if plane_prefix == "/host:CPU" { reference(&["cpu-ops", &f]) } else { serde_json::json!({}) };
        for r in cpu["programs"].as_array().into_iter().flatten().filter(|r| r["program_id"].is_u64()) {
            let key = (r["module"].as_str().unwrap().to_string(), r["program_id"].as_u64().unwrap());
            expected.insert(key, (r["count"].as_u64().unwrap(), r["total_ps"].as_i64().unwrap()));
        }
        for plane in info["hosts"][0]["planes"].as_array().unwrap().iter().filter(|p| p["name"] != "/host:CPU") {
            let pname = plane["name"].as_str().unwrap();
            if !pname.starts_with(plane_prefix) {
                continue;
            }
            for line in plane["lines"].as_array().unwrap() {
                for e in ref_events(&f, pname, line["name"].as_str().unwrap()) {
                    let s = &e["stats"];
                    if let (Some(_), Some(m), Some(p)) =
                        (s["hlo_op"].as_str(), s["hlo_module"].as_str(), s["program_id"].as_u64())
                    {
                        let slot = expected.entry((m.to_string(), p)).or_default();
                        slot.0 += 1;
                        slot.1 += e["duration_ps"].as_i64().unwrap();
                    }
                }
            }
        }
        let programs = expected.keys().filter(|(m, _)| m == repeated).count();
        assert!(programs > 4, "{rel}: {programs} programs named {repeated}");
        let rows = json(&["ops", &f, "--by", "module", "--top", "100000"])["ops"].as_array().unwrap().clone();
        let mut got: HashMap<(String, u64), (u64, i64)> = HashMap::new();
        for r in rows.iter().filter(|r| r["program_id"].is_u64()) {
            let (name, p) = (r["name"].as_str().unwrap(), r["program_id"].as_u64().unwrap());
            let module = name.strip_suffix(&format!("({p})")).unwrap_or(name);
            // The id is shown exactly where several programs share the name.
            let shared = expected.keys().filter(|(m, _)| m == module).count() > 1;
            assert_eq!(module != name, shared, "{rel}: {name}");
            assert!(got
                .insert((module.to_string(), p), (r["count"].as_u64().unwrap(), r["total_ps"].as_i64().unwrap()))
                .is_none());
        }
        assert_eq!(got, expected, "{rel}");
    }
}

/// User guide 003's op-profile columns and targets: TOTAL beside SELF where an op's
/// total holds time its self does not (the TPU capture's async copies), and
/// `--min-self 50ms` keeps the "operations with >50ms self-time", the same rows as the
/// JSON's filtered by hand.
#[test]
fn ops_show_total_time_and_keep_the_ops_over_a_self_time() {
    let f = xplane("tpu-v6e-inference");
    let all = json(&["ops", &f, "--top", "0"]);
    let rows = all["ops"].as_array().unwrap();
    assert!(rows.iter().any(|r| r["total_ps"] != r["self_ps"]));
    let text = ok(&["ops", &f, "--top", "0"]);
    assert!(text.lines().nth(1).unwrap().contains("TOTAL"), "{text}");
    let min = 50_000_000_000i64;
    let want: Vec<&serde_json::Value> =
        rows.iter().filter(|r| r["self_ps"].as_i64().unwrap() >= min).map(|r| &r["name"]).collect();
    assert!(!want.is_empty() && want.len() < rows.len(), "{want:?}");
    let kept = json(&["ops", &f, "--top", "0", "--min-self", "50ms"]);
    let got: Vec<&serde_json::Value> = kept["ops"].as_array().unwrap().iter().map(|r| &r["name"]).collect();
    assert_eq!(got, want);
    assert!(ok(&["ops", &f, "--min-self", "50ms"]).contains("with a self time of 50.0 ms or more"));
    // A capture whose ops all have self = total: no TOTAL column; none over: said so.
    let gpu = xplane("gpu-transformer");
    assert!(!ok(&["ops", &gpu]).contains("TOTAL"));
    // The summary's one screen leaves the total out.
    assert!(!ok(&["summary", &f]).contains("TOTAL"));
    let cpu = xplane("cpu-clean");
    assert!(ok(&["ops", &cpu, "--min-self", "10s"]).contains("no row has a self time of 10.0 s or more"));
    let bad = stepscope(&["ops", &cpu, "--min-self", "50"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("has no unit"));
}

/// A TPU's op events name their program by its 64-bit id and no module: `ops --by
/// module` has a row a program, named as the program's HLO names it, holding that
/// program's ops as the reference reader counts them on every TPU's `XLA Ops` line.
#[test]
fn tpu_ops_by_module_are_their_programs() {
    let f = fixture("tpu-v6e-inference/tpu_inference_2.xplane.pb").to_string_lossy().to_string();
    let mut want: std::collections::BTreeMap<u64, u64> = Default::default();
    for plane in ["/device:TPU:0", "/device:TPU:1", "/device:TPU:2", "/device:TPU:3"] {
        for e in reference_lines(&["dump", &f, "--plane", plane, "--line", "XLA Ops", "--limit", "100000000"]) {
            *want.entry(e["stats"]["program_id"].as_u64().unwrap()).or_default() += 1;
        }
    }
    assert_eq!(want.len(), 3, "{want:?}");
    let rows = json(&["ops", &f, "--by", "module", "--top", "all"]);
    let got: std::collections::BTreeMap<u64, u64> = (rows["ops"].as_array().unwrap().iter())
        .map(|r| (r["program_id"].as_u64().unwrap(), r["count"].as_u64().unwrap()))
        .collect();
    assert_eq!(got, want);
    // The tables keep the 64-bit ids whole: DuckDB over the op events' Parquet, and
    // `sql` (SQLite, signed: an id past 2^63 is its digits).
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("tables");
    ok(&["tables", &fixture("tpu-v6e-inference").to_string_lossy(), "-o", out.to_str().unwrap()]);
    let q = "SELECT program_id, count(*) AS n FROM op_events GROUP BY 1 ORDER BY 1";
    let duck = crate::util::support("table_ref.py", &["duckdb", out.to_str().unwrap(), q]);
    let duck: std::collections::BTreeMap<u64, u64> =
        (duck["rows"].as_array().unwrap().iter()).map(|r| (r[0].as_u64().unwrap(), r[1].as_u64().unwrap())).collect();
    assert_eq!(duck, want);
    let lite = json(&["sql", q, out.to_str().unwrap()]);
    let lite: std::collections::BTreeMap<u64, u64> = (lite["rows"].as_array().unwrap().iter())
        .map(|r| (r[0].as_u64().or_else(|| r[0].as_str()?.parse().ok()).unwrap(), r[1].as_u64().unwrap()))
        .collect();
    assert_eq!(lite, want);
    // Each row is named as the HLO names its program (`jit_f(ID)` in the metadata).
    for r in rows["ops"].as_array().unwrap() {
        let program = format!("{}({})", r["name"].as_str().unwrap(), r["program_id"]);
        let plan = json(&["buffers", &f, "--program", &program]);
        assert_eq!(plan["program"], program.as_str());
    }
}

/// "79.6 s of op time on a 78.8 s capture" (#75 item 2): `ops` says what its op time and
/// its % column are shares of, and beside it the time the devices were busy (each
/// device's ops merged), as `devices --json` has it; on XLA:CPU, where ops run at once,
/// the sum is the larger. `summary`'s top ops say what their % is of.
#[test]
fn ops_says_what_its_op_time_sums_and_how_long_the_devices_were_busy() {
    let path = xplane("cpu-transformer");
    let ops = json(&["ops", &path]);
    let busy = json(&["devices", &path])["all"]["busy_ps"].as_i64().unwrap();
    let op_time = ops["op_time_ps"].as_i64().unwrap();
    assert!(op_time > busy, "{op_time} {busy}: ops overlap on XLA:CPU");
    let text = ok(&["ops", &path]).replace('\n', " ");
    let after = |key: &str| -> f64 {
        let rest = text.split(key).nth(1).unwrap_or_else(|| panic!("no {key:?} in {text}"));
        let mut w = rest.split_whitespace();
        let (v, unit): (f64, &str) = (w.next().unwrap().parse().unwrap(), w.next().unwrap());
        v * match unit {
            "s" => 1e12,
            "ms" => 1e9,
            "µs" => 1e6,
            _ => panic!("{unit}"),
        }
    };
    let near = |said: f64, ps: i64| (said - ps as f64).abs() <= 0.006 * ps as f64;
    assert!(near(after("%: each row's share of the"), op_time), "{text}");
    assert!(near(after("the devices were busy"), busy), "{text}");
    let s = ok(&["summary", &path]).replace('\n', " ");
    assert!(s.contains("%: each row's share of the"), "{s}");
}
