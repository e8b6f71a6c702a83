//! `stepscope capture` and `top` against real JAX jobs (tests/support/jax_server.py,
//! JAX on CPU serving `jax.profiler.start_server`) and against peers that are not
//! profilers. Every child process is killed when its guard drops.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::util::*;

/// Starts tests/support/jax_server.py with `args` and waits for it to print its port.
fn jax_job(args: &[&str]) -> PortChild {
    let mut cmd = Command::new("python3");
    cmd.arg(root().join("tests/support/jax_server.py"))
        .args(["--seconds", "90"])
        .args(args)
        .env("JAX_PLATFORMS", "cpu");
    PortChild::spawn(
        cmd,
        Duration::from_secs(120),
        "python3 tests/support/jax_server.py (is JAX installed? pip install -r tests/support/requirements.txt)",
    )
}

/// Every file under `dir` (none when it does not exist).
pub(crate) fn files_under(dir: &Path) -> Vec<PathBuf> {
    if !dir.exists() {
        return Vec::new();
    }
    snapshot(dir).into_iter().map(|(p, ..)| p).filter(|p| !dir.join(p).is_dir()).collect()
}

/// The step numbers `stepscope steps --json` finds under `path`.
fn step_nums(path: &Path) -> Vec<i64> {
    let v = json(&["steps", path.to_str().unwrap()]);
    assert_eq!(v["source"], "annotation", "{v}");
    v["steps"].as_array().unwrap().iter().map(|s| s["step_num"].as_i64().unwrap()).collect()
}

fn assert_consecutive(nums: &[i64]) {
    let mut sorted = nums.to_vec();
    sorted.sort_unstable();
    assert!(sorted.windows(2).all(|w| w[1] == w[0] + 1), "step numbers not consecutive: {sorted:?}");
}

#[test]
fn capture_a_running_job_then_analyse_it() {
    let job = jax_job(&[]);
    let tmp = tempfile::tempdir().unwrap();
    let logdir = tmp.path().join("logs");
    let target = job.target();
    let started = Instant::now();
    let report: serde_json::Value = serde_json::from_str(&ok(&[
        "capture",
        &target,
        "--duration",
        "1s",
        "--logdir",
        logdir.to_str().unwrap(),
        "--json",
    ]))
    .unwrap();
    let took = started.elapsed();
    assert!(took >= Duration::from_secs(1) && took < Duration::from_secs(20), "capture took {took:?}");
    assert_eq!(report["schema"], "stepscope.capture/1");
    assert_eq!(report["duration_ms"], 1000);

    // TensorBoard layout: one run folder named YYYY_MM_DD_HH_MM_SS, one host file, no temp files.
    let files = files_under(&logdir);
    assert_eq!(files.len(), 1, "{files:?}");
    let rel = files[0].to_str().unwrap().to_string();
    let parts: Vec<&str> = rel.split('/').collect();
    assert_eq!(parts.len(), 4, "{rel}");
    assert_eq!(&parts[..2], ["plugins", "profile"]);
    assert_eq!(parts[2].len(), 19, "{rel}");
    assert!(parts[2].chars().all(|c| c.is_ascii_digit() || c == '_'), "{rel}");
    assert!(parts[3].ends_with(".xplane.pb") && !parts[3].starts_with('.'), "{rel}");
    let file = logdir.join(&files[0]);
    let hosts = report["hosts"].as_array().unwrap();
    assert_eq!(hosts.len(), 1);
    assert_eq!(hosts[0]["target"], target.as_str());
    assert_eq!(hosts[0]["path"], file.to_str().unwrap());
    assert_eq!(hosts[0]["file_bytes"].as_u64().unwrap(), std::fs::metadata(&file).unwrap().len());

    // The analysis finds the job's steps, numbered without gaps; the independent
    // reader sees the same steps in the written file.
    let nums = step_nums(&logdir);
    assert!(nums.len() >= 10, "expected many 1-second steps, got {nums:?}");
    assert_consecutive(&nums);
    assert_eq!(hosts[0]["step_count"].as_u64().unwrap() as usize, nums.len());
    let reference_steps = reference(&["steps", file.to_str().unwrap()]);
    let mut ref_nums: Vec<i64> =
        reference_steps.as_array().unwrap().iter().map(|s| s["step_num"].as_i64().unwrap()).collect();
    let mut ours = nums.clone();
    ref_nums.sort_unstable();
    ours.sort_unstable();
    assert_eq!(ours, ref_nums);
    let info = reference(&["info", file.to_str().unwrap()]);
    assert_eq!(hosts[0]["events"], info["events_total"]);

    // A second capture lands in a new run folder next to the first.
    ok(&["capture", &target, "--duration", "300ms", "--logdir", logdir.to_str().unwrap()]);
    let runs = json(&["ls", logdir.to_str().unwrap()]);
    assert_eq!(runs["runs"].as_array().map(Vec::len), Some(2), "{runs}");

    // A job serves one capture at a time: a second one meanwhile is refused, cleanly.
    let first = Command::new(env!("CARGO_BIN_EXE_stepscope"))
        .args(["capture", &target, "--duration", "2s", "--logdir", logdir.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = ChildGuard(Some(first));
    std::thread::sleep(Duration::from_millis(700));
    let other = tmp.path().join("other");
    let err = assert_clean_error(&["capture", &target, "--duration", "300ms", "--logdir", other.to_str().unwrap()]);
    assert!(err.contains("already being profiled"), "{err}");
    assert!(files_under(&other).is_empty());
    let out = first.0.take().unwrap().wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(json(&["ls", logdir.to_str().unwrap()])["runs"].as_array().map(Vec::len), Some(3));

    // top, plain: one line per refresh, each with the window's steps.
    let out = ok(&["top", &target, "--plain", "--count", "3", "--window", "300ms", "--interval", "600ms"]);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 3, "{out}");
    for l in &lines {
        let n: u64 = l.split("steps ").nth(1).and_then(|r| r.split_whitespace().next()).unwrap().parse().unwrap();
        assert!(n > 0, "{l}");
        assert!(l.contains("util ") && l.contains("idle ") && l.contains("mem n/a") && l.contains("top "), "{l}");
    }
    // top, JSON: the snapshot schema with the same kind of numbers.
    let out = ok(&["top", &target, "--json", "--count", "1", "--window", "300ms"]);
    let snap: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(snap["schema"], "stepscope.top/1");
    assert!(snap["step_count"].as_u64().unwrap() > 0, "{snap}");
    let util = snap["device_utilization_pct"].as_f64().unwrap();
    assert!(util > 0.0 && util <= 100.0, "{snap}");
    assert!(snap["top_ops"].as_array().is_some_and(|a| !a.is_empty()), "{snap}");
    assert!(snap["memory"].is_null(), "XLA:CPU records no allocator events: {snap}");
}

#[test]
fn capture_two_jobs_into_one_run() {
    let (a, b) = (jax_job(&[]), jax_job(&[]));
    let tmp = tempfile::tempdir().unwrap();
    let targets = format!("{},{}", a.target(), b.target());
    ok(&["capture", &targets, "--duration", "500ms", "--logdir", tmp.path().to_str().unwrap()]);
    let files = files_under(tmp.path());
    assert_eq!(files.len(), 2, "{files:?}");
    assert_eq!(files[0].parent(), files[1].parent(), "one run folder: {files:?}");
    // Both jobs run on this machine, so the port tells the hosts apart.
    let mut names: Vec<String> = files.iter().map(|f| f.file_name().unwrap().to_string_lossy().into_owned()).collect();
    names.sort();
    let mut want = vec![format!("_{}.xplane.pb", a.port), format!("_{}.xplane.pb", b.port)];
    want.sort();
    for (n, w) in names.iter().zip(&want) {
        assert!(n.ends_with(w.as_str()), "{names:?}");
    }
    let steps = json(&["steps", tmp.path().to_str().unwrap()]);
    let mut hosts: Vec<&str> = steps["steps"].as_array().unwrap().iter().map(|s| s["host"].as_str().unwrap()).collect();
    hosts.sort_unstable();
    hosts.dedup();
    assert_eq!(hosts.len(), 2, "steps from both hosts: {hosts:?}");

    // One target down: the whole capture fails at once, without waiting for the
    // other's 10 s, and writes nothing.
    let dead = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let other = tmp.path().join("other");
    let started = Instant::now();
    let targets = format!("{},127.0.0.1:{dead}", a.target());
    let err = assert_clean_error(&["capture", &targets, "--duration", "10s", "--logdir", other.to_str().unwrap()]);
    assert!(err.contains("nothing is listening") && err.contains(&format!(":{dead}")), "{err}");
    assert!(started.elapsed() < Duration::from_secs(5), "took {:?}", started.elapsed());
    assert!(files_under(&other).is_empty());
}

#[test]
fn capture_failures_are_one_line_and_leave_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let logdir = tmp.path().join("logs");
    let logdir_s = logdir.to_str().unwrap();

    // Nothing listening: a port that was free a moment ago.
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let target = format!("127.0.0.1:{port}");
    let started = Instant::now();
    let err = assert_clean_error(&["capture", &target, "--duration", "2s", "--logdir", logdir_s]);
    assert!(err.contains("nothing is listening") && err.contains(&target), "{err}");
    assert!(started.elapsed() < Duration::from_secs(5), "took {:?}", started.elapsed());
    let err = assert_clean_error(&["top", &target, "--plain", "--count", "2"]);
    assert!(err.contains("nothing is listening"), "{err}");

    // An HTTP/1 server is not a profiler.
    let http = TcpListener::bind("127.0.0.1:0").unwrap();
    let target = format!("127.0.0.1:{}", http.local_addr().unwrap().port());
    std::thread::spawn(move || {
        for conn in http.incoming().take(3) {
            let Ok(mut c) = conn else { continue };
            let mut buf = [0u8; 1024];
            let _ = c.read(&mut buf);
            let _ = c.write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
        }
    });
    let err = assert_clean_error(&["capture", &target, "--logdir", logdir_s]);
    assert!(err.contains("is not a JAX profiler server"), "{err}");

    // A peer that accepts and never answers: found within the connect timeout, not the capture deadline.
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let target = format!("127.0.0.1:{}", silent.local_addr().unwrap().port());
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for c in silent.incoming().take(3).flatten() {
            held.push(c);
        }
        std::thread::sleep(Duration::from_secs(30));
    });
    let started = Instant::now();
    let err = assert_clean_error(&["capture", &target, "--duration", "2s", "--logdir", logdir_s]);
    assert!(err.contains("sent no gRPC answer"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(10), "took {:?}", started.elapsed());

    // Bad arguments.
    for (args, needle) in [
        (vec!["capture", "localhost"], "no port"),
        (vec!["capture", "localhost:9012", "--duration", "2"], "not a duration"),
        (vec!["capture", "a:1,a:1"], "listed twice"),
        (vec!["top", "localhost:1", "--window", "3s", "--interval", "1s"], "longer than --interval"),
        (vec!["capture", "localhost:9012", "--max-size", "16"], "--max-size: \"16\" is not a size"),
        (vec!["capture", "localhost:9012", "--max-size", "3GiB"], "is too large"),
        (vec!["top", "localhost:9012", "--max-size", "100B"], "is too small"),
        (vec!["capture", "localhost:9012", "--grace", "soon"], "--grace: \"soon\" is not a duration"),
    ] {
        let err = assert_clean_error(&args);
        assert!(err.contains(needle), "{args:?}: {err}");
    }
    assert!(files_under(&logdir).is_empty(), "{:?}", files_under(&logdir));
}

#[test]
fn capture_of_an_idle_job_then_of_a_dying_job() {
    // The job compiles, then does no JAX work at all.
    let mut job = jax_job(&["--steps", "0"]);
    let tmp = tempfile::tempdir().unwrap();
    let logdir = tmp.path().join("logs");
    let logdir_s = logdir.to_str().unwrap().to_string();
    let target = job.target();

    let err = assert_clean_error(&["capture", &target, "--duration", "300ms", "--logdir", &logdir_s]);
    assert!(err.contains("is empty"), "{err}");

    // Killed 1.5 s into a 10 s capture: the capture fails at once, not at its deadline.
    let capture = Command::new(env!("CARGO_BIN_EXE_stepscope"))
        .args(["capture", &target, "--duration", "10s", "--logdir", &logdir_s])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut capture = ChildGuard(Some(capture));
    std::thread::sleep(Duration::from_millis(1500));
    job.kill();
    let killed = Instant::now();
    let out = capture.0.take().unwrap().wait_with_output().unwrap();
    assert!(killed.elapsed() < Duration::from_secs(5), "took {:?} after the kill", killed.elapsed());
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with("stepscope: ") && err.contains(" — "), "{err}");
    assert!(err.contains("broke during the capture"), "{err}");
    assert!(out.stdout.is_empty());
    assert!(files_under(&logdir).is_empty(), "{:?}", files_under(&logdir));
}

/// Kills a spawned stepscope if the test fails before waiting on it.
struct ChildGuard(Option<Child>);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if let Some(c) = &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}
