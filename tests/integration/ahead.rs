//! JAX runs ahead of Python: a loop that never waits for its device is timed by the
//! work its steps launched, not by their dispatch. Real XLA:CPU captures of one model
//! made back to back (`capture_jax.py --steps 10`): `cpu-sync` waits for each step's
//! loss, `cpu-nosync` never does (and reads the losses after the last step, inside
//! the capture), `cpu-nosync-cut` stops the capture right after dispatching. The
//! `gpu-sync`, `gpu-nosync` and `gpu-nosync-cut` triple is the same on an H200, a
//! device-bound bf16 model (about 21 ms of device work a step), linked by
//! `correlation_id`.

use crate::util::*;

fn field(steps: &serde_json::Value, key: &str) -> Vec<i64> {
    steps["steps"].as_array().unwrap().iter().map(|s| s[key].as_i64().unwrap()).collect()
}

/// Step `s` (ours) launched the work the reference reader's row `r` holds: its start,
/// its length and its busy time, which is some.
fn assert_same_work(s: &serde_json::Value, r: &serde_json::Value, name: &str) {
    assert!(r["busy_ps"].as_i64().unwrap() > 0, "{name}: {r}");
    for (ours, theirs) in
        [("work_start_ps", "work_start_ps"), ("work_duration_ps", "work_duration_ps"), ("device_work_ps", "busy_ps")]
    {
        assert_eq!(s[ours], r[theirs], "{name} step {}: {ours}", r["step_num"]);
    }
}

/// Each step's work is the program runs its jitted calls started, linked in run-id
/// order: the same as the reference reader's, step by step.
#[test]
fn a_step_is_the_work_its_dispatches_started() {
    for name in ["cpu-nosync", "cpu-sync", "gpu-nosync", "gpu-sync", "gpu-nosync-cut"] {
        let f = xplane(name);
        let ours = json(&["steps", &f]);
        let theirs = reference(&["step-work", &f]);
        let theirs = theirs.as_array().unwrap();
        let steps = ours["steps"].as_array().unwrap();
        assert_eq!(steps.len(), theirs.len(), "{name}");
        for r in theirs {
            let s = steps.iter().find(|s| s["step_num"] == r["step_num"]).unwrap();
            if let Some(cut) = r.get("cut") {
                // GPU: the capture holds none, or only part, of the step's launches.
                assert_eq!(s["cut"].as_bool().unwrap_or(false), cut.as_bool().unwrap(), "{name}: {s} vs {r}");
                if r["busy_ps"].is_null() {
                    assert!(s.get("device_work_ps").is_none(), "{name}: {s}");
                    continue;
                }
            }
            assert_same_work(s, r, name);
        }
    }
}

/// The never-synced loop is timed on its device: a step ends where its work ends, its
/// device step equals the synced twin's within noise, where its host spans (what
/// stepscope reported before) are a tenth of it. Every surface reads that time.
#[test]
fn a_loop_that_never_syncs_is_timed_by_its_work() {
    let (ahead, synced) = (fixture("cpu-nosync"), fixture("cpu-sync"));
    let (ahead, synced) = (ahead.to_str().unwrap(), synced.to_str().unwrap());
    let a = json(&["steps", ahead]);
    let b = json(&["steps", synced]);
    assert_eq!(a["timing"], "device");
    assert_eq!(b["timing"], "host");
    for s in a["steps"].as_array().unwrap() {
        let end = |k: &str, d: &str| s[k].as_i64().unwrap() + s[d].as_i64().unwrap();
        assert_eq!(end("start_ps", "duration_ps"), end("work_start_ps", "work_duration_ps"), "{s}");
        // The work ran after the dispatch had returned.
        assert!(s["work_start_ps"].as_i64() > s["host_start_ps"].as_i64(), "{s}");
    }
    let (device, host) = (median(field(&a, "duration_ps")), median(field(&a, "host_duration_ps")));
    let twin = median(field(&b, "duration_ps"));
    assert!(host * 5 < device, "host dispatch {host} ps vs device step {device} ps");
    let ratio = device as f64 / twin as f64;
    assert!((0.8..1.25).contains(&ratio), "device step {device} ps vs the synced twin's {twin} ps");
    // In the synced loop each step holds its own work: timed on its host.
    assert_eq!(field(&b, "start_ps"), field(&b, "host_start_ps"));

    // The summary, compare and check read the same steps.
    let summary = json(&["summary", ahead]);
    assert_eq!(summary["step_timing"], "device");
    let near = |v: &serde_json::Value, want: i64| (v.as_i64().unwrap() - want).abs() <= 1;
    assert!(near(&summary["step_time"]["median_ps"], device), "{summary}");
    assert!(near(&summary["host_step_time"]["median_ps"], host), "{summary}");
    let text = ok(&["summary", ahead]);
    assert!(text.contains("dispatches ahead"), "{text}");
    // `steps` says the same, whichever steps `--top` keeps (the medians are the run's).
    let note = |t: &str| t.split_whitespace().collect::<Vec<_>>().join(" ");
    let said = note(&text);
    for args in [&["steps", ahead][..], &["steps", ahead, "--top", "3"]] {
        let steps = ok(args);
        let (from, to) = (steps.find("The loop").unwrap(), steps.find("STEP ").unwrap());
        assert!(said.contains(&note(&steps[from..to])), "{args:?}: {steps}");
    }
    let compare = json(&["compare", ahead, synced]);
    let runs = compare["runs"].as_array().unwrap();
    assert!(near(&runs[0]["step_time"]["median_ps"], device), "{compare}");
    // Before, the dispatch-timed steps made the never-synced loop 12x "faster" and
    // step-jitter CRITICAL-ish (p90 17x the median: the last step waited for the queue).
    let jitter = json(&["advise", ahead]);
    let cited: Vec<&serde_json::Value> = jitter["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["rule"] == "step-jitter" || f["rule"] == "gaps-between-steps")
        .collect();
    for f in cited {
        assert!(f["value"].as_f64().unwrap() < 100.0, "{f}");
    }
}

/// A capture stopped while its work was queued holds runs it cannot tie to their
/// dispatches: no step is given work that is not its own, and the output says how
/// many jitted calls, at least, ran after the capture (dispatches less runs, per
/// program, as the reference reader counts them).
#[test]
fn a_capture_stopped_before_its_work_ran_says_so() {
    let f = xplane("cpu-nosync-cut");
    let steps = json(&["steps", &f]);
    assert_eq!(steps["timing"], "host");
    assert!(steps["steps"].as_array().unwrap().iter().all(|s| s.get("device_work_ps").is_none()), "{steps}");
    let calls = reference(&["host-events", &f, "--prefixes", "PjitFunction("]);
    let calls = calls.as_array().unwrap();
    // Outermost calls only (each call is recorded twice, one inside the other).
    let outer: Vec<&serde_json::Value> = calls
        .iter()
        .filter(|c| {
            let (s, e) =
                (c["start_ps"].as_i64().unwrap(), c["start_ps"].as_i64().unwrap() + c["duration_ps"].as_i64().unwrap());
            !calls.iter().any(|o| {
                let (os, oe) = (
                    o["start_ps"].as_i64().unwrap(),
                    o["start_ps"].as_i64().unwrap() + o["duration_ps"].as_i64().unwrap(),
                );
                o["line"] == c["line"] && os <= s && e <= oe && (os, oe) != (s, e)
            })
        })
        .collect();
    let mut expected = 0;
    for program in ["train_step", "stage"] {
        let called = outer.iter().filter(|c| c["name"] == format!("PjitFunction({program})")).count() as u64;
        let ran = run_ids(&f, &format!("jit_{program}"));
        assert!(called > ran, "{program}: {called} calls, {ran} runs");
        expected += called - ran;
    }
    assert_eq!(steps["dispatched_not_run"].as_u64(), Some(expected), "{steps}");
    let text = ok(&["steps", &f]);
    assert!(text.contains(&format!("at least {expected} jitted call(s)")), "{text}");
    assert!(text.contains("jax.block_until_ready"), "{text}");
}

/// On the GPU too: the never-synced loop's steps are timed by the work they launched
/// (linked by `correlation_id`), a device step the synced twin's within noise, its
/// device busy the twin's within 3%, where its host spans are a quarter of it.
#[test]
fn a_gpu_loop_that_never_syncs_is_timed_by_its_work() {
    let (ahead, synced) = (fixture("gpu-nosync"), fixture("gpu-sync"));
    let (ahead, synced) = (ahead.to_str().unwrap(), synced.to_str().unwrap());
    let a = json(&["steps", ahead]);
    let b = json(&["steps", synced]);
    assert_eq!(a["timing"], "device");
    assert_eq!(b["timing"], "host");
    let (device, host) = (median(field(&a, "duration_ps")), median(field(&a, "host_duration_ps")));
    let twin = median(field(&b, "duration_ps"));
    assert!(host * 3 < device, "host dispatch {host} ps vs device step {device} ps");
    let ratio = device as f64 / twin as f64;
    assert!((0.8..1.25).contains(&ratio), "device step {device} ps vs the synced twin's {twin} ps");
    let (busy, twin_busy) = (median(field(&a, "device_work_ps")), median(field(&b, "device_work_ps")));
    assert!((busy - twin_busy).abs() * 100 < twin_busy * 3, "launched {busy} ps vs the twin's {twin_busy} ps");
    // Each step is its own work: after the first (which waited for its dispatch), the
    // device is busy over 90% of it, where the twin's steps hold its syncs' idle too.
    for s in a["steps"].as_array().unwrap() {
        assert!(s["device_work_ps"].as_i64() <= s["duration_ps"].as_i64(), "{s}");
        if s["step_num"] != 0 {
            assert!(s["device_busy_ps"].as_i64().unwrap() * 10 > s["duration_ps"].as_i64().unwrap() * 9, "{s}");
        }
    }
    let summary = json(&["summary", ahead]);
    assert_eq!(summary["step_timing"], "device");
    assert!((summary["step_time"]["median_ps"].as_i64().unwrap() - device).abs() <= 1, "{summary}");
    // Here the device sets the pace; in gpu-async (a small model) the host does: its
    // dispatch median equals its device step, and the note says who waits.
    let text = ok(&["steps", ahead]).replace('\n', " ");
    assert!(text.contains("dispatches ahead") && !text.contains("sets the pace"), "{text}");
    let host_bound = json(&["steps", &xplane("gpu-async")]);
    let (d, h) = (median(field(&host_bound, "duration_ps")), median(field(&host_bound, "host_duration_ps")));
    assert!(h * 10 >= d * 9, "{d} vs {h}");
    let text = ok(&["steps", &xplane("gpu-async")]).replace('\n', " ");
    assert!(text.contains("the device waits for the host, which sets the pace"), "{text}");
}

/// A GPU capture stopped while its steps' work was queued: the launches it holds no
/// work of (CUPTI's ids on the host, none on the device, of a kind that ran) are
/// counted as the reference reader counts them, the steps that made them and the step
/// whose command buffer was running are marked cut and left out of the statistics,
/// and the output says so with the fix.
#[test]
fn a_gpu_capture_stopped_before_its_work_ran_says_so() {
    let f = xplane("gpu-nosync-cut");
    let steps = json(&["steps", &f]);
    let expected = reference(&["launches-not-run", &f]).as_u64().unwrap();
    assert!(expected > 0);
    assert_eq!(steps["launches_not_run"].as_u64(), Some(expected), "{steps}");
    let cut: Vec<bool> =
        steps["steps"].as_array().unwrap().iter().map(|s| s["cut"].as_bool().unwrap_or(false)).collect();
    assert!(cut.iter().any(|c| *c) && cut.iter().any(|c| !*c), "{steps}");
    let text = ok(&["steps", &f]);
    assert!(text.contains(&format!("{expected} GPU launch(es)")), "{text}");
    assert!(text.contains("jax.block_until_ready"), "{text}");
    // A cut step keeps its host span, among the steps timed on the device: it takes
    // none of their FLOPs (it took 9.3 of step 1's 11.2 TFLOP) and gets none.
    let whole = json(&["steps", &xplane("gpu-nosync")]);
    let model = whole["steps"][0]["flops"].as_f64().unwrap();
    for s in steps["steps"].as_array().unwrap() {
        match s["cut"].as_bool().unwrap_or(false) {
            true => assert!(s.get("flops").is_none(), "{s}"),
            false => assert!((s["flops"].as_f64().unwrap() / model - 1.0).abs() < 0.01, "{s} vs {model}"),
        }
    }
    // The capture that waited holds every launch's work.
    assert!(json(&["steps", &xplane("gpu-nosync")]).get("launches_not_run").is_none());
    assert_eq!(reference(&["launches-not-run", &xplane("gpu-nosync")]).as_u64(), Some(0));
}

/// The distinct `run_id`s of program `module`'s ops, by the reference reader.
fn run_ids(f: &str, module: &str) -> u64 {
    let info = reference(&["info", f]);
    let mut ids = std::collections::BTreeSet::new();
    for plane in info["hosts"][0]["planes"].as_array().unwrap() {
        if plane["name"] != "/host:CPU" {
            continue;
        }
        for line in plane["lines"].as_array().unwrap() {
            let name = line["name"].as_str().unwrap();
            for e in reference_lines(&["dump", f, "--plane", "/host:CPU", "--line", name, "--limit", "1000000"]) {
                if e["stats"]["hlo_module"] == module {
                    ids.insert(e["stats"]["run_id"].as_i64().unwrap());
                }
            }
        }
    }
    ids.len() as u64
}

/// `diff`'s per-step op times are over the steps' span (issue 45). In `cpu-nosync` the
/// two warm-up steps' work runs after the capture started, before the first step's
/// (one of its `dot.32` runs took 29 ms): taken over the whole capture it put `dot.32`
/// 2.98 ms a step slower than the synced twin. Each op's time in B equals the reference
/// reader's over the executions that started in the steps' span, and what is left out
/// is said.
#[test]
fn diffs_per_step_op_times_leave_out_work_before_the_first_step() {
    let (a, b) = (fixture("cpu-sync"), fixture("cpu-nosync"));
    let (a, b) = (a.to_str().unwrap(), b.to_str().unwrap());
    let steps = json(&["steps", b]);
    let timed: Vec<&serde_json::Value> =
        steps["steps"].as_array().unwrap().iter().filter(|s| s["cut"] != true).collect();
    let from = timed.iter().map(|s| s["start_ps"].as_i64().unwrap()).min().unwrap();
    let to = timed.iter().map(|s| s["start_ps"].as_i64().unwrap() + s["duration_ps"].as_i64().unwrap()).max().unwrap();
    let all = reference(&["cpu-ops", &xplane("cpu-nosync")]);
    let within = reference(&["cpu-ops", &xplane("cpu-nosync"), "--within", &from.to_string(), &to.to_string()]);
    let self_sum = |doc: &serde_json::Value| -> i64 {
        doc["ops"].as_array().unwrap().iter().map(|r| r["self_ps"].as_i64().unwrap()).sum()
    };
    let d = json(&["diff", a, b, "--top", "0"]);
    let outside = d["b"]["ops_outside_steps_ps"].as_i64().unwrap();
    assert_eq!(outside, self_sum(&all) - self_sum(&within));
    assert!(outside > 29_000_000_000, "the warm-up steps' work: {outside}");
    assert_eq!(d["a"]["ops_outside_steps_ps"], 0, "a loop that waits runs nothing outside its steps");
    let rows = d["ops"].as_array().unwrap();
    let mut checked = 0;
    for r in within["ops"].as_array().unwrap() {
        let row = rows.iter().find(|x| x["name"] == r["name"] && x["module"] == r["module"]).unwrap();
        assert_eq!(row["b_total_ps"], r["total_ps"], "{row}");
        assert_eq!(row["b_count"], r["count"], "{row}");
        checked += 1;
    }
    assert!(checked > 50);
    let dot = rows.iter().find(|x| x["name"] == "dot.32").unwrap();
    assert_eq!(dot["within_noise"], true, "{dot}");
    let text = ok(&["diff", a, b]).split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(text.contains("ms of op time ran before its first step or after its last"), "{text}");
}

/// A pod whose processes never wait for their steps (`cpu-pod3-nosync`: three real JAX
/// processes all-reducing their gradients each step) is timed on its devices, host by
/// host. Each host's steps are the work its own dispatches started, as the reference
/// reader links them in that host's file (durations and busy time equal; starts apart
/// by the one offset that puts the hosts on the run's clock). The device step equals
/// the synced twin's (`cpu-pod3`, captured two seconds later) within noise, where the
/// dispatch that each annotation spans is a hundredth of it; read a host at a time,
/// the steps are the same.
#[test]
fn a_pod_that_never_syncs_is_timed_by_each_hosts_work() {
    let (ahead, synced) = (fixture("cpu-pod3-nosync"), fixture("cpu-pod3"));
    let run = ahead.join("plugins/profile/2026_11_27_14_29_31");
    let (ahead, synced) = (ahead.to_str().unwrap(), synced.to_str().unwrap());
    let a = json(&["steps", ahead]);
    assert_eq!(a["timing"], "device");
    assert_eq!(json(&["steps", synced])["timing"], "host");
    let steps = a["steps"].as_array().unwrap();
    for h in 0..3 {
        let host = format!("host{h}");
        let file = run.join(format!("{host}.xplane.pb"));
        let theirs = reference(&["step-work", file.to_str().unwrap()]);
        let theirs = theirs.as_array().unwrap();
        let ours: Vec<&serde_json::Value> = steps.iter().filter(|s| s["host"] == *host).collect();
        assert_eq!(ours.len(), theirs.len(), "{host}");
        let mut offsets = std::collections::BTreeSet::new();
        for r in theirs {
            let s = ours.iter().find(|s| s["step_num"] == r["step_num"]).unwrap();
            assert!(r["busy_ps"].as_i64().unwrap() > 0, "{host}: {r}");
            assert_eq!(s["work_duration_ps"], r["work_duration_ps"], "{host} step {}", r["step_num"]);
            assert_eq!(s["device_work_ps"], r["busy_ps"], "{host} step {}", r["step_num"]);
            offsets.insert(s["work_start_ps"].as_i64().unwrap() - r["work_start_ps"].as_i64().unwrap());
        }
        assert_eq!(offsets.len(), 1, "{host}: {offsets:?}");
    }
    let per_step = |v: &serde_json::Value, key: &str| median(field(v, key));
    let (device, host) = (per_step(&a, "duration_ps"), per_step(&a, "host_duration_ps"));
    let twin = per_step(&json(&["steps", synced]), "duration_ps");
    assert!(host * 100 < device, "host dispatch {host} ps vs device step {device} ps");
    let ratio = device as f64 / twin as f64;
    assert!((0.8..1.25).contains(&ratio), "device step {device} ps vs the synced twin's {twin} ps");
    assert!(ok(&["summary", ahead]).contains("dispatches ahead"));
    let by_host = ok(&["steps", ahead, "--json"]);
    assert_eq!(by_host, ok(&[TOGETHER, "steps", ahead, "--json"]));
    assert_eq!(by_host, ok(&["steps", ahead, "--json", "--host-at-a-time"]));
}

/// A TPU loop that never waits, as a user annotates it: the real TPU v6e inference
/// capture (100 calls of `f` on 4 chips, the first 31 returning in under a millisecond
/// while each run takes about 784 ms) with each call held in a step annotation
/// `infer` and a scope `predict` (the reference reader's `annotate-calls`). Each run
/// is linked to its call by the flows the runtime records (the call's `Execute`, an
/// execute thread, a queue thread's `DoEnqueueProgram`, the run on the chip): each
/// step's work is the reference reader's, step by step; the steps are timed on the
/// chips and add up to the chips' time without overlapping; their mean is the module
/// runs' that stepscope measures on the file as captured; the scope is credited the
/// work its calls enqueued; and the note says the host waits on the device's queue.
#[test]
fn a_tpu_loop_is_timed_by_the_runs_its_calls_enqueued() {
    let tmp = tempfile::tempdir().unwrap();
    let run = tmp.path().join("plugins/profile/2026_11_27_00_00_00");
    std::fs::create_dir_all(&run).unwrap();
    let file = run.join("tpu.xplane.pb");
    let file = file.to_str().unwrap();
    let captured = xplane("tpu-v6e-inference");
    reference_text(&[
        "annotate-calls",
        &captured,
        file,
        "--call",
        "PjitFunction(f)",
        "--step",
        "infer",
        "--scope",
        "predict",
    ]);
    let a = json(&["steps", file]);
    assert_eq!(a["timing"], "device");
    let steps = a["steps"].as_array().unwrap();
    let theirs = reference(&["step-work", file]);
    let theirs = theirs.as_array().unwrap();
    assert_eq!((steps.len(), theirs.len()), (100, 100));
    for r in theirs {
        let s = steps.iter().find(|s| s["step_num"] == r["step_num"]).unwrap();
        assert_same_work(s, r, "tpu");
    }
    // The chips run a step's calls a little apart: the steps tile their time.
    let end = |s: &serde_json::Value| s["start_ps"].as_i64().unwrap() + s["duration_ps"].as_i64().unwrap();
    for w in steps.windows(2) {
        assert!(w[1]["start_ps"].as_i64().unwrap() >= end(&w[0]), "{} then {}", w[0], w[1]);
    }
    let total: i64 = field(&a, "duration_ps").iter().sum();
    let last_end =
        theirs.iter().map(|r| r["work_start_ps"].as_i64().unwrap() + r["work_duration_ps"].as_i64().unwrap());
    assert_eq!(total, last_end.max().unwrap() - theirs[0]["work_start_ps"].as_i64().unwrap());
    let module_runs = json(&["steps", &captured]);
    assert_eq!(module_runs["source"], "module_executions");
    let mean = |v: Vec<i64>| v.iter().sum::<i64>() / v.len() as i64;
    let (ours, runs) = (mean(field(&a, "duration_ps")), mean(field(&module_runs, "duration_ps")));
    assert!((ours - runs).abs() * 100 < runs, "device step {ours} ps vs module runs {runs} ps");
    let ahead = steps.iter().filter(|s| s["host_duration_ps"].as_i64().unwrap() * 100 < ours).count();
    assert!(ahead >= 30, "{ahead} calls returned before their work ran");
    let text = ok(&["steps", file]).replace('\n', " ");
    assert!(text.contains("the host waits for room in the device's queue"), "{text}");
    assert!(!text.contains("the device waits for the host"), "{text}");
    // The scope holding each call is credited the runs it enqueued.
    let scopes = json(&["scopes", file]);
    let predict = scopes["scopes"].as_array().unwrap().iter().find(|s| s["name"] == "predict").unwrap();
    let enqueued: i64 = theirs.iter().map(|r| r["busy_ps"].as_i64().unwrap()).sum();
    assert_eq!(predict["device_work_ps"].as_i64().unwrap(), enqueued, "{predict}");

    // Stopped at 80 s, 25 s after the last call and before the runs it had queued:
    // the calls whose runs the copy does not hold are counted as the reader counts
    // them, and their steps are cut and left out.
    let cut = run.join("cut.xplane.pb");
    let cut = cut.to_str().unwrap();
    reference_text(&["cut-at", file, cut, "80000000000000"]);
    let c = json(&["steps", cut]);
    let not_run = reference(&["calls-not-run", cut]).as_u64().unwrap();
    assert!(not_run > 10, "{not_run}");
    assert_eq!(c["dispatched_not_run"].as_u64(), Some(not_run));
    let theirs = reference(&["step-work", cut]);
    for r in theirs.as_array().unwrap() {
        let s = c["steps"].as_array().unwrap().iter().find(|s| s["step_num"] == r["step_num"]).unwrap();
        assert_eq!(s["cut"].as_bool().unwrap_or(false), r["cut"].as_bool().unwrap(), "{s} vs {r}");
        assert_eq!(s.get("device_work_ps"), r.get("busy_ps").filter(|b| !b.is_null()), "{s} vs {r}");
    }
    let text = ok(&["steps", cut]);
    assert!(text.contains(&format!("at least {not_run} jitted call(s)")), "{text}");
}
