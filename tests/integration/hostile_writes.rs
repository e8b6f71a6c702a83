//! `tables -o DIR` against what it finds in DIR (#74 item 4): links planted at a
//! table file, at the manifest and at a table folder, a FIFO where a table goes, a
//! folder holding another run's tables, and a bucket path that climbs.

use std::os::unix::fs::symlink;
use std::path::Path;
use std::time::Duration;

use crate::hostile::mkfifo;
use crate::util::*;

const RUN: &str = "run=plugins%2Fprofile%2F2026_11_21_23_32_11";

fn tables_into(out: &Path) -> Outcome {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_stepscope"));
    cmd.args(["tables", fixture("cpu-clean").to_str().unwrap(), "-o", out.to_str().unwrap()]);
    let dir = out.parent().unwrap().join(format!("{}-run", out.file_name().unwrap().to_string_lossy()));
    std::fs::create_dir_all(&dir).unwrap();
    run_limited(cmd, &dir, Duration::from_secs(60))
}

/// Refused in one line naming `planted`; the file outside DIR untouched.
fn refused(o: &Outcome, planted: &str, victim: &Path) {
    assert!(!o.timed_out, "hung on {planted}");
    assert_eq!(o.code, Some(2), "{planted}: {}", o.stderr);
    assert_eq!(o.stderr.lines().count(), 1, "{}", o.stderr);
    assert!(o.stderr.contains(planted), "{planted}: {}", o.stderr);
    assert_eq!(std::fs::read(victim).unwrap(), b"not yours", "{planted}: wrote through to a file outside DIR");
}

#[test]
fn tables_never_write_through_what_is_planted_in_their_folder() {
    let tmp = tempfile::tempdir().unwrap();
    let victim = tmp.path().join("victim");
    std::fs::write(&victim, b"not yours").unwrap();
    let elsewhere = tmp.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();

    // A link at the manifest.
    let out = tmp.path().join("a");
    std::fs::create_dir(&out).unwrap();
    symlink(&victim, out.join("stepscope_tables.json")).unwrap();
    refused(&tables_into(&out), "stepscope_tables.json", &victim);
    assert_eq!(std::fs::read_dir(&out).unwrap().count(), 1, "nothing written before the refusal");

    // A table's file in folder `out` of the temporary folder, its folders made.
    let table_file = |out: &str, table: &str| {
        let host_dir = tmp.path().join(out).join(table).join(RUN).join("host=vm");
        std::fs::create_dir_all(&host_dir).unwrap();
        (tmp.path().join(out), host_dir.join("part-0.parquet"))
    };

    // A link at a table file.
    let (out, file) = table_file("b", "steps");
    symlink(&victim, file).unwrap();
    refused(&tables_into(&out), "part-0.parquet", &victim);

    // A link at a table folder: nothing lands in the folder it points at.
    let out = tmp.path().join("c");
    std::fs::create_dir(&out).unwrap();
    symlink(&elsewhere, out.join("ops")).unwrap();
    refused(&tables_into(&out), "ops", &victim);
    assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0, "wrote through a linked folder");

    // A link to a device, and a FIFO, where a table goes: refused, without blocking.
    let (out, file) = table_file("d", "ops");
    symlink("/dev/null", file).unwrap();
    refused(&tables_into(&out), "part-0.parquet", &victim);
    let (out, file) = table_file("e", "events");
    mkfifo(&file);
    refused(&tables_into(&out), "part-0.parquet", &victim);
    use std::os::unix::fs::FileTypeExt;
    assert!(std::fs::metadata("/dev/null").unwrap().file_type().is_char_device(), "/dev/null is still a device");
}

#[test]
fn a_folder_of_another_runs_tables_is_not_mixed_and_buckets_do_not_climb() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("tables");
    let out_s = out.to_str().unwrap();
    ok(&["tables", fixture("cpu-clean").to_str().unwrap(), "-o", out_s]);
    let manifest = std::fs::read(out.join("stepscope_tables.json")).unwrap();
    // The same run again: replaced whole, as before.
    ok(&["tables", fixture("cpu-clean").to_str().unwrap(), "-o", out_s]);
    // Another run into the same folder: refused, the folder as it was.
    let err = assert_clean_error(&["tables", fixture("cpu-matmul").to_str().unwrap(), "-o", out_s]);
    assert!(err.contains("another run"), "{err}");
    assert_eq!(std::fs::read(out.join("stepscope_tables.json")).unwrap(), manifest);
    for bad in ["gs://b/../x", "s3://b/a/./x"] {
        let err = assert_clean_error(&["tables", fixture("cpu-clean").to_str().unwrap(), "-o", bad]);
        assert!(err.contains("`..`"), "{bad}: {err}");
    }
}

#[test]
fn messages_say_what_is_wrong_and_what_to_do() {
    let file = fixture("cpu-clean/plugins/profile/2026_11_21_23_32_11/vm.xplane.pb");
    let file = file.to_str().unwrap();
    let folder = fixture("cpu-clean");
    let folder = folder.to_str().unwrap();
    // sql and tables take a profile file, as their --help says.
    let count = |path: &str, q: &str| {
        let v: serde_json::Value = serde_json::from_str(&ok(&["sql", q, path, "--json"])).unwrap();
        v["rows"][0][0].as_i64().unwrap()
    };
    let n = count(folder, "SELECT count(*) FROM ops");
    assert!(n > 0);
    assert_eq!(count(file, "SELECT count(*) FROM ops"), n);
    // SQLite reads a quoted name after FROM as the table.
    assert_eq!(count(folder, "SELECT count(*) FROM 'ops'"), n);
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("t");
    ok(&["tables", file, "-o", out.to_str().unwrap()]);
    assert_eq!(count(out.to_str().unwrap(), "SELECT count(*) FROM ops"), n);
    // A full disk: the file named, and what to do.
    let err = assert_clean_error(&["export", folder, "--format", "perfetto", "-o", "/dev/full"]);
    assert!(err.contains("/dev/full") && err.contains("disk is full"), "{err}");
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_stepscope"))
        .args(["ops", folder, "--csv"])
        .stdout(std::fs::File::create("/dev/full").unwrap())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with("stepscope: cannot write the output") && err.contains("disk is full"), "{err}");
}
