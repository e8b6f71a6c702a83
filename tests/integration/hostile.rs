//! Hostile local input (issue 28): FIFOs named like profile files, devices and huge
//! sparse files given as small inputs, a pprof that references one long location
//! many times, baselines and tolerances no summary holds, a reader that goes away.
//! Each ends in bounded time and memory: one line on stderr and exit 2, or skipped
//! with a one-line note.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::robustness::{gzip, ld, varint};
use crate::util::{assert_clean_error, copy_tree, fixture, run_limited, stepscope};

const LIMIT: Duration = Duration::from_secs(20);

pub(crate) fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path.to_str().expect("utf-8 path")).expect("no NUL");
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo {}", path.display());
}

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_stepscope"))
}

/// The fixture's run folder, copied into `to`.
fn run_copy(name: &str, to: &Path) -> PathBuf {
    copy_tree(&fixture(name), to);
    let profiles = to.join("plugins/profile");
    std::fs::read_dir(&profiles).expect("run folder").next().expect("one run").expect("entry").path()
}

#[test]
fn fifos_named_like_profile_files_are_skipped_with_a_note() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let run = run_copy("gpu-transformer", tmp.path());
    for name in ["x.xplane.pb", "extra.prof", "host.trace.json.gz"] {
        mkfifo(&run.join(name));
    }
    for cmd in ["info", "summary", "memory"] {
        let mut c = bin();
        c.args([cmd, tmp.path().to_str().unwrap()]);
        let o = run_limited(c, tmp.path(), LIMIT);
        assert!(!o.timed_out, "{cmd} hung on a FIFO");
        assert_eq!(o.code, Some(0), "{cmd}: {}", o.stderr);
        let notes: Vec<&str> = o.stderr.lines().collect();
        assert_eq!(notes.len(), 3, "{cmd}: {}", o.stderr);
        for (note, name) in notes.iter().zip(["extra.prof", "host.trace.json.gz", "x.xplane.pb"]) {
            assert!(note.starts_with("stepscope: note: skipped "), "{note}");
            assert!(note.ends_with(&format!("{name}: a FIFO, not a regular file")), "{note}");
        }
    }
    // The same answers as the fixture itself.
    let with = stepscope(&["summary", tmp.path().to_str().unwrap(), "--json"]);
    let without = stepscope(&["summary", fixture("gpu-transformer").to_str().unwrap(), "--json"]);
    let strip = |o: &std::process::Output| {
        let mut v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
        v["run"] = serde_json::Value::Null;
        v
    };
    assert_eq!(strip(&with), strip(&without));
    // A folder holding only a FIFO is no run, and says what it skipped.
    let lone = tmp.path().join("lone");
    std::fs::create_dir(&lone).unwrap();
    mkfifo(&lone.join("a.xplane.pb"));
    let e = assert_clean_error(&["info", lone.to_str().unwrap()]);
    assert!(e.contains("no profile found") && e.contains("a.xplane.pb: a FIFO"), "{e}");
    let e = assert_clean_error(&["info", lone.join("a.xplane.pb").to_str().unwrap()]);
    assert!(e.contains("is a FIFO, not a regular file"), "{e}");
}

#[test]
fn fifos_devices_and_huge_files_given_as_small_inputs_are_refused() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let fifo = tmp.path().join("input");
    mkfifo(&fifo);
    let sparse = tmp.path().join("sparse.json");
    std::fs::File::create(&sparse).unwrap().set_len(5 << 30).unwrap();
    let cpu = fixture("cpu-transformer");
    let cpu = cpu.to_str().unwrap();
    let baseline = tmp.path().join("baseline.json");
    std::fs::write(&baseline, stepscope(&["summary", cpu, "--json"]).stdout).unwrap();
    let baseline = baseline.to_str().unwrap();
    for (bad, why) in
        [(fifo.to_str().unwrap(), "a FIFO"), ("/dev/zero", "a device"), (sparse.to_str().unwrap(), "too large")]
    {
        for args in [
            vec!["memory", cpu, "--pprof", bad],
            vec!["advise", cpu, "--thresholds", bad],
            vec!["check", cpu, "--baseline", bad],
            vec!["check", cpu, "--baseline", baseline, "--metrics", bad],
        ] {
            let mut c = bin();
            c.args(&args);
            let o = run_limited(c, tmp.path(), LIMIT);
            assert!(!o.timed_out, "{args:?} hung");
            assert_eq!(o.code, Some(2), "{args:?}: {}", o.stderr);
            assert_eq!(o.stderr.lines().count(), 1, "{args:?}: {}", o.stderr);
            assert!(o.stderr.contains(why), "{args:?}: {}", o.stderr);
            assert!(o.max_rss_bytes < 256 << 20, "{args:?}: {} MiB", o.max_rss_bytes >> 20);
        }
    }
}

/// A pprof whose one sample references, `refs` times, one location of `lines` lines.
fn amplifying_pprof(lines: usize, refs: usize) -> Vec<u8> {
    let mut location = varint(1 << 3); // id = 1
    location.extend(varint(1));
    for line in 0..lines {
        let mut l = varint(1 << 3); // function_id = 1
        l.extend(varint(1));
        l.extend(varint(2 << 3)); // line
        l.extend(varint(line as u64 + 1));
        location.extend(ld(4, &l));
    }
    let mut ids = Vec::new();
    for _ in 0..refs {
        ids.extend(varint(1));
    }
    let mut sample = ld(1, &ids);
    sample.extend(ld(2, &varint(1)));
    let mut function = varint(1 << 3);
    function.extend(varint(1));
    function.extend(varint(2 << 3)); // name = "f"
    function.extend(varint(1));
    function.extend(varint(4 << 3)); // filename = "x.py"
    function.extend(varint(2));
    let mut value_type = varint(1 << 3);
    value_type.extend(varint(3)); // "space"
    value_type.extend(varint(2 << 3));
    value_type.extend(varint(4)); // "bytes"
    let mut p = ld(1, &value_type);
    p.extend(ld(2, &sample));
    p.extend(ld(4, &location));
    p.extend(ld(5, &function));
    for s in ["", "f", "x.py", "space", "bytes"] {
        p.extend(ld(6, s.as_bytes()));
    }
    gzip(&p, 9)
}

#[test]
fn a_pprof_referencing_one_long_location_many_times_is_refused_in_bounded_memory() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let cpu = fixture("cpu-transformer");
    for (lines, refs) in [(1_000, 30_000), (1_000, 3_000), (4, 2_000_000)] {
        let bytes = amplifying_pprof(lines, refs);
        let path = tmp.path().join(format!("amp-{lines}-{refs}.prof"));
        std::fs::write(&path, &bytes).unwrap();
        let mut c = bin();
        c.args(["memory", cpu.to_str().unwrap(), "--pprof", path.to_str().unwrap()]);
        let o = run_limited(c, tmp.path(), LIMIT);
        let what = format!("{lines} lines × {refs} refs, {} bytes", bytes.len());
        assert!(!o.timed_out, "{what}: hung");
        assert_eq!(o.code, Some(2), "{what}: {}", o.stderr);
        assert_eq!(o.stderr.lines().count(), 1, "{what}: {}", o.stderr);
        assert!(o.stderr.contains("frames"), "{what}: {}", o.stderr);
        assert!(o.max_rss_bytes < 256 << 20, "{what}: {} MiB", o.max_rss_bytes >> 20);
    }
    // Within the limits, the same file shape reads: 10 lines × 10 refs = 100 frames.
    let path = tmp.path().join("small.prof");
    std::fs::write(&path, amplifying_pprof(10, 10)).unwrap();
    let out = stepscope(&["memory", cpu.to_str().unwrap(), "--pprof", path.to_str().unwrap(), "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn baselines_and_tolerances_no_summary_holds_are_one_line_errors() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let cpu = fixture("cpu-transformer");
    let cpu = cpu.to_str().unwrap();
    let good: serde_json::Value = serde_json::from_slice(&stepscope(&["summary", cpu, "--json"]).stdout).unwrap();
    let write = |name: &str, v: &serde_json::Value| {
        let p = tmp.path().join(name);
        std::fs::write(&p, v.to_string()).unwrap();
        p.to_str().unwrap().to_string()
    };
    let mut v = good.clone();
    v["schema"] = "stepscope.summary/999".into();
    let e = assert_clean_error(&["check", cpu, "--baseline", &write("schema.json", &v)]);
    assert!(e.contains("stepscope.summary/999"), "{e}");
    for (name, median) in [("huge.json", serde_json::json!(1e308)), ("negative.json", serde_json::json!(-5))] {
        let mut v = good.clone();
        v["step_time"]["median_ps"] = median;
        let e = assert_clean_error(&["check", cpu, "--baseline", &write(name, &v)]);
        assert!(e.contains("step_time.median_ps") && e.contains("which no summary holds"), "{e}");
    }
    let baseline = write("good.json", &good);
    for pct in ["-5", "nan", "inf"] {
        let e = assert_clean_error(&["check", cpu, "--baseline", &baseline, "--max-regression", pct]);
        assert!(e.contains("not a percent of 0 or more"), "{pct}: {e}");
    }
    for pct in ["-3", "nan", "inf"] {
        let toml = format!("[[metric]]\nmetric = \"breakdown.device_idle_ps\"\nmax_regression_pct = {pct}\n");
        let p = tmp.path().join("m.toml");
        std::fs::write(&p, toml).unwrap();
        let e = assert_clean_error(&["check", cpu, "--baseline", &baseline, "--metrics", p.to_str().unwrap()]);
        assert!(e.contains("tolerance of breakdown.device_idle_ps"), "{pct}: {e}");
    }
    // TOML syntax errors and bad numbers on the command line: one line each.
    let p = tmp.path().join("bad.toml");
    std::fs::write(&p, "[[metric]\nmetric = \"x\"\n").unwrap();
    assert_clean_error(&["check", cpu, "--baseline", &baseline, "--metrics", p.to_str().unwrap()]);
    std::fs::write(&p, "utilization_pct = = 3\n").unwrap();
    assert_clean_error(&["advise", cpu, "--thresholds", p.to_str().unwrap()]);
    let e = assert_clean_error(&["check", cpu, "--baseline", &baseline, "--min-steps", "-1"]);
    assert!(e.contains("'-1'") && e.contains("stepscope check --help"), "{e}");
    assert_clean_error(&["ops", cpu, "--top", "-3"]);
    // The good baseline passes.
    assert!(stepscope(&["check", cpu, "--baseline", &baseline]).status.success());
}

#[test]
fn output_to_a_reader_that_goes_away_ends_quietly() {
    let cpu = fixture("cpu-transformer");
    for args in [
        vec!["export", cpu.to_str().unwrap(), "-o", "-", "--format", "chrome"],
        vec!["export", cpu.to_str().unwrap(), "-o", "-", "--format", "csv"],
        vec!["ops", cpu.to_str().unwrap(), "--top", "0", "--csv"],
    ] {
        let mut child = bin().args(&args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("spawn");
        let mut out = child.stdout.take().unwrap();
        let mut first = [0u8; 16];
        std::io::Read::read_exact(&mut out, &mut first).expect("some output");
        drop(out);
        let o = child.wait_with_output().expect("wait");
        assert_eq!(o.status.code(), Some(0), "{args:?}");
        assert!(o.stderr.is_empty(), "{args:?}: {}", String::from_utf8_lossy(&o.stderr));
    }
}
