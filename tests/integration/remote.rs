//! gs:// and s3:// log directories, against real emulators started by
//! tests/support/buckets.py (gcp-storage-emulator and moto from PyPI, on 127.0.0.1):
//! every analysis's JSON equals the local copy's; errors are one line in bounded time;
//! nothing is written to the buckets but by `tables -o URL`, whose objects are the
//! local folder's files.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::util::{fixture, json, root};

/// The emulators, up while this lives.
pub(crate) struct Buckets {
    child: Child,
    stdin: Option<ChildStdin>,
    info: Value,
}

impl Buckets {
    pub(crate) fn start(dirs: &[&Path]) -> Buckets {
        let mut child = Command::new("python3")
            .arg(root().join("tests/support/buckets.py"))
            .args(dirs)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("python3 for tests/support/buckets.py (scripts/test.sh installs its packages)");
        let stdin = child.stdin.take();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let info: Value = serde_json::from_str(&line).unwrap_or_else(|e| {
            panic!("buckets.py did not start ({e}): {line:?}; pip install -r tests/support/requirements.txt")
        });
        Buckets { child, stdin, info }
    }

    fn port(&self, name: &str) -> u64 {
        self.info[name].as_u64().unwrap()
    }

    /// The environment a user sets for the emulator of `scheme` (`gs`, `s3`), or for
    /// the S3 that denies every request (`s3-deny`) or the endpoint that never answers
    /// (`gs-stall`, `s3-stall`).
    pub(crate) fn env(&self, which: &str) -> Vec<(&'static str, String)> {
        let at = |p: u64| format!("http://127.0.0.1:{p}");
        let s3 = |p: u64| {
            vec![
                ("AWS_ENDPOINT_URL", at(p)),
                ("AWS_ALLOW_HTTP", "true".into()),
                ("AWS_ACCESS_KEY_ID", "test".into()),
                ("AWS_SECRET_ACCESS_KEY", "test".into()),
                ("AWS_REGION", "us-east-1".into()),
            ]
        };
        let mut env = match which {
            "gs" => vec![("STORAGE_EMULATOR_HOST", at(self.port("gcs_port")))],
            "gs-stall" => vec![("STORAGE_EMULATOR_HOST", at(self.port("stall_port")))],
            "s3" => s3(self.port("s3_port")),
            "s3-deny" => s3(self.port("deny_port")),
            "s3-stall" => s3(self.port("stall_port")),
            _ => unreachable!(),
        };
        env.push(("STEPSCOPE_REMOTE_TIMEOUT_S", "2".into()));
        env
    }
}

impl Drop for Buckets {
    fn drop(&mut self) {
        drop(self.stdin.take());
        let _ = self.child.wait();
    }
}

fn run(env: &[(&'static str, String)], cache: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_stepscope"))
        .args(args)
        .arg("--cache")
        .arg(cache)
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .env_remove("GOOGLE_APPLICATION_CREDENTIALS")
        .output()
        .expect("run stepscope")
}

fn run_json(env: &[(&'static str, String)], cache: &Path, args: &[&str]) -> Value {
    let mut a = args.to_vec();
    a.push("--json");
    let out = run(env, cache, &a);
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("JSON")
}

#[test]
fn buckets_read_as_their_local_copies() {
    let (nocb, adam, tpu) = (fixture("gpu-nocb"), fixture("cpu-guide-adam"), fixture("tpu-v6e-inference"));
    let b = Buckets::start(&[&nocb, &adam, &tpu]);
    let uploaded: Vec<String> = b.info["uploaded"].as_object().unwrap().keys().cloned().collect();
    for scheme in ["gs", "s3"] {
        let env = b.env(scheme);
        let cache = tempfile::tempdir().unwrap();
        // Listing a bucket fetches no profile; one run fetches that run's files only.
        let root = format!("{scheme}://prof/logs");
        let listed = run_json(&env, cache.path(), &["ls", &root]);
        assert_eq!(listed["runs"].as_array().map(Vec::len), Some(3), "{listed}");
        assert!(listed["runs"][0]["path"].as_str().unwrap().starts_with(&format!("{scheme}://prof/")), "{listed}");
        assert_eq!(cached_profiles(cache.path()), Vec::<String>::new(), "ls fetched profiles");
        let one = "gpu-nocb/plugins/profile/2026_11_23_08_00_08";
        let mut s = run_json(&env, cache.path(), &["summary", &root, "--run", one]);
        let mut want = json(&["summary", fixture("gpu-nocb").to_str().unwrap(), "--run", "2026_11_23_08_00_08"]);
        // The run is named from the folder given: the bucket's root here, gpu-nocb there.
        assert_eq!(s["run"], one);
        for v in [&mut s, &mut want] {
            v.as_object_mut().unwrap().remove("run");
        }
        assert_eq!(s, want);
        let fetched = cached_profiles(cache.path());
        assert!(!fetched.is_empty() && fetched.iter().all(|p| p.contains(one)), "{fetched:?}");
        // A log directory, a run folder and a file, each as its local copy.
        for (name, local) in [("gpu-nocb", &nocb), ("cpu-guide-adam", &adam), ("tpu-v6e-inference", &tpu)] {
            let url = format!("{scheme}://prof/logs/{name}");
            for cmd in [
                "summary",
                "steps",
                "ops",
                "devices",
                "advise",
                "info",
                "scopes",
                "roofline",
                "memory",
                "kernels",
                "collectives",
                "compile",
            ] {
                let (mut remote, mut local) =
                    (run_json(&env, cache.path(), &[cmd, &url]), json(&[cmd, local.to_str().unwrap()]));
                // `info` and `memory` name the files they read: here the cached copies.
                for v in [&mut remote, &mut local] {
                    drop_paths(v);
                }
                assert_eq!(remote, local, "{cmd} {url}");
            }
            // One query over a bucket's tables, as over the local copy's.
            let q = "SELECT run, host, module, name, count, self_ps FROM ops ORDER BY 1, 2, 3, 4";
            let (remote, local) =
                (run_json(&env, cache.path(), &["sql", q, &url]), json(&["sql", q, local.to_str().unwrap()]));
            assert_eq!(remote, local, "sql {url}");
            assert!(local["row_count"].as_u64() > Some(0), "{local}");
        }
        let file = "gpu-nocb/plugins/profile/2026_11_23_08_00_08/vm.xplane.pb";
        let remote = run_json(&env, cache.path(), &["ops", &format!("{scheme}://prof/logs/{file}")]);
        assert_eq!(remote, json(&["ops", fixture(file).to_str().unwrap()]));
        // The bucket's root lists every run, as the local folder of the three does.
        let runs = run_json(&env, cache.path(), &["ls", &format!("{scheme}://prof/logs")]);
        let mut names: Vec<&str> =
            runs["runs"].as_array().unwrap().iter().map(|r| r["run"].as_str().unwrap()).collect();
        names.sort();
        assert_eq!(
            names,
            [
                "cpu-guide-adam/plugins/profile/2026_11_25_03_32_42",
                "gpu-nocb/plugins/profile/2026_11_23_08_00_08",
                "tpu-v6e-inference"
            ],
            "{runs}"
        );
        // Fetched once: a second read leaves the cached file as it was.
        let cached = cache.path().join(scheme).join("prof/logs").join(file);
        let before = std::fs::metadata(&cached).unwrap().modified().unwrap();
        let size = std::fs::metadata(&cached).unwrap().len();
        assert_eq!(size, std::fs::metadata(fixture(file)).unwrap().len());
        std::thread::sleep(Duration::from_millis(20));
        run_json(&env, cache.path(), &["summary", &format!("{scheme}://prof/logs/gpu-nocb")]);
        assert_eq!(std::fs::metadata(&cached).unwrap().modified().unwrap(), before);
        // Only profile files came: not the CSV beside them.
        assert!(!cache.path().join(scheme).join("prof/logs/gpu-nocb/xprof_op_costs.csv").exists());
    }
    // Nothing was written to either bucket.
    let listed = Command::new("python3")
        .args(["-c", LIST_BOTH])
        .args([b.port("gcs_port").to_string(), b.port("s3_port").to_string()])
        .output()
        .unwrap();
    assert!(listed.status.success(), "{}", String::from_utf8_lossy(&listed.stderr));
    let both: Value = serde_json::from_slice(&listed.stdout).unwrap();
    let mut want = uploaded.clone();
    want.sort();
    for store in ["gs", "s3"] {
        let mut keys: Vec<String> =
            both[store].as_array().unwrap().iter().map(|k| k.as_str().unwrap().to_string()).collect();
        keys.sort();
        assert_eq!(keys, want, "{store}: the bucket holds what was uploaded, nothing more");
    }
}

/// The profile files (`.xplane.pb`, traces) in a cache, by path.
fn cached_profiles(cache: &Path) -> Vec<String> {
    let names = crate::util::snapshot(cache).into_iter().map(|(p, ..)| p.to_string_lossy().into_owned());
    names.filter(|n| n.ends_with(".xplane.pb") || n.ends_with(".trace.json.gz")).collect()
}

/// Removes every `path` (a file's place on this machine) from a JSON value.
fn drop_paths(v: &mut Value) {
    match v {
        Value::Object(m) => {
            m.remove("path");
            m.values_mut().for_each(drop_paths);
        }
        Value::Array(a) => a.iter_mut().for_each(drop_paths),
        _ => {}
    }
}

/// Puts an object whose key climbs out of `logs/gpu-nocb/` into moto's bucket `prof`.
const PUT_ESCAPE: &str = r#"
import sys, boto3
c = boto3.client("s3", endpoint_url=f"http://127.0.0.1:{sys.argv[1]}", aws_access_key_id="t", aws_secret_access_key="t", region_name="us-east-1")
c.put_object(Bucket="prof", Key="logs/gpu-nocb/../../../../../escape.xplane.pb", Body=b"not a profile")
"#;

/// Lists bucket `prof` of the GCS emulator (JSON API) and of moto (boto3).
const LIST_BOTH: &str = r#"
import json, sys, urllib.request, boto3
gcs, s3 = sys.argv[1], sys.argv[2]
items = json.load(urllib.request.urlopen(f"http://127.0.0.1:{gcs}/storage/v1/b/prof/o")).get("items", [])
c = boto3.client("s3", endpoint_url=f"http://127.0.0.1:{s3}", aws_access_key_id="t", aws_secret_access_key="t", region_name="us-east-1")
keys = [o["Key"] for p in c.get_paginator("list_objects_v2").paginate(Bucket="prof") for o in p.get("Contents", [])]
print(json.dumps({"gs": [i["name"] for i in items], "s3": keys}))
"#;

/// Every object under `prefix` of bucket `prof` in the GCS emulator and in moto, and
/// every file under a local folder: each key (relative) with its bytes' SHA-256.
const HASH_BOTH: &str = r#"
import hashlib, json, os, sys, urllib.parse, urllib.request, boto3
gcs, s3, prefix, local = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
sha = lambda b: hashlib.sha256(b).hexdigest()
out = {"local": {}, "gs": {}, "s3": {}}
for d, _, files in os.walk(local):
    for f in files:
        p = os.path.join(d, f)
        out["local"][os.path.relpath(p, local)] = sha(open(p, "rb").read())
q = urllib.parse.urlencode({"prefix": prefix + "/"})
for item in json.load(urllib.request.urlopen(f"http://127.0.0.1:{gcs}/storage/v1/b/prof/o?{q}")).get("items", []):
    name = urllib.parse.quote(item["name"], safe="")
    body = urllib.request.urlopen(f"http://127.0.0.1:{gcs}/download/storage/v1/b/prof/o/{name}?alt=media").read()
    out["gs"][item["name"][len(prefix) + 1:]] = sha(body)
c = boto3.client("s3", endpoint_url=f"http://127.0.0.1:{s3}", aws_access_key_id="t", aws_secret_access_key="t", region_name="us-east-1")
for page in c.get_paginator("list_objects_v2").paginate(Bucket="prof", Prefix=prefix + "/"):
    for o in page.get("Contents", []):
        out["s3"][o["Key"][len(prefix) + 1:]] = sha(c.get_object(Bucket="prof", Key=o["Key"])["Body"].read())
print(json.dumps(out))
"#;

/// `tables -o gs://…` and `s3://…` put the files `tables -o DIR` writes, byte for byte
/// (the events table in parts, through Cloud Storage's resumable upload and S3's
/// multipart one); hosts put one at a time with `--host`, then `--index`, give the
/// same; nothing is left in the cache's staging folder.
#[test]
fn tables_into_a_bucket_are_the_local_folders_files() {
    let b = Buckets::start(&[&fixture("gpu-nocb")]);
    let cache = tempfile::tempdir().unwrap();
    let local = tempfile::tempdir().unwrap();
    let src = fixture("gpu-nosync").display().to_string();
    crate::util::ok(&["tables", &src, "-o", local.path().to_str().unwrap()]);
    let hosts: Vec<String> = (json(&["ls", &src])["runs"][0]["hosts"].as_array().unwrap().iter())
        .map(|h| h.as_str().unwrap().to_string())
        .collect();
    for (scheme, prefix, by_host) in [("gs", "t1", false), ("s3", "t2", false), ("gs", "t3", true), ("s3", "t4", true)]
    {
        let mut env = b.env(scheme);
        // Parts of 256 KiB on Cloud Storage (its least): the 339 kB events file goes in
        // two. S3's parts are 5 MiB at least: a file of that size goes through
        // object_store's multipart upload in the tests of the Python package.
        env.push(("STEPSCOPE_UPLOAD_CHUNK_BYTES", "262144".into()));
        env.push(("STEPSCOPE_REMOTE_TIMEOUT_S", "20".into()));
        let url = format!("{scheme}://prof/{prefix}");
        let mut commands: Vec<Vec<&str>> = Vec::new();
        if by_host {
            commands.extend(hosts.iter().map(|h| vec!["tables", &src, "-o", &url, "--host", h.as_str()]));
            commands.push(vec!["tables", &src, "-o", &url, "--index"]);
        } else {
            commands.push(vec!["tables", &src, "-o", &url]);
        }
        for args in commands {
            let out = run(&env, cache.path(), &args);
            assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        }
        let got = Command::new("python3")
            .args(["-c", HASH_BOTH, &b.port("gcs_port").to_string(), &b.port("s3_port").to_string(), prefix])
            .arg(local.path())
            .output()
            .unwrap();
        assert!(got.status.success(), "{}", String::from_utf8_lossy(&got.stderr));
        let got: Value = serde_json::from_slice(&got.stdout).unwrap();
        assert!(got["local"].as_object().unwrap().len() >= 10, "{got}");
        assert_eq!(got[scheme], got["local"], "{scheme} {prefix}");
        // And `sql` reads the bucket's folder as it reads the local one.
        let q = "SELECT host, count(*) AS n, sum(self_ps) AS self_ps FROM op_events GROUP BY host";
        let there = run_json(&env, cache.path(), &["sql", q, &url]);
        assert_eq!(there, json(&["sql", q, local.path().to_str().unwrap()]), "{url}");
        assert!(there["rows"][0][1].as_u64().unwrap() > 100, "{there}");
    }
    let staging = cache.path().join("staging");
    assert!(std::fs::read_dir(&staging).map(|d| d.count()).unwrap_or(0) == 0, "staging left behind");
    // A bucket that is not there: one line, nothing left staged.
    let out = run(&b.env("gs"), cache.path(), &["tables", &src, "-o", "gs://nobucket/t"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.lines().count() == 1 && err.contains("no bucket named \"nobucket\""), "{err}");
    assert!(std::fs::read_dir(&staging).map(|d| d.count()).unwrap_or(0) == 0, "staging left behind");
}

/// One host of a pod in a bucket, read alone (`--host`, `tables --host` as a Ray task
/// runs it): its file is fetched, and of the other hosts only the plane that aligns the
/// clocks, read in place with ranged reads; the answer is the local run's.
#[test]
fn one_host_of_a_bucket_run_fetches_its_file_alone() {
    let tmp = tempfile::tempdir().unwrap();
    let pod = tmp.path().join("pod");
    let run_dir = pod.join("plugins/profile/2026_11_01_00_00_00");
    std::fs::create_dir_all(&run_dir).unwrap();
    // Three captures started minutes apart, as the hosts of one run.
    for (host, dir) in [("a", "cpu-clean"), ("b", "cpu-slow"), ("c", "cpu-dp4")] {
        std::fs::copy(crate::util::xplane(dir), run_dir.join(format!("{host}.xplane.pb"))).unwrap();
    }
    // And a host whose file is no XSpace: its fields cannot be walked, so it is fetched
    // whole, and judged as a full read judges it (left out of the clocks' alignment).
    std::fs::write(run_dir.join("d.xplane.pb"), b"\x0a\xff\xff\xff\xff\x0f not a profile").unwrap();
    let b = Buckets::start(&[&pod]);
    for scheme in ["gs", "s3"] {
        let cache = tempfile::tempdir().unwrap();
        let url = format!("{scheme}://prof/logs/pod");
        let there = run_json(&b.env(scheme), cache.path(), &["steps", &url, "--host", "c"]);
        assert_eq!(there, json(&["steps", pod.to_str().unwrap(), "--host", "c"]), "{scheme}");
        // The cache: host c's file whole; a's and b's Task Environment planes only.
        let files: Vec<(String, u64)> = (crate::util::snapshot(cache.path()).into_iter())
            .filter(|(p, ..)| cache.path().join(p).is_file())
            .map(|(p, size, _)| (p.file_name().unwrap().to_string_lossy().into_owned(), size))
            .collect();
        let size = |host: &str| std::fs::metadata(run_dir.join(format!("{host}.xplane.pb"))).unwrap().len();
        let whole: Vec<&(String, u64)> = files.iter().filter(|f| f.0.ends_with(".xplane.pb")).collect();
        assert_eq!(
            whole,
            [&("c.xplane.pb".to_string(), size("c")), &("d.xplane.pb".to_string(), size("d"))],
            "{scheme}: {files:?}"
        );
        let peeks: Vec<&(String, u64)> = files.iter().filter(|f| f.0.ends_with("Task_Environment")).collect();
        assert_eq!(peeks.len(), 2, "{scheme}: {files:?}");
        assert!(peeks.iter().all(|p| p.1 > 0 && p.1 < 4096), "{scheme}: {files:?}");
        // tables --host, as a task writes it: the local command's files.
        let out = tmp.path().join(format!("t-{scheme}"));
        let r = run(&b.env(scheme), cache.path(), &["tables", &url, "--host", "a", "-o", out.to_str().unwrap()]);
        assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
        let local = tmp.path().join(format!("l-{scheme}"));
        crate::util::ok(&["tables", pod.to_str().unwrap(), "--host", "a", "-o", local.to_str().unwrap()]);
        let steps = |dir: &Path| {
            let q = "SELECT count(*), sum(duration_ps), min(start_ps) FROM steps";
            let mut v = json(&["sql", q, dir.to_str().unwrap()]);
            v["rows"].take()
        };
        // (A folder without the index: `sql` reads it once `--index` wrote it.)
        crate::util::ok(&["tables", pod.to_str().unwrap(), "-o", out.to_str().unwrap(), "--index"]);
        crate::util::ok(&["tables", pod.to_str().unwrap(), "-o", local.to_str().unwrap(), "--index"]);
        assert_eq!(steps(&out), steps(&local), "{scheme}");
    }
}

#[test]
fn bucket_errors_are_one_line_in_bounded_time() {
    let b = Buckets::start(&[&fixture("gpu-nocb")]);
    let cache = tempfile::tempdir().unwrap();
    for (which, url, words) in [
        ("gs", "gs://nobucket/logs", "no bucket named \"nobucket\""),
        ("s3", "s3://nobucket/logs", "no bucket named \"nobucket\""),
        ("gs", "gs://prof/logs/nothing.xplane.pb", "no such object"),
        ("s3", "s3://prof/logs/nothing.xplane.pb", "no such object"),
        ("gs", "gs://prof/elsewhere", "no profile files there"),
        ("s3-deny", "s3://prof/logs/gpu-nocb", "access denied"),
        ("gs-stall", "gs://prof/logs/gpu-nocb", "no answer in time"),
        ("s3-stall", "s3://prof/logs/gpu-nocb", "no answer in time"),
        ("gs", "gs:///logs", "no bucket"),
    ] {
        let t = Instant::now();
        let out = run(&b.env(which), cache.path(), &["summary", url]);
        let took = t.elapsed();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{url}: {err}");
        assert_eq!(err.lines().count(), 1, "{url}: one line: {err:?}");
        assert!(err.starts_with("stepscope: ") && err.contains(words), "{url}: {err:?}");
        assert!(!err.contains("panicked"));
        // Two retries of a 2 s limit, and the start of the client.
        assert!(took < Duration::from_secs(20), "{url} took {took:?}");
    }
    // A key that climbs out of its folder (`..`) is never written: not even inside
    // the cache, let alone beside it.
    let put = Command::new("python3").args(["-c", PUT_ESCAPE, &b.port("s3_port").to_string()]).output().unwrap();
    assert!(put.status.success(), "{}", String::from_utf8_lossy(&put.stderr));
    let outside = tempfile::tempdir().unwrap();
    let cache2 = outside.path().join("cache");
    // (object_store refuses the listing page that holds it: one line naming it.)
    let out = run(&b.env("s3"), &cache2, &["steps", "s3://prof/logs/gpu-nocb"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.lines().count() == 1 && err.contains("no plain path") && err.contains("escape.xplane.pb"), "{err}");
    let mut found = Vec::new();
    let mut stack = vec![outside.path().to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                found.push(p);
            }
        }
    }
    assert!(found.iter().all(|p| !p.ends_with("escape.xplane.pb")), "{found:?}");
    assert!(found.iter().all(|p| p.starts_with(&cache2)), "{found:?}");
    // The fix names the tool to list with, and the credentials to set.
    let out = run(&b.env("s3-deny"), cache.path(), &["summary", "s3://prof/logs/gpu-nocb"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("AWS_ACCESS_KEY_ID"));
}

#[test]
fn aws_profiles_come_from_the_shared_files() {
    let nocb = fixture("gpu-nocb");
    let b = Buckets::start(&[&nocb]);
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(home.path().join(".aws")).unwrap();
    std::fs::write(
        home.path().join(".aws/credentials"),
        "[default]\naws_access_key_id = d\naws_secret_access_key = d\n[prof]\naws_access_key_id = p\naws_secret_access_key = p\n",
    )
    .unwrap();
    std::fs::write(home.path().join(".aws/config"), "[profile prof]\nregion = eu-west-1\n").unwrap();
    // The environment of `s3`, less its keys: the profile's are used.
    let mut env: Vec<(&'static str, String)> =
        b.env("s3").into_iter().filter(|(k, _)| !k.starts_with("AWS_ACCESS") && !k.starts_with("AWS_SECRET")).collect();
    env.push(("HOME", home.path().display().to_string()));
    let cache = tempfile::tempdir().unwrap();
    for profile in ["prof", "default"] {
        let mut e = env.clone();
        e.push(("AWS_PROFILE", profile.to_string()));
        let got = run_json(&e, cache.path(), &["steps", "s3://prof/logs/gpu-nocb"]);
        assert_eq!(got, json(&["steps", nocb.to_str().unwrap()]), "AWS_PROFILE={profile}");
    }
    env.push(("AWS_PROFILE", "nope".to_string()));
    let out = run(&env, cache.path(), &["steps", "s3://prof/logs/gpu-nocb"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.lines().count() == 1 && err.contains("AWS_PROFILE=nope") && err.contains(".aws/credentials"), "{err}");
}
