//! A query's result written as it comes: JSON (`stepscope.sql/1`) or CSV.

use std::io::{self, Write};

use stepscope_export::table::{Cell, ColType, Column, TableFormat, TableWriter};

use crate::Results;

/// The JSON result's schema.
pub const SCHEMA: &str = "stepscope.sql/1";

/// Writes `{"schema", "columns", "rows": [[…], …], "row_count", "rows_cut"}`, rows as
/// they come, at most `max_rows` of them and at most `max_bytes` of JSON (then
/// `rows_cut` is true and the query stops; a row that would pass the bytes is left out
/// whole). Call [`JsonResults::finish`] after the query.
pub struct JsonResults<W: Write> {
    out: W,
    max_rows: usize,
    max_bytes: u64,
    bytes: u64,
    rows: usize,
    cut: bool,
    started: bool,
    /// The row being written, whole before it goes out.
    row: Vec<u8>,
}

impl<W: Write> JsonResults<W> {
    pub fn new(out: W, max_rows: usize) -> JsonResults<W> {
        JsonResults::bounded(out, max_rows, u64::MAX)
    }

    /// At most `max_rows` rows and about `max_bytes` of JSON.
    pub fn bounded(out: W, max_rows: usize, max_bytes: u64) -> JsonResults<W> {
        JsonResults { out, max_rows, max_bytes, bytes: 0, rows: 0, cut: false, started: false, row: Vec::new() }
    }

    /// Closes the JSON of a query that failed after its answer began (its first rows
    /// already sent): `rows_cut` is true and `error` says why.
    pub fn finish_failed(mut self, error: &str) -> io::Result<W> {
        if !self.started {
            self.columns(&[])?;
        }
        write!(self.out, "],\"row_count\":{},\"rows_cut\":true,\"error\":", self.rows)?;
        serde_json::to_writer(&mut self.out, error)?;
        self.out.write_all(b"}")?;
        Ok(self.out)
    }

    /// Closes the JSON; returns the writer, the rows written and whether rows were cut.
    pub fn finish(mut self) -> io::Result<(W, usize, bool)> {
        if !self.started {
            self.columns(&[])?;
        }
        write!(self.out, "],\"row_count\":{},\"rows_cut\":{}}}", self.rows, self.cut)?;
        Ok((self.out, self.rows, self.cut))
    }
}

fn json_cell(out: &mut impl Write, c: &Cell) -> io::Result<()> {
    match *c {
        Cell::Null => out.write_all(b"null"),
        Cell::Str(s) => serde_json::to_writer(&mut *out, s).map_err(io::Error::from),
        Cell::I64(v) => write!(out, "{v}"),
        Cell::U64(v) => write!(out, "{v}"),
        Cell::F64(v) if v.is_finite() => serde_json::to_writer(&mut *out, &v).map_err(io::Error::from),
        Cell::F64(_) => out.write_all(b"null"),
        Cell::Bool(v) => write!(out, "{v}"),
    }
}

impl<W: Write> Results for JsonResults<W> {
    fn columns(&mut self, names: &[String]) -> io::Result<()> {
        self.started = true;
        write!(self.out, "{{\"schema\":\"{SCHEMA}\",\"columns\":")?;
        serde_json::to_writer(&mut self.out, names)?;
        self.out.write_all(b",\"rows\":[")
    }

    fn row(&mut self, cells: &[Cell]) -> io::Result<bool> {
        if self.rows == self.max_rows {
            self.cut = true;
            return Ok(false);
        }
        let row = &mut self.row;
        row.clear();
        row.extend_from_slice(if self.rows == 0 { b"[" } else { b",[" });
        let room = self.max_bytes.saturating_sub(self.bytes);
        for (i, c) in cells.iter().enumerate() {
            if i > 0 {
                row.push(b',');
            }
            json_cell(row, c)?;
            if row.len() as u64 >= room {
                self.cut = true;
                return Ok(false);
            }
        }
        row.push(b']');
        self.out.write_all(row)?;
        self.bytes += row.len() as u64;
        self.rows += 1;
        Ok(true)
    }
}

/// Writes the result as CSV: a header of the column names, then a line a row.
pub struct CsvResults<W: Write + Send> {
    out: Option<W>,
    table: Option<TableWriter<W>>,
}

impl<W: Write + Send> CsvResults<W> {
    pub fn new(out: W) -> CsvResults<W> {
        CsvResults { out: Some(out), table: None }
    }

    /// Flushes; returns the rows written.
    pub fn finish(self) -> io::Result<u64> {
        self.table.map_or(Ok(0), |t| t.finish())
    }
}

impl<W: Write + Send> Results for CsvResults<W> {
    fn columns(&mut self, names: &[String]) -> io::Result<()> {
        let columns = names.iter().map(|n| Column::new(n, ColType::Str, true)).collect();
        let out = self.out.take().ok_or_else(|| io::Error::other("columns given twice"))?;
        self.table = Some(TableWriter::new(TableFormat::Csv, columns, out)?);
        Ok(())
    }

    fn row(&mut self, cells: &[Cell]) -> io::Result<bool> {
        let table = self.table.as_mut().ok_or_else(|| io::Error::other("a row before the columns"))?;
        table.row(cells)?;
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_query_that_fails_midway_closes_its_json_with_the_error() {
        let mut r = JsonResults::bounded(Vec::new(), 10, u64::MAX);
        r.columns(&["a".to_string()]).unwrap();
        r.row(&[Cell::I64(1)]).unwrap();
        let out = r.finish_failed("the query ran past its limit").unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["rows"], serde_json::json!([[1]]));
        assert_eq!((v["row_count"].as_u64(), v["rows_cut"].as_bool()), (Some(1), Some(true)));
        assert_eq!(v["error"], "the query ran past its limit");
        // A row past the bytes allowed is left out whole.
        let mut r = JsonResults::bounded(Vec::new(), 10, 12);
        r.columns(&["a".to_string()]).unwrap();
        assert!(!r.row(&[Cell::Str("0123456789")]).unwrap(), "cut");
        let (out, rows, cut) = r.finish().unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!((rows, cut, v["rows"].as_array().unwrap().len()), (0, true, 0));
    }
}
