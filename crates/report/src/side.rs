//! What `diff`, `compare` and `history` read of a run ([`Side`]): its overview, its op
//! profile over its steps, its kernels, its host scopes and its memory peak. It is made
//! of the run held whole ([`Side::of`]) or read a host at a time ([`Side::by_host`]),
//! with the same numbers, so that two pods too large to hold are compared one host in
//! memory at a time.

use std::collections::HashMap;

use stepscope_analysis::fold::{self, Check, HostSource, Reader};
use stepscope_analysis::kernels::{self, KernelRow, KernelsPart};
use stepscope_analysis::ops::{self, GroupBy, OpRow, OpRowsPart};
use stepscope_analysis::overview::{self, Overview, OverviewPart};
use stepscope_analysis::scopes::{self, ScopeRow};
use stepscope_model::hlo_ops::instruction_found;
use stepscope_model::Profile;

/// A run as `diff`, `compare` and `history` read it.
pub struct Side {
    /// The overview, with its `top` ops.
    pub overview: Overview,
    /// How [`Side::in_steps`] is grouped.
    pub by: GroupBy,
    /// The op profile of the run's steps: the executions that started from its first
    /// timed step's start to its last one's end (every execution where it has no steps).
    pub in_steps: Vec<OpRow>,
    /// Op time (self) left out of [`Side::in_steps`]: before the first step or after
    /// the last. The op time is the same in every grouping: the profile by op's.
    pub outside_steps_ps: i64,
    /// By op, per row of [`Side::in_steps`]: its HLO signature (category, opcode, name
    /// stack and shape of its instruction, in its own program where it has one), where
    /// found; for matching renamed fusions and telling an op's programs apart.
    pub signatures: Vec<Option<String>>,
    /// The kernels, where asked for.
    pub kernels: Vec<KernelRow>,
    /// The user's host scopes.
    pub scopes: Vec<ScopeRow>,
    /// The highest allocator peak, where allocations were recorded.
    pub memory_peak_bytes: Option<u64>,
}

/// What is found of an op's instruction: how it was found (see [`instruction_found`])
/// and its opcode, name stack and shape.
type Found = (u8, String);

/// An op row's key: name, module, program, and the host of a program kept apart from
/// an earlier host's of its name and number (`jit_f(10) on host2`).
type RowKey = (String, String, Option<u64>, Option<String>);

impl Side {
    /// The side of `p`, held whole: its overview with `top` ops, its op profile over
    /// its steps grouped `by`, and its kernels where `with_kernels`.
    pub fn of(p: &Profile, by: GroupBy, top: usize, with_kernels: bool) -> Side {
        let (in_steps, outside_steps_ps) = ops_in_steps(p, by);
        let signatures = match by {
            GroupBy::Op => in_steps.iter().map(|r| signature(&r.category, found(p, &key(r))?.1)).collect(),
            _ => Vec::new(),
        };
        Side {
            overview: overview::overview(p, top),
            by,
            in_steps,
            outside_steps_ps,
            signatures,
            kernels: if with_kernels { kernels::kernels(p).kernels } else { Vec::new() },
            scopes: scopes::scopes(p).scopes,
            memory_peak_bytes: memory_peak(p),
        }
    }

    /// [`Side::of`] the run of `hosts` hosts read one at a time, `read` and `check` as
    /// the folds take them ([`fold::steps_by_host`]): the numbers of the run read whole.
    /// Its hosts are read twice: first for the overview, its steps (and so the steps'
    /// span) and its scopes, under the run's decisions; then for the op rows within
    /// that span, the instructions, the kernels and the memory peaks.
    pub fn by_host<E>(
        run: &str,
        hosts: usize,
        want: (GroupBy, usize, bool),
        read: &mut Reader<E>,
        check: &Check<E>,
    ) -> Result<Side, E> {
        let mut keep = |p: &Profile, _: &OverviewPart| {
            let kept = side_kept(p);
            check(p).map(|()| kept)
        };
        let (by, _, with_kernels) = want;
        let mut second = |source: &mut dyn HostSource<SideKept, E>, i: usize, span: Option<(i64, i64)>| {
            let Some(p) = source.read(i)? else { return Ok(None) };
            let rows = SideRows::of(&p, by, span, with_kernels);
            check(&p).map(|()| Some(rows))
        };
        Side::of_source(run, hosts, want, &mut fold::Local { read, extra: &mut keep, ops: true }, &mut second)
    }

    /// [`Side::by_host`] of hosts from `source` (first read, [`side_kept`] kept of
    /// each), each read a second time by `second` (given the run's steps' span), here or
    /// elsewhere: [`SideRows`].
    pub fn of_source<E>(
        run: &str,
        hosts: usize,
        (by, top, with_kernels): (GroupBy, usize, bool),
        source: &mut dyn HostSource<SideKept, E>,
        second: &mut SecondRead<'_, E>,
    ) -> Result<Side, E> {
        let (overview, by_op, kept, _) = fold::overview_ops_and_decisions_of(run, hosts, top, source)?;
        let steps_span = steps_span(&kept);
        let (mut within, mut all_kernels) = (OpRowsPart::new(by), KernelsPart::default());
        let (mut instructions, mut memory_peak_bytes) = (HashMap::<RowKey, Found>::new(), None);
        let mut scope_rows = Vec::new();
        for (i, (_, scopes)) in kept {
            scope_rows.extend(scopes);
            let Some(SideRows { rows, found, kernels, memory_peak_bytes: peak }) = second(source, i, steps_span)?
            else {
                continue;
            };
            let at = within.add(rows);
            for (f, at) in found.into_iter().zip(at) {
                let key = row_key(&within, at);
                // The first host's among those that found it the first way: none
                // can do better than one found in its own program.
                let known = instructions.get(&key).map(|k| k.0);
                let Some(f) = f.filter(|_| known != Some(0)) else { continue };
                if known.is_none_or(|how| f.0 < how) {
                    instructions.insert(key, f);
                }
            }
            if let Some(k) = kernels.filter(|_| with_kernels) {
                all_kernels.add(k);
            }
            memory_peak_bytes = memory_peak_bytes.max(peak);
        }
        let within = within.finish();
        let outside_steps_ps = match steps_span {
            Some(_) => by_op.op_time_ps.saturating_sub(within.op_time_ps),
            None => 0,
        };
        let signatures = match by {
            GroupBy::Op => {
                (within.ops.iter()).map(|r| signature(&r.category, instructions.get(&key(r))?.1.clone())).collect()
            }
            _ => Vec::new(),
        };
        Ok(Side {
            overview,
            by,
            in_steps: within.ops,
            outside_steps_ps,
            signatures,
            kernels: if with_kernels { kernels::assemble(all_kernels).kernels } else { Vec::new() },
            scopes: scope_rows,
            memory_peak_bytes,
        })
    }
}

/// What [`Side::by_host`] first keeps of a host: its timed steps' span and its scopes.
pub type SideKept = (Option<(i64, i64)>, Vec<ScopeRow>);

/// [`SideKept`] of `p`, a host read alone, measured.
pub fn side_kept(p: &Profile) -> SideKept {
    (span(stepscope_analysis::steps::cached(p).timed()), scopes::scope_rows(p))
}

/// The run's steps' span: from its hosts' first step's start to their last one's end.
pub fn steps_span<T>(kept: &[(T, SideKept)]) -> Option<(i64, i64)> {
    kept.iter().filter_map(|(_, k)| k.0).reduce(|a, b| (a.0.min(b.0), a.1.max(b.1)))
}

/// Host `i` of a side's run read a second time, given the run's steps' span.
pub type SecondRead<'a, E> =
    dyn FnMut(&mut dyn HostSource<SideKept, E>, usize, Option<(i64, i64)>) -> Result<Option<SideRows>, E> + 'a;

/// What a side's second read keeps of a host: its op rows within the run's steps'
/// span, the instruction found of each (by op), its kernels and its memory peak.
pub struct SideRows {
    rows: OpRowsPart,
    found: Vec<Option<Found>>,
    kernels: Option<KernelsPart>,
    memory_peak_bytes: Option<u64>,
}
stepscope_model::wire_struct!(SideRows { rows, found, kernels, memory_peak_bytes });

impl SideRows {
    /// Of `p` (a host read alone), its rows grouped `by` within `span`, its kernels
    /// where `with_kernels`.
    pub fn of(p: &Profile, by: GroupBy, span: Option<(i64, i64)>, with_kernels: bool) -> SideRows {
        let rows = OpRowsPart::grouped_within(p, by, 0, span);
        // By op, each row's instruction, found by its key as on the host (its HLO).
        let found = match by {
            GroupBy::Op => (0..rows.len()).map(|at| found(p, &row_key(&rows, at))).collect(),
            _ => Vec::new(),
        };
        let kernels = with_kernels.then(|| KernelsPart::of(p));
        SideRows { rows, found, kernels, memory_peak_bytes: memory_peak(p) }
    }
}

/// The op profile of `p`'s steps (grouped `by`): the executions that started from its
/// first timed step's start to its last one's end, and the op time (self) left out;
/// every execution where it has no steps.
fn ops_in_steps(p: &Profile, by: GroupBy) -> (Vec<OpRow>, i64) {
    match span(stepscope_analysis::steps::cached(p).timed()) {
        Some(span) => {
            let within = ops::ops_within(p, by, 0, span);
            let all_ps = ops::ops(p, GroupBy::Op, 0).op_time_ps;
            (within.ops, all_ps.saturating_sub(within.op_time_ps))
        }
        None => (ops::ops(p, by, 0).ops, 0),
    }
}

/// From the first step's start to the last one's end, where there are steps.
fn span<'s>(steps: impl Iterator<Item = &'s stepscope_model::steps::Step>) -> Option<(i64, i64)> {
    steps.fold(None, |span: Option<(i64, i64)>, s| {
        let (from, to) = (s.start_ps, s.start_ps.saturating_add(s.duration_ps));
        Some(span.map_or((from, to), |(a, b)| (a.min(from), b.max(to))))
    })
}

fn key(r: &OpRow) -> RowKey {
    (r.name.clone(), r.module.clone(), r.program_id, r.program_host.clone())
}

/// Row `at` of `part`'s key, as its finished row's ([`key`]).
fn row_key(part: &OpRowsPart, at: usize) -> RowKey {
    let (module, name, _) = part.key(at);
    let (program, apart) = part.shown_program(at);
    (name.to_string(), module.to_string(), program, apart.map(str::to_string))
}

/// The instruction of op row `key` in `p`'s HLO (a program kept apart: its host's),
/// and how it was found; none for a row of no module.
fn found(p: &Profile, (name, module, program, apart): &RowKey) -> Option<Found> {
    if module.is_empty() {
        return None;
    }
    let mut hlo = p.hlo_modules();
    if let Some(host) = apart {
        let h = p.hosts.iter().position(|s| s.host == *host)?;
        hlo = &hlo[h..=h];
    }
    let (how, _, i) = instruction_found(hlo, name, module, *program)?;
    Some((how, format!("{}|{}|{}", i.opcode, i.op_name, i.shape)))
}

/// An op's signature: its category and what its instruction says.
fn signature(category: &str, instruction: String) -> Option<String> {
    Some(format!("{category}|{instruction}"))
}

/// The highest allocator peak of `p`, where it recorded allocations.
fn memory_peak(p: &Profile) -> Option<u64> {
    stepscope_analysis::memory::memory(p, None, 0).allocators.iter().map(|a| a.peak_in_use_bytes).max()
}
