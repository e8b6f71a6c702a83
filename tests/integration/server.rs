//! `stepscope serve`: the real binary serving real captures, spoken to over HTTP/1.1.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::util::{assert_clean_error, copy_tree, fixture, json, ok, reference, snapshot, xplane};

pub(crate) const CPU_RUN: &str = "plugins/profile/2026_11_21_22_29_17";

/// A running `stepscope serve`, killed on drop.
pub(crate) struct Served {
    pub(crate) child: Child,
    _stdout: BufReader<ChildStdout>,
    pub(crate) port: u16,
    pub(crate) token: String,
    first_line: String,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(crate) fn serve(root: &Path, extra: &[&str]) -> Served {
    serve_with(root, extra, &[])
}

/// [`serve`] with environment variables set for the server.
pub(crate) fn serve_with(root: &Path, extra: &[&str], env: &[(&str, &str)]) -> Served {
    let mut child = Command::new(env!("CARGO_BIN_EXE_stepscope"))
        .envs(env.iter().copied())
        .arg("serve")
        .arg(root)
        .args(["--port", "0", "--no-open"])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start stepscope serve");
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
    let mut line = String::new();
    stdout.read_line(&mut line).expect("first line");
    let line = line.trim_end().to_string();
    let rest =
        line.strip_prefix("stepscope: serving http://127.0.0.1:").unwrap_or_else(|| panic!("first line {line:?}"));
    let (port, token) = rest.split_once('/').expect("port/token");
    let token = token.strip_suffix('/').expect("URL ends in /").to_string();
    Served { port: port.parse().expect("port"), token, first_line: line.clone(), child, _stdout: stdout }
}

pub(crate) struct Reply {
    pub(crate) status: u16,
    headers: Vec<(String, String)>,
    pub(crate) body: Vec<u8>,
}

impl Reply {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
    pub(crate) fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
    pub(crate) fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.text()))
    }
}

/// One HTTP/1.1 request with the path sent exactly as given (no normalisation).
pub(crate) fn request(port: u16, method: &str, raw_path: &str) -> Reply {
    request_with(port, method, raw_path, "")
}

/// [`request`] with more header lines (each ending in `\r\n`).
pub(crate) fn request_with(port: u16, method: &str, raw_path: &str, headers: &str) -> Reply {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(60))).expect("timeout");
    write!(s, "{method} {raw_path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{headers}Connection: close\r\n\r\n")
        .expect("send");
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).expect("read reply");
    let split = buf.windows(4).position(|w| w == b"\r\n\r\n").expect("end of headers");
    let head = String::from_utf8_lossy(&buf[..split]).into_owned();
    let mut lines = head.split("\r\n");
    let status = lines.next().and_then(|l| l.split(' ').nth(1)).and_then(|c| c.parse().ok()).expect("status");
    let headers: Vec<(String, String)> =
        lines.filter_map(|l| l.split_once(':')).map(|(k, v)| (k.trim().to_string(), v.trim().to_string())).collect();
    let mut body = buf[split + 4..].to_vec();
    if headers.iter().any(|(k, v)| k.eq_ignore_ascii_case("transfer-encoding") && v.contains("chunked")) {
        body = dechunk(&body);
    }
    Reply { status, headers, body }
}

fn dechunk(mut b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let nl = b.windows(2).position(|w| w == b"\r\n").expect("chunk size");
        let n = usize::from_str_radix(std::str::from_utf8(&b[..nl]).expect("hex").trim(), 16).expect("hex");
        if n == 0 {
            return out;
        }
        out.extend_from_slice(&b[nl + 2..nl + 2 + n]);
        b = &b[nl + 4 + n..];
    }
}

impl Served {
    pub(crate) fn get(&self, path_under_token: &str) -> Reply {
        request(self.port, "GET", &format!("/{}/{path_under_token}", self.token))
    }
    pub(crate) fn api(&self, route_and_query: &str) -> Value {
        let r = self.get(&format!("api/{route_and_query}"));
        assert_eq!(r.status, 200, "api/{route_and_query}: {}", r.text());
        assert_eq!(r.header("cache-control"), Some("no-store"));
        r.json()
    }
}

pub(crate) fn enc(s: &str) -> String {
    s.replace('/', "%2F")
}

#[test]
fn first_line_names_the_url_and_runs_are_listed() {
    let s = serve(&fixture("cpu-transformer"), &[]);
    assert_eq!(s.first_line, format!("stepscope: serving http://127.0.0.1:{}/{}/", s.port, s.token));
    assert_eq!(s.token.len(), 32);
    assert!(s.token.bytes().all(|b| b.is_ascii_hexdigit()));
    let runs = s.api("runs");
    let runs = runs.as_array().expect("array of runs");
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0]["run"], CPU_RUN);
    assert_eq!(runs[0]["hosts"][0]["host"], "vm");
    assert_eq!(runs[0]["hosts"][0]["file_bytes"], 1_120_196);
    // The page, with a strict CSP, and its scripts.
    let page = s.get("");
    assert_eq!(page.status, 200);
    assert!(page.header("content-type").unwrap_or("").starts_with("text/html"));
    let csp = page.header("content-security-policy").expect("CSP");
    assert!(csp.contains("default-src 'none'") && csp.contains("script-src 'self'"), "{csp}");
    assert!(page.text().contains("app.js"));
    let js = s.get("app.js");
    assert_eq!(js.status, 200);
    assert!(js.header("content-type").unwrap_or("").starts_with("text/javascript"));
    // `/TOKEN` redirects to `/TOKEN/`.
    let r = request(s.port, "GET", &format!("/{}", s.token));
    assert_eq!(r.status, 308);
    assert_eq!(r.header("location"), Some(format!("/{}/", s.token).as_str()));
}

#[test]
fn analyses_answer_with_the_cli_json() {
    let dir = fixture("cpu-transformer");
    let d = dir.to_str().unwrap();
    let s = serve(&dir, &[]);
    let run = enc(CPU_RUN);
    assert_eq!(s.api(&format!("summary?run={run}")), json(&["summary", d]));
    assert_eq!(s.api("summary?top=3"), json(&["summary", d, "--top", "3"]));
    // The steps with their critical paths (for the timeline's steps and the steps page).
    assert_eq!(s.api("steps"), json(&["steps", d, "--critical-path"]));
    assert_eq!(s.api("ops"), json(&["ops", d]));
    assert_eq!(s.api("ops?by=scope&depth=2&top=50"), json(&["ops", d, "--by", "scope", "--depth", "2", "--top", "50"]));
    assert_eq!(s.api("ops?by=category&host=vm"), json(&["ops", d, "--by", "category", "--host", "vm"]));
    assert_eq!(s.api("ops?by=line&top=50"), json(&["ops", d, "--by", "line", "--top", "50"]));
    assert_eq!(s.api("ops?by=stack&top=50"), json(&["ops", d, "--by", "stack", "--top", "50"]));
    assert_eq!(s.api("scopes"), json(&["scopes", d]));
    assert_eq!(s.api("scopes?top=2"), json(&["scopes", d, "--top", "2"]));
    assert_eq!(s.api("roofline?top=5"), json(&["roofline", d, "--top", "5"]));
    // Roofs a page gives (#75 item 12): as the CLI draws them under the same peaks, with
    // no server restarted with flags; a rate that is not one is a one-line error.
    let given = s.api("roofline?top=all&peak_flops=2T&peak_bandwidth=100G");
    assert_eq!(given, json(&["roofline", d, "--top", "0", "--peak-flops", "2T", "--peak-bandwidth", "100G"]));
    assert_eq!(given["devices"][0]["peak_flops_source"], "user");
    assert!(given["ops"].as_array().unwrap().iter().all(|o| o["roof_flops_per_s"].is_number()), "{given}");
    let bad = s.get("api/roofline?peak_flops=fast");
    assert_eq!(bad.status, 400);
    assert!(bad.json()["error"].as_str().unwrap().starts_with("peak_flops: "), "{}", bad.text());
    let all = s.api("ops?top=all");
    assert!(all["ops"].as_array().unwrap().len() > 10, "top=all lists every op");
    // top=0 and ALL mean every row, as the CLI's --top 0 and --top all do.
    assert_eq!(s.api("ops?top=0"), all);
    assert_eq!(s.api("ops?top=ALL"), all);
    assert_eq!(all, json(&["ops", d, "--top", "0"]));
    let rocm = fixture("rocm-mi300x-gemm");
    let s2 = serve(&rocm, &[]);
    let k = s2.api("kernels?top=all");
    assert_eq!(k, json(&["kernels", rocm.to_str().unwrap(), "--top", "1000"]));
    assert!(!k["kernels"].as_array().unwrap().is_empty());
}

#[test]
fn timeline_tiles_cover_every_event_in_o_px_boxes() {
    let dir = fixture("cpu-transformer");
    let s = serve(&dir, &[]);
    let info = json(&["info", dir.to_str().unwrap()]);
    let lines = &info["hosts"][0]["planes"];
    let tracks = s.api("timeline/tracks");
    assert_eq!(tracks["schema"], "stepscope.timeline_tracks/1");
    assert_eq!(tracks["events"], info["events_total"]);
    let list = tracks["tracks"].as_array().unwrap();
    assert_eq!(list.len(), 5);
    let (a, b) = (tracks["start_ps"].as_i64().unwrap(), tracks["end_ps"].as_i64().unwrap());
    for t in list {
        // The same count `info` reports for the line.
        let expect = lines
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|p| p["lines"].as_array().unwrap())
            .find(|l| l["name"] == t["line"])
            .map(|l| l["events"].as_u64().unwrap())
            .expect("line in info");
        assert_eq!(t["events"].as_u64(), Some(expect));
        let px = 400;
        let tile = s.api(&format!("timeline/tile?track={}&start_ps={a}&end_ps={}&px={px}", t["id"], b + 1));
        let counts: Vec<u64> = tile["box_count"].as_array().unwrap().iter().map(|c| c.as_u64().unwrap()).collect();
        assert_eq!(counts.iter().sum::<u64>(), expect, "track {}", t["line"]);
        assert_eq!(tile["events"].as_u64(), Some(expect));
        let depth = t["depth"].as_u64().unwrap();
        assert!(counts.len() as u64 <= depth * (2 * px + 2), "{} boxes for {} rows", counts.len(), depth);
        assert!(counts.len() < expect as usize, "sub-pixel events were merged");
    }
    // All the tracks' tiles in one answer: each exactly its own tile's answer.
    let ids: Vec<String> = list.iter().rev().map(|t| t["id"].to_string()).collect();
    let (w0, w1) = (a + (b - a) / 3, a + (b - a) / 2);
    let all = s.api(&format!("timeline/tiles?tracks={}&start_ps={w0}&end_ps={w1}&px=700", ids.join(",")));
    assert_eq!(all["schema"], "stepscope.timeline_tiles/1");
    let tiles = all["tiles"].as_array().unwrap();
    assert_eq!(tiles.len(), ids.len());
    for (id, tile) in ids.iter().zip(tiles) {
        assert_eq!(tile, &s.api(&format!("timeline/tile?track={id}&start_ps={w0}&end_ps={w1}&px=700")), "track {id}");
    }
    // `rows=2`: the boxes of the first two depth rows, exactly as the whole tile has them.
    let deep = list.iter().max_by_key(|t| t["depth"].as_u64()).unwrap();
    assert!(deep["depth"].as_u64().unwrap() > 2, "{deep}");
    let window = format!("start_ps={a}&end_ps={}&px=900", b + 1);
    let whole = s.api(&format!("timeline/tile?track={}&{window}", deep["id"]));
    let two = s.api(&format!("timeline/tiles?tracks={}&{window}&rows=2", deep["id"]));
    let two = &two["tiles"][0];
    let cols = ["box_depth", "box_start_ps", "box_duration_ps", "box_name", "box_count", "box_index"];
    let keep: Vec<usize> = (0..whole["box_depth"].as_array().unwrap().len())
        .filter(|&k| whole["box_depth"][k].as_u64().unwrap() < 2)
        .collect();
    assert!(!keep.is_empty() && keep.len() < whole["box_depth"].as_array().unwrap().len());
    for c in cols {
        let want: Vec<&Value> = keep.iter().map(|&k| &whole[c][k]).collect();
        let got: Vec<&Value> = two[c].as_array().unwrap().iter().collect();
        assert_eq!(got, want, "{c}");
    }
    let counted: u64 = keep.iter().map(|&k| whole["box_count"][k].as_u64().unwrap()).sum();
    assert_eq!(two["events"].as_u64(), Some(counted));
    // An answer is bounded: 64 copies of that track at the widest tile is too much.
    let many = vec![deep["id"].to_string(); 64].join(",");
    let r = s.get(&format!("api/timeline/tiles?tracks={many}&start_ps={a}&end_ps={b}&px=16384"));
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(
        r.json()["error"].as_str().unwrap().contains("ask for fewer tracks, fewer rows or fewer px"),
        "{}",
        r.text()
    );
    // Zoomed in to 2 µs around one event of the busiest thread: it comes back as itself.
    let ev = s.api("timeline/search?q=dot.27&limit=1");
    let m = &ev["matches"][0];
    let (start, dur) = (m["start_ps"].as_i64().unwrap(), m["duration_ps"].as_i64().unwrap());
    let tile = s.api(&format!("timeline/tile?track={}&start_ps={start}&end_ps={}&px=1000", m["track"], start + dur));
    let i = tile["box_index"].as_array().unwrap().iter().position(|x| x == &m["index"]).expect("event in tile");
    assert_eq!(tile["box_count"][i], 1);
    assert_eq!(tile["box_duration_ps"][i], dur);
    let name = &tile["names"][tile["box_name"][i].to_string()];
    assert_eq!(name, "dot.27");
    // Its details carry the HLO op and the step it ran in.
    let d = s.api(&format!("timeline/event?track={}&index={}", m["track"], m["index"]));
    assert_eq!(d["name"], "dot.27");
    assert!(d["stats"].as_array().unwrap().iter().any(|s| s["name"] == "hlo_op"), "{d}");
    let steps = s.api("steps");
    let step = steps["steps"].as_array().unwrap().iter().find(|st| {
        let (s0, s1) =
            (st["start_ps"].as_i64().unwrap(), st["start_ps"].as_i64().unwrap() + st["duration_ps"].as_i64().unwrap());
        s0 <= start && start < s1
    });
    assert_eq!(d["step_num"], step.map_or(Value::Null, |st| st["step_num"].clone()));
}

/// A timeline search for an XLA:CPU op counts its runs, each once: not the `end: <op>`
/// marker each run also leaves (#75 item 10: 4,000 hits for 2,000 runs). A search that
/// starts `end:` finds the markers. Both as the reference reader counts the events.
#[test]
fn a_search_for_an_op_counts_its_runs_not_their_end_markers() {
    let dir = fixture("cpu-transformer");
    let s = serve(&dir, &[]);
    let file = xplane("cpu-transformer");
    let runs = reference(&["host-events", "--names", "dot.27", &file]).as_array().unwrap().len() as u64;
    let ends = reference(&["host-events", "--names", "end: dot.27", &file]).as_array().unwrap().len() as u64;
    assert!(runs > 0 && ends == runs, "{runs} runs, {ends} markers");
    assert_eq!(s.api("timeline/search?q=dot.27&limit=1")["total"].as_u64(), Some(runs));
    assert_eq!(s.api("timeline/search?q=end%3A%20dot.27&limit=1")["total"].as_u64(), Some(ends));
}

/// An XLA:CPU op's event says how long the op ran until its pool work was done, and
/// the op's runs so summed (#75 item 1): the totals the op profile gives, where the
/// boxes (its dispatches) sum less — both as the reference reader's `cpu-ops` has them.
#[test]
fn an_xla_cpu_ops_event_gives_its_run_until_done_as_the_op_profile_sums_it() {
    let dir = fixture("cpu-transformer");
    let s = serve(&dir, &[]);
    let file = xplane("cpu-transformer");
    let reference_ops = reference(&["cpu-ops", &file]);
    // An op whose work ran past its boxes.
    let op = (reference_ops["ops"].as_array().unwrap().iter())
        .find(|o| o["total_ps"].as_i64() > o["event_ps"].as_i64())
        .expect("an op with a tail");
    let name = op["name"].as_str().unwrap();
    let m = &s.api(&format!("timeline/search?q={name}&limit=100"))["matches"];
    let m = m.as_array().unwrap().iter().find(|m| m["name"] == name).unwrap();
    let d = s.api(&format!("timeline/event?track={}&index={}", m["track"], m["index"]));
    let u = &d["until_done"];
    assert_eq!(u["op_total_ps"], op["total_ps"], "{d}");
    assert_eq!(u["op_count"], op["count"]);
    assert_eq!(d["occurrences"]["total_ps"], op["event_ps"], "the boxes: its dispatches");
    assert!(u["duration_ps"].as_i64() >= d["duration_ps"].as_i64());
    assert_eq!(u["end_ps"].as_i64().unwrap() - d["start_ps"].as_i64().unwrap(), u["duration_ps"].as_i64().unwrap());
    let row = (s.api("ops?top=all")["ops"].as_array().unwrap().iter()).find(|o| o["name"] == name).unwrap().clone();
    assert_eq!(row["total_ps"], u["op_total_ps"]);
}

/// A GPU's derived lines go on as XProf draws them (#75 item 11): after `XLA Ops`,
/// `Framework Name Scope` and `Framework Ops` — each op execution named by the JAX
/// primitive of its instruction's `op_name` (the reference reader's `sources`), the
/// executions of ops with none left out — and `Source code`, each execution named by a
/// frame of its instruction's Python stack.
#[test]
fn a_gpus_framework_lines_name_each_op_by_its_jax_primitive() {
    let dir = fixture("gpu-transformer");
    let s = serve(&dir, &[]);
    let tracks = s.api("timeline/tracks");
    let list = tracks["tracks"].as_array().unwrap();
    let lines: Vec<&str> = list.iter().map(|t| t["line"].as_str().unwrap()).collect();
    let at = |name: &str| lines.iter().position(|l| *l == name).unwrap_or_else(|| panic!("no {name}: {lines:?}"));
    assert_eq!((at("Framework Name Scope"), at("Framework Ops")), (at("XLA Ops") + 1, at("XLA Ops") + 2));
    let (start, end) = (tracks["start_ps"].as_i64().unwrap(), tracks["end_ps"].as_i64().unwrap());
    let rows = |line: &str| -> BTreeMap<String, u64> {
        let id = &list[at(line)]["id"];
        let d = s.api(&format!("timeline/select?start_ps={start}&end_ps={}&tracks={id}", end + 1));
        (d["rows"].as_array().unwrap().iter())
            .map(|r| (r["name"].as_str().unwrap().to_string(), r["count"].as_u64().unwrap()))
            .collect()
    };
    let sources = reference(&["sources", &xplane("gpu-transformer")]);
    let train = (sources.as_object().unwrap().iter()).find(|(k, _)| k.starts_with("jit_train_step")).unwrap().1;
    // Each op's primitive: the last part of the first of its op_names, transforms opened.
    let primitive = |op: &str| -> Option<String> {
        let name = train["instructions"][op]["op_name"].as_str()?.split(';').next()?;
        let last = name.rsplit('/').next()?.trim_end_matches(')');
        Some(last.rsplit('(').next().unwrap_or(last).to_string()).filter(|p| !p.is_empty())
    };
    let mut want: BTreeMap<String, u64> = BTreeMap::new();
    for (op, n) in rows("XLA Ops") {
        if let Some(p) = primitive(&op) {
            *want.entry(p).or_default() += n;
        }
    }
    assert!(want.len() > 3, "{want:?}");
    assert_eq!(rows("Framework Ops"), want);
    assert!(rows("Framework Name Scope").contains_key("layer0"));
    // `Source code`: each execution of an op whose instruction has a Python stack,
    // named by one of its frames (`file:line`).
    let stack = |op: &str| -> Vec<String> {
        (train["instructions"][op]["stack"].as_array().into_iter().flatten())
            .map(|f| format!("{}:{}", f[0].as_str().unwrap_or(""), f[2]))
            .collect()
    };
    let ops = rows("XLA Ops");
    let with_stack: u64 = ops.iter().filter(|(op, _)| !stack(op).is_empty()).map(|(_, n)| n).sum();
    let lines = rows("Source code");
    assert_eq!(lines.values().sum::<u64>(), with_stack, "{lines:?}");
    let frames: std::collections::BTreeSet<String> = ops.keys().flat_map(|op| stack(op)).collect();
    assert!(lines.keys().all(|at| frames.contains(at)), "{lines:?}");
}

#[test]
fn bad_requests_get_one_line_errors() {
    let s = serve(&fixture("cpu-transformer"), &[]);
    let too_many = format!("api/timeline/tiles?tracks={}&start_ps=0&end_ps=5&px=10", vec!["0"; 65].join(","));
    for (path, status) in [
        ("api/timeline/tile?track=0&start_ps=10&end_ps=5&px=100", 400),
        ("api/timeline/tile?track=0&start_ps=0&end_ps=5&px=0", 400),
        ("api/timeline/tile?track=99&start_ps=0&end_ps=5&px=10", 400),
        ("api/timeline/tile?track=0&start_ps=x&end_ps=5&px=10", 400),
        ("api/timeline/tile?track=0", 400),
        ("api/timeline/tiles?tracks=&start_ps=0&end_ps=5&px=10", 400),
        ("api/timeline/tiles?tracks=0,99&start_ps=0&end_ps=5&px=10", 400),
        ("api/timeline/tiles?tracks=0,x&start_ps=0&end_ps=5&px=10", 400),
        ("api/timeline/tiles?tracks=0&start_ps=0&end_ps=5&px=10&rows=0", 400),
        (&too_many, 400),
        ("api/timeline/event?track=0&index=99999999", 404),
        ("api/ops?by=nonsense", 400),
        ("api/summary?top=-1", 400),
        ("api/summary?run=nope", 404),
        ("api/summary?host=nope", 404),
        ("api/nothing", 404),
    ] {
        let r = s.get(path);
        assert_eq!(r.status, status, "{path}: {}", r.text());
        let e = r.json();
        let msg = e["error"].as_str().expect("error message");
        assert!(!msg.is_empty() && !msg.contains('\n'), "{path}: {msg:?}");
    }
    let r = request(s.port, "POST", &format!("/{}/api/runs", s.token));
    assert_eq!(r.status, 405);
}

#[test]
fn nothing_is_reachable_without_the_token() {
    let s = serve(&fixture("cpu-transformer"), &[]);
    let wrong = {
        let mut t = s.token.clone().into_bytes();
        t[0] = if t[0] == b'a' { b'b' } else { b'a' };
        String::from_utf8(t).unwrap()
    };
    // The root (what a browser opens from `--port` alone) says where the pages are,
    // without the token.
    for path in ["/", "/index.html"] {
        let r = request(s.port, "GET", path);
        assert_eq!(r.status, 404, "{path}");
        assert!(r.text().contains("Open the URL that stepscope serve printed"), "{path}: {}", r.text());
        assert!(!r.text().contains(&s.token) && !r.text().contains(&s.token[..8]), "{path}: the token");
    }
    for path in [
        "/api/runs".to_string(),
        "/index".to_string(),
        format!("/{wrong}/"),
        format!("/{wrong}/api/runs"),
        format!("/{}/", &s.token[..31]),
        format!("/{}x/api/runs", s.token),
        format!("/{}/api/runs", s.token.to_uppercase()),
    ] {
        let r = request(s.port, "GET", &path);
        assert_eq!(r.status, 404, "{path}");
        assert_eq!(r.text(), "not found\n", "{path}: a bare 404");
    }
}

#[test]
fn paths_outside_the_root_are_unreachable() {
    let s = serve(&fixture("cpu-transformer"), &[]);
    let secrets = ["[workspace]", "root:x:", "stepscope-xspace", "\"run\":\"plugins"];
    for path in [
        "../Cargo.toml",
        "../../Cargo.toml",
        "%2e%2e/Cargo.toml",
        "%2E%2E%2FCargo.toml",
        "..%2f..%2fCargo.toml",
        "vendor/../../Cargo.toml",
        "vendor/..%2f..%2fCargo.toml",
        "/etc/passwd",
        "%2fetc%2fpasswd",
        "api/../../../etc/passwd",
        "api/%2e%2e/runs",
        "..\\..\\Cargo.toml",
        "web/index.html",
        "crates/server/Cargo.toml",
    ] {
        let r = s.get(path);
        assert_eq!(r.status, 404, "{path}: {}", r.text());
        let body = r.text();
        assert!(!secrets.iter().any(|x| body.contains(x)), "{path} leaked: {body}");
    }
    // Runs are named only as listed: paths in `run` don't resolve.
    for run in [
        "..",
        "../..",
        "%2e%2e",
        "/etc",
        "%2Fetc%2Fpasswd",
        "plugins/profile",
        "plugins/profile/../profile/2026_11_21_22_29_17",
    ] {
        let r = s.get(&format!("api/summary?run={run}"));
        assert_eq!(r.status, 404, "run={run}: {}", r.text());
    }
}

#[test]
fn symlinks_out_of_the_root_are_not_served_and_nothing_is_written() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("logdir");
    let outside = tmp.path().join("elsewhere");
    copy_tree(&fixture("cpu-transformer"), &root);
    copy_tree(&fixture("tpu-v6e-inference"), &outside.join("tpu"));
    std::fs::create_dir_all(root.join("plugins/profile/linked_file")).unwrap();
    #[cfg(unix)]
    {
        std::os::unix::fs::symlink(outside.join("tpu"), root.join("plugins/profile/linked_dir")).unwrap();
        std::os::unix::fs::symlink(
            outside.join("tpu/tpu_inference_2.xplane.pb"),
            root.join("plugins/profile/linked_file/h.xplane.pb"),
        )
        .unwrap();
    }
    // Discovery itself does list the symlinked runs; the server must not.
    let ls = json(&["ls", root.to_str().unwrap()]);
    assert!(ls.to_string().contains("linked_dir"), "discover follows symlinks: {ls}");
    let before = snapshot(&root);
    let s = serve(&root, &[]);
    let runs = s.api("runs");
    let names: Vec<&str> = runs.as_array().unwrap().iter().map(|r| r["run"].as_str().unwrap()).collect();
    assert_eq!(names, vec![CPU_RUN]);
    for run in ["plugins/profile/linked_dir", "plugins/profile/linked_file", "linked_dir"] {
        let r = s.get(&format!("api/summary?run={}", enc(run)));
        assert_eq!(r.status, 404, "{run}: {}", r.text());
    }
    s.api(&format!("timeline/tracks?run={}", enc(CPU_RUN)));
    s.api("summary");
    drop(s);
    assert_eq!(snapshot(&root), before, "serve wrote into the served folder");
}

#[test]
fn a_single_file_is_served() {
    let f = fixture("tpu-v6e-inference/tpu_inference_2.xplane.pb");
    let s = serve(&f, &[]);
    let runs = s.api("runs");
    assert_eq!(runs[0]["run"], "tpu_inference_2.xplane.pb");
    assert_eq!(s.api("summary"), json(&["summary", f.to_str().unwrap()]));
}

#[test]
fn non_loopback_host_warns_with_a_tunnel_line() {
    // `--bind` (`--host`, its older name, still works): the URL printed opens on this
    // machine, and one more line gives it for other machines.
    for flag in ["--bind", "--host"] {
        warns_with_a_tunnel_line(flag);
    }
}

fn warns_with_a_tunnel_line(flag: &str) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_stepscope"))
        .args(["serve"])
        .arg(fixture("cpu-transformer"))
        .args(["--port", "0", "--no-open", flag, "0.0.0.0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert!(line.starts_with("stepscope: serving http://127.0.0.1:"), "{line}");
    let url = line.trim_end().strip_prefix("stepscope: serving ").unwrap().to_string();
    let port = url.rsplit(':').next().unwrap().split('/').next().unwrap().to_string();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let (mut w1, mut w2, mut w3) = (String::new(), String::new(), String::new());
    err.read_line(&mut w1).unwrap();
    err.read_line(&mut w2).unwrap();
    err.read_line(&mut w3).unwrap();
    // The URL printed answers.
    let token_path = url.split_once(&format!(":{port}")).unwrap().1.to_string();
    let reply = request(port.parse().unwrap(), "GET", &format!("{token_path}api/runs"));
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(reply.status, 200, "{}", reply.text());
    assert!(w1.starts_with("stepscope: warning:"), "{w1}");
    assert!(w2.trim().starts_with(&format!("ssh -L {port}:127.0.0.1:{port} ")), "{w2}");
    assert!(w3.starts_with("stepscope: from other machines: http://") && w3.trim_end().ends_with(&token_path), "{w3}");
}

#[test]
fn bad_roots_and_busy_ports_are_clean_errors() {
    assert_clean_error(&["serve", "/nonexistent/logdir", "--no-open"]);
    let s = serve(&fixture("cpu-transformer"), &[]);
    let port = s.port.to_string();
    let err =
        assert_clean_error(&["serve", fixture("cpu-transformer").to_str().unwrap(), "--no-open", "--port", &port]);
    assert!(err.contains("--port"), "{err}");
}

#[test]
fn memory_devices_collectives_compile_advise_and_hlo_answer_with_the_cli_json() {
    for name in ["rocm-mi300x-gemm", "tpu-v6e-inference", "cpu-compile"] {
        let dir = fixture(name);
        let d = dir.to_str().unwrap();
        let s = serve(&dir, &[]);
        let m = s.api("memory");
        assert_eq!(m, json(&["memory", d]), "{name}");
        assert_eq!(s.api("memory?top=3"), json(&["memory", d, "--top", "3"]), "{name}");
        assert_eq!(s.api("memory?top=all"), json(&["memory", d, "--top", "1000000000"]), "{name}");
        if name == "cpu-compile" {
            // XLA:CPU records no allocator events; the run's pprof is summarised.
            assert!(m["allocators"].as_array().unwrap().is_empty());
            assert!(m["device_memory_profile"]["total_bytes"].as_i64().unwrap() > 0, "{m}");
            assert_eq!(s.api("compile"), json(&["compile", d]));
            assert!(!s.api("compile")["compiles"].as_array().unwrap().is_empty());
        } else {
            assert!(!m["allocators"].as_array().unwrap().is_empty(), "{name}: {m}");
        }
    }
    let dp4 = fixture("cpu-dp4");
    let d = dp4.to_str().unwrap();
    let s = serve(&dp4, &[]);
    let dev = s.api("devices");
    assert_eq!(dev, json(&["devices", d]));
    assert_eq!(dev["all"]["device_count"], 4, "{dev}");
    let c = s.api("collectives");
    assert_eq!(c, json(&["collectives", d]));
    assert!(!c["ops"].as_array().unwrap().is_empty(), "{c}");
    assert_eq!(s.api("collectives?top=1"), json(&["collectives", d, "--top", "1"]));

    let tiny = fixture("cpu-tiny-ops");
    let t = tiny.to_str().unwrap();
    let s = serve(&tiny, &[]);
    let a = s.api("advise");
    assert_eq!(a, json(&["advise", t]));
    assert!(!a["findings"].as_array().unwrap().is_empty(), "the tiny-ops capture trips a rule: {a}");
    // HLO of the top op, with and without its module.
    let ops = s.api("ops");
    let (op, module) = (ops["ops"][0]["name"].as_str().unwrap(), ops["ops"][0]["module"].as_str().unwrap());
    let h = s.api(&format!("hlo?op={op}"));
    assert_eq!(h, json(&["hlo", t, op]));
    assert_eq!(h["instruction"]["name"], op);
    assert_eq!(s.api(&format!("hlo?op={op}&module={module}")), json(&["hlo", t, op, "--module", module]));
    let r = s.get("api/hlo?op=no.such.op");
    assert_eq!(r.status, 404, "{}", r.text());
    assert!(r.json()["error"].as_str().unwrap().contains("no.such.op"));
}

/// `api/memory/buffers` and `api/hlo/graph` answer what `buffers --json` and `hlo
/// --graph --json` print, for the same parameters; what is not there is a 404 that
/// says what is.
#[test]
fn buffers_and_hlo_graph_routes_equal_the_cli() {
    let dir = fixture("gpu-transformer");
    let d = dir.to_str().unwrap();
    let s = serve(&dir, &[]);
    assert_eq!(s.api("memory/buffers"), json(&["buffers", d]));
    let b = s.api("memory/buffers?top=all&program=jit_stage");
    assert_eq!(b, json(&["buffers", d, "--top", "all", "--program", "jit_stage"]));
    assert!(b["program"].as_str().unwrap().starts_with("jit_stage("), "{b}");
    let r = s.get("api/memory/buffers?program=jit_nothing");
    assert_eq!(r.status, 404, "{}", r.text());
    assert!(r.json()["error"].as_str().unwrap().contains("jit_train_step"));
    for depth in ["1", "2", "4"] {
        let g = s.api(&format!("hlo/graph?op=gemm_fusion_dot.8&depth={depth}"));
        assert_eq!(g, json(&["hlo", d, "gemm_fusion_dot.8", "--graph", "--depth", depth]), "depth {depth}");
    }
    assert_eq!(s.api("hlo/graph?op=gemm_fusion_dot.8")["depth"], 2);
    let r = s.get("api/hlo/graph?op=no.such.op");
    assert_eq!(r.status, 404, "{}", r.text());
    assert_eq!(s.get("api/hlo/graph").status, 400);
}

#[test]
fn memory_live_replays_the_allocator_to_the_chosen_time() {
    for name in ["rocm-mi300x-gemm", "tpu-v6e-inference"] {
        let s = serve(&fixture(name), &[]);
        let m = s.api("memory?top=all");
        for a in m["allocators"].as_array().unwrap() {
            let q = |t: i64| {
                s.api(&format!(
                    "memory/live?allocator_host={}&allocator={}&time_ps={t}&top=all",
                    a["host"].as_str().unwrap(),
                    a["name"].as_str().unwrap()
                ))
            };
            let timeline = a["timeline"].as_array().unwrap();
            let times: Vec<i64> = timeline.iter().map(|p| p["time_ps"].as_i64().unwrap()).collect();
            // At the peak: the peak's state and the live list `api/memory` shows there
            // (when no other event shares the peak's timestamp).
            let peak_t = a["peak_time_ps"].as_i64().unwrap();
            let live = q(peak_t);
            assert_eq!(live["schema"], "stepscope.memory_live/1");
            if times.iter().filter(|&&t| t == peak_t).count() == 1 {
                assert_eq!(live["in_use_bytes"], a["peak_in_use_bytes"], "{name} {}", a["name"]);
                assert_eq!(live["live"], a["live_at_peak"], "{name} {}", a["name"]);
                assert_eq!(live["untracked_bytes"], a["untracked_at_peak_bytes"]);
            }
            // Before the first event nothing is live; after the last, the last state.
            let before = q(times[0] - 1);
            assert_eq!(before["event_time_ps"], Value::Null);
            assert_eq!((before["in_use_bytes"].as_u64(), before["live_count"].as_u64()), (Some(0), Some(0)));
            let after = q(times[times.len() - 1] + 1);
            assert_eq!(after["in_use_bytes"], a["last_in_use_bytes"]);
            // In between (when the timeline keeps every event): the timeline's step value.
            if timeline.len() < 1000 && timeline.len() > 2 {
                let mid = timeline.len() / 2;
                let t = times[mid];
                let expect = timeline.iter().rev().find(|p| p["time_ps"].as_i64().unwrap() <= t).unwrap();
                let l = q(t);
                assert_eq!(l["in_use_bytes"], expect["in_use_bytes"], "{name} at {t}");
                assert_eq!(l["event_time_ps"], t);
                let listed: u64 = l["live"].as_array().unwrap().iter().map(|x| x["bytes"].as_u64().unwrap()).sum();
                assert_eq!(l["live"].as_array().unwrap().len() as u64, l["live_count"].as_u64().unwrap());
                assert_eq!(listed + l["untracked_bytes"].as_u64().unwrap(), l["in_use_bytes"].as_u64().unwrap());
            }
        }
    }
    let s = serve(&fixture("rocm-mi300x-gemm"), &[]);
    for (path, status) in [
        ("api/memory/live?time_ps=0", 400),
        ("api/memory/live?allocator=nope&time_ps=0", 404),
        ("api/memory/live?allocator=nope&time_ps=x", 400),
        ("api/hlo", 400),
        ("api/diff?a=x", 400),
    ] {
        let r = s.get(path);
        assert_eq!(r.status, status, "{path}: {}", r.text());
        assert!(!r.json()["error"].as_str().unwrap().contains('\n'));
    }
}

#[test]
fn diff_of_two_served_runs_answers_with_the_cli_json() {
    let s = serve(&fixture(""), &[]);
    let runs = s.api("runs");
    let named = |prefix: &str| {
        runs.as_array()
            .unwrap()
            .iter()
            .map(|r| r["run"].as_str().unwrap().to_string())
            .find(|r| r.starts_with(prefix))
            .unwrap_or_else(|| panic!("no run under {prefix} in {runs}"))
    };
    let (a, b) = (named("cpu-clean/"), named("cpu-slow/"));
    let mut d = s.api(&format!("diff?a={}&b={}", enc(&a), enc(&b)));
    assert_eq!(d["a"]["run"], a.as_str());
    assert_eq!(d["b"]["run"], b.as_str());
    let cli = json(&["diff", fixture("cpu-clean").to_str().unwrap(), fixture("cpu-slow").to_str().unwrap()]);
    // The CLI names each run relative to the path it was given; the rest is equal.
    d["a"]["run"] = cli["a"]["run"].clone();
    d["b"]["run"] = cli["b"]["run"].clone();
    assert_eq!(d, cli);
    assert!(cli["step_time"]["delta_ps"].as_i64().unwrap() > 0, "cpu-slow is slower: {}", cli["step_time"]);
    assert!(!cli["ops"].as_array().unwrap().is_empty());
    let r = s.get(&format!("api/diff?a={}&b=nope", enc(&a)));
    assert_eq!(r.status, 404, "{}", r.text());
    // `whatif=EDIT`: A replayed with it beside B as measured, as `diff --whatif`.
    let (a, b) = (named("cpu-callback/"), named("cpu-callback-fixed/"));
    let d = s.api(&format!("diff?a={}&b={}&whatif={}", enc(&a), enc(&b), "--remove%20callbacks"));
    let (fa, fb) = (fixture("cpu-callback"), fixture("cpu-callback-fixed"));
    let cli = json(&["diff", fa.to_str().unwrap(), fb.to_str().unwrap(), "--whatif", "--remove callbacks"]);
    assert!(cli["whatif"]["projected_gain_pct"].as_f64().unwrap() > 30.0, "{}", cli["whatif"]);
    assert_eq!(d["whatif"], cli["whatif"]);
    let r = s.get(&format!("api/diff?a={}&b={}&whatif={}", enc(&a), enc(&b), "--scale%20x.9%3D0"));
    assert!(r.status == 404 && r.text().contains("x.9") && r.text().contains("ran in run a"), "{}", r.text());
    let r = s.get(&format!("api/diff?a={}&b={}&whatif={}", enc(&a), enc(&b), "--faster"));
    assert_eq!(r.status, 400, "{}", r.text());
}

/// `stepscope info --json`'s event count of a profile.
fn events_total(path: &Path) -> u64 {
    json(&["info", path.to_str().expect("utf-8 path")])["events_total"].as_u64().expect("events_total")
}

#[test]
fn export_downloads_equal_the_cli_export_and_nothing_is_written_into_the_root() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("logdir");
    copy_tree(&fixture("cpu-transformer"), &root);
    // A second run with two hosts (the same real capture under two names), for `host=`.
    let two = root.join("plugins/profile/2026_01_01_00_00_00");
    std::fs::create_dir_all(&two).unwrap();
    let src = root.join(CPU_RUN).join("vm.xplane.pb");
    std::fs::copy(&src, two.join("a.xplane.pb")).unwrap();
    std::fs::copy(&src, two.join("b.xplane.pb")).unwrap();
    let out = tmp.path().join("out");
    std::fs::create_dir_all(&out).unwrap();
    let before = snapshot(&root);
    let s = serve(&root, &[]);

    // Perfetto: the same bytes as `stepscope export --format perfetto`.
    let r = s.get(&format!("api/export?run={}&format=perfetto", enc(CPU_RUN)));
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.header("content-type"), Some("application/octet-stream"));
    assert_eq!(r.header("content-disposition"), Some("attachment; filename=\"2026_11_21_22_29_17.pftrace\""));
    assert_eq!(r.header("cache-control"), Some("no-store"));
    assert_eq!(r.header("content-length"), Some(r.body.len().to_string().as_str()));
    let cli = out.join("cli.pftrace");
    let run_dir = root.join(CPU_RUN);
    ok(&["export", run_dir.to_str().unwrap(), "--format", "perfetto", "-o", cli.to_str().unwrap()]);
    let want = std::fs::read(&cli).unwrap();
    assert!(want.len() > 100_000, "a real trace: {} bytes", want.len());
    assert!(r.body == want, "download ({} bytes) differs from the CLI export ({} bytes)", r.body.len(), want.len());
    assert_eq!(r.header("content-encoding"), None);
    // To a client that accepts gzip (a browser), the same trace gzip-compressed for the
    // transfer, its compressed length said before it starts.
    let path = format!("/{}/api/export?run={}&format=perfetto", s.token, enc(CPU_RUN));
    let r = request_with(s.port, "GET", &path, "Accept-Encoding: gzip, deflate, br\r\n");
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.header("content-encoding"), Some("gzip"));
    assert_eq!(r.header("content-length"), Some(r.body.len().to_string().as_str()));
    let mut unzipped = Vec::new();
    flate2::read::GzDecoder::new(&r.body[..]).read_to_end(&mut unzipped).unwrap();
    assert!(unzipped == want, "the gzip download holds {} bytes, not the trace's {}", unzipped.len(), want.len());
    assert!(r.body.len() * 2 < want.len(), "{} bytes compressed of {}", r.body.len(), want.len());
    let r = request_with(s.port, "GET", &path, "Accept-Encoding: gzip;q=0, br\r\n");
    assert_eq!(r.header("content-encoding"), None);
    assert!(r.body == want);

    // Chrome JSON (gzip): read back by `stepscope info`, every source event is there.
    let r = s.get(&format!("api/export?run={}&format=chrome", enc(CPU_RUN)));
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.header("content-type"), Some("application/gzip"));
    assert_eq!(r.header("content-disposition"), Some("attachment; filename=\"2026_11_21_22_29_17.trace.json.gz\""));
    assert_eq!(&r.body[..2], &[0x1f, 0x8b], "not gzip");
    let dl = out.join("dl.trace.json.gz");
    std::fs::write(&dl, &r.body).unwrap();
    let source_events = events_total(&src);
    assert_eq!(source_events, 8320);
    assert_eq!(events_total(&dl), source_events);

    // host=: one host of a two-host run, as `stepscope export --host`.
    let r = s.get("api/export?run=plugins%2Fprofile%2F2026_01_01_00_00_00&host=b&format=perfetto");
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.header("content-disposition"), Some("attachment; filename=\"2026_01_01_00_00_00-b.pftrace\""));
    let cli_b = out.join("b.pftrace");
    ok(&["export", two.to_str().unwrap(), "--host", "b", "--format", "perfetto", "-o", cli_b.to_str().unwrap()]);
    assert!(r.body == std::fs::read(&cli_b).unwrap(), "host=b download differs from export --host b");
    let r = s.get("api/export?run=plugins%2Fprofile%2F2026_01_01_00_00_00&format=chrome");
    assert_eq!(r.status, 200, "{}", r.text());
    std::fs::write(&dl, &r.body).unwrap();
    assert_eq!(events_total(&dl), 2 * source_events);

    // Bad requests: one-line JSON errors.
    for (q, status) in [
        ("format=csv", 400),
        ("format=", 400),
        ("", 400),
        ("format=perfetto&run=nope", 404),
        ("format=chrome&host=nope", 404),
        ("format=perfetto&run=..%2F..", 404),
    ] {
        let r = s.get(&format!("api/export?{q}"));
        assert_eq!(r.status, status, "{q}: {}", r.text());
        assert!(r.json()["error"].as_str().is_some_and(|m| !m.is_empty() && !m.contains('\n')), "{q}");
    }
    assert_eq!(request(s.port, "GET", "/0123456789abcdef0123456789abcdef/api/export?format=perfetto").status, 404);
    drop(s);
    assert_eq!(snapshot(&root), before, "serve wrote into the served folder");
}

#[test]
fn a_kernel_flows_from_its_host_launch_by_correlation_id() {
    let dir = fixture("gpu-nocb");
    let s = serve(&dir, &[]);
    let tracks = s.api("timeline/tracks");
    let list = tracks["tracks"].as_array().unwrap();
    let stream = list
        .iter()
        .find(|t| t["plane"] == "/device:GPU:0" && t["line"].as_str().unwrap().starts_with("Stream #14"))
        .unwrap();
    // A kernel in the middle of the capture, its correlation id as the reference reader reads it.
    let file = &crate::util::xplane("gpu-nocb");
    let line = stream["line"].as_str().unwrap();
    let kernels =
        crate::util::reference_lines(&["dump", file, "--plane", "/device:GPU:0", "--line", line, "--limit", "1000000"]);
    let at = kernels.len() / 2;
    let corr = kernels[at]["stats"]["correlation_id"].as_u64().expect("kernels carry correlation_id");
    let d = s.api(&format!("timeline/event?track={}&index={at}", stream["id"]));
    assert_eq!(d["start_ps"], kernels[at]["start_ps"]);
    // Its launch: every host event with that id, as the reference reader finds them.
    let mut want: Vec<(i64, i64)> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for t in list.iter().filter(|t| t["plane"] == "/host:CPU") {
        let name = t["line"].as_str().unwrap();
        if !seen.insert(name.to_string()) {
            continue;
        }
        for e in
            crate::util::reference_lines(&["dump", file, "--plane", "/host:CPU", "--line", name, "--limit", "10000000"])
        {
            if e["stats"]["correlation_id"].as_u64() == Some(corr) {
                want.push((e["start_ps"].as_i64().unwrap(), e["duration_ps"].as_i64().unwrap()));
            }
        }
    }
    let flows = d["flows"].as_array().unwrap();
    let mut got: Vec<(i64, i64)> = flows
        .iter()
        .filter(|f| f["direction"] == "in")
        .map(|f| (f["start_ps"].as_i64().unwrap(), f["duration_ps"].as_i64().unwrap()))
        .collect();
    want.sort();
    got.sort();
    assert!(!want.is_empty());
    assert_eq!(got, want, "{d}");
    // And the launch flows out to the kernel.
    let launch = flows.iter().find(|f| f["direction"] == "in").unwrap();
    let l = s.api(&format!("timeline/event?track={}&index={}", launch["track"], launch["index"]));
    assert!(
        l["flows"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["direction"] == "out" && f["track"] == stream["id"] && f["index"] == at as u64),
        "{l}"
    );
}

#[test]
fn an_area_selection_counts_every_event_inside_once() {
    // A step's span over every track of the CPU capture: the events overlapping it, by
    // the reference reader's own walk of each line, are the selection's, each once.
    let dir = fixture("cpu-transformer");
    let file = &crate::util::xplane("cpu-transformer");
    let s = serve(&dir, &[]);
    let steps = s.api("steps");
    let step = &steps["steps"][1];
    let (a, b) = (
        step["start_ps"].as_i64().unwrap(),
        step["start_ps"].as_i64().unwrap() + step["duration_ps"].as_i64().unwrap(),
    );
    let tracks = s.api("timeline/tracks");
    let list = tracks["tracks"].as_array().unwrap();
    let mut want_events = 0u64;
    let mut want_in_span = 0i64;
    let mut want_by_name: std::collections::BTreeMap<String, u64> = Default::default();
    let mut seen = std::collections::HashSet::new();
    for t in list {
        let (plane, line) = (t["plane"].as_str().unwrap(), t["line"].as_str().unwrap());
        if !seen.insert((plane.to_string(), line.to_string())) {
            continue;
        }
        for e in crate::util::reference_lines(&["dump", file, "--plane", plane, "--line", line, "--limit", "100000000"])
        {
            let (s0, d) = (e["start_ps"].as_i64().unwrap(), e["duration_ps"].as_i64().unwrap().max(0));
            if s0 < b && (s0 + d > a || (d == 0 && s0 >= a)) {
                want_events += 1;
                want_in_span += (s0 + d).min(b) - s0.max(a);
                *want_by_name.entry(e["name"].as_str().unwrap().to_string()).or_default() += 1;
            }
        }
    }
    let sel = s.api(&format!("timeline/select?start_ps={a}&end_ps={b}"));
    assert_eq!(sel["schema"], "stepscope.timeline_select/1");
    assert_eq!(sel["tracks"].as_array().unwrap().len(), list.len());
    assert!(want_events > 1000, "{want_events}");
    assert_eq!(sel["events"].as_u64(), Some(want_events));
    let rows = sel["rows"].as_array().unwrap();
    assert_eq!(rows.iter().map(|r| r["in_span_ps"].as_i64().unwrap()).sum::<i64>(), want_in_span);
    let got: std::collections::BTreeMap<String, u64> =
        rows.iter().map(|r| (r["name"].as_str().unwrap().to_string(), r["count"].as_u64().unwrap())).collect();
    assert_eq!(got, want_by_name);
    // One track alone, and two: the events of those tracks only.
    let one = s.api(&format!("timeline/select?start_ps={a}&end_ps={b}&tracks=1"));
    let two = s.api(&format!("timeline/select?start_ps={a}&end_ps={b}&tracks=1,2,1"));
    let other = s.api(&format!("timeline/select?start_ps={a}&end_ps={b}&tracks=2"));
    assert_eq!(two["events"].as_u64().unwrap(), one["events"].as_u64().unwrap() + other["events"].as_u64().unwrap());
    // Bad spans and tracks: one-line errors.
    for q in [
        format!("start_ps={b}&end_ps={a}"),
        format!("start_ps={a}&end_ps={b}&tracks=99999"),
        format!("start_ps={a}&end_ps={b}&tracks=x"),
    ] {
        let r = s.get(&format!("api/timeline/select?{q}"));
        assert_eq!(r.status, 400, "{q}: {}", r.text());
    }
}

#[test]
fn an_event_counts_every_occurrence_of_its_name() {
    // dot.27 on the CPU capture: every event of that name on any line, as the
    // reference reader walks them.
    let dir = fixture("cpu-transformer");
    let file = &crate::util::xplane("cpu-transformer");
    let s = serve(&dir, &[]);
    let m = &s.api("timeline/search?q=dot.27&limit=1")["matches"][0];
    let d = s.api(&format!("timeline/event?track={}&index={}", m["track"], m["index"]));
    let name = d["name"].as_str().unwrap().to_string();
    let tracks = s.api("timeline/tracks");
    let (mut count, mut total, mut min, mut max) = (0u64, 0i64, i64::MAX, 0i64);
    let mut seen = std::collections::HashSet::new();
    for t in tracks["tracks"].as_array().unwrap() {
        let (plane, line) = (t["plane"].as_str().unwrap(), t["line"].as_str().unwrap());
        if !seen.insert((plane.to_string(), line.to_string())) {
            continue;
        }
        for e in crate::util::reference_lines(&["dump", file, "--plane", plane, "--line", line, "--limit", "100000000"])
        {
            if e["name"] == name.as_str() {
                let dur = e["duration_ps"].as_i64().unwrap().max(0);
                count += 1;
                total += dur;
                min = min.min(dur);
                max = max.max(dur);
            }
        }
    }
    let o = &d["occurrences"];
    assert!(count > 1);
    assert_eq!((o["count"].as_u64(), o["total_ps"].as_i64()), (Some(count), Some(total)), "{o}");
    assert_eq!((o["min_ps"].as_i64(), o["max_ps"].as_i64()), (Some(min), Some(max)));
    assert_eq!(o["avg_ps"].as_i64(), Some(total / count as i64));
}

#[test]
fn tracks_have_a_kind_and_the_derived_tracks_are_listed() {
    let dir = fixture("gpu-nocb");
    let s = serve(&dir, &[]);
    let t = s.api("timeline/tracks");
    assert!(t["tracks"].as_array().unwrap().iter().all(|t| t["kind"] == "slices"));
    let derived = t["derived"].as_array().unwrap();
    // A Steps track for the host with steps, and a counter for each allocator whose
    // bytes in use change, as `stepscope memory` reports them.
    assert_eq!(
        derived.iter().filter(|d| d["kind"] == "steps").map(|d| d["host"].as_str().unwrap()).collect::<Vec<_>>(),
        ["vm"]
    );
    let mem = json(&["memory", dir.to_str().unwrap(), "--top", "1"]);
    let want: Vec<String> = mem["allocators"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["timeline"].as_array().unwrap().len() > 1)
        .map(|a| format!("{} in use", a["name"].as_str().unwrap()))
        .collect();
    assert!(!want.is_empty());
    let got: Vec<String> = (derived.iter())
        .filter(|d| d["kind"] == "counter" && d["source"] == "api/memory")
        .map(|d| d["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(got, want);
}

/// A GPU's `XLA Modules` and `XLA Ops` tracks are derived from its kernels as the op
/// profile credits them: on each fixture, the boxes of each op on `XLA Ops` are the
/// op's executions in `stepscope ops` (a command buffer's kernels under their own
/// instructions), and `XLA Modules` has one box of the step's module per step.
#[test]
fn gpu_timelines_derive_xla_modules_and_ops_lines_from_the_op_profile() {
    for name in ["gpu-nocb", "gpu-transformer"] {
        let dir = fixture(name);
        let d = dir.to_str().unwrap();
        let s = serve(&dir, &[]);
        let t = s.api("timeline/tracks");
        let list = t["tracks"].as_array().unwrap();
        let on_gpu: Vec<&Value> = list.iter().filter(|t| t["plane"] == "/device:GPU:0").collect();
        let lines: Vec<&str> = on_gpu.iter().map(|t| t["line"].as_str().unwrap()).collect();
        assert_eq!(&lines[..2], ["XLA Modules", "XLA Ops"], "{name}: derived lines first");
        // Then the framework's (a_gpus_framework_lines_name_each_op_by_its_jax_primitive).
        let derived = on_gpu.iter().take_while(|t| t["derived"] == true).count();
        assert!(derived >= 2 && on_gpu[derived..].iter().all(|t| t["derived"] == false), "{name}: {lines:?}");
        // The run's own events are counted once: derived ones are not added.
        let own: u64 = list.iter().filter(|t| t["derived"] == false).map(|t| t["events"].as_u64().unwrap()).sum();
        assert_eq!(t["events"].as_u64(), Some(own));
        let span = |t: &Value| format!("start_ps={}&end_ps={}", t["start_ps"], t["end_ps"].as_i64().unwrap() + 1);
        let ops_track = on_gpu[1];
        let sel = s.api(&format!("timeline/select?{}&tracks={}", span(ops_track), ops_track["id"]));
        let got: BTreeMap<String, u64> = sel["rows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| (r["name"].as_str().unwrap().to_string(), r["count"].as_u64().unwrap()))
            .collect();
        let mut want: BTreeMap<String, u64> = BTreeMap::new();
        for op in json(&["ops", d, "--top", "0"])["ops"].as_array().unwrap() {
            *want.entry(op["name"].as_str().unwrap().to_string()).or_default() += op["executions"].as_u64().unwrap();
        }
        assert_eq!(got, want, "{name}: XLA Ops boxes by name = the op profile's executions");
        assert!(!got.keys().any(|k| k.starts_with("command_buffer")), "{name}: kernels credited to instructions");
        // An op's box names its module (its HLO link) and how many kernels it holds.
        // (The first boxes may be copies of no module.)
        let stat = |list: &Value, n: &str| {
            list.as_array().unwrap().iter().find(|s| s["name"] == n).map(|s| s["value"].clone())
        };
        let first = (0..50)
            .map(|i| s.api(&format!("timeline/event?track={}&index={i}", ops_track["id"])))
            .find(|e| stat(&e["metadata_stats"], "hlo_module").is_some())
            .expect("an op box with its module among the first 50");
        assert!(stat(&first["stats"], "kernels").and_then(|v| v.as_str()?.parse::<u64>().ok()).is_some_and(|k| k >= 1));
        // The module with the most time has one box per step; the boxes hold every
        // kernel the steps launched (they span at least that much time).
        let steps = s.api("steps");
        let steps = steps["steps"].as_array().unwrap();
        let modules_track = on_gpu[0];
        let sel = s.api(&format!("timeline/select?{}&tracks={}", span(modules_track), modules_track["id"]));
        let row = &sel["rows"][0];
        assert!(row["name"].as_str().unwrap().starts_with("jit_train"), "{name}: {sel}");
        assert_eq!(row["count"].as_u64(), Some(steps.len() as u64), "{name}: a box per step: {sel}");
        let launched: i64 = steps.iter().map(|s| s["device_work_ps"].as_i64().unwrap()).sum();
        let boxed: i64 = sel["rows"].as_array().unwrap().iter().map(|r| r["total_ps"].as_i64().unwrap()).sum();
        assert!(boxed >= launched, "{name}: {boxed} ps of boxes vs {launched} ps launched");
        // A selection over every track leaves the derived ones out: each event once.
        let all =
            s.api(&format!("timeline/select?start_ps={}&end_ps={}", t["start_ps"], t["end_ps"].as_i64().unwrap() + 1));
        assert_eq!(all["events"], t["events"], "{name}");
    }
}

/// Each device's busy-share counter (`api/timeline/busy`) over a step gives the step's
/// device busy time of `stepscope steps` (the mean over the host's devices), and its
/// pixel columns add up to the whole window's share.
#[test]
fn busy_counters_equal_the_steps_device_busy_time() {
    for name in ["gpu-nocb", "tpu-v6e-inference"] {
        let dir = fixture(name);
        let s = serve(&dir, &[]);
        let t = s.api("timeline/tracks");
        let busy: Vec<&Value> =
            t["derived"].as_array().unwrap().iter().filter(|d| d["source"] == "api/timeline/busy").collect();
        let devices = json(&["devices", dir.to_str().unwrap()]);
        assert_eq!(busy.len(), devices["devices"].as_array().unwrap().len(), "{name}: a counter per device");
        let steps = s.api("steps");
        for st in steps["steps"].as_array().unwrap().iter().take(3) {
            let (a, d) = (st["start_ps"].as_i64().unwrap(), st["duration_ps"].as_i64().unwrap());
            let share = |dev: &Value, px: u32| -> f64 {
                let r = s.api(&format!(
                    "timeline/busy?device={}&start_ps={a}&end_ps={}&px={px}",
                    dev["device"].as_str().unwrap().replace(':', "%3A").replace('/', "%2F"),
                    a + d
                ));
                assert_eq!(r["busy_pct"].as_array().unwrap().len(), px as usize);
                let pct: Vec<f64> = r["busy_pct"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
                assert!(pct.iter().all(|&p| (0.0..=100.0).contains(&p)));
                pct.iter().sum::<f64>() / px as f64
            };
            let whole: f64 = busy.iter().map(|dev| share(dev, 1)).sum::<f64>() / busy.len() as f64;
            let want = st["device_busy_ps"].as_f64().unwrap() / d as f64 * 100.0;
            assert!((whole - want).abs() < 1e-6, "{name} step {}: {whole} vs {want}", st["step_num"]);
            // 1,000 columns of (nearly) equal width: their mean is the whole's share.
            let columns: f64 = busy.iter().map(|dev| share(dev, 1000)).sum::<f64>() / busy.len() as f64;
            assert!((columns - want).abs() < 0.01, "{name}: {columns} vs {want}");
        }
    }
    let s = serve(&fixture("gpu-nocb"), &[]);
    let r = s.get("api/timeline/busy?device=nope&start_ps=0&end_ps=10&px=10");
    assert_eq!(r.status, 400);
    assert!(r.json()["error"].as_str().unwrap().contains("pick one of: vm/device:GPU:0"), "{}", r.text());
}

/// Under `STEPSCOPE_MEMORY_LIMIT`, a run that fits alone but not beside the runs kept
/// is served after they are dropped (not refused), and one that fits nowhere is a 507
/// that names the limit, but for its summary, steps, ops and devices, read a host at a
/// time as the CLI reads them:
/// two runs of 40 hosts (copies of the CPU transformer's file, about 45 MB to read each,
/// 185 MB held once summarised) under a limit of 100 MB, then of 30 MB.
#[test]
fn a_large_run_drops_the_runs_kept_before_it_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let runs = ["2026_01_01_00_00_00", "2026_01_02_00_00_00"];
    let names: Vec<String> = (0..40).map(|h| format!("h{h}")).collect();
    let hosts: Vec<(&str, &str)> = names.iter().map(|h| (h.as_str(), "cpu-transformer")).collect();
    for run in runs {
        crate::util::run_of_fixtures(tmp.path(), run, &hosts);
    }
    let server = serve_with(tmp.path(), &[], &[("STEPSCOPE_MEMORY_LIMIT", "100MB")]);
    let summary = |run: &str| server.get(&format!("api/summary?run=plugins/profile/{run}"));
    for run in [runs[0], runs[1], runs[0]] {
        let r = summary(run);
        assert_eq!(r.status, 200, "{run}: {}", r.text());
        assert_eq!(r.json()["environment"]["hosts"].as_array().unwrap().len(), 40);
    }
    drop(server);
    let server = serve_with(tmp.path(), &[], &[("STEPSCOPE_MEMORY_LIMIT", "30MB")]);
    let r = server.get(&format!("api/export?format=chrome&run=plugins/profile/{}", runs[0]));
    assert_eq!(r.status, 507, "{}", r.text());
    let why = r.json()["error"].as_str().unwrap().to_string();
    assert!(
        why.starts_with("reading the run's 40 hosts together needs about 45 MB, and STEPSCOPE_MEMORY_LIMIT is 30 MB"),
        "{why}"
    );
    // The summary is read a host at a time, as the CLI's, and kept; one host answers.
    let r = server.get(&format!("api/summary?run=plugins/profile/{}", runs[0]));
    assert_eq!(r.status, 200, "{}", r.text());
    let dir = tmp.path().to_str().unwrap();
    let cli = crate::util::json(&["summary", dir, "--run", runs[0], "--host-at-a-time"]);
    assert_eq!(r.json(), cli);
    assert_eq!(r.json()["read_a_host_at_a_time"], true);
    assert!(!r.json()["findings"].as_array().unwrap().is_empty());
    assert_eq!(server.get(&format!("api/summary?run=plugins/profile/{}", runs[0])).json(), cli);
    // So are its findings, steps, op profile and devices.
    for (route, args) in [
        ("advise", &["advise"][..]),
        ("steps", &["steps", "--critical-path"]),
        ("ops&by=module&top=5", &["ops", "--by", "module", "--top", "5"]),
        ("devices", &["devices"]),
        ("collectives&top=2", &["collectives", "--top", "2"]),
        ("scopes", &["scopes"]),
        ("compile", &["compile"]),
        ("kernels", &["kernels"]),
        ("roofline&top=3", &["roofline", "--top", "3"]),
        ("memory", &["memory"]),
        ("memory/buffers&top=3", &["buffers", "--top", "3"]),
        ("hlo&op=dot.31", &["hlo", "dot.31"]),
        ("hlo/graph&op=ynn_fusion.47", &["hlo", "ynn_fusion.47", "--graph"]),
    ] {
        let (route, query) = route.split_once('&').unwrap_or((route, ""));
        let r = server.get(&format!("api/{route}?run=plugins/profile/{}&{query}", runs[0]));
        assert_eq!(r.status, 200, "{route}: {}", r.text());
        let cli = crate::util::json(&[&[args[0], dir, "--run", runs[0], "--host-at-a-time"][..], &args[1..]].concat());
        assert_eq!(r.json(), cli, "{route}");
    }
    let r = server.get(&format!("api/summary?run=plugins/profile/{}&host=h3", runs[0]));
    assert_eq!(r.status, 200, "{}", r.text());
    // A diff of the two runs, and their history, read a host at a time as the CLI's.
    let (a, b) = (format!("plugins/profile/{}", runs[0]), format!("plugins/profile/{}", runs[1]));
    let r = server.get(&format!("api/diff?a={a}&b={b}&top=0"));
    assert_eq!(r.status, 200, "{}", r.text());
    let (run_a, run_b) = (tmp.path().join(&a), tmp.path().join(&b));
    let (run_a, run_b) = (run_a.to_str().unwrap(), run_b.to_str().unwrap());
    // (The CLI names a run folder's run by the folder.)
    let mut cli = crate::util::json(&["diff", run_a, run_b, "--top", "0", "--host-at-a-time"]);
    (cli["a"]["run"], cli["b"]["run"]) = (a.clone().into(), b.clone().into());
    assert_eq!(r.json(), cli);
    let r = server.get("api/history");
    assert_eq!(r.status, 200, "{}", r.text());
    let mut cli = crate::util::json(&["history", dir, "--host-at-a-time"]);
    for (run, rel) in cli["runs"].as_array_mut().unwrap().iter_mut().zip([&a, &b]) {
        run["label"] = rel.clone().into();
    }
    assert_eq!(r.json(), cli);
    assert_eq!(r.json()["runs"].as_array().unwrap().len(), 2);
}

/// `api/summary/hosts` is made once per run as its files are: asked again, the same
/// answer; once the server sees the run changed (its listing is at most 5 s old), the
/// new files' summaries. A host not read (its file cut short) is read again on the next
/// request, once whole.
#[test]
fn the_hosts_summaries_are_kept_until_the_run_changes() {
    let tmp = tempfile::tempdir().unwrap();
    let run = crate::util::run_of_fixtures(tmp.path(), "2026_11_01_00_00_00", &crate::util::THREE_CPU_HOSTS);
    let dir = tmp.path().to_str().unwrap();
    let server = serve(tmp.path(), &[]);
    let first = server.api("summary/hosts");
    assert_eq!(server.api("summary/hosts"), first);
    assert_eq!(first, json(&["summary", dir, "--per-host"]));
    // c replaced by another capture (a new file, as a capture writes one), b cut short.
    let c = run.join("c.xplane.pb");
    std::fs::remove_file(&c).unwrap();
    std::fs::copy(crate::util::xplane("cpu-slow"), &c).unwrap();
    let whole = std::fs::read(run.join("b.xplane.pb")).unwrap();
    std::fs::write(run.join("b.xplane.pb"), &whole[..whole.len() / 3]).unwrap();
    std::thread::sleep(Duration::from_millis(5200));
    let now = server.api("summary/hosts");
    assert_eq!(now["hosts_unread"][0]["host"], "b", "{now}");
    assert_eq!(now, json(&["summary", dir, "--per-host"]));
    assert_eq!(now["hosts"][1]["host"], "c");
    assert_eq!(
        now["hosts"][1]["summary"]["step_count"],
        json(&["summary", &crate::util::xplane("cpu-slow")])["step_count"]
    );
    // b whole again: read on the next request.
    std::fs::write(run.join("b.xplane.pb"), &whole).unwrap();
    let again = server.api("summary/hosts");
    assert!(again.get("hosts_unread").is_none(), "{again}");
    assert_eq!(again["hosts"].as_array().unwrap().len(), 3);
    assert_eq!(again["hosts"][1]["summary"], json(&["summary", dir, "--host", "b"]));
}

/// `api/history` is made once for the runs as their files are: asked again, the same
/// answer, the CLI's; once the server sees a run changed (its listing is at most 5 s
/// old), the history of the new files.
#[test]
fn the_history_is_kept_until_a_run_changes() {
    let tmp = tempfile::tempdir().unwrap();
    crate::util::run_of_fixtures(tmp.path(), "2026_11_01_00_00_00", &[("a", "cpu-clean"), ("b", "cpu-clean")]);
    let later =
        crate::util::run_of_fixtures(tmp.path(), "2026_11_02_00_00_00", &[("a", "cpu-clean"), ("b", "cpu-clean")]);
    let dir = tmp.path().to_str().unwrap();
    let server = serve(tmp.path(), &[]);
    // The CLI labels a run by its path, the server by its name.
    let cli = || {
        let text = json(&["history", dir]).to_string().replace(&format!("{dir}/"), "");
        serde_json::from_str::<serde_json::Value>(&text).unwrap()
    };
    let first = server.api("history");
    assert_eq!(server.api("history"), first);
    assert_eq!(first, cli());
    // The later run's hosts replaced by a slower capture (new files, as a capture writes).
    for host in ["a", "b"] {
        let f = later.join(format!("{host}.xplane.pb"));
        std::fs::remove_file(&f).unwrap();
        std::fs::copy(crate::util::xplane("cpu-slow"), &f).unwrap();
    }
    std::thread::sleep(Duration::from_millis(5200));
    let now = server.api("history");
    assert_ne!(now, first);
    assert_eq!(now, cli());
}

/// The timeline of a run too large to read whole (40 hosts under a 30 MB limit) is
/// read a host at a time: its tracks are listed from every host, each read alone and
/// dropped, and a request reads the hosts of the tracks it names. Every answer is the
/// run read whole's (a server with no limit), but an event's occurrences, which are its
/// host's: tracks, tiles of tracks of several hosts, busy shares, events with their
/// steps and flows, areas and searches. The hosts are read under the run's decisions:
/// the unannotated GPU host's events are in no step, as in the run (alone, its module
/// executions are its steps).
#[test]
fn a_pods_timeline_reads_its_hosts_one_at_a_time_with_the_answers_of_the_run_read_whole() {
    let tmp = tempfile::tempdir().unwrap();
    let mut hosts = vec![("g0", "gpu-unannotated"), ("g1", "gpu-nosync"), ("g2", "gpu-sync")];
    let names: Vec<String> = (3..40).map(|h| format!("h{h}")).collect();
    hosts.extend(names.iter().map(|h| (h.as_str(), "cpu-transformer")));
    let run = "2026_11_27_00_00_00";
    crate::util::run_of_fixtures(tmp.path(), run, &hosts);
    // The reference: the run read together, as one profile.
    let whole = serve_with(tmp.path(), &[], &[("STEPSCOPE_MEMORY_LIMIT", "none"), ("STEPSCOPE_READ_TOGETHER", "1")]);
    let pod = serve_with(tmp.path(), &[], &[("STEPSCOPE_MEMORY_LIMIT", "30MB")]);
    assert_eq!(pod.get("api/export?format=chrome").status, 507, "the run is too large to read whole");
    let both = |route: &str| {
        let (w, p) = (whole.api(route), pod.api(route));
        assert_eq!(p, w, "{route}");
        p
    };
    let mut tracks = pod.api("timeline/tracks");
    assert_eq!(tracks["read_a_host_at_a_time"], true);
    tracks.as_object_mut().unwrap().remove("read_a_host_at_a_time");
    assert_eq!(tracks, whole.api("timeline/tracks"));
    let list = tracks["tracks"].as_array().unwrap();
    let (start, end) = (tracks["start_ps"].as_i64().unwrap(), tracks["end_ps"].as_i64().unwrap());
    let of_host = |h: &str| list.iter().filter(|t| t["host"] == h).collect::<Vec<_>>();
    assert!(of_host("g0").iter().any(|t| t["derived"] == true), "the GPU's derived lines are listed");
    // Every track of the GPU hosts, and the first of each CPU host, tile by tile.
    let firsts: Vec<&Value> = hosts.iter().map(|(h, _)| of_host(h)[0]).collect();
    let gpus: Vec<&Value> = list.iter().filter(|t| t["host"].as_str().unwrap().starts_with('g')).collect();
    for t in gpus.iter().chain(&firsts) {
        both(&format!("timeline/tile?track={}&start_ps={start}&end_ps={end}&px=300", t["id"]));
    }
    let ids = |ts: &[&Value]| ts.iter().map(|t| t["id"].to_string()).collect::<Vec<_>>().join(",");
    let mixed = ids(&[firsts[5], gpus[3], firsts[0], firsts[39], gpus[0]]);
    both(&format!("timeline/tiles?tracks={mixed}&start_ps={start}&end_ps={end}&px=200&rows=3"));
    let mid = start + (end - start) / 3;
    for busy in tracks["derived"].as_array().unwrap().iter().filter(|d| d["source"] == "api/timeline/busy") {
        let device = busy["device"].as_str().unwrap();
        both(&format!("timeline/busy?device={}&start_ps={start}&end_ps={mid}&px=100", enc(device)));
    }
    // Events: the run's but for their occurrences, which are the host's (as the host
    // read alone counts them).
    let mut in_no_step = 0;
    for t in gpus.iter().chain(&firsts[3..6]) {
        let n = t["events"].as_u64().unwrap();
        for index in [0, n / 2, n - 1] {
            let route = format!("timeline/event?track={}&index={index}", t["id"]);
            let (w, mut p) = (whole.api(&route), pod.api(&route));
            let host = t["host"].as_str().unwrap();
            assert_eq!(p["occurrences"]["host"], host, "{route}");
            let occurrences = p["occurrences"].as_object_mut().unwrap().remove("host");
            assert!(occurrences.is_some());
            let (mut w_rest, mut p_rest) = (w.clone(), p.clone());
            w_rest.as_object_mut().unwrap().remove("occurrences");
            p_rest.as_object_mut().unwrap().remove("occurrences");
            assert_eq!(p_rest, w_rest, "{route}");
            let first = of_host(host)[0]["id"].as_u64().unwrap();
            let local = t["id"].as_u64().unwrap() - first;
            let alone = whole.api(&format!("timeline/event?track={local}&index={index}&host={host}"));
            if t["derived"] == false {
                assert_eq!(p["occurrences"], alone["occurrences"], "{route}");
            }
            if host == "g0" && alone["step_num"] != p["step_num"] {
                in_no_step += 1;
            }
        }
    }
    assert!(in_no_step > 0, "the unannotated host's events take the run's steps (none), not its own");
    let e = pod.get(&format!("api/timeline/event?track={}&index=99999999", firsts[1]["id"]));
    assert_eq!(e.status, 404);
    assert_eq!(e.text(), whole.get(&format!("api/timeline/event?track={}&index=99999999", firsts[1]["id"])).text());
    // Areas: on tracks of several hosts, and on every track.
    let area = ids(&[gpus[1], firsts[4], firsts[20], gpus[5]]);
    let picked = both(&format!("timeline/select?start_ps={start}&end_ps={mid}&tracks={area}"));
    assert!(picked["events"].as_u64().unwrap() > 0);
    let all = both(&format!("timeline/select?start_ps={mid}&end_ps={end}"));
    assert!(all["rows"].as_array().unwrap().len() > 10);
    // Searches: the first matches in track order, and pages in time order.
    for query in ["q=fusion&limit=7", "q=DOT&limit=10000", "q=fusion&offset=0&limit=50", "q=fusion&offset=123&limit=9"]
    {
        let found = both(&format!("timeline/search?{query}"));
        assert!(found["total"].as_u64().unwrap() > 200, "{query}: {found}");
    }
    both("timeline/search?q=fusion&offset=99999999&limit=5");
    // An allocator's live allocations at its peak: its host's, read alone.
    let memory = both("memory");
    let a = &memory["allocators"][0];
    let (host, name, t) = (a["host"].as_str().unwrap(), a["name"].as_str().unwrap(), &a["peak_time_ps"]);
    let live = both(&format!("memory/live?allocator_host={host}&allocator={name}&time_ps={t}"));
    assert!(live["live_count"].as_u64().unwrap() > 0, "{live}");
    assert_eq!(pod.get(&format!("api/memory/live?allocator={name}&time_ps={t}")).status, 400);
    for bad in
        ["timeline/tile?track=99999&start_ps=0&end_ps=10&px=10", "timeline/tiles?tracks=&start_ps=0&end_ps=10&px=1"]
    {
        let (w, p) = (whole.get(&format!("api/{bad}")), pod.get(&format!("api/{bad}")));
        assert_eq!((p.status, p.text()), (w.status, w.text()), "{bad}");
    }
}
