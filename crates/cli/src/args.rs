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
    stepscope info host.xplane.pb            one file (.xplane.pb, .trace.json.gz, .json)";

#[derive(Subcommand, Debug)]
pub enum Command {
    /// List the runs in a log directory (name, time, hosts, size).
    Ls(LsArgs),
    /// Show hosts, planes, lines, event counts, time span, devices and versions.
    Info(InfoArgs),
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
    #[arg(long)]
    pub json: bool,
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
