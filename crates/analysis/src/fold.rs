//! The overview of a run read a host at a time: each host is read alone, reduced to
//! what the overview reads of it ([`OverviewPart`], its op rows) and dropped before the
//! next is read, so memory is one host's and the parts', whatever the host count. The
//! parts make the overview the run read whole has ([`crate::overview::assemble`]).
//!
//! What the whole run decides from every host, a host alone cannot: where steps come
//! from, whether they are timed on the device (a vote over every host's steps), whether
//! every device counts (none took part), and each op's FLOPs per event (from rows summed
//! over every host). Each host is first measured under its own decisions; those whose
//! decisions, or whose op rows' FLOPs per event, differ from the run's are read again
//! and measured under the run's. In a pod whose hosts run one program, none is.
//!
//! A fold takes its hosts from a [`HostSource`]: [`Local`] reads and maps each host
//! here ([`map_host`]); [`Premapped`] is handed each host's first part ([`Mapped`])
//! mapped elsewhere, as bytes (`stepscope part`, a Ray task: docs/scale.md), and reads
//! a host again here only where the run decides otherwise for it.

use stepscope_model::steps::{RunDecisions, Step, StepSource, StepTiming, StepVotes, Steps};
use stepscope_model::Profile;

use crate::buffers::{Buffers, Missing, ProgramsPart};
use crate::collectives::{Collectives, CollectivesPart};
use crate::compile::Compile;
use crate::devices::{Devices, DevicesPart};
use crate::hlo_context::RunHlo;
use crate::kernels::{Kernels, KernelsPart};
use crate::memory::Memory;
use crate::ops::{GroupBy, OpRow, OpRowsPart, Ops};
use crate::overview::{assemble, in_run_order, Overview, OverviewPart};
use crate::roofline::{step_flops_with, FlopsPerEvent, Roofline};
use crate::scopes::{InputSums, Scopes, StepMeans};
use crate::timeline::{RunTracks, TracksPart};
use stepscope_model::programs::ProgramIds;

/// The overview of a run of `hosts` hosts read one at a time: `read(i, again)` reads
/// host `i` alone, on the run's clock; `None` where its file cannot be read the first
/// time (it is then left out: the caller lists it in the overview's `hosts_unread`),
/// an error where it cannot be read `again`. `extra` is asked of each host once it is
/// measured, for what the caller keeps of it (the last answer for a host read again);
/// it may fail (a file that changed under its map). `top` ops are listed.
pub fn overview_by_host<T, E>(
    run: &str,
    hosts: usize,
    top: usize,
    read: &mut Reader<E>,
    extra: &mut dyn FnMut(&Profile, &OverviewPart) -> Result<T, E>,
) -> Result<(Overview, Vec<T>), E> {
    fold(run, hosts, top, true, read, extra).map(|f| (f.overview, f.kept))
}

/// [`overview_by_host`] of hosts from `source`, what they keep dropped.
pub fn overview_of<T, E>(
    run: &str,
    hosts: usize,
    top: usize,
    source: &mut dyn HostSource<T, E>,
) -> Result<Overview, E> {
    Ok(fold_mapped(run, hosts, top, source)?.overview)
}

/// The overview of a run of hosts from `source`, with the run's op profile by op (as
/// [`crate::ops::ops`] makes it of the run read whole), what the caller kept of each
/// host beside its index in the run (the hosts read, in order), and the run's
/// decisions: what a host read again after the fold ([`read_again`]) is measured under.
pub fn overview_ops_and_decisions_of<T, E>(
    run: &str,
    hosts: usize,
    top: usize,
    source: &mut dyn HostSource<T, E>,
) -> Result<(Overview, Ops, HostsRead<T>, RunDecisions), E> {
    let f = fold_mapped(run, hosts, top, source)?;
    Ok((f.overview, f.ops, f.read.into_iter().zip(f.kept).collect(), f.decided))
}

/// Host `index` of a run read again once its hosts are folded, under the run's
/// `decisions`, as the fold measured it: for what the run's answers ask of a host that
/// only the whole run could tell it (`None` where its file cannot be read).
pub fn read_again<T, E>(
    source: &mut dyn HostSource<T, E>,
    index: usize,
    decisions: RunDecisions,
) -> Result<Option<Profile>, E> {
    let Some(mut profile) = source.read(index)? else { return Ok(None) };
    profile.set_decisions(decisions);
    Ok(Some(profile))
}

/// What a fold kept of each host read, beside its index in the run.
pub type HostsRead<T> = Vec<(usize, T)>;

/// What [`fold`] makes of a run's hosts: the overview, the op profile by op (where
/// asked), what the caller kept of each host read, the run's decisions, and the
/// indexes of the hosts read.
struct Folded<T> {
    overview: Overview,
    ops: Ops,
    kept: Vec<T>,
    decided: RunDecisions,
    read: Vec<usize>,
}

/// [`overview_by_host`], and the run's decisions; without `ops`, no op rows are summed:
/// the overview has no top ops and no FLOPs, for callers that read only the hosts'
/// parts under the run's decisions.
fn fold<T, E>(
    run: &str,
    hosts: usize,
    top: usize,
    ops: bool,
    read: &mut Reader<E>,
    extra: &mut dyn FnMut(&Profile, &OverviewPart) -> Result<T, E>,
) -> Result<Folded<T>, E> {
    fold_mapped(run, hosts, top, &mut Local { read, extra, ops })
}

/// A host mapped under its own decisions, as the fold first reads it: its op rows by op
/// (none where the fold sums none) with each row's FLOPs per event alone, its part, and
/// what the caller keeps of it. It holds no [`Profile`]: it may have been mapped on
/// another machine and handed over as bytes ([`stepscope_model::wire`]).
pub struct Mapped<T> {
    ops: OpRowsPart,
    flops: Vec<Option<f64>>,
    part: OverviewPart,
    kept: T,
}
stepscope_model::wire_struct!(Mapped<T> { ops, flops, part, kept });

/// `profile` (a host read alone) mapped under its own decisions, with its op rows where
/// `ops`, `extra` asked of it once measured.
pub fn map_host<T, E>(
    profile: &Profile,
    ops: bool,
    extra: &mut dyn FnMut(&Profile, &OverviewPart) -> Result<T, E>,
) -> Result<Mapped<T>, E> {
    let ahead = if ops { profile.memo().take::<RowsAhead, OpRowsPart>(&RowsAhead) } else { None };
    let ops = match ahead {
        Some(rows) => rows,
        None if ops => OpRowsPart::of(profile),
        None => OpRowsPart::new(GroupBy::Op),
    };
    if !ops.is_empty() && profile.hosts.len() == 1 {
        // The host's op profile, as `ops::ops` makes it, for `extra` to read.
        profile.memo().ensure((GroupBy::Op, 0usize), || ops.clone().finish());
    }
    let flops = ops.flops_per_event();
    let part = measure(profile, &by_name(&ops, flops.iter().copied().enumerate(), false), None);
    let kept = extra(profile, &part)?;
    Ok(Mapped { ops, flops, part, kept })
}

/// The key a host's op rows made ahead of its map ([`rows_ahead`]) are kept under.
#[derive(PartialEq)]
struct RowsAhead;

/// A host's op rows made ahead of its turn in the fold, on the thread that read it
/// ([`crate::ahead`]'s `warm`), kept in its memo for [`map_host`] to take; its op
/// profile too, as `ops::ops` makes it. For a map that reads the op profile ahead
/// (the rules' candidate edits), so that it is made once.
pub fn rows_ahead(profile: &Profile) {
    let rows = OpRowsPart::of(profile);
    if !rows.is_empty() && profile.hosts.len() == 1 {
        profile.memo().ensure((GroupBy::Op, 0usize), || rows.clone().finish());
    }
    profile.memo().ensure(RowsAhead, || rows);
}

/// Where a fold's hosts come from: each mapped under its own decisions (here, or
/// elsewhere), and read again here where the run decides otherwise.
pub trait HostSource<T, E> {
    /// Host `i` mapped under its own decisions; `None` where its file cannot be read.
    fn first(&mut self, i: usize) -> Result<Option<Mapped<T>>, E>;
    /// Host `i` read again, under the run's `decided` (its op rows' FLOPs per event
    /// the run's `run_rows`, its programs numbered for the run by `ids`): its part and
    /// what the caller keeps of it.
    fn again(
        &mut self,
        i: usize,
        decided: RunDecisions,
        run_rows: &FlopsPerEvent,
        ids: Option<&ProgramIds>,
    ) -> Result<Option<(OverviewPart, T)>, E>;
    /// Host `i` read again here, as it is (for what only the run's answer tells it to
    /// make of it: [`read_again`]).
    fn read(&mut self, i: usize) -> Result<Option<Profile>, E>;
}

/// Hosts read and mapped here, by a [`Reader`].
pub struct Local<'r, 'a, T, E> {
    pub read: &'r mut Reader<'a, E>,
    pub extra: &'r mut dyn FnMut(&Profile, &OverviewPart) -> Result<T, E>,
    /// Whether the hosts' op rows are summed.
    pub ops: bool,
}

impl<T, E> HostSource<T, E> for Local<'_, '_, T, E> {
    fn first(&mut self, i: usize) -> Result<Option<Mapped<T>>, E> {
        let Some(profile) = (self.read)(i, false)? else { return Ok(None) };
        map_host(&profile, self.ops, &mut *self.extra).map(Some)
    }

    fn again(
        &mut self,
        i: usize,
        decided: RunDecisions,
        run_rows: &FlopsPerEvent,
        ids: Option<&ProgramIds>,
    ) -> Result<Option<(OverviewPart, T)>, E> {
        let Some(mut profile) = (self.read)(i, true)? else { return Ok(None) };
        profile.set_decisions(decided);
        let part = measure(&profile, run_rows, ids);
        let kept = (self.extra)(&profile, &part)?;
        Ok(Some((part, kept)))
    }

    fn read(&mut self, i: usize) -> Result<Option<Profile>, E> {
        (self.read)(i, true)
    }
}

/// Host `i` mapped elsewhere, handed over: `None` where its file could not be read.
pub type First<'a, T, E> = dyn FnMut(usize) -> Result<Option<Mapped<T>>, E> + 'a;

/// Hosts mapped elsewhere (`first`), read again here (`local`).
pub struct Premapped<'r, 'l, 'a, T, E> {
    pub first: &'r mut First<'r, T, E>,
    pub local: &'r mut Local<'l, 'a, T, E>,
}

impl<T, E> HostSource<T, E> for Premapped<'_, '_, '_, T, E> {
    fn first(&mut self, i: usize) -> Result<Option<Mapped<T>>, E> {
        (self.first)(i)
    }

    fn again(
        &mut self,
        i: usize,
        decided: RunDecisions,
        run_rows: &FlopsPerEvent,
        ids: Option<&ProgramIds>,
    ) -> Result<Option<(OverviewPart, T)>, E> {
        self.local.again(i, decided, run_rows, ids)
    }

    fn read(&mut self, i: usize) -> Result<Option<Profile>, E> {
        self.local.read(i)
    }
}

/// [`fold`] of hosts from `source`.
fn fold_mapped<T, E>(run: &str, hosts: usize, top: usize, source: &mut dyn HostSource<T, E>) -> Result<Folded<T>, E> {
    let mut rows = OpRowsPart::new(GroupBy::Op);
    let mut read_hosts: Vec<Host<T>> = Vec::new();
    for i in 0..hosts {
        let Some(Mapped { ops, flops, part, kept }) = source.first(i)? else { continue };
        let at = rows.add(ops);
        read_hosts.push(Host { index: i, part, kept, rows: at.into_iter().zip(flops).collect() });
    }
    let decided = decide(read_hosts.iter().map(|h| &h.part));
    let flops = rows.flops_per_event();
    let run_rows = by_name(&rows, flops.iter().copied().enumerate(), false);
    for (k, h) in read_hosts.iter_mut().enumerate() {
        let p = &h.part;
        let same = Some(p.source) == decided.source
            && Some(p.timing) == decided.timing
            && Some(p.none_took_part) == decided.every_device_counts
            && same_flops(&rows, &h.rows, &run_rows);
        if !same {
            let Some((part, kept)) = source.again(h.index, decided, &run_rows, rows.host_ids(k))? else { continue };
            (h.part, h.kept) = (part, kept);
        }
    }
    let read: Vec<usize> = read_hosts.iter().map(|h| h.index).collect();
    let (parts, kept) = read_hosts.into_iter().map(|h| (h.part, h.kept)).unzip();
    let ops = rows.finish();
    let overview = assemble(run, parts, ops.ops.clone(), top, Vec::new());
    Ok(Folded { overview, ops, kept, decided, read })
}

/// Reads a host of a run for [`overview_by_host`].
pub type Reader<'a, E> = dyn FnMut(usize, bool) -> Result<Option<Profile>, E> + 'a;

/// Checks a host once it is summed up (whether its file changed under it).
pub type Check<'a, E> = dyn Fn(&Profile) -> Result<(), E> + 'a;

/// The steps of a run read one host at a time, `read` and `check` as
/// [`overview_by_host`] and its `extra` take them: each host's, measured under the
/// run's decisions, with their FLOPs (and with `critical_paths`, theirs:
/// [`crate::whatif::add_critical_paths`]), in the order of the run read whole
/// ([`crate::steps::steps`]).
pub fn steps_by_host<E>(
    run: &str,
    hosts: usize,
    read: &mut Reader<E>,
    check: &Check<E>,
    critical_paths: bool,
) -> Result<Steps, E> {
    let mut keep = |p: &Profile, part: &OverviewPart| check(p).map(|()| steps_kept(p, part, critical_paths));
    Ok(steps_of(run, hosts, &mut Local { read, extra: &mut keep, ops: true })?.0)
}

/// What [`steps_of`] keeps of a host: its steps with their FLOPs (and with
/// `critical_paths`, theirs), and its devices.
pub fn steps_kept(profile: &Profile, part: &OverviewPart, critical_paths: bool) -> (Vec<Step>, DevicesPart) {
    let mut steps = steps_with_flops(profile, part);
    if critical_paths {
        crate::whatif::add_critical_paths(profile, &mut steps);
    }
    (steps, DevicesPart::of(profile))
}

/// [`steps_by_host`] of hosts from `source`, each kept as [`steps_kept`] keeps it
/// (summed by op: `ops` true), and the run's devices ([`devices_by_host`]'s).
pub fn steps_of<E>(
    run: &str,
    hosts: usize,
    source: &mut dyn HostSource<(Vec<Step>, DevicesPart), E>,
) -> Result<(Steps, Devices), E> {
    let f = fold_mapped(run, hosts, 0, source)?;
    let (steps, devices): (Vec<Vec<Step>>, Vec<DevicesPart>) = f.kept.into_iter().unzip();
    let steps = run_steps(&f.overview, steps.into_iter().flatten().collect(), hosts).0;
    Ok((steps, crate::devices::assemble(run, devices)))
}

/// The steps of `profile` (a host, measured under the run's decisions, whose part is
/// `part`), with their FLOPs: what [`steps_by_host`] keeps of a host.
pub fn steps_with_flops(profile: &Profile, part: &OverviewPart) -> Vec<Step> {
    let mut steps = stepscope_model::profile::cached(profile).steps.clone();
    for (s, f) in steps.iter_mut().zip(part.step_flops()) {
        s.flops = f.map(|f| f.flops);
        s.flops_utilization_pct = f.and_then(|f| f.utilization_pct);
    }
    steps
}

/// The steps of a run of `hosts` hosts whose overview is `overview`, from its hosts'
/// (`steps`: each host's in its order, hosts in order), in the order of the run read
/// whole ([`in_run_order`]); and for each of `steps`, its place there.
pub fn run_steps(overview: &Overview, mut steps: Vec<Step>, hosts: usize) -> (Steps, Vec<usize>) {
    let mut order: Vec<usize> = (0..steps.len()).collect();
    if hosts > 1 {
        let key = |i: &usize, host: bool| {
            let s = &steps[*i];
            (if host { s.host_start_ps } else { s.start_ps }, s.step_num)
        };
        in_run_order(&mut order, overview.step_timing, |i| key(i, true), |i| key(i, false));
    }
    let mut place = vec![0; steps.len()];
    for (at, &i) in order.iter().enumerate() {
        place[i] = at;
    }
    // Put in order where they lie (a pod's steps are its largest list at the reduce).
    permute(&mut steps, &order);
    let steps = Steps {
        schema: "stepscope.steps/1",
        source: overview.step_source,
        timing: overview.step_timing,
        dispatched_not_run: overview.dispatched_not_run,
        launches_not_run: overview.launches_not_run,
        steps,
    };
    (steps, place)
}

/// Reorders `items` in place so that `items[k]` is what `items[order[k]]` was
/// (`order` a permutation): each cycle of the permutation followed once.
fn permute<T>(items: &mut [T], order: &[usize]) {
    let mut done = vec![false; items.len()];
    for start in 0..items.len() {
        let mut k = start;
        while !done[k] {
            done[k] = true;
            let from = order[k];
            if from == start {
                break;
            }
            items.swap(k, from);
            k = from;
        }
    }
}

/// The device and host rows of a run read one host at a time, `read` and `check` as
/// for [`steps_by_host`]: each host's, measured under the run's decisions, the hosts
/// then set against each other as in the run read whole ([`crate::devices`]).
pub fn devices_by_host<E>(run: &str, hosts: usize, read: &mut Reader<E>, check: &Check<E>) -> Result<Devices, E> {
    let mut keep = |p: &Profile, _: &OverviewPart| check(p).map(|()| DevicesPart::of(p));
    devices_of(run, hosts, &mut Local { read, extra: &mut keep, ops: false })
}

/// [`devices_by_host`] of hosts from `source`, each kept as its [`DevicesPart`] (no op
/// rows summed: `ops` false).
pub fn devices_of<E>(run: &str, hosts: usize, source: &mut dyn HostSource<DevicesPart, E>) -> Result<Devices, E> {
    Ok(crate::devices::assemble(run, fold_mapped(run, hosts, 0, source)?.kept))
}

/// The collectives of a run read one host at a time, `read` and `check` as for
/// [`steps_by_host`]: each host's, measured under the run's decisions (its devices'
/// windows), summed per op as in the run read whole ([`crate::collectives`]).
pub fn collectives_by_host<E>(
    run: &str,
    hosts: usize,
    read: &mut Reader<E>,
    check: &Check<E>,
) -> Result<Collectives, E> {
    let mut all = CollectivesPart::default();
    for part in parts_by_host(run, hosts, read, check, |p, _| CollectivesPart::of(p))? {
        all.add(part);
    }
    Ok(crate::collectives::assemble(run, all))
}

/// The host scopes of a run read one host at a time, `read` and `check` as for
/// [`steps_by_host`]: each host's rows, measured under the run's decisions (its steps),
/// their share of the run's mean step taken as in the run read whole
/// ([`crate::scopes`]).
pub fn scopes_by_host<E>(run: &str, hosts: usize, read: &mut Reader<E>, check: &Check<E>) -> Result<Scopes, E> {
    let parts = parts_by_host(run, hosts, read, check, |p, o| {
        let steps = stepscope_model::profile::cached(p);
        (crate::scopes::scope_rows(p), steps.steps.len(), crate::scopes::step_means(steps), o.input_sums().clone())
    })?;
    let (mut rows, mut step_count, mut means, mut input) = (Vec::new(), 0, StepMeans::default(), InputSums::default());
    for (r, n, m, i) in parts {
        rows.extend(r);
        step_count += n;
        means.add(m);
        input.add(i);
    }
    Ok(crate::scopes::assemble(step_count, means, input, rows))
}

/// The compiles of a run read one host at a time, `read` and `check` as for
/// [`ops_by_host`]: each host's (they depend on no decision of the run: each host is
/// read once), in time order as in the run read whole ([`crate::compile`]).
pub fn compile_by_host<E>(run: &str, hosts: usize, read: &mut Reader<E>, check: &Check<E>) -> Result<Compile, E> {
    let mut compiles = Vec::new();
    each_host_once(hosts, read, check, |p| compiles.extend(crate::compile::compiles(p)))?;
    Ok(crate::compile::assemble(run, compiles))
}

/// The roofline of a run read one host at a time, `read` and `check` as for
/// [`ops_by_host`]: each host's devices' roofs and op rows (they depend on no decision
/// of the run: each host is read once), as in the run read whole
/// ([`crate::roofline`]).
pub fn roofline_by_host<E>(hosts: usize, read: &mut Reader<E>, check: &Check<E>) -> Result<Roofline, E> {
    let (mut rows, mut roofs) = (OpRowsPart::new(GroupBy::Op), Vec::new());
    each_host_once(hosts, read, check, |p| {
        rows.add(OpRowsPart::grouped(p, GroupBy::Op, 0));
        roofs.push(crate::roofline::roofs(p));
    })?;
    Ok(crate::roofline::assemble(roofs, rows.finish()))
}

/// The memory analysis of a run read one host at a time, `read` and `check` as for
/// [`ops_by_host`]: each host's allocators (they depend on no decision of the run:
/// each host is read once), `top` live allocations at each peak, ordered as in the run
/// read whole ([`crate::memory`]); without the device-memory profile, which is the
/// run's, not a host's.
pub fn memory_by_host<E>(
    run: &str,
    hosts: usize,
    top: usize,
    read: &mut Reader<E>,
    check: &Check<E>,
) -> Result<Memory, E> {
    let mut allocators = Vec::new();
    each_host_once(hosts, read, check, |p| allocators.extend(crate::memory::memory(p, None, top).allocators))?;
    Ok(crate::memory::assemble(run, allocators))
}

/// The kernels of a run read one host at a time, `read` and `check` as for
/// [`ops_by_host`]: each host's (they depend on no decision of the run: each host is
/// read once), summed per kernel as in the run read whole ([`crate::kernels`]).
pub fn kernels_by_host<E>(hosts: usize, read: &mut Reader<E>, check: &Check<E>) -> Result<Kernels, E> {
    let mut all = KernelsPart::default();
    each_host_once(hosts, read, check, |p| all.add(KernelsPart::of(p)))?;
    Ok(crate::kernels::assemble(all))
}

/// The memory plan of a run read one host at a time, `read` and `check` as for
/// [`ops_by_host`]: the program chosen among every host's as in the run read whole
/// (`program`, else the one that ran longest: [`crate::buffers::buffers`]), then its
/// host read again for its plan. `Ok(Err(_))` where there is no plan to show.
pub fn buffers_by_host<E>(
    run: &str,
    hosts: usize,
    (program, memory_space, top): (Option<&str>, i64, usize),
    read: &mut Reader<E>,
    check: &Check<E>,
) -> Result<Result<Buffers, Missing>, E> {
    let (mut programs, mut by_module) = (ProgramsPart::default(), OpRowsPart::new(GroupBy::Module));
    for i in 0..hosts {
        let Some(p) = read(i, false)? else { continue };
        programs.add(ProgramsPart::of(&p, memory_space, i));
        // The op profile by module chooses only where no program is named.
        if program.is_none() {
            by_module.add(OpRowsPart::grouped(&p, GroupBy::Module, 0));
        }
        check(&p)?;
    }
    let (chosen, rows) = match programs.choose(program, || by_module.finish().ops) {
        Ok(chosen) => chosen,
        Err(missing) => return Ok(Err(missing)),
    };
    let Some(p) = read(chosen.host, true)? else { return Ok(Err(Missing::NoPrograms)) };
    let (Some(modules), Some(space)) = (p.hlo_modules().first(), p.hosts.first()) else {
        return Ok(Err(Missing::NoPrograms));
    };
    let Some(entry) = modules.entries().get(chosen.entry) else { return Ok(Err(Missing::NoPrograms)) };
    let plan = crate::buffers::plan_of(entry, (memory_space, top), (run, &space.host), rows);
    check(&p)?;
    Ok(plan)
}

/// What `make` makes of the first host (in order) whose HLO holds `op` (in module
/// `module` where given), with the run's op profile by op, and what the HLO of the
/// run's hosts says beside it ([`RunHlo`]), the run read one host at a time, `read` and
/// `check` as for [`ops_by_host`]: as `make` of the run read whole would be
/// ([`crate::hlo_context::find`] looks in its hosts in order). The host that holds the
/// op is kept while the others are read.
pub fn hlo_by_host<T, E>(
    hosts: usize,
    (op, module): (&str, Option<&str>),
    read: &mut Reader<E>,
    check: &Check<E>,
    make: impl FnOnce(&Profile, Vec<OpRow>) -> Option<T>,
) -> Result<(Option<T>, RunHlo), E> {
    let (mut rows, mut run) = (OpRowsPart::new(GroupBy::Op), RunHlo::default());
    let mut holder: Option<Profile> = None;
    for i in 0..hosts {
        let Some(p) = read(i, false)? else { continue };
        rows.add(OpRowsPart::of(&p));
        run.add_modules(&p);
        check(&p)?;
        if holder.is_none() && crate::hlo_context::find(&p, op, module).is_some() {
            holder = Some(p);
        }
    }
    run.ops = rows.finish().ops;
    let made = match holder {
        Some(p) => {
            let made = make(&p, run.ops.clone());
            check(&p)?;
            made
        }
        None => None,
    };
    Ok((made, run))
}

/// For what depends on no decision of the run: each host read once, in order, handed
/// to `f`, then `check`ed. A host that cannot be read is left out.
fn each_host_once<E>(
    hosts: usize,
    read: &mut Reader<E>,
    check: &Check<E>,
    mut f: impl FnMut(&Profile),
) -> Result<(), E> {
    for i in 0..hosts {
        let Some(profile) = read(i, false)? else { continue };
        f(&profile);
        check(&profile)?;
    }
    Ok(())
}

/// Each host's `keep`, measured under the run's decisions, hosts in order, each
/// `check`ed once kept. What is kept reads no FLOPs: no op rows are summed.
fn parts_by_host<T, E>(
    run: &str,
    hosts: usize,
    read: &mut Reader<E>,
    check: &Check<E>,
    keep: impl Fn(&Profile, &OverviewPart) -> T,
) -> Result<Vec<T>, E> {
    let mut keep = |p: &Profile, o: &OverviewPart| {
        let part = keep(p, o);
        check(p).map(|()| part)
    };
    Ok(fold(run, hosts, 0, false, read, &mut keep)?.kept)
}

/// The timeline's tracks of a run read one host at a time, `read` and `check` as for
/// [`steps_by_host`]: each host's, read under the run's decisions, with the ids the
/// run read whole gives them ([`RunTracks`]).
pub fn tracks_by_host<E>(run: &str, hosts: usize, read: &mut Reader<E>, check: &Check<E>) -> Result<RunTracks, E> {
    let mut keep = |p: &Profile, _: &OverviewPart| {
        let part = TracksPart::of(p, &stepscope_model::profile::cached(p).steps);
        check(p).map(|()| part)
    };
    let f = fold(run, hosts, 0, false, read, &mut keep)?;
    Ok(RunTracks::assemble(run, f.kept, f.decided))
}

/// The op profile of a run read one host at a time, grouped `by` (scopes cut at
/// `scope_depth`), `read` and `check` as for [`steps_by_host`]: each host's rows summed
/// as the run read whole sums them ([`OpRowsPart`]). It depends on no decision of the
/// run: each host is read once.
pub fn ops_by_host<E>(
    hosts: usize,
    by: GroupBy,
    scope_depth: usize,
    read: &mut Reader<E>,
    check: &Check<E>,
) -> Result<Ops, E> {
    let mut rows = OpRowsPart::new(by);
    each_host_once(hosts, read, check, |p| {
        rows.add(OpRowsPart::grouped(p, by, scope_depth));
    })?;
    Ok(rows.finish())
}

/// A host read: its index in the run, its part, what the caller keeps of it, and per
/// op row of it, the run's row it was added to and the FLOPs per event it had alone.
struct Host<T> {
    index: usize,
    part: OverviewPart,
    kept: T,
    rows: Vec<(usize, Option<f64>)>,
}

/// The part of `profile`, its steps' FLOPs from `per_event` (its programs numbered
/// for the run by `ids`, where given).
fn measure(profile: &Profile, per_event: &FlopsPerEvent, ids: Option<&ProgramIds>) -> OverviewPart {
    profile.prepare();
    profile.host_scopes();
    let steps = &stepscope_model::profile::cached(profile).steps;
    OverviewPart::of(
        profile,
        step_flops_with(profile, steps, per_event, ids.map(std::slice::from_ref).unwrap_or_default()),
    )
}

/// Per op name (module, name): each program's FLOPs per event, from `flops` (rows of
/// `part` by index, each with its FLOPs per event where it has them); with `every_name`,
/// the names of rows without FLOPs too (an empty list).
fn by_name<'r>(
    part: &'r OpRowsPart,
    flops: impl Iterator<Item = (usize, Option<f64>)>,
    every_name: bool,
) -> FlopsPerEvent<'r> {
    let mut out = FlopsPerEvent::default();
    for (at, f) in flops {
        let (module, name, program) = part.key(at);
        match f {
            Some(f) => out.entry((module, name)).or_default().push((program, f)),
            None if every_name => {
                out.entry((module, name)).or_default();
            }
            None => {}
        }
    }
    out
}

/// Whether a host's rows (`mine`: the run's row each was added to, and its FLOPs per
/// event alone) give each op name the FLOPs per event the run's rows give it.
fn same_flops(rows: &OpRowsPart, mine: &[(usize, Option<f64>)], run: &FlopsPerEvent) -> bool {
    let alone = by_name(rows, mine.iter().copied(), true);
    let sorted = |v: &[(Option<u64>, f64)]| {
        let mut v: Vec<(Option<u64>, u64)> = v.iter().map(|&(p, f)| (p, f.to_bits())).collect();
        v.sort_unstable();
        v
    };
    alone.iter().all(|(key, v)| sorted(v) == sorted(run.get(key).map_or(&[][..], |r| r.as_slice())))
}

/// The run's decisions from its hosts' parts, each measured alone: steps from the
/// first source any host has; timed on the device where the annotated steps' votes,
/// added up, say the loop dispatches ahead; every device counting where none took
/// part on any host.
fn decide<'p>(parts: impl Iterator<Item = &'p OverviewPart>) -> RunDecisions {
    let order = [StepSource::Annotation, StepSource::DeviceSteps, StepSource::ModuleExecutions, StepSource::None];
    let rank = |s: StepSource| order.iter().position(|o| *o == s).unwrap_or(order.len());
    let (mut source, mut votes, mut none_took_part) = (StepSource::None, StepVotes::default(), true);
    for p in parts {
        if rank(p.source) < rank(source) {
            source = p.source;
        }
        votes = votes + p.votes;
        none_took_part &= p.none_took_part;
    }
    let timing = if source == StepSource::Annotation && votes.ahead() { StepTiming::Device } else { StepTiming::Host };
    RunDecisions { source: Some(source), timing: Some(timing), every_device_counts: Some(none_took_part) }
}

#[cfg(test)]
mod tests {
    use super::permute;

    #[test]
    fn a_permutation_applied_in_place_is_the_one_copied() {
        let mut seed = 7u64;
        for n in [0usize, 1, 2, 5, 31, 200] {
            let mut order: Vec<usize> = (0..n).collect();
            for i in (1..n).rev() {
                seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                order.swap(i, (seed >> 33) as usize % (i + 1));
            }
            let items: Vec<String> = (0..n).map(|i| format!("step {i}")).collect();
            let copied: Vec<String> = order.iter().map(|&i| items[i].clone()).collect();
            let mut moved = items;
            permute(&mut moved, &order);
            assert_eq!(moved, copied, "{order:?}");
        }
    }
}
