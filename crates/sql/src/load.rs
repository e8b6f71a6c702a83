//! Filling the database: tables made and widened as hosts bring their columns, rows
//! inserted with their run and host.

use std::io;

use rusqlite::types::Null;
use rusqlite::Statement;
use stepscope_analysis::Profile;
use stepscope_export::table::{Cell, ColType, Column, RowSink};
use stepscope_export::tables::{host_tables, put_rows, run_row, RunRow, TableSink};
use stepscope_xspace::discover::Run;

use crate::Db;

/// What [`Db::add_run`] hands its caller: the function that writes one host's tables.
pub type PutHost<'a> = dyn FnMut(&str, &Profile) -> io::Result<()> + 'a;

/// The columns every table has, where it has none of that name: the partition of the
/// rows (as `stepscope tables` folders are partitioned), last as DuckDB puts them.
pub(crate) const PARTITIONS: [&str; 2] = ["run", "host"];

/// `name` quoted as an SQL identifier.
pub(crate) fn ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

fn sql_type(ty: ColType) -> &'static str {
    match ty {
        ColType::Str => "TEXT",
        ColType::I64 | ColType::Bool => "INTEGER",
        // No affinity: SQLite would make the digits of an integer past i64::MAX a
        // (lossy) REAL; kept as text there, as an INTEGER below.
        ColType::U64 => "",
        ColType::F64 => "REAL",
    }
}

fn sqlite_err(e: rusqlite::Error) -> io::Error {
    io::Error::other(e.to_string())
}

impl Db {
    /// A sink for the tables of run `run`'s host `host` (`None`: rows of no one host,
    /// as `runs`).
    fn sink<'a>(&'a mut self, run: &'a str, host: Option<&'a str>) -> Loader<'a> {
        Loader { db: self, run, host }
    }

    /// Adds run `run`'s tables that `wanted` names (see [`crate::referenced`]) under
    /// the name `name`: its `runs` row, then the tables of each host `each_host` hands
    /// to the function it is given, one at a time (each host's profile can go before
    /// the next is read). Where the query names only `runs`, no host is asked for.
    pub fn add_run<E: From<io::Error>>(
        &mut self,
        name: &str,
        run: &Run,
        wanted: &[&str],
        each_host: &mut dyn FnMut(&mut PutHost<'_>) -> Result<(), E>,
    ) -> Result<(), E> {
        if wanted.contains(&"runs") {
            put_rows(&mut self.sink(name, None), "runs", &[RunRow { run: name.to_string(), ..run_row(run) }])?;
        }
        if wanted.iter().all(|t| *t == "runs") {
            return Ok(());
        }
        let want = |t: &str| wanted.contains(&t);
        each_host(&mut |host, profile| host_tables(profile, &want, &mut self.sink(name, Some(host))).map(|_| ()))
    }

    /// Makes table `name` with `columns` and the partition columns, or adds those of
    /// `columns` it lacks. Returns the columns rows are inserted into: `columns`, then
    /// the partition columns `columns` has none of.
    pub(crate) fn ensure(&mut self, name: &str, columns: &[Column]) -> io::Result<Vec<String>> {
        let mut names: Vec<String> = columns.iter().map(|c| c.name.clone()).collect();
        names.extend(PARTITIONS.iter().filter(|p| !columns.iter().any(|c| c.name == **p)).map(|p| p.to_string()));
        let typed = |n: &String| {
            let ty = columns.iter().find(|c| &c.name == n).map_or("TEXT", |c| sql_type(c.ty));
            format!("{} {ty}", ident(n))
        };
        match self.columns.get_mut(name) {
            None => {
                let list: Vec<String> = names.iter().map(typed).collect();
                self.conn
                    .execute_batch(&format!("CREATE TABLE {} ({})", ident(name), list.join(", ")))
                    .map_err(sqlite_err)?;
                self.columns.insert(name.to_string(), names.clone());
            }
            Some(have) => {
                let missing: Vec<&String> = names.iter().filter(|n| !have.contains(n)).collect();
                for n in missing {
                    self.conn
                        .execute_batch(&format!("ALTER TABLE {} ADD COLUMN {}", ident(name), typed(n)))
                        .map_err(sqlite_err)?;
                    have.push(n.clone());
                }
            }
        }
        Ok(names)
    }

    /// Inserts rows into `name`'s `columns`: `fill` hands them to the sink it is given,
    /// each a cell per column, the partition values added. One transaction.
    pub(crate) fn insert(
        &mut self,
        name: &str,
        columns: &[String],
        partitions: &[Option<&str>],
        fill: &mut dyn FnMut(&mut dyn RowSink) -> io::Result<()>,
    ) -> io::Result<u64> {
        let tx = self.conn.transaction().map_err(sqlite_err)?;
        let rows = {
            let marks = vec!["?"; columns.len()].join(", ");
            let list: Vec<String> = columns.iter().map(|c| ident(c)).collect();
            let sql = format!("INSERT INTO {} ({}) VALUES ({marks})", ident(name), list.join(", "));
            let stmt = tx.prepare(&sql).map_err(sqlite_err)?;
            let mut inserter = Inserter { stmt, partitions, rows: 0 };
            fill(&mut inserter)?;
            inserter.rows
        };
        tx.commit().map_err(sqlite_err)?;
        Ok(rows)
    }
}

/// Inserts each row it is handed, with the partition values after its cells.
struct Inserter<'a, 'b> {
    stmt: Statement<'a>,
    partitions: &'b [Option<&'b str>],
    rows: u64,
}

impl RowSink for Inserter<'_, '_> {
    fn row(&mut self, row: &[Cell]) -> io::Result<()> {
        let stmt = &mut self.stmt;
        for (i, c) in row.iter().enumerate() {
            let at = i + 1;
            match *c {
                Cell::Null => stmt.raw_bind_parameter(at, Null),
                Cell::Str(s) => stmt.raw_bind_parameter(at, s),
                Cell::I64(v) => stmt.raw_bind_parameter(at, v),
                Cell::U64(v) => match i64::try_from(v) {
                    Ok(v) => stmt.raw_bind_parameter(at, v),
                    Err(_) => stmt.raw_bind_parameter(at, v.to_string()),
                },
                Cell::F64(v) => stmt.raw_bind_parameter(at, v),
                Cell::Bool(v) => stmt.raw_bind_parameter(at, i64::from(v)),
            }
            .map_err(sqlite_err)?;
        }
        for (i, p) in self.partitions.iter().enumerate() {
            stmt.raw_bind_parameter(row.len() + i + 1, p).map_err(sqlite_err)?;
        }
        stmt.raw_execute().map_err(sqlite_err)?;
        self.rows += 1;
        Ok(())
    }
}

/// The tables of one host of one run, into a [`Db`].
pub(crate) struct Loader<'a> {
    db: &'a mut Db,
    run: &'a str,
    host: Option<&'a str>,
}

impl TableSink for Loader<'_> {
    fn table(
        &mut self,
        name: &str,
        columns: &[Column],
        fill: &mut dyn FnMut(&mut dyn RowSink) -> io::Result<()>,
    ) -> io::Result<u64> {
        let names = self.db.ensure(name, columns)?;
        let partitions: Vec<Option<&str>> =
            names[columns.len()..].iter().map(|p| if p == "run" { Some(self.run) } else { self.host }).collect();
        self.db.insert(name, &names, &partitions, fill)
    }
}
