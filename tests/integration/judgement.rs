//! advise, diff, compare and check on captures made to trigger each rule
//! (tests/fixtures/PROVENANCE.md lists the capture_jax.py knobs of each).

use serde_json::Value;

use crate::util::*;

fn fx(name: &str) -> String {
    fixture(name).to_str().unwrap().to_string()
}

fn rules(path: &str) -> Vec<String> {
    let v = json(&["advise", path]);
    assert_eq!(v["schema"], "stepscope.advise/1");
    v["findings"].as_array().unwrap().iter().map(|f| f["rule"].as_str().unwrap().to_string()).collect()
}

fn finding(path: &str, rule: &str) -> Value {
    let v = json(&["advise", path]);
    v["findings"].as_array().unwrap().iter().find(|f| f["rule"] == rule).cloned().unwrap_or(Value::Null)
}

#[test]
fn each_rule_fires_on_its_trigger_capture_and_not_on_the_clean_one() {
    let clean = rules(&fx("cpu-clean"));
    for (capture, rule) in [
        ("cpu-sleep", "gaps-between-steps"),
        ("cpu-tiny-ops", "many-dispatches"),
        ("cpu-device-put", "host-device-copies"),
        ("cpu-compile", "captured-compilation"),
        ("cpu-dp4", "collectives-exposed"),
    ] {
        let fired = rules(&fx(capture));
        assert!(fired.iter().any(|r| r == rule), "{rule} should fire on {capture}: {fired:?}");
        assert!(!clean.iter().any(|r| r == rule), "{rule} fired on the clean capture: {clean:?}");
    }
    // The clean capture is device-bound: nothing about the host or utilisation.
    for rule in ["host-bound-gaps", "low-utilization", "input-bound", "no-steps", "too-few-steps"] {
        assert!(!clean.iter().any(|r| r == rule), "{rule} fired on the clean capture: {clean:?}");
    }
}

#[test]
fn findings_carry_values_thresholds_evidence_and_advice() {
    let f = finding(&fx("cpu-tiny-ops"), "many-dispatches");
    // 200 tiny jitted calls per step plus the train step: the value counts them.
    assert!(f["value"].as_f64().unwrap() >= 200.0, "{f}");
    assert_eq!(f["threshold"].as_f64().unwrap(), 20.0);
    assert!(f["evidence"][0]["what"].as_str().unwrap().starts_with("jit__lambda"), "{f}");
    assert!(f["advice"].as_str().unwrap().contains("jit"));

    let f = finding(&fx("cpu-sleep"), "gaps-between-steps");
    // Evidence: gaps after steps, each located in the timeline.
    let ev = f["evidence"].as_array().unwrap();
    assert!(!ev.is_empty());
    for e in ev {
        assert!(e["start_ps"].as_i64().is_some() && e["duration_ps"].as_i64().unwrap() > 150_000_000_000, "{e}");
    }
    let steps = json(&["steps", &fx("cpu-sleep")]);
    let s = &steps["steps"].as_array().unwrap();
    let gaps: i64 = s
        .windows(2)
        .map(|w| {
            w[1]["start_ps"].as_i64().unwrap()
                - (w[0]["start_ps"].as_i64().unwrap() + w[0]["duration_ps"].as_i64().unwrap())
        })
        .sum();
    let span = s.last().unwrap()["start_ps"].as_i64().unwrap() + s.last().unwrap()["duration_ps"].as_i64().unwrap()
        - s[0]["start_ps"].as_i64().unwrap();
    let want = 100.0 * gaps as f64 / span as f64;
    assert!((f["value"].as_f64().unwrap() - want).abs() < 1e-6, "{f} vs {want}");

    let f = finding(&fx("cpu-device-put"), "host-device-copies");
    let e = &f["evidence"][0];
    assert!(e["what"].as_str().unwrap().starts_with("host → device transfer"), "{f}");
    let summary = json(&["summary", &fx("cpu-device-put")]);
    let b = &summary["breakdown"];
    let share = 100.0 * b["host_to_device_ps"].as_f64().unwrap() / b["step_ps"].as_f64().unwrap();
    assert!((f["value"].as_f64().unwrap() - share).abs() < 0.01, "{f} vs {share}");
}

#[test]
fn thresholds_come_from_a_toml_file() {
    let dir = tempfile::tempdir().unwrap();
    let toml = dir.path().join("kpi.toml");
    std::fs::write(&toml, "[thresholds]\ndispatches_per_step = 1000\n").unwrap();
    let v = json(&["advise", &fx("cpu-tiny-ops"), "--thresholds", toml.to_str().unwrap()]);
    assert_eq!(v["thresholds"]["dispatches_per_step"], 1000.0);
    assert!(!v["findings"].as_array().unwrap().iter().any(|f| f["rule"] == "many-dispatches"));
    std::fs::write(&toml, "utilisation = 3\n").unwrap();
    let err = assert_clean_error(&["advise", &fx("cpu-tiny-ops"), "--thresholds", toml.to_str().unwrap()]);
    assert!(err.contains("utilisation") && err.contains("advise --json"), "{err}");
}

#[test]
fn summary_shows_the_top_findings() {
    let s = json(&["summary", &fx("cpu-tiny-ops")]);
    let a = json(&["advise", &fx("cpu-tiny-ops")]);
    let top: Vec<&Value> = a["findings"].as_array().unwrap().iter().take(3).collect();
    let shown: Vec<&Value> = s["findings"].as_array().unwrap().iter().collect();
    assert_eq!(shown, top);
    let text = ok(&["summary", &fx("cpu-tiny-ops")]);
    assert!(text.contains("many-dispatches"), "{text}");
}

#[test]
fn diff_ranks_the_grown_layer_first_and_totals_add_up() {
    let (a, b) = (fx("cpu-clean"), fx("cpu-slow"));
    let d = json(&["diff", &a, &b, "--top", "100000"]);
    assert_eq!(d["schema"], "stepscope.diff/1");
    let sa = json(&["summary", &a]);
    let sb = json(&["summary", &b]);
    assert_eq!(d["step_time"]["a_median_ps"], sa["step_time"]["median_ps"]);
    assert_eq!(d["step_time"]["b_median_ps"], sb["step_time"]["median_ps"]);
    assert!(d["step_time"]["delta_ps"].as_i64().unwrap() > 0, "the wider model is slower");
    let ops = d["ops"].as_array().unwrap();
    // Ranked by |effect per step|.
    let eff: Vec<i64> = ops.iter().map(|o| o["delta_per_step_ps"].as_i64().unwrap().abs()).collect();
    assert!(eff.windows(2).all(|w| w[0] >= w[1]));
    // Every op of both runs appears once; totals equal each run's op profile.
    let pa = json(&["ops", &a, "--top", "100000"]);
    let pb = json(&["ops", &b, "--top", "100000"]);
    let sum = |v: &Value, k: &str| -> i64 { v["ops"].as_array().unwrap().iter().map(|o| o[k].as_i64().unwrap()).sum() };
    assert_eq!(sum(&d, "a_total_ps"), sum(&pa, "total_ps"));
    assert_eq!(sum(&d, "b_total_ps"), sum(&pb, "total_ps"));
    // The top change is a matrix op of the grown layers and it got slower.
    let top = &ops[0];
    assert_eq!(top["status"], "slower", "{top}");
    let cat = top["category"].as_str().unwrap();
    assert!(cat.contains("dot") || cat.contains("fusion"), "{top}");
}

#[test]
fn diff_matches_a_renamed_fusion_by_shape() {
    // The 4-layer-wide CPU transformer against the 1-layer clean capture: layer ops
    // differ, and matching by HLO signature pairs some of the rest.
    let d = json(&["diff", &fx("cpu-transformer"), &fx("cpu-clean"), "--top", "100000"]);
    let ops = d["ops"].as_array().unwrap();
    for o in ops {
        match o["matched_by"].as_str().unwrap() {
            "name" => assert!(o["b_name"].is_null()),
            "shape" => assert_ne!(o["b_name"], o["name"]),
            "" => assert!(o["status"] == "added" || o["status"] == "removed"),
            other => panic!("matched_by {other}"),
        }
    }
}

#[test]
fn diff_keeps_the_programs_of_one_op_name_apart() {
    // Five programs of `jit_dot` each hold a GEMM named `custom-call.1`: a run diffed
    // against itself pairs each program's op with its own (by its HLO signature, as
    // program ids differ between runs), all unchanged, none added or removed.
    let f = fx("rocm-mi300x-gemm");
    let ops = json(&["ops", &f, "--top", "0"]);
    let gemms: Vec<&Value> = ops["ops"].as_array().unwrap().iter().filter(|r| r["name"] == "custom-call.1").collect();
    assert_eq!(gemms.len(), 5, "{ops}");
    let d = json(&["diff", &f, &f, "--top", "0"]);
    let rows: Vec<&Value> = d["ops"].as_array().unwrap().iter().filter(|r| r["name"] == "custom-call.1").collect();
    assert_eq!(rows.len(), 5, "{d}");
    let mut totals: Vec<i64> = gemms.iter().map(|r| r["total_ps"].as_i64().unwrap()).collect();
    let mut paired: Vec<i64> = rows
        .iter()
        .map(|r| {
            assert_eq!((r["status"].as_str(), r["matched_by"].as_str()), (Some("unchanged"), Some("name")), "{r}");
            assert_eq!(r["a_total_ps"], r["b_total_ps"], "{r}");
            r["a_total_ps"].as_i64().unwrap()
        })
        .collect();
    totals.sort_unstable();
    paired.sort_unstable();
    assert_eq!(paired, totals);
}

#[test]
fn compare_lists_runs_side_by_side() {
    let runs = [fx("cpu-clean"), fx("cpu-slow"), fx("cpu-dp4")];
    let c = json(&["compare", &runs[0], &runs[1], &runs[2]]);
    assert_eq!(c["schema"], "stepscope.compare/1");
    let rows = c["runs"].as_array().unwrap();
    assert_eq!(rows.len(), 3);
    for (r, path) in rows.iter().zip(&runs) {
        let s = json(&["summary", path]);
        assert_eq!(r["step_time"], s["step_time"]);
        assert_eq!(r["breakdown"], s["breakdown"]);
        // Labelled by what tells the runs apart: their paths less the common folders.
        assert_eq!(r["label"], path.rsplit('/').next().unwrap());
    }
    assert_eq!(rows[0]["step_time_vs_first_pct"], 100.0);
    assert_eq!(rows[2]["devices"][0]["count"], 4);
    let csv = ok(&["compare", &runs[0], &runs[1], "--csv"]);
    assert_eq!(csv.lines().count(), 3);
}

/// Guide 004's scaling table: the same model data-parallel over 2, 4 and 8 host
/// devices (real captures made with `capture_jax.py --devices 2/4/8`), each run's
/// device count and its throughput per device against the 2-device run. The CPU
/// runs' FLOPs are not known, so a step is taken as the same work (strong scaling):
/// efficiency = (T2 x 2) / (Tn x n).
#[test]
fn compare_scales_runs_by_their_device_counts() {
    let runs = [fx("cpu-dp2-own-steps"), fx("cpu-dp4"), fx("cpu-dp8-collectives")];
    let c = json(&["compare", &runs[0], &runs[1], &runs[2]]);
    assert_eq!(c["scaling_basis"], "steps");
    assert_eq!(c["scaling_base"], "cpu-dp2-own-steps");
    let rows = c["runs"].as_array().unwrap();
    let median = |r: &Value| r["step_time"]["median_ps"].as_f64().unwrap();
    for (r, want) in rows.iter().zip([2u64, 4, 8]) {
        assert_eq!(r["device_count"].as_u64(), Some(want), "{r}");
        let expected = 100.0 * median(&rows[0]) * 2.0 / (median(r) * want as f64);
        assert!((r["scaling_efficiency_pct"].as_f64().unwrap() - expected).abs() < 1e-6, "{r}");
    }
    let text = ok(&["compare", &runs[0], &runs[1], &runs[2]]);
    assert!(text.contains("DEVICES") && text.contains("SCALING") && text.contains("100% is linear"), "{text}");
    // The same device count everywhere: no scaling column.
    let same = json(&["compare", &fx("cpu-sync"), &fx("cpu-nosync")]);
    assert!(same.get("scaling_basis").is_none() && same["runs"][0].get("scaling_efficiency_pct").is_none());
    assert!(!ok(&["compare", &fx("cpu-sync"), &fx("cpu-nosync")]).contains("SCALING"));
}

#[test]
fn check_passes_against_its_own_baseline_and_fails_a_slowed_run() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("baseline.json");
    std::fs::write(&base, ok(&["summary", &fx("cpu-clean"), "--json"])).unwrap();
    let b = base.to_str().unwrap();
    let same = stepscope(&["check", &fx("cpu-clean"), "--baseline", b]);
    assert_eq!(same.status.code(), Some(0), "{}", String::from_utf8_lossy(&same.stdout));
    assert!(String::from_utf8_lossy(&same.stdout).contains("check passed"));
    let slow = stepscope(&["check", &fx("cpu-slow"), "--baseline", b]);
    assert_eq!(slow.status.code(), Some(1));
    let out = String::from_utf8_lossy(&slow.stdout);
    // The table names the metric as its values read (durations, not `_ps`).
    assert!(out.contains("FAIL") && out.contains("step time (median)") && !out.contains("median_ps"), "{out}");
    // JSON verdict, with a metric of its own from a TOML file.
    let metrics = dir.path().join("metrics.toml");
    std::fs::write(&metrics, "[[metric]]\nmetric = \"device_utilization_pct\"\nmax_regression_pct = 50\n").unwrap();
    let v: Value = serde_json::from_slice(
        &stepscope(&["check", &fx("cpu-slow"), "--baseline", b, "--metrics", metrics.to_str().unwrap(), "--json"])
            .stdout,
    )
    .unwrap();
    assert_eq!(v["schema"], "stepscope.check/1");
    assert_eq!(v["passed"], false);
    assert_eq!(v["metrics"][1]["metric"], "device_utilization_pct");
    assert_eq!(v["metrics"][1]["passed"], true);
    // A generous limit lets the slow run pass.
    let lax = stepscope(&["check", &fx("cpu-slow"), "--baseline", b, "--max-regression", "1000"]);
    assert_eq!(lax.status.code(), Some(0));
    // The other way, the faster run passes with a change below 0, which the text calls better.
    let slow_base = dir.path().join("slow.json");
    std::fs::write(&slow_base, ok(&["summary", &fx("cpu-slow"), "--json"])).unwrap();
    let faster = ok(&["check", &fx("cpu-clean"), "--baseline", slow_base.to_str().unwrap()]);
    let v = json(&["check", &fx("cpu-clean"), "--baseline", slow_base.to_str().unwrap()]);
    let change = v["metrics"][0]["regression_pct"].as_f64().unwrap();
    assert!(change < 0.0 && faster.contains(&format!("{change:+.1}%")), "{faster}");
    assert!(faster.contains("CHANGE above 0 is worse, below 0 better"), "{faster}");
}

#[test]
fn check_refuses_to_judge_too_few_steps_or_a_bad_baseline() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("baseline.json");
    std::fs::write(&base, ok(&["summary", &fx("cpu-clean"), "--json"])).unwrap();
    // cpu-compile has 3 steps: too few when 4 are required.
    let err =
        assert_clean_error(&["check", &fx("cpu-compile"), "--baseline", base.to_str().unwrap(), "--min-steps", "7"]);
    assert!(err.contains("too few to judge"), "{err}");
    std::fs::write(&base, ok(&["steps", &fx("cpu-clean"), "--json"])).unwrap();
    let err = assert_clean_error(&["check", &fx("cpu-clean"), "--baseline", base.to_str().unwrap()]);
    assert!(err.contains("not a stepscope summary"), "{err}");
}

#[test]
fn a_capture_without_device_activity_says_so_instead_of_blaming_the_host() {
    // JAX 0.4.31 on CPU: no device plane and no XLA op events (XLA:CPU records none).
    let path = fx("cpu-jax0431");
    let fired = rules(&path);
    assert!(fired.iter().any(|r| r == "no-device-activity"), "{fired:?}");
    for rule in ["low-utilization", "host-bound-gaps", "input-bound"] {
        assert!(!fired.iter().any(|r| r == rule), "{rule} fired with no device time recorded: {fired:?}");
    }
    let f = finding(&path, "no-device-activity");
    assert!(f["advice"].as_str().unwrap().contains("JAX 0.4.33"), "{f}");

    // The steps are still measured: as many as the reference reader finds.
    let s = json(&["summary", &path]);
    assert!(s["environment"]["devices"].as_array().unwrap().is_empty(), "{}", s["environment"]);
    assert_eq!(s["findings"][0]["rule"], "no-device-activity");
    let file = std::fs::read_dir(fixture("cpu-jax0431/plugins/profile"))
        .unwrap()
        .map(|e| e.unwrap().path().join("vm.xplane.pb"))
        .next()
        .unwrap();
    let theirs = reference(&["steps", file.to_str().unwrap()]);
    assert_eq!(s["step_count"].as_u64().unwrap() as usize, theirs.as_array().unwrap().len());
    assert!(s["step_count"].as_u64().unwrap() >= 4);
    let text = ok(&["summary", &path]);
    assert!(text.contains("no device activity recorded"), "{text}");
    assert!(!text.contains("device idle (host-bound)"), "{text}");

    // Captures with device time never say so.
    for capture in ["cpu-clean", "gpu-bf16", "tpu-v6e-inference", "rocm-mi300x-gemm"] {
        let fired = rules(&fx(capture));
        assert!(!fired.iter().any(|r| r == "no-device-activity"), "{capture}: {fired:?}");
    }
}

#[test]
fn steps_timed_on_the_device_hold_their_own_work_in_step_jitter() {
    // gpu-async's loop dispatches ahead: timed on its host, step 6's span held 1.78 ms
    // of device work where it launched 1.26 ms, and step-jitter blamed work queued by
    // earlier steps. Timed on the device, every slow step cited holds the work it
    // launched (`device_work_ps`, linked by correlation_id) and nothing else.
    let f = fx("gpu-async");
    let steps = json(&["steps", &f]);
    assert_eq!(steps["timing"], "device");
    let by_num = |n: i64| steps["steps"].as_array().unwrap().iter().find(|s| s["step_num"] == n).unwrap().clone();
    let jitter = finding(&f, "step-jitter");
    let evidence = jitter["evidence"].as_array().unwrap();
    assert_eq!(evidence.len(), 3, "{jitter}");
    for e in evidence {
        let st = by_num(e["step_num"].as_i64().unwrap());
        assert_eq!(st["device_busy_ps"], st["device_work_ps"], "{st}");
        assert_eq!(e["duration_ps"], st["duration_ps"], "{e}");
        assert!(!e["detail"].as_str().unwrap().contains("queued by earlier steps"), "{e}");
    }
    assert!(!jitter["advice"].as_str().unwrap().contains("dispatches ahead"), "{jitter}");
}

/// `host_tracer_level` of a capture, read with the reference reader: field 2 of the
/// `ProfileOptions` message in `Task Environment`'s `profile_options` (absent: 0).
fn ref_host_tracer_level(path: &str) -> u64 {
    let stats = reference(&["plane-stats", path, "--plane", "Task Environment"]);
    let b64 = stats["profile_options"]["b64_head"].as_str().unwrap();
    let table = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let bits: Vec<u8> =
        b64.bytes().filter(|&c| c != b'=').map(|c| table.iter().position(|&t| t == c).unwrap() as u8).collect();
    let bytes: Vec<u8> = bits
        .chunks(4)
        .flat_map(|c| {
            let v = c.iter().enumerate().fold(0u32, |v, (i, &b)| v | (b as u32) << (18 - 6 * i));
            [(v >> 16) as u8, (v >> 8) as u8, v as u8].into_iter().take(c.len() - 1)
        })
        .collect();
    // Every field of this message is a one-byte key and a small varint.
    bytes.chunks(2).find(|kv| kv[0] == (2 << 3)).map_or(0, |kv| kv[1] as u64)
}

#[test]
fn a_capture_with_host_tracing_off_is_told_so_not_to_add_annotations() {
    let off = fixture("cpu-host-tracer-off/plugins/profile/2026_11_25_01_40_18/vm.xplane.pb");
    let off = off.to_str().unwrap();
    let on = fixture("cpu-clean/plugins/profile/2026_11_21_23_32_11/vm.xplane.pb");
    let on = on.to_str().unwrap();
    assert_eq!((ref_host_tracer_level(off), ref_host_tracer_level(on)), (0, 2));
    assert_eq!(json(&["summary", off])["environment"]["host_tracer_level"], 0);
    assert_eq!(json(&["summary", on])["environment"]["host_tracer_level"], 2);
    // No steps: the advice is to turn host tracing on, not to add annotations.
    let no_steps = finding(off, "no-steps");
    let advice = no_steps["advice"].as_str().unwrap();
    assert!(advice.contains("host_tracer_level=0") && !advice.contains("wrap each training step"), "{advice}");
    let text = ok(&["summary", off]);
    assert!(text.contains("host_tracer_level=0") && !text.contains("wrap each training step"), "{text}");
    // A capture with host tracing on keeps the usual advice where it has no steps.
    assert!(finding(on, "host-tracing-off").is_null());
}

#[test]
fn diff_refuses_to_compare_a_run_with_itself_and_names_the_runs() {
    // `runs/` holds two runs (adam, and sgd, the newer): `diff runs runs/sgd` would read
    // sgd on both sides. Refused, naming both runs; two run folders diff as usual.
    let tmp = tempfile::tempdir().unwrap();
    let runs = tmp.path().join("runs");
    copy_tree(&fixture("cpu-guide-adam"), &runs.join("adam"));
    copy_tree(&fixture("cpu-guide-sgd"), &runs.join("sgd"));
    let sgd_run = runs.join("sgd/plugins/profile/2026_11_25_03_32_46");
    let newer = std::fs::File::open(sgd_run.join("vm.xplane.pb")).unwrap();
    newer.set_modified(std::time::SystemTime::now()).unwrap();
    let (all, sgd) = (runs.to_str().unwrap(), runs.join("sgd"));
    let out = stepscope(&["diff", all, sgd.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(out.stdout.is_empty() && !err.contains("panicked"), "{err}");
    let last = err.lines().last().unwrap();
    assert!(last.starts_with("stepscope: A and B are one run") && last.contains(" — diff two of them: "), "{err}");
    assert!(
        last.contains("adam/plugins/profile/2026_11_25_03_32_42") && last.contains(sgd_run.to_str().unwrap()),
        "{err}"
    );
    let ok_diff = json(&["diff", runs.join("adam").to_str().unwrap(), sgd.to_str().unwrap()]);
    assert_ne!(ok_diff["a"]["run"], ok_diff["b"]["run"], "{ok_diff}");
}

#[test]
fn a_memory_profile_given_as_a_trace_names_the_command_that_reads_it() {
    let prof = fixture("cpu-transformer/plugins/profile/2026_11_21_22_29_17/memory.prof");
    let p = prof.to_str().unwrap();
    let err = assert_clean_error(&["summary", p]);
    assert!(err.contains("is a device-memory profile") && err.contains(&format!("stepscope memory {p}")), "{err}");
    // And that command reads it.
    assert!(json(&["memory", p])["device_memory_profile"]["total_bytes"].as_i64().unwrap() > 0);
}

/// A run whose first step compiled is compared by its warm steps: compare, diff and
/// check rank on the median of the steps without compilation (as `steps` lists
/// them), and say so.
#[test]
fn runs_are_ranked_on_their_warm_steps() {
    let (cold, warm) = (fx("cpu-compile"), fx("cpu-transformer"));
    let steps = json(&["steps", &cold]);
    let mut warm_steps: Vec<i64> = (steps["steps"].as_array().unwrap().iter())
        .filter(|s| s["compile_ps"] == 0)
        .map(|s| s["duration_ps"].as_i64().unwrap())
        .collect();
    let all = steps["steps"].as_array().unwrap().len();
    assert!(!warm_steps.is_empty() && warm_steps.len() < all, "{steps}");
    warm_steps.sort_unstable();
    let n = warm_steps.len();
    let median = if n % 2 == 1 { warm_steps[n / 2] } else { (warm_steps[n / 2 - 1] + warm_steps[n / 2]) / 2 };
    let near = |v: &serde_json::Value| (v.as_i64().unwrap() - median).abs() <= 1;
    let cold_steps = (all - n) as u64;

    let c = json(&["compare", &cold, &warm]);
    assert!(near(&c["runs"][0]["step_time"]["median_ps"]), "{c}");
    assert_eq!(c["runs"][0]["cold_steps"].as_u64(), Some(cold_steps));
    assert!(c["runs"][1].get("cold_steps").is_none());
    let text = ok(&["compare", &cold, &warm]);
    assert!(text.contains(&format!("{cold_steps} of {all} steps are cold")), "{text}");

    let d = json(&["diff", &cold, &warm]);
    assert!(near(&d["step_time"]["a_median_ps"]), "{d}");
    assert_eq!(d["a"]["cold_steps"].as_u64(), Some(cold_steps));

    let dir = tempfile::tempdir().unwrap();
    let baseline = dir.path().join("baseline.json");
    std::fs::write(&baseline, ok(&["summary", &cold, "--json"])).unwrap();
    let baseline = baseline.to_str().unwrap();
    let ch = json(&["check", "--baseline", baseline, &warm]);
    assert!((ch["metrics"][0]["baseline"].as_f64().unwrap() - median as f64).abs() <= 1.0, "{ch}");
    assert_eq!(ch["baseline_cold_steps"].as_u64(), Some(cold_steps));
    let text = ok(&["check", "--baseline", baseline, &warm]);
    assert!(text.contains("warm steps"), "{text}");
}

/// `diff`'s average-step parts add up to the step on both sides (the runtime between
/// an XLA:CPU program's ops included), as the summary's do.
#[test]
fn diff_parts_add_up_to_the_step() {
    let d = json(&["diff", &fx("cpu-guide-adam"), &fx("cpu-guide-sgd")]);
    let parts = d["breakdown"].as_array().unwrap();
    for side in ["a_ps", "b_ps"] {
        let step = parts.iter().find(|p| p["part"] == "step").unwrap()[side].as_i64().unwrap();
        let sum: i64 = parts.iter().filter(|p| p["part"] != "step").map(|p| p[side].as_i64().unwrap()).sum();
        assert_eq!(sum, step, "{side}: {d}");
    }
    assert!(parts.iter().any(|p| p["part"] == "runtime_overhead" && p["a_ps"].as_i64().unwrap() > 0), "{d}");
}

#[test]
fn check_takes_absolute_limits_as_guide_001_asserts_them() {
    let run = fx("cpu-clean");
    let s = json(&["summary", &run]);
    let warm = s.get("warm_step_time").filter(|w| !w.is_null());
    let mean_ps = warm.unwrap_or(&s["step_time"])["mean_ps"].as_f64().unwrap();
    let mean_ms = mean_ps / 1e9;
    // `assert mean_ms < 150`, with the run's own mean: a limit above it passes, one below fails.
    let above = format!("{}", mean_ms * 1.5);
    let pass = stepscope(&["check", &run, "--max-step-ms", &above]);
    let text = String::from_utf8_lossy(&pass.stdout);
    assert_eq!(pass.status.code(), Some(0), "{text}");
    assert!(text.contains("step time (mean") && text.contains("≤") && text.contains("check passed"), "{text}");
    let below = format!("{}", mean_ms * 0.5);
    let fail = stepscope(&["check", &run, "--max-step-ms", &below, "--json"]);
    assert_eq!(fail.status.code(), Some(1));
    let v: Value = serde_json::from_slice(&fail.stdout).unwrap();
    assert_eq!(v["passed"], false);
    assert_eq!(v["limits"][0]["metric"], "step_time.mean_ps");
    assert_eq!(v["limits"][0]["current"].as_f64().unwrap(), mean_ps);
    assert!(v["metrics"].as_array().unwrap().is_empty(), "no baseline, no comparison");
    // Limits in the metrics file; fewer steps than --min-steps are judged with a warning.
    let dir = tempfile::tempdir().unwrap();
    let metrics = dir.path().join("limits.toml");
    let util = s["device_utilization_pct"].as_f64().unwrap();
    std::fs::write(&metrics, format!("[[limit]]\nmetric = \"device_utilization_pct\"\nmin = {}\n", util + 1.0))
        .unwrap();
    let m = metrics.to_str().unwrap();
    let out = stepscope(&["check", &run, "--metrics", m, "--max-step-ms", &above, "--min-steps", "1000"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("device_utilization_pct") && text.contains("warning: the run has"), "{text}");
    // No steps, or [[metric]] tables without a baseline: one line that says why.
    let err = assert_clean_error(&["check", &fx("rocm-mi300x-conv-2gpu"), "--max-step-ms", "150"]);
    assert!(err.contains("0 step(s)"), "{err}");
    std::fs::write(&metrics, "[[metric]]\nmetric = \"device_utilization_pct\"\nmax_regression_pct = 5\n").unwrap();
    let err = assert_clean_error(&["check", &run, "--metrics", m]);
    assert!(err.contains("compared with a baseline"), "{err}");
    let err = assert_clean_error(&["check", &run]);
    assert!(err.contains("--baseline") && err.contains("--max-step-ms"), "{err}");
}

#[test]
fn history_names_the_first_run_that_moved_beyond_noise() {
    // A nightly folder: the clean run twice, then the slow one twice. Files are
    // written newest-run first, so the order must come from the runs' names.
    let tmp = tempfile::tempdir().unwrap();
    let nights = ["cpu-clean", "cpu-clean", "cpu-slow", "cpu-slow"];
    let mut files = Vec::new();
    for (i, f) in nights.iter().enumerate().rev() {
        let run = tmp.path().join(format!("night{i}/plugins/profile/2026_11_0{}_02_00_00", i + 1));
        let src = std::fs::read_dir(fixture(&format!("{f}/plugins/profile"))).unwrap().next().unwrap().unwrap().path();
        crate::util::copy_tree(&src, &run);
        files.push(run.join("vm.xplane.pb"));
    }
    files.reverse();
    let h = json(&["history", tmp.path().to_str().unwrap()]);
    assert_eq!(h["schema"], "stepscope.history/1");
    let runs = h["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 4);

    // Each run's median step and robust spread from the reference reader's steps.
    let stats = |file: &std::path::Path| -> (i64, f64, usize) {
        let steps = reference(&["steps", file.to_str().unwrap()]);
        let d: Vec<i64> = steps.as_array().unwrap().iter().map(|s| s["duration_ps"].as_i64().unwrap()).collect();
        let m = median(d.clone());
        let dev: Vec<i64> = d.iter().map(|x| (x - m).abs()).collect();
        (m, 1.4826 * median(dev) as f64, d.len())
    };
    let want: Vec<(i64, f64, usize)> = files.iter().map(|f| stats(f)).collect();
    for (i, (r, w)) in runs.iter().zip(&want).enumerate() {
        assert!(r["run"].as_str().unwrap().ends_with(&format!("2026_11_0{}_02_00_00", i + 1)), "{r}");
        assert_eq!(r["captured"], format!("2026-11-0{} 02:00:00", i + 1));
        assert_eq!(r["step_time"]["median_ps"], w.0, "run {i}");
    }
    // The change point: night 3 against night 2, by more than the two runs' noise.
    let c = &h["change"];
    assert_eq!((c["index"].as_u64(), c["cause"].as_str()), (Some(2), Some("step_time")), "{c}");
    assert!(c["previous"].as_str().unwrap().ends_with("2026_11_02_02_00_00"));
    let ((a, sa, na), (b, sb, nb)) = (want[1], want[2]);
    let noise = 2.0 * (sa * sa / na as f64 + sb * sb / nb as f64).sqrt();
    assert!((c["step_time"]["noise_ps"].as_f64().unwrap() - noise).abs() <= 2.0, "{c} vs {noise}");
    assert_eq!(c["step_time"]["delta_ps"].as_i64(), Some(b - a));
    assert!((b - a) as f64 > noise);
    // The text says where, and how to see it whole.
    let text = ok(&["history", tmp.path().to_str().unwrap()]);
    assert!(text.contains("CHANGED first at") && text.contains("← changed"), "{text}");

    // The same run twice has nothing to name; an empty folder is a one-line error.
    let same =
        json(&["history", tmp.path().join("night0").to_str().unwrap(), tmp.path().join("night1").to_str().unwrap()]);
    assert_eq!(same["runs"].as_array().unwrap().len(), 2);
    assert!(same["change"].is_null(), "{same}");
    let empty = tempfile::tempdir().unwrap();
    assert!(assert_clean_error(&["history", empty.path().to_str().unwrap()]).contains("no profile found"));

    // A night whose capture was cut short, between nights 2 and 3: listed as not read,
    // with why; the others compared as before (night 3 against night 2). The web API
    // answers the same.
    let cut = tmp.path().join("night9/plugins/profile/2026_11_02_12_00_00");
    std::fs::create_dir_all(&cut).unwrap();
    let whole = std::fs::read(&files[0]).unwrap();
    std::fs::write(cut.join("vm.xplane.pb"), &whole[..whole.len() / 3]).unwrap();
    let with_cut = json(&["history", tmp.path().to_str().unwrap()]);
    assert_eq!(with_cut["runs"], h["runs"]);
    assert_eq!(with_cut["change"], h["change"]);
    let unread = with_cut["runs_unread"].as_array().unwrap();
    assert_eq!(unread.len(), 1, "{with_cut}");
    assert!(unread[0]["run"].as_str().unwrap().ends_with("night9/plugins/profile/2026_11_02_12_00_00"));
    assert_eq!(unread[0]["captured"], "2026-11-02 12:00:00");
    let why = unread[0]["error"].as_str().unwrap();
    assert!(why.contains("is not a readable profile") && why.contains(" — "), "{why}");
    let text = ok(&["history", tmp.path().to_str().unwrap()]);
    assert!(text.contains("Not read: ") && text.contains("2026_11_02_12_00_00"), "{text}");
    let server = crate::server::serve(tmp.path(), &[]);
    let api = server.api("history");
    assert_eq!(api["runs_unread"].as_array().unwrap().len(), 1, "{api}");
    assert_eq!(api["runs"].as_array().unwrap().len(), 4);
    assert_eq!(api["change"]["cause"], "step_time");
    drop(server);
    // Only that night: nothing to compare, its one-line error.
    let err = assert_clean_error(&["history", tmp.path().join("night9").to_str().unwrap()]);
    assert!(err.contains("is not a readable profile"), "{err}");
}

/// A history over runs of other programs says which it could not compare, and looks
/// for a change only between runs of one program: a CPU model's runs, the GPU
/// capture's (all named `jit_train_step`, none sharing an op), a TPU inference's.
#[test]
fn history_says_which_runs_ran_other_programs_and_does_not_compare_them() {
    let tmp = tempfile::tempdir().unwrap();
    let nights = ["cpu-clean", "cpu-clean", "gpu-sync", "gpu-sync", "tpu-v6e-inference"];
    for (i, f) in nights.iter().enumerate() {
        let run = tmp.path().join(format!("plugins/profile/2026_11_0{}_02_00_00", i + 1));
        std::fs::create_dir_all(&run).unwrap();
        std::fs::copy(crate::util::xplane(f), run.join("vm.xplane.pb")).unwrap();
    }
    let dir = tmp.path().to_str().unwrap();
    let h = json(&["history", dir]);
    assert_eq!(h["runs"].as_array().unwrap().len(), 5);
    let not: Vec<(String, String)> = (h["not_compared"].as_array().unwrap().iter())
        .map(|n| {
            assert!(n["matched_op_time_pct"].as_f64().unwrap() < 10.0, "{n}");
            let name = |k: &str| n[k].as_str().unwrap().rsplit('/').next().unwrap().to_string();
            (name("run"), name("previous"))
        })
        .collect();
    let night = |i: usize| format!("2026_11_0{i}_02_00_00");
    assert_eq!(not, [(night(3), night(2)), (night(5), night(4))]);
    // The GPU run is 20x faster than the CPU one before it: not a change, another program.
    assert!(h["change"].is_null(), "{h}");
    // As `diff` sees the pairs: next to nothing of either run's op time matched.
    let d = json(&[
        "diff",
        &format!("{dir}/plugins/profile/{}", night(2)),
        &format!("{dir}/plugins/profile/{}", night(3)),
        "--top",
        "0",
    ]);
    let ops = d["ops"].as_array().unwrap();
    let matched: i64 = ops
        .iter()
        .filter(|o| o["status"] != "added" && o["status"] != "removed")
        .map(|o| o["a_total_ps"].as_i64().unwrap())
        .sum();
    let all: i64 = ops.iter().map(|o| o["a_total_ps"].as_i64().unwrap()).sum();
    assert!((matched as f64) < 0.1 * all as f64, "{matched} of {all}");
    let text = ok(&["history", dir]);
    let said = text.split("Not compared: ").nth(1).unwrap_or_default().replace('\n', " ");
    assert!(said.contains(&format!("{} ran other programs than", night(3))), "{text}");
    // Runs of one program: none left out.
    let same = json(&[
        "history",
        &format!("{dir}/plugins/profile/{}", night(1)),
        &format!("{dir}/plugins/profile/{}", night(2)),
    ]);
    assert!(same.get("not_compared").is_none(), "{same}");
}

/// `diff`, `compare` and `check` say when two runs ran different programs, as `history`
/// does (#75 item 7): the share of op time matched is the diff's own rows' (both runs
/// ran them) share of either run's op time; `check` refuses a baseline of another
/// program rather than pass it at −99%, and still judges a fixed twin (op-by-op code
/// jitted: its dots renamed, the same computations).
#[test]
fn diff_compare_and_check_say_when_two_runs_ran_other_programs() {
    let (clean, gpu, slow) = (xplane("cpu-clean"), xplane("gpu-sync"), xplane("cpu-slow"));
    let d = json(&["diff", &clean, &gpu, "--top", "0"]);
    let ops = d["ops"].as_array().unwrap();
    let share = |side: &str| {
        let total = |o: &&Value| o[side].as_i64().unwrap() as f64;
        let all: f64 = ops.iter().map(|o| total(&o)).sum();
        let both: f64 =
            ops.iter().filter(|o| o["status"] != "added" && o["status"] != "removed").map(|o| total(&o)).sum();
        100.0 * both / all
    };
    let matched = share("a_total_ps").max(share("b_total_ps"));
    assert!((d["matched_op_time_pct"].as_f64().unwrap() - matched).abs() < 1e-9, "{}", d["matched_op_time_pct"]);
    assert!(matched < 10.0 && d["same_program"] == false, "{matched}");
    let text = ok(&["diff", &clean, &gpu]);
    assert!(text.lines().next().unwrap().ends_with("— not a change: other programs, see below"), "{text}");
    let flat = text.replace('\n', " ").replace("  ", " ");
    assert!(flat.contains(&format!("these ran different programs ({matched:.1}% of op time matched)")), "{text}");
    let same = json(&["diff", &clean, &slow]);
    assert_eq!(same["same_program"], true);
    assert!(!ok(&["diff", &clean, &slow]).contains("different programs"));
    // compare: each run against the first.
    let c = json(&["compare", &clean, &gpu, &slow]);
    let runs = c["runs"].as_array().unwrap();
    assert!(runs[0].get("matched_op_time_pct").is_none());
    assert!((runs[1]["matched_op_time_pct"].as_f64().unwrap() - matched).abs() < 1e-9);
    assert!(runs[2]["matched_op_time_pct"].as_f64().unwrap() >= 10.0);
    let text = ok(&["compare", &clean, &gpu, &slow]).replace('\n', " ");
    assert_eq!(text.matches("these ran different programs").count(), 1, "{text}");
    // check: a baseline of another program is refused, with what to do.
    let tmp = tempfile::tempdir().unwrap();
    let baseline = |of: &str| {
        let f = tmp.path().join(format!("{}.json", of.len()));
        std::fs::write(&f, ok(&["summary", of, "--json"])).unwrap();
        f.to_string_lossy().to_string()
    };
    let err = assert_clean_error(&["check", &gpu, "--baseline", &baseline(&clean)]);
    assert!(err.contains("the baseline ran another program") && err.contains("summary PATH --json"), "{err}");
    let out = stepscope(&["check", &slow, "--baseline", &baseline(&clean)]);
    assert_eq!(out.status.code(), Some(1), "the same program, 126% slower: a regression");
    let (obo, fixed) = (xplane("cpu-op-by-op"), xplane("cpu-op-by-op-fixed"));
    let out = stepscope(&["check", &fixed, "--baseline", &baseline(&obo)]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
}

/// A ROCm capture's host-bound finding names the HIP launch calls its host made (the
/// reference reader's host events), not CUDA's (#75 item 10).
#[test]
fn a_rocm_captures_finding_names_the_hip_launch_calls() {
    let f = fixture_files()
        .into_iter()
        .find(|p| p.starts_with(fixture("rocm-mi300x-conv-8gpu")) && p.to_string_lossy().ends_with(".xplane.pb"))
        .unwrap();
    let f = f.to_str().unwrap();
    let hip = reference(&["host-events", "--names", "hipModuleLaunchKernel,hipExtModuleLaunchKernel", f]);
    assert!(!hip.as_array().unwrap().is_empty());
    assert!(reference(&["host-events", "--names", "cuLaunchKernel,cuGraphLaunch", f]).as_array().unwrap().is_empty());
    let a = json(&["advise", f]);
    let said: Vec<String> = (a["findings"].as_array().unwrap().iter())
        .flat_map(|f| f["evidence"].as_array().unwrap().iter().map(|e| e["what"].as_str().unwrap().to_string()))
        .filter(|w| w.contains("launch calls"))
        .collect();
    assert!(!said.is_empty(), "{a}");
    for w in said {
        assert!(w.contains("hipModuleLaunchKernel") && !w.contains("cuLaunchKernel"), "{w}");
    }
}
