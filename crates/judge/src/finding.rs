//! What a rule says: a [`Finding`] with its severity, measured value, threshold,
//! evidence and advice.

use serde::Serialize;

/// How bad a finding is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Critical,
    Warning,
    Info,
}

/// One piece of evidence: what, where in the timeline, how long.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Evidence {
    pub what: String,
    pub host: String,
    pub start_ps: Option<i64>,
    pub duration_ps: Option<i64>,
    /// e.g. the step number.
    pub step_num: Option<i64>,
    pub detail: String,
}

/// One finding of a rule.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Finding {
    pub rule: &'static str,
    pub severity: Severity,
    pub title: String,
    pub value: f64,
    pub threshold: f64,
    /// Unit of `value` and `threshold` (`pct`, `s`, `count`, `us`).
    pub unit: &'static str,
    pub evidence: Vec<Evidence>,
    pub advice: String,
}

pub fn finish(out: &mut [Finding]) {
    out.sort_by(|a, b| {
        let over = |f: &Finding| if f.threshold != 0.0 { (f.value / f.threshold - 1.0).abs() } else { f.value.abs() };
        a.severity.cmp(&b.severity).then(over(b).total_cmp(&over(a))).then(a.rule.cmp(b.rule))
    });
}
