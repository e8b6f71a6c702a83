//! Helpers shared by the test areas.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

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

/// Runs the stepscope binary.
pub fn stepscope(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_stepscope")).args(args).output().expect("run stepscope")
}

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
    serde_json::from_slice(&out.stdout).expect("reference JSON")
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
