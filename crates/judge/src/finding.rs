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

/// The severity of a cause by the share of the step it takes, percent: 30% of the
/// step or more is critical, 10% a warning, less a note.
pub fn of_step_share(step_pct: f64) -> Severity {
    if step_pct >= 30.0 {
        Severity::Critical
    } else if step_pct >= 10.0 {
        Severity::Warning
    } else {
        Severity::Info
    }
}

/// The rules that say whether the capture itself can be read as the steady state (no
/// steps, mostly compilation, tracing off, cut short): of one severity, they come
/// before what they make unreliable.
const ABOUT_THE_CAPTURE: [&str; 5] =
    ["no-steps", "captured-compilation", "host-tracing-off", "no-device-activity", "truncated"];

/// The rules that describe an effect — the devices idle, waiting on their host, steps
/// uneven — rather than a cause a user can fix.
pub const SYMPTOMS: [&str; 3] = ["low-utilization", "host-bound-gaps", "step-jitter"];

/// Orders findings: most severe first; of one severity, those about the capture
/// itself, then causes before symptoms, then by how far past the threshold. Where a
/// cause of warning or worse was found, a symptom is at most a warning: the cause
/// carries the severity, and the first line names what to fix.
pub fn finish(out: &mut [Finding]) {
    let is_cause = |f: &Finding| !SYMPTOMS.contains(&f.rule) && !ABOUT_THE_CAPTURE.contains(&f.rule);
    if out.iter().any(|f| is_cause(f) && f.severity <= Severity::Warning) {
        for f in out.iter_mut().filter(|f| SYMPTOMS.contains(&f.rule)) {
            f.severity = f.severity.max(Severity::Warning);
        }
    }
    out.sort_by(|a, b| {
        let over = |f: &Finding| if f.threshold != 0.0 { (f.value / f.threshold - 1.0).abs() } else { f.value.abs() };
        let capture = |f: &Finding| !ABOUT_THE_CAPTURE.contains(&f.rule);
        let symptom = |f: &Finding| SYMPTOMS.contains(&f.rule);
        (a.severity.cmp(&b.severity))
            .then(capture(a).cmp(&capture(b)))
            .then(symptom(a).cmp(&symptom(b)))
            .then(over(b).total_cmp(&over(a)))
            .then(a.rule.cmp(b.rule))
    });
}
