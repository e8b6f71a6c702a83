//! `stepscope memory`: allocator peaks and live allocations equal an independent
//! replay of the same events; the device-memory pprof equals an independent reading.

use crate::util::*;

fn path(rel: &str) -> String {
    fixture(rel).to_str().unwrap().to_string()
}

#[test]
fn allocator_peaks_equal_the_reference_replay() {
    for rel in ["rocm-mi300x-gemm/tw003.xplane.pb", "tpu-v6e-inference/tpu_inference_2.xplane.pb"] {
        let f = path(rel);
        let ours = json(&["memory", &f, "--top", "1000"]);
        assert_eq!(ours["schema"], "stepscope.memory/1");
        let theirs = reference(&["memory", &f]);
        let theirs = theirs.as_object().unwrap();
        let allocators = ours["allocators"].as_array().unwrap();
        assert_eq!(allocators.len(), theirs.len(), "{rel}: allocators");
        for a in allocators {
            let name = a["name"].as_str().unwrap();
            let r = &theirs[name];
            for key in ["allocations", "deallocations", "peak_in_use_bytes", "peak_time_ps"] {
                assert_eq!(a[key], r[key], "{rel} {name} {key}");
            }
            let live: Vec<u64> =
                a["live_at_peak"].as_array().unwrap().iter().map(|l| l["bytes"].as_u64().unwrap()).collect();
            let want: Vec<u64> =
                r["live_at_peak_bytes"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap()).collect();
            assert_eq!(live, want, "{rel} {name}: live allocations at the peak");
            let tracked: u64 = live.iter().sum();
            assert_eq!(
                a["untracked_at_peak_bytes"].as_u64().unwrap(),
                a["peak_in_use_bytes"].as_u64().unwrap().saturating_sub(tracked)
            );
            // The timeline holds the peak and nothing above it.
            let tl = a["timeline"].as_array().unwrap();
            let max = tl.iter().map(|p| p["in_use_bytes"].as_u64().unwrap()).max().unwrap();
            assert_eq!(max, a["peak_in_use_bytes"].as_u64().unwrap());
        }
    }
}

#[test]
fn tpu_peak_is_the_three_5gb_buffers_of_device_0() {
    // The TPU capture allocates f32[5,1024,1024,256] (5 GiB) buffers; device 0 holds three.
    let v = json(&["memory", &path("tpu-v6e-inference/tpu_inference_2.xplane.pb")]);
    let a = &v["allocators"][0];
    assert_eq!(a["name"], "TPU:0");
    let big: Vec<&serde_json::Value> =
        a["live_at_peak"].as_array().unwrap().iter().filter(|l| l["bytes"] == 5_368_709_120u64).collect();
    assert_eq!(big.len(), 3, "{a}");
    assert!(big.iter().any(|l| l["shape"].as_str().unwrap().starts_with("f32[5,1024,1024,256]")));
    let cap = a["capacity_bytes"].as_u64().unwrap();
    assert!(cap > a["peak_in_use_bytes"].as_u64().unwrap());
}

#[test]
fn device_memory_pprof_totals_equal_the_reference() {
    let dir = fixture("cpu-transformer/plugins/profile/2026_11_21_22_29_17");
    let prof = dir.join("memory.prof");
    let theirs = reference(&["pprof", prof.to_str().unwrap()]);
    // Found beside the run, and given explicitly: the same numbers.
    for args in [
        vec!["memory", dir.to_str().unwrap()],
        vec!["memory", dir.to_str().unwrap(), "--pprof", prof.to_str().unwrap()],
    ] {
        let v = json(&args);
        let p = &v["device_memory_profile"];
        assert_eq!(p["total_bytes"], theirs["total_bytes"]);
        assert_eq!(p["buffer_count"], theirs["buffer_count"]);
        assert_eq!(p["executable_count"], theirs["executable_count"]);
        assert!(theirs["executable_count"].as_i64().unwrap() > 0, "the capture holds executables: {theirs}");
        for d in p["by_device"].as_array().unwrap() {
            assert_eq!(d["bytes"], theirs["by_device"][d["name"].as_str().unwrap()]);
        }
        // Sites add up to the total; the largest is in the capture script's step.
        let sites = p["by_site"].as_array().unwrap();
        let sum: i64 = sites.iter().map(|s| s["bytes"].as_i64().unwrap()).sum();
        assert_eq!(sum, theirs["total_bytes"].as_i64().unwrap());
        assert!(sites[0]["site"].as_str().unwrap().contains("capture_cpu.py"), "{}", sites[0]);
    }
    // A CPU capture records no allocator events; the text says why instead of an empty table.
    let text = ok(&["memory", dir.to_str().unwrap()]);
    assert!(text.contains("XLA:CPU does not record them"), "{text}");
}

#[test]
fn a_bad_pprof_is_a_one_line_error() {
    let f = fixture("rocm-mi300x-gemm/tw003.xplane.pb");
    let out = stepscope(&["memory", f.to_str().unwrap(), "--pprof", f.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with("stepscope: "), "{err}");
}

#[test]
fn memory_table_exports_every_allocator_event() {
    let f = path("tpu-v6e-inference/tpu_inference_2.xplane.pb");
    let theirs = reference(&["memory", &f]);
    let csv = ok(&["export", &f, "--format", "csv", "--table", "memory", "-o", "-"]);
    let mut lines = csv.lines();
    assert_eq!(lines.next().unwrap(), "host,allocator,time_ps,in_use_bytes");
    let mut events: std::collections::HashMap<String, (u64, u64)> = Default::default();
    for l in lines {
        let cols: Vec<&str> = l.split(',').collect();
        let e = events.entry(cols[1].to_string()).or_default();
        e.0 += 1;
        e.1 = e.1.max(cols[3].parse().unwrap());
    }
    for (name, r) in theirs.as_object().unwrap() {
        let n = r["allocations"].as_u64().unwrap() + r["deallocations"].as_u64().unwrap();
        assert_eq!(events[name], (n, r["peak_in_use_bytes"].as_u64().unwrap()), "{name}");
    }
    // A CPU capture has no allocator events: a clean error.
    let cpu = path("cpu-transformer/plugins/profile/2026_11_21_22_29_17/vm.xplane.pb");
    let err = assert_clean_error(&["export", &cpu, "--format", "csv", "--table", "memory", "-o", "-"]);
    assert!(err.contains("allocator events"), "{err}");
}

#[test]
fn a_device_memory_profile_alone_is_read_as_one() {
    // `stepscope memory FILE.prof`: the pprof summarised as beside its run, no
    // allocators and no note about them.
    let run = path("cpu-transformer/plugins/profile/2026_11_21_22_29_17");
    let prof = format!("{run}/memory.prof");
    let alone = json(&["memory", &prof]);
    let beside = json(&["memory", &run]);
    assert_eq!(alone["schema"], "stepscope.memory/1");
    assert_eq!(alone["allocators"].as_array().unwrap().len(), 0);
    let (a, b) = (&alone["device_memory_profile"], &beside["device_memory_profile"]);
    assert!(a["total_bytes"].as_u64().unwrap() > 0, "{a}");
    for key in ["total_bytes", "buffer_count", "executable_count", "by_device", "by_kind", "by_site"] {
        assert_eq!(a[key], b[key], "{key}");
    }
    let text = ok(&["memory", &prof]);
    assert!(text.contains("DEVICE MEMORY PROFILE") && !text.contains("no allocator events"), "{text}");
    let err = assert_clean_error(&["memory", &prof, "--pprof", &prof]);
    assert!(err.contains("give one of them"), "{err}");
}

/// The summary's MEMORY line (user guide 003: "Memory Profile → Peak: 3.2GB / 8GB"):
/// the allocator nearest its capacity, its peak the reference replay's.
#[test]
fn summary_shows_the_memory_peak_against_capacity() {
    for rel in ["gpu-bf16", "rocm-mi300x-gemm/tw003.xplane.pb", "tpu-v6e-inference/tpu_inference_2.xplane.pb"] {
        let f = if rel.contains('/') { path(rel) } else { xplane(rel) };
        let s = json(&["summary", &f]);
        let m = &s["memory_peak"];
        let theirs = reference(&["memory", &f]);
        let name = m["allocator"].as_str().unwrap();
        assert_eq!(m["peak_bytes"], theirs[name]["peak_in_use_bytes"], "{rel}: {m}");
        // Nearest its capacity among the allocators `memory` lists.
        let mem = json(&["memory", &f]);
        let share = |a: &serde_json::Value| {
            a["capacity_bytes"].as_f64().map(|c| 100.0 * a["peak_in_use_bytes"].as_f64().unwrap() / c)
        };
        let best = mem["allocators"].as_array().unwrap().iter().filter_map(share).fold(f64::MIN, f64::max);
        if let Some(p) = m["capacity_pct"].as_f64() {
            assert!((p - best).abs() < 1e-9, "{rel}: {p} vs {best}");
            let text = ok(&["summary", &f]);
            assert!(text.contains(&format!("({p:.1}%) on")), "{rel}: {text}");
        }
    }
    // No allocations recorded: no line.
    let cpu = json(&["summary", &xplane("cpu-clean")]);
    assert!(cpu.get("memory_peak").is_none(), "{cpu}");
    assert!(!ok(&["summary", &xplane("cpu-clean")]).contains("MEMORY"));
}

/// `stepscope buffers` over every program of a CPU, GPU, TPU and ROCm capture, in
/// each memory space the program allocates in, against the reference reader's own
/// replay of the same buffer assignments.
#[test]
fn buffer_plans_equal_the_reference_replay() {
    let cases = [
        xplane("cpu-transformer"),
        xplane("gpu-transformer"),
        xplane("gpu-cudnn-attention"),
        path("tpu-v6e-inference/tpu_inference_2.xplane.pb"),
        path("rocm-mi300x-gemm/tw003.xplane.pb"),
    ];
    let mut heaps = 0;
    for f in &cases {
        let first = json(&["buffers", f, "--top", "all"]);
        assert_eq!(first["schema"], "stepscope.buffers/1");
        let mut spaces = vec![0i64];
        // Listed only where the program allocates in other spaces.
        if let Some(others) = first["other_memory_spaces"].as_array() {
            spaces.extend(others.iter().map(|s| s["memory_space"].as_i64().unwrap()));
        }
        for space in spaces {
            let theirs = reference(&["buffers", f, "--memory-space", &space.to_string()]);
            let theirs = theirs.as_object().unwrap();
            let programs: Vec<String> = first["programs"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| p["program"].as_str().unwrap().to_string())
                .collect();
            assert_eq!(programs.len(), theirs.len(), "{f}: programs");
            for program in &programs {
                let ours =
                    json(&["buffers", f, "--program", program, "--memory-space", &space.to_string(), "--top", "all"]);
                assert_eq!(ours["program"], program.as_str());
                let r = &theirs[program];
                for key in [
                    "allocated_bytes",
                    "parameter_bytes",
                    "output_bytes",
                    "constant_bytes",
                    "thread_local_bytes",
                    "temporary_bytes",
                    "peak_bytes",
                    "live_at_peak_count",
                    "live_at_peak_bytes",
                ] {
                    assert_eq!(ours[key], r[key], "{f} {program} space {space}: {key}");
                }
                match (&ours.get("heap"), &r["heap"]) {
                    (None, serde_json::Value::Null) => {}
                    (Some(h), want) => {
                        heaps += 1;
                        for key in ["allocation", "peak_live_bytes", "peak_event", "events"] {
                            assert_eq!(h[key], want[key], "{f} {program} space {space}: heap {key}");
                        }
                        // The usage curve peaks at the peak, at the peak's event.
                        let usage = h["usage"].as_array().unwrap();
                        let max = usage.iter().map(|u| u["bytes"].as_u64().unwrap()).max().unwrap_or(0);
                        assert_eq!(max, ours["peak_bytes"].as_u64().unwrap(), "{f} {program}");
                        let first_max = usage.iter().find(|u| u["bytes"].as_u64() == Some(max)).unwrap();
                        assert_eq!(first_max["event"], h["peak_event"], "{f} {program}");
                    }
                    (ours_heap, want) => panic!("{f} {program} space {space}: heap {ours_heap:?} vs {want}"),
                }
                let live = ours["live_at_peak"].as_array().unwrap();
                assert_eq!(live.len() as u64, ours["live_at_peak_count"].as_u64().unwrap());
                let sum: u64 = live.iter().map(|l| l["size_bytes"].as_u64().unwrap()).sum();
                assert_eq!(sum, ours["live_at_peak_bytes"].as_u64().unwrap(), "{f} {program}");
            }
        }
    }
    assert!(heaps >= 20, "heaps replayed: {heaps}");
}

/// The default program is the one that ran longest; its largest live buffers name the
/// instruction, shape and user line that made them, as `hlo` shows that instruction.
#[test]
fn buffers_name_the_instruction_shape_and_line_of_each_buffer() {
    let f = xplane("gpu-transformer");
    let b = json(&["buffers", &f, "--top", "5"]);
    let top_module = json(&["ops", &f, "--by", "module"])["ops"][0]["name"].as_str().unwrap().to_string();
    assert_eq!(b["module"], top_module.as_str());
    let live = b["live_at_peak"].as_array().unwrap();
    assert_eq!(live.len(), 5);
    for l in live {
        let name = l["instruction"].as_str().unwrap();
        let hlo = json(&["hlo", &f, name, "--module", b["program"].as_str().unwrap()]);
        let i = &hlo["instruction"];
        assert_eq!(l["opcode"], i["opcode"], "{name}");
        // An array value's shape is the instruction's, and its size the shape's bytes.
        if !i["shape"].as_str().unwrap().starts_with('(') {
            assert_eq!(l["shape"], i["shape"], "{name}");
            assert_eq!(l["size_bytes"], i["shape_bytes"], "{name}");
        }
        let line = format!("{}:{}", i["source_file"].as_str().unwrap(), i["source_line"]);
        assert_eq!(l["source"].as_str().unwrap(), line, "{name}");
    }
    // A program that is not there: the programs that are.
    let err = assert_clean_error(&["buffers", &f, "--program", "jit_nothing"]);
    assert!(err.contains("jit_train_step"), "{err}");
    // A trace JSON file has no HLO.
    let err =
        assert_clean_error(&["buffers", &path("gpu-transformer/plugins/profile/2026_11_23_07_47_56/vm.trace.json.gz")]);
    assert!(err.contains("no program's buffer assignment"), "{err}");
}

/// A GPU allocation that records no op is named by the program whose run made it (a
/// `…Execute (MODULE)` event around it, as the reference reader finds them) and by
/// what its size is in that program's plan (`stepscope buffers`).
#[test]
fn live_allocations_without_an_op_name_the_program_run_that_made_them() {
    let f = xplane("gpu-transformer");
    let m = json(&["memory", &f, "--top", "1000"]);
    let a = m["allocators"].as_array().unwrap().iter().find(|a| a["name"] == "GPU_0_bfc").unwrap();
    let runs = reference(&["host-events", &f, "--prefixes", "CommonPjRtLoadedExecutable::Execute ("]);
    let runs = runs.as_array().unwrap();
    assert!(!runs.is_empty());
    let mut named = 0;
    for l in a["live_at_peak"].as_array().unwrap() {
        let Some(program) = l["program"].as_str() else { continue };
        named += 1;
        let t = l["allocated_at_ps"].as_i64().unwrap();
        let around = runs.iter().any(|r| {
            let (s, d) = (r["start_ps"].as_i64().unwrap(), r["duration_ps"].as_i64().unwrap());
            r["name"].as_str().unwrap().ends_with(&format!("({program})")) && s <= t && t <= s + d
        });
        assert!(around, "{l}: no run of {program} around it");
        let plan = json(&["buffers", &f, "--program", program, "--top", "all"]);
        let requested = l["requested_bytes"].as_u64().unwrap();
        match l["planned_as"].as_str().unwrap_or("") {
            "temporaries" => assert_eq!(requested, plan["heap"]["size_bytes"].as_u64().unwrap(), "{l}"),
            p if p.starts_with("output (one of ") => {
                let n = (plan["allocations"].as_array().unwrap().iter())
                    .filter(|x| x["kind"] == "output" && x["size_bytes"].as_u64() == Some(requested))
                    .count();
                assert_eq!(p, format!("output (one of {n})"), "{l}");
            }
            p if p.starts_with("output ") => {
                let outputs: Vec<&serde_json::Value> = (plan["allocations"].as_array().unwrap().iter())
                    .filter(|x| x["kind"] == "output" && x["size_bytes"].as_u64() == Some(requested))
                    .collect();
                assert_eq!(outputs.len(), 1, "{l}");
                assert_eq!(p, format!("output {}", outputs[0]["instruction"].as_str().unwrap()), "{l}");
            }
            other => panic!("{l}: planned as {other:?}"),
        }
    }
    // The program's temporaries and its outputs, all live at the peak.
    assert!(named >= 10, "{named} named");
}

/// The heap's buffers over program order (#75 item 11, XProf's buffer lifetime chart):
/// those live across the peak event hold exactly the reference reader's heap peak, the
/// events they span lie inside the trace, and each names its HLO value and shape.
#[test]
fn the_heaps_buffer_lifetimes_hold_its_peak() {
    let file = crate::util::xplane("gpu-transformer");
    let ours = crate::util::json(&["buffers", &file]);
    let program = ours["program"].as_str().unwrap().to_string();
    let theirs = crate::util::reference(&["buffers", &file]);
    let heap = &theirs[&program]["heap"];
    let h = &ours["heap"];
    assert_eq!(h["peak_event"], heap["peak_event"]);
    let (events, peak) = (h["events"].as_u64().unwrap(), h["peak_event"].as_u64().unwrap());
    let lives = h["lifetimes"].as_array().unwrap();
    assert_eq!(lives.len() as u64, h["lifetime_count"].as_u64().unwrap(), "none left out of this program's");
    let mut at_peak = 0u64;
    for l in lives {
        let (from, to) = (l["from_event"].as_u64().unwrap(), l["to_event"].as_u64().unwrap());
        assert!(from <= to && to < events, "{l}");
        assert!(!l["instruction"].as_str().unwrap().is_empty() && !l["shape"].as_str().unwrap().is_empty(), "{l}");
        if from <= peak && peak < to {
            at_peak += l["size_bytes"].as_u64().unwrap();
        }
    }
    assert_eq!(at_peak, heap["peak_live_bytes"].as_u64().unwrap());
}
