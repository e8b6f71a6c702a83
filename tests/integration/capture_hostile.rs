//! `stepscope capture` against a real gRPC peer that misbehaves:
//! tests/support/hostile_profiler.py, a Python grpcio server that answers the
//! `tensorflow.ProfilerService/Profile` call with oversized, malformed or empty answers,
//! an error status with a megabyte of text, or never answers. Every run must end with
//! exit 2 and one `stepscope: ` line naming the target and the fault, within a time
//! bound, with its peak memory measured (`run_limited`), writing nothing.
//!
//! Needs Python's `grpcio` (tests/support/requirements.txt). Without it the tests are
//! skipped with a message, except where `CI` is set: there they fail.

use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use crate::util::*;

/// Limit for one stepscope run (the slowest, `stall`, takes 3 s).
const LIMIT: Duration = Duration::from_secs(20);
/// Memory any capture may use, whatever the peer sends (a debug build's own needs,
/// the network runtime, a little buffered answer).
const BASE_RSS_BYTES: u64 = 40 << 20;
const MIB: u64 = 1 << 20;
/// A real capture, cut in half by the `bad-xspace` server.
const TINY: &str = "cpu-tiny-ops/plugins/profile/2026_11_21_23_33_37/vm.xplane.pb";

/// Whether `import grpc` works; panics where it must (CI).
fn have_grpc() -> bool {
    static HAVE: OnceLock<bool> = OnceLock::new();
    *HAVE.get_or_init(|| {
        let ok = Command::new("python3").args(["-c", "import grpc"]).output().is_ok_and(|o| o.status.success());
        if !ok {
            assert!(
                std::env::var_os("CI").is_none(),
                "python3 cannot import grpc: pip install -r tests/support/requirements.txt"
            );
            eprintln!(
                "capture_hostile: SKIPPED, python3 cannot import grpc (pip install -r tests/support/requirements.txt)"
            );
        }
        ok
    })
}

/// Starts the hostile server in `mode` with `args`; `None` when grpcio is missing.
fn hostile(mode: &str, args: &[&str]) -> Option<PortChild> {
    if !have_grpc() {
        return None;
    }
    let mut cmd = Command::new("python3");
    cmd.arg(root().join("tests/support/hostile_profiler.py")).args(["--mode", mode, "--seconds", "60"]).args(args);
    Some(PortChild::spawn(cmd, Duration::from_secs(30), "python3 tests/support/hostile_profiler.py"))
}

/// How a capture against a hostile peer ended.
struct Failed {
    /// The one stderr line.
    line: String,
    elapsed: Duration,
    max_rss_bytes: u64,
}

/// Runs `stepscope <sub> <target> <args>` under [`LIMIT`] with its memory measured;
/// asserts a clean failure: exit 2, exactly one `stepscope: … — …` line naming the
/// target, nothing on stdout, no panic, and nothing written to the log directory.
fn fails(sub: &str, server: &PortChild, args: &[&str]) -> Failed {
    let tmp = tempfile::tempdir().expect("tempdir");
    let logdir = tmp.path().join("logs");
    let target = server.target();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_stepscope"));
    cmd.args([sub, &target]).args(args);
    if sub == "capture" {
        cmd.arg("--logdir").arg(&logdir);
    }
    let o = run_limited(cmd, tmp.path(), LIMIT);
    let what = format!("stepscope {sub} {target} {args:?}");
    assert!(!o.timed_out, "{what}: still running after {LIMIT:?}");
    assert_eq!(o.signal, None, "{what}: killed by a signal; stderr {:?}", o.stderr);
    assert!(!o.stderr.contains("panicked"), "{what}: {}", o.stderr);
    assert_eq!(o.code, Some(2), "{what}: stderr {:?}", o.stderr);
    let lines: Vec<&str> = o.stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{what}: expected one line, got {:?}", o.stderr);
    let line = lines[0].to_string();
    assert!(line.starts_with("stepscope: ") && line.contains(" — "), "{what}: {line}");
    assert!(line.contains(&target), "{what}: the target is not named: {line}");
    assert!(!line.chars().any(char::is_control), "{what}: control characters in {line:?}");
    assert!(line.chars().count() < 600, "{what}: {} characters: {line}", line.chars().count());
    let stdout = std::fs::read(tmp.path().join("stdout")).expect("stdout file");
    assert!(stdout.is_empty(), "{what}: printed {:?}", String::from_utf8_lossy(&stdout));
    assert!(!logdir.exists(), "{what}: wrote {:?}", snapshot(&logdir));
    Failed { line, elapsed: o.elapsed, max_rss_bytes: o.max_rss_bytes }
}

/// Asserts the run ended within `bound` and used at most `rss_bytes`.
fn bounded(f: &Failed, bound: Duration, rss_bytes: u64) {
    assert!(f.elapsed < bound, "took {:?} (bound {bound:?}): {}", f.elapsed, f.line);
    assert!(
        f.max_rss_bytes <= rss_bytes,
        "peak RSS {} MiB > {} MiB: {}",
        f.max_rss_bytes / MIB,
        rss_bytes / MIB,
        f.line
    );
}

/// Starts the server in `mode` with `server_args`, captures 100 ms from it, and asserts
/// a clean failure within 8 s and [`BASE_RSS_BYTES`] whose line holds each of `says`.
/// `None` when grpcio is missing.
fn short_capture_fails(mode: &str, server_args: &[&str], says: &[&str]) -> Option<(PortChild, Failed)> {
    let server = hostile(mode, server_args)?;
    let f = fails("capture", &server, &["--duration", "100ms"]);
    for words in says {
        assert!(f.line.contains(words), "{mode} {server_args:?}: no {words:?} in {}", f.line);
    }
    bounded(&f, Duration::from_secs(8), BASE_RSS_BYTES);
    Some((server, f))
}

#[test]
fn capture_hostile_huge_answer_over_the_limit_is_refused_unread() {
    // 64 MiB announced; the limit is 16 MiB: refused from the message's length prefix.
    let Some(server) = hostile("huge", &["--mib", "64"]) else { return };
    let f = fails("capture", &server, &["--duration", "100ms", "--max-size", "16MiB"]);
    assert!(f.line.contains("is 64 MiB, larger than the 16 MiB limit"), "{}", f.line);
    assert!(f.line.contains("--max-size"), "the fix names the option: {}", f.line);
    // Well under the answer's 64 MiB: the answer is not read.
    bounded(&f, Duration::from_secs(8), BASE_RSS_BYTES);
    eprintln!("huge 64 MiB, --max-size 16MiB: {:?}, peak RSS {} MiB", f.elapsed, f.max_rss_bytes / MIB);
    // top shares the option and the check.
    let f = fails("top", &server, &["--json", "--count", "1", "--window", "100ms", "--max-size", "16MiB"]);
    assert!(f.line.contains("larger than the 16 MiB limit"), "{}", f.line);
}

#[test]
fn capture_hostile_huge_junk_under_the_limit_is_not_a_profile() {
    // 16 MiB of random bytes as the xspace, under the default 2 GiB limit: read whole,
    // then found not to be an XSpace.
    let Some(server) = hostile("huge", &["--mib", "16"]) else { return };
    let f = fails("capture", &server, &["--duration", "100ms"]);
    assert!(f.line.contains("sent a trace that is not a valid XSpace"), "{}", f.line);
    bounded(&f, Duration::from_secs(8), BASE_RSS_BYTES + 2 * 16 * MIB);
    // The same answer refused unread gives the memory of a capture without the trace.
    let unread = fails("capture", &server, &["--duration", "100ms", "--max-size", "1MiB"]);
    assert!(unread.line.contains("is 16 MiB, larger than the 1 MiB limit"), "{}", unread.line);
    // The trace is held once: no copy between the received message and the decoder.
    let held = f.max_rss_bytes.saturating_sub(unread.max_rss_bytes);
    assert!(
        (8 * MIB..=24 * MIB).contains(&held),
        "16 MiB trace: peak RSS {} MiB, {} MiB without it",
        f.max_rss_bytes / MIB,
        unread.max_rss_bytes / MIB
    );
    eprintln!(
        "huge 16 MiB junk: {:?}, peak RSS {} MiB ({} MiB refused unread)",
        f.elapsed,
        f.max_rss_bytes / MIB,
        unread.max_rss_bytes / MIB
    );
}

#[test]
fn capture_hostile_garbage_answer() {
    let says = ["sent an answer that is not a profiler response", "is not a JAX profiler server, or a broken one"];
    let Some((server, _)) = short_capture_fails("garbage", &[], &says) else { return };
    // top ends with the same error on its first capture.
    let f = fails("top", &server, &["--plain", "--count", "2", "--window", "100ms"]);
    assert!(f.line.contains("not a profiler response"), "{}", f.line);
}

#[test]
fn capture_hostile_truncated_xspace() {
    let fixture = fixture(TINY);
    let Some(server) = hostile("bad-xspace", &["--xspace", fixture.to_str().expect("utf-8 path")]) else { return };
    let f = fails("capture", &server, &["--duration", "100ms"]);
    assert!(f.line.contains("sent a trace that is not a valid XSpace"), "{}", f.line);
    assert!(f.line.contains("at byte"), "says where: {}", f.line);
    let whole = std::fs::read(&fixture).expect("fixture");
    bounded(&f, Duration::from_secs(8), BASE_RSS_BYTES + 4 * whole.len() as u64);
    // The half the server sent is no XSpace for the independent reader either.
    let tmp = tempfile::tempdir().expect("tempdir");
    let half = tmp.path().join("half.xplane.pb");
    std::fs::write(&half, &whole[..whole.len() / 2]).expect("write");
    let out = Command::new("python3")
        .arg(root().join("tests/support/xspace_ref.py"))
        .args(["info", half.to_str().expect("utf-8 path")])
        .output()
        .expect("python3");
    assert!(!out.status.success(), "the reference reader read half of {}", fixture.display());
}

#[test]
fn capture_hostile_stall_ends_at_the_deadline() {
    let Some(server) = hostile("stall", &[]) else { return };
    // The probe is answered (UNIMPLEMENTED), the Profile call never: the capture gives
    // up at --duration + --grace = 3 s, not before.
    let f = fails("capture", &server, &["--duration", "1s", "--grace", "2s"]);
    assert!(f.line.contains("did not send the trace within 3s"), "{}", f.line);
    assert!(f.line.contains("--grace"), "the fix names the option: {}", f.line);
    assert!(f.elapsed >= Duration::from_secs(3), "gave up after {:?}", f.elapsed);
    bounded(&f, Duration::from_secs(3 + 4), BASE_RSS_BYTES);
}

#[test]
fn capture_hostile_error_status_with_a_megabyte_of_text() {
    // 1 MiB of message, percent-encoded into the trailers: more than the HTTP/2 client
    // accepts in a header block.
    let says = ["sent an answer whose headers are too large to read", "is not a JAX profiler server, or a broken one"];
    if short_capture_fails("error", &[], &says).is_none() {
        return;
    }
    // 20 KiB: over the HTTP/2 client's 16 KiB header list limit, refused as a protocol error.
    short_capture_fails("error", &["--mib", "0.02"], &["broke the gRPC protocol in its answer"]);
    // 4 KiB of the same text gets through: shown shortened, on one line, without the
    // line breaks, tabs, escapes and NULs.
    let says = ["failed (Internal: profiler failed: stack frame #0 at 0xdeadbeef end profiler failed: stack", "…"];
    let (_, f) = short_capture_fails("error", &["--mib", "0.004"], &says).expect("grpcio");
    assert!(!f.line.contains("[31m"), "escape sequences left: {}", f.line);
}

#[test]
fn capture_hostile_empty_answers() {
    // empty_trace set, as JAX answers when nothing was recorded.
    if short_capture_fails("empty", &[], &["is empty: the job recorded nothing in 100ms"]).is_none() {
        return;
    }
    // No xspace at all, and no empty_trace either.
    short_capture_fails("no-xspace", &[], &["answered without a trace"]);
}

/// The process under `pid` (itself included) whose name is `comm`.
fn descendant(pid: u32, comm: &str) -> Option<u32> {
    let name = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
    if name.trim() == comm {
        return Some(pid);
    }
    let children = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).unwrap_or_default();
    children.split_whitespace().filter_map(|c| c.parse().ok()).find_map(|c| descendant(c, comm))
}

#[test]
fn top_restores_the_terminal_when_a_signal_ends_it() {
    use std::io::Read;
    for (signal, name) in [(libc::SIGTERM, "SIGTERM"), (libc::SIGHUP, "SIGHUP")] {
        // A job that never answers keeps `top` on its screen, waiting.
        let Some(server) = hostile("stall", &[]) else { return };
        // `top` in a pseudo-terminal (script(1)), as a person runs it.
        let line = format!("{} top {} --window 5s --interval 6s", env!("CARGO_BIN_EXE_stepscope"), server.target());
        let mut script = Command::new("script")
            .args(["-qfec", &line, "/dev/null"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("script(1) from util-linux");
        let mut out = script.stdout.take().expect("stdout");
        let reader = std::thread::spawn(move || {
            let mut all = Vec::new();
            let _ = out.read_to_end(&mut all);
            all
        });
        let t = std::time::Instant::now();
        let top = loop {
            if let Some(pid) = descendant(script.id(), "stepscope") {
                break pid;
            }
            assert!(t.elapsed() < LIMIT, "{name}: top did not start");
            std::thread::sleep(Duration::from_millis(20));
        };
        // Let it draw its screen, then end it.
        std::thread::sleep(Duration::from_millis(800));
        assert_eq!(unsafe { libc::kill(top as i32, signal) }, 0);
        let status = script.wait().expect("wait");
        let shown = String::from_utf8_lossy(&reader.join().expect("reader")).into_owned();
        let entered =
            shown.find("\x1b[?1049h").unwrap_or_else(|| panic!("{name}: never entered the screen: {shown:?}"));
        let left = shown.rfind("\x1b[?1049l").unwrap_or_else(|| panic!("{name}: left the alternate screen on"));
        let shown_cursor = shown.rfind("\x1b[?25h").unwrap_or_else(|| panic!("{name}: left the cursor hidden"));
        assert!(left > entered && shown_cursor > entered, "{name}: {shown:?}");
        assert_eq!(status.code(), Some(128 + signal), "{name}: top's exit");
    }
}
