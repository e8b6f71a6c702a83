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
