//! The findings of a run read a host at a time ([`stepscope_analysis::fold`]): each
//! host, measured under the run's decisions, is reduced to what the rules read of it
//! ([`HostPart`]) before it is dropped; the parts make the analyses and the facts the
//! rules read of the run read whole, and the same rules judge them.

use std::collections::HashSet;

use stepscope_analysis::collectives::{self, CollectivesPart};
use stepscope_analysis::compile::{self, CompileEvent};
use stepscope_analysis::devices::{self, DevicesPart};
use stepscope_analysis::fold::{self, Check, Reader};
use stepscope_analysis::kernels::{self, OpKernel, OpKernels};
use stepscope_analysis::memory::{self, Allocator};
use stepscope_analysis::ops::{self, GroupBy, OpRow};
use stepscope_analysis::overview::{Overview, OverviewPart};
use stepscope_analysis::scopes::{self, InputSums, ScopeRow};
use stepscope_analysis::whatif::Edit;
use stepscope_model::steps::Step;
use stepscope_model::wire::Packed;
use stepscope_model::Profile;

use crate::advise::{judge, Advice, TOP_OPS};
use crate::context::{ByHost, Context};
use crate::facts::{HostFacts, RunFacts};
use crate::finding::Finding;
use crate::gains::{self, HostReplays};
use crate::inputs::{self, Dispatches, Inputs, StepPasses};
use crate::rules::{data_movement, dominant_op};
use crate::thresholds::Thresholds;

/// A run read a host at a time, judged: its overview, the analyses the rules read, its
/// findings, and what the caller kept of each host.
pub struct Judged<T> {
    pub overview: Overview,
    pub inputs: Inputs,
    pub findings: Vec<Finding>,
    pub kept: Vec<T>,
}

/// What the rules read of one host.
pub struct HostPart<T> {
    devices: DevicesPart,
    compiles: Vec<CompileEvent>,
    collectives: CollectivesPart,
    allocators: Vec<Allocator>,
    scope_rows: Vec<ScopeRow>,
    input: InputSums,
    /// Its steps, as bytes until the reduce (a third of their size: a pod keeps every
    /// host's until all are read).
    steps: Packed<Vec<Step>>,
    leading_idle: Vec<(usize, i64)>,
    dispatches: Dispatches,
    facts: HostFacts,
    /// Its replays of the edits the rules may ask for ([`crate::gains::host_replays`]).
    whatif: HostReplays,
    /// Its kernels by op, and the hosts they are of.
    kernels: Vec<OpKernel>,
    kernel_hosts: Vec<String>,
    kept: T,
}
stepscope_model::wire_struct!(HostPart<T> {
    devices,
    compiles,
    collectives,
    allocators,
    scope_rows,
    input,
    steps,
    leading_idle,
    dispatches,
    facts,
    whatif,
    kernels,
    kernel_hosts,
    kept,
});

/// The overview and findings of a run of `hosts` hosts read one at a time, with
/// thresholds `th`: what the run read whole has ([`crate::advise::advise`],
/// [`crate::inputs::overview_and_inputs`]), in one host's memory and the parts'.
/// `read` and `top` as [`fold::overview_by_host`] takes them; `extra` is asked of each
/// host once measured under the run's decisions, for what the caller keeps of it.
pub fn judged_by_host<T, E>(
    run: &str,
    hosts: usize,
    top: usize,
    th: &Thresholds,
    read: &mut Reader<E>,
    extra: &mut dyn FnMut(&Profile, &OverviewPart) -> Result<T, E>,
) -> Result<Judged<T>, E> {
    let mut part = |p: &Profile, o: &OverviewPart| host_part(p, o, th, hosts > 1, &mut *extra);
    judged_of(run, hosts, top, th, &mut fold::Local { read, extra: &mut part, ops: true })
}

/// What a host of a run of `hosts` hosts is mapped to for [`judged_by_host`], with
/// thresholds `th`, where it is read alone (here, or on another machine whose part the
/// reduce is handed: [`judged_of`]).
pub fn map_host(profile: &Profile, hosts: usize, th: &Thresholds) -> fold::Mapped<HostPart<()>> {
    let mut part = |p: &Profile, o: &OverviewPart| Ok::<_, std::convert::Infallible>(host_kept(p, o, hosts, th));
    let Ok(mapped) = fold::map_host(profile, true, &mut part);
    mapped
}

/// What [`map_host`] keeps of a host, beside its overview part: for a host read again
/// where the run decides otherwise than it did alone ([`judged_of`]'s source).
pub fn host_kept(profile: &Profile, o: &OverviewPart, hosts: usize, th: &Thresholds) -> HostPart<()> {
    let Ok(part) = host_part::<(), std::convert::Infallible>(profile, o, th, hosts > 1, &mut |_, _| Ok(()));
    part
}

/// [`judged_by_host`] of hosts from `source` (read here, or mapped elsewhere as
/// [`map_host`] maps them and read again here).
pub fn judged_of<T, E>(
    run: &str,
    hosts: usize,
    top: usize,
    th: &Thresholds,
    source: &mut dyn fold::HostSource<HostPart<T>, E>,
) -> Result<Judged<T>, E> {
    let (overview, op_rows, mut parts, decided) = fold::overview_ops_and_decisions_of(run, hosts, top, source)?;
    // The run's edits a host was not made ready for (the run's top op, small there):
    // that host is read again for them, so that its replays add up to the run's.
    let edits = run_edits(&op_rows.ops, th);
    for (index, part) in parts.iter_mut() {
        let missing: Vec<Edit> = edits.iter().filter_map(|e| part.whatif.missing(e)).collect();
        if missing.is_empty() {
            continue;
        }
        if let Some(profile) = fold::read_again(source, *index, decided)? {
            part.whatif.add(&profile, missing);
        }
    }
    // Kernels do not depend on the run's decisions: each host's are added up once, in
    // the run's order.
    let mut kernels = OpKernels::default();
    let mut added: HashSet<String> = HashSet::new();
    for (_, part) in parts.iter_mut() {
        if part.kernel_hosts.iter().all(|h| added.insert(h.clone())) {
            kernels.add(std::mem::take(&mut part.kernels));
        }
    }
    let parts = parts.into_iter().map(|(_, part)| part).collect();
    Ok(assemble(run, overview, op_rows, kernels, parts, th))
}

/// The edits the rules ask for of a run whose op profile is `rows` that name its ops:
/// the dominant-op rule's, where its top computing op passes the rule's threshold.
fn run_edits(rows: &[OpRow], th: &Thresholds) -> Vec<Edit> {
    let top = dominant_op::computing(rows).next().filter(|r| r.device_time_pct > th.dominant_op_pct);
    top.map(|top| gains::remove_ops(&[top])).into_iter().collect()
}

/// [`crate::advise::advise`] of a run read a host at a time, `read` as
/// [`judged_by_host`] takes it; `check` is asked of each host once measured (whether
/// its file changed under it).
pub fn advise_by_host<E>(
    run: &str,
    hosts: usize,
    th: &Thresholds,
    read: &mut Reader<E>,
    check: &Check<E>,
) -> Result<Advice, E> {
    let judged = judged_by_host(run, hosts, TOP_OPS, th, read, &mut |p, _| check(p))?;
    Ok(Advice::new(&judged.overview, th, judged.findings))
}

/// What the rules will ask of a host of a run read a host at a time, made ahead of its
/// turn in the fold, on the thread that read it (`stepscope_analysis::ahead`'s `warm`):
/// its replays of the edits they may ask for ([`gains::make_ahead`]), the most of its
/// map's work, so that the fold's own is short and the readers keep the cores busy.
pub fn ahead(profile: &Profile, th: &Thresholds, in_pod: bool) {
    fold::rows_ahead(profile);
    gains::make_ahead(profile, candidate_edits(&ops::ops(profile, GroupBy::Op, 0).ops, th), in_pod);
}

/// The edits the rules may ask for of a host whose op profile is `rows`: each rule's
/// edit that needs no op, the data-movement rule's (of every op it names on the host),
/// and the dominant-op rule's of the host's top computing op and of each that takes
/// half the rule's threshold or more of its op time. (A run's top op that is neither on
/// a host that ran it is replayed there once the run's top op is known: [`run_edits`].)
fn candidate_edits(rows: &[OpRow], th: &Thresholds) -> Vec<Edit> {
    let mut edits = vec![
        gains::remove_compile(),
        gains::remove_callbacks(),
        gains::remove_input(),
        gains::prefetch_copies(),
        gains::jit(),
        gains::balance(),
        gains::dispatch_ahead(),
        gains::overlap_collectives(),
    ];
    let moving = data_movement::moving(rows);
    if !moving.is_empty() {
        edits.push(gains::remove_ops(&moving));
    }
    let computing = dominant_op::computing(rows).enumerate();
    for (_, top) in computing.filter(|(i, r)| *i == 0 || r.device_time_pct >= th.dominant_op_pct / 2.0) {
        edits.push(gains::remove_ops(&[top]));
    }
    edits
}

/// What the rules read of `profile` (one host, measured, of a run of several where
/// `in_pod`), beside its overview part `o`.
fn host_part<T, E>(
    profile: &Profile,
    o: &OverviewPart,
    th: &Thresholds,
    in_pod: bool,
    extra: &mut dyn FnMut(&Profile, &OverviewPart) -> Result<T, E>,
) -> Result<HostPart<T>, E> {
    let steps = stepscope_model::profile::cached(profile);
    let (((devices, compiles), whatif), ((collectives, allocators), (scope_rows, (leading_idle, dispatches)))) =
        rayon::join(
            || {
                rayon::join(
                    || (DevicesPart::of(profile), compile::compiles(profile)),
                    || {
                        gains::host_replays(
                            profile,
                            candidate_edits(&ops::ops(profile, GroupBy::Op, 0).ops, th),
                            in_pod,
                        )
                    },
                )
            },
            || {
                rayon::join(
                    || {
                        // The allocators' timelines are not judged: a pod's would add up.
                        let mut allocators = memory::memory(profile, None, 3).allocators;
                        allocators.iter_mut().for_each(|a| a.timeline = Vec::new());
                        (CollectivesPart::of(profile), allocators)
                    },
                    || {
                        let passes = (inputs::leading_idle(profile, steps), inputs::dispatches(profile, steps));
                        (scopes::scope_rows(profile), passes)
                    },
                )
            },
        );
    let facts = HostFacts::of(profile, steps, &leading_idle);
    Ok(HostPart {
        devices,
        compiles,
        collectives,
        allocators,
        scope_rows,
        input: o.input_sums().clone(),
        steps: Packed::new(&steps.steps),
        leading_idle,
        dispatches,
        facts,
        whatif,
        kernels: kernels::of_every_op(profile),
        kernel_hosts: profile.hosts.iter().map(|h| h.host.clone()).collect(),
        kept: extra(profile, o)?,
    })
}

/// The analyses and facts of the run from its hosts' parts, and the rules' findings.
fn assemble<T>(
    run: &str,
    overview: Overview,
    op_rows: stepscope_analysis::ops::Ops,
    kernels: OpKernels,
    parts: Vec<HostPart<T>>,
    th: &Thresholds,
) -> Judged<T> {
    let hosts = parts.len();
    let (mut devices, mut compiles, mut allocators, mut scope_rows) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut collectives, mut input, mut dispatches) =
        (CollectivesPart::default(), InputSums::default(), Dispatches::default());
    let (mut steps, mut leading, mut facts, mut kept) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut whatif = Vec::new();
    for p in parts {
        devices.push(p.devices);
        compiles.extend(p.compiles);
        collectives.add(p.collectives);
        allocators.extend(p.allocators);
        scope_rows.extend(p.scope_rows);
        input.add(p.input);
        let before = steps.len();
        leading.extend(p.leading_idle.into_iter().map(|(i, ps)| (i + before, ps)));
        steps.extend(p.steps.get().unwrap_or_default());
        dispatches.add(p.dispatches);
        facts.push(p.facts);
        whatif.push(p.whatif);
        kept.push(p.kept);
    }
    let (steps, place) = fold::run_steps(&overview, steps, hosts);
    let mut leading_idle: Vec<(usize, i64)> = leading.into_iter().map(|(i, ps)| (place[i], ps)).collect();
    leading_idle.sort_unstable();
    let inputs = Inputs {
        compile: compile::assemble(run, compiles),
        collectives: collectives::assemble(run, collectives),
        devices: devices::assemble(run, devices),
        memory: memory::assemble(run, allocators),
        steps: StepPasses::of(leading_idle, &dispatches),
    };
    let by_host = ByHost {
        facts: RunFacts::of(facts, &place),
        op_rows,
        scopes: scopes::assemble(steps.steps.len(), scopes::step_means(&steps), input, scope_rows),
        kernels,
        steps,
        whatif,
    };
    let findings = judge(&Context::by_host(&by_host, &overview, th, &inputs));
    Judged { overview, inputs, findings, kept }
}
