//! The columnar profile model every reader produces.
//!
//! One [`Space`] is one host's profile. It holds [`Plane`]s (host CPU, each
//! device, metadata, …); a plane holds [`Line`]s (threads, streams, op
//! lines), and a line holds its events as parallel columns: start, duration,
//! dense metadata index, and where the event's stats are. An XSpace line leaves
//! them in the file (their position and length, and the set of stat ids each event
//! has, so lookups skip events without the keys) and reads them when an analysis
//! asks; other lines, and XSpace lines with a stat only the decoder can read (a
//! compressed string), keep them in a per-line table, packed into 8 bytes each.
//! [`Line::event_stats`] gives either as [`Stat`]s.
//! Starts, durations and stat ranges are [`Column`]s: blocks of 64 values stored as
//! distances from the block's smallest in the bytes the block needs (a few bytes an
//! event instead of 8), read back with [`Line::start_ps`] and [`Line::duration_ps`].
//!
//! Strings are never copied out of the file: names and string stats are
//! [`Span`]s into the file's bytes (or into a small per-plane arena for
//! strings a reader had to make, e.g. JSON-unescaped or gunzipped ones), and
//! are read back through [`Plane::text`].

use std::ops::Range;
use std::sync::Arc;

use crate::column::{Column, BLOCK};
pub(crate) use crate::stat::IdMap;
pub use crate::stat::{Source, Span, Stat, StatKind, StatValue, MAX_STAT_LEN};
use crate::stat_wire::{id_bit, WireAt, WireWalk};

/// A stat as a [`Line`] stores it, in 8 bytes. Nearly every event stat (a metadata
/// index below 2^20 and an integer, ref or short float value that fits 40 bits) is
/// held inline; the rest go to the line's [`Wide`] table and the packed word holds
/// their index there: numbers (wide integers, floats) as their 8 bytes, strings, bytes
/// and stats whose metadata index does not fit as whole [`Stat`]s.
///
/// Layout: bit 0 wide; bits 1–3 kind; bits 4–23 metadata index ([`PACKED_META_NONE`]
/// when it does not fit); bits 24–63 the value or the wide index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PackedStat(u64);

const PACKED_WIDE: u64 = 1;
const PACKED_META_NONE: u64 = (1 << 20) - 1;
const PACKED_PAYLOAD_BITS: u32 = 40;

/// A line's stats that do not fit a [`PackedStat`].
#[derive(Clone, Debug, Default)]
pub(crate) struct Wide {
    /// Numbers (F64, U64, I64 bits) of stats whose metadata index fits.
    nums: Vec<u64>,
    /// Every other wide stat, whole.
    stats: Vec<Stat>,
}

impl Wide {
    #[inline]
    pub(crate) fn shrink_to_fit(&mut self) {
        self.nums.shrink_to_fit();
        self.stats.shrink_to_fit();
    }

    fn heap_bytes(&self) -> usize {
        self.nums.capacity() * 8 + self.stats.capacity() * std::mem::size_of::<Stat>()
    }
}

impl PackedStat {
    /// Packs the stat (`meta`, `value`), moving it to `wide` when it does not fit inline.
    #[inline]
    fn pack(meta: u32, value: StatValue, wide: &mut Wide) -> PackedStat {
        const FITS: u64 = 1 << PACKED_PAYLOAD_BITS;
        let m = u64::from(meta);
        let inline = match value {
            _ if m >= PACKED_META_NONE => None,
            StatValue::U64(v) => (v < FITS).then_some((v, StatKind::U64)),
            StatValue::I64(v) => {
                (-(1i64 << 39)..(1i64 << 39)).contains(&v).then_some((v as u64 & (FITS - 1), StatKind::I64))
            }
            StatValue::Ref(r) => Some((u64::from(r), StatKind::Ref)),
            // Floats whose low 24 mantissa bits are zero (50.0, 0.75, …) keep their top 40.
            StatValue::F64(v) => (v.to_bits() & 0xFF_FFFF == 0).then_some((v.to_bits() >> 24, StatKind::F64)),
            StatValue::Str(_) | StatValue::Bytes(_) => None,
        };
        match inline {
            Some((payload, kind)) => PackedStat(payload << 24 | m << 4 | (kind as u64) << 1),
            None => Self::pack_wide(Stat::new(meta, value), wide),
        }
    }

    /// [`PackedStat::pack`] for a stat that goes to the wide table.
    #[cold]
    #[inline(never)]
    fn pack_wide(s: Stat, wide: &mut Wide) -> PackedStat {
        let meta = u64::from(s.meta);
        let number = match s.value() {
            _ if meta >= PACKED_META_NONE => None,
            StatValue::U64(v) => Some(v),
            StatValue::I64(v) => Some(v as u64),
            StatValue::F64(v) => Some(v.to_bits()),
            _ => None,
        };
        let at = match number {
            Some(bits) => {
                wide.nums.push(bits);
                wide.nums.len() - 1
            }
            None => {
                wide.stats.push(s);
                wide.stats.len() - 1
            }
        };
        PackedStat((at as u64) << 24 | meta.min(PACKED_META_NONE) << 4 | (s.kind() as u64) << 1 | PACKED_WIDE)
    }

    /// The stat's metadata index (reading `wide` only for a wide stat whose index did
    /// not fit).
    #[inline]
    fn meta(self, wide: &Wide) -> u32 {
        match (self.0 >> 4) & PACKED_META_NONE {
            PACKED_META_NONE => self.unpack(wide).meta(),
            m => m as u32,
        }
    }

    /// For a wide stat: whether it is held in `Wide::nums` (else in `Wide::stats`).
    #[inline]
    fn wide_number(self) -> bool {
        (self.0 >> 1) & 7 <= 2 && (self.0 >> 4) & PACKED_META_NONE != PACKED_META_NONE
    }

    /// The stat, reading `wide` for one held there.
    #[inline]
    fn unpack(self, wide: &Wide) -> Stat {
        let payload = self.0 >> 24;
        let meta = ((self.0 >> 4) & PACKED_META_NONE) as u32;
        let kind = (self.0 >> 1) & 7;
        if self.0 & PACKED_WIDE != 0 {
            let missing = Stat::new(u32::MAX, StatValue::I64(0));
            let number = |v: Option<&u64>| match (v, kind) {
                (Some(&v), 0) => Stat::new(meta, StatValue::F64(f64::from_bits(v))),
                (Some(&v), 1) => Stat::new(meta, StatValue::U64(v)),
                (Some(&v), _) => Stat::new(meta, StatValue::I64(v as i64)),
                (None, _) => missing,
            };
            return match self.wide_number() {
                true => number(wide.nums.get(payload as usize)),
                false => wide.stats.get(payload as usize).copied().unwrap_or(missing),
            };
        }
        let value = match kind {
            0 => StatValue::F64(f64::from_bits(payload << 24)),
            1 => StatValue::U64(payload),
            2 => StatValue::I64(((payload << 24) as i64) >> 24),
            _ => StatValue::Ref(payload as u32),
        };
        Stat::new(meta, value)
    }
}

/// The stats of one event, as [`Stat`]s (see [`Line::event_stats`]).
#[derive(Clone)]
pub struct EventStats<'a>(Walk<'a>);

/// One event's stats, packed or in the file.
#[derive(Clone)]
enum Walk<'a> {
    Packed(PackedWalk<'a>),
    Wire(WireWalk<'a>),
}

impl Iterator for EventStats<'_> {
    type Item = Stat;

    #[inline]
    fn next(&mut self) -> Option<Stat> {
        match &mut self.0 {
            Walk::Packed(w) => w.next_meta().map(|(_, at)| w.stat(at)),
            Walk::Wire(w) => w.next_meta().map(|(_, at)| w.stat(at)),
        }
    }
}

/// An event's own stats walked by metadata index first, each value read only when
/// asked for ([`Plane::stats_of`] and its kin).
trait StatWalk {
    /// Where a stat is, for [`StatWalk::stat`].
    type At: Copy;
    /// The next stat's dense metadata index.
    fn next_meta(&mut self) -> Option<(u32, Self::At)>;
    /// The stat at `at`.
    fn stat(&self, at: Self::At) -> Stat;

    /// The next stat that one of `look`'s keys asks for: its slot and place.
    #[inline(always)]
    fn next_wanted<const N: usize>(&mut self, look: &StatLookup<N>) -> Option<(usize, Self::At)> {
        while let Some((meta, at)) = self.next_meta() {
            let k = look.slot.get(meta as usize).copied().unwrap_or(NO_SLOT);
            if k != NO_SLOT {
                return Some((k as usize, at));
            }
        }
        None
    }
}

/// The packed stats of one event.
#[derive(Clone)]
struct PackedWalk<'a> {
    packed: std::slice::Iter<'a, PackedStat>,
    wide: &'a Wide,
}

impl StatWalk for PackedWalk<'_> {
    type At = PackedStat;

    #[inline(always)]
    fn next_meta(&mut self) -> Option<(u32, PackedStat)> {
        self.packed.next().map(|&p| (p.meta(self.wide), p))
    }

    #[inline(always)]
    fn stat(&self, at: PackedStat) -> Stat {
        at.unpack(self.wide)
    }
}

impl StatWalk for WireWalk<'_> {
    type At = WireAt;

    #[inline(always)]
    fn next_meta(&mut self) -> Option<(u32, WireAt)> {
        WireWalk::next_meta(self)
    }

    #[inline(always)]
    fn stat(&self, at: WireAt) -> Stat {
        WireWalk::stat(self, at)
    }

    /// Matches one-byte metadata ids by the lookup's table of them, with no
    /// metadata index made for a stat no key asks for.
    #[inline(always)]
    fn next_wanted<const N: usize>(&mut self, look: &StatLookup<N>) -> Option<(usize, WireAt)> {
        let slot_of = |meta: u32| look.slot.get(meta as usize).copied().unwrap_or(NO_SLOT);
        let (k, at) = self.next_in(&look.by_wire_id, slot_of)?;
        Some((k as usize, at))
    }
}

/// Runs `$body` with `$w` bound to event `$i`'s [`StatWalk`] on `$line`, for either
/// kind of line stats (one copy of `$body` each, so the walk inlines).
macro_rules! with_walk {
    ($line:expr, $i:expr, |$w:ident| $body:expr) => {
        match &$line.stats {
            LineStats::Bare => {
                #[allow(unused_mut)]
                let mut $w = PackedWalk::none();
                $body
            }
            LineStats::Packed(p) => {
                #[allow(unused_mut)]
                let mut $w = p.walk($i);
                $body
            }
            LineStats::Wire(x) => {
                #[allow(unused_mut)]
                let mut $w = x.walk($i);
                $body
            }
        }
    };
}

/// The bits of `values` (up to [`BLOCK`] indexes) that `mask` marks; an index past
/// `mask` counts as `past`.
#[inline]
fn marked(values: &[i64], mask: &[bool], past: bool) -> u64 {
    let mut bits = 0u64;
    for (k, &v) in values.iter().enumerate() {
        bits |= u64::from(mask.get(v as usize).copied().unwrap_or(past)) << k;
    }
    bits
}

/// Where a line keeps its events' stats. Boxed, and nothing at all for a line whose
/// events have none: a line costs its events, not the room stats could take (a
/// profile of millions of one-event lines).
#[derive(Clone, Debug, Default)]
pub(crate) enum LineStats {
    /// No event of the line has a stat of its own.
    #[default]
    Bare,
    /// Decoded and packed: made by readers that build stats (trace JSON, tests), and
    /// by the XSpace reader for lines with a stat it had to expand or could not leave
    /// in the file.
    Packed(Box<PackedStats>),
    /// Left in the file, read when asked for: XSpace lines whose stats the decoder
    /// found well framed and free of compressed strings (`stat_wire`).
    Wire(Box<WireStats>),
}

impl LineStats {
    /// `Bare` where no event has a stat (after decoding, which makes the others).
    #[inline]
    pub(crate) fn bare_if_empty(&mut self) {
        let empty = match self {
            LineStats::Bare => return,
            LineStats::Packed(p) => p.stats.is_empty(),
            LineStats::Wire(x) => x.len.iter().all(|n| n == 0),
        };
        if empty {
            *self = LineStats::Bare;
        }
    }
}

/// The wide stats of no line.
static NO_WIDE: Wide = Wide { nums: Vec::new(), stats: Vec::new() };

impl PackedWalk<'static> {
    /// The walk of an event without stats.
    fn none() -> PackedWalk<'static> {
        PackedWalk { packed: [].iter(), wide: &NO_WIDE }
    }
}

/// A line's stats decoded and packed.
#[derive(Clone, Debug, Default)]
pub(crate) struct PackedStats {
    /// `start[i]..start[i+1]` is event i's range in `stats`; len = events + 1 (empty
    /// before the first event).
    pub(crate) start: Column,
    /// Event stats, packed.
    pub(crate) stats: Vec<PackedStat>,
    /// Stats too wide to pack: strings, bytes, large integers.
    pub(crate) wide: Wide,
}

impl PackedStats {
    /// The stats of `events` events that have none.
    fn none_of(events: usize) -> PackedStats {
        let mut p = PackedStats::with_capacity(events, 0);
        for _ in 0..events {
            p.end_event();
        }
        p
    }

    /// Room for about `stats` stats of `events` events.
    #[inline]
    pub(crate) fn with_capacity(events: usize, stats: usize) -> PackedStats {
        PackedStats {
            start: Column::with_capacity(events + 1),
            stats: Vec::with_capacity(stats),
            wide: Wide::default(),
        }
    }

    #[inline(always)]
    fn walk(&self, i: usize) -> PackedWalk<'_> {
        let (from, to) = self.start.get_pair(i);
        let packed = self.stats.get(from as usize..to as usize).unwrap_or(&[]).iter();
        PackedWalk { packed, wide: &self.wide }
    }

    /// Number of stats.
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.stats.len()
    }

    /// Where the stats end, packed and wide, for [`PackedStats::truncate`].
    #[inline]
    pub(crate) fn mark(&self) -> [usize; 3] {
        [self.stats.len(), self.wide.nums.len(), self.wide.stats.len()]
    }

    /// Drops the stats pushed since `mark` was taken.
    #[inline]
    pub(crate) fn truncate(&mut self, mark: [usize; 3]) {
        self.stats.truncate(mark[0]);
        self.wide.nums.truncate(mark[1]);
        self.wide.stats.truncate(mark[2]);
    }

    /// Appends one stat of the event being read (then [`PackedStats::end_event`]).
    #[inline]
    pub(crate) fn push(&mut self, s: Stat) {
        self.push_value(s.meta(), s.value());
    }

    /// [`PackedStats::push`] of the stat (`meta`, `value`).
    #[inline]
    pub(crate) fn push_value(&mut self, meta: u32, value: StatValue) {
        self.stats.push(PackedStat::pack(meta, value, &mut self.wide));
    }

    /// Closes the event whose stats were pushed last.
    #[inline]
    pub(crate) fn end_event(&mut self) {
        if self.start.is_empty() {
            self.start.push(0);
        }
        self.start.push(self.stats.len() as i64);
    }

    #[inline]
    pub(crate) fn shrink_to_fit(&mut self) {
        self.start.shrink_to_fit();
        self.stats.shrink_to_fit();
        self.wide.shrink_to_fit();
    }

    /// Appends `next`'s stats (those of the events after ours).
    fn append(&mut self, mut next: PackedStats) {
        // next's wide stats go after ours: move its indexes into that table.
        let (nums, wides) = (self.wide.nums.len() as u64, self.wide.stats.len() as u64);
        if !next.wide.nums.is_empty() || !next.wide.stats.is_empty() {
            for s in &mut next.stats {
                if s.0 & PACKED_WIDE != 0 {
                    s.0 += (if s.wide_number() { nums } else { wides }) << 24;
                }
            }
        }
        self.wide.nums.extend_from_slice(&next.wide.nums);
        self.wide.stats.extend_from_slice(&next.wide.stats);
        // Both start columns begin at 0 and end at their stat count.
        let stat_base = self.stats.len() as i64;
        self.stats.extend_from_slice(&next.stats);
        drop(next.stats);
        if self.start.is_empty() {
            self.start.push(0);
        }
        if !next.start.is_empty() {
            self.start.pop();
            next.start.add_saturating(stat_base);
            self.start.append(next.start);
        }
    }
}

/// A line's stats left in the file: each event's stat fields by position.
#[derive(Clone)]
pub(crate) struct WireStats {
    /// Where event i's stats start in the source.
    pub(crate) from: Column,
    /// Their length in bytes.
    pub(crate) len: Column,
    /// The distinct sets of stat metadata ids the events have (folded to 64 bits,
    /// [`crate::stat_wire::id_bit`]), and each event's index into them.
    pub(crate) id_sets: Vec<u64>,
    pub(crate) id_set: Column,
    pub(crate) source: Arc<Source>,
    /// The plane's stat metadata ids.
    pub(crate) ids: Arc<IdMap>,
}

impl std::fmt::Debug for WireStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WireStats").field("events", &self.from.len()).finish()
    }
}

impl WireStats {
    /// Event `i`'s set of stat ids.
    #[inline(always)]
    fn ids_of(&self, i: usize) -> u64 {
        self.id_sets.get(self.id_set.get(i) as usize).copied().unwrap_or(u64::MAX)
    }

    /// Appends `next`'s events (those after ours).
    fn append(&mut self, next: WireStats) {
        self.from.append(next.from);
        self.len.append(next.len);
        // next's id sets, as indexes into ours.
        let mut to_mine = Vec::with_capacity(next.id_sets.len());
        for set in next.id_sets {
            to_mine.push(match self.id_sets.iter().position(|&s| s == set) {
                Some(k) => k as i64,
                None => {
                    self.id_sets.push(set);
                    self.id_sets.len() as i64 - 1
                }
            });
        }
        let same = to_mine.iter().enumerate().all(|(k, &m)| k as i64 == m);
        if same {
            self.id_set.append(next.id_set);
        } else {
            let moved = next.id_set.iter().map(|k| to_mine.get(k as usize).copied().unwrap_or(0));
            self.id_set.append(moved.collect());
        }
    }

    #[inline(always)]
    fn walk(&self, i: usize) -> WireWalk<'_> {
        let (at, len) = (self.from.get(i) as usize, self.len.get(i) as usize);
        WireWalk { buf: &self.source, at, end: at + len, ids: &self.ids }
    }

    /// The stats as packed ones.
    fn packed(&self) -> PackedStats {
        let mut p = PackedStats::with_capacity(self.from.len(), 0);
        for i in 0..self.from.len() {
            let mut w = self.walk(i);
            while let Some((_, at)) = w.next_meta() {
                p.push(w.stat(at));
            }
            p.end_event();
        }
        p
    }
}

/// Metadata shared by all events of one kind (an XEventMetadata).
#[derive(Clone, Debug, Default)]
pub struct EventMeta {
    pub id: i64,
    pub name: Span,
    pub display_name: Span,
    /// Range into [`Plane::meta_stats`].
    pub stats: Range<u32>,
    /// Ids (not dense indexes) of child metadata, as on the wire.
    pub child_ids: Vec<i64>,
}

/// Metadata of a stat (an XStatMetadata): its name, and for `ref` stats the value.
#[derive(Clone, Debug, Default)]
pub struct StatMeta {
    pub id: i64,
    pub name: Span,
    pub description: Span,
}

/// The longest event length read as recorded, ps (2^60 ps, about 13 days); a longer
/// or negative one (`duration_ps` is an int64 on the wire) is damage, read as 0 — a
/// negative one made a median step of −9,223,372 s.
pub const MAX_EVENT_PS: i64 = 1 << 60;

/// Empty lines (no events) a plane keeps; past them, empty lines are counted
/// ([`Plane::empty_lines_not_kept`]). A million empty lines are 2 MB on the wire and
/// took 400 MB kept; no real capture has more than a few dozen.
pub const MAX_EMPTY_LINES: usize = 4096;

/// One line (thread, stream, op line) with its events as columns.
#[derive(Clone, Debug, Default)]
pub struct Line {
    pub id: i64,
    pub display_id: i64,
    pub name: String,
    pub display_name: String,
    pub timestamp_ns: i64,
    /// The line's own length (XLine `duration_ps`), ps.
    pub line_duration_ps: i64,
    /// Counter samples (trace JSON `C` events) rather than spans; not counted as events.
    pub is_counter: bool,
    /// Events whose recorded length is impossible (over [`MAX_EVENT_PS`], a damaged
    /// file): read as instants.
    pub damaged_durations: u32,
    /// Event starts, ps since the session start (`timestamp_ns * 1000 + offset_ps`).
    pub(crate) starts: Column,
    /// Event lengths, ps.
    pub(crate) durations: Column,
    /// Dense indexes into [`Plane::event_meta`] (read them with [`Line::meta`]).
    pub(crate) metas: Column,
    /// Event stats (read them with [`Line::event_stats`]).
    pub(crate) stats: LineStats,
}

impl Line {
    /// Number of events.
    #[inline]
    pub fn len(&self) -> usize {
        self.metas.len()
    }

    /// True when the line has no events.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.metas.is_empty()
    }

    /// Event `i`'s dense index into [`Plane::event_meta`].
    #[inline]
    pub fn meta(&self, i: usize) -> u32 {
        self.metas.get(i) as u32
    }

    /// Start of event `i`, ps since the session start.
    #[inline]
    pub fn start_ps(&self, i: usize) -> i64 {
        self.starts.get(i)
    }

    /// Length of event `i` as recorded (may be negative in a damaged file), ps.
    #[inline]
    pub fn duration_ps(&self, i: usize) -> i64 {
        self.durations.get(i)
    }

    /// The event starts, in event order.
    #[inline]
    pub fn starts(&self) -> &Column {
        &self.starts
    }

    /// The event lengths, in event order.
    #[inline]
    pub fn durations(&self) -> &Column {
        &self.durations
    }

    /// Moves every event `d` ps later (saturating), e.g. to align hosts' clocks.
    #[inline]
    pub fn shift_ps(&mut self, d: i64) {
        self.starts.add_saturating(d);
    }

    /// Stats stored on event `i` itself (not those on its metadata).
    #[inline]
    pub fn event_stats(&self, i: usize) -> EventStats<'_> {
        EventStats(match &self.stats {
            LineStats::Bare => Walk::Packed(PackedWalk::none()),
            LineStats::Packed(p) => Walk::Packed(p.walk(i)),
            LineStats::Wire(x) => Walk::Wire(x.walk(i)),
        })
    }

    /// Bytes the line's columns hold (capacity included): starts and lengths, metadata
    /// indexes, stat ranges (or positions), and packed and wide stats.
    #[inline]
    pub fn heap_bytes(&self) -> [usize; 5] {
        let stats = match &self.stats {
            LineStats::Bare => [0, 0, 0],
            LineStats::Packed(p) => [p.start.heap_bytes(), p.stats.capacity() * 8, p.wide.heap_bytes()],
            LineStats::Wire(x) => [x.from.heap_bytes() + x.len.heap_bytes() + x.id_set.heap_bytes(), 0, 0],
        };
        [self.starts.heap_bytes() + self.durations.heap_bytes(), self.metas.heap_bytes(), stats[0], stats[1], stats[2]]
    }

    /// Number of event stats on the line.
    #[inline]
    pub fn stat_count(&self) -> usize {
        match &self.stats {
            LineStats::Bare => 0,
            LineStats::Packed(p) => p.len(),
            LineStats::Wire(_) => (0..self.len()).map(|i| self.event_stats(i).count()).sum(),
        }
    }

    /// A superset of event `i`'s stat metadata ids, folded to 64 bits (all bits for a
    /// line that does not know).
    #[inline(always)]
    fn stat_ids_of(&self, i: usize) -> u64 {
        match &self.stats {
            LineStats::Bare => 0,
            LineStats::Packed(_) => u64::MAX,
            LineStats::Wire(x) => x.ids_of(i),
        }
    }

    /// Tells the kernel that the stats of `events` were read and are not needed soon
    /// ([`Source::release`]): for scans over many events, so that the file's pages
    /// they read do not all stay resident at once. Reading them again maps them again.
    /// A no-op for stats not in the file.
    #[inline]
    pub fn release_stats(&self, events: Range<usize>) {
        let LineStats::Wire(x) = &self.stats else { return };
        if events.start >= events.end || events.end > self.len() {
            return;
        }
        let last = events.end - 1;
        let end = (x.from.get(last) + x.len.get(last)) as usize;
        x.source.release(x.from.get(events.start) as usize..end);
    }

    /// Each event's first stat's index in the packed stats, and the stat count last
    /// (empty for stats in the file).
    #[cfg(test)]
    pub(crate) fn stat_starts(&self) -> Vec<i64> {
        match &self.stats {
            LineStats::Packed(p) => p.start.to_vec(),
            LineStats::Bare => vec![0; self.len() + 1],
            LineStats::Wire(_) => Vec::new(),
        }
    }

    /// Whether the line's stats are still in the file (read when asked for).
    #[inline]
    pub fn stats_in_file(&self) -> bool {
        matches!(self.stats, LineStats::Wire(_))
    }

    /// Makes the line's stats packed ones (a line about to take stats the file does
    /// not hold).
    fn pack_stats(&mut self) {
        match &self.stats {
            LineStats::Wire(x) => self.stats = LineStats::Packed(Box::new(x.packed())),
            LineStats::Bare => self.stats = LineStats::Packed(Box::new(PackedStats::none_of(self.len()))),
            LineStats::Packed(_) => {}
        }
    }

    /// Moves the arena offsets of the line's string stats `base` bytes further (readers
    /// that append a line's strings to its plane's arena).
    #[inline]
    pub(crate) fn rebase_arena(&mut self, base: u64) {
        let LineStats::Packed(p) = &mut self.stats else { return };
        for s in &mut p.wide.stats {
            if let StatValue::Str(sp) = s.value() {
                if let Some(moved) = sp.arena_shifted(base) {
                    *s = Stat::new(s.meta(), StatValue::Str(moved));
                }
            }
        }
    }

    /// Appends the events of `next`, the following part of the same line read
    /// separately (its header fields, where set, win, as a later field would). Its
    /// string stats must already point into the same arena ([`Line::rebase_arena`]).
    /// Cheap when this part holds a multiple of [`BLOCK`] events and both keep their
    /// stats the same way.
    pub(crate) fn append_part(&mut self, mut next: Line) {
        fn later<T: Default + PartialEq>(mine: &mut T, next: &mut T) {
            if *next != T::default() {
                *mine = std::mem::take(next);
            }
        }
        later(&mut self.id, &mut next.id);
        later(&mut self.display_id, &mut next.display_id);
        later(&mut self.name, &mut next.name);
        later(&mut self.display_name, &mut next.display_name);
        later(&mut self.timestamp_ns, &mut next.timestamp_ns);
        later(&mut self.line_duration_ps, &mut next.line_duration_ps);
        self.damaged_durations = self.damaged_durations.saturating_add(next.damaged_durations);
        let next_events = next.len();
        match (&mut self.stats, std::mem::take(&mut next.stats)) {
            (LineStats::Bare, LineStats::Bare) => {}
            (LineStats::Wire(mine), LineStats::Wire(theirs)) => mine.append(*theirs),
            (_, theirs) => {
                let theirs = match theirs {
                    LineStats::Packed(p) => *p,
                    LineStats::Wire(x) => x.packed(),
                    LineStats::Bare => PackedStats::none_of(next_events),
                };
                self.pack_stats();
                if let LineStats::Packed(mine) = &mut self.stats {
                    mine.append(theirs);
                }
            }
        }
        self.starts.append(next.starts);
        self.durations.append(next.durations);
        self.metas.append(next.metas);
    }

    /// Reorders the events as `order` lists them (indexes of the current events).
    pub(crate) fn permute(&mut self, order: &[u32]) {
        let pick = |col: &Column| order.iter().map(|&i| col.get(i as usize)).collect::<Column>();
        self.starts = pick(&self.starts);
        self.durations = pick(&self.durations);
        self.metas = pick(&self.metas);
        match &mut self.stats {
            LineStats::Bare => {}
            LineStats::Packed(p) => {
                let mut stats = Vec::with_capacity(p.stats.len());
                let mut start = Column::with_capacity(order.len() + 1);
                start.push(0);
                for &i in order {
                    let (from, to) = p.start.get_pair(i as usize);
                    stats.extend_from_slice(p.stats.get(from as usize..to as usize).unwrap_or(&[]));
                    start.push(stats.len() as i64);
                }
                p.stats = stats;
                p.start = start;
            }
            LineStats::Wire(x) => {
                x.from = pick(&x.from);
                x.len = pick(&x.len);
                x.id_set = pick(&x.id_set);
            }
        }
    }

    /// End of event `i`, ps.
    #[inline]
    pub fn end_ps(&self, i: usize) -> i64 {
        self.start_ps(i).saturating_add(self.duration_ps(i))
    }

    /// The events whose metadata `mask` marks (by dense metadata index), in order:
    /// much faster than testing [`Line::meta`] of each.
    pub fn events_with_meta<'a>(&'a self, mask: &'a [bool]) -> impl Iterator<Item = usize> + 'a {
        self.events_with_meta_in(mask, 0..self.len())
    }

    /// [`Line::events_with_meta`] among the events `range`.
    pub fn events_with_meta_in<'a>(
        &'a self,
        mask: &'a [bool],
        range: std::ops::Range<usize>,
    ) -> impl Iterator<Item = usize> + 'a {
        let mut metas = [0; BLOCK];
        let range = if mask.contains(&true) { range } else { 0..0 };
        self.block_hits(range, move |b| marked(self.metas.block(b, &mut metas), mask, false))
    }

    /// The events of `range` whose bit is set in `hits(b)`, the mask of events
    /// `b * BLOCK..` that block `b` gives, in order.
    fn block_hits<'a>(
        &'a self,
        range: std::ops::Range<usize>,
        mut hits: impl FnMut(usize) -> u64 + 'a,
    ) -> impl Iterator<Item = usize> + 'a {
        let (from, to) = (range.start.min(self.len()), range.end.min(self.len()));
        let blocks = if from < to { from / BLOCK..(to - 1) / BLOCK + 1 } else { 0..0 };
        blocks.flat_map(move |b| {
            // Only the events in range: the first and last blocks may hold others.
            let first = (b * BLOCK).max(from) - b * BLOCK;
            let end = (to - b * BLOCK).min(BLOCK);
            let mut hits = hits(b) & (u64::MAX << first) & (u64::MAX >> (BLOCK - end));
            std::iter::from_fn(move || {
                (hits != 0).then(|| {
                    let k = hits.trailing_zeros() as usize;
                    hits &= hits - 1;
                    b * BLOCK + k
                })
            })
        })
    }

    /// Earliest event start and latest event end ([`Line::end_ps`]) of the line, ps.
    pub fn time_span_ps(&self) -> Option<(i64, i64)> {
        let first = self.starts.min()?;
        let (mut starts, mut durations) = ([0; BLOCK], [0; BLOCK]);
        let mut last = i64::MIN;
        for b in 0..self.starts.block_count() {
            let ends = self.starts.block(b, &mut starts).iter().zip(self.durations.block(b, &mut durations));
            last = ends.fold(last, |hi, (&s, &d)| hi.max(s.saturating_add(d)));
        }
        Some((first, last))
    }

    /// The line's display name when set, else its name.
    #[inline]
    pub fn label(&self) -> &str {
        if self.display_name.is_empty() {
            &self.name
        } else {
            &self.display_name
        }
    }

    /// Appends an event (used by readers).
    pub fn push_event(&mut self, start_ps: i64, duration_ps: i64, meta: u32, stats: &[Stat]) {
        if !stats.is_empty() {
            self.pack_stats();
        }
        if let LineStats::Packed(packed) = &mut self.stats {
            for s in stats {
                packed.push(*s);
            }
            packed.end_event();
        }
        self.starts.push(start_ps);
        self.durations.push(duration_ps);
        self.metas.push(i64::from(meta));
    }

    /// The events that overlap `from_ps..to_ps` (an instant: that starts in it), with
    /// their stats, as a line of their own.
    pub fn window(&self, from_ps: i64, to_ps: i64) -> Line {
        let mut out = Line {
            id: self.id,
            display_id: self.display_id,
            name: self.name.clone(),
            display_name: self.display_name.clone(),
            timestamp_ns: self.timestamp_ns,
            line_duration_ps: self.line_duration_ps,
            is_counter: self.is_counter,
            ..Line::default()
        };
        let mut stats = Vec::new();
        for i in 0..self.len() {
            let (start, dur) = (self.start_ps(i), self.duration_ps(i));
            if start < to_ps && (start >= from_ps || start.saturating_add(dur) > from_ps) {
                stats.clear();
                stats.extend(self.event_stats(i));
                out.push_event(start, dur, self.meta(i), &stats);
            }
        }
        out.finish();
        out
    }

    /// Makes the stat ranges valid for a line with no events.
    #[inline]
    pub fn finish(&mut self) {
        if let LineStats::Packed(p) = &mut self.stats {
            if p.start.is_empty() {
                p.start.push(0);
            }
        }
    }
}

/// One plane: a host, a device, metadata, environment.
pub struct Plane {
    pub id: i64,
    pub name: String,
    pub lines: Vec<Line>,
    pub event_meta: Vec<EventMeta>,
    pub stat_meta: Vec<StatMeta>,
    /// Stats of the plane itself (device capabilities, …).
    pub stats: Vec<Stat>,
    /// Stats of event metadata, indexed by [`EventMeta::stats`].
    pub meta_stats: Vec<Stat>,
    pub(crate) source: Arc<Source>,
    /// Strings made while reading (unescaped JSON, gunzipped stats).
    pub(crate) arena: Vec<u8>,
    /// Lines without events past the first [`MAX_EMPTY_LINES`]: counted, not kept.
    pub empty_lines_not_kept: u64,
}

impl std::fmt::Debug for Plane {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Plane")
            .field("id", &self.id)
            .field("name", &self.name)
            .field("lines", &self.lines.len())
            .field("events", &self.event_count())
            .finish()
    }
}

impl Plane {
    /// The plane with only its events that overlap `from_ps..to_ps` ([`Line::window`]);
    /// metadata and the plane's own stats as they are.
    pub fn window(&self, from_ps: i64, to_ps: i64) -> Plane {
        Plane {
            id: self.id,
            name: self.name.clone(),
            lines: self.lines.iter().map(|l| l.window(from_ps, to_ps)).collect(),
            event_meta: self.event_meta.clone(),
            stat_meta: self.stat_meta.clone(),
            stats: self.stats.clone(),
            meta_stats: self.meta_stats.clone(),
            source: self.source.clone(),
            arena: self.arena.clone(),
            empty_lines_not_kept: self.empty_lines_not_kept,
        }
    }

    /// An empty plane reading its spans from `source`.
    pub fn new(id: i64, name: String, source: Arc<Source>) -> Plane {
        Plane {
            id,
            name,
            lines: Vec::new(),
            event_meta: Vec::new(),
            stat_meta: Vec::new(),
            stats: Vec::new(),
            meta_stats: Vec::new(),
            source,
            arena: Vec::new(),
            empty_lines_not_kept: 0,
        }
    }

    /// Copies `bytes` into the plane's arena and returns their span.
    #[inline]
    pub fn push_arena(&mut self, bytes: &[u8]) -> Span {
        let off = self.arena.len() as u64;
        self.arena.extend_from_slice(bytes);
        Span::arena(off, bytes.len() as u32)
    }

    /// The bytes of a span.
    #[inline]
    pub fn bytes(&self, span: Span) -> &[u8] {
        let buf: &[u8] = if span.in_arena() { &self.arena } else { &self.source };
        buf.get(span.range()).unwrap_or(&[])
    }

    /// The text of a span; invalid UTF-8 reads as "\u{FFFD}".
    #[inline]
    pub fn text(&self, span: Span) -> &str {
        std::str::from_utf8(self.bytes(span)).unwrap_or("\u{FFFD}")
    }

    /// Number of events on all lines, counter lines excluded.
    #[inline]
    pub fn event_count(&self) -> u64 {
        self.lines.iter().filter(|l| !l.is_counter).map(|l| l.len() as u64).sum()
    }

    /// Name of the metadata at dense index `meta`.
    #[inline]
    pub fn event_name(&self, meta: u32) -> &str {
        self.event_meta.get(meta as usize).map_or("", |m| self.text(m.name))
    }

    /// Dense index of the stat metadata called `name`, if the plane has one.
    #[inline]
    pub fn stat_id(&self, name: &str) -> Option<u32> {
        let name = name.as_bytes();
        self.stat_meta.iter().position(|m| self.bytes(m.name) == name).map(|i| i as u32)
    }

    /// Name of the stat metadata at dense index `meta`.
    #[inline]
    pub fn stat_name(&self, meta: u32) -> &str {
        self.stat_meta.get(meta as usize).map_or("", |m| self.text(m.name))
    }

    /// Stats attached to event metadata `meta`.
    #[inline]
    pub fn metadata_stats(&self, meta: u32) -> &[Stat] {
        match self.event_meta.get(meta as usize) {
            Some(m) => self.meta_stats.get(m.stats.start as usize..m.stats.end as usize).unwrap_or(&[]),
            None => &[],
        }
    }

    /// Prepares to look up the stats `keys` of many events (see [`Plane::stats_of`]).
    pub fn stat_lookup<const N: usize>(&self, keys: [Option<u32>; N]) -> StatLookup<N> {
        const { assert!(N < NO_SLOT as usize) };
        let len = keys.iter().flatten().max().map_or(0, |&m| m as usize + 1);
        let mut slot = vec![NO_SLOT; len];
        let mut same = [None; N];
        for (k, key) in keys.iter().enumerate() {
            let Some(key) = key else { continue };
            match slot[*key as usize] {
                NO_SLOT => slot[*key as usize] = k as u8,
                first => same[k] = Some(first as usize),
            }
        }
        let wanted = |m: u32| slot.get(m as usize).is_some_and(|&k| k != NO_SLOT);
        let meta_has: Vec<bool> = self
            .event_meta
            .iter()
            .map(|m| {
                let stats = self.meta_stats.get(m.stats.start as usize..m.stats.end as usize).unwrap_or(&[]);
                stats.iter().any(|s| wanted(s.meta()))
            })
            .collect();
        let distinct = slot.iter().filter(|&&k| k != NO_SLOT).count();
        let any_same = same.iter().any(Option::is_some);
        let any_meta_has = meta_has.iter().any(|&h| h);
        let mut key_bits = [0u64; N];
        let mut distinct_keys = keys.iter().enumerate().filter(|(k, key)| key.is_some() && same[*k].is_none());
        for bits in key_bits.iter_mut() {
            let Some((_, Some(key))) = distinct_keys.next() else { break };
            // The bit of the id that maps to this key's metadata; any id when unknown.
            *bits = self.stat_meta.get(*key as usize).map_or(u64::MAX, |m| id_bit(m.id as u64));
        }
        let key_ids = key_bits.iter().fold(0, |a, b| a | b);
        // An id read off the wire stands for the last metadata with that id.
        let mut by_wire_id = [NO_SLOT; 128];
        for (d, m) in self.stat_meta.iter().enumerate() {
            if let Some(w) = usize::try_from(m.id).ok().and_then(|id| by_wire_id.get_mut(id)) {
                *w = slot.get(d).copied().unwrap_or(NO_SLOT);
            }
        }
        StatLookup { slot, same, any_same, any_meta_has, distinct, by_wire_id, key_bits, key_ids, meta_has }
    }

    /// What [`Plane::event_stats_of`] returns for `look`'s keys, found by one table
    /// lookup per stat, and without reading the metadata's stats when they hold none
    /// of the keys.
    #[inline]
    pub fn stats_of<const N: usize>(&self, look: &StatLookup<N>, line: &Line, i: usize) -> [Option<Stat>; N] {
        let mut out = [None; N];
        let want = look.possible(line.stat_ids_of(i));
        let found = if want > 0 { with_walk!(line, i, |w| look.own_into(&mut w, &mut out, want)) } else { 0 };
        if found < look.distinct {
            self.fill_from_metadata(look, line.meta(i), &mut out);
        }
        look.copy_same(&mut out);
        out
    }

    /// The events of `range` on `line` that may hold any of `look`'s keys, on
    /// themselves or on their metadata: every event [`Plane::stats_of`] finds a key
    /// for, and few others. Found a block of events at a time from the stat ids the reader
    /// noted and the events' metadata, without reading a stat: for scans that skip
    /// most events, far faster than testing each.
    pub fn events_maybe_with<'a, const N: usize>(
        &'a self,
        look: &'a StatLookup<N>,
        line: &'a Line,
        range: Range<usize>,
    ) -> impl Iterator<Item = usize> + 'a {
        let range = if look.distinct == 0 { 0..0 } else { range };
        // Per id set of a line whose stats are in the file: whether it may hold a key.
        let sets: Option<Vec<bool>> = match &line.stats {
            LineStats::Wire(x) => Some(x.id_sets.iter().map(|&s| look.possible(s) > 0).collect()),
            LineStats::Packed(_) | LineStats::Bare => None,
        };
        let (mut ids, mut metas) = ([0; BLOCK], [0; BLOCK]);
        line.block_hits(range, move |b| {
            let own = match (&line.stats, &sets) {
                // An index past the sets stands for any id (as in `WireStats::ids_of`).
                (LineStats::Wire(x), Some(sets)) => marked(x.id_set.block(b, &mut ids), sets, true),
                // No event has a stat of its own: only its metadata's can hold a key.
                (LineStats::Bare, _) => 0,
                _ => u64::MAX,
            };
            if look.any_meta_has && own != u64::MAX {
                own | marked(line.metas.block(b, &mut metas), &look.meta_has, false)
            } else {
                own
            }
        })
    }

    /// Whether [`Plane::stats_of`] finds any of `look`'s keys for event `i`, found
    /// without reading a stat's value: what [`Plane::events_maybe_with`] is checked
    /// against.
    #[cfg(test)]
    pub(crate) fn has_any_of<const N: usize>(&self, look: &StatLookup<N>, line: &Line, i: usize) -> bool {
        if look.distinct == 0 {
            return false;
        }
        let own = look.possible(line.stat_ids_of(i)) > 0 && with_walk!(line, i, |w| w.next_wanted(look).is_some());
        own || (look.any_meta_has && look.meta_has.get(line.meta(i) as usize).copied().unwrap_or(false))
    }

    /// Fills `out`'s empty slots from metadata `meta`'s stats, where they hold any of
    /// `look`'s keys. Always inlined: a call here cost the CPU capture's `summary` 3 %
    /// more instructions (the host scan's inlining).
    #[inline(always)]
    fn fill_from_metadata<const N: usize>(&self, look: &StatLookup<N>, meta: u32, out: &mut [Option<Stat>; N]) {
        if look.meta_has.get(meta as usize).copied().unwrap_or(false) {
            for s in self.metadata_stats(meta) {
                let k = look.slot.get(s.meta() as usize).copied().unwrap_or(NO_SLOT) as usize;
                if let Some(o @ None) = out.get_mut(k) {
                    *o = Some(*s);
                }
            }
        }
    }

    /// The part of [`Plane::stats_of`] found on event `i` itself; `None` when the
    /// event holds none of the keys. With [`Plane::with_metadata_stats`] it gives what
    /// `stats_of` does, so callers can work out what follows from the metadata's
    /// stats once per metadata.
    #[inline]
    pub fn own_stats_of<const N: usize>(
        &self,
        look: &StatLookup<N>,
        line: &Line,
        i: usize,
    ) -> Option<[Option<Stat>; N]> {
        let mut out = [None; N];
        let want = look.possible(line.stat_ids_of(i));
        let found = if want > 0 { with_walk!(line, i, |w| look.own_into(&mut w, &mut out, want)) } else { 0 };
        (found > 0).then_some(out)
    }

    /// Completes `own` ([`Plane::own_stats_of`] of an event of metadata `meta`, or
    /// all `None`) with the metadata's stats: what [`Plane::stats_of`] returns.
    #[inline]
    pub fn with_metadata_stats<const N: usize>(
        &self,
        look: &StatLookup<N>,
        meta: u32,
        mut own: [Option<Stat>; N],
    ) -> [Option<Stat>; N] {
        self.fill_from_metadata(look, meta, &mut own);
        look.copy_same(&mut own);
        own
    }

    /// Looks up stat `stat` of event `i` on `line`: on the event first, then on its metadata.
    #[inline]
    pub fn event_stat(&self, line: &Line, i: usize, stat: u32) -> Option<Stat> {
        let [s] = self.event_stats_of(line, i, [Some(stat)]);
        s
    }

    /// Looks up several stats of event `i` on `line` in one pass over its stats: for
    /// each key, what [`Plane::event_stat`] would return (`None` keys find nothing).
    pub fn event_stats_of<const N: usize>(&self, line: &Line, i: usize, keys: [Option<u32>; N]) -> [Option<Stat>; N] {
        let mut out = [None; N];
        let mut left = keys.iter().filter(|k| k.is_some()).count();
        if left == 0 {
            return out;
        }
        // Matches the stats' metadata first; only a hit's value is read.
        with_walk!(line, i, |w| {
            while let Some((meta, at)) = w.next_meta() {
                for (k, o) in keys.iter().zip(out.iter_mut()) {
                    if o.is_none() && *k == Some(meta) {
                        *o = Some(w.stat(at));
                        left -= 1;
                    }
                }
                if left == 0 {
                    return out;
                }
            }
        });
        for s in self.metadata_stats(line.meta(i)) {
            for (k, o) in keys.iter().zip(out.iter_mut()) {
                if o.is_none() && *k == Some(s.meta()) {
                    *o = Some(*s);
                    left -= 1;
                }
            }
            if left == 0 {
                break;
            }
        }
        out
    }

    /// A stat's string value: `str` directly, `ref` through its metadata name.
    #[inline]
    pub fn stat_str(&self, s: &Stat) -> Option<&str> {
        match s.value() {
            StatValue::Str(span) => Some(self.text(span)),
            StatValue::Ref(r) => self.stat_meta.get(r as usize).map(|m| self.text(m.name)),
            _ => None,
        }
    }

    /// A stat's bytes value.
    #[inline]
    pub fn stat_bytes(&self, s: &Stat) -> Option<&[u8]> {
        match s.value() {
            StatValue::Bytes(span) | StatValue::Str(span) => Some(self.bytes(span)),
            _ => None,
        }
    }

    /// A numeric stat as i64 (u64 saturates, f64 truncates); strings parse when they are numbers.
    #[inline]
    pub fn stat_i64(&self, s: &Stat) -> Option<i64> {
        match s.value() {
            StatValue::I64(v) => Some(v),
            StatValue::U64(v) => Some(i64::try_from(v).unwrap_or(i64::MAX)),
            StatValue::F64(v) if v.is_finite() => Some(v as i64),
            StatValue::Str(_) | StatValue::Ref(_) => self.stat_str(s)?.trim().parse().ok(),
            _ => None,
        }
    }

    /// A numeric stat as f64; strings parse when they are numbers.
    #[inline]
    pub fn stat_f64(&self, s: &Stat) -> Option<f64> {
        match s.value() {
            StatValue::I64(v) => Some(v as f64),
            StatValue::U64(v) => Some(v as f64),
            StatValue::F64(v) => Some(v),
            StatValue::Str(_) | StatValue::Ref(_) => self.stat_str(s)?.trim().parse().ok(),
            _ => None,
        }
    }

    /// A stat's value rendered for people (bytes as `<N bytes>`).
    #[inline]
    pub fn stat_display(&self, s: &Stat) -> String {
        match s.value() {
            StatValue::F64(v) => v.to_string(),
            StatValue::U64(v) => v.to_string(),
            StatValue::I64(v) => v.to_string(),
            StatValue::Str(_) | StatValue::Ref(_) => self.stat_str(s).unwrap_or("").to_string(),
            StatValue::Bytes(span) => format!("<{} bytes>", span.len()),
        }
    }

    /// The plane-level stat called `name`.
    #[inline]
    pub fn plane_stat(&self, name: &str) -> Option<Stat> {
        let id = self.stat_id(name)?;
        self.stats.iter().find(|s| s.meta() == id).copied()
    }

    /// The line called `name` (by name or display name).
    #[inline]
    pub fn line(&self, name: &str) -> Option<&Line> {
        self.lines.iter().find(|l| l.name == name || l.display_name == name)
    }

    /// Earliest event start and latest event end over all lines, ps.
    pub fn time_span_ps(&self) -> Option<(i64, i64)> {
        use rayon::prelude::*;
        self.lines.par_iter().filter_map(Line::time_span_ps).reduce_with(|a, b| (a.0.min(b.0), a.1.max(b.1)))
    }
}

/// Stats to look up on many events of one plane ([`Plane::stat_lookup`]).
#[derive(Clone, Debug)]
pub struct StatLookup<const N: usize> {
    /// Per stat-metadata index (up to the largest key): the first slot asking for it.
    slot: Vec<u8>,
    /// Per slot: an earlier slot with the same key.
    same: [Option<usize>; N],
    /// Whether any slot has an earlier slot with the same key.
    any_same: bool,
    /// Whether any event metadata's stats hold any key.
    any_meta_has: bool,
    /// Number of distinct keys.
    distinct: usize,
    /// Per one-byte stat metadata id (as on the wire): the first slot asking for the
    /// metadata it stands for, for lines whose stats are in the file.
    by_wire_id: [u8; 128],
    /// Each distinct key's metadata id bit ([`crate::stat_wire::id_bit`]), and all of them.
    key_bits: [u64; N],
    key_ids: u64,
    /// Per event metadata: whether its stats hold any key.
    meta_has: Vec<bool>,
}

impl<const N: usize> StatLookup<N> {
    /// Fills `out` with the first stat of each key among the event stats `walk` gives,
    /// stopping once `want` keys are found; returns how many were.
    #[inline(always)]
    fn own_into<W: StatWalk>(&self, walk: &mut W, out: &mut [Option<Stat>; N], want: usize) -> usize {
        let mut found = 0;
        while let Some((k, at)) = walk.next_wanted(self) {
            if let Some(o @ None) = out.get_mut(k) {
                *o = Some(walk.stat(at));
                found += 1;
                if found == want {
                    break;
                }
            }
        }
        found
    }

    /// How many of the keys an event whose stat ids fold to `ids` may have: those whose
    /// bit it has (at most the number of distinct keys).
    #[inline(always)]
    fn possible(&self, ids: u64) -> usize {
        if ids & self.key_ids == 0 {
            return 0;
        }
        self.key_bits[..self.distinct].iter().filter(|&&b| ids & b != 0).count()
    }

    /// Gives each slot asking for an earlier slot's key that slot's stat.
    #[inline(always)]
    fn copy_same(&self, out: &mut [Option<Stat>; N]) {
        if !self.any_same {
            return;
        }
        for k in 0..N {
            if let Some(first) = self.same[k] {
                out[k] = out[first];
            }
        }
    }
}

const NO_SLOT: u8 = u8::MAX;

/// The format a [`Space`] was read from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// `*.xplane.pb`, a serialized XSpace.
    XSpace,
    /// Chrome trace JSON (`*.trace.json.gz`, `perfetto_trace.json.gz`, `.json`).
    TraceJson,
}

/// One host's profile.
pub struct Space {
    /// Host name (from the file name, else the XSpace's hostnames).
    pub host: String,
    pub format: Format,
    pub planes: Vec<Plane>,
    pub hostnames: Vec<String>,
    pub errors: Vec<String>,
    pub warnings: Vec<String>,
    /// Size of the file read, bytes.
    pub file_bytes: u64,
}

impl Space {
    /// The host with only its events that overlap `from_ps..to_ps` ([`Line::window`]).
    #[inline]
    pub fn window(&self, from_ps: i64, to_ps: i64) -> Space {
        Space {
            host: self.host.clone(),
            format: self.format,
            planes: self.planes.iter().map(|p| p.window(from_ps, to_ps)).collect(),
            hostnames: self.hostnames.clone(),
            errors: self.errors.clone(),
            warnings: self.warnings.clone(),
            file_bytes: self.file_bytes,
        }
    }

    /// True when the file this host was read from shrank under its map after it was
    /// read (a new capture copied over it): strings and stats read from it now are
    /// zeros, and nothing made from them may be shown.
    #[inline]
    pub fn file_changed(&self) -> bool {
        self.planes.iter().any(|p| p.source.changed())
    }

    /// Lines without events that were counted, not kept ([`Plane::empty_lines_not_kept`]).
    #[inline]
    pub fn empty_lines_not_kept(&self) -> u64 {
        self.planes.iter().map(|p| p.empty_lines_not_kept).sum()
    }

    /// Events whose recorded length was impossible (a damaged file), read as instants.
    #[inline]
    pub fn damaged_durations(&self) -> u64 {
        self.planes.iter().flat_map(|p| &p.lines).map(|l| u64::from(l.damaged_durations)).sum()
    }

    /// Events in all planes (for trace JSON: X, i and B events).
    #[inline]
    pub fn event_count(&self) -> u64 {
        self.planes.iter().map(Plane::event_count).sum()
    }

    /// The plane called `name`.
    #[inline]
    pub fn plane(&self, name: &str) -> Option<&Plane> {
        self.planes.iter().find(|p| p.name == name)
    }

    /// Earliest start and latest end over all planes, ps.
    pub fn time_span_ps(&self) -> Option<(i64, i64)> {
        self.planes.iter().filter_map(Plane::time_span_ps).reduce(|a, b| (a.0.min(b.0), a.1.max(b.1)))
    }
}

/// Bytes of input read so far, shared with a progress display while a load runs.
#[derive(Debug, Default)]
pub struct Progress(std::sync::atomic::AtomicU64);

impl Progress {
    /// Counts `n` more bytes read.
    #[inline]
    pub fn add(&self, n: u64) {
        self.0.fetch_add(n, std::sync::atomic::Ordering::Relaxed);
    }

    /// Bytes read so far.
    #[inline]
    pub fn bytes(&self) -> u64 {
        self.0.load(std::sync::atomic::Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packed_stats_read_back_exactly() {
        let big_meta = PACKED_META_NONE as u32;
        let values = [
            (0, StatValue::I64(0)),
            (1, StatValue::I64(-1)),
            (2, StatValue::I64((1 << 39) - 1)),
            (3, StatValue::I64(-(1 << 39))),
            (4, StatValue::I64(1 << 39)),
            (5, StatValue::I64(i64::MIN)),
            (6, StatValue::I64(i64::MAX)),
            (7, StatValue::U64((1 << 40) - 1)),
            (8, StatValue::U64(1 << 40)),
            (9, StatValue::U64(u64::MAX)),
            (10, StatValue::F64(50.0)),
            (11, StatValue::F64(0.1)),
            (12, StatValue::F64(f64::NAN)),
            (13, StatValue::F64(-0.0)),
            (14, StatValue::Ref(0)),
            (15, StatValue::Ref(u32::MAX)),
            (16, StatValue::Str(Span::source(u64::MAX >> 1, 7))),
            (17, StatValue::Str(Span::arena(3, 5))),
            (18, StatValue::Bytes(Span::source(1 << 40, 3))),
            (big_meta - 1, StatValue::I64(7)),
            (big_meta, StatValue::I64(7)),
            (u32::MAX, StatValue::Ref(3)),
        ];
        let mut line = Line::default();
        let stats: Vec<Stat> = values.iter().map(|&(m, v)| Stat::new(m, v)).collect();
        line.push_event(0, 1, 0, &stats[..10]);
        line.push_event(1, 1, 0, &[]);
        line.push_event(2, 1, 0, &stats[10..]);
        let back: Vec<Stat> = line.event_stats(0).chain(line.event_stats(1)).chain(line.event_stats(2)).collect();
        assert_eq!(back.len(), stats.len());
        for (a, b) in stats.iter().zip(&back) {
            assert_eq!((a.meta(), a.kind()), (b.meta(), b.kind()));
            match (a.value(), b.value()) {
                (StatValue::F64(x), StatValue::F64(y)) => assert_eq!(x.to_bits(), y.to_bits()),
                (x, y) => assert_eq!(x, y),
            }
        }
        // Only what cannot fit went to the wide table: 2^39, i64::MIN/MAX, 2^40, u64::MAX,
        // 0.1 (NaN's low mantissa bits are zero), the three spans, and the two metadata
        // indexes past 20 bits.
        // (2^39, i64::MIN/MAX, 2^40, u64::MAX and 0.1 as bare numbers.)
        let LineStats::Packed(p) = &line.stats else { panic!("packed") };
        assert_eq!((p.wide.nums.len(), p.wide.stats.len()), (6, 5), "{:?}", p.wide);
        // Reordering keeps each event's stats with it.
        line.permute(&[2, 0, 1]);
        assert_eq!(line.event_stats(0).count(), values.len() - 10);
        assert_eq!(line.event_stats(1).next().map(|s| s.value()), Some(StatValue::I64(0)));
        assert_eq!(line.event_stats(2).count(), 0);
    }

    #[test]
    fn events_with_meta_are_those_whose_meta_is_marked() {
        let mut line = Line::default();
        // Metadata indexes from narrow to wide blocks, and a partial tail.
        for i in 0..(5 * BLOCK as u32 + 17) {
            let meta = if i < 2 * BLOCK as u32 { i % 7 } else { i.wrapping_mul(2_654_435_761) % 300 };
            line.push_event(i64::from(i), 1, meta, &[]);
        }
        let masks = [vec![], vec![false; 400], vec![true; 3], (0..400).map(|m| m % 3 == 1).collect::<Vec<_>>()];
        for mask in masks {
            let want: Vec<usize> =
                (0..line.len()).filter(|&i| mask.get(line.meta(i) as usize).copied().unwrap_or(false)).collect();
            assert_eq!(line.events_with_meta(&mask).collect::<Vec<_>>(), want);
            // Any range of them: within a block, across blocks, past the end.
            for range in [0..0, 3..9, 5..BLOCK, BLOCK - 1..3 * BLOCK + 2, 2 * BLOCK..5 * BLOCK + 17, 70..10_000] {
                let inside: Vec<usize> = want.iter().copied().filter(|i| range.contains(i)).collect();
                assert_eq!(line.events_with_meta_in(&mask, range.clone()).collect::<Vec<_>>(), inside, "{range:?}");
            }
        }
        assert_eq!(line.time_span_ps(), Some((0, 5 * BLOCK as i64 + 17)));
    }

    #[test]
    fn stat_lookup_finds_what_event_stats_of_finds() {
        let mut plane = Plane::new(1, "p".into(), Arc::new(Source::Owned(Vec::new())));
        plane.stat_meta = (0..8).map(|id| StatMeta { id, ..Default::default() }).collect();
        // Metadata 0 holds stats 2 and 5; metadata 1 none.
        plane.meta_stats = vec![Stat::new(2, StatValue::I64(20)), Stat::new(5, StatValue::I64(50))];
        plane.event_meta = vec![EventMeta { stats: 0..2, ..Default::default() }, EventMeta::default()];
        let mut line = Line::default();
        let st = |m: u32, v: i64| Stat::new(m, StatValue::I64(v));
        line.push_event(0, 1, 0, &[st(1, 1), st(2, 2)]);
        line.push_event(1, 1, 1, &[st(3, 3), st(3, 4)]);
        line.push_event(2, 1, 0, &[]);
        line.push_event(3, 1, 7, &[st(5, 5)]); // metadata index the plane lacks
        line.finish();
        let keysets = [
            [Some(2), Some(5), Some(3), None],
            [Some(1), Some(4), None, None],
            [Some(5), Some(5), Some(1), Some(9)],
            [None, None, None, None],
            [Some(3), Some(2), Some(2), Some(0)],
        ];
        for keys in keysets {
            let look = plane.stat_lookup(keys);
            for i in 0..line.len() {
                let want = plane.event_stats_of(&line, i, keys);
                assert_eq!(plane.stats_of(&look, &line, i), want, "{keys:?} event {i}");
                // In two parts: the event's own, then the metadata's.
                let own = plane.own_stats_of(&look, &line, i);
                assert_eq!(
                    own.is_some(),
                    line.event_stats(i).any(|s| keys.contains(&Some(s.meta()))),
                    "{keys:?} event {i}"
                );
                let whole = plane.with_metadata_stats(&look, line.meta(i), own.unwrap_or([None; 4]));
                assert_eq!(whole, want, "{keys:?} event {i}, in parts");
                assert_eq!(plane.has_any_of(&look, &line, i), want.iter().any(Option::is_some), "{keys:?} event {i}");
            }
        }
    }
}
