//! Chrome trace JSON reader (`*.trace.json.gz`, `perfetto_trace.json.gz`, `.json`).
//!
//! The file is parsed as a stream: serde_json reads from a buffered reader
//! (through a gzip decoder when the bytes start with `1f 8b`), and each event
//! is turned into columns as soon as its closing `}` is read. Neither the
//! decompressed text nor a `serde_json::Value` tree of the file is ever held,
//! so memory follows the number of events, not the size of the text.
//!
//! Mapping into the model:
//! - one [`Plane`] per `pid`, in first-appearance order, named by the
//!   `process_name` metadata event (else the pid as text); `id` is the pid
//!   when it is a number, else `-1 - index` of the plane;
//! - one [`Line`] per `tid` of that pid, in first-appearance order, named by
//!   the `thread_name` metadata event (else the tid as text); `id` is the tid
//!   when it is a number, else the line's index in the plane;
//! - `X` events keep `ts`/`dur`; `i`/`I` get duration 0; `B`/`E` are matched
//!   as a stack per (pid, tid) into one event at the `B` (the `E`'s args are
//!   added to the `B`'s); a `B` never closed gets duration 0, an `E` never
//!   opened is dropped;
//! - `C` counter samples go on a line per (pid, counter name) with
//!   [`Line::is_counter`] set, each arg a stat (an `id` field is added to the
//!   counter name, as the Chrome viewer does);
//! - other phases (flow, async, object, sample, …) are skipped and counted in
//!   [`Space::warnings`], one warning per phase.
//!
//! Times: `ts`/`dur` are microseconds as decimal numbers. They are converted
//! to integer picoseconds exactly from the number's text (rounded half away
//! from zero at the picosecond digit), never through `f64`. Absolute epoch
//! microseconds (≈1.7e15 µs = 1.7e21 ps) do not fit an `i64` of picoseconds:
//! in that case every time is made relative to the integer microsecond of the
//! first timed event in the file, so event starts are "ps since that event's
//! µs", and may be negative for events earlier than it. When the times fit,
//! they are kept as written (`ts` × 10⁶).

use std::borrow::Cow;
use std::cell::Cell;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::io::{self, BufRead, BufReader, Read};
use std::path::Path;
use std::rc::Rc;
use std::sync::Arc;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;

use crate::error::{Error, Result};
use crate::model::{
    EventMeta, Format, Line, Plane, Source, Space, Span, Stat, StatMeta, StatValue, MAX_EMPTY_LINES, MAX_STAT_LEN,
};

/// Most bytes a trace may decompress to before reading stops.
const MAX_TEXT_BYTES: u64 = 64 << 30;

/// Gzip bomb guard: once past [`MIN_EXPANSION_LIMIT`], the text read so far may be at
/// most this many times the gzip bytes read so far (real traces expand 10–16×). Without
/// it a 1 MB file could hold a 1 GB string that serde_json would buffer whole; with it
/// a bomb stops at 16 MiB of text whatever its size.
const MAX_EXPANSION: u64 = 32;
const MIN_EXPANSION_LIMIT: u64 = 16 << 20;

/// Picoseconds per microsecond.
const PS_PER_US: i128 = 1_000_000;

/// Reads a Chrome trace JSON file (`.json`, or gzip when the bytes start with 1f 8b, whatever the name).
pub fn read_trace_json(path: &Path, host: &str) -> Result<Space> {
    let (file, file_bytes) = crate::files::open_regular(path)?;
    read_from(BufReader::with_capacity(1 << 16, file), host, path, file_bytes)
}

/// Same from an in-memory buffer (gzip or plain); `name` is used in error messages.
pub fn parse_trace_json(bytes: &[u8], host: &str, name: &Path) -> Result<Space> {
    read_from(bytes, host, name, bytes.len() as u64)
}

fn read_from<R: BufRead>(mut input: R, host: &str, name: &Path, file_bytes: u64) -> Result<Space> {
    let head = input.fill_buf().map_err(|e| Error::io(name, &e))?;
    if head.is_empty() {
        return Err(Error::corrupt(name, "the file is empty"));
    }
    let mut builder = Builder::new(host, file_bytes);
    if head.starts_with(&[0x1f, 0x8b]) {
        let consumed = Rc::new(Cell::new(0));
        let decoder = flate2::bufread::MultiGzDecoder::new(Counted { inner: input, consumed: consumed.clone() });
        builder.parse(Utf8Text::new(Guard::new(decoder, Some(consumed))), name)?;
    } else {
        builder.parse(Utf8Text::new(Guard::new(input, None)), name)?;
    }
    builder.finish()
}

/// The text of a trace as UTF-8, whatever an editor saved it as: a UTF-8 byte-order
/// mark is dropped, UTF-16 (little or big endian, told by its mark or by the zero
/// bytes beside the first ASCII characters) is converted as it is read.
pub(crate) struct Utf8Text<R> {
    inner: R,
    /// None until the first bytes are seen; then whether the text is UTF-16, and
    /// which end first.
    utf16: Option<Option<Endian>>,
    /// Bytes read but not yet converted (an odd byte, the start of the text).
    pending: Vec<u8>,
    /// Converted bytes not yet handed out.
    out: Vec<u8>,
    out_at: usize,
    /// A high surrogate waiting for its low half.
    high: Option<u16>,
}

#[derive(Clone, Copy, PartialEq)]
enum Endian {
    Little,
    Big,
}

impl<R: Read> Utf8Text<R> {
    pub(crate) fn new(inner: R) -> Self {
        Utf8Text { inner, utf16: None, pending: Vec::new(), out: Vec::new(), out_at: 0, high: None }
    }

    /// Reads the first bytes and decides how the text is encoded.
    fn sniff(&mut self) -> io::Result<()> {
        let mut head = [0u8; 4];
        let mut n = 0;
        while n < head.len() {
            let k = self.inner.read(&mut head[n..])?;
            if k == 0 {
                break;
            }
            n += k;
        }
        let head = &head[..n];
        let (kind, skip) = match head {
            [0xef, 0xbb, 0xbf, ..] => (None, 3),
            [0xff, 0xfe, ..] => (Some(Endian::Little), 2),
            [0xfe, 0xff, ..] => (Some(Endian::Big), 2),
            [c, 0, ..] if c.is_ascii() && *c != 0 => (Some(Endian::Little), 0),
            [0, c, ..] if c.is_ascii() && *c != 0 => (Some(Endian::Big), 0),
            _ => (None, 0),
        };
        self.utf16 = Some(kind);
        self.pending.extend_from_slice(&head[skip..]);
        Ok(())
    }

    /// Converts the whole 16-bit units of `pending` into `out`.
    fn convert(&mut self, endian: Endian) {
        let units = self.pending.len() / 2;
        for k in 0..units {
            let pair = [self.pending[2 * k], self.pending[2 * k + 1]];
            let unit = if endian == Endian::Little { u16::from_le_bytes(pair) } else { u16::from_be_bytes(pair) };
            let c = match (self.high.take(), unit) {
                (None, 0xd800..=0xdbff) => {
                    self.high = Some(unit);
                    continue;
                }
                (Some(h), 0xdc00..=0xdfff) => {
                    char::from_u32(0x10000 + ((u32::from(h) - 0xd800) << 10) + (u32::from(unit) - 0xdc00))
                }
                (_, u) => char::from_u32(u32::from(u)),
            };
            let c = c.unwrap_or(char::REPLACEMENT_CHARACTER);
            let mut buf = [0u8; 4];
            self.out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
        }
        self.pending.drain(..units * 2);
    }
}

impl<R: Read> Read for Utf8Text<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.utf16.is_none() {
            self.sniff()?;
        }
        loop {
            if self.out_at < self.out.len() {
                let n = buf.len().min(self.out.len() - self.out_at);
                buf[..n].copy_from_slice(&self.out[self.out_at..self.out_at + n]);
                self.out_at += n;
                return Ok(n);
            }
            self.out.clear();
            self.out_at = 0;
            match self.utf16.flatten() {
                None if !self.pending.is_empty() => {
                    std::mem::swap(&mut self.out, &mut self.pending);
                }
                None => return self.inner.read(buf),
                Some(endian) => {
                    let mut chunk = [0u8; 1 << 14];
                    let n = self.inner.read(&mut chunk)?;
                    if n == 0 && self.pending.len() < 2 {
                        return Ok(0);
                    }
                    self.pending.extend_from_slice(&chunk[..n]);
                    self.convert(endian);
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Input: size cap and error tagging.

/// Why reading the text failed, carried inside the `io::Error` serde_json reports.
#[derive(Debug)]
enum StreamError {
    /// The gzip decoder failed.
    Gzip(io::Error),
    /// The decompressed text is larger than [`MAX_TEXT_BYTES`].
    TooBig,
    /// Gzipped text expands more than [`MAX_EXPANSION`]× its compressed size.
    Bomb { text: u64, gzip: u64 },
}

impl std::fmt::Display for StreamError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StreamError::Gzip(e) => write!(f, "gzip: {e}"),
            StreamError::TooBig => write!(f, "more than {} GiB of text", MAX_TEXT_BYTES >> 30),
            StreamError::Bomb { text, gzip } => write!(f, "{} MiB of text from {} KiB of gzip", text >> 20, gzip >> 10),
        }
    }
}

impl std::error::Error for StreamError {}

/// A buffered reader that counts the bytes taken from it (the gzip bytes read so far).
struct Counted<R> {
    inner: R,
    consumed: Rc<Cell<u64>>,
}

impl<R: BufRead> Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.consumed.set(self.consumed.get() + n as u64);
        Ok(n)
    }
}

impl<R: BufRead> BufRead for Counted<R> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        self.inner.fill_buf()
    }
    fn consume(&mut self, amt: usize) {
        self.consumed.set(self.consumed.get() + amt as u64);
        self.inner.consume(amt);
    }
}

/// A reader that counts the bytes of text and tags decoder errors.
struct Guard<R> {
    inner: R,
    total: u64,
    /// For gzip input: the gzip bytes read so far, for the gzip bomb guard.
    gzip: Option<Rc<Cell<u64>>>,
}

impl<R: Read> Guard<R> {
    fn new(inner: R, gzip: Option<Rc<Cell<u64>>>) -> Guard<R> {
        Guard { inner, total: 0, gzip }
    }
}

impl<R: Read> Read for Guard<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self.inner.read(buf) {
            Ok(n) => {
                self.total += n as u64;
                if self.total > MAX_TEXT_BYTES {
                    return Err(io::Error::other(StreamError::TooBig));
                }
                if let Some(gz) = self.gzip.as_ref().map(|c| c.get()) {
                    if self.total > MIN_EXPANSION_LIMIT && self.total > gz.saturating_mul(MAX_EXPANSION) {
                        return Err(io::Error::other(StreamError::Bomb { text: self.total, gzip: gz }));
                    }
                }
                Ok(n)
            }
            Err(e) if self.gzip.is_some() && e.kind() != io::ErrorKind::Interrupted => {
                Err(io::Error::new(e.kind(), StreamError::Gzip(e)))
            }
            Err(e) => Err(e),
        }
    }
}

// ---------------------------------------------------------------------------
// Exact time conversion.

/// Converts a JSON number of microseconds to picoseconds exactly, rounding
/// half away from zero at the picosecond digit. `None` when the text is not
/// a number or the value does not fit an `i128`.
fn us_text_to_ps(text: &str) -> Option<i128> {
    let b = text.as_bytes();
    let (neg, rest) = match b.first() {
        Some(b'-') => (true, &b[1..]),
        _ => (false, b),
    };
    let digits_end =
        |from: usize| rest[from..].iter().position(|c| !c.is_ascii_digit()).map_or(rest.len(), |p| from + p);
    let int_end = digits_end(0);
    let int = &rest[..int_end];
    if int.is_empty() {
        return None;
    }
    let mut i = int_end;
    let mut frac: &[u8] = &[];
    if rest.get(i) == Some(&b'.') {
        let end = digits_end(i + 1);
        if end == i + 1 {
            return None;
        }
        frac = &rest[i + 1..end];
        i = end;
    }
    let mut exp: i64 = 0;
    if matches!(rest.get(i), Some(b'e' | b'E')) {
        i += 1;
        let exp_neg = match rest.get(i) {
            Some(b'-') => {
                i += 1;
                true
            }
            Some(b'+') => {
                i += 1;
                false
            }
            _ => false,
        };
        let end = digits_end(i);
        if end == i {
            return None;
        }
        for &c in &rest[i..end] {
            // Saturate: anything this large overflows or rounds to zero anyway.
            exp = (exp * 10 + i64::from(c - b'0')).min(1_000_000_000);
        }
        if exp_neg {
            exp = -exp;
        }
        i = end;
    }
    if i != rest.len() {
        return None;
    }
    let n = int.len() + frac.len();
    let digit = |k: usize| -> i128 {
        let c = if k < int.len() { int[k] } else { frac[k - int.len()] };
        i128::from(c - b'0')
    };
    let Some(first) = (0..n).find(|&k| digit(k) != 0) else {
        return Some(0);
    };
    // Digits [0, keep) form the integer number of picoseconds; digit `keep` rounds.
    let keep = int.len() as i64 + exp + 6;
    if keep - first as i64 > 38 {
        return None;
    }
    let mut acc: i128 = 0;
    for k in first..keep.max(0) as usize {
        let d = if k < n { digit(k) } else { 0 };
        acc = acc.checked_mul(10)?.checked_add(d)?;
    }
    if keep >= 0 && (keep as usize) < n && digit(keep as usize) >= 5 {
        acc = acc.checked_add(1)?;
    }
    Some(if neg { -acc } else { acc })
}

/// Parses the raw JSON text of a `ts`/`dur` value. `Ok(None)` for `null`.
fn parse_time(field: &str, raw: &str) -> Result<Option<i128>, String> {
    let raw = raw.trim();
    if raw == "null" {
        return Ok(None);
    }
    // Some writers quote their numbers; accept a quoted plain number.
    let text = match raw.strip_prefix('"').and_then(|r| r.strip_suffix('"')) {
        Some(inner) => inner,
        None => raw,
    };
    match us_text_to_ps(text) {
        Some(ps) => Ok(Some(ps)),
        None if text.as_bytes().first().is_some_and(|c| c.is_ascii_digit() || *c == b'-') && raw == text => {
            Err(format!("{field} {} is too large", clip(raw)))
        }
        None => Err(format!("{field} is {}, not a number of microseconds", clip(raw))),
    }
}

/// The first 40 characters of `s`, for messages.
fn clip(s: &str) -> Cow<'_, str> {
    match s.char_indices().nth(40) {
        Some((i, _)) => Cow::Owned(format!("{}…", &s[..i])),
        None => Cow::Borrowed(s),
    }
}

// ---------------------------------------------------------------------------
// Hashing.

/// A small fast hasher for the reader's string and id maps (multiply-rotate).
#[derive(Default, Clone, Copy)]
pub struct QuickHasher(u64);

const HASH_MUL: u64 = 0x9e37_79b9_7f4a_7c15;

impl QuickHasher {
    #[inline]
    fn mix(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(HASH_MUL);
    }
}

impl Hasher for QuickHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.mix(u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]));
        }
        let rem = chunks.remainder();
        if !rem.is_empty() {
            let mut w = [0u8; 8];
            w[..rem.len()].copy_from_slice(rem);
            self.mix(u64::from_le_bytes(w));
        }
    }
    #[inline]
    fn write_u8(&mut self, v: u8) {
        self.mix(u64::from(v));
    }
    #[inline]
    fn write_u64(&mut self, v: u64) {
        self.mix(v);
    }
    #[inline]
    fn write_i64(&mut self, v: i64) {
        self.mix(v as u64);
    }
    #[inline]
    fn write_usize(&mut self, v: usize) {
        self.mix(v as u64);
    }
    #[inline]
    fn finish(&self) -> u64 {
        // Spread the well-mixed high bits into the low ones the table indexes by.
        self.0.rotate_left(26)
    }
}

/// A `HashMap` with [`QuickHasher`] (also used by the analyses' internal maps).
pub type QuickMap<K, V> = HashMap<K, V, BuildHasherDefault<QuickHasher>>;

fn hash_bytes(bytes: &[u8]) -> u64 {
    let mut h = QuickHasher::default();
    h.write_usize(bytes.len());
    h.write(bytes);
    h.finish()
}

// ---------------------------------------------------------------------------
// Per-event scratch, reused from one event to the next.

/// A `pid`, `tid` or counter `id` as written.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
enum Key {
    #[default]
    Absent,
    Num(i64),
    /// A string; the text is in the scratch's matching buffer.
    Text,
}

/// A value in `args`, before it is interned into a plane.
#[derive(Clone, Copy, Debug)]
enum ArgVal {
    /// Byte range in [`Args::text`].
    Str(u32, u32),
    I64(i64),
    U64(u64),
    F64(f64),
}

#[derive(Default)]
struct Args {
    /// Keys and string values, back to back.
    text: String,
    /// (key range in `text`, value).
    items: Vec<(u32, u32, ArgVal)>,
}

impl Args {
    fn clear(&mut self) {
        self.text.clear();
        self.items.clear();
    }

    fn key(&self, item: &(u32, u32, ArgVal)) -> &str {
        &self.text[item.0 as usize..item.1 as usize]
    }

    fn str(&self, a: u32, b: u32) -> &str {
        &self.text[a as usize..b as usize]
    }

    /// The value of arg `name` as text (strings as they are, numbers printed).
    fn text_of(&self, name: &str) -> Option<Cow<'_, str>> {
        let item = self.items.iter().rev().find(|it| self.key(it) == name)?;
        Some(match item.2 {
            ArgVal::Str(a, b) => Cow::Borrowed(self.str(a, b)),
            ArgVal::I64(v) => Cow::Owned(v.to_string()),
            ArgVal::U64(v) => Cow::Owned(v.to_string()),
            ArgVal::F64(v) => Cow::Owned(v.to_string()),
        })
    }
}

#[derive(Default)]
struct Scratch {
    name: String,
    has_ph: bool,
    ph: String,
    ts: Option<i128>,
    dur: Option<i128>,
    pid: Key,
    pid_text: String,
    tid: Key,
    tid_text: String,
    id: Key,
    id_text: String,
    args: Args,
}

impl Scratch {
    fn clear(&mut self) {
        self.name.clear();
        self.has_ph = false;
        self.ph.clear();
        self.ts = None;
        self.dur = None;
        self.pid = Key::Absent;
        self.pid_text.clear();
        self.tid = Key::Absent;
        self.tid_text.clear();
        self.id = Key::Absent;
        self.id_text.clear();
        self.args.clear();
    }
}

// ---------------------------------------------------------------------------
// Building the planes.

/// An open `B` event waiting for its `E`.
struct Open {
    start: i64,
    meta: u32,
    /// Start of its stats in [`LineState::open_stats`].
    stats: usize,
}

#[derive(Default)]
struct LineState {
    open: Vec<Open>,
    open_stats: Vec<Stat>,
}

struct PlaneState {
    plane: Plane,
    lines: Vec<LineState>,
    tid_num: QuickMap<i64, usize>,
    tid_text: QuickMap<Box<str>, usize>,
    counters: QuickMap<Box<str>, usize>,
    event_ix: QuickMap<Box<str>, u32>,
    stat_ix: QuickMap<Box<str>, u32>,
    /// Hash of a string value → its span in the arena, to store repeated values once.
    values: QuickMap<u64, Span>,
    /// Lines a `thread_name` made before any event of theirs.
    named_lines: usize,
    /// Names of threads named past [`MAX_EMPTY_LINES`] such lines, kept until their
    /// first event makes their line: a trace of 200,000 named threads without events
    /// took 490 bytes a thread as lines.
    pending_num: QuickMap<i64, String>,
    pending_text: QuickMap<Box<str>, String>,
}

/// Pushes `x`, growing `v` from one element (then doubling): a Vec's first push makes
/// room for four, and a trace of 200,000 pids, each a plane with one thread and one
/// name, held four 600-byte lines a pid.
fn push_lean<T>(v: &mut Vec<T>, x: T) {
    if v.len() == v.capacity() {
        v.reserve_exact(v.len().max(1));
    }
    v.push(x);
}

fn arena_span(plane: &mut Plane, s: &str) -> Result<Span, String> {
    if s.len() > MAX_STAT_LEN {
        return Err(format!(
            "a string of {} bytes is longer than the {} MiB this reader supports",
            s.len(),
            MAX_STAT_LEN >> 20
        ));
    }
    Ok(plane.push_arena(s.as_bytes()))
}

impl PlaneState {
    fn new(id: i64, name: String, source: Arc<Source>) -> PlaneState {
        PlaneState {
            plane: Plane::new(id, name, source),
            lines: Vec::new(),
            tid_num: QuickMap::default(),
            tid_text: QuickMap::default(),
            counters: QuickMap::default(),
            event_ix: QuickMap::default(),
            stat_ix: QuickMap::default(),
            values: QuickMap::default(),
            named_lines: 0,
            pending_num: QuickMap::default(),
            pending_text: QuickMap::default(),
        }
    }

    fn add_line(&mut self, line: Line) -> usize {
        push_lean(&mut self.plane.lines, line);
        push_lean(&mut self.lines, LineState::default());
        self.plane.lines.len() - 1
    }

    /// The line of a tid, made on first sight.
    fn line(&mut self, tid: Key, tid_text: &str) -> usize {
        match tid {
            Key::Num(_) | Key::Absent => {
                let t = if let Key::Num(t) = tid { t } else { 0 };
                if let Some(&i) = self.tid_num.get(&t) {
                    return i;
                }
                let name = self.pending_num.remove(&t).unwrap_or_else(|| t.to_string());
                let i = self.add_line(Line { id: t, name, ..Line::default() });
                self.tid_num.insert(t, i);
                i
            }
            _ => {
                if let Some(&i) = self.tid_text.get(tid_text) {
                    return i;
                }
                let id = self.plane.lines.len() as i64;
                let name = self.pending_text.remove(tid_text).unwrap_or_else(|| tid_text.to_string());
                let i = self.add_line(Line { id, name, ..Line::default() });
                self.tid_text.insert(tid_text.into(), i);
                i
            }
        }
    }

    /// Names the line of a tid (a `thread_name`): the line is made now for the first
    /// [`MAX_EMPTY_LINES`] tids named before their events, and at its first event for
    /// the others.
    fn name_line(&mut self, tid: Key, tid_text: &str, name: Option<String>) {
        if let Some(l) = self.find_line(tid, tid_text) {
            if let Some(name) = name {
                self.plane.lines[l].name = name;
            }
            return;
        }
        if self.named_lines < MAX_EMPTY_LINES {
            self.named_lines += 1;
            let l = self.line(tid, tid_text);
            if let Some(name) = name {
                self.plane.lines[l].name = name;
            }
            return;
        }
        let name = name.unwrap_or_else(|| match tid {
            Key::Num(t) => t.to_string(),
            Key::Absent => "0".to_string(),
            Key::Text => tid_text.to_string(),
        });
        match tid {
            Key::Num(t) => drop(self.pending_num.insert(t, name)),
            Key::Absent => drop(self.pending_num.insert(0, name)),
            Key::Text => drop(self.pending_text.insert(tid_text.into(), name)),
        }
    }

    /// The line of a tid if it exists.
    fn find_line(&self, tid: Key, tid_text: &str) -> Option<usize> {
        match tid {
            Key::Num(t) => self.tid_num.get(&t).copied(),
            Key::Absent => self.tid_num.get(&0).copied(),
            Key::Text => self.tid_text.get(tid_text).copied(),
        }
    }

    /// The counter line called `name`, made on first sight.
    fn counter_line(&mut self, name: &str) -> usize {
        if let Some(&i) = self.counters.get(name) {
            return i;
        }
        let id = self.plane.lines.len() as i64;
        let i = self.add_line(Line { id, name: name.to_string(), is_counter: true, ..Line::default() });
        self.counters.insert(name.into(), i);
        i
    }

    fn event_meta(&mut self, name: &str) -> Result<u32, String> {
        if let Some(&i) = self.event_ix.get(name) {
            return Ok(i);
        }
        let span = arena_span(&mut self.plane, name)?;
        let i = self.plane.event_meta.len() as u32;
        push_lean(&mut self.plane.event_meta, EventMeta { id: i64::from(i), name: span, ..EventMeta::default() });
        self.event_ix.insert(name.into(), i);
        Ok(i)
    }

    fn stat_meta(&mut self, name: &str) -> Result<u32, String> {
        if let Some(&i) = self.stat_ix.get(name) {
            return Ok(i);
        }
        let span = arena_span(&mut self.plane, name)?;
        let i = self.plane.stat_meta.len() as u32;
        self.plane.stat_meta.push(StatMeta { id: i64::from(i), name: span, ..StatMeta::default() });
        self.stat_ix.insert(name.into(), i);
        Ok(i)
    }

    /// A string value's span, shared with earlier equal values.
    fn value_span(&mut self, s: &str) -> Result<Span, String> {
        let h = hash_bytes(s.as_bytes());
        if let Some(&span) = self.values.get(&h) {
            if self.plane.bytes(span) == s.as_bytes() {
                return Ok(span);
            }
            // A hash collision: store this one without sharing.
            return arena_span(&mut self.plane, s);
        }
        let span = arena_span(&mut self.plane, s)?;
        self.values.insert(h, span);
        Ok(span)
    }

    /// Turns the scratch args into stats, appended to `out`.
    fn stats(&mut self, args: &Args, out: &mut Vec<Stat>) -> Result<(), String> {
        for item in &args.items {
            let meta = self.stat_meta(args.key(item))?;
            let value = match item.2 {
                ArgVal::Str(a, b) => StatValue::Str(self.value_span(args.str(a, b))?),
                ArgVal::I64(v) => StatValue::I64(v),
                ArgVal::U64(v) => StatValue::U64(v),
                ArgVal::F64(v) => StatValue::F64(v),
            };
            out.push(Stat::new(meta, value));
        }
        Ok(())
    }
}

/// Counts of events skipped or mended, reported as warnings.
#[derive(Default)]
struct Counts {
    /// (phase, count) in first-appearance order.
    skipped: Vec<(String, u64)>,
    no_ph: u64,
    no_ts: u64,
    negative_dur: u64,
    unmatched_e: u64,
    unclosed_b: u64,
    /// The bare array ends without its `]`.
    unclosed_array: bool,
}

struct Builder {
    host: String,
    file_bytes: u64,
    source: Arc<Source>,
    planes: Vec<PlaneState>,
    pid_num: QuickMap<i64, usize>,
    pid_text: QuickMap<Box<str>, usize>,
    s: Scratch,
    stat_buf: Vec<Stat>,
    counts: Counts,
    /// Picoseconds subtracted from every time while reading: the first timed
    /// event's whole microseconds.
    base_ps: Option<i128>,
    /// Earliest start and latest end seen, relative to `base_ps`.
    min_ps: i64,
    max_ps: i64,
    /// The input is a bare array of events (its closing `]` may be missing).
    bare: bool,
    /// Inside an event object (for telling a cut between events from one inside).
    in_event: bool,
    /// Set when the top level is not a trace, with the reason.
    not_trace: Option<String>,
}

impl Builder {
    fn new(host: &str, file_bytes: u64) -> Builder {
        Builder {
            host: host.to_string(),
            file_bytes,
            source: Arc::new(Source::Owned(Vec::new())),
            planes: Vec::new(),
            pid_num: QuickMap::default(),
            pid_text: QuickMap::default(),
            s: Scratch::default(),
            stat_buf: Vec::new(),
            counts: Counts::default(),
            base_ps: None,
            min_ps: i64::MAX,
            max_ps: i64::MIN,
            bare: false,
            in_event: false,
            not_trace: None,
        }
    }

    fn parse<R: Read>(&mut self, text: R, name: &Path) -> Result<()> {
        let mut de = serde_json::Deserializer::from_reader(BufReader::with_capacity(1 << 16, text));
        let result = TopSeed(self).deserialize(&mut de).and_then(|()| de.end());
        match result {
            Ok(()) => Ok(()),
            // The Chrome trace format lets the array form end without its `]`.
            Err(e) if e.is_eof() && self.bare && !self.in_event => {
                self.counts.unclosed_array = true;
                Ok(())
            }
            Err(e) => Err(self.json_error(name, e)),
        }
    }

    fn json_error(&self, name: &Path, e: serde_json::Error) -> Error {
        use serde_json::error::Category;
        if let Some(reason) = &self.not_trace {
            return Error::new(
                format!("{} is not a Chrome trace JSON file: {reason}", name.display()),
                "pass a *.trace.json.gz, perfetto_trace.json.gz or trace .json file written by the profiler",
            );
        }
        match e.classify() {
            Category::Io => {
                let io: io::Error = e.into();
                match io.get_ref().and_then(|x| x.downcast_ref::<StreamError>()) {
                    Some(StreamError::Gzip(inner)) if inner.kind() == io::ErrorKind::UnexpectedEof => {
                        Error::corrupt(name, "gzip stream ends early")
                    }
                    Some(StreamError::Gzip(inner)) => Error::corrupt(name, format!("gzip data is corrupt ({inner})")),
                    Some(StreamError::TooBig) => Error::new(
                        format!("{} decompresses to more than {} GiB of JSON", name.display(), MAX_TEXT_BYTES >> 30),
                        "this is not a profile this reader can load; capture a shorter profile",
                    ),
                    Some(bomb @ StreamError::Bomb { .. }) => Error::new(
                        format!(
                            "{} expands over {MAX_EXPANSION}× ({bomb}; real traces expand about 15×), \
                             so it looks like a gzip bomb",
                            name.display(),
                        ),
                        "if you trust the file, decompress it (`gunzip -k FILE`) and pass the .json",
                    ),
                    None => Error::io(name, &io),
                }
            }
            Category::Eof => {
                Error::corrupt(name, format!("JSON ends early, at line {} column {}", e.line(), e.column()))
            }
            Category::Syntax => Error::corrupt(name, format!("JSON syntax error: {e}")),
            Category::Data => Error::corrupt(name, format!("bad trace event: {e}")),
        }
    }

    /// The plane of a pid, made on first sight.
    fn plane(&mut self, pid: Key) -> usize {
        match pid {
            Key::Text => {
                if let Some(&i) = self.pid_text.get(self.s.pid_text.as_str()) {
                    return i;
                }
                let i = self.planes.len();
                let name = self.s.pid_text.clone();
                self.planes.push(PlaneState::new(-1 - i as i64, name, self.source.clone()));
                self.pid_text.insert(self.s.pid_text.as_str().into(), i);
                i
            }
            Key::Num(_) | Key::Absent => {
                let p = if let Key::Num(p) = pid { p } else { 0 };
                if let Some(&i) = self.pid_num.get(&p) {
                    return i;
                }
                let i = self.planes.len();
                self.planes.push(PlaneState::new(p, p.to_string(), self.source.clone()));
                self.pid_num.insert(p, i);
                i
            }
        }
    }

    fn find_plane(&self, pid: Key) -> Option<usize> {
        match pid {
            Key::Text => self.pid_text.get(self.s.pid_text.as_str()).copied(),
            Key::Num(p) => self.pid_num.get(&p).copied(),
            Key::Absent => self.pid_num.get(&0).copied(),
        }
    }

    /// A time relative to the base, made on the first timed event.
    fn rel(&mut self, ps: i128) -> Result<i64, String> {
        let base = *self.base_ps.get_or_insert(ps.div_euclid(PS_PER_US) * PS_PER_US);
        i64::try_from(ps - base).map_err(|_| {
            format!(
                "ts {} µs is more than 106 days away from the first event's ts {} µs",
                ps.div_euclid(PS_PER_US),
                base / PS_PER_US
            )
        })
    }

    fn see(&mut self, start: i64, end: i64) {
        self.min_ps = self.min_ps.min(start);
        self.max_ps = self.max_ps.max(end);
    }

    fn skip(&mut self, what: Option<&str>) {
        match what {
            Some(ph) => match self.counts.skipped.iter_mut().find(|(p, _)| p == ph) {
                Some((_, n)) => *n += 1,
                None => self.counts.skipped.push((ph.to_string(), 1)),
            },
            None => self.counts.no_ph += 1,
        }
    }

    /// Files the event in the scratch.
    fn event_done(&mut self) -> Result<(), String> {
        if !self.s.has_ph {
            self.skip(None);
            return Ok(());
        }
        enum Ph {
            Complete,
            Instant,
            Begin,
            End,
            Counter,
        }
        let ph = match self.s.ph.as_str() {
            "X" => Ph::Complete,
            "i" | "I" => Ph::Instant,
            "B" => Ph::Begin,
            "E" => Ph::End,
            "C" => Ph::Counter,
            "M" => return self.metadata(),
            _ => {
                let ph = std::mem::take(&mut self.s.ph);
                self.skip(Some(&ph));
                self.s.ph = ph;
                return Ok(());
            }
        };
        let Some(ts) = self.s.ts else {
            self.counts.no_ts += 1;
            return Ok(());
        };
        let start = self.rel(ts)?;

        if let Ph::End = ph {
            let Some(p) = self.find_plane(self.s.pid) else {
                self.counts.unmatched_e += 1;
                return Ok(());
            };
            let ps = &mut self.planes[p];
            let Some(l) = ps.find_line(self.s.tid, &self.s.tid_text) else {
                self.counts.unmatched_e += 1;
                return Ok(());
            };
            let Some(open) = ps.lines[l].open.pop() else {
                self.counts.unmatched_e += 1;
                return Ok(());
            };
            let mut stats = std::mem::take(&mut ps.lines[l].open_stats);
            ps.stats(&self.s.args, &mut stats)?;
            let mut dur = start - open.start;
            if dur < 0 {
                self.counts.negative_dur += 1;
                dur = 0;
            }
            ps.plane.lines[l].push_event(open.start, dur, open.meta, &stats[open.stats..]);
            stats.truncate(open.stats);
            ps.lines[l].open_stats = stats;
            self.see(open.start, start.max(open.start));
            return Ok(());
        }

        let dur = match (&ph, self.s.dur) {
            (Ph::Complete, Some(d)) if d < 0 => {
                self.counts.negative_dur += 1;
                0
            }
            (Ph::Complete, Some(d)) => {
                i64::try_from(d).map_err(|_| format!("dur {} µs is longer than 106 days", d / PS_PER_US))?
            }
            _ => 0,
        };
        let end = start
            .checked_add(dur)
            .ok_or_else(|| "ts + dur is more than 106 days after the first event's ts".to_string())?;
        self.see(start, end);

        let p = self.plane(self.s.pid);
        let ps = &mut self.planes[p];
        let mut stats = std::mem::take(&mut self.stat_buf);
        stats.clear();
        let filed = (|| {
            ps.stats(&self.s.args, &mut stats)?;
            match ph {
                Ph::Counter => {
                    let name: Cow<'_, str> = match self.s.id {
                        Key::Absent => Cow::Borrowed(&self.s.name),
                        Key::Num(id) => Cow::Owned(format!("{} {id}", self.s.name)),
                        Key::Text => Cow::Owned(format!("{} {}", self.s.name, self.s.id_text)),
                    };
                    let meta = ps.event_meta(&name)?;
                    let l = ps.counter_line(&name);
                    ps.plane.lines[l].push_event(start, 0, meta, &stats);
                }
                Ph::Begin => {
                    let meta = ps.event_meta(&self.s.name)?;
                    let l = ps.line(self.s.tid, &self.s.tid_text);
                    let ls = &mut ps.lines[l];
                    ls.open.push(Open { start, meta, stats: ls.open_stats.len() });
                    ls.open_stats.extend_from_slice(&stats);
                }
                _ => {
                    let meta = ps.event_meta(&self.s.name)?;
                    let l = ps.line(self.s.tid, &self.s.tid_text);
                    ps.plane.lines[l].push_event(start, dur, meta, &stats);
                }
            }
            Ok(())
        })();
        self.stat_buf = stats;
        filed
    }

    /// Files an `M` event: process and thread names.
    fn metadata(&mut self) -> Result<(), String> {
        let which = match self.s.name.as_str() {
            "process_name" => false,
            "thread_name" => true,
            _ => return Ok(()),
        };
        let p = self.plane(self.s.pid);
        let name = self.s.args.text_of("name").map(Cow::into_owned);
        let ps = &mut self.planes[p];
        if which {
            ps.name_line(self.s.tid, &self.s.tid_text, name);
        } else if let Some(name) = name {
            ps.plane.name = name;
        }
        Ok(())
    }

    fn finish(mut self) -> Result<Space> {
        let mut warnings = Vec::new();
        for ps in &mut self.planes {
            for (l, ls) in ps.lines.iter_mut().enumerate() {
                let line = &mut ps.plane.lines[l];
                for (i, open) in ls.open.iter().enumerate() {
                    let to = ls.open.get(i + 1).map_or(ls.open_stats.len(), |o| o.stats);
                    line.push_event(open.start, 0, open.meta, &ls.open_stats[open.stats..to]);
                    self.counts.unclosed_b += 1;
                }
                ls.open.clear();
                ls.open_stats.clear();
            }
        }

        // Keep times as written when they fit, else relative to the first event's µs.
        let base = self.base_ps.unwrap_or(0);
        let fits = self.min_ps > self.max_ps
            || (i128::from(self.min_ps) + base >= i128::from(i64::MIN)
                && i128::from(self.max_ps) + base <= i128::from(i64::MAX));
        let shift = if fits { base as i64 } else { 0 };

        for ps in &mut self.planes {
            ps.plane.empty_lines_not_kept = (ps.pending_num.len() + ps.pending_text.len()) as u64;
            for line in &mut ps.plane.lines {
                // `fits` above: no value saturates.
                line.shift_ps(shift);
                sort_line(line);
                line.finish();
            }
        }

        let c = &self.counts;
        if c.unclosed_array {
            warnings.push(
                "the event array has no closing `]` (the format allows this); read to the end of the file".to_string(),
            );
        }
        for (ph, n) in &c.skipped {
            warnings.push(format!("skipped {n} {} event{} (ph \"{ph}\")", phase_kind(ph), plural(*n)));
        }
        if c.no_ph > 0 {
            warnings.push(format!("skipped {} event{} without a ph", c.no_ph, plural(c.no_ph)));
        }
        if c.no_ts > 0 {
            warnings.push(format!("skipped {} event{} without a ts", c.no_ts, plural(c.no_ts)));
        }
        if c.unmatched_e > 0 {
            warnings.push(format!("ignored {} E event{} with no open B event", c.unmatched_e, plural(c.unmatched_e)));
        }
        if c.unclosed_b > 0 {
            warnings.push(format!(
                "{} B event{} never closed by an E event; kept with duration 0",
                c.unclosed_b,
                plural(c.unclosed_b)
            ));
        }
        if c.negative_dur > 0 {
            warnings.push(format!(
                "{} event{} with a negative duration; set to 0",
                c.negative_dur,
                plural(c.negative_dur)
            ));
        }
        Ok(Space {
            host: self.host,
            format: Format::TraceJson,
            planes: self.planes.into_iter().map(|p| p.plane).collect(),
            hostnames: Vec::new(),
            errors: Vec::new(),
            warnings,
            file_bytes: self.file_bytes,
        })
    }
}

fn plural(n: u64) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// What kind of event a skipped phase is, for warnings.
fn phase_kind(ph: &str) -> &'static str {
    match ph {
        "s" | "t" | "f" => "flow",
        "b" | "e" | "n" => "async",
        "S" | "T" | "p" | "F" => "legacy async",
        "N" | "O" | "D" => "object",
        "P" => "sample",
        "R" => "mark",
        "c" => "clock sync",
        "(" | ")" => "context",
        "V" | "v" => "memory dump",
        _ => "unknown",
    }
}

/// Sorts a line's events by start (stable), keeping stats in step.
fn sort_line(line: &mut Line) {
    let starts = line.starts();
    if starts.iter().zip(starts.iter().skip(1)).all(|(a, b)| a <= b) {
        return;
    }
    let mut order: Vec<u32> = (0..line.len() as u32).collect();
    order.sort_by_key(|&i| line.start_ps(i as usize));
    line.permute(&order);
}

// ---------------------------------------------------------------------------
// serde visitors: top level, event array, event, fields.

struct TopSeed<'a>(&'a mut Builder);

const NO_EVENTS: &str = "it has no traceEvents array";

impl TopSeed<'_> {
    fn not_trace<E: de::Error>(self, what: &str) -> Result<(), E> {
        let reason = format!("the file holds {what}, not a trace object or array of events");
        self.0.not_trace = Some(reason.clone());
        Err(E::custom(reason))
    }
}

impl<'de> DeserializeSeed<'de> for TopSeed<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for TopSeed<'_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a Chrome trace: an object with a traceEvents array, or an array of events")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut found = false;
        while let Some(is_events) = map.next_key_seed(KeyIs("traceEvents"))? {
            if is_events {
                map.next_value_seed(EventsSeed(&mut *self.0))?;
                found = true;
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        if !found {
            self.0.not_trace = Some(NO_EVENTS.to_string());
            return Err(de::Error::custom(NO_EVENTS));
        }
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<(), A::Error> {
        self.0.bare = true;
        EventsSeed(self.0).visit_seq(seq)
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<(), E> {
        self.not_trace("a boolean")
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<(), E> {
        self.not_trace("a number")
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<(), E> {
        self.not_trace("a number")
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<(), E> {
        self.not_trace("a number")
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<(), E> {
        self.not_trace("a string")
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        self.not_trace("null")
    }
}

/// A map key, compared with one expected name without allocating.
struct KeyIs(&'static str);

impl<'de> DeserializeSeed<'de> for KeyIs {
    type Value = bool;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KeyIs {
    type Value = bool;
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a key")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<bool, E> {
        Ok(v == self.0)
    }
}

struct EventsSeed<'a>(&'a mut Builder);

impl<'de> DeserializeSeed<'de> for EventsSeed<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for EventsSeed<'_> {
    type Value = ();
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("traceEvents to be an array of events")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element_seed(EventSeed(&mut *self.0))?.is_some() {}
        Ok(())
    }
}

struct EventSeed<'a>(&'a mut Builder);

impl<'de> DeserializeSeed<'de> for EventSeed<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for EventSeed<'_> {
    type Value = ();
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a trace event object")
    }

    /// A `null` element is ignored.
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let b = self.0;
        b.in_event = true;
        b.s.clear();
        let s = &mut b.s;
        let mut keys = 0usize;
        while let Some(field) = map.next_key_seed(FieldSeed)? {
            keys += 1;
            match field {
                Field::Name => map.next_value_seed(TextSeed { out: &mut s.name, what: "name" })?,
                Field::Ph => {
                    s.has_ph = true;
                    map.next_value_seed(TextSeed { out: &mut s.ph, what: "ph" })?
                }
                Field::Ts => s.ts = map.next_value_seed(TimeSeed("ts"))?,
                Field::Dur => s.dur = map.next_value_seed(TimeSeed("dur"))?,
                Field::Pid => s.pid = map.next_value_seed(KeySeed { out: &mut s.pid_text, what: "pid" })?,
                Field::Tid => s.tid = map.next_value_seed(KeySeed { out: &mut s.tid_text, what: "tid" })?,
                Field::Id => s.id = map.next_value_seed(KeySeed { out: &mut s.id_text, what: "id" })?,
                Field::Args => map.next_value_seed(ArgsSeed(&mut s.args))?,
                Field::Other => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        b.in_event = false;
        if keys == 0 {
            // `{}`: some writers end the array with one.
            return Ok(());
        }
        b.event_done().map_err(de::Error::custom)
    }
}

enum Field {
    Name,
    Ph,
    Ts,
    Dur,
    Pid,
    Tid,
    Id,
    Args,
    Other,
}

struct FieldSeed;

impl<'de> DeserializeSeed<'de> for FieldSeed {
    type Value = Field;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Field, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for FieldSeed {
    type Value = Field;
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("an event field name")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Field, E> {
        Ok(match v {
            "name" => Field::Name,
            "ph" => Field::Ph,
            "ts" => Field::Ts,
            "dur" => Field::Dur,
            "pid" => Field::Pid,
            "tid" => Field::Tid,
            "id" => Field::Id,
            "args" => Field::Args,
            _ => Field::Other,
        })
    }
}

/// A string field, copied into a reused buffer; `null` leaves it empty.
struct TextSeed<'a> {
    out: &'a mut String,
    what: &'static str,
}

impl<'de> DeserializeSeed<'de> for TextSeed<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for TextSeed<'_> {
    type Value = ();
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "a string {}", self.what)
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<(), E> {
        self.out.clear();
        self.out.push_str(v);
        Ok(())
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        self.out.clear();
        Ok(())
    }
}

/// `ts` or `dur`: the number's exact text, converted to picoseconds.
struct TimeSeed(&'static str);

impl<'de> DeserializeSeed<'de> for TimeSeed {
    type Value = Option<i128>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Option<i128>, D::Error> {
        let raw = <Box<RawValue>>::deserialize(d)?;
        parse_time(self.0, raw.get()).map_err(de::Error::custom)
    }
}

/// `pid`, `tid` or `id`: an integer, or a string copied into a reused buffer.
struct KeySeed<'a> {
    out: &'a mut String,
    what: &'static str,
}

impl<'de> DeserializeSeed<'de> for KeySeed<'_> {
    type Value = Key;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Key, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for KeySeed<'_> {
    type Value = Key;
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "an integer or string {}", self.what)
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Key, E> {
        Ok(Key::Num(v))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Key, E> {
        match i64::try_from(v) {
            Ok(v) => Ok(Key::Num(v)),
            Err(_) => self.visit_str(&v.to_string()),
        }
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Key, E> {
        if v.fract() == 0.0 && v.abs() < 9.0e15 {
            Ok(Key::Num(v as i64))
        } else {
            Err(E::invalid_type(de::Unexpected::Float(v), &self))
        }
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Key, E> {
        self.out.clear();
        self.out.push_str(v);
        Ok(Key::Text)
    }
    fn visit_unit<E: de::Error>(self) -> Result<Key, E> {
        Ok(Key::Absent)
    }
}

/// `args`: an object whose values become stats; `null` means none.
struct ArgsSeed<'a>(&'a mut Args);

impl<'de> DeserializeSeed<'de> for ArgsSeed<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for ArgsSeed<'_> {
    type Value = ();
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("args to be an object")
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let args = self.0;
        loop {
            let a = args.text.len();
            if map.next_key_seed(AppendKey(&mut args.text))?.is_none() {
                break;
            }
            let b = args.text.len();
            if b > u32::MAX as usize {
                return Err(de::Error::custom("an event's args are larger than 4 GiB"));
            }
            if let Some(v) = map.next_value_seed(ArgSeed(&mut args.text))? {
                if args.text.len() > u32::MAX as usize {
                    return Err(de::Error::custom("an event's args are larger than 4 GiB"));
                }
                args.items.push((a as u32, b as u32, v));
            } else {
                args.text.truncate(a);
            }
        }
        Ok(())
    }
}

/// An args key, appended to the args text.
struct AppendKey<'a>(&'a mut String);

impl<'de> DeserializeSeed<'de> for AppendKey<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for AppendKey<'_> {
    type Value = ();
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a string key")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<(), E> {
        self.0.push_str(v);
        Ok(())
    }
}

/// One args value; strings and nested JSON are appended to the args text.
struct ArgSeed<'a>(&'a mut String);

impl<'de> DeserializeSeed<'de> for ArgSeed<'_> {
    type Value = Option<ArgVal>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Option<ArgVal>, D::Error> {
        d.deserialize_any(self)
    }
}

impl ArgSeed<'_> {
    fn text<E: de::Error>(self, v: &str) -> Result<Option<ArgVal>, E> {
        let a = self.0.len();
        self.0.push_str(v);
        Ok(Some(ArgVal::Str(a as u32, self.0.len() as u32)))
    }
}

impl<'de> Visitor<'de> for ArgSeed<'_> {
    type Value = Option<ArgVal>;
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("an args value")
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Self::Value, E> {
        Ok(Some(ArgVal::I64(i64::from(v))))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
        Ok(Some(ArgVal::I64(v)))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
        Ok(Some(match i64::try_from(v) {
            Ok(v) => ArgVal::I64(v),
            Err(_) => ArgVal::U64(v),
        }))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
        Ok(Some(ArgVal::F64(v)))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        self.text(v)
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        let v = serde_json::Value::deserialize(de::value::SeqAccessDeserializer::new(seq))?;
        self.text(&v.to_string())
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        let v = serde_json::Value::deserialize(de::value::MapAccessDeserializer::new(map))?;
        self.text(&v.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn parse(text: &str) -> Result<Space> {
        parse_trace_json(text.as_bytes(), "host0", Path::new("t.json"))
    }

    #[test]
    fn byte_order_marks_and_utf16_read_as_the_utf8_text() {
        let text = r#"{"traceEvents":[{"ph":"X","name":"step \u00e9 😀","pid":1,"tid":2,"ts":1,"dur":3}]}"#;
        let plain = parse(text).unwrap();
        let names = |s: &Space| -> Vec<String> {
            s.planes.iter().flat_map(|p| p.event_meta.iter().map(|m| p.text(m.name).to_string())).collect()
        };
        let mut bom = vec![0xef, 0xbb, 0xbf];
        bom.extend_from_slice(text.as_bytes());
        let utf16 = |big: bool, mark: bool| -> Vec<u8> {
            let mut out = Vec::new();
            let units = (if mark { "\u{feff}" } else { "" }).encode_utf16().chain(text.encode_utf16());
            for u in units {
                out.extend_from_slice(&if big { u.to_be_bytes() } else { u.to_le_bytes() });
            }
            out
        };
        for (what, bytes) in [
            ("utf-8 mark", bom),
            ("utf-16le mark", utf16(false, true)),
            ("utf-16be mark", utf16(true, true)),
            ("utf-16le", utf16(false, false)),
        ] {
            let got = parse_trace_json(&bytes, "host0", Path::new("t.json")).unwrap_or_else(|e| panic!("{what}: {e}"));
            assert_eq!(got.event_count(), plain.event_count(), "{what}");
            assert_eq!(names(&got), names(&plain), "{what}");
        }
    }

    fn gzip(bytes: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(bytes).unwrap();
        e.finish().unwrap()
    }

    /// (name, start, duration) of each event on a line.
    fn events(p: &Plane, l: &Line) -> Vec<(String, i64, i64)> {
        (0..l.len()).map(|i| (p.event_name(l.meta(i)).to_string(), l.start_ps(i), l.duration_ps(i))).collect()
    }

    fn stat(p: &Plane, l: &Line, i: usize, name: &str) -> Option<StatValue> {
        let id = p.stat_id(name)?;
        l.event_stats(i).find(|s| s.meta() == id).map(|s| s.value())
    }

    fn err(text: &str) -> String {
        err_of(parse(text))
    }

    fn err_of(r: Result<Space>) -> String {
        match r {
            Ok(_) => panic!("parsed without an error"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn exact_microseconds_to_picoseconds() {
        let ps = |t: &str| us_text_to_ps(t);
        assert_eq!(ps("1.5"), Some(1_500_000));
        assert_eq!(ps("0"), Some(0));
        assert_eq!(ps("-0"), Some(0));
        assert_eq!(ps("12"), Some(12_000_000));
        assert_eq!(ps("-1.5"), Some(-1_500_000));
        assert_eq!(ps("1234.567"), Some(1_234_567_000));
        assert_eq!(ps("0.0000005"), Some(1));
        assert_eq!(ps("0.0000004999"), Some(0));
        assert_eq!(ps("1.2345675"), Some(1_234_568));
        assert_eq!(ps("-1.2345675"), Some(-1_234_568));
        assert_eq!(ps("1e-6"), Some(1));
        assert_eq!(ps("1E3"), Some(1_000_000_000));
        assert_eq!(ps("2.5e+2"), Some(250_000_000));
        assert_eq!(ps("1e-9999999999"), Some(0));
        assert_eq!(ps("0e999999999"), Some(0));
        assert_eq!(ps("1700000000123456.789"), Some(1_700_000_000_123_456_789_000));
        assert_eq!(ps("1.7e15"), Some(1_700_000_000_000_000_000_000));
        assert_eq!(ps("1e40"), None);
        assert_eq!(ps("1e999999999"), None);
        for bad in ["", "-", ".5", "1.", "1e", "1e+", "abc", "1x", "--1", "1.2.3", "0x10", " 1"] {
            assert_eq!(ps(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn every_phase() {
        let space = parse(
            r#"{"displayTimeUnit":"ns","metadata":{"a":[1,2]},"systemTraceEvents":"x","traceEvents":[
            {"ph":"X","pid":1,"tid":2,"ts":10,"dur":5,"name":"fusion"},
            {"ph":"i","pid":1,"tid":2,"ts":11,"name":"mark","s":"t"},
            {"ph":"I","pid":1,"tid":2,"ts":12,"name":"mark"},
            {"ph":"B","pid":1,"tid":3,"ts":20,"name":"outer"},
            {"ph":"E","pid":1,"tid":3,"ts":30},
            {"ph":"C","pid":1,"ts":40,"name":"mem","args":{"bytes":100,"peak":200}},
            {"ph":"C","pid":1,"ts":41,"name":"mem","args":{"bytes":150}},
            {"ph":"s","pid":1,"tid":2,"ts":10,"id":1,"name":"flow"},
            {"ph":"t","pid":1,"tid":2,"ts":10,"id":1,"name":"flow"},
            {"ph":"f","pid":1,"tid":2,"ts":10,"id":1,"name":"flow"},
            {"ph":"s","pid":1,"tid":2,"ts":11,"id":2,"name":"flow"},
            {"ph":"b","pid":1,"tid":2,"ts":10,"id":1,"name":"async","cat":"c"},
            {"ph":"M","pid":1,"name":"process_sort_index","args":{"sort_index":3}},
            {"ph":"M","pid":1,"tid":2,"name":"thread_name","args":{"name":"main"}},
            {"ph":"M","pid":1,"name":"process_name","args":{"name":"/host:CPU"}},
            {}]}"#,
        )
        .unwrap();
        assert_eq!(space.host, "host0");
        assert_eq!(space.format, Format::TraceJson);
        assert_eq!(space.planes.len(), 1);
        let p = &space.planes[0];
        assert_eq!((p.id, p.name.as_str()), (1, "/host:CPU"));
        let names: Vec<_> = p.lines.iter().map(|l| (l.id, l.name.as_str(), l.is_counter)).collect();
        assert_eq!(names, [(2, "main", false), (3, "3", false), (2, "mem", true)]);
        assert_eq!(
            events(p, &p.lines[0]),
            [("fusion".into(), 10_000_000, 5_000_000), ("mark".into(), 11_000_000, 0), ("mark".into(), 12_000_000, 0)]
        );
        assert_eq!(events(p, &p.lines[1]), [("outer".into(), 20_000_000, 10_000_000)]);
        let c = &p.lines[2];
        assert_eq!(events(p, c), [("mem".into(), 40_000_000, 0), ("mem".into(), 41_000_000, 0)]);
        assert_eq!(stat(p, c, 0, "bytes"), Some(StatValue::I64(100)));
        assert_eq!(stat(p, c, 0, "peak"), Some(StatValue::I64(200)));
        assert_eq!(stat(p, c, 1, "bytes"), Some(StatValue::I64(150)));
        // Counters are not events: X + i + I + B.
        assert_eq!(space.event_count(), 4);
        assert_eq!(
            space.warnings,
            [
                "skipped 2 flow events (ph \"s\")",
                "skipped 1 flow event (ph \"t\")",
                "skipped 1 flow event (ph \"f\")",
                "skipped 1 async event (ph \"b\")"
            ]
        );
        for line in &p.lines {
            assert_eq!(line.stat_starts().len(), line.len() + 1);
        }
    }

    #[test]
    fn threads_named_without_events_past_the_cap_are_counted() {
        // MAX_EMPTY_LINES + 10 named threads, then events on the first and on two past
        // the cap: those get their lines (with their names) at their first event.
        let n = MAX_EMPTY_LINES as i64 + 10;
        let mut events: Vec<String> = (0..n)
            .map(|t| format!(r#"{{"ph":"M","pid":1,"tid":{t},"name":"thread_name","args":{{"name":"w{t}"}}}}"#))
            .collect();
        events.push(r#"{"ph":"M","pid":1,"tid":"io","name":"thread_name","args":{"name":"reader"}}"#.into());
        for tid in ["0", &(n - 1).to_string(), r#""io""#] {
            events.push(format!(r#"{{"ph":"X","pid":1,"tid":{tid},"ts":1,"dur":1,"name":"a"}}"#));
        }
        let space = parse(&format!("[{}]", events.join(","))).unwrap();
        let plane = &space.planes[0];
        assert_eq!(plane.lines.len(), MAX_EMPTY_LINES + 2);
        assert_eq!(plane.empty_lines_not_kept, 10 + 1 - 2);
        let last: Vec<_> = plane.lines[MAX_EMPTY_LINES - 1..].iter().map(|l| (l.name.as_str(), l.len())).collect();
        assert_eq!(
            last,
            [(format!("w{}", MAX_EMPTY_LINES - 1).as_str(), 0), (&format!("w{}", n - 1), 1), ("reader", 1)]
        );
        assert_eq!((plane.lines[0].name.as_str(), plane.lines[0].len()), ("w0", 1));
        assert_eq!(space.event_count(), 3);
    }

    #[test]
    fn planes_and_lines_in_first_appearance_order() {
        let space = parse(
            r#"[{"ph":"X","pid":7,"tid":1,"ts":1,"dur":1,"name":"a"},
                {"ph":"X","pid":"gpu","tid":"stream 1","ts":1,"dur":1,"name":"k"},
                {"ph":"X","pid":3,"tid":9,"ts":1,"dur":1,"name":"b"},
                {"ph":"X","pid":7,"tid":0,"ts":1,"dur":1,"name":"a"},
                {"ph":"M","pid":3,"name":"process_name","args":{"name":"three"}},
                {"ph":"M","pid":8,"name":"process_name","args":{"name":"eight"}},
                {"ph":"M","pid":7,"tid":5,"name":"thread_name","args":{"name":"idle"}}]"#,
        )
        .unwrap();
        let planes: Vec<_> = space.planes.iter().map(|p| (p.id, p.name.as_str())).collect();
        assert_eq!(planes, [(7, "7"), (-2, "gpu"), (3, "three"), (8, "eight")]);
        let lines: Vec<_> = space.planes[0].lines.iter().map(|l| (l.id, l.name.as_str(), l.len())).collect();
        assert_eq!(lines, [(1, "1", 1), (0, "0", 1), (5, "idle", 0)]);
        assert_eq!(space.planes[1].lines[0].name, "stream 1");
        assert!(space.planes[3].lines.is_empty());
        assert_eq!(space.event_count(), 4);
        assert!(space.warnings.is_empty());
    }

    #[test]
    fn begin_end_nesting() {
        let space = parse(
            r#"{"traceEvents":[
            {"ph":"E","pid":1,"tid":1,"ts":1},
            {"ph":"B","pid":1,"tid":1,"ts":10,"name":"outer","args":{"a":1}},
            {"ph":"B","pid":1,"tid":1,"ts":12,"name":"inner","args":{"b":2}},
            {"ph":"B","pid":1,"tid":2,"ts":13,"name":"other"},
            {"ph":"E","pid":1,"tid":1,"ts":15,"args":{"c":3}},
            {"ph":"E","pid":1,"tid":1,"ts":20.5},
            {"ph":"E","pid":1,"tid":1,"ts":21},
            {"ph":"E","pid":2,"tid":1,"ts":21},
            {"ph":"B","pid":1,"tid":1,"ts":30,"name":"open1","args":{"x":"y"}},
            {"ph":"B","pid":1,"tid":1,"ts":31,"name":"open2","args":{"z":true}}
            ]}"#,
        )
        .unwrap();
        let p = &space.planes[0];
        let l = &p.lines[0];
        assert_eq!(
            events(p, l),
            [
                ("outer".into(), 10_000_000, 10_500_000),
                ("inner".into(), 12_000_000, 3_000_000),
                ("open1".into(), 30_000_000, 0),
                ("open2".into(), 31_000_000, 0),
            ]
        );
        assert_eq!(stat(p, l, 0, "a"), Some(StatValue::I64(1)));
        assert_eq!(stat(p, l, 0, "b"), None);
        assert_eq!(stat(p, l, 1, "b"), Some(StatValue::I64(2)));
        assert_eq!(stat(p, l, 1, "c"), Some(StatValue::I64(3)));
        assert_eq!(l.event_stats(2).count(), 1);
        assert_eq!(stat(p, l, 3, "z"), Some(StatValue::I64(1)));
        assert_eq!(events(p, &p.lines[1]), [("other".into(), 13_000_000, 0)]);
        assert_eq!(space.event_count(), 5);
        assert_eq!(
            space.warnings,
            ["ignored 3 E events with no open B event", "3 B events never closed by an E event; kept with duration 0"]
        );
    }

    #[test]
    fn events_sorted_with_their_stats() {
        let space = parse(
            r#"[{"ph":"X","pid":1,"tid":1,"ts":30,"dur":1,"name":"c","args":{"n":3}},
                {"ph":"X","pid":1,"tid":1,"ts":10,"dur":1,"name":"a","args":{"n":1,"s":"one"}},
                {"ph":"X","pid":1,"tid":1,"ts":20,"dur":1,"name":"b"},
                {"ph":"X","pid":1,"tid":1,"ts":10,"dur":2,"name":"a2","args":{"n":4}}]"#,
        )
        .unwrap();
        let p = &space.planes[0];
        let l = &p.lines[0];
        let names: Vec<_> = events(p, l).into_iter().map(|e| e.0).collect();
        assert_eq!(names, ["a", "a2", "b", "c"]);
        assert_eq!(stat(p, l, 0, "n"), Some(StatValue::I64(1)));
        assert_eq!(p.stat_str(&l.event_stats(0).nth(1).unwrap()), Some("one"));
        assert_eq!(stat(p, l, 1, "n"), Some(StatValue::I64(4)));
        assert_eq!(l.event_stats(2).count(), 0);
        assert_eq!(stat(p, l, 3, "n"), Some(StatValue::I64(3)));
        assert_eq!(l.stat_starts(), [0, 2, 3, 3, 4]);
        // Names and stat names are interned once per plane.
        assert_eq!(p.event_meta.len(), 4);
        assert_eq!(p.stat_meta.len(), 2);
        assert_eq!(p.event_meta[1].id, 1);
    }

    #[test]
    fn arg_values() {
        let space = parse(
            r#"[{"ph":"X","pid":1,"tid":1,"ts":1,"dur":1,"name":"e","args":{
                "s":"text \"q\" \u00e9","i":-5,"u":18446744073709551615,"f":2.5,"t":true,"no":false,
                "null":null,"arr":[1, "a", {"k": null}],"obj":{"x": [ ]},"big":1e300,"rep":"text \"q\" \u00e9"}}]"#,
        )
        .unwrap();
        let p = &space.planes[0];
        let l = &p.lines[0];
        let s = |n| stat(p, l, 0, n);
        let text = |n| p.stat_str(&l.event_stats(0).nth(p.stat_id(n).unwrap() as usize).unwrap()).unwrap().to_string();
        assert_eq!(text("s"), "text \"q\" é");
        assert_eq!(s("i"), Some(StatValue::I64(-5)));
        assert_eq!(s("u"), Some(StatValue::U64(u64::MAX)));
        assert_eq!(s("f"), Some(StatValue::F64(2.5)));
        assert_eq!(s("t"), Some(StatValue::I64(1)));
        assert_eq!(s("no"), Some(StatValue::I64(0)));
        assert_eq!(s("null"), None);
        assert_eq!(p.stat_id("null"), None);
        assert_eq!(text("arr"), r#"[1,"a",{"k":null}]"#);
        assert_eq!(text("obj"), r#"{"x":[]}"#);
        assert_eq!(s("big"), Some(StatValue::F64(1e300)));
        // Repeated string values share one copy.
        assert_eq!(s("s"), s("rep"));
        assert_eq!(l.event_stats(0).count(), 10);
    }

    #[test]
    fn epoch_times_keep_their_precision() {
        let space = parse(
            r#"{"traceEvents":[
            {"ph":"X","pid":1,"tid":1,"ts":1700000000123456.789,"dur":0.5,"name":"a"},
            {"ph":"X","pid":1,"tid":1,"ts":1700000000123457.001,"dur":1000.25,"name":"b"},
            {"ph":"X","pid":1,"tid":2,"ts":1700000000123455.000001,"dur":1,"name":"c"}]}"#,
        )
        .unwrap();
        let p = &space.planes[0];
        assert_eq!(events(p, &p.lines[0]), [("a".into(), 789_000, 500_000), ("b".into(), 1_001_000, 1_000_250_000)]);
        assert_eq!(events(p, &p.lines[1]), [("c".into(), -999_999, 1_000_000)]);
    }

    #[test]
    fn times_that_fit_are_kept_as_written() {
        let space = parse(r#"[{"ph":"X","pid":1,"tid":1,"ts":5000000.5,"dur":1,"name":"a"},{"ph":"i","pid":1,"tid":1,"ts":-2,"name":"b"}]"#).unwrap();
        let p = &space.planes[0];
        assert_eq!(events(p, &p.lines[0]), [("b".into(), -2_000_000, 0), ("a".into(), 5_000_000_500_000, 1_000_000)]);
    }

    #[test]
    fn times_too_far_apart_are_an_error() {
        let e = err(
            r#"[{"ph":"X","pid":1,"tid":1,"ts":1,"dur":1,"name":"a"},{"ph":"X","pid":1,"tid":1,"ts":1e13,"dur":1,"name":"a"}]"#,
        );
        assert!(e.contains("106 days"), "{e}");
        let e = err(r#"[{"ph":"X","pid":1,"tid":1,"ts":1,"dur":1e13,"name":"a"}]"#);
        assert!(e.contains("106 days"), "{e}");
    }

    #[test]
    fn odd_but_valid_events() {
        let space = parse(
            r#"[null,{"ph":"X","pid":1,"tid":1,"ts":"3.5","name":null},
                {"ph":"X","pid":1,"tid":1,"ts":4,"dur":-1,"name":"neg"},
                {"ph":"X","pid":1,"tid":1,"dur":1,"name":"no ts"},
                {"ph":"X","pid":1,"tid":1,"ts":null,"name":"null ts"},
                {"pid":1,"tid":1,"ts":1,"name":"no ph"},
                {"ph":"X","ts":5,"dur":1,"name":"no pid"},
                {"ph":"X","pid":1.0,"tid":18446744073709551615,"ts":6,"name":"u64 tid","args":null},
                {"ph":"C","pid":1,"ts":7,"name":"ctr","id":3,"args":{"v":1}},
                {"ph":"C","pid":1,"ts":8,"name":"ctr","id":"x","args":{"v":2}}]"#,
        )
        .unwrap();
        let p = &space.planes[0];
        assert_eq!(events(p, &p.lines[0]), [("".into(), 3_500_000, 0), ("neg".into(), 4_000_000, 0)]);
        assert_eq!(p.lines[1].name, "18446744073709551615");
        assert_eq!(p.lines[2].name, "ctr 3");
        assert_eq!(p.lines[3].name, "ctr x");
        assert_eq!(space.planes[1].id, 0);
        assert_eq!(space.event_count(), 4);
        assert_eq!(
            space.warnings,
            [
                "skipped 1 event without a ph",
                "skipped 2 events without a ts",
                "1 event with a negative duration; set to 0"
            ]
        );
    }

    #[test]
    fn empty_traces() {
        for text in [r#"{"traceEvents":[]}"#, "[]", "[{}]", r#"{"traceEvents":[{}],"x":1}"#, " [ ] \n"] {
            let space = parse(text).unwrap();
            assert!(space.planes.is_empty(), "{text}");
            assert_eq!(space.event_count(), 0);
            assert!(space.warnings.is_empty(), "{text}");
        }
    }

    #[test]
    fn bare_array_may_miss_its_bracket() {
        for text in [
            r#"[{"ph":"X","pid":1,"tid":1,"ts":1,"dur":1,"name":"a"}"#,
            "[{\"ph\":\"X\",\"pid\":1,\"tid\":1,\"ts\":1,\"dur\":1,\"name\":\"a\"},\n",
        ] {
            let space = parse(text).unwrap();
            assert_eq!(space.event_count(), 1);
            assert_eq!(space.warnings.len(), 1);
        }
        // Cut inside an event is still an error.
        let e = err(r#"[{"ph":"X","pid":1,"tid":1,"ts":1,"dur":1,"name":"a"},{"ph":"X","#);
        assert!(e.contains("JSON ends early"), "{e}");
    }

    #[test]
    fn gzip_input() {
        let text = r#"{"traceEvents":[{"ph":"X","pid":1,"tid":1,"ts":1.25,"dur":1,"name":"a"},{"ph":"M","pid":1,"name":"process_name","args":{"name":"p"}}]}"#;
        let gz = gzip(text.as_bytes());
        let space = parse_trace_json(&gz, "h", Path::new("x.json")).unwrap();
        assert_eq!(space.file_bytes, gz.len() as u64);
        assert_eq!(space.planes[0].name, "p");
        assert_eq!(space.planes[0].lines[0].starts().to_vec(), [1_250_000]);

        // Several gzip members are one stream.
        let (a, b) = text.split_at(40);
        let mut two = gzip(a.as_bytes());
        two.extend(gzip(b.as_bytes()));
        assert_eq!(parse_trace_json(&two, "h", Path::new("x")).unwrap().event_count(), 1);

        // From a file, whatever its name.
        let dir = std::env::temp_dir().join(format!("stepscope-trace-json-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("t.json");
        std::fs::write(&path, &gz).unwrap();
        let space = read_trace_json(&path, "h").unwrap();
        assert_eq!((space.event_count(), space.file_bytes), (1, gz.len() as u64));
        std::fs::write(&path, text).unwrap();
        assert_eq!(read_trace_json(&path, "h").unwrap().event_count(), 1);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn gzip_bombs_are_refused_early() {
        // A 256 MiB event name in a ~256 KB file: refused once the text passes 16 MiB,
        // before the name is buffered whole.
        let member = gzip(&vec![b'a'; 1 << 20]);
        let mut bomb = gzip(br#"{"traceEvents":[{"ph":"X","pid":1,"tid":1,"ts":1,"dur":1,"name":""#);
        for _ in 0..256 {
            bomb.extend_from_slice(&member);
        }
        bomb.extend(gzip(br#""}]}"#));
        let e = err_of(parse_trace_json(&bomb, "h", Path::new("bomb.json.gz")));
        assert!(e.contains("gzip bomb") && e.contains("gunzip"), "{e}");
        // Small files may still expand past 32× up to 16 MiB, and plain text has no limit.
        let mut events = String::from("[");
        for _ in 0..20_000 {
            events.push_str(r#"{"ph":"X","pid":1,"tid":1,"ts":1,"dur":1,"name":"a"},"#);
        }
        events.push_str("{}]");
        let gz = gzip(events.as_bytes());
        assert!(events.len() > 32 * gz.len(), "{} vs {}", events.len(), gz.len());
        assert_eq!(parse_trace_json(&gz, "h", Path::new("x")).unwrap().event_count(), 20_000);
    }

    #[test]
    fn bad_gzip() {
        let text: String = std::iter::once("[".to_string())
            .chain((0..2000).map(|i| format!(r#"{{"ph":"X","pid":1,"tid":{i},"ts":{i},"dur":1,"name":"e{i}"}},"#)))
            .chain(std::iter::once("{}]".to_string()))
            .collect();
        let gz = gzip(text.as_bytes());
        for cut in [2, 10, gz.len() / 2, gz.len() - 1, gz.len() - 4] {
            let e = err_of(parse_trace_json(&gz[..cut], "h", Path::new("t.json.gz")));
            assert!(e.contains("gzip stream ends early"), "cut {cut}: {e}");
        }
        let mut bad = gz.clone();
        let n = bad.len();
        bad[n - 6] ^= 0xff; // checksum
        let e = err_of(parse_trace_json(&bad, "h", Path::new("t.json.gz")));
        assert!(e.contains("gzip data is corrupt"), "{e}");
        let mut bad = gz;
        bad[3] = 0xe0; // reserved flag bits
        assert!(parse_trace_json(&bad, "h", Path::new("t.json.gz")).is_err());
    }

    #[test]
    fn bad_input_is_an_error() {
        let cases: &[(&str, &str)] = &[
            ("", "the file is empty"),
            ("hello", "JSON syntax error"),
            ("\u{0}\u{1}garbage", "JSON syntax error"),
            ("   ", "JSON ends early"),
            (r#"{"traceEvents":[{"ph":"X","pid":1,"#, "JSON ends early"),
            (r#"{"traceEvents":[{"ph":"X","pid":1,"tid":1,"ts":1}"#, "JSON ends early"),
            (r#"{"traceEvents":[]"#, "JSON ends early"),
            (r#"{"a":1}"#, "no traceEvents array"),
            ("{}", "no traceEvents array"),
            ("5", "not a Chrome trace JSON file"),
            ("\"x\"", "not a Chrome trace JSON file"),
            ("null", "not a Chrome trace JSON file"),
            (r#"{"traceEvents":5}"#, "traceEvents to be an array"),
            (r#"{"traceEvents":{}}"#, "traceEvents to be an array"),
            (r#"[5]"#, "a trace event object"),
            (r#"[[]]"#, "a trace event object"),
            (r#"[{"ph":"X","ts":"abc"}]"#, "ts is \"abc\", not a number"),
            (r#"[{"ph":"X","ts":{}}]"#, "ts is {}, not a number"),
            (r#"[{"ph":"X","ts":1,"dur":true}]"#, "dur is true"),
            (r#"[{"ph":"X","ts":1e99}]"#, "too large"),
            (r#"[{"ph":"X","pid":{},"ts":1}]"#, "integer or string pid"),
            (r#"[{"ph":"X","tid":[1],"ts":1}]"#, "integer or string tid"),
            (r#"[{"ph":"X","pid":1.5,"ts":1}]"#, "integer or string pid"),
            (r#"[{"ph":5,"ts":1}]"#, "string ph"),
            (r#"[{"ph":"X","name":[],"ts":1}]"#, "string name"),
            (r#"[{"ph":"X","ts":1,"args":5}]"#, "args to be an object"),
            (r#"[{"ph":"X","ts":1,"args":{"a":[1,}}]"#, "JSON syntax error"),
            (r#"[{"ph":"X","ts":1}] x"#, "trailing characters"),
            (r#"[{"ph":"X","ts":1}]]"#, "trailing characters"),
            ("[\"\\ud800\"]", "JSON syntax error"),
        ];
        for (text, want) in cases {
            let e = err(text);
            assert!(e.contains(want), "{text:?}: {e}");
            assert!(e.contains("t.json"), "{text:?}: {e}");
            assert!(!e.contains('\n'), "{text:?}: {e}");
        }
        // Deep nesting hits serde_json's recursion limit, not the stack.
        let deep = format!(r#"[{{"ph":"X","ts":1,"args":{{"a":{}{}}}}}]"#, "[".repeat(100_000), "]".repeat(100_000));
        assert!(err(&deep).contains("recursion limit"));
        assert!(parse_trace_json(&[0xff, 0xfe, 0x00], "h", Path::new("t.json")).is_err());
        let e = err_of(read_trace_json(Path::new("/nonexistent/stepscope/t.json"), "h"));
        assert!(e.starts_with("cannot read"), "{e}");
    }

    #[test]
    fn error_names_the_place() {
        let e = err("[\n{\"ph\":\"X\",\"ts\":1},\n{\"ph\":\"X\",\"ts\":\"abc\"}]");
        assert!(e.contains("line 3"), "{e}");
        assert!(e.starts_with("t.json is not a readable profile: "), "{e}");
    }
}
