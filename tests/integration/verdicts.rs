//! Verdicts on the guides' own workflows and on small programs made to show exactly
//! one problem (scripts/capture_problems.py), each beside its fixed twin: the verdict
//! names the problem, on every surface, and never fires on the twin.

use serde_json::Value;

use crate::util::*;

fn fx(name: &str) -> String {
    fixture(name).to_str().unwrap().to_string()
}

fn findings(path: &str) -> Vec<Value> {
    json(&["advise", path])["findings"].as_array().unwrap().clone()
}

fn f64_of(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// An `io_callback` running 6 ms of Python in the middle of the step: its time is a
/// part of its own (never compute), equal to the callbacks' spans in the steps as
/// the reference reader finds them, and the first finding names it.
#[test]
fn a_host_callback_is_a_round_trip_to_python_not_compute() {
    let f = xplane("cpu-callback");
    let theirs = reference(&["cpu-ops", &f]);
    let s = json(&["summary", &f]);
    let b = &s["breakdown"];
    let steps = s["step_count"].as_i64().unwrap();
    // One device measured over the steps: the part is the callbacks' share of them.
    assert_eq!(b["step_ps"].as_i64().unwrap() * steps, theirs["steps_ps"].as_i64().unwrap());
    let callback_ps = b["host_callback_ps"].as_i64().unwrap() * steps;
    assert!((callback_ps - theirs["callback_in_steps_ps"].as_i64().unwrap()).abs() <= steps, "{b} {theirs}");
    let callback_pct = 100.0 * f64_of(&b["host_callback_ps"]) / f64_of(&b["step_ps"]);
    assert!(callback_pct > 30.0, "{b}");
    // Computing is what is left: not the 87% the device was busy.
    let compute = f64_of(&s["device_compute_pct"]);
    assert!(compute + callback_pct <= f64_of(&s["device_utilization_pct"]) + 0.1, "{s}");
    let text = ok(&["summary", &f]);
    assert!(text.contains(&format!("in host callbacks {callback_pct:.1}%")), "{text}");
    assert!(text.contains("host callbacks (Python)"), "{text}");
    // The op is a host callback, and the first finding says so and what to do.
    let ops = json(&["ops", &f]);
    let cb = (ops["ops"].as_array().unwrap().iter()).find(|r| r["name"] == "io_callback.3").unwrap();
    assert_eq!(cb["category"], "host callback");
    let all = findings(&f);
    assert_eq!(all[0]["rule"], "host-callbacks", "{all:?}");
    assert_eq!(all[0]["severity"], "critical");
    assert!(all[0]["advice"].as_str().unwrap().contains("out of the jitted step"));
    assert!(!all.iter().any(|x| x["rule"] == "dominant-op"), "a callback is no op to optimise: {all:?}");
    // The fixed twin: no callback, no such finding.
    let twin = xplane("cpu-callback-fixed");
    assert_eq!(json(&["summary", &twin])["breakdown"]["host_callback_ps"], 0);
    assert!(!findings(&twin).iter().any(|x| x["rule"] == "host-callbacks"));
    // The devices table gives the same part.
    let d = json(&["devices", &f]);
    assert_eq!(d["devices"][0]["host_callback_ps"].as_i64().unwrap(), theirs["callback_in_steps_ps"].as_i64().unwrap());
}

/// Guide 002's `with ProfileContext(...)`: one call captured without a warm-up, so the
/// capture is mostly the compilation of its program, which no step holds. The summary
/// says so first, the first finding is the compilation, and the step is cold; the
/// twin warmed up once holds no compilation and says nothing of it.
#[test]
fn a_one_off_capture_says_first_that_it_is_mostly_compilation() {
    let f = xplane("cpu-oneoff");
    let s = json(&["summary", &f]);
    let c = &s["capture"];
    // The reference reader's compile events (lowering, backend compile), whose union
    // the compile time is at least, within the capture's span.
    let compiles = reference(&["host-events", &f, "--prefixes", "backend_compile,lower_"]);
    let mut spans: Vec<(i64, i64)> = (compiles.as_array().unwrap().iter())
        .map(|e| {
            let start = e["start_ps"].as_i64().unwrap();
            (start, start + e["duration_ps"].as_i64().unwrap())
        })
        .collect();
    spans.sort_unstable();
    let union: i64 = spans
        .iter()
        .fold((0i64, i64::MIN), |(sum, end), &(a, b)| match a >= end {
            true => (sum + b - a, b),
            false => (sum + (b - end).max(0), end.max(b)),
        })
        .0;
    let compile_ps = c["compile_ps"].as_i64().unwrap();
    assert!(compile_ps >= union && compile_ps < c["span_ps"].as_i64().unwrap(), "{c} vs {union}");
    assert_eq!(c["compile_outside_steps_ps"], c["compile_ps"], "no step holds it: {c}");
    assert!(f64_of(&c["compile_pct"]) > 50.0, "{c}");
    // The step is the program's first run: cold, though it holds no compilation.
    assert_eq!(s["step_count"], 1);
    assert_eq!(s["cold_steps"], 1, "{s}");
    let text = ok(&["summary", &f]);
    let capture_line = text.lines().position(|l| l.starts_with("CAPTURE")).expect("a CAPTURE line");
    let step_line = text.lines().position(|l| l.starts_with("STEP TIME")).unwrap();
    assert!(capture_line < step_line, "{text}");
    assert!(text.contains(&format!("({:.1}%; none of it in a step)", f64_of(&c["compile_pct"]))), "{text}");
    let all = findings(&f);
    assert_eq!(all[0]["rule"], "captured-compilation", "{all:?}");
    assert_eq!(all[0]["severity"], "critical");
    assert!(all[0]["title"].as_str().unwrap().starts_with("this capture is mostly XLA compilation"), "{all:?}");
    // The warmed-up twin.
    let twin = json(&["summary", &xplane("cpu-oneoff-fixed")]);
    assert!(twin.get("capture").is_none(), "no compilation, no capture section: {twin}");
    assert!(twin.get("cold_steps").is_none(), "{twin}");
    assert!(!findings(&xplane("cpu-oneoff-fixed")).iter().any(|x| x["rule"] == "captured-compilation"));
}

/// Guide 001's optimizer comparison as written: one un-warmed step per optimizer.
/// `diff` must not call the difference of two first calls a change: each side is
/// all cold, there is no noise estimate, and it says what to capture instead.
#[test]
fn two_one_step_captures_are_not_compared_as_if_warm() {
    let (adam, sgd) = (fx("cpu-oneoff-adam"), fx("cpu-oneoff"));
    let d = json(&["diff", &adam, &sgd]);
    let st = &d["step_time"];
    assert_eq!(st["noise_known"], false, "{st}");
    assert_eq!(st["a_all_cold"], true);
    assert_eq!(st["b_all_cold"], true);
    let text = ok(&["diff", &adam, &sgd]).split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(text.contains("not a measured change"), "{text}");
    assert!(text.contains("cannot tell whether this is a change: A has no warm step and B has no warm step"), "{text}");
    assert!(text.contains("capture at least 5 warm steps a side"), "{text}");
    assert!(text.contains("A: every step is cold"), "{text}");
    // `compare` says the same of its runs.
    let text = ok(&["compare", &adam, &sgd]).split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(text.contains("have fewer than 2 warm steps: no noise estimate"), "{text}");
    // Runs with warm steps have a noise estimate.
    let warm = json(&["diff", &fx("cpu-callback-fixed"), &fx("cpu-callback")]);
    assert_eq!(warm["step_time"]["noise_known"], true);
    assert!(warm["step_time"]["noise_ps"].as_i64().unwrap() > 0);
}

/// A step that returns its optimizer state unchanged copies each buffer into a new
/// output every step: copies that compute nothing, named with the fix; the donated
/// twin has none.
#[test]
fn copies_of_unchanged_state_are_named_with_the_fix() {
    let f = xplane("cpu-stale-state");
    let all = findings(&f);
    let moving = all.iter().find(|x| x["rule"] == "data-movement").unwrap_or_else(|| panic!("{all:?}"));
    assert!(moving["advice"].as_str().unwrap().contains("donate_argnums"), "{moving}");
    // Its value is the copies' share of op time times utilisation: the op rows'.
    let ops = json(&["ops", &f]);
    let copies: f64 = (ops["ops"].as_array().unwrap().iter())
        .filter(|r| r["category"] == "copy")
        .map(|r| f64_of(&r["device_time_pct"]))
        .sum();
    let util = f64_of(&json(&["summary", &f])["device_utilization_pct"]);
    assert!((f64_of(&moving["value"]) - copies * util / 100.0).abs() < 1e-6, "{moving}");
    assert!(copies > 40.0, "{copies}");
    assert!(!findings(&xplane("cpu-stale-state-fixed")).iter().any(|x| x["rule"] == "data-movement"));
}

/// Runs are put in the order their captures started: the manifest's start, not the
/// files' time (a copy changes it), and names in natural order (`_2` before `_10`).
#[test]
fn history_orders_runs_by_when_their_captures_started() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("profiles");
    // Three named runs whose files were copied newest first, so file times disagree
    // with the manifests' start times.
    let src = std::path::Path::new(&xplane("cpu-callback")).to_path_buf();
    let starts = [("optimizer_c", 3_000_000_000u64), ("optimizer_a", 1_000_000_000), ("optimizer_b", 2_000_000_000)];
    for (name, _) in starts.iter().rev() {
        let dir = root.join("plugins/profile").join(name);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::copy(&src, dir.join("vm.xplane.pb")).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    for (name, started) in starts {
        let manifest = format!("{{\"schema\": \"stepscope.manifest/1\", \"started_unix_ns\": {started}}}");
        std::fs::write(root.join("plugins/profile").join(name).join("stepscope_manifest.json"), manifest).unwrap();
    }
    let h = json(&["history", root.to_str().unwrap()]);
    let order: Vec<String> = (h["runs"].as_array().unwrap().iter())
        .map(|r| r["label"].as_str().unwrap().rsplit('/').next().unwrap().to_string())
        .collect();
    assert_eq!(order, ["optimizer_a", "optimizer_b", "optimizer_c"], "{h}");
    // Without manifests, same-second JAX names sort in natural order.
    let plain = tmp.path().join("plain/plugins/profile");
    for name in ["2026_11_27_10_00_00_10", "2026_11_27_10_00_00_2", "2026_11_27_10_00_00"] {
        std::fs::create_dir_all(plain.join(name)).unwrap();
        std::fs::copy(&src, plain.join(name).join("vm.xplane.pb")).unwrap();
    }
    let h = json(&["history", tmp.path().join("plain").to_str().unwrap()]);
    let order: Vec<String> = (h["runs"].as_array().unwrap().iter())
        .map(|r| r["label"].as_str().unwrap().rsplit('/').next().unwrap().to_string())
        .collect();
    assert_eq!(order, ["2026_11_27_10_00_00", "2026_11_27_10_00_00_2", "2026_11_27_10_00_00_10"], "{h}");
}

/// `compare` never puts a mean's parts beside a median without saying so: each column
/// names its statistic, and the parts sit beside the mean step they add up to (on a
/// run with a cold step, the median and the mean differ 57-fold).
#[test]
fn compare_states_the_statistic_of_each_column() {
    let (cold, warm) = (fx("cpu-compile"), fx("cpu-transformer"));
    let text = ok(&["compare", &cold, &warm]);
    let head = text.lines().next().unwrap();
    for col in ["MEDIAN STEP", "MEAN STEP", "COMPUTE", "IDLE"] {
        assert!(head.contains(col), "{head}");
    }
    assert!(head.find("MEAN STEP") < head.find("COMPUTE"), "{head}");
    let c = json(&["compare", &cold, &warm]);
    let row = &c["runs"][0];
    let b = &row["breakdown"];
    assert!(b["step_ps"].as_i64().unwrap() > 10 * row["step_time"]["median_ps"].as_i64().unwrap(), "{row}");
    assert!(b["device_compute_ps"].as_i64() <= b["step_ps"].as_i64());
    assert!(text.contains("COMPUTE, IDLE and UTIL: the parts of its MEAN STEP"), "{text}");
}

/// One execution is one run of the instruction within one run of its program: an
/// XLA:CPU `sort` split over two threads records two events a run, one execution
/// (its time per execution and its rates are per run). Every op of the CPU captures
/// has the reference reader's executions.
#[test]
fn an_op_execution_is_one_run_not_one_event() {
    for name in ["cpu-sort", "cpu-transformer", "cpu-stale-state"] {
        let f = xplane(name);
        let theirs = reference(&["cpu-ops", &f]);
        let ours = json(&["ops", &f, "--top", "0"]);
        let mut want: Vec<(String, u64, u64)> = (theirs["ops"].as_array().unwrap().iter())
            .map(|r| {
                (r["name"].as_str().unwrap().into(), r["count"].as_u64().unwrap(), r["executions"].as_u64().unwrap())
            })
            .collect();
        let mut got: Vec<(String, u64, u64)> = (ours["ops"].as_array().unwrap().iter())
            .map(|r| {
                (r["name"].as_str().unwrap().into(), r["count"].as_u64().unwrap(), r["executions"].as_u64().unwrap())
            })
            .collect();
        want.sort();
        got.sort();
        assert_eq!(got, want, "{name}");
    }
    let ops = json(&["ops", &xplane("cpu-sort")]);
    let sort = (ops["ops"].as_array().unwrap().iter()).find(|r| r["name"] == "sort.0").unwrap();
    assert_eq!((sort["count"].as_u64(), sort["executions"].as_u64()), (Some(10), Some(5)), "{sort}");
    // The average is per execution: its total over the 5 runs.
    assert_eq!(sort["avg_ps"].as_i64().unwrap(), sort["total_ps"].as_i64().unwrap() / 5, "{sort}");
}

/// The spans of the host events called `name` inside the steps the reference reader
/// finds in `file`: their total, clipped to the steps.
fn host_spans_in_steps(file: &str, name: &str) -> i64 {
    let steps: Vec<(i64, i64)> = (reference(&["steps", file]).as_array().unwrap().iter())
        .map(|s| {
            let start = s["start_ps"].as_i64().unwrap();
            (start, start + s["duration_ps"].as_i64().unwrap())
        })
        .collect();
    (reference(&["host-events", file, "--names", name]).as_array().unwrap().iter())
        .map(|e| {
            let (lo, hi) =
                (e["start_ps"].as_i64().unwrap(), e["start_ps"].as_i64().unwrap() + e["duration_ps"].as_i64().unwrap());
            steps.iter().map(|&(a, b)| (hi.min(b) - lo.max(a)).max(0)).sum::<i64>()
        })
        .sum()
}

/// The same `io_callback` on a GPU: the op is two copies of a few µs (its operand to
/// the host, its result back) and the GPU waits in between while the host runs the
/// Python (`io_callback.3` on the host's thread). That wait is the callback's time, not
/// idle the host is blamed for, and the first finding names the callback; its
/// evidence counts executions (one a step), not the copies.
#[test]
fn a_host_callback_on_a_gpu_is_the_devices_wait_for_python() {
    let f = xplane("gpu-callback");
    let s = json(&["summary", &f]);
    let b = &s["breakdown"];
    let steps = s["step_count"].as_i64().unwrap();
    let callback_ps = b["host_callback_ps"].as_i64().unwrap() * steps;
    // The host's callback spans in the steps, less what the GPU still ran of the step
    // before the callback's copy could start: between 90% and all of them.
    let host_ps = host_spans_in_steps(&f, "io_callback.3");
    assert!(callback_ps <= host_ps && callback_ps * 10 >= host_ps * 9, "{callback_ps} of {host_ps}");
    let callback_pct = 100.0 * f64_of(&b["host_callback_ps"]) / f64_of(&b["step_ps"]);
    assert!(callback_pct > 50.0, "{b}");
    let all = findings(&f);
    assert_eq!(all[0]["rule"], "host-callbacks", "{all:?}");
    assert_eq!(all[0]["severity"], "critical");
    let evidence = all[0]["evidence"][0]["what"].as_str().unwrap();
    assert!(
        evidence.starts_with("io_callback.3") && evidence.contains(&format!("over {steps} executions")),
        "{evidence}"
    );
    // Host-bound is what is left of idle: less than the callbacks' wait.
    if let Some(h) = all.iter().find(|x| x["rule"] == "host-bound-gaps") {
        assert!(f64_of(&h["value"]) < callback_pct / 2.0, "{h}");
    }
    let twin = xplane("gpu-callback-fixed");
    assert_eq!(json(&["summary", &twin])["breakdown"]["host_callback_ps"], 0);
    assert!(!findings(&twin).iter().any(|x| x["rule"] == "host-callbacks"));
}

/// cuDNN convolutions on a GPU: forward, backward-input and backward-filter each run
/// once a step as two or three kernels. An execution is one run (40 steps: 40), and
/// each does the forward convolution's FLOPs, 2 × batch × output features × input
/// features × the window taps that land on the input — for a 3 × 3 'SAME'
/// convolution over 56 × 56, (56 · 3 − 2)² of them — computed here from the shapes.
#[test]
fn library_convolutions_count_runs_and_do_the_forward_flops_each() {
    let f = xplane("gpu-conv");
    let steps = json(&["steps", &f])["steps"].as_array().unwrap().len() as u64;
    assert_eq!(steps, 40);
    let ops = json(&["ops", &f, "--top", "0"]);
    let convs: Vec<&Value> = (ops["ops"].as_array().unwrap().iter())
        .filter(|r| r["name"].as_str().unwrap().starts_with("cudnn-conv"))
        .collect();
    let taps = (56 * 3 - 2) * (56 * 3 - 2);
    let want = 2 * 32 * 64 * 64 * taps;
    let kinds: std::collections::BTreeSet<&str> =
        convs.iter().map(|r| r["name"].as_str().unwrap().rsplit_once('.').unwrap().0).collect();
    assert_eq!(kinds.into_iter().collect::<Vec<_>>(), ["cudnn-conv", "cudnn-conv-bw-filter", "cudnn-conv-bw-input"]);
    for r in &convs {
        assert_eq!(r["executions"].as_u64(), Some(steps), "{r}");
        assert!(r["count"].as_u64().unwrap() >= 2 * steps, "two kernels or more a run: {r}");
        assert_eq!(r["flops"].as_u64().unwrap(), want * steps, "{r}");
    }
}

/// A step that returns its state unchanged on a GPU: XLA copies the four 256 MB
/// buffers inside the step's command buffer, as memcpy nodes no instruction names.
/// They are credited to their `copy` instructions (not one opaque `command_buffer_1`
/// row called the dominant op), judged as data movement with the fix, and the twin
/// that donates the state has none.
#[test]
fn state_copied_inside_a_command_buffer_is_named_as_data_movement() {
    let f = xplane("gpu-stale-state");
    let ops = json(&["ops", &f, "--top", "0"]);
    let rows = ops["ops"].as_array().unwrap();
    assert!(!rows.iter().any(|r| r["name"].as_str().unwrap().starts_with("command_buffer")), "{ops}");
    let copies: Vec<&Value> = rows.iter().filter(|r| r["category"] == "copy").collect();
    assert_eq!(copies.len(), 4, "{copies:?}");
    for c in &copies {
        // 256 MB read and written once a step, 10 steps.
        assert_eq!(c["executions"].as_u64(), Some(10), "{c}");
        assert_eq!(c["bytes_accessed"].as_u64(), Some(2 * 64_000_000 * 4 * 10), "{c}");
    }
    let all = findings(&f);
    assert!(!all.iter().any(|x| x["rule"] == "dominant-op"), "{all:?}");
    let moving = all.iter().find(|x| x["rule"] == "data-movement").unwrap_or_else(|| panic!("{all:?}"));
    assert!(moving["advice"].as_str().unwrap().contains("donate_argnums"), "{moving}");
    assert!(!all.iter().any(|x| x["rule"] == "host-device-copies"), "no copy crossed to the host: {all:?}");
    assert!(!findings(&xplane("gpu-stale-state-fixed")).iter().any(|x| x["rule"] == "data-movement"));
}

/// Every single-problem program beside its fixed twin (tests/fixtures/twins.json, CPU
/// and GPU): where fixing it measured a gain of 10% or more, the first finding names
/// its cause (never a symptom: idle, host-bound, jitter); the twin gets no finding of
/// that cause at warning or worse; where the fix measured no gain (a NumPy batch on
/// XLA:CPU), no such finding either.
#[test]
fn the_first_finding_names_the_cause_the_twin_removes() {
    let twins: Value =
        serde_json::from_str(&std::fs::read_to_string(fixture("twins.json")).unwrap()).expect("twins.json");
    let cause = |program: &str| match program {
        "callback" => "host-callbacks",
        "stale-state" => "data-movement",
        "recompile" => "recompilation",
        "h2d-copy" => "host-device-copies",
        "op-by-op" => "many-dispatches",
        "sleep" => "input-bound",
        "matmul" => "dominant-op",
        "straggler" | "pod-straggler" => "stragglers",
        other => panic!("no cause named for {other}"),
    };
    let serious = |f: &Value| f["severity"] == "critical" || f["severity"] == "warning";
    for t in twins["timings"].as_array().unwrap() {
        let (program, gain) = (t["program"].as_str().unwrap(), f64_of(&t["gain_pct"]));
        let [problem, fixed] = [0, 1].map(|k| capture(t["fixtures"][k].as_str().unwrap()));
        let (all, twin) = (findings(&problem), findings(&fixed));
        let at = format!("{} {program} (gain {gain}%)", t["platform"]);
        if gain >= 10.0 {
            assert_eq!(all[0]["rule"], cause(program), "{at}: {all:?}");
        } else {
            assert!(!all.iter().any(|f| f["rule"] == cause(program) && serious(f)), "{at}: {all:?}");
        }
        assert!(!twin.iter().any(|f| f["rule"] == cause(program) && serious(f)), "{at} twin: {twin:?}");
    }
}

/// #71 item 9: where a host drives each device from a thread of its own, the devices
/// run their steps at different times, and each step's device busy is the devices'
/// busy in their own runs of the step: not the first device's run's span, in which
/// the other device ran nothing (which halved the busy time and made half of each
/// step idle). Over the steps, the busy time is the reference reader's busy time of
/// both devices, halved (the mean of two), and no step is more than 5% idle (both
/// devices ran their steps back to back).
#[test]
fn a_devices_step_at_its_own_time_is_measured_in_its_own_run() {
    let f = xplane("cpu-threads");
    let steps = json(&["steps", &f]);
    let steps = steps["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 8);
    let busy: i64 = steps.iter().map(|s| s["device_busy_ps"].as_i64().unwrap()).sum();
    let theirs = reference(&["cpu-ops", &f])["busy_ps"].as_i64().unwrap();
    assert!((busy * 2 - theirs).abs() <= 8, "ours {busy} × 2, the reference's {theirs}");
    for s in steps {
        let (idle, duration) = (s["device_idle_ps"].as_i64().unwrap(), s["duration_ps"].as_i64().unwrap());
        assert!(idle * 20 < duration, "step {}: idle {idle} of {duration}", s["step_num"]);
    }
}

/// #71 item 12: a share never divides one statistic by another's kind. In a loop
/// that never syncs, the steps are timed on the device, while the host scopes are
/// measured in the steps' host spans: a scope's `% STEP` is of the mean step on the
/// host (the reference reader's mean annotation), so the step's own scope is 100%,
/// not 126% of the device's step, and the input work's share is of the same.
#[test]
fn a_scopes_share_is_of_the_step_on_the_host_where_it_ran() {
    let f = xplane("cpu-nosync");
    let s = json(&["scopes", &f]);
    let theirs = reference(&["steps", &f]);
    let theirs = theirs.as_array().unwrap();
    let mean = theirs.iter().map(|s| s["duration_ps"].as_i64().unwrap()).sum::<i64>() / theirs.len() as i64;
    assert_eq!(s["host_step_ps"].as_i64().unwrap(), mean);
    assert_ne!(s["step_ps"], s["host_step_ps"], "the steps are timed on the device");
    for r in s["scopes"].as_array().unwrap() {
        let want = 100.0 * r["per_step_ps"].as_f64().unwrap() / mean as f64;
        assert!((r["step_pct"].as_f64().unwrap() - want).abs() < 1e-9, "{r}");
        assert!(r["step_pct"].as_f64().unwrap() <= 100.0 + 1e-9, "{r}");
    }
    let input = &s["input"];
    let want = 100.0 * input["host_input_ps"].as_f64().unwrap() / mean as f64;
    assert!((input["host_input_pct"].as_f64().unwrap() - want).abs() < 1e-9, "{input}");
}
