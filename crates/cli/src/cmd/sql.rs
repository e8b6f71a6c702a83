//! `stepscope sql QUERY PATH…`: one read-only SQL query over the profile's tables
//! (`stepscope tables`), from profiles (each host read alone, only the tables the query
//! names) or from folders `tables` wrote.

use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use stepscope_export::table::Cell;
use stepscope_sql::{referenced, CsvResults, Db, JsonResults, Limits, Results};

use crate::human;
use crate::load;
use crate::opts::{Input, Output};
use crate::table::Table;

#[derive(Args, Debug)]
#[command(after_help = crate::examples::SQL)]
pub struct SqlArgs {
    /// One query in SQLite's SQL (SELECT, or WITH … SELECT) over the tables runs, steps,
    /// ops, op_events, kernels, collectives, scopes, devices, findings, memory and events
    /// (docs/tables.md lists their columns, docs/sql.md has queries to start from).
    pub query: String,
    /// Where the tables come from: log directories (every run under them), run folders
    /// or profile files, local or gs://BUCKET/PATH or s3://BUCKET/PATH; or folders
    /// `stepscope tables` wrote (read at once, without the profiles).
    #[arg(required = true, value_name = "PATH")]
    pub paths: Vec<PathBuf>,
    /// Only this run of each PATH (default: every run under it).
    #[arg(long, value_name = "NAME")]
    pub run: Option<String>,
    /// Only this host (its file name without .xplane.pb).
    #[arg(long, value_name = "HOST", value_parser = crate::opts::host_name())]
    pub host: Option<String>,
    /// Stop the query after this many seconds (default: let it finish).
    #[arg(long, value_name = "SECONDS")]
    pub timeout: Option<u64>,
    #[command(flatten)]
    pub output: Output,
}

/// Rows a text table shows at most; `--csv` and `--json` write every row.
const MAX_TEXT_ROWS: usize = 10_000;
/// Characters a text table shows of a cell (cut in the middle past it); `--csv` and
/// `--json` write every cell whole.
const MAX_TEXT_CELL_CHARS: usize = 200;
/// Text a table holds at most (its cells' bytes); the rows past it are counted.
const MAX_TEXT_BYTES: usize = 64 << 20;

pub fn run(args: &SqlArgs) -> anyhow::Result<ExitCode> {
    let wanted = referenced(&args.query);
    let want = |t: &str| wanted.contains(&t);
    let mut db = Db::for_query(&args.query).map_err(anyhow::Error::msg)?;
    // Runs are named as `tables` names them (their folder under PATH); where several
    // PATHs hold profiles, by their folder as given, so that two never share a name.
    // A tables folder in a bucket: its files brought into the cache, read from there.
    let paths: Vec<PathBuf> = args.paths.iter().map(|p| crate::remote::tables_folder(p)).collect::<Result<_, _>>()?;
    let several = paths.iter().filter(|p| !stepscope_sql::is_tables_dir(p)).count() > 1;
    // The hosts of the runs read, to name them where --host matched none.
    let mut hosts_seen: Vec<String> = Vec::new();
    let mut hosts_read = 0;
    let only_runs = wanted.iter().all(|t| *t == "runs");
    for path in &paths {
        if stepscope_sql::is_tables_dir(path) {
            let keep = |run: Option<&str>, host: Option<&str>| {
                args.run.as_deref().is_none_or(|r| run.is_none_or(|x| x == r))
                    && args.host.as_deref().is_none_or(|h| host.is_none_or(|x| x == h))
            };
            db.add_tables_dir(path, &want, &keep).map_err(anyhow::Error::msg)?;
            continue;
        }
        let (listing, runs) = crate::cmd::tables::runs(path, args.run.as_deref())?;
        for r in &runs {
            let name = if several {
                listing.as_ref().map_or_else(|| r.dir.display().to_string(), |l| l.shown(&r.dir.display().to_string()))
            } else {
                r.rel.clone()
            };
            hosts_seen.extend(r.hosts.iter().map(|h| h.host.clone()));
            // One host at a time: memory is one host's (the database spills to disk).
            let input = Input { path: path.clone(), run: Some(r.rel.clone()) };
            db.add_run::<anyhow::Error>(&name, r, &wanted, &mut |put| {
                hosts_read +=
                    load::each_host(&input, args.host.as_deref(), None, &mut |host, profile| Ok(put(host, &profile)?))?;
                Ok(())
            })?;
        }
    }
    if let Some(host) = args.host.as_ref().filter(|_| hosts_read == 0 && !hosts_seen.is_empty() && !only_runs) {
        return Err(crate::cmd::tables::no_such_host(host, &hosts_seen, "the runs read"));
    }
    let limits = Limits { timeout: args.timeout.map(Duration::from_secs) };
    // Whatever the tables hold, nothing that steers a terminal reaches it.
    let mut out = BufWriter::new(human::CleanWriter::new(std::io::stdout()));
    if args.output.json {
        let mut results = JsonResults::new(&mut out, usize::MAX);
        db.query(&args.query, &limits, &mut results).map_err(anyhow::Error::msg)?;
        results.finish()?;
        writeln!(out)?;
    } else if args.output.csv {
        let mut results = CsvResults::new(&mut out);
        db.query(&args.query, &limits, &mut results).map_err(anyhow::Error::msg)?;
        results.finish()?;
    } else {
        let mut results = TextResults {
            table: Table::new(Vec::<String>::new()),
            rows: 0,
            shown: 0,
            bytes: 0,
            text_columns: Vec::new(),
        };
        db.query(&args.query, &limits, &mut results).map_err(anyhow::Error::msg)?;
        // Text left, numbers right: a column is text where a cell of it is.
        let t = &mut results.table;
        t.left = (1..t.header.len()).filter(|&i| results.text_columns.get(i) == Some(&true)).collect();
        write!(out, "{}", t.text())?;
        if results.rows > results.shown {
            errln!(
                "stepscope: showing the first {} of {} rows — add a LIMIT, or --csv or --json for every row",
                human::count(results.shown as u64),
                human::count(results.rows as u64)
            );
        }
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

/// A text table of the first [`MAX_TEXT_ROWS`] rows, each cell at most
/// [`MAX_TEXT_CELL_CHARS`] characters; the rest counted.
struct TextResults {
    table: Table,
    rows: usize,
    /// Rows in the table: the first [`MAX_TEXT_ROWS`], up to [`MAX_TEXT_BYTES`] of text.
    shown: usize,
    bytes: usize,
    /// Whether each column holds text in a row shown.
    text_columns: Vec<bool>,
}

impl Results for TextResults {
    fn columns(&mut self, names: &[String]) -> std::io::Result<()> {
        self.table = Table::new(names.iter().map(|n| human::elide(n, MAX_TEXT_CELL_CHARS)).collect::<Vec<_>>());
        self.text_columns = vec![false; names.len()];
        Ok(())
    }

    fn row(&mut self, cells: &[Cell]) -> std::io::Result<bool> {
        self.rows += 1;
        // Rows past the first that does not fit are counted only, so the table shows
        // the first rows of the result, none left out between them.
        if self.shown == self.rows - 1 && self.shown < MAX_TEXT_ROWS && self.bytes < MAX_TEXT_BYTES {
            for (t, c) in self.text_columns.iter_mut().zip(cells) {
                *t |= matches!(c, Cell::Str(_));
            }
            let row: Vec<String> = cells
                .iter()
                .map(|c| match *c {
                    Cell::Null => "NULL".to_string(),
                    Cell::Str(s) => human::elide(s, MAX_TEXT_CELL_CHARS),
                    Cell::I64(v) => v.to_string(),
                    Cell::U64(v) => v.to_string(),
                    Cell::F64(v) => v.to_string(),
                    Cell::Bool(v) => v.to_string(),
                })
                .collect();
            self.bytes += row.iter().map(String::len).sum::<usize>();
            self.table.push(row);
            self.shown += 1;
        }
        Ok(true)
    }
}
