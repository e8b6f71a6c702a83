//! `stepscope tables PATH -o DIR`: the profile's tables as Parquet, for SQL engines
//! (DuckDB, Polars, Spark, DataFusion): one folder a table, partitioned hive-style by
//! run and host (`DIR/steps/run=…/host=…/part-0.parquet`), each host read alone.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;
use serde::Serialize;
use stepscope_analysis::ops::GroupBy;
use stepscope_analysis::{collectives, devices, kernels, memory, ops, scopes, steps, Profile};
use stepscope_export::table::{TableFormat, TableWriter};
use stepscope_export::{events, op_events, rows};
use stepscope_judge::advise::{self, Thresholds};
use stepscope_xspace::discover::{self, captured};

use crate::human;
use crate::load;
use crate::opts::{Input, Select};
use crate::output::Output;

const EXAMPLES: &str = "\
EXAMPLES:
    stepscope tables /tmp/logdir -o tables/          every run under /tmp/logdir, each host's tables
    stepscope tables /tmp/logdir --run NAME -o tables/   one run";

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
    /// there is replaced whole).
    #[arg(short = 'o', long = "output", value_name = "DIR")]
    pub out: PathBuf,
}

/// The tables, each a folder of DIR (docs/tables.md lists their columns).
pub const TABLES: &[&str] = &[
    "runs",
    "steps",
    "ops",
    "op_events",
    "kernels",
    "collectives",
    "scopes",
    "devices",
    "findings",
    "memory",
    "events",
];

#[derive(Serialize)]
struct RunRow {
    run: String,
    captured: Option<String>,
    hosts: u64,
    bytes: u64,
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
    let listing = crate::remote::Listing::of(&args.path)?;
    let mut runs = match &args.run {
        Some(name) => vec![discover::resolve(listing.as_ref().map_or(args.path.as_path(), |l| &l.root), Some(name))?],
        None => discover::find_runs(listing.as_ref().map_or(args.path.as_path(), |l| &l.root))?,
    };
    if runs.is_empty() {
        anyhow::bail!(
            "no profile found under {} — point at the folder given to jax.profiler.trace (it holds \
             plugins/profile/<run>/<host>.xplane.pb)",
            args.path.display()
        );
    }
    runs.sort_by_cached_key(|r| (discover::capture_key(r), r.rel.clone()));
    std::fs::create_dir_all(&args.out)
        .map_err(|e| anyhow::anyhow!("cannot make {}: {e} — check the path", args.out.display()))?;

    let (mut files, mut total) = (0u64, 0u64);
    let run_rows: Vec<RunRow> = (runs.iter())
        .map(|r| RunRow {
            run: r.rel.clone(),
            captured: captured(&r.rel),
            hosts: r.hosts.len() as u64,
            bytes: r.bytes(),
        })
        .collect();
    total += write_file(&args.out.join("runs").join("part-0.parquet"), &mut |out| {
        rows::write_rows(&run_rows, TableFormat::Parquet, out)
    })?;
    files += 1;
    for r in &runs {
        for h in &r.hosts {
            // One host at a time: memory is one host's, whatever the run's size.
            let input = Input { path: args.path.clone(), run: Some(r.rel.clone()) };
            let profile = load::profile(&input, &Select { host: Some(h.host.clone()), top: None })?;
            let dir =
                |table: &str| args.out.join(table).join(partition("run", &r.rel)).join(partition("host", &h.host));
            let (n, f) = write_host(&profile, &dir)?;
            total += n;
            files += f;
        }
    }
    let manifest = Manifest {
        schema: "stepscope.tables/1",
        tables: TABLES,
        runs: runs.iter().map(|r| r.rel.clone()).collect(),
        files,
        rows: total,
    };
    let mut out = Output::open(&args.out.join("stepscope_tables.json"))?;
    std::io::Write::write_all(&mut out, serde_json::to_string_pretty(&manifest)?.as_bytes())?;
    out.commit()?;
    errln!(
        "wrote {} ({} files, {} rows: {} run(s)); query it with hive partitioning, e.g. DuckDB's \
         read_parquet('{}/steps/**/*.parquet', hive_partitioning = true, union_by_name = true) (docs/tables.md)",
        args.out.display(),
        human::count(files),
        human::count(total),
        runs.len(),
        args.out.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// Writes one host's tables under `dir(table)`; a table the host has no rows of gets
/// no file. Returns the rows and files written.
fn write_host(profile: &Profile, dir: &dyn Fn(&str) -> PathBuf) -> anyhow::Result<(u64, u64)> {
    let (mut n, mut files) = (0, 0);
    let mut put = |table: &str, count: usize, write: &mut dyn FnMut(&mut Output) -> std::io::Result<u64>| {
        if count == 0 {
            return Ok::<(), anyhow::Error>(());
        }
        n += write_file(&dir(table).join("part-0.parquet"), write)?;
        files += 1;
        Ok(())
    };
    let st = steps::steps(profile);
    put("steps", st.steps.len(), &mut |out| rows::write_rows(&st.steps, TableFormat::Parquet, out))?;
    let o = ops::ops(profile, GroupBy::Op, 0);
    put("ops", o.ops.len(), &mut |out| rows::write_rows(&o.ops, TableFormat::Parquet, out))?;
    put("op_events", o.ops.len(), &mut |out| {
        op_events::write_op_events(profile, &st, TableWriter::new(TableFormat::Parquet, op_events::columns(), out)?)
    })?;
    let k = kernels::kernels(profile);
    put("kernels", k.kernels.len(), &mut |out| rows::write_rows(&k.kernels, TableFormat::Parquet, out))?;
    let c = collectives::collectives(profile);
    put("collectives", c.ops.len(), &mut |out| rows::write_rows(&c.ops, TableFormat::Parquet, out))?;
    let sc = scopes::scopes(profile);
    put("scopes", sc.scopes.len(), &mut |out| rows::write_rows(&sc.scopes, TableFormat::Parquet, out))?;
    let d = devices::devices(profile);
    put("devices", d.devices.len(), &mut |out| rows::write_rows(&d.devices, TableFormat::Parquet, out))?;
    let a = advise::advise(profile, &Thresholds::default());
    put("findings", a.findings.len(), &mut |out| rows::write_rows(&a.findings, TableFormat::Parquet, out))?;
    let m = memory::memory_full(profile);
    let points = crate::cmd::export::memory_points(&m);
    put("memory", points.len(), &mut |out| rows::write_rows(&points, TableFormat::Parquet, out))?;
    let events_count = profile.hosts.iter().map(|s| s.event_count()).sum::<u64>() as usize;
    put("events", events_count, &mut |out| {
        events::write_events(&profile.hosts, &st, TableWriter::new(TableFormat::Parquet, events::columns(), out)?)
    })?;
    Ok((n, files))
}

/// Writes a file whole (`write` into it, then named), making its folder.
fn write_file(path: &Path, write: &mut dyn FnMut(&mut Output) -> std::io::Result<u64>) -> anyhow::Result<u64> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .map_err(|e| anyhow::anyhow!("cannot make {}: {e} — check the path", parent.display()))?;
    }
    let mut out = Output::open(path)?;
    let n = write(&mut out).map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;
    out.commit()?;
    Ok(n)
}

/// A hive partition folder, `key=value`, the value percent-encoded as Hive and Spark
/// do (a run's name holds `/`).
fn partition(key: &str, value: &str) -> String {
    let mut s = format!("{key}=");
    for b in value.bytes() {
        if b.is_ascii_alphanumeric() || b"._-".contains(&b) {
            s.push(b as char);
        } else {
            s.push_str(&format!("%{b:02X}"));
        }
    }
    s
}

#[cfg(test)]
mod tests {
    #[test]
    fn partitions_are_percent_encoded() {
        assert_eq!(super::partition("run", "plugins/profile/2026_11_01"), "run=plugins%2Fprofile%2F2026_11_01");
        assert_eq!(super::partition("host", "vm-1.a b"), "host=vm-1.a%20b");
    }
}
