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
stepscope_model::wire_struct!(Evidence { what, host, start_ps, duration_ps, step_num, detail });

/// What fixing a finding's cause would gain: the what-if model's projection of the
/// step with the edit it assumes (`stepscope whatif`, docs/whatif.md).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Gain {
    /// The step time saved, ps: the median replayed step less the median projected.
    pub gain_ps: i64,
    /// `gain_ps` as a share of the median step, percent.
    pub gain_pct: f64,
    /// The median projected step, ps.
    pub projected_step_ps: i64,
    /// The edit assumed, as `stepscope whatif` spells it (`--remove callbacks`).
    pub gain_edit: String,
    /// Projected with the hosts of a pod replayed apart ([`Projection::hosts_apart`]).
    ///
    /// [`Projection::hosts_apart`]: stepscope_analysis::whatif::Projection::hosts_apart
    #[serde(skip)]
    pub hosts_apart: bool,
}

/// One finding of a rule.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Finding {
    pub rule: &'static str,
    /// What fixing its cause would gain, where the finding names a fixable cause and
    /// the run has steps to replay (JSON: `gain_ps`, `gain_pct`, `projected_step_ps`,
    /// `gain_edit` beside the other fields).
    #[serde(flatten)]
    pub gain: Option<Gain>,
    pub severity: Severity,
    pub title: String,
    pub value: f64,
    pub threshold: f64,
    /// Unit of `value` and `threshold` (`pct`, `s`, `count`, `us`).
    pub unit: &'static str,
    pub evidence: Vec<Evidence>,
    pub advice: String,
    /// Where its evidence sits in a part of the capture that is not healthy (a cold or
    /// cut step, a host whose clock is off or whose events stop early): each says which
    /// and what it does to the finding ([`crate::health::Health::caveats`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub caveats: Vec<String>,
}

impl Finding {
    /// The finding with its projected gain, its severity then the gain's
    /// ([`of_step_share`] of the share of the step it saves).
    pub fn with_gain(mut self, gain: Option<Gain>) -> Finding {
        if let Some(g) = &gain {
            self.severity = of_step_share(g.gain_pct);
        }
        self.gain = gain;
        self
    }
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
/// itself, then causes before symptoms, then by projected gain (causes without one
/// after), then by how far past the threshold. Where a cause of warning or worse was
/// found, a symptom is at most a warning: the cause carries the severity, and the first
/// line names what to fix. A symptom names the causes found with their gains, or says
/// that none explains it.
pub fn finish(out: &mut [Finding]) {
    let is_cause = |f: &Finding| !SYMPTOMS.contains(&f.rule) && !ABOUT_THE_CAPTURE.contains(&f.rule);
    if out.iter().any(|f| is_cause(f) && f.severity <= Severity::Warning) {
        for f in out.iter_mut().filter(|f| SYMPTOMS.contains(&f.rule)) {
            f.severity = f.severity.max(Severity::Warning);
        }
    }
    let mut causes: Vec<(&'static str, f64)> = (out.iter().filter(|f| is_cause(f)))
        .filter_map(|f| f.gain.as_ref().filter(|g| g.gain_ps > 0).map(|g| (f.rule, g.gain_pct)))
        .collect();
    causes.sort_by(|a, b| b.1.total_cmp(&a.1));
    let named: Vec<String> = causes.iter().map(|(rule, pct)| format!("{rule} (fix: -{pct:.1}% of the step)")).collect();
    for f in out.iter_mut().filter(|f| SYMPTOMS.contains(&f.rule) && f.rule != "step-jitter") {
        let what = match named.is_empty() {
            true => "no cause stepscope names explains it (see the breakdown: stepscope summary PATH)".to_string(),
            false => format!("causes found: {}", named.join(", ")),
        };
        f.evidence.push(Evidence {
            what,
            host: String::new(),
            start_ps: None,
            duration_ps: None,
            step_num: None,
            detail: String::new(),
        });
    }
    out.sort_by(|a, b| {
        let over = |f: &Finding| if f.threshold != 0.0 { (f.value / f.threshold - 1.0).abs() } else { f.value.abs() };
        let capture = |f: &Finding| !ABOUT_THE_CAPTURE.contains(&f.rule);
        let symptom = |f: &Finding| SYMPTOMS.contains(&f.rule);
        let gain = |f: &Finding| f.gain.as_ref().map_or(f64::NEG_INFINITY, |g| g.gain_pct);
        (a.severity.cmp(&b.severity))
            .then(capture(a).cmp(&capture(b)))
            .then(symptom(a).cmp(&symptom(b)))
            .then(gain(b).total_cmp(&gain(a)))
            .then(over(b).total_cmp(&over(a)))
            .then(a.rule.cmp(b.rule))
    });
}
