//! A run mapped a host at a time into parts (`stepscope part`, as a Ray task maps a
//! host where it lives) and reduced (`summary --parts`, `advise --parts`): byte for
//! byte the answer of the run read here, the hosts' again-reads and the pod's join
//! included; a part that is damaged, of another host or of other settings is refused
//! in one line; a host that could not be mapped is left out as a host that cannot be
//! read here is.

use std::path::Path;

use crate::util::*;

/// Each host of the run in `dir` mapped by `stepscope part` (with `more` flags: `--for
/// COMMAND` and its settings) into `out`, as `host-I.part`; the hosts, in the run's
/// order.
fn map_hosts(dir: &str, out: &Path, more: &[&str]) -> Vec<String> {
    let plan: serde_json::Value = serde_json::from_str(&ok(&["part", dir, "--plan"])).unwrap();
    assert_eq!(plan["schema"], "stepscope.part_plan/1");
    let hosts: Vec<String> =
        plan["hosts"].as_array().unwrap().iter().map(|h| h.as_str().unwrap().to_string()).collect();
    for (i, host) in hosts.iter().enumerate() {
        let file = out.join(format!("host-{i}.part"));
        ok(&[&["part", dir, "--host", host, "-o", file.to_str().unwrap()][..], more].concat());
    }
    hosts
}

/// The same run's answer read here and reduced from its parts, `summary` and `advise`
/// (with `more` flags: the map's and the reduce's).
fn assert_reduced_as_read_here(dir: &str, more: &[&str], what: &str) {
    let parts = tempfile::tempdir().unwrap();
    map_hosts(dir, parts.path(), more);
    let p = parts.path().to_str().unwrap();
    let advise = |extra: &[&str]| ok(&[&["advise", dir, "--json"][..], more, extra].concat());
    assert_eq!(advise(&["--parts", p]), advise(&[]), "advise of {what}");
    if more.is_empty() {
        let summary = |extra: &[&str]| ok(&[&["summary", dir, "--json"][..], extra].concat());
        assert_eq!(summary(&["--parts", p]), summary(&[]), "summary of {what}");
    }
}

/// Runs of hosts whose decisions differ alone and are read again (GPU hosts with and
/// without step annotations; TPU, CPU and ROCm hosts), whose run's top op is small on
/// a host (that host read again for its replay), and a real two-process pod whose
/// hosts are joined at their all-reduces: reduced from their parts, each gives the
/// summary and findings of the run read here, byte for byte; with every rule at its
/// hair trigger too (the thresholds given to the map and the reduce).
#[test]
fn a_run_mapped_a_host_at_a_time_reduces_to_the_answer_read_here() {
    let mixes: [&[&str]; 4] = [
        &["gpu-sync", "gpu-nosync", "gpu-unannotated"],
        &["tpu-v6e-inference", "cpu-transformer", "rocm-mi300x-conv-2gpu"],
        &["cpu-callback", "cpu-stale-state", "cpu-oneoff"],
        &["cpu-matmul", "cpu-sleep-step"],
    ];
    let th = tempfile::tempdir().unwrap();
    let hair_trigger = hair_trigger(th.path());
    for mix in mixes {
        let tmp = tempfile::tempdir().unwrap();
        run_of_mix(tmp.path(), mix);
        let dir = tmp.path().to_str().unwrap();
        assert_reduced_as_read_here(dir, &[], &format!("{mix:?}"));
        if mix.len() == 3 {
            let th = ["--thresholds", hair_trigger.as_str()];
            assert_reduced_as_read_here(dir, &th, &format!("{mix:?} at hair trigger"));
        }
    }
    // The other commands a part is mapped for, each with its settings.
    let tmp = tempfile::tempdir().unwrap();
    let hosts = [("h0", "gpu-sync"), ("h1", "gpu-nosync"), ("h2", "cpu-clean")];
    run_of_fixtures(tmp.path(), "2026_11_01_00_00_00", &hosts);
    let dir = tmp.path().to_str().unwrap();
    let kept = tempfile::tempdir().unwrap();
    let baseline = kept.path().join("baseline.json");
    std::fs::write(&baseline, ok(&["summary", &xplane("cpu-clean"), "--json"])).unwrap();
    let check = ["--baseline", baseline.to_str().unwrap(), "--max-regression", "1000"];
    let commands: [(&str, &[&str], &[&str]); 7] = [
        ("steps", &["--critical-path"], &["--top", "5"]),
        ("steps", &[], &[]),
        ("devices", &[], &[]),
        ("ops", &["--by", "scope", "--depth", "2"], &["--top", "0"]),
        ("ops", &[], &["--min-self", "1us"]),
        ("check", &[], &check),
        ("check", &[], &["--max-step-ms", "1000"]),
    ];
    for (command, settings, own) in commands {
        let parts = tempfile::tempdir().unwrap();
        map_hosts(dir, parts.path(), &[&["--for", command][..], settings].concat());
        let p = parts.path().to_str().unwrap();
        let answer = |extra: &[&str]| ok(&[&[command, dir, "--json"][..], settings, own, extra].concat());
        assert_eq!(answer(&["--parts", p]), answer(&[]), "{command} {settings:?}");
    }
    // A part of one command, or setting, is refused by another.
    let parts = tempfile::tempdir().unwrap();
    map_hosts(dir, parts.path(), &["--for", "steps"]);
    let e = assert_clean_error(&["devices", dir, "--parts", parts.path().to_str().unwrap()]);
    assert!(e.contains("mapped for another command or settings"), "{e}");
    let e = assert_clean_error(&["steps", dir, "--critical-path", "--parts", parts.path().to_str().unwrap()]);
    assert!(e.contains("critical paths false"), "{e}");

    let pod = capture("cpu-pod-straggler");
    assert_reduced_as_read_here(&pod, &[], "cpu-pod-straggler");
    // The pod's first finding is its straggler, with its gain: the join of its hosts'
    // legs survived the map.
    let parts = tempfile::tempdir().unwrap();
    map_hosts(&pod, parts.path(), &[]);
    let advice = json(&["advise", &pod, "--parts", parts.path().to_str().unwrap()]);
    assert_eq!(advice["findings"][0]["rule"], "stragglers", "{}", advice["findings"][0]);
    assert!(advice["findings"][0]["gain_pct"].as_f64().unwrap() > 5.0, "{}", advice["findings"][0]);
}

/// A host whose file cannot be read fails its map in one line; written beside the
/// parts as `host-I.unread`, the reduce leaves that host out exactly as the run read
/// here does (`hosts_unread`, the same numbers of the others). A host with no part is
/// read here. A damaged part, another host's part, and a part mapped with other
/// thresholds are each refused in one line that says to map the host again.
#[test]
fn a_host_that_could_not_be_mapped_is_left_out_and_a_wrong_part_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let run =
        run_of_fixtures(tmp.path(), "2026_11_01_00_00_00", &[("a", "cpu-clean"), ("b", "cpu-slow"), ("c", "cpu-dp4")]);
    let whole = std::fs::read(run.join("b.xplane.pb")).unwrap();
    std::fs::write(run.join("b.xplane.pb"), &whole[..whole.len() / 3]).unwrap();
    let dir = tmp.path().to_str().unwrap();
    let parts = tempfile::tempdir().unwrap();
    let p = parts.path();
    for (i, host) in ["a", "c"].iter().enumerate() {
        let file = p.join(format!("host-{}.part", i * 2));
        ok(&["part", dir, "--host", host, "-o", file.to_str().unwrap()]);
    }
    let failed = stepscope(&["part", dir, "--host", "b", "-o", p.join("host-1.part").to_str().unwrap()]);
    assert_eq!(failed.status.code(), Some(2));
    let error = String::from_utf8(failed.stderr).unwrap();
    assert_eq!(error.trim_end().lines().count(), 1, "{error}");
    assert!(error.contains("b.xplane.pb") && error.contains("not a readable profile"), "{error}");
    assert!(!p.join("host-1.part").exists(), "a failed map leaves no part behind");
    std::fs::write(p.join("host-1.unread"), &error).unwrap();
    let pstr = p.to_str().unwrap();
    let summary = |extra: &[&str]| ok(&[&["summary", dir, "--json"][..], extra].concat());
    let here = summary(&[]);
    assert_eq!(summary(&["--parts", pstr]), here);
    let v: serde_json::Value = serde_json::from_str(&here).unwrap();
    assert_eq!(v["hosts_unread"][0]["host"], "b", "{}", v["hosts_unread"]);
    assert_eq!(ok(&["advise", dir, "--json", "--parts", pstr]), ok(&["advise", dir, "--json"]));
    // Host c with no part: read here, for the same answer.
    std::fs::remove_file(p.join("host-2.part")).unwrap();
    assert_eq!(summary(&["--parts", pstr]), here);
    // A damaged part; another host's part; a part of other thresholds.
    let a_part = std::fs::read(p.join("host-0.part")).unwrap();
    let th = tempfile::tempdir().unwrap();
    let hair = hair_trigger(th.path());
    let other = p.join("other.part");
    ok(&["part", dir, "--host", "a", "--thresholds", &hair, "-o", other.to_str().unwrap()]);
    let other = std::fs::read(other).unwrap();
    let wrong: [(&[u8], &str, &str); 3] = [
        (&a_part[..a_part.len() - 7], "host-0.part", "damaged"),
        (&a_part, "host-2.part", "mapped for another host (\"a\", not \"c\")"),
        (&other, "host-0.part", "mapped for another command or settings"),
    ];
    for (bytes, name, says) in wrong {
        std::fs::write(p.join("host-0.part"), &a_part).unwrap();
        std::fs::write(p.join(name), bytes).unwrap();
        let e = assert_clean_error(&["summary", dir, "--json", "--parts", pstr]);
        assert!(e.contains(says) && e.contains("map it again"), "{name}: {e}");
        let _ = std::fs::remove_file(p.join("host-2.part"));
    }
    // Not a folder; no such host; no span.
    let e = assert_clean_error(&["summary", dir, "--parts", p.join("host-0.part").to_str().unwrap()]);
    assert!(e.contains("is not a folder"), "{e}");
    let e = assert_clean_error(&["part", dir, "--host", "nope", "-o", p.join("x.part").to_str().unwrap()]);
    assert!(e.contains("no host named \"nope\" in this run — pick one of: a, b, c"), "{e}");
    let e = assert_clean_error(&["part", dir, "--host", "a", "--for", "diff-rows", "--within", "1;2", "-o", "-"]);
    assert!(e.contains("is not START_PS,END_PS"), "{e}");
}

/// A part with any one byte changed, or cut anywhere, is refused in one line (its
/// header's checksum, its lengths), never read into a wrong answer or a panic.
#[test]
fn a_part_changed_anywhere_is_refused_in_one_line() {
    let tmp = tempfile::tempdir().unwrap();
    run_of_fixtures(tmp.path(), "2026_11_01_00_00_00", &[("a", "cpu-clean"), ("b", "cpu-slow")]);
    let dir = tmp.path().to_str().unwrap();
    let parts = tempfile::tempdir().unwrap();
    map_hosts(dir, parts.path(), &[]);
    let file = parts.path().join("host-1.part");
    let good = std::fs::read(&file).unwrap();
    let p = parts.path().to_str().unwrap();
    // Positions spread over the whole part (its header first), and cuts.
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut next = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let mut cases: Vec<Vec<u8>> = Vec::new();
    for k in 0..60 {
        let at = if k < 20 { k * 7 % 160 } else { (next() % good.len() as u64) as usize };
        let mut bad = good.clone();
        bad[at] ^= 1 << (next() % 8);
        cases.push(bad);
    }
    for cut in [0, 10, 40, good.len() / 2, good.len() - 1] {
        cases.push(good[..cut].to_vec());
    }
    for bad in cases {
        std::fs::write(&file, &bad).unwrap();
        let e = assert_clean_error(&["summary", dir, "--parts", p]);
        assert!(e.contains("host-1.part") && e.contains("map it again"), "{e}");
    }
    std::fs::write(&file, &good).unwrap();
    ok(&["summary", dir, "--parts", p]);
}

/// `diff` of two runs from their parts, in two rounds as a driver maps them: each
/// host's first part (`--for diff`), the run's steps' span from them (`part
/// --span-of`), each host's rows within it (`--for diff-rows --within`); the same bytes
/// as the diff read here, by op and by scope, and with a host's rows left to the reduce.
/// A side of one host too.
#[test]
fn a_diff_of_two_runs_mapped_in_two_rounds_is_the_diff_read_here() {
    let (ta, tb, tc) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    run_of_mix(ta.path(), &["cpu-clean", "cpu-slow", "cpu-dp4"]);
    run_of_mix(tb.path(), &["cpu-slow", "cpu-clean", "cpu-dp4"]);
    run_of_mix(tc.path(), &["cpu-clean"]);
    let (a, b, c) = (ta.path().to_str().unwrap(), tb.path().to_str().unwrap(), tc.path().to_str().unwrap());
    for by in ["op", "scope"] {
        let parts: Vec<tempfile::TempDir> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
        for (run, out) in [a, b, c].iter().zip(&parts) {
            let hosts = map_hosts(run, out.path(), &["--for", "diff"]);
            let span: serde_json::Value =
                serde_json::from_str(&ok(&["part", run, "--span-of", out.path().to_str().unwrap()])).unwrap();
            assert_eq!(span["schema"], "stepscope.part_span/1");
            let within = span["span"].as_array().map(|s| format!("{},{}", s[0], s[1]));
            for (i, host) in hosts.iter().enumerate() {
                let file = out.path().join(format!("host-{i}.rows"));
                let mut args = vec!["part", run, "--host", host, "--for", "diff-rows", "--by", by];
                args.extend(["-o", file.to_str().unwrap()]);
                if let Some(w) = &within {
                    args.extend(["--within", w.as_str()]);
                }
                ok(&args);
            }
        }
        let p = |k: usize| parts[k].path().to_str().unwrap().to_string();
        let diff = |x: &str, y: &str, more: &[&str]| ok(&[&["diff", x, y, "--json", "--by", by][..], more].concat());
        assert_eq!(diff(a, b, &["--parts-a", &p(0), "--parts-b", &p(1)]), diff(a, b, &[]), "by {by}");
        assert_eq!(diff(c, b, &["--parts-a", &p(2), "--parts-b", &p(1)]), diff(c, b, &[]), "by {by}, one host");
        std::fs::remove_file(parts[1].path().join("host-2.rows")).unwrap();
        assert_eq!(diff(a, b, &["--parts-b", &p(1)]), diff(a, b, &[]), "by {by}, rows read here");
    }
}
