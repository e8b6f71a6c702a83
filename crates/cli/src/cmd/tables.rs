//! `stepscope tables PATH -o DIR`: the profile's tables as Parquet, for SQL engines
//! (DuckDB, Polars, Spark, DataFusion): one folder a table, partitioned hive-style by
//! run and host (`DIR/steps/run=…/host=…/part-0.parquet`), each host read alone.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;
use serde::Serialize;
use stepscope_export::table::{Column, RowSink, TableFormat, TableWriter};
use stepscope_export::tables::{self, RunRow, TableSink};
use stepscope_xspace::discover;

use crate::human;
use crate::load;
use crate::opts::Input;
use crate::output::Output;
use crate::remote::Listing;

const EXAMPLES: &str = "\
EXAMPLES:
    stepscope tables /tmp/logdir -o tables/
        every run under /tmp/logdir, each host's tables
    stepscope tables /tmp/logdir --run NAME -o tables/
        one run
    stepscope tables /tmp/logdir -o tables/ --json
        the same, and the manifest written as JSON";

#[derive(Args, Debug)]
#[command(after_help = EXAMPLES)]
pub struct TablesArgs {
    /// A log directory (its runs), a run folder, or a profile file; local, or in a
    /// bucket as gs://BUCKET/PATH or s3://BUCKET/PATH.
    pub path: PathBuf,
    /// Only this run of PATH (default: every run under it).
    #[arg(long, value_name = "NAME")]
    pub run: Option<String>,
    /// The folder to write the tables into (made if missing; a table file already
    /// there is replaced whole), or a bucket's gs://BUCKET/PATH or s3://BUCKET/PATH
    /// (each file put whole, the manifest last).
    #[arg(short = 'o', long = "output", value_name = "DIR")]
    pub out: PathBuf,
    /// Only this host's tables (in each run read): its partitions, without the runs
    /// table and the manifest — to write hosts in parallel, a process each
    /// (docs/scale.md); then `--index` writes those.
    #[arg(long, value_name = "HOST", value_parser = crate::opts::host_name(), conflicts_with = "index")]
    pub host: Option<String>,
    /// Only the runs table and the manifest, counting the table files already in DIR
    /// (after hosts were written with --host); no host is read.
    #[arg(long)]
    pub index: bool,
    /// Print the manifest written (`stepscope.tables/1`) as JSON on standard output.
    #[arg(long, conflicts_with = "host")]
    pub json: bool,
}

#[derive(Serialize)]
struct Manifest<'a> {
    schema: &'static str,
    tables: &'a [&'a str],
    runs: Vec<String>,
    files: u64,
    rows: u64,
}

pub fn run(args: &TablesArgs) -> anyhow::Result<ExitCode> {
    let bucket = match args.out.to_str().and_then(stepscope_remote::parse) {
        Some(url) => Some(url?),
        None => None,
    };
    let Some(url) = bucket else { return write(args, &args.out, None) };
    // A bucket: the files are made in a folder of the cache, then put, the index last.
    let staging = crate::remote::staging()?;
    write(args, staging.path(), Some(&url))
}

/// Where the files go: the folder `out`, and then, for a bucket's URL, the bucket.
fn write(args: &TablesArgs, out: &Path, bucket: Option<&stepscope_remote::Url>) -> anyhow::Result<ExitCode> {
    let (_, runs) = runs(&args.path, args.run.as_deref())?;
    std::fs::create_dir_all(out).map_err(|e| anyhow::anyhow!("cannot make {}: {e} — check the path", out.display()))?;
    // The manifest (written here, or by --index after the hosts) describes the folder:
    // one that holds other runs' tables is refused.
    if args.host.is_none() {
        refuse_other_runs(out, &runs)?;
        crate::output::plain_or_absent(&out.join(tables::MANIFEST))?;
    }
    // Into the bucket: the files made in `out` and not put yet, in order (the manifest
    // last).
    let mut put_already: Vec<String> = Vec::new();
    let mut put = || -> anyhow::Result<()> {
        if let Some(url) = bucket {
            let new: Vec<String> = files_under(out)?.into_iter().filter(|f| !put_already.contains(f)).collect();
            stepscope_remote::put_files(out, &new, url)?;
            put_already.extend(new);
        }
        Ok(())
    };

    let (mut total, mut count) = (0, 0);
    if args.host.is_none() {
        let run_rows: Vec<RunRow> = runs.iter().map(tables::run_row).collect();
        let mut files = Files { out, dir: &|_| PathBuf::from("runs"), files: 0, error: None };
        total += tables::put_rows(&mut files, "runs", &run_rows).map_err(|e| files.error(e))?;
        count += files.files;
    }
    let mut hosts_read = 0;
    for r in runs.iter().filter(|_| !args.index) {
        // One host at a time: memory is one host's, whatever the run's size.
        let input = Input { path: args.path.clone(), run: Some(r.rel.clone()) };
        hosts_read += load::each_host(&input, args.host.as_deref(), None, &mut |host, profile| {
            let dir = |table: &str| {
                Path::new(table).join(tables::partition("run", &r.rel)).join(tables::partition("host", host))
            };
            let mut files = Files { out, dir: &dir, files: 0, error: None };
            total += tables::host_tables(&profile, &|_| true, &mut files).map_err(|e| files.error(e))?;
            count += files.files;
            Ok(())
        })?;
    }
    if let Some(host) = &args.host {
        if hosts_read == 0 {
            let names: Vec<String> = runs.iter().flat_map(|r| r.hosts.iter().map(|h| h.host.clone())).collect();
            return Err(no_such_host(host, &names, &format!("the runs of {}", args.path.display())));
        }
        put()?;
        errln!(
            "wrote host {host}'s tables into {} ({} files, {} rows); `stepscope tables {} -o {} --index` writes \
             the runs table and the manifest once every host is written",
            args.out.display(),
            human::count(count),
            human::count(total),
            args.path.display(),
            args.out.display()
        );
        return Ok(ExitCode::SUCCESS);
    }
    if args.index {
        // Every table file in DIR, whoever wrote it.
        (count, total) = match bucket {
            // The runs table first, so that it is counted with the hosts' files there.
            Some(url) => {
                put()?;
                count_in_bucket(url)?
            }
            None => tables::count_files(out, tables::TABLES)
                .map_err(|e| anyhow::anyhow!("cannot count the tables in {}: {e}", out.display()))?,
        };
    }
    let files = count;
    let manifest = Manifest {
        schema: tables::SCHEMA,
        tables: tables::TABLES,
        runs: runs.iter().map(|r| r.rel.clone()).collect(),
        files,
        rows: total,
    };
    let text = serde_json::to_string_pretty(&manifest)?;
    let mut file = Output::open_plain(&out.join(tables::MANIFEST))?;
    std::io::Write::write_all(&mut file, text.as_bytes())?;
    file.commit()?;
    // Into the bucket: every file made, the manifest last.
    put()?;
    if args.json {
        outln!("{}", serde_json::to_string(&manifest)?);
    }
    errln!(
        "wrote {} ({} files, {} rows: {} run(s)); query it with hive partitioning, e.g. DuckDB's \
         read_parquet('{}', hive_partitioning = true, union_by_name = true), or stepscope sql (docs/sql.md)",
        args.out.display(),
        human::count(files),
        human::count(total),
        runs.len(),
        args.out.join("steps").join("**").join("*.parquet").display()
    );
    Ok(ExitCode::SUCCESS)
}

/// Every file under `dir` ([`tables::files_under`]), as paths relative to it
/// (`/`-separated), sorted, the manifest last: the order they are put into a bucket in.
fn files_under(dir: &Path) -> anyhow::Result<Vec<String>> {
    let found =
        tables::files_under(dir, &|_| true).map_err(|e| anyhow::anyhow!("cannot list {}: {e}", dir.display()))?;
    let mut out: Vec<String> = (found.iter())
        .filter_map(|p| p.strip_prefix(dir).ok())
        .map(|rel| rel.components().map(|c| c.as_os_str().to_string_lossy()).collect::<Vec<_>>().join("/"))
        .collect();
    out.sort_by_key(|rel| (rel == tables::MANIFEST, rel.clone()));
    Ok(out)
}

/// The table files in a bucket's tables folder and their rows, each file's rows read
/// from its Parquet footer (two ranged reads of its end).
fn count_in_bucket(url: &stepscope_remote::Url) -> anyhow::Result<(u64, u64)> {
    let (mut files, mut rows) = (0u64, 0u64);
    for (rel, size) in stepscope_remote::objects(url)? {
        let table = rel.split('/').next().unwrap_or("");
        if !tables::TABLES.contains(&table) || !rel.ends_with(".parquet") {
            continue;
        }
        let at = || format!("{url}/{rel}");
        let end = stepscope_remote::tail(url, &rel, size, 8)?;
        let footer_len = tables::footer_len(&end).map_err(|e| anyhow::anyhow!("{}: {e}", at()))?;
        let footer = stepscope_remote::tail(url, &rel, size, footer_len + 8)?;
        rows += tables::footer_rows(&footer[..footer.len().saturating_sub(8)])
            .map_err(|e| anyhow::anyhow!("{}: {e}", at()))?;
        files += 1;
    }
    Ok((files, rows))
}

/// The error for `--host HOST` where none of `names` (the hosts of `runs`, a phrase) is
/// `host`: the hosts there are, each once.
pub(crate) fn no_such_host(host: &str, names: &[String], runs: &str) -> anyhow::Error {
    let mut names: Vec<&str> = names.iter().map(String::as_str).collect();
    names.sort_unstable();
    names.dedup();
    anyhow::anyhow!("no host named {host:?} in {runs} — pick one of: {}", names.join(", "))
}

/// The runs under `path` (a bucket's listed first), or only `run`, in capture order;
/// an error where there is none.
pub(crate) fn runs(path: &Path, run: Option<&str>) -> anyhow::Result<(Option<Listing>, Vec<discover::Run>)> {
    let listing = Listing::of(path)?;
    let root = listing.as_ref().map_or(path, |l| &l.root);
    // A profile file is a run of its own.
    let one_file = std::fs::metadata(root).is_ok_and(|m| m.is_file());
    let shown = |e: stepscope_xspace::Error| Listing::error(listing.as_ref(), &e);
    let mut runs = match run {
        _ if one_file => vec![discover::resolve(root, None).map_err(shown)?],
        Some(name) => vec![discover::resolve(root, Some(name)).map_err(shown)?],
        None => Listing::find_runs(listing.as_ref(), path)?,
    };
    if runs.is_empty() {
        anyhow::bail!(
            "no profile found under {} — point at the folder given to jax.profiler.trace (it holds \
             plugins/profile/<run>/<host>.xplane.pb)",
            path.display()
        );
    }
    runs.sort_by_cached_key(discover::capture_key);
    Ok((listing, runs))
}

/// Refuses a folder that holds tables of runs other than `runs`: its manifest would
/// count them with these, one folder mixing two captures.
fn refuse_other_runs(out: &Path, runs: &[discover::Run]) -> anyhow::Result<()> {
    for rel in files_under(out)? {
        let Some(run) = rel.split('/').nth(1).and_then(|p| p.strip_prefix("run=")).map(tables::partition_value) else {
            continue;
        };
        if !runs.iter().any(|r| r.rel == run) {
            anyhow::bail!(
                "{} holds the tables of another run ({run}) — write into an empty folder, or remove {} first",
                out.display(),
                out.display()
            );
        }
    }
    Ok(())
}

/// Parquet files, one a table: `dir(table)/part-0.parquet`, each written whole.
struct Files<'a> {
    out: &'a Path,
    /// Each table's folder, under `out`.
    dir: &'a dyn Fn(&str) -> PathBuf,
    files: u64,
    /// What failed, with the path (the sink's trait speaks `io::Error`).
    error: Option<anyhow::Error>,
}

impl Files<'_> {
    /// The error to report for `e`, the sink's own if it has one.
    fn error(&mut self, e: std::io::Error) -> anyhow::Error {
        self.error.take().unwrap_or_else(|| e.into())
    }
}

impl TableSink for Files<'_> {
    fn table(
        &mut self,
        name: &str,
        columns: &[Column],
        fill: &mut dyn FnMut(&mut dyn RowSink) -> std::io::Result<()>,
    ) -> std::io::Result<u64> {
        let path = (self.dir)(name).join("part-0.parquet");
        let written = write_file(self.out, &path, &mut |out| {
            let mut w = TableWriter::new(TableFormat::Parquet, columns.to_vec(), out)?;
            fill(&mut w)?;
            w.finish()
        });
        written
            .map_err(|e| {
                let message = format!("{e:#}");
                self.error = Some(e);
                std::io::Error::other(message)
            })
            .inspect(|_| self.files += 1)
    }
}

/// Writes a file whole (`write` into it, then named), making its folders under `out`
/// without following a link.
fn write_file(
    out: &Path,
    rel: &Path,
    write: &mut dyn FnMut(&mut Output) -> std::io::Result<u64>,
) -> anyhow::Result<u64> {
    let path = crate::output::folders_below(out, rel.parent().unwrap_or(Path::new("")))?
        .join(rel.file_name().unwrap_or_default());
    let path = &path;
    let mut out = Output::open_plain(path)?;
    let n = write(&mut out).map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;
    out.commit()?;
    Ok(n)
}
