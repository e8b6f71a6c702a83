//! Helpers shared by the test areas.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The parts of the summary's `breakdown`, which add up to its `step_ps`.
pub const BREAKDOWN_PARTS: [&str; 10] = [
    "device_compute_ps",
    "collectives_ps",
    "host_to_device_ps",
    "device_to_host_ps",
    "device_to_device_ps",
    "async_wait_ps",
    "host_callback_ps",
    "runtime_overhead_ps",
    "compile_ps",
    "device_idle_ps",
];

/// The repository root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().expect("repo root")
}

/// A path under tests/fixtures.
pub fn fixture(rel: &str) -> PathBuf {
    root().join("tests/fixtures").join(rel)
}

/// Every profile file under tests/fixtures (xplane.pb and trace JSON).
pub fn fixture_files() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).expect("read fixtures") {
            let p = e.expect("entry").path();
            if p.is_dir() {
                walk(&p, out);
            } else {
                let n = p.to_string_lossy();
                if n.ends_with(".xplane.pb") || n.ends_with(".json.gz") {
                    out.push(p);
                }
            }
        }
    }
    let mut out = Vec::new();
    walk(&root().join("tests/fixtures"), &mut out);
    out.sort();
    assert!(out.len() >= 7, "expected the committed fixtures, found {out:?}");
    out
}

/// The one `.xplane.pb` of fixture folder `dir`.
pub fn xplane(dir: &str) -> String {
    let f = fixture_files()
        .into_iter()
        .find(|p| p.starts_with(fixture(dir)) && p.to_string_lossy().ends_with(".xplane.pb"))
        .unwrap_or_else(|| panic!("no .xplane.pb in tests/fixtures/{dir}"));
    f.to_str().expect("utf-8 path").to_string()
}

/// What a user points stepscope at for fixture `dir`: its one `.xplane.pb`, or, where
/// it holds several (a pod: a file a host), the fixture's folder.
pub fn capture(dir: &str) -> String {
    let files = fixture_files()
        .into_iter()
        .filter(|p| p.starts_with(fixture(dir)) && p.to_string_lossy().ends_with(".xplane.pb"));
    if files.count() > 1 {
        fixture(dir).to_str().expect("utf-8 path").to_string()
    } else {
        xplane(dir)
    }
}

/// Three CPU hosts of three captures (a clean loop, a slow one, a data-parallel one):
/// a heterogeneous run for [`run_of_fixtures`].
pub const THREE_CPU_HOSTS: [(&str, &str); 3] = [("a", "cpu-clean"), ("b", "cpu-slow"), ("c", "cpu-dp4")];

/// Makes run `plugins/profile/RUN` under `root` of hosts copied from fixtures: each
/// (host, fixture folder) a `<host>.xplane.pb`. Returns the run's folder.
pub fn run_of_fixtures(root: &Path, run: &str, hosts: &[(&str, &str)]) -> PathBuf {
    let dir = root.join("plugins/profile").join(run);
    std::fs::create_dir_all(&dir).expect("mkdir");
    for (host, fixture_dir) in hosts {
        std::fs::copy(xplane(fixture_dir), dir.join(format!("{host}.xplane.pb"))).expect("copy");
    }
    dir
}

/// Runs the stepscope binary. A first argument [`TOGETHER`] reads a run of several
/// hosts together, as one profile (`STEPSCOPE_READ_TOGETHER=1`: the reference the merges
/// of a run read a host at a time are held to).
pub fn stepscope(args: &[&str]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_stepscope"));
    match args.split_first() {
        Some((&TOGETHER, rest)) => cmd.env("STEPSCOPE_READ_TOGETHER", "1").args(rest),
        _ => cmd.args(args),
    };
    cmd.output().expect("run stepscope")
}

/// The first argument that has [`stepscope`] read a run's hosts together.
pub const TOGETHER: &str = "(read together)";

/// Runs stepscope, expects success, returns stdout.
pub fn ok(args: &[&str]) -> String {
    let out = stepscope(args);
    assert!(
        out.status.success(),
        "stepscope {args:?} failed ({:?}): {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8 stdout")
}

/// Runs stepscope with `--json` appended and parses stdout.
pub fn json(args: &[&str]) -> serde_json::Value {
    let mut a = args.to_vec();
    a.push("--json");
    serde_json::from_str(&ok(&a)).expect("valid JSON")
}

/// Runs the independent Python reference reader and parses its JSON output.
pub fn reference(args: &[&str]) -> serde_json::Value {
    serde_json::from_str(&reference_text(args)).expect("reference JSON")
}

/// Runs the reference reader for a command that prints one JSON object a line (`dump`).
pub fn reference_lines(args: &[&str]) -> Vec<serde_json::Value> {
    reference_text(args).lines().map(|l| serde_json::from_str(l).expect("reference JSON line")).collect()
}

/// Every event of plane `plane` of `file`, line by line, as the reference reader
/// dumps them.
pub fn reference_plane_events(file: &str, plane: &str) -> Vec<serde_json::Value> {
    let info = reference(&["info", file]);
    let mut out = Vec::new();
    for p in info["hosts"].as_array().unwrap().iter().flat_map(|h| h["planes"].as_array().unwrap()) {
        if p["name"] != plane {
            continue;
        }
        for l in p["lines"].as_array().unwrap() {
            let line = l["name"].as_str().unwrap();
            out.extend(reference_lines(&["dump", file, "--plane", plane, "--line", line, "--limit", "100000000"]));
        }
    }
    out
}

/// A log directory under `tmp` of three runs: the guide's SGD capture, a data-parallel
/// run of eight devices (all-reduce, all-gather, reduce-scatter), and a run of two
/// hosts (one capture under two names).
pub fn three_runs(tmp: &Path) -> PathBuf {
    let logs = tmp.join("logs");
    copy_tree(&fixture("cpu-guide-sgd"), &logs.join("sgd"));
    copy_tree(&fixture("cpu-dp8-collectives"), &logs.join("dp8"));
    let two = logs.join("two/plugins/profile/2026_11_01_00_00_00");
    std::fs::create_dir_all(&two).unwrap();
    let vm = fixture("cpu-clean/plugins/profile/2026_11_21_23_32_11/vm.xplane.pb");
    for host in ["vm", "worker-1"] {
        std::fs::copy(&vm, two.join(format!("{host}.xplane.pb"))).unwrap();
    }
    logs
}

/// Runs a tests/support script and parses its JSON output.
pub fn support(script: &str, args: &[&str]) -> serde_json::Value {
    let out = Command::new("python3")
        .arg(root().join("tests/support").join(script))
        .args(args)
        .output()
        .expect("python3 is needed; run `bash scripts/test.sh`, which installs the test dependencies");
    assert!(
        out.status.success(),
        "{script} {args:?} failed (pip install -r tests/support/requirements.txt): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("support script JSON")
}

/// The reference reader's standard output (a command that writes a file: nothing).
pub fn reference_text(args: &[&str]) -> String {
    let script = root().join("tests/support/xspace_ref.py");
    let out = Command::new("python3")
        .arg(script)
        .args(args)
        .output()
        .expect("python3 is needed for the reference reader; run `bash scripts/test.sh`, which installs it");
    assert!(
        out.status.success(),
        "reference reader failed (run `pip install -r tests/support/requirements.txt`): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("reference output is UTF-8")
}

/// Asserts a failed run: exit code 2 and one `stepscope: … — …` line on stderr.
pub fn assert_clean_error(args: &[&str]) -> String {
    let out = stepscope(args);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{args:?}: expected exit 2, stderr: {err}");
    assert!(!err.contains("panicked"), "{args:?} panicked: {err}");
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "{args:?}: expected one line, got {err:?}");
    assert!(lines[0].starts_with("stepscope: "), "{err}");
    assert!(lines[0].contains(" — "), "{args:?}: no 'what to do' part in {err:?}");
    assert!(out.stdout.is_empty(), "{args:?}: printed to stdout on error");
    err
}

/// A listing of a folder tree: (relative path, size, modification time).
pub fn snapshot(dir: &Path) -> Vec<(PathBuf, u64, std::time::SystemTime)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("read dir") {
            let p = e.expect("entry").path();
            let m = std::fs::metadata(&p).expect("metadata");
            if m.is_dir() {
                stack.push(p.clone());
            }
            out.push((p.strip_prefix(dir).expect("prefix").to_path_buf(), m.len(), m.modified().expect("mtime")));
        }
    }
    out.sort();
    out
}

/// Copies a folder tree.
pub fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for e in std::fs::read_dir(from).expect("read dir") {
        let p = e.expect("entry").path();
        let dest = to.join(p.file_name().expect("name"));
        if p.is_dir() {
            copy_tree(&p, &dest);
        } else {
            std::fs::copy(&p, &dest).expect("copy");
        }
    }
}

/// How a child run by [`run_limited`] ended.
pub struct Outcome {
    /// Exit code, or `None` when killed by a signal.
    pub code: Option<i32>,
    pub signal: Option<i32>,
    pub timed_out: bool,
    pub max_rss_bytes: u64,
    pub elapsed: Duration,
    pub stderr: String,
}

/// Runs `cmd` (stdin empty, stdout and stderr to files in `dir`), killing it after
/// `limit`. Peak memory is the kernel's high-water mark
/// (`VmHWM` in /proc/<pid>/status) sampled every millisecond: only growth in the last
/// millisecond before exit could go unseen. (`wait4`'s `ru_maxrss` cannot be used: a
/// spawned child inherits the spawning process's high-water mark at `exec`.)
///
/// A sample counts only once the child's `Name:` is its program's file name: until
/// `exec` has finished, the new process can still show this test process's memory
/// (about 260 MiB while robustness.rs holds its variants), which once made clean runs
/// look like overruns.
pub fn run_limited(mut cmd: Command, dir: &Path, limit: Duration) -> Outcome {
    use std::os::unix::process::ExitStatusExt;
    // The kernel keeps the first 15 bytes of the executable's file name as the name.
    let program = Path::new(cmd.get_program()).file_name().expect("program file name").to_string_lossy();
    let comm: String = program.chars().take(15).collect();
    let err_path = dir.join("stderr");
    cmd.stdin(Stdio::null())
        .stdout(File::create(dir.join("stdout")).expect("stdout file"))
        .stderr(File::create(&err_path).expect("stderr file"));
    let start = Instant::now();
    let mut child = cmd.spawn().expect("spawn");
    let status_path = format!("/proc/{}/status", child.id());
    let (mut timed_out, mut max_rss_bytes) = (false, 0u64);
    let status = loop {
        if let Ok(s) = std::fs::read_to_string(&status_path) {
            let field = |name: &str| s.lines().find_map(|l| l.strip_prefix(name)).map(str::trim);
            if field("Name:") == Some(comm.as_str()) {
                let hwm_kib = field("VmHWM:").and_then(|v| v.strip_suffix("kB"));
                if let Some(kib) = hwm_kib.and_then(|v| v.trim().parse::<u64>().ok()) {
                    max_rss_bytes = max_rss_bytes.max(kib * 1024);
                }
            }
        }
        if let Some(status) = child.try_wait().expect("try_wait") {
            break status;
        }
        if start.elapsed() > limit {
            child.kill().ok();
            timed_out = true;
            break child.wait().expect("wait");
        }
        std::thread::sleep(Duration::from_millis(1));
    };
    Outcome {
        code: status.code(),
        signal: status.signal(),
        timed_out,
        max_rss_bytes,
        elapsed: start.elapsed(),
        stderr: std::fs::read_to_string(&err_path).unwrap_or_default(),
    }
}

/// A server from tests/support that prints its port alone on its first stdout line;
/// killed when dropped.
pub struct PortChild {
    pub child: std::process::Child,
    pub port: u16,
}

impl PortChild {
    /// Starts `cmd` and waits up to `wait` for its port; `what` names it in failures
    /// (with how to install what it needs).
    pub fn spawn(mut cmd: Command, wait: Duration, what: &str) -> PortChild {
        use std::io::BufRead;
        let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::null()).spawn().expect(what);
        let stdout = child.stdout.take().expect("child stdout");
        // Guard first, so a timeout below still kills the child.
        let mut server = PortChild { child, port: 0 };
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = std::io::BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let line = rx.recv_timeout(wait).unwrap_or_else(|_| panic!("{what}: printed no port"));
        server.port = line.trim().parse().unwrap_or_else(|_| panic!("{what}: printed {line:?}, not a port"));
        server
    }

    /// `127.0.0.1:PORT`.
    pub fn target(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for PortChild {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The median of `v` (the mean of the middle two for an even count), as stepscope's
/// step statistics take it.
pub fn median(mut v: Vec<i64>) -> i64 {
    v.sort_unstable();
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2
    }
}

/// The commands `stepscope --help` lists, in its order (`help` too).
pub fn help_commands() -> Vec<String> {
    let help = ok(&["--help"]);
    let commands: Vec<String> = (help.lines())
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        // A command's line; its wrapped description's lines are indented further.
        .filter(|l| !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next().map(String::from))
        .collect();
    assert!(commands.len() >= 20, "{help}");
    commands
}

/// Thresholds every rule crosses where it can.
pub const HAIR_TRIGGER: &str =
    "utilization_pct = 100.0\nhost_overhead_pct = 0.0\nlaunch_queued_pct = 0.0\ncompile_s = 0.0\n\
    small_op_us = 100000.0\nsmall_op_share_pct = 0.0\nsmall_op_time_pct = 0.0\ndispatches_per_step = 0.0\n\
    copies_pct = 0.0\ndominant_op_pct = 0.0\ncollectives_exposed_pct = 0.0\nasync_wait_pct = 0.0\n\
    runtime_overhead_pct = 0.0\nmemory_capacity_pct = 0.0\nmemory_bandwidth_pct = 100.0\noccupancy_pct = 100.0\n\
    bandwidth_min_op_us = 0.0\nstep_jitter_pct = 0.0\ninput_bound_pct = 0.0\nmin_steps = 1000\nstraggler_pct = 0.0\n\
    host_callback_pct = 0.0\ndata_movement_pct = 0.0\ncapture_compile_pct = 0.0\nrecompile_steps = 0.0\n";

/// [`HAIR_TRIGGER`] written into `dir` as a thresholds file; its path.
pub fn hair_trigger(dir: &Path) -> String {
    let path = dir.join("thresholds.toml");
    std::fs::write(&path, HAIR_TRIGGER).unwrap();
    path.to_str().unwrap().to_string()
}

/// A run under `root` of one host per fixture of `mix`, named h0, h1, …
pub fn run_of_mix(root: &Path, mix: &[&str]) -> PathBuf {
    let names: Vec<String> = (0..mix.len()).map(|i| format!("h{i}")).collect();
    let hosts: Vec<(&str, &str)> = names.iter().map(String::as_str).zip(mix.iter().copied()).collect();
    run_of_fixtures(root, "2026_11_01_00_00_00", &hosts)
}
