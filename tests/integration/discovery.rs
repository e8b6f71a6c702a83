//! Finding runs: files, run folders, log directories at any depth; never writing.

use crate::util::*;

#[test]
fn a_logdir_reads_its_newest_run_and_prefers_the_xplane() {
    let logdir = fixture("cpu-transformer");
    let v = json(&["info", logdir.to_str().unwrap()]);
    assert_eq!(v["run"], "plugins/profile/2026_11_21_22_29_17");
    let host = &v["hosts"][0];
    assert_eq!(host["format"], "xspace");
    assert_eq!(host["host"], "vm");
}

#[test]
fn runs_are_found_at_any_depth_and_picked_by_name() {
    let tmp = tempfile::tempdir().unwrap();
    let deep = tmp.path().join("exp/a/b");
    copy_tree(&fixture("cpu-transformer"), &deep.join("t"));
    copy_tree(&fixture("cpu-compile"), &deep.join("c"));
    let listing = json(&["ls", tmp.path().to_str().unwrap()]);
    let runs: Vec<&str> = listing["runs"].as_array().unwrap().iter().map(|r| r["run"].as_str().unwrap()).collect();
    assert_eq!(runs.len(), 2, "{listing}");
    assert!(runs.contains(&"exp/a/b/c/plugins/profile/2026_11_21_22_29_21"), "{runs:?}");
    let v = json(&["info", tmp.path().to_str().unwrap(), "--run", "2026_11_21_22_29_21"]);
    assert_eq!(
        v["events_total"],
        reference(&["info", fixture("cpu-compile/plugins/profile/2026_11_21_22_29_21/vm.xplane.pb").to_str().unwrap()])
            ["events_total"]
    );
    let err = assert_clean_error(&["info", tmp.path().to_str().unwrap(), "--run", "nope"]);
    assert!(err.contains("2026_11_21_22_29_17"), "names the runs there: {err}");
}

#[test]
fn several_xplanes_in_a_run_are_several_hosts() {
    let tmp = tempfile::tempdir().unwrap();
    let run = tmp.path().join("plugins/profile/2026_01_01_00_00_00");
    std::fs::create_dir_all(&run).unwrap();
    std::fs::copy(fixture("tpu-v6e-inference/tpu_inference_2.xplane.pb"), run.join("hostA.xplane.pb")).unwrap();
    std::fs::copy(fixture("rocm-mi300x-gemm/tw003.xplane.pb"), run.join("hostB.xplane.pb")).unwrap();
    let v = json(&["info", tmp.path().to_str().unwrap()]);
    let hosts: Vec<&str> = v["hosts"].as_array().unwrap().iter().map(|h| h["host"].as_str().unwrap()).collect();
    assert_eq!(hosts, ["hostA", "hostB"]);
    assert_eq!(v["events_total"], 26_723 + 3_782);
    let ls = ok(&["ls", tmp.path().to_str().unwrap()]);
    assert!(ls.contains("2026_01_01_00_00_00"), "{ls}");
}

#[test]
fn a_run_with_only_trace_json_reads_the_json() {
    let tmp = tempfile::tempdir().unwrap();
    let run = tmp.path().join("plugins/profile/r1");
    std::fs::create_dir_all(&run).unwrap();
    let src = fixture("cpu-transformer/plugins/profile/2026_11_21_22_29_17");
    std::fs::copy(src.join("vm.trace.json.gz"), run.join("vm.trace.json.gz")).unwrap();
    std::fs::copy(src.join("perfetto_trace.json.gz"), run.join("perfetto_trace.json.gz")).unwrap();
    let v = json(&["info", run.to_str().unwrap()]);
    assert_eq!(v["hosts"].as_array().unwrap().len(), 1, "the per-host trace wins over perfetto_trace");
    assert_eq!(v["hosts"][0]["format"], "trace_json");
    assert_eq!(v["events_total"], reference(&["info", run.join("vm.trace.json.gz").to_str().unwrap()])["events_total"]);
}

#[test]
fn reading_never_writes_into_the_profile_folder() {
    let tmp = tempfile::tempdir().unwrap();
    copy_tree(&fixture("cpu-transformer"), tmp.path());
    let before = snapshot(tmp.path());
    ok(&["ls", tmp.path().to_str().unwrap()]);
    ok(&["info", tmp.path().to_str().unwrap()]);
    json(&["info", tmp.path().to_str().unwrap()]);
    assert_eq!(before, snapshot(tmp.path()));
}

#[test]
fn a_json_file_that_is_not_a_trace_is_skipped_with_a_note() {
    let tmp = tempfile::tempdir().unwrap();
    crate::util::copy_tree(&crate::util::fixture("cpu-transformer"), tmp.path());
    // The user's own JSON beside the profiles: at the log directory's root and in the run.
    std::fs::write(tmp.path().join("wall.json"), r#"{"wall_s": 12.5, "steps": 100}"#).unwrap();
    let run = tmp.path().join("plugins/profile/2026_11_21_22_29_17");
    std::fs::write(run.join("config.json"), r#"{"lr": 0.001}"#).unwrap();
    let out = crate::util::stepscope(&["summary", tmp.path().to_str().unwrap(), "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let notes = String::from_utf8_lossy(&out.stderr);
    assert_eq!(notes.lines().count(), 2, "{notes}");
    assert!(notes.lines().all(|l| l.starts_with("stepscope: note: skipped ") && l.contains("not a trace")), "{notes}");
    let mut ours: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut theirs = crate::util::json(&["summary", crate::util::fixture("cpu-transformer").to_str().unwrap()]);
    ours["run"] = serde_json::Value::Null;
    theirs["run"] = serde_json::Value::Null;
    assert_eq!(ours, theirs);
}

#[test]
fn json_arrays_that_are_not_trace_events_never_make_a_run() {
    // XProf's exported tool data, or a script's results, saved in a folder of the log
    // directory after the capture (so newer): JSON arrays, but of no trace events. The
    // capture stays the run; the folder is never one.
    let tmp = tempfile::tempdir().unwrap();
    copy_tree(&fixture("cpu-transformer"), tmp.path());
    let export = tmp.path().join("xprof_export");
    std::fs::create_dir_all(&export).unwrap();
    std::fs::write(export.join("results.json"), r#"[{"cols":[1]}]"#).unwrap();
    std::fs::write(export.join("overview_page.json"), r#"[{"cols":[{"id":"a"}],"rows":[]}, {"p":{}}]"#).unwrap();
    let dir = tmp.path().to_str().unwrap();
    let listing = json(&["ls", dir]);
    let runs: Vec<&str> = listing["runs"].as_array().unwrap().iter().map(|r| r["run"].as_str().unwrap()).collect();
    assert_eq!(runs, ["plugins/profile/2026_11_21_22_29_17"], "{listing}");
    let s = json(&["summary", dir]);
    let want = reference(&[
        "steps",
        fixture("cpu-transformer/plugins/profile/2026_11_21_22_29_17/vm.xplane.pb").to_str().unwrap(),
    ]);
    assert_eq!(s["step_count"].as_u64(), Some(want.as_array().unwrap().len() as u64), "{s}");
}

#[test]
fn a_memory_profile_saved_in_the_log_directory_is_found() {
    // Guide 000 saves its device-memory profile with the log directory, not in the run
    // folder: the run takes the nearest one above it, and reads it as the file itself.
    let tmp = tempfile::tempdir().unwrap();
    copy_tree(&fixture("cpu-transformer"), tmp.path());
    let run = tmp.path().join("plugins/profile/2026_11_21_22_29_17");
    std::fs::rename(run.join("memory.prof"), tmp.path().join("memory.prof")).unwrap();
    let dir = tmp.path().to_str().unwrap();
    let theirs = reference(&["pprof", tmp.path().join("memory.prof").to_str().unwrap()]);
    let m = json(&["memory", dir]);
    let p = &m["device_memory_profile"];
    assert_eq!((&p["total_bytes"], &p["buffer_count"]), (&theirs["total_bytes"], &theirs["buffer_count"]), "{m}");
    assert!(p["path"].as_str().unwrap().ends_with("memory.prof"), "{p}");
    // None anywhere: the text says where it looked and how to make one.
    std::fs::remove_file(tmp.path().join("memory.prof")).unwrap();
    let text = ok(&["memory", dir]);
    assert!(text.contains("no device-memory profile") && text.contains(run.to_str().unwrap()), "{text}");
    assert!(text.contains("save_device_memory_profile"), "{text}");
}

/// `ls` counts each run's steps as `steps` finds them (issue 48: every run without a
/// stepscope manifest showed "—", every `jax.profiler.trace` capture among them):
/// annotated steps as the reference reader counts them, module runs, a TPU's own.
#[test]
fn ls_counts_the_steps_of_runs_without_a_manifest() {
    let root = fixture("").to_str().unwrap().to_string();
    let listing = json(&["ls", &root]);
    let runs = listing["runs"].as_array().unwrap();
    let steps_of = |name: &str| {
        let r = runs.iter().find(|r| r["run"].as_str().unwrap().starts_with(name)).unwrap();
        assert!(r.get("manifest").is_none(), "{r}");
        r["steps"].as_u64().unwrap()
    };
    for name in ["cpu-sync", "gpu-nosync", "cpu-guide-adam"] {
        let want = reference(&["steps", &xplane(name)]).as_array().unwrap().len() as u64;
        assert!(want > 0);
        assert_eq!(steps_of(name), want, "{name}");
    }
    for name in ["gpu-unannotated", "tpu-v6e-inference"] {
        let f = fixture(name);
        let want = json(&["steps", f.to_str().unwrap()])["steps"].as_array().unwrap().len() as u64;
        assert!(want > 0);
        assert_eq!(steps_of(name), want, "{name}");
    }
    let text = ok(&["ls", &root]);
    let run = runs.iter().find(|r| r["run"].as_str().unwrap().starts_with("cpu-sync/")).unwrap();
    let line = text.lines().find(|l| l.ends_with(run["run"].as_str().unwrap())).unwrap();
    let shown = steps_of("cpu-sync").to_string();
    assert!(line.split_whitespace().any(|w| w == shown), "{line}");
}

/// `--host` reads that host alone, and its times are those of the whole run's read:
/// the hosts' clocks are aligned by their session starts, peeked at in the other
/// hosts' files without decoding them.
#[test]
fn a_host_read_alone_keeps_its_place_on_the_runs_clock() {
    let tmp = tempfile::tempdir().unwrap();
    let run = tmp.path().join("plugins/profile/2026_11_01_00_00_00");
    std::fs::create_dir_all(&run).unwrap();
    // Three captures started minutes apart, as the hosts of one run.
    let files = [("a", "cpu-clean"), ("b", "cpu-slow"), ("c", "cpu-dp4")];
    for (host, fixture_dir) in files {
        std::fs::copy(xplane(fixture_dir), run.join(format!("{host}.xplane.pb"))).unwrap();
    }
    let dir = tmp.path().to_str().unwrap();
    let all = crate::util::json(&["steps", dir]);
    let rows = |v: &serde_json::Value, host: &str| -> Vec<(i64, i64, i64)> {
        (v["steps"].as_array().unwrap().iter())
            .filter(|s| s["host"] == host)
            .map(|s| {
                (
                    s["start_ps"].as_i64().unwrap(),
                    s["duration_ps"].as_i64().unwrap(),
                    s["device_busy_ps"].as_i64().unwrap(),
                )
            })
            .collect()
    };
    let mut shifted = 0;
    for (host, fixture_dir) in files {
        let alone = crate::util::json(&["steps", dir, "--host", host]);
        assert!(!rows(&alone, host).is_empty(), "{host}");
        assert_eq!(rows(&alone, host), rows(&all, host), "{host}: steps --host against the whole run's");
        let own = crate::util::json(&["steps", &fixture(fixture_dir).display().to_string()]);
        let (first_here, first_own) = (rows(&alone, host)[0].0, rows(&own, "vm")[0].0);
        shifted += usize::from(first_here != first_own);
    }
    // Two of the three hosts started after the first, so their times moved.
    assert_eq!(shifted, 2);
    // The web UI's host picker: each host alone on the run's clock, as `--host` has it,
    // the second time from the offsets the server found the first.
    let server = crate::server::serve(tmp.path(), &[]);
    for _ in 0..2 {
        for (host, _) in files {
            assert_eq!(
                server.api(&format!("steps?host={host}")),
                crate::util::json(&["steps", dir, "--host", host, "--critical-path"]),
                "{host}"
            );
        }
    }
    let ops_all = crate::util::json(&["ops", dir, "--top", "0", "--host", "b"]);
    let ops_b = crate::util::json(&["ops", &fixture("cpu-slow").display().to_string(), "--top", "0"]);
    assert_eq!(ops_all["ops"], ops_b["ops"], "an op's times do not depend on the clock");
}

/// A run whose hosts do not fit in memory together: every analysis reads it a host at
/// a time, as it reads any run of several hosts, within a limit (`STEPSCOPE_MEMORY_LIMIT`
/// 40 MB, where what the process holds and the hosts decoded together come to about
/// 100 MB) and with the answer it gives without one; `export` of the whole run, which
/// reads the hosts together, is refused before it is read (under 10 MB, below the
/// files' bytes), with one line that says what to do. The run: 12 copies of the CPU
/// transformer's file (1.1 MB each).
#[test]
fn a_run_that_does_not_fit_in_memory_is_read_a_host_at_a_time_within_the_limit() {
    let tmp = tempfile::tempdir().unwrap();
    let names: Vec<String> = (0..12).map(|h| format!("h{h}")).collect();
    let hosts: Vec<(&str, &str)> = names.iter().map(|h| (h.as_str(), "cpu-transformer")).collect();
    crate::util::run_of_fixtures(tmp.path(), "2026_11_01_00_00_00", &hosts);
    let total = 12 * std::fs::metadata(xplane("cpu-transformer")).unwrap().len();
    assert!(total > 12_000_000);
    let dir = tmp.path().to_str().unwrap();
    let (transformer, clean) = (fixture("cpu-transformer"), fixture("cpu-clean"));
    let (transformer, clean) = (transformer.to_str().unwrap(), clean.to_str().unwrap());
    let with_limit = |limit: &str, args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_stepscope"))
            .args(args)
            .env("STEPSCOPE_MEMORY_LIMIT", limit)
            .output()
            .unwrap()
    };
    let one_line_error = |out: &std::process::Output| {
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(out.stdout.is_empty());
        err
    };
    let out_file = tmp.path().join("pod.pftrace");
    let err = one_line_error(&with_limit("10MB", &["export", dir, "-o", out_file.to_str().unwrap()]));
    assert!(!out_file.exists(), "nothing written");
    assert_eq!(
        err.split(" — ").next().unwrap(),
        format!(
            "stepscope: reading the run's 12 hosts together needs about {} MB, and STEPSCOPE_MEMORY_LIMIT is 10 MB",
            total.div_ceil(1_000_000)
        )
    );
    assert!(err.contains("--host HOST") && err.contains("STEPSCOPE_MEMORY_LIMIT=none"), "{err}");
    // Every analysis, text, JSON and CSV: the answer without the limit, without a note.
    for args in [
        &["summary", dir, "--json"][..],
        &["summary", dir],
        &["advise", dir, "--json"],
        &["info", dir, "--json"],
        &["collectives", dir, "--json"],
        &["kernels", dir, "--json"],
        &["roofline", dir, "--csv"],
        &["memory", dir, "--json"],
        &["scopes", dir, "--csv"],
        &["compile", dir, "--json"],
        &["ops", dir, "--json", "--by", "module"],
        &["steps", dir, "--csv"],
        &["devices", dir, "--json"],
        &["check", dir, "--max-step-ms", "1000", "--json"],
        &["diff", transformer, dir, "--json"],
        &["compare", dir, clean, "--by", "scope", "--json"],
        &["history", dir, "--json"],
        &["buffers", dir, "--json", "--top", "all"],
        &["hlo", dir, "dot.31", "--json"],
        &["hlo", dir, "ynn_fusion.47", "--graph"],
        &["buffers", dir, "--program", "jit_train_step", "--csv"],
        &["summary", dir, "--per-host", "--json"],
        &["steps", dir, "--host", "h7", "--json"],
    ] {
        let out = with_limit("40MB", args);
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(String::from_utf8_lossy(&out.stderr), "", "{args:?}");
        assert!(out.stdout == stepscope(args).stdout, "{args:?}: answers differ");
    }
    // The numbers of the run read together.
    let by_host: serde_json::Value =
        serde_json::from_slice(&with_limit("40MB", &["summary", dir, "--json"]).stdout).unwrap();
    assert_eq!(read_whole(by_host.clone()), json(&[TOGETHER, "summary", dir]));
    assert_eq!(by_host["environment"]["hosts"].as_array().unwrap().len(), 12);
    // `none` reads them together where asked.
    let together = |limit: &str| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_stepscope"))
            .args(["summary", dir, "--json"])
            .env("STEPSCOPE_MEMORY_LIMIT", limit)
            .env("STEPSCOPE_READ_TOGETHER", "1")
            .output()
            .unwrap();
        (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned(), out.stdout)
    };
    let (code, err, out) = together("none");
    assert_eq!((code, err.as_str()), (Some(0), ""));
    assert_eq!(serde_json::from_slice::<serde_json::Value>(&out).unwrap(), json(&[TOGETHER, "summary", dir]));
    // One host that does not fit: alone, and as the first of a run read a host at a
    // time (the command fails: a host left out for want of memory would change the
    // answer without a word); a limit that is no amount.
    let err = one_line_error(&with_limit("1kB", &["steps", dir, "--host", "h1"]));
    assert!(
        err.starts_with("stepscope: reading host h1 needs about 2 MB, and STEPSCOPE_MEMORY_LIMIT is 1 MB"),
        "{err}"
    );
    let err = one_line_error(&with_limit("1kB", &["summary", dir]));
    assert!(
        err.starts_with("stepscope: reading host h0 needs about 2 MB, and STEPSCOPE_MEMORY_LIMIT is 1 MB"),
        "{err}"
    );
    let err = one_line_error(&with_limit("lots", &["summary", dir]));
    assert!(err.contains("STEPSCOPE_MEMORY_LIMIT=\"lots\" is not an amount of memory — give bytes"), "{err}");
}

/// #73's guard: a run of 8 hosts (copies of a CPU capture, and of the largest GPU
/// capture) under a `STEPSCOPE_MEMORY_LIMIT` between what one host alone takes and
/// what the run takes without a limit: the process's peak resident memory stays under
/// the limit, the limit binds (the peak is below the run's without it), and the answer
/// is the one without it. What a host takes is measured on the first host read and
/// summed up (the fold's own work on it included), so the hosts read at once fit.
#[test]
fn a_runs_peak_memory_stays_under_the_limit_it_was_given() {
    let peak = |dir: &std::path::Path, limit: &str, args: &[&str]| {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_stepscope"));
        cmd.args(args).env("STEPSCOPE_MEMORY_LIMIT", limit);
        let o = run_limited(cmd, dir, std::time::Duration::from_secs(120));
        assert_eq!(o.code, Some(0), "{args:?} under {limit}: {}", o.stderr);
        (o.max_rss_bytes, std::fs::read(dir.join("stdout")).unwrap())
    };
    for fx in ["cpu-transformer", "gpu-compile"] {
        let tmp = tempfile::tempdir().unwrap();
        let names: Vec<String> = (0..8).map(|h| format!("h{h}")).collect();
        let hosts: Vec<(&str, &str)> = names.iter().map(|h| (h.as_str(), fx)).collect();
        let run = crate::util::run_of_fixtures(tmp.path(), "2026_11_01_00_00_00", &hosts);
        let out = tempfile::tempdir().unwrap();
        let one = run.join("h0.xplane.pb");
        let (alone, _) = peak(out.path(), "none", &["summary", one.to_str().unwrap(), "--json"]);
        let dir = tmp.path().to_str().unwrap();
        let (free, answer) = peak(out.path(), "none", &["summary", dir, "--json"]);
        let limit = alone + (free - alone) * 4 / 5;
        let (held, limited) = peak(out.path(), &limit.to_string(), &["summary", dir, "--json"]);
        eprintln!("{fx} × 8: one host {alone} B, the run {free} B, under {limit} B: {held} B");
        assert!(held <= limit, "{fx}: {held} B under a limit of {limit} B");
        assert!(held < free, "{fx}: the limit did not bind ({held} B, {free} B without it)");
        assert!(limited == answer, "{fx}: the answer under the limit differs");
    }
}

/// A summary read a host at a time, less what says so: the summary of the run read
/// whole, where the fold is right.
fn read_whole(mut s: serde_json::Value) -> serde_json::Value {
    let o = s.as_object_mut().unwrap();
    assert_eq!(o.remove("read_a_host_at_a_time"), Some(serde_json::Value::Bool(true)));
    s
}

/// `summary --host-at-a-time` reads one host at a time and gives the numbers of the run
/// read whole (every other analysis with `--host-at-a-time` its rows, `buffers` its
/// plan, `diff`, `compare` and `history` theirs), in runs whose hosts decide
/// differently alone: one host's steps are not annotated (the run's are: it has none),
/// one host dispatches ahead and two do not (the run's vote), hosts ran different
/// programs under one id, hosts of three backends. Each host alone decides otherwise
/// than the run, so the run's decisions were taken over: the summaries of those hosts
/// alone differ from their share.
#[test]
fn a_run_read_a_host_at_a_time_has_the_numbers_of_the_run_read_whole() {
    let mixes: [&[&str]; 11] = [
        &["gpu-sync", "gpu-nosync", "gpu-unannotated"],
        &["gpu-nosync", "gpu-nosync-cut", "gpu-sync"],
        &["cpu-clean", "cpu-slow", "cpu-dp4"],
        &["tpu-v6e-inference", "cpu-transformer", "rocm-mi300x-conv-2gpu"],
        &["gpu-programs", "gpu-transformer", "gpu-cudnn-attention", "gpu-scan"],
        &["gpu-bf16", "gpu-nocb", "gpu-async"],
        &["gpu-compile", "cpu-compile", "cpu-device-put"],
        &["rocm-mi300x-gemm", "rocm-mi300x-conv-2gpu"],
        &["cpu-host-tracer-off", "cpu-jax0431"],
        &["cpu-device-put", "cpu-nosync", "cpu-sync"],
        &["cpu-callback", "cpu-stale-state", "cpu-oneoff"],
    ];
    // Every rule at its hair trigger, so that each cites its evidence.
    let th = tempfile::tempdir().unwrap();
    let hair_trigger = &hair_trigger(th.path());
    let (mut differed_alone, mut judged) = (Vec::new(), std::collections::BTreeSet::new());
    for mix in mixes {
        let tmp = tempfile::tempdir().unwrap();
        let names: Vec<String> = (0..mix.len()).map(|i| format!("h{i}")).collect();
        let hosts: Vec<(&str, &str)> = names.iter().map(String::as_str).zip(mix.iter().copied()).collect();
        run_of_fixtures(tmp.path(), "2026_11_01_00_00_00", &hosts);
        let dir = tmp.path().to_str().unwrap();
        let whole = json(&[TOGETHER, "summary", dir]);
        // The default: a run of several hosts is read a host at a time.
        assert_eq!(json(&["summary", dir]), json(&["summary", dir, "--host-at-a-time"]), "{mix:?}");
        // The summary whole, its findings too.
        assert_eq!(read_whole(json(&["summary", dir, "--host-at-a-time"])), whole, "{mix:?}");
        for th in [&[][..], &["--thresholds", hair_trigger][..]] {
            let advise = |more: &[&str]| ok(&[&["advise", dir, "--json"][..], th, more].concat());
            let by_host = advise(&["--host-at-a-time"]);
            let whole = ok(&[&[TOGETHER, "advise", dir, "--json"][..], th].concat());
            assert_eq!(by_host, whole, "{mix:?} {th:?}");
            let by_host: serde_json::Value = serde_json::from_str(&by_host).unwrap();
            judged.extend(
                by_host["findings"].as_array().unwrap().iter().map(|f| f["rule"].as_str().unwrap().to_string()),
            );
        }
        if whole["step_count"] == 0 {
            continue;
        }
        // Every row of the op profile, by op; on CPU and GPU hosts, in every grouping.
        let groupings: &[&str] = if mix.len() == 4 || ["cpu-clean", "cpu-device-put"].contains(&mix[0]) {
            &["op", "category", "module", "scope", "line", "stack"]
        } else {
            &["op"]
        };
        for by in groupings {
            let ops = |more: &[&str]| ok(&[more, &["ops", dir, "--by", by, "--top", "0", "--json"][..]].concat());
            assert_eq!(ops(&[]), ops(&[TOGETHER]), "{mix:?} by {by}");
        }
        for command in ["steps", "devices", "collectives", "scopes", "compile", "kernels", "roofline", "memory"] {
            let by_host = ok(&[command, dir, "--json", "--host-at-a-time"]);
            assert_eq!(by_host, ok(&[TOGETHER, command, dir, "--json"]), "{mix:?} {command}");
        }
        // A program's memory plan: the program the run read whole would choose (or
        // the same error), from the host that holds it; an op's HLO (its context and
        // graph, beside the run's op profile), the run's top op and one no host holds.
        let ops = json(&["ops", dir, "--top", "1"]);
        let top_op = ops["ops"][0]["name"].as_str().unwrap_or("dot.1").to_string();
        for args in [
            &["buffers", dir, "--json", "--top", "0"][..],
            &["hlo", dir, &top_op, "--json"],
            &["hlo", dir, &top_op, "--graph", "--json"],
            &["hlo", dir, "no.such.op"],
        ] {
            let (whole, by_host) = (stepscope(&[&[TOGETHER], args].concat()), stepscope(args));
            assert_eq!(
                (by_host.status.code(), &by_host.stdout),
                (whole.status.code(), &whole.stdout),
                "{mix:?} {args:?}"
            );
            assert_eq!(by_host.stderr, whole.stderr, "{mix:?} {args:?}");
        }
        // `diff`, `compare` and `history` read each run as `summary` does, both ways.
        let other = fixture(if mix[0].starts_with("gpu") { "gpu-nocb" } else { "cpu-clean" });
        let other = other.to_str().unwrap();
        for args in [
            &["diff", dir, other, "--top", "0"][..],
            &["diff", other, dir, "--by", "line"],
            &["compare", other, dir, "--by", "scope"],
        ] {
            let by_host = ok(&[args, &["--json", "--host-at-a-time"]].concat());
            assert_eq!(by_host, ok(&[&[TOGETHER], args, &["--json"]].concat()), "{mix:?} {args:?}");
        }
        for host in &names {
            let alone = json(&["summary", dir, "--host", host]);
            if alone["step_source"] != whole["step_source"] || alone["step_timing"] != whole["step_timing"] {
                differed_alone.push(format!("{mix:?} {host}"));
            }
        }
        // A later run of fewer hosts beside it: the history of the two.
        run_of_fixtures(tmp.path(), "2026_11_02_00_00_00", &hosts[..hosts.len() - 1]);
        let history = |more: &[&str]| ok(&[more, &["history", dir, "--json"][..]].concat());
        assert_eq!(history(&[]), history(&[TOGETHER]), "{mix:?} history");
    }
    // The unannotated host (its module's runs alone), and the two hosts that wait for
    // their steps beside one that dispatches ahead.
    assert!(
        differed_alone.contains(&r#"["gpu-sync", "gpu-nosync", "gpu-unannotated"] h2"#.to_string()),
        "{differed_alone:?}"
    );
    assert!(
        differed_alone.iter().any(|d| d.starts_with(r#"["gpu-nosync", "gpu-nosync-cut", "gpu-sync"]"#)),
        "{differed_alone:?}"
    );
    // Every rule judged a run read a host at a time; `truncated` (no fixture is) has
    // the facts of a run read whole.
    let rules = crate::util::root().join("crates/judge/src/rules");
    let every: std::collections::BTreeSet<String> = (std::fs::read_dir(rules).unwrap())
        .map(|f| f.unwrap().file_name().to_string_lossy().trim_end_matches(".rs").replace('_', "-"))
        .filter(|id| id != "mod")
        .collect();
    let not_judged: Vec<&String> = every.difference(&judged).collect();
    assert_eq!(not_judged, ["truncated"], "{judged:?}");
}

/// A run read a host at a time leaves out a host whose file is cut short, as the run
/// read whole does, and says so; where no host can be read, the first one's error.
#[test]
fn a_run_read_a_host_at_a_time_leaves_out_a_host_it_cannot_read() {
    let tmp = tempfile::tempdir().unwrap();
    let run = run_of_fixtures(tmp.path(), "2026_11_01_00_00_00", &THREE_CPU_HOSTS);
    let dir = tmp.path().to_str().unwrap();
    let cut = run.join("b.xplane.pb");
    let whole = std::fs::read(&cut).unwrap();
    std::fs::write(&cut, &whole[..whole.len() / 3]).unwrap();
    let by_host = stepscope(&["summary", dir, "--json", "--host-at-a-time"]);
    assert!(by_host.status.success());
    let note = String::from_utf8_lossy(&by_host.stderr);
    assert!(note.contains("stepscope: note: host b was not read ("), "{note}");
    let by_host: serde_json::Value = serde_json::from_slice(&by_host.stdout).unwrap();
    assert_eq!(by_host["hosts_unread"][0]["host"], "b");
    assert_eq!(by_host["environment"]["hosts"], serde_json::json!(["a", "c"]));
    assert_eq!(read_whole(by_host), json(&[TOGETHER, "summary", dir]));
    assert_eq!(ok(&["info", dir, "--json"]), ok(&[TOGETHER, "info", dir, "--json"]));
    for host in ["a", "c"] {
        std::fs::write(run.join(format!("{host}.xplane.pb")), &whole[..whole.len() / 3]).unwrap();
    }
    let out = stepscope(&["steps", dir, "--host-at-a-time"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("a.xplane.pb is not a readable profile: the file ends early"), "{err}");
    assert_eq!(err, String::from_utf8_lossy(&stepscope(&[TOGETHER, "steps", dir]).stderr));
    assert!(out.stdout.is_empty());
}

/// `summary --per-host`: a row per host, each exactly `summary --host HOST`, and the
/// spread of the hosts' median steps named by its slowest host.
#[test]
fn summary_per_host_is_each_hosts_own_summary() {
    let tmp = tempfile::tempdir().unwrap();
    let run = crate::util::run_of_fixtures(tmp.path(), "2026_11_01_00_00_00", &crate::util::THREE_CPU_HOSTS);
    let dir = tmp.path().to_str().unwrap();
    let all = crate::util::json(&["summary", dir, "--per-host"]);
    assert_eq!(all["schema"], "stepscope.summary_hosts/1");
    let rows = all["hosts"].as_array().unwrap();
    assert_eq!(rows.iter().map(|r| r["host"].as_str().unwrap()).collect::<Vec<_>>(), ["a", "b", "c"]);
    let mut medians = Vec::new();
    for r in rows {
        let host = r["host"].as_str().unwrap();
        let alone = crate::util::json(&["summary", dir, "--host", host]);
        assert_eq!(r["summary"], alone, "{host}");
        let ranked = alone.get("warm_step_time").filter(|w| !w.is_null()).unwrap_or(&alone["step_time"]);
        medians.push((ranked["median_ps"].as_i64().unwrap(), host.to_string()));
    }
    medians.sort();
    let (mid, (slowest_ps, slowest)) = (medians[1].0, medians[2].clone());
    assert_eq!(all["step_median"]["median_ps"], mid);
    assert_eq!(all["slowest_host"], slowest.as_str());
    let excess = all["slowest_excess_pct"].as_f64().unwrap();
    assert!((excess - 100.0 * (slowest_ps - mid) as f64 / mid as f64).abs() < 1e-9);
    // CSV: a line per host.
    let csv = crate::util::ok(&["summary", dir, "--per-host", "--csv"]);
    assert_eq!(csv.lines().count(), 4, "{csv}");
    assert!(csv.starts_with("host,steps,step_median_ps,"));
    // --host and --per-host ask for two things: one line that says so.
    crate::util::assert_clean_error(&["summary", dir, "--per-host", "--host", "a"]);
    // The web UI's pod table: the same answer.
    let server = crate::server::serve(tmp.path(), &[]);
    assert_eq!(server.api("summary/hosts"), all);
    drop(server);
    // A host whose file is cut short: listed as not read, the others summarised.
    let whole = std::fs::read(run.join("b.xplane.pb")).unwrap();
    std::fs::write(run.join("b.xplane.pb"), &whole[..whole.len() / 3]).unwrap();
    let cut = crate::util::json(&["summary", dir, "--per-host"]);
    let hosts: Vec<&str> = cut["hosts"].as_array().unwrap().iter().map(|r| r["host"].as_str().unwrap()).collect();
    assert_eq!(hosts, ["a", "c"]);
    assert_eq!(cut["hosts_unread"][0]["host"], "b", "{cut}");
    assert_eq!(cut["hosts"][0]["summary"], crate::util::json(&["summary", dir, "--host", "a"]));
    let text = crate::util::ok(&["summary", dir, "--per-host"]);
    assert!(text.contains("host b was not read"), "{text}");
    let server = crate::server::serve(tmp.path(), &[]);
    let api = server.api("summary/hosts");
    assert_eq!(api["hosts"], cut["hosts"]);
    assert_eq!(api["hosts_unread"][0]["host"], "b");
}

/// The processes of a pod number their programs each their own way (XLA numbers a
/// process's programs in compile order). In a real three-process run, process 0
/// compiled a metric first, so its train step is another number than the others'; and
/// the last process's norm of a smaller shard is another program under the number
/// process 1 gave its own. The op profile has one row per op of each program, all
/// hosts' executions of it summed: a program is known by its module and program shape
/// (the independent reader's `host_program_shape`), whatever its number. A row names
/// its program by the number of the first host that ran it, or, where an earlier host
/// gave that number to another program, with its host (`jit_local_norm(10) on host2`),
/// which `hlo --module` reads back as that host's program.
#[test]
fn a_pods_op_profile_has_one_row_per_program_whatever_its_hosts_number_it() {
    let dir = fixture("cpu-pod3");
    let run = dir.join("plugins/profile/2026_11_27_14_29_33");
    let files: Vec<String> =
        (0..3).map(|h| run.join(format!("host{h}.xplane.pb")).to_string_lossy().into_owned()).collect();
    let files: Vec<&str> = files.iter().map(String::as_str).collect();
    let hosts = reference(&[&["program-ops"][..], &files].concat());
    let hosts = hosts.as_array().unwrap();
    let shape = |h: &serde_json::Value, number: u64| {
        let p = &h["programs"][number.to_string()];
        format!("{}{}", p["module"].as_str().unwrap(), p["shape"].as_str().unwrap())
    };
    let numbered = |h: &serde_json::Value, module: &str| -> Vec<u64> {
        let ops = h["ops"].as_array().unwrap().iter().filter(|o| o["module"] == module);
        let mut n: Vec<u64> = ops.map(|o| o["program_id"].as_u64().unwrap()).collect();
        n.sort_unstable();
        n.dedup();
        n
    };
    // What makes this capture a test: one program under two numbers, two under one.
    let train: Vec<Vec<u64>> = hosts.iter().map(|h| numbered(h, "jit_train_step")).collect();
    assert!(train.iter().all(|n| n.len() == 1) && train[0] != train[1], "{train:?}");
    assert_eq!(shape(&hosts[0], train[0][0]), shape(&hosts[1], train[1][0]));
    let norm: Vec<Vec<u64>> = hosts.iter().map(|h| numbered(h, "jit_local_norm")).collect();
    assert_eq!(norm[1], norm[2]);
    assert_ne!(shape(&hosts[1], norm[1][0]), shape(&hosts[2], norm[2][0]));
    // The reader's executions per (op, module, program), the program by its shape.
    let mut expected = std::collections::BTreeMap::<(String, String, String), u64>::new();
    for h in hosts {
        for o in h["ops"].as_array().unwrap() {
            let key = (o["name"].to_string(), o["module"].to_string(), shape(h, o["program_id"].as_u64().unwrap()));
            *expected.entry(key).or_default() += o["count"].as_u64().unwrap();
        }
    }
    let dir = dir.to_str().unwrap();
    let ops = json(&["ops", dir, "--top", "0"]);
    let mut rows = std::collections::BTreeMap::<(String, String, String), u64>::new();
    for r in ops["ops"].as_array().unwrap() {
        let (module, number) = (r["module"].as_str().unwrap(), r["program_id"].as_u64().unwrap());
        // The host whose number the row shows: named in its label, else the first
        // that ran the module under that number.
        let named = r["program"].as_str().and_then(|p| p.split_once(" on ")).map(|(_, host)| host);
        let h = match named {
            Some(host) => hosts.iter().find(|h| h["host"] == host).unwrap(),
            None => hosts.iter().find(|h| numbered(h, module).contains(&number)).unwrap(),
        };
        let key = (r["name"].to_string(), r["module"].to_string(), shape(h, number));
        assert!(rows.insert(key, r["count"].as_u64().unwrap()).is_none(), "two rows of one program's op: {r}");
    }
    assert_eq!(rows, expected);
    // By module: one train step, two norms.
    let modules = json(&["ops", dir, "--by", "module"]);
    let names: Vec<&str> = modules["ops"].as_array().unwrap().iter().map(|r| r["name"].as_str().unwrap()).collect();
    let first_norm = format!("jit_local_norm({})", norm[0][0]);
    let apart = format!("jit_local_norm({}) on host2", norm[2][0]);
    assert_eq!(names, ["jit_train_step", &first_norm, &apart]);
    // The same read a host at a time.
    for by in ["op", "module", "line"] {
        let rows = |more: &[&str]| ok(&[more, &["ops", dir, "--by", by, "--top", "0", "--json"][..]].concat());
        assert_eq!(rows(&[]), rows(&[TOGETHER]), "by {by}");
    }
    // Each step's FLOPs are its host's events at their own programs' FLOPs: as the
    // host read alone has them, read whole or a host at a time.
    let peak = ["--peak-flops", "100G", "--json"];
    let steps = |more: &[&str]| ok(&[&["steps", dir][..], &peak, more].concat());
    let together = ok(&[&[TOGETHER, "steps", dir][..], &peak].concat());
    assert_eq!(steps(&[]), together);
    let run: serde_json::Value = serde_json::from_str(&steps(&[])).unwrap();
    for h in ["host0", "host1", "host2"] {
        let alone: serde_json::Value = serde_json::from_str(&steps(&["--host", h])).unwrap();
        let flops = |v: &serde_json::Value| -> Vec<i64> {
            let mine = v["steps"].as_array().unwrap().iter().filter(|s| s["host"] == h);
            mine.map(|s| s["flops"].as_i64().unwrap()).collect()
        };
        assert_eq!(flops(&run), flops(&alone), "{h}");
        assert!(flops(&run).iter().all(|&f| f > 0), "{h}");
    }
    // Each label reads back as its own host's program: the norm's shard of 64 rows, and
    // host2's of 32.
    for (module, host, rows) in [(&first_norm, "host0", 64), (&apart, "host2", 32)] {
        let h = json(&["hlo", dir, "ynn_fusion", "--module", module]);
        assert_eq!(h["host"], host, "{module}");
        assert_eq!(h["operands"][0]["shape"], format!("f32[{rows},256]"), "{module}");
    }
}
