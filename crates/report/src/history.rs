//! Many runs over time (a nightly benchmark folder, CI artifacts): each run's step
//! time, spread, utilisation and top ops, as `compare` gives them, and the change
//! point: the first run whose step time moved from the run before it by more than
//! the two runs' noise, as `diff` measures it (or, where no step time moved, the
//! first where an op's time a step did, by more than that noise and 2% of a step).
//!
//! Runs are added one at a time, in capture order, each beside the one before it, as
//! what the history compares of them ([`Side`]): one profile is held at a time,
//! whatever the number of runs.

use serde::Serialize;

use crate::compare::{run_row, CompareRun};
use crate::diff::{diff_sides, Diff, OpDiff, StepTimeDiff};
use crate::side::Side;
use stepscope_analysis::ops::GroupBy;
use stepscope_model::Profile;

/// The ops each run lists.
pub const HISTORY_TOP: usize = 3;

/// An op moves a run's history only by this share of the step or more.
const OP_MOVE_MIN_STEP_PCT: f64 = 2.0;

/// The most moved ops a change point lists.
const CHANGE_OPS: usize = 5;

/// Runs over time and where they changed.
#[derive(Clone, Debug, Serialize)]
pub struct History {
    pub schema: &'static str,
    pub runs: Vec<HistoryRun>,
    /// The first run that moved beyond the noise; `None` where none did.
    pub change: Option<Change>,
    /// Runs that could not be read (a capture cut short, a pod's run too large to read
    /// whole), each with why, in capture order: the others are compared, each with the
    /// one read before it.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub runs_unread: Vec<RunUnread>,
    /// Runs not compared with the run before them: they ran other programs (their ops
    /// and the other run's match for under [`SAME_PROGRAM_MIN_PCT`] of either run's op
    /// time). A change point is looked for only between runs compared.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub not_compared: Vec<NotCompared>,
}

pub use crate::diff::SAME_PROGRAM_MIN_PCT;

/// A run that ran other programs than the run before it, so was not compared with it.
#[derive(Clone, Debug, Serialize)]
pub struct NotCompared {
    pub run: String,
    pub previous: String,
    /// The share of each run's op time in ops the other also ran (as `diff` matches
    /// them): the larger of the two.
    pub matched_op_time_pct: f64,
}

/// A run the history could not read, and why (one line).
#[derive(Clone, Debug, Serialize)]
pub struct RunUnread {
    pub run: String,
    pub captured: Option<String>,
    pub error: String,
}

/// One run: `compare`'s row for it, and when it was captured.
#[derive(Clone, Debug, Serialize)]
pub struct HistoryRun {
    /// When the capture was taken, as its folder's name says (`YYYY-MM-DD HH:MM:SS`).
    pub captured: Option<String>,
    #[serde(flatten)]
    pub run: CompareRun,
}

/// The change point: a run, the one before it, and the evidence.
#[derive(Clone, Debug, Serialize)]
pub struct Change {
    /// The run's index in [`History::runs`].
    pub index: usize,
    pub run: String,
    pub previous: String,
    /// `step_time` (the median step moved beyond the noise) or `op`.
    pub cause: &'static str,
    /// The step time against the run before, as `diff PREVIOUS RUN` gives it.
    pub step_time: StepTimeDiff,
    /// The ops whose time a step moved beyond the noise, largest effect first.
    pub ops: Vec<OpDiff>,
}

impl Default for History {
    fn default() -> History {
        History {
            schema: "stepscope.history/1",
            runs: Vec::new(),
            change: None,
            runs_unread: Vec::new(),
            not_compared: Vec::new(),
        }
    }
}

impl History {
    /// Adds the next run (as [`History::side`] reads it), `previous` being the run
    /// added before it (compared with it until a change point is found).
    pub fn add(&mut self, label: String, captured: Option<String>, run: &Side, previous: Option<&Side>) {
        let mut row = run_row(&label, run);
        row.set_vs_first(self.runs.first().map_or(row.step_time.median_ps, |f| f.run.step_time.median_ps));
        if let (Some(prev), Some(before)) = (previous, self.runs.last()) {
            let d = diff_sides(prev, run);
            let matched = d.matched_op_time_pct;
            if !d.same_program {
                let (run, previous) = (label.clone(), before.run.label.clone());
                self.not_compared.push(NotCompared { run, previous, matched_op_time_pct: matched });
            } else if self.change.is_none() {
                self.change = change_in(self.runs.len(), &before.run.label, &label, d);
            }
        }
        self.runs.push(HistoryRun { captured, run: row });
    }

    /// What the history reads of run `p` (held whole): its overview with the top 3
    /// ops, and its op profile by op over its steps.
    pub fn side(p: &Profile) -> Side {
        Side::of(p, GroupBy::Op, HISTORY_TOP, false)
    }

    /// Notes a run that could not be read (it is left out of the comparison).
    pub fn unread(&mut self, label: String, captured: Option<String>, error: String) {
        self.runs_unread.push(RunUnread { run: label, captured, error });
    }
}

/// Whether run `b` moved from run `a` beyond their noise, and how (`d`: B's diff
/// against A).
fn change_in(index: usize, a_label: &str, b_label: &str, d: Diff) -> Option<Change> {
    let st = d.step_time;
    // Noise needs two steps on each side; a run with fewer is not judged.
    if st.noise_ps <= 0 {
        return None;
    }
    let step_moved = st.delta_ps.abs() > st.noise_ps;
    let floor = (st.a_median_ps as f64 * OP_MOVE_MIN_STEP_PCT / 100.0) as i64;
    let mut ops: Vec<OpDiff> =
        d.ops.into_iter().filter(|o| !o.within_noise && o.delta_per_step_ps.abs() >= floor).collect();
    ops.sort_by_key(|o| std::cmp::Reverse(o.delta_per_step_ps.abs()));
    ops.truncate(CHANGE_OPS);
    if !step_moved && ops.is_empty() {
        return None;
    }
    Some(Change {
        index,
        run: b_label.to_string(),
        previous: a_label.to_string(),
        cause: if step_moved { "step_time" } else { "op" },
        step_time: st,
        ops,
    })
}
