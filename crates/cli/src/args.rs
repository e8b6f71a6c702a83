//! The command line (clap derive): every command and the arguments it takes, from
//! the argument groups of [`crate::opts`].

use std::path::PathBuf;

use clap::{Parser, Subcommand};

use crate::opts::{ByHostArgs, InfoArgs, LsArgs, OpsArgs};

/// Why is my JAX step slow? Fast analysis of the profiles JAX writes.
#[derive(Parser, Debug)]
#[command(name = "stepscope", version, about, after_help = EXAMPLES)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
    /// Never cut names in tables (by default they lose their middle to fit the
    /// terminal; output to a file or pipe is never cut).
    #[arg(long, global = true)]
    pub wide: bool,
    /// Where the files of gs:// and s3:// paths are kept (default:
    /// ~/.cache/stepscope/remote); a file already there is not fetched again.
    #[arg(long, global = true, value_name = "DIR")]
    pub cache: Option<PathBuf>,
    /// Map a run's hosts on the Ray cluster at ADDRESS (`auto`, `HOST:PORT`,
    /// `ray://HOST:PORT`), one task a host, through the Python package beside this
    /// binary: summary, advise, steps, devices, ops, check and diff, with --json.
    #[arg(long, global = true, value_name = "ADDRESS")]
    pub ray: Option<String>,
}

const EXAMPLES: &str = "\
EXAMPLES:
    stepscope ls /tmp/logdir
        list the runs jax.profiler.trace wrote
    stepscope info /tmp/logdir
        hosts, planes, lines and events of the newest run
    stepscope info /tmp/logdir --run 2024_05_01_12_00_00 --json
    stepscope info host.xplane.pb
        one file (.xplane.pb, .trace.json.gz, .json)
    stepscope summary /tmp/logdir
        step time, breakdown, utilisation, top ops
    stepscope steps /tmp/logdir --csv
        every step: duration, device busy/idle, compile
    stepscope ops /tmp/logdir --top 20
        HLO ops by self time
    stepscope ops /tmp/logdir --by scope --depth 2
        time per name-stack scope
    stepscope ops /tmp/logdir --by line
        device time per line of your Python
    stepscope scopes /tmp/logdir
        your TraceAnnotation scopes per step; input work
    stepscope roofline /tmp/logdir
        ops against the device's compute and memory roofs
    stepscope kernels /tmp/logdir --json
        GPU kernels with launch configuration
    stepscope memory /tmp/logdir
        allocator peaks, live allocations at the peak
    stepscope memory /tmp/logdir --pprof memory.prof
        device memory by Python stack
    stepscope buffers /tmp/logdir
        the program's memory plan: peak, buffers live at it
    stepscope collectives /tmp/logdir
        all-reduce & co: exposed vs overlapped time
    stepscope compile /tmp/logdir
        compilation captured, per module
    stepscope devices /tmp/logdir
        per device and host; stragglers flagged
    stepscope hlo /tmp/logdir fusion.12
        the op's HLO, fusion body and source line
    stepscope advise /tmp/logdir
        what is wrong, with evidence and advice
    stepscope advise /tmp/logdir --thresholds kpi.toml
        your own KPI thresholds
    stepscope whatif /tmp/logdir --remove compile
        the step replayed without compilation
    stepscope diff runs/adam runs/lion
        what changed, ranked by effect on step time
    stepscope compare runs/1dev runs/2dev runs/4dev
        runs side by side
    stepscope summary runs/main --json > baseline.json
    stepscope check runs/pr --baseline baseline.json --max-regression 5
        exit 1 on regression
    stepscope serve /tmp/logdir
        web UI on 127.0.0.1 (prints the URL, opens the browser)
    stepscope capture 127.0.0.1:9012
        profile a running job (jax.profiler.start_server)
    stepscope top 127.0.0.1:9012
        live view of a running job
    stepscope export /tmp/logdir -o trace.pftrace
        Perfetto trace (also .json.gz, .csv, .parquet)
    stepscope summary gs://bucket/logdir
        a log directory in Cloud Storage (or s3://bucket/logdir)";

#[derive(Subcommand, Debug)]
pub enum Command {
    /// List the runs in a log directory (name, time, hosts, size).
    #[command(after_help = crate::examples::LS)]
    Ls(LsArgs),
    /// Show hosts, planes, lines, event counts, time span, devices and versions.
    #[command(after_help = crate::examples::INFO)]
    Info(InfoArgs),
    /// Overview: step time, average step breakdown, utilisation, top ops, environment.
    #[command(after_help = crate::examples::SUMMARY)]
    Summary(crate::cmd::summary::SummaryArgs),
    /// Every step: duration, device busy and idle time, compile overlap (`--top N`: the N
    /// slowest, in step order).
    #[command(after_help = crate::examples::STEPS)]
    Steps(crate::cmd::steps::StepsArgs),
    /// Op profile: HLO ops (or categories, modules, scopes, Python lines) by self time.
    #[command(after_help = crate::examples::OPS)]
    Ops(OpsArgs),
    /// Your host scopes (TraceAnnotation) nested, per step, with device time and input work.
    #[command(after_help = crate::examples::SCOPES)]
    Scopes(ByHostArgs),
    /// Roofline: each op's FLOPs per byte, achieved rate and share of the device's roof.
    #[command(after_help = crate::examples::ROOFLINE)]
    Roofline(crate::cmd::roofline::RooflineArgs),
    /// GPU kernel stats: launches, time, grid/block, registers, shared memory, occupancy.
    #[command(after_help = crate::examples::KERNELS)]
    Kernels(ByHostArgs),
    /// Memory: allocator peaks and timelines, live allocations, device-memory pprof.
    #[command(after_help = crate::examples::MEMORY)]
    Memory(crate::cmd::memory::MemoryArgs),
    /// A program's memory as XLA planned it: allocations, the heap over program order, the buffers live at its peak.
    #[command(after_help = crate::examples::BUFFERS)]
    Buffers(crate::cmd::buffers::BuffersArgs),
    /// Collectives: time per all-reduce/all-gather/…, and the share compute overlapped.
    #[command(after_help = crate::examples::COLLECTIVES)]
    Collectives(ByHostArgs),
    /// XLA compilation on the host during the capture, per module.
    #[command(after_help = crate::examples::COMPILE)]
    Compile(ByHostArgs),
    /// Per-device and per-host rows, and stragglers.
    #[command(after_help = crate::examples::DEVICES)]
    Devices(crate::cmd::devices::DevicesArgs),
    /// An op's HLO: instruction, operands, fusion body, shapes, JAX name stack, source line.
    #[command(after_help = crate::examples::HLO)]
    Hlo(crate::cmd::hlo::HloArgs),
    /// Findings: rules with the measured value, threshold, evidence and advice.
    #[command(after_help = crate::examples::ADVISE)]
    Advise(crate::cmd::advise::AdviseArgs),
    /// What fixing a cause would gain: the steps replayed with a change (--remove compile, --jit, --scale dot.31=0.5).
    #[command(after_help = crate::examples::WHATIF)]
    Whatif(crate::cmd::whatif::WhatifArgs),
    /// One host of a run mapped to its part, for a run mapped on several machines (`summary --parts`).
    #[command(after_help = crate::examples::PART)]
    Part(crate::cmd::part::PartArgs),
    /// What changed from run A to run B: step time, breakdown, ops and kernels by effect.
    #[command(after_help = crate::examples::DIFF)]
    Diff(crate::cmd::diff::DiffArgs),
    /// Several runs side by side: step time, breakdown, utilisation, memory, top ops.
    #[command(after_help = crate::examples::COMPARE)]
    Compare(crate::cmd::compare::CompareArgs),
    /// Runs over time: step time, utilisation, top op of each, and the first run that moved beyond noise.
    #[command(after_help = crate::examples::HISTORY)]
    History(crate::cmd::history::HistoryArgs),
    /// CI gate: exit 1 when step time (or another metric) regressed past a baseline.
    #[command(after_help = crate::examples::CHECK)]
    Check(crate::cmd::check::CheckArgs),
    /// Web UI: overview, op profile, kernels, steps and a full timeline, in the browser.
    Serve(crate::cmd::serve::ServeArgs),
    /// Profile a running JAX job (jax.profiler.start_server) into a log directory.
    Capture(crate::cmd::capture::CaptureArgs),
    /// Live view of a running JAX job: step time, utilisation, top ops, memory.
    Top(crate::cmd::top::TopArgs),
    /// Write the profile as a Perfetto trace, Chrome trace JSON, CSV or Parquet.
    Export(crate::cmd::export::ExportArgs),
    /// The profile's tables (steps, ops, op events, kernels, collectives, scopes, devices, findings, memory, events) as Parquet.
    Tables(crate::cmd::tables::TablesArgs),
    /// One read-only SQL query over the profile's tables, from profiles or a `tables` folder.
    Sql(crate::cmd::sql::SqlArgs),
    /// Model Context Protocol server over stdio: every analysis as a tool for coding agents.
    #[command(after_help = crate::examples::MCP)]
    Mcp(crate::cmd::mcp::McpArgs),
}
