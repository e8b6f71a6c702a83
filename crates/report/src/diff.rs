//! Run-to-run diff: step time, the breakdown, then ops and kernels added, removed,
//! slower and faster, ranked by their effect on step time, and the memory peak.
//!
//! Ops match by name and module first; ops left over match by category and the HLO
//! instruction's JAX name stack and shape (XLA renames fusions between builds:
//! `fusion.12` in one run may be `fusion.15` in the next). [`diff_by`] compares the op
//! profile grouped another way instead (name-stack scope, Python line, …): rows match
//! by name. The user's host scopes are compared by path. Each change sits beside the
//! noise of the step times, so a change can be told from jitter.

use std::collections::HashMap;

use serde::Serialize;

use crate::side::Side;
use stepscope_analysis::ops::{GroupBy, OpRow};
use stepscope_analysis::overview::{Breakdown, Overview};
use stepscope_analysis::{kernels, whatif};
use stepscope_model::stats::Distribution;
use stepscope_model::Profile;

/// The diff of run B against run A.
#[derive(Clone, Debug, Serialize)]
pub struct Diff {
    pub schema: &'static str,
    pub a: RunSide,
    pub b: RunSide,
    pub step_time: StepTimeDiff,
    pub breakdown: Vec<PartDiff>,
    /// How `ops` rows are grouped (`op` unless asked otherwise).
    pub by: GroupBy,
    /// Ranked by |delta_per_step_ps|, largest first.
    pub ops: Vec<OpDiff>,
    /// The `ops` rows found in one run only, summed (before `--top` cuts the list).
    pub only_in_a: OnlyIn,
    pub only_in_b: OnlyIn,
    pub kernels: Vec<OpDiff>,
    /// The user's host scopes (`stepscope scopes`) by path, total time per step,
    /// ranked as `ops`. Empty where neither run has any.
    pub scopes: Vec<OpDiff>,
    pub memory: MemoryDiff,
    /// The share of either run's op time (grouped `by`) in rows both ran, the larger of
    /// the two ([`matched_op_time_pct`]).
    pub matched_op_time_pct: f64,
    /// Whether the runs ran one program: `matched_op_time_pct` is at least
    /// [`SAME_PROGRAM_MIN_PCT`]. Where not, their difference is not a change of one
    /// program, and no verdict is drawn from it.
    pub same_program: bool,
    /// `diff --whatif EDIT`: A's steps replayed with the edit, beside B as measured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub whatif: Option<WhatifBeside>,
}

/// A what-if of run A beside run B as measured (`diff A B --whatif EDIT`): whether the
/// change B made is worth what the model projects for it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct WhatifBeside {
    /// The edit, in `stepscope whatif`'s words.
    pub edit: String,
    /// A's median replayed step, and with the edit ([`whatif::Projection`]).
    pub a_step_ps: i64,
    pub projected_step_ps: i64,
    pub projected_gain_pct: f64,
    /// B's median step as measured, and what it gained on A's (of A's median).
    pub b_step_ps: i64,
    pub measured_gain_pct: f64,
    /// `projected_gain_pct - measured_gain_pct`: over 0, the model projected more than
    /// B gained.
    pub projected_less_measured_pct: f64,
    /// B's step within the diff's noise of the projected step (`step_time.noise_ps`;
    /// false where the noise is not known).
    pub within_noise: bool,
    /// A's steps the replay left out (its replay missed them by more than 5%).
    pub steps_left_out: usize,
}

/// Why A cannot be replayed beside B (each surface words it).
#[derive(Clone, Debug, PartialEq)]
pub enum WhatifRefused {
    /// The edit names an op, scope, module or category A never ran.
    Unknown(whatif::Target),
    /// A (true) or B (false) has no timed steps.
    NoSteps { a: bool },
}

impl WhatifBeside {
    /// A's steps (`a`, read whole) replayed with `edit`, beside B's steps in `d`: what
    /// `diff --whatif`, `api/diff?whatif=` and the MCP `diff` tool give.
    pub fn project(a: &Profile, edit: &whatif::Edit, d: &Diff) -> Result<WhatifBeside, WhatifRefused> {
        if let Some(t) = whatif::unknown_targets(a, edit).into_iter().next() {
            return Err(WhatifRefused::Unknown(t));
        }
        let p = whatif::project(a, edit);
        match (p.steps, d.b.step_count) {
            (0, _) => Err(WhatifRefused::NoSteps { a: true }),
            (_, 0) => Err(WhatifRefused::NoSteps { a: false }),
            _ => Ok(WhatifBeside::of(&p, d)),
        }
    }

    /// `p` (A's steps replayed with an edit) beside B's steps in `d`.
    pub fn of(p: &whatif::Projection, d: &Diff) -> WhatifBeside {
        let t = &d.step_time;
        let measured_gain_pct = stepscope_model::stats::pct(t.a_median_ps.saturating_sub(t.b_median_ps), t.a_median_ps);
        WhatifBeside {
            edit: p.edit.clone(),
            a_step_ps: p.step_ps,
            projected_step_ps: p.projected_step_ps,
            projected_gain_pct: p.gain_pct,
            b_step_ps: t.b_median_ps,
            measured_gain_pct,
            projected_less_measured_pct: p.gain_pct - measured_gain_pct,
            within_noise: t.noise_known && p.projected_step_ps.abs_diff(t.b_median_ps) <= t.noise_ps.unsigned_abs(),
            steps_left_out: p.steps_left_out,
        }
    }
}

impl Diff {
    /// Keeps the `n` largest changes of each list (ops, kernels, scopes); the
    /// `only_in_*` sums still count every row.
    pub fn truncate(&mut self, n: usize) {
        self.ops.truncate(n);
        self.kernels.truncate(n);
        self.scopes.truncate(n);
    }
}

/// Rows of one run that the other lacks.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct OnlyIn {
    /// How many rows (ops, scopes, lines, … as `by` groups them).
    pub rows: u64,
    /// Their executions.
    pub count: u64,
    /// Their time per step in that run.
    pub per_step_ps: i64,
}

/// One side of the diff.
#[derive(Clone, Debug, Serialize)]
pub struct RunSide {
    pub run: String,
    pub step_count: u64,
    /// Cold steps (they compiled, or are the first run after a compile): where others
    /// are not, the step time is taken over the others (warm steps).
    #[serde(skip_serializing_if = "stepscope_model::steps::is_zero")]
    pub cold_steps: u64,
    /// Op time (self) that ran before the first step or after the last (work
    /// dispatched before the capture, or after the steps): left out of the per-step
    /// op means, which are over the steps' span.
    pub ops_outside_steps_ps: i64,
}

/// Step time change (medians and means), B − A.
#[derive(Clone, Debug, Serialize)]
pub struct StepTimeDiff {
    pub a_median_ps: i64,
    pub b_median_ps: i64,
    pub delta_ps: i64,
    /// The change as a share of A's median; null where either run has no steps (its
    /// step time is not 0 but unknown) or A's median is 0.
    pub delta_pct: Option<f64>,
    pub a_mean_ps: i64,
    pub b_mean_ps: i64,
    /// Standard deviations of each run's step times.
    pub a_std_ps: i64,
    pub b_std_ps: i64,
    /// Each run's spread robust to an outlier: 1.4826 × the median absolute deviation
    /// of its step times (the standard deviation where they are normal).
    pub a_spread_ps: i64,
    pub b_spread_ps: i64,
    /// Twice the standard error of the difference of the two runs, from their robust
    /// spreads: changes per step smaller than this are within the step-to-step jitter
    /// (0 where either run has fewer than 2 steps). One slow step does not widen it.
    pub noise_ps: i64,
    /// False where either run has fewer than 2 warm steps to rank by: no noise
    /// estimate, so no change can be called real (one step, or only cold ones).
    pub noise_known: bool,
    /// Each run's steps are all cold (compiled, or a first run after a compile): its
    /// step time is a first call's, not a warm step's.
    pub a_all_cold: bool,
    pub b_all_cold: bool,
}

/// Warm steps a side needs for a change in step time to be told from its noise.
pub const MIN_STEPS_FOR_NOISE: u64 = stepscope_judge::health::MIN_WARM_STEPS;

/// One part of the average-step breakdown.
#[derive(Clone, Debug, Serialize)]
pub struct PartDiff {
    pub part: &'static str,
    pub a_ps: i64,
    pub b_ps: i64,
    pub delta_ps: i64,
}

/// One op (or kernel) in A, B or both.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct OpDiff {
    /// The name in A (in B for an added op).
    pub name: String,
    /// The name in B when it differs (matched by shape).
    pub b_name: Option<String>,
    pub module: String,
    /// The module in B when it differs (two methods as differently named programs:
    /// their ops pair by name).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub b_module: Option<String>,
    pub category: String,
    /// `added`, `removed`, `slower`, `faster` or `unchanged`.
    pub status: &'static str,
    /// `name`, `shape` (category + name stack + shape) or `name in another program`
    /// (B's program is named otherwise: [`OpDiff::b_module`]); empty when unmatched.
    pub matched_by: &'static str,
    pub a_count: u64,
    pub b_count: u64,
    pub a_total_ps: i64,
    pub b_total_ps: i64,
    pub delta_ps: i64,
    /// Totals divided by each run's step count: the effect on one step.
    pub a_per_step_ps: i64,
    pub b_per_step_ps: i64,
    pub delta_per_step_ps: i64,
    /// |delta_per_step_ps| is below the step time's noise ([`StepTimeDiff::noise_ps`]).
    pub within_noise: bool,
}

/// Highest allocator peak in each run.
#[derive(Clone, Debug, Serialize)]
pub struct MemoryDiff {
    pub a_peak_bytes: Option<u64>,
    pub b_peak_bytes: Option<u64>,
    pub delta_bytes: Option<i64>,
}

/// Two runs are of one program where their ops, matched by name or HLO shape as
/// `diff` matches them, hold at least this share of either run's op time.
pub const SAME_PROGRAM_MIN_PCT: f64 = 10.0;

/// Of rows diffed (every row, before any is cut): the share of either run's time in
/// rows both ran, the larger of the two; 100 where neither has any.
pub fn matched_op_time_pct(ops: &[OpDiff]) -> f64 {
    let share = |total: fn(&OpDiff) -> i64| {
        let all: i64 = ops.iter().map(total).fold(0, i64::saturating_add);
        let both: i64 = (ops.iter())
            .filter(|o| o.status != "added" && o.status != "removed")
            .map(total)
            .fold(0, i64::saturating_add);
        match all > 0 {
            true => 100.0 * both as f64 / all as f64,
            false => 100.0,
        }
    };
    share(|o| o.a_total_ps).max(share(|o| o.b_total_ps))
}

/// [`matched_op_time_pct`] of two runs' op profiles (grouped alike), as `diff` matches
/// them.
pub fn sides_matched_op_time_pct(a: &Side, b: &Side) -> f64 {
    let (na, nb) = (a.overview.step_count.max(1) as i64, b.overview.step_count.max(1) as i64);
    let signatures = (a.by == GroupBy::Op).then_some((a.signatures.as_slice(), b.signatures.as_slice()));
    matched_op_time_pct(&match_rows(&a.in_steps, &b.in_steps, na, nb, 0, signatures))
}

/// What tells a reader that two runs ran other programs, where they did (`None` where
/// they ran one).
pub fn other_programs_note(matched_op_time_pct: f64) -> Option<String> {
    (matched_op_time_pct < SAME_PROGRAM_MIN_PCT).then(|| {
        format!(
            "these ran different programs ({matched_op_time_pct:.1}% of op time matched): their difference is \
             not a change of one program"
        )
    })
}

/// Diffs B against A, op by op.
pub fn diff(a: &Profile, b: &Profile) -> Diff {
    diff_by(a, b, GroupBy::Op)
}

/// Diffs B against A with the op profile grouped `by` (op, scope, line, …).
pub fn diff_by(a: &Profile, b: &Profile, by: GroupBy) -> Diff {
    diff_sides(&Side::of(a, by, 0, true), &Side::of(b, by, 0, true))
}

/// Diffs run B against run A, each as `diff` reads it (held whole or read a host at a
/// time), their op profiles grouped alike.
pub fn diff_sides(a: &Side, b: &Side) -> Diff {
    let (sa, sb) = (&a.overview, &b.overview);
    let (na, nb) = (sa.step_count.max(1) as i64, sb.step_count.max(1) as i64);
    let st = step_time(sa, sb);
    let signatures = (a.by == GroupBy::Op).then_some((a.signatures.as_slice(), b.signatures.as_slice()));
    let mut op_rows = match_rows(&a.in_steps, &b.in_steps, na, nb, st.noise_ps, signatures);
    rank(&mut op_rows);
    let matched = matched_op_time_pct(&op_rows);
    let only = |status: &str, per_step: fn(&OpDiff) -> i64, count: fn(&OpDiff) -> u64| {
        let rows: Vec<&OpDiff> = op_rows.iter().filter(|r| r.status == status).collect();
        OnlyIn {
            rows: rows.len() as u64,
            count: rows.iter().map(|r| count(r)).sum(),
            per_step_ps: rows.iter().map(|r| per_step(r)).sum(),
        }
    };
    let only_in_a = only("removed", |r| r.a_per_step_ps, |r| r.a_count);
    let only_in_b = only("added", |r| r.b_per_step_ps, |r| r.b_count);
    let ka: Vec<OpRow> = a.kernels.iter().map(kernel_row).collect();
    let kb: Vec<OpRow> = b.kernels.iter().map(kernel_row).collect();
    let mut kernel_rows = match_rows(&merge_by_name(ka), &merge_by_name(kb), na, nb, st.noise_ps, None);
    rank(&mut kernel_rows);
    let scope_rows = |s: &Side| -> Vec<OpRow> {
        (s.scopes.iter())
            .map(|r| OpRow {
                name: r.path.clone(),
                count: r.count,
                total_ps: r.total_ps,
                self_ps: r.self_ps,
                ..OpRow::default()
            })
            .collect()
    };
    let mut scope_diff = match_rows(&scope_rows(a), &scope_rows(b), na, nb, st.noise_ps, None);
    rank(&mut scope_diff);
    let (pa, pb) = (a.memory_peak_bytes, b.memory_peak_bytes);
    let side = |s: &Side| RunSide {
        run: s.overview.run.clone(),
        step_count: s.overview.step_count,
        cold_steps: s.overview.cold_steps,
        ops_outside_steps_ps: s.outside_steps_ps,
    };
    Diff {
        schema: "stepscope.diff/1",
        a: side(a),
        b: side(b),
        step_time: st,
        breakdown: breakdown(&sa.breakdown, &sb.breakdown),
        by: a.by,
        ops: op_rows,
        only_in_a,
        only_in_b,
        kernels: kernel_rows,
        scopes: scope_diff,
        memory: MemoryDiff {
            a_peak_bytes: pa,
            b_peak_bytes: pb,
            delta_bytes: pa.zip(pb).map(|(x, y)| y as i64 - x as i64),
        },
        matched_op_time_pct: matched,
        same_program: matched >= SAME_PROGRAM_MIN_PCT,
        whatif: None,
    }
}

/// The median absolute deviation times this estimates the standard deviation of
/// normally distributed values.
const ROBUST_SIGMA: f64 = 1.4826;

fn step_time(a: &Overview, b: &Overview) -> StepTimeDiff {
    let (x, y) = (a.ranked_step_time(), b.ranked_step_time());
    let spread = |d: &Distribution| (ROBUST_SIGMA * d.mad_ps as f64).round() as i64;
    let (sa, sb) = (spread(x), spread(y));
    let var = |s: i64, n: u64| (s as f64).powi(2) / n as f64;
    let noise_ps = match (x.count, y.count) {
        (na, nb) if na >= 2 && nb >= 2 => (2.0 * (var(sa, na) + var(sb, nb)).sqrt()).round() as i64,
        _ => 0,
    };
    StepTimeDiff {
        a_std_ps: x.std_ps,
        b_std_ps: y.std_ps,
        a_spread_ps: sa,
        b_spread_ps: sb,
        noise_ps,
        noise_known: x.count >= 2 && y.count >= 2,
        a_all_cold: a.step_count > 0 && a.cold_steps >= a.step_count,
        b_all_cold: b.step_count > 0 && b.cold_steps >= b.step_count,
        a_median_ps: x.median_ps,
        b_median_ps: y.median_ps,
        delta_ps: y.median_ps - x.median_ps,
        delta_pct: (x.count > 0 && y.count > 0 && x.median_ps > 0)
            .then(|| 100.0 * (y.median_ps - x.median_ps) as f64 / x.median_ps as f64),
        a_mean_ps: x.mean_ps,
        b_mean_ps: y.mean_ps,
    }
}

/// Every part of the average step, which add up to it, then the step.
fn breakdown(a: &Breakdown, b: &Breakdown) -> Vec<PartDiff> {
    let part = |part, a_ps: i64, b_ps: i64| PartDiff { part, a_ps, b_ps, delta_ps: b_ps - a_ps };
    vec![
        part("step", a.step_ps, b.step_ps),
        part("device_compute", a.device_compute_ps, b.device_compute_ps),
        part("collectives", a.collectives_ps, b.collectives_ps),
        part("host_to_device", a.host_to_device_ps, b.host_to_device_ps),
        part("device_to_host", a.device_to_host_ps, b.device_to_host_ps),
        part("device_to_device", a.device_to_device_ps, b.device_to_device_ps),
        part("async_wait", a.async_wait_ps, b.async_wait_ps),
        part("host_callback", a.host_callback_ps, b.host_callback_ps),
        part("runtime_overhead", a.runtime_overhead_ps, b.runtime_overhead_ps),
        part("compile", a.compile_ps, b.compile_ps),
        part("device_idle", a.device_idle_ps, b.device_idle_ps),
    ]
}

fn kernel_row(k: &kernels::KernelRow) -> OpRow {
    OpRow {
        name: k.name.clone(),
        module: k.module.clone(),
        category: k.op.clone(),
        count: k.count,
        total_ps: k.total_ps,
        self_ps: k.total_ps,
        ..OpRow::default()
    }
}

/// Kernel rows are per launch configuration; the diff compares per kernel name.
fn merge_by_name(rows: Vec<OpRow>) -> Vec<OpRow> {
    let mut out: Vec<OpRow> = Vec::new();
    for r in rows {
        match out.iter_mut().find(|o| o.name == r.name && o.module == r.module) {
            Some(o) => {
                o.count += r.count;
                o.total_ps = o.total_ps.saturating_add(r.total_ps);
            }
            None => out.push(r),
        }
    }
    out
}

/// Each op row's HLO signature, where known ([`Side::signatures`]).
type Signatures<'s> = &'s [Option<String>];

/// Row `i`'s signature of `sigs` (each row's), where known.
fn sig(sigs: Option<Signatures<'_>>, i: usize) -> Option<&str> {
    sigs.and_then(|s| s.get(i)?.as_deref())
}

/// Row pairs found so far, and what is left on each side.
struct Pairing<'r> {
    a: &'r [OpRow],
    b: &'r [OpRow],
    pairs: Vec<(Option<&'r OpRow>, Option<&'r OpRow>, &'static str)>,
    a_left: Vec<usize>,
    b_used: Vec<bool>,
}

impl<'r> Pairing<'r> {
    /// One pass: each row of A left takes the first unused row of B with its key
    /// (rows without a key take none).
    fn pass(
        &mut self,
        key_a: impl Fn(usize) -> Option<String>,
        key_b: impl Fn(usize) -> Option<String>,
        by: &'static str,
    ) {
        let mut index: HashMap<String, std::collections::VecDeque<usize>> = HashMap::new();
        for j in (0..self.b.len()).filter(|&j| !self.b_used[j]) {
            if let Some(k) = key_b(j) {
                index.entry(k).or_default().push_back(j);
            }
        }
        let (a, b) = (self.a, self.b);
        let (pairs, b_used) = (&mut self.pairs, &mut self.b_used);
        self.a_left.retain(|&i| {
            let Some(j) = key_a(i).and_then(|k| index.get_mut(&k)).and_then(|q| q.pop_front()) else { return true };
            b_used[j] = true;
            pairs.push((Some(&a[i]), Some(&b[j]), by));
            false
        });
    }
}

/// Pairs B's rows with A's: by name and module (and, for an op several programs hold,
/// its program's signature: program ids differ between runs), then by name and module
/// alone, then (ops, with `hlo`) by module and signature, for fusions XLA renamed, then
/// by name alone (the same op in a program named otherwise).
fn match_rows(
    a: &[OpRow],
    b: &[OpRow],
    na: i64,
    nb: i64,
    noise_ps: i64,
    signatures: Option<(Signatures, Signatures)>,
) -> Vec<OpDiff> {
    let named = |r: &OpRow| format!("{}\u{0}{}", r.name, r.module);
    let (sa, sb) = (signatures.map(|s| s.0), signatures.map(|s| s.1));
    // An op's program, where several programs hold it, by its signature.
    let program = |sigs, rows: &[OpRow], i: usize| match (&rows[i].program, sigs) {
        (Some(_), Some(_)) => sig(sigs, i).unwrap_or_default().to_string(),
        _ => String::new(),
    };
    let mut m = Pairing { a, b, pairs: Vec::new(), a_left: (0..a.len()).collect(), b_used: vec![false; b.len()] };
    m.pass(
        |i| Some(format!("{}\u{0}{}", named(&a[i]), program(sa, a, i))),
        |j| Some(format!("{}\u{0}{}", named(&b[j]), program(sb, b, j))),
        "name",
    );
    m.pass(|i| Some(named(&a[i])), |j| Some(named(&b[j])), "name");
    if signatures.is_some() && !m.a_left.is_empty() && m.b_used.contains(&false) {
        let shape = |sigs, rows: &[OpRow], i: usize| sig(sigs, i).map(|s| format!("{}\u{0}{s}", rows[i].module));
        m.pass(|i| shape(sa, a, i), |j| shape(sb, b, j), "shape");
    }
    // Two methods are often two programs of different names (jit_lcam, jit_tad): what
    // is left pairs by name across programs.
    if !m.a_left.is_empty() && m.b_used.contains(&false) {
        m.pass(|i| Some(a[i].name.clone()), |j| Some(b[j].name.clone()), "name in another program");
    }
    let Pairing { mut pairs, a_left, b_used, .. } = m;
    pairs.extend(a_left.into_iter().map(|i| (Some(&a[i]), None, "")));
    let mut b_rest: Vec<&OpRow> = (0..b.len()).filter(|&j| !b_used[j]).map(|j| &b[j]).collect();
    b_rest.sort_by(|x, y| y.total_ps.cmp(&x.total_ps).then_with(|| x.name.cmp(&y.name)));
    pairs.extend(b_rest.into_iter().map(|r| (None, Some(r), "")));
    pairs
        .into_iter()
        .map(|(x, y, by)| {
            let (ac, at) = x.map_or((0, 0), |r| (r.count, r.total_ps));
            let (bc, bt) = y.map_or((0, 0), |r| (r.count, r.total_ps));
            let (aps, bps) = (at / na, bt / nb);
            let base = x.or(y).map(|r| (r.name.clone(), r.module.clone(), r.category.clone())).unwrap_or_default();
            let status = match (x, y) {
                (None, _) => "added",
                (_, None) => "removed",
                _ if (bps - aps).abs() * 100 < aps.max(1) => "unchanged",
                _ if bps > aps => "slower",
                _ => "faster",
            };
            OpDiff {
                name: base.0.clone(),
                b_name: y.filter(|r| x.is_some() && r.name != base.0).map(|r| r.name.clone()),
                b_module: y.filter(|r| x.is_some() && r.module != base.1).map(|r| r.module.clone()),
                module: base.1,
                category: base.2,
                status,
                matched_by: by,
                a_count: ac,
                b_count: bc,
                a_total_ps: at,
                b_total_ps: bt,
                delta_ps: bt - at,
                a_per_step_ps: aps,
                b_per_step_ps: bps,
                delta_per_step_ps: bps - aps,
                within_noise: (bps - aps).abs() < noise_ps,
            }
        })
        .collect()
}

fn rank(rows: &mut [OpDiff]) {
    rows.sort_by(|x, y| y.delta_per_step_ps.abs().cmp(&x.delta_per_step_ps.abs()).then_with(|| x.name.cmp(&y.name)));
}
