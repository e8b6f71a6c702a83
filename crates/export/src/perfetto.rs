//! Perfetto protobuf trace writer (`.pftrace`), streamed packet by packet.
//!
//! Layout of the trace:
//! - one track per host, a child track per plane (device, host CPU, …) and a child
//!   track per line of that plane, in profile order (explicit child ordering);
//! - every event of a line is a slice (`TYPE_SLICE_BEGIN`/`TYPE_SLICE_END`) on the
//!   line's track, or an instant (`TYPE_INSTANT`) when it has no duration. Slices on
//!   one track must nest, so events that overlap without nesting go on extra child
//!   tracks of the line, named `LINE (2)`, `LINE (3)`, …;
//! - the event's stats are debug annotations (args); event and annotation names are
//!   interned per packet sequence (one sequence per line);
//! - counters: trace-JSON counter lines, and the allocator state that
//!   `MemoryAllocation`/`MemoryDeallocation` events record (`bytes_allocated`,
//!   `bytes_reserved`, `bytes_available`, `peak_bytes_in_use`), are counter tracks of
//!   the plane, one per allocator (`allocator_name`, else `device <index_on_host>`)
//!   and stat, e.g. `device 0 bytes_allocated`.
//!
//! Times are nanoseconds (Perfetto's unit), rounded from picoseconds to the nearest
//! ns; when some event starts before 0 all times are shifted so the first is 0.
//!
//! Field numbers, checked against the public Perfetto protos
//! (google/perfetto `protos/perfetto/trace/`): `trace.proto` Trace.packet = 1;
//! `trace_packet.proto` TracePacket.timestamp = 8, trusted_packet_sequence_id = 10,
//! track_event = 11, interned_data = 12, sequence_flags = 13
//! (SEQ_INCREMENTAL_STATE_CLEARED = 1, SEQ_NEEDS_INCREMENTAL_STATE = 2),
//! track_descriptor = 60; `track_event/track_descriptor.proto` TrackDescriptor.uuid = 1,
//! name = 2, parent_uuid = 5, counter = 8 (child_ordering = 11 with EXPLICIT = 3 and
//! sibling_order_rank = 12 are in newer versions of that file; cross-checked in several
//! independent encoders); `counter_descriptor.proto` CounterDescriptor.unit = 3
//! (UNIT_SIZE_BYTES = 3); `track_event.proto` TrackEvent.type = 9
//! (SLICE_BEGIN = 1, SLICE_END = 2, INSTANT = 3, COUNTER = 4), track_uuid = 11,
//! name_iid = 10, debug_annotations = 4, counter_value = 30, double_counter_value = 44,
//! EventName{iid = 1, name = 2}; `interned_data.proto` InternedData.event_names = 2,
//! debug_annotation_names = 3; `debug_annotation.proto` DebugAnnotation.name_iid = 1,
//! uint_value = 3, int_value = 4, double_value = 5, string_value = 6,
//! DebugAnnotationName{iid = 1, name = 2}.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::io::{self, Write};

use stepscope_xspace::{Line, Plane, Space};

use crate::proto::Enc;
use crate::{for_each_arg, ps_to_ns, ArgValue};

// Trace / TracePacket
const TRACE_PACKET: u32 = 1;
const PKT_TIMESTAMP: u32 = 8;
const PKT_SEQUENCE_ID: u32 = 10;
const PKT_TRACK_EVENT: u32 = 11;
const PKT_INTERNED_DATA: u32 = 12;
const PKT_SEQUENCE_FLAGS: u32 = 13;
const PKT_TRACK_DESCRIPTOR: u32 = 60;
const SEQ_INCREMENTAL_STATE_CLEARED: u64 = 1;
const SEQ_NEEDS_INCREMENTAL_STATE: u64 = 2;
// TrackDescriptor / CounterDescriptor
const TD_UUID: u32 = 1;
const TD_NAME: u32 = 2;
const TD_PARENT_UUID: u32 = 5;
const TD_COUNTER: u32 = 8;
const TD_CHILD_ORDERING: u32 = 11;
const TD_SIBLING_ORDER_RANK: u32 = 12;
const CHILD_ORDERING_EXPLICIT: u64 = 3;
const CD_UNIT: u32 = 3;
const UNIT_UNSPECIFIED: u64 = 0;
const UNIT_SIZE_BYTES: u64 = 3;
// TrackEvent
const TE_DEBUG_ANNOTATIONS: u32 = 4;
const TE_TYPE: u32 = 9;
const TE_NAME_IID: u32 = 10;
const TE_TRACK_UUID: u32 = 11;
const TE_COUNTER_VALUE: u32 = 30;
const TE_DOUBLE_COUNTER_VALUE: u32 = 44;
const TYPE_SLICE_BEGIN: u64 = 1;
const TYPE_SLICE_END: u64 = 2;
const TYPE_INSTANT: u64 = 3;
const TYPE_COUNTER: u64 = 4;
// InternedData and interned entries
const ID_EVENT_NAMES: u32 = 2;
const ID_DEBUG_ANNOTATION_NAMES: u32 = 3;
const INTERNED_IID: u32 = 1;
const INTERNED_NAME: u32 = 2;
// DebugAnnotation
const DA_NAME_IID: u32 = 1;
const DA_UINT: u32 = 3;
const DA_INT: u32 = 4;
const DA_DOUBLE: u32 = 5;
const DA_STRING: u32 = 6;

/// Events whose `bytes_*` stats become per-allocator memory counter tracks.
const MEMORY_EVENTS: [&str; 2] = ["MemoryAllocation", "MemoryDeallocation"];
/// The memory stats drawn as counters (allocator state after the event).
const MEMORY_COUNTERS: [&str; 4] = ["bytes_allocated", "bytes_reserved", "bytes_available", "peak_bytes_in_use"];

/// What a Perfetto export wrote.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct PerfettoSummary {
    pub slices: u64,
    pub instants: u64,
    pub counter_samples: u64,
    pub tracks: u64,
    /// Tracks added because events of a line overlap without nesting.
    pub overlap_tracks: u64,
    pub packets: u64,
}

/// Writes `hosts` as a Perfetto trace to `out` (wrap it in a `BufWriter`).
pub fn write_perfetto<W: Write>(hosts: &[Space], out: W) -> io::Result<PerfettoSummary> {
    let shift_ns = hosts
        .iter()
        .flat_map(|s| &s.planes)
        .flat_map(|p| &p.lines)
        .filter_map(|l| l.starts().iter().min())
        .map(ps_to_ns)
        .min()
        .map_or(0, |m| if m < 0 { -m } else { 0 });
    let mut w =
        Writer { out, enc: Enc::default(), next_uuid: 1, next_seq: 2, shift_ns, sum: PerfettoSummary::default() };
    for (hi, space) in hosts.iter().enumerate() {
        let planes: Vec<&Plane> = space.planes.iter().filter(|p| p.lines.iter().any(|l| !l.is_empty())).collect();
        if planes.is_empty() {
            continue;
        }
        let host_uuid = w.track(&space.host, None, hi as i64, true, None)?;
        for (pi, plane) in planes.into_iter().enumerate() {
            let plane_uuid = w.track(&plane.name, Some(host_uuid), pi as i64, true, None)?;
            let mut memory: HashMap<(String, u32), u64> = HashMap::new();
            for (li, line) in plane.lines.iter().enumerate().filter(|(_, l)| !l.is_empty()) {
                if line.is_counter {
                    w.counter_line(plane, line, plane_uuid, li as i64)?;
                } else {
                    let line_uuid = w.track(&line.name, Some(plane_uuid), li as i64, true, None)?;
                    w.slice_line(plane, line, line_uuid, plane_uuid, &mut memory)?;
                }
            }
        }
    }
    w.out.flush()?;
    Ok(w.sum)
}

struct Writer<W: Write> {
    out: W,
    enc: Enc,
    next_uuid: u64,
    next_seq: u64,
    shift_ns: i64,
    sum: PerfettoSummary,
}

/// Per-sequence interning state: which names this sequence has emitted.
struct Interned {
    seq: u64,
    first: bool,
    names: Vec<bool>,
    args: Vec<bool>,
}

impl<W: Write> Writer<W> {
    fn ts(&self, ps: i64) -> u64 {
        ps_to_ns(ps).saturating_add(self.shift_ns).max(0) as u64
    }

    fn flush_packet(&mut self) -> io::Result<()> {
        self.enc.end()?;
        self.out.write_all(&self.enc.buf)?;
        self.sum.packets += 1;
        Ok(())
    }

    /// Writes a track descriptor and returns its uuid. `counter_unit` makes a counter track.
    fn track(
        &mut self,
        name: &str,
        parent: Option<u64>,
        rank: i64,
        explicit_children: bool,
        counter_unit: Option<u64>,
    ) -> io::Result<u64> {
        let uuid = self.next_uuid;
        self.next_uuid += 1;
        self.enc.clear();
        self.enc.begin(TRACE_PACKET);
        self.enc.uint(PKT_SEQUENCE_ID, 1);
        self.enc.begin(PKT_TRACK_DESCRIPTOR);
        self.enc.uint(TD_UUID, uuid);
        self.enc.str(TD_NAME, name);
        if let Some(p) = parent {
            self.enc.uint(TD_PARENT_UUID, p);
        }
        if let Some(unit) = counter_unit {
            self.enc.begin(TD_COUNTER);
            if unit != UNIT_UNSPECIFIED {
                self.enc.uint(CD_UNIT, unit);
            }
            self.enc.end()?;
        }
        if explicit_children {
            self.enc.uint(TD_CHILD_ORDERING, CHILD_ORDERING_EXPLICIT);
        }
        self.enc.int(TD_SIBLING_ORDER_RANK, rank);
        self.enc.end()?;
        self.flush_packet()?;
        self.sum.tracks += 1;
        Ok(uuid)
    }

    fn new_sequence(&mut self, plane: &Plane) -> Interned {
        let seq = self.next_seq;
        self.next_seq += 1;
        Interned {
            seq,
            first: true,
            names: vec![false; plane.event_meta.len()],
            args: vec![false; plane.stat_meta.len()],
        }
    }

    /// Starts an event packet on sequence `st` at `ts_ns`.
    fn event_packet(&mut self, st: &mut Interned, ts_ns: u64) {
        self.enc.clear();
        self.enc.begin(TRACE_PACKET);
        self.enc.uint(PKT_TIMESTAMP, ts_ns);
        self.enc.uint(PKT_SEQUENCE_ID, st.seq);
        let flags = if st.first { SEQ_INCREMENTAL_STATE_CLEARED } else { SEQ_NEEDS_INCREMENTAL_STATE };
        self.enc.uint(PKT_SEQUENCE_FLAGS, flags);
        st.first = false;
    }

    /// Writes the interned names event `i` needs that the sequence has not emitted yet.
    fn intern(&mut self, st: &mut Interned, plane: &Plane, line: &Line, i: usize) -> io::Result<()> {
        let meta = line.meta(i) as usize;
        let new_name = st.names.get(meta).is_some_and(|done| !done);
        let mut new_args: Vec<u32> = Vec::new();
        for_each_arg(plane, line, i, |m, _, _| {
            if st.args.get(m as usize).is_some_and(|done| !done) && !new_args.contains(&m) {
                new_args.push(m);
            }
        });
        if !new_name && new_args.is_empty() {
            return Ok(());
        }
        self.enc.begin(PKT_INTERNED_DATA);
        if new_name {
            st.names[meta] = true;
            self.enc.begin(ID_EVENT_NAMES);
            self.enc.uint(INTERNED_IID, meta as u64 + 1);
            self.enc.str(INTERNED_NAME, plane.event_name(meta as u32));
            self.enc.end()?;
        }
        for m in new_args {
            st.args[m as usize] = true;
            self.enc.begin(ID_DEBUG_ANNOTATION_NAMES);
            self.enc.uint(INTERNED_IID, u64::from(m) + 1);
            self.enc.str(INTERNED_NAME, plane.stat_name(m));
            self.enc.end()?;
        }
        self.enc.end()
    }

    /// A begin or instant event with its name and args.
    fn begin_event(
        &mut self,
        st: &mut Interned,
        plane: &Plane,
        line: &Line,
        i: usize,
        kind: u64,
        track: u64,
    ) -> io::Result<()> {
        let ts = self.ts(line.start_ps(i));
        self.event_packet(st, ts);
        self.intern(st, plane, line, i)?;
        self.enc.begin(PKT_TRACK_EVENT);
        self.enc.uint(TE_TYPE, kind);
        self.enc.uint(TE_TRACK_UUID, track);
        if (line.meta(i) as usize) < plane.event_meta.len() {
            self.enc.uint(TE_NAME_IID, u64::from(line.meta(i)) + 1);
        }
        let enc = &mut self.enc;
        let mut err = Ok(());
        for_each_arg(plane, line, i, |m, _, v| {
            if err.is_err() {
                return;
            }
            enc.begin(TE_DEBUG_ANNOTATIONS);
            enc.uint(DA_NAME_IID, u64::from(m) + 1);
            match v {
                ArgValue::F64(x) => enc.double(DA_DOUBLE, x),
                ArgValue::U64(x) => enc.uint(DA_UINT, x),
                ArgValue::I64(x) => enc.int(DA_INT, x),
                ArgValue::Str(s) => enc.str(DA_STRING, s),
                ArgValue::Bytes(n) => enc.str(DA_STRING, &format!("<{n} bytes>")),
            }
            err = enc.end();
        });
        err?;
        self.enc.end()?;
        self.flush_packet()
    }

    fn end_event(&mut self, st: &mut Interned, ts_ns: u64, track: u64) -> io::Result<()> {
        self.event_packet(st, ts_ns);
        self.enc.begin(PKT_TRACK_EVENT);
        self.enc.uint(TE_TYPE, TYPE_SLICE_END);
        self.enc.uint(TE_TRACK_UUID, track);
        self.enc.end()?;
        self.flush_packet()
    }

    fn counter_event(&mut self, st: &mut Interned, ts_ns: u64, track: u64, v: ArgValue) -> io::Result<bool> {
        let value = match v {
            ArgValue::F64(x) => Err(x),
            ArgValue::U64(x) => Ok(i64::try_from(x).unwrap_or(i64::MAX)),
            ArgValue::I64(x) => Ok(x),
            ArgValue::Str(s) => match s.trim().parse::<f64>() {
                Ok(x) => Err(x),
                Err(_) => return Ok(false),
            },
            ArgValue::Bytes(_) => return Ok(false),
        };
        self.event_packet(st, ts_ns);
        self.enc.begin(PKT_TRACK_EVENT);
        self.enc.uint(TE_TYPE, TYPE_COUNTER);
        self.enc.uint(TE_TRACK_UUID, track);
        match value {
            Ok(x) => self.enc.int(TE_COUNTER_VALUE, x),
            Err(x) => self.enc.double(TE_DOUBLE_COUNTER_VALUE, x),
        }
        self.enc.end()?;
        self.flush_packet()?;
        self.sum.counter_samples += 1;
        Ok(true)
    }

    /// The events of one line as nested slices, on as many tracks as overlaps need.
    fn slice_line(
        &mut self,
        plane: &Plane,
        line: &Line,
        line_uuid: u64,
        plane_uuid: u64,
        memory: &mut HashMap<(String, u32), u64>,
    ) -> io::Result<()> {
        let mut st = self.new_sequence(plane);
        let span = |i: usize| {
            let s = ps_to_ns(line.start_ps(i));
            (s, ps_to_ns(line.end_ps(i)).max(s))
        };
        let mut order: Vec<u32> = (0..line.len() as u32).collect();
        order.sort_by_key(|&i| {
            let (s, e) = span(i as usize);
            (s, Reverse(e), i)
        });
        let memory_stats: Vec<(u32, &str)> =
            MEMORY_COUNTERS.iter().filter_map(|n| plane.stat_id(n).map(|id| (id, *n))).collect();
        let allocator = plane.stat_id("allocator_name");
        let device_index = plane.stat_id("index_on_host");
        let memory_metas: Vec<bool> =
            (0..plane.event_meta.len()).map(|m| MEMORY_EVENTS.contains(&plane.event_name(m as u32))).collect();

        // Open slices: per lane a stack of end times, and all ends in one heap
        // (time, then innermost first) so ends are written in time order.
        let mut lanes: Vec<(u64, Vec<i64>)> = vec![(line_uuid, Vec::new())];
        let mut ends: BinaryHeap<Reverse<(i64, Reverse<u64>, usize)>> = BinaryHeap::new();
        let mut pushed = 0u64;
        for &i in &order {
            let i = i as usize;
            let (s, e) = span(i);
            while let Some(&Reverse((end, _, lane))) = ends.peek() {
                if end > s {
                    break;
                }
                ends.pop();
                lanes[lane].1.pop();
                let track = lanes[lane].0;
                self.end_event(&mut st, self.ts_ns(end), track)?;
            }
            if line.duration_ps(i) <= 0 {
                self.begin_event(&mut st, plane, line, i, TYPE_INSTANT, line_uuid)?;
                self.sum.instants += 1;
            } else {
                let lane = match lanes.iter().position(|(_, stack)| stack.last().is_none_or(|&top| top >= e)) {
                    Some(k) => k,
                    None => {
                        let k = lanes.len();
                        let name = format!("{} ({})", line.name, k + 1);
                        let uuid = self.track(&name, Some(line_uuid), k as i64, false, None)?;
                        self.sum.overlap_tracks += 1;
                        lanes.push((uuid, Vec::new()));
                        k
                    }
                };
                lanes[lane].1.push(e);
                ends.push(Reverse((e, Reverse(pushed), lane)));
                pushed += 1;
                let track = lanes[lane].0;
                self.begin_event(&mut st, plane, line, i, TYPE_SLICE_BEGIN, track)?;
                self.sum.slices += 1;
            }
            if !memory_stats.is_empty() && memory_metas.get(line.meta(i) as usize).copied().unwrap_or(false) {
                let alloc = match allocator.and_then(|a| plane.event_stat(line, i, a)).and_then(|s| plane.stat_str(&s))
                {
                    Some(name) => name.to_string(),
                    None => match device_index.and_then(|d| plane.event_stat(line, i, d)) {
                        Some(d) => format!("device {}", plane.stat_display(&d)),
                        None => "memory".to_string(),
                    },
                };
                for &(id, stat_name) in &memory_stats {
                    let Some(v) = plane.event_stat(line, i, id) else { continue };
                    let key = (alloc.clone(), id);
                    let track = match memory.get(&key) {
                        Some(&t) => t,
                        None => {
                            let rank = 1_000_000 + memory.len() as i64;
                            let t = self.track(
                                &format!("{alloc} {stat_name}"),
                                Some(plane_uuid),
                                rank,
                                false,
                                Some(UNIT_SIZE_BYTES),
                            )?;
                            memory.insert(key, t);
                            t
                        }
                    };
                    self.counter_event(&mut st, self.ts(line.start_ps(i)), track, ArgValue::of(plane, &v))?;
                }
            }
        }
        while let Some(Reverse((end, _, lane))) = ends.pop() {
            let track = lanes[lane].0;
            self.end_event(&mut st, self.ts_ns(end), track)?;
        }
        Ok(())
    }

    fn ts_ns(&self, ns: i64) -> u64 {
        ns.saturating_add(self.shift_ns).max(0) as u64
    }

    /// A trace-JSON counter line: one counter track per numeric series (stat).
    fn counter_line(&mut self, plane: &Plane, line: &Line, plane_uuid: u64, rank: i64) -> io::Result<()> {
        let mut st = self.new_sequence(plane);
        let mut tracks: HashMap<u32, u64> = HashMap::new();
        let mut order: Vec<u32> = (0..line.len() as u32).collect();
        order.sort_by_key(|&i| (line.start_ps(i as usize), i));
        for &i in &order {
            let i = i as usize;
            let ts = self.ts(line.start_ps(i));
            for s in line.event_stats(i) {
                let v = ArgValue::of(plane, &s);
                if matches!(v, ArgValue::Bytes(_)) {
                    continue;
                }
                let track = match tracks.get(&s.meta()) {
                    Some(&t) => t,
                    None => {
                        let name = format!("{} {}", line.name, plane.stat_name(s.meta()));
                        let t = self.track(&name, Some(plane_uuid), rank, false, Some(UNIT_UNSPECIFIED))?;
                        tracks.insert(s.meta(), t);
                        t
                    }
                };
                self.counter_event(&mut st, ts, track, v)?;
            }
        }
        Ok(())
    }
}
