//! The XSpace (`*.xplane.pb`) reader.
//!
//! The file is memory-mapped and walked once at the top level to find the planes;
//! planes are then decoded in parallel, and within a plane its metadata first, then
//! its lines in parallel. A line longer than one thread's share of the file (a GPU
//! capture's `python` tracer line can hold 90 % of the events) is cut into parts of
//! whole column blocks by a quick walk over its event lengths, and the parts are read
//! in parallel and joined. Each line's events go straight into columns; strings stay
//! in the mapped file as spans.

use std::io::Read;
use std::ops::Range;
use std::path::Path;
use std::sync::Arc;

use rayon::prelude::*;

use crate::column::{Column, BLOCK};
use crate::error::{Error, Result};
use crate::mem::prefault_spare;
use crate::model::{
    EventMeta, Format, IdMap, Line, Plane, Progress, Source, Space, Span, Stat, StatMeta, StatValue, MAX_STAT_LEN,
};
use crate::wire::{Wire, WireError, WireResult, FIXED64, LEN, VARINT};

/// Decoded lines give their bytes back to the kernel every this many bytes
/// ([`Source::release`]).
const RELEASE_EVERY_BYTES: usize = 8 << 20;

/// Encoded size of a small event stat (key, length, metadata id, value), bytes.
const STAT_BYTES_TYPICAL: usize = 6;

/// Encoded size of a small event (key, length, metadata id, offset, duration), bytes.
const EVENT_BYTES_TYPICAL: usize = 12;

/// A line's columns are sized for its whole length once this many of its bytes are read.
const SIZE_SAMPLE_BYTES: usize = 1 << 20;

/// Most events or stats reserved ahead for one line; beyond, the columns grow.
const MAX_RESERVED: usize = 1 << 28;

/// The key byte of an XLine's events (field 4, length-delimited).
const EVENT_KEY: u8 = 4 << 3 | LEN;

/// Lines shorter than this are never read in parts ([`decode_line_split`]).
const SPLIT_LINE_BYTES: usize = 16 << 20;

/// Dense index used for an event whose metadata id the plane does not define.
const UNKNOWN_META: u32 = u32::MAX;

/// Most bytes a single gzip-compressed string stat may expand to.
const MAX_GUNZIP_BYTES: u64 = 256 << 20;

/// Gzip bomb guard: a compressed string stat keeps at most 32× its compressed size
/// (and at least 4 KiB), so the text of all of them stays within ~32× the file.
const MAX_GUNZIP_EXPANSION: u64 = 32;
const MIN_GUNZIP_LIMIT: u64 = 4 << 10;

/// Reads `<host>.xplane.pb`; the host name comes from the file name.
pub fn read_xspace(path: &Path, progress: &Progress) -> Result<Space> {
    let file = std::fs::File::open(path).map_err(|e| Error::io(path, &e))?;
    let len = file.metadata().map_err(|e| Error::io(path, &e))?.len();
    if len == 0 {
        return Err(Error::new(
            format!("{} is empty", path.display()),
            "the capture did not finish writing; capture the profile again",
        ));
    }
    // SAFETY: the map is read-only; a file truncated by another process while mapped
    // is outside what any reader can defend against, as for every mmap-based tool.
    let map = unsafe { memmap2::Mmap::map(&file) }.map_err(|e| Error::io(path, &e))?;
    let host = host_from_file_name(path);
    decode_xspace(Arc::new(Source::Mapped(map)), &host, progress).map_err(|e| match e {
        DecodeError::Wire(w) if w.at_byte < 8 && !w.what.contains("file ends early") => Error::new(
            format!("{} is not an XSpace profile ({} at byte {})", path.display(), w.what, w.at_byte),
            "pass a .xplane.pb written by jax.profiler.trace, a .trace.json.gz, or the log directory",
        ),
        DecodeError::NotXSpace => Error::new(
            format!("{} is not an XSpace profile: {e}", path.display()),
            "pass a .xplane.pb written by jax.profiler.trace, a .trace.json.gz, or the log directory",
        ),
        DecodeError::Wire(_) => Error::corrupt(path, e),
    })
}

/// The host name a JAX profile file stands for: its name without the profile suffix.
pub fn host_from_file_name(path: &Path) -> String {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    for suffix in [".xplane.pb", ".trace.json.gz", ".trace.json", ".json.gz", ".json"] {
        if let Some(stem) = name.strip_suffix(suffix) {
            return stem.to_string();
        }
    }
    name
}

/// Decodes a serialized XSpace held in `source`.
pub fn decode_xspace(source: Arc<Source>, host: &str, progress: &Progress) -> Result<Space, DecodeError> {
    let buf: &[u8] = &source;
    let mut w = Wire::new(buf);
    let mut plane_ranges = Vec::new();
    let mut space = Space {
        host: host.to_string(),
        format: Format::XSpace,
        planes: Vec::new(),
        hostnames: Vec::new(),
        errors: Vec::new(),
        warnings: Vec::new(),
        file_bytes: buf.len() as u64,
    };
    while !w.done() {
        let (field, wt) = w.key()?;
        match field {
            1 => plane_ranges.push(w.bytes(wt)?),
            2 => space.errors.push(w.string(wt)?),
            3 => space.warnings.push(w.string(wt)?),
            4 => space.hostnames.push(w.string(wt)?),
            _ => w.skip(wt)?,
        }
    }
    if plane_ranges.is_empty() && !buf.is_empty() && space.hostnames.is_empty() {
        return Err(DecodeError::NotXSpace);
    }
    // A line longer than a thread's fair share of the file would keep the other
    // threads waiting: such lines are read in parts.
    let split_bytes = (buf.len() / rayon::current_num_threads()).max(SPLIT_LINE_BYTES);
    let planes: Vec<Result<Plane, WireError>> =
        plane_ranges.into_par_iter().map(|r| decode_plane(&source, r, split_bytes, progress)).collect();
    space.planes = planes.into_iter().collect::<Result<_, _>>()?;
    if space.host.is_empty() {
        space.host = space.hostnames.first().cloned().unwrap_or_else(|| "localhost".into());
    }
    Ok(space)
}

/// Why bytes could not be decoded as an XSpace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecodeError {
    /// The protobuf structure is broken.
    Wire(WireErrorPublic),
    /// Valid-looking protobuf, but nothing in it is an XSpace.
    NotXSpace,
}

/// A position and reason inside a broken protobuf.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WireErrorPublic {
    pub at_byte: u64,
    pub what: &'static str,
}

impl From<WireError> for DecodeError {
    fn from(e: WireError) -> Self {
        DecodeError::Wire(WireErrorPublic { at_byte: e.at as u64, what: e.what })
    }
}

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DecodeError::Wire(e) => write!(f, "{} at byte {}", e.what, e.at_byte),
            DecodeError::NotXSpace => write!(f, "no XPlane in it, so it is not an XSpace (.xplane.pb) file"),
        }
    }
}

/// The parts of a plane message, located before anything is decoded.
#[derive(Default)]
struct PlaneParts {
    id: i64,
    name: Range<usize>,
    lines: Vec<Range<usize>>,
    event_meta: Vec<Range<usize>>,
    stat_meta: Vec<Range<usize>>,
    stats: Vec<Range<usize>>,
}

fn decode_plane(
    source: &Arc<Source>,
    range: Range<usize>,
    split_bytes: usize,
    progress: &Progress,
) -> WireResult<Plane> {
    let buf: &[u8] = source;
    let mut w = Wire::new(buf).sub(range);
    let mut parts = PlaneParts::default();
    while !w.done() {
        let (field, wt) = w.key()?;
        match field {
            1 => parts.id = w.int(wt)?,
            2 => parts.name = w.bytes(wt)?,
            3 => parts.lines.push(w.bytes(wt)?),
            4 => parts.event_meta.push(w.bytes(wt)?),
            5 => parts.stat_meta.push(w.bytes(wt)?),
            6 => parts.stats.push(w.bytes(wt)?),
            _ => w.skip(wt)?,
        }
    }
    let name = String::from_utf8_lossy(w.slice(parts.name.clone())).into_owned();
    let mut plane = Plane::new(parts.id, name, source.clone());

    // Stat metadata first: event metadata stats and line stats refer to it.
    let mut stat_ids = IdMap::with_entries(parts.stat_meta.len());
    for r in &parts.stat_meta {
        let (key, value) = map_entry(&w, r.clone())?;
        let mut m = StatMeta { id: key, ..Default::default() };
        if let Some(v) = value {
            let mut mw = w.sub(v);
            while !mw.done() {
                let (field, wt) = mw.key()?;
                match field {
                    2 => m.name = span(mw.bytes(wt)?),
                    3 => m.description = span(mw.bytes(wt)?),
                    _ => mw.skip(wt)?,
                }
            }
        }
        stat_ids.insert(key, plane.stat_meta.len() as u32);
        plane.stat_meta.push(m);
    }

    let mut arena = Vec::new();
    let mut event_ids = IdMap::with_entries(parts.event_meta.len());
    for r in &parts.event_meta {
        let (key, value) = map_entry(&w, r.clone())?;
        let mut m = EventMeta { id: key, ..Default::default() };
        let first = plane.meta_stats.len() as u32;
        if let Some(v) = value {
            let mut mw = w.sub(v);
            while !mw.done() {
                let (field, wt) = mw.key()?;
                match field {
                    2 => m.name = span(mw.bytes(wt)?),
                    4 => m.display_name = span(mw.bytes(wt)?),
                    5 => {
                        let sr = mw.bytes(wt)?;
                        plane.meta_stats.push(decode_stat(&w, sr, &stat_ids, &mut arena)?);
                    }
                    6 => mw.repeated_int(wt, &mut m.child_ids)?,
                    _ => mw.skip(wt)?,
                }
            }
        }
        m.stats = first..plane.meta_stats.len() as u32;
        event_ids.insert(key, plane.event_meta.len() as u32);
        plane.event_meta.push(m);
    }
    for r in &parts.stats {
        plane.stats.push(decode_stat(&w, r.clone(), &stat_ids, &mut arena)?);
    }
    plane.arena = arena;

    let decoded: Vec<WireResult<Decoded>> = parts
        .lines
        .par_iter()
        .map(|r| {
            let line = decode_line(&w, r.clone(), split_bytes, &event_ids, &stat_ids, source);
            progress.add(r.len() as u64);
            line
        })
        .collect();
    let mut unknown_meta = false;
    for d in decoded {
        let (mut line, line_arena, unknown) = d?;
        unknown_meta |= unknown;
        if !line_arena.is_empty() {
            let base = plane.arena.len() as u64;
            plane.arena.extend_from_slice(&line_arena);
            line.rebase_arena(base);
        }
        plane.lines.push(line);
    }
    if unknown_meta {
        // Events naming a metadata id the plane lacks get one shared, nameless entry.
        let idx = plane.event_meta.len() as u32;
        let first = plane.meta_stats.len() as u32;
        plane.event_meta.push(EventMeta { id: -1, stats: first..first, ..Default::default() });
        for line in &mut plane.lines {
            if line.metas.iter().any(|m| m == i64::from(UNKNOWN_META)) {
                let unknown = i64::from(UNKNOWN_META);
                line.metas = line.metas.iter().map(|m| if m == unknown { i64::from(idx) } else { m }).collect();
            }
        }
    }
    Ok(plane)
}

/// Reads a map entry (1 key, 2 value message).
fn map_entry(w: &Wire, r: Range<usize>) -> WireResult<(i64, Option<Range<usize>>)> {
    let mut ew = w.sub(r);
    let (mut key, mut value) = (0, None);
    while !ew.done() {
        let (field, wt) = ew.key()?;
        match field {
            1 => key = ew.int(wt)?,
            2 => value = Some(ew.bytes(wt)?),
            _ => ew.skip(wt)?,
        }
    }
    Ok((key, value))
}

fn span(r: Range<usize>) -> Span {
    Span::source(r.start as u64, (r.end - r.start).min(u32::MAX as usize) as u32)
}

/// The usual stat, `buf[from..to]`, read straight through: metadata id, then one
/// `uint64`, `int64` or `ref` value, nothing else. `None` for any other shape (or
/// damage): the full reader then reads it, and reports what is wrong. Works with
/// positions in registers: it runs once per stat, the most frequent message of a
/// profile.
#[inline(always)]
fn integer_stat(buf: &[u8], from: usize, to: usize, stat_ids: &IdMap) -> Option<(u32, StatValue)> {
    if from >= to || buf[from] != KEY_META {
        return None;
    }
    let (id, at) = varint_in(buf, from + 1, to)?;
    if at >= to {
        return None;
    }
    let key = buf[at];
    let (v, at) = varint_in(buf, at + 1, to)?;
    if at != to {
        return None;
    }
    Some((stat_ids.get(id as i64).unwrap_or(UNKNOWN_META), integer_value(key, v, stat_ids)?))
}

/// The value of a stat whose value field has key `key` and varint `v`: `uint64`,
/// `int64` or `ref`; `None` for any other key.
#[inline(always)]
fn integer_value(key: u8, v: u64, stat_ids: &IdMap) -> Option<StatValue> {
    match key {
        KEY_U64 => Some(StatValue::U64(v)),
        KEY_I64 => Some(StatValue::I64(v as i64)),
        KEY_REF => Some(StatValue::Ref(stat_ids.get(v as i64).unwrap_or(UNKNOWN_META))),
        _ => None,
    }
}

/// Keys of an XEvent's metadata id, offset, duration (varints) and stats.
const KEY_OFFSET: u8 = 2 << 3 | VARINT;
const KEY_DURATION: u8 = 3 << 3 | VARINT;
const KEY_STAT: u8 = 4 << 3 | LEN;

/// Keys of an XStat's (and an XEvent's) metadata id and its integer values.
const KEY_META: u8 = 1 << 3 | VARINT;
const KEY_U64: u8 = 3 << 3 | VARINT;
const KEY_I64: u8 = 4 << 3 | VARINT;
const KEY_REF: u8 = 7 << 3 | VARINT;

/// The varint at `buf[at..]` and the position after it, for the readers that work on
/// a message's bytes: one byte inline, longer ones out of line; `None` when it runs
/// past `end` (the end of its message) or past 64 bits. The bytes after `end` are
/// still the file's, so a long varint near the end of its message is read as one
/// word like any other.
#[inline(always)]
fn varint_in(buf: &[u8], at: usize, end: usize) -> Option<(u64, usize)> {
    if at < end {
        if let Some(word) = buf.get(at..).and_then(|b| b.first_chunk::<8>()) {
            let word = u64::from_le_bytes(*word);
            if word & 0x80 == 0 {
                return Some((word & 0x7f, at + 1));
            }
            let ends = !word & 0x8080_8080_8080_8080;
            if ends != 0 {
                let n = (ends.trailing_zeros() / 8 + 1) as usize;
                return (n <= end - at).then(|| (pack_varint_word(word, ends), at + n));
            }
        }
        // The last few bytes of the file. (`long_varint` reads one-byte varints too, but
        // leaving them to it made the callers' loops compile 1 % longer.)
        if let Some(&x) = buf.get(at).filter(|&&x| x < 0x80) {
            return Some((u64::from(x), at + 1));
        }
        let (v, n) = long_varint(&buf[at..])?;
        return (n <= end - at).then_some((v, at + n));
    }
    None
}

/// The value of a varint of up to 8 bytes read as the little-endian `word`, `ends`
/// marking the top bits that are clear: the bytes after the first such are dropped,
/// and the 7-bit groups packed together in three steps, with no branch on the length.
#[inline(always)]
fn pack_varint_word(word: u64, ends: u64) -> u64 {
    let bits = ends.trailing_zeros() + 1;
    let x = word & (u64::MAX >> (64 - bits));
    let x = (x & 0x007f_007f_007f_007f) | ((x & 0x7f00_7f00_7f00_7f00) >> 1);
    let x = (x & 0x0000_3fff_0000_3fff) | ((x & 0x3fff_0000_3fff_0000) >> 2);
    (x & 0x0000_0000_0fff_ffff) | ((x & 0x0fff_ffff_0000_0000) >> 4)
}

/// A varint at the start of `b` and its length; `None` when it runs past `b` or past
/// 64 bits. Up to 8 bytes are read as one word ([`pack_varint_word`]), 9 or 10 as that
/// word and two bytes; only the last few bytes of `b` go byte by byte.
#[inline(never)]
fn long_varint(b: &[u8]) -> Option<(u64, usize)> {
    if let Some(ten) = b.first_chunk::<10>() {
        let word = u64::from_le_bytes(*ten.first_chunk::<8>()?);
        let ends = !word & 0x8080_8080_8080_8080;
        if ends != 0 {
            return Some((pack_varint_word(word, ends), (ends.trailing_zeros() / 8 + 1) as usize));
        }
        // Nine or ten bytes (negative int64 values): the first eight give 56 bits.
        let low = pack_varint_word(word, 1 << 63);
        return match (ten[8], ten[9]) {
            (x, _) if x < 0x80 => Some((low | u64::from(x) << 56, 9)),
            (x, 0 | 1) => Some((low | u64::from(x & 0x7f) << 56 | u64::from(ten[9]) << 63, 10)),
            _ => None,
        };
    }
    let mut value = 0u64;
    for (i, &x) in b.iter().enumerate().take(10) {
        if i == 9 && x > 1 {
            return None;
        }
        value |= u64::from(x & 0x7f) << (7 * i);
        if x < 0x80 {
            return Some((value, i + 1));
        }
    }
    None
}

/// Decodes one XStat message.
fn decode_stat(w: &Wire, r: Range<usize>, stat_ids: &IdMap, arena: &mut Vec<u8>) -> WireResult<Stat> {
    if let Some((meta, value)) = integer_stat(w.buf(), r.start, r.end, stat_ids) {
        return Ok(Stat::new(meta, value));
    }
    decode_stat_fields(w, r, stat_ids, arena)
}

/// [`decode_stat`] for a stat that is not the usual shape: field by field.
fn decode_stat_fields(w: &Wire, r: Range<usize>, stat_ids: &IdMap, arena: &mut Vec<u8>) -> WireResult<Stat> {
    let mut sw = w.sub(r);
    let mut meta = UNKNOWN_META;
    let mut value = None;
    while !sw.done() {
        let at = sw.pos();
        let (field, wt) = sw.key()?;
        value = Some(match (field, wt) {
            (1, _) => {
                meta = stat_ids.get(sw.int(wt)?).unwrap_or(UNKNOWN_META);
                continue;
            }
            (2, FIXED64) => StatValue::F64(f64::from_bits(sw.fixed64()?)),
            (3, VARINT) => StatValue::U64(sw.varint()?),
            (4, VARINT) => StatValue::I64(sw.varint()? as i64),
            (5, LEN) | (6, LEN) => {
                let b = sw.bytes(wt)?;
                if b.len() > MAX_STAT_LEN {
                    return Err(WireError { at, what: "stat value larger than 512 MiB" });
                }
                if field == 5 {
                    StatValue::Str(span(b))
                } else {
                    StatValue::Bytes(span(b))
                }
            }
            (7, VARINT) => StatValue::Ref(stat_ids.get(sw.varint()? as i64).unwrap_or(UNKNOWN_META)),
            (8, LEN) => {
                let b = sw.bytes(wt)?;
                let mut text = Vec::new();
                // Text past the limit is cut off, as for any over-long stat.
                let limit = (b.len() as u64 * MAX_GUNZIP_EXPANSION).clamp(MIN_GUNZIP_LIMIT, MAX_GUNZIP_BYTES);
                let mut gz = flate2::read::GzDecoder::new(sw.slice(b)).take(limit);
                if gz.read_to_end(&mut text).is_err() {
                    return Err(WireError { at, what: "compressed string stat is not valid gzip" });
                }
                let off = arena.len() as u64;
                arena.extend_from_slice(&text);
                StatValue::Str(Span::arena(off, text.len() as u32))
            }
            (2..=8, _) => return Err(WireError { at, what: "stat value with the wrong wire type" }),
            _ => {
                sw.skip(wt)?;
                continue;
            }
        });
    }
    // A stat without a value (proto3 default 0) reads as integer 0.
    Ok(Stat::new(meta, value.unwrap_or(StatValue::I64(0))))
}

/// A line decoded: the line, strings it had to make, and whether any event named a
/// metadata id the plane lacks.
type Decoded = (Line, Vec<u8>, bool);

/// Decodes one XLine into columns, in parts when it is `split_bytes` or longer.
fn decode_line(
    w: &Wire,
    r: Range<usize>,
    split_bytes: usize,
    event_ids: &IdMap,
    stat_ids: &IdMap,
    source: &Source,
) -> WireResult<Decoded> {
    let threads = rayon::current_num_threads();
    let (mut line, arena, unknown) = if r.len() >= split_bytes && threads > 1 {
        let part_bytes = (r.len() / (threads * 4)).max(SPLIT_LINE_BYTES / 4);
        decode_line_split(w, r, part_bytes, event_ids, stat_ids, source)?
    } else {
        decode_line_part(w, r, event_ids, stat_ids, source)?
    };
    line.starts.shrink_to_fit();
    line.durations.shrink_to_fit();
    line.metas.shrink_to_fit();
    line.stat_start.shrink_to_fit();
    line.stats.shrink_to_fit();
    line.wide.shrink_to_fit();
    line.starts.add_saturating(line.timestamp_ns.saturating_mul(1000));
    Ok((line, arena, unknown))
}

/// [`decode_line`] for a long line: its events are cut into parts of about
/// `part_bytes` (a whole number of column blocks each), found by a quick walk over
/// the event lengths, and the parts are read in parallel as the walk finds them.
/// They are joined in order as they come, by the thread that finished the next one
/// due, so the joining overlaps the reading of later parts. Any damage is met and
/// reported by the part that reads it (the first in line order wins).
fn decode_line_split(
    w: &Wire,
    r: Range<usize>,
    part_bytes: usize,
    event_ids: &IdMap,
    stat_ids: &IdMap,
    source: &Source,
) -> WireResult<Decoded> {
    let joining = std::sync::Mutex::new(Joining::default());
    rayon::scope(|scope| {
        let joining = &joining;
        let read = |k: usize, part: Range<usize>| {
            scope.spawn(move |_| {
                let decoded = decode_line_part(w, part, event_ids, stat_ids, source);
                Joining::add(joining, k, decoded);
            })
        };
        let bytes = w.slice(r.clone());
        let (mut at, mut cut, mut events, mut k) = (0, 0, 0usize, 0);
        while at < bytes.len() {
            if events % BLOCK == 0 && at - cut >= part_bytes {
                read(k, r.start + cut..r.start + at);
                // The walk runs ahead of the readers: it leaves no pages behind.
                source.release(r.start + cut..r.start + at);
                (cut, k) = (at, k + 1);
            }
            // An event under 128 bytes: key 4/LEN, one length byte.
            if let [EVENT_KEY, len @ 0..0x80, ..] = bytes[at..] {
                at += 2 + len as usize;
                events += 1;
                continue;
            }
            let mut lw = w.sub(r.start + at..r.end);
            match lw.key() {
                Ok((4, LEN)) if lw.bytes(LEN).is_ok() => events += 1,
                Ok((4, _)) | Err(_) => break,
                Ok((_, wt)) if lw.skip(wt).is_ok() => {}
                Ok(_) => break,
            }
            at = lw.pos() - r.start;
        }
        read(k, r.start + cut..r.end);
    });
    // Every part was joined by the thread that finished the last one due; the walk
    // always hands out a last part, so there is at least one.
    let joining = joining.into_inner().unwrap_or_else(|e| e.into_inner());
    joining.joined.unwrap_or_else(|| Ok(Decoded::default()))
}

/// The parts of a long line read so far ([`decode_line_split`]), and the line joined
/// from the first ones.
#[derive(Default)]
struct Joining {
    /// The next part due.
    next: usize,
    /// Parts read ahead of their turn, by index.
    ready: std::collections::BTreeMap<usize, WireResult<Decoded>>,
    /// The parts before `next`, joined (or the first error among them); `None` while a
    /// thread is joining, or before the first part.
    joined: Option<WireResult<Decoded>>,
    /// Whether a thread is joining.
    busy: bool,
}

impl Joining {
    /// Adds part `k`; then, unless another thread is at it, joins every part now due.
    fn add(this: &std::sync::Mutex<Joining>, k: usize, part: WireResult<Decoded>) {
        let lock = || this.lock().unwrap_or_else(|e| e.into_inner());
        let mut state = lock();
        state.ready.insert(k, part);
        if state.busy {
            return;
        }
        state.busy = true;
        loop {
            let next = state.next;
            let Some(part) = state.ready.remove(&next) else {
                state.busy = false;
                return;
            };
            state.next += 1;
            let joined = state.joined.take();
            // The append runs unlocked: other threads only add parts meanwhile.
            drop(state);
            let joined = match (joined, part) {
                (Some(Err(e)), _) | (_, Err(e)) => Err(e),
                (None, Ok(first)) => Ok(first),
                (Some(Ok((mut line, mut arena, unknown))), Ok((mut next, next_arena, next_unknown))) => {
                    if !next_arena.is_empty() {
                        next.rebase_arena(arena.len() as u64);
                        arena.extend_from_slice(&next_arena);
                    }
                    line.append_part(next);
                    Ok((line, arena, unknown | next_unknown))
                }
            };
            state = lock();
            state.joined = Some(joined);
        }
    }
}

/// Reads the XLine's events (field 4) at `buf[at..end]` while they have the usual
/// shape: one-byte keys, the metadata id, offset and duration as varints, and stats
/// that [`integer_stat`] or [`decode_stat_fields`] read. Starts no event at or past
/// `stop`. Returns where it stopped: at `stop` or later, at `end`, or at the first
/// field that is not such an event, left for the general reader (which reads it and
/// reports any damage where it always has). Kept apart from the general reader so
/// that this loop, which runs once per event, keeps its state in registers.
#[inline(never)]
#[allow(clippy::too_many_arguments)]
fn usual_events(
    w: &Wire,
    mut at: usize,
    stop: usize,
    end: usize,
    line: &mut Line,
    ids: (&IdMap, &IdMap),
    arena: &mut Vec<u8>,
    unknown: &mut bool,
) -> usize {
    let (event_ids, stat_ids) = ids;
    let buf = w.buf();
    'events: while at < stop && buf[at] == EVENT_KEY {
        let Some((len, from)) = varint_in(buf, at + 1, end) else { break };
        if len > (end - from) as u64 {
            break;
        }
        let to = from + len as usize;
        let (mark, arena_len) = (line.stats_mark(), arena.len());
        let (mut meta_id, mut offset, mut dur) = (0u64, 0u64, 0u64);
        let mut p = from;
        // The usual header: metadata id, offset and duration, each at most once, in
        // any order (profilers write the offset first; each may be absent, as a zero
        // is not written). Anything else is left to the loop below.
        for _ in 0..3 {
            let slot = match buf.get(p).filter(|_| p < to) {
                Some(&KEY_OFFSET) => &mut offset,
                Some(&KEY_META) => &mut meta_id,
                Some(&KEY_DURATION) => &mut dur,
                _ => break,
            };
            let Some((v, next)) = varint_in(buf, p + 1, to) else { break };
            *slot = v;
            p = next;
        }
        while p < to {
            // The commonest stat, its first four bytes read at once: a one-byte length
            // and a one-byte metadata id (key 0x22, length, key 0x08, id).
            let key = buf[p];
            if let Some(&head) = buf.get(p..).and_then(|b| b.first_chunk::<4>()).filter(|_| key == KEY_STAT) {
                let head = u32::from_le_bytes(head);
                if head & 0x80ff_80ff == u32::from(KEY_META) << 16 | u32::from(KEY_STAT) {
                    let sto = p + 2 + ((head >> 8) & 0x7f) as usize;
                    if sto <= to && p + 5 <= sto {
                        let value_key = buf[p + 4];
                        if let Some((v, end)) = varint_in(buf, p + 5, sto).filter(|&(_, end)| end == sto) {
                            let meta = stat_ids.get(i64::from(head >> 24)).unwrap_or(UNKNOWN_META);
                            if let Some(value) = integer_value(value_key, v, stat_ids) {
                                line.push_stat_value(meta, value);
                                p = end;
                                continue;
                            }
                        }
                    }
                }
            }
            let Some((v, next)) = varint_in(buf, p + 1, to) else { break };
            match key {
                KEY_META => meta_id = v,
                KEY_OFFSET => offset = v,
                KEY_DURATION => dur = v,
                KEY_STAT if v <= (to - next) as u64 => {
                    let sto = next + v as usize;
                    match integer_stat(buf, next, sto, stat_ids) {
                        Some((meta, value)) => line.push_stat_value(meta, value),
                        None => match decode_stat_fields(w, next..sto, stat_ids, arena) {
                            Ok(stat) => line.push_stat(stat),
                            Err(_) => break,
                        },
                    }
                    p = sto;
                    continue;
                }
                _ => break,
            }
            p = next;
        }
        if p != to || line.stat_count() > u32::MAX as usize {
            // Not the usual shape (or too many stats): undone, for the general reader,
            // which reports any error.
            line.truncate_stats(mark);
            arena.truncate(arena_len);
            break 'events;
        }
        let meta = event_ids.get(meta_id as i64).unwrap_or(UNKNOWN_META);
        *unknown |= meta == UNKNOWN_META;
        line.starts.push(offset as i64);
        line.durations.push(dur as i64);
        line.metas.push(i64::from(meta));
        line.stat_start.push(line.stat_count() as i64);
        at = to;
    }
    at
}

/// Reads the fields in `r`, all or part of one XLine, into a line's columns, as
/// written: the caller shifts the starts by the line's timestamp.
fn decode_line_part(
    w: &Wire,
    r: Range<usize>,
    event_ids: &IdMap,
    stat_ids: &IdMap,
    source: &Source,
) -> WireResult<Decoded> {
    // Columns sized in two steps, so that they are neither copied to grow nor reserve
    // much more than they need: room for the first SIZE_SAMPLE_BYTES of the line at
    // small-event density, then, once that much is read, for the rest of the line at
    // the density seen so far (+5 %). All are trimmed at the end.
    let head = r.len().min(SIZE_SAMPLE_BYTES);
    let mut line = Line {
        starts: Column::with_capacity(head / EVENT_BYTES_TYPICAL),
        durations: Column::with_capacity(head / EVENT_BYTES_TYPICAL),
        metas: Column::with_capacity(head / EVENT_BYTES_TYPICAL),
        stat_start: Column::with_capacity(head / EVENT_BYTES_TYPICAL + 1),
        stats: Vec::with_capacity(head / STAT_BYTES_TYPICAL),
        ..Default::default()
    };
    prefault_spare(&mut line.stats);
    let mut sized = r.len() <= SIZE_SAMPLE_BYTES;
    line.stat_start.push(0);
    let mut arena = Vec::new();
    let mut unknown = false;
    let mut lw = w.sub(r.clone());
    let mut released = r.start;
    while !lw.done() {
        if lw.pos() - released >= RELEASE_EVERY_BYTES {
            source.release(released..lw.pos());
            released = lw.pos();
        }
        if !sized && lw.pos() - r.start >= SIZE_SAMPLE_BYTES {
            sized = true;
            let (read, left) = ((lw.pos() - r.start) as f64, (r.end - lw.pos()) as f64);
            let more = |n: usize| ((n as f64 / read * left * 1.05) as usize).min(MAX_RESERVED);
            let (events, stats) = (more(line.len()), more(line.stat_count()));
            line.starts.reserve_exact(events);
            line.durations.reserve_exact(events);
            line.metas.reserve_exact(events);
            line.stat_start.reserve_exact(events);
            line.stats.reserve_exact(stats);
            prefault_spare(&mut line.stats);
        }
        let mut stop = (released + RELEASE_EVERY_BYTES).min(r.end);
        if !sized {
            stop = stop.min(r.start + SIZE_SAMPLE_BYTES);
        }
        let at = usual_events(w, lw.pos(), stop, r.end, &mut line, (event_ids, stat_ids), &mut arena, &mut unknown);
        if at != lw.pos() {
            lw = w.sub(at..r.end);
            continue;
        }
        let (field, wt) = lw.key()?;
        match field {
            1 => line.id = lw.int(wt)?,
            10 => line.display_id = lw.int(wt)?,
            2 => line.name = lw.string(wt)?,
            11 => line.display_name = lw.string(wt)?,
            3 => line.timestamp_ns = lw.int(wt)?,
            9 => line.line_duration_ps = lw.int(wt)?,
            4 => {
                // An event [`usual_events`] left: read field by field.
                let er = lw.bytes(wt)?;
                let (mut offset, mut dur, mut meta_id) = (0i64, 0i64, 0i64);
                let mut ew = w.sub(er);
                while !ew.done() {
                    let (f, wt) = ew.key()?;
                    match f {
                        1 => meta_id = ew.int(wt)?,
                        2 => offset = ew.int(wt)?,
                        3 => dur = ew.int(wt)?,
                        4 => {
                            let sr = ew.bytes(wt)?;
                            line.push_stat(decode_stat(w, sr, stat_ids, &mut arena)?);
                        }
                        _ => ew.skip(wt)?,
                    }
                }
                let meta = event_ids.get(meta_id).unwrap_or(UNKNOWN_META);
                unknown |= meta == UNKNOWN_META;
                if line.stat_count() > u32::MAX as usize {
                    return Err(WireError { at: lw.pos(), what: "more than 4 billion stats on one line" });
                }
                line.starts.push(offset);
                line.durations.push(dur);
                line.metas.push(i64::from(meta));
                line.stat_start.push(line.stat_count() as i64);
            }
            _ => lw.skip(wt)?,
        }
    }
    source.release(released..r.end);
    Ok((line, arena, unknown))
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    fn varint(mut v: u64, out: &mut Vec<u8>) {
        while v >= 0x80 {
            out.push(v as u8 | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
    }

    #[test]
    fn varints_of_every_length_read_as_written() {
        let mut values: Vec<u64> = (0..64).flat_map(|b| [1u64 << b, (1u64 << b) - 1, (1u64 << b) + 1]).collect();
        values.extend([u64::MAX, u64::MAX - 1, 0x0123_4567_89ab_cdef, 300, 16_384]);
        for v in values {
            let mut enc = Vec::new();
            varint(v, &mut enc);
            let n = enc.len();
            // Alone (short buffers go byte by byte), and followed by bytes with and
            // without their top bit (8-byte words).
            for tail in [&[][..], &[0x80; 12][..], &[0x01; 12][..]] {
                let bytes = [&enc[..], tail].concat();
                assert_eq!(varint_in(&bytes, 0, bytes.len()), Some((v, n)), "{v:#x} before {tail:?}");
                assert_eq!(varint_in(&bytes, 0, n), Some((v, n)), "{v:#x} ending its message");
                // Its message ends inside it, whatever the bytes after that are: no value.
                assert_eq!(varint_in(&bytes, 0, n - 1), None, "{v:#x} past its message, before {tail:?}");
                // At an offset.
                let shifted = [&[0x05, 0x81][..], &bytes].concat();
                assert_eq!(varint_in(&shifted, 2, 2 + n), Some((v, 2 + n)), "{v:#x} at 2");
            }
            // Cut short by the end of the buffer: no value.
            assert_eq!(varint_in(&enc[..n - 1], 0, n - 1), None, "{v:#x} cut");
        }
        // Past 64 bits, eleven bytes long, and at or past the end: no value.
        let over = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02];
        assert_eq!(varint_in(&over, 0, over.len()), None);
        assert_eq!(varint_in(&[0x80; 11], 0, 11), None);
        assert_eq!(varint_in(&[0x01, 0x01], 1, 1), None);
        assert_eq!(varint_in(&[0x01], 1, 1), None);
    }

    fn ld(field: u64, payload: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        varint(field << 3 | 2, &mut out);
        varint(payload.len() as u64, &mut out);
        out.extend_from_slice(payload);
        out
    }

    /// An XSpace with one plane whose plane stats are compressed strings (wire field 8).
    fn space_with_gz_stats(texts: &[Vec<u8>]) -> Space {
        let stat_meta = ld(5, &[&[0x08, 1][..], &ld(2, &[&[0x08, 1][..], &ld(2, b"s")].concat())].concat());
        let mut plane = [ld(2, b"/host:CPU"), stat_meta].concat();
        for t in texts {
            let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
            gz.write_all(t).unwrap();
            plane.extend(ld(6, &[&[0x08, 1][..], &ld(8, &gz.finish().unwrap())].concat()));
        }
        decode_xspace(Arc::new(Source::Owned(ld(1, &plane))), "h", &Progress::default()).unwrap()
    }

    fn gz(text: &[u8]) -> Vec<u8> {
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(text).unwrap();
        gz.finish().unwrap()
    }

    /// An XLine of `n` events of every shape: small and wide integer stats, floats,
    /// strings, compressed strings, refs, unknown metadata ids, events over 128 bytes,
    /// and header fields before, between and after the events.
    fn mixed_line(n: u64) -> Vec<u8> {
        let int = |field: u64, v: u64| {
            let mut o = Vec::new();
            varint(field << 3, &mut o);
            varint(v, &mut o);
            o
        };
        let mut line = [int(1, 7), ld(2, b"Stream #1")].concat();
        for i in 0..n {
            if i == n / 3 {
                line.extend(int(9, 123_456)); // a header field among the events
            }
            let mut stats = Vec::new();
            let meta = if i % 97 == 5 { 99 } else { 1 + i % 4 };
            match i % 7 {
                0 => stats.push([int(1, 1), int(3, i)].concat()),
                1 => stats.push([int(1, 2), int(3, u64::MAX - i)].concat()), // wide
                2 => stats.push([int(1, 1), int(4, (-(i as i64) << 45) as u64)].concat()), // wide I64
                3 => {
                    let mut f = int(1, 3);
                    f.push(2 << 3 | 1);
                    f.extend((i as f64 + 0.1).to_bits().to_le_bytes());
                    stats.push(f);
                    stats.push([int(1, 2), int(7, 1)].concat()); // ref
                }
                4 => stats.push([int(1, 1), ld(5, &vec![b'x'; (i % 300) as usize])].concat()), // long events too
                5 => stats.push([int(1, 2), ld(8, &gz(format!("text {i}").as_bytes()))].concat()),
                _ => {}
            }
            let (meta, at, len) = (int(1, meta), int(2, i * 1_000 + i % 13), int(3, (i % 50) * 10_000_000_000));
            // The header in the order profilers write it, and in field order.
            let mut ev = if i % 2 == 0 { [at, meta, len].concat() } else { [meta, at, len].concat() };
            if i % 11 == 3 {
                // Fields the fast path leaves to the general reader: an unknown varint,
                // a two-byte key, then the offset again (the last one counts).
                ev.splice(0..0, [int(5, 77), ld(20, b"later"), int(2, 5)].concat());
            }
            for st in stats {
                ev.extend(ld(4, &st));
            }
            if i % 13 == 6 {
                // After the stats: the fast path has read them, and must drop them
                // when it leaves the event to the general reader.
                ev.extend(int(5, 78));
            }
            line.extend(ld(4, &ev));
        }
        line.extend([int(3, 1_000), ld(11, b"display")].concat());
        line
    }

    fn ids(n: i64) -> IdMap {
        let mut m = IdMap::with_entries(n as usize);
        for id in 1..=n {
            m.insert(id, id as u32 - 1);
        }
        m
    }

    /// Decodes `bytes` as one line, whole and in parts of `part_bytes`.
    fn line_both_ways(bytes: Vec<u8>, part_bytes: usize) -> (WireResult<Decoded>, WireResult<Decoded>) {
        let source = Source::Owned(bytes);
        let w = Wire::new(&source);
        let (events, stats) = (ids(4), ids(3));
        let r = 0..source.len();
        let whole = decode_line(&w, r.clone(), usize::MAX, &events, &stats, &source);
        let split = decode_line_split(&w, r, part_bytes, &events, &stats, &source).map(|(mut line, arena, unknown)| {
            line.starts.add_saturating(line.timestamp_ns.saturating_mul(1000));
            (line, arena, unknown)
        });
        (whole, split)
    }

    #[test]
    fn a_line_read_in_parts_equals_it_read_whole() {
        let n = 2_000;
        for part_bytes in [1, 200, 5_000, 40_000, usize::MAX] {
            let (whole, split) = line_both_ways(mixed_line(n), part_bytes);
            let ((a, a_arena, a_unknown), (b, b_arena, b_unknown)) = (whole.unwrap(), split.unwrap());
            let head = |l: &Line| (l.id, l.name.clone(), l.display_name.clone(), l.timestamp_ns, l.line_duration_ps);
            assert_eq!(head(&a), (7, "Stream #1".into(), "display".into(), 1_000, 123_456));
            assert_eq!(head(&a), head(&b), "parts of {part_bytes}");
            assert_eq!(a.len(), n as usize);
            assert_eq!((a.starts.to_vec(), a.durations.to_vec()), (b.starts.to_vec(), b.durations.to_vec()));
            assert_eq!(a.metas.to_vec(), b.metas.to_vec());
            assert_eq!(a.stat_start.to_vec(), b.stat_start.to_vec());
            for i in 0..a.len() {
                assert_eq!(a.event_stats(i).collect::<Vec<_>>(), b.event_stats(i).collect::<Vec<_>>(), "event {i}");
            }
            assert_eq!((a_arena, a_unknown), (b_arena, b_unknown));
            assert!(a_unknown);
            for i in 0..n as usize {
                let (at, len) = (i as i64 * 1_000 + i as i64 % 13, (i as i64 % 50) * 10_000_000_000);
                assert_eq!((a.start_ps(i), a.duration_ps(i)), (1_000_000 + at, len), "event {i}");
                let meta = if i % 97 == 5 { UNKNOWN_META } else { (i % 4) as u32 };
                assert_eq!(a.meta(i), meta, "event {i}");
                let stats = [1, 1, 1, 2, 1, 1, 0][i % 7];
                assert_eq!(a.event_stats(i).count(), stats, "event {i}");
            }
        }
    }

    #[test]
    fn a_damaged_line_read_in_parts_fails_where_it_fails_whole() {
        let good = mixed_line(500);
        let mut bad_inner = good.clone();
        // The 300th event's first key becomes a group start (wire type 3).
        let at = good.windows(3).enumerate().filter(|(_, w)| w[0] == EVENT_KEY && w[2] == 0x08).nth(300).unwrap().0;
        bad_inner[at + 2] = 0x0b;
        let cases = [good[..good.len() - 3].to_vec(), bad_inner, [&good[..], &[EVENT_KEY, 0xff, 0x01]].concat()];
        for (k, bytes) in cases.into_iter().enumerate() {
            for part_bytes in [1, 700, 9_000] {
                let (whole, split) = line_both_ways(bytes.clone(), part_bytes);
                let (whole, split) = (whole.map(|d| d.0.len()), split.map(|d| d.0.len()));
                assert!(whole.is_err(), "case {k}");
                assert_eq!(whole, split, "case {k}, parts of {part_bytes}");
            }
        }
    }

    #[test]
    fn compressed_string_stats_are_capped_by_expansion() {
        // Ordinary text comes back whole.
        let space = space_with_gz_stats(&[b"fusion.1 = f32[8] add(a, b)".to_vec()]);
        let p = &space.planes[0];
        assert_eq!(p.stat_str(&p.stats[0]), Some("fusion.1 = f32[8] add(a, b)"));
        // A 64 MiB bomb in ~64 KB keeps only 32× its compressed size.
        let bomb = vec![b'a'; 64 << 20];
        let space = space_with_gz_stats(&[bomb.clone(), bomb]);
        let p = &space.planes[0];
        for s in &p.stats {
            let n = p.stat_str(s).unwrap().len();
            assert!(n > 1 << 20 && n < 4 << 20, "{n}");
        }
        assert!(p.arena.len() < 8 << 20, "{}", p.arena.len());
    }
}
