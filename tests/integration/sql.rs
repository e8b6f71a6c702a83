//! `stepscope sql`: its answers against the CLI's `--json` for the same hosts, against
//! `sql` over the folder `stepscope tables` wrote, and against DuckDB reading that
//! folder; read-only whatever the query; errors that say where and what to do; a time
//! limit; the web API's answer equal to the CLI's.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{json as j, Value};

use crate::util::*;

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// `stepscope sql QUERY PATH --json`'s rows.
fn rows(query: &str, path: &Path) -> Vec<Value> {
    let out = json(&["sql", query, s(path)]);
    assert_eq!(out["schema"], "stepscope.sql/1");
    assert_eq!(out["rows_cut"], false);
    assert_eq!(out["row_count"].as_u64(), Some(out["rows"].as_array().unwrap().len() as u64));
    out["rows"].as_array().unwrap().clone()
}

#[test]
fn answers_equal_the_cli_the_tables_folder_and_duckdb() {
    let tmp = tempfile::tempdir().unwrap();
    let logs = three_runs(tmp.path());
    let folder = tmp.path().join("tables");
    ok(&["tables", s(&logs), "-o", s(&folder)]);
    let queries = [
        "SELECT run, host, module, name, program_id, count, total_ps, self_ps FROM ops \
         ORDER BY run, host, module, name, program_id",
        "SELECT run, host, step_num, duration_ps, device_busy_ps, device_idle_ps FROM steps \
         ORDER BY run, host, step_num",
        "SELECT run, host, name, kind, count, total_ps, exposed_ps, bytes_moved FROM collectives \
         ORDER BY run, host, name",
        "SELECT run, host, module, op, program_id, count(*) AS n, sum(duration_ps) AS total_ps, \
         sum(self_ps) AS self_ps FROM op_events GROUP BY run, host, module, op, program_id ORDER BY 1, 2, 3, 4, 5",
        "SELECT run, hosts, bytes FROM runs ORDER BY run",
        "SELECT run, host, count(*) AS n, sum(duration_ps) AS duration_ps FROM events GROUP BY run, host \
         ORDER BY run, host",
        "SELECT run, host, rule, severity FROM findings ORDER BY run, host, rule",
        // No column named: each table keeps its first, for the rows to count.
        "SELECT count(*) AS n FROM op_events",
    ];
    let mut answers = Vec::new();
    for q in queries {
        let from_profiles = rows(q, &logs);
        assert!(!from_profiles.is_empty(), "{q}: no rows");
        assert_eq!(rows(q, &folder), from_profiles, "{q}: over the tables folder");
        let duck = support("table_ref.py", &["duckdb", s(&folder), q]);
        assert_eq!(duck["rows"].as_array().unwrap(), &from_profiles, "{q}: DuckDB over the tables folder");
        answers.push(from_profiles);
    }

    // Against the CLI's JSON, host by host.
    let runs = json(&["ls", s(&logs)]);
    let mut hosts = 0;
    let pick = |rows: &[Value], run: &str, host: &str| -> Vec<Vec<Value>> {
        (rows.iter()).filter(|r| r[0] == run && r[1] == host).map(|r| r.as_array().unwrap()[2..].to_vec()).collect()
    };
    for r in runs["runs"].as_array().unwrap() {
        let run = r["run"].as_str().unwrap();
        for host in r["hosts"].as_array().unwrap().iter().map(|h| h.as_str().unwrap()) {
            hosts += 1;
            let cli = |args: &[&str]| {
                let mut a = args.to_vec();
                a.extend([s(&logs), "--run", run, "--host", host]);
                json(&a)
            };
            let ops = cli(&["ops", "--top", "0"]);
            let mut want: Vec<Vec<Value>> = (ops["ops"].as_array().unwrap().iter())
                .map(|o| {
                    ["module", "name", "program_id", "count", "total_ps", "self_ps"].map(|k| o[k].clone()).to_vec()
                })
                .collect();
            want.sort_by_key(|r| (r[0].to_string(), r[1].to_string(), r[2].to_string()));
            let mut got = pick(&answers[0], run, host);
            got.sort_by_key(|r| (r[0].to_string(), r[1].to_string(), r[2].to_string()));
            assert_eq!(got, want, "{run} {host}: ops");
            // The op events summed as the op profile sums them.
            let mut sums = pick(&answers[3], run, host);
            sums.sort_by_key(|r| (r[0].to_string(), r[1].to_string(), r[2].to_string()));
            assert_eq!(sums, want, "{run} {host}: op_events summed by (module, op, program)");

            let steps = cli(&["steps"]);
            let want: Vec<Vec<Value>> = (steps["steps"].as_array().unwrap().iter())
                .map(|st| {
                    ["step_num", "duration_ps", "device_busy_ps", "device_idle_ps"].map(|k| st[k].clone()).to_vec()
                })
                .collect();
            assert_eq!(pick(&answers[1], run, host), want, "{run} {host}: steps");

            let coll = cli(&["collectives", "--top", "0"]);
            let mut want: Vec<Vec<Value>> = (coll["ops"].as_array().unwrap().iter())
                .map(|c| {
                    ["name", "kind", "count", "total_ps", "exposed_ps", "bytes_moved"].map(|k| c[k].clone()).to_vec()
                })
                .collect();
            want.sort_by_key(|r| r[0].to_string());
            assert_eq!(pick(&answers[2], run, host), want, "{run} {host}: collectives");

            // The events, as the reference reader counts them in the host's file.
            let file = logs.join(run).join(format!("{host}.xplane.pb"));
            let events = reference(&["info", s(&file)])["events_total"].clone();
            assert_eq!(pick(&answers[5], run, host)[0][0], events, "{run} {host}: events");
        }
    }
    assert_eq!(hosts, 4);
    // The data-parallel run's collectives are all three kinds.
    let kinds: std::collections::BTreeSet<String> =
        answers[2].iter().map(|r| r[3].as_str().unwrap().to_string()).collect();
    assert!(kinds.is_superset(&["all-gather", "all-reduce", "reduce-scatter"].map(String::from).into()), "{kinds:?}");
    let want_runs: Vec<Value> = (runs["runs"].as_array().unwrap().iter())
        .map(|r| j!([r["run"], r["hosts"].as_array().unwrap().len(), r["bytes"]]))
        .collect();
    let mut want_runs = want_runs;
    want_runs.sort_by_key(|r| r[0].to_string());
    assert_eq!(answers[4], want_runs, "runs, as ls lists them");

    // --run and --host choose what is read, from profiles and from the folder alike.
    let two = runs["runs"].as_array().unwrap().iter().find(|r| r["hosts"].as_array().unwrap().len() == 2).unwrap();
    let run = two["run"].as_str().unwrap();
    let q = "SELECT DISTINCT run, host FROM steps ORDER BY host";
    for path in [&logs, &folder] {
        let out = json(&["sql", q, s(path), "--run", run, "--host", "worker-1"]);
        assert_eq!(out["rows"], j!([[run, "worker-1"]]), "{}", path.display());
    }
    let err = assert_clean_error(&["sql", q, s(&logs), "--host", "nohost"]);
    assert!(err.contains("no host named \"nohost\"") && err.contains("worker-1"), "{err}");
}

#[test]
fn csv_and_text_carry_the_same_rows() {
    let cpu = fixture("cpu-dp4");
    let q = "SELECT step_num, name, duration_ps, duration_ps / 1e9 AS ms, NULL AS missing FROM steps ORDER BY step_num";
    let want = rows(q, &cpu);
    let csv = ok(&["sql", q, s(&cpu), "--csv"]);
    let mut lines = csv.lines();
    assert_eq!(lines.next(), Some("step_num,name,duration_ps,ms,missing"));
    for (line, row) in lines.zip(&want) {
        let cells: Vec<&str> = line.split(',').collect();
        assert_eq!(cells[0], row[0].to_string());
        assert_eq!(cells[1], row[1].as_str().unwrap());
        assert_eq!(cells[2], row[2].to_string());
        assert_eq!(cells[3].parse::<f64>().unwrap(), row[3].as_f64().unwrap());
        assert_eq!(cells[4], "");
    }
    let text = ok(&["sql", q, s(&cpu)]);
    assert_eq!(text.lines().count(), want.len() + 1, "{text}");
    assert!(text.lines().nth(1).unwrap().ends_with("NULL"), "{text}");
}

#[test]
fn only_read_only_queries_run_and_nothing_is_written() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run");
    copy_tree(&fixture("cpu-clean"), &dir);
    let before = snapshot(&dir);
    let evil = tmp.path().join("evil.db");
    for q in [
        "INSERT INTO steps (step_num) VALUES (1)".to_string(),
        "UPDATE steps SET duration_ps = 0".into(),
        "DELETE FROM steps".into(),
        "DROP TABLE steps".into(),
        "CREATE TABLE t (x)".into(),
        "CREATE TEMP VIEW v AS SELECT 1".into(),
        format!("ATTACH DATABASE '{}' AS evil", evil.display()),
        format!("VACUUM INTO '{}'", evil.display()),
        "PRAGMA writable_schema = 1".into(),
        "PRAGMA query_only = 0".into(),
        "SELECT 1; DROP TABLE steps".into(),
        "BEGIN".into(),
        "REINDEX".into(),
        "ANALYZE".into(),
    ] {
        let err = assert_clean_error(&["sql", &q, s(&dir)]);
        assert!(err.contains("read-only") || err.contains("more than one statement"), "{q}: {err}");
    }
    let err = assert_clean_error(&["sql", "SELECT load_extension('/tmp/x')", s(&dir)]);
    assert!(err.contains("read-only"), "{err}");
    assert!(!evil.exists(), "a query wrote {}", evil.display());
    assert_eq!(snapshot(&dir), before, "the profile's folder changed");
}

#[test]
fn errors_say_where_and_what_to_do() {
    let cpu = fixture("cpu-clean");
    let err = assert_clean_error(&["sql", "SELECT *\n  FORM steps", s(&cpu)]);
    assert!(err.contains("line 2, column 3") && err.contains("near \"FORM\""), "{err}");
    let err = assert_clean_error(&["sql", "SELECT nosuch FROM steps", s(&cpu)]);
    assert!(err.contains("no such column: nosuch") && err.contains("steps: step_num, name"), "{err}");
    let err = assert_clean_error(&["sql", "SELECT * FROM stepz", s(&cpu)]);
    assert!(err.contains("no such table: stepz") && err.contains("runs, steps, ops, op_events"), "{err}");
    // A table these profiles have no rows of (a CPU run has no GPU kernels).
    let err = assert_clean_error(&["sql", "SELECT * FROM kernels", s(&cpu)]);
    assert!(err.contains("no rows of kernels"), "{err}");
    let err = assert_clean_error(&["sql", "  ", s(&cpu)]);
    assert!(err.contains("empty"), "{err}");
    let err = assert_clean_error(&["sql", "SELECT 1", "/nonexistent/logs"]);
    assert!(err.contains("/nonexistent/logs"), "{err}");

    // A folder of another schema's tables, named as such.
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("stepscope_tables.json"), r#"{"schema": "stepscope.tables/9"}"#).unwrap();
    let err = assert_clean_error(&["sql", "SELECT * FROM steps", s(tmp.path())]);
    assert!(err.contains("stepscope.tables/9") && err.contains("write them again"), "{err}");
    // A damaged Parquet file is named, not a crash.
    let table = tmp.path().join("t");
    ok(&["tables", s(&cpu), "-o", s(&table)]);
    let part = std::fs::read_dir(table.join("steps")).unwrap().next().unwrap().unwrap().path();
    let file = std::fs::read_dir(&part).unwrap().next().unwrap().unwrap().path().join("part-0.parquet");
    let bytes = std::fs::read(&file).unwrap();
    std::fs::write(&file, &bytes[bytes.len() / 2..]).unwrap();
    let out = stepscope(&["sql", "SELECT count(*) FROM steps", s(&table)]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("part-0.parquet") && err.contains("stepscope tables"), "{err}");
}

#[test]
fn a_query_past_its_time_limit_is_stopped() {
    let started = Instant::now();
    let q = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c";
    let err = assert_clean_error(&["sql", q, s(&fixture("cpu-clean")), "--timeout", "1"]);
    assert!(err.contains("limit of 1 s"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(60), "{:?}", started.elapsed());
}

#[test]
fn the_web_api_answers_as_the_cli() {
    use crate::server::serve;
    let tmp = tempfile::tempdir().unwrap();
    let logs = three_runs(tmp.path());
    let s_ = serve(&logs, &[]);
    let enc = |q: &str| -> String {
        q.bytes()
            .map(|b| if b.is_ascii_alphanumeric() { (b as char).to_string() } else { format!("%{b:02X}") })
            .collect()
    };
    let q = "SELECT run, host, module, name, self_ps FROM ops ORDER BY run, host, self_ps DESC, name";
    let api = s_.api(&format!("sql?q={}", enc(q)));
    let cli = json(&["sql", q, s(&logs)]);
    assert_eq!(api, cli);
    // One run; rows cut where asked.
    let run = cli["rows"][0][0].as_str().unwrap();
    let one = s_.api(&format!("sql?q={}&run={}&rows=3", enc(q), enc(run)));
    assert_eq!(one["rows"].as_array().unwrap(), &cli["rows"].as_array().unwrap()[..3]);
    assert_eq!(one["rows_cut"], true);
    // Read-only, and errors are one line with the status of a bad request.
    let r = s_.get(&format!("api/sql?q={}", enc("DELETE FROM steps")));
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(r.json()["error"].as_str().unwrap().contains("read-only"));
    let r = s_.get(&format!("api/sql?q={}&run=nope", enc("SELECT 1")));
    assert_eq!(r.status, 404, "{}", r.text());
    let r = s_.get("api/sql");
    assert_eq!(r.status, 400, "{}", r.text());
}

/// The server's peak resident memory so far (`VmHWM`).
fn peak_rss_bytes(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap() * 1024
}

#[test]
fn the_web_api_streams_its_answers_and_bounds_them() {
    use crate::server::serve;
    let s_ = serve(&fixture("cpu-clean"), &[]);
    let enc = |q: &str| -> String {
        q.bytes()
            .map(|b| if b.is_ascii_alphanumeric() { (b as char).to_string() } else { format!("%{b:02X}") })
            .collect()
    };
    let rows = |blob: usize| {
        format!(
            "WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 10000) \
             SELECT i, hex(zeroblob({blob})) AS x FROM c"
        )
    };
    assert_eq!(s_.api(&format!("sql?q={}", enc(&rows(10))))["row_count"], 10_000);
    let before = peak_rss_bytes(s_.child.id());
    // 10,000 rows of 3 KB (30 MB): sent as they come, never held whole.
    let r = s_.get(&format!("api/sql?q={}", enc(&rows(1500))));
    assert_eq!(r.status, 200);
    let v = r.json();
    assert_eq!((v["row_count"].as_u64(), v["rows_cut"].as_bool()), (Some(10_000), Some(false)));
    assert!(r.text().len() > 30_000_000, "{} bytes", r.text().len());
    let grew = peak_rss_bytes(s_.child.id()).saturating_sub(before);
    assert!(grew < 16 << 20, "a 30 MB answer took the server {} MiB more", grew >> 20);
    // 10,000 rows of 10 KB: cut at 32 MiB, whole rows only.
    let r = s_.get(&format!("api/sql?q={}", enc(&rows(5000))));
    let v = r.json();
    assert_eq!(v["rows_cut"], true);
    assert!(r.text().len() <= (32 << 20) + 64, "{} bytes", r.text().len());
    assert_eq!(v["rows"].as_array().unwrap().len() as u64, v["row_count"].as_u64().unwrap());
}
