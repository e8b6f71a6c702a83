//! The what-if model (docs/whatif.md): each single-problem program's first finding
//! projects the gain its fixed twin measured outside the profiler; the replay of the
//! unchanged steps reproduces them, part for part as the breakdown names them; and
//! `stepscope whatif` gives the same projection as the finding that assumed its edit.

use serde_json::Value;

use crate::util::*;

fn f64_of(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// Within 20% of the measured gain, or 3 points of the step, whichever is larger
/// (#72's bar).
fn close_enough(projected_pct: f64, measured_pct: f64) -> bool {
    (projected_pct - measured_pct).abs() <= (0.2 * measured_pct.abs()).max(3.0)
}

/// Pairs the model misses, with why (docs/whatif.md). Each stays listed only while it
/// misses: the test fails when one comes within the bar, so the list cannot go stale.
const KNOWN_MISSES: [(&str, &str, &str); 3] = [
    (
        "cpu",
        "op-by-op",
        "--jit removes the dispatch waits and the fused elementwise ops (39% of the profiled step) but not \
         the slower un-fused dots of op-by-op code; the profiled twin gained 46%, the timer 54%",
    ),
    (
        "cpu",
        "straggler",
        "two devices on two cores: the profiler slows the step (profiled median 46 ms, the timer's 28 ms) and \
         the devices' contention; --balance projects 32% against the timer's 43% (31% to 48% over three \
         timings of the same pair)",
    ),
    (
        "cpu",
        "pod-straggler",
        "two processes on two cores: the straggler's extra work also slows its peer, whose compute is 14% \
         longer beside it than in the balanced twin; --balance gives the straggler its peer's work as measured, \
         20% of the step, against the timer's 35% (the profiled twin's 28%)",
    ),
];

/// Every pair of tests/fixtures/twins.json whose fix measured a gain of 10% or more:
/// the first finding carries a projected gain within #72's bar of the measured one
/// (but for [`KNOWN_MISSES`]), and `stepscope whatif` with the edit it names projects
/// the same gain.
#[test]
fn the_first_findings_gain_is_what_the_twin_measured() {
    let twins: Value =
        serde_json::from_str(&std::fs::read_to_string(fixture("twins.json")).unwrap()).expect("twins.json");
    let mut report = Vec::new();
    let mut misses = Vec::new();
    for t in twins["timings"].as_array().unwrap() {
        let measured = f64_of(&t["gain_pct"]);
        if measured < 10.0 {
            continue;
        }
        let problem = capture(t["fixtures"][0].as_str().unwrap());
        let advice = json(&["advise", &problem]);
        let first = &advice["findings"][0];
        let at = format!("{} {} (measured {measured}%)", t["platform"], t["program"]);
        let projected = f64_of(&first["gain_pct"]);
        report.push(format!("{at}: {} projects {projected:.1}%", first["rule"]));
        let known = KNOWN_MISSES.iter().find(|k| t["platform"] == k.0 && t["program"] == k.1);
        match (close_enough(projected, measured), known) {
            (false, None) => misses.push(format!("{at}: {} projects {projected:.1}%", first["rule"])),
            (true, Some(k)) => {
                misses.push(format!("{at}: now within the bar ({projected:.1}%): drop it from KNOWN_MISSES ({})", k.2))
            }
            _ => {}
        }
        // The same edit, asked for by hand, projects the same gain.
        let edit = first["gain_edit"].as_str().unwrap().to_string();
        let mut args = vec!["whatif".to_string(), problem.clone()];
        args.extend(split_edit(&edit));
        let by_hand = json(&args.iter().map(String::as_str).collect::<Vec<_>>());
        assert_eq!(by_hand["gain_ps"], first["gain_ps"], "{at}: whatif {edit}");
        assert_eq!(by_hand["schema"], "stepscope.whatif/1");
    }
    eprintln!("{}", report.join("\n"));
    assert!(misses.is_empty(), "outside #72's bar:\n{}", misses.join("\n"));
}

/// `--scale dot.1=0 --remove callbacks` → its words, each flag's value kept with it
/// (an op name may not hold a space, so the words split on spaces).
fn split_edit(edit: &str) -> Vec<String> {
    edit.split(' ').map(str::to_string).collect()
}

/// The unchanged replay reproduces every step of the fixtures with steps (within
/// 5%; every step replayed), and the parts it replays are the breakdown's: on a run of
/// one device, each part's mean equals the summary's (the same named time).
#[test]
fn the_unchanged_replay_is_the_breakdown() {
    for name in ["cpu-callback", "gpu-callback", "cpu-recompile", "gpu-h2d-copy", "gpu-op-by-op", "cpu-sleep-step"] {
        let path = xplane(name);
        let p = json(&["whatif", &path, "--remove", "compile", "--steps"]);
        let s = json(&["summary", &path]);
        assert_eq!(p["steps_left_out"], 0, "{name}");
        assert!(f64_of(&p["replay_error_max_pct"]) <= 5.0, "{name}: {p}");
        for step in p["per_step"].as_array().unwrap() {
            assert_eq!(step["replayed_ps"], step["measured_ps"], "{name}: {step}");
        }
        assert_eq!(p["steps"], s["step_count"], "{name}");
        let b = &s["breakdown"];
        let part = |node: &str| {
            p["parts"]
                .as_array()
                .unwrap()
                .iter()
                .find(|n| n["node"] == node)
                .map_or(0, |n| n["measured_ps"].as_i64().unwrap())
        };
        let idle = ["host_work", "dispatch", "queued", "tail"].map(part).iter().sum::<i64>();
        let pairs = [
            ("compute", part("compute"), b["device_compute_ps"].as_i64().unwrap()),
            ("callbacks", part("callback"), b["host_callback_ps"].as_i64().unwrap()),
            ("compile", part("compile"), b["compile_ps"].as_i64().unwrap()),
            ("idle", idle, b["device_idle_ps"].as_i64().unwrap()),
        ];
        let n = p["steps"].as_i64().unwrap();
        for (what, replayed, breakdown) in pairs {
            // Each a mean of n steps in whole picoseconds.
            assert!((replayed - breakdown).abs() <= n, "{name} {what}: replay {replayed} vs breakdown {breakdown}");
        }
    }
}

/// Faster device work gains nothing where the device waits for its host: op-by-op
/// code on a GPU, whose dots twice as fast leave the step as it was, while jitting it
/// removes most of it.
#[test]
fn a_host_bound_step_gains_nothing_from_faster_ops() {
    let path = xplane("gpu-op-by-op");
    let faster = json(&["whatif", &path, "--scale", "compute=0.5"]);
    let jit = json(&["whatif", &path, "--jit"]);
    let step = f64_of(&faster["step_ps"]);
    assert!(f64_of(&faster["gain_ps"]) < 0.02 * step, "{faster}");
    assert!(f64_of(&jit["gain_pct"]) > 80.0, "{jit}");
    // A device-bound step gains about what its compute loses.
    let path = xplane("cpu-matmul");
    let half = json(&["whatif", &path, "--scale", "compute=0.5"]);
    let compute = half["parts"].as_array().unwrap().iter().find(|n| n["node"] == "compute").unwrap().clone();
    let saved = f64_of(&compute["measured_ps"]) - f64_of(&compute["projected_ps"]);
    assert!(saved > 0.4 * f64_of(&compute["measured_ps"]), "{half}");
}

/// Bad edits get one line that says what to write.
#[test]
fn whatif_says_what_to_change() {
    let path = xplane("cpu-callback");
    let e = assert_clean_error(&["whatif", &path]);
    assert!(e.contains("--remove compile"), "{e}");
    let e = assert_clean_error(&["whatif", &path, "--scale", "no.such.op=0.5"]);
    assert!(e.contains("no op named \"no.such.op\"") && e.contains("stepscope ops"), "{e}");
    for bad in ["dot.1", "dot.1=-1", "dot.1=x", "=0.5"] {
        let e = assert_clean_error(&["whatif", &path, "--scale", bad]);
        assert!(e.contains("NAME=FACTOR") || e.contains("factor") || e.contains("name an op"), "{bad}: {e}");
    }
}

/// `--scale scope:S=F`, `module:M=F` and `category:C=F` scale exactly the ops the
/// reference reader puts there (by each instruction's own HLO: its JAX name stack, its
/// opcode, its module): each projects, step by step, what scaling those ops by name
/// (one set, `NAME,NAME=F`) projects; and a name that picks nothing is refused with
/// the command that lists the names.
#[test]
fn a_scope_module_or_category_edit_scales_the_ops_the_reference_puts_there() {
    let file = xplane("cpu-transformer");
    let sources = reference(&["sources", &file]);
    let ran = json(&["ops", &file, "--top", "0"]);
    // Per op that ran: its module and its instruction in the reference.
    let ran: Vec<(String, String, Value)> = (ran["ops"].as_array().unwrap().iter())
        .map(|r| {
            let (name, module) = (r["name"].as_str().unwrap(), r["module"].as_str().unwrap());
            let inst = (sources.as_object().unwrap().values())
                .filter(|m| m["module"] == module)
                .find_map(|m| m["instructions"].get(name).cloned())
                .unwrap_or(Value::Null);
            (name.to_string(), module.to_string(), inst)
        })
        .collect();
    let mut seen = std::collections::HashSet::new();
    assert!(ran.iter().all(|(n, ..)| seen.insert(n.clone())), "an op name ran in two modules: the test needs one");
    // The name stack's words, transforms opened: `jit(f)/transpose(jvp(layer0/mlp))/mul`
    // → jit f transpose jvp layer0 mlp mul.
    let words = |inst: &Value| -> Vec<String> {
        let op_name = inst["op_name"].as_str().unwrap_or("");
        op_name.replace(['(', ')'], "/").split('/').filter(|w| !w.is_empty()).map(str::to_string).collect()
    };
    let in_mlp = |inst: &Value| words(inst).windows(2).any(|w| w == ["layer0", "mlp"]);
    type Picks<'a> = Box<dyn Fn(&(String, String, Value)) -> bool + 'a>;
    let cases: [(&str, Picks); 3] = [
        ("scope:layer0/mlp", Box::new(|(_, _, inst)| in_mlp(inst))),
        ("module:jit_stage", Box::new(|(_, m, _)| m == "jit_stage")),
        ("category:dot", Box::new(|(_, _, inst)| inst["opcode"] == "dot")),
    ];
    for (target, picks) in cases {
        let names: Vec<&str> = ran.iter().filter(|r| picks(r)).map(|r| r.0.as_str()).collect();
        assert!(!names.is_empty(), "{target}: the reference puts no op that ran there");
        let by_target = json(&["whatif", &file, "--scale", &format!("{target}=0.5"), "--steps"]);
        // The same ops named, as one set.
        let set = format!("{}=0.5", names.join(","));
        let by_names = json(&["whatif", &file, "--steps", "--scale", &set]);
        assert_eq!(by_target["per_step"], by_names["per_step"], "{target} against {} ops by name", names.len());
        assert_eq!(by_target["gain_ps"], by_names["gain_ps"], "{target}");
        assert_eq!(by_target["edit"], format!("--scale {target}=0.5"));
        if target.starts_with("scope") {
            assert!(f64_of(&by_target["gain_pct"]) > 1.0, "{target}: {by_target}");
        }
    }
    // The jitted function's name may lead the scope; the scope's spelling is the user's.
    let whole = json(&["whatif", &file, "--scale", "scope:train_step/layer0/mlp=0.5"]);
    let short = json(&["whatif", &file, "--scale", "scope:layer0/mlp=0.5"]);
    assert_eq!(whole["gain_ps"], short["gain_ps"]);
    // A category's spaces are written `_`, in any case.
    let loop_fusion = json(&["whatif", &file, "--scale", "category:Loop_Fusion=0"]);
    assert!(f64_of(&loop_fusion["gain_pct"]) > 1.0, "{loop_fusion}");
    for (target, lists) in
        [("scope:layer9", "--by scope"), ("module:jit_nope", "--by module"), ("category:fft", "--by category")]
    {
        let err = assert_clean_error(&["whatif", &file, "--scale", &format!("{target}=0.5")]);
        assert!(err.contains(&format!("stepscope ops {file} {lists}")), "{target}: {err}");
    }
}

/// `steps --critical-path` gives each step's critical path (the graph replayed as measured): its parts
/// add up to the unchanged replay of the step; on one device its ops' parts are the
/// step's busy time (which the reference reader checks: tests/integration/verdicts.rs);
/// and the largest part names each single-problem program's problem.
#[test]
fn each_steps_critical_path_adds_up_to_its_replay_and_names_the_problem() {
    let ops = ["compute", "collective", "copy_to_device", "copy_to_host", "copy_on_device", "async_wait", "callback"];
    for (name, top) in [
        ("cpu-callback", "callback"),
        ("gpu-op-by-op", "dispatch"),
        ("cpu-matmul", "compute"),
        ("cpu-straggler", "compute"),
        ("cpu-dp4", "dispatch"),
    ] {
        let path = xplane(name);
        let steps = json(&["steps", &path, "--critical-path"]);
        let replay = json(&["whatif", &path, "--remove", "compile", "--steps"]);
        let one_device = json(&["devices", &path])["devices"].as_array().unwrap().len() == 1;
        for r in replay["per_step"].as_array().unwrap() {
            let st = (steps["steps"].as_array().unwrap().iter()).find(|s| s["step_num"] == r["step_num"]).unwrap();
            let parts = st["critical_path"].as_array().unwrap();
            let sum: i64 = parts.iter().map(|p| p["ps"].as_i64().unwrap()).sum();
            assert_eq!(sum, r["replayed_ps"].as_i64().unwrap(), "{name} step {}", r["step_num"]);
            let sizes: Vec<i64> = parts.iter().map(|p| p["ps"].as_i64().unwrap()).collect();
            assert!(sizes.windows(2).all(|w| w[0] >= w[1]), "{name}: largest first: {sizes:?}");
            if one_device {
                let busy: i64 = (parts.iter())
                    .filter(|p| ops.contains(&p["node"].as_str().unwrap()))
                    .map(|p| p["ps"].as_i64().unwrap())
                    .sum();
                assert_eq!(busy, st["device_busy_ps"].as_i64().unwrap(), "{name} step {}", r["step_num"]);
            }
        }
        // The median step's largest part.
        let mut timed: Vec<&Value> =
            steps["steps"].as_array().unwrap().iter().filter(|s| s["critical_path"].is_array()).collect();
        timed.sort_by_key(|s| s["duration_ps"].as_i64().unwrap());
        let median = timed[timed.len() / 2];
        assert_eq!(median["critical_path"][0]["node"], top, "{name}: {}", median["critical_path"]);
    }
}

/// A run of several hosts, read a host at a time (the default), gives every step the
/// critical path the run read whole gives it.
#[test]
fn a_pods_critical_paths_are_the_run_read_whole() {
    let dir = fixture("cpu-pod3");
    let dir = dir.to_str().unwrap();
    let by_host = json(&["steps", dir, "--critical-path"]);
    assert_eq!(by_host, json(&[TOGETHER, "steps", dir, "--critical-path"]));
    let steps = by_host["steps"].as_array().unwrap();
    let hosts: std::collections::HashSet<&str> = steps.iter().map(|s| s["host"].as_str().unwrap()).collect();
    assert!(hosts.len() > 1, "{hosts:?}");
    assert!(steps.iter().all(|s| s["critical_path"].as_array().is_some_and(|p| !p.is_empty())), "{by_host}");
    // Without the flag, no path.
    assert!(json(&["steps", dir])["steps"][0].get("critical_path").is_none());
}

/// `diff PROBLEM FIXED --whatif EDIT` sets the first finding's projection beside the
/// fixed twin as measured: the same projection as the finding's, B's gain as the diff's
/// step time gives it, and the text says which way they differ.
#[test]
fn diff_sets_a_whatif_beside_the_fixed_run() {
    let twins: Value =
        serde_json::from_str(&std::fs::read_to_string(fixture("twins.json")).unwrap()).expect("twins.json");
    let mut compared = 0;
    for t in twins["timings"].as_array().unwrap().iter().filter(|t| t["platform"] == "cpu") {
        let (problem, fixed) =
            (capture(t["fixtures"][0].as_str().unwrap()), capture(t["fixtures"][1].as_str().unwrap()));
        let first = json(&["advise", &problem])["findings"][0].clone();
        let Some(edit) = first["gain_edit"].as_str() else { continue };
        let d = json(&["diff", &problem, &fixed, "--whatif", edit]);
        let w = &d["whatif"];
        assert_eq!(w["edit"], edit);
        assert_eq!(w["projected_gain_pct"], first["gain_pct"], "{}", t["program"]);
        assert_eq!(w["projected_step_ps"], first["projected_step_ps"], "{}", t["program"]);
        assert_eq!(w["b_step_ps"], d["step_time"]["b_median_ps"]);
        let measured = -f64_of(&d["step_time"]["delta_pct"]);
        assert!((f64_of(&w["measured_gain_pct"]) - measured).abs() < 1e-9, "{w}");
        let apart = f64_of(&w["projected_gain_pct"]) - measured;
        assert!((f64_of(&w["projected_less_measured_pct"]) - apart).abs() < 1e-9, "{w}");
        let text = ok(&["diff", &problem, &fixed, "--whatif", edit]);
        assert!(text.contains(&format!("WHAT IF A ({edit})")), "{text}");
        let says = if w["within_noise"] == true {
            "within the noise".to_string()
        } else {
            format!("{:.1} points {}", apart.abs(), if apart >= 0.0 { "over" } else { "under" })
        };
        assert!(text.replace("\n  ", " ").contains(&says), "{says}: {text}");
        compared += 1;
    }
    assert!(compared >= 5, "{compared}");
    let e =
        assert_clean_error(&["diff", &xplane("cpu-matmul"), &xplane("cpu-matmul-fixed"), "--whatif", "--scale x.9=0"]);
    assert!(e.contains("no op named \"x.9\" ran in A"), "{e}");
}

/// A device-bound loop that reads its loss every step (gpu-sync) against the same loop
/// that never waits (gpu-nosync, captured 18 s later on one H200; this pair was not
/// timed outside the profiler, so the bar is against the profiled twin): the first
/// finding is `sync-every-step`, and what it projects is within #72's bar of what the
/// twin gained. On XLA:CPU the device is the host's own cores: dispatching ahead
/// projects nothing, and its twin (cpu-nosync) gained nothing either.
#[test]
fn a_loop_that_syncs_every_step_projects_what_its_twin_that_never_waits_gained() {
    let (sync, nosync) = (xplane("gpu-sync"), xplane("gpu-nosync"));
    let first = json(&["advise", &sync])["findings"][0].clone();
    assert_eq!(first["rule"], "sync-every-step", "{first}");
    assert_eq!(first["gain_edit"], "--dispatch-ahead");
    let d = json(&["diff", &sync, &nosync, "--whatif", "--dispatch-ahead"]);
    let (projected, measured) = (f64_of(&d["whatif"]["projected_gain_pct"]), f64_of(&d["whatif"]["measured_gain_pct"]));
    assert!(measured > 10.0 && close_enough(projected, measured), "projected {projected:.1}%, measured {measured:.1}%");
    assert_eq!(projected, f64_of(&first["gain_pct"]));
    let cpu = json(&["diff", &xplane("cpu-sync"), &xplane("cpu-nosync"), "--whatif", "--dispatch-ahead"]);
    assert_eq!(f64_of(&cpu["whatif"]["projected_gain_pct"]), 0.0, "{cpu}");
    assert!(f64_of(&cpu["whatif"]["measured_gain_pct"]) < 3.0, "{cpu}");
    assert!(json(&["advise", &xplane("cpu-sync")])["findings"]
        .as_array()
        .unwrap()
        .iter()
        .all(|f| f["rule"] != "sync-every-step"));
}

/// A run whose top op is small on a host that ran it (a host of another program that
/// has an op of that name): read a host at a time, that host is read again for the
/// op's replay, so the dominant-op finding has the gain the run read whole gives it,
/// and `whatif` of the same edit (which reads the run whole) agrees.
#[test]
fn a_runs_top_op_small_on_a_host_gains_what_the_run_read_whole_gains() {
    let tmp = tempfile::tempdir().unwrap();
    run_of_fixtures(tmp.path(), "2026_11_01_00_00_00", &[("h0", "cpu-matmul"), ("h1", "cpu-sleep-step")]);
    let dir = tmp.path().to_str().unwrap();
    // The top op of the run is host h0's, and h1 ran it too, far below the threshold.
    let top = json(&["ops", dir, "--top", "1"])["ops"][0]["name"].as_str().unwrap().to_string();
    let small = json(&["ops", &xplane("cpu-sleep-step"), "--top", "0"]);
    let on_h1 = small["ops"].as_array().unwrap().iter().find(|o| o["name"] == top.as_str()).expect("h1 ran it");
    assert!(f64_of(&on_h1["device_time_pct"]) < 5.0, "{on_h1}");
    let by_host = json(&["advise", dir]);
    assert_eq!(by_host, json(&[TOGETHER, "advise", dir]));
    let first = &by_host["findings"][0];
    assert_eq!(first["rule"], "dominant-op", "{first}");
    assert_eq!(first["gain_edit"], format!("--scale {top}=0"));
    assert!(f64_of(&first["gain_pct"]) > 10.0, "{first}");
    let by_hand = json(&["whatif", dir, "--scale", &format!("{top}=0")]);
    assert_eq!(by_hand["gain_ps"], first["gain_ps"]);
}

/// A pod whose last host does about twice its peer's work before every all-reduce
/// (cpu-pod-straggler): its hosts are replayed joined at their collectives, so the
/// straggling host holds its peer back and `--balance` (the hosts given the median
/// host's work) gains what the wait costs; its balanced twin gains nothing from it.
/// The join reproduces the hosts' steps (replay error within 5%), read a host at a
/// time as read whole.
#[test]
fn a_straggling_host_holds_its_pod_back_and_balancing_the_hosts_gains_the_wait() {
    let (problem, fixed) = (capture("cpu-pod-straggler"), capture("cpu-pod-straggler-fixed"));
    let advice = json(&["advise", &problem]);
    assert_eq!(advice, json(&[TOGETHER, "advise", &problem]));
    let first = &advice["findings"][0];
    assert_eq!(first["rule"], "stragglers", "{first}");
    assert_eq!(first["gain_edit"], "--balance");
    assert_eq!(first["evidence"][0]["host"], "host1", "{first}");
    // The wait: host0's time in collectives beyond host1's, a step (the devices
    // table), bounds what balancing gains from above.
    let devices = json(&["devices", &problem]);
    let collectives: Vec<i64> =
        devices["devices"].as_array().unwrap().iter().map(|d| d["collective_ps"].as_i64().unwrap()).collect();
    let steps = json(&["steps", &problem])["steps"].as_array().unwrap().len() as i64 / 2;
    let wait_ps = (collectives[0] - collectives[1]) / steps;
    let gain_ps = first["gain_ps"].as_i64().unwrap();
    assert!(gain_ps > wait_ps / 2 && gain_ps <= wait_ps, "gain {gain_ps} ps against a wait of {wait_ps} ps a step");
    // A pod whose join misses its steps (cpu-pod3: three processes on two cores, 10%)
    // is replayed a host apart: what balancing its hosts gains is not known, and its
    // straggler finding claims none.
    let pod3 = json(&["advise", &capture("cpu-pod3")]);
    let straggler = pod3["findings"].as_array().unwrap().iter().find(|f| f["rule"] == "stragglers").expect("cpu-pod3");
    assert!(straggler.get("gain_ps").is_none(), "{straggler}");
    for (pod, most) in [(&problem, 5.0), (&fixed, 5.0)] {
        let w = json(&["whatif", pod, "--balance"]);
        assert!(f64_of(&w["replay_error_max_pct"]) <= most, "{pod}: {w}");
        if pod == &fixed {
            assert!(f64_of(&w["gain_pct"]).abs() < 3.0, "the balanced twin: {w}");
        }
    }
}
