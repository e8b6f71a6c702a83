//! XStat messages and varints read straight off the wire: shared by the decoder
//! (`xplane`) and by lines that leave their events' stats in the file until an
//! analysis asks for them ([`WireWalk`]).
//!
//! A stat is *canonical* when its bytes are its metadata id followed by at most one
//! value field of the right wire type and nothing else, as every profiler writes
//! them ([`canonical_stat`]); others are read field by field ([`stat_fields`]). A
//! line keeps its stats in the file when every one is framed as expected and none is
//! a compressed string ([`stats_stay_in_file`]), which only the decoder can expand
//! (into its plane's arena); it reads other lines' stats and packs them.

use std::ops::Range;

use crate::stat::{IdMap, Span, Stat, StatValue, MAX_STAT_LEN};
use crate::wire::{Wire, WireError, WireResult, FIXED64, LEN, VARINT};

/// Dense index of a stat or event metadata id that the plane does not define.
pub(crate) const UNKNOWN_META: u32 = u32::MAX;

/// Keys of an XEvent's metadata id, offset, duration (varints) and stats.
pub(crate) const KEY_OFFSET: u8 = 2 << 3 | VARINT;
pub(crate) const KEY_DURATION: u8 = 3 << 3 | VARINT;
pub(crate) const KEY_STAT: u8 = 4 << 3 | LEN;

/// Keys of an XStat's (and an XEvent's) metadata id and of its values.
pub(crate) const KEY_META: u8 = 1 << 3 | VARINT;
const KEY_F64: u8 = 2 << 3 | FIXED64;
const KEY_U64: u8 = 3 << 3 | VARINT;
const KEY_I64: u8 = 4 << 3 | VARINT;
const KEY_STR: u8 = 5 << 3 | LEN;
const KEY_BYTES: u8 = 6 << 3 | LEN;
const KEY_REF: u8 = 7 << 3 | VARINT;
const KEY_GZIP: u8 = 8 << 3 | LEN;

/// A stat's value as written, before ids are resolved; positions are absolute.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Raw {
    /// No value field (proto3 leaves out zeros): reads as integer 0.
    Zero,
    F64(u64),
    U64(u64),
    I64(u64),
    Str(usize, usize),
    Bytes(usize, usize),
    /// A stat metadata id whose name is the value.
    Ref(u64),
    /// A gzip-compressed string (wire field 8), still compressed.
    Gzip(usize, usize),
}

/// The stat (`meta`, `raw`) with its ids made dense indexes; `None` for a still
/// compressed string, which only its reader can expand.
#[inline(always)]
pub(crate) fn resolve(meta: Option<u64>, raw: Raw, ids: &IdMap) -> Option<Stat> {
    let dense = |id: u64| ids.get(id as i64).unwrap_or(UNKNOWN_META);
    let value = match raw {
        Raw::Zero => StatValue::I64(0),
        Raw::F64(bits) => StatValue::F64(f64::from_bits(bits)),
        Raw::U64(v) => StatValue::U64(v),
        Raw::I64(v) => StatValue::I64(v as i64),
        Raw::Str(from, to) => StatValue::Str(span(from, to)),
        Raw::Bytes(from, to) => StatValue::Bytes(span(from, to)),
        Raw::Ref(id) => StatValue::Ref(dense(id)),
        Raw::Gzip(..) => return None,
    };
    Some(Stat::new(meta.map_or(UNKNOWN_META, dense), value))
}

/// The file's bytes `from..to` as a span (a longer range keeps its first 4 GiB).
pub(crate) fn span(from: usize, to: usize) -> Span {
    Span::source(from as u64, (to - from).min(u32::MAX as usize) as u32)
}

/// The canonical stat at `buf[from..to]` (see the module docs): its metadata id and
/// value; `None` for any other shape, a compressed string included. Works with
/// positions in registers: it runs once per stat, the most frequent message of a
/// profile.
#[inline(always)]
pub(crate) fn canonical_stat(buf: &[u8], from: usize, to: usize) -> Option<(u64, Raw)> {
    if from >= to || buf[from] != KEY_META {
        return None;
    }
    let (id, at) = varint_in(buf, from + 1, to)?;
    if at == to {
        return Some((id, Raw::Zero));
    }
    Some((id, canonical_value(buf, at, to)?))
}

/// The value of a canonical stat whose value field starts at `buf[at]` and ends at
/// `to`; `None` for any other shape.
#[inline(always)]
fn canonical_value(buf: &[u8], at: usize, to: usize) -> Option<Raw> {
    let key = buf[at];
    Some(match key {
        KEY_U64 | KEY_I64 | KEY_REF => {
            let (v, end) = varint_in(buf, at + 1, to)?;
            if end != to {
                return None;
            }
            match key {
                KEY_U64 => Raw::U64(v),
                KEY_I64 => Raw::I64(v),
                _ => Raw::Ref(v),
            }
        }
        KEY_STR | KEY_BYTES => {
            let (n, start) = varint_in(buf, at + 1, to)?;
            if n != (to - start) as u64 || n > MAX_STAT_LEN as u64 {
                return None;
            }
            if key == KEY_STR {
                Raw::Str(start, to)
            } else {
                Raw::Bytes(start, to)
            }
        }
        KEY_F64 if to - at == 9 => Raw::F64(u64::from_le_bytes(*buf.get(at + 1..to)?.first_chunk::<8>()?)),
        _ => return None,
    })
}

/// Any XStat at `r`, field by field: the metadata id (`None` when absent) and the
/// value, the last of each winning as in protobuf; unknown fields are skipped.
pub(crate) fn stat_fields(w: &Wire, r: Range<usize>) -> WireResult<(Option<u64>, Raw)> {
    let mut sw = w.sub(r);
    let (mut meta, mut value) = (None, Raw::Zero);
    while !sw.done() {
        let at = sw.pos();
        let (field, wt) = sw.key()?;
        value = match (field, wt) {
            (1, _) => {
                meta = Some(sw.int(wt)? as u64);
                continue;
            }
            (2, FIXED64) => Raw::F64(sw.fixed64()?),
            (3, VARINT) => Raw::U64(sw.varint()?),
            (4, VARINT) => Raw::I64(sw.varint()?),
            (5 | 6 | 8, LEN) => {
                let b = sw.bytes(wt)?;
                match field {
                    _ if field != 8 && b.len() > MAX_STAT_LEN => {
                        return Err(WireError { at, what: "stat value larger than 512 MiB" })
                    }
                    5 => Raw::Str(b.start, b.end),
                    6 => Raw::Bytes(b.start, b.end),
                    _ => Raw::Gzip(b.start, b.end),
                }
            }
            (7, VARINT) => Raw::Ref(sw.varint()?),
            (2..=8, _) => return Err(WireError { at, what: "stat value with the wrong wire type" }),
            _ => {
                sw.skip(wt)?;
                continue;
            }
        };
    }
    Ok((meta, value))
}

/// An XEvent's usual header at `buf[from..to]`: metadata id, offset and duration,
/// each at most once, in any order (profilers write the offset first; each may be
/// absent, as a zero is not written). Returns them and where the header ends.
#[inline(always)]
pub(crate) fn event_header(buf: &[u8], from: usize, to: usize) -> ([u64; 3], usize) {
    let mut fields = [0u64; 3];
    let mut p = from;
    for _ in 0..3 {
        let slot = match buf.get(p).filter(|_| p < to) {
            Some(&KEY_META) => 0,
            Some(&KEY_OFFSET) => 1,
            Some(&KEY_DURATION) => 2,
            _ => break,
        };
        let Some((v, next)) = varint_in(buf, p + 1, to) else { break };
        fields[slot] = v;
        p = next;
    }
    (fields, p)
}

/// Whether `buf[p..to]` holds only stats that can stay in the file: well framed, and
/// with no compressed string (which only the decoder can expand). If so, the bits
/// `1 << (id % 64)` of their metadata ids ([`id_bit`]): a superset of the stats the
/// event has, for skipping events without reading them.
///
/// Checked cheaply for the commonest stat (a one-byte length and metadata id, and a
/// first value field that is not a compressed string): the value itself is read,
/// and any other shape read field by field, only when an analysis asks
/// ([`WireWalk::stat`]).
#[inline(always)]
pub(crate) fn stats_stay_in_file(buf: &[u8], mut p: usize, to: usize) -> Option<u64> {
    let stats = buf.get(..to)?;
    let mut ids = 0u64;
    while p < to {
        // Key 0x22, a one-byte length (the metadata id and a value at least), key 0x08,
        // a one-byte id, and the value's key.
        if let Some(&[KEY_STAT, len @ 2..0x80, KEY_META, id @ 0..0x80, value_key]) = stats.get(p..p + 5) {
            let end = p + 2 + len as usize;
            if end <= to && (len == 2 || value_key != KEY_GZIP) {
                ids |= id_bit(u64::from(id));
                p = end;
                continue;
            }
        }
        if buf[p] != KEY_STAT {
            return None;
        }
        let (n, start) = varint_in(buf, p + 1, to)?;
        if n > (to - start) as u64 {
            return None;
        }
        let end = start + n as usize;
        match stat_fields(&Wire::new(buf), start..end) {
            Ok((_, Raw::Gzip(..))) | Err(_) => return None,
            Ok((meta, _)) => ids |= meta.map_or(0, id_bit),
        }
        p = end;
    }
    Some(ids)
}

/// The bit that stands for stat metadata id `id` in a set of ids folded to 64 bits.
#[inline(always)]
pub(crate) fn id_bit(id: u64) -> u64 {
    1 << (id & 63)
}

/// The stats of one event that stay in the file ([`stats_stay_in_file`]), walked
/// where they lie.
#[derive(Clone)]
pub(crate) struct WireWalk<'a> {
    pub(crate) buf: &'a [u8],
    pub(crate) at: usize,
    pub(crate) end: usize,
    pub(crate) ids: &'a IdMap,
}

/// Where a stat is ([`WireWalk::next_meta`]): its dense metadata index, the start of
/// its bytes, where its value field starts if it is canonical, and its end.
pub(crate) type WireAt = (u32, usize, usize, usize);

impl WireWalk<'_> {
    /// The next stat's dense metadata index and where it is: [`WireWalk::next_in`]
    /// with every stat asked for.
    #[inline(always)]
    pub(crate) fn next_meta(&mut self) -> Option<(u32, WireAt)> {
        const EVERY_ID: [u8; 128] = [0; 128];
        self.next_in(&EVERY_ID, |_| 0).map(|(_, at)| (at.0, at))
    }

    /// The next stat whose slot is not `NO_SLOT` (`u8::MAX`): one-byte metadata ids
    /// give theirs by `by_wire_id`, others by `slot_of` their metadata index.
    #[inline(always)]
    pub(crate) fn next_in(&mut self, by_wire_id: &[u8; 128], slot_of: impl Fn(u32) -> u8) -> Option<(u8, WireAt)> {
        while self.at < self.end {
            let at = self.at;
            // Key 0x22 and length: checked while decoding. The commonest, a one-byte
            // length and metadata id, read in one 4-byte load.
            let head = self.buf.get(at..).and_then(|b| b.first_chunk::<4>()).map(|h| u32::from_le_bytes(*h));
            let usual = |h: &u32| h & 0x80ff_8000 == u32::from(KEY_META) << 16 && (h >> 8) & 0x7f >= 2;
            if let Some(h) = head.filter(usual) {
                let to = at + 2 + ((h >> 8) & 0x7f) as usize;
                self.at = to;
                let k = by_wire_id[(h >> 24) as usize & 0x7f];
                if k != u8::MAX {
                    let meta = self.ids.get(i64::from(h >> 24)).unwrap_or(UNKNOWN_META);
                    return Some((k, (meta, at + 2, at + 4, to)));
                }
                continue;
            }
            let (meta, place) = self.other_meta(at)?;
            self.at = place.2;
            let k = slot_of(meta);
            if k != u8::MAX {
                return Some((k, (meta, place.0, place.1, place.2)));
            }
        }
        None
    }

    /// [`WireWalk::next_in`] for a stat of another shape: read field by field.
    #[cold]
    #[inline(never)]
    fn other_meta(&self, at: usize) -> Option<(u32, (usize, usize, usize))> {
        let (n, start) = varint_in(self.buf, at + 1, self.end)?;
        let to = start.checked_add(n as usize)?.min(self.end);
        let meta = match canonical_stat(self.buf, start, to) {
            Some((id, _)) => Some(id),
            None => stat_fields(&Wire::new(self.buf), start..to).ok()?.0,
        };
        let value = match self.buf.get(start) {
            Some(&KEY_META) => varint_in(self.buf, start + 1, to).map_or(to, |(_, v)| v),
            _ => to,
        };
        Some((meta.map_or(UNKNOWN_META, |id| self.ids.get(id as i64).unwrap_or(UNKNOWN_META)), (start, value, to)))
    }

    /// The stat at the place [`WireWalk::next_in`] gave.
    #[inline(always)]
    pub(crate) fn stat(&self, (meta, start, value, to): WireAt) -> Stat {
        let raw = match value {
            _ if value >= to => Some(Raw::Zero),
            _ => canonical_value(self.buf, value, to),
        };
        match raw.and_then(|raw| resolve(None, raw, self.ids)) {
            Some(s) => Stat::new(meta, s.value()),
            None => self.other_stat(start, to),
        }
    }

    /// [`WireWalk::stat`] for a stat that is not canonical: read field by field, as
    /// the decoder would. A damaged one reads as the integer 0.
    #[cold]
    #[inline(never)]
    fn other_stat(&self, start: usize, to: usize) -> Stat {
        stat_fields(&Wire::new(self.buf), start..to)
            .ok()
            .and_then(|(meta, raw)| resolve(meta, raw, self.ids))
            .unwrap_or(Stat::new(UNKNOWN_META, StatValue::I64(0)))
    }
}

/// The varint at `buf[at..]` and the position after it, for the readers that work on
/// a message's bytes: one byte inline, longer ones out of line; `None` when it runs
/// past `end` (the end of its message) or past 64 bits. The bytes after `end` are
/// still the file's, so a long varint near the end of its message is read as one
/// word like any other.
#[inline(always)]
pub(crate) fn varint_in(buf: &[u8], at: usize, end: usize) -> Option<(u64, usize)> {
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
