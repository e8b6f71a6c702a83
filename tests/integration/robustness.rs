//! Mutation suite: hundreds of damaged variants of the real captures, each fed to the
//! real binary (`stepscope info` and `stepscope summary`) under a 5 s wall-clock limit
//! with its peak memory measured. Every run must end with exit 0 or a clean exit 2
//! (one `stepscope: …` line on stderr) — never a panic, a signal, a hang or memory far
//! beyond the file's size.
//!
//! The variants are made deterministically (a seeded PRNG, a protobuf walker over the
//! real files to find structural boundaries), so a failure names its variant (kind,
//! offset) and reproduces on every run. Set `STEPSCOPE_ROBUSTNESS_KEEP=<dir>` to keep the
//! failing files there. A run that hits the time limit while other tests load the machine
//! is run again alone, up to three times, before it counts as a failure (a real hang
//! hangs every time).
//!
//! pprof (`memory.prof`) has no CLI command yet, so its variants run
//! `stepscope_xspace::pprof::read_pprof` in a child process: this test binary itself,
//! re-run on the `robustness::pprof_child` test.

use std::io::Write;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use crate::util::*;

/// Wall-clock limit for one run.
pub(crate) const LIMIT: Duration = Duration::from_secs(5);
/// Memory allowed to any run, whatever the input.
const BASE_RSS_BYTES: u64 = 64 << 20;

const ROCM: &str = "rocm-mi300x-gemm/tw003.xplane.pb";
const CPU: &str = "cpu-compile/plugins/profile/2026_11_21_22_29_21/vm.xplane.pb";
const TPU: &str = "tpu-v6e-inference/tpu_inference_2.xplane.pb";
const TRACE: &str = "cpu-transformer/plugins/profile/2026_11_21_22_29_17/vm.trace.json.gz";
const PPROF: &str = "cpu-transformer/plugins/profile/2026_11_21_22_29_17/memory.prof";

// ---------------------------------------------------------------------------
// Deterministic randomness.

/// splitmix64: small, seedable, good enough to pick offsets.
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    pub(crate) fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

// ---------------------------------------------------------------------------
// A protobuf wire walker (independent of the one in crates/xspace).

/// One field of a message: where it starts, where its payload is, where it ends.
#[derive(Clone, Debug)]
struct Field {
    number: u64,
    start: usize,
    /// For length-delimited fields: the range of the length prefix.
    len_prefix: Option<Range<usize>>,
    payload: Range<usize>,
}

fn read_varint(buf: &[u8], pos: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..70).step_by(7) {
        let b = *buf.get(*pos)?;
        *pos += 1;
        v |= u64::from(b & 0x7f).checked_shl(shift).unwrap_or(0);
        if b < 0x80 {
            return Some(v);
        }
    }
    None
}

/// The fields of the message in `buf[range]`; `None` if it is not well-formed.
fn fields(buf: &[u8], range: Range<usize>) -> Option<Vec<Field>> {
    let mut out = Vec::new();
    let mut pos = range.start;
    while pos < range.end {
        let start = pos;
        let key = read_varint(buf, &mut pos)?;
        let (number, wt) = (key >> 3, key & 7);
        let mut len_prefix = None;
        let payload = match wt {
            0 => {
                let s = pos;
                read_varint(buf, &mut pos)?;
                s..pos
            }
            1 => pos..pos + 8,
            5 => pos..pos + 4,
            2 => {
                let s = pos;
                let n = read_varint(buf, &mut pos)? as usize;
                len_prefix = Some(s..pos);
                pos..pos.checked_add(n)?
            }
            _ => return None,
        };
        if payload.end > range.end {
            return None;
        }
        pos = payload.end;
        out.push(Field { number, start, len_prefix, payload });
    }
    Some(out)
}

pub(crate) fn varint(mut v: u64) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let b = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(b);
            return out;
        }
        out.push(b | 0x80);
    }
}

/// A length-delimited field.
pub(crate) fn ld(number: u64, payload: &[u8]) -> Vec<u8> {
    let mut out = varint(number << 3 | 2);
    out.extend(varint(payload.len() as u64));
    out.extend_from_slice(payload);
    out
}

/// Every length-delimited field down to `depth` levels of nesting in an XSpace
/// (planes → lines / metadata → events → stats), with its depth.
fn nested_fields(buf: &[u8], depth: usize) -> Vec<(usize, Field)> {
    let mut out = Vec::new();
    let mut level: Vec<Field> = fields(buf, 0..buf.len()).expect("fixture is valid protobuf");
    for d in 0..depth {
        let mut next = Vec::new();
        for f in level.into_iter().filter(|f| f.len_prefix.is_some()) {
            // Strings and bytes fail to parse as messages or parse as junk; only descend
            // into the message fields of the XSpace schema.
            let is_message = matches!((d, f.number), (0, 1) | (1, 3..=6) | (2, 2..=5) | (3, 4) | (4, 4));
            if is_message {
                if let Some(inner) = fields(buf, f.payload.clone()) {
                    next.extend(inner);
                }
            }
            out.push((d, f));
        }
        level = next;
    }
    out
}

pub(crate) fn gzip(bytes: &[u8], level: u32) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::new(level));
    enc.write_all(bytes).expect("gzip");
    enc.finish().expect("gzip")
}

fn gunzip(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    std::io::Read::read_to_end(&mut flate2::read::MultiGzDecoder::new(bytes), &mut out).expect("gunzip");
    out
}

/// `total` bytes of `prefix` + `fill`… + `suffix`, gzipped as 1 MiB-of-fill members
/// (readers take multi-member gzip): a ~1 MB file that expands to about `total` bytes.
fn gzip_bomb(prefix: &[u8], fill: u8, total: usize, suffix: &[u8]) -> Vec<u8> {
    let chunk = gzip(&vec![fill; 1 << 20], 9);
    let mut out = gzip(prefix, 9);
    for _ in 0..total >> 20 {
        out.extend_from_slice(&chunk);
    }
    out.extend(gzip(suffix, 9));
    out
}

// ---------------------------------------------------------------------------
// Variants.

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Runner {
    /// `stepscope info` and `stepscope summary` on the file.
    Cli,
    /// Every analysis command: `info`, `summary`, `steps`, `ops` (by op and by scope), `kernels`.
    CliAll,
    /// `read_pprof` in a child process.
    Pprof,
}

struct Variant {
    /// Kind and position, e.g. `rocm bit-flip @81234 bit 3`.
    name: String,
    /// File name to write (its suffix picks the reader).
    file: String,
    bytes: Vec<u8>,
    runner: Runner,
    /// Holds compressed data (gzip files, compressed stats): may use more memory.
    expands: bool,
}

fn variant(out: &mut Vec<Variant>, name: String, file: &str, bytes: Vec<u8>, runner: Runner) {
    let expands = bytes.starts_with(&[0x1f, 0x8b]);
    out.push(Variant { name, file: file.to_string(), bytes, runner, expands });
}

fn bit_flips(out: &mut Vec<Variant>, rng: &mut Rng, tag: &str, file: &str, base: &[u8], n: usize, runner: Runner) {
    for _ in 0..n {
        let mut b = base.to_vec();
        let flips = 1 + rng.below(4);
        let mut what = Vec::new();
        for _ in 0..flips {
            let (at, bit) = (rng.below(b.len()), rng.below(8));
            b[at] ^= 1 << bit;
            what.push(format!("@{at} bit {bit}"));
        }
        variant(out, format!("{tag} bit-flip {}", what.join(", ")), file, b, runner);
    }
}

fn xspace_variants(out: &mut Vec<Variant>, rng: &mut Rng, tag: &str, base: &[u8]) {
    let file = format!("{tag}.xplane.pb");
    bit_flips(out, rng, tag, &file, base, 30, Runner::Cli);

    // Truncation at every structural boundary of the top-level message: at a field's
    // start (a shorter, valid file), inside its key, right after its length prefix and
    // in the middle of its payload.
    let top = fields(base, 0..base.len()).expect("fixture is valid protobuf");
    for f in &top {
        let mut cuts = vec![f.start, f.start + 1, f.payload.start, (f.payload.start + f.payload.end) / 2];
        cuts.retain(|&c| c > 0 && c < base.len());
        cuts.dedup();
        for c in cuts {
            variant(
                out,
                format!("{tag} truncated @{c} (top-level field {})", f.number),
                &file,
                base[..c].to_vec(),
                Runner::Cli,
            );
        }
    }
    // A sample of boundaries inside planes, lines, events and stats.
    let nested = nested_fields(base, 5);
    let inner: Vec<&(usize, Field)> = nested.iter().filter(|(d, _)| *d > 0).collect();
    for _ in 0..25 {
        let (d, f) = inner[rng.below(inner.len())];
        let c = [f.start, f.payload.start, f.payload.end - 1][rng.below(3)].max(1);
        variant(
            out,
            format!("{tag} truncated @{c} (depth {d}, field {})", f.number),
            &file,
            base[..c].to_vec(),
            Runner::Cli,
        );
    }

    // Length prefixes rewritten past the end: the largest value of the same width (the
    // rest of the file keeps its shape), and a 10-byte u64::MAX.
    for k in 0..12 {
        let (d, f) = &nested[rng.below(nested.len())];
        let p = f.len_prefix.clone().expect("length-delimited");
        let mut b = base.to_vec();
        let wide = k % 2 == 0;
        let prefix = if wide {
            vec![0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]
        } else {
            let width = p.len();
            let mut v = vec![0xffu8; width];
            v[width - 1] = 0x7f;
            v
        };
        b.splice(p.clone(), prefix);
        let how = if wide { "u64::MAX" } else { "max of its width" };
        variant(out, format!("{tag} length prefix @{} (depth {d}) set to {how}", p.start), &file, b, Runner::Cli);
    }
    // The first plane's length pointing just past the end of the file.
    let f = &top[0];
    let p = f.len_prefix.clone().expect("plane");
    let mut b = base.to_vec();
    b.splice(p.clone(), varint((base.len() - p.end + 1) as u64));
    variant(
        out,
        format!("{tag} first plane's length @{} one past the end of the file", p.start),
        &file,
        b,
        Runner::Cli,
    );
}

/// XSpace message types, for rewriting a file field by field.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Msg {
    Space,
    Plane,
    Line,
    Event,
    Stat,
    EventMetaEntry,
    EventMeta,
    StatMetaEntry,
    StatMeta,
}

impl Msg {
    /// The message type of field `number` inside `self`, if it is a message.
    fn child(self, number: u64) -> Option<Msg> {
        Some(match (self, number) {
            (Msg::Space, 1) => Msg::Plane,
            (Msg::Plane, 3) => Msg::Line,
            (Msg::Plane, 4) => Msg::EventMetaEntry,
            (Msg::Plane, 5) => Msg::StatMetaEntry,
            (Msg::Plane, 6) | (Msg::Event, 4) | (Msg::EventMeta, 5) => Msg::Stat,
            (Msg::Line, 4) => Msg::Event,
            (Msg::EventMetaEntry, 2) => Msg::EventMeta,
            (Msg::StatMetaEntry, 2) => Msg::StatMeta,
            _ => return None,
        })
    }
}

/// Replaces a field: (message type, field, payload) → the field's new bytes, if any.
type EditFn = dyn Fn(Msg, &Field, &[u8]) -> Option<Vec<u8>>;

/// `buf[range]` (a message of type `msg`) re-encoded, with `edit` given the chance to
/// replace each field: it gets the message type, the field and the payload bytes and
/// returns the field's new bytes (key included; empty to drop it), or `None` to keep it.
fn rewrite(buf: &[u8], range: Range<usize>, msg: Msg, edit: &EditFn) -> Vec<u8> {
    let mut out = Vec::new();
    for f in fields(buf, range).expect("fixture is valid protobuf") {
        if let Some(new) = edit(msg, &f, &buf[f.payload.clone()]) {
            out.extend(new);
        } else if let (Some(child), Some(_)) = (msg.child(f.number), &f.len_prefix) {
            out.extend(ld(f.number, &rewrite(buf, f.payload.clone(), child, edit)));
        } else {
            out.extend_from_slice(&buf[f.start..f.payload.end]);
        }
    }
    out
}

fn int_field(number: u64, v: i64) -> Vec<u8> {
    [varint(number << 3), varint(v as u64)].concat()
}

/// Weird but valid: well-formed files with extreme or inconsistent values, which the
/// analyses (not only the reader) must survive.
fn weird_variants(out: &mut Vec<Variant>, tag: &str, base: &[u8]) {
    type Edit = Box<EditFn>;
    let on = |m: Msg, n: u64, v: i64| -> Edit {
        Box::new(move |msg, f, _| (msg == m && f.number == n).then(|| int_field(n, v)))
    };
    let edits: Vec<(&str, Edit)> = vec![
        ("every event lasts i64::MAX ps", on(Msg::Event, 3, i64::MAX)),
        ("every event lasts -1 ps", on(Msg::Event, 3, -1)),
        ("every event lasts i64::MIN ps", on(Msg::Event, 3, i64::MIN)),
        ("every event starts at offset i64::MAX", on(Msg::Event, 2, i64::MAX)),
        ("every event starts at offset i64::MIN", on(Msg::Event, 2, i64::MIN)),
        ("every line starts at i64::MAX ns", on(Msg::Line, 3, i64::MAX)),
        ("every line starts at i64::MIN ns", on(Msg::Line, 3, i64::MIN)),
        ("every event names metadata id 0", on(Msg::Event, 1, 0)),
        ("every int stat is u64::MAX", on(Msg::Stat, 3, -1)),
        ("every int64 stat is i64::MIN", on(Msg::Stat, 4, i64::MIN)),
        ("every ref stat points nowhere", on(Msg::Stat, 7, 987_654_321)),
        ("every line id is 7", on(Msg::Line, 1, 7)),
        ("every plane id is 0", on(Msg::Plane, 1, 0)),
        (
            "every double stat is NaN",
            Box::new(|msg, f, _| {
                (msg == Msg::Stat && f.number == 2)
                    .then(|| [vec![2 << 3 | 1], f64::NAN.to_le_bytes().to_vec()].concat())
            }),
        ),
        (
            "every double stat is -inf",
            Box::new(|msg, f, _| {
                (msg == Msg::Stat && f.number == 2)
                    .then(|| [vec![2 << 3 | 1], f64::NEG_INFINITY.to_le_bytes().to_vec()].concat())
            }),
        ),
        ("no stat metadata", Box::new(|msg, f, _| (msg == Msg::Plane && f.number == 5).then(Vec::new))),
        ("no event metadata", Box::new(|msg, f, _| (msg == Msg::Plane && f.number == 4).then(Vec::new))),
        (
            "every plane is /device:GPU:0",
            Box::new(|msg, f, _| (msg == Msg::Plane && f.number == 2).then(|| ld(2, b"/device:GPU:0"))),
        ),
        ("every line is XLA Ops", Box::new(|msg, f, _| (msg == Msg::Line && f.number == 2).then(|| ld(2, b"XLA Ops")))),
        ("every string stat is empty", Box::new(|msg, f, _| (msg == Msg::Stat && f.number == 5).then(|| ld(5, b"")))),
        (
            "every string stat is invalid UTF-8",
            Box::new(|msg, f, _| (msg == Msg::Stat && f.number == 5).then(|| ld(5, b"\xff\xfe/\xc3("))),
        ),
    ];
    for (what, edit) in edits {
        let b = rewrite(base, 0..base.len(), Msg::Space, &*edit);
        variant(out, format!("{tag} weird but valid: {what}"), &format!("{tag}.xplane.pb"), b, Runner::CliAll);
    }
}

fn deep_variants(out: &mut Vec<Variant>) {
    // 100,000 nested length-delimited fields inside an unknown field of an event stat.
    let mut inner = Vec::new();
    for _ in 0..100_000 {
        inner = ld(9, &inner);
    }
    let stat = ld(9, &inner);
    let event = [varint(1 << 3), varint(1), ld(4, &stat)].concat();
    let line = [ld(2, b"deep"), ld(4, &event)].concat();
    let plane = [ld(2, b"/host:CPU"), ld(3, &line)].concat();
    variant(
        out,
        "xspace 100k nested length-delimited fields in a stat".into(),
        "deep.xplane.pb",
        ld(1, &plane),
        Runner::Cli,
    );
    // The same nesting as the planes themselves: field 1 inside field 1 …
    let mut planes = Vec::new();
    for _ in 0..100_000 {
        planes = ld(1, &planes);
    }
    variant(out, "xspace 100k planes nested in planes".into(), "nested-planes.xplane.pb", planes, Runner::Cli);
    // 200,000 start-group tags at the top level and inside a plane.
    variant(out, "xspace 200k start-group tags".into(), "groups.xplane.pb", vec![0x0b; 200_000], Runner::Cli);
    let groups = [ld(2, b"/host:CPU"), vec![0x1b; 200_000]].concat();
    let mut b = varint(1 << 3 | 2);
    b.extend(varint(groups.len() as u64));
    b.extend(groups);
    variant(out, "xspace 200k start-group tags inside a plane".into(), "plane-groups.xplane.pb", b, Runner::Cli);
}

/// An XSpace whose string stats (wire field 8: gzip-compressed text) are gzip bombs.
fn xspace_bomb() -> Vec<u8> {
    let bomb = gzip(&vec![b'a'; 64 << 20], 9);
    let stat_meta =
        ld(5, &[varint(1 << 3), varint(1), ld(2, &[varint(1 << 3), varint(1), ld(2, b"s")].concat())].concat());
    let stat = [varint(1 << 3), varint(1), ld(8, &bomb)].concat();
    let mut events = Vec::new();
    for _ in 0..16 {
        events.extend(ld(4, &[varint(1 << 3), varint(1), varint(3 << 3), varint(10), ld(4, &stat)].concat()));
    }
    let event_meta =
        ld(4, &[varint(1 << 3), varint(1), ld(2, &[varint(1 << 3), varint(1), ld(2, b"op")].concat())].concat());
    let line = [ld(2, b"bombs"), events].concat();
    ld(1, &[ld(2, b"/host:CPU"), stat_meta, event_meta, ld(3, &line)].concat())
}

fn trace_variants(out: &mut Vec<Variant>, rng: &mut Rng, gz: &[u8]) {
    let file = "vm.trace.json.gz";
    bit_flips(out, rng, "trace.json.gz", file, gz, 10, Runner::Cli);
    let text = gunzip(gz);
    // Bit flips in the text, gzipped again so the damage reaches the JSON parser.
    for _ in 0..20 {
        let mut b = text.clone();
        let (at, bit) = (rng.below(b.len()), rng.below(8));
        b[at] ^= 1 << bit;
        variant(out, format!("trace.json bit-flip in text @{at} bit {bit}"), file, gzip(&b, 1), Runner::Cli);
    }
    // Unclosed arrays and objects: the text cut at random places.
    for _ in 0..12 {
        let c = 1 + rng.below(text.len() - 1);
        variant(out, format!("trace.json text truncated @{c}"), file, gzip(&text[..c], 1), Runner::Cli);
    }
    // Wrong types: one field of one real event replaced.
    let doc: serde_json::Value = serde_json::from_slice(&text).expect("fixture JSON");
    let events = doc["traceEvents"].as_array().expect("traceEvents").clone();
    let keys = ["ph", "pid", "tid", "ts", "dur", "name", "args", "id", "cat", "s"];
    let wrong: [(&str, serde_json::Value); 12] = [
        ("null", serde_json::Value::Null),
        ("true", true.into()),
        ("a string", "abc".into()),
        ("a numeric string", "12.5".into()),
        ("-1", (-1).into()),
        ("i64::MIN", i64::MIN.into()),
        ("u64::MAX", u64::MAX.into()),
        ("1e308", 1e308.into()),
        ("-1.5e-300", (-1.5e-300).into()),
        ("an array", serde_json::json!([1, [2, {}]])),
        ("an object", serde_json::json!({"a": {"b": [null]}})),
        ("an empty string", "".into()),
    ];
    for _ in 0..40 {
        let i = rng.below(events.len());
        let key = keys[rng.below(keys.len())];
        let (what, value) = &wrong[rng.below(wrong.len())];
        let mut d = doc.clone();
        d["traceEvents"][i][key] = value.clone();
        let b = serde_json::to_vec(&d).expect("json");
        variant(out, format!("trace.json event {i} field {key:?} set to {what}"), file, gzip(&b, 1), Runner::Cli);
    }
    // Numbers no f64 or i64 holds, written as raw text.
    let first_x = events.iter().position(|e| e["ph"] == "X").expect("an X event");
    for (what, raw) in [
        ("ts 1e400", "1e400"),
        ("ts -1e400", "-1e400"),
        ("ts 400 digits", &"9".repeat(400)[..]),
        ("ts 1e-400", "1e-400"),
        ("ts exponent 99999999999999999999", "1e99999999999999999999"),
        ("dur -0.0", "-0.0"),
    ] {
        let key = if what.starts_with("dur") { "dur" } else { "ts" };
        let mut d = doc.clone();
        d["traceEvents"][first_x][key] = "@@RAW@@".into();
        let s = serde_json::to_string(&d).expect("json").replace("\"@@RAW@@\"", raw);
        variant(out, format!("trace.json event {first_x} {what}"), file, gzip(s.as_bytes(), 1), Runner::Cli);
    }
    // Whole-document shapes.
    for (what, s) in [
        ("traceEvents is a number", r#"{"traceEvents": 5}"#.to_string()),
        ("traceEvents is a string", r#"{"traceEvents": "x"}"#.to_string()),
        ("traceEvents is an object", r#"{"traceEvents": {"ph": "X"}}"#.to_string()),
        ("events are numbers", r#"{"traceEvents": [1, 2, 3]}"#.to_string()),
        ("events are nulls", r#"[null, null]"#.to_string()),
        ("100k nested arrays", "[".repeat(100_000)),
        ("100k nested objects", r#"{"a":"#.repeat(100_000)),
        (
            "100k nested args",
            format!(
                r#"{{"traceEvents":[{{"ph":"X","pid":1,"tid":1,"ts":1,"dur":1,"name":"a","args":{}1{}}}]}}"#,
                r#"{"a":"#.repeat(100_000),
                "}".repeat(100_000)
            ),
        ),
        (
            "100k nested arrays in ts",
            format!(
                r#"{{"traceEvents":[{{"ph":"X","pid":1,"tid":1,"ts":{}1{},"name":"a"}}]}}"#,
                "[".repeat(100_000),
                "]".repeat(100_000)
            ),
        ),
        (
            "lone surrogate name",
            r#"{"traceEvents":[{"ph":"X","pid":1,"tid":1,"ts":1,"dur":1,"name":"\ud800"}]}"#.to_string(),
        ),
        ("NUL bytes", "{\"traceEvents\":[\0\0\0]}".to_string()),
        ("byte order mark", "\u{feff}{\"traceEvents\":[]}".to_string()),
        ("1M empty events", format!(r#"{{"traceEvents":[{}{{}}]}}"#, "{},".repeat(1_000_000))),
    ] {
        variant(out, format!("trace.json {what}"), file, gzip(s.as_bytes(), 1), Runner::Cli);
    }
    // Plain (not gzipped) text too.
    variant(
        out,
        "trace.json plain text truncated in half".into(),
        "half.trace.json",
        text[..text.len() / 2].to_vec(),
        Runner::Cli,
    );
}

fn bomb_variants(out: &mut Vec<Variant>) {
    const GIB: usize = 1 << 30;
    variant(
        out,
        "gzip bomb: 1 GiB of zeros as .trace.json.gz".into(),
        "zeros.trace.json.gz",
        gzip_bomb(b"", 0, GIB, b""),
        Runner::Cli,
    );
    variant(
        out,
        "gzip bomb: 1 GiB of whitespace inside traceEvents".into(),
        "spaces.trace.json.gz",
        gzip_bomb(br#"{"traceEvents":["#, b' ', GIB, b"]}"),
        Runner::Cli,
    );
    variant(
        out,
        "gzip bomb: a 1 GiB event name".into(),
        "name.trace.json.gz",
        gzip_bomb(br#"{"traceEvents":[{"ph":"X","pid":1,"tid":1,"ts":1,"dur":1,"name":""#, b'a', GIB, br#""}]}"#),
        Runner::Cli,
    );
    // 256 MiB (a 256 KB file, so the 16 MiB floor applies): digits parse at ~30 MB/s
    // in a debug build, and the 5 s limit must hold on a loaded machine.
    variant(
        out,
        "gzip bomb: a 256 MiB number as ts".into(),
        "ts.trace.json.gz",
        gzip_bomb(br#"{"traceEvents":[{"ph":"X","pid":1,"tid":1,"ts":1"#, b'0', GIB / 4, br#","dur":1,"name":"a"}]}"#),
        Runner::Cli,
    );
    variant(
        out,
        "gzip bomb: 16 string stats of 64 MiB each in an XSpace".into(),
        "bomb.xplane.pb",
        xspace_bomb(),
        Runner::Cli,
    );
    out.last_mut().expect("just pushed").expands = true;
    variant(
        out,
        "gzip bomb: 1 GiB of zeros as memory.prof".into(),
        "memory.prof",
        gzip_bomb(b"", 0, GIB, b""),
        Runner::Pprof,
    );
    // A valid pprof prefix, then an unknown field that is 1 GiB long.
    let mut prefix = ld(6, b"");
    prefix.extend(varint(15 << 3 | 2));
    prefix.extend(varint(GIB as u64));
    variant(
        out,
        "gzip bomb: a 1 GiB unknown field in memory.prof".into(),
        "memory.prof",
        gzip_bomb(&prefix, 0, GIB, b""),
        Runner::Pprof,
    );
}

fn pprof_variants(out: &mut Vec<Variant>, rng: &mut Rng, gz: &[u8]) {
    bit_flips(out, rng, "memory.prof gz", "memory.prof", gz, 8, Runner::Pprof);
    let raw = gunzip(gz);
    bit_flips(out, rng, "memory.prof raw", "memory.prof", &raw, 12, Runner::Pprof);
    let top = fields(&raw, 0..raw.len()).expect("pprof is valid protobuf");
    for _ in 0..10 {
        let f = &top[rng.below(top.len())];
        let c = [f.start + 1, f.payload.start, (f.payload.start + f.payload.end) / 2][rng.below(3)];
        variant(
            out,
            format!("memory.prof raw truncated @{c} (field {})", f.number),
            "memory.prof",
            raw[..c].to_vec(),
            Runner::Pprof,
        );
    }
    let mut nest = Vec::new();
    for _ in 0..100_000 {
        nest = ld(2, &nest);
    }
    variant(out, "memory.prof 100k nested samples".into(), "memory.prof", ld(2, &nest), Runner::Pprof);
}

fn all_variants() -> Vec<Variant> {
    let mut rng = Rng(0x05ee_d0f5_7e95_c09e);
    let mut out = Vec::new();
    let read = |rel: &str| std::fs::read(fixture(rel)).expect("fixture");
    xspace_variants(&mut out, &mut rng, "rocm", &read(ROCM));
    xspace_variants(&mut out, &mut rng, "cpu", &read(CPU));
    weird_variants(&mut out, "rocm", &read(ROCM));
    weird_variants(&mut out, "cpu", &read(CPU));
    weird_variants(&mut out, "tpu", &read(TPU));
    deep_variants(&mut out);
    trace_variants(&mut out, &mut rng, &read(TRACE));
    pprof_variants(&mut out, &mut rng, &read(PPROF));
    bomb_variants(&mut out);
    out
}

// ---------------------------------------------------------------------------
// Running one variant in a child process with a time limit, measuring peak memory
// (`run_limited` in util.rs).

/// What is wrong with an outcome, if anything.
pub(crate) fn judge(o: &Outcome, file_bytes: u64, expands: bool) -> Option<String> {
    if o.timed_out {
        return Some(format!("still running after {:?} (killed)", LIMIT));
    }
    if let Some(sig) = o.signal {
        return Some(format!("killed by signal {sig}; stderr: {:?}", o.stderr));
    }
    // A panic first: its backtrace (RUST_BACKTRACE=1) maps the debug binary, which would
    // otherwise show up only as a memory overrun.
    if o.stderr.contains("panicked") {
        return Some(format!("panicked: {:?}", o.stderr));
    }
    // Compressed input may decompress to more, within the readers' 32× expansion limit.
    let rss_limit = BASE_RSS_BYTES + file_bytes * if expands { 64 } else { 10 };
    if o.max_rss_bytes > rss_limit {
        let head: String = o.stderr.chars().take(400).collect();
        return Some(format!(
            "peak RSS {} MiB > limit {} MiB (exit {:?}, stderr {head:?})",
            o.max_rss_bytes >> 20,
            rss_limit >> 20,
            o.code
        ));
    }
    match o.code {
        Some(0) => None,
        Some(2) => {
            let lines: Vec<&str> = o.stderr.lines().collect();
            if lines.len() == 1 && lines[0].starts_with("stepscope: ") {
                None
            } else {
                Some(format!("exit 2 without exactly one `stepscope: ` line on stderr: {:?}", o.stderr))
            }
        }
        c => Some(format!("exit code {c:?}; stderr: {:?}", o.stderr)),
    }
}

fn commands(v: &Variant, path: &Path) -> Vec<(&'static str, Command)> {
    match v.runner {
        Runner::Cli | Runner::CliAll => {
            let all: &[&'static str] = &["info", "summary", "steps", "ops", "ops --by scope --depth 2", "kernels"];
            let subs = if v.runner == Runner::Cli { &all[..2] } else { all };
            subs.iter()
                .map(|&sub| {
                    let mut c = Command::new(env!("CARGO_BIN_EXE_stepscope"));
                    c.args(sub.split(' ')).arg(path);
                    (sub, c)
                })
                .collect()
        }
        Runner::Pprof => {
            // This test binary under a name of its own, so that its memory samples are
            // told apart from the spawning test process's (see `run_limited`).
            let exe = path.with_file_name("pprof-child");
            if !exe.exists() {
                std::os::unix::fs::symlink(std::env::current_exe().expect("test binary"), &exe).expect("symlink");
            }
            let mut c = Command::new(exe);
            c.args(["robustness::pprof_child", "--exact", "--nocapture", "--test-threads=1", "-q"])
                .env("STEPSCOPE_PPROF_CHILD", path);
            vec![("read_pprof", c)]
        }
    }
}

/// The child side of the pprof runs: reads `$STEPSCOPE_PPROF_CHILD` like the CLI would,
/// printing `stepscope: <error>` on failure. A no-op in a normal test run.
#[test]
fn pprof_child() {
    let Some(path) = std::env::var_os("STEPSCOPE_PPROF_CHILD") else {
        return;
    };
    match stepscope_xspace::pprof::read_pprof(Path::new(&path)) {
        Ok(p) => {
            for (t, _) in &p.sample_types {
                let _ = (p.total(t), p.by_stack(t).len());
            }
        }
        Err(e) => {
            eprintln!("stepscope: {e}");
            std::process::exit(2);
        }
    }
}

/// Counts over all runs, for the closing line.
#[derive(Default)]
struct Tally {
    runs: usize,
    ok_runs: usize,
    slowest: (Duration, String),
    peak_rss: (u64, String),
}

#[test]
fn mutated_captures_end_cleanly_in_bounded_time_and_memory() {
    let variants = all_variants();
    assert!(variants.len() >= 200, "only {} variants", variants.len());
    let tmp = tempfile::tempdir().expect("tempdir");
    let next = AtomicUsize::new(0);
    let failures = Mutex::new(Vec::new());
    // Runs that hit the time limit while the machine was busy: run again, alone.
    let retry = Mutex::new(Vec::new());
    let stats = Mutex::new(Tally::default());
    let keep = std::env::var_os("STEPSCOPE_ROBUSTNESS_KEEP").map(PathBuf::from);
    let keep_file = |i: usize, v: &Variant| {
        if let Some(k) = &keep {
            std::fs::create_dir_all(k).expect("keep dir");
            std::fs::write(k.join(format!("{i}-{}", v.file)), &v.bytes).expect("keep");
        }
    };
    std::thread::scope(|s| {
        for worker in 0..2 {
            let (variants, next, failures, retry, stats, keep_file) =
                (&variants, &next, &failures, &retry, &stats, &keep_file);
            let dir = tmp.path().join(format!("w{worker}"));
            s.spawn(move || {
                std::fs::create_dir_all(&dir).expect("mkdir");
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(v) = variants.get(i) else { break };
                    let path = dir.join(&v.file);
                    std::fs::write(&path, &v.bytes).expect("write variant");
                    for (what, cmd) in commands(v, &path) {
                        let o = run_limited(cmd, &dir, LIMIT);
                        {
                            let mut st = stats.lock().expect("stats");
                            st.runs += 1;
                            st.ok_runs += usize::from(o.code == Some(0));
                            if o.elapsed > st.slowest.0 {
                                st.slowest = (o.elapsed, format!("{what} on {}", v.name));
                            }
                            if o.max_rss_bytes > st.peak_rss.0 {
                                st.peak_rss = (o.max_rss_bytes, format!("{what} on {}", v.name));
                            }
                        }
                        if o.timed_out {
                            retry.lock().expect("retry").push((i, what));
                        } else if let Some(why) = judge(&o, v.bytes.len() as u64, v.expands) {
                            failures.lock().expect("failures").push(format!("[{i}] {} — `{what}`: {why}", v.name));
                            keep_file(i, v);
                        }
                    }
                    std::fs::remove_file(&path).ok();
                }
            });
        }
    });
    // A hang hangs again; a run slowed by other tests' load gets its 5 s alone.
    let retry = retry.into_inner().expect("retry");
    let dir = tmp.path().join("retry");
    std::fs::create_dir_all(&dir).expect("mkdir");
    for &(i, what) in &retry {
        let v = &variants[i];
        let path = dir.join(&v.file);
        std::fs::write(&path, &v.bytes).expect("write variant");
        // Up to three tries alone: only a run that never ends in time fails.
        let mut last = None;
        for _ in 0..3 {
            let (_, cmd) = commands(v, &path).into_iter().find(|(w, _)| *w == what).expect("same command");
            let o = run_limited(cmd, &dir, LIMIT);
            let timed_out = o.timed_out;
            last = judge(&o, v.bytes.len() as u64, v.expands);
            if !timed_out {
                break;
            }
        }
        if let Some(why) = last {
            failures.lock().expect("failures").push(format!("[{i}] {} — `{what}` (run again alone): {why}", v.name));
            keep_file(i, v);
        }
    }
    let Tally { runs, ok_runs, slowest: (slowest, slowest_what), peak_rss: (max_rss, max_rss_what) } =
        stats.into_inner().expect("stats");
    eprintln!(
        "robustness: {} variants, {runs} runs ({ok_runs} exit 0, the rest clean errors), slowest {slowest:.2?} \
         ({slowest_what}), peak RSS {} MiB ({max_rss_what}), {} run(s) past the time limit run again alone",
        variants.len(),
        max_rss >> 20,
        retry.len()
    );
    let failures = failures.into_inner().expect("failures");
    assert!(failures.is_empty(), "{} of {runs} runs failed:\n{}", failures.len(), failures.join("\n"));
    // Not everything may fail: the valid prefixes and harmless flips must still read.
    assert!(ok_runs > 0, "no variant read successfully");
}

/// Inputs that once crashed stepscope (tests/fixtures/robustness): every analysis ends cleanly.
#[test]
fn regression_inputs_end_cleanly() {
    let dir = root().join("tests/fixtures/robustness");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("tests/fixtures/robustness")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e != "md"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no regression inputs in {}", dir.display());
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut failures = Vec::new();
    for path in &files {
        let bytes = std::fs::read(path).expect("read");
        let file = path.file_name().expect("name").to_string_lossy().into_owned();
        let v = Variant { name: file.clone(), file, expands: false, runner: Runner::CliAll, bytes };
        for (what, cmd) in commands(&v, path) {
            let o = run_limited(cmd, tmp.path(), LIMIT);
            if let Some(why) = judge(&o, v.bytes.len() as u64, v.expands) {
                failures.push(format!("{} — `{what}`: {why}", v.name));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
