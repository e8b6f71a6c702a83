//! `stepscope export`: a profile as a Perfetto trace, Chrome trace JSON, CSV or Parquet.

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, ValueEnum};
use stepscope_analysis::{kernels, memory, ops, steps, Profile};
use stepscope_export::table::{TableFormat, TableWriter};
use stepscope_export::{chrome, events, folded, perfetto, rows, Space};

use crate::human;
use crate::load;
use crate::opts::{Input, Select};
use crate::output::Output;

const EXAMPLES: &str = "\
EXAMPLES:
    stepscope export /tmp/logdir -o trace.pftrace
        Perfetto trace: open it in ui.perfetto.dev
    stepscope export /tmp/logdir -o trace.json.gz
        Chrome trace JSON, every event, gzip
    stepscope export /tmp/logdir -o events.parquet
        one row per event, for DuckDB/Polars/Spark
    stepscope export /tmp/logdir -o ops.csv --table ops
        the op profile as CSV
    stepscope export /tmp/logdir -o device.folded
        device time by Python stack, for inferno/speedscope
    stepscope export host.xplane.pb --format csv -o -
        the event table as CSV on stdout
    stepscope export /tmp/logdir -o step3.pftrace --from 1.2s --to 1.25s
        one window (times as `steps` shows START)";

/// Output formats of `stepscope export`.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExportFormat {
    /// Perfetto protobuf trace (.pftrace), for ui.perfetto.dev.
    Perfetto,
    /// Chrome trace JSON (.json; gzip when OUT ends in .gz).
    Chrome,
    /// CSV (gzip when OUT ends in .gz).
    Csv,
    /// Apache Parquet.
    Parquet,
    /// Folded stacks (.folded): device time by the Python stack that made each op, in
    /// ns, for inferno, speedscope or flamegraph.pl.
    Folded,
}

/// What `--table` writes with csv and parquet.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum TableKind {
    /// One row per event (host, plane, line, name, start_ps, duration_ps, hlo_op, step_num, stats, …).
    Events,
    /// The op profile (`stepscope ops --json` rows).
    Ops,
    /// GPU kernel stats (`stepscope kernels --json` rows).
    Kernels,
    /// Every step (`stepscope steps --json` rows).
    Steps,
    /// Memory in use over time: one row per allocator event (host, allocator,
    /// time_ps, in_use_bytes), from `stepscope memory`'s full timelines.
    Memory,
}

#[derive(Args, Debug)]
#[command(after_help = EXAMPLES)]
pub struct ExportArgs {
    #[command(flatten)]
    pub input: Input,
    /// The file to write; `-` writes to standard output (chrome and csv only).
    #[arg(short = 'o', long = "output", value_name = "OUT")]
    pub out: PathBuf,
    /// Output format. Default: from OUT's name (.pftrace, .perfetto-trace, .perfetto.pb → perfetto;
    /// .json, .json.gz → chrome; .csv, .csv.gz → csv; .parquet → parquet; .folded → folded).
    #[arg(long, value_enum)]
    pub format: Option<ExportFormat>,
    /// With csv and parquet: which table to write.
    #[arg(long, value_enum, default_value = "events")]
    pub table: TableKind,
    /// Only this host (its file name without .xplane.pb).
    #[arg(long, value_name = "HOST", value_parser = crate::opts::host_name())]
    pub host: Option<String>,
    /// Only the events that overlap this window, from (a time as `steps` shows START:
    /// `19.5s`, `79.5us`, `79533000ps`) …
    #[arg(long, value_name = "TIME", value_parser = crate::opts::parse_duration_ps)]
    pub from: Option<i64>,
    /// … to this time (default: the end); with perfetto, chrome and the events table.
    #[arg(long, value_name = "TIME", value_parser = crate::opts::parse_duration_ps)]
    pub to: Option<i64>,
}

/// The format OUT's name implies.
fn format_of(out: &Path) -> Option<ExportFormat> {
    let name = out.file_name()?.to_string_lossy().to_ascii_lowercase();
    let name = name.strip_suffix(".gz").unwrap_or(&name);
    if name.ends_with(".pftrace")
        || name.ends_with(".perfetto-trace")
        || name.ends_with(".perfetto")
        || name.ends_with(".perfetto.pb")
    {
        Some(ExportFormat::Perfetto)
    } else if name.ends_with(".json") {
        Some(ExportFormat::Chrome)
    } else if name.ends_with(".csv") {
        Some(ExportFormat::Csv)
    } else if name.ends_with(".parquet") || name.ends_with(".pq") {
        Some(ExportFormat::Parquet)
    } else if name.ends_with(".folded") {
        Some(ExportFormat::Folded)
    } else {
        None
    }
}

pub fn run(args: &ExportArgs) -> anyhow::Result<ExitCode> {
    let to_stdout = args.out.as_os_str() == "-";
    let format = match args.format.or_else(|| if to_stdout { None } else { format_of(&args.out) }) {
        Some(f) => f,
        None => anyhow::bail!(
            "cannot tell the format of {} from its name — add --format perfetto|chrome|csv|parquet|folded",
            args.out.display()
        ),
    };
    if args.table != TableKind::Events && !matches!(format, ExportFormat::Csv | ExportFormat::Parquet) {
        anyhow::bail!("--table applies to csv and parquet only — drop --table, or use --format csv or parquet");
    }
    let window =
        (args.from.is_some() || args.to.is_some()).then(|| (args.from.unwrap_or(0), args.to.unwrap_or(i64::MAX)));
    if window.is_some() && (format == ExportFormat::Folded || args.table != TableKind::Events) {
        anyhow::bail!(
            "--from/--to cut the events a trace or the events table holds (perfetto, chrome, csv, parquet) — drop \
             them, or export those"
        );
    }
    if let Some((from, to)) = window.filter(|(from, to)| from >= to) {
        anyhow::bail!(
            "--from {} is not before --to {} — give a window that ends after it starts",
            human::duration_ps(from),
            human::duration_ps(to)
        );
    }
    if to_stdout && matches!(format, ExportFormat::Parquet | ExportFormat::Perfetto) {
        anyhow::bail!("{format:?} output is binary and is not written to standard output — give a file with -o OUT");
    }
    let gzip = !to_stdout && args.out.extension().is_some_and(|e| e.eq_ignore_ascii_case("gz"));
    if gzip && format == ExportFormat::Parquet {
        anyhow::bail!("Parquet files compress their own columns — write to OUT without .gz");
    }

    let select = Select { host: args.host.clone(), top: None };
    let profile = load::profile(&args.input, &select)?;
    if !to_stdout {
        refuse_input(&args.input, &args.out)?;
    }

    let dest = if to_stdout { Dest::Stdout(std::io::stdout()) } else { Dest::File(Output::open(&args.out)?) };
    let mut sink = Sink::new(dest, gzip);
    let windowed: Option<Vec<Space>> =
        window.map(|(from, to)| profile.hosts.iter().map(|s| s.window(from, to)).collect());
    let hosts = windowed.as_deref().unwrap_or(&profile.hosts);
    let written =
        write(&profile, hosts, format, args.table, &mut sink).and_then(|summary| Ok((summary, sink.finish()?)));
    let (summary, dest) = written.map_err(|e| {
        let to = if to_stdout { "the standard output".into() } else { args.out.display().to_string() };
        e.context(format!("cannot write {to}"))
    })?;
    if let Dest::File(out) = dest {
        let bytes = out.written_bytes;
        out.commit()?;
        errln!("wrote {} ({}): {summary}", args.out.display(), human::bytes(bytes));
    }
    Ok(ExitCode::SUCCESS)
}

/// Refuses to write over one of the profile's own files.
fn refuse_input(input: &Input, out: &Path) -> anyhow::Result<()> {
    let Ok(out_abs) = out.canonicalize() else { return Ok(()) };
    let run = stepscope_xspace::discover::resolve(&input.path, input.run.as_deref())?;
    if run.hosts.iter().any(|h| h.path.canonicalize().is_ok_and(|p| p == out_abs)) {
        anyhow::bail!("{} is the profile being read — write the export to another file", out.display());
    }
    Ok(())
}

/// Where the bytes go: standard output, or OUT ([`Output`]: put in place when done).
enum Dest {
    Stdout(std::io::Stdout),
    File(Output),
}

impl Write for Dest {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Dest::Stdout(w) => w.write(buf),
            Dest::File(w) => w.write(buf),
        }
    }
    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Dest::Stdout(w) => w.flush(),
            Dest::File(w) => w.flush(),
        }
    }
}

/// The output stream, buffered, maybe gzipped.
enum Sink {
    Plain(BufWriter<Dest>),
    /// Buffered in front of the encoder: deflate is slow on many small writes.
    Gzip(BufWriter<flate2::write::GzEncoder<BufWriter<Dest>>>),
}

impl Sink {
    fn new(dest: Dest, gzip: bool) -> Sink {
        let raw = BufWriter::with_capacity(1 << 20, dest);
        if gzip {
            let gz = flate2::write::GzEncoder::new(raw, flate2::Compression::fast());
            Sink::Gzip(BufWriter::with_capacity(1 << 20, gz))
        } else {
            Sink::Plain(raw)
        }
    }

    /// Writes the gzip trailer, if any, flushes, and hands back the destination.
    fn finish(self) -> std::io::Result<Dest> {
        let raw = match self {
            Sink::Plain(w) => w,
            Sink::Gzip(g) => g.into_inner().map_err(|e| e.into_error())?.finish()?,
        };
        raw.into_inner().map_err(|e| e.into_error())
    }
}

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Sink::Plain(w) => w.write(buf),
            Sink::Gzip(g) => g.write(buf),
        }
    }
    fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
        match self {
            Sink::Plain(w) => w.write_all(buf),
            Sink::Gzip(g) => g.write_all(buf),
        }
    }
    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Sink::Plain(w) => w.flush(),
            Sink::Gzip(g) => g.flush(),
        }
    }
}

/// Writes `profile` as `format`; traces and the events table take their events from
/// `hosts` (the profile's, or a window of them).
fn write(
    profile: &Profile,
    hosts: &[Space],
    format: ExportFormat,
    table: TableKind,
    out: &mut Sink,
) -> anyhow::Result<String> {
    let summary = match format {
        ExportFormat::Perfetto => {
            let s = perfetto::write_perfetto(hosts, out)?;
            format!(
                "{} slices, {} instants, {} counter samples on {} tracks",
                human::count(s.slices),
                human::count(s.instants),
                human::count(s.counter_samples),
                human::count(s.tracks)
            )
        }
        ExportFormat::Chrome => {
            let s = chrome::write_chrome(hosts, out)?;
            format!(
                "{} events ({} complete, {} instant, {} counter)",
                human::count(s.complete_events + s.instant_events + s.counter_events),
                human::count(s.complete_events),
                human::count(s.instant_events),
                human::count(s.counter_events)
            )
        }
        ExportFormat::Folded => {
            let stacks = ops::op_stacks(profile);
            if stacks.is_empty() {
                anyhow::bail!(
                    "this profile has no XLA ops to fold into stacks — {}",
                    stepscope_judge::advise::NO_OPS_WHY
                );
            }
            let s = folded::write_folded(&stacks, out)?;
            format!(
                "{} stacks, {} of device time",
                human::count(s.stacks),
                human::duration_ps((s.total_ns as i64).saturating_mul(1000))
            )
        }
        ExportFormat::Csv | ExportFormat::Parquet => {
            let tf = if format == ExportFormat::Csv { TableFormat::Csv } else { TableFormat::Parquet };
            let empty = |what: &str| {
                anyhow::anyhow!("this profile has no {what} to export — try another --table, or the events table")
            };
            let n = match table {
                TableKind::Events => {
                    let long = events::long_names(hosts);
                    if long > 0 {
                        errln!(
                            "stepscope: note: {long} host, plane, line or event name(s) are longer than {} bytes; \
                             the table cuts them there (…), since each repeats on every row of its events",
                            events::MAX_NAME_BYTES
                        );
                    }
                    let st = steps::steps(profile);
                    let mut w = TableWriter::new(tf, events::columns(), out)?;
                    events::write_events(hosts, &st, &mut w)?;
                    w.finish()?
                }
                TableKind::Ops => {
                    let o = ops::ops(profile, ops::GroupBy::Op, 0);
                    if o.ops.is_empty() {
                        return Err(empty("XLA ops"));
                    }
                    rows::write_rows(&o.ops, tf, out)?
                }
                TableKind::Kernels => {
                    let k = kernels::kernels(profile);
                    if k.kernels.is_empty() {
                        return Err(empty("GPU kernels"));
                    }
                    rows::write_rows(&k.kernels, tf, out)?
                }
                TableKind::Steps => {
                    let s = steps::steps(profile);
                    if s.steps.is_empty() {
                        return Err(empty("steps"));
                    }
                    rows::write_rows(&s.steps, tf, out)?
                }
                TableKind::Memory => {
                    let m = memory::memory_full(profile);
                    let points = stepscope_export::tables::memory_points(&m);
                    if points.is_empty() {
                        return Err(empty("allocator events (MemoryAllocation)"));
                    }
                    rows::write_rows(&points, tf, out)?
                }
            };
            format!("{} rows", human::count(n))
        }
    };
    Ok(summary)
}
