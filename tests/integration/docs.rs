//! The docs run as written: every `stepscope …` line in a code block of README.md and
//! docs/*.md, in a folder where the docs' placeholders are real captures.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::util::*;

/// The `stepscope` lines of the code blocks of `file`: (line number, command without
/// its comment).
fn doc_commands(file: &Path) -> Vec<(usize, String)> {
    let text = std::fs::read_to_string(file).unwrap();
    let (mut out, mut in_block) = (Vec::new(), false);
    for (i, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            in_block = !in_block;
            continue;
        }
        let l = line.trim().trim_start_matches("$ ");
        // Lines whose first word is the command (not output such as `stepscope: note: …`).
        if in_block && l.split_whitespace().next() == Some("stepscope") {
            let command = l.split(" # ").next().unwrap().split("  #").next().unwrap().trim();
            out.push((i + 1, command.to_string()));
        }
    }
    out
}

/// A folder in which the docs' placeholders exist: `LOGDIR`, `runs/…`, `profiles`,
/// `run.xplane.pb`, `kpi.toml`, `ci/baseline.json`, each a bundled capture or a file
/// made from one.
fn placeholders(dir: &Path) {
    let link = |name: &str, fixture_rel: &str| {
        let at = dir.join(name);
        std::fs::create_dir_all(at.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(fixture(fixture_rel), at).unwrap();
    };
    link("LOGDIR", "gpu-async");
    link("run.xplane.pb", "gpu-async/plugins/profile/2026_11_23_08_00_30/vm.xplane.pb");
    link("runs/adam", "cpu-clean");
    link("runs/lion", "cpu-slow");
    link("runs/sgd", "cpu-guide-sgd");
    link("runs/1dev", "cpu-transformer");
    link("runs/2dev", "cpu-dp2-own-steps");
    link("runs/4dev", "cpu-dp4");
    link("runs/main", "cpu-clean");
    link("runs/pr", "cpu-clean");
    link("profiles", "cpu-clean");
    link("nightly/a", "cpu-clean");
    link("nightly/b", "cpu-slow");
    link("ci/main", "cpu-clean");
    link("ci/pr", "cpu-guide-sgd");
    std::fs::write(dir.join("kpi.toml"), "utilization_pct = 70\n").unwrap();
    std::fs::create_dir_all(dir.join("ci")).unwrap();
    std::fs::write(dir.join("ci/baseline.json"), ok(&["summary", &fixture("cpu-clean").to_string_lossy(), "--json"]))
        .unwrap();
}

/// The values of the docs' word placeholders: `NAME` (a run of LOGDIR), `OP` (an op
/// LOGDIR ran; also as `OP=…`, a value of `whatif --scale`).
fn words(dir: &Path, command: &str) -> String {
    let logdir = dir.join("LOGDIR").to_string_lossy().to_string();
    let run = json(&["ls", &logdir])["runs"][0]["run"].as_str().unwrap().to_string();
    let op = json(&["ops", &logdir])["ops"][0]["name"].as_str().unwrap().to_string();
    command
        .split(' ')
        .map(|w| match w {
            "NAME" => run.clone(),
            "OP" => op.clone(),
            w => match w.strip_prefix("OP=") {
                Some(value) => format!("{op}={value}"),
                None => w.to_string(),
            },
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Runs `command` with bash in `dir`, `stepscope` first on PATH, with `env` set;
/// (exit code, stderr).
fn bash(dir: &Path, command: &str, env: &[(&'static str, String)], limit: Duration) -> (Option<i32>, String) {
    let mut c = Command::new("bash");
    c.arg("-c").arg(command).current_dir(dir).env("PATH", search_path());
    c.envs(env.iter().map(|(k, v)| (*k, v.as_str())));
    let outcome = run_limited(c, dir, limit);
    assert!(!outcome.timed_out, "`{command}` ran past {limit:?}");
    (outcome.code, outcome.stderr)
}

fn search_path() -> String {
    let bin: PathBuf = Path::new(env!("CARGO_BIN_EXE_stepscope")).parent().unwrap().to_path_buf();
    format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default())
}

/// `stepscope serve …` as written (with `--no-open` and `--port 0` where missing, so no
/// browser opens and no fixed port is taken): the server must say where it listens.
fn serve(dir: &Path, command: &str, env: &[(&'static str, String)]) -> Result<(), String> {
    let mut c = Command::new("bash");
    c.envs(env.iter().map(|(k, v)| (*k, v.as_str())));
    let mut command = command.to_string();
    for (flag, with) in [("--no-open", "--no-open"), ("--port", "--port 0")] {
        if !command.contains(flag) {
            command = format!("{command} {with}");
        }
    }
    c.arg("-c").arg(format!("exec {command}")).current_dir(dir).env("PATH", search_path());
    let mut child = c.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut seen = Vec::new();
    let found = loop {
        match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(line) if line.contains("http://127.0.0.1:") => break true,
            Ok(line) => seen.push(line),
            Err(_) => break false,
        }
    };
    child.kill().ok();
    child.wait().ok();
    found.then_some(()).ok_or_else(|| format!("no URL printed: {seen:?}"))
}

#[test]
fn every_stepscope_line_of_the_docs_runs_as_written() {
    let tmp = tempfile::tempdir().unwrap();
    placeholders(tmp.path());
    let mut files = vec![root().join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    files.extend(docs);
    let (mut ran, mut failures) = (0, Vec::new());
    let mut buckets: Option<crate::remote::Buckets> = None;
    for file in &files {
        let name = file.strip_prefix(root()).unwrap().display().to_string();
        for (line, written) in doc_commands(file) {
            // A synopsis (`[--format perfetto|chrome]`) shows the flags, not a command.
            if written.contains(" [--") {
                continue;
            }
            let mut command = words(tmp.path(), &written);
            // A bucket's log directory: LOGDIR uploaded to the emulators the remote
            // tests use, the environment a user sets for them, a cache of the test's.
            let mut env = Vec::new();
            for scheme in ["gs", "s3"] {
                let placeholder = format!("{scheme}://BUCKET/LOGDIR");
                let bucket = format!("{scheme}://BUCKET/");
                if command.contains(&bucket) {
                    let b = buckets.get_or_insert_with(|| crate::remote::Buckets::start(&[&fixture("gpu-async")]));
                    command = command.replace(&placeholder, &format!("{scheme}://prof/logs/gpu-async"));
                    // Any other path of the bucket (where tables are written): in the
                    // emulator's bucket too.
                    command = command.replace(&bucket, &format!("{scheme}://prof/"));
                    env = b.env(scheme);
                    env.push(("XDG_CACHE_HOME", tmp.path().join("cache").display().to_string()));
                }
            }
            let sub = command.split_whitespace().nth(1).unwrap_or("");
            let result = match sub {
                "serve" => serve(tmp.path(), &command, &env),
                // A running JAX job is needed (tests/integration/capture.rs runs them
                // against one): here, the flags must parse and the one-line error must
                // say that nothing answered.
                "capture" | "top" => {
                    let (code, err) = bash(tmp.path(), &command, &env, Duration::from_secs(60));
                    let usage = err.contains("--help`") || code == Some(0);
                    let said = err.contains("listening") || err.contains("resolve") || err.contains("connect");
                    (!usage && said).then_some(()).ok_or(format!("exit {code:?}: {err}"))
                }
                // A Ray cluster is needed (python/tests/test_ray_cluster.py runs one):
                // here, the flags must parse and one line must say what is missing.
                _ if command.contains(" --ray ") => {
                    let (code, err) = bash(tmp.path(), &command, &env, Duration::from_secs(120));
                    let said = err.trim().lines().count() == 1 && err.contains("Ray");
                    (code == Some(2) && said).then_some(()).ok_or(format!("exit {code:?}: {err}"))
                }
                _ => {
                    let (code, err) = bash(tmp.path(), &command, &env, Duration::from_secs(120));
                    (code == Some(0)).then_some(()).ok_or(format!("exit {code:?}: {err}"))
                }
            };
            ran += 1;
            if let Err(why) = result {
                failures.push(format!("{name}:{line}: `{written}`: {why}"));
            }
        }
    }
    assert!(ran >= 35, "the docs hold {ran} stepscope lines");
    assert!(failures.is_empty(), "{} of {ran} doc lines fail:\n{}", failures.len(), failures.join("\n"));
}

/// Every analysis command's `--help` ends with 2 to 4 examples, and each runs as
/// written (`/tmp/logdir` being a real capture, as the docs' LOGDIR).
#[test]
fn every_help_example_runs_as_written() {
    let tmp = tempfile::tempdir().unwrap();
    placeholders(tmp.path());
    let logdir = tmp.path().join("LOGDIR").display().to_string();
    let commands: Vec<String> = (help_commands().into_iter())
        .filter(|c| !["help", "serve", "capture", "top", "export", "mcp"].contains(&c.as_str()))
        .collect();
    assert!(commands.len() >= 17, "{commands:?}");
    let mut failures = Vec::new();
    for command in &commands {
        let command = command.as_str();
        let text = ok(&[command, "--help"]);
        let examples: Vec<String> = (text.lines())
            .skip_while(|l| !l.starts_with("EXAMPLES:"))
            .filter_map(|l| l.strip_prefix("    "))
            .filter(|l| l.starts_with("stepscope "))
            .map(|l| l.split("  ").next().unwrap().trim().to_string())
            .collect();
        assert!((2..=4).contains(&examples.len()), "`{command} --help`: {} examples:\n{text}", examples.len());
        for written in examples {
            let line = words(tmp.path(), &written.replace("/tmp/logdir", &logdir));
            let (code, err) = bash(tmp.path(), &line, &[], Duration::from_secs(120));
            if code != Some(0) {
                failures.push(format!("`{written}`: exit {code:?}: {err}"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
