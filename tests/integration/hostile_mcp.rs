//! `stepscope mcp` against a hostile client and a hostile folder (#74 item 3): links
//! inside a root that lead out of it, a 1 GiB request line, messages that are not
//! requests, a cancelled call, and arguments that look like flags.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::util::*;

struct Mcp {
    child: Child,
    stdin: Option<ChildStdin>,
    answers: Receiver<Value>,
}

impl Mcp {
    fn start(roots: &[&Path], cwd: &Path) -> Mcp {
        let mut child = Command::new(env!("CARGO_BIN_EXE_stepscope"))
            .arg("mcp")
            .args(roots)
            .current_dir(cwd)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, answers) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                if tx.send(serde_json::from_str::<Value>(&line).unwrap()).is_err() {
                    return;
                }
            }
        });
        let stdin = child.stdin.take();
        let mut m = Mcp { child, stdin, answers };
        m.send(
            &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-06-18"}}),
        );
        assert_eq!(m.next()["id"], 0);
        m
    }

    fn send(&mut self, msg: &Value) {
        let w = self.stdin.as_mut().unwrap();
        writeln!(w, "{msg}").unwrap();
        w.flush().unwrap();
    }

    fn next(&self) -> Value {
        self.answers.recv_timeout(Duration::from_secs(120)).expect("an answer")
    }

    /// A tool's answer: (is it an error, its text).
    fn call(&mut self, id: u64, tool: &str, args: Value) -> (bool, String) {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                          "params": {"name": tool, "arguments": args}}));
        let a = self.next();
        assert_eq!(a["id"], id, "{a}");
        (a["result"]["isError"].as_bool().unwrap(), a["result"]["content"][0]["text"].as_str().unwrap().to_string())
    }

    /// The server's peak resident memory so far.
    fn peak_rss_bytes(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
        line.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap() * 1024
    }
}

impl Drop for Mcp {
    fn drop(&mut self) {
        drop(self.stdin.take());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn copy(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_dir() {
            copy(&e.path(), &to.join(e.file_name()));
        } else {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

#[test]
fn links_inside_a_root_never_lead_a_tool_outside_it() {
    use std::os::unix::fs::symlink;
    let tmp = tempfile::tempdir().unwrap();
    let (root, outside) = (tmp.path().join("root"), tmp.path().join("outside"));
    // Inside: one real run. Outside: a log directory of another program.
    copy(&fixture("cpu-clean"), &root.join("mine"));
    copy(&fixture("cpu-matmul"), &outside);
    let outside_run = std::fs::read_dir(outside.join("plugins/profile")).unwrap().next().unwrap().unwrap().path();
    let outside_host = std::fs::read_dir(&outside_run)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with(".xplane.pb"))
        .unwrap();
    // A folder link, a run link, and a host-file link planted in a run of the root.
    symlink(&outside, root.join("folder-link")).unwrap();
    std::fs::create_dir_all(root.join("runs/plugins/profile")).unwrap();
    symlink(&outside_run, root.join("runs/plugins/profile/2026_01_01_00_00_00")).unwrap();
    std::fs::create_dir_all(root.join("file/plugins/profile/2026_01_02_00_00_00")).unwrap();
    symlink(&outside_host, root.join("file/plugins/profile/2026_01_02_00_00_00/evil.xplane.pb")).unwrap();

    let mut mcp = Mcp::start(&[&root], tmp.path());
    let s = |p: &Path| p.to_str().unwrap().to_string();
    // The whole root: only the run really in it.
    let (err, text) = mcp.call(1, "list_runs", json!({"path": s(&root)}));
    assert!(!err, "{text}");
    let listed: Value = serde_json::from_str(&text).unwrap();
    let runs = listed["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 1, "{text}");
    assert!(runs[0]["path"].as_str().unwrap().contains("/mine/"), "{text}");
    assert_eq!(runs[0]["hosts"], json!(["vm"]), "{text}");
    // Each link named directly, by every tool that takes paths: refused.
    let links = [root.join("folder-link"), root.join("runs"), root.join("file")];
    for (i, link) in links.iter().enumerate() {
        let id = 10 + 10 * i as u64;
        for (k, (tool, args)) in [
            ("summary", json!({"path": s(link)})),
            ("list_runs", json!({"path": s(link)})),
            ("sql", json!({"query": "SELECT count(*) AS n FROM steps", "paths": [s(link)]})),
            ("history", json!({"logdirs": [s(link)]})),
            ("compare", json!({"runs": [s(&root.join("mine")), s(link)]})),
            ("diff", json!({"a": s(&root.join("mine")), "b": s(link)})),
        ]
        .into_iter()
        .enumerate()
        {
            let (err, text) = mcp.call(id + k as u64, tool, args);
            let listed_nothing = tool == "list_runs"
                && serde_json::from_str::<Value>(&text)
                    .is_ok_and(|v| v["runs"].as_array().is_some_and(|r| r.is_empty()));
            assert!(err || listed_nothing, "{tool} over {}: {text}", link.display());
            assert!(!text.contains("jit_matmul") && !text.contains("dot"), "{tool}: read the outside run: {text}");
        }
    }
}

#[test]
fn a_huge_line_is_refused_without_being_held_and_the_next_message_is_answered() {
    let tmp = tempfile::tempdir().unwrap();
    let mut mcp = Mcp::start(&[tmp.path()], tmp.path());
    let chunk = vec![b'a'; 1 << 20];
    {
        let w = mcp.stdin.as_mut().unwrap();
        w.write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":\"").unwrap();
        for _ in 0..1024 {
            w.write_all(&chunk).unwrap();
        }
        w.write_all(b"\"}\n").unwrap();
    }
    let refused = mcp.next();
    assert_eq!(refused["error"]["code"], -32600, "{refused}");
    mcp.send(&json!({"jsonrpc": "2.0", "id": 2, "method": "ping"}));
    assert_eq!(mcp.next()["id"], 2);
    let peak = mcp.peak_rss_bytes();
    assert!(peak < 64 << 20, "a 1 GiB line took the server to {} MiB", peak >> 20);
}

#[test]
fn messages_that_are_not_requests_get_json_rpc_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let mut mcp = Mcp::start(&[tmp.path()], tmp.path());
    for (msg, code) in
        [(json!({}), -32600), (json!([]), -32600), (json!(7), -32600), (json!({"id": [1], "method": "ping"}), -32600)]
    {
        mcp.send(&msg);
        let a = mcp.next();
        assert_eq!(a["error"]["code"], code, "{msg}: {a}");
        assert_eq!(a["id"], Value::Null);
    }
    let w = mcp.stdin.as_mut().unwrap();
    w.write_all(b"{not json\n").unwrap();
    w.flush().unwrap();
    assert_eq!(mcp.next()["error"]["code"], -32700);
}

#[test]
fn a_cancelled_call_stops_and_is_not_answered() {
    let tmp = tempfile::tempdir().unwrap();
    let run = tmp.path().join("run");
    copy(&fixture("cpu-clean"), &run);
    let mut mcp = Mcp::start(&[tmp.path()], tmp.path());
    // A query that would run for minutes.
    let forever = "WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c) SELECT count(*) FROM c, steps";
    mcp.send(&json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                     "params": {"name": "sql", "arguments": {"query": forever, "paths": [run.to_str().unwrap()]}}}));
    std::thread::sleep(Duration::from_millis(1500));
    let start = Instant::now();
    mcp.send(&json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7}}));
    mcp.send(&json!({"jsonrpc": "2.0", "id": 8, "method": "ping"}));
    let a = mcp.next();
    assert_eq!(a["id"], 8, "the cancelled call was answered: {a}");
    assert!(start.elapsed() < Duration::from_secs(10), "cancelling took {:?}", start.elapsed());
}

/// `diff`'s `whatif` argument, a change in `stepscope whatif`'s words (which start with
/// `--`), is passed as the flag's value: the answer is the CLI's `diff --whatif`.
#[test]
fn diff_takes_a_whatif_as_the_cli_does() {
    let tmp = tempfile::tempdir().unwrap();
    copy(&fixture("cpu-callback"), &tmp.path().join("a"));
    copy(&fixture("cpu-callback-fixed"), &tmp.path().join("b"));
    let mut mcp = Mcp::start(&[tmp.path()], tmp.path());
    let (err, text) = mcp.call(1, "diff", json!({"a": "a", "b": "b", "whatif": "--remove callbacks"}));
    assert!(!err, "{text}");
    let got: Value = serde_json::from_str(&text).unwrap();
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    let cli = json(&["diff", a.to_str().unwrap(), b.to_str().unwrap(), "--whatif", "--remove callbacks"]);
    assert_eq!(got["whatif"], cli["whatif"]);
    assert_eq!(got["whatif"]["edit"], "--remove callbacks");
}

#[test]
fn an_argument_is_never_taken_for_a_flag() {
    let tmp = tempfile::tempdir().unwrap();
    // A run folder named like a flag, named relative to the server's folder.
    copy(&fixture("cpu-clean"), &tmp.path().join("-h"));
    let mut mcp = Mcp::start(&[tmp.path()], tmp.path());
    let (err, text) = mcp.call(1, "summary", json!({"path": "-h"}));
    assert!(!err, "{text}");
    let v: Value = serde_json::from_str(&text).unwrap_or_else(|_| panic!("not the summary's JSON: {text}"));
    assert_eq!(v["schema"].as_str().map(|s| s.starts_with("stepscope.summary")), Some(true), "{text}");
    // A run's name that starts with `-` is a name.
    let (err, text) = mcp.call(2, "steps", json!({"path": "-h", "run": "--help"}));
    assert!(err && text.contains("no run named \"--help\""), "{text}");
}

#[test]
fn mutated_json_rpc_lines_never_end_the_server() {
    use crate::robustness::Rng;
    let tmp = tempfile::tempdir().unwrap();
    let mut mcp = Mcp::start(&[tmp.path()], tmp.path());
    let bases = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}),
        json!({"jsonrpc": "2.0", "id": "a", "method": "tools/list"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "initialize", "params": {"protocolVersion": "2025-06-18"}}),
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
               "params": {"name": "summary", "arguments": {"path": "nowhere", "top": 5}}}),
        json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
               "params": {"name": "sql", "arguments": {"query": "SELECT 1", "paths": ["nowhere"]}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 3}}),
    ];
    let odd = [
        json!(null),
        json!(true),
        json!(-1),
        json!(1e308),
        json!(u64::MAX),
        json!("x".repeat(100_000)),
        json!([]),
        json!({}),
        json!("--help"),
        json!(["--output", "/etc/passwd"]),
    ];
    let mut rng = Rng(0x6d6370);
    let mut lines: Vec<String> = Vec::new();
    for base in &bases {
        // Each value (at any depth) swapped for each odd one.
        let mut paths = Vec::new();
        fn walk(v: &Value, at: String, out: &mut Vec<String>) {
            out.push(at.clone());
            match v {
                Value::Object(m) => m.iter().for_each(|(k, v)| walk(v, format!("{at}/{k}"), out)),
                Value::Array(a) => a.iter().enumerate().for_each(|(i, v)| walk(v, format!("{at}/{i}"), out)),
                _ => {}
            }
        }
        walk(base, String::new(), &mut paths);
        for p in &paths {
            for o in &odd {
                let mut m = base.clone();
                match m.pointer_mut(p) {
                    Some(slot) => *slot = o.clone(),
                    None => continue,
                }
                lines.push(m.to_string());
            }
        }
        // Bytes flipped and lines cut.
        let text = base.to_string();
        for _ in 0..40 {
            let mut b = text.clone().into_bytes();
            for _ in 0..1 + rng.below(3) {
                let at = rng.below(b.len());
                b[at] ^= 1 << rng.below(7);
            }
            lines.push(String::from_utf8_lossy(&b).replace('\n', " "));
            lines.push(text[..rng.below(text.len())].to_string());
        }
    }
    // Nesting deeper than any parser's stack.
    lines.push(format!("{}1{}", "[".repeat(100_000), "]".repeat(100_000)));
    lines.push(format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"ping\",\"params\":{}{}}}",
        "{\"a\":".repeat(50_000),
        "}".repeat(50_000)
    ));
    let n = lines.len();
    assert!(n > 500, "{n} lines");
    {
        let w = mcp.stdin.as_mut().unwrap();
        for l in &lines {
            writeln!(w, "{l}").unwrap();
        }
        writeln!(w, "{}", json!({"jsonrpc": "2.0", "id": "last", "method": "ping"})).unwrap();
        w.flush().unwrap();
    }
    // Every answer is one JSON-RPC message; the last ping is answered.
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut answers = 0;
    loop {
        let a = mcp
            .answers
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            .expect("the last ping's answer");
        assert_eq!(a["jsonrpc"], "2.0", "{a}");
        answers += 1;
        if a["id"] == "last" {
            break;
        }
    }
    assert!(mcp.child.try_wait().unwrap().is_none(), "the server ended");
    let peak = mcp.peak_rss_bytes();
    eprintln!("mcp: {n} mutated lines, {answers} answers, peak {} MiB", peak >> 20);
    assert!(peak < 128 << 20, "{} MiB", peak >> 20);
}
