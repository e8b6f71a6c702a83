//! What the commands print: flags that do what `--help` says, tables that never make
//! two names read the same, CSV where `--csv` is offered, notes about what was read.

use std::process::Command;

use crate::util::*;

fn fx(name: &str) -> String {
    fixture(name).to_str().unwrap().to_string()
}

/// Runs stepscope with `env` set, returns (stdout, stderr).
fn run_env(args: &[&str], env: &[(&str, &str)]) -> (String, String) {
    let mut c = Command::new(env!("CARGO_BIN_EXE_stepscope"));
    c.args(args).env_remove("COLUMNS");
    for (k, v) in env {
        c.env(k, v);
    }
    let out = c.output().expect("run stepscope");
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    (String::from_utf8(out.stdout).unwrap(), String::from_utf8(out.stderr).unwrap())
}

/// Parses simple CSV (no quoted commas in the columns read) into header and rows.
fn csv_rows(text: &str) -> (Vec<String>, Vec<Vec<String>>) {
    let mut lines = text.lines();
    let header = lines.next().unwrap().split(',').map(String::from).collect();
    (header, lines.map(|l| l.split(',').map(String::from).collect()).collect())
}

#[test]
fn top_zero_shows_every_row_and_steps_top_shows_the_slowest() {
    let f = fx("cpu-transformer");
    let all = json(&["ops", &f, "--top", "100000"])["ops"].as_array().unwrap().len();
    assert!(all > 10);
    assert_eq!(json(&["ops", &f, "--top", "0"])["ops"].as_array().unwrap().len(), all);
    assert_eq!(json(&["ops", &f])["ops"].as_array().unwrap().len(), 10, "10 rows by default");
    // The text table too: a header and a title line besides the rows (before the
    // legend, in parentheses, that says what the % column is of).
    let text = ok(&["ops", &f, "--top", "0"]);
    assert_eq!(text.lines().take_while(|l| !l.starts_with('(')).count(), all + 2);

    // steps --top N: the N slowest steps, in step order; every step without it.
    let f = fx("gpu-async");
    let every = json(&["steps", &f])["steps"].as_array().unwrap().clone();
    let mut by_time: Vec<(i64, i64)> =
        every.iter().map(|s| (s["duration_ps"].as_i64().unwrap(), s["step_num"].as_i64().unwrap())).collect();
    by_time.sort_by(|a, b| b.cmp(a));
    let mut want: Vec<i64> = by_time[..3].iter().map(|s| s.1).collect();
    want.sort_unstable();
    let top: Vec<i64> = (json(&["steps", &f, "--top", "3"])["steps"].as_array().unwrap().iter())
        .map(|s| s["step_num"].as_i64().unwrap())
        .collect();
    assert_eq!(top, want);
    let text = ok(&["steps", &f, "--top", "3"]);
    assert!(text.starts_with(&format!("the 3 slowest of {} steps", every.len())), "{text}");
}

#[test]
fn csv_is_csv_wherever_it_is_offered() {
    // ls: the run names whole, each as `--run` takes it.
    let (header, rows) = csv_rows(&ok(&["ls", "--csv", &fx("")]));
    assert_eq!(header, ["run", "path", "captured", "modified_unix_s", "hosts", "bytes"]);
    let ls = json(&["ls", &fx("")]);
    let runs: Vec<&str> = ls["runs"].as_array().unwrap().iter().map(|r| r["run"].as_str().unwrap()).collect();
    assert_eq!(rows.iter().map(|r| r[0].as_str()).collect::<Vec<_>>(), runs);
    for run in runs.iter().take(3) {
        ok(&["info", &fx(""), "--run", run]);
    }
    // info: one row per line, its events as the JSON counts them.
    let f = fx("gpu-async");
    let info = json(&["info", &f]);
    let text = ok(&["info", "--csv", &f]);
    assert!(text.starts_with("host,plane,line,events\n"), "{text}");
    let lines: usize = (info["hosts"][0]["planes"].as_array().unwrap().iter())
        .map(|p| p["lines"].as_array().unwrap().len().max(1))
        .sum();
    assert_eq!(text.lines().count(), lines + 1);
    let events: u64 = text.lines().skip(1).map(|l| l.rsplit(',').next().unwrap().parse::<u64>().unwrap()).sum();
    assert_eq!(events, info["events_total"].as_u64().unwrap());
    // advise: one row per finding, as the JSON has them.
    let f = fx("cpu-sleep");
    let (header, rows) = csv_rows(&ok(&["advise", "--csv", &f]));
    assert_eq!(header[..2], ["severity", "rule"]);
    let findings = json(&["advise", &f])["findings"].as_array().unwrap().clone();
    assert_eq!(rows.len(), findings.len());
    for (row, f) in rows.iter().zip(&findings) {
        assert_eq!((row[0].as_str(), row[1].as_str()), (f["severity"].as_str().unwrap(), f["rule"].as_str().unwrap()));
    }
    // A flag a command does not take: one line, no advice to pass it as a value.
    let err = assert_clean_error(&["hlo", &f, "fusion", "--csv"]);
    assert!(err.contains("--csv") && !err.contains("'-- --csv'"), "{err}");
}

#[test]
fn ls_shows_when_each_run_was_captured() {
    let ls = json(&["ls", &fx("")]);
    for r in ls["runs"].as_array().unwrap() {
        let run = r["run"].as_str().unwrap();
        let name = run.rsplit('/').next().unwrap();
        // JAX names a run folder by its capture time: 2026_11_21_23_32_11.
        let stamp = name.split('_').count() == 6 && name.chars().all(|c| c.is_ascii_digit() || c == '_');
        match (stamp, r["captured"].as_str()) {
            (true, Some(c)) => assert_eq!(c.replace(['-', ' ', ':'], "_"), name),
            (false, None) => {}
            other => panic!("{run}: {other:?}"),
        }
    }
    let text = ok(&["ls", &fx("")]);
    assert!(text.lines().next().unwrap().starts_with("CAPTURED"), "{text}");
    assert!(text.contains("2026-11-21 23:32:11") && text.contains("cpu-clean/plugins/profile/2026_11_21_23_32_11"));
}

#[test]
fn reading_one_of_several_runs_says_which_and_how_to_pick_another() {
    let (_, err) = run_env(&["summary", &fx("")], &[]);
    let runs = json(&["ls", &fx("")])["runs"].as_array().unwrap().len();
    assert!(err.contains(&format!("the newest of {runs} runs")) && err.contains("--run NAME"), "{err}");
    // Not said when the run is named, or PATH is one run.
    let ls = json(&["ls", &fx("")]);
    let first = ls["runs"][0]["run"].as_str().unwrap();
    assert!(!run_env(&["summary", &fx(""), "--run", first], &[]).1.contains("newest"));
    assert!(!run_env(&["summary", &fx("cpu-clean")], &[]).1.contains("newest"));
}

#[test]
fn tables_fit_the_terminal_without_two_names_reading_the_same() {
    // The MI300X captures' kernel names share long starts and ends
    // (`input_transpose_fusion.kd`, `input_transpose_fusion_1.kd`, `Cijk_…`).
    for (cmd, f) in [("kernels", "rocm-mi300x-conv-8gpu"), ("ops", "gpu-bf16"), ("kernels", "gpu-bf16")] {
        let whole = json(&[cmd, &fx(f)]);
        let key = if cmd == "ops" { "ops" } else { "kernels" };
        let names: Vec<String> =
            whole[key].as_array().unwrap().iter().map(|r| r["name"].as_str().unwrap().to_string()).collect();
        let (text, _) = run_env(&[cmd, &fx(f)], &[("COLUMNS", "80")]);
        // Rows: after the title and the header, before the legend.
        let shown: Vec<&str> = (text.lines().skip(2).take_while(|l| !l.starts_with('(')))
            .map(|l| l.split("  ").next().unwrap().trim_end())
            .collect();
        assert_eq!(shown.len(), names.len());
        for (i, a) in shown.iter().enumerate() {
            for (j, b) in shown.iter().enumerate() {
                if names[i] != names[j] {
                    assert_ne!(a, b, "{cmd} {f}: {} and {} both read {a}", names[i], names[j]);
                }
            }
            // A cut name keeps its start and end.
            if let Some((head, tail)) = a.split_once('…') {
                assert!(names[i].starts_with(head) && names[i].ends_with(tail), "{a} for {}", names[i]);
            }
        }
        // To a pipe, and with --wide, names are whole.
        let piped = ok(&[cmd, &fx(f)]);
        let (wide, _) = run_env(&[cmd, &fx(f), "--wide"], &[("COLUMNS", "80")]);
        for n in &names {
            assert!(piped.contains(n.as_str()) && wide.contains(n.as_str()), "{n}");
        }
    }
    // A stack keeps its leaf (the innermost frame and its file) when cut, and fits.
    let args = ["ops", &fx("gpu-nocb"), "--by", "stack", "--top", "5"];
    let (text, _) = run_env(&args, &[("COLUMNS", "100")]);
    let (wide, _) = run_env(&[&args[..], &["--wide"]].concat(), &[("COLUMNS", "100")]);
    let first = |t: &str| -> Vec<String> {
        (t.lines().skip(2).take_while(|l| !l.starts_with('(')))
            .map(|l| l.split("  ").next().unwrap().trim_end().to_string())
            .collect()
    };
    let (cut, whole) = (first(&text), first(&wide));
    assert_eq!(cut.len(), 5, "{text}");
    assert!(cut.iter().any(|c| c.starts_with('…')), "nothing was cut at 100 columns: {text}");
    for (shown, whole) in cut.iter().zip(&whole) {
        match shown.strip_prefix('…') {
            Some(end) => assert!(whole.ends_with(end) && end.ends_with("(capture_jax.py)"), "{shown} for {whole}"),
            None => assert_eq!(shown, whole),
        }
    }
    assert!(text.lines().all(|l| l.chars().count() <= 100), "{text}");
    // Every table fits 100 columns: optional columns are left out, and named.
    for cmd in [&["kernels"][..], &["devices"], &["ops", "--by", "line"], &["ops", "--by", "stack"]] {
        for f in ["gpu-nocb", "rocm-mi300x-conv-8gpu"] {
            let path = fx(f);
            let args = [cmd, &[path.as_str()][..]].concat();
            let (text, _) = run_env(&args, &[("COLUMNS", "100")]);
            assert!(text.lines().all(|l| l.chars().count() <= 100), "{args:?}:\n{text}");
            let (wide, _) = run_env(&[&args[..], &["--wide"]].concat(), &[("COLUMNS", "100")]);
            if let Some(note) = text.lines().find(|l| l.starts_with("(left out to fit: ")) {
                let names = note.trim_start_matches("(left out to fit: ").split(" — ").next().unwrap();
                for name in names.split(", ") {
                    assert!(wide.contains(name), "{args:?}: --wide shows {name}:\n{wide}");
                    let shown = text.lines().take_while(|l| !l.starts_with("(left out"));
                    assert!(shown.clone().all(|l| !l.contains(&format!("  {name}  "))), "{args:?}: {name} shown");
                }
                assert!(!wide.contains("(left out to fit"), "{args:?}");
            }
        }
    }
    // Findings are wrapped, never cut.
    let a = json(&["advise", &fx("gpu-async")]);
    let (text, _) = run_env(&["advise", &fx("gpu-async")], &[("COLUMNS", "60")]);
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    for f in a["findings"].as_array().unwrap() {
        let title = f["title"].as_str().unwrap().split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(flat.contains(&title), "{title}");
    }
    assert!(text.lines().all(|l| l.chars().count() <= 60), "{text}");
}

#[test]
fn default_tables_show_what_the_docs_promise_and_say_what_is_unknown() {
    // kernels: registers and occupancy as the profile records them; "—" where not.
    let f = fx("gpu-async");
    let k = json(&["kernels", &f])["kernels"][0].clone();
    let text = ok(&["kernels", &f]);
    assert!(text.lines().nth(1).unwrap().contains("REGS") && text.contains("OCC"), "{text}");
    let row = text.lines().nth(2).unwrap();
    let regs = k["registers_per_thread"].as_u64().unwrap().to_string();
    let occ = format!("{:.0}%", k["occupancy_pct"].as_f64().unwrap());
    assert!(row.split_whitespace().any(|c| c == regs) && row.contains(&occ), "{row} vs {k}");
    let rocm = ok(&["kernels", &fx("rocm-mi300x-conv-8gpu")]);
    assert!(rocm.lines().nth(2).unwrap().contains('—'), "ROCm records no registers: {rocm}");
    // memory: a share too small to print is "<0.1%", not 0.0%.
    let m = json(&["memory", &f]);
    let host = m["allocators"].as_array().unwrap().iter().find(|a| a["name"] == "xla_gpu_host_bfc").unwrap().clone();
    let share = 100.0 * host["peak_in_use_bytes"].as_f64().unwrap() / host["capacity_bytes"].as_f64().unwrap();
    assert!(share > 0.0 && share < 0.05);
    let line = ok(&["memory", &f]).lines().find(|l| l.contains("xla_gpu_host_bfc")).unwrap().to_string();
    assert!(line.contains("<0.1%"), "{line}");
}

#[test]
fn names_without_hlo_and_captures_without_ops_are_explained() {
    // `ops` lists runtime copies; `hlo` says what they are rather than "no such op".
    let f = fx("gpu-async");
    let row = json(&["ops", &f, "--top", "0"])["ops"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "MemcpyH2D")
        .unwrap()
        .clone();
    let err = assert_clean_error(&["hlo", &f, "MemcpyH2D"]);
    assert!(err.contains("host-to-device copy") && err.contains(&format!("over {} runs", row["count"])), "{err}");
    let err = assert_clean_error(&["hlo", &fx("rocm-mi300x-gemm"), "__amd_rocclr_copyBuffer.kd"]);
    assert!(err.contains("copy within or between devices"), "{err}");
    // An op of a program, asked for in another (a pod's label with a host it is not
    // on, a number no host gave): the programs it ran in, not "a kernel the runtime
    // launched itself".
    let pod = fixture("cpu-pod3");
    let pod = pod.to_str().unwrap();
    for module in ["jit_local_norm(10) on host9", "jit_local_norm(99)"] {
        let err = assert_clean_error(&["hlo", pod, "wrapped_sqrt", "--module", module]);
        assert!(
            err.contains(&format!("in module {module:?}; it ran in jit_local_norm(10) on host2, jit_local_norm(16)")),
            "{err}"
        );
        assert!(!err.contains("runtime"), "{err}");
    }
    // JAX 0.4.31 on CPU records no XLA ops: `ops` says why and what to do.
    let text = ok(&["ops", &fx("cpu-jax0431")]);
    assert!(text.contains("no XLA ops found") && text.contains("0.4.33") && text.contains("upgrade jax"), "{text}");
}

/// #77 item 4: at 100 columns the reports that ran past it (history's op and run
/// columns, buffers' peak, memory's key, collectives' headline, diff's noise) fit,
/// and what they cut or wrap is whole in a pipe.
#[test]
fn reports_fit_100_columns_and_are_whole_in_a_pipe() {
    let logs = fx("cpu-clean").rsplit_once('/').unwrap().0.to_string();
    let cases: Vec<Vec<String>> = vec![
        vec!["history".into(), logs],
        vec!["buffers".into(), fx("gpu-transformer")],
        vec!["memory".into(), fx("gpu-transformer")],
        vec!["collectives".into(), fx("cpu-dp4")],
        vec!["diff".into(), fx("cpu-guide-sgd"), fx("cpu-guide-adam")],
    ];
    for args in cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (text, _) = run_env(&args, &[("COLUMNS", "100")]);
        let long: Vec<&str> = text.lines().filter(|l| l.chars().count() > 100).collect();
        assert!(long.is_empty(), "{args:?}: {long:#?}");
        let words = |t: &str| t.split_whitespace().filter(|w| !w.contains('…')).count();
        let piped = ok(&args);
        assert!(words(&text) <= words(&piped), "{args:?}");
    }
}

/// #77 item 5: guide 004's layout, two runs captured in the same second under
/// `<stamp>/{lcam,tad}_trace`, are labelled by the folders that tell them apart.
#[test]
fn diff_labels_runs_of_one_name_by_what_tells_them_apart() {
    let tmp = tempfile::tempdir().unwrap();
    let stamp = tmp.path().join("tensorboard_logs").join("4gpu_20261127");
    for (side, fixture) in [("lcam_trace", "cpu-guide-sgd"), ("tad_trace", "cpu-guide-adam")] {
        let run = stamp.join(side).join("plugins/profile/2026_11_27_19_33_34");
        std::fs::create_dir_all(&run).unwrap();
        let from =
            std::fs::read_dir(format!("{}/plugins/profile", fx(fixture))).unwrap().next().unwrap().unwrap().path();
        for f in std::fs::read_dir(from).unwrap() {
            let f = f.unwrap().path();
            std::fs::copy(&f, run.join(f.file_name().unwrap())).unwrap();
        }
    }
    let (a, b) = (stamp.join("lcam_trace"), stamp.join("tad_trace"));
    let text = ok(&["diff", a.to_str().unwrap(), b.to_str().unwrap()]);
    assert!(text.contains("A: lcam_trace (8 steps)   B: tad_trace (8 steps)"), "{text}");
    let d = json(&["diff", a.to_str().unwrap(), b.to_str().unwrap()]);
    assert_eq!((d["a"]["run"].as_str(), d["b"]["run"].as_str()), (Some("lcam_trace"), Some("tad_trace")));
}

/// #77 item 4's proof: every command's table at 100 columns, on fixtures of each
/// backend, and every `--help` (clap's `wrap_help` wraps it to the terminal), keeps
/// every line within 100 characters.
#[test]
fn every_command_and_its_help_fit_100_columns() {
    let tmp = tempfile::tempdir().unwrap();
    let logs = fx("cpu-clean").rsplit_once('/').unwrap().0.to_string();
    let baseline = tmp.path().join("baseline.json");
    std::fs::write(&baseline, ok(&["summary", &fx("cpu-guide-sgd"), "--json"])).unwrap();
    let baseline = baseline.to_str().unwrap().to_string();
    let mut cases: Vec<Vec<String>> = Vec::new();
    let per_run = [
        &["info"][..],
        &["summary"],
        &["steps"],
        &["steps", "--critical-path"],
        &["ops"],
        &["ops", "--by", "scope", "--depth", "3"],
        &["ops", "--by", "line"],
        &["ops", "--by", "stack"],
        &["ops", "--by", "category"],
        &["ops", "--by", "module"],
        &["scopes"],
        &["roofline"],
        &["kernels"],
        &["memory"],
        &["buffers"],
        &["collectives"],
        &["compile"],
        &["devices"],
        &["advise"],
    ];
    for f in ["cpu-transformer", "gpu-transformer", "tpu-v6e-inference", "cpu-dp4", "rocm-mi300x-conv-2gpu"] {
        for args in per_run {
            let mut a: Vec<String> = vec![args[0].into(), fx(f)];
            a.extend(args[1..].iter().map(|s| s.to_string()));
            cases.push(a);
        }
        let top = json(&["ops", &fx(f), "--top", "1"]);
        if let Some(op) = top["ops"][0]["name"].as_str() {
            cases.push(vec!["hlo".into(), fx(f), op.into()]);
        }
    }
    for f in ["cpu-transformer", "gpu-transformer", "cpu-dp4"] {
        cases.push(vec!["whatif".into(), fx(f), "--remove".into(), "compile".into()]);
    }
    let (sgd, adam) = (fx("cpu-guide-sgd"), fx("cpu-guide-adam"));
    cases.push(vec!["ls".into(), logs.clone()]);
    cases.push(vec!["history".into(), logs]);
    cases.push(vec!["diff".into(), sgd.clone(), adam.clone()]);
    cases.push(vec!["compare".into(), sgd.clone(), adam.clone(), fx("cpu-guide-optax")]);
    cases.push(vec!["check".into(), adam, "--baseline".into(), baseline]);
    cases.push(vec!["sql".into(), "SELECT name, self_ps, count FROM ops ORDER BY self_ps DESC LIMIT 5".into(), sgd]);
    let mut long = Vec::new();
    for args in &cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = Command::new(env!("CARGO_BIN_EXE_stepscope")).args(&args).env("COLUMNS", "100").output().unwrap();
        // `check` exits 1 on a regression; every other command 0.
        assert!(out.status.code().is_some_and(|c| c <= 1), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        let text = String::from_utf8(out.stdout).unwrap();
        long.extend(text.lines().filter(|l| l.chars().count() > 100).map(|l| format!("{args:?}: {l}")));
    }
    // Every command's help, short and long.
    let commands = help_commands();
    let commands = commands.iter().filter(|c| *c != "help");
    for command in std::iter::once(None).chain(commands.map(Some)) {
        for flag in ["-h", "--help"] {
            let args: Vec<&str> = command.map(String::as_str).into_iter().chain([flag]).collect();
            let (text, _) = run_env(&args, &[("COLUMNS", "100")]);
            long.extend(text.lines().filter(|l| l.chars().count() > 100).map(|l| format!("{args:?}: {l}")));
        }
    }
    assert!(long.is_empty(), "{} lines past 100 columns:\n{}", long.len(), long.join("\n"));
}
