//! The op profile: time per HLO op (or category, module, name-stack scope), with
//! self time, FLOPs and bytes where the profile gives them.

use std::sync::Arc;

use rayon::prelude::*;

use stepscope_xspace::hlo::HloModules;
use stepscope_xspace::{Plane, Span, Stat, StatValue};

use serde::Serialize;

use crate::peaks::Peaks;
use crate::source::{self, SourceFrame};
use stepscope_model::executions::{same_execution, Execution, Executions};
pub use stepscope_model::hlo_ops::instruction;
use stepscope_model::programs::{HostPrograms, ProgramIds, RunPrograms};
use stepscope_model::records::{stat_u64, FastMap, RecStats};
use stepscope_model::stats::sum_ps;
use stepscope_model::wire::Wire;
use stepscope_model::{Device, Profile};

/// How to group op time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum GroupBy {
    Op,
    Category,
    Module,
    Scope,
    /// The line of the user's Python that made the op (see [`crate::source::user_frame`]).
    Line,
    /// The whole Python stack that made the op.
    Stack,
}
stepscope_model::wire_enum!(GroupBy { Op, Category, Module, Scope, Line, Stack });

impl GroupBy {
    /// Every grouping, in the order help texts list them.
    pub const ALL: [GroupBy; 6] =
        [GroupBy::Op, GroupBy::Category, GroupBy::Module, GroupBy::Scope, GroupBy::Line, GroupBy::Stack];

    /// The grouping's name as the CLI, the API and Python spell it (`op`, `line`, …).
    pub fn name(self) -> &'static str {
        match self {
            GroupBy::Op => "op",
            GroupBy::Category => "category",
            GroupBy::Module => "module",
            GroupBy::Scope => "scope",
            GroupBy::Line => "line",
            GroupBy::Stack => "stack",
        }
    }

    /// The grouping called `name`; an error naming the choices otherwise.
    pub fn parse(name: &str) -> Result<GroupBy, String> {
        GroupBy::ALL.into_iter().find(|b| b.name() == name).ok_or_else(|| {
            let names: Vec<&str> = GroupBy::ALL.iter().map(|b| b.name()).collect();
            format!("cannot group ops by {name:?} — use one of: {}", names.join(", "))
        })
    }
}

/// One row of the op profile.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct OpRow {
    /// Op name (or category, module, scope, per [`GroupBy`]).
    pub name: String,
    /// The XLA module (empty when rows mix modules).
    pub module: String,
    pub category: String,
    pub count: u64,
    /// Executions of the op: one run of the instruction within one run of its program.
    /// On XLA:CPU, its events of one `run_id` are one (a `sort` split over two threads
    /// records two); on GPUs, the kernels one execution of an XLA op launched are one
    /// ([`stepscope_model::executions`]: a library GEMM
    /// with its memset, a split-K GEMM's two kernels; back-to-back launches of one op
    /// are as many executions; a copy of no module, `MemcpyH2D` of a `device_put`, is
    /// one each). FLOPs and bytes from the HLO are one execution's times this.
    pub executions: u64,
    pub total_ps: i64,
    /// Total minus the time of ops nested inside it.
    pub self_ps: i64,
    /// Total over executions: how long one execution of the op takes (on a GPU, all
    /// the kernels of one execution; elsewhere `total_ps / count`).
    pub avg_ps: i64,
    /// The shortest and longest occurrence (one kernel, on GPUs).
    pub min_ps: i64,
    pub max_ps: i64,
    /// Share of all ops' self time, percent.
    pub device_time_pct: f64,
    /// FLOPs over all occurrences, when the profile records them.
    pub flops: Option<u64>,
    /// Bytes accessed over all occurrences, when the profile records them.
    pub bytes_accessed: Option<u64>,
    /// Achieved FLOP/s over the self time.
    pub flops_per_s: Option<f64>,
    /// Achieved bytes/s over the self time.
    pub bytes_per_s: Option<f64>,
    /// `compute` or `memory` when the device's peaks are known.
    pub bound: Option<&'static str>,
    /// FLOPs per byte accessed.
    pub arithmetic_intensity: Option<f64>,
    /// The roofline's ceiling at that intensity: the lesser of the device's peak
    /// FLOP/s for the op and intensity × its memory bandwidth.
    pub roof_flops_per_s: Option<f64>,
    /// Share of the roof reached, percent: FLOP/s over the ceiling; for an op without
    /// FLOPs (a copy), bytes/s over the memory bandwidth.
    pub roof_pct: Option<f64>,
    /// Whether the op multiplies matrices (a dot, a convolution, a library GEMM, a fusion
    /// holding one), from its HLO: those are the ops a GPU's tensor cores or a TPU's
    /// matrix units run, and their roof is the matrix rate. By line and stack: whether
    /// any of the row's ops does. Absent where the op has no HLO.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub multiplies_matrices: Option<bool>,
    /// By module, op, line and stack: the XLA program's id (`program_id`), when the
    /// profile gives one. A jitted function compiled for several shapes (or two
    /// functions of one name) is one module name with several programs, each its own
    /// row; where module names repeat, a module row's `name` carries the id,
    /// `jit_dot(49)`, as XProf names them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub program_id: Option<u64>,
    /// By op, where several programs hold an op of this name and module: this row's
    /// program, `jit_dot(49)` (each program's op is its own row, with its own HLO
    /// cost). Absent where the op's name and module are one program's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub program: Option<String>,
    /// Of a program kept apart from an earlier host's of its name and number
    /// ([`stepscope_model::programs`]): the host whose number `program_id` is, as
    /// `program` names it (`jit_f(10) on host2`). Not in the JSON.
    #[serde(skip)]
    pub program_host: Option<String>,
    /// By op, for GPU kernels that ran in an XLA command buffer: the `hlo_op` the
    /// profile gave them (the buffer's, e.g. `command_buffer_1`), where stepscope
    /// credits them to this op instead. Absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command_buffer: Option<String>,
    /// By line: the user's frame; by stack: the whole stack, outermost first. Absent
    /// on the row of ops without a source (`(no source)`) and in other groupings.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stack: Option<Vec<SourceFrame>>,
}

/// The row of ops whose module records no Python source for them (copies and
/// runtime kernels without HLO, modules compiled without source information).
pub const NO_SOURCE: &str = "(no source)";

/// The op profile of a run.
#[derive(Clone, Debug, Serialize)]
pub struct Ops {
    pub schema: &'static str,
    pub by: GroupBy,
    /// Sum of all ops' self time, ps (device time spent in ops).
    pub op_time_ps: i64,
    pub ops: Vec<OpRow>,
}

/// The scope of an occurrence that has none.
static NO_SCOPE: Text<'static> = Text::Borrowed("");

/// Text borrowed from the profile or shared between occurrences.
#[derive(Clone)]
enum Text<'a> {
    Borrowed(&'a str),
    Shared(Arc<str>),
}

impl Wire for Text<'static> {
    fn put(&self, out: &mut Vec<u8>) {
        (**self).to_string().put(out);
    }
    fn take(bytes: &mut stepscope_model::wire::Bytes<'_>) -> Result<Self, stepscope_model::wire::WireError> {
        Arc::<str>::take(bytes).map(Text::Shared)
    }
}

impl std::ops::Deref for Text<'_> {
    type Target = str;
    fn deref(&self) -> &str {
        match self {
            Text::Borrowed(s) => s,
            Text::Shared(s) => s,
        }
    }
}

impl Text<'_> {
    /// The text, shared.
    fn shared(&self) -> Arc<str> {
        match self {
            Text::Borrowed(s) => (*s).into(),
            Text::Shared(s) => s.clone(),
        }
    }

    /// The text, its own.
    fn owned(self) -> Text<'static> {
        Text::Shared(self.shared())
    }

    /// True when both are the same bytes in memory (then equal, without comparing).
    fn same_text(&self, other: &Self) -> bool {
        std::ptr::eq(&**self as *const str, &**other as *const str)
    }
}

impl PartialEq for Text<'_> {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl Eq for Text<'_> {}

impl std::hash::Hash for Text<'_> {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        (**self).hash(h)
    }
}

/// What one op occurrence adds to its row (its texts are borrowed for the call: no
/// reference count changes per occurrence).
struct Occurrence<'a, 'o> {
    /// Its record among the device's ops.
    rec: usize,
    /// The op's own time (see [`crate::OpEvent::op_ps`]).
    op_ps: i64,
    /// The device's interned ids of the op's name and module.
    ids: (u32, u32),
    /// Its line (stream) in the device plane.
    line: u32,
    /// The op's XLA program (`program_id`).
    program: Option<u64>,
    /// A GPU kernel's link to its host launch (`correlation_id`).
    corr: Option<i64>,
    self_ps: i64,
    category: &'o Text<'a>,
    scope: &'o Text<'a>,
    flops: Option<u64>,
    bytes: Option<u64>,
}

/// A row being summed up, one occurrence at a time.
#[derive(Clone)]
struct Acc<'a> {
    name: Text<'a>,
    module: Text<'a>,
    /// By op, module, line and stack: the program's id.
    program: Option<u64>,
    count: u64,
    total_ps: i64,
    self_ps: i64,
    min_ps: i64,
    max_ps: i64,
    /// Sums; `None` once an occurrence lacks the value.
    flops: Option<u64>,
    bytes: Option<u64>,
    /// Some occurrence is an async `-start`/`-done` half.
    is_async: bool,
    /// The category of the first occurrence, whether all had it, and whether it
    /// names an async half.
    category: Text<'a>,
    one_category: bool,
    category_async: bool,
    /// Of the first occurrence.
    peaks: Peaks,
    /// See [`OpRow::command_buffer`].
    command_buffer: Option<Text<'a>>,
    /// Executions: GPU kernels of one op back to back on a stream are one execution
    /// (a split-K GEMM runs two); elsewhere each occurrence is one.
    executions: u64,
    /// Executions per XLA program ([`NO_PROGRAM`] where the profile gives none): a row
    /// by op sums the programs that share a module name, each costed by its own HLO.
    by_program: Vec<(u64, u64)>,
    /// See [`OpRow::multiplies_matrices`].
    matrix: Option<bool>,
    /// The host of the first occurrence (index into the profile's hosts): its HLO is
    /// looked in first for the row's instruction.
    host: usize,
}
stepscope_model::wire_struct!(Acc<'static> {
    name,
    module,
    program,
    count,
    total_ps,
    self_ps,
    min_ps,
    max_ps,
    flops,
    bytes,
    is_async,
    category,
    one_category,
    category_async,
    peaks,
    command_buffer,
    executions,
    by_program,
    matrix,
    host,
});

impl<'a> Acc<'a> {
    fn new(name: Text<'a>, module: &'a str, first: &Occurrence<'a, '_>, peaks: Peaks, host: usize) -> Acc<'a> {
        Acc {
            name,
            module: Text::Borrowed(module),
            program: None,
            count: 0,
            total_ps: 0,
            self_ps: 0,
            min_ps: i64::MAX,
            max_ps: i64::MIN,
            flops: Some(0),
            bytes: Some(0),
            is_async: false,
            category: first.category.clone(),
            one_category: true,
            category_async: is_async(first.category),
            peaks,
            command_buffer: None,
            executions: 0,
            by_program: Vec::new(),
            matrix: None,
            host,
        }
    }

    /// Adds the occurrences `o` summed (occurrences summed in order, then `o`'s).
    fn merge(&mut self, o: Acc<'a>) {
        self.count += o.count;
        self.total_ps = self.total_ps.saturating_add(o.total_ps);
        self.self_ps = self.self_ps.saturating_add(o.self_ps);
        self.min_ps = self.min_ps.min(o.min_ps);
        self.max_ps = self.max_ps.max(o.max_ps);
        self.flops = self.flops.zip(o.flops).map(|(a, b)| a.saturating_add(b));
        self.bytes = self.bytes.zip(o.bytes).map(|(a, b)| a.saturating_add(b));
        self.is_async |= o.is_async;
        self.one_category &= o.one_category && *o.category == *self.category;
        self.command_buffer = self.command_buffer.take().or(o.command_buffer);
        self.executions += o.executions;
        for (p, n) in o.by_program {
            self.executed(p, n);
        }
        self.matrix = match (self.matrix, o.matrix) {
            (Some(x), Some(y)) => Some(x || y),
            (x, y) => x.or(y),
        };
    }

    /// The row with its texts its own, kept past the profile it was summed from.
    fn owned(self) -> Acc<'static> {
        Acc {
            name: self.name.owned(),
            module: self.module.owned(),
            program: self.program,
            count: self.count,
            total_ps: self.total_ps,
            self_ps: self.self_ps,
            min_ps: self.min_ps,
            max_ps: self.max_ps,
            flops: self.flops,
            bytes: self.bytes,
            is_async: self.is_async,
            category: self.category.owned(),
            one_category: self.one_category,
            category_async: self.category_async,
            peaks: self.peaks,
            command_buffer: self.command_buffer.map(Text::owned),
            executions: self.executions,
            by_program: self.by_program,
            matrix: self.matrix,
            host: self.host,
        }
    }

    /// Counts `n` executions of program `program`.
    fn executed(&mut self, program: u64, n: u64) {
        match self.by_program.iter_mut().rev().find(|(p, _)| *p == program) {
            Some((_, m)) => *m += n,
            None => self.by_program.push((program, n)),
        }
    }

    fn add(&mut self, o: &Occurrence<'a, '_>) {
        let op_ps = o.op_ps;
        self.count += 1;
        self.total_ps = self.total_ps.saturating_add(op_ps);
        self.self_ps = self.self_ps.saturating_add(o.self_ps);
        self.min_ps = self.min_ps.min(op_ps);
        self.max_ps = self.max_ps.max(op_ps);
        self.flops = self.flops.zip(o.flops).map(|(a, b)| a.saturating_add(b));
        self.bytes = self.bytes.zip(o.bytes).map(|(a, b)| a.saturating_add(b));
        // Nearly always the very text of the first occurrence: no comparing.
        if o.category.same_text(&self.category) {
            self.is_async |= self.category_async;
        } else {
            self.is_async |= is_async(o.category);
            self.one_category &= **o.category == *self.category;
        }
    }
}

/// An async `-start`/`-done` half's category.
fn is_async(category: &str) -> bool {
    category.ends_with("-start") || category.ends_with("-done")
}

/// Computes the op profile, grouped by `by`; `scope_depth` cuts name-stack scopes.
/// Computed once per profile and grouping; later calls return a copy.
pub fn ops(profile: &Profile, by: GroupBy, scope_depth: usize) -> Ops {
    profile.memo().get_or_insert((by, scope_depth), || op_profile(profile, by, scope_depth, None))
}

/// [`ops`] of the executions that started within `span` (start, end; ps) only: e.g.
/// the steps', leaving out work dispatched before the capture or after the last step.
pub fn ops_within(profile: &Profile, by: GroupBy, scope_depth: usize, span: (i64, i64)) -> Ops {
    profile.memo().get_or_insert((by, scope_depth, span), || op_profile(profile, by, scope_depth, Some(span)))
}

/// Computes the op profile by op into the cache, if it is not there yet.
pub fn warm(profile: &Profile) {
    profile.memo().ensure((GroupBy::Op, 0usize), || op_profile(profile, GroupBy::Op, 0, None));
}

/// The op profile of some hosts of a run, kept past their profiles: its rows summed,
/// their texts their own, each with its programs' HLO costs (by op, line and stack)
/// and its Python stack (by line and stack), not yet finished. A run read a host at a
/// time adds each host's ([`OpRowsPart::add`]) and finishes the sum
/// ([`OpRowsPart::finish`]) as the op profile of the run read whole: rows sum in the
/// order the whole run's do (host by host), and each program's cost and stack is the
/// first host's that holds its HLO. Hosts number their programs apart: each host's
/// rows are renumbered for the run as they are added ([`stepscope_model::programs`]),
/// so one program's op is one row on every host.
#[derive(Clone)]
pub struct OpRowsPart {
    by: GroupBy,
    rows: Vec<Row>,
    index: FastMap<(Arc<str>, Arc<str>, u64), usize>,
    /// Of a part read from one host: the programs its rows name, numbered as on it.
    host: Option<HostPrograms>,
    /// The programs of the hosts added, numbered for the run.
    programs: RunPrograms,
    /// Per host added, in order: its programs' numbers in the run.
    added: Vec<ProgramIds>,
}

impl Wire for OpRowsPart {
    // Its rows and programs; the rows' places by key are made anew from the rows (and a
    // part whose rows repeat a key, or whose costs (none, or one a program) do not match
    // their programs, is an error: the sums index both).
    fn put(&self, out: &mut Vec<u8>) {
        self.by.put(out);
        self.rows.put(out);
        self.host.put(out);
        self.programs.put(out);
        self.added.put(out);
    }
    fn take(bytes: &mut stepscope_model::wire::Bytes<'_>) -> Result<Self, stepscope_model::wire::WireError> {
        let bad = |what: &str| stepscope_model::wire::WireError(format!("its op rows {what}"));
        let by = GroupBy::take(bytes)?;
        let rows: Vec<Row> = Wire::take(bytes)?;
        let (host, programs, added) = Wire::take(bytes)?;
        let mut index = FastMap::default();
        for (at, r) in rows.iter().enumerate() {
            if !r.costs.is_empty() && r.costs.len() != r.acc.by_program.len() {
                return Err(bad("hold costs of other programs"));
            }
            let key = (r.acc.name.shared(), r.acc.module.shared(), r.acc.program.unwrap_or(NO_PROGRAM));
            if index.insert(key, at).is_some() {
                return Err(bad("name one op twice"));
            }
        }
        Ok(OpRowsPart { by, rows, index, host, programs, added })
    }
}

/// A row of an [`OpRowsPart`].
#[derive(Clone)]
struct Row {
    acc: Acc<'static>,
    /// Per program of the row (its `by_program`): its instruction's cost.
    costs: Vec<Option<ProgramCost>>,
    /// By line and stack: its program's stack for the op, where found.
    stack: Frames,
}
stepscope_model::wire_struct!(Row { acc, costs, stack });

impl OpRowsPart {
    /// No rows yet, grouped `by`.
    pub fn new(by: GroupBy) -> OpRowsPart {
        OpRowsPart {
            by,
            rows: Vec::new(),
            index: FastMap::default(),
            host: None,
            programs: RunPrograms::default(),
            added: Vec::new(),
        }
    }

    /// The rows by op of `profile` (the op profile's sums, before [`ops`] is cached).
    pub fn of(profile: &Profile) -> OpRowsPart {
        OpRowsPart::grouped(profile, GroupBy::Op, 0)
    }

    /// The rows of `profile` grouped `by`, scopes cut at `scope_depth`.
    pub fn grouped(profile: &Profile, by: GroupBy, scope_depth: usize) -> OpRowsPart {
        OpRowsPart::grouped_within(profile, by, scope_depth, None)
    }

    /// [`OpRowsPart::grouped`]; with `span`, of the executions that started in it only
    /// (as [`ops_within`]).
    /// Of one host, that host's part ([`OpRowsPart::of_host`], to add to a run's); of
    /// several, their parts added host by host, as a run read a host at a time adds them.
    pub fn grouped_within(profile: &Profile, by: GroupBy, scope_depth: usize, span: Option<(i64, i64)>) -> OpRowsPart {
        if profile.hosts.len() == 1 {
            return OpRowsPart::of_host(profile, 0, (by, scope_depth, span));
        }
        let mut part = OpRowsPart::new(by);
        for h in 0..profile.hosts.len() {
            part.add(OpRowsPart::of_host(profile, h, (by, scope_depth, span)));
        }
        part
    }

    /// The rows of host `host` of `profile`, grouped as [`OpRowsPart::grouped_within`],
    /// each row's costs and stack from the HLO of that host only (as the host read alone
    /// has them), with the programs they name.
    fn of_host(profile: &Profile, host: usize, grouping: (GroupBy, usize, Option<(i64, i64)>)) -> OpRowsPart {
        let (by, scope_depth, span) = grouping;
        let hlo = profile.hlo_modules();
        let mut part = OpRowsPart::new(by);
        let costed = matches!(by, GroupBy::Op | GroupBy::Line | GroupBy::Stack);
        for a in summed(profile, hlo, (by, scope_depth, span), Some(host)) {
            let costs = if costed { program_costs(hlo, &a, true, false) } else { Vec::new() };
            let stack = matches!(by, GroupBy::Line | GroupBy::Stack).then(|| acc_stack(hlo, &a, false)).flatten();
            part.push(Row { acc: a.owned(), costs, stack });
        }
        let named = part.rows.iter().flat_map(|r| programs_named(&r.acc, by));
        part.host = Some(HostPrograms::of(&profile.hosts[host].host, &hlo[host], named));
        part
    }

    /// Per row of `other` (one host's part, or none's: [`OpRowsPart::new`]), in its
    /// order: its index among this part's rows once added. Its programs are numbered for
    /// the run here, after the hosts already added.
    pub fn add(&mut self, other: OpRowsPart) -> Vec<usize> {
        let ids = other.host.as_ref().map(|h| self.programs.add(h)).unwrap_or_default();
        let by = self.by;
        let at = (other.rows.into_iter())
            .map(|mut row| {
                renumber(&mut row.acc, by, &ids);
                self.push(row)
            })
            .collect();
        self.added.push(ids);
        at
    }

    /// The programs' numbers in the run of the `k`-th host added: for reading that
    /// host's events (numbered as on the host) against the run's rows.
    pub fn host_ids(&self, k: usize) -> Option<&ProgramIds> {
        self.added.get(k)
    }

    fn push(&mut self, Row { acc: a, costs, stack }: Row) -> usize {
        let key = (a.name.shared(), a.module.shared(), a.program.unwrap_or(NO_PROGRAM));
        match self.index.get(&key) {
            Some(&at) => {
                let row = &mut self.rows[at];
                // Costs stay beside their programs: new programs are added in the
                // order `merge` adds them.
                for (&(p, _), c) in a.by_program.iter().zip(costs) {
                    match row.acc.by_program.iter().position(|(q, _)| *q == p) {
                        Some(k) => row.costs[k] = row.costs[k].or(c),
                        None => {
                            row.acc.by_program.push((p, 0));
                            row.costs.push(c);
                        }
                    }
                }
                row.stack = row.stack.take().or(stack);
                row.acc.merge(a);
                at
            }
            None => {
                self.index.insert(key, self.rows.len());
                self.rows.push(Row { acc: a, costs, stack });
                self.rows.len() - 1
            }
        }
    }

    /// How many rows it has.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// True where it has no rows.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Row `at`'s (module, name, program).
    pub fn key(&self, at: usize) -> (&str, &str, Option<u64>) {
        let a = &self.rows[at].acc;
        (&a.module, &a.name, a.program)
    }

    /// Row `at`'s program as its finished row shows it: its number, and the host of a
    /// program kept apart from an earlier host's of its name and number
    /// ([`RunPrograms::apart`]).
    pub fn shown_program(&self, at: usize) -> (Option<u64>, Option<&str>) {
        match self.rows[at].acc.program {
            Some(run) => match self.programs.apart(run) {
                Some((number, host)) => (Some(number), Some(host)),
                None => (Some(run), None),
            },
            None => (None, None),
        }
    }

    /// Per row: its FLOPs per event once finished ([`crate::roofline::flops_per_event`]),
    /// where it has FLOPs.
    pub fn flops_per_event(&self) -> Vec<Option<f64>> {
        (self.rows.iter())
            .map(|row| {
                let mut a = row.acc.clone();
                apply_costs(&mut a, &row.costs);
                a.flops.filter(|&f| f > 0).map(|f| f as f64 / a.count.max(1) as f64)
            })
            .collect()
    }

    /// The op profile of the rows added.
    pub fn finish(self) -> Ops {
        let by = self.by;
        let programs = self.programs;
        let rows = self.rows.into_iter().map(|mut row| {
            apply_costs(&mut row.acc, &row.costs);
            (row.acc, row.stack)
        });
        if matches!(by, GroupBy::Line | GroupBy::Stack) {
            let (accs, stacks) = by_source(rows.collect(), by);
            return finish(accs, stacks, by, &programs);
        }
        finish(rows.map(|(a, _)| a).collect(), Vec::new(), by, &programs)
    }
}

/// The module of a row's programs: by op, line and stack, the row's module; by
/// module, the row itself. Rows of other groupings are no one module's.
fn row_module<'r>(a: &'r Acc, by: GroupBy) -> Option<&'r str> {
    match by {
        GroupBy::Op | GroupBy::Line | GroupBy::Stack => Some(&a.module),
        GroupBy::Module => Some(&a.name),
        GroupBy::Category | GroupBy::Scope => None,
    }
}

/// The programs a row sums, (number, module), where they are one module's.
fn programs_named<'r>(a: &'r Acc, by: GroupBy) -> impl Iterator<Item = (u64, &'r str)> {
    let module = row_module(a, by);
    (a.by_program.iter()).filter_map(move |&(p, _)| Some((p, module?))).filter(|&(p, _)| p != NO_PROGRAM)
}

/// Gives a host's row the run's numbers of its programs (`ids`).
fn renumber(a: &mut Acc, by: GroupBy, ids: &ProgramIds) {
    if ids.is_empty() {
        return;
    }
    let Some(module) = row_module(a, by).map(Arc::<str>::from) else { return };
    a.program = a.program.map(|p| ids.run(p, &module));
    for (p, _) in &mut a.by_program {
        if *p != NO_PROGRAM {
            *p = ids.run(*p, &module);
        }
    }
}

fn op_profile(profile: &Profile, by: GroupBy, scope_depth: usize, span: Option<(i64, i64)>) -> Ops {
    if profile.hosts.len() > 1 {
        // Host by host, each row's costs and stack its first host's, as a run read a
        // host at a time sums them: the op profile is the same read either way.
        let part = OpRowsPart::grouped_within(profile, by, scope_depth, span);
        if (by, scope_depth, span) == (GroupBy::Op, 0, None) {
            profile.memo().ensure(RunProgramIds, || Arc::new(part.added.clone()));
        }
        return part.finish();
    }
    let hlo = profile.hlo_modules();
    let mut accs = summed(profile, hlo, (by, scope_depth, span), None);
    if matches!(by, GroupBy::Op | GroupBy::Line | GroupBy::Stack) {
        for a in &mut accs {
            let costs = program_costs(hlo, a, false, true);
            apply_costs(a, &costs);
        }
    }
    let mut stacks = Vec::new();
    if matches!(by, GroupBy::Line | GroupBy::Stack) {
        let with_stacks = (accs.into_iter())
            .map(|a| {
                let stack = acc_stack(hlo, &a, true);
                (a, stack)
            })
            .collect();
        (accs, stacks) = by_source(with_stacks, by);
    }
    finish(accs, stacks, by, &RunPrograms::default())
}

/// The key of a run's [`run_program_ids`] in its profile's memo.
#[derive(PartialEq)]
struct RunProgramIds;

/// Per host of `profile`: its programs' numbers in the run, as the op profile by op
/// numbers them (empty for one host: its own numbers are the run's).
pub fn run_program_ids(profile: &Profile) -> Arc<Vec<ProgramIds>> {
    if profile.hosts.len() < 2 {
        return Arc::default();
    }
    // Kept by the op profile by op as it is made.
    warm(profile);
    profile
        .memo()
        .get_or_insert(RunProgramIds, || Arc::new(OpRowsPart::grouped_within(profile, GroupBy::Op, 0, None).added))
}

/// The op profile of summed rows (with their stacks, by line and stack), their
/// programs numbered as `programs` numbered them for the run.
fn finish(accs: Vec<Acc>, stacks: Vec<Frames>, by: GroupBy, programs: &RunPrograms) -> Ops {
    let op_time_ps = sum_ps(accs.iter().map(|a| a.self_ps));
    let mut rows: Vec<OpRow> = accs.into_iter().map(|a| row(a, op_time_ps, by)).collect();
    for (r, s) in rows.iter_mut().zip(stacks) {
        r.stack = s;
    }
    match by {
        GroupBy::Module => name_programs(&mut rows, programs),
        GroupBy::Op => label_programs(&mut rows, programs),
        _ => {}
    }
    for r in &mut rows {
        r.program_host = r.program_id.and_then(|p| programs.apart(p)).map(|(_, host)| host.to_string());
        r.program_id = r.program_id.map(|p| programs.shown(p));
    }
    rows.sort_by(|a, b| b.self_ps.cmp(&a.self_ps).then(b.total_ps.cmp(&a.total_ps)).then(a.name.cmp(&b.name)));
    Ops { schema: "stepscope.ops/1", by, op_time_ps, ops: rows }
}

/// The op profile's rows before they become [`OpRow`]s: summed per chunk of a
/// device's ops in parallel, then joined chunk by chunk in order. With `span`, of the
/// executions that started in it only; with `host`, of that host's devices only.
fn summed<'p>(
    profile: &'p Profile,
    hlo: &[HloModules],
    (by, scope_depth, span): (GroupBy, usize, Option<(i64, i64)>),
    host: Option<usize>,
) -> Vec<Acc<'p>> {
    let mut devices = profile.devices();
    devices.retain(|d| host.is_none_or(|h| d.host_index == h));
    // Each GPU's kernel launches tell its op executions apart (read before going parallel).
    let executions: Vec<Executions> =
        devices.iter().map(|d| stepscope_model::profile::executions(profile, d)).collect();
    devices.par_iter().for_each(|d| {
        d.cached_ops();
    });
    // XLA:CPU: the events that continue an execution already met (another piece of
    // the same run of the op on another thread), per device.
    let pieces: Vec<Vec<usize>> = devices.par_iter().map(|d| later_pieces(d)).collect();
    // Rows are summed as occurrences stream by (nothing is kept per occurrence), per
    // chunk of a device's ops in parallel, then chunk by chunk in order: a row's
    // first occurrence, which decides its place among equal rows, stays first.
    let chunks: Vec<(usize, std::ops::Range<usize>)> =
        devices.iter().enumerate().flat_map(|(di, d)| chunks(d).into_iter().map(move |r| (di, r))).collect();
    let parts: Vec<Vec<(Key, Acc)>> = chunks
        .into_par_iter()
        .map(|(di, range)| {
            let d = &devices[di];
            let grouping = Grouping { by, scope_depth, span };
            let rows = chunk_rows(d, &hlo[d.host_index], (&executions[di], &pieces[di]), range.clone(), grouping);
            release_chunk(d, range);
            rows
        })
        .collect();
    let mut index: FastMap<Key, usize> = FastMap::default();
    let mut accs: Vec<Acc> = Vec::new();
    for (key, acc) in parts.into_iter().flatten() {
        match index.get(&key) {
            Some(&at) => accs[at].merge(acc),
            None => {
                index.insert(key, accs.len());
                accs.push(acc);
            }
        }
    }
    accs
}

/// One op event as the op profile counts it: an XLA op's event (CPU, TPU) or one
/// kernel of an op (GPU), with its own time and self time.
#[derive(Clone, Debug)]
pub struct OpEvent<'a> {
    pub host: &'a str,
    pub device: &'a str,
    pub program_id: Option<u64>,
    pub module: &'a str,
    pub op: &'a str,
    pub category: &'a str,
    pub start_ps: i64,
    /// Its own time ([`crate::OpEvent::op_ps`]: an XLA:CPU op until its pool work ended).
    pub duration_ps: i64,
    pub self_ps: i64,
    pub flops: Option<u64>,
    pub bytes_accessed: Option<u64>,
}

/// Calls `f` with every op event of every device, device by device and line by line,
/// in the order the op profile sums them: its rows by op are their sums by (program,
/// module, op). Nothing is kept per event.
pub fn for_each_op_event(profile: &Profile, mut f: impl FnMut(&OpEvent)) {
    let hlo = profile.hlo_modules();
    for d in profile.devices().iter() {
        let ops = d.cached_ops();
        for range in chunks(d) {
            each_occurrence(d, &hlo[d.host_index], range.clone(), false, |o| {
                f(&OpEvent {
                    host: d.host,
                    device: &d.name,
                    program_id: o.program,
                    module: &ops.names[o.ids.1 as usize],
                    op: &ops.names[o.ids.0 as usize],
                    category: o.category,
                    start_ps: ops.recs[o.rec].start_ps(d.plane),
                    duration_ps: o.op_ps,
                    self_ps: o.self_ps,
                    flops: o.flops,
                    bytes_accessed: o.bytes,
                })
            });
            release_chunk(d, range);
        }
    }
}

/// One op of one program with the Python stack that made it (see
/// [`crate::source::op_stack`]): what a flame graph of device time is made of.
#[derive(Clone, Debug, Serialize)]
pub struct OpStack {
    pub op: String,
    pub module: String,
    pub category: String,
    pub self_ps: i64,
    /// Outermost first; empty where the module records no source for the op.
    pub stack: Vec<SourceFrame>,
}

/// Every op of every program with its self time and Python stack, by self time.
/// The same sums `ops --by stack` regroups.
pub fn op_stacks(profile: &Profile) -> Vec<OpStack> {
    let hlo = profile.hlo_modules();
    let mut out: Vec<OpStack> = summed(profile, hlo, (GroupBy::Stack, 0, None), None)
        .into_iter()
        .map(|a| OpStack {
            stack: acc_stack(hlo, &a, true).unwrap_or_default(),
            op: a.name.to_string(),
            module: a.module.to_string(),
            category: if a.one_category { a.category.to_string() } else { String::new() },
            self_ps: a.self_ps,
        })
        .collect();
    out.sort_by(|a, b| b.self_ps.cmp(&a.self_ps).then(a.op.cmp(&b.op)));
    out
}

/// The HLO instruction of a row by op in program `program` (where it has one): in the
/// HLO of the host that first ran it, else, where `any_host`, in any host's.
fn acc_instruction<'h>(
    hlo: &'h [HloModules],
    a: &Acc,
    program: Option<u64>,
    any_host: bool,
) -> Option<(&'h stepscope_xspace::hlo::HloModule, &'h stepscope_xspace::hlo::HloInstruction)> {
    let program = program.filter(|&p| p != NO_PROGRAM);
    let own = hlo.get(a.host..=a.host).unwrap_or_default();
    let found = instruction(own, &a.name, &a.module, program);
    let anywhere = any_host && hlo.len() > 1;
    found.or_else(|| anywhere.then(|| instruction(hlo, &a.name, &a.module, program)).flatten())
}

/// The stack of a row by op and program, from its program's HLO ([`acc_instruction`]).
fn acc_stack(hlo: &[HloModules], a: &Acc, any_host: bool) -> Frames {
    let (m, i) = acc_instruction(hlo, a, a.program, any_host)?;
    Some(source::op_stack(m, i)).filter(|s| !s.is_empty())
}

/// One execution's cost of a row's instruction in one of its programs, from the HLO.
#[derive(Clone, Copy, Debug)]
struct ProgramCost {
    /// Whether the instruction multiplies matrices ([`OpRow::multiplies_matrices`]).
    matrix: bool,
    flops: u64,
    bytes: u64,
    /// The type its roof is chosen by: a matrix op's inputs' (a bf16 dot may write f32).
    element_type: i32,
}
stepscope_model::wire_struct!(ProgramCost { matrix, flops, bytes, element_type });

/// Per program of a row by op (its `by_program`, in order): its instruction's cost,
/// where the HLO holds it. The FLOPs and bytes are looked up only where `all` or the
/// row needs them ([`apply_costs`]).
fn program_costs(hlo: &[HloModules], a: &Acc, all: bool, any_host: bool) -> Vec<Option<ProgramCost>> {
    let needed = all || !(a.flops.is_some_and(|f| f > 0) || a.is_async);
    (a.by_program.iter())
        .map(|&(p, _)| {
            let (m, i) = acc_instruction(hlo, a, Some(p), any_host)?;
            let hero = crate::cost::matrix_instruction(m, i);
            let matrix = hero.is_some();
            let c = if needed { crate::cost::cost(m, i) } else { Default::default() };
            let input = m.operands(hero.unwrap_or(i)).next().filter(|_| matrix);
            let element_type = input.map_or(i.shape.element_type, |o| o.shape.element_type);
            Some(ProgramCost { matrix, flops: c.flops, bytes: c.bytes, element_type })
        })
        .collect()
}

/// A row by op whose events carry no `flops` / `bytes_accessed` gets them from its HLO
/// (`costs`, per program: [`program_costs`]): one execution's times its executions; on
/// a known GPU its roof by the op's type and whether it multiplies matrices (its first
/// program's instruction).
fn apply_costs(a: &mut Acc, costs: &[Option<ProgramCost>]) {
    let found: Vec<(&ProgramCost, u64)> =
        a.by_program.iter().zip(costs).filter_map(|(&(_, n), c)| c.as_ref().map(|c| (c, n))).collect();
    let Some(&(first, _)) = found.first() else { return };
    a.matrix = Some(first.matrix);
    if a.flops.is_some_and(|f| f > 0) || a.is_async {
        return;
    }
    let (mut flops, mut bytes) = (0u64, 0u64);
    for &(c, n) in &found {
        flops = flops.saturating_add(c.flops.saturating_mul(n));
        bytes = bytes.saturating_add(c.bytes.saturating_mul(n));
    }
    a.flops = Some(flops);
    if a.bytes.is_none_or(|b| b == 0) {
        a.bytes = Some(bytes);
    }
    if let Some(g) = a.peaks.gpu {
        a.peaks.flops_per_s = Some(g.roof(first.element_type, first.matrix));
    }
}

/// A row's Python frames, where it has them.
type Frames = Option<Vec<SourceFrame>>;

/// Rows by op and program, each with its stack (from its program's HLO, any host's:
/// [`acc_stack`]), regrouped by the Python source that made each op: its user frame
/// (by line) or whole stack (by stack). Ops without one share the row [`NO_SOURCE`].
/// Returns the rows and each row's frames.
fn by_source(accs: Vec<(Acc<'_>, Frames)>, by: GroupBy) -> (Vec<Acc<'_>>, Vec<Frames>) {
    let mut index: FastMap<String, usize> = FastMap::default();
    let mut out: Vec<(Acc, Frames)> = Vec::new();
    for (mut a, stack) in accs {
        let frames = match (by, stack) {
            (GroupBy::Line, Some(s)) => source::user_frame(&s).map(|f| vec![f.clone()]),
            (_, s) => s,
        };
        let label = match &frames {
            None => NO_SOURCE.to_string(),
            Some(f) if by == GroupBy::Line => f[0].location(),
            Some(f) => f.iter().map(SourceFrame::folded).collect::<Vec<_>>().join(";"),
        };
        match index.get(&label) {
            Some(&at) => {
                let first = &mut out[at].0;
                if *first.module != *a.module {
                    first.module = Text::Borrowed("");
                }
                first.merge(a)
            }
            None => {
                index.insert(label.clone(), out.len());
                a.name = Text::Shared(label.into());
                a.program = None;
                a.command_buffer = None;
                out.push((a, frames));
            }
        }
    }
    out.into_iter().unzip()
}

/// Module rows whose name several programs share get the program's id in their
/// name, `jit_dot(49)`.
fn name_programs(rows: &mut [OpRow], programs: &RunPrograms) {
    let shared = shared_by_programs(rows, |r| (r.name.as_str(), ""), |r| r.program_id);
    for (r, shared) in rows.iter_mut().zip(shared) {
        if let Some(id) = r.program_id.filter(|&id| shared || programs.is_apart(id)) {
            r.name = programs.label(&r.name, id);
        }
    }
}

/// Rows by op whose name and module several programs share (a jitted function compiled
/// for several shapes, or two functions of one name) get their program,
/// `jit_dot(49)`, in [`OpRow::program`]: one row per program, told apart.
fn label_programs(rows: &mut [OpRow], programs: &RunPrograms) {
    let shared = shared_by_programs(rows, |r| (r.name.as_str(), r.module.as_str()), |r| r.program_id);
    for (r, shared) in rows.iter_mut().zip(shared) {
        if let Some(id) = r.program_id.filter(|&id| shared || programs.is_apart(id)) {
            r.program = Some(programs.label(&r.module, id));
        }
    }
}

/// Per row: whether rows of several programs (`program`) share its `key` (an op
/// profile's rows, a kernel table's).
pub(crate) fn shared_by_programs<'r, T>(
    rows: &'r [T],
    key: impl Fn(&'r T) -> (&'r str, &'r str),
    program: impl Fn(&T) -> Option<u64>,
) -> Vec<bool> {
    let mut programs: FastMap<(&str, &str), Vec<u64>> = FastMap::default();
    for r in rows {
        if let Some(p) = program(r) {
            let seen = programs.entry(key(r)).or_default();
            if !seen.contains(&p) {
                seen.push(p);
            }
        }
    }
    rows.iter().map(|r| programs.get(&key(r)).is_some_and(|p| p.len() > 1)).collect()
}

/// A row's key: its name (op, category, module or scope); by op, its module; by op,
/// module, line and stack, its program (else [`NO_PROGRAM`]).
type Key<'a> = (Text<'a>, &'a str, u64);

/// A key's program where rows are not split by program.
const NO_PROGRAM: u64 = u64::MAX;

/// Ranges of a device's ops (in [`each_occurrence`]'s order) that can be summed
/// apart: lines, since self time comes from nesting on a line, and long lines cut
/// where no op spans the cut ([`cut_line`]).
fn chunks(d: &Device) -> Vec<std::ops::Range<usize>> {
    let recs = &d.cached_ops().recs;
    let mut out = Vec::new();
    let mut from = 0;
    for i in 1..=recs.len() {
        if i == recs.len() || recs[i].line != recs[from].line {
            cut_line(d, from..i, &mut out);
            from = i;
        }
    }
    out
}

/// Gives back the file pages of the stats of a chunk's ops (one line's,
/// [`chunks`]) once they are summed.
fn release_chunk(d: &Device, range: std::ops::Range<usize>) {
    let recs = &d.cached_ops().recs;
    let (Some(first), Some(last)) = (recs.get(range.start), range.end.checked_sub(1).and_then(|l| recs.get(l))) else {
        return;
    };
    if let Some(line) = d.plane.lines.get(first.line as usize).filter(|_| first.line == last.line) {
        line.release_stats(first.index.min(last.index) as usize..first.index.max(last.index) as usize + 1);
    }
}

/// Ops of one line summed as one chunk by [`op_profile`] (a GPU stream holds
/// hundreds of thousands). Debug builds (the tests' binaries) cut the fixtures' lines
/// too, so the joining of chunks is checked by every test that reads an op profile.
const OP_CHUNK: usize = if cfg!(debug_assertions) { 1 << 6 } else { 1 << 16 };

/// Adds to `out` the ops `range` of one line, cut into chunks of about [`OP_CHUNK`]
/// where they are in time order, no op before the cut ends after it starts (so no op
/// nests in one of another chunk) and the ops on either side are not one op's (so no
/// execution's kernels are split: [`same_execution`]); left whole when they are not in
/// time order.
fn cut_line(d: &Device, range: std::ops::Range<usize>, out: &mut Vec<std::ops::Range<usize>>) {
    if range.len() < 2 * OP_CHUNK {
        out.push(range);
        return;
    }
    let ops = d.cached_ops();
    let first = out.len();
    let (mut from, mut last_start, mut max_end) = (range.start, i64::MIN, i64::MIN);
    for i in range.clone() {
        let (_, start, end, _) = ops.span(d.plane, i);
        if start < last_start {
            out.truncate(first);
            out.push(range);
            return;
        }
        let same_op =
            i > range.start && (ops.recs[i].name, ops.recs[i].module) == (ops.recs[i - 1].name, ops.recs[i - 1].module);
        if i - from >= OP_CHUNK && start >= max_end && !same_op {
            out.push(from..i);
            from = i;
        }
        (last_start, max_end) = (start, max_end.max(end));
    }
    out.push(from..range.end);
}

/// How rows are made: grouped `by`, scopes cut at `scope_depth`, of the executions
/// that started in `span` where there is one.
#[derive(Clone, Copy)]
struct Grouping {
    by: GroupBy,
    scope_depth: usize,
    span: Option<(i64, i64)>,
}

/// The rows of the ops `range` of `d`, in first-occurrence order.
fn chunk_rows<'a>(
    d: &Device<'a>,
    hlo: &HloModules,
    (executions, later): (&Executions, &[usize]),
    range: std::ops::Range<usize>,
    Grouping { by, scope_depth, span }: Grouping,
) -> Vec<(Key<'a>, Acc<'a>)> {
    let mut index: FastMap<Key<'a>, usize> = FastMap::default();
    let mut rows: Vec<(Key<'a>, Acc<'a>)> = Vec::new();
    let mut cut: FastMap<Text, Arc<str>> = FastMap::default();
    // Rows by this device's interned (name, module) ids and the key's program, for
    // the groupings that need nothing else: no string hashing per occurrence.
    let mut by_ids: FastMap<(u32, u32, u64), usize> = FastMap::default();
    // In front of `by_ids`, per name id (module id by module): the other id, the
    // program and the row last met with them, nearly always the next occurrence's too.
    const NONE: (u32, u64, usize) = (u32::MAX, NO_PROGRAM, usize::MAX);
    let (names, recs) = (&d.cached_ops().names, &d.cached_ops().recs);
    let mut recent: Vec<(u32, u64, usize)> = vec![NONE; names.len()];
    let peaks = crate::peaks::of(d);
    // GPU kernels: the previous occurrence's op, stream and execution, to count the
    // kernels of one execution of an XLA op once ([`same_execution`]).
    let kernels = d.source == stepscope_model::OpSource::Kernels;
    let mut previous: Option<((u32, u32, u32), Option<Execution>)> = None;
    each_occurrence(d, hlo, range, by == GroupBy::Scope, |o| {
        if let Some((from, to)) = span {
            let start = recs[o.rec].start_ps(d.plane);
            if start < from || start >= to {
                return;
            }
        }
        let at = ((o.ids.0, o.ids.1, o.line), kernels.then(|| executions.of(o.corr, o.ids.0)).flatten());
        let continues = previous.is_some_and(|p| same_execution(p, at, &names[o.ids.1 as usize]));
        let piece = !later.is_empty() && later.binary_search(&o.rec).is_ok();
        let execution = u64::from(!(piece || kernels && continues));
        previous = Some(at);
        let program = match by {
            GroupBy::Op | GroupBy::Module | GroupBy::Line | GroupBy::Stack => o.program.unwrap_or(NO_PROGRAM),
            GroupBy::Category | GroupBy::Scope => NO_PROGRAM,
        };
        let ids = match by {
            GroupBy::Op | GroupBy::Line | GroupBy::Stack => Some((o.ids.0, o.ids.1, program)),
            GroupBy::Module => Some((u32::MAX, o.ids.1, program)),
            GroupBy::Category | GroupBy::Scope => None,
        };
        // (slot in `recent`, the id it must hold)
        let slot = ids.map(|(n, m, _)| if by == GroupBy::Module { (m as usize, n) } else { (n as usize, m) });
        if let Some((slot, tag)) = slot {
            let hit = match recent.get(slot) {
                Some(&(t, p, at)) if t == tag && p == program && at != usize::MAX => Some(at),
                _ => ids.and_then(|ids| by_ids.get(&ids)).copied(),
            };
            if let Some(at) = hit {
                if let Some(r) = recent.get_mut(slot) {
                    *r = (tag, program, at);
                }
                rows[at].1.add(&o);
                rows[at].1.executions += execution;
                rows[at].1.executed(o.program.unwrap_or(NO_PROGRAM), execution);
                return;
            }
        }
        let (name, module) = (&*names[o.ids.0 as usize], &*names[o.ids.1 as usize]);
        let key = match by {
            GroupBy::Op | GroupBy::Line | GroupBy::Stack => (Text::Borrowed(name), module, program),
            GroupBy::Category => (o.category.clone(), "", program),
            GroupBy::Module => (Text::Borrowed(module), "", program),
            GroupBy::Scope => {
                let c = match cut.get(o.scope) {
                    Some(c) => c.clone(),
                    None => {
                        let c: Arc<str> = cut_scope(o.scope, scope_depth).into();
                        cut.insert(o.scope.clone(), c.clone());
                        c
                    }
                };
                (Text::Shared(c), "", program)
            }
        };
        let at = match index.get(&key) {
            Some(&at) => at,
            None => {
                index.insert(key.clone(), rows.len());
                let mut acc = Acc::new(key.0.clone(), key.1, &o, peaks, d.host_index);
                acc.program = Some(program).filter(|&p| p != NO_PROGRAM);
                if by == GroupBy::Op {
                    acc.command_buffer =
                        d.cached_ops().renamed.get(&o.ids.0).map(|&was| Text::Borrowed(&names[was as usize]));
                }
                rows.push((key, acc));
                rows.len() - 1
            }
        };
        if let Some(ids) = ids {
            by_ids.insert(ids, at);
        }
        if let Some((slot, tag)) = slot {
            if let Some(r) = recent.get_mut(slot) {
                *r = (tag, program, at);
            }
        }
        rows[at].1.add(&o);
        rows[at].1.executions += execution;
        rows[at].1.executed(o.program.unwrap_or(NO_PROGRAM), execution);
    });
    rows
}

/// XLA:CPU: the op records (indexes, sorted) that continue an execution met before
/// them — one run of an op (`run_id`) that recorded several events, as a `sort` XLA:CPU
/// splits over threads does: each event after the first of its (op, program, run) is
/// no execution of its own. Found in two passes over the device's ops: the ops whose
/// first run recorded more than one event, then, for those alone, each event's run.
/// Empty elsewhere (GPU kernels have their own rule, TPU ops are one event each).
fn later_pieces(d: &Device) -> Vec<usize> {
    if d.source != stepscope_model::OpSource::HostOps {
        return Vec::new();
    }
    let ops = d.cached_ops();
    // Per name id: its first (module, run) and how many events that run recorded.
    let mut first: Vec<Option<(u32, i64, u32)>> = vec![None; ops.names.len()];
    for r in &ops.recs {
        let Some(run) = ops.run_id(r) else { continue };
        match &mut first[r.name as usize] {
            Some((m, run0, n)) if (*m, *run0) == (r.module, run) => *n += 1,
            Some(_) => {}
            slot @ None => *slot = Some((r.module, run, 1)),
        }
    }
    let split: Vec<bool> = first.iter().map(|f| f.is_some_and(|(_, _, n)| n > 1)).collect();
    if !split.contains(&true) {
        return Vec::new();
    }
    let mut seen: FastMap<(u32, u32, u32, i64), ()> = FastMap::default();
    let mut later = Vec::new();
    for (i, r) in ops.recs.iter().enumerate().filter(|(_, r)| split[r.name as usize]) {
        let Some(run) = ops.run_id(r) else { continue };
        if seen.insert((r.name, r.module, r.program, run), ()).is_some() {
            later.push(i);
        }
    }
    later
}

/// An op under its device's roofs: whether it is compute- or memory-bound, its roof
/// (the lesser of the compute peak and bandwidth × its FLOPs per byte) and how near it
/// came, percent.
pub(crate) struct Placed {
    pub bound: Option<&'static str>,
    pub roof: Option<f64>,
    pub roof_pct: Option<f64>,
}

/// Places an op of `flops` and `bytes` a run, running at `flops_per_s` and
/// `bytes_per_s`, under the peaks `peaks` (FLOP/s, bytes/s).
pub(crate) fn place(
    flops: Option<u64>,
    bytes: Option<u64>,
    flops_per_s: Option<f64>,
    bytes_per_s: Option<f64>,
    peaks: crate::peaks::UserPeaks,
) -> Placed {
    let bound = match (flops, bytes, peaks.flops_per_s, peaks.bytes_per_s) {
        (Some(f), Some(b), Some(pf), Some(pb)) if b > 0 => {
            Some(if f as f64 / b as f64 >= pf / pb { "compute" } else { "memory" })
        }
        (None, Some(_), _, Some(_)) => Some("memory"),
        _ => None,
    };
    let intensity = flops.zip(bytes).filter(|&(_, b)| b > 0).map(|(f, b)| f as f64 / b as f64);
    let roof = match (intensity, peaks.flops_per_s, peaks.bytes_per_s) {
        (Some(ai), Some(pf), Some(pb)) => Some(pf.min(ai * pb)),
        _ => None,
    };
    let roof_pct = match (flops_per_s, roof, bytes_per_s, peaks.bytes_per_s) {
        (Some(f), Some(r), _, _) if r > 0.0 => Some(100.0 * f / r),
        (None, _, Some(b), Some(pb)) if pb > 0.0 => Some(100.0 * b / pb),
        _ => None,
    };
    Placed { bound, roof, roof_pct }
}

fn row(a: Acc, op_time_ps: i64, by: GroupBy) -> OpRow {
    let (count, total_ps, self_ps) = (a.count, a.total_ps, a.self_ps);
    let flops = a.flops.filter(|&f| f > 0);
    let bytes = a.bytes.filter(|&b| b > 0);
    // Rates over the self time; async `-start`/`-done` halves only mark a transfer's ends.
    let secs = if a.is_async { 0.0 } else { self_ps as f64 / 1e12 };
    let flops_per_s = flops.filter(|_| secs > 0.0).map(|f| f as f64 / secs);
    let bytes_per_s = bytes.filter(|_| secs > 0.0).map(|b| b as f64 / secs);
    let intensity = flops.zip(bytes).map(|(f, b)| f as f64 / b as f64);
    let peaks = crate::peaks::UserPeaks { flops_per_s: a.peaks.flops_per_s, bytes_per_s: a.peaks.bytes_per_s };
    let Placed { bound, roof, roof_pct } = place(flops, bytes, flops_per_s, bytes_per_s, peaks);
    OpRow {
        name: a.name.to_string(),
        module: a.module.to_string(),
        category: match by {
            GroupBy::Category => String::new(),
            _ if a.one_category => a.category.to_string(),
            _ => String::new(),
        },
        count,
        executions: a.executions,
        total_ps,
        self_ps,
        // Per execution: a GEMM launched after its memset lasts its two kernels.
        avg_ps: match (a.executions, count) {
            (0, 0) => 0,
            (0, n) | (n, _) => total_ps / n as i64,
        },
        min_ps: if count > 0 { a.min_ps } else { 0 },
        max_ps: if count > 0 { a.max_ps } else { 0 },
        device_time_pct: if op_time_ps > 0 { 100.0 * self_ps as f64 / op_time_ps as f64 } else { 0.0 },
        flops,
        bytes_accessed: bytes,
        flops_per_s,
        bytes_per_s,
        bound,
        arithmetic_intensity: intensity,
        roof_flops_per_s: roof,
        roof_pct,
        multiplies_matrices: a.matrix,
        program_id: a.program,
        program: None,
        program_host: None,
        command_buffer: a.command_buffer.map(|c| c.to_string()),
        stack: None,
    }
}

/// What an op event's stats say, for the op profile.
#[derive(Clone, Copy)]
struct OpStats<'a> {
    program: Option<u64>,
    category: Option<&'a str>,
    /// What identifies the `tf_op` text: a ref, or a string's place in the file.
    tf_op_key: Option<(bool, Span)>,
    tf_op: Option<&'a str>,
    flops: Option<u64>,
    bytes: Option<u64>,
}

impl<'a> OpStats<'a> {
    /// Reads the stats (program_id, hlo_category, tf_op, flops, bytes_accessed) found
    /// for an event; `tf_op` only when `want_scope`.
    #[inline(always)]
    fn of(plane: &'a Plane, stats: [Option<Stat>; 5], want_scope: bool) -> OpStats<'a> {
        let [program, category, tf_op, flops, bytes] = stats;
        let num = |s: Option<Stat>| stat_u64(plane, s);
        // A `tf_op` that is no name stack (JAX on GPU tags every kernel `XlaModule:`)
        // says nothing: the HloProto's op name is read instead.
        let tf_op_text = tf_op.filter(|_| want_scope).and_then(|s| plane.stat_str(&s)).filter(|t| t.contains('/'));
        let tf_op = tf_op.filter(|_| tf_op_text.is_some());
        OpStats {
            program: num(program),
            category: category.and_then(|s| plane.stat_str(&s)),
            tf_op_key: tf_op.and_then(|s| match s.value() {
                StatValue::Ref(r) => Some((true, Span::source(u64::from(r), 0))),
                StatValue::Str(span) => Some((false, span)),
                _ => None,
            }),
            tf_op: tf_op_text,
            flops: num(flops),
            bytes: num(bytes),
        }
    }
}

/// Calls `f` with each of a device's op occurrences and its self time (per line, by
/// nesting), and its scope when `want_scope` (else the scope is empty). Where the
/// profile lacks `hlo_category` or `tf_op`, the module's HloProto supplies them (looked
/// up once per program, module and op name).
fn each_occurrence<'a>(
    d: &Device<'a>,
    hlo: &HloModules,
    range: std::ops::Range<usize>,
    want_scope: bool,
    mut f: impl FnMut(Occurrence<'a, '_>),
) {
    type FromHlo<'a> = (Option<Text<'a>>, Option<Text<'a>>);
    // Occurrences by line, start, longest first: the cached order, unless a line's
    // events were out of time order (then sorted, as indexes into the records).
    let ops = d.cached_ops();
    // Ops nest by their own events: an XLA:CPU op's pool tail (the wait until the pool
    // finished it) is its time, but the ops its thread ran meanwhile are not inside it.
    let nest = |i: usize| {
        let (line, start, length, op_ps) = ops.placed(d.plane, i);
        (line, start, length.saturating_sub(ops.tail_ps(i)), op_ps)
    };
    let (order, self_ps) = match self_times_if_sorted(range.len(), |k| nest(range.start + k)) {
        Some(self_ps) => (None, self_ps),
        None => {
            let mut order: Vec<u32> = (range.start as u32..range.end as u32).collect();
            order.sort_by_key(|&i| {
                let (line, start, length, _) = nest(i as usize);
                (line, start, std::cmp::Reverse(length))
            });
            let self_ps = self_times(order.len(), |k| nest(order[k] as usize));
            (Some(order), self_ps)
        }
    };
    let k = &d.keys;
    let tf_op = k.tf_op.filter(|_| want_scope);
    let look = d.plane.stat_lookup([k.program_id, k.hlo_category, tf_op, k.flops, k.bytes_accessed]);
    // Keyed by the device's interned name and module ids; `last` holds, per name id,
    // the key and entry it last used (nearly always the next one's too).
    let mut from_hlo: FastMap<(Option<u64>, u32, u32), usize> = FastMap::default();
    let mut infos: Vec<FromHlo> = Vec::new();
    let mut last: Vec<Option<(Option<u64>, u32, usize)>> = vec![None; ops.names.len()];
    let mut scopes: FastMap<&str, Text> = FastMap::default();
    let mut scopes_by_stat: FastMap<(bool, Span), Text> = FastMap::default();
    // Per event metadata: its place in `said_by_meta` (made at the first event that needs it).
    const NOT_YET: u32 = u32::MAX;
    let mut by_meta: Vec<u32> = Vec::new();
    let mut said_by_meta: Vec<OpStats> = Vec::new();
    for (k, self_ps) in self_ps.into_iter().enumerate() {
        let at = order.as_ref().map_or(range.start + k, |o| o[k] as usize);
        let rec = &ops.recs[at];
        let (name, module) = (&*ops.names[rec.name as usize], &*ops.names[rec.module as usize]);
        let line = &d.plane.lines[rec.line as usize];
        let i = rec.index as usize;
        // What the stats say. The record read the program, and whether the event holds
        // other keys itself; where it holds none (or only a scope, not asked for), the
        // rest is its metadata's, worked out once per event metadata.
        let rec_stats = ops.rec_stats(rec);
        let own = match rec_stats {
            RecStats::Program(_) if tf_op.is_none() => None,
            _ => d.plane.own_stats_of(&look, line, i),
        };
        let said = match own {
            Some(own) => OpStats::of(d.plane, d.plane.with_metadata_stats(&look, line.meta(i), own), want_scope),
            None => {
                let meta = line.meta(i);
                if by_meta.is_empty() {
                    by_meta = vec![NOT_YET; d.plane.event_meta.len()];
                }
                let mut said = match by_meta.get(meta as usize) {
                    Some(&at) if at != NOT_YET => said_by_meta[at as usize],
                    _ => {
                        let said =
                            OpStats::of(d.plane, d.plane.with_metadata_stats(&look, meta, [None; 5]), want_scope);
                        if let Some(at) = by_meta.get_mut(meta as usize) {
                            *at = said_by_meta.len() as u32;
                            said_by_meta.push(said);
                        }
                        said
                    }
                };
                if let RecStats::Program(program) = rec_stats {
                    said.program = program;
                }
                said
            }
        };
        let OpStats { program, category, tf_op_key, tf_op, flops, bytes } = said;
        // (category, scope) from the HloProto, for what the stats lack.
        let hlo_info = if category.is_none() || (want_scope && tf_op.is_none()) {
            let at = match last[rec.name as usize] {
                Some((p, m, at)) if p == program && m == rec.module => at,
                _ => {
                    let at = *from_hlo.entry((program, rec.name, rec.module)).or_insert_with(|| {
                        let hlo_module = program
                            .and_then(|p| hlo.by_program_id(p as i64))
                            .or_else(|| hlo.by_name(module).filter(|_| !module.is_empty()));
                        infos.push(match hlo_module.and_then(|m| m.instruction(name).map(|(_, inst)| (m, inst))) {
                            Some((m, inst)) => {
                                let scope = scope_of(inst.op_name.split(';').next().unwrap_or(""));
                                (Some(Text::Shared(m.category(inst).into())), Some(Text::Shared(scope.into())))
                            }
                            None => (None, None),
                        });
                        infos.len() - 1
                    });
                    last[rec.name as usize] = Some((program, rec.module, at));
                    at
                }
            };
            Some(at)
        } else {
            None
        };
        let hlo_info: Option<&FromHlo> = hlo_info.map(|at| &infos[at]);
        let borrowed_category;
        let category = match (category, hlo_info) {
            (Some(c), _) => {
                borrowed_category = Text::Borrowed(c);
                &borrowed_category
            }
            (None, Some((Some(c), _))) => c,
            (None, _) => {
                borrowed_category = Text::Borrowed(category_from_name(name));
                &borrowed_category
            }
        };
        let scope = match (tf_op, hlo_info) {
            (Some(t), _) => match tf_op_key {
                Some(key) => scopes_by_stat.entry(key).or_insert_with(|| Text::Shared(scope_of(t).into())),
                None => scopes.entry(t).or_insert_with(|| Text::Shared(scope_of(t).into())),
            },
            (None, Some((_, Some(s)))) if want_scope => s,
            (None, _) => &NO_SCOPE,
        };
        let ids = (rec.name, rec.module);
        let op_ps = ops.op_ps(d.plane, at);
        let corr = ops.correlation_id(rec);
        f(Occurrence { rec: at, op_ps, ids, line: rec.line, program, corr, self_ps, category, scope, flops, bytes });
    }
}

/// Per record of device `d`'s ops, whether `keep(category, scope)` holds for its op
/// (its category and name-stack scope as the op profile groups them; the scope is
/// read only when `want_scope`): which records a what-if edit of a category or a
/// scope scales.
pub(crate) fn recs_where(
    profile: &Profile,
    d: &Device,
    want_scope: bool,
    keep: impl Fn(&str, &str) -> bool,
) -> Vec<bool> {
    let n = d.cached_ops().recs.len();
    let mut out = vec![false; n];
    each_occurrence(d, &profile.hlo_modules()[d.host_index], 0..n, want_scope, |o| {
        out[o.rec] = keep(o.category, o.scope);
    });
    out
}

/// Self time of each of the `n` events `ev(0)`, `ev(1)`, … (sorted by line, start,
/// longest first; each given as (line, start, length, op time)): its op time minus the
/// op times of the events directly nested in it (on the timeline) on its line.
fn self_times(n: usize, ev: impl Fn(usize) -> (u32, i64, i64, i64)) -> Vec<i64> {
    self_times_checked::<false>(n, ev).unwrap_or_default()
}

/// [`self_times`] when the events are in that order, else `None`.
fn self_times_if_sorted(n: usize, ev: impl Fn(usize) -> (u32, i64, i64, i64)) -> Option<Vec<i64>> {
    self_times_checked::<true>(n, ev)
}

#[inline(always)]
fn self_times_checked<const CHECK: bool>(n: usize, ev: impl Fn(usize) -> (u32, i64, i64, i64)) -> Option<Vec<i64>> {
    let mut self_ps: Vec<i64> = Vec::with_capacity(n);
    // Open events: (index, line, end).
    let mut stack: Vec<(usize, u32, i64)> = Vec::new();
    let mut prev = (0, i64::MIN, std::cmp::Reverse(i64::MAX));
    for i in 0..n {
        let (line, start, length, op_ps) = ev(i);
        if CHECK {
            let key = (line, start, std::cmp::Reverse(length));
            if key < prev {
                return None;
            }
            prev = key;
        }
        let end = start.saturating_add(length);
        while let Some(&(_, top_line, top_end)) = stack.last() {
            if top_line == line && start < top_end && end <= top_end {
                break;
            }
            stack.pop();
        }
        if let Some(&(parent, ..)) = stack.last() {
            self_ps[parent] = self_ps[parent].saturating_sub(op_ps);
        }
        self_ps.push(op_ps);
        stack.push((i, line, end));
    }
    self_ps.iter_mut().for_each(|s| *s = (*s).max(0));
    Some(self_ps)
}

/// A category from an op's name when the profile has no `hlo_category`:
/// `add_add_fusion.3` → `fusion`, `copy.1` → `copy`.
pub fn category_from_name(name: &str) -> &str {
    let base = name.trim_start_matches('%');
    let base = match base.rfind('.') {
        Some(p) if base[p + 1..].chars().all(|c| c.is_ascii_digit()) => &base[..p],
        _ => base,
    };
    if base.ends_with("fusion") {
        "fusion"
    } else if base.starts_with("stream_executor::gpu::") {
        // XLA:GPU's autotuner while it compiles: `RedzoneChecker`, `DelayKernel`.
        "autotuning"
    } else if base.starts_with("command_buffer") {
        // GPU kernels run in a command buffer that no instruction of theirs claimed
        // (library kernels such as cuBLAS's; see `command_buffer.rs`).
        "command buffer"
    } else if base.starts_with("wrapped_") {
        base.strip_prefix("wrapped_").unwrap_or(base)
    } else {
        base
    }
}

/// The name-stack scope of a `tf_op` (JAX name stack), with transform wrappers
/// such as `jit(…)`, `jvp(…)`, `transpose(…)` opened and the primitive dropped:
/// `jit(train_step)/jvp(layer0/mlp)/dot_general` → `train_step/layer0/mlp`.
pub fn scope_of(tf_op: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for raw in tf_op.split('/') {
        let mut p = raw;
        // Strip `name(` prefixes (transforms) and trailing `)`.
        while let Some(open) = p.find('(') {
            let head = &p[..open];
            if head.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                p = &p[open + 1..];
            } else {
                break;
            }
        }
        let p = p.trim_end_matches(')');
        if !p.is_empty() {
            parts.push(p);
        }
    }
    parts.pop();
    // The first part is the jitted function; name scopes follow.
    parts.join("/")
}

fn cut_scope(scope: &str, depth: usize) -> String {
    if scope.is_empty() {
        return "(no scope)".to_string();
    }
    if depth == 0 {
        return scope.to_string();
    }
    scope.split('/').take(depth).collect::<Vec<_>>().join("/")
}

#[cfg(test)]
mod tests {
    use super::*;
    use stepscope_model::OpEvent;

    #[test]
    fn scopes() {
        assert_eq!(scope_of("jit(train_step)/jvp(layer0/mlp)/dot_general"), "train_step/layer0/mlp");
        assert_eq!(scope_of("jit(f)/transpose(jvp(layer1/attention))/mul"), "f/layer1/attention");
        assert_eq!(scope_of("dot_general"), "");
        assert_eq!(cut_scope("train_step/layer0/mlp", 2), "train_step/layer0");
    }

    #[test]
    fn categories() {
        assert_eq!(category_from_name("add_add_fusion.3"), "fusion");
        assert_eq!(category_from_name("copy.1"), "copy");
        assert_eq!(category_from_name("wrapped_broadcast"), "broadcast");
        assert_eq!(
            category_from_name(
                "stream_executor::gpu::(anonymous namespace)::DelayKernel(stream_executor::GpuSemaphoreState)"
            ),
            "autotuning"
        );
        assert_eq!(category_from_name("command_buffer_1"), "command buffer");
    }

    #[test]
    fn nested_self_time() {
        let ev = |start, dur| OpEvent {
            name: "x",
            module: "",
            line: 0,
            index: 0,
            start_ps: start,
            duration_ps: dur,
            op_ps: dur,
        };
        // A while loop [0,100) with two body ops, then a sibling.
        let evs = [ev(0, 100), ev(10, 20), ev(40, 30), ev(100, 5)];
        let span = |i: usize| (evs[i].line, evs[i].start_ps, evs[i].duration_ps, evs[i].op_ps);
        assert_eq!(self_times(evs.len(), span), vec![50, 20, 30, 5]);
        assert_eq!(self_times_if_sorted(evs.len(), span), Some(vec![50, 20, 30, 5]));
        // Out of order: a later start first, a shorter event before a longer one at
        // the same start, a later line first.
        for evs in [[ev(10, 20), ev(0, 100)], [ev(0, 20), ev(0, 100)], [OpEvent { line: 1, ..ev(0, 5) }, ev(50, 5)]] {
            let span = |i: usize| (evs[i].line, evs[i].start_ps, evs[i].duration_ps, evs[i].op_ps);
            assert_eq!(self_times_if_sorted(2, span), None);
        }
        // Equal keys are in order.
        let evs = [ev(0, 10), ev(0, 10)];
        let span = |i: usize| (evs[i].line, evs[i].start_ps, evs[i].duration_ps, evs[i].op_ps);
        assert_eq!(self_times_if_sorted(2, span), Some(vec![0, 10]));
    }
}
