//! The argument groups the commands take (which profile, which rows, which format,
//! peaks) and their parsers. `args.rs` puts the commands together; the commands
//! depend on this module only, not on each other.

use std::path::{Path, PathBuf};

use clap::Args;
use stepscope_analysis::peaks::UserPeaks;
use stepscope_judge::advise::Thresholds;

/// Which profile to read: PATH and the run in it.
#[derive(Args, Debug, Clone)]
pub struct Input {
    /// A log directory (any depth), a run folder, or a profile file
    /// (.xplane.pb, .trace.json.gz, perfetto_trace.json.gz, .json); local, or in a
    /// bucket as gs://BUCKET/PATH or s3://BUCKET/PATH.
    pub path: PathBuf,
    /// The run to read when PATH holds several (default: the newest).
    #[arg(long, value_name = "NAME")]
    pub run: Option<String>,
}

/// Output format flags shared by commands.
#[derive(Args, Debug, Clone)]
pub struct Output {
    /// Print JSON (versioned by its "schema" field) instead of a table.
    #[arg(long, conflicts_with = "csv")]
    pub json: bool,
    /// Print CSV instead of a table.
    #[arg(long)]
    pub csv: bool,
}

/// Which part of a run to analyse, and how much to show.
#[derive(Args, Debug, Clone)]
pub struct Select {
    /// Only this host (its file name without .xplane.pb).
    #[arg(long, value_name = "HOST", value_parser = host_name())]
    pub host: Option<String>,
    /// Show at most N rows (default 10; 0 or `all` shows all).
    #[arg(long, value_name = "N", allow_negative_numbers = true, value_parser = rows)]
    pub top: Option<usize>,
}

/// `--host`: any bytes, read as the host names are (from file names, with what is
/// not UTF-8 shown as U+FFFD), so a host whose file name is not UTF-8 can be chosen by
/// the name stepscope prints or by the file's own bytes.
pub fn host_name() -> impl clap::builder::TypedValueParser<Value = String> {
    use clap::builder::TypedValueParser;
    clap::builder::OsStringValueParser::new().map(|s| s.to_string_lossy().into_owned())
}

/// A row count: a number, or `all` (as the HTTP API's `top=all`), which is 0.
fn rows(text: &str) -> Result<usize, String> {
    if text.eq_ignore_ascii_case("all") {
        return Ok(0);
    }
    text.parse().map_err(|_| format!("{text:?} is not a row count: give a number, or all"))
}

impl Select {
    /// How many rows to show: `--top N`, 10 by default, every row for 0.
    pub fn rows(&self) -> usize {
        match self.top {
            None => 10,
            Some(0) => usize::MAX,
            Some(n) => n,
        }
    }
}

#[derive(Args, Debug)]
pub struct AnalysisArgs {
    #[command(flatten)]
    pub input: Input,
    #[command(flatten)]
    pub select: Select,
    #[command(flatten)]
    pub output: Output,
}

/// An analysis that reads a run too large to read whole a host at a time.
#[derive(Args, Debug)]
pub struct ByHostArgs {
    #[command(flatten)]
    pub common: AnalysisArgs,
    /// Read the run a host at a time, several at once within the memory there is, for
    /// the same rows: what a run of several hosts gets without asking (kept for scripts).
    #[arg(long, conflicts_with = "host")]
    pub host_at_a_time: bool,
}

/// The device's peaks, for the analyses that measure against them (roofline, FLOPs
/// utilisation, memory bandwidth): a CPU has none in its profile.
#[derive(Args, Debug, Clone, Default)]
pub struct PeakArgs {
    /// Peak compute of each device, FLOP/s (SI prefixes: 3.5T, 900G); overrides the
    /// profile's and a known device's.
    #[arg(long, value_name = "RATE", value_parser = parse_rate)]
    pub peak_flops: Option<f64>,
    /// Peak memory bandwidth of each device, bytes/s (SI prefixes: 200G, 3.35T).
    #[arg(long, value_name = "RATE", value_parser = parse_rate)]
    pub peak_bandwidth: Option<f64>,
}

impl PeakArgs {
    /// The peaks as the analyses take them.
    pub fn user(&self) -> UserPeaks {
        UserPeaks { flops_per_s: self.peak_flops, bytes_per_s: self.peak_bandwidth }
    }
}

use stepscope_analysis::peaks::parse_rate;

/// An analysis measured against the device's peaks.
#[derive(Args, Debug)]
pub struct CostArgs {
    #[command(flatten)]
    pub common: AnalysisArgs,
    #[command(flatten)]
    pub peaks: PeakArgs,
}

/// Grouping for `ops --by`.
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum By {
    Op,
    Category,
    Module,
    Scope,
    /// The line of your Python that made the op (innermost frame outside libraries).
    Line,
    /// The whole Python stack that made the op.
    Stack,
}

impl By {
    /// The grouping as the op profile takes it.
    pub fn group(self) -> stepscope_analysis::ops::GroupBy {
        use stepscope_analysis::ops::GroupBy;
        match self {
            By::Op => GroupBy::Op,
            By::Category => GroupBy::Category,
            By::Module => GroupBy::Module,
            By::Scope => GroupBy::Scope,
            By::Line => GroupBy::Line,
            By::Stack => GroupBy::Stack,
        }
    }
}

#[derive(Args, Debug)]
pub struct OpsArgs {
    #[command(flatten)]
    pub common: AnalysisArgs,
    /// Group time by op, category, module, name-stack scope, Python source line or stack.
    #[arg(long, value_enum, default_value = "op")]
    pub by: By,
    /// With --by scope: cut scopes to this many levels (0 = whole scope).
    #[arg(long, value_name = "N", allow_negative_numbers = true, default_value_t = 0)]
    pub depth: usize,
    /// Only rows whose self time is at least this (`50ms`, `200us`, `1.5s`): user guide
    /// 003's "operations with >50ms self-time".
    #[arg(long, value_name = "DURATION", value_parser = parse_duration_ps)]
    pub min_self: Option<i64>,
    /// Read the run a host at a time, several at once within the memory there is, for
    /// the same rows: what a run of several hosts gets without asking (kept for scripts).
    #[arg(long, conflicts_with = "host")]
    pub host_at_a_time: bool,
    /// Reduce the run from the parts in this folder, written by `stepscope part --for
    /// ops` with the same `--by` and `--depth` (`summary --parts` says more).
    #[arg(long, value_name = "DIR", conflicts_with = "host")]
    pub parts: Option<PathBuf>,
    #[command(flatten)]
    pub peaks: PeakArgs,
}

/// A duration with its unit (`50ms`, `200us`, `200µs`, `1.5s`, `800ns`), in picoseconds.
pub(crate) fn parse_duration_ps(s: &str) -> Result<i64, String> {
    let t = s.trim();
    let number = t.trim_end_matches(|c: char| c.is_alphabetic());
    let scale = match &t[number.len()..] {
        "s" => 1e12,
        "ms" => 1e9,
        "us" | "µs" => 1e6,
        "ns" => 1e3,
        "ps" => 1.0,
        "" => return Err(format!("{s:?} has no unit: give one, e.g. 50ms, 200us or 1.5s")),
        unit => return Err(format!("{s:?}: unknown unit {unit:?}; use s, ms, us, ns or ps (e.g. 50ms)")),
    };
    match number.parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 && v * scale < 9.2e18 => Ok((v * scale).round() as i64),
        _ => Err(format!("{s:?} is not a duration; e.g. 50ms")),
    }
}

#[derive(Args, Debug)]
pub struct LsArgs {
    /// The log directory to search (default: the current folder).
    #[arg(default_value = ".")]
    pub logdir: PathBuf,
    #[command(flatten)]
    pub output: Output,
}

#[derive(Args, Debug)]
pub struct InfoArgs {
    #[command(flatten)]
    pub input: Input,
    #[command(flatten)]
    pub output: Output,
    /// Read the run a host at a time, several at once within the memory there is, for
    /// the same rows: what a run of several hosts gets without asking (kept for scripts).
    #[arg(long)]
    pub host_at_a_time: bool,
}

/// Reads thresholds from a TOML file: top-level keys or a `[thresholds]` table.
pub fn read_thresholds(path: &Path) -> anyhow::Result<Thresholds> {
    let text = stepscope_xspace::files::read_small_text(path, "thresholds file")?;
    let value: toml::Table = toml::from_str(&text)
        .map_err(|e| anyhow::anyhow!("{} is not valid TOML: {} — fix the file", path.display(), e.message()))?;
    let table = match value.get("thresholds") {
        Some(toml::Value::Table(t)) => t.clone(),
        _ => value,
    };
    let th = table.try_into::<Thresholds>().map_err(|e| {
        anyhow::anyhow!(
            "{}: {} — use the threshold names that `stepscope advise --json` lists",
            path.display(),
            e.message().trim()
        )
    })?;
    th.check().map_err(|e| anyhow::anyhow!("{}: {e} — fix the file", path.display()))?;
    Ok(th)
}

/// The thresholds and peaks of `--thresholds FILE` and the peak flags (the flags win).
pub fn thresholds_and_peaks(file: Option<&Path>, peaks: &PeakArgs) -> anyhow::Result<(Thresholds, UserPeaks)> {
    let th = match file {
        Some(p) => read_thresholds(p)?,
        None => Thresholds::default(),
    };
    let (flag, file) = (peaks.user(), th.peaks());
    let peaks = UserPeaks {
        flops_per_s: flag.flops_per_s.or(file.flops_per_s),
        bytes_per_s: flag.bytes_per_s.or(file.bytes_per_s),
    };
    Ok((th, peaks))
}

#[cfg(test)]
mod tests {
    use super::{parse_duration_ps, parse_rate};

    #[test]
    fn durations() {
        assert_eq!(parse_duration_ps("50ms"), Ok(50_000_000_000));
        assert_eq!(parse_duration_ps("200µs"), Ok(200_000_000));
        assert_eq!(parse_duration_ps("1.5s"), Ok(1_500_000_000_000));
        assert!(parse_duration_ps("50").unwrap_err().contains("no unit"));
        assert!(parse_duration_ps("5min").unwrap_err().contains("unknown unit"));
        assert!(parse_duration_ps("-1ms").is_err());
    }

    #[test]
    fn rates() {
        assert_eq!(parse_rate("3.5T"), Ok(3.5e12));
        assert_eq!(parse_rate("900GFLOP/s"), Ok(9e11));
        assert_eq!(parse_rate("2e12"), Ok(2e12));
        assert_eq!(parse_rate("200GB/s"), Ok(2e11));
        assert!(parse_rate("-1").is_err());
        assert!(parse_rate("3X").is_err());
        assert!(parse_rate("inf").is_err());
    }
}
