//! Command-line arguments (clap derive).

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

/// Why is my JAX step slow? Fast analysis of the profiles JAX writes.
#[derive(Parser, Debug)]
#[command(name = "stepscope", version, about, after_help = EXAMPLES)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

const EXAMPLES: &str = "\
EXAMPLES:
    stepscope ls /tmp/logdir                 list the runs jax.profiler.trace wrote
    stepscope info /tmp/logdir               hosts, planes, lines and events of the newest run
    stepscope info /tmp/logdir --run 2024_05_01_12_00_00 --json
    stepscope info host.xplane.pb            one file (.xplane.pb, .trace.json.gz, .json)
    stepscope summary /tmp/logdir            step time, breakdown, utilisation, top ops
    stepscope steps /tmp/logdir --csv        every step: duration, device busy/idle, compile
    stepscope ops /tmp/logdir --top 20       HLO ops by self time
    stepscope ops /tmp/logdir --by scope --depth 2   time per name-stack scope
    stepscope kernels /tmp/logdir --json     GPU kernels with launch configuration
    stepscope export /tmp/logdir -o trace.pftrace    Perfetto trace (also .json.gz, .csv, .parquet)";

#[derive(Subcommand, Debug)]
pub enum Command {
    /// List the runs in a log directory (name, time, hosts, size).
    Ls(LsArgs),
    /// Show hosts, planes, lines, event counts, time span, devices and versions.
    Info(InfoArgs),
    /// Overview: step time, average step breakdown, utilisation, top ops, environment.
    Summary(AnalysisArgs),
    /// Every step: duration, device busy and idle time, compile overlap.
    Steps(AnalysisArgs),
    /// Op profile: HLO ops (or categories, modules, scopes) by self time.
    Ops(OpsArgs),
    /// GPU kernel stats: launches, time, grid/block, registers, shared memory, occupancy.
    Kernels(AnalysisArgs),
    /// Write the profile as a Perfetto trace, Chrome trace JSON, CSV or Parquet.
    Export(crate::cmd::export::ExportArgs),
}

/// Which profile to read: PATH and the run in it.
#[derive(Args, Debug, Clone)]
pub struct Input {
    /// A log directory (any depth), a run folder, or a profile file
    /// (.xplane.pb, .trace.json.gz, perfetto_trace.json.gz, .json).
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
    #[arg(long, value_name = "HOST")]
    pub host: Option<String>,
    /// Show at most N rows.
    #[arg(long, value_name = "N", default_value_t = 10)]
    pub top: usize,
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

/// Grouping for `ops --by`.
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum By {
    Op,
    Category,
    Module,
    Scope,
}

#[derive(Args, Debug)]
pub struct OpsArgs {
    #[command(flatten)]
    pub common: AnalysisArgs,
    /// Group time by op, category, module or name-stack scope.
    #[arg(long, value_enum, default_value = "op")]
    pub by: By,
    /// With --by scope: cut scopes to this many levels (0 = whole scope).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub depth: usize,
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
}
