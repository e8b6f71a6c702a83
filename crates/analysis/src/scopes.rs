//! The user's own host scopes: `jax.profiler.TraceAnnotation` (what `stepscope.scope`
//! and the guides' `profile_scope` helpers make) and the step annotations around
//! them, nested, per step, with the device time each scope kept busy or launched;
//! and the host's input work (data-loading scopes, `device_put`), which gives the
//! step an input share.
//!
//! A host event is a user scope when
//! - it is on a thread of the program: one that calls into JAX (a `PjitFunction(f)`
//!   dispatch, a transfer to the device, a step annotation or a Python-tracer event is
//!   on it), not one of XLA's, the runtime's or CUPTI's own (`tf_*`, `pjrt_*`,
//!   `Host Threads`, `py_xla_callback`);
//! - it is not a Python-tracer event (`$file.py:12 f`) and carries no XLA op;
//! - its name is none the JAX runtime uses (`PjitFunction(f)`, `DevicePut`, `Wait for
//!   usage holds`, `X::Y`, …: see [`is_runtime_name`]);
//! - no runtime event holds it: what the runtime does inside a `PjitFunction`
//!   (compile passes) or an execution (thunks) is never a scope, nor is user code
//!   run by the runtime (a host callback's annotations).

use serde::Serialize;

use stepscope_model::device::Device;
pub use stepscope_model::host_scopes::{is_input_name, is_runtime_name, HostScopes};
use stepscope_model::stats::{sum_ps, Intervals};
use stepscope_model::Profile;

use crate::steps::{self, Step};

/// One scope path of one host.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ScopeRow {
    /// The scope's own name, `data_loading`.
    pub name: String,
    /// Its place among the scopes around it, outermost first: `train/data_loading`.
    pub path: String,
    /// 0 for a scope with no user scope around it.
    pub depth: usize,
    pub host: String,
    pub count: u64,
    /// Time inside the scope, summed over its occurrences.
    pub total_ps: i64,
    /// `total_ps` less the time in the user scopes directly inside it.
    pub self_ps: i64,
    pub avg_ps: i64,
    /// The scope's time inside steps, divided by the host's steps: what it costs a
    /// step. Absent where the profile has no steps.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub per_step_ps: Option<i64>,
    /// `per_step_ps` as a share of the mean step on the host (`Scopes::host_step_ps`:
    /// the windows it was measured in), percent. Scopes open on several threads at once
    /// add up, so it can pass 100.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step_pct: Option<f64>,
    /// Time a device of the host ran an op while the scope was open (mean over the
    /// host's devices).
    pub device_busy_ps: i64,
    /// GPUs: the device time of the kernels and copies launched inside the scope,
    /// linked by `correlation_id` (mean over the host's GPUs). Absent elsewhere.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device_work_ps: Option<i64>,
    /// The scope is input work (see [`is_input_name`]).
    pub input: bool,
}
stepscope_model::wire_struct!(ScopeRow {
    name,
    path,
    depth,
    host,
    count,
    total_ps,
    self_ps,
    avg_ps,
    per_step_ps,
    step_pct,
    device_busy_ps,
    device_work_ps,
    input,
});

/// The host's input work and what it cost the device.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct InputWork {
    /// Time per step the host spent in input work: data-loading scopes and JAX's
    /// transfers to the device (`DevicePut`, batched copies), their union inside the
    /// steps, divided by the steps.
    pub host_input_ps: i64,
    /// `host_input_ps` as a share of the mean step on the host (`Scopes::host_step_ps`,
    /// where it was measured), percent.
    pub host_input_pct: f64,
    /// Of that, the time per step no op ran on the device (mean over the host's
    /// devices): the device waited on input. XProf's "input time".
    pub device_idle_input_ps: i64,
    /// `device_idle_input_ps` as a share of the mean step, percent.
    pub device_idle_input_pct: f64,
    /// The names counted as input work.
    pub names: Vec<String>,
}

/// The host scopes of a run.
#[derive(Clone, Debug, Serialize)]
pub struct Scopes {
    pub schema: &'static str,
    /// Steps the per-step figures divide by (all hosts).
    pub step_count: usize,
    /// The mean step.
    pub step_ps: i64,
    /// The mean step on the host: the steps' host windows (where the scopes are
    /// measured), which the per-step shares are of. It is `step_ps` unless the steps
    /// are timed on the device (a loop that dispatches ahead) or are a module's runs
    /// (a step's window on the host then starts where the last run ended).
    pub host_step_ps: i64,
    pub input: InputWork,
    /// Depth first: each scope followed by the scopes inside it, larger first.
    pub scopes: Vec<ScopeRow>,
}

/// The host scopes of `profile`, with their device time and the input work.
pub fn scopes(profile: &Profile) -> Scopes {
    let st = steps::cached(profile);
    assemble(st.steps.len(), step_means(st), input_sums(profile), scope_rows(profile))
}

/// The mean step of the steps the step time reads (those the capture cut left out),
/// as timed and on the host ([`Scopes::host_step_ps`]), of some hosts' steps: the run's
/// where its hosts' add up ([`StepMeans::add`]).
#[derive(Clone, Debug, Default)]
pub struct StepMeans {
    pub timed: usize,
    pub sum_ps: i64,
    pub host_sum_ps: i64,
}

impl StepMeans {
    pub fn add(&mut self, other: StepMeans) {
        self.timed += other.timed;
        self.sum_ps = self.sum_ps.saturating_add(other.sum_ps);
        self.host_sum_ps = self.host_sum_ps.saturating_add(other.host_sum_ps);
    }

    /// The means: (as timed, on the host).
    pub fn means(&self) -> (i64, i64) {
        let n = self.timed.max(1) as i64;
        (self.sum_ps / n, self.host_sum_ps / n)
    }
}

/// The [`StepMeans`] of `st`.
pub fn step_means(st: &stepscope_model::steps::Steps) -> StepMeans {
    let windows = st.host_windows();
    let timed: Vec<(&Step, &(i64, i64))> = st.steps.iter().zip(&windows).filter(|(s, _)| !s.cut).collect();
    StepMeans {
        timed: timed.len(),
        sum_ps: sum_ps(timed.iter().map(|(s, _)| s.duration_ps)),
        host_sum_ps: sum_ps(timed.iter().map(|(_, w)| w.1.saturating_sub(w.0))),
    }
}

/// The host scopes of a run from its hosts' rows ([`scope_rows`], hosts in order): its
/// `step_count` steps, whose means are `means`, and its input work. Each row's share
/// of the mean step on the host is taken here, where the run's steps are known.
pub fn assemble(step_count: usize, means: StepMeans, input: InputSums, mut rows: Vec<ScopeRow>) -> Scopes {
    let (step_ps, host_step_ps) = means.means();
    for r in &mut rows {
        r.step_pct = r.per_step_ps.filter(|_| host_step_ps > 0).map(|p| 100.0 * p as f64 / host_step_ps as f64);
    }
    let input = input.per_step(step_count, &means).unwrap_or_default();
    Scopes { schema: "stepscope.scopes/1", step_count, step_ps, host_step_ps, input, scopes: rows }
}

/// Each host's scope rows, depth first, hosts in order: what [`assemble`] makes the
/// run's scopes of (their share of the mean step not yet taken).
pub fn scope_rows(profile: &Profile) -> Vec<ScopeRow> {
    let found = profile.host_scopes();
    let st = steps::cached(profile);
    let devices = profile.devices();
    let base = profile.time_base();
    let host_windows = st.host_windows();
    let mut rows = Vec::new();
    for (hi, (space, h)) in profile.hosts.iter().zip(found).enumerate() {
        let on_host: Vec<&Device> = devices.iter().filter(|d| d.host_index == hi).collect();
        let busy: Vec<&Intervals> = on_host.iter().map(|d| &base.busy[d.index]).collect();
        let mine: Vec<&Step> = st.steps.iter().filter(|s| s.host == space.host).collect();
        // Host scopes are in the steps' host windows (the device's work may come later).
        let windows = Intervals::new(
            (st.steps.iter().zip(&host_windows)).filter(|(s, _)| s.host == space.host).map(|(_, &w)| w).collect(),
        );
        let mean_busy = |lo: i64, hi: i64| match busy.len() {
            0 => 0,
            n => sum_ps(busy.iter().map(|b| b.overlap(lo, hi))) / n as i64,
        };
        // Per path: count, total, time in child scopes, time in steps, busy.
        let mut acc = vec![(0u64, 0i64, 0i64, 0i64, 0i64); h.paths.len()];
        for &(p, lo, hi, parent) in &h.occurrences {
            let a = &mut acc[p as usize];
            a.0 += 1;
            a.1 = a.1.saturating_add(hi - lo);
            a.3 = a.3.saturating_add(windows.overlap(lo, hi));
            a.4 = a.4.saturating_add(mean_busy(lo, hi));
            if let Some(o) = parent {
                let (pp, plo, phi, _) = h.occurrences[o as usize];
                let inside = hi.min(phi) - lo.max(plo);
                acc[pp as usize].2 = acc[pp as usize].2.saturating_add(inside.max(0));
            }
        }
        let work = launched_per_path(profile, hi, h);
        let n_steps = mine.len() as i64;
        let mut host_rows: Vec<ScopeRow> = h
            .paths
            .iter()
            .zip(&acc)
            .enumerate()
            .map(|(p, ((path, name, depth, _, is_input), &(count, total, children, in_steps, busy)))| ScopeRow {
                name: name.clone(),
                path: path.clone(),
                depth: *depth,
                host: space.host.clone(),
                count,
                total_ps: total,
                self_ps: (total - children).max(0),
                avg_ps: if count > 0 { total / count as i64 } else { 0 },
                per_step_ps: (n_steps > 0).then(|| in_steps / n_steps),
                step_pct: None,
                device_busy_ps: busy,
                device_work_ps: work.as_ref().map(|w| w[p]),
                input: *is_input,
            })
            .collect();
        order_depth_first(&mut host_rows, &h.paths);
        rows.extend(host_rows);
    }
    rows
}

/// The input work of some hosts' steps, summed over the hosts: what
/// [`InputSums::per_step`] divides by the run's steps. The sums of a run's hosts read
/// one at a time add up ([`InputSums::add`]) to the run's.
#[derive(Clone, Debug, Default)]
pub struct InputSums {
    /// Some host records input work (inside its steps or not).
    pub recorded: bool,
    pub host_input_ps: i64,
    pub device_idle_input_ps: i64,
    pub names: std::collections::BTreeSet<String>,
}
stepscope_model::wire_struct!(InputSums { recorded, host_input_ps, device_idle_input_ps, names });

impl InputSums {
    pub fn add(&mut self, other: InputSums) {
        self.recorded |= other.recorded;
        self.host_input_ps = self.host_input_ps.saturating_add(other.host_input_ps);
        self.device_idle_input_ps = self.device_idle_input_ps.saturating_add(other.device_idle_input_ps);
        self.names.extend(other.names);
    }

    /// Per step of the run's `step_count` steps, whose means are `means` (the host's
    /// input work a share of the mean step on the host, the device's wait for it of
    /// the mean step); `None` where there are none or no input work is recorded.
    pub fn per_step(self, step_count: usize, means: &StepMeans) -> Option<InputWork> {
        let step_count = step_count as i64;
        if step_count == 0 || !self.recorded {
            return None;
        }
        let (step_ps, host_step_ps) = means.means();
        let pct = |ps: i64, of: i64| if of > 0 { 100.0 * ps as f64 / of as f64 } else { 0.0 };
        let (host_input_ps, device_idle_input_ps) =
            (self.host_input_ps / step_count, self.device_idle_input_ps / step_count);
        Some(InputWork {
            host_input_ps,
            host_input_pct: pct(host_input_ps, host_step_ps),
            device_idle_input_ps,
            device_idle_input_pct: pct(device_idle_input_ps, step_ps),
            names: self.names.into_iter().collect(),
        })
    }
}

/// The input work of `profile`'s hosts in their steps, summed.
pub fn input_sums(profile: &Profile) -> InputSums {
    let found = profile.host_scopes();
    let mut sums = InputSums { recorded: found.iter().any(|h| h.input.total() != 0), ..Default::default() };
    let st = steps::cached(profile);
    if st.steps.is_empty() || !sums.recorded {
        return sums;
    }
    let devices = profile.devices();
    let base = profile.time_base();
    let host_windows = st.host_windows();
    for (hi, (space, h)) in profile.hosts.iter().zip(found).enumerate() {
        let busy: Vec<&Intervals> =
            devices.iter().filter(|d| d.host_index == hi).map(|d| &base.busy[d.index]).collect();
        type Spans = Vec<(i64, i64)>;
        let (windows, spans): (Spans, Spans) = (st.steps.iter().zip(&host_windows))
            .filter(|(s, _)| s.host == space.host)
            .map(|(s, &w)| (w, (s.start_ps, s.end_ps())))
            .unzip();
        // The steps' input work on the host, and the part of it inside a step that no
        // op ran in (a step from module executions is its run alone: the input that
        // fed it came before, between steps).
        let inside = h.input.within(Intervals::new(windows).spans());
        sums.host_input_ps = sums.host_input_ps.saturating_add(inside.total());
        if !busy.is_empty() {
            let in_steps = inside.within(Intervals::new(spans).spans());
            sums.device_idle_input_ps = sums
                .device_idle_input_ps
                .saturating_add(sum_ps(busy.iter().map(|b| in_steps.minus(b).total())) / busy.len() as i64);
        }
        if inside.total() > 0 {
            sums.names.extend(h.input_names.iter().cloned());
        }
    }
    sums
}

/// Per path, the device work launched in its occurrences (see
/// [`stepscope_model::work`]), measured depth by depth (occurrences of one depth do
/// not nest). `None` where the host's work is not linked to its launches.
fn launched_per_path(profile: &Profile, hi: usize, h: &HostScopes) -> Option<Vec<i64>> {
    let max_depth = h.paths.iter().map(|p| p.2).max()?;
    let mut per_path = vec![0i64; h.paths.len()];
    let mut any = false;
    for depth in 0..=max_depth {
        let mut at: Vec<usize> =
            (0..h.occurrences.len()).filter(|&o| h.paths[h.occurrences[o].0 as usize].2 == depth).collect();
        at.sort_by_key(|&o| h.occurrences[o].1);
        let windows: Vec<(i64, i64)> = at.iter().map(|&o| (h.occurrences[o].1, h.occurrences[o].2)).collect();
        for (&o, w) in at.iter().zip(profile.work_in(hi, &windows).work) {
            if let Some(w) = w {
                any = true;
                per_path[h.occurrences[o].0 as usize] += w.busy_ps;
            }
        }
    }
    any.then_some(per_path)
}

/// Orders one host's rows depth first, children after their parent, larger first.
fn order_depth_first(rows: &mut Vec<ScopeRow>, paths: &[(String, String, usize, Option<u32>, bool)]) {
    let mut children: Vec<Vec<usize>> = vec![Vec::new(); rows.len()];
    let mut roots = Vec::new();
    for (i, p) in paths.iter().enumerate() {
        match p.3 {
            Some(parent) => children[parent as usize].push(i),
            None => roots.push(i),
        }
    }
    let by_size = |v: &mut Vec<usize>| v.sort_by(|&a, &b| rows[b].total_ps.cmp(&rows[a].total_ps).then(a.cmp(&b)));
    by_size(&mut roots);
    for c in children.iter_mut() {
        by_size(c);
    }
    let mut order = Vec::with_capacity(rows.len());
    let mut stack: Vec<usize> = roots.into_iter().rev().collect();
    while let Some(i) = stack.pop() {
        order.push(i);
        stack.extend(children[i].iter().rev());
    }
    let mut taken: Vec<Option<ScopeRow>> = rows.drain(..).map(Some).collect();
    rows.extend(order.into_iter().filter_map(|i| taken[i].take()));
}
