//! A device's executed ops as compact records (28 bytes each, names interned), read
//! once from the profile's columns (stage 1, [`crate::discover`]), and the helpers that
//! build them.

use stepscope_xspace::{Line, Plane, Stat, StatValue};

/// `0..len` cut into ranges of `piece` (the last may be shorter), for scans done in
/// parallel pieces.
#[inline]
pub fn pieces(len: usize, piece: usize) -> impl Iterator<Item = std::ops::Range<usize>> {
    (0..len).step_by(piece.max(1)).map(move |at| at..len.min(at + piece))
}

/// Gives back the file pages of a line's stats behind a scan over its events
/// ([`Line::release_stats`]), every [`ReleaseBehind::EVENTS`] events: a scan that
/// reads stats all along a long line keeps only those pages resident.
pub struct ReleaseBehind<'l> {
    line: &'l Line,
    from: usize,
    end: usize,
}

impl<'l> ReleaseBehind<'l> {
    const EVENTS: usize = 1 << 16;

    /// A scan over the whole line.
    #[inline]
    pub fn new(line: &'l Line) -> Self {
        ReleaseBehind::over(line, 0..line.len())
    }

    /// A scan over `events` of the line (a piece of it read apart).
    #[inline]
    pub fn over(line: &'l Line, events: std::ops::Range<usize>) -> Self {
        ReleaseBehind { line, from: events.start, end: events.end }
    }

    /// The scan reached event `i`.
    #[inline]
    pub fn at(&mut self, i: usize) {
        if i >= self.from + Self::EVENTS {
            self.line.release_stats(self.from..i);
            self.from = i;
        }
    }

    /// The scan is over.
    #[inline]
    pub fn done(self) {
        self.line.release_stats(self.from..self.end);
    }
}

/// A device's executed ops, in line order then time order.
#[derive(Default)]
pub struct DeviceOps {
    /// Interned op and module names.
    pub names: Vec<Box<str>>,
    pub recs: Vec<OpRec>,
    /// Names given to GPU kernels that ran in a command buffer, each with the name
    /// the profile gave them (the buffer's, `command_buffer_1`).
    pub renamed: FastMap<u32, u32>,
    /// What the records' [`OpRec::value`] holds.
    pub value: RecValue,
    /// The `program_id`s of the records ([`OpRec::program`] indexes them).
    pub programs: Vec<u64>,
    /// XLA:CPU: per record, how long after its event ends the op completed, ps (empty
    /// when every op completed as its event ended). XLA:CPU hands a `dot` (and other
    /// thunks) to its intra-op thread pool and goes on with other ops; the op's event
    /// covers only the start, and its tasks run on the pool after it (see
    /// [`crate::pool`]). The record spans both: the pool's work is the op's.
    pub tails: Vec<i64>,
}

/// What an op's stats say for the op profile, as its record keeps it
/// ([`DeviceOps::rec_stats`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecStats {
    /// The op's `program_id` (on its event or its metadata); any other stat the op
    /// profile reads is on its metadata.
    Program(Option<u64>),
    /// The event itself holds other stats the op profile reads: read them there.
    OnEvent,
}

/// What [`OpRec::value`] holds for a device's records.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RecValue {
    /// The op's own time (TPU `device_duration_ps`, else its length).
    OpTime,
    /// XLA:CPU: the op's `run_id` (one XLA program execution), [`NO_RUN`] for none;
    /// the op's own time is its length.
    RunId,
    /// GPU kernels and copies: the op's `correlation_id` (the link to its host
    /// launch), [`NO_RUN`] for none; the op's own time is its length.
    CorrelationId,
    /// Nothing; the op's own time is its length.
    #[default]
    Nothing,
}

impl DeviceOps {
    /// Op record `i` as an [`OpEvent`](OpEvent).
    pub fn event<'p>(&'p self, plane: &'p Plane, i: usize) -> OpEvent<'p> {
        let r = &self.recs[i];
        OpEvent {
            name: &self.names[r.name as usize],
            module: &self.names[r.module as usize],
            line: r.line,
            index: r.index,
            start_ps: r.start_ps(plane),
            duration_ps: self.duration_ps(plane, i),
            op_ps: self.op_ps(plane, i),
        }
    }

    /// The op's own time (see [`OpEvent::op_ps`](OpEvent::op_ps)) of record `i`.
    #[inline]
    pub fn op_ps(&self, plane: &Plane, i: usize) -> i64 {
        match self.value {
            RecValue::OpTime => self.recs[i].value(),
            _ => self.duration_ps(plane, i),
        }
    }

    /// Record `i`'s length on the timeline (never negative), ps: its event's, and for
    /// an XLA:CPU op the pool finished later, until it completed ([`DeviceOps::tails`]).
    #[inline]
    pub fn duration_ps(&self, plane: &Plane, i: usize) -> i64 {
        self.recs[i].duration_ps(plane).saturating_add(self.tail_ps(i))
    }

    /// [`DeviceOps::duration_ps`] of record `i`, whose line the caller holds (the hot
    /// paths: the op profile, the busy time).
    #[inline(always)]
    pub fn length_on(&self, line: &Line, i: usize) -> i64 {
        line.duration_ps(self.recs[i].index as usize).max(0).saturating_add(self.tail_ps(i))
    }

    /// How long after its event ends record `i`'s op completed ([`DeviceOps::tails`]).
    #[inline]
    pub fn tail_ps(&self, i: usize) -> i64 {
        self.tails.get(i).copied().unwrap_or(0)
    }

    /// The `run_id` of an XLA:CPU op.
    #[inline]
    pub fn run_id(&self, r: &OpRec) -> Option<i64> {
        (self.value == RecValue::RunId && r.value() != NO_RUN).then_some(r.value())
    }

    /// The `correlation_id` of a GPU op (its link to its host launch).
    #[inline]
    pub fn correlation_id(&self, r: &OpRec) -> Option<i64> {
        (self.value == RecValue::CorrelationId && r.value() != NO_RUN).then_some(r.value())
    }

    /// True when the records hold their ops' `correlation_id`s.
    #[inline]
    pub fn has_correlation_ids(&self) -> bool {
        self.value == RecValue::CorrelationId
    }

    /// What the op profile reads of record `r`'s stats.
    #[inline]
    pub fn rec_stats(&self, r: &OpRec) -> RecStats {
        match r.program {
            ON_EVENT => RecStats::OnEvent,
            p => RecStats::Program(self.programs.get(p as usize).copied()),
        }
    }
}

impl DeviceOps {
    /// Op record `i`'s (line, start, end, op time), without its names.
    #[inline]
    pub fn span(&self, plane: &Plane, i: usize) -> (u32, i64, i64, i64) {
        let (line, start, length, op_ps) = self.placed(plane, i);
        (line, start, start.saturating_add(length), op_ps)
    }

    /// Op record `i`'s (line, start, length, op time), without its names.
    #[inline]
    pub fn placed(&self, plane: &Plane, i: usize) -> (u32, i64, i64, i64) {
        let r = &self.recs[i];
        let line = &plane.lines[r.line as usize];
        let start = line.start_ps(r.index as usize);
        let length = self.length_on(line, i);
        let op_ps = if self.value == RecValue::OpTime { r.value() } else { length };
        (r.line, start, length, op_ps)
    }
}

/// One executed op in 32 bytes: names are indexes into [`DeviceOps::names`]; start and
/// length are read from the device plane's columns (line `line`, event `index`).
#[derive(Clone, Copy, Debug)]
pub struct OpRec {
    pub name: u32,
    pub module: u32,
    pub line: u32,
    pub index: u32,
    /// What the op profile reads of the op's stats, read with the record: see
    /// [`DeviceOps::rec_stats`].
    pub program: u32,
    /// The op's own time, its `run_id` or its `correlation_id`, as the device's
    /// [`DeviceOps::value`] says (read it with [`DeviceOps::op_ps`],
    /// [`DeviceOps::run_id`] and [`DeviceOps::correlation_id`]): an `i64` kept as two
    /// words, so a record is 28 bytes, not 32 (a device's records are its largest list).
    value: [u32; 2],
}

const _: () = assert!(std::mem::size_of::<OpRec>() == 28);

/// A `run_id` or `correlation_id` that is none (a real id of `i64::MIN` reads as none).
pub const NO_RUN: i64 = i64::MIN;

/// [`OpRec::program`] of an op without a `program_id`.
const NO_PROGRAM: u32 = u32::MAX;

/// [`OpRec::program`] of an op whose event itself holds stats the op profile reads
/// besides its program (`hlo_category`, `flops`, `bytes_accessed`).
const ON_EVENT: u32 = u32::MAX - 1;

impl OpRec {
    #[inline]
    pub fn new(name: u32, module: u32, line: u32, index: u32, program: u32, value: i64) -> OpRec {
        OpRec { name, module, line, index, program, value: [value as u32, (value >> 32) as u32] }
    }

    /// [`OpRec::value`].
    #[inline]
    pub fn value(&self) -> i64 {
        (i64::from(self.value[1]) << 32) | i64::from(self.value[0])
    }

    /// Makes the record's name, module and program ids, those of a piece of records
    /// read apart, the device's: `names` and `programs` map the piece's ids to its.
    #[inline]
    pub fn set_ids(&mut self, names: &[u32], programs: &[u32]) {
        (self.name, self.module) = (names[self.name as usize], names[self.module as usize]);
        if let Some(&p) = programs.get(self.program as usize) {
            self.program = p;
        }
    }

    /// Start on the timeline, ps.
    #[inline]
    pub fn start_ps(&self, plane: &Plane) -> i64 {
        plane.lines[self.line as usize].start_ps(self.index as usize)
    }

    /// Its event's length on the timeline (never negative), ps; the op's own length is
    /// [`DeviceOps::duration_ps`].
    #[inline]
    pub fn duration_ps(&self, plane: &Plane) -> i64 {
        plane.lines[self.line as usize].duration_ps(self.index as usize).max(0)
    }
}

const NO_ID: u32 = u32::MAX;

/// Interns op and module names, keyed by what identifies them without hashing the
/// text where it can: a `ref` stat's index, or an event metadata's index.
#[derive(Default)]
pub struct Interner<'a> {
    pub names: Vec<&'a str>,
    ids: FastMap<&'a str, u32>,
    by_ref: FastMap<u32, u32>,
    /// By ref index, for refs within the plane's stat metadata ([`NO_ID`]: not yet).
    by_ref_index: Vec<u32>,
    by_meta: FastMap<u32, u32>,
    /// The id of "" (the module of most ops that name none), without hashing.
    empty: Option<u32>,
}

impl<'a> Interner<'a> {
    /// The id of `s`, added on first sight.
    pub fn text(&mut self, s: &'a str) -> u32 {
        if s.is_empty() {
            if let Some(id) = self.empty {
                return id;
            }
        }
        if let Some(&id) = self.ids.get(s) {
            return id;
        }
        let id = self.names.len() as u32;
        self.names.push(s);
        self.ids.insert(s, id);
        if s.is_empty() {
            self.empty = Some(id);
        }
        id
    }

    /// The id of a string stat's text (`None` when the stat is not a string).
    pub fn stat(&mut self, plane: &'a Plane, stat: Stat) -> Option<u32> {
        let StatValue::Ref(r) = stat.value() else {
            return plane.stat_str(&stat).map(|s| self.text(s));
        };
        // Refs index the plane's stat metadata: a table, not a hash.
        let slot = r as usize;
        if slot < plane.stat_meta.len() {
            if self.by_ref_index.len() < plane.stat_meta.len() {
                self.by_ref_index.resize(plane.stat_meta.len(), NO_ID);
            }
            if self.by_ref_index[slot] != NO_ID {
                return Some(self.by_ref_index[slot]);
            }
            let id = self.text(plane.stat_str(&stat)?);
            self.by_ref_index[slot] = id;
            return Some(id);
        }
        if let Some(&id) = self.by_ref.get(&r) {
            return Some(id);
        }
        let id = self.text(plane.stat_str(&stat)?);
        self.by_ref.insert(r, id);
        Some(id)
    }

    /// The id of the text `text()` gives for event metadata `meta`.
    #[inline]
    pub fn meta(&mut self, meta: u32, text: impl FnOnce() -> &'a str) -> u32 {
        if let Some(&id) = self.by_meta.get(&meta) {
            return id;
        }
        let id = self.text(text());
        self.by_meta.insert(meta, id);
        id
    }
}

/// Interns the `program_id`s of op records ([`OpRec::program`]), in order of first
/// sight.
#[derive(Default)]
pub struct Programs {
    pub ids: Vec<u64>,
    index: FastMap<u64, u32>,
    /// The last id given, nearly always the next one's too.
    last: Option<(u64, u32)>,
}

impl Programs {
    /// [`OpRec::program`] for what the stats say: `on_event` when the event holds other
    /// stats the op profile reads, else its program (`None` when it has none).
    #[inline]
    pub fn of(&mut self, program: Option<u64>, on_event: bool) -> u32 {
        match program {
            _ if on_event => ON_EVENT,
            None => NO_PROGRAM,
            Some(p) => match self.last {
                Some((q, id)) if q == p => id,
                _ => {
                    let ids = &mut self.ids;
                    let id = *self.index.entry(p).or_insert_with(|| {
                        ids.push(p);
                        ids.len() as u32 - 1
                    });
                    self.last = Some((p, id));
                    id
                }
            },
        }
    }

    /// These programs' ids in `to` (added there on first sight), for
    /// [`OpRec::set_ids`].
    #[inline]
    pub fn ids_in(&self, to: &mut Programs) -> Vec<u32> {
        self.ids.iter().map(|&p| to.of(Some(p), false)).collect()
    }
}

/// Builds [`DeviceOps`], interning names.
#[derive(Default)]
pub struct OpsBuilder<'a> {
    pub names: Interner<'a>,
    pub programs: Programs,
    recs: Vec<OpRec>,
    /// Per name given by [`OpsBuilder::rename`]: the name it replaced.
    renamed: FastMap<u32, u32>,
}

impl<'a> OpsBuilder<'a> {
    /// Takes `recs` as the records (their names already ids of [`OpsBuilder::names`]).
    #[inline]
    pub fn set_recs(&mut self, recs: Vec<OpRec>) {
        self.recs = recs;
    }

    /// Gives the records that name no module the module of their program
    /// (`module_of(program_id)`): a TPU's ops record their program's id but no
    /// `hlo_module`, so without it every program's ops read as one module's.
    #[inline]
    pub fn modules_from_programs(&mut self, module_of: impl Fn(u64) -> Option<&'a str>) {
        let Some(empty) = self.names.empty else { return };
        let OpsBuilder { names, programs, recs, .. } = self;
        let mut by_program: FastMap<u32, Option<u32>> = FastMap::default();
        for r in recs.iter_mut().filter(|r| r.module == empty) {
            let Some(&id) = programs.ids.get(r.program as usize) else { continue };
            let named = *by_program.entry(r.program).or_insert_with(|| module_of(id).map(|m| names.text(m)));
            if let Some(m) = named {
                r.module = m;
            }
        }
    }

    /// Gives record `rec` the name `name` (an id of [`OpsBuilder::names`]), keeping
    /// the name it had as the one `name` replaced.
    #[inline]
    pub fn rename(&mut self, rec: usize, name: u32) {
        if let Some(r) = self.recs.get_mut(rec) {
            self.renamed.entry(name).or_insert(r.name);
            r.name = name;
        }
    }

    /// Appends `parts`' records in order, each part dropped once copied. Where no
    /// record is held yet, the first part becomes the list and grows in place (a large
    /// list's pages are remapped, not copied), so the records are not held twice: the
    /// most the copies hold beside the list is the part being copied.
    pub fn extend_moved(&mut self, parts: Vec<Vec<OpRec>>) {
        let mut parts = parts.into_iter();
        if self.recs.is_empty() {
            match parts.next() {
                Some(first) => self.recs = first,
                None => return,
            }
        }
        let rest: Vec<Vec<OpRec>> = parts.collect();
        self.recs.reserve_exact(rest.iter().map(Vec::len).sum());
        for part in rest {
            self.recs.extend_from_slice(&part);
        }
    }

    #[inline]
    pub fn finish(self, value: RecValue) -> DeviceOps {
        DeviceOps {
            names: self.names.names.into_iter().map(Box::from).collect(),
            recs: self.recs,
            renamed: self.renamed,
            value,
            programs: self.programs.ids,
            tails: Vec::new(),
        }
    }
}

/// A `HashMap` with the readers' fast multiply-rotate hasher (keys are names, ids and
/// small tuples read from the profile).
pub type FastMap<K, V> = stepscope_xspace::trace_json::QuickMap<K, V>;

/// One executed op.
#[derive(Clone, Copy, Debug)]
pub struct OpEvent<'a> {
    pub name: &'a str,
    pub module: &'a str,
    /// Index of the line in the device plane.
    pub line: u32,
    /// Index of the event in its line.
    pub index: u32,
    /// Start and length on the timeline (the host's clock).
    pub start_ps: i64,
    pub duration_ps: i64,
    /// The op's own execution time: `device_duration_ps` where the profile records it
    /// (TPU ops, measured on the device clock; their timeline spans are stretched by
    /// clock alignment), else `duration_ps`. Op-profile times use it.
    pub op_ps: i64,
}

impl OpEvent<'_> {
    #[inline]
    pub fn end_ps(&self) -> i64 {
        self.start_ps.saturating_add(self.duration_ps)
    }
}

/// A stat's value as a `u64`, when it is a non-negative integer.
#[inline]
pub fn stat_u64(plane: &Plane, s: Option<Stat>) -> Option<u64> {
    let s = s?;
    match s.value() {
        // Whole: a TPU program id is a 64-bit fingerprint, often past i64::MAX.
        stepscope_xspace::StatValue::U64(v) => Some(v),
        _ => plane.stat_i64(&s).and_then(|v| u64::try_from(v).ok()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_records_value_reads_back_whole() {
        for v in [0, 1, -1, NO_RUN, i64::MAX, 1 << 32, -(1 << 32) - 7, 0x1234_5678_9abc_def0] {
            assert_eq!(OpRec::new(1, 2, 3, 4, 5, v).value(), v);
        }
    }
}
