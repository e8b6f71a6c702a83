//! `stepscope mcp`: a Model Context Protocol server over stdio, so that coding agents
//! can read profiles. Each tool is one read-only stepscope command with `--json`,
//! answered with exactly the JSON the command prints: the server runs the command as a
//! child process of this same program, so a tool's answer is the CLI's by
//! construction, a profile that breaks an analysis ends that call alone, and a call
//! that runs too long is stopped. Paths are confined to the roots given on the command
//! line; answers are bounded, with a note where one was cut.
//!
//! The transport is MCP's stdio one: JSON-RPC 2.0 messages, one a line, on stdin and
//! stdout; nothing else is written to stdout.

use std::io::{BufRead, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use clap::Args;
use serde_json::{json, Value};

#[derive(Args, Debug)]
pub struct McpArgs {
    /// Folders the tools may read profiles under (default: the current folder); a path
    /// outside them is refused.
    #[arg(value_name = "ROOT")]
    pub roots: Vec<PathBuf>,
    /// The longest one tool call may run, seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 300)]
    pub timeout: u64,
    /// The most bytes of one answer; a longer one is cut, with a note saying so.
    #[arg(long, value_name = "BYTES", default_value_t = 512 * 1024)]
    pub max_answer_bytes: usize,
}

/// The protocol versions this server speaks, newest first.
const VERSIONS: &[&str] = &["2025-06-18", "2025-03-26", "2024-11-05"];

/// The longest request line read, bytes.
const MAX_REQUEST_BYTES: usize = 1024 * 1024;

/// How to read a profile, for the agent (the user guides' checklist).
const INSTRUCTIONS: &str = "stepscope reads JAX/XLA profiles (log directories of jax.profiler captures). \
Read a run in this order: list_runs (which runs there are), summary (step time, the breakdown of an average \
step, the top findings), steps (each step; where the loop dispatches ahead, steps are timed on the device), \
ops (the op profile: by op, category, module, scope or Python line), memory (allocator peaks), kernels (GPU \
kernels, occupancy), then advise (every finding with its evidence, advice and the gain projected for \
fixing it; whatif projects any other change). hlo shows one op's HLO and source line; timeline lists the events of a time window (a step's start_ps to its end); diff and compare \
set runs side by side; sql answers any other question with one query over the same numbers as tables. Times are picoseconds (_ps), sizes bytes (_bytes).";

/// One tool: its name, what it does, its parameters (name, JSON type, description,
/// required) and the command line it runs (given the tool's name: an analysis tool is
/// named after its command).
struct Tool {
    name: &'static str,
    description: &'static str,
    params: &'static [(&'static str, &'static str, &'static str, bool)],
    args: fn(&str, &Value) -> Result<Vec<String>, String>,
}

const PATH: (&str, &str, &str, bool) =
    ("path", "string", "a log directory (any depth), a run folder or a profile file, under the server's roots", true);
const RUN: (&str, &str, &str, bool) =
    ("run", "string", "the run to read where PATH holds several (default: newest)", false);
const TOP: (&str, &str, &str, bool) = ("top", "integer", "at most this many rows (default 20; 0: all)", false);

const TOOLS: &[Tool] = &[
    Tool {
        name: "list_runs",
        description: "The runs under a log directory: when captured, hosts, size, steps.",
        params: &[PATH],
        args: |_, a| Ok(vec!["ls".into(), text(a, "path")?, "--json".into()]),
    },
    Tool {
        name: "summary",
        description: "A run's overview: step time, the breakdown of an average step, utilisation, memory peak, \
                      top ops and top findings (stepscope summary --json); with per_host, each host's own summary \
                      and the hosts' spread, one host in memory at a time, for pods (summary --per-host --json). \
                      A run too large to read whole is read a host at a time: the run's numbers, no findings.",
        params: &[
            PATH,
            RUN,
            TOP,
            ("per_host", "boolean", "a summary per host, each host read alone, and the slowest host", false),
        ],
        args: |_, a| {
            let mut v = analysis("summary", a)?;
            match a.get("per_host") {
                None | Some(Value::Null) | Some(Value::Bool(false)) => {}
                Some(Value::Bool(true)) => v.push("--per-host".into()),
                Some(other) => return Err(format!("per_host: give true or false, not {other}")),
            }
            Ok(v)
        },
    },
    Tool {
        name: "steps",
        description: "Every step: its time (on the device where the loop dispatches ahead), device busy, idle, \
                      compile, FLOPs (stepscope steps --json).",
        params: &[PATH, RUN, TOP],
        args: analysis,
    },
    Tool {
        name: "ops",
        description: "The op profile, largest self time first (stepscope ops --json).",
        params: &[
            PATH,
            RUN,
            TOP,
            ("by", "string", "op (default), category, module, scope, line or stack", false),
            ("min_self", "string", "only rows with at least this self time, e.g. 50ms", false),
        ],
        args: |name, a| {
            let mut v = analysis(name, a)?;
            pass(&mut v, a, "by", "--by")?;
            pass(&mut v, a, "min_self", "--min-self")?;
            Ok(v)
        },
    },
    Tool {
        name: "kernels",
        description: "GPU kernels: time, grid, block, registers, occupancy, tensor cores (stepscope kernels --json).",
        params: &[PATH, RUN, TOP],
        args: analysis,
    },
    Tool {
        name: "memory",
        description: "Allocators' peaks against capacity and what is live at the peak (stepscope memory --json).",
        params: &[PATH, RUN, TOP],
        args: analysis,
    },
    Tool {
        name: "buffers",
        description: "One program's memory as XLA planned it: allocations by kind, the peak over program order and \
                      the buffers live at it, each with its HLO instruction, shape and source line (stepscope \
                      buffers --json).",
        params: &[
            PATH,
            RUN,
            TOP,
            ("program", "string", "the program, e.g. jit_train_step (default: the one that ran longest)", false),
        ],
        args: |_, a| {
            let mut v = analysis("buffers", a)?;
            pass(&mut v, a, "program", "--program")?;
            Ok(v)
        },
    },
    Tool {
        name: "collectives",
        description: "Collectives by kind: time, bytes, exposed time (stepscope collectives --json).",
        params: &[PATH, RUN, TOP],
        args: analysis,
    },
    Tool {
        name: "devices",
        description: "Each device: busy, idle, compute, the devices left out (stepscope devices --json).",
        params: &[PATH, RUN, TOP],
        args: analysis,
    },
    Tool {
        name: "scopes",
        description: "The user's host scopes (profile_scope, TraceAnnotation) with the device work they launched \
                      (stepscope scopes --json).",
        params: &[PATH, RUN, TOP],
        args: analysis,
    },
    Tool {
        name: "roofline",
        description: "Each op's FLOP/s and bytes/s against the devices' roofs (stepscope roofline --json).",
        params: &[PATH, RUN, TOP],
        args: analysis,
    },
    Tool {
        name: "advise",
        description: "Every finding: rule, measured value, threshold, evidence, advice; and the capture's health \
                      (whether it can be trusted, and for what: read it first) (stepscope advise --json).",
        params: &[PATH, RUN],
        args: |_, a| {
            let mut v = vec!["advise".into(), text(a, "path")?, "--json".into()];
            pass(&mut v, a, "run", "--run")?;
            Ok(v)
        },
    },
    Tool {
        name: "whatif",
        description: "What a change would gain: the steps replayed with it, the projected step and its parts \
                      beside the measured ones (stepscope whatif --json). A finding's gain_edit is such a change.",
        params: &[
            PATH,
            RUN,
            (
                "edit",
                "string",
                "the change, as stepscope whatif's flags: --remove compile|callbacks|input, --prefetch \
                 copies|input, --scale NAME=FACTOR (an op, ops as one set: dot.3,copy.2, compute/collectives/h2d/d2h/d2d, \
                 category:C, scope:S or module:M), --jit, --balance, --dispatch-ahead",
                true,
            ),
        ],
        args: |_, a| {
            let mut v = vec!["whatif".into(), text(a, "path")?];
            v.extend(text(a, "edit")?.split_whitespace().map(String::from));
            v.push("--json".into());
            pass(&mut v, a, "run", "--run")?;
            Ok(v)
        },
    },
    Tool {
        name: "hlo",
        description: "One op's HLO instruction, operands, fusion body, name stack and Python source line \
                      (stepscope hlo --json).",
        params: &[
            PATH,
            RUN,
            ("op", "string", "the op's name as ops lists it, e.g. fusion.12", true),
            ("module", "string", "only in this module or program, e.g. jit_train_step", false),
        ],
        args: |_, a| {
            let mut v = vec!["hlo".into(), text(a, "path")?, text(a, "op")?, "--json".into()];
            pass(&mut v, a, "run", "--run")?;
            pass(&mut v, a, "module", "--module")?;
            Ok(v)
        },
    },
    Tool {
        name: "hlo_graph",
        description: "One op's neighbourhood in its program: operands and users `depth` levels out and its fusion \
                      body, each instruction with its time and FLOPs (stepscope hlo --graph --json).",
        params: &[
            PATH,
            RUN,
            ("op", "string", "the op's name as ops lists it, e.g. fusion.12", true),
            ("module", "string", "only in this module or program, e.g. jit_train_step", false),
            ("depth", "integer", "levels of operands and of users, 1 to 6 (default 2)", false),
        ],
        args: |_, a| {
            let mut v = vec!["hlo".into(), text(a, "path")?, text(a, "op")?, "--graph".into(), "--json".into()];
            pass(&mut v, a, "run", "--run")?;
            pass(&mut v, a, "module", "--module")?;
            if let Some(d) = a.get("depth").filter(|d| !d.is_null()) {
                let d = d.as_u64().ok_or_else(|| format!("depth: give a whole number, not {d}"))?;
                v.extend(["--depth".into(), d.to_string()]);
            }
            Ok(v)
        },
    },
    Tool {
        name: "timeline",
        description: "The events in a time window, a CSV row each: host, plane, line, name, display name, start_ps, \
                      duration_ps, HLO op and module, TF op, scope, step_num, stats (stepscope export --format csv \
                      --from --to). Times as steps gives start_ps: a number of ps, or with a unit (1.2s, 350us). \
                      Keep windows to a step or less: an answer past the server's limit is cut.",
        params: &[
            PATH,
            RUN,
            ("from", "string", "the window's start: ps (79533000) or with a unit (1.2s, 350us, 79533000ps)", true),
            ("to", "string", "the window's end, likewise", true),
            ("host", "string", "only this host (its file name without .xplane.pb)", false),
        ],
        args: |_, a| {
            let mut v: Vec<String> = vec!["export".into(), text(a, "path")?];
            v.extend(["--format", "csv", "-o", "-"].map(String::from));
            v.extend([format!("--from={}", time(a, "from")?), format!("--to={}", time(a, "to")?)]);
            pass(&mut v, a, "run", "--run")?;
            pass(&mut v, a, "host", "--host")?;
            Ok(v)
        },
    },
    Tool {
        name: "diff",
        description: "What changed from run A to run B: step time, breakdown, ops and kernels by effect \
                      (stepscope diff --json).",
        params: &[
            ("a", "string", "run A: a log directory, run folder or profile file under the roots", true),
            ("b", "string", "run B, likewise", true),
            TOP,
            ("by", "string", "op (default), category, module, scope, line or stack", false),
            (
                "whatif",
                "string",
                "a change in stepscope whatif's words (a finding's gain_edit): A's steps replayed with it, set \
                 beside B as measured (the JSON's whatif)",
                false,
            ),
        ],
        args: |_, a| {
            let mut v = vec!["diff".into(), text(a, "a")?, text(a, "b")?, "--json".into()];
            v.extend(["--top".into(), top(a)?]);
            pass(&mut v, a, "by", "--by")?;
            pass(&mut v, a, "whatif", "--whatif")?;
            Ok(v)
        },
    },
    Tool {
        name: "history",
        description: "Every run under log directories in capture order (step time, utilisation, top ops) and \
                      the first run whose step time, or an op's time a step, moved beyond run-to-run noise \
                      (stepscope history --json).",
        params: &[("logdirs", "array", "one or more log directories (paths under the roots)", true)],
        args: |_, a| {
            let mut v = vec!["history".to_string()];
            v.extend(paths(a, "logdirs", 1)?);
            v.push("--json".into());
            Ok(v)
        },
    },
    Tool {
        name: "sql",
        description:
            "One read-only SQL query (SQLite's SQL: SELECT, or WITH … SELECT) over the profile's tables: runs, \
                      steps, ops, op_events, kernels, collectives, scopes, devices, findings, memory, events, each \
                      with run and host columns; times in ps (stepscope sql --json: columns, rows). \
                      `SELECT name, sql FROM sqlite_schema` lists the tables a query names with their columns. \
                      Aggregate in SQL (GROUP BY, LIMIT): an answer past the server's limit is cut.",
        params: &[
            (
                "query",
                "string",
                "one query, e.g. SELECT module, name, self_ps FROM ops ORDER BY self_ps DESC LIMIT 10",
                true,
            ),
            (
                "paths",
                "array",
                "log directories, run folders, profile files or folders `stepscope tables` wrote, under the roots",
                true,
            ),
            ("run", "string", "only this run of each path (default: every run)", false),
        ],
        args: |_, a| {
            let mut v = vec!["sql".to_string(), "--json".into()];
            pass(&mut v, a, "run", "--run")?;
            // After `--`, a query or path that starts with `-` is not read as a flag.
            v.extend(["--".into(), text(a, "query")?]);
            v.extend(paths(a, "paths", 1)?);
            Ok(v)
        },
    },
    Tool {
        name: "compare",
        description: "Several runs side by side: step time, device count and scaling, breakdown, top ops \
                      (stepscope compare --json).",
        params: &[("runs", "array", "two or more runs (paths under the roots)", true), TOP],
        args: |_, a| {
            let mut v = vec!["compare".to_string()];
            v.extend(paths(a, "runs", 2)?);
            v.extend(["--json".into(), "--top".into(), top(a)?]);
            Ok(v)
        },
    },
];

/// The parameters of a tool that name paths (checked against the roots).
fn path_params(tool: &Tool, args: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for (name, ty, _, _) in tool.params {
        match (*ty, args.get(*name)) {
            ("string", Some(Value::String(s))) if ["path", "a", "b"].contains(name) => out.push(s.clone()),
            ("array", Some(Value::Array(list))) => out.extend(list.iter().filter_map(|v| v.as_str().map(String::from))),
            _ => {}
        }
    }
    out
}

/// The list of paths `key` gives, at least `least` of them.
fn paths(a: &Value, key: &str, least: usize) -> Result<Vec<String>, String> {
    let want = || format!("{key}: give a list of {least} or more paths");
    let list = a.get(key).and_then(Value::as_array).ok_or_else(want)?;
    let paths = (list.iter())
        .map(|p| p.as_str().map(String::from).ok_or_else(|| format!("{key}: each is a path (a string)")))
        .collect::<Result<Vec<_>, _>>()?;
    if paths.len() < least {
        return Err(want());
    }
    Ok(paths)
}

fn text(a: &Value, key: &str) -> Result<String, String> {
    opt_text(a, key)?.ok_or_else(|| format!("{key}: required"))
}

/// Adds `flag=VALUE` to `v` where the arguments give `key` (one word: a value that
/// starts with `-` is the flag's value, never a flag of its own).
fn pass(v: &mut Vec<String>, a: &Value, key: &str, flag: &str) -> Result<(), String> {
    if let Some(value) = opt_text(a, key)? {
        v.push(format!("{flag}={value}"));
    }
    Ok(())
}

fn opt_text(a: &Value, key: &str) -> Result<Option<String>, String> {
    match a.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(v) => Err(format!("{key}: give a string, not {v}")),
    }
}

/// A time argument: a number of picoseconds, or text with its unit.
fn time(a: &Value, key: &str) -> Result<String, String> {
    match a.get(key) {
        Some(Value::Number(n)) => n.as_i64().map(|ps| format!("{ps}ps")).ok_or_else(|| format!("{key}: give whole ps")),
        Some(Value::String(s)) if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) => Ok(format!("{s}ps")),
        _ => text(a, key),
    }
}

fn top(a: &Value) -> Result<String, String> {
    match a.get("top") {
        None | Some(Value::Null) => Ok("20".into()),
        Some(v) => v.as_u64().map(|n| n.to_string()).ok_or_else(|| format!("top: give a whole number, not {v}")),
    }
}

/// An analysis command's line: PATH, `--run`, `--top` and `--json`.
fn analysis(command: &str, a: &Value) -> Result<Vec<String>, String> {
    let mut v = vec![command.to_string(), text(a, "path")?, "--json".into(), "--top".into(), top(a)?];
    pass(&mut v, a, "run", "--run")?;
    Ok(v)
}

/// The server's roots and limits.
struct Server {
    roots: Vec<PathBuf>,
    timeout: Duration,
    max_answer_bytes: usize,
}

pub fn run(args: &McpArgs) -> anyhow::Result<ExitCode> {
    let given = if args.roots.is_empty() { vec![PathBuf::from(".")] } else { args.roots.clone() };
    let mut roots = Vec::new();
    for r in given {
        let canonical = std::fs::canonicalize(&r)
            .map_err(|e| anyhow::anyhow!("root {}: {e} — give folders that exist", r.display()))?;
        if !canonical.is_dir() {
            anyhow::bail!("root {} is not a folder — give the folders the tools may read under", r.display());
        }
        roots.push(canonical);
    }
    let server = Server {
        roots,
        timeout: Duration::from_secs(args.timeout.max(1)),
        max_answer_bytes: args.max_answer_bytes.max(1),
    };
    let (tx, rx) = std::sync::mpsc::channel();
    // Messages are read on a thread of their own, so that a cancellation reaches the
    // call it cancels while that call runs.
    std::thread::spawn(move || read_messages(std::io::stdin().lock(), &tx));
    let mut inbox = Inbox { rx, queue: std::collections::VecDeque::new() };
    let mut out = std::io::stdout().lock();
    loop {
        let answer = match inbox.next() {
            Incoming::End => return Ok(ExitCode::SUCCESS),
            Incoming::Refused(answer) => Some(answer),
            Incoming::Message(msg) => server.handle(&msg, &mut inbox),
        };
        if let Some(a) = answer {
            reply(&mut out, &a)?;
        }
    }
}

/// A line of stdin, as the server takes it.
enum Incoming {
    Message(Value),
    /// A line that is no message: the error to answer it with.
    Refused(Value),
    End,
}

/// Reads stdin's lines into `tx` until it ends. A line over [`MAX_REQUEST_BYTES`] is
/// refused without being held: its bytes past the limit are read and dropped.
fn read_messages(mut input: impl BufRead, tx: &std::sync::mpsc::Sender<Incoming>) {
    let mut line = Vec::new();
    loop {
        line.clear();
        let mut over = false;
        let ended = loop {
            let buf = match input.fill_buf() {
                Ok(b) => b,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => break true,
            };
            if buf.is_empty() {
                break true;
            }
            let (take, done) = match buf.iter().position(|&b| b == b'\n') {
                Some(i) => (i + 1, true),
                None => (buf.len(), false),
            };
            if !over {
                line.extend_from_slice(&buf[..take]);
                if line.len() > MAX_REQUEST_BYTES + 1 {
                    over = true;
                    line.clear();
                }
            }
            input.consume(take);
            if done {
                break false;
            }
        };
        let incoming = if over {
            Some(Incoming::Refused(error(Value::Null, -32600, "a message over 1 MiB: not read")))
        } else {
            let text = String::from_utf8_lossy(&line);
            (!text.trim().is_empty()).then(|| match serde_json::from_str::<Value>(&text) {
                Ok(msg) => Incoming::Message(msg),
                Err(e) => Incoming::Refused(error(Value::Null, -32700, &format!("not JSON: {e}"))),
            })
        };
        if let Some(m) = incoming {
            if tx.send(m).is_err() {
                return;
            }
        }
        if ended {
            let _ = tx.send(Incoming::End);
            return;
        }
    }
}

/// The messages read and not yet handled.
struct Inbox {
    rx: std::sync::mpsc::Receiver<Incoming>,
    /// Messages that came while a call ran, in order.
    queue: std::collections::VecDeque<Incoming>,
}

impl Inbox {
    fn next(&mut self) -> Incoming {
        self.queue.pop_front().unwrap_or_else(|| self.rx.recv().unwrap_or(Incoming::End))
    }

    /// Whether request `id` was cancelled (`notifications/cancelled`, before or while
    /// it runs); the other messages that came meanwhile wait their turn.
    fn cancelled(&mut self, id: &Value) -> bool {
        while let Ok(m) = self.rx.try_recv() {
            self.queue.push_back(m);
        }
        let cancels = |m: &Incoming| {
            matches!(m, Incoming::Message(v) if v.get("method").and_then(Value::as_str) == Some("notifications/cancelled")
                && v.pointer("/params/requestId") == Some(id))
        };
        match self.queue.iter().position(cancels) {
            Some(i) => {
                self.queue.remove(i);
                true
            }
            None => false,
        }
    }
}

fn reply(out: &mut impl Write, msg: &Value) -> std::io::Result<()> {
    serde_json::to_writer(&mut *out, msg)?;
    out.write_all(b"\n")?;
    out.flush()
}

fn error(id: Value, code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

impl Server {
    /// The answer to one message; `None` for a notification, a response, or a call
    /// cancelled before it ended.
    fn handle(&self, msg: &Value, inbox: &mut Inbox) -> Option<Value> {
        let Some(obj) = msg.as_object() else {
            let what = if msg.is_array() { "a batch (this server takes one message a line)" } else { "not an object" };
            return Some(error(Value::Null, -32600, &format!("invalid request: {what}")));
        };
        let id = obj.get("id").cloned();
        if id.as_ref().is_some_and(|i| !(i.is_string() || i.is_number())) {
            return Some(error(Value::Null, -32600, "invalid request: an id is a string or a number"));
        }
        let method = match obj.get("method") {
            Some(Value::String(m)) => m.as_str(),
            // A response to a request of ours: this server makes none.
            None if id.is_some() && (obj.contains_key("result") || obj.contains_key("error")) => return None,
            _ => return Some(error(id.unwrap_or(Value::Null), -32600, "invalid request: no method")),
        };
        // A notification (initialized, cancelled): nothing to answer.
        let id = id?;
        let params = msg.get("params").cloned().unwrap_or(Value::Null);
        let result = match method {
            "initialize" => {
                let asked = params.get("protocolVersion").and_then(Value::as_str).unwrap_or(VERSIONS[0]);
                let version = VERSIONS.iter().find(|v| **v == asked).unwrap_or(&VERSIONS[0]);
                json!({
                    "protocolVersion": version,
                    "capabilities": {"tools": {"listChanged": false}},
                    "serverInfo": {"name": "stepscope", "version": env!("CARGO_PKG_VERSION")},
                    "instructions": INSTRUCTIONS,
                })
            }
            "ping" => json!({}),
            "tools/list" => json!({"tools": TOOLS.iter().map(describe).collect::<Vec<_>>()}),
            "tools/call" => match self.call(&params, &mut || inbox.cancelled(&id)) {
                Ok(Some(result)) => result,
                // Cancelled: no answer, as the protocol asks.
                Ok(None) => return None,
                Err(message) => return Some(error(id, -32602, &message)),
            },
            other => return Some(error(id, -32601, &format!("no method {other:?}"))),
        };
        Some(json!({"jsonrpc": "2.0", "id": id, "result": result}))
    }

    /// A `tools/call`: the tool's answer (`None` where `cancelled` said so while it
    /// ran), or (`Err`) a request that names no tool.
    fn call(&self, params: &Value, cancelled: &mut dyn FnMut() -> bool) -> Result<Option<Value>, String> {
        let name = params.get("name").and_then(Value::as_str).ok_or("tools/call: no tool name")?;
        let tool = TOOLS.iter().find(|t| t.name == name).ok_or_else(|| format!("no tool {name:?}"))?;
        let args = params.get("arguments").cloned().unwrap_or_else(|| json!({}));
        let failed = |text: String| json!({"content": [{"type": "text", "text": text}], "isError": true});
        if !args.is_object() {
            return Ok(Some(failed("arguments: give an object".into())));
        }
        let mut line = match (tool.args)(tool.name, &args) {
            Ok(line) => line,
            Err(e) => return Ok(Some(failed(format!("stepscope: {e}")))),
        };
        // Each path goes to the command as its real, absolute path: under a root, and
        // never taken for a flag (it starts with `/`).
        for p in path_params(tool, &args) {
            match self.allowed(&p) {
                Ok(real) => line.iter_mut().filter(|w| **w == p).for_each(|w| *w = real.clone()),
                Err(e) => return Ok(Some(failed(format!("stepscope: {e}")))),
            }
        }
        Ok(match self.run_command(&line, cancelled) {
            Some(Ok(answer)) => Some(json!({"content": [{"type": "text", "text": answer}], "isError": false})),
            Some(Err(e)) => Some(failed(e)),
            None => None,
        })
    }

    /// `path`'s real path, where it lies under a root (after following links).
    fn allowed(&self, path: &str) -> Result<String, String> {
        if path.contains("://") {
            return Err(format!("{path}: only local paths under the server's roots are read"));
        }
        let canonical = std::fs::canonicalize(path).map_err(|e| format!("{path}: {e}"))?;
        if self.roots.iter().any(|r| canonical.starts_with(r)) {
            canonical.into_os_string().into_string().map_err(|_| format!("{path}: its real path is not UTF-8"))
        } else {
            let roots: Vec<String> = self.roots.iter().map(|r| r.display().to_string()).collect();
            Err(format!(
                "{path} is outside the server's roots ({}): start stepscope mcp with a root above it",
                roots.join(", ")
            ))
        }
    }

    /// Runs this program with `line`: its stdout (cut past `max_answer_bytes`, with a
    /// note), or its error's last line; `None` where `cancelled` says so first (the
    /// command is stopped).
    fn run_command(&self, line: &[String], cancelled: &mut dyn FnMut() -> bool) -> Option<Result<String, String>> {
        let (program, lead) = program();
        // The command reads nothing outside the roots, however a path inside leads out.
        let roots = match std::env::join_paths(&self.roots) {
            Ok(r) => r,
            Err(e) => return Some(Err(format!("stepscope: a root's name: {e}"))),
        };
        let child = Command::new(program)
            .args(lead)
            .args(line)
            .env("COLUMNS", "100")
            .env(stepscope_xspace::files::ROOTS_VAR, roots)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn();
        let mut child = match child {
            Ok(c) => c,
            Err(e) => return Some(Err(format!("stepscope: cannot run itself: {e}"))),
        };
        let (mut stdout, mut stderr) = (child.stdout.take(), child.stderr.take());
        let max = self.max_answer_bytes;
        let reader = std::thread::spawn(move || bounded(stdout.as_mut(), max));
        let errors = std::thread::spawn(move || bounded(stderr.as_mut(), 64 * 1024));
        let deadline = Instant::now() + self.timeout;
        let mut stopped = false;
        let status = loop {
            match child.try_wait() {
                Ok(Some(status)) => break Some(status),
                Ok(None) if Instant::now() < deadline && !cancelled() => std::thread::sleep(Duration::from_millis(20)),
                waiting => {
                    stopped = matches!(waiting, Ok(None)) && Instant::now() < deadline;
                    let _ = child.kill();
                    let _ = child.wait();
                    break None;
                }
            }
        };
        let (answer, total) = reader.join().unwrap_or_default();
        let (err, _) = errors.join().unwrap_or_default();
        if stopped {
            return None;
        }
        Some(run_result(status, line, self.timeout, &answer, &err, total, max))
    }
}

/// A command's answer: its stdout (cut past `max`, with a note), or its error's last
/// line; an error where it ran past `timeout` (`status` None).
fn run_result(
    status: Option<std::process::ExitStatus>,
    line: &[String],
    timeout: Duration,
    answer: &[u8],
    err: &[u8],
    total: usize,
    max: usize,
) -> Result<String, String> {
    let Some(status) = status else {
        return Err(format!(
            "stepscope: {} ran past {} s and was stopped — ask a narrower question (fewer rows, one run), or start \
             stepscope mcp with a longer --timeout",
            line[0],
            timeout.as_secs()
        ));
    };
    if !status.success() {
        let last = String::from_utf8_lossy(err).lines().rev().find(|l| !l.trim().is_empty()).map(String::from);
        return Err(last.unwrap_or_else(|| format!("stepscope {} ended with {status}", line[0])));
    }
    let mut text = String::from_utf8_lossy(answer).into_owned();
    if total > max {
        text.push_str(&format!(
            "\n[stepscope: the answer was cut at {max} of its {total} bytes — ask for fewer rows (top) or a narrower \
             question]"
        ));
    }
    Ok(text)
}

/// Up to `max` bytes of a pipe, read to its end, and how many bytes it held.
fn bounded(pipe: Option<&mut impl Read>, max: usize) -> (Vec<u8>, usize) {
    let Some(pipe) = pipe else { return (Vec::new(), 0) };
    let mut kept = Vec::new();
    let mut total = 0;
    let mut buf = [0u8; 64 * 1024];
    loop {
        match pipe.read(&mut buf) {
            Ok(0) | Err(_) => return (kept, total),
            Ok(n) => {
                total += n;
                let room = max.saturating_sub(kept.len());
                kept.extend_from_slice(&buf[..n.min(room)]);
            }
        }
    }
}

/// This program, to run a tool's command: the `stepscope` binary, or the Python that
/// runs the wheel's (`STEPSCOPE_PYTHON`, set by `python -m stepscope`) with `-m stepscope`.
fn program() -> (PathBuf, Vec<&'static str>) {
    match std::env::var_os("STEPSCOPE_PYTHON") {
        Some(python) if Path::new(&python).is_file() => (PathBuf::from(python), vec!["-m", "stepscope"]),
        _ => (std::env::current_exe().unwrap_or_else(|_| PathBuf::from("stepscope")), Vec::new()),
    }
}

/// A tool as `tools/list` gives it.
fn describe(t: &Tool) -> Value {
    let mut properties = serde_json::Map::new();
    for (name, ty, description, _) in t.params {
        let schema = if *ty == "array" {
            json!({"type": "array", "items": {"type": "string"}, "description": description})
        } else {
            json!({"type": ty, "description": description})
        };
        properties.insert(name.to_string(), schema);
    }
    let required: Vec<&str> = t.params.iter().filter(|p| p.3).map(|p| p.0).collect();
    json!({
        "name": t.name,
        "description": t.description,
        "inputSchema": {"type": "object", "properties": properties, "required": required, "additionalProperties": false},
        "annotations": {"readOnlyHint": true, "openWorldHint": false},
    })
}
