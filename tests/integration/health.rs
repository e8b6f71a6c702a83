//! #76's capture-health section (`summary`'s `health`): each check on a real capture
//! that fails it and one that passes, its numbers from the reference reader.

use serde_json::Value;

use crate::util::*;

fn health(fixture_dir: &str) -> Value {
    json(&["summary", &xplane(fixture_dir)])["health"].clone()
}

fn check<'a>(h: &'a Value, id: &str) -> &'a Value {
    h["checks"].as_array().unwrap().iter().find(|c| c["check"] == id).unwrap_or_else(|| panic!("no {id}: {h}"))
}

/// The median by linear interpolation, as stepscope's statistics take it.
fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let at = (v.len() - 1) as f64 * 0.5;
    let (lo, hi) = (at.floor() as usize, at.ceil() as usize);
    v[lo] + (v[hi] - v[lo]) * (at - lo as f64)
}

/// A clean capture is healthy; its steps check says how well the median step is known:
/// two standard errors of the steps' robust spread (1.4826 × their median absolute
/// deviation), from the reference reader's step annotations.
#[test]
fn a_clean_capture_is_healthy_and_says_how_well_its_step_is_known() {
    let h = health("cpu-clean");
    assert_eq!(h["status"], "ok", "{h}");
    assert!(h["checks"].as_array().unwrap().iter().all(|c| c["status"] == "ok" && c.get("fix").is_none()), "{h}");
    let steps = reference(&["steps", &xplane("cpu-clean")]);
    let mut d: Vec<f64> = steps.as_array().unwrap().iter().map(|s| s["duration_ps"].as_f64().unwrap()).collect();
    let n = d.len() as f64;
    let m = median(&mut d);
    let mut dev: Vec<f64> = d.iter().map(|x| (x - m).abs()).collect();
    let mad = median(&mut dev).floor();
    let within = 200.0 * 1.4826 * mad / n.sqrt() / m;
    let what = check(&h, "steps")["what"].as_str().unwrap().to_string();
    assert!(what.starts_with(&format!("{} warm step(s)", d.len())), "{what}");
    let said: f64 = what.rsplit('±').next().unwrap().trim_end_matches('%').parse().unwrap();
    assert!((said - within).abs() <= 0.051, "{what}: want ±{within:.2}%");
    // The text says it in one line.
    assert!(ok(&["summary", &xplane("cpu-clean")]).contains("CAPTURE HEALTH ok:"));
}

/// A one-off capture without warm-up (guide 002's `with ProfileContext`): its one step
/// is cold and the capture mostly compilation; both say what they affect and the fix.
#[test]
fn a_one_off_capture_is_not_the_steady_state() {
    let h = health("cpu-oneoff");
    assert_eq!(h["status"], "bad", "{h}");
    for id in ["steps", "compilation"] {
        let c = check(&h, id);
        assert_eq!(c["status"], "bad", "{c}");
        assert!(
            c["affects"].as_str().is_some_and(|a| !a.is_empty())
                && c["fix"].as_str().unwrap().contains("before the capture"),
            "{c}"
        );
    }
    let text = ok(&["summary", &xplane("cpu-oneoff")]);
    assert!(text.contains("CAPTURE HEALTH  bad") && text.contains("[bad] compilation:"), "{text}");
    // A program that recompiles every step: cold steps are its steady state, not the
    // capture's fault.
    let r = check(&health("cpu-recompile"), "steps").clone();
    assert_eq!(r["status"], "caution", "{r}");
    assert!(r["what"].as_str().unwrap().contains("recompiles every step"), "{r}");
}

/// A capture that stopped before the work it launched ran: the launches the reference
/// reader finds not run, and too few warm steps with how many to capture.
#[test]
fn a_capture_cut_before_its_work_ran_is_read_with_caution() {
    let h = health("gpu-nosync-cut");
    assert_eq!(h["status"], "caution", "{h}");
    let not_run = reference_text(&["launches-not-run", &xplane("gpu-nosync-cut")]).trim().to_string();
    let work = check(&h, "work");
    assert_eq!(work["status"], "caution");
    assert!(work["what"].as_str().unwrap().contains(&format!("{not_run} GPU launch(es) had not run")), "{work}");
    let steps = check(&h, "steps");
    assert_eq!(steps["status"], "caution");
    assert!(steps["fix"].as_str().unwrap().starts_with("capture at least"), "{steps}");
    // Host tracing off: no steps, and the check that says why.
    let off = health("cpu-host-tracer-off");
    assert_eq!(check(&off, "host_tracing")["status"], "bad", "{off}");
    assert_eq!(check(&off, "steps")["status"], "bad", "{off}");
}

/// A run of several hosts read a host at a time has the health of the run read whole.
#[test]
fn a_pods_health_is_the_run_read_whole() {
    let dir = fixture("cpu-pod3");
    let dir = dir.to_str().unwrap();
    let by_host = json(&["summary", dir])["health"].clone();
    assert_eq!(by_host, json(&[TOGETHER, "summary", dir])["health"]);
    assert!(check(&by_host, "hosts")["what"].as_str().unwrap().contains("(3)"), "{by_host}");
}

/// `advise` judges with the capture's health first: its JSON's `health` is the
/// summary's, whole or a host at a time, and its text opens with the same section.
#[test]
fn advise_carries_the_summarys_health() {
    for f in ["cpu-oneoff", "cpu-clean", "cpu-nosync-cut", "gpu-transformer"] {
        let x = xplane(f);
        assert_eq!(json(&["advise", &x])["health"], health(f), "{f}");
    }
    let pod = fixture("cpu-pod3").to_string_lossy().to_string();
    assert_eq!(json(&["advise", &pod])["health"], json(&["summary", &pod])["health"]);
    let text = ok(&["advise", &xplane("cpu-oneoff")]);
    let first = text.lines().next().unwrap();
    assert!(first.starts_with("CAPTURE HEALTH  bad"), "{text}");
    let compile: String =
        check(&health("cpu-oneoff"), "compilation")["what"].as_str().unwrap().chars().take(40).collect();
    assert!(text.contains(&format!("[bad] compilation: {compile}")), "{text}");
}

/// The attribution check: the share of op time in kernels without an HLO op, and the
/// share credited back from command buffers, are the op profile's own rows; the kernel
/// it names first is one the reference reader finds without an `hlo_op`.
#[test]
fn attribution_says_how_much_op_time_has_no_hlo_op() {
    let shares = |f: &str| {
        let ops = json(&["ops", &xplane(f), "--top", "0"])["ops"].as_array().unwrap().clone();
        let total: f64 = ops.iter().map(|o| o["self_ps"].as_f64().unwrap()).sum();
        let copy = |n: &str| n.starts_with("Memcpy") || n.starts_with("Memset") || n.contains("copyBuffer");
        let no_hlo: f64 = (ops.iter())
            .filter(|o| o.get("multiplies_matrices").is_none() && !copy(o["name"].as_str().unwrap()))
            .map(|o| o["self_ps"].as_f64().unwrap())
            .sum();
        let buffers: f64 =
            ops.iter().filter(|o| o.get("command_buffer").is_some()).map(|o| o["self_ps"].as_f64().unwrap()).sum();
        (100.0 * no_hlo / total, 100.0 * buffers / total)
    };
    // Autotuning kernels in a capture of the first call: most of the op time.
    let h = health("gpu-compile");
    let c = check(&h, "attribution");
    let (no_hlo, _) = shares("gpu-compile");
    assert!(no_hlo > 50.0, "{no_hlo}");
    assert_eq!(c["status"], "bad", "{c}");
    let what = c["what"].as_str().unwrap();
    assert!(what.starts_with(&format!("{no_hlo:.1}% of op time ran in kernels without an HLO op (")), "{what}");
    let first = what.split(" (").nth(1).unwrap().split(", ").next().unwrap().trim_end_matches('…');
    let gpu = reference_lines(&[
        "dump",
        &xplane("gpu-compile"),
        "--plane",
        "/device:GPU:0",
        "--line",
        "Stream #14(MemcpyH2D,Memset,Compute,MemcpyD2D,MemcpyOther)",
        "--limit",
        "100000",
    ]);
    assert!(
        gpu.iter().any(|e| e["name"].as_str().unwrap().starts_with(first) && e["stats"].get("hlo_op").is_none()),
        "{first}"
    );
    assert!(c["fix"].as_str().unwrap().contains("warm up"), "{c}");
    // Command buffers: credited back, said so, and fine.
    let h = health("gpu-transformer");
    let c = check(&h, "attribution");
    let (_, buffers) = shares("gpu-transformer");
    assert_eq!(c["status"], "ok", "{c}");
    assert!(c["what"].as_str().unwrap().contains(&format!("{buffers:.1}% ran in XLA command buffers")), "{c}");
    // XLA:CPU: every op has its HLO.
    assert_eq!(check(&health("cpu-clean"), "attribution")["what"], "every op with device time has its HLO op");
}

/// The clocks check (#76's proof): a 2-host CPU pod whose second host's clock is set
/// off by a known amount (the reference reader moves its session start, which its
/// events count from) is estimated within 10% from the all-reduces that end together,
/// moved by exactly that amount against the pod as captured, and named; read a host at
/// a time or together, the same. It changes no verdict.
#[test]
fn a_hosts_clock_set_off_by_a_known_amount_is_estimated_from_its_collectives() {
    let tmp = tempfile::tempdir().unwrap();
    let runs = fixture("cpu-pod3/plugins/profile");
    let from = std::fs::read_dir(&runs).unwrap().next().unwrap().unwrap().path();
    let pod = |name: &str, shift_ns: i64| {
        let run = tmp.path().join(name).join("plugins/profile/2026_11_29_00_00_00");
        std::fs::create_dir_all(&run).unwrap();
        std::fs::copy(from.join("host0.xplane.pb"), run.join("host0.xplane.pb")).unwrap();
        let host1 = from.join("host1.xplane.pb").to_string_lossy().to_string();
        let out = run.join("host1.xplane.pb").to_string_lossy().to_string();
        reference_text(&["shift-clock", &host1, &out, &shift_ns.to_string()]);
        tmp.path().join(name).to_string_lossy().to_string()
    };
    let (asis, off) = (pod("asis", 0), pod("off", 4_000_000));
    let skew = |dir: &str, together: bool| {
        let s = match together {
            true => json(&[TOGETHER, "summary", dir]),
            false => json(&["summary", dir]),
        };
        let k = &s["clock_skews"][0];
        assert_eq!((k["host"].as_str(), k["against"].as_str()), (Some("host1"), Some("host0")), "{s}");
        (k["skew_ps"].as_i64().unwrap(), s["health"].clone())
    };
    let (base, healthy) = skew(&asis, false);
    let (moved, h) = skew(&off, false);
    assert_eq!(moved - base, 4_000_000_000, "the estimate moves with the clock, exactly");
    assert!((moved as f64 - 4e9).abs() < 0.1 * 4e9, "{moved}");
    assert_eq!(skew(&off, true).0, moved, "read together, the same");
    assert_eq!(check(&healthy, "clocks")["status"], "ok", "{healthy}");
    let c = check(&h, "clocks");
    assert_eq!(c["status"], "caution", "{c}");
    let what = c["what"].as_str().unwrap();
    assert!(what.starts_with(&format!("host1's clock reads +{:.3} ms against host0's", moved as f64 / 1e9)), "{what}");
    assert!(c["fix"].as_str().unwrap().contains("chrony"), "{c}");
    // Its steps start 4 ms further from host0's as read; with the skew corrected, as
    // near as the pod's as captured.
    let apart = |dir: &str| {
        let k = json(&["summary", dir])["clock_skews"][0].clone();
        let apart = k["steps_apart_ps"].as_i64().unwrap();
        (apart, apart - k["skew_ps"].as_i64().unwrap())
    };
    let ((read, corrected), (read0, corrected0)) = (apart(&off), apart(&asis));
    assert_eq!(read - read0, 4_000_000_000);
    assert_eq!(corrected, corrected0);
    assert!(corrected.abs() < read.abs() / 10, "{corrected} vs {read}");
    assert!(what.contains(&format!("its steps start {:.3} ms from host0's as read", read as f64 / 1e9)), "{what}");
    // No verdict reads one host's clock against another's (stragglers compare work
    // durations, each host's steps are replayed apart): the skew changes none, so none
    // needs it corrected. The findings are the same, and only the skewed host's caveat
    // is new where its evidence is on it.
    let verdicts = |dir: &str| {
        let a = json(&["advise", dir]);
        (a["findings"].as_array().unwrap().iter())
            .map(|f| {
                let keep = ["rule", "severity", "title", "value", "gain_ps"];
                keep.iter().map(|k| f[*k].clone()).collect::<Vec<_>>()
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(verdicts(&asis), verdicts(&off));
}

/// A trace JSON capped below XProf's default (written with
/// `TF_PROFILER_TRACE_VIEWER_MAX_EVENTS=2000`): its events stop before the capture's
/// `stop_trace`, and it holds fewer steps than the `.xplane.pb` beside it (the reference
/// reader's). The `.xplane.pb`, and a whole trace JSON with the Python tracer on, are
/// not called capped.
#[test]
fn a_trace_json_cut_at_a_low_event_cap_says_so() {
    let whole = xplane("cpu-json-capped");
    let capped = whole.replace(".xplane.pb", ".trace.json.gz");
    let s = json(&["summary", &capped]);
    let events = check(&s["health"], "events");
    assert_eq!(events["status"], "bad", "{events}");
    assert!(events["what"].as_str().unwrap().contains("before the capture's stop_trace"), "{events}");
    assert!(events["fix"].as_str().unwrap().contains(".xplane.pb"), "{events}");
    let steps = reference(&["steps", &whole]).as_array().unwrap().len() as u64;
    assert_eq!(steps, 12);
    assert!(s["step_count"].as_u64().unwrap() < steps / 2, "{}", s["step_count"]);
    assert!(ok(&["summary", &capped]).contains("[bad] events:"));
    // The same capture's XSpace has every event.
    assert_eq!(check(&health("cpu-json-capped"), "events")["status"], "ok");
    // A whole trace JSON of a capture with the Python tracer on: its stop_trace is there.
    let full = xplane("cpu-transformer").replace(".xplane.pb", ".trace.json.gz");
    let full = json(&["summary", &full])["health"].clone();
    let events = check(&full, "events");
    assert_eq!(events["status"], "ok", "{events}");
    assert!(events["what"].as_str().unwrap().starts_with("read from trace JSON"), "{events}");
    // Trace JSON carries no HLO: the attribution check says to read the XSpace.
    assert!(check(&full, "attribution")["fix"].as_str().unwrap().contains(".xplane.pb"), "{full}");
}

/// Findings whose evidence sits in a part of the capture that is not healthy say so
/// (`caveats`): in the capture of three steps without warm-up, step 0 holds XLA's
/// compilation (the reference reader's `backend_compile_and_load` events lie inside it),
/// and every finding that cites step 0 but is not about compiling is told it is cold;
/// in the capture that stopped before its GPU work ran, the steps it cut. `summary`'s
/// top findings carry the same caveats as `advise`'s, and its text prints them.
#[test]
fn findings_whose_evidence_sits_in_a_cold_or_cut_step_say_so() {
    let file = xplane("cpu-compile");
    let steps = reference(&["steps", &file]);
    let compiles = reference(&["host-events", "--names", "backend_compile_and_load", &file]);
    let inside = |c: &Value, s: &Value| {
        let (cs, ss) = (c["start_ps"].as_i64().unwrap(), s["start_ps"].as_i64().unwrap());
        cs >= ss && cs < ss + s["duration_ps"].as_i64().unwrap()
    };
    let cold: Vec<i64> = (steps.as_array().unwrap().iter())
        .filter(|s| compiles.as_array().unwrap().iter().any(|c| inside(c, s)))
        .map(|s| s["step_num"].as_i64().unwrap())
        .collect();
    assert_eq!(cold, [0]);
    let a = json(&["advise", &file]);
    let findings = a["findings"].as_array().unwrap();
    let mut told = 0;
    for f in findings {
        let cites_cold = f["evidence"].as_array().unwrap().iter().any(|e| e["step_num"].as_i64() == Some(0));
        let caveats: Vec<&str> =
            f["caveats"].as_array().map_or(vec![], |c| c.iter().map(|c| c.as_str().unwrap()).collect());
        let is_cold = caveats.iter().any(|c| c.starts_with("step 0 of its evidence is cold"));
        let about_compiling =
            ["captured-compilation", "compile-time", "recompilation"].contains(&f["rule"].as_str().unwrap());
        assert_eq!(is_cold, cites_cold && !about_compiling, "{f}");
        told += is_cold as usize;
    }
    assert!(told >= 2, "{a}");
    let s = json(&["summary", &file]);
    for f in s["findings"].as_array().unwrap() {
        let same = findings.iter().find(|g| g["rule"] == f["rule"]).unwrap();
        assert_eq!(f["caveats"], same["caveats"], "{f}");
    }
    assert!(ok(&["summary", &file]).contains("! step 0 of its evidence is cold"));
    // The GPU capture stopped before its work ran: the steps it cut, by the reference.
    let cut = json(&["advise", &xplane("gpu-nosync-cut")]);
    let gaps = cut["findings"].as_array().unwrap().iter().find(|f| f["rule"] == "gaps-between-steps").unwrap();
    let caveat = gaps["caveats"][0].as_str().unwrap();
    assert!(caveat.contains("of its evidence is cut"), "{gaps}");
    let work = reference(&["step-work", &xplane("gpu-nosync-cut")]);
    let cut_nums: Vec<i64> = (work.as_array().unwrap().iter())
        .filter(|s| s["cut"].as_bool() == Some(true))
        .map(|s| s["step_num"].as_i64().unwrap())
        .collect();
    let named: Vec<i64> =
        caveat["step ".len()..].split(" of").next().unwrap().split(", ").map(|n| n.parse().unwrap()).collect();
    assert!(!named.is_empty() && named.iter().all(|n| cut_nums.contains(n)), "{caveat} vs {cut_nums:?}");
}

/// What the Python tracer cost (#76): on captures of two programs timed with the tracer
/// on and off alternately in one process (tests/fixtures/tracer.json, held out from
/// the calibration of the cost a call), the estimate is within 25% of the measured
/// difference in the time to dispatch a step. Its calls a step are the reference
/// reader's `$` host events inside the `train` annotations. Where it is 5% of the
/// host's step or more, the host-side findings say so; a capture without it says off.
#[test]
fn the_python_tracers_cost_is_estimated_within_a_quarter_of_what_it_measured() {
    let t: Value =
        serde_json::from_str(&std::fs::read_to_string(fixture("tracer.json")).unwrap()).expect("tracer.json");
    for timing in t["timings"].as_array().unwrap() {
        let file = xplane(timing["fixture"].as_str().unwrap());
        let s = json(&["summary", &file]);
        let pt = &s["python_tracer"];
        let calls = reference(&["host-events", "--prefixes", "$", &file]);
        // The reference's step annotations, of the steps stepscope times (not cut).
        let timed = json(&["steps", &file]);
        let timed: Vec<i64> = (timed["steps"].as_array().unwrap().iter())
            .filter(|s| s["cut"].as_bool() != Some(true))
            .map(|s| s["step_num"].as_i64().unwrap())
            .collect();
        let steps = reference(&["steps", &file]);
        let steps: Vec<&Value> =
            steps.as_array().unwrap().iter().filter(|s| timed.contains(&s["step_num"].as_i64().unwrap())).collect();
        let inside = (calls.as_array().unwrap().iter())
            .filter(|c| {
                let at = c["start_ps"].as_i64().unwrap();
                steps.iter().any(|s| {
                    let from = s["start_ps"].as_i64().unwrap();
                    at >= from && at < from + s["duration_ps"].as_i64().unwrap()
                })
            })
            .count();
        assert_eq!(pt["calls"].as_u64().unwrap(), calls.as_array().unwrap().len() as u64, "{pt}");
        assert!((pt["calls_per_step"].as_f64().unwrap() - inside as f64 / steps.len() as f64).abs() < 1e-9, "{pt}");
        let measured = timing["tracer_dispatch_ps"].as_f64().unwrap();
        let estimate = pt["cost_per_step_ps"].as_f64().unwrap();
        assert!((estimate - measured).abs() <= 0.25 * measured, "{}: {estimate} vs {measured}", timing["program"]);
        let c = check(&s["health"], "tracer");
        let want = if pt["cost_pct_of_host_step"].as_f64().unwrap() >= 5.0 { "caution" } else { "ok" };
        assert_eq!(c["status"], want, "{c}");
    }
    // Op-by-op dispatch traced: half the host's step; its host-side findings are told.
    let traced = json(&["advise", &xplane("cpu-op-by-op-traced")]);
    let c = check(&traced["health"], "tracer");
    assert_eq!(c["status"], "caution", "{c}");
    assert!(c["fix"].as_str().unwrap().contains("python_tracer_level=0"), "{c}");
    let gaps = traced["findings"].as_array().unwrap().iter().find(|f| f["rule"] == "host-bound-gaps").unwrap();
    assert!(gaps["caveats"][0].as_str().unwrap().starts_with("the Python tracer slowed the host"), "{gaps}");
    // The same program captured without it.
    let off = health("cpu-op-by-op");
    assert_eq!(check(&off, "tracer")["what"], "the Python tracer was off (no Python call traced)", "{off}");
}
