//! The values every reader's model is made of: where the bytes are ([`Source`]), a
//! string in them ([`Span`]), a stat ([`Stat`], [`StatValue`]) and the map of stat
//! metadata ids ([`IdMap`]). Below [`crate::model`] and the wire decoders alike.

use std::collections::HashMap;
use std::ops::Range;

/// The bytes a profile was decoded from: a memory-mapped file or an owned buffer.
pub enum Source {
    /// A read-only memory map of the profile file, guarded against the file shrinking.
    Mapped(crate::mapguard::GuardedMap),
    /// Bytes held in memory (decompressed input, tests).
    Owned(Vec<u8>),
}

impl Source {
    /// Tells the kernel that `range` of a mapped file was read and is not needed soon:
    /// its pages leave this process's resident set (they stay in the page cache, and a
    /// later read maps them again). Decoding calls this behind itself, so a file's pages
    /// are not all resident at once next to the columns made from them. A no-op for
    /// owned bytes.
    #[inline]
    pub fn release(&self, range: Range<usize>) {
        let Source::Mapped(map) = self else { return };
        // Whole pages inside the range only: the pages at its ends may be in use by
        // a neighbour being decoded on another thread.
        const PAGE: usize = 4096;
        let start = range.start.div_ceil(PAGE) * PAGE;
        let end = (range.end.min(map.len()) / PAGE) * PAGE;
        if end > start {
            map.dont_need(start, end - start);
        }
    }

    /// True when the mapped file shrank while mapped, so that reads past its new end
    /// gave zeros: what was decoded from it cannot be trusted.
    #[inline]
    pub fn changed(&self) -> bool {
        matches!(self, Source::Mapped(map) if map.changed())
    }
}

impl std::ops::Deref for Source {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Source::Mapped(m) => m,
            Source::Owned(v) => v,
        }
    }
}

/// A byte range of a string or bytes value, in the file or in the plane's arena.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Span {
    /// Offset; the top bit set means "in the plane's arena".
    off: u64,
    len: u32,
}

pub(crate) const ARENA_BIT: u64 = 1 << 63;

impl Span {
    /// The empty span.
    pub const EMPTY: Span = Span { off: 0, len: 0 };

    /// A span over the source bytes `off..off+len`.
    #[inline]
    pub fn source(off: u64, len: u32) -> Span {
        Span { off, len }
    }

    /// A span over the plane arena bytes `off..off+len`.
    #[inline]
    pub fn arena(off: u64, len: u32) -> Span {
        Span { off: off | ARENA_BIT, len }
    }

    /// Length in bytes.
    #[inline]
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// True when the span holds no bytes.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// For an arena span, the same span moved `base` bytes further into the arena.
    #[inline]
    pub(crate) fn arena_shifted(&self, base: u64) -> Option<Span> {
        self.in_arena().then(|| Span { off: self.off + base, len: self.len })
    }

    #[inline]
    pub(crate) fn in_arena(&self) -> bool {
        self.off & ARENA_BIT != 0
    }

    #[inline]
    pub(crate) fn range(&self) -> Range<usize> {
        let start = (self.off & !ARENA_BIT) as usize;
        start..start + self.len as usize
    }
}

/// Type of a stat value, as on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum StatKind {
    F64 = 0,
    U64 = 1,
    I64 = 2,
    Str = 3,
    Bytes = 4,
    /// A reference to a [`StatMeta`] whose name is the string value.
    Ref = 5,
}

/// A decoded stat value.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum StatValue {
    F64(f64),
    U64(u64),
    I64(i64),
    Str(Span),
    Bytes(Span),
    /// Dense index of the [`StatMeta`] whose name is the value.
    Ref(u32),
}

/// One stat as analyses read it, in 16 bytes: dense stat-metadata index, kind, value.
/// (Lines store theirs packed into 8; see `PackedStat`.)
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Stat {
    pub(crate) value: u64,
    pub(crate) meta: u32,
    /// kind in the top 3 bits, span length below.
    pub(crate) kind_len: u32,
}

pub(crate) const LEN_MASK: u32 = (1 << 29) - 1;

/// Largest string or bytes stat value the model can hold (512 MiB).
pub const MAX_STAT_LEN: usize = LEN_MASK as usize;

impl Stat {
    /// Packs a stat. Spans longer than [`MAX_STAT_LEN`] are cut to it; readers
    /// reject such values before building a stat.
    #[inline]
    pub fn new(meta: u32, value: StatValue) -> Stat {
        let (kind, value, len) = match value {
            StatValue::F64(v) => (StatKind::F64, v.to_bits(), 0),
            StatValue::U64(v) => (StatKind::U64, v, 0),
            StatValue::I64(v) => (StatKind::I64, v as u64, 0),
            StatValue::Str(s) => (StatKind::Str, s.off, s.len.min(LEN_MASK)),
            StatValue::Bytes(s) => (StatKind::Bytes, s.off, s.len.min(LEN_MASK)),
            StatValue::Ref(r) => (StatKind::Ref, r as u64, 0),
        };
        Stat { value, meta, kind_len: ((kind as u32) << 29) | len }
    }

    /// Dense index into [`Plane::stat_meta`].
    #[inline]
    pub fn meta(&self) -> u32 {
        self.meta
    }

    /// The kind of value.
    #[inline]
    pub fn kind(&self) -> StatKind {
        match self.kind_len >> 29 {
            0 => StatKind::F64,
            1 => StatKind::U64,
            2 => StatKind::I64,
            3 => StatKind::Str,
            4 => StatKind::Bytes,
            _ => StatKind::Ref,
        }
    }

    /// The value.
    #[inline]
    pub fn value(&self) -> StatValue {
        let len = self.kind_len & LEN_MASK;
        match self.kind() {
            StatKind::F64 => StatValue::F64(f64::from_bits(self.value)),
            StatKind::U64 => StatValue::U64(self.value),
            StatKind::I64 => StatValue::I64(self.value as i64),
            StatKind::Str => StatValue::Str(Span { off: self.value, len }),
            StatKind::Bytes => StatValue::Bytes(Span { off: self.value, len }),
            StatKind::Ref => StatValue::Ref(self.value as u32),
        }
    }
}

/// Maps sparse wire ids to dense indexes while reading. Ids in `0..limit` (the
/// usual case: writers number metadata 1, 2, 3, …) are looked up in a table, others
/// in a hash map; the table never grows past `limit`, which is set from the entry count.
#[derive(Default)]
pub(crate) struct IdMap {
    dense: Vec<u32>,
    limit: usize,
    map: HashMap<i64, u32>,
}

impl IdMap {
    /// A map for about `entries` ids.
    #[inline]
    pub(crate) fn with_entries(entries: usize) -> IdMap {
        IdMap { dense: Vec::new(), limit: entries.saturating_mul(2).saturating_add(1024), map: HashMap::new() }
    }

    #[inline(always)]
    pub(crate) fn get(&self, id: i64) -> Option<u32> {
        if (id as u64) < self.limit as u64 {
            return self.dense.get(id as usize).copied().filter(|&v| v != ABSENT);
        }
        self.get_sparse(id)
    }

    /// [`IdMap::get`] for ids kept in the hash map (negative or far apart).
    #[cold]
    #[inline(never)]
    fn get_sparse(&self, id: i64) -> Option<u32> {
        self.map.get(&id).copied()
    }

    pub(crate) fn insert(&mut self, id: i64, idx: u32) {
        match usize::try_from(id) {
            Ok(i) if i < self.limit => {
                if self.dense.len() <= i {
                    self.dense.resize(i + 1, ABSENT);
                }
                self.dense[i] = idx;
            }
            _ => {
                self.map.insert(id, idx);
            }
        }
    }
}

pub(crate) const ABSENT: u32 = u32::MAX;
