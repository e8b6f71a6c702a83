//! Stage 1 of the model: the devices of every host and their op records.
//!
//! Where ops come from:
//! - TPU (and GPU profiles that have one): the device plane's `XLA Ops` line;
//! - GPU: kernels on `Stream #…` lines, rolled up to their `hlo_op` stat;
//! - CPU: `/host:CPU` events carrying `hlo_op` (XLA's CPU runtime runs ops on host
//!   threads), used only when no device plane has events.

use rayon::prelude::*;
use stepscope_xspace::hlo::HloModules;
use stepscope_xspace::{Line, Plane, Space, Stat, StatLookup};

use crate::command_buffer::KernelOwners;
use crate::device::{device_kind, host_cpu_plane, is_stream_line, DeviceKind, Keys, OpSource, Slot};
use crate::records::{
    stat_u64, DeviceOps, FastMap, Interner, OpRec, OpsBuilder, Programs, RecValue, ReleaseBehind, NO_RUN,
};

/// Stage 1 of the shared work: the devices of every host, with their op records.
pub struct DeviceSet {
    pub slots: Vec<Slot>,
    /// Step roots met while scanning XLA:CPU host planes for their ops.
    pub host_roots: Vec<PlaneRoots>,
}

/// Step roots (`step_num` + `_r` events) of one host plane, found while scanning it for
/// its XLA:CPU ops so that finding steps need not scan it again: (host index, plane
/// index) and each root's (step_num, line, index).
pub type PlaneRoots = ((usize, usize), Vec<(i64, u32, u32)>);

/// The devices of every host (see [`Profile::devices`]) with their op records: the
/// TPU and GPU devices' read in parallel; XLA:CPU devices get theirs in the scan of
/// the host plane that finds their ordinals.
pub fn find_devices(hosts: &[Space], hlo: &[HloModules]) -> DeviceSet {
    let mut found: Vec<(Descriptor, Option<DeviceOps>)> = Vec::new();
    let mut host_roots: Vec<PlaneRoots> = Vec::new();
    for (hi, space) in hosts.iter().enumerate() {
        let mut on_devices = false;
        for (pi, plane) in space.planes.iter().enumerate() {
            if !(plane.name.starts_with("/device:") && plane.event_count() > 0) {
                continue;
            }
            let kind = device_kind(&plane.name);
            let source = if plane.lines.iter().any(|l| l.name == "XLA Ops" && !l.is_empty()) {
                OpSource::XlaOpsLine
            } else if plane.lines.iter().any(is_stream_line) {
                OpSource::Kernels
            } else {
                continue;
            };
            let d = Descriptor {
                host_index: hi,
                plane_index: pi,
                name: plane.name.clone(),
                ordinal: None,
                keys: Keys::of(plane),
                kind,
                source,
            };
            found.push((d, None));
            on_devices = true;
        }
        if on_devices {
            continue;
        }
        let Some(plane) = host_cpu_plane(space) else { continue };
        let Some(pi) = space.planes.iter().position(|p| std::ptr::eq(p, plane)) else { continue };
        let keys = Keys::of(plane);
        if keys.hlo_op.is_none() {
            continue;
        }
        let ends = Ends::of(plane, &keys);
        let lines = host_ops(plane, &keys, &ends);
        if keys.step_num.is_some() && keys.root.is_some() {
            host_roots.push(((hi, pi), lines.iter().flat_map(|l| l.roots.iter().copied()).collect()));
        }
        let mut ordinals: Vec<i64> = lines.iter().flat_map(|l| l.by_ordinal.iter().filter_map(|(o, _)| *o)).collect();
        ordinals.sort_unstable();
        ordinals.dedup();
        if ordinals.len() < 2 {
            ordinals.clear();
        }
        let devices = cpu_device_ops(plane, lines, &ordinals, &ends);
        for (d, ops) in devices.into_iter().enumerate() {
            let (name, ordinal) = match ordinals.get(d) {
                Some(&o) => (format!("/device:CPU:{o}"), Some(o)),
                None => (plane.name.clone(), None),
            };
            let d = Descriptor {
                host_index: hi,
                plane_index: pi,
                name,
                ordinal,
                keys,
                kind: DeviceKind::Cpu,
                source: OpSource::HostOps,
            };
            found.push((d, Some(ops)));
        }
    }
    let slots = found
        .into_par_iter()
        .map(|(d, ops)| {
            let ops =
                ops.unwrap_or_else(|| device_ops(&hosts[d.host_index].planes[d.plane_index], &d, &hlo[d.host_index]));
            d.with_ops(ops)
        })
        .collect();
    DeviceSet { slots, host_roots }
}

/// What identifies a device, before its op records are read.
pub struct Descriptor {
    host_index: usize,
    plane_index: usize,
    name: String,
    ordinal: Option<i64>,
    keys: Keys,
    kind: DeviceKind,
    source: OpSource,
}

impl Descriptor {
    fn with_ops(self, ops: DeviceOps) -> Slot {
        let Descriptor { host_index, plane_index, name, ordinal, keys, kind, source } = self;
        Slot { host_index, plane_index, name, ordinal, keys, kind, source, ops }
    }
}

/// Builds the op records of a TPU/GPU device (XLA:CPU devices get theirs with the
/// host scan, see [`host_ops`]). GPU kernels that ran in a command buffer are credited
/// to their own instructions where the profile tells them: by kernel name and graph
/// node order (see [`crate::command_buffer`]).
///
/// Pieces of the lines are read in parallel, each naming its ops and noting its
/// command-buffer kernels on its own; they are then joined in line order, names
/// and places numbered in the order a single pass would have met them.
fn device_ops<'a>(plane: &'a Plane, slot: &Descriptor, hlo: &'a HloModules) -> DeviceOps {
    let keep = |line: &Line| match slot.source {
        OpSource::XlaOpsLine => line.name == "XLA Ops",
        OpSource::Kernels => is_stream_line(line),
        OpSource::HostOps => false,
    };
    let k = &slot.keys;
    let look = plane.stat_lookup([
        k.hlo_op,
        k.hlo_module,
        k.device_duration_ps,
        k.cuda_graph_id,
        k.cuda_graph_node_id,
        k.program_id,
        k.hlo_category,
        k.flops,
        k.bytes_accessed,
        k.correlation_id.filter(|_| slot.source == OpSource::Kernels),
    ]);
    let pieces: Vec<(usize, std::ops::Range<usize>)> = (plane.lines.iter().enumerate())
        .filter(|(_, line)| keep(line))
        .flat_map(|(li, line)| crate::records::pieces(line.len(), DEVICE_SCAN_PIECE).map(move |r| (li, r)))
        .collect();
    // Every event of a kept line is one record: each piece fills its own part.
    let mut recs = vec![OpRec::new(0, 0, 0, 0, 0, 0); pieces.iter().map(|(_, r)| r.len()).sum()];
    let mut jobs = Vec::with_capacity(pieces.len());
    let (mut rest, mut base) = (&mut recs[..], 0);
    for (li, range) in pieces {
        let (part, after) = rest.split_at_mut(range.len());
        base += range.len();
        jobs.push(((li, range, base - part.len()), part));
        rest = after;
    }
    let read: Vec<PieceOps> =
        jobs.into_par_iter().map(|(piece, out)| device_ops_in(plane, slot, hlo, &look, piece, out)).collect();
    let mut b = OpsBuilder::default();
    let mut buffers = (slot.source == OpSource::Kernels).then(|| Buffers::new(hlo, plane));
    let mut at = 0;
    for piece in read {
        let ids: Vec<u32> = piece.names.names.iter().map(|n| b.names.text(n)).collect();
        let programs = piece.programs.ids_in(&mut b.programs);
        for r in &mut recs[at..at + piece.len] {
            r.set_ids(&ids, &programs);
        }
        at += piece.len;
        if let Some(buffers) = buffers.as_mut() {
            buffers.join(&ids, piece.places, piece.launches);
        }
    }
    b.set_recs(recs);
    b.modules_from_programs(|id| {
        let entry = hlo.entry(id as i64)?;
        Some(entry.name.as_str()).filter(|m| !m.is_empty())
    });
    if let Some(buffers) = buffers {
        buffers.credit(&mut b);
    }
    b.finish(match slot.source {
        OpSource::XlaOpsLine => RecValue::OpTime,
        OpSource::Kernels if k.correlation_id.is_some() => RecValue::CorrelationId,
        _ => RecValue::Nothing,
    })
}

/// Events of a device line read as one piece by [`device_ops`]. Debug builds (the
/// tests' binaries) cut the small fixtures' lines too, so the joining of pieces is
/// checked by every test that reads device ops.
const DEVICE_SCAN_PIECE: usize = if cfg!(debug_assertions) { 1 << 7 } else { 1 << 16 };

/// The op records of one piece of a device line ([`device_ops_in`]): names by the
/// piece's own ids, and its command-buffer kernels' places and launches.
struct PieceOps<'a> {
    names: Interner<'a>,
    programs: Programs,
    len: usize,
    places: Vec<Place>,
    /// (record, index into `places`) of each command-buffer kernel.
    launches: Vec<(u32, u32)>,
}

/// Reads events `range` of line `li` into `out` (records `base..`), naming them by
/// the piece's own ids.
fn device_ops_in<'a>(
    plane: &'a Plane,
    slot: &Descriptor,
    hlo: &'a HloModules,
    look: &StatLookup<10>,
    (li, range, base): (usize, std::ops::Range<usize>, usize),
    out: &mut [OpRec],
) -> PieceOps<'a> {
    let line = &plane.lines[li];
    let mut names = Interner::default();
    let mut programs = Programs::default();
    let mut owners = KernelOwners::new(hlo);
    // Per (op, module) met: whether the op is a command buffer (no instruction), and
    // the last one looked up.
    let mut foreign: FastMap<(u32, u32), bool> = FastMap::default();
    let mut last: Option<(u32, u32, bool)> = None;
    let mut place_ids: FastMap<Place, u32> = FastMap::default();
    let (mut places, mut launches) = (Vec::new(), Vec::new());
    let mut release = ReleaseBehind::over(line, range.clone());
    for (i, rec) in range.clone().zip(out.iter_mut()) {
        release.at(i);
        let meta = line.meta(i);
        let own = plane.own_stats_of(look, line, i).unwrap_or_default();
        let [.., category, flops, bytes, correlation] = own;
        let on_event = category.or(flops).or(bytes).is_some();
        let [op, module, device_duration, graph, node, program, ..] = plane.with_metadata_stats(look, meta, own);
        let by_meta = |n: &mut Interner<'a>| match slot.source {
            OpSource::XlaOpsLine => n.meta(meta, || op_name_of(plane.event_name(meta), plane, meta)),
            _ => n.meta(meta, || plane.event_name(meta)),
        };
        let name = match (slot.source, op) {
            (OpSource::XlaOpsLine, _) | (_, None) => by_meta(&mut names),
            (_, Some(op)) => match names.stat(plane, op) {
                Some(id) => id,
                None => by_meta(&mut names),
            },
        };
        let module = module.and_then(|s| names.stat(plane, s)).unwrap_or_else(|| names.text(""));
        if slot.source == OpSource::Kernels && op.is_some() {
            // A kernel of a command buffer: noted by where it ran.
            let is_foreign = match last {
                Some((o, m, f)) if (o, m) == (name, module) => f,
                _ => {
                    let f = *foreign
                        .entry((name, module))
                        .or_insert_with(|| owners.is_foreign(names.names[module as usize], names.names[name as usize]));
                    last = Some((name, module, f));
                    f
                }
            };
            if is_foreign {
                let int = |s: Option<Stat>| s.and_then(|s| plane.stat_i64(&s));
                let place = Place { op: name, module, graph: int(graph), node: int(node), meta };
                let id = *place_ids.entry(place).or_insert_with(|| {
                    places.push(place);
                    places.len() as u32 - 1
                });
                launches.push(((base + i - range.start) as u32, id));
            }
        }
        let duration_ps = line.duration_ps(i).max(0);
        // TPU ops record their length on the device clock: the op's own time.
        // The record's value: a TPU op's own time on the device clock; a GPU op's
        // `correlation_id` (its own: the link to its launch).
        let value = match slot.source {
            OpSource::XlaOpsLine => device_duration.and_then(|s| plane.stat_i64(&s)).map_or(duration_ps, |d| d.max(0)),
            _ => correlation.and_then(|s| plane.stat_i64(&s)).unwrap_or(NO_RUN),
        };
        let program = programs.of(stat_u64(plane, program), on_event);
        *rec = OpRec::new(name, module, li as u32, i as u32, program, value);
    }
    release.done();
    PieceOps { names, programs, len: range.len(), places, launches }
}

/// The kernels of a GPU device whose `hlo_op` is a command buffer, noted while its
/// op records are built ([`device_ops_in`]), then credited to their own instructions
/// ([`crate::command_buffer`]).
struct Buffers<'a> {
    owners: KernelOwners<'a>,
    plane: &'a Plane,
    /// Each distinct place a kernel ran at, and its index in `places`.
    place_ids: FastMap<Place, u32>,
    places: Vec<Place>,
    /// (op record, place) of each kernel noted.
    launches: Vec<(u32, u32)>,
}

/// Where a noted kernel ran: its op and module, `cuda_graph_id`, `cuda_graph_node_id`
/// and event metadata (the kernel's name).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct Place {
    op: u32,
    module: u32,
    graph: Option<i64>,
    node: Option<i64>,
    meta: u32,
}

impl<'a> Buffers<'a> {
    fn new(hlo: &'a HloModules, plane: &'a Plane) -> Buffers<'a> {
        Buffers {
            owners: KernelOwners::new(hlo),
            plane,
            place_ids: FastMap::default(),
            places: Vec::new(),
            launches: Vec::new(),
        }
    }

    /// Adds a piece's places and launches, its name ids made the device's by `ids`.
    fn join(&mut self, ids: &[u32], places: Vec<Place>, launches: Vec<(u32, u32)>) {
        let to_mine: Vec<u32> = places
            .into_iter()
            .map(|p| {
                let place = Place { op: ids[p.op as usize], module: ids[p.module as usize], ..p };
                let places = &mut self.places;
                *self.place_ids.entry(place).or_insert_with(|| {
                    places.push(place);
                    places.len() as u32 - 1
                })
            })
            .collect();
        self.launches.extend(launches.into_iter().map(|(rec, p)| (rec, to_mine[p as usize])));
    }
    /// Renames the noted records after the instructions their kernels computed.
    fn credit(mut self, b: &mut OpsBuilder<'a>) {
        // Places by graph (op, module, graph), then node.
        let mut order: Vec<u32> = (0..self.places.len() as u32).collect();
        order.sort_unstable_by_key(|&p| self.places[p as usize]);
        let mut owner_of: Vec<Option<u32>> = vec![None; self.places.len()];
        for graph in order.chunk_by(|&a, &b| {
            let (a, b) = (&self.places[a as usize], &self.places[b as usize]);
            (a.op, a.module, a.graph) == (b.op, b.module, b.graph)
        }) {
            let first = self.places[graph[0] as usize];
            let module = b.names.names[first.module as usize];
            // Node index (the node id's low 32 bits) → kernel name, one entry per node.
            let mut nodes: Vec<(u32, &str)> = graph
                .iter()
                .filter_map(|&p| {
                    let p = &self.places[p as usize];
                    Some((p.node? as u32, self.plane.event_name(p.meta)))
                })
                .collect();
            nodes.sort_unstable();
            nodes.dedup_by_key(|n| n.0);
            let placed: FastMap<u32, &str> = if first.graph.is_some() {
                self.owners.graph(module, &nodes).into_iter().collect()
            } else {
                FastMap::default()
            };
            let mut seen: FastMap<&str, u32> = FastMap::default();
            for &(_, k) in &nodes {
                *seen.entry(k).or_default() += 1;
            }
            for &p in graph {
                let place = self.places[p as usize];
                let kernel = self.plane.event_name(place.meta);
                let owner = match place.node.and_then(|n| placed.get(&(n as u32))) {
                    Some(&o) => Some(o),
                    // Unplaced: the name, unless the kernel runs at several places.
                    None if seen.get(kernel).is_none_or(|&c| c <= 1) => self.owners.by_name(module, kernel),
                    None => None,
                };
                owner_of[p as usize] = owner.map(|o| b.names.text(o));
            }
        }
        for (rec, p) in self.launches {
            if let Some(id) = owner_of[p as usize] {
                b.rename(rec as usize, id);
            }
        }
    }
}

/// The XLA:CPU ops (events carrying `hlo_op`) of a range of one line, split by
/// `device_ordinal`, with names interned per range.
struct LineOps<'a> {
    /// The index of the line (of the plane) the piece is of.
    line: usize,
    names: Interner<'a>,
    programs: Programs,
    /// Per ordinal seen on the line: its ops, in line order. An op whose `hlo_op` is not
    /// a string has no record but still shows its ordinal.
    by_ordinal: Vec<(Option<i64>, Vec<OpRec>)>,
    /// Per ordinal, for each of its ops whose completion may come after its event
    /// ends (no `end:` event inside it), its place among the ordinal's records and the
    /// flow id (`_p`) that links it to its completion. (The others, most ops, hold
    /// nothing: a flow per record would take 8 bytes an op.)
    flows: Vec<Vec<crate::pool::Flow>>,
    /// The `end:` events found inside their ops (the ops that completed as their
    /// events ended), in line order.
    ends_inside: Vec<u32>,
    /// What the intra-op pool model reads of the piece, in line order
    /// ([`crate::pool`]; gathered here, while the scan has the events' pages).
    pool: Vec<crate::pool::PoolEvent>,
    /// Step roots met on the way (events with `step_num` and `_r`): (step_num, line, index).
    roots: Vec<(i64, u32, u32)>,
}

/// Events of a line scanned as one piece by [`host_ops`]: long lines are cut so both
/// cores stay busy however the plane's events are spread over its lines. Debug builds
/// (the tests' binaries) cut the small fixtures' lines too, so the joining of pieces is
/// checked by every test that reads XLA:CPU ops.
const HOST_SCAN_PIECE: usize = if cfg!(debug_assertions) { 1 << 10 } else { 1 << 18 };

/// The XLA:CPU ops of every line of `plane`, in line order (pieces of lines scanned in
/// parallel).
fn host_ops<'a>(plane: &'a Plane, keys: &Keys, ends: &Ends) -> Vec<LineOps<'a>> {
    let Some(op_key) = keys.hlo_op else { return Vec::new() };
    let look = plane.stat_lookup([
        Some(op_key),
        keys.hlo_module,
        keys.device_ordinal,
        keys.run_id,
        keys.step_num,
        keys.root,
        keys.program_id,
    ]);
    // Where the plane has other keys the op profile reads, it reads each op's stats
    // (rare on XLA:CPU planes; looking for them here would slow the scan of the
    // plane's other events).
    let on_event = [keys.hlo_category, keys.flops, keys.bytes_accessed].iter().any(Option::is_some);
    // Whether each line's events are in time order (the pool model keeps fewer of a
    // sorted line's events: [`crate::pool::PoolEvents::piece`]).
    let sorted: Vec<bool> = match ends.pool {
        Some(_) => plane.lines.par_iter().map(|line| line.starts().is_sorted()).collect(),
        None => Vec::new(),
    };
    let pieces: Vec<(usize, std::ops::Range<usize>)> = (plane.lines.iter().enumerate())
        .flat_map(|(li, line)| crate::records::pieces(line.len(), HOST_SCAN_PIECE).map(move |r| (li, r)))
        .collect();
    (pieces.into_par_iter())
        .map(|(li, range)| {
            let sorted = sorted.get(li).copied().unwrap_or(false);
            host_ops_in(plane, &look, on_event, ends, (li, sorted), range)
        })
        .collect()
}

/// How XLA:CPU ops end: an op's `end: <op>` event (linked to it by the flow id, `_p`
/// on the op and `_c` on the end) marks when the executor was done with it. Nearly
/// always it lies inside the op's event (the op ran on its thread); for an op handed
/// to the intra-op pool (a `dot`) it comes later, once the executor has also run what
/// the op's completion let it run: the op's own end lies between ([`crate::pool`]).
struct Ends<'a> {
    /// Per event metadata: the op whose end its name marks (`end: <op>`), if any.
    ends_op: Vec<Option<&'a str>>,
    flow_out: Option<u32>,
    flow_in: Option<u32>,
    /// The plane's intra-op pool events, where it has them and flow ids.
    pool: Option<crate::pool::PoolEvents>,
}

/// Events looked at on either side of an op's for its `end:` event inside it (a
/// Threadpool record or two come between; either side, as a line's events may be
/// stored in any order).
const END_LOOK_AROUND: usize = 8;

impl<'a> Ends<'a> {
    fn of(plane: &'a Plane, keys: &Keys) -> Ends<'a> {
        let found = keys.flow_out.is_some() && keys.flow_in.is_some();
        let ends_op = (0..plane.event_meta.len() as u32)
            .map(|m| plane.event_name(m).strip_prefix("end: ").filter(|_| found))
            .collect();
        let pool = keys.flow_out.zip(keys.flow_in).and_then(|flows| crate::pool::PoolEvents::of(plane, flows));
        Ends { ends_op, flow_out: keys.flow_out, flow_in: keys.flow_in, pool }
    }

    /// The op whose end event `i` is, if it is one.
    fn op_ended(&self, line: &Line, i: usize) -> Option<&'a str> {
        self.ends_op.get(line.meta(i) as usize).copied().flatten()
    }

    /// The index of op event `i`'s (op `name`'s, which starts at `start`) `end:` event
    /// where it lies inside the op's (it completed as its event ended), if any.
    fn inside(&self, line: &Line, i: usize, start: i64, name: &str) -> Option<usize> {
        let span = start..=start.saturating_add(line.duration_ps(i).max(0));
        // The events inside the op's, next to it: after it in time order, before it in
        // reverse.
        let after = (i + 1..line.len().min(i + 1 + END_LOOK_AROUND)).take_while(|&j| span.contains(&line.start_ps(j)));
        let before = (i.saturating_sub(END_LOOK_AROUND)..i).rev().take_while(|&j| span.contains(&line.start_ps(j)));
        after.chain(before).find(|&j| self.op_ended(line, j) == Some(name))
    }

    /// The flow id (`_p`) of op event `i`: what its completion elsewhere ends.
    fn flow_of(&self, plane: &Plane, line: &Line, i: usize) -> u64 {
        self.flow_out.and_then(|k| stat_u64(plane, plane.event_stat(line, i, k))).unwrap_or(0)
    }

    /// Per flow id, where the `end:` events not inside their ops (`inside`, per line:
    /// those found inside, sorted) start: the completions of the ops handed to the pool.
    fn completions(&self, plane: &Plane, inside: &[(usize, Vec<u32>)]) -> FastMap<u64, i64> {
        let Some(key) = self.flow_in else { return FastMap::default() };
        let per_line: Vec<Vec<(u64, i64)>> = inside
            .par_iter()
            .map(|(li, inside)| {
                let line = &plane.lines[*li];
                let mut skip = inside.iter().peekable();
                let mut out = Vec::new();
                // The file's pages read are let go as the scan goes, as the first scan
                // lets them go: the ends left are spread over the whole line.
                let mut release = ReleaseBehind::new(line);
                for i in (0..line.len()).filter(|&i| self.op_ended(line, i).is_some()) {
                    while skip.next_if(|&&j| (j as usize) < i).is_some() {}
                    if skip.next_if(|&&j| j as usize == i).is_some() {
                        continue;
                    }
                    release.at(i);
                    if let Some(flow) = stat_u64(plane, plane.event_stat(line, i, key)) {
                        out.push((flow, line.start_ps(i)));
                    }
                }
                release.done();
                out
            })
            .collect();
        per_line.into_iter().flatten().collect()
    }
}

/// [`host_ops`] of events `range` of line `li` (`sorted`: whether the line's events
/// are in time order).
#[inline(never)]
fn host_ops_in<'a>(
    plane: &'a Plane,
    look: &StatLookup<7>,
    on_event: bool,
    ends: &Ends,
    (li, sorted): (usize, bool),
    range: std::ops::Range<usize>,
) -> LineOps<'a> {
    let line = &plane.lines[li];
    let mut pool = ends.pool.as_ref().map(|pool| pool.piece(plane, line, range.clone(), sorted));
    let mut out = LineOps {
        line: li,
        names: Interner::default(),
        programs: Programs::default(),
        by_ordinal: Vec::new(),
        flows: Vec::new(),
        ends_inside: Vec::new(),
        pool: Vec::new(),
        roots: Vec::new(),
    };
    // Most events (Python calls, Eigen tasks) hold none of the keys: skipped a block
    // at a time, unread. The file's pages of the stats read are given back as the
    // scan goes (a piece's stats are some MB).
    let mut release = ReleaseBehind::over(line, range.clone());
    for i in plane.events_maybe_with(look, line, range.clone()) {
        release.at(i);
        let [op, module, ordinal, run, step_num, root, program] = plane.stats_of(look, line, i);
        if let (Some(num), Some(_)) = (step_num, root) {
            out.roots.push((plane.stat_i64(&num).unwrap_or(-1), li as u32, i as u32));
        }
        let Some(op) = op else { continue };
        let start = line.start_ps(i);
        if let Some(pool) = &mut pool {
            pool.op(i, start);
        }
        let ordinal = ordinal.and_then(|s| plane.stat_i64(&s));
        let at = match out.by_ordinal.iter().position(|(o, _)| *o == ordinal) {
            Some(at) => at,
            None => {
                out.by_ordinal.push((ordinal, Vec::new()));
                out.flows.push(Vec::new());
                out.by_ordinal.len() - 1
            }
        };
        let Some(name) = out.names.stat(plane, op) else { continue };
        let module = module.and_then(|s| out.names.stat(plane, s)).unwrap_or_else(|| out.names.text(""));
        let run_id = run.and_then(|s| plane.stat_i64(&s));
        let program = out.programs.of(stat_u64(plane, program), on_event);
        out.by_ordinal[at].1.push(OpRec::new(name, module, li as u32, i as u32, program, run_id.unwrap_or(NO_RUN)));
        let flow = match ends.inside(line, i, start, out.names.names[name as usize]) {
            Some(end) => {
                out.ends_inside.push(end as u32);
                0
            }
            None => ends.flow_of(plane, line, i),
        };
        if flow != 0 {
            out.flows[at].push(((out.by_ordinal[at].1.len() - 1) as u32, flow));
        }
    }
    if let Some(pool) = pool {
        out.pool = pool.finish();
    }
    release.done();
    out
}

/// The op records of each XLA:CPU device of a plane (one per ordinal in `ordinals`, or
/// one device with every op when `ordinals` is empty), in line order then time order.
/// Names are re-interned per device (per piece, not per op); the records are renamed
/// in place, then copied into each device's list, in parallel. An op the intra-op
/// pool finished after its event ended gets its tail ([`DeviceOps::tails`], from
/// [`crate::pool`]).
fn cpu_device_ops(plane: &Plane, lines: Vec<LineOps>, ordinals: &[i64], ends: &Ends) -> Vec<DeviceOps> {
    let done = completions(plane, &lines, ends);
    let device_of = |o: Option<i64>| {
        if ordinals.is_empty() {
            Some(0)
        } else {
            o.and_then(|o| ordinals.binary_search(&o).ok())
        }
    };
    let mut builders: Vec<OpsBuilder> = (0..ordinals.len().max(1)).map(|_| OpsBuilder::default()).collect();
    // (device, the piece's name and program ids on that device, records), in line order.
    type Ids = (Vec<u32>, Vec<u32>);
    let mut groups: Vec<(usize, Ids, Vec<OpRec>)> = Vec::new();
    // Per device, its records' flow ids (by the records' places on it), and how many
    // records it has so far.
    let mut flows: Vec<Vec<crate::pool::Flow>> = vec![Vec::new(); builders.len()];
    let mut held: Vec<u32> = vec![0; builders.len()];
    // Per line of the plane, what the pool model reads of it.
    let mut pool: Vec<Vec<crate::pool::PoolEvent>> = vec![Vec::new(); plane.lines.len()];
    for mut line in lines {
        match pool.get_mut(line.line) {
            Some(on) if on.is_empty() => *on = std::mem::take(&mut line.pool),
            Some(on) => on.append(&mut line.pool),
            None => {}
        }
        for ((o, recs), line_flows) in line.by_ordinal.into_iter().zip(line.flows) {
            let Some(d) = device_of(o) else { continue };
            let ids = line.names.names.iter().map(|n| builders[d].names.text(n)).collect();
            let programs = line.programs.ids_in(&mut builders[d].programs);
            let base = held[d];
            flows[d].extend(line_flows.into_iter().map(|(i, flow)| (base + i, flow)));
            held[d] += recs.len() as u32;
            groups.push((d, (ids, programs), recs));
        }
    }
    groups.par_iter_mut().for_each(|(_, (ids, programs), recs)| {
        for r in recs.iter_mut() {
            r.set_ids(ids, programs);
        }
    });
    // Each device's pieces, moved into its list: the records are never held twice.
    let mut pieces: Vec<Vec<Vec<OpRec>>> = (0..builders.len()).map(|_| Vec::new()).collect();
    for (d, _, recs) in groups {
        pieces[d].push(recs);
    }
    let mut devices: Vec<DeviceOps> = (builders.into_iter().zip(pieces))
        .map(|(mut b, parts)| {
            b.extend_moved(parts);
            b.finish(RecValue::RunId)
        })
        .collect();
    if ends.pool.is_some() {
        let tails = crate::pool::tails(plane, &devices, &flows, &done, pool);
        for (ops, tails) in devices.iter_mut().zip(tails) {
            ops.tails = tails;
        }
    }
    devices
}

/// Per flow id, when the ops of `lines` that may have completed after their events
/// ended did (none where every op completed inside its event: one scan less).
fn completions(plane: &Plane, lines: &[LineOps], ends: &Ends) -> FastMap<u64, i64> {
    if lines.iter().flat_map(|l| &l.flows).all(Vec::is_empty) {
        return FastMap::default();
    }
    // Per line holding ops: the `end:` events found inside them, in order.
    let mut inside: Vec<(usize, Vec<u32>)> = Vec::new();
    for l in lines.iter().filter(|l| l.by_ordinal.iter().any(|(_, recs)| !recs.is_empty())) {
        match inside.last_mut() {
            Some((at, ends)) if *at == l.line => ends.extend(&l.ends_inside),
            _ => inside.push((l.line, l.ends_inside.clone())),
        }
    }
    inside.iter_mut().for_each(|(_, found)| found.sort_unstable());
    ends.completions(plane, &inside)
}

/// The op name of an `XLA Ops` event: its metadata's display name, else the HLO
/// instruction name at the start of `%name = …`.
fn op_name_of<'p>(name: &'p str, plane: &'p Plane, meta: u32) -> &'p str {
    if let Some(m) = plane.event_meta.get(meta as usize) {
        let d = plane.text(m.display_name);
        if !d.is_empty() {
            return d;
        }
    }
    let n = name.strip_prefix('%').unwrap_or(name);
    n.split(" = ").next().unwrap_or(n)
}
