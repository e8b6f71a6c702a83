//! `stepscope check PATH --baseline FILE`: the CI gate.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;
use serde::Deserialize;
use stepscope_report::check::{self, LimitSpec, MetricSpec};
use stepscope_report::summary;

use crate::load;
use crate::opts::{Input, Select};
use crate::table::Table;

#[derive(Args, Debug)]
pub struct CheckArgs {
    #[command(flatten)]
    pub input: Input,
    /// A saved `stepscope summary PATH --json` of the run to compare against.
    #[arg(long, value_name = "FILE")]
    pub baseline: Option<PathBuf>,
    /// Fail when the mean step time (over the warm steps, where some compiled) is above
    /// this, ms: an absolute limit, with or without a baseline (guide 001's
    /// `assert mean_ms < 150` is `--max-step-ms 150`).
    #[arg(long, value_name = "MS")]
    pub max_step_ms: Option<f64>,
    /// Fail when the median step time grows by more than this, percent.
    #[arg(long, value_name = "PCT", default_value_t = 5.0, allow_negative_numbers = true)]
    pub max_regression: f64,
    /// A TOML file of more metrics to gate on, each with its own tolerance:
    /// `[[metric]]` tables with `metric = "breakdown.device_idle_ps"` and
    /// `max_regression_pct = 10` (optional `higher_is_better = true`); and absolute
    /// limits: `[[limit]]` tables with `metric = "step_time.mean_ps"` and `max = 150e9`
    /// (or `min = N`), in the metric's unit.
    #[arg(long, value_name = "FILE")]
    pub metrics: Option<PathBuf>,
    /// Fewest steps either side needs to be judged.
    #[arg(long, value_name = "N", allow_negative_numbers = true, default_value_t = 3)]
    pub min_steps: u64,
    /// Only this host (its file name without .xplane.pb).
    #[arg(long, value_name = "HOST", value_parser = crate::opts::host_name())]
    pub host: Option<String>,
    /// Read the run a host at a time, in one host's memory whatever the host count, for
    /// the same numbers. What a run of several hosts gets without asking.
    #[arg(long, conflicts_with = "host")]
    pub host_at_a_time: bool,
    /// Check the run reduced from the parts in this folder, written by `stepscope part
    /// --for check` (`summary --parts` says more).
    #[arg(long, value_name = "DIR", conflicts_with = "host")]
    pub parts: Option<PathBuf>,
    /// Print JSON (schema `stepscope.check/1`).
    #[arg(long)]
    pub json: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MetricsFile {
    #[serde(default)]
    metric: Vec<MetricSpec>,
    #[serde(default)]
    limit: Vec<LimitSpec>,
}

fn read_metrics(path: &Path) -> anyhow::Result<MetricsFile> {
    let text = stepscope_xspace::files::read_small_text(path, "metrics file")?;
    toml::from_str(&text).map_err(|e| {
        anyhow::anyhow!(
            "{}: {} — write [[metric]] tables with metric = \"…\" and max_regression_pct = N, or [[limit]] \
             tables with metric = \"…\" and max = N",
            path.display(),
            e.message().trim()
        )
    })
}

/// `--host-at-a-time`: the run's overview, one host in memory at a time.
fn host_at_a_time(input: &Input, top: usize) -> anyhow::Result<summary::Summary> {
    let (mut s, unread) = load::host_at_a_time(input, Default::default(), |run, hosts, read| {
        summary::overview_by_host(run, hosts, top, read)
    })?;
    s.overview.hosts_unread = unread;
    Ok(s)
}

/// Reads the saved summary a check compares with.
fn read_baseline(path: &Path) -> anyhow::Result<serde_json::Value> {
    let text = stepscope_xspace::files::read_small_text(path, "baseline").map_err(|e| {
        anyhow::anyhow!(
            "cannot read the baseline: {} — save one with `stepscope summary PATH --json > baseline.json`",
            e.what
        )
    })?;
    serde_json::from_str(&text).map_err(|e| {
        anyhow::anyhow!(
            "the baseline {} is not JSON ({e}) — save one with `stepscope summary PATH --json > baseline.json`",
            path.display()
        )
    })
}

pub fn run(args: &CheckArgs) -> anyhow::Result<ExitCode> {
    let baseline = args.baseline.as_deref().map(read_baseline).transpose()?;
    let file = match &args.metrics {
        Some(p) => read_metrics(p)?,
        None => MetricsFile { metric: Vec::new(), limit: Vec::new() },
    };
    let mut limits = file.limit;
    if let Some(ms) = args.max_step_ms {
        if !(ms.is_finite() && ms > 0.0) {
            anyhow::bail!("--max-step-ms {ms} is not a step time — give a number of milliseconds above 0, e.g. 150");
        }
        limits.push(LimitSpec { metric: "step_time.mean_ps".into(), max: Some(ms * 1e9), min: None });
    }
    let select = Select { host: args.host.clone(), top: None };
    // With a baseline, the top ops `summary --json` lists: whether both ran one program.
    let top = if baseline.is_some() { select.rows() } else { 0 };
    let whole = |profile| Ok(summary::overview(&profile, top));
    let current = match &args.parts {
        Some(dir) => crate::cmd::part::overview_of_parts(&args.input, dir, top)?,
        None => load::whole_or_by_host(&args.input, &select, args.host_at_a_time, "numbers", whole, || {
            host_at_a_time(&args.input, top)
        })?,
    };
    let gate = check::Gate {
        baseline: baseline.as_ref(),
        max_regression_pct: args.max_regression,
        extra: &file.metric,
        limits: &limits,
        min_steps: args.min_steps,
    };
    let c = check::check(&current, &gate)?;
    if args.json {
        outln!("{}", serde_json::to_string(&c)?);
    } else {
        let mut t = Table::new(vec!["METRIC", "BASELINE", "CURRENT", "CHANGE", "LIMIT", "RESULT"]);
        for m in &c.metrics {
            t.push(vec![
                label(&m.metric, &c),
                number(m.baseline, &m.metric),
                number(m.current, &m.metric),
                format!("{:+.1}%", m.regression_pct),
                format!("{:.1}%", m.max_regression_pct),
                if m.passed { "pass".into() } else { "FAIL".into() },
            ]);
        }
        for l in &c.limits {
            let bound = match (l.min, l.max) {
                (Some(lo), Some(hi)) => format!("{} – {}", number(lo, &l.metric), number(hi, &l.metric)),
                (Some(lo), None) => format!("≥ {}", number(lo, &l.metric)),
                (None, Some(hi)) => format!("≤ {}", number(hi, &l.metric)),
                (None, None) => String::new(),
            };
            t.push(vec![
                limit_label(&l.metric, &c),
                "—".into(),
                number(l.current, &l.metric),
                "—".into(),
                bound,
                if l.passed { "pass".into() } else { "FAIL".into() },
            ]);
        }
        out!("{}", t.text());
        let verdict = if c.passed { "check passed" } else { "check FAILED: a metric is past its limit" };
        if baseline.is_some() {
            outln!(
                "{verdict} ({} baseline steps, {} current steps; CHANGE above 0 is worse, below 0 better)",
                c.baseline_steps,
                c.current_steps
            );
        } else {
            outln!("{verdict} ({} steps)", c.current_steps);
        }
        if let Some(w) = &c.warning {
            out!("{}", crate::human::wrap("", &format!("warning: {w}"), crate::table::prose_width()));
        }
        let sides = [
            ("baseline", c.baseline_cold_steps, c.baseline_steps),
            ("current run", c.current_cold_steps, c.current_steps),
        ];
        for (label, cold, steps) in sides {
            if let Some(note) = crate::notes::cold_note(label, cold, steps) {
                out!("{}", crate::human::wrap("", &note, crate::table::prose_width()));
            }
        }
    }
    Ok(if c.passed { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

/// A metric as the table names it: its values are shown in their unit (`8.40 ms`), so
/// the JSON path loses its unit suffix; the step time says whose steps it is.
fn label(metric: &str, c: &check::Check) -> String {
    if metric == "step_time.median_ps" {
        let warm = |cold: u64, steps: u64| cold > 0 && cold < steps;
        let warm = warm(c.baseline_cold_steps, c.baseline_steps) || warm(c.current_cold_steps, c.current_steps);
        return if warm { "step time (median, warm steps)".into() } else { "step time (median)".into() };
    }
    ["_ps", "_bytes"].iter().find_map(|u| metric.strip_suffix(u)).unwrap_or(metric).to_string()
}

/// A limit's metric as the table names it: a step time says it is over warm steps
/// where some compiled.
fn limit_label(metric: &str, c: &check::Check) -> String {
    let base = ["_ps", "_bytes"].iter().find_map(|u| metric.strip_suffix(u)).unwrap_or(metric);
    match base.strip_prefix("step_time.") {
        Some(stat) if c.current_cold_steps > 0 && c.current_cold_steps < c.current_steps => {
            format!("step time ({stat}, warm steps)")
        }
        Some(stat) => format!("step time ({stat})"),
        None => base.to_string(),
    }
}

fn number(v: f64, metric: &str) -> String {
    if metric.ends_with("_ps") {
        crate::human::duration_ps(v as i64)
    } else if metric.ends_with("_bytes") {
        crate::human::bytes(v.max(0.0) as u64)
    } else {
        format!("{v:.2}")
    }
}
