//! Device time by the user's Python: `ops --by line` / `--by stack`, `hlo`'s stack
//! and the folded export, each equal to the op profile regrouped by the stacks the
//! reference reader decodes from the HloProtos itself.

use std::collections::HashMap;

use serde_json::Value;

use crate::util::*;

/// Captures with source information: newer JAX's stack frame index (CPU, NVIDIA)
/// and older JAX's one `source_file`/`source_line` (ROCm).
const WITH_SOURCES: [&str; 5] = [
    "cpu-transformer/plugins/profile/2026_11_21_22_29_17/vm.xplane.pb",
    "gpu-transformer/plugins/profile/2026_11_23_07_47_56/vm.xplane.pb",
    "gpu-scan/plugins/profile/2026_11_23_08_13_05/vm.xplane.pb",
    "rocm-mi300x-gemm/tw003.xplane.pb",
    "cpu-guide-optax/plugins/profile/2026_11_25_03_46_25/vm.xplane.pb",
];

/// The innermost frame outside installed libraries (optax's, in `cpu-guide-optax`),
/// else the innermost.
fn user_frame(s: &Frames) -> &(String, String, i64) {
    s.iter().rev().find(|f| !f.0.contains("/site-packages/")).unwrap_or_else(|| s.last().unwrap())
}

fn path(rel: &str) -> String {
    fixture(rel).to_str().unwrap().to_string()
}

/// Frames as (file, function, line).
type Frames = Vec<(String, String, i64)>;

fn frames(v: &Value) -> Frames {
    v.as_array()
        .unwrap()
        .iter()
        .map(|f| (f[0].as_str().unwrap().to_string(), f[1].as_str().unwrap().to_string(), f[2].as_i64().unwrap()))
        .collect()
}

/// The stack an op's time goes to, by the rule docs/model.md states: a fusion whose
/// body does a matmul or convolution with a source goes to that instruction's stack,
/// any other op to its own.
fn expected_stack(instr: &Value) -> Frames {
    for f in instr["fused"].as_array().unwrap() {
        let (opcode, stack) = (f[0].as_str().unwrap(), frames(&f[1]));
        if matches!(opcode, "dot" | "convolution") && !stack.is_empty() {
            return stack;
        }
    }
    frames(&instr["stack"])
}

/// Per (module name, op): the distinct stacks its programs give it (rows by op merge
/// the programs that share a module name; most give one stack).
fn stacks_by_op(file: &str) -> HashMap<(String, String), Vec<Frames>> {
    let r = reference(&["sources", file]);
    let mut out: HashMap<(String, String), Vec<Frames>> = HashMap::new();
    for m in r.as_object().unwrap().values() {
        let module = m["module"].as_str().unwrap();
        for (name, instr) in m["instructions"].as_object().unwrap() {
            let s = expected_stack(instr);
            let had = out.entry((module.to_string(), name.clone())).or_default();
            if !had.contains(&s) {
                had.push(s);
            }
        }
    }
    out
}

/// Checks rows grouped by a label of each op's stack against `ops --by op` regrouped
/// by the reference's stacks: an op whose programs agree adds its self time to its
/// label; one whose programs differ (one module name compiled at two lines) may go to
/// any of its labels, so a label's time lies between what surely goes there and that
/// plus those ops' time; and nothing is lost.
fn assert_regrouped(file: &str, ours: &Value, key: impl Fn(&Frames) -> String) {
    let stacks = stacks_by_op(file);
    let by_op = json(&["ops", file, "--top", "0"]);
    let label = |s: &Frames| if s.is_empty() { "(no source)".to_string() } else { key(s) };
    let (mut sure, mut maybe): (HashMap<String, i64>, HashMap<String, i64>) = Default::default();
    for r in by_op["ops"].as_array().unwrap() {
        let k = (r["module"].as_str().unwrap().to_string(), r["name"].as_str().unwrap().to_string());
        let self_ps = r["self_ps"].as_i64().unwrap();
        let labels: Vec<String> = match stacks.get(&k) {
            Some(s) => s.iter().map(label).collect::<std::collections::BTreeSet<_>>().into_iter().collect(),
            None => vec!["(no source)".to_string()],
        };
        if let [one] = labels.as_slice() {
            *sure.entry(one.clone()).or_default() += self_ps;
        } else {
            for l in labels {
                *maybe.entry(l).or_default() += self_ps;
            }
        }
    }
    let got = rows_by_name(ours);
    for (l, ps) in &got {
        let low = sure.get(l).copied().unwrap_or(0);
        let high = low + maybe.get(l).copied().unwrap_or(0);
        assert!(low <= *ps && *ps <= high, "{l}: {ps} ps, expected {low}..={high}");
    }
    for l in sure.keys() {
        assert!(got.contains_key(l), "no row {l}");
    }
    assert_eq!(got.values().sum::<i64>(), by_op["op_time_ps"].as_i64().unwrap());
    assert!(sure.values().sum::<i64>() * 10 > by_op["op_time_ps"].as_i64().unwrap() * 9, "most ops have one stack");
}

fn rows_by_name(v: &Value) -> HashMap<String, i64> {
    v["ops"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["name"].as_str().unwrap().to_string(), r["self_ps"].as_i64().unwrap()))
        .collect()
}

#[test]
fn ops_by_line_is_the_op_profile_regrouped_by_each_ops_line() {
    for rel in WITH_SOURCES {
        let f = path(rel);
        let ours = json(&["ops", &f, "--by", "line", "--top", "0"]);
        assert_eq!(ours["by"], "line");
        assert_regrouped(&f, &ours, |s| {
            let (file, _, line) = user_frame(s);
            format!("{file}:{line}")
        });
        let total = ours["op_time_ps"].as_i64().unwrap();
        let sourced: i64 = rows_by_name(&ours).iter().filter(|(k, _)| *k != "(no source)").map(|(_, v)| v).sum();
        assert!(sourced * 10 > total * 9, "{rel}: only {sourced} of {total} ps has a line");
        assert!(ours["ops"].as_array().unwrap().len() > 3, "{rel}");
        for r in ours["ops"].as_array().unwrap().iter().filter(|r| r["name"] != "(no source)") {
            let s = r["stack"].as_array().unwrap();
            assert_eq!(s.len(), 1, "{r}");
            assert_eq!(format!("{}:{}", s[0]["file"].as_str().unwrap(), s[0]["line"]), r["name"].as_str().unwrap());
        }
    }
}

#[test]
fn a_librarys_ops_go_to_the_users_line_that_called_it() {
    let f = path(WITH_SOURCES[4]);
    let stacks = stacks_by_op(&f);
    // Ops that ran whose innermost frame is optax's own (site-packages).
    let ran = json(&["ops", &f, "--top", "0"]);
    let in_optax: Vec<&Frames> = ran["ops"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| {
            stacks.get(&(r["module"].as_str().unwrap().to_string(), r["name"].as_str().unwrap().to_string()))
        })
        .flatten()
        .filter(|s| s.last().is_some_and(|l| l.0.contains("/site-packages/optax/")))
        .collect();
    assert!(in_optax.len() > 5, "{}", in_optax.len());
    let lines = json(&["ops", &f, "--by", "line", "--top", "0"]);
    let names: Vec<&str> = lines["ops"].as_array().unwrap().iter().map(|r| r["name"].as_str().unwrap()).collect();
    assert!(!names.iter().any(|n| n.contains("site-packages")), "{names:?}");
    for s in in_optax {
        let (file, _, line) = user_frame(s);
        assert!(file.ends_with("capture_jax.py"), "{s:?}");
        assert!(names.contains(&format!("{file}:{line}").as_str()), "{file}:{line}");
    }
    // The whole stack keeps the library's frames.
    let by_stack = json(&["ops", &f, "--by", "stack", "--top", "0"]);
    assert!(by_stack["ops"]
        .as_array()
        .unwrap()
        .iter()
        .any(|r| r["name"].as_str().unwrap().contains("site-packages/optax/")));
}

#[test]
fn ops_by_stack_is_the_op_profile_regrouped_by_each_ops_whole_stack() {
    for rel in &WITH_SOURCES[..2] {
        let f = path(rel);
        let ours = json(&["ops", &f, "--by", "stack", "--top", "0"]);
        assert_regrouped(&f, &ours, |s| {
            s.iter().map(|(file, func, line)| format!("{func} ({file}:{line})")).collect::<Vec<_>>().join(";")
        });
        let deepest = ours["ops"].as_array().unwrap().iter().map(|r| r["stack"].as_array().map_or(0, Vec::len)).max();
        assert!(deepest.unwrap() >= 5, "{rel}: stacks should run from <module> to the op's line");
    }
}

#[test]
fn hlo_prints_the_line_and_stack_of_an_op() {
    let f = path(WITH_SOURCES[0]);
    let top = json(&["ops", &f, "--top", "1"]);
    let (op, module) = (top["ops"][0]["name"].as_str().unwrap(), top["ops"][0]["module"].as_str().unwrap());
    let stacks = stacks_by_op(&f);
    let want = &stacks[&(module.to_string(), op.to_string())][0];
    let ctx = json(&["hlo", &f, op]);
    let got: Frames = ctx["instruction"]["stack"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (s["file"].as_str().unwrap().into(), s["function"].as_str().unwrap().into(), s["line"].as_i64().unwrap())
        })
        .collect();
    assert_eq!(&got, want);
    assert_eq!(ctx["instruction"]["source_line"].as_i64(), Some(want.last().unwrap().2));
    let text = ok(&["hlo", &f, op]);
    let (file, func, line) = want.last().unwrap();
    assert!(text.contains(&format!("at {file}:{line} in {func}")), "{text}");
    assert!(text.contains("stack (outermost first):"), "{text}");
}

#[test]
fn folded_export_weighs_each_ops_stack_by_its_self_time() {
    let f = path(WITH_SOURCES[1]);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("device.folded");
    ok(&["export", &f, "-o", out.to_str().unwrap()]);
    let text = std::fs::read_to_string(&out).unwrap();
    let by_op = json(&["ops", &f, "--top", "0"]);
    let stacks = stacks_by_op(&f);
    let mut want: HashMap<String, i64> = HashMap::new();
    for r in by_op["ops"].as_array().unwrap() {
        let (op, module) = (r["name"].as_str().unwrap(), r["module"].as_str().unwrap());
        let candidates = stacks.get(&(module.to_string(), op.to_string())).cloned().unwrap_or_default();
        assert!(candidates.len() <= 1, "{op}: the gpu capture's programs agree");
        let stack = match candidates.first() {
            Some(s) if !s.is_empty() => {
                s.iter().map(|(file, func, line)| format!("{func} ({file}:{line})")).collect::<Vec<_>>().join(";")
            }
            _ => "(no source)".to_string(),
        };
        let leaf = if module.is_empty() { op.to_string() } else { format!("{op} [{module}]") };
        *want.entry(format!("{stack};{leaf}")).or_default() += r["self_ps"].as_i64().unwrap();
    }
    let mut got: HashMap<String, i64> = HashMap::new();
    for line in text.lines() {
        let (stack, ns) = line.rsplit_once(' ').unwrap();
        *got.entry(stack.to_string()).or_default() += ns.parse::<i64>().unwrap();
    }
    assert!(got.len() > 10);
    for (k, ns) in &got {
        let ps = want.get(k).unwrap_or_else(|| panic!("unexpected stack {k}"));
        // Each line is one op of one program, rounded to whole ns.
        assert!((ns * 1000 - ps).abs() <= 500 * 8, "{k}: {ns} ns vs {ps} ps");
    }
}

/// `hlo --graph`: at depth 1 the op's operands and users are those the reference reader
/// finds in its computation, a fusion's body is its called computation's instructions,
/// every edge is an operand, and a node that ran carries its op-profile time.
#[test]
fn hlo_graph_is_the_ops_operands_users_and_fused_body() {
    let cases = [("gpu-transformer", 3), ("cpu-transformer", 3), ("tpu-v6e-inference", 2)];
    for (fixture_name, how_many) in cases {
        let f = crate::util::xplane(fixture_name);
        let ops = json(&["ops", &f, "--top", "all"]);
        // Ops of a program (a TPU's name no module, but their program's id).
        let rows: Vec<&Value> = (ops["ops"].as_array().unwrap().iter())
            .filter(|r| !r["module"].as_str().unwrap().is_empty() || r["program_id"].is_u64())
            .take(how_many)
            .collect();
        assert_eq!(rows.len(), how_many, "{fixture_name}");
        for r in rows {
            let op = r["name"].as_str().unwrap();
            let mut args = vec!["hlo", &f, op, "--graph"];
            if let Some(module) = r["module"].as_str().filter(|m| !m.is_empty()) {
                args.extend(["--module", module]);
            }
            let g = json(&[&args[..], &["--depth", "1"]].concat());
            assert_eq!(g["schema"], "stepscope.hlo_graph/1");
            let want = reference(&["hlo-neighbours", &f, g["program"].as_str().unwrap(), op]);
            let at = |level: i64| -> Vec<String> {
                let mut v: Vec<String> = (g["nodes"].as_array().unwrap().iter())
                    .filter(|n| n["level"] == level)
                    .map(|n| n["name"].as_str().unwrap().to_string())
                    .collect();
                v.sort();
                v
            };
            let names = |v: &Value| -> Vec<String> {
                v.as_array().unwrap().iter().map(|n| n.as_str().unwrap().to_string()).collect()
            };
            assert_eq!(g["computation"], want["computation"], "{fixture_name} {op}");
            if g["nodes_cut"] == 0 {
                assert_eq!(at(-1), names(&want["operands"]), "{fixture_name} {op}: operands");
                assert_eq!(at(1), names(&want["users"]), "{fixture_name} {op}: users");
            }
            assert_eq!(at(0), vec![op.to_string()]);
            let fused: Vec<String> = match g.get("fused") {
                Some(b) => {
                    let mut v: Vec<String> = b["nodes"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|n| n["name"].as_str().unwrap().to_string())
                        .collect();
                    v.sort();
                    // Edges of the body go up a level.
                    let level: HashMap<&str, i64> = (b["nodes"].as_array().unwrap().iter())
                        .map(|n| (n["name"].as_str().unwrap(), n["level"].as_i64().unwrap()))
                        .collect();
                    for e in b["edges"].as_array().unwrap() {
                        assert!(level[e["from"].as_str().unwrap()] < level[e["to"].as_str().unwrap()], "{e}");
                    }
                    v
                }
                None => Vec::new(),
            };
            assert_eq!(fused, names(&want["fused"]), "{fixture_name} {op}: fused body");
            // Every edge joins two nodes; the op's operand edges are its operands.
            let shown: std::collections::HashSet<&str> =
                g["nodes"].as_array().unwrap().iter().map(|n| n["name"].as_str().unwrap()).collect();
            let edges = g["edges"].as_array().unwrap();
            assert!(edges
                .iter()
                .all(|e| shown.contains(e["from"].as_str().unwrap()) && shown.contains(e["to"].as_str().unwrap())));
            let mut into: Vec<String> =
                edges.iter().filter(|e| e["to"] == op).map(|e| e["from"].as_str().unwrap().to_string()).collect();
            into.sort();
            into.dedup();
            assert_eq!(into, at(-1), "{fixture_name} {op}");
            // The op's node carries its row's time (on the TPU, found by the program's
            // 64-bit id).
            let me = g["nodes"].as_array().unwrap().iter().find(|n| n["name"] == op).unwrap();
            assert_eq!(me["total_ps"], r["total_ps"], "{fixture_name} {op}");
            // Deeper graphs hold the shallower one.
            let deeper = json(&[&args[..], &["--depth", "3"]].concat());
            let deep: std::collections::HashSet<&str> =
                deeper["nodes"].as_array().unwrap().iter().map(|n| n["name"].as_str().unwrap()).collect();
            assert!(shown.is_subset(&deep), "{fixture_name} {op}");
        }
    }
    // DOT: one statement per node and per edge, the op filled.
    let f = crate::util::xplane("gpu-transformer");
    let g = json(&["hlo", &f, "gemm_fusion_dot.8", "--graph"]);
    let dot = ok(&["hlo", &f, "gemm_fusion_dot.8", "--graph"]);
    assert!(dot.starts_with("digraph \"gemm_fusion_dot.8\" {"), "{dot}");
    let fused = &g["fused"];
    assert_eq!(
        dot.matches(" [label=").count(),
        g["nodes"].as_array().unwrap().len() + fused["nodes"].as_array().unwrap().len()
    );
    assert_eq!(
        dot.matches(" -> ").count(),
        g["edges"].as_array().unwrap().len() + fused["edges"].as_array().unwrap().len()
    );
    assert_eq!(dot.matches("fillcolor").count(), 1);
}
