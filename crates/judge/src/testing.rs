//! For the rules' tests: a real capture from tests/fixtures, its overview and the
//! analyses the rules read, and one rule run over them.

use stepscope_analysis::overview::Overview;
use stepscope_model::stats::pct;
use stepscope_model::Profile;

use crate::context::Context;
use crate::finding::Finding;
use crate::inputs::{overview_and_inputs, Inputs};
use crate::rule::Rule;
use crate::thresholds::Thresholds;

/// A fixture, loaded and analysed as `advise` does.
pub struct Run {
    pub profile: Profile,
    pub overview: Overview,
    pub inputs: Inputs,
}

impl Run {
    /// The run of `tests/fixtures/<name>`.
    pub fn of(name: &str) -> Run {
        Run::of_hosts(&[name])
    }

    /// A run of one host per fixture named (a fixture of one host each), the hosts
    /// named `h0`, `h1`, … where there are several, each on its own clock.
    pub fn of_hosts(names: &[&str]) -> Run {
        let mut spaces = Vec::new();
        let mut rel = String::new();
        for (i, name) in names.iter().enumerate() {
            let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures").join(name);
            let run = stepscope_xspace::discover::resolve(&root, None).unwrap_or_else(|e| panic!("{name}: {e}"));
            let mut loaded = run.load(&stepscope_xspace::Progress::default()).unwrap_or_else(|e| panic!("{name}: {e}"));
            if names.len() > 1 {
                assert_eq!(loaded.len(), 1, "{name}: one host");
                loaded[0].host = format!("h{i}");
            }
            spaces.extend(loaded);
            rel = run.rel;
        }
        let profile = Profile::new(rel, spaces);
        let (overview, inputs) = overview_and_inputs(&profile, 10);
        Run { profile, overview, inputs }
    }

    /// What `rule` finds with the default thresholds.
    pub fn check(&self, rule: &Rule) -> Vec<Finding> {
        self.check_with(rule, &Thresholds::default())
    }

    /// What `rule` finds with thresholds `th` (nothing, as `advise`, for a rule that
    /// judges steps on a run without any).
    pub fn check_with(&self, rule: &Rule, th: &Thresholds) -> Vec<Finding> {
        let cx = Context::new(&self.profile, &self.overview, th, &self.inputs);
        let mut out = Vec::new();
        if !(rule.needs_steps && cx.steps.steps.is_empty()) {
            (rule.check)(&cx, &mut out);
        }
        for f in &out {
            assert_eq!(f.rule, rule.id);
        }
        out
    }

    /// The one finding of `rule` (panics when it finds none or several).
    pub fn one(&self, rule: &Rule) -> Finding {
        self.one_with(rule, &Thresholds::default())
    }

    pub fn one_with(&self, rule: &Rule, th: &Thresholds) -> Finding {
        let mut found = self.check_with(rule, th);
        assert_eq!(found.len(), 1, "{}: {found:?}", rule.id);
        found.remove(0)
    }

    /// `ps` as a share of the mean step, percent.
    pub fn step_pct(&self, ps: i64) -> f64 {
        pct(ps, self.overview.breakdown.step_ps)
    }

    /// The op profile by op, as the op rules read it.
    pub fn profile_ops(&self) -> Vec<stepscope_analysis::ops::OpRow> {
        stepscope_analysis::ops::ops(&self.profile, stepscope_analysis::ops::GroupBy::Op, 0).ops
    }
}
