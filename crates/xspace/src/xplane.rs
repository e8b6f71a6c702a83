//! The XSpace (`*.xplane.pb`) reader.
//!
//! The file is memory-mapped and walked once at the top level to find the planes;
//! planes are then decoded in parallel, and within a plane its metadata first, then
//! its lines in parallel. A line longer than one thread's share of the file (a GPU
//! capture's `python` tracer line can hold 90 % of the events) is cut into parts of
//! whole column blocks by a quick walk over its event lengths, and the parts are read
//! in parallel and joined. Each line's events go straight into columns; strings stay
//! in the mapped file as spans, and so do the events' stats where every one is framed
//! as expected and none is a compressed string (`stat_wire.rs`): the decoder
//! checks them and notes which stat ids each event has, and analyses read the ones
//! they ask for. Lines with another stat are read again, their stats packed.

use std::io::Read;
use std::ops::Range;
use std::path::Path;
use std::sync::Arc;

use rayon::prelude::*;

use crate::column::{Column, BLOCK};
use crate::error::{Error, Result};
use crate::mem::prefault_spare;
use crate::model::{
    EventMeta, Format, IdMap, Line, LineStats, PackedStats, Plane, Progress, Source, Space, Span, Stat, StatMeta,
    StatValue, WireStats, MAX_EMPTY_LINES,
};
use crate::stat_wire::{
    self, canonical_stat, event_header, resolve, stat_fields, stats_stay_in_file, varint_in, Raw, KEY_DURATION,
    KEY_META, KEY_OFFSET, KEY_STAT, UNKNOWN_META,
};
use crate::wire::{Wire, WireError, WireResult, LEN};

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

/// Most bytes a single gzip-compressed string stat may expand to.
const MAX_GUNZIP_BYTES: u64 = 256 << 20;

/// Gzip bomb guard: a compressed string stat keeps at most 32× its compressed size
/// (and at least 4 KiB), so the text of all of them stays within ~32× the file.
const MAX_GUNZIP_EXPANSION: u64 = 32;
const MIN_GUNZIP_LIMIT: u64 = 4 << 10;

/// Reads `<host>.xplane.pb`; the host name comes from the file name.
pub fn read_xspace(path: &Path, progress: &Progress) -> Result<Space> {
    let (file, len) = crate::files::open_regular(path)?;
    if len == 0 {
        return Err(Error::new(
            format!("{} is empty", path.display()),
            "the capture did not finish writing; capture the profile again",
        ));
    }
    let source = source_of(file, len, path)?;
    let host = host_from_file_name(path);
    let space = decode_xspace(source.clone(), &host, progress);
    if source.changed() {
        return Err(changed_while_read(path));
    }
    space.map_err(|e| match e {
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

/// The bytes of `file` (`len` long, at `path`): mapped (guarded against a copy over
/// it), or read where it cannot be mapped. Whoever reads them asks
/// [`Source::changed`] before trusting what was made from them.
pub fn source_of(file: std::fs::File, len: u64, path: &Path) -> Result<Arc<Source>> {
    Ok(Arc::new(match crate::mapguard::GuardedMap::map(&file, path).map_err(|e| Error::io(path, &e))? {
        Some(map) => Source::Mapped(map),
        None => Source::Owned(read_whole(file, len).map_err(|e| Error::io(path, &e))?),
    }))
}

/// The first plane named `name` of the XSpace at `path`, decoded alone: the file's
/// other planes are located and skipped, not decoded. `None` where no plane has that
/// name. For one plane of many hosts' files (each host's session start, which aligns
/// the hosts' clocks) without reading them whole.
pub fn read_plane_named(path: &Path, name: &str) -> Result<Option<Plane>> {
    let (file, len) = crate::files::open_regular(path)?;
    if len == 0 {
        return Ok(None);
    }
    let source = source_of(file, len, path)?;
    let found = plane_named(&source, name).map_err(|e| Error::corrupt(path, DecodeError::from(e)));
    if source.changed() {
        return Err(changed_while_read(path));
    }
    found
}

fn plane_named(source: &Arc<Source>, name: &str) -> WireResult<Option<Plane>> {
    let buf: &[u8] = source;
    let mut w = Wire::new(buf);
    while !w.done() {
        let (field, wt) = w.key()?;
        if field != 1 {
            w.skip(wt)?;
            continue;
        }
        let range = w.bytes(wt)?;
        let mut pw = w.sub(range.clone());
        while !pw.done() {
            let (f, t) = pw.key()?;
            if f != 2 {
                pw.skip(t)?;
                continue;
            }
            let at = pw.bytes(t)?;
            if pw.slice(at) == name.as_bytes() {
                return decode_plane(source, range, usize::MAX, &Progress::default()).map(Some);
            }
            break;
        }
    }
    Ok(None)
}

/// The error for a profile file that shrank while it was read.
pub fn changed_while_read(path: &Path) -> Error {
    Error::new(
        format!("{} changed while it was read (it is shorter than when it was opened)", path.display()),
        "read it again once it is written whole — a copy over it (scp, cp) was still under way",
    )
}

/// A file read into memory, where it cannot be mapped with a guard.
fn read_whole(file: std::fs::File, len: u64) -> std::io::Result<Vec<u8>> {
    let mut out = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
    file.take(len).read_to_end(&mut out)?;
    Ok(out)
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

/// The tracer levels a capture was taken with, from its `Task Environment` plane's
/// `profile_options` stat (a `ProfileOptions` message, shared/formats.md). On the wire
/// a level of 0 is an absent field: absent reads as 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TracerLevels {
    pub host: u32,
    pub device: u32,
    pub python: u32,
}

/// [`TracerLevels`] of a host's capture; `None` where the profile does not record them
/// (no `Task Environment` plane or stat, or a message that does not decode).
pub fn tracer_levels(space: &crate::model::Space) -> Option<TracerLevels> {
    let plane = space.planes.iter().find(|p| p.name == "Task Environment")?;
    let stat = plane.plane_stat("profile_options")?;
    let bytes = plane.stat_bytes(&stat)?;
    let mut levels = TracerLevels { host: 0, device: 0, python: 0 };
    let mut w = Wire::new(bytes);
    while !w.done() {
        let (field, wt) = w.key().ok()?;
        match field {
            2..=4 => {
                let v = u32::try_from(w.int(wt).ok()?).ok()?;
                match field {
                    2 => levels.host = v,
                    3 => levels.device = v,
                    _ => levels.python = v,
                }
            }
            _ => w.skip(wt).ok()?,
        }
    }
    Some(levels)
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

    let mut empty = 0;
    parts.lines.retain(|r| {
        if has_events(&w, r.clone()) {
            return true;
        }
        empty += 1;
        empty <= MAX_EMPTY_LINES
    });
    plane.empty_lines_not_kept = empty.saturating_sub(MAX_EMPTY_LINES) as u64;

    let stat_ids = Arc::new(stat_ids);
    let cx = LineCtx { w, event_ids: &event_ids, stat_ids: &stat_ids, source, stats_in_file: true };
    let decoded: Vec<WireResult<Decoded>> = parts
        .lines
        .par_iter()
        .map(|r| {
            let line = decode_line(&cx, r.clone(), split_bytes);
            progress.add(r.len() as u64);
            line
        })
        .collect();
    // The first damaged line, in line order, is the error.
    let decoded = decoded.into_iter().collect::<WireResult<Vec<Decoded>>>()?;
    let mut unknown_meta = false;
    // Collected in place: the lines take the decoded parts' buffer, so a plane of a
    // million short lines does not hold two vectors of them at once.
    plane.lines = decoded
        .into_iter()
        .map(|(mut line, line_arena, unknown)| {
            unknown_meta |= unknown;
            if !line_arena.is_empty() {
                let base = plane.arena.len() as u64;
                plane.arena.extend_from_slice(&line_arena);
                line.rebase_arena(base);
            }
            line
        })
        .collect();
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

/// Whether the XLine at `r` has an event (field 4): its fields are read up to the
/// first event, so this costs the line's few leading fields. A line that cannot be
/// read counts as having events (its decoding then says what is wrong).
fn has_events(w: &Wire, r: Range<usize>) -> bool {
    let mut lw = w.sub(r);
    while !lw.done() {
        match lw.key() {
            Ok((4, _)) => return true,
            Ok((_, wt)) if lw.skip(wt).is_ok() => {}
            _ => return true,
        }
    }
    false
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
    stat_wire::span(r.start, r.end)
}

/// Decodes one XStat message, expanding a compressed string into `arena`.
fn decode_stat(w: &Wire, r: Range<usize>, stat_ids: &IdMap, arena: &mut Vec<u8>) -> WireResult<Stat> {
    let at = r.start;
    let (meta, raw) = match canonical_stat(w.buf(), r.start, r.end) {
        Some((meta, raw)) => (Some(meta), raw),
        None => stat_fields(w, r)?,
    };
    let Raw::Gzip(from, to) = raw else {
        // Every value but a compressed string is read without the arena.
        return Ok(resolve(meta, raw, stat_ids).unwrap_or(Stat::new(UNKNOWN_META, StatValue::I64(0))));
    };
    // A compressed string: its text goes to the arena. Text past the limit is cut
    // off, as for any over-long stat.
    let mut text = Vec::new();
    let limit = ((to - from) as u64 * MAX_GUNZIP_EXPANSION).clamp(MIN_GUNZIP_LIMIT, MAX_GUNZIP_BYTES);
    let mut gz = flate2::read::GzDecoder::new(w.slice(from..to)).take(limit);
    if gz.read_to_end(&mut text).is_err() {
        return Err(WireError { at, what: "compressed string stat is not valid gzip" });
    }
    let off = arena.len() as u64;
    arena.extend_from_slice(&text);
    let meta = meta.map_or(UNKNOWN_META, |m| stat_ids.get(m as i64).unwrap_or(UNKNOWN_META));
    Ok(Stat::new(meta, StatValue::Str(Span::arena(off, text.len() as u32))))
}

/// A line decoded: the line, strings it had to make, and whether any event named a
/// metadata id the plane lacks.
type Decoded = (Line, Vec<u8>, bool);

/// What reading a plane's lines needs: the file, the plane's metadata ids, and
/// whether lines may leave their stats in the file.
struct LineCtx<'a> {
    w: Wire<'a>,
    event_ids: &'a IdMap,
    stat_ids: &'a Arc<IdMap>,
    source: &'a Arc<Source>,
    /// Leave stats in the file where they can stay (else every line packs its
    /// stats; tests compare the two).
    stats_in_file: bool,
}

/// Decodes one XLine into columns, in parts when it is `split_bytes` or longer.
fn decode_line(cx: &LineCtx, r: Range<usize>, split_bytes: usize) -> WireResult<Decoded> {
    let threads = rayon::current_num_threads();
    let (mut line, arena, unknown) = if r.len() >= split_bytes && threads > 1 {
        let part_bytes = (r.len() / (threads * 4)).max(SPLIT_LINE_BYTES / 4);
        decode_line_split(cx, r, part_bytes)?
    } else {
        decode_line_part(cx, r)?
    };
    line.starts.shrink_to_fit();
    line.durations.shrink_to_fit();
    line.metas.shrink_to_fit();
    line.stats.bare_if_empty();
    match &mut line.stats {
        LineStats::Bare => {}
        LineStats::Packed(p) => p.shrink_to_fit(),
        LineStats::Wire(x) => {
            x.from.shrink_to_fit();
            x.len.shrink_to_fit();
            x.id_set.shrink_to_fit();
        }
    }
    line.starts.add_saturating(line.timestamp_ns.saturating_mul(1000));
    Ok((line, arena, unknown))
}

/// [`decode_line`] for a long line: its events are cut into parts of about
/// `part_bytes` (a whole number of column blocks each), found by a quick walk over
/// the event lengths, and the parts are read in parallel as the walk finds them.
/// They are joined in order as they come, by the thread that finished the next one
/// due, so the joining overlaps the reading of later parts. Any damage is met and
/// reported by the part that reads it (the first in line order wins).
fn decode_line_split(cx: &LineCtx, r: Range<usize>, part_bytes: usize) -> WireResult<Decoded> {
    let (w, source) = (&cx.w, cx.source);
    let joining = std::sync::Mutex::new(Joining::default());
    rayon::scope(|scope| {
        let joining = &joining;
        let read = |k: usize, part: Range<usize>| {
            scope.spawn(move |_| {
                let decoded = decode_line_part(cx, part);
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

/// A line's columns while they are read: events, and their stats packed or left in
/// the file.
struct Reading {
    line: Line,
    packed: PackedStats,
    from: Column,
    len: Column,
    /// The distinct sets of stat ids met ([`stats_stay_in_file`]), each event's index
    /// into them, and the last one used.
    id_sets: Vec<u64>,
    id_set: Column,
    last_ids: (u64, u32),
}

/// Most distinct stat id sets a line part keeps; events with others get the set of
/// all ids (which skips nothing).
const MAX_ID_SETS: usize = 1024;

impl Reading {
    /// Notes the set of stat ids of the event just read.
    #[inline(always)]
    fn push_ids(&mut self, ids: u64) {
        // Events of one kind come in runs.
        if self.last_ids.0 != ids || self.id_sets.is_empty() {
            self.last_ids = (ids, self.id_set_index(ids));
        }
        self.id_set.push(i64::from(self.last_ids.1));
    }

    #[inline(never)]
    fn id_set_index(&mut self, ids: u64) -> u32 {
        let ids = if self.id_sets.len() < MAX_ID_SETS { ids } else { u64::MAX };
        match self.id_sets.iter().position(|&s| s == ids) {
            Some(k) => k as u32,
            None => {
                self.id_sets.push(ids);
                (self.id_sets.len() - 1) as u32
            }
        }
    }

    #[inline(always)]
    fn push_event(&mut self, offset: i64, dur: i64, meta: u32) {
        let dur = if (0..=crate::model::MAX_EVENT_PS).contains(&dur) {
            dur
        } else {
            self.line.damaged_durations = self.line.damaged_durations.saturating_add(1);
            0
        };
        self.line.starts.push(offset);
        self.line.durations.push(dur);
        self.line.metas.push(i64::from(meta));
    }
}

/// Reads the XLine's events (field 4) at `buf[at..end]` while they have the usual
/// shape: one-byte keys, the metadata id, offset and duration as varints, and stats
/// that [`canonical_stat`] or [`decode_stat`] read. Starts no event at or past
/// `stop`. Returns where it stopped: at `stop` or later, at `end`, or at the first
/// field that is not such an event, left for the general reader (which reads it and
/// reports any damage where it always has). Kept apart from the general reader so
/// that this loop, which runs once per event, keeps its state in registers.
#[inline(never)]
fn usual_events(
    cx: &LineCtx,
    mut at: usize,
    stop: usize,
    end: usize,
    rd: &mut Reading,
    arena: &mut Vec<u8>,
    unknown: &mut bool,
) -> usize {
    let (w, stat_ids) = (&cx.w, &**cx.stat_ids);
    let buf = w.buf();
    'events: while at < stop && buf[at] == EVENT_KEY {
        let Some((len, from)) = varint_in(buf, at + 1, end) else { break };
        if len > (end - from) as u64 {
            break;
        }
        let to = from + len as usize;
        let (mark, arena_len) = (rd.packed.mark(), arena.len());
        let ([mut meta_id, mut offset, mut dur], mut p) = event_header(buf, from, to);
        while p < to {
            // The commonest stat, its first four bytes read at once: a one-byte length
            // and a one-byte metadata id (key 0x22, length, key 0x08, id).
            let key = buf[p];
            if let Some(&head) = buf.get(p..).and_then(|b| b.first_chunk::<4>()).filter(|_| key == KEY_STAT) {
                let head = u32::from_le_bytes(head);
                if head & 0x80ff_80ff == u32::from(KEY_META) << 16 | u32::from(KEY_STAT) {
                    let sto = p + 2 + ((head >> 8) & 0x7f) as usize;
                    if sto <= to {
                        if let Some(stat) =
                            canonical_stat(buf, p + 2, sto).and_then(|(m, raw)| resolve(Some(m), raw, stat_ids))
                        {
                            rd.packed.push(stat);
                            p = sto;
                            continue;
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
                    match decode_stat(w, next..sto, stat_ids, arena) {
                        Ok(stat) => rd.packed.push(stat),
                        Err(_) => break,
                    }
                    p = sto;
                    continue;
                }
                _ => break,
            }
            p = next;
        }
        if p != to || rd.packed.len() > u32::MAX as usize {
            // Not the usual shape (or too many stats): undone, for the general reader,
            // which reports any error.
            rd.packed.truncate(mark);
            arena.truncate(arena_len);
            break 'events;
        }
        let meta = cx.event_ids.get(meta_id as i64).unwrap_or(UNKNOWN_META);
        *unknown |= meta == UNKNOWN_META;
        rd.push_event(offset as i64, dur as i64, meta);
        rd.packed.end_event();
        at = to;
    }
    at
}

/// [`usual_events`] for a line that leaves its stats in the file: reads events whose
/// header comes first and whose stats can stay in the file ([`stats_stay_in_file`]), and
/// keeps where their stats are. Stops like `usual_events`; the caller then reads the
/// line again packing its stats if the field it stopped at is an event.
#[inline(never)]
fn events_in_file(cx: &LineCtx, mut at: usize, stop: usize, end: usize, rd: &mut Reading, unknown: &mut bool) -> usize {
    let buf = cx.w.buf();
    while at < stop && buf[at] == EVENT_KEY {
        let Some((len, from)) = varint_in(buf, at + 1, end) else { break };
        if len > (end - from) as u64 {
            break;
        }
        let to = from + len as usize;
        let ([meta_id, offset, dur], p) = event_header(buf, from, to);
        let Some(ids) = stats_stay_in_file(buf, p, to) else { break };
        let meta = cx.event_ids.get(meta_id as i64).unwrap_or(UNKNOWN_META);
        *unknown |= meta == UNKNOWN_META;
        rd.push_event(offset as i64, dur as i64, meta);
        rd.from.push(p as i64);
        rd.len.push((to - p) as i64);
        rd.push_ids(ids);
        at = to;
    }
    at
}

/// Reads the fields in `r`, all or part of one XLine, into a line's columns, as
/// written: the caller shifts the starts by the line's timestamp. Leaves the stats
/// in the file where `cx` allows and every event's are canonical; else packs them.
fn decode_line_part(cx: &LineCtx, r: Range<usize>) -> WireResult<Decoded> {
    if cx.stats_in_file {
        if let Some(decoded) = read_line_part(cx, r.clone(), true)? {
            return Ok(decoded);
        }
    }
    // Some event's stats cannot stay in the file (or are damaged): read again, packing them.
    read_line_part(cx, r, false).map(|d| d.unwrap_or_default())
}

/// [`decode_line_part`] one way: `None` when stats were to stay in the file and an
/// event's cannot.
fn read_line_part(cx: &LineCtx, r: Range<usize>, in_file: bool) -> WireResult<Option<Decoded>> {
    let (w, source) = (&cx.w, cx.source);
    // Columns sized in two steps, so that they are neither copied to grow nor reserve
    // much more than they need: room for the first SIZE_SAMPLE_BYTES of the line at
    // small-event density, then, once that much is read, for the rest of the line at
    // the density seen so far (+5 %). All are trimmed at the end.
    let head = r.len().min(SIZE_SAMPLE_BYTES);
    let events = head / EVENT_BYTES_TYPICAL;
    let mut rd = Reading {
        line: Line {
            starts: Column::with_capacity(events),
            durations: Column::with_capacity(events),
            metas: Column::with_capacity(events),
            ..Default::default()
        },
        packed: if in_file {
            PackedStats::default()
        } else {
            PackedStats::with_capacity(events, head / STAT_BYTES_TYPICAL)
        },
        from: Column::with_capacity(if in_file { events } else { 0 }),
        len: Column::with_capacity(if in_file { events } else { 0 }),
        id_sets: Vec::new(),
        id_set: Column::with_capacity(if in_file { events } else { 0 }),
        last_ids: (0, 0),
    };
    prefault_spare(&mut rd.packed.stats);
    let mut sized = r.len() <= SIZE_SAMPLE_BYTES;
    rd.packed.start.push(0);
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
            let events = more(rd.line.len());
            rd.line.starts.reserve_exact(events);
            rd.line.durations.reserve_exact(events);
            rd.line.metas.reserve_exact(events);
            if in_file {
                rd.from.reserve_exact(events);
                rd.len.reserve_exact(events);
                rd.id_set.reserve_exact(events);
            } else {
                rd.packed.start.reserve_exact(events);
                rd.packed.stats.reserve_exact(more(rd.packed.len()));
                prefault_spare(&mut rd.packed.stats);
            }
        }
        let mut stop = (released + RELEASE_EVERY_BYTES).min(r.end);
        if !sized {
            stop = stop.min(r.start + SIZE_SAMPLE_BYTES);
        }
        let at = if in_file {
            events_in_file(cx, lw.pos(), stop, r.end, &mut rd, &mut unknown)
        } else {
            usual_events(cx, lw.pos(), stop, r.end, &mut rd, &mut arena, &mut unknown)
        };
        if at != lw.pos() {
            lw = w.sub(at..r.end);
            continue;
        }
        let (field, wt) = lw.key()?;
        match field {
            1 => rd.line.id = lw.int(wt)?,
            10 => rd.line.display_id = lw.int(wt)?,
            2 => rd.line.name = lw.string(wt)?,
            11 => rd.line.display_name = lw.string(wt)?,
            3 => rd.line.timestamp_ns = lw.int(wt)?,
            9 => rd.line.line_duration_ps = lw.int(wt)?,
            4 if in_file => return Ok(None),
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
                            rd.packed.push(decode_stat(w, sr, cx.stat_ids, &mut arena)?);
                        }
                        _ => ew.skip(wt)?,
                    }
                }
                let meta = cx.event_ids.get(meta_id).unwrap_or(UNKNOWN_META);
                unknown |= meta == UNKNOWN_META;
                if rd.packed.len() > u32::MAX as usize {
                    return Err(WireError { at: lw.pos(), what: "more than 4 billion stats on one line" });
                }
                rd.push_event(offset, dur, meta);
                rd.packed.end_event();
            }
            _ => lw.skip(wt)?,
        }
    }
    source.release(released..r.end);
    let mut line = rd.line;
    line.stats = if in_file {
        LineStats::Wire(Box::new(WireStats {
            from: rd.from,
            len: rd.len,
            id_sets: rd.id_sets,
            id_set: rd.id_set,
            source: source.clone(),
            ids: cx.stat_ids.clone(),
        }))
    } else {
        LineStats::Packed(Box::new(rd.packed))
    };
    Ok(Some((line, arena, unknown)))
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
    ///
    /// With `every_shape` false, only the shapes whose stats stay in the file: no
    /// compressed strings, and no event fields but the header and the stats.
    fn mixed_line(n: u64, every_shape: bool) -> Vec<u8> {
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
                5 if every_shape => stats.push([int(1, 2), ld(8, &gz(format!("text {i}").as_bytes()))].concat()),
                5 => stats.push([int(1, 2), ld(6, format!("bytes {i}").as_bytes())].concat()),
                _ => {}
            }
            let (meta, at, len) = (int(1, meta), int(2, i * 1_000 + i % 13), int(3, (i % 50) * 10_000_000_000));
            // The header in the order profilers write it, and in field order.
            let mut ev = if i % 2 == 0 { [at, meta, len].concat() } else { [meta, at, len].concat() };
            if i % 11 == 3 && every_shape {
                // Fields the fast path leaves to the general reader: an unknown varint,
                // a two-byte key, then the offset again (the last one counts).
                ev.splice(0..0, [int(5, 77), ld(20, b"later"), int(2, 5)].concat());
            }
            for st in stats {
                ev.extend(ld(4, &st));
            }
            if i % 13 == 6 && every_shape {
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

    /// Decodes `bytes` as one line, whole and in parts of `part_bytes`, leaving its
    /// stats in the file where it can when `in_file`.
    fn line_both_ways(bytes: Vec<u8>, part_bytes: usize, in_file: bool) -> (WireResult<Decoded>, WireResult<Decoded>) {
        let source = Arc::new(Source::Owned(bytes));
        let (events, stats) = (ids(4), Arc::new(ids(3)));
        let cx = LineCtx {
            w: Wire::new(&source),
            event_ids: &events,
            stat_ids: &stats,
            source: &source,
            stats_in_file: in_file,
        };
        let r = 0..source.len();
        let whole = decode_line(&cx, r.clone(), usize::MAX);
        let split = decode_line_split(&cx, r, part_bytes).map(|(mut line, arena, unknown)| {
            line.starts.add_saturating(line.timestamp_ns.saturating_mul(1000));
            (line, arena, unknown)
        });
        (whole, split)
    }

    /// Every stat of every event of `a` and `b`, which must hold the same events.
    fn assert_same_stats(a: &Line, b: &Line, what: &str) {
        assert_eq!(a.len(), b.len(), "{what}");
        for i in 0..a.len() {
            assert_eq!(a.event_stats(i).collect::<Vec<_>>(), b.event_stats(i).collect::<Vec<_>>(), "{what}: event {i}");
        }
    }

    #[test]
    fn a_line_read_in_parts_equals_it_read_whole() {
        let n = 2_000;
        for part_bytes in [1, 200, 5_000, 40_000, usize::MAX] {
            let (whole, split) = line_both_ways(mixed_line(n, true), part_bytes, true);
            let ((a, a_arena, a_unknown), (b, b_arena, b_unknown)) = (whole.unwrap(), split.unwrap());
            let head = |l: &Line| (l.id, l.name.clone(), l.display_name.clone(), l.timestamp_ns, l.line_duration_ps);
            assert_eq!(head(&a), (7, "Stream #1".into(), "display".into(), 1_000, 123_456));
            assert_eq!(head(&a), head(&b), "parts of {part_bytes}");
            assert_eq!(a.len(), n as usize);
            assert_eq!((a.starts.to_vec(), a.durations.to_vec()), (b.starts.to_vec(), b.durations.to_vec()));
            assert_eq!(a.metas.to_vec(), b.metas.to_vec());
            assert_eq!(a.stat_starts(), b.stat_starts());
            assert_same_stats(&a, &b, &format!("parts of {part_bytes}"));
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
    fn stats_left_in_the_file_read_as_packed_ones() {
        // No compressed string and the usual event shape: the stats stay in the file,
        // and read back as the packed reading gives them, whole or in parts.
        let n = 3_000;
        let bytes = mixed_line(n, false);
        let (packed, _) = line_both_ways(bytes.clone(), usize::MAX, false);
        let packed = packed.unwrap().0;
        assert!(!packed.stats_in_file());
        for part_bytes in [1, 300, 7_000, usize::MAX] {
            let (whole, split) = line_both_ways(bytes.clone(), part_bytes, true);
            let (whole, split) = (whole.unwrap().0, split.unwrap().0);
            assert!(whole.stats_in_file() && split.stats_in_file(), "parts of {part_bytes}");
            assert_same_stats(&packed, &whole, "whole");
            assert_same_stats(&packed, &split, &format!("parts of {part_bytes}"));
            assert_eq!(packed.metas.to_vec(), split.metas.to_vec());
            assert_eq!(packed.starts.to_vec(), split.starts.to_vec());
        }
        // One compressed string among them: the part that holds it packs its stats,
        // and joins the parts that did not.
        let mut one_gz = mixed_line(n, false);
        let gz_event =
            ld(4, &[&[0x08, 1, 0x10, 9][..], &ld(4, &[&[0x08, 2][..], &ld(8, &gz(b"zipped"))].concat())].concat());
        let cut = one_gz.len() / 2;
        let at = (cut..).find(|&k| one_gz[k] == EVENT_KEY && one_gz.get(k + 2) == Some(&0x10)).unwrap();
        one_gz.splice(at..at, gz_event);
        for part_bytes in [500, 20_000, usize::MAX] {
            let (whole, split) = line_both_ways(one_gz.clone(), part_bytes, true);
            let ((whole, whole_arena, _), (split, split_arena, _)) = (whole.unwrap(), split.unwrap());
            assert_eq!(whole.len(), n as usize + 1);
            assert_same_stats(&whole, &split, &format!("parts of {part_bytes}"));
            assert_eq!((whole_arena, split_arena), (b"zipped".to_vec(), b"zipped".to_vec()));
        }
    }

    #[test]
    fn skipping_by_stat_ids_finds_what_reading_every_stat_finds() {
        let bytes = mixed_line(1_500, false);
        let (whole, _) = line_both_ways(bytes, usize::MAX, true);
        let line = whole.unwrap().0;
        assert!(line.stats_in_file());
        let mut plane = Plane::new(1, "p".into(), Arc::new(Source::Owned(Vec::new())));
        // Stat metadata ids 1..=3 are dense 0..=2 (see `ids`).
        plane.stat_meta = (1..=3).map(|id| StatMeta { id, ..Default::default() }).collect();
        plane.event_meta = vec![EventMeta::default(); 4];
        // Second round: metadata 2's events also hold stat 1 (dense), through their metadata.
        for on_metadata in [false, true] {
            if on_metadata {
                plane.meta_stats = vec![Stat::new(1, StatValue::I64(5))];
                plane.event_meta[2].stats = 0..1;
            }
            for keys in [[Some(0), None], [Some(1), Some(2)], [Some(2), Some(0)], [None, None]] {
                let look = plane.stat_lookup(keys);
                for i in 0..line.len() {
                    let want = plane.event_stats_of(&line, i, keys);
                    assert_eq!(plane.stats_of(&look, &line, i), want, "{keys:?} event {i}");
                    assert_eq!(plane.has_any_of(&look, &line, i), want.iter().any(Option::is_some), "{keys:?} {i}");
                }
                // The events skipped a block at a time hold none of the keys.
                for range in [0..line.len(), 100..1_300, 63..65, 70..70, 1_400..9_999] {
                    let maybe: Vec<usize> = plane.events_maybe_with(&look, &line, range.clone()).collect();
                    let holding: Vec<usize> =
                        range.clone().filter(|&i| i < line.len() && plane.has_any_of(&look, &line, i)).collect();
                    // Ids under 64 each have their own bit: exactly the events holding a key.
                    assert_eq!(maybe, holding, "{keys:?} {range:?}");
                }
                // Found through the metadata alone: events holding no key themselves.
                let by_metadata = plane
                    .events_maybe_with(&look, &line, 0..line.len())
                    .filter(|&i| plane.own_stats_of(&look, &line, i).is_none());
                assert_eq!(by_metadata.count() > 0, on_metadata && keys.contains(&Some(1)), "{keys:?}");
            }
        }
    }

    #[test]
    fn a_damaged_line_read_in_parts_fails_where_it_fails_whole() {
        let good = mixed_line(500, true);
        let mut bad_inner = good.clone();
        // The 300th event's first key becomes a group start (wire type 3).
        let at = good.windows(3).enumerate().filter(|(_, w)| w[0] == EVENT_KEY && w[2] == 0x08).nth(300).unwrap().0;
        bad_inner[at + 2] = 0x0b;
        let cases = [good[..good.len() - 3].to_vec(), bad_inner, [&good[..], &[EVENT_KEY, 0xff, 0x01]].concat()];
        for (k, bytes) in cases.into_iter().enumerate() {
            for part_bytes in [1, 700, 9_000] {
                for in_file in [true, false] {
                    let (whole, split) = line_both_ways(bytes.clone(), part_bytes, in_file);
                    let (whole, split) = (whole.map(|d| d.0.len()), split.map(|d| d.0.len()));
                    assert!(whole.is_err(), "case {k}");
                    assert_eq!(whole, split, "case {k}, parts of {part_bytes}");
                }
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
