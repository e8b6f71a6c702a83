//! `stepscope capture`: profile a running JAX job over its profiler server.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, SystemTime};

use clap::Args;
use serde::Serialize;
use stepscope_analysis::{steps, Profile};
use stepscope_capture::{parse_duration, parse_size, parse_targets, write_run, CaptureError, Options, Session};

use crate::human;

pub const EXAMPLES: &str = "\
EXAMPLES:
    # in the job:  jax.profiler.start_server(9012)
    stepscope capture 127.0.0.1:9012
        2 s into ./profiles
    stepscope capture 127.0.0.1:9012 --duration 500ms --logdir /tmp/logdir
    stepscope capture worker0:9012,worker1:9012 --duration 5s
        one run, two hosts
    stepscope capture 127.0.0.1:9012 --python-tracer-level 1
        with Python calls
    stepscope capture 127.0.0.1:9012 --max-size 512MiB --grace 10s
        bound size and wait
    stepscope summary ./profiles
        analyse the newest capture";

/// Tracing and connection options shared by `capture` and `top`.
#[derive(Args, Debug, Clone)]
pub struct TraceArgs {
    /// Host tracer level: 0 off, 1 your annotations only, 2 also runtime events, 3 verbose.
    #[arg(long, value_name = "N", default_value_t = 2, value_parser = clap::value_parser!(u32).range(0..=3))]
    pub host_tracer_level: u32,
    /// Device tracer level: 0 off, 1 on.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(0..=1))]
    pub device_tracer_level: u32,
    /// Python tracer level: 0 off, 1 every Python call (costly).
    #[arg(long, value_name = "N", default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=1))]
    pub python_tracer_level: u32,
    /// Extra connection attempts when a target refuses or does not answer.
    #[arg(long, value_name = "N", default_value_t = 2)]
    pub retries: u32,
    /// Largest trace accepted from one target: 16MiB, 512MiB, 2GiB (the most a trace can be).
    /// A larger one is refused from its announced size, before it is read.
    #[arg(long, value_name = "SIZE", default_value = "2GiB")]
    pub max_size: String,
    /// How long to wait past the capture's end for the job to send the trace.
    #[arg(long, value_name = "TIME", default_value = "30s")]
    pub grace: String,
}

impl TraceArgs {
    pub fn options(&self, duration: Duration) -> Result<Options, CaptureError> {
        let named =
            |option: &'static str| move |e: CaptureError| CaptureError::new(format!("{option}: {}", e.what), e.fix);
        let max_size = parse_size(&self.max_size).map_err(named("--max-size"))?;
        let grace = parse_duration(&self.grace).map_err(named("--grace"))?;
        Ok(Options {
            duration,
            host_tracer_level: self.host_tracer_level,
            device_tracer_level: self.device_tracer_level,
            python_tracer_level: self.python_tracer_level,
            retries: self.retries.min(100),
            margin: grace,
            // At most 2 GiB by parse_size; the capture crate takes 2 GiB as its 2 GiB − 1 limit.
            max_response_bytes: usize::try_from(max_size).unwrap_or(usize::MAX),
            ..Options::default()
        })
    }
}

#[derive(Args, Debug)]
#[command(after_help = EXAMPLES)]
pub struct CaptureArgs {
    /// Profiler servers as HOST:PORT, comma-separated (the port the job passed to
    /// jax.profiler.start_server). Several targets make one run with several hosts.
    #[arg(value_name = "HOST:PORT[,HOST:PORT…]")]
    pub targets: String,
    /// How long to trace: 500ms, 2s, 1m.
    #[arg(long, value_name = "TIME", default_value = "2s")]
    pub duration: String,
    /// Log directory; the capture goes to LOGDIR/plugins/profile/<YYYY_MM_DD_HH_MM_SS>/.
    #[arg(long, value_name = "DIR", default_value = "profiles")]
    pub logdir: PathBuf,
    #[command(flatten)]
    pub trace: TraceArgs,
    /// Print JSON (schema stepscope.capture/1) instead of text.
    #[arg(long)]
    pub json: bool,
}

/// What `capture --json` prints.
#[derive(Serialize)]
struct Report {
    schema: &'static str,
    run_dir: String,
    duration_ms: u64,
    hosts: Vec<HostReport>,
}

#[derive(Serialize)]
struct HostReport {
    target: String,
    host: String,
    path: String,
    file_bytes: u64,
    planes: usize,
    events: u64,
    step_count: usize,
    step_mean_ps: i64,
    elapsed_ms: u64,
}

pub fn run(args: &CaptureArgs) -> anyhow::Result<ExitCode> {
    let targets = parse_targets(&args.targets)?;
    let duration = parse_duration(&args.duration)?;
    let mut session = Session::new(targets, args.trace.options(duration)?)?;
    if !args.json && std::io::stderr().is_terminal() {
        let names: Vec<String> = session.targets().iter().map(|t| t.to_string()).collect();
        errln!("capturing {} from {} …", args.duration.trim(), names.join(", "));
    }
    let captures = session.capture()?;
    let written = write_run(&args.logdir, &captures, SystemTime::now())?;
    let mut hosts: Vec<HostReport> = captures
        .iter()
        .zip(&written.files)
        .map(|(c, path)| HostReport {
            target: c.target.to_string(),
            host: c.space.host.clone(),
            path: path.display().to_string(),
            file_bytes: c.bytes.len() as u64,
            planes: c.space.planes.len(),
            events: c.space.event_count(),
            step_count: 0,
            step_mean_ps: 0,
            elapsed_ms: c.elapsed.as_millis() as u64,
        })
        .collect();
    let spaces = captures.into_iter().map(|c| c.space).collect();
    let profile = Profile::new(written.run_dir.display().to_string(), spaces);
    let found = steps::steps(&profile);
    for h in &mut hosts {
        let durations: Vec<i64> = found.steps.iter().filter(|s| s.host == h.host).map(|s| s.duration_ps).collect();
        h.step_count = durations.len();
        h.step_mean_ps = if durations.is_empty() { 0 } else { durations.iter().sum::<i64>() / durations.len() as i64 };
    }
    let report = Report {
        schema: "stepscope.capture/1",
        run_dir: written.run_dir.display().to_string(),
        duration_ms: duration.as_millis() as u64,
        hosts,
    };
    if args.json {
        outln!("{}", serde_json::to_string(&report)?);
        return Ok(ExitCode::SUCCESS);
    }
    for h in &report.hosts {
        let steps = if h.step_count == 0 {
            "no steps".to_string()
        } else {
            format!("{} steps, mean {}", h.step_count, human::duration_ps(h.step_mean_ps))
        };
        outln!(
            "{}  {}  {}, {} planes, {} events, {}",
            h.target,
            h.host,
            human::bytes(h.file_bytes),
            h.planes,
            human::count(h.events),
            steps
        );
    }
    outln!("{}", report.run_dir);
    Ok(ExitCode::SUCCESS)
}
