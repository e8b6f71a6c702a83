//! What `diff`, `compare` and `history` read of a run ([`Side`]): its overview, its op
//! profile over its steps, its kernels, its host scopes and its memory peak. It is made
//! of the run held whole ([`Side::of`]) or read a host at a time ([`Side::by_host`]),
//! with the same numbers, so that two pods too large to hold are compared one host in
//! memory at a time.

use std::collections::HashMap;

use stepscope_analysis::fold::{self, Check, Reader};
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
        (by, top, with_kernels): (GroupBy, usize, bool),
        read: &mut Reader<E>,
        check: &Check<E>,
    ) -> Result<Side, E> {
        let mut keep = |p: &Profile, _: &OverviewPart| {
            let steps = stepscope_analysis::steps::cached(p);
            let kept = (span(steps.timed()), scopes::scope_rows(p));
            check(p).map(|()| kept)
        };
        let (overview, by_op, kept) = fold::overview_and_ops_by_host(run, hosts, top, read, &mut keep)?;
        let steps_span = kept.iter().filter_map(|(_, k)| k.0).reduce(|a, b| (a.0.min(b.0), a.1.max(b.1)));
        let (mut within, mut all_kernels) = (OpRowsPart::new(by), KernelsPart::default());
        let (mut instructions, mut memory_peak_bytes) = (HashMap::<RowKey, Found>::new(), None);
        let mut scope_rows = Vec::new();
        for (i, (_, scopes)) in kept {
            scope_rows.extend(scopes);
            let Some(p) = read(i, true)? else { continue };
            let rows = OpRowsPart::grouped_within(&p, by, 0, steps_span);
            // By op, each row's key as on the host (for its HLO) and as the run shows it.
            let by_op = by == GroupBy::Op;
            let mine: Vec<RowKey> = (0..rows.len()).filter(|_| by_op).map(|at| row_key(&rows, at)).collect();
            let at = within.add(rows);
            if by_op {
                for (mine, at) in mine.iter().zip(at) {
                    let key = row_key(&within, at);
                    // The first host's among those that found it the first way: none
                    // can do better than one found in its own program.
                    let known = instructions.get(&key).map(|k| k.0);
                    if known == Some(0) {
                        continue;
                    }
                    let Some(f) = found(&p, mine) else { continue };
                    if known.is_none_or(|how| f.0 < how) {
                        instructions.insert(key, f);
                    }
                }
            }
            if with_kernels {
                all_kernels.add(KernelsPart::of(&p));
            }
            memory_peak_bytes = memory_peak_bytes.max(memory_peak(&p));
            check(&p)?;
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
