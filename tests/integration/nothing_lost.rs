//! Nothing lost, nothing crashes (issue 46): `export -o` never replaces what it must
//! not and leaves nothing half-written; a profile copied over while it is read or
//! served is an error for that read, never a SIGBUS.

use std::io::Read;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::hostile::mkfifo;
use crate::server::{enc, serve, CPU_RUN};
use crate::util::{assert_clean_error, copy_tree, fixture, ok, run_limited};

const CPU_RUN_FILE: &str = "cpu-transformer/plugins/profile/2026_11_21_22_29_17/vm.xplane.pb";

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_stepscope"))
}

fn names(dir: &Path) -> Vec<String> {
    let mut n: Vec<String> =
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    n.sort();
    n
}

/// A valid XSpace `times` as large as `file`: serialized messages concatenated merge,
/// so the planes repeat.
fn repeated(file: &Path, times: usize, out: &Path) {
    let bytes = std::fs::read(file).unwrap();
    let mut f = std::fs::File::create(out).unwrap();
    for _ in 0..times {
        std::io::Write::write_all(&mut f, &bytes).unwrap();
    }
}

#[test]
fn export_writes_through_fifos_and_devices_and_replaces_only_regular_files() {
    let tmp = tempfile::tempdir().unwrap();
    let run = fixture("cpu-transformer");
    let run = run.to_str().unwrap();
    let regular = tmp.path().join("regular.json");
    ok(&["export", run, "-o", regular.to_str().unwrap()]);
    let want = std::fs::read(&regular).unwrap();
    assert!(want.len() > 100_000, "a real trace: {} bytes", want.len());

    // A character device is written through, never replaced (as root, the old rename
    // made /dev/null a regular file).
    ok(&["export", run, "-o", "/dev/null", "--format", "perfetto"]);
    let null = std::fs::symlink_metadata("/dev/null").unwrap();
    assert!(null.file_type().is_char_device(), "/dev/null is still a device");

    // A FIFO: its reader gets the very bytes of the regular export, and it stays a FIFO.
    let fifo = tmp.path().join("stream.json");
    mkfifo(&fifo);
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || {
            let mut got = Vec::new();
            std::fs::File::open(fifo).unwrap().read_to_end(&mut got).unwrap();
            got
        })
    };
    ok(&["export", run, "-o", fifo.to_str().unwrap()]);
    let got = reader.join().unwrap();
    assert!(got == want, "FIFO reader got {} bytes, the file export {} bytes", got.len(), want.len());
    assert!(std::fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo());

    // A link to a regular file: the file is replaced, the link stays a link.
    let target = tmp.path().join("target.json");
    std::fs::write(&target, b"old").unwrap();
    let link = tmp.path().join("link.json");
    std::os::unix::fs::symlink("target.json", &link).unwrap();
    ok(&["export", run, "-o", link.to_str().unwrap()]);
    assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
    assert!(std::fs::read(&target).unwrap() == want, "the link's target holds the export");

    // A link to nothing, a folder: one line, and nothing is created.
    let before = names(tmp.path());
    std::os::unix::fs::symlink("nowhere.json", tmp.path().join("dangling.json")).unwrap();
    let err = assert_clean_error(&["export", run, "-o", tmp.path().join("dangling.json").to_str().unwrap()]);
    assert!(err.contains("link to nowhere.json, which does not exist"), "{err}");
    let err = assert_clean_error(&["export", run, "--format", "csv", "-o", tmp.path().to_str().unwrap()]);
    assert!(err.contains("is a folder"), "{err}");
    let mut after = names(tmp.path());
    after.retain(|n| n != "dangling.json");
    assert_eq!(after, before, "nothing new beside the outputs");
}

/// Waits until `pid` holds a file open in `dir` (the export being written).
fn writing_into(pid: u32, dir: &Path, limit: Duration) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) {
            for fd in fds.flatten() {
                if std::fs::read_link(fd.path()).is_ok_and(|p| p.starts_with(dir)) {
                    return true;
                }
            }
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    false
}

#[test]
fn a_killed_export_leaves_nothing_behind_and_the_old_output_whole() {
    use std::os::unix::process::ExitStatusExt;
    let tmp = tempfile::tempdir().unwrap();
    let big = tmp.path().join("big.xplane.pb");
    repeated(&fixture("gpu-compile/plugins/profile/2026_11_23_07_48_39/vm.xplane.pb"), 20, &big);
    let out_dir = tmp.path().join("out");
    std::fs::create_dir(&out_dir).unwrap();
    let out = out_dir.join("trace.json");
    std::fs::write(&out, b"the previous export").unwrap();
    let mut child = bin()
        .args(["export", big.to_str().unwrap(), "-o", out.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    assert!(writing_into(child.id(), &out_dir, Duration::from_secs(120)), "the export never opened its output");
    child.kill().unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.signal(), Some(libc::SIGKILL), "killed while writing (the export was too quick to kill)");
    assert_eq!(names(&out_dir), vec!["trace.json".to_string()], "nothing half-written is left");
    assert_eq!(std::fs::read(&out).unwrap(), b"the previous export");
}

/// A 40-fold copy of a GPU capture (about 100 MB) made in `dir`, and the thread that
/// cuts it to 4 KiB after `delay_ms`, as `cp` and `scp` do first to a file they copy
/// over.
fn cut_after(dir: &Path, delay_ms: u64) -> (PathBuf, std::thread::JoinHandle<()>) {
    std::fs::create_dir_all(dir).unwrap();
    let file = dir.join("vm.xplane.pb");
    repeated(&fixture("gpu-compile/plugins/profile/2026_11_23_07_48_39/vm.xplane.pb"), 40, &file);
    let cut = {
        let file = file.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(delay_ms));
            std::fs::OpenOptions::new().write(true).open(&file).unwrap().set_len(4096).unwrap();
        })
    };
    (file, cut)
}

#[test]
fn a_profile_truncated_while_the_cli_reads_it_ends_in_one_line() {
    let tmp = tempfile::tempdir().unwrap();
    let mut changed = 0;
    for (i, delay_ms) in [150u64, 400, 800, 1600].into_iter().enumerate() {
        let dir = tmp.path().join(format!("try{i}"));
        let (file, cut) = cut_after(&dir, delay_ms);
        let mut cmd = bin();
        cmd.args(["summary", file.to_str().unwrap()]);
        let o = run_limited(cmd, &dir, Duration::from_secs(120));
        cut.join().unwrap();
        assert_eq!(o.signal, None, "after {delay_ms} ms: ended by signal {:?}: {}", o.signal, o.stderr);
        assert!(!o.timed_out, "after {delay_ms} ms: hung");
        if o.code != Some(0) {
            assert_eq!(o.code, Some(2), "after {delay_ms} ms: {}", o.stderr);
            assert_eq!(o.stderr.lines().count(), 1, "after {delay_ms} ms, one line: {}", o.stderr);
        }
        changed += o.stderr.contains("changed while it was read") as usize;
    }
    assert!(changed > 0, "no try cut the file while it was read: make the file larger");
}

#[test]
fn a_profile_copied_over_while_served_fails_that_request_and_is_read_again_when_whole() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("logdir");
    copy_tree(&fixture("cpu-transformer"), &root);
    let file: PathBuf = root.join(CPU_RUN).join("vm.xplane.pb");
    let whole = std::fs::read(&file).unwrap();
    let mut s = serve(&root, &[]);
    let run = enc(CPU_RUN);
    let before = s.api(&format!("ops?run={run}&top=all"));

    // Truncated as `scp` does before it writes: within the listing's life the loaded run
    // is used again, and its names now lie past the file's end.
    std::fs::OpenOptions::new().write(true).open(&file).unwrap().set_len(4096).unwrap();
    let mut refused = 0;
    for route in ["ops?top=all", "timeline/tracks", "kernels", "summary"] {
        let sep = if route.contains('?') { '&' } else { '?' };
        let r = s.get(&format!("api/{route}{sep}run={run}"));
        let text: String = r.text().chars().take(300).collect();
        if r.status == 200 {
            // Made before the cut and kept (the op profile is computed once per run).
            continue;
        }
        assert!(r.status == 409 || r.status == 404, "api/{route}: {} {text}", r.status);
        let message = r.json()["error"].as_str().unwrap_or_default().to_string();
        assert_eq!(message.lines().count(), 1, "{message}");
        refused += message.contains("changed while it was read") as usize;
    }
    assert!(refused > 0, "the server read the cut file without noticing");
    assert!(s.child.try_wait().unwrap().is_none(), "the server is alive");

    // Whole again: read again, the same answer as before.
    std::fs::write(&file, &whole).unwrap();
    assert!(s.api(&format!("ops?run={run}&top=all")) == before, "read again, the same op profile");
}

#[test]
fn a_broken_host_is_named_and_the_other_hosts_are_read() {
    let tmp = tempfile::tempdir().unwrap();
    let run = tmp.path().join("plugins/profile/2026_01_01_00_00_00");
    std::fs::create_dir_all(&run).unwrap();
    let src = std::fs::read(fixture(CPU_RUN_FILE)).unwrap();
    std::fs::write(run.join("a.xplane.pb"), &src).unwrap();
    std::fs::write(run.join("b.xplane.pb"), &src).unwrap();
    let dir = tmp.path().to_str().unwrap();
    let mut whole = crate::util::json(&["summary", dir]);

    // A host that crashed while it wrote: its file stops halfway.
    std::fs::write(run.join("crashed.xplane.pb"), &src[..src.len() / 2]).unwrap();
    let out = crate::util::stepscope(&["summary", dir, "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("host crashed was not read"), "{stderr}");
    let mut got: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let unread = got.as_object_mut().unwrap().remove("hosts_unread").expect("hosts_unread in the JSON");
    assert_eq!(unread[0]["host"], "crashed");
    assert!(unread[0]["error"].as_str().unwrap().contains("truncated"), "{unread}");
    // The capture's health says a host is missing; the numbers are the others'.
    let health = got.as_object_mut().unwrap().remove("health").unwrap();
    assert_eq!(whole.as_object_mut().unwrap().remove("health").unwrap()["status"], "ok");
    let hosts = health["checks"].as_array().unwrap().iter().find(|c| c["check"] == "hosts").unwrap();
    assert_eq!((&health["status"], &hosts["status"]), (&"bad".into(), &"bad".into()), "{health}");
    assert!(hosts["what"].as_str().unwrap().contains("crashed"), "{hosts}");
    assert!(got == whole, "the numbers are those of the hosts that were read");

    // Asked for by name: the good host answers, the broken one is the error.
    let a = crate::util::stepscope(&["summary", dir, "--host", "a"]);
    assert_eq!(a.status.code(), Some(0), "{}", String::from_utf8_lossy(&a.stderr));
    let err = assert_clean_error(&["summary", dir, "--host", "crashed"]);
    assert!(err.contains("crashed.xplane.pb"), "{err}");
    let info = crate::util::json(&["info", dir]);
    assert_eq!(info["hosts"].as_array().unwrap().len(), 2);
    assert_eq!(info["hosts_unread"][0]["host"], "crashed");
}

#[test]
fn hlo_fusions_that_call_themselves_end_every_analysis_and_are_named() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("vm.xplane.pb");
    let src = fixture("gpu-nocb/plugins/profile/2026_11_23_08_00_08/vm.xplane.pb");
    // Every fusion body holds 30 fusions calling it: a walk that revisits bodies per
    // level ran for hours.
    crate::util::reference_text(&["hlo-cycle", src.to_str().unwrap(), file.to_str().unwrap(), "--copies", "30"]);
    let path = file.to_str().unwrap();
    let out = tmp.path().join("x.pftrace");
    let runs: [&[&str]; 6] = [
        &["summary", path],
        &["ops", path],
        &["roofline", path],
        &["advise", path],
        &["steps", path],
        &["export", path, "-o", out.to_str().unwrap()],
    ];
    for args in runs {
        let mut cmd = bin();
        cmd.args(args);
        let o = run_limited(cmd, tmp.path(), Duration::from_secs(60));
        assert!(!o.timed_out && o.code == Some(0), "{args:?}: {:?} in {:?}: {}", o.code, o.elapsed, o.stderr);
    }
    // The op profile is the untouched capture's: the added instructions never ran.
    let ops = |p: &str| crate::util::json(&["ops", p, "--top", "all"]);
    assert!(ops(path)["ops"] == ops(src.to_str().unwrap())["ops"], "the same op profile");
    let fusion = "loop_add_fusion.6";
    let h = crate::util::json(&["hlo", path, fusion]);
    assert!(h["call_cycle"].as_str().is_some_and(|c| !c.is_empty()), "{}", h["call_cycle"]);
    assert!(ok(&["hlo", path, fusion]).contains("calls itself"));
    assert!(crate::util::json(&["hlo", src.to_str().unwrap(), fusion]).get("call_cycle").is_none());
}

#[test]
fn names_that_are_huge_or_steer_the_terminal_print_as_plain_text() {
    let tmp = tempfile::tempdir().unwrap();
    // A device plane named with 70,000 more characters: the devices table padded it
    // with a format width, which panics past 65,535.
    let long = tmp.path().join("long.xplane.pb");
    let src = fixture("gpu-nocb/plugins/profile/2026_11_23_08_00_08/vm.xplane.pb");
    let name = format!("/device:GPU:0{}", "p".repeat(70_000));
    crate::util::reference_text(&[
        "rename-plane",
        src.to_str().unwrap(),
        long.to_str().unwrap(),
        "/device:GPU:0",
        &name,
    ]);
    let text = ok(&["devices", long.to_str().unwrap()]);
    assert!(text.contains(&name), "the whole name is printed");

    // A host named by its file with OSC and CSI sequences in it.
    let dir = tmp.path().join("run");
    std::fs::create_dir(&dir).unwrap();
    let evil = "evil\u{1b}]0;owned\u{7}\u{9b}2J";
    std::fs::copy(fixture(CPU_RUN_FILE), dir.join(format!("{evil}.xplane.pb"))).unwrap();
    let d = dir.to_str().unwrap();
    let mut outputs = vec![ok(&["info", d]), ok(&["summary", d]), ok(&["devices", d])];
    let err = assert_clean_error(&["summary", d, "--host", "nosuch"]);
    assert!(err.contains("evil\\u001b]0;owned\\u0007\\u009b2J"), "{err}");
    outputs.push(err);
    for o in &outputs {
        assert!(!o.contains(['\u{1b}', '\u{7}', '\u{9b}']), "a control character reached the terminal: {o:?}");
    }
    // JSON keeps the name exact.
    let info = crate::util::json(&["info", d]);
    assert_eq!(info["hosts"][0]["host"], evil);
}

#[test]
fn diagnostics_say_what_is_wrong_instead_of_misleading() {
    let tmp = tempfile::tempdir().unwrap();
    let run = fixture("cpu-transformer");
    let run = run.to_str().unwrap();

    // Thresholds a rule cannot use: NaN never compares, a negative share always fires.
    for (line, name) in [
        ("utilization_pct = nan", "utilization_pct"),
        ("copies_pct = inf", "copies_pct"),
        ("step_jitter_pct = -5.0", "step_jitter_pct"),
        ("peak_flops_per_s = 0.0", "peak_flops_per_s"),
    ] {
        let file = tmp.path().join("th.toml");
        std::fs::write(&file, line).unwrap();
        let err = assert_clean_error(&["advise", run, "--thresholds", file.to_str().unwrap()]);
        assert!(err.contains(name), "{line}: {err}");
    }

    // Step annotations whose recorded length is negative (int64 on the wire)
    // made a median step of −9,223,372 s: now instants, with a note.
    let damaged = tmp.path().join("damaged.xplane.pb");
    crate::util::reference_text(&[
        "damage-steps",
        &fixture(CPU_RUN_FILE).to_string_lossy(),
        damaged.to_str().unwrap(),
        "-9223372036854775803",
    ]);
    let out = crate::util::stepscope(&["summary", damaged.to_str().unwrap(), "--json"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("8 event(s) record an impossible length"), "{stderr}");
    let s: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(s["step_time"]["min_ps"].as_i64().unwrap() >= 0, "{}", s["step_time"]);

    // A diff from a run without steps gives no percentage of an unknown step time.
    let none = fixture("rocm-mi300x-conv-2gpu");
    let d = crate::util::json(&["diff", none.to_str().unwrap(), run]);
    assert!(d["step_time"]["delta_pct"].is_null(), "{}", d["step_time"]);
    let text = ok(&["diff", none.to_str().unwrap(), run]);
    assert!(text.contains("A has no steps") && !text.contains("(+0.0%)"), "{text}");
}

/// `stepscope summary gs://prof/logs` against tests/support/hostile_bucket.py in `mode`,
/// with at most `files` open files: its outcome, and the files left in the cache.
fn against_hostile_bucket(mode: &[&str], files: u32) -> (crate::util::Outcome, Vec<PathBuf>) {
    against_hostile_bucket_with(mode, files, &["summary", "gs://prof/logs"])
}

/// [`against_hostile_bucket`] running `command` (with `--cache`).
fn against_hostile_bucket_with(mode: &[&str], files: u32, command: &[&str]) -> (crate::util::Outcome, Vec<PathBuf>) {
    let mut cmd = Command::new("python3");
    cmd.arg(crate::util::root().join("tests/support/hostile_bucket.py")).args(mode);
    let server = crate::util::PortChild::spawn(cmd, Duration::from_secs(30), "python3 tests/support/hostile_bucket.py");
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("cache");
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(format!("ulimit -n {files} && exec \"$0\" \"$@\""))
        .arg(env!("CARGO_BIN_EXE_stepscope"))
        .args(command)
        .args(["--cache", cache.to_str().unwrap()])
        .env("STORAGE_EMULATOR_HOST", format!("http://127.0.0.1:{}", server.port))
        .env("STEPSCOPE_REMOTE_TIMEOUT_S", "5");
    let o = run_limited(cmd, tmp.path(), Duration::from_secs(90));
    let files = if cache.is_dir() { crate::util::snapshot(&cache) } else { Vec::new() };
    let left = files.into_iter().map(|(p, ..)| p).filter(|p| !cache.join(p).is_dir()).collect();
    (o, left)
}

#[test]
fn hostile_buckets_end_in_one_line_in_bounded_time_and_memory() {
    for (mode, words) in [
        (&["--mode", "repeat-token"][..], "the same page token"),
        (&["--mode", "endless-list"][..], "listing"),
        (&["--mode", "no-range", "--mib", "1500"][..], "Range"),
        (&["--mode", "huge-size"][..], "size"),
        (&["--mode", "new-token"][..], "does not end"),
        (&["--mode", "huge-token"][..], "page token of 31457280 bytes"),
    ] {
        let (o, left) = against_hostile_bucket(mode, 1024);
        assert!(!o.timed_out, "{mode:?}: ran past 90 s");
        assert_eq!(o.signal, None, "{mode:?}: signal {:?}: {}", o.signal, o.stderr);
        assert_eq!(o.code, Some(2), "{mode:?}: {}", o.stderr);
        assert_eq!(o.stderr.lines().count(), 1, "{mode:?}: one line: {}", o.stderr);
        assert!(o.stderr.contains(words), "{mode:?}: {}", o.stderr);
        assert!(o.stderr.len() < 2048, "{mode:?}: {} bytes of error", o.stderr.len());
        assert!(o.max_rss_bytes < 512 << 20, "{mode:?}: {} MiB", o.max_rss_bytes >> 20);
        assert!(left.iter().all(|p| !p.to_string_lossy().ends_with(".part")), "{mode:?}: left {left:?}");
    }
}

#[test]
fn a_host_read_alone_from_a_bucket_reads_only_what_the_others_hold_of_their_clocks() {
    // Host b claims a 100 GiB environment plane: reading a alone peeks at b's planes,
    // and a plane that large is not read.
    let file = fixture("rocm-mi300x-gemm/tw003.xplane.pb");
    let mode = ["--mode", "huge-plane", "--file", file.to_str().unwrap()];
    let (o, _) = against_hostile_bucket_with(&mode, 1024, &["summary", "gs://prof/logs", "--host", "a", "--json"]);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    assert!(o.max_rss_bytes < 512 << 20, "{} MiB", o.max_rss_bytes >> 20);
}

#[test]
fn a_bucket_listing_too_large_to_search_is_named_as_the_bucket() {
    let (o, _) = against_hostile_bucket_with(&["--mode", "many", "--count", "200001"], 1024, &["ls", "gs://prof/logs"]);
    assert_eq!(o.code, Some(2), "{}", o.stderr);
    assert_eq!(o.stderr.lines().count(), 1, "{}", o.stderr);
    assert!(o.stderr.contains("gs://prof") && !o.stderr.contains("/tmp"), "{}", o.stderr);
}

#[test]
fn a_link_planted_in_the_cache_is_never_written_through() {
    let file = fixture("rocm-mi300x-gemm/tw003.xplane.pb");
    let mut cmd = Command::new("python3");
    cmd.arg(crate::util::root().join("tests/support/hostile_bucket.py")).args([
        "--mode",
        "many",
        "--count",
        "1",
        "--file",
        file.to_str().unwrap(),
    ]);
    let server = crate::util::PortChild::spawn(cmd, Duration::from_secs(30), "python3 tests/support/hostile_bucket.py");
    let tmp = tempfile::tempdir().unwrap();
    let (cache, victim) = (tmp.path().join("cache"), tmp.path().join("victim"));
    std::fs::write(&victim, b"not yours").unwrap();
    // Where the object's part file goes, a link to a file outside the cache.
    let run = cache.join("gs/prof/logs/plugins/profile/2026_01_01_00_00_00");
    std::fs::create_dir_all(&run).unwrap();
    std::os::unix::fs::symlink(&victim, run.join("h0000.xplane.pb.part")).unwrap();
    let o = bin()
        .args(["summary", "gs://prof/logs", "--cache", cache.to_str().unwrap(), "--json"])
        .env("STORAGE_EMULATOR_HOST", format!("http://127.0.0.1:{}", server.port))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(std::fs::read(&victim).unwrap(), b"not yours", "wrote through the planted link");
    assert_eq!(std::fs::read(run.join("h0000.xplane.pb")).unwrap(), std::fs::read(&file).unwrap());
}

#[test]
fn a_bucket_with_more_profiles_than_open_files_is_read() {
    // 300 hosts under a limit of 128 open files: every file was opened at once.
    let file = fixture("rocm-mi300x-gemm/tw003.xplane.pb");
    let (o, left) =
        against_hostile_bucket(&["--mode", "many", "--count", "300", "--file", file.to_str().unwrap()], 128);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    assert_eq!(left.len(), 300, "every host in the cache, nothing else");
    assert!(left.iter().all(|p| p.to_string_lossy().ends_with(".xplane.pb")));
}

#[test]
fn endpoints_set_wrong_are_named_with_the_fix() {
    let cache = tempfile::tempdir().unwrap();
    let run = |url: &str, env: &[(&str, &str)]| {
        let out = bin()
            .args(["summary", url, "--cache", cache.path().to_str().unwrap()])
            .envs(env.iter().copied())
            .env("STEPSCOPE_REMOTE_TIMEOUT_S", "2")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(2), "{url}: {err}");
        assert_eq!(err.lines().count(), 1, "{url}: {err}");
        err
    };
    for bad in ["http://", "http://:99999"] {
        let err = run("gs://prof/logs", &[("STORAGE_EMULATOR_HOST", bad)]);
        assert!(err.contains("is not an emulator's address") && err.contains("HOST:PORT"), "{err}");
    }
    let s3 = [
        ("AWS_ENDPOINT_URL", "http://127.0.0.1:1"),
        ("AWS_ACCESS_KEY_ID", "x"),
        ("AWS_SECRET_ACCESS_KEY", "y"),
        ("AWS_REGION", "us-east-1"),
    ];
    let err = run("s3://prof/logs", &s3);
    assert!(err.contains("set AWS_ALLOW_HTTP=true"), "{err}");
    // A credentials file that is a device is not read (it was read to 4.2 GB).
    let err = run("s3://prof/logs", &[s3[0], ("AWS_SHARED_CREDENTIALS_FILE", "/dev/zero"), ("AWS_ALLOW_HTTP", "true")]);
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn a_log_directory_deep_down_is_found_and_link_loops_end() {
    let tmp = tempfile::tempdir().unwrap();
    let mut deep = tmp.path().to_path_buf();
    for i in 0..20 {
        deep.push(format!("d{i}"));
    }
    copy_tree(&fixture("cpu-transformer"), &deep.join("logs"));
    // A link back to the top at every level: the walk enters each folder once.
    for i in 0..20 {
        let mut at = tmp.path().to_path_buf();
        for k in 0..=i {
            at.push(format!("d{k}"));
        }
        std::os::unix::fs::symlink(tmp.path(), at.join("up")).unwrap();
    }
    let ls = crate::util::json(&["ls", tmp.path().to_str().unwrap()]);
    let runs = ls["runs"].as_array().unwrap_or_else(|| panic!("{ls}"));
    assert_eq!(runs.len(), 1, "one run, found once: {ls}");
    let s = crate::util::json(&["summary", tmp.path().to_str().unwrap()]);
    assert_eq!(s["step_count"], 8);
}

#[test]
fn a_trace_saved_with_a_byte_order_mark_or_as_utf16_reads_as_the_original() {
    use std::io::Read;
    let tmp = tempfile::tempdir().unwrap();
    let gz = fixture("cpu-transformer/plugins/profile/2026_11_21_22_29_17/vm.trace.json.gz");
    let mut text = String::new();
    flate2::read::GzDecoder::new(std::fs::File::open(&gz).unwrap()).read_to_string(&mut text).unwrap();
    let plain = tmp.path().join("plain.trace.json");
    std::fs::write(&plain, &text).unwrap();
    let want = crate::util::json(&["info", plain.to_str().unwrap()])["events_total"].clone();
    assert!(want.as_u64().unwrap() > 1000, "{want}");
    let mut bom = b"\xef\xbb\xbf".to_vec();
    bom.extend_from_slice(text.as_bytes());
    let utf16: Vec<u8> = "\u{feff}".encode_utf16().chain(text.encode_utf16()).flat_map(u16::to_le_bytes).collect();
    for (name, bytes) in [("bom.trace.json", bom), ("utf16.trace.json", utf16)] {
        let f = tmp.path().join(name);
        std::fs::write(&f, bytes).unwrap();
        let got = crate::util::json(&["info", f.to_str().unwrap()]);
        assert_eq!(got["events_total"], want, "{name}");
    }
}

#[test]
fn a_host_whose_file_name_is_not_utf8_can_be_chosen() {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    let tmp = tempfile::tempdir().unwrap();
    let run = tmp.path().join("run");
    std::fs::create_dir(&run).unwrap();
    std::fs::copy(fixture(CPU_RUN_FILE), run.join(OsStr::from_bytes(b"h\xff.xplane.pb"))).unwrap();
    std::fs::copy(fixture(CPU_RUN_FILE), run.join("other.xplane.pb")).unwrap();
    for host in [OsStr::from_bytes(b"h\xff"), OsStr::new("h\u{fffd}")] {
        let out = bin().arg("summary").arg(&run).arg("--host").arg(host).arg("--json").output().unwrap();
        assert!(out.status.success(), "{host:?}: {}", String::from_utf8_lossy(&out.stderr));
        let s: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(s["environment"]["hosts"].as_array().map(Vec::len), Some(1), "{host:?}");
    }
}

#[test]
fn unreadable_hlo_is_named_not_taken_for_runtime_work() {
    let tmp = tempfile::tempdir().unwrap();
    let broken = tmp.path().join("vm.xplane.pb");
    let src = fixture("gpu-nocb/plugins/profile/2026_11_23_08_00_08/vm.xplane.pb");
    crate::util::reference_text(&["break-hlo", src.to_str().unwrap(), broken.to_str().unwrap()]);
    let path = broken.to_str().unwrap();
    let out = crate::util::stepscope(&["ops", path]);
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cannot be read") && err.contains("jit_train_step"), "{err}");
    // The op is in the HLO that cannot be read: not "a kernel the runtime launched itself".
    let err = assert_clean_error(&["hlo", path, "loop_add_fusion.6"]);
    assert!(err.contains("cannot be read") && !err.contains("runtime launched"), "{err}");
    // Its memory plan cannot be shown: one line that says so, for the program asked
    // and for the default.
    for args in [vec!["buffers", path, "--program", "jit_train_step"], vec!["buffers", path]] {
        let err = assert_clean_error(&args);
        assert!(err.contains("not readable") && err.contains("capture the profile again"), "{err}");
    }
}

#[test]
fn a_huge_plane_name_is_cut_in_the_events_table_with_a_note() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("vm.xplane.pb");
    let name = "n".repeat(100_000);
    crate::util::reference_text(&[
        "rename-plane",
        &fixture(CPU_RUN_FILE).to_string_lossy(),
        file.to_str().unwrap(),
        "/host:CPU",
        &name,
    ]);
    for out in ["events.csv", "events.parquet"] {
        let out = tmp.path().join(out);
        let o = crate::util::stepscope(&["export", file.to_str().unwrap(), "-o", out.to_str().unwrap()]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "{err}");
        assert!(err.contains("1 host, plane, line or event name(s) are longer than 4096 bytes"), "{err}");
        // 8,320 rows would repeat the name 832 MB's worth.
        let bytes = std::fs::metadata(&out).unwrap().len();
        assert!(bytes < 64 << 20, "{}: {bytes} bytes", out.display());
    }
    let csv = std::fs::read_to_string(tmp.path().join("events.csv")).unwrap();
    assert!(csv.contains(&format!("{}…", "n".repeat(4096))) && !csv.contains(&"n".repeat(4097)));
}

/// An XSpace of one plane of `n` lines named `t0`, `t1`, …, line `i` with one event
/// (of the plane's one metadata, `op`) where `has_event(i)`.
fn plane_of_lines(n: u64, has_event: impl Fn(u64) -> bool) -> Vec<u8> {
    use crate::robustness::{ld, varint};
    let int = |n: u64, v: u64| [varint(n << 3), varint(v)].concat();
    let event = ld(4, &[int(1, 1), int(2, 1000), int(3, 500)].concat());
    let mut plane = [int(1, 1), ld(2, b"/host:CPU")].concat();
    for i in 0..n {
        let events = if has_event(i) { event.clone() } else { Vec::new() };
        plane.extend(ld(3, &[int(1, i + 1), ld(2, format!("t{i}").as_bytes()), events].concat()));
    }
    plane.extend(ld(4, &[int(1, 1), ld(2, &[int(1, 1), ld(2, b"op")].concat())].concat()));
    ld(1, &plane)
}

#[test]
fn many_short_lines_or_pids_take_memory_by_their_events() {
    use crate::robustness::gzip;
    let tmp = tempfile::tempdir().unwrap();
    // 200,000 lines of one event each in one plane (about 5 MB).
    let lines = tmp.path().join("lines.xplane.pb");
    std::fs::write(&lines, plane_of_lines(200_000, |_| true)).unwrap();
    // 100,000 pids of one event each, as trace JSON.
    let events: Vec<String> =
        (0..100_000).map(|i| format!(r#"{{"ph":"X","name":"op","pid":{i},"tid":1,"ts":{i},"dur":1}}"#)).collect();
    let pids = tmp.path().join("pids.trace.json.gz");
    std::fs::write(&pids, gzip(format!(r#"{{"traceEvents":[{}]}}"#, events.join(",")).as_bytes(), 6)).unwrap();
    // 1,000,000 lines of one empty event, 4 bytes each (4 MB; issue 74's 19.6 MB of
    // 4.9 M such lines took 3.5 GB).
    let tiny = tmp.path().join("tiny.xplane.pb");
    let plane = [&[0x08, 1, 0x12, 9][..], b"/host:CPU", &[0x1a, 2, 0x22, 0].repeat(1_000_000)].concat();
    std::fs::write(&tiny, [&[0x0a][..], &crate::robustness::varint(plane.len() as u64), &plane].concat()).unwrap();
    // Measured at first: 3.9 KB a line (780 MB) and 4.1 KB a pid (410 MB); then 193 MB
    // and 177 MB, with 80-byte columns; 136 MB and 148 MB with 32-byte ones; lines 92
    // MB once a line without stats keeps none (no boxed stats, no stat columns), 74 MB
    // once a column holds its last two values inline. The tiny lines: 253 MB.
    for (file, limit_mib) in [(&lines, 90u64), (&pids, 170), (&tiny, 300)] {
        let mut cmd = bin();
        cmd.args(["summary", file.to_str().unwrap()]);
        let o = run_limited(cmd, tmp.path(), Duration::from_secs(120));
        assert_eq!(o.code, Some(0), "{}: {}", file.display(), o.stderr);
        assert!(o.max_rss_bytes < limit_mib << 20, "{}: {} MiB", file.display(), o.max_rss_bytes >> 20);
    }
}

#[test]
fn a_plane_of_empty_lines_keeps_the_first_and_counts_the_rest() {
    let tmp = tempfile::tempdir().unwrap();
    // 300,000 empty lines (3.7 MB), every 1,000th with one event instead.
    let file = tmp.path().join("empty.xplane.pb");
    std::fs::write(&file, plane_of_lines(300_000, |i| i % 1000 == 999)).unwrap();
    let path = file.to_str().unwrap();

    // The reference reader lists every line; stepscope lists the ones with events and
    // the first 4,096 without, in file order, and counts the rest.
    let want = crate::util::reference(&["info", path]);
    let ref_lines = want["hosts"][0]["planes"][0]["lines"].as_array().unwrap();
    let mut empty_seen = 0;
    let kept: Vec<&serde_json::Value> = ref_lines
        .iter()
        .filter(|l| {
            empty_seen += usize::from(l["events"] == 0);
            l["events"] != 0 || empty_seen <= 4096
        })
        .collect();
    let o = crate::util::stepscope(&["info", path, "--json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let got: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let plane = &got["hosts"][0]["planes"][0];
    assert_eq!(plane["lines"].as_array().unwrap().iter().collect::<Vec<_>>(), kept);
    assert_eq!(plane["empty_lines_not_kept"], (empty_seen - 4096) as u64);
    assert_eq!(got["events_total"], want["events_total"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains(&format!("{} line(s) without events were left out", empty_seen - 4096)), "{err}");

    // Kept, the empty lines took 400 bytes each (120 MB here).
    let mut cmd = bin();
    cmd.args(["summary", path]);
    let o = run_limited(cmd, tmp.path(), Duration::from_secs(120));
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    assert!(o.max_rss_bytes < 60 << 20, "{} MiB", o.max_rss_bytes >> 20);
}

#[test]
fn an_export_whose_profile_is_cut_while_read_keeps_the_file_it_would_replace() {
    let tmp = tempfile::tempdir().unwrap();
    let mut refused = 0;
    for (i, delay_ms) in [150u64, 400, 800, 1600].into_iter().enumerate() {
        let dir = tmp.path().join(format!("try{i}"));
        let out_dir = dir.join("out");
        std::fs::create_dir_all(&out_dir).unwrap();
        let out = out_dir.join("trace.json");
        std::fs::write(&out, b"the previous export").unwrap();
        let (file, cut) = cut_after(&dir, delay_ms);
        let mut cmd = bin();
        cmd.args(["export", file.to_str().unwrap(), "-o", out.to_str().unwrap()]);
        let o = run_limited(cmd, &dir, Duration::from_secs(120));
        cut.join().unwrap();
        assert!(o.signal.is_none() && !o.timed_out, "after {delay_ms} ms: {:?}", o.stderr);
        assert_eq!(names(&out_dir), vec!["trace.json".to_string()], "after {delay_ms} ms: nothing half-written");
        if o.stderr.contains("changed while it was read") {
            refused += 1;
            assert_eq!(o.code, Some(2));
            assert_eq!(o.stderr.lines().count(), 1, "{}", o.stderr);
            assert_eq!(std::fs::read(&out).unwrap(), b"the previous export", "after {delay_ms} ms: replaced");
        }
    }
    assert!(refused > 0, "no try cut the file while it was exported: make the file larger");
}
