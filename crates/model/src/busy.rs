//! Stage 2's pass over each device's ops: when it was busy, when it was inside a
//! program, what kind each op is, and what lies between its ops and their launches.

use rayon::prelude::*;
use stepscope_xspace::hlo::HloModules;
use stepscope_xspace::Line;

use crate::device::{Device, OpSource};
use crate::hlo_ops::instruction;
use crate::kinds::{one_kind, op_kind, Part};
use crate::records::{FastMap, OpRec, RecStats};
use crate::stats::Intervals;
use crate::steps::{widen, Launches};

/// One device's ops by kind, from stage 2's pass over its ops.
pub struct OpKinds {
    /// The kind of each op record (as [`crate::records::DeviceOps::recs`]): one of [`Part::OPS`].
    pub of_op: Vec<Part>,
    /// Per op part ([`Part::OPS`]): the time ops of that kind ran (whole capture);
    /// empty for compute when every op is compute (its time is then the busy time).
    pub spans: Vec<Intervals>,
}

impl OpKinds {
    /// The time compute ran, given the device's busy time.
    pub fn compute<'a>(&'a self, busy: &'a Intervals) -> &'a Intervals {
        match self.spans[1..].iter().all(|s| s.spans().is_empty()) {
            true => busy,
            false => &self.spans[Part::Compute.index()],
        }
    }

    /// True when the device ran a compute op or a collective: it took part in the
    /// run's work (one that only copied, or waited on copies, did not).
    pub fn ran_work(&self, busy: &Intervals) -> bool {
        !self.compute(busy).spans().is_empty() || !self.spans[Part::Collective.index()].spans().is_empty()
    }
}

/// What one pass over a device's ops measures (stage 2, [`measure_ops`]).
pub struct OpTime {
    /// The union of its op intervals.
    pub busy: Intervals,
    /// Busy, or inside a program (XLA:CPU: first op to last op of a `run_id`).
    pub active: Intervals,
    pub kinds: OpKinds,
}

/// Stage 2's pass over device `d`'s ops: its busy and active time, and each op's
/// kind, read once per op. Ops come in line order, then mostly in time order: each
/// piece of them is merged on its own (back-to-back ones as they come), in parallel,
/// and the pieces are joined after. `hlo` is the profile's HLO modules (each host's):
/// an XLA:CPU op is what its instruction's opcode says.
pub fn measure_ops(d: &Device, hlo: &[HloModules]) -> OpTime {
    let ops = d.cached_ops();
    let mut of_op = vec![Part::Compute; ops.recs.len()];
    let pieces: Vec<Piece> = (of_op.par_chunks_mut(OP_PIECE).enumerate())
        .map(|(k, kinds)| measure_piece(d, hlo, k * OP_PIECE, kinds))
        .collect();
    let mixed = pieces.iter().any(|p| p.other.iter().any(|s| !s.is_empty()));
    let mut runs: FastMap<i64, (i64, i64)> = FastMap::default();
    // Each kind of span apart, so each union takes its lists and frees them as it goes.
    let (mut busy, mut compute, mut loose) = (Vec::new(), Vec::new(), Vec::new());
    let mut others: [Vec<Spans>; Part::OPS.len() - 1] = Default::default();
    for p in pieces {
        for (&run, &span) in &p.runs {
            widen(&mut runs, run, span);
        }
        busy.push(p.busy);
        compute.push(p.compute);
        loose.push(p.loose);
        for (list, s) in others.iter_mut().zip(p.other) {
            list.push(s);
        }
    }
    let ((busy, compute), (others, loose)) = rayon::join(
        || {
            rayon::join(
                || union_owned(busy),
                // Compute's own time, where other kinds ran too (XLA:CPU ops, nearly
                // always all compute, are read again for it).
                || match (mixed, d.source) {
                    (false, _) => Intervals::default(),
                    (true, OpSource::HostOps) => compute_spans(d, &of_op),
                    (true, _) => union_owned(compute),
                },
            )
        },
        || (others.into_iter().map(union_owned).collect::<Vec<_>>(), union_owned(loose)),
    );
    // An op of a program lies within its program's span: active is the programs' spans
    // and the ops outside any.
    let active = match runs.is_empty() {
        true => busy.clone(),
        false => Intervals::union(&[&Intervals::new(runs.into_values().collect()), &loose]),
    };
    let spans = std::iter::once(compute).chain(others).collect();
    OpTime { busy, active, kinds: OpKinds { of_op, spans } }
}

/// What lies between a device's ops and their host launches.
pub struct Launched {
    /// The time some op had been launched (its launch call had returned) and had not
    /// started: the union of the spans from each launch call's end to its op's start.
    pub queued: Intervals,
    /// The time the host was inside the launch call of an op that had not started.
    pub launching: Intervals,
}

/// The spans between device `d`'s ops and their launches (each linked to its host's
/// launch in `launches` by `correlation_id`). `None` where nothing links them.
pub fn launched(d: &Device, launches: &Launches) -> Option<Launched> {
    let ops = d.cached_ops();
    if !ops.has_correlation_ids() || launches.is_empty() {
        return None;
    }
    // Per piece, in op order: the ops of a line, and those of one graph launch, come
    // together, so their spans mostly merge as they come.
    let waits: Vec<(Spans, Spans)> = crate::records::pieces(ops.recs.len(), OP_PIECE)
        .collect::<Vec<_>>()
        .into_par_iter()
        .map(|range| {
            let (mut queued, mut launching) = (Spans::default(), Spans::default());
            for r in &ops.recs[range] {
                let Some((call, returned)) = ops.correlation_id(r).and_then(|c| launches.get(c)) else { continue };
                let start = d.plane.lines[r.line as usize].start_ps(r.index as usize);
                // Queued from the moment the launch call returned (HTA's launch delay
                // starts there too): before that, the host was still launching.
                if returned < start {
                    queued.push(returned, start);
                }
                if call < start {
                    launching.push(call, returned.min(start));
                }
            }
            (queued, launching)
        })
        .collect();
    Some(Launched { queued: union_of(waits.iter().map(|w| &w.0)), launching: union_of(waits.iter().map(|w| &w.1)) })
}

/// Op records read as one piece by [`measure_ops`] (debug builds cut the fixtures'
/// too, so the joining of pieces is checked by every test).
const OP_PIECE: usize = if cfg!(debug_assertions) { 1 << 8 } else { 1 << 16 };

/// One piece of [`measure_ops`].
struct Piece {
    /// Its ops' spans.
    busy: Spans,
    /// The spans of its ops without a `run_id`.
    loose: Spans,
    /// Per `run_id`: first start to last end.
    runs: FastMap<i64, (i64, i64)>,
    /// The spans of its compute ops (devices other than XLA:CPU).
    compute: Spans,
    /// The spans of the ops of each op part after compute.
    other: [Spans; Part::OPS.len() - 1],
}

/// Measures the ops from `first` on, one for each of `kinds`, which it fills.
fn measure_piece(d: &Device, hlo: &[HloModules], first: usize, kinds: &mut [Part]) -> Piece {
    let ops = d.cached_ops();
    let mut p = Piece {
        busy: Spans { spans: Vec::with_capacity(kinds.len()), cuts: Vec::new() },
        loose: Spans::default(),
        runs: FastMap::default(),
        compute: Spans::default(),
        other: Default::default(),
    };
    let track_compute = d.source != OpSource::HostOps;
    let mut classify = Classifier::new(d, hlo);
    // The run being read (a run's ops mostly come together): (run, first start, last end).
    let mut current: Option<(i64, i64, i64)> = None;
    for ((i, r), kind) in (first..).zip(&ops.recs[first..first + kinds.len()]).zip(kinds) {
        let line = &d.plane.lines[r.line as usize];
        let start = line.start_ps(r.index as usize);
        let end = start.saturating_add(ops.length_on(line, i));
        p.busy.push(start, end);
        *kind = classify.kind(r, line);
        match *kind {
            Part::Compute if track_compute => p.compute.push(start, end),
            Part::Compute => {}
            k => p.other[k.index() - 1].push(start, end),
        }
        match (ops.run_id(r), &mut current) {
            (Some(run), Some((cr, lo, hi))) if *cr == run => {
                *lo = (*lo).min(start);
                *hi = (*hi).max(end);
            }
            (Some(run), _) => {
                if let Some((done, lo, hi)) = current.replace((run, start, end)) {
                    widen(&mut p.runs, done, (lo, hi));
                }
            }
            (None, _) => p.loose.push(start, end),
        }
    }
    if let Some((done, lo, hi)) = current {
        widen(&mut p.runs, done, (lo, hi));
    }
    p
}

/// Spans of ops in op order, back-to-back ones merged as they come (so the lists stay
/// short), and where they go back in time (a new line) noted: runs sorted by start,
/// for [`Intervals::from_sorted_runs`].
#[derive(Default)]
struct Spans {
    spans: Vec<(i64, i64)>,
    /// Where each run after the first starts.
    cuts: Vec<usize>,
}

impl Spans {
    fn push(&mut self, start: i64, end: i64) {
        match self.spans.last_mut() {
            Some(last) if (last.0..=last.1).contains(&start) => last.1 = last.1.max(end),
            Some(last) if start < last.0 => {
                self.cuts.push(self.spans.len());
                self.spans.push((start, end));
            }
            _ => self.spans.push((start, end)),
        }
    }

    fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    /// The runs, each sorted by start.
    fn runs(&self) -> impl Iterator<Item = &[(i64, i64)]> {
        let mut from = 0;
        self.cuts.iter().copied().chain([self.spans.len()]).map(move |to| {
            let run = &self.spans[from..to];
            from = to;
            run
        })
    }
}

/// The union of lists of spans, taken: each freed once merged
/// ([`Intervals::from_owned_sorted_runs`]).
fn union_owned(lists: Vec<Spans>) -> Intervals {
    let mut runs = Vec::with_capacity(lists.len());
    for Spans { mut spans, cuts } in lists {
        let tails: Vec<Vec<(i64, i64)>> = cuts.iter().rev().map(|&cut| spans.split_off(cut)).collect();
        runs.push(spans);
        runs.extend(tails.into_iter().rev());
    }
    Intervals::from_owned_sorted_runs(runs)
}

/// The union of lists of spans.
fn union_of<'a>(lists: impl Iterator<Item = &'a Spans>) -> Intervals {
    let runs: Vec<&[(i64, i64)]> = lists.flat_map(Spans::runs).collect();
    Intervals::from_sorted_runs(&runs)
}

/// The time device `d`'s compute ops ran, from each op's kind.
fn compute_spans(d: &Device, of_op: &[Part]) -> Intervals {
    let ops = d.cached_ops();
    let pieces: Vec<Spans> = crate::records::pieces(ops.recs.len(), OP_PIECE)
        .collect::<Vec<_>>()
        .into_par_iter()
        .map(|range| {
            let mut spans = Spans::default();
            for i in range.filter(|&i| of_op[i] == Part::Compute) {
                let (_, start, end, _) = ops.span(d.plane, i);
                spans.push(start, end);
            }
            spans
        })
        .collect();
    union_of(pieces.iter())
}

/// The kind of each op of a device ([`op_kind`] of its name, its category and its
/// line, or of its kernel's own name), remembered per what decides it.
struct Classifier<'d> {
    d: &'d Device<'d>,
    look: stepscope_xspace::StatLookup<1>,
    /// The profile's HLO modules.
    hlo: &'d [HloModules],
    /// XLA:CPU ops (host events on the host's threads): the op's instruction says what
    /// it is (a thread's name says nothing of the work on it, and the event is the op):
    /// its HLO category where the profile holds its module (`psum_invariant.7` is an
    /// all-reduce), else its name. Per name id: each (module id, program) met with it
    /// and the kind (a name nearly always belongs to one module).
    by_op: Vec<Vec<(u32, u32, Part)>>,
    /// An op whose event holds no category of its own takes its metadata's, or its
    /// instruction's, so its [`Place`], line and metadata decide it.
    by_meta: FastMap<(Place, u32, u32), Part>,
    /// Per name id, the last such key and kind (ops come line by line, so nearly always
    /// the key of the name's next op too).
    last: Vec<Option<(Place, u32, u32, Part)>>,
    /// An op with a category of its own: remembered by its text.
    by_text: FastMap<(Place, usize, usize, u32, u32), Part>,
}

/// An op's name, module and program ids: what its instruction is.
type Place = (u32, u32, u32);

impl<'d> Classifier<'d> {
    fn new(d: &'d Device<'d>, hlo: &'d [HloModules]) -> Classifier<'d> {
        let names = &d.cached_ops().names;
        let by_op = match d.source {
            OpSource::HostOps => vec![Vec::new(); names.len()],
            _ => Vec::new(),
        };
        Classifier {
            d,
            look: d.plane.stat_lookup([d.keys.hlo_category]),
            hlo,
            by_op,
            by_meta: FastMap::default(),
            last: vec![None; if d.source == OpSource::HostOps { 0 } else { names.len() }],
            by_text: FastMap::default(),
        }
    }

    fn kind(&mut self, r: &OpRec, line: &Line) -> Part {
        let (d, ops) = (self.d, self.d.cached_ops());
        let hlo = self.hlo;
        // What the op's HLO instruction is (its opcode's category), where the profile
        // holds its module.
        let hlo_category = || {
            let (name, module) = (&*ops.names[r.name as usize], &*ops.names[r.module as usize]);
            let program = match ops.rec_stats(r) {
                RecStats::Program(p) => p,
                RecStats::OnEvent => None,
            };
            instruction(hlo, name, module, program).map(|(m, i)| m.category(i)).unwrap_or_default()
        };
        if let Some(seen) = self.by_op.get_mut(r.name as usize) {
            if let Some(&(_, _, k)) = seen.iter().find(|(m, p, _)| (*m, *p) == (r.module, r.program)) {
                return k;
            }
            let k = op_kind(&ops.names[r.name as usize], &hlo_category(), "");
            seen.push((r.module, r.program, k));
            return k;
        }
        let meta = line.meta(r.index as usize);
        // The event's own `hlo_category` where it has one (TPU), else its
        // instruction's: a collective is one by its opcode whatever its name says.
        let kind_of = |category: &str| {
            let from_hlo;
            let category = if category.is_empty() {
                from_hlo = hlo_category();
                &from_hlo
            } else {
                category
            };
            match op_kind(&ops.names[r.name as usize], category, one_kind(&line.name)) {
                // A kernel credited to its op keeps what its own name says it is.
                Part::Compute => op_kind(d.plane.event_name(meta), "", ""),
                k => k,
            }
        };
        if let Some([Some(own)]) = d.plane.own_stats_of(&self.look, line, r.index as usize) {
            let category = d.plane.stat_str(&own).unwrap_or("");
            let key = ((r.name, r.module, r.program), category.as_ptr() as usize, category.len(), r.line, meta);
            return *self.by_text.entry(key).or_insert_with(|| kind_of(category));
        }
        let place = (r.name, r.module, r.program);
        match self.last[r.name as usize] {
            Some((p, l, m, k)) if (p, l, m) == (place, r.line, meta) => k,
            _ => {
                let look = &self.look;
                let k = *self.by_meta.entry((place, r.line, meta)).or_insert_with(|| {
                    let [category] = d.plane.stats_of(look, line, r.index as usize);
                    kind_of(category.and_then(|s| d.plane.stat_str(&s)).unwrap_or(""))
                });
                self.last[r.name as usize] = Some((place, r.line, meta, k));
                k
            }
        }
    }
}
