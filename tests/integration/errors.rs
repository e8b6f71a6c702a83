//! Bad input: exit 2 and one line that says what is wrong and what to do.

use std::io::Write;

use crate::util::*;

fn write(dir: &std::path::Path, name: &str, bytes: &[u8]) -> String {
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p.to_str().unwrap().to_string()
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    enc.write_all(bytes).unwrap();
    enc.finish().unwrap()
}

#[test]
fn missing_paths_and_empty_folders() {
    let err = assert_clean_error(&["info", "/nonexistent/profile.xplane.pb"]);
    assert!(err.contains("/nonexistent/profile.xplane.pb"), "{err}");
    let tmp = tempfile::tempdir().unwrap();
    let err = assert_clean_error(&["info", tmp.path().to_str().unwrap()]);
    assert!(err.contains("no profile found"), "{err}");
    assert_clean_error(&["ls", tmp.path().to_str().unwrap()]);
    assert_clean_error(&["ls", "/nonexistent-logdir"]);
}

#[test]
fn damaged_xspace_files() {
    let tmp = tempfile::tempdir().unwrap();
    let good = std::fs::read(fixture("tpu-v6e-inference/tpu_inference_2.xplane.pb")).unwrap();
    let empty = write(tmp.path(), "empty.xplane.pb", b"");
    assert!(assert_clean_error(&["info", &empty]).contains("empty"));
    // Cut at many places: every cut inside a message is a clean error, never a panic.
    for (i, cut) in [1usize, 7, 100, 4096, good.len() / 3, good.len() / 2, good.len() - 1].into_iter().enumerate() {
        let f = write(tmp.path(), &format!("cut{i}.xplane.pb"), &good[..cut]);
        let err = assert_clean_error(&["info", &f]);
        assert!(err.contains("truncated or corrupt"), "{err}");
    }
    // A length prefix pointing far past the end of the file.
    let mut bad = vec![0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f];
    bad.extend_from_slice(&[0u8; 16]);
    let f = write(tmp.path(), "huge-len.xplane.pb", &bad);
    assert!(assert_clean_error(&["info", &f]).contains("past the end"));
    // Not protobuf at all.
    let f = write(tmp.path(), "text.xplane.pb", b"this is a README, not a profile\n");
    assert_clean_error(&["info", &f]);
}

#[test]
fn damaged_trace_json_files() {
    let tmp = tempfile::tempdir().unwrap();
    let real = std::fs::read(fixture("cpu-transformer/plugins/profile/2026_11_21_22_29_17/vm.trace.json.gz")).unwrap();
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("garbage.trace.json.gz", b"\x1f\x8b\x08\x00garbage-that-is-not-deflate".to_vec()),
        ("truncated.trace.json.gz", real[..real.len() / 2].to_vec()),
        (
            "truncated-json.trace.json.gz",
            gzip(br#"{"traceEvents":[{"ph":"X","pid":1,"tid":1,"ts":1,"dur":2,"name":"a"},"#),
        ),
        ("not-a-trace.json", br#"{"hello": "world"}"#.to_vec()),
        ("wrong-types.json", br#"{"traceEvents":[{"ph":"X","pid":1,"tid":1,"ts":"abc","dur":2,"name":"a"}]}"#.to_vec()),
        ("number.json", b"42".to_vec()),
    ];
    for (name, bytes) in cases {
        let f = write(tmp.path(), name, &bytes);
        assert_clean_error(&["info", &f]);
    }
}

#[test]
fn a_file_that_is_no_profile() {
    let tmp = tempfile::tempdir().unwrap();
    let f = write(tmp.path(), "notes.txt", b"\x00\x01\x02 random bytes \xff\xfe");
    assert_clean_error(&["info", &f]);
    // A folder given to `ls --json` with nothing in it is an empty list, not an error.
    let v = json(&["ls", tmp.path().to_str().unwrap()]);
    assert_eq!(v["runs"].as_array().unwrap().len(), 0);
}

#[test]
fn a_closed_stdout_ends_quietly() {
    use std::io::Read;
    // Megabytes of Chrome JSON to stdout; the reader takes a little and hangs up.
    let f = fixture("cpu-transformer/plugins/profile/2026_11_21_22_29_17/vm.xplane.pb");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_stepscope"))
        .args(["export", f.to_str().unwrap(), "--format", "chrome", "-o", "-"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut head = [0u8; 1024];
    child.stdout.take().unwrap().read_exact(&mut head).unwrap();
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "{err}");
    assert!(out.status.code().is_some(), "killed by a signal: {:?}", out.status);
}

/// A mistyped flag is answered with the flag meant, swapped letters too (`--tpo`,
/// which clap's own suggestion misses), and nothing where no flag is near.
#[test]
fn a_mistyped_flag_names_the_flag_meant() {
    let f = fixture("cpu-clean");
    let f = f.to_str().unwrap();
    for (typed, meant, command) in [
        ("--tpo", "--top", "ops"),
        ("--jsn", "--json", "ops"),
        ("--hots", "--host", "steps"),
        ("--basline", "--baseline", "check"),
    ] {
        let err = assert_clean_error(&[command, typed, "1", f]);
        assert!(err.contains(&format!("a similar argument exists: '{meant}'")), "{typed}: {err}");
        assert!(err.contains(&format!("see `stepscope {command} --help`")), "{err}");
    }
    let err = assert_clean_error(&["ops", "--zzzz", f]);
    assert!(!err.contains("similar"), "{err}");
}

#[test]
fn the_manifest_given_as_a_profile_names_its_run_folder() {
    let tmp = tempfile::tempdir().unwrap();
    let manifest = tmp.path().join("stepscope_manifest.json");
    std::fs::write(&manifest, r#"{"schema":"stepscope.manifest/1","steps":[0,1]}"#).unwrap();
    let err = assert_clean_error(&["steps", manifest.to_str().unwrap()]);
    assert!(
        err.contains("is the manifest stepscope writes") && err.contains(&tmp.path().display().to_string()),
        "{err}"
    );
}
