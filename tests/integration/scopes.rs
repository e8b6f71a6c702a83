//! `stepscope scopes` and the input share: the user's host scopes equal the
//! annotation events the reference reader lists, nested by containment; device time
//! per scope agrees with the steps; input work is the union the reader's events give.

use std::collections::BTreeMap;

use crate::util::*;

/// (capture, the scope names its script wrote)
const CAPTURES: [(&str, &[&str]); 7] = [
    (
        "cpu-guide-adam/plugins/profile/2026_11_25_03_32_42/vm.xplane.pb",
        &["train", "data_loading", "fetch_batch", "to_device", "train_step", "forward_backward"],
    ),
    ("cpu-transformer/plugins/profile/2026_11_21_22_29_17/vm.xplane.pb", &["train", "data", "train_step"]),
    ("gpu-async/plugins/profile/2026_11_23_08_00_30/vm.xplane.pb", &["train", "data", "train_step"]),
    // A loop that never waits: each scope's work runs after it closes.
    ("cpu-nosync/plugins/profile/2026_11_25_20_59_01/vm.xplane.pb", &["train", "data", "train_step"]),
    (
        "gpu-host/plugins/profile/2026_11_23_07_48_54/vm.xplane.pb",
        &["train", "data", "device_put", "tiny_ops", "train_step"],
    ),
    // Compilation in the steps: XLA's passes (`algsimp`, …) run inside the dispatch.
    ("cpu-compile/plugins/profile/2026_11_21_22_29_21/vm.xplane.pb", &["train", "data", "train_step"]),
    ("gpu-compile/plugins/profile/2026_11_23_07_48_39/vm.xplane.pb", &["train", "data", "train_step"]),
];

/// The runtime's transfers to the device, which count as input work.
const TRANSFERS: &str = "DevicePut,BatchedCopyToDevice,batched_copy_array_to_devices";

fn path(rel: &str) -> String {
    fixture(rel).to_str().unwrap().to_string()
}

fn events(file: &str, names: &str, prefixes: &str) -> Vec<(String, i64, i64, i64)> {
    let v = reference(&["host-events", file, "--names", names, "--prefixes", prefixes]);
    v.as_array()
        .unwrap()
        .iter()
        .map(|e| {
            let start = e["start_ps"].as_i64().unwrap();
            (
                e["name"].as_str().unwrap().to_string(),
                e["line"].as_i64().unwrap(),
                start,
                start + e["duration_ps"].as_i64().unwrap(),
            )
        })
        .collect()
}

/// Per path: (count, total, self), nesting the events of one line by containment.
fn expected_rows(evs: &[(String, i64, i64, i64)]) -> BTreeMap<String, (u64, i64, i64)> {
    let mut rows: BTreeMap<String, (u64, i64, i64)> = BTreeMap::new();
    // (line, end, path)
    let mut open: Vec<(i64, i64, String)> = Vec::new();
    for (name, line, start, end) in evs {
        open.retain(|(l, e, _)| l != line || e > start);
        let parent = open.iter().rev().find(|(l, _, _)| l == line).map(|(_, _, p)| p.clone());
        let path = match &parent {
            Some(p) => format!("{p}/{name}"),
            None => name.clone(),
        };
        let r = rows.entry(path.clone()).or_default();
        r.0 += 1;
        r.1 += end - start;
        r.2 += end - start;
        if let Some(p) = parent {
            rows.get_mut(&p).unwrap().2 -= end - start;
        }
        open.push((*line, *end, path));
    }
    rows
}

fn union_within(mut spans: Vec<(i64, i64)>, windows: &[(i64, i64)]) -> i64 {
    spans.sort();
    let mut merged: Vec<(i64, i64)> = Vec::new();
    for (a, b) in spans {
        match merged.last_mut() {
            Some(m) if a <= m.1 => m.1 = m.1.max(b),
            _ => merged.push((a, b)),
        }
    }
    let mut total = 0;
    for (a, b) in merged {
        for (lo, hi) in windows {
            total += (b.min(*hi) - a.max(*lo)).max(0);
        }
    }
    total
}

#[test]
fn scopes_equal_the_annotation_events_nested() {
    for (rel, names) in CAPTURES {
        let f = path(rel);
        let ours = json(&["scopes", &f]);
        assert_eq!(ours["schema"], "stepscope.scopes/1");
        let want = expected_rows(&events(&f, &names.join(","), ""));
        let got: BTreeMap<String, (u64, i64, i64)> = ours["scopes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                let v = |k: &str| r[k].as_i64().unwrap();
                (r["path"].as_str().unwrap().to_string(), (v("count") as u64, v("total_ps"), v("self_ps")))
            })
            .collect();
        // Every scope the script wrote, and nothing of the runtime's.
        assert_eq!(got, want, "{rel}");
        // Depth first: each row after its parent.
        let paths: Vec<&str> = ours["scopes"].as_array().unwrap().iter().map(|r| r["path"].as_str().unwrap()).collect();
        for (i, p) in paths.iter().enumerate() {
            if let Some((parent, _)) = p.rsplit_once('/') {
                assert!(paths[..i].contains(&parent), "{rel}: {p} before its parent");
            }
        }
    }
}

#[test]
fn the_step_scope_holds_the_steps_device_time() {
    for (rel, _) in CAPTURES {
        let f = path(rel);
        let ours = json(&["scopes", &f]);
        let steps = json(&["steps", &f]);
        let st = steps["steps"].as_array().unwrap();
        let sum = |k: &str| st.iter().map(|s| s[k].as_i64().unwrap_or(0)).sum::<i64>();
        let train = ours["scopes"].as_array().unwrap().iter().find(|r| r["path"] == "train").unwrap();
        // The step scope is the steps' host span: where the steps are timed on the host,
        // the busy time in it is theirs.
        if steps["timing"] == "host" {
            assert_eq!(train["device_busy_ps"].as_i64().unwrap(), sum("device_busy_ps"), "{rel}");
        }
        assert_eq!(train["per_step_ps"].as_i64().unwrap(), sum("host_duration_ps") / st.len() as i64, "{rel}");
        assert_eq!(ours["step_count"].as_u64().unwrap(), st.len() as u64);
        // The device work launched in it (GPU: by correlation_id; XLA:CPU: the runs
        // its jitted calls started) is the steps'.
        assert_eq!(train["device_work_ps"].as_i64().unwrap(), sum("device_work_ps"), "{rel}");
        // The data scope launches the batch's copies; train_step the rest.
        let step = ours["scopes"].as_array().unwrap().iter().find(|r| r["path"] == "train/train_step").unwrap();
        assert!(step["device_work_ps"].as_i64().unwrap() > 0);
    }
}

#[test]
fn input_work_is_the_union_of_input_scopes_and_transfers_in_the_steps() {
    for (rel, names) in CAPTURES {
        let f = path(rel);
        let ours = json(&["scopes", &f]);
        let input_names: Vec<&str> = names
            .iter()
            .copied()
            .filter(|n| ["data", "data_loading", "fetch_batch", "to_device", "device_put"].contains(n))
            .collect();
        let evs = events(&f, &input_names.join(","), TRANSFERS);
        let steps = reference(&["steps", &f]);
        let windows: Vec<(i64, i64)> = steps
            .as_array()
            .unwrap()
            .iter()
            .map(|s| {
                (s["start_ps"].as_i64().unwrap(), s["start_ps"].as_i64().unwrap() + s["duration_ps"].as_i64().unwrap())
            })
            .collect();
        let total = union_within(evs.iter().map(|e| (e.2, e.3)).collect(), &windows);
        let input = &ours["input"];
        assert_eq!(input["host_input_ps"].as_i64().unwrap(), total / windows.len() as i64, "{rel}");
        let idle = input["device_idle_input_ps"].as_i64().unwrap();
        assert!(idle >= 0 && idle <= input["host_input_ps"].as_i64().unwrap(), "{rel}");
        let summary = json(&["summary", &f]);
        let b = &summary["breakdown"];
        assert_eq!(b["host_input_ps"], input["host_input_ps"], "{rel}");
        assert!(b["device_idle_input_ps"].as_i64().unwrap() <= b["device_idle_ps"].as_i64().unwrap());
        for r in ours["scopes"].as_array().unwrap() {
            assert_eq!(r["input"].as_bool().unwrap(), input_names.contains(&r["name"].as_str().unwrap()), "{r}");
        }
    }
}

#[test]
fn an_input_bound_loop_is_judged_input_bound_from_its_scopes() {
    let f = path(CAPTURES[0].0);
    let s = json(&["scopes", &f]);
    let idle_pct = s["input"]["device_idle_input_pct"].as_f64().unwrap();
    assert!(idle_pct > 30.0, "the capture loads each batch for 4.5 ms of about 11 ms: {idle_pct}");
    let advice = json(&["advise", &f]);
    let finding =
        advice["findings"].as_array().unwrap().iter().find(|x| x["rule"] == "input-bound").expect("input-bound");
    assert!((finding["value"].as_f64().unwrap() - idle_pct).abs() < 0.2, "{finding}");
    let evidence: Vec<&str> =
        finding["evidence"].as_array().unwrap().iter().map(|e| e["what"].as_str().unwrap()).collect();
    assert!(evidence.iter().any(|e| e.contains("train/data_loading")), "{evidence:?}");
    assert!(evidence.iter().any(|e| e.contains("fetch_batch")), "{evidence:?}");
    // The input share is not counted again as the host's other gaps.
    let s = json(&["summary", &f]);
    let b = &s["breakdown"];
    let other = b["device_idle_ps"].as_i64().unwrap() - b["device_idle_input_ps"].as_i64().unwrap();
    let other_pct = 100.0 * other as f64 / b["step_ps"].as_f64().unwrap();
    let gaps = advice["findings"].as_array().unwrap().iter().find(|x| x["rule"] == "host-bound-gaps");
    match gaps {
        Some(g) => assert!((g["value"].as_f64().unwrap() - other_pct).abs() < 0.1, "{g}"),
        None => assert!(other_pct <= 10.0, "{other_pct}"),
    }
    // The table says so too, with the input scopes marked.
    let text = ok(&["scopes", &f]);
    assert!(text.contains("data_loading  [input]"), "{text}");
    assert!(text.contains("input work ("), "{text}");
    // A loop that loads little is not input-bound.
    let calm = json(&["advise", &path(CAPTURES[1].0)]);
    assert!(!calm["findings"].as_array().unwrap().iter().any(|x| x["rule"] == "input-bound"));
}

#[test]
fn runs_without_scopes_say_how_to_add_them() {
    for f in [
        "tpu-v6e-inference/tpu_inference_2.xplane.pb",
        "cpu-host-tracer-off/plugins/profile/2026_11_25_01_40_18/vm.xplane.pb",
    ] {
        let s = json(&["scopes", &path(f)]);
        assert_eq!(s["scopes"].as_array().unwrap().len(), 0, "{f}: runtime events are not user scopes");
        let text = ok(&["scopes", &path(f)]);
        assert!(text.contains("TraceAnnotation"), "{text}");
    }
}

#[test]
fn diff_by_scope_puts_the_optimizers_ops_beside_the_noise() {
    let (a, b) = (path("cpu-guide-adam"), path("cpu-guide-sgd"));
    let d = json(&["diff", &a, &b, "--by", "scope", "--top", "0"]);
    assert_eq!(d["by"], "scope");
    let rows = |p: &str| -> BTreeMap<String, i64> {
        json(&["ops", p, "--by", "scope", "--top", "0"])["ops"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| (r["name"].as_str().unwrap().to_string(), r["total_ps"].as_i64().unwrap()))
            .collect()
    };
    let (ra, rb) = (rows(&a), rows(&b));
    let (na, nb) = (d["a"]["step_count"].as_i64().unwrap(), d["b"]["step_count"].as_i64().unwrap());
    let find = |name: &str| d["ops"].as_array().unwrap().iter().find(|r| r["name"] == name).unwrap().clone();
    let adam = find("train_step/adam");
    assert_eq!(adam["status"], "removed");
    assert_eq!(adam["a_per_step_ps"].as_i64().unwrap(), ra["train_step/adam"] / na);
    assert_eq!(find("train_step/sgd")["status"], "added");
    // Rows in one run only, summed.
    let only_a: Vec<&String> = ra.keys().filter(|k| !rb.contains_key(*k)).collect();
    assert_eq!(d["only_in_a"]["rows"].as_u64().unwrap(), only_a.len() as u64);
    assert_eq!(d["only_in_a"]["per_step_ps"].as_i64().unwrap(), only_a.iter().map(|k| ra[*k] / na).sum::<i64>());
    // The noise is the step times' own, robust to an outlier: from each run's median
    // absolute deviation (x 1.4826, a normal spread), of the steps as the reference
    // reader reads them; each row says whether it is within it.
    let spread = |p: &str| {
        let steps = reference(&["steps", &xplane(p)]);
        let mut v: Vec<i64> = steps.as_array().unwrap().iter().map(|s| s["duration_ps"].as_i64().unwrap()).collect();
        v.sort_unstable();
        let median =
            |v: &[i64]| if v.len() % 2 == 1 { v[v.len() / 2] } else { (v[v.len() / 2 - 1] + v[v.len() / 2]) / 2 };
        let m = median(&v);
        let mut dev: Vec<i64> = v.iter().map(|x| (x - m).abs()).collect();
        dev.sort_unstable();
        (1.4826 * median(&dev) as f64).round()
    };
    let (sa, sb) = (spread("cpu-guide-adam"), spread("cpu-guide-sgd"));
    assert_eq!(d["step_time"]["a_spread_ps"].as_f64(), Some(sa));
    assert_eq!(d["step_time"]["b_spread_ps"].as_f64(), Some(sb));
    let noise = 2.0 * (sa.powi(2) / na as f64 + sb.powi(2) / nb as f64).sqrt();
    assert!((d["step_time"]["noise_ps"].as_f64().unwrap() - noise).abs() <= 1.0);
    for r in d["ops"].as_array().unwrap().iter().chain(d["scopes"].as_array().unwrap()) {
        let within = r["delta_per_step_ps"].as_i64().unwrap().abs() < d["step_time"]["noise_ps"].as_i64().unwrap();
        assert_eq!(r["within_noise"].as_bool().unwrap(), within, "{r}");
    }
    // The host scopes, by path.
    let scopes = json(&["scopes", &a]);
    let loading = scopes["scopes"].as_array().unwrap().iter().find(|r| r["path"] == "train/data_loading").unwrap();
    let dl = d["scopes"].as_array().unwrap().iter().find(|r| r["name"] == "train/data_loading").unwrap();
    assert_eq!(dl["a_per_step_ps"].as_i64().unwrap(), loading["total_ps"].as_i64().unwrap() / na);
    // The table shows the rows only one run has and the noise.
    let text = ok(&["diff", &a, &b, "--by", "scope"]);
    assert!(text.contains("only in A:"), "{text}");
    assert!(text.contains("noise: step time spread"), "{text}");
    assert!(text.contains("HOST SCOPES"), "{text}");
    // By line: the optimizer's lines are in one run only.
    let by_line = json(&["diff", &a, &b, "--by", "line", "--top", "0"]);
    assert!(by_line["only_in_a"]["rows"].as_u64().unwrap() >= 1);
    assert!(by_line["ops"]
        .as_array()
        .unwrap()
        .iter()
        .any(|r| r["status"] == "removed" && r["name"].as_str().unwrap().contains("capture_jax.py:")));
}

#[test]
fn compare_by_scope_lines_the_runs_up_row_by_row() {
    let runs = [path("cpu-guide-adam"), path("cpu-guide-sgd"), path("cpu-guide-optax")];
    let c = json(&["compare", &runs[0], &runs[1], &runs[2], "--by", "scope", "--top", "0"]);
    assert_eq!(c["by"], "scope");
    for (k, run) in runs.iter().enumerate() {
        let steps = c["runs"][k]["step_count"].as_i64().unwrap();
        let ops = json(&["ops", run, "--by", "scope", "--top", "0"]);
        for r in ops["ops"].as_array().unwrap() {
            let row = c["rows"].as_array().unwrap().iter().find(|x| x["name"] == r["name"]).unwrap();
            assert_eq!(row["per_step_ps"][k].as_i64().unwrap(), r["self_ps"].as_i64().unwrap() / steps, "{row}");
        }
        let scopes = json(&["scopes", run]);
        for r in scopes["scopes"].as_array().unwrap() {
            let row = c["scopes"].as_array().unwrap().iter().find(|x| x["name"] == r["path"]).unwrap();
            assert_eq!(row["per_step_ps"][k].as_i64().unwrap(), r["total_ps"].as_i64().unwrap() / steps, "{row}");
        }
    }
    // Each optimizer's scope is in its run only; the largest spreads come first.
    let row = |n: &str| c["rows"].as_array().unwrap().iter().find(|x| x["name"] == n).unwrap().clone();
    assert!(row("train_step/adam")["per_step_ps"][1].is_null());
    assert!(row("train_step/optax_adam")["per_step_ps"][0].is_null());
    let spreads: Vec<i64> = c["rows"].as_array().unwrap().iter().map(|r| r["spread_ps"].as_i64().unwrap()).collect();
    assert!(spreads.windows(2).all(|w| w[0] >= w[1]));
    let text = ok(&["compare", &runs[0], &runs[1], "--by", "line"]);
    assert!(text.contains("LINE (per step)") && text.contains("HOST SCOPE (per step)"), "{text}");
}

#[test]
fn gpu_scopes_get_the_work_launched_in_them_in_a_loop_that_never_waits() {
    // gpu-nosync-scopes: the train step is launched inside `forward_backward` and runs
    // on the GPU after the scope closed; the batch's copy inside `to_device`. Each
    // scope's LAUNCHED is the device work its occurrences launched, as the reference
    // reader links kernels to launches by correlation_id (its windows: the scope's
    // events), while `fetch_batch`, which only sleeps, launched none.
    let f = crate::util::xplane("gpu-nosync-scopes");
    let rows = json(&["scopes", &f])["scopes"].as_array().unwrap().clone();
    for (scope, path) in
        [("forward_backward", "train/train_step/forward_backward"), ("to_device", "train/data_loading/to_device")]
    {
        let want: i64 = (reference(&["step-work", &f, "--windows", scope]).as_array().unwrap().iter())
            .map(|w| w["busy_ps"].as_i64().unwrap_or(0))
            .sum();
        let row = rows.iter().find(|r| r["path"] == path).unwrap();
        assert_eq!(row["device_work_ps"].as_i64(), Some(want), "{row}");
        assert!(want > 0, "{scope}");
    }
    let fetch = rows.iter().find(|r| r["path"] == "train/data_loading/fetch_batch").unwrap();
    assert_eq!(fetch["device_work_ps"], 0);
    // The work runs after the scope closed: the device was busy with it then, not in
    // the scope, so DEVICE BUSY (busy while the scope was open) is not LAUNCHED.
    let fb = rows.iter().find(|r| r["path"] == "train/train_step/forward_backward").unwrap();
    assert_ne!(fb["device_busy_ps"], fb["device_work_ps"]);
}
