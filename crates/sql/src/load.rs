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
    /// `columns` it lacks; of them, only those the query may read ([`Db::for_query`]).
    /// Returns the columns rows are inserted into, each with where its value is: an
    /// index into a row's cells, then (from `columns.len()`) into the partition columns
    /// `columns` has none of, whose names are [`Kept::partitions`].
    pub(crate) fn ensure(&mut self, name: &str, columns: &[Column]) -> io::Result<Kept> {
        let mut names: Vec<String> = columns.iter().map(|c| c.name.clone()).collect();
        let partitions: Vec<String> =
            (PARTITIONS.iter()).filter(|p| !columns.iter().any(|c| c.name == **p)).map(|p| p.to_string()).collect();
        names.extend(partitions.iter().cloned());
        let all = self.columns.entry(name.to_string()).or_default();
        all.extend(names.iter().filter(|n| !all.contains(n)).cloned().collect::<Vec<_>>());
        // A table keeps at least one column, so that its rows are there to count.
        let read =
            |n: &String| self.only.as_ref().is_none_or(|only| only.binary_search(&n.to_ascii_lowercase()).is_ok());
        let mut at: Vec<usize> = (0..names.len()).filter(|&i| read(&names[i])).collect();
        let made = self.made.get(name);
        if at.is_empty() {
            at.push(made.and_then(|m| m.first()).and_then(|first| names.iter().position(|n| n == first)).unwrap_or(0));
        }
        let typed = |i: usize| {
            let ty = columns.get(i).map_or("TEXT", |c| sql_type(c.ty));
            format!("{} {ty}", ident(&names[i]))
        };
        match self.made.get_mut(name) {
            None => {
                let list: Vec<String> = at.iter().map(|&i| typed(i)).collect();
                self.conn
                    .execute_batch(&format!("CREATE TABLE {} ({})", ident(name), list.join(", ")))
                    .map_err(sqlite_err)?;
                self.made.insert(name.to_string(), at.iter().map(|&i| names[i].clone()).collect());
            }
            Some(have) => {
                let missing: Vec<usize> = at.iter().copied().filter(|&i| !have.contains(&names[i])).collect();
                for i in missing {
                    self.conn
                        .execute_batch(&format!("ALTER TABLE {} ADD COLUMN {}", ident(name), typed(i)))
                        .map_err(sqlite_err)?;
                    have.push(names[i].clone());
                }
            }
        }
        Ok(Kept { names: at.iter().map(|&i| names[i].clone()).collect(), at, cells: columns.len(), partitions })
    }

    /// Inserts rows into `name`'s columns `kept`: `fill` hands them to the sink it is
    /// given, each a cell per column (a cell the table does not keep may be any), the
    /// partition values added. One transaction.
    pub(crate) fn insert(
        &mut self,
        name: &str,
        kept: &Kept,
        partitions: &[Option<&str>],
        fill: &mut dyn FnMut(&mut dyn RowSink) -> io::Result<()>,
    ) -> io::Result<u64> {
        let tx = self.conn.transaction().map_err(sqlite_err)?;
        let rows = {
            let marks = vec!["?"; kept.names.len()].join(", ");
            let list: Vec<String> = kept.names.iter().map(|c| ident(c)).collect();
            let sql = format!("INSERT INTO {} ({}) VALUES ({marks})", ident(name), list.join(", "));
            let stmt = tx.prepare(&sql).map_err(sqlite_err)?;
            let mut inserter = Inserter { stmt, kept, partitions, rows: 0 };
            fill(&mut inserter)?;
            inserter.rows
        };
        tx.commit().map_err(sqlite_err)?;
        Ok(rows)
    }
}

/// The columns of a table rows go into ([`Db::ensure`]).
pub(crate) struct Kept {
    /// Their names, in the order of the insert.
    names: Vec<String>,
    /// Where each one's value is: an index into a row's cells, or (from `cells`) into
    /// the partition values.
    pub at: Vec<usize>,
    /// The cells a row has: its own columns.
    cells: usize,
    /// The partition columns the rows' own columns lack, in order.
    pub partitions: Vec<String>,
}

/// Inserts each row it is handed: the cells and partition values its table keeps.
struct Inserter<'a, 'b> {
    stmt: Statement<'a>,
    kept: &'b Kept,
    partitions: &'b [Option<&'b str>],
    rows: u64,
}

impl RowSink for Inserter<'_, '_> {
    fn row(&mut self, row: &[Cell]) -> io::Result<()> {
        let stmt = &mut self.stmt;
        for (param, &i) in self.kept.at.iter().enumerate() {
            let at = param + 1;
            if i >= self.kept.cells {
                let p = self.partitions.get(i - self.kept.cells).copied().flatten();
                stmt.raw_bind_parameter(at, p).map_err(sqlite_err)?;
                continue;
            }
            match row.get(i).copied().unwrap_or(Cell::Null) {
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
        let kept = self.db.ensure(name, columns)?;
        let partitions: Vec<Option<&str>> =
            kept.partitions.iter().map(|p| if p == "run" { Some(self.run) } else { self.host }).collect();
        self.db.insert(name, &kept, &partitions, fill)
    }
}

#[cfg(test)]
mod tests {
    use stepscope_export::table::ColType::{Str, I64, U64};

    use super::*;
    use crate::{JsonResults, Limits};

    /// Two hosts' rows of `ops` and `kernels` (which share two columns), the second
    /// host's `ops` with a column the first's lacks.
    fn fill(db: &mut Db) {
        let ops = Column::list(&[("name", Str, false), ("module", Str, false), ("self_ps", I64, false)]);
        let mut ops_flops = ops.clone();
        ops_flops.push(Column::new("flops", U64, true));
        let kernels = Column::list(&[("name", Str, false), ("module", Str, false), ("grid", I64, true)]);
        for (host, cols) in [("a", &ops), ("bb", &ops_flops)] {
            let mut sink = db.sink("r", Some(host));
            sink.table("ops", cols, &mut |out| {
                for (i, name) in ["dot", "add", "dot"].into_iter().enumerate() {
                    let mut row =
                        vec![Cell::Str(name), Cell::Str("jit_f"), Cell::I64(10 * i as i64 + host.len() as i64)];
                    if cols.len() == 4 {
                        row.push(if i == 1 { Cell::Null } else { Cell::U64(u64::MAX - i as u64) });
                    }
                    out.row(&row)?;
                }
                Ok(())
            })
            .unwrap();
            sink.table("kernels", &kernels, &mut |out| {
                out.row(&[Cell::Str("dot"), Cell::Str("jit_f"), Cell::I64(4)])?;
                out.row(&[Cell::Str("add"), Cell::Str("jit_g"), Cell::Null])
            })
            .unwrap();
        }
    }

    fn answer(db: &mut Db, sql: &str) -> Result<String, String> {
        let mut out = JsonResults::new(Vec::new(), usize::MAX);
        db.query(sql, &Limits { timeout: None }, &mut out)?;
        Ok(String::from_utf8(out.finish().unwrap().0).unwrap())
    }

    #[test]
    fn a_query_answers_alike_whatever_columns_it_loads() {
        for sql in [
            "SELECT * FROM ops ORDER BY host, self_ps",
            "SELECT count(*) FROM ops",
            "SELECT count(*) AS n, count(grid) FROM ops NATURAL JOIN kernels",
            "SELECT name, sum(self_ps) * 2 FROM ops GROUP BY name ORDER BY 1",
            "SELECT host, run, flops FROM ops ORDER BY 1, 3",
            "SELECT o.*, k.grid FROM ops o JOIN kernels k USING (name) ORDER BY 1, 2, 3, 4",
            "SELECT GRID, \"Module\" FROM [kernels] ORDER BY 1, 2",
            "SELECT nosuch FROM ops",
        ] {
            let mut every = Db::new().unwrap();
            fill(&mut every);
            let mut few = Db::for_query(sql).unwrap();
            fill(&mut few);
            let want = answer(&mut every, sql);
            assert!(want.as_ref().is_ok_and(|w| w.contains("\"row_count\":")) || sql.contains("nosuch"), "{want:?}");
            assert_eq!(answer(&mut few, sql), want, "{sql}");
        }
    }

    #[test]
    fn tables_hold_the_columns_a_query_names_and_errors_list_them_all() {
        let made = |sql: &str| {
            let mut db = Db::for_query(sql).unwrap();
            fill(&mut db);
            (db.made["ops"].clone(), db)
        };
        // None named: the first column, for the rows to count.
        assert_eq!(made("SELECT count(*) FROM ops").0, ["name"]);
        assert_eq!(made("select sum(SELF_PS) from ops where host = 'bb'").0, ["self_ps", "host"]);
        // The first host's rows have no flops: they keep their first column.
        assert_eq!(made("SELECT flops FROM ops").0, ["name", "flops"]);
        let (every, mut db) = made("SELECT * FROM ops");
        assert_eq!(every, ["name", "module", "self_ps", "run", "host", "flops"]);
        let (_, mut few) = made("SELECT nosuch, name FROM ops");
        assert_eq!(answer(&mut few, "SELECT nosuch, name FROM ops"), answer(&mut db, "SELECT nosuch, name FROM ops"));
        let err = answer(&mut few, "SELECT nosuch, name FROM ops").unwrap_err();
        assert!(err.contains("ops: name, module, self_ps, run, host, flops"), "{err}");
    }
}
