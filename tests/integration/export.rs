//! `stepscope export`: every format read back and compared with the source events.
//!
//! Perfetto traces are decoded by `tests/support/perfetto_ref.py`, CSV and Parquet
//! tables by `tests/support/table_ref.py` (Python's csv module, pyarrow); both compare
//! with the XSpace as `tests/support/xspace_ref.py` reads it, an independent reader.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::util::*;

const TPU: &str = "tpu-v6e-inference/tpu_inference_2.xplane.pb";
const CPU: &str = "cpu-transformer/plugins/profile/2026_11_21_22_29_17/vm.xplane.pb";
const ROCM: &str = "rocm-mi300x-gemm/tw003.xplane.pb";

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// Exports `src` to `dir/name` with extra args; returns the output path.
fn export(src: &Path, dir: &Path, name: &str, extra: &[&str]) -> PathBuf {
    let out = dir.join(name);
    let mut args = vec!["export", s(src), "-o", s(&out)];
    args.extend_from_slice(extra);
    ok(&args);
    assert!(out.is_file(), "{} not written", out.display());
    out
}

/// (plane, [(line, events)]) of a `stepscope.info/1` document's first host.
fn planes_and_lines(info: &Value) -> Vec<(String, Vec<(String, u64)>)> {
    info["hosts"][0]["planes"]
        .as_array()
        .expect("planes")
        .iter()
        .map(|p| {
            let lines = p["lines"]
                .as_array()
                .expect("lines")
                .iter()
                .map(|l| (l["name"].as_str().unwrap().to_string(), l["events"].as_u64().unwrap()))
                .collect();
            (p["name"].as_str().unwrap().to_string(), lines)
        })
        .collect()
}

#[test]
fn perfetto_trace_decodes_to_every_source_event() {
    let dir = tempfile::tempdir().expect("tempdir");
    for rel in [TPU, CPU, ROCM] {
        let src = fixture(rel);
        let trace = export(&src, dir.path(), "t.pftrace", &[]);
        let total = json(&["info", s(&src)])["events_total"].as_u64().unwrap();

        // Every event: name, start and duration (ns), and all its args.
        let check = support("perfetto_ref.py", &["check", s(&trace), s(&src)]);
        assert_eq!(check["mismatches"], serde_json::json!([]), "{rel}: {check}");
        assert_eq!(check["events"].as_u64(), Some(total), "{rel}");
        assert_eq!(check["matched"].as_u64(), Some(total), "{rel}");
        assert_eq!(check["counter_matched"], check["counter_samples"], "{rel}");

        // The track tree: one host, its planes with events, their lines with events.
        let dec = support("perfetto_ref.py", &["decode", s(&trace)]);
        assert_eq!(dec["errors"], serde_json::json!([]), "{rel}");
        let hosts = dec["hosts"].as_array().unwrap();
        assert_eq!(hosts.len(), 1, "{rel}");
        let reference = reference(&["info", s(&src)]);
        let want: Vec<(String, Vec<(String, u64)>)> = planes_and_lines(&reference)
            .into_iter()
            .map(|(p, ls)| (p, ls.into_iter().filter(|l| l.1 > 0).collect::<Vec<_>>()))
            .filter(|(_, ls)| !ls.is_empty())
            .collect();
        let got: Vec<(String, Vec<(String, u64)>)> = hosts[0]["planes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| {
                let lines = p["lines"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|l| {
                        let n = l["slices"].as_u64().unwrap() + l["instants"].as_u64().unwrap();
                        (l["name"].as_str().unwrap().to_string(), n)
                    })
                    .collect();
                (p["name"].as_str().unwrap().to_string(), lines)
            })
            .collect();
        assert_eq!(got, want, "{rel}");
    }
}

#[test]
fn perfetto_memory_counters_follow_the_allocator() {
    // The TPU capture records 906 MemoryAllocation/MemoryDeallocation events on
    // /host:CPU; each becomes one sample on four counter tracks of its device.
    let dir = tempfile::tempdir().expect("tempdir");
    let src = fixture(TPU);
    let trace = export(&src, dir.path(), "t.pftrace", &[]);
    let check = support("perfetto_ref.py", &["check", s(&trace), s(&src)]);
    assert_eq!(check["mismatches"], serde_json::json!([]), "{check}");
    assert_eq!(check["counter_samples"].as_u64(), Some(906 * 4));
    assert_eq!(check["counter_matched"].as_u64(), Some(906 * 4));
    let dec = support("perfetto_ref.py", &["decode", s(&trace)]);
    let cpu = dec["hosts"][0]["planes"].as_array().unwrap().iter().find(|p| p["name"] == "/host:CPU").unwrap();
    let counters = cpu["counters"].as_array().unwrap();
    assert!(counters.iter().any(|c| c["name"] == "device 0 bytes_allocated"), "{counters:?}");
    // UNIT_SIZE_BYTES
    assert!(counters.iter().all(|c| c["unit"] == 3), "{counters:?}");
    let samples: u64 = counters.iter().map(|c| c["samples"].as_u64().unwrap()).sum();
    assert_eq!(samples, 906 * 4);
}

#[test]
fn chrome_json_reads_back_with_the_same_planes_lines_events_and_times() {
    let dir = tempfile::tempdir().expect("tempdir");
    for rel in [TPU, CPU, ROCM] {
        let src = fixture(rel);
        let source_info = json(&["info", s(&src)]);
        for name in ["vm.trace.json", "vm.trace.json.gz"] {
            let out = export(&src, dir.path(), name, &[]);
            if name.ends_with(".gz") {
                let head = std::fs::read(&out).unwrap();
                assert_eq!(&head[..2], &[0x1f, 0x8b], "{rel}: {name} is not gzip");
            }
            // stepscope's own trace JSON reader and the reference reader see the same
            // planes, lines and event counts as in the source, and the same time span.
            let back = json(&["info", s(&out)]);
            assert_eq!(planes_and_lines(&back), planes_and_lines(&source_info), "{rel} {name}");
            assert_eq!(back["events_total"], source_info["events_total"], "{rel} {name}");
            assert_eq!(back["hosts"][0]["time_span_ps"], source_info["hosts"][0]["time_span_ps"], "{rel} {name}");
            let theirs = reference(&["info", s(&out)]);
            assert_eq!(planes_and_lines(&theirs), planes_and_lines(&source_info), "{rel} {name}");
        }
        // Every event survives exactly (ps times, names, args): read the JSON back,
        // write its event table, compare with the XSpace.
        let chrome = dir.path().join("vm.trace.json.gz");
        let table = export(&chrome, dir.path(), "back.parquet", &[]);
        let check = support("table_ref.py", &["events", s(&table), s(&src)]);
        assert_eq!(check["mismatches"], serde_json::json!([]), "{rel}: {check}");
        assert_eq!(check["matched"], source_info["events_total"], "{rel}");
        assert_eq!(check["rows"], source_info["events_total"], "{rel}");
    }
}

#[test]
fn event_tables_match_the_source_in_csv_and_parquet() {
    let dir = tempfile::tempdir().expect("tempdir");
    for (rel, steps) in [(CPU, true), (TPU, false), (ROCM, false)] {
        let src = fixture(rel);
        let total = json(&["info", s(&src)])["events_total"].clone();
        for name in ["events.csv", "events.parquet"] {
            let table = export(&src, dir.path(), name, &[]);
            let mut args = vec!["events", s(&table), s(&src)];
            if steps {
                args.push("--steps");
            }
            let check = support("table_ref.py", &args);
            assert_eq!(check["mismatches"], serde_json::json!([]), "{rel} {name}: {check}");
            assert_eq!(check["rows"], total, "{rel} {name}");
            assert_eq!(check["matched"], total, "{rel} {name}");
            if steps {
                // The CPU capture's 8 annotated steps hold most of its events.
                assert_eq!(check["step_mismatches"], 0, "{rel} {name}");
                assert!(check["rows_in_a_step"].as_u64().unwrap() > 8000, "{rel} {name}: {check}");
            }
        }
    }
    let table = dir.path().join("events.parquet");
    let schema = support("table_ref.py", &["schema", s(&table)]);
    let types: Vec<(String, String, bool)> = schema["columns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["name"].as_str().unwrap().into(), c["type"].as_str().unwrap().into(), c["nullable"] == true))
        .collect();
    let want = [
        ("host", "string", false),
        ("plane", "string", false),
        ("plane_id", "int64", false),
        ("line", "string", false),
        ("line_id", "int64", false),
        ("name", "string", false),
        ("display_name", "string", true),
        ("start_ps", "int64", false),
        ("duration_ps", "int64", false),
        ("is_counter", "bool", false),
        ("hlo_op", "string", true),
        ("hlo_module", "string", true),
        ("tf_op", "string", true),
        ("scope", "string", true),
        ("step_num", "int64", true),
        ("stats", "string", false),
    ];
    let want: Vec<(String, String, bool)> = want.iter().map(|(a, b, c)| (a.to_string(), b.to_string(), *c)).collect();
    assert_eq!(types, want);
}

#[test]
fn analysis_tables_match_the_json_rows() {
    let dir = tempfile::tempdir().expect("tempdir");
    for (table, rel) in [("ops", TPU), ("steps", CPU), ("steps", TPU), ("kernels", ROCM)] {
        let src = fixture(rel);
        let analysis = ok(&[table, s(&src), "--json", "--top", "1000000"]);
        let analysis_path = dir.path().join(format!("{table}.json"));
        std::fs::write(&analysis_path, &analysis).unwrap();
        let rows = serde_json::from_str::<Value>(&analysis).unwrap()[table].as_array().unwrap().len();
        assert!(rows > 0, "{table} {rel}");
        for ext in ["csv", "parquet"] {
            let out = export(&src, dir.path(), &format!("{table}.{ext}"), &["--table", table]);
            let check = support("table_ref.py", &["rows", s(&out), s(&analysis_path), table]);
            assert_eq!(check["mismatches"], serde_json::json!([]), "{table} {rel} {ext}: {check}");
            assert_eq!(check["rows"].as_u64(), Some(rows as u64), "{table} {rel} {ext}");
        }
    }
}

#[test]
fn several_hosts_export_as_one_trace() {
    // Two hosts in one run: the same real capture under two host names.
    let dir = tempfile::tempdir().expect("tempdir");
    let run = dir.path().join("logs/plugins/profile/2026_01_01_00_00_00");
    std::fs::create_dir_all(&run).unwrap();
    std::fs::copy(fixture(CPU), run.join("a.xplane.pb")).unwrap();
    std::fs::copy(fixture(CPU), run.join("b.xplane.pb")).unwrap();
    let logs = dir.path().join("logs");
    let total = json(&["info", s(&logs)])["events_total"].as_u64().unwrap();
    assert_eq!(total, 2 * 8320);

    let trace = export(&logs, dir.path(), "t.pftrace", &[]);
    let dec = support("perfetto_ref.py", &["decode", s(&trace)]);
    assert_eq!(dec["errors"], serde_json::json!([]));
    let hosts: Vec<&str> = dec["hosts"].as_array().unwrap().iter().map(|h| h["host"].as_str().unwrap()).collect();
    assert_eq!(hosts, ["a", "b"]);

    let chrome = export(&logs, dir.path(), "t.json", &[]);
    let back = json(&["info", s(&chrome)]);
    assert_eq!(back["events_total"].as_u64(), Some(total));
    let planes: Vec<&str> =
        back["hosts"][0]["planes"].as_array().unwrap().iter().map(|p| p["name"].as_str().unwrap()).collect();
    assert!(planes.contains(&"a /host:CPU") && planes.contains(&"b /host:CPU"), "{planes:?}");

    // --host keeps one host's events only.
    let table = export(&logs, dir.path(), "e.csv", &["--host", "b"]);
    let check = support("table_ref.py", &["events", s(&table), s(&run.join("b.xplane.pb"))]);
    assert_eq!(check["mismatches"], serde_json::json!([]), "{check}");
    assert_eq!(check["rows"], 8320);
    assert_eq!(check["matched"], 8320);
}

#[test]
fn trace_json_counters_become_counter_tracks_and_c_events() {
    // A trace with counter samples (`C` events), as Chrome and PyTorch write them.
    let dir = tempfile::tempdir().expect("tempdir");
    let src = dir.path().join("host.trace.json");
    std::fs::write(
        &src,
        r#"{"traceEvents":[
{"ph":"M","pid":1,"name":"process_name","args":{"name":"/host:CPU"}},
{"ph":"M","pid":1,"tid":7,"name":"thread_name","args":{"name":"main"}},
{"ph":"X","pid":1,"tid":7,"ts":10,"dur":5.5,"name":"step","args":{"step_num":1}},
{"ph":"C","pid":1,"ts":10,"name":"memory","args":{"used":100,"free":900.5}},
{"ph":"C","pid":1,"ts":12.000001,"name":"memory","args":{"used":250,"free":750}}
]}"#,
    )
    .unwrap();
    let trace = export(&src, dir.path(), "t.pftrace", &[]);
    let dec = support("perfetto_ref.py", &["decode", s(&trace)]);
    assert_eq!(dec["errors"], serde_json::json!([]));
    let plane = &dec["hosts"][0]["planes"][0];
    assert_eq!(plane["lines"], serde_json::json!([{"name": "main", "slices": 1, "instants": 0, "tracks": 1}]));
    let mut counters: Vec<(String, u64)> = plane["counters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["name"].as_str().unwrap().to_string(), c["samples"].as_u64().unwrap()))
        .collect();
    counters.sort();
    assert_eq!(counters, [("memory free".to_string(), 2), ("memory used".to_string(), 2)]);

    let chrome = export(&src, dir.path(), "back.json", &[]);
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&chrome).unwrap()).unwrap();
    let cs: Vec<&Value> = doc["traceEvents"].as_array().unwrap().iter().filter(|e| e["ph"] == "C").collect();
    assert_eq!(cs.len(), 2);
    assert_eq!(cs[1]["ts"].as_f64(), Some(12.000001));
    assert_eq!(cs[1]["args"]["used"], 250);
    let x: Vec<&Value> = doc["traceEvents"].as_array().unwrap().iter().filter(|e| e["ph"] == "X").collect();
    assert_eq!(x.len(), 1);
    assert_eq!(x[0]["dur"].as_f64(), Some(5.5));
}

#[test]
fn export_refuses_bad_requests_cleanly_and_leaves_no_partial_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let src = fixture(CPU);
    let out = |n: &str| dir.path().join(n).to_str().unwrap().to_string();
    assert_clean_error(&["export", s(&src), "-o", &out("trace.bin")]);
    assert_clean_error(&["export", s(&src), "-o", &out("t.pftrace"), "--table", "ops"]);
    assert_clean_error(&["export", s(&src), "-o", "-", "--format", "parquet"]);
    assert_clean_error(&["export", s(&src), "-o", &out("e.parquet.gz")]);
    assert_clean_error(&["export", s(&src), "-o", &out("no/such/folder/t.json")]);
    // A CPU capture has no GPU kernels.
    assert_clean_error(&["export", s(&src), "-o", &out("k.csv"), "--table", "kernels"]);
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "a failed export left files behind");

    // Never over the profile being read.
    let copy = dir.path().join("vm.xplane.pb");
    std::fs::copy(&src, &copy).unwrap();
    let before = std::fs::read(&copy).unwrap();
    assert_clean_error(&["export", s(&copy), "-o", s(&copy), "--format", "csv"]);
    assert_eq!(std::fs::read(&copy).unwrap(), before);
}

#[test]
fn csv_to_stdout_and_format_from_flag() {
    let src = fixture(ROCM);
    let text = ok(&["export", s(&src), "--format", "csv", "-o", "-", "--table", "kernels"]);
    let mut lines = text.lines();
    assert!(lines.next().unwrap().starts_with("name,op,module,count,total_ps,"));
    let rows = json(&["kernels", s(&src), "--top", "1000"])["kernels"].as_array().unwrap().len();
    assert_eq!(lines.count(), rows);
}

#[test]
fn a_window_exports_the_events_that_overlap_it() {
    let src = fixture(CPU);
    let steps = json(&["steps", s(&src)]);
    let step = &steps["steps"][3];
    let from = step["start_ps"].as_i64().unwrap();
    let to = from + step["duration_ps"].as_i64().unwrap();
    // The reference reader's events that overlap step 3 (an instant: that starts in it).
    let all = reference_plane_events(s(&src), "/host:CPU");
    let key = |e: &Value| {
        (e["name"].as_str().unwrap().to_string(), e["start_ps"].as_i64().unwrap(), e["duration_ps"].as_i64().unwrap())
    };
    let mut want: Vec<(String, i64, i64)> =
        all.iter().map(key).filter(|(_, start, dur)| *start < to && (*start >= from || start + dur > from)).collect();
    want.sort();
    assert!(want.len() > 100 && want.len() < all.len() / 2, "{} of {}", want.len(), all.len());

    // Chrome trace JSON of the window, on stdout: the same events, to the picosecond.
    let (a, b) = (format!("{from}ps"), format!("{to}ps"));
    let text = ok(&["export", s(&src), "--format", "chrome", "-o", "-", "--from", &a, "--to", &b]);
    let trace: Value = serde_json::from_str(&text).unwrap();
    let ps = |v: &Value| (v.as_f64().unwrap() * 1e6).round() as i64;
    let mut got: Vec<(String, i64, i64)> = (trace["traceEvents"].as_array().unwrap().iter())
        .filter(|e| e["ph"] == "X" || e["ph"] == "i")
        .map(|e| (e["name"].as_str().unwrap().to_string(), ps(&e["ts"]), e.get("dur").map_or(0, ps)))
        .collect();
    got.sort();
    assert_eq!(got, want);

    // The events table and a Perfetto trace of the window hold as many.
    let dir = tempfile::tempdir().unwrap();
    let rows = ok(&["export", s(&src), "--format", "csv", "-o", "-", "--from", &a, "--to", &b]).lines().count() - 1;
    assert_eq!(rows, want.len());
    let trace = export(&src, dir.path(), "w.pftrace", &["--from", &a, "--to", &b]);
    let dec = support("perfetto_ref.py", &["decode", s(&trace)]);
    let n: u64 = (dec["hosts"][0]["planes"].as_array().unwrap().iter())
        .flat_map(|p| p["lines"].as_array().unwrap())
        .map(|l| l["slices"].as_u64().unwrap() + l["instants"].as_u64().unwrap())
        .sum();
    assert_eq!(n as usize, want.len());

    // Only where it means something, and only a window that ends after it starts.
    let err = assert_clean_error(&["export", s(&src), "-o", "-", "--format", "csv", "--table", "ops", "--from", &a]);
    assert!(err.contains("--from/--to cut the events"), "{err}");
    let err = assert_clean_error(&["export", s(&src), "-o", "-", "--format", "csv", "--from", &b, "--to", &a]);
    assert!(err.contains("is not before --to"), "{err}");
}

#[test]
fn tables_write_each_hosts_analyses_as_parquet_partitioned_by_run_and_host() {
    let tmp = tempfile::tempdir().unwrap();
    let logs = three_runs(tmp.path());
    let out = tmp.path().join("tables");
    ok(&["tables", s(&logs), "-o", s(&out)]);
    let manifest: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("stepscope_tables.json")).unwrap()).unwrap();
    assert_eq!(manifest["schema"], "stepscope.tables/1");

    // Hive partition values, percent-encoded (a run's name holds `/`).
    let enc = |v: &str| -> String {
        v.bytes()
            .map(|b| {
                if b.is_ascii_alphanumeric() || b"._-".contains(&b) {
                    (b as char).to_string()
                } else {
                    format!("%{b:02X}")
                }
            })
            .collect()
    };
    let runs = json(&["ls", s(&logs)]);
    let mut checked = 0;
    for run in runs["runs"].as_array().unwrap() {
        let rel = run["run"].as_str().unwrap();
        for host in run["hosts"].as_array().unwrap().iter().map(|h| h.as_str().unwrap()) {
            let part =
                |table: &str| out.join(table).join(format!("run={}", enc(rel))).join(format!("host={}", enc(host)));
            // Each analysis table holds the rows the CLI prints for that host alone.
            for (table, command, key) in [
                ("steps", vec!["steps"], "steps"),
                ("ops", vec!["ops", "--top", "0"], "ops"),
                ("collectives", vec!["collectives", "--top", "0"], "ops"),
                ("scopes", vec!["scopes"], "scopes"),
                ("findings", vec!["advise"], "findings"),
                ("devices", vec!["devices"], "devices"),
            ] {
                let mut args = command.clone();
                args.extend([s(&logs), "--run", rel, "--host", host, "--json"]);
                let text = ok(&args);
                let file = part(table).join("part-0.parquet");
                let rows = serde_json::from_str::<Value>(&text).unwrap()[key].as_array().unwrap().len();
                if rows == 0 {
                    assert!(!file.exists(), "{rel} {host} {table}: no rows, no file");
                    continue;
                }
                let want = tmp.path().join(format!("{table}.json"));
                std::fs::write(&want, text).unwrap();
                let check = support("table_ref.py", &["rows", s(&file), s(&want), key]);
                assert_eq!(check["mismatches"], serde_json::json!([]), "{rel} {host} {table}: {check}");
                assert_eq!(check["rows"].as_u64(), Some(rows as u64), "{rel} {host} {table}");
                checked += 1;
            }
            // The op events sum to the op profile's rows, and to the reference reader's
            // XLA:CPU ops (count, own time, self time).
            let sums = support("table_ref.py", &["sums", s(&part("op_events").join("part-0.parquet"))]);
            let ops = json(&["ops", s(&logs), "--run", rel, "--host", host, "--top", "0"]);
            let key = |m: &Value, o: &Value, p: &Value| {
                (m.as_str().unwrap().to_string(), o.as_str().unwrap().to_string(), p.as_i64())
            };
            let got: std::collections::BTreeMap<_, _> = (sums["sums"].as_array().unwrap().iter())
                .map(|r| {
                    (
                        key(&r["module"], &r["op"], &r["program_id"]),
                        (r["count"].clone(), r["duration_ps"].clone(), r["self_ps"].clone()),
                    )
                })
                .collect();
            let want: std::collections::BTreeMap<_, _> = (ops["ops"].as_array().unwrap().iter())
                .map(|r| {
                    (
                        key(&r["module"], &r["name"], &r["program_id"]),
                        (r["count"].clone(), r["total_ps"].clone(), r["self_ps"].clone()),
                    )
                })
                .collect();
            assert_eq!(got, want, "{rel} {host}");
            let src = logs.join(rel).join(format!("{host}.xplane.pb"));
            let theirs = reference(&["cpu-ops", s(&src)]);
            let mut by_op: std::collections::BTreeMap<(String, String), (u64, i64, i64)> = Default::default();
            for r in sums["sums"].as_array().unwrap() {
                let e =
                    by_op.entry((r["module"].as_str().unwrap().into(), r["op"].as_str().unwrap().into())).or_default();
                *e = (
                    e.0 + r["count"].as_u64().unwrap(),
                    e.1 + r["duration_ps"].as_i64().unwrap(),
                    e.2 + r["self_ps"].as_i64().unwrap(),
                );
            }
            let reference_ops: std::collections::BTreeMap<(String, String), (u64, i64, i64)> = (theirs["ops"]
                .as_array()
                .unwrap()
                .iter())
            .map(|r| {
                let k = (r["module"].as_str().unwrap().to_string(), r["name"].as_str().unwrap().to_string());
                (k, (r["count"].as_u64().unwrap(), r["total_ps"].as_i64().unwrap(), r["self_ps"].as_i64().unwrap()))
            })
            .collect();
            assert_eq!(by_op, reference_ops, "{rel} {host}: the reference reader's XLA:CPU ops");
            // The events table, against the host's file read by the reference reader.
            let check = support("table_ref.py", &["events", s(&part("events").join("part-0.parquet")), s(&src)]);
            assert_eq!(check["mismatches"], serde_json::json!([]), "{rel} {host}: {check}");
            assert_eq!(check["matched"], check["events"], "{rel} {host}");
        }
    }
    // Four hosts: steps, ops and devices each; findings, scopes and collectives where
    // a run has them (the data-parallel run's all-reduces, the guide's scopes).
    assert!(checked > 4 * 3 + 2, "{checked} tables checked");
    assert!(out.join("collectives").is_dir() && out.join("scopes").is_dir());
    // One type a column across every file of a table.
    for table in ["steps", "ops", "op_events", "collectives", "scopes", "devices", "findings", "events"] {
        let mut types: std::collections::BTreeMap<String, String> = Default::default();
        for run in runs["runs"].as_array().unwrap() {
            let rel = run["run"].as_str().unwrap();
            for host in run["hosts"].as_array().unwrap().iter().map(|h| h.as_str().unwrap()) {
                let file = out
                    .join(table)
                    .join(format!("run={}", enc(rel)))
                    .join(format!("host={}", enc(host)))
                    .join("part-0.parquet");
                if !file.exists() {
                    continue;
                }
                for c in support("table_ref.py", &["schema", s(&file)])["columns"].as_array().unwrap() {
                    let (name, ty) = (c["name"].as_str().unwrap().to_string(), c["type"].as_str().unwrap().to_string());
                    assert_eq!(
                        types.entry(name.clone()).or_insert_with(|| ty.clone()),
                        &ty,
                        "{table}.{name} in {rel} {host}"
                    );
                }
            }
        }
    }
    // A CPU capture has no GPU kernels: no file, rather than an empty one.
    assert!(!out.join("kernels").exists());
    let err = assert_clean_error(&["tables", s(&tmp.path().join("none")), "-o", s(&out)]);
    assert!(err.contains("cannot read") || err.contains("no profile"), "{err}");
}
