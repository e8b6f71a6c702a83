//! Work shared by the analyses of one [`Profile`](crate::Profile), done once, in a
//! fixed order.
//!
//! A command such as `summary` runs several analyses (steps, op profile, compile,
//! collectives, devices, memory, the advise rules) that each need the run's devices,
//! every device's ops, busy intervals and steps. They are computed in stages, each
//! once per profile, each from the ones before it:
//!
//! 1. [`DeviceSet`]: the device descriptors and every device's op records (names
//!    interned, no stat lookups after this pass);
//! 2. [`TimeBase`]: each device's busy and active intervals and its ops' kinds (one
//!    pass over its ops), the hosts' compile events and host-side copies (one pass
//!    over each host plane), and the steps, measured — computed from stage 1, which
//!    it is given;
//! 3. the device-time model ([`crate::device_time`]): every device's window and its
//!    time split into named parts — computed from stages 1 and 2.
//!
//! Each stage is a [`Derived`] cell. Its computation uses the rayon pool, so it is
//! only ever computed, or waited for, by a thread outside the pool (the CLI's main
//! thread, a server request's blocking thread, a Python thread): every analysis asks
//! for the stages it needs before it starts parallel work, and code running inside
//! the pool only reads stages already there. A pool thread that waited for a stage
//! while the thread computing it waited for pool threads would hang both for good;
//! [`Derived`] makes that impossible (see its docs). The cache is thread-safe (the
//! server shares a profile across requests) and is emptied when the profile's hosts
//! change ([`Profile::retain_host`](crate::Profile::retain_host)).

use std::sync::{Mutex, OnceLock};

use rayon::prelude::*;

use crate::ops::{GroupBy, Ops};
use crate::profile::{DeviceKind, Keys, OpSource};
use crate::stats::Intervals;
use crate::steps::Steps;
use stepscope_xspace::hlo::HloModules;
use stepscope_xspace::{Line, Plane, Stat, StatValue};

/// Everything cached for one profile.
#[derive(Default)]
pub(crate) struct Cache {
    /// Stage 1: the devices and their op records.
    pub devices: Derived<DeviceSet>,
    /// Stage 2: busy, compile and steps (needs stage 1).
    pub time: Derived<TimeBase>,
    /// Stage 3: the device-time model (needs stages 1 and 2).
    pub device_time: Derived<crate::device_time::DeviceTime>,
    /// The hosts' user scopes (needs nothing before it).
    pub scopes: Derived<Vec<crate::scopes::HostScopes>>,
    /// Op profiles computed so far; each is computed outside the lock from stage 1.
    pub op_profiles: Mutex<Vec<(GroupBy, usize, Ops)>>,
    /// Per host: its HLO modules (found on first use, each decoded on first use;
    /// neither uses the rayon pool, so a plain cell).
    pub hlo: OnceLock<Vec<HloModules>>,
}

/// Stage 1 of the shared work: the devices of every host, with their op records.
pub(crate) struct DeviceSet {
    pub slots: Vec<Slot>,
    /// Step roots met while scanning XLA:CPU host planes for their ops.
    pub host_roots: Vec<PlaneRoots>,
}

/// Step roots (`step_num` + `_r` events) of one host plane, found while scanning it for
/// its XLA:CPU ops so that finding steps need not scan it again: (host index, plane
/// index) and each root's (step_num, line, index).
pub(crate) type PlaneRoots = ((usize, usize), Vec<(i64, u32, u32)>);

/// Stage 2 of the shared work: what is measured against time, from stage 1.
pub(crate) struct TimeBase {
    /// Per device (as [`DeviceSet::slots`]): the time it was busy (an op ran).
    pub busy: Vec<Intervals>,
    /// Per device: the time it was active (busy, or inside an XLA:CPU program).
    pub active: Vec<Intervals>,
    /// Per device: its ops by kind.
    pub kinds: Vec<crate::device_time::OpKinds>,
    /// Per host: what its CPU plane says of device time.
    pub hosts: Vec<HostTime>,
    /// Per device: the spans between its ops and their host launches; `None` where the
    /// profile does not link ops to launches.
    pub launched: Vec<Option<crate::device_time::Launched>>,
    /// The steps, measured (without the launched work, which `steps::steps` adds).
    pub steps: Steps,
}

/// What a host's CPU plane says of device time (stage 2).
#[derive(Default)]
pub(crate) struct HostTime {
    /// Its compile events (`steps::host_compile_events`).
    pub compile_events: Vec<(u32, u32, u8)>,
    /// The time XLA compilation ran.
    pub compile: Intervals,
    /// Host-side copies to its device, on a host whose XLA device is its CPU.
    pub to_device: Intervals,
    /// Likewise from its device.
    pub to_host: Intervals,
    /// Where its GPUs' work is linked to its launches (`correlation_id` on both
    /// sides): each launch call's span, by correlation id. Empty elsewhere.
    pub launches: crate::steps::Launches,
}

/// A value derived from a profile, computed once by whichever thread outside the
/// rayon pool asks first; other threads outside the pool wait for it.
///
/// The computation may use the pool. So a pool thread never waits for it: a pool
/// thread that finds the value missing (a bug: the analysis that runs it should have
/// asked for the value before going parallel) computes its own copy, without
/// waiting on anything, and keeps the first copy stored; debug builds (the tests)
/// panic there instead, so that the order is fixed where it is wrong.
pub struct Derived<T> {
    value: OnceLock<T>,
    /// Held by the thread outside the pool that computes the value.
    computing: Mutex<()>,
}

impl<T> Default for Derived<T> {
    fn default() -> Self {
        Derived { value: OnceLock::new(), computing: Mutex::new(()) }
    }
}

impl<T> Derived<T> {
    /// The value, computed by `compute` if it is not there yet.
    #[track_caller]
    pub fn get_or_compute(&self, compute: impl FnOnce() -> T) -> &T {
        if let Some(v) = self.value.get() {
            return v;
        }
        if rayon::current_thread_index().is_some() {
            debug_assert!(
                false,
                "derived data computed inside the rayon pool: ask for it before going parallel (cache.rs)"
            );
            // Never wait on a pool thread: compute a copy, keep whichever is stored first.
            let _ = self.value.set(compute());
        } else {
            let _computing = lock(&self.computing);
            if self.value.get().is_none() {
                let _ = self.value.set(compute());
            }
        }
        self.value.get().expect("a value was just stored")
    }
}

impl Cache {
    /// A cached op profile for (`by`, `depth`), computed by `make` on first use.
    pub fn op_profile(&self, by: GroupBy, depth: usize, make: impl FnOnce() -> Ops) -> Ops {
        if let Some((_, _, o)) = lock(&self.op_profiles).iter().find(|(b, d, _)| *b == by && *d == depth) {
            return o.clone();
        }
        let ops = make();
        lock(&self.op_profiles).push((by, depth, ops.clone()));
        ops
    }

    /// Makes sure the op profile for (`by`, `depth`) is cached, without copying it out.
    pub fn ensure_op_profile(&self, by: GroupBy, depth: usize, make: impl FnOnce() -> Ops) {
        if !lock(&self.op_profiles).iter().any(|(b, d, _)| *b == by && *d == depth) {
            let ops = make();
            lock(&self.op_profiles).push((by, depth, ops));
        }
    }
}

/// `0..len` cut into ranges of `piece` (the last may be shorter), for scans done in
/// parallel pieces.
pub(crate) fn pieces(len: usize, piece: usize) -> impl Iterator<Item = std::ops::Range<usize>> {
    (0..len).step_by(piece.max(1)).map(move |at| at..len.min(at + piece))
}

/// Gives back the file pages of a line's stats behind a scan over its events
/// ([`Line::release_stats`]), every [`ReleaseBehind::EVENTS`] events: a scan that
/// reads stats all along a long line keeps only those pages resident.
pub(crate) struct ReleaseBehind<'l> {
    line: &'l Line,
    from: usize,
}

impl<'l> ReleaseBehind<'l> {
    const EVENTS: usize = 1 << 16;

    pub fn new(line: &'l Line) -> Self {
        ReleaseBehind { line, from: 0 }
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
    pub fn done(self) {
        self.line.release_stats(self.from..self.line.len());
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// One device's descriptor and its op records.
pub(crate) struct Slot {
    pub host_index: usize,
    pub plane_index: usize,
    pub name: String,
    pub ordinal: Option<i64>,
    pub keys: Keys,
    pub kind: DeviceKind,
    pub source: OpSource,
    pub ops: DeviceOps,
}

/// A device's executed ops, in line order then time order.
#[derive(Default)]
pub(crate) struct DeviceOps {
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
}

/// What an op's stats say for the op profile, as its record keeps it
/// ([`DeviceOps::rec_stats`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RecStats {
    /// The op's `program_id` (on its event or its metadata); any other stat the op
    /// profile reads is on its metadata.
    Program(Option<u64>),
    /// The event itself holds other stats the op profile reads: read them there.
    OnEvent,
}

/// What [`OpRec::value`] holds for a device's records.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum RecValue {
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
    /// Op record `i` as an [`OpEvent`](crate::OpEvent).
    pub fn event<'p>(&'p self, plane: &'p Plane, i: usize) -> crate::OpEvent<'p> {
        let r = &self.recs[i];
        crate::OpEvent {
            name: &self.names[r.name as usize],
            module: &self.names[r.module as usize],
            line: r.line,
            index: r.index,
            start_ps: r.start_ps(plane),
            duration_ps: r.duration_ps(plane),
            op_ps: self.op_ps(r, plane),
        }
    }

    /// The op's own time (see [`OpEvent::op_ps`](crate::OpEvent::op_ps)).
    #[inline]
    pub fn op_ps(&self, r: &OpRec, plane: &Plane) -> i64 {
        match self.value {
            RecValue::OpTime => r.value,
            _ => r.duration_ps(plane),
        }
    }

    /// The `run_id` of an XLA:CPU op.
    #[inline]
    pub fn run_id(&self, r: &OpRec) -> Option<i64> {
        (self.value == RecValue::RunId && r.value != NO_RUN).then_some(r.value)
    }

    /// The `correlation_id` of a GPU op (its link to its host launch).
    #[inline]
    pub fn correlation_id(&self, r: &OpRec) -> Option<i64> {
        (self.value == RecValue::CorrelationId && r.value != NO_RUN).then_some(r.value)
    }

    /// True when the records hold their ops' `correlation_id`s.
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
        let length = line.duration_ps(r.index as usize).max(0);
        let op_ps = if self.value == RecValue::OpTime { r.value } else { length };
        (r.line, start, length, op_ps)
    }
}

/// One executed op in 32 bytes: names are indexes into [`DeviceOps::names`]; start and
/// length are read from the device plane's columns (line `line`, event `index`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct OpRec {
    pub name: u32,
    pub module: u32,
    pub line: u32,
    pub index: u32,
    /// What the op profile reads of the op's stats, read with the record: see
    /// [`DeviceOps::rec_stats`].
    pub program: u32,
    /// The op's own time, its `run_id` or its `correlation_id`, as the device's
    /// [`DeviceOps::value`] says (read it with [`DeviceOps::op_ps`],
    /// [`DeviceOps::run_id`] and [`DeviceOps::correlation_id`]).
    pub value: i64,
}

/// A `run_id` or `correlation_id` that is none (a real id of `i64::MIN` reads as none).
pub(crate) const NO_RUN: i64 = i64::MIN;

/// [`OpRec::program`] of an op without a `program_id`.
const NO_PROGRAM: u32 = u32::MAX;
/// [`OpRec::program`] of an op whose event itself holds stats the op profile reads
/// besides its program (`hlo_category`, `flops`, `bytes_accessed`).
const ON_EVENT: u32 = u32::MAX - 1;

impl OpRec {
    pub fn new(name: u32, module: u32, line: u32, index: u32, program: u32, value: i64) -> OpRec {
        OpRec { name, module, line, index, program, value }
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

    /// Length on the timeline (never negative), ps.
    #[inline]
    pub fn duration_ps(&self, plane: &Plane) -> i64 {
        plane.lines[self.line as usize].duration_ps(self.index as usize).max(0)
    }
}

const NO_ID: u32 = u32::MAX;

/// Interns op and module names, keyed by what identifies them without hashing the
/// text where it can: a `ref` stat's index, or an event metadata's index.
#[derive(Default)]
pub(crate) struct Interner<'a> {
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
pub(crate) struct Programs {
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
    pub fn ids_in(&self, to: &mut Programs) -> Vec<u32> {
        self.ids.iter().map(|&p| to.of(Some(p), false)).collect()
    }
}

/// Builds [`DeviceOps`], interning names.
#[derive(Default)]
pub(crate) struct OpsBuilder<'a> {
    pub names: Interner<'a>,
    pub programs: Programs,
    recs: Vec<OpRec>,
    /// Per name given by [`OpsBuilder::rename`]: the name it replaced.
    renamed: FastMap<u32, u32>,
}

impl<'a> OpsBuilder<'a> {
    /// Takes `recs` as the records (their names already ids of [`OpsBuilder::names`]).
    pub fn set_recs(&mut self, recs: Vec<OpRec>) {
        self.recs = recs;
    }

    /// Gives record `rec` the name `name` (an id of [`OpsBuilder::names`]), keeping
    /// the name it had as the one `name` replaced.
    pub fn rename(&mut self, rec: usize, name: u32) {
        if let Some(r) = self.recs.get_mut(rec) {
            self.renamed.entry(name).or_insert(r.name);
            r.name = name;
        }
    }

    /// Appends `parts`' records in order, copying the parts in parallel.
    pub fn extend_parallel(&mut self, parts: &[&[OpRec]]) {
        let total: usize = parts.iter().map(|p| p.len()).sum();
        self.recs.reserve_exact(total);
        let mut spare = &mut self.recs.spare_capacity_mut()[..total];
        let mut places = Vec::with_capacity(parts.len());
        for part in parts {
            let (here, rest) = spare.split_at_mut(part.len());
            places.push((here, *part));
            spare = rest;
        }
        places.into_par_iter().for_each(|(here, part)| {
            here.write_copy_of_slice(part);
        });
        // SAFETY: the places cover the first `total` spare slots exactly (their
        // lengths are the parts' and they were split off in turn), and each was
        // written just above.
        unsafe { self.recs.set_len(self.recs.len() + total) };
    }

    pub fn finish(self, value: RecValue) -> DeviceOps {
        DeviceOps {
            names: self.names.names.into_iter().map(Box::from).collect(),
            recs: self.recs,
            renamed: self.renamed,
            value,
            programs: self.programs.ids,
        }
    }
}

/// A `HashMap` with the readers' fast multiply-rotate hasher (keys are names, ids and
/// small tuples read from the profile).
pub(crate) type FastMap<K, V> = stepscope_xspace::trace_json::QuickMap<K, V>;
