//! NVIDIA captures (tests/fixtures/gpu-*, JAX 0.11.2 on an H100): kernels, steps,
//! compile and the ops of kernels that ran in XLA command buffers.

use std::collections::BTreeMap;

use crate::util::*;

fn run(name: &str) -> String {
    let dir = fixture(name).join("plugins/profile");
    let run = std::fs::read_dir(&dir).unwrap().next().unwrap().unwrap().path();
    run.join("vm.xplane.pb").to_str().unwrap().to_string()
}

/// (name → count) of every op row, by `by`.
fn op_counts(file: &str, by: &str) -> BTreeMap<String, u64> {
    let v = json(&["ops", file, "--by", by, "--top", "100000"]);
    let mut out = BTreeMap::new();
    for r in v["ops"].as_array().unwrap() {
        *out.entry(r["name"].as_str().unwrap().to_string()).or_default() += r["count"].as_u64().unwrap();
    }
    out
}

/// Every event of `plane`/`line` as the reference reader sees it.
fn ref_line(file: &str, plane: &str, line: &str) -> Vec<serde_json::Value> {
    let out = std::process::Command::new("python3")
        .arg(root().join("tests/support/xspace_ref.py"))
        .args(["dump", file, "--plane", plane, "--line", line, "--limit", "100000000"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

#[test]
fn gpu_kernel_stats_equal_the_reference_kernel_events() {
    for name in ["gpu-transformer", "gpu-bf16"] {
        let f = run(name);
        let info = json(&["info", &f]);
        let mut launches = 0u64;
        let mut total_ps = 0i64;
        let planes = info["hosts"][0]["planes"].as_array().unwrap();
        let gpu = planes.iter().find(|p| p["name"] == "/device:GPU:0").unwrap();
        for line in gpu["lines"].as_array().unwrap() {
            for e in ref_line(&f, "/device:GPU:0", line["name"].as_str().unwrap()) {
                if e["stats"].get("kernel_details").is_some() {
                    launches += 1;
                    total_ps += e["duration_ps"].as_i64().unwrap();
                }
            }
        }
        let v = json(&["kernels", &f, "--top", "100000"]);
        let rows = v["kernels"].as_array().unwrap();
        assert!(launches > 900, "{name}: {launches} kernels");
        assert_eq!(rows.iter().map(|r| r["count"].as_u64().unwrap()).sum::<u64>(), launches, "{name}");
        assert_eq!(v["kernel_time_ps"], total_ps, "{name}");
        // Every launch has its own instruction, none the command buffer's.
        assert!(rows.iter().all(|r| !r["op"].as_str().unwrap().starts_with("command_buffer")), "{name}");
    }
}

#[test]
fn gpu_steps_equal_the_reference_steps_and_warm_captures_do_not_compile() {
    for name in ["gpu-transformer", "gpu-bf16", "gpu-async"] {
        let f = run(name);
        let ours = json(&["steps", &f]);
        assert_eq!(ours["source"], "annotation", "{name}");
        let cut: Vec<serde_json::Value> = (ours["steps"].as_array().unwrap().iter())
            .map(|s| {
                serde_json::json!({"step_num": s["step_num"], "start_ps": s["host_start_ps"], "duration_ps": s["host_duration_ps"]})
            })
            .collect();
        assert_eq!(serde_json::Value::Array(cut), reference(&["steps", &f]), "{name}");
        // Warmed up before the trace: no compilation. JAX on GPU names a host-to-device
        // copy `PjRtCApiCompiler::BufferFromHostBuffer`, which is not one.
        let s = json(&["summary", &f]);
        assert_eq!(s["breakdown"]["compile_ps"], 0, "{name}");
        assert!(s["breakdown"]["device_compute_ps"].as_i64().unwrap() > 0, "{name}");
    }
    let s = json(&["steps", &run("gpu-compile")]);
    let first = &s["steps"][0];
    assert!(first["compile_ps"].as_i64().unwrap() > 1_000_000_000_000, "over 1 s compiling: {first}");
}

/// A host with one thread per GPU (the 8-GPU MI300X capture, no step annotations):
/// the threads' `jit_forward_3d_conv:XLA GPU module` events overlap, so no launch is
/// one thread's run by time alone, but each round of runs (the k-th on every thread)
/// is a step: 5 steps, each the program's kernels launched in the round on all 8 GPUs,
/// first to last, as the reference reader links them by correlation_id, with the round
/// as the host span. The first round is the GPUs' first runs one after another (22.7
/// ms); the warm rounds take 1.4-2.0 ms.
#[test]
fn one_thread_per_gpu_makes_a_step_of_each_round_of_runs() {
    let f = fixture("rocm-mi300x-conv-8gpu/tw003.xplane.pb");
    let f = f.to_str().unwrap();
    let ours = json(&["steps", f]);
    assert_eq!(ours["source"], "module_executions");
    let name = "jit_forward_3d_conv:XLA GPU module";
    let want = reference(&["step-work", f, "--windows", name, "--rounds", "--module", "jit_forward_3d_conv"]);
    let (ours, want) = (ours["steps"].as_array().unwrap(), want.as_array().unwrap());
    assert_eq!((ours.len(), want.len()), (5, 5));
    let runs = reference(&["host-events", f, "--names", name]);
    for (k, (s, w)) in ours.iter().zip(want).enumerate() {
        assert_eq!((&s["start_ps"], &s["duration_ps"]), (&w["work_start_ps"], &w["work_duration_ps"]), "{s} vs {w}");
        // The host span: the round's runs, one on each of the 8 threads.
        let (lo, hi) = (
            s["host_start_ps"].as_i64().unwrap(),
            s["host_start_ps"].as_i64().unwrap() + s["host_duration_ps"].as_i64().unwrap(),
        );
        let inside: Vec<&serde_json::Value> = (runs.as_array().unwrap().iter())
            .filter(|e| e["start_ps"].as_i64().unwrap() >= lo && e["start_ps"].as_i64().unwrap() < hi)
            .collect();
        let threads: std::collections::BTreeSet<String> = inside.iter().map(|e| e["line"].to_string()).collect();
        assert_eq!((inside.len(), threads.len()), (8, 8), "round {k}: {inside:?}");
    }
    assert_eq!(json(&["summary", f])["step_count"], 5);
}

#[test]
fn without_step_annotations_gpu_steps_are_the_train_steps_runs() {
    // gpu-unannotated: no StepTraceAnnotation. Each step is one run of the program
    // with the most kernel time, jit_train_step: the kernels launched inside one host
    // `jit_train_step:XLA GPU module` event, first to last, as the reference reader
    // links them by correlation_id; their busy time is the step's.
    // gpu-unannotated-nosync, the same loop never waiting, runs the same work a step.
    let mut busy_medians = Vec::new();
    for name in ["gpu-unannotated", "gpu-unannotated-nosync"] {
        let f = run(name);
        let ours = json(&["steps", &f]);
        assert_eq!(ours["source"], "module_executions", "{name}");
        let want = reference(&["step-work", &f, "--windows", "jit_train_step:XLA GPU module"]);
        let (ours, want) = (ours["steps"].as_array().unwrap(), want.as_array().unwrap());
        assert_eq!((ours.len(), want.len()), (6, 6), "{name}");
        for (s, w) in ours.iter().zip(want) {
            assert_eq!(s["name"], "jit_train_step");
            let (got, wanted) = ((&s["start_ps"], &s["duration_ps"]), (&w["work_start_ps"], &w["work_duration_ps"]));
            assert_eq!(got, wanted, "{name}: {s} vs {w}");
            assert_eq!(s["device_busy_ps"], w["busy_ps"], "{name}: {s} vs {w}");
        }
        // The breakdown is measured in the same steps: its busy share is theirs.
        let sm = json(&["summary", &f]);
        let busy: i64 = ours.iter().map(|s| s["device_busy_ps"].as_i64().unwrap()).sum();
        let time: i64 = ours.iter().map(|s| s["duration_ps"].as_i64().unwrap()).sum();
        let util = sm["device_utilization_pct"].as_f64().unwrap();
        assert!((util - 100.0 * busy as f64 / time as f64).abs() < 0.01, "{name}: {util} vs {busy}/{time}");
        let mut b: Vec<i64> = ours.iter().map(|s| s["device_busy_ps"].as_i64().unwrap()).collect();
        b.sort_unstable();
        busy_medians.push(b[3] as f64);
    }
    assert!((busy_medians[1] / busy_medians[0] - 1.0).abs() < 0.05, "{busy_medians:?}");
    let f = run("gpu-unannotated");
    // The batch each run was fed, loaded between runs, is its step's input work
    // (runs 1-5's whole, the first run's in part), none of it inside a run; and the
    // time between runs is explained as the loop's, with the fix.
    let data: Vec<i64> = (reference(&["host-events", &f, "--names", "data"]).as_array().unwrap().iter())
        .map(|e| e["duration_ps"].as_i64().unwrap())
        .collect();
    assert_eq!(data.len(), 6);
    let scopes = json(&["scopes", &f]);
    let credited = scopes["input"]["host_input_ps"].as_i64().unwrap() * 6;
    let (later, all): (i64, i64) = (data[1..].iter().sum(), data.iter().sum());
    assert!(credited >= later && credited <= all, "{credited} vs {later}..{all}");
    assert_eq!(scopes["input"]["device_idle_input_ps"], 0);
    let gaps = json(&["advise", &f])["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["rule"] == "gaps-between-steps")
        .cloned();
    let gaps = gaps.expect("the loop's host work between runs is judged");
    assert!(gaps["advice"].as_str().unwrap().contains("each step is one run of jit_train_step"), "{gaps}");
}

#[test]
fn a_kernel_row_is_one_programs_and_an_op_execution_one_launch() {
    // gpu-programs: custom-call.1 is the cuBLAS GEMM of jit_dot compiled for 8192 and
    // 4096 and of jit_update's matrix product: three kernel rows of one kernel name and
    // launch shape, each with its program's launches (one a step, four for the 8192
    // dot), labelled where a name is several programs' or modules'.
    let f = run("gpu-programs");
    let mut want: BTreeMap<(String, u64), (u64, i64)> = BTreeMap::new();
    for e in reference_plane_events(&f, "/device:GPU:0") {
        let s = &e["stats"];
        if s["kernel_details"].is_null() || s["hlo_op"] != "custom-call.1" {
            continue;
        }
        let slot =
            want.entry((s["hlo_module"].as_str().unwrap().to_string(), s["program_id"].as_u64().unwrap())).or_default();
        slot.0 += 1;
        slot.1 += e["duration_ps"].as_i64().unwrap();
    }
    let rows = json(&["kernels", &f, "--top", "0"]);
    let mut got = BTreeMap::new();
    for r in rows["kernels"].as_array().unwrap().iter().filter(|r| r["op"] == "custom-call.1") {
        let key = (r["module"].as_str().unwrap().to_string(), r["program_id"].as_u64().unwrap());
        got.insert(key.clone(), (r["count"].as_u64().unwrap(), r["total_ps"].as_i64().unwrap()));
        let labelled = r["program"].as_str();
        assert_eq!(labelled.is_some(), key.0 == "jit_dot", "{r}");
    }
    assert_eq!(got, want);
    assert_eq!(got.values().map(|v| v.0).collect::<Vec<_>>().iter().sum::<u64>(), 24);
    let text = ok(&["kernels", &f]);
    for label in ["custom-call.1 in jit_update", "custom-call.1 in jit_dot("] {
        assert!(text.contains(label), "{text}");
    }
    // The op profile's executions are the GEMM launches, each with its memset, and
    // its average one GEMM's: the text's COUNT and AVG.
    let ops = json(&["ops", &f, "--top", "0"]);
    for r in ops["ops"].as_array().unwrap().iter().filter(|r| r["name"] == "custom-call.1") {
        let (launches, total) = want[&(r["module"].as_str().unwrap().to_string(), r["program_id"].as_u64().unwrap())];
        assert_eq!((r["executions"].as_u64(), r["count"].as_u64()), (Some(launches), Some(2 * launches)), "{r}");
        let gemm = total / launches as i64;
        let avg = r["avg_ps"].as_i64().unwrap();
        assert!(avg >= gemm && avg < gemm + 2_000_000, "{avg} vs its GEMM's {gemm}: {r}");
    }
}

/// With command buffers off, XLA tags every kernel with its own instruction: the
/// reference for the instructions stepscope gives command-buffer kernels in the same
/// model's capture with them on (same compilation: the same instruction names).
#[test]
fn command_buffer_kernels_get_the_instructions_xla_tags_without_command_buffers() {
    let (with, without) = (run("gpu-bf16"), run("gpu-nocb"));
    let ours = op_counts(&with, "op");
    let truth = op_counts(&without, "op");
    assert!(ours.keys().all(|k| !k.starts_with("command_buffer")), "{ours:?}");
    let differ: Vec<_> = (ours.keys().chain(truth.keys()))
        .filter(|k| ours.get(*k) != truth.get(*k))
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    // The one difference: 5 launches in the reference capture carry no `hlo_op` (their
    // annotation is garbled, tests/fixtures/PROVENANCE.md), so it lists them under the
    // kernel's name, `loop_add_fusion_5`, where stepscope names `loop_add_fusion.5`.
    assert_eq!(differ, ["loop_add_fusion.5", "loop_add_fusion_5"], "{ours:?}\n{truth:?}");
    assert_eq!(ours["loop_add_fusion.5"], 5);
    assert!(ours.len() > 290, "{} ops", ours.len());
    // Identical fusions share one kernel: fusion.183 and its copies in the other
    // layers all run `fusion_183`, each credited with its own launches.
    for op in ["fusion.183", "fusion.187", "fusion.191", "fusion.195"] {
        assert_eq!(ours.get(op), truth.get(op), "{op}");
        assert!(ours.get(op).is_some_and(|&c| c > 0), "{op}");
    }
    // cuBLAS calls, recorded as child graphs, get their custom-calls.
    assert_eq!(ours.get("custom-call.18"), Some(&5));
    // Each credited row names the buffer the profile tagged its kernels with, and those
    // rows add up to the reference reader's sum over the kernels tagged so.
    let mut tagged = (0u64, 0i64);
    for e in ref_line(&with, "/device:GPU:0", "Stream #14(Memset,MemcpyD2D,Compute)") {
        if e["stats"]["hlo_op"] == "command_buffer_1" {
            tagged = (tagged.0 + 1, tagged.1 + e["duration_ps"].as_i64().unwrap());
        }
    }
    let v = json(&["ops", &with, "--top", "100000"]);
    let rows = v["ops"].as_array().unwrap();
    let credited = rows.iter().filter(|r| r["command_buffer"] == "command_buffer_1");
    let sum =
        credited.fold((0u64, 0i64), |a, r| (a.0 + r["count"].as_u64().unwrap(), a.1 + r["total_ps"].as_i64().unwrap()));
    assert_eq!(sum, tagged);
    assert_eq!(tagged.0, 1540);
    assert!(json(&["ops", &without, "--top", "100000"])["ops"]
        .as_array()
        .unwrap()
        .iter()
        .all(|r| r.get("command_buffer").is_none()));
    // Per layer, the name stack (from the HloProto: `tf_op` is `XlaModule:` on GPU).
    // The same per scope, but for the 5 garbled launches, which the reference files
    // under no scope and stepscope under layer0's MLP.
    let (mut scopes, mut truth_scopes) = (op_counts(&with, "scope"), op_counts(&without, "scope"));
    assert_eq!(scopes.len(), 18, "{scopes:?}");
    *scopes.get_mut("train_step/layer0/mlp").unwrap() -= 5;
    *truth_scopes.get_mut("(no scope)").unwrap() -= 5;
    assert_eq!(scopes, truth_scopes);
}

/// cuDNN's fused attention (`jax.nn.dot_product_attention(implementation="cudnn")`)
/// in command buffers: its kernels run in child graphs (a memset, then
/// `compute_dot_do_o`, the flash kernel and `convert_dq` for the backward) beside
/// cuBLAS's, and are credited to their custom call. Per scope, the executions equal
/// those of the capture with command buffers off, which tags each kernel itself and
/// where the backward's eight launches sit in one annotation of its op; each
/// attention call runs once a step in both. Its FLOPs are the reference reader's.
#[test]
fn cudnn_attention_kernels_get_their_custom_calls() {
    let (with, without) = (run("gpu-cudnn-attention"), run("gpu-cudnn-attention-nocb"));
    let executions = |file: &str, by: &str| -> BTreeMap<String, u64> {
        let v = json(&["ops", file, "--by", by, "--top", "100000"]);
        (v["ops"].as_array().unwrap().iter())
            .map(|r| (r["name"].as_str().unwrap().to_string(), r["executions"].as_u64().unwrap()))
            .collect()
    };
    let ops = executions(&with, "op");
    assert!(ops.keys().all(|k| !k.starts_with("command_buffer")), "{ops:?}");
    assert_eq!(executions(&with, "scope"), executions(&without, "scope"));
    let truth = executions(&without, "op");
    let attention: Vec<&String> = truth.keys().filter(|k| k.starts_with("dot_product_attention")).collect();
    assert_eq!(attention.len(), 4, "{truth:?}"); // forward and backward, 2 layers
    let steps = json(&["steps", &with])["steps"].as_array().unwrap().len() as u64;
    for op in attention {
        assert_eq!(ops.get(op), Some(&steps), "{op}");
        assert_eq!(truth[op], steps, "{op}");
    }
    let flops = reference(&["dot-flops", &with, "--by-program"]);
    let v = json(&["ops", &with, "--top", "100000"]);
    let mut checked = 0;
    for r in v["ops"].as_array().unwrap().iter().filter(|r| r["name"].as_str().unwrap().starts_with("dot_product")) {
        let program = (flops.as_object().unwrap().values())
            .find_map(|p| p.get(r["name"].as_str().unwrap()))
            .and_then(|f| f.as_u64())
            .unwrap();
        assert!(program > 1_000_000_000, "{r}");
        assert_eq!(r["flops"].as_u64(), Some(program * r["executions"].as_u64().unwrap()), "{r}");
        checked += 1;
    }
    assert_eq!(checked, 4);
}

/// Layers under `jax.lax.scan`: command buffers inside while-loop bodies, async
/// fusions and cuBLAS calls. The capture with command buffers off is a separate
/// compilation (the autotuner picked a Triton gemm for one forward MLP matmul there
/// and cuBLAS here), so ops compare per name-stack scope.
#[test]
fn command_buffer_kernels_in_loop_bodies_get_their_scopes() {
    let (with, without) = (run("gpu-scan"), run("gpu-scan-nocb"));
    assert!(op_counts(&with, "op").keys().all(|k| !k.starts_with("command_buffer")));
    let (ours, truth) = (op_counts(&with, "scope"), op_counts(&without, "scope"));
    assert_eq!(ours.keys().collect::<Vec<_>>(), truth.keys().collect::<Vec<_>>());
    for (scope, n) in &ours {
        if scope.ends_with("layer/mlp") {
            // One matmul fewer launched there: 320 against 336.
            assert!(n.abs_diff(truth[scope]) <= 16, "{scope}: {n} vs {}", truth[scope]);
        } else {
            assert_eq!(*n, truth[scope], "{scope}");
        }
    }
    assert_eq!(ours["train_step/while/body/eval_jaxpr/layer/attention"], 528);
}

/// Without the HloProtos (a copy with `/host:metadata` removed) nothing tells which
/// instruction a command-buffer kernel ran: they stay under the buffer's name, and the
/// advice sends the user to the kernel stats.
#[test]
fn without_hlo_command_buffer_kernels_stay_together_with_advice() {
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("vm.xplane.pb");
    let script = root().join("tests/support/xspace_ref.py");
    let out = std::process::Command::new("python3")
        .arg(script)
        .args(["drop-plane", &run("gpu-bf16"), copy.to_str().unwrap(), "/host:metadata"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let copy = copy.to_str().unwrap();
    let ops = json(&["ops", copy, "--top", "1"]);
    assert_eq!(ops["ops"][0]["name"], "command_buffer_1");
    assert_eq!(ops["ops"][0]["category"], "command buffer");
    assert_eq!(ops["ops"][0]["count"], 1540);
    let v = json(&["advise", copy]);
    let f = v["findings"].as_array().unwrap().iter().find(|f| f["rule"] == "dominant-op").expect("dominant-op");
    assert!(f["advice"].as_str().unwrap().contains("stepscope kernels PATH"), "{f}");
}

/// The device work each step launched: every device event linked to a host launch by
/// `correlation_id`, in the step whose span holds the launch, as a union of
/// intervals; computed here from the reference reader's events.
#[test]
fn each_step_counts_the_device_work_it_launched() {
    for name in ["gpu-async", "gpu-bf16"] {
        let f = run(name);
        let steps = json(&["steps", &f]);
        let steps = steps["steps"].as_array().unwrap();
        let info = json(&["info", &f]);
        let mut launch: std::collections::HashMap<i64, i64> = Default::default();
        let mut work: Vec<Vec<(i64, i64)>> = vec![Vec::new(); steps.len()];
        let mut device = Vec::new();
        for plane in info["hosts"][0]["planes"].as_array().unwrap() {
            let pname = plane["name"].as_str().unwrap();
            for line in plane["lines"].as_array().unwrap() {
                for e in ref_line(&f, pname, line["name"].as_str().unwrap()) {
                    let Some(c) = e["stats"]["correlation_id"].as_i64() else { continue };
                    let (start, dur) = (e["start_ps"].as_i64().unwrap(), e["duration_ps"].as_i64().unwrap());
                    if pname == "/host:CPU" {
                        launch.insert(c, start);
                    } else if pname.starts_with("/device:GPU") {
                        device.push((c, start, start + dur));
                    }
                }
            }
        }
        for (c, start, end) in device {
            let Some(&t) = launch.get(&c) else { continue };
            let at = steps.iter().position(|s| {
                let (s0, d) = (s["host_start_ps"].as_i64().unwrap(), s["host_duration_ps"].as_i64().unwrap());
                s0 <= t && t < s0 + d
            });
            if let Some(k) = at {
                work[k].push((start, end));
            }
        }
        for (s, mut spans) in steps.iter().zip(work) {
            spans.sort();
            let first = spans.iter().map(|w| w.0).min().unwrap();
            let last = spans.iter().map(|w| w.1).max().unwrap();
            assert_eq!(s["work_start_ps"].as_i64(), Some(first), "{name} step {}", s["step_num"]);
            assert_eq!(s["work_duration_ps"].as_i64(), Some(last - first), "{name} step {}", s["step_num"]);
            let (mut total, mut open) = (0i64, None::<(i64, i64)>);
            for (a, b) in spans {
                open = match open {
                    Some((x, y)) if a <= y => Some((x, y.max(b))),
                    Some((x, y)) => {
                        total += y - x;
                        Some((a, b))
                    }
                    None => Some((a, b)),
                };
            }
            total += open.map_or(0, |(x, y)| y - x);
            assert_eq!(s["device_work_ps"].as_i64(), Some(total), "{name} step {}", s["step_num"]);
        }
        let spread = |key: &str| {
            let v: Vec<i64> = steps.iter().map(|s| s[key].as_i64().unwrap()).collect();
            *v.iter().max().unwrap() as f64 / *v.iter().min().unwrap() as f64
        };
        let timing = json(&["steps", &f])["timing"].clone();
        if name == "gpu-async" {
            // The loop runs ahead: most steps' work ends after their annotation, so
            // each step is timed on the device and holds its own work (busy within
            // it is the work it launched), which swings by under 1%; its host span
            // is kept beside it.
            assert_eq!(timing, "device");
            assert!(spread("device_work_ps") < 1.01, "{}", spread("device_work_ps"));
            for s in steps {
                let end = s["start_ps"].as_i64().unwrap() + s["duration_ps"].as_i64().unwrap();
                let work_end = s["work_start_ps"].as_i64().unwrap() + s["work_duration_ps"].as_i64().unwrap();
                assert_eq!(end, work_end, "step {}", s["step_num"]);
                assert_eq!(s["device_busy_ps"], s["device_work_ps"], "step {}", s["step_num"]);
                assert_ne!(s["start_ps"], s["host_start_ps"]);
            }
        } else {
            // A loop that waits for each step: timed on the host, its busy time is
            // its work.
            assert_eq!(timing, "host");
            assert!(steps.iter().all(|s| s["device_work_ps"] == s["device_busy_ps"]));
            assert!(steps.iter().all(|s| s["start_ps"] == s["host_start_ps"]));
        }
    }
}

/// A compute stream that also saw a host-to-device copy is named
/// `Stream #14(MemcpyH2D,Memset,Compute,…)`: its kernels are compute, and only the
/// copies (`MemcpyH2D` events) count as host-to-device time.
#[test]
fn a_mixed_stream_name_does_not_make_its_kernels_copies() {
    let f = run("gpu-compile");
    let mut h2d_ps = 0i64;
    for line in ["Stream #14(MemcpyH2D,Memset,Compute,MemcpyD2D,MemcpyOther)", "Stream #15(MemcpyH2D)"] {
        for e in ref_line(&f, "/device:GPU:0", line) {
            if e["name"] == "MemcpyH2D" {
                h2d_ps += e["duration_ps"].as_i64().unwrap();
            }
        }
    }
    let s = json(&["summary", &f]);
    let b = &s["breakdown"];
    let steps = json(&["steps", &f])["steps"].as_array().unwrap().len() as i64;
    // The breakdown averages over steps; copies can only be the copies' time and the
    // host's own copying for them (its staging, a part of its own, folded in).
    let host_copy_ps = json(&["devices", &f])["devices"][0]["host_copy_ps"].as_i64().unwrap();
    assert!(h2d_ps > 0);
    assert!(b["host_to_device_ps"].as_i64().unwrap() * steps <= h2d_ps + host_copy_ps, "{b} vs {h2d_ps}");
    assert!(b["device_compute_ps"].as_i64().unwrap() > 10 * b["host_to_device_ps"].as_i64().unwrap(), "{b}");
}
