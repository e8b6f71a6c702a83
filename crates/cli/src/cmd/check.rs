//! `stepscope check PATH --baseline FILE`: the CI gate.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;
use serde::Deserialize;
use stepscope_report::check::{self, MetricSpec};
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
    pub baseline: PathBuf,
    /// Fail when the median step time grows by more than this, percent.
    #[arg(long, value_name = "PCT", default_value_t = 5.0, allow_negative_numbers = true)]
    pub max_regression: f64,
    /// A TOML file of more metrics to gate on, each with its own tolerance:
    /// `[[metric]]` tables with `metric = "breakdown.device_idle_ps"` and
    /// `max_regression_pct = 10` (optional `higher_is_better = true`).
    #[arg(long, value_name = "FILE")]
    pub metrics: Option<PathBuf>,
    /// Fewest steps either side needs to be judged.
    #[arg(long, value_name = "N", allow_negative_numbers = true, default_value_t = 3)]
    pub min_steps: u64,
    /// Only this host (its file name without .xplane.pb).
    #[arg(long, value_name = "HOST", value_parser = crate::opts::host_name())]
    pub host: Option<String>,
    /// Print JSON (schema `stepscope.check/1`).
    #[arg(long)]
    pub json: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MetricsFile {
    #[serde(default)]
    metric: Vec<MetricSpec>,
}

fn read_metrics(path: &Path) -> anyhow::Result<Vec<MetricSpec>> {
    let text = stepscope_xspace::files::read_small_text(path, "metrics file")?;
    let f: MetricsFile = toml::from_str(&text).map_err(|e| {
        anyhow::anyhow!(
            "{}: {} — write [[metric]] tables with metric = \"…\" and max_regression_pct = N",
            path.display(),
            e.message().trim()
        )
    })?;
    Ok(f.metric)
}

pub fn run(args: &CheckArgs) -> anyhow::Result<ExitCode> {
    let text = stepscope_xspace::files::read_small_text(&args.baseline, "baseline").map_err(|e| {
        anyhow::anyhow!(
            "cannot read the baseline: {} — save one with `stepscope summary PATH --json > baseline.json`",
            e.what
        )
    })?;
    let baseline: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
        anyhow::anyhow!(
            "the baseline {} is not JSON ({e}) — save one with `stepscope summary PATH --json > baseline.json`",
            args.baseline.display()
        )
    })?;
    let extra = match &args.metrics {
        Some(p) => read_metrics(p)?,
        None => Vec::new(),
    };
    let profile = load::profile(&args.input, &Select { host: args.host.clone(), top: None })?;
    let current = summary::overview(&profile, 0);
    let c = check::check(&baseline, &current, args.max_regression, &extra, args.min_steps)?;
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
        out!("{}", t.text());
        outln!(
            "{} ({} baseline steps, {} current steps; CHANGE above 0 is worse, below 0 better)",
            if c.passed { "check passed" } else { "check FAILED: a metric regressed past its limit" },
            c.baseline_steps,
            c.current_steps
        );
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

fn number(v: f64, metric: &str) -> String {
    if metric.ends_with("_ps") {
        crate::human::duration_ps(v as i64)
    } else if metric.ends_with("_bytes") {
        crate::human::bytes(v.max(0.0) as u64)
    } else {
        format!("{v:.2}")
    }
}
