//! The CI gate: a run's summary against a saved baseline (`stepscope summary --json`).
//!
//! Medians are compared. Step time always; other metrics by their dotted path in the
//! summary JSON (`breakdown.device_idle_ps`, `device_utilization_pct`, …), each with
//! its own tolerance.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::summary::Summary;

/// One metric to gate on.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MetricSpec {
    /// Dotted path into the summary JSON, e.g. `breakdown.device_idle_ps`.
    pub metric: String,
    /// Largest allowed change for the worse, percent.
    pub max_regression_pct: f64,
    /// True when a larger value is better (utilisation); default: names ending in
    /// `utilization_pct` are, everything else (times, bytes) is better smaller.
    #[serde(default)]
    pub higher_is_better: Option<bool>,
}

/// An absolute limit on a metric of the run checked (no baseline needed): guide 001's
/// `assert mean_ms < 150` is `step_time.mean_ps` with `max = 150e9`. A `step_time.*`
/// metric is read over the warm steps where some steps compiled.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitSpec {
    /// Dotted path into the summary JSON, e.g. `step_time.mean_ps`.
    pub metric: String,
    /// Largest value allowed, in the metric's unit.
    #[serde(default)]
    pub max: Option<f64>,
    /// Smallest value allowed (a utilisation, say).
    #[serde(default)]
    pub min: Option<f64>,
}

/// The outcome of one absolute limit.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LimitResult {
    pub metric: String,
    pub current: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min: Option<f64>,
    pub passed: bool,
}

/// The outcome of one metric.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MetricResult {
    pub metric: String,
    pub baseline: f64,
    pub current: f64,
    /// Change for the worse, percent (negative: improved).
    pub regression_pct: f64,
    pub max_regression_pct: f64,
    pub passed: bool,
}

/// The gate's verdict.
#[derive(Clone, Debug, Serialize)]
pub struct Check {
    pub schema: &'static str,
    pub passed: bool,
    pub baseline_steps: u64,
    pub current_steps: u64,
    /// Steps of each side in which the host compiled: where a side also has warm
    /// steps, its step time is theirs.
    #[serde(skip_serializing_if = "stepscope_model::steps::is_zero")]
    pub baseline_cold_steps: u64,
    #[serde(skip_serializing_if = "stepscope_model::steps::is_zero")]
    pub current_cold_steps: u64,
    /// Each metric against the baseline (none without a baseline).
    pub metrics: Vec<MetricResult>,
    /// Each absolute limit; absent where none was given.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub limits: Vec<LimitResult>,
    /// Why the verdict deserves a second look (limits judged on fewer steps than
    /// asked for); absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warning: Option<String>,
}

/// Why a check cannot judge.
#[derive(Clone, Debug, PartialEq)]
pub enum CheckError {
    /// The baseline is not a `stepscope.summary/1` document.
    NotASummary(String),
    /// Too few steps on one side to compare medians.
    TooFewSteps { side: &'static str, steps: u64, min: u64 },
    /// A metric path that is not a number in both summaries.
    UnknownMetric(String),
    /// A tolerance that is not a percent of 0 or more.
    BadTolerance { metric: String, pct: f64 },
    /// A baseline value no summary can hold (negative, or beyond any time or size).
    BadBaselineValue { metric: String, value: f64 },
    /// A limit that is not a finite number, or one with neither `max` nor `min`.
    BadLimit { metric: String },
    /// Neither a baseline nor a limit: nothing to check against.
    NothingToCheck,
    /// Metrics to compare (`[[metric]]`) without a baseline to compare them with.
    MetricsNeedABaseline,
    /// The baseline ran another program: its top ops and the run's share under
    /// [`crate::diff::SAME_PROGRAM_MIN_PCT`] of their time ([`top_ops_matched_pct`]).
    OtherProgram { matched_pct: f64, baseline: String, current: String },
}

/// The schema of the summaries this build writes and reads as baselines.
pub const SUMMARY_SCHEMA: &str = "stepscope.summary/1";

/// The largest value a summary metric can hold (times in ps and sizes in bytes are
/// 64-bit integers).
const MAX_METRIC: f64 = i64::MAX as f64;

impl std::fmt::Display for CheckError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CheckError::NotASummary(why) => write!(
                f,
                "the baseline is not a stepscope summary ({why}) — save one with `stepscope summary PATH --json > baseline.json`"
            ),
            CheckError::TooFewSteps { side, steps, min } => write!(
                f,
                "the {side} has {steps} step(s), too few to judge (need {min}) — capture more steps, or lower --min-steps"
            ),
            CheckError::UnknownMetric(m) => write!(
                f,
                "metric {m:?} is not a number in both summaries — use a dotted path of `stepscope summary --json`, e.g. breakdown.device_idle_ps"
            ),
            CheckError::BadTolerance { metric, pct } => write!(
                f,
                "the tolerance of {metric} is {pct}, not a percent of 0 or more — pass a finite number such as 5"
            ),
            CheckError::BadLimit { metric } => write!(
                f,
                "the limit on {metric} is not a finite max or min — give max = N and/or min = N, numbers in the metric's unit"
            ),
            CheckError::MetricsNeedABaseline => write!(
                f,
                "[[metric]] tables are compared with a baseline, and none was given — add --baseline FILE, or use \
                 [[limit]] tables (metric = \"…\", max = N) for absolute limits"
            ),
            CheckError::NothingToCheck => write!(
                f,
                "nothing to check against — give --baseline FILE (a saved `stepscope summary PATH --json`), \
                 --max-step-ms MS, or [[limit]] tables in --metrics FILE"
            ),
            CheckError::OtherProgram { matched_pct, baseline, current } => write!(
                f,
                "the baseline ran another program ({matched_pct:.1}% of the top ops' time matched: {baseline} \
                 against this run's {current}), so a change in step time is not a regression — compare with a \
                 baseline of this program: `stepscope summary PATH --json > baseline.json` on a run of it"
            ),
            CheckError::BadBaselineValue { metric, value } => write!(
                f,
                "the baseline's {metric} is {}, which no summary holds (it must be between 0 and {MAX_METRIC:e}) — save the baseline again with `stepscope summary PATH --json > baseline.json`",
                short(*value)
            ),
        }
    }
}

impl std::error::Error for CheckError {}

/// A number as a person reads it: huge ones with an exponent.
fn short(v: f64) -> String {
    if v.abs() < 1e15 {
        format!("{v}")
    } else {
        format!("{v:e}")
    }
}

fn lookup(v: &Value, path: &str) -> Option<f64> {
    if path == STEP_TIME {
        // The step time runs are ranked by: the warm steps', where some compiled.
        if let Some(warm) = v.get("warm_step_time").and_then(|w| w.get("median_ps")).and_then(Value::as_f64) {
            return Some(warm);
        }
    }
    value_at(v, path)
}

/// The number at dotted `path` in a summary's JSON.
fn value_at(v: &Value, path: &str) -> Option<f64> {
    path.split('.').try_fold(v, |v, k| v.get(k))?.as_f64()
}

/// A summary's steps, and those of them that compiled.
fn steps(v: &Value) -> u64 {
    v.get("step_count").and_then(Value::as_u64).unwrap_or(0)
}

fn cold(v: &Value) -> u64 {
    v.get("cold_steps").and_then(Value::as_u64).unwrap_or(0)
}

/// Whether two summaries' top ops are of one program: of each side's top-op time, the
/// share in ops the other side's top ops also ran — of one name, or of one category and
/// FLOPs an execution (one computation renamed, as jitting op-by-op code renames its
/// dots); not of one module name, which programs share (`jit_train_step`) — the larger
/// of the two; and each side's programs, named. `None` where a side lists no top op
/// with time.
fn top_ops_matched_pct(baseline: &Value, cur: &Value) -> Option<(f64, String, String)> {
    struct Top {
        keys: [String; 2],
        module: String,
        total_ps: f64,
    }
    let ops = |v: &Value| -> Vec<Top> {
        (v.get("top_ops").and_then(Value::as_array).into_iter().flatten())
            .filter_map(|o| {
                let text = |k: &str| o.get(k).and_then(Value::as_str).unwrap_or("").to_string();
                let (module, name, category) = (text("module"), text("name"), text("category"));
                let flops = o.get("flops").and_then(Value::as_f64).unwrap_or(0.0);
                let runs = o.get("executions").and_then(Value::as_f64).unwrap_or(0.0).max(1.0);
                let shape = match flops > 0.0 {
                    true => format!("{category} {}", (flops / runs).round()),
                    false => String::new(),
                };
                let keys = [format!("n {name}"), format!("s {shape}")];
                Some(Top {
                    keys,
                    module: if module.is_empty() { name } else { module },
                    total_ps: o.get("total_ps")?.as_f64()?.max(0.0),
                })
            })
            .collect()
    };
    let (b, c) = (ops(baseline), ops(cur));
    let keys = |ops: &[Top]| -> std::collections::HashSet<String> {
        ops.iter().flat_map(|o| o.keys.iter().filter(|k| k.len() > 2).cloned()).collect()
    };
    let share = |mine: &[Top], theirs: &std::collections::HashSet<String>| {
        let all: f64 = mine.iter().map(|o| o.total_ps).sum();
        let both: f64 = mine.iter().filter(|o| o.keys.iter().any(|k| theirs.contains(k))).map(|o| o.total_ps).sum();
        (all > 0.0).then(|| 100.0 * both / all)
    };
    // + 0.0: an empty sum is -0.0.
    let pct = share(&b, &keys(&c))?.max(share(&c, &keys(&b))?) + 0.0;
    let names = |ops: &[Top]| {
        let mut n: Vec<&str> = Vec::new();
        for o in ops {
            if !n.contains(&o.module.as_str()) {
                n.push(&o.module);
            }
        }
        n.truncate(3);
        n.join(", ")
    };
    Some((pct, names(&b), names(&c)))
}

/// The metric every check gates on.
const STEP_TIME: &str = "step_time.median_ps";

/// What a check compares the run with.
pub struct Gate<'a> {
    /// A saved summary, when there is one: step time (median) within
    /// `max_regression_pct`, and every metric of `extra` within its own tolerance.
    pub baseline: Option<&'a Value>,
    pub max_regression_pct: f64,
    pub extra: &'a [MetricSpec],
    /// Absolute limits on the run itself.
    pub limits: &'a [LimitSpec],
    /// Fewest steps a side needs to be compared with a baseline; limits alone are
    /// judged on fewer, with a warning.
    pub min_steps: u64,
}

/// Checks `current` against `gate`.
pub fn check(current: &Summary, gate: &Gate) -> Result<Check, CheckError> {
    let cur = serde_json::to_value(current).map_err(|e| CheckError::NotASummary(e.to_string()))?;
    if gate.baseline.is_none() && !gate.extra.is_empty() {
        return Err(CheckError::MetricsNeedABaseline);
    }
    if steps(&cur) == 0 && gate.limits.iter().any(|l| l.metric.starts_with("step_time.")) {
        return Err(CheckError::TooFewSteps { side: "current run", steps: 0, min: 1 });
    }
    let limits = limits(&cur, gate.limits)?;
    let mut c = match gate.baseline {
        Some(b) => against(b, &cur, gate.max_regression_pct, gate.extra, gate.min_steps)?,
        None if limits.is_empty() => return Err(CheckError::NothingToCheck),
        None => Check {
            schema: "stepscope.check/1",
            passed: true,
            baseline_steps: 0,
            current_steps: steps(&cur),
            baseline_cold_steps: 0,
            current_cold_steps: cold(&cur),
            metrics: Vec::new(),
            limits: Vec::new(),
            warning: None,
        },
    };
    if gate.baseline.is_none() && c.current_steps < gate.min_steps {
        c.warning = Some(format!(
            "the run has {} step(s), fewer than {}: the limits are judged on them — capture more steps for a \
             steadier verdict",
            c.current_steps, gate.min_steps
        ));
    }
    c.passed = c.metrics.iter().all(|m| m.passed) && limits.iter().all(|l| l.passed);
    c.limits = limits;
    Ok(c)
}

/// Each limit against the run's summary `cur`.
fn limits(cur: &Value, specs: &[LimitSpec]) -> Result<Vec<LimitResult>, CheckError> {
    let mut out = Vec::new();
    for l in specs {
        let finite = |v: Option<f64>| v.is_none_or(f64::is_finite);
        if (l.max.is_none() && l.min.is_none()) || !finite(l.max) || !finite(l.min) {
            return Err(CheckError::BadLimit { metric: l.metric.clone() });
        }
        // Step times as runs are ranked: over the warm steps where some compiled.
        let warm = l.metric.strip_prefix("step_time.").and_then(|rest| {
            cur.get("warm_step_time").filter(|w| !w.is_null()).and_then(|w| w.get(rest)).and_then(Value::as_f64)
        });
        let Some(value) = warm.or_else(|| value_at(cur, &l.metric)) else {
            return Err(CheckError::UnknownMetric(l.metric.clone()));
        };
        let passed = l.max.is_none_or(|m| value <= m) && l.min.is_none_or(|m| value >= m);
        out.push(LimitResult { metric: l.metric.clone(), current: value, max: l.max, min: l.min, passed });
    }
    Ok(out)
}

/// Compares `cur` to `baseline`: step time (median) within `max_regression_pct`,
/// and every metric of `extra` within its own tolerance.
fn against(
    baseline: &Value,
    cur: &Value,
    max_regression_pct: f64,
    extra: &[MetricSpec],
    min_steps: u64,
) -> Result<Check, CheckError> {
    match baseline.get("schema").and_then(Value::as_str) {
        Some(SUMMARY_SCHEMA) => {}
        Some(s) if s.starts_with("stepscope.summary/") => {
            return Err(CheckError::NotASummary(format!(
                "its schema is {s:?}, and this stepscope reads {SUMMARY_SCHEMA:?}"
            )))
        }
        Some(s) => return Err(CheckError::NotASummary(format!("its schema is {s:?}"))),
        None => return Err(CheckError::NotASummary("it has no \"schema\" field".into())),
    }
    let (bs, cs) = (steps(baseline), steps(cur));
    for (side, n) in [("baseline", bs), ("current run", cs)] {
        if n < min_steps {
            return Err(CheckError::TooFewSteps { side, steps: n, min: min_steps });
        }
    }
    if let Some((matched_pct, b, c)) = top_ops_matched_pct(baseline, cur) {
        if matched_pct < crate::diff::SAME_PROGRAM_MIN_PCT {
            return Err(CheckError::OtherProgram { matched_pct, baseline: b, current: c });
        }
    }
    let mut specs = vec![MetricSpec { metric: STEP_TIME.into(), max_regression_pct, higher_is_better: Some(false) }];
    specs.extend(extra.iter().filter(|m| m.metric != STEP_TIME).cloned());
    for m in &specs {
        if !(m.max_regression_pct.is_finite() && m.max_regression_pct >= 0.0) {
            return Err(CheckError::BadTolerance { metric: m.metric.clone(), pct: m.max_regression_pct });
        }
    }
    let mut metrics = Vec::new();
    for m in &specs {
        let (Some(b), Some(c)) = (lookup(baseline, &m.metric), lookup(cur, &m.metric)) else {
            return Err(CheckError::UnknownMetric(m.metric.clone()));
        };
        if !(0.0..=MAX_METRIC).contains(&b) {
            return Err(CheckError::BadBaselineValue { metric: m.metric.clone(), value: b });
        }
        let higher = m.higher_is_better.unwrap_or(m.metric.ends_with("utilization_pct"));
        let worse = if higher { b - c } else { c - b };
        let regression_pct = if b != 0.0 {
            100.0 * worse / b.abs()
        } else if worse > 0.0 {
            f64::INFINITY
        } else {
            0.0
        };
        metrics.push(MetricResult {
            metric: m.metric.clone(),
            baseline: b,
            current: c,
            regression_pct,
            max_regression_pct: m.max_regression_pct,
            passed: regression_pct <= m.max_regression_pct,
        });
    }
    Ok(Check {
        schema: "stepscope.check/1",
        passed: metrics.iter().all(|m| m.passed),
        baseline_steps: bs,
        current_steps: cs,
        baseline_cold_steps: cold(baseline),
        current_cold_steps: cold(cur),
        metrics,
        limits: Vec::new(),
        warning: None,
    })
}
