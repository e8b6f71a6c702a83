//! What the profiler's own tracers cost the program they recorded. The Python tracer
//! (`python_tracer_level=1`, on by default in `jax.profiler.trace`) records every Python
//! call as a host event named `$file:line function`, and each costs the thread that
//! makes it: the calls a step dispatches with run slower than untraced. Device op
//! times are not touched; host dispatch, input and the gaps they leave are.

use stepscope_model::device::host_cpu_plane;
use stepscope_model::steps::Step;
use stepscope_model::Profile;

/// What one traced Python call costs the thread that makes it, ps: calibrated on
/// `scripts/capture_problems.py --time-tracer op-by-op` (one process capturing the
/// same op-by-op loop with the Python tracer on and off, alternately, 48 steps each,
/// on this project's 2-core CPU VM: 0.621, 0.686 and 0.585 µs a call in three runs,
/// the median kept; tests/fixtures/tracer.json has the held-out runs it is checked
/// against). A machine twice as fast pays about half.
pub const PYTHON_CALL_COST_PS: i64 = 621_000;

/// The Python tracer's events in a host's steps.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PythonCalls {
    /// Python calls traced inside the steps' host spans.
    pub in_steps: u64,
    /// The steps counted (not cut).
    pub steps: u64,
    /// Python calls traced in the whole capture.
    pub all: u64,
}
stepscope_model::wire_struct!(PythonCalls { in_steps, steps, all });

impl PythonCalls {
    pub fn add(&mut self, o: PythonCalls) {
        self.in_steps = self.in_steps.saturating_add(o.in_steps);
        self.steps = self.steps.saturating_add(o.steps);
        self.all = self.all.saturating_add(o.all);
    }
}

/// Whether a host event is the Python tracer's (`$profiler.py:151 start_trace`,
/// `$builtins isinstance`).
pub fn is_python_call(name: &str) -> bool {
    name.starts_with('$')
}

/// The Python calls traced in each host of `profile`, and of them those that start
/// inside the host span of one of `steps` (those not cut), on any of its threads.
pub fn python_calls(profile: &Profile, steps: &[Step]) -> PythonCalls {
    let mut out = PythonCalls::default();
    for space in &profile.hosts {
        let mut windows: Vec<(i64, i64)> = (steps.iter())
            .filter(|s| s.host == space.host && !s.cut)
            .map(|s| (s.host_start_ps, s.host_start_ps.saturating_add(s.host_duration_ps.max(0))))
            .collect();
        windows.sort_unstable();
        out.steps += windows.len() as u64;
        let Some(plane) = host_cpu_plane(space) else { continue };
        let mask: Vec<bool> = (0..plane.event_meta.len() as u32).map(|m| is_python_call(plane.event_name(m))).collect();
        if !mask.contains(&true) {
            continue;
        }
        for line in &plane.lines {
            for i in line.events_with_meta(&mask) {
                out.all += 1;
                let t = line.start_ps(i);
                // The last window starting at or before t holds it, if it ends after t
                // (a host's steps do not overlap).
                let k = windows.partition_point(|w| w.0 <= t);
                if k > 0 && t < windows[k - 1].1 {
                    out.in_steps += 1;
                }
            }
        }
    }
    out
}

/// What the Python tracer cost a run's steps, by [`PYTHON_CALL_COST_PS`].
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct PythonTracer {
    /// Python calls traced in the whole capture.
    pub calls: u64,
    /// Of them, a step's on average (those in its host span).
    pub calls_per_step: f64,
    /// What they cost a step, ps: `calls_per_step` × [`PYTHON_CALL_COST_PS`].
    pub cost_per_step_ps: i64,
    /// `cost_per_step_ps` as a share of the median step's host span, percent.
    pub cost_pct_of_host_step: f64,
}

impl PythonTracer {
    /// The tracer's cost in a run whose steps' median host span is `host_step_ps`;
    /// `None` where no Python call was traced.
    pub fn of(calls: PythonCalls, host_step_ps: i64) -> Option<PythonTracer> {
        if calls.all == 0 {
            return None;
        }
        let per_step = match calls.steps {
            0 => 0.0,
            n => calls.in_steps as f64 / n as f64,
        };
        let cost = (per_step * PYTHON_CALL_COST_PS as f64).round() as i64;
        Some(PythonTracer {
            calls: calls.all,
            calls_per_step: per_step,
            cost_per_step_ps: cost,
            cost_pct_of_host_step: match host_step_ps > 0 {
                true => 100.0 * cost as f64 / host_step_ps as f64,
                false => 0.0,
            },
        })
    }
}
