//! Tables written row by row as CSV or Parquet.
//!
//! A [`TableWriter`] takes rows of [`Cell`]s matching its [`Column`]s. CSV rows go
//! straight to the output (RFC 4180 quoting, empty field for null). Parquet rows
//! are buffered column by column (strings in one arena per column) for one row group
//! of at most [`ROWS_PER_GROUP`] rows, then encoded (dictionary, Snappy) and
//! written; memory is bounded by one row group whatever the table's length.

use std::io::{self, Write};
use std::sync::Arc;

use parquet::basic::{Compression, LogicalType, Repetition, Type as PhysicalType};
use parquet::data_type::{BoolType, ByteArray, ByteArrayType, DoubleType, Int64Type};
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::types::Type;

/// Rows per Parquet row group (DuckDB, Polars and Spark read row groups in parallel).
pub const ROWS_PER_GROUP: usize = 131_072;

/// A column's value type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ColType {
    Str,
    I64,
    /// An unsigned 64-bit integer (a TPU program's id is a fingerprint past
    /// `i64::MAX`): Parquet INT64 marked unsigned, CSV its decimal digits.
    U64,
    F64,
    Bool,
}

/// A column: name, type, and whether it may hold nulls.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Column {
    pub name: String,
    pub ty: ColType,
    pub nullable: bool,
}

impl Column {
    pub fn new(name: &str, ty: ColType, nullable: bool) -> Column {
        Column { name: name.to_string(), ty, nullable }
    }

    /// Columns from (name, type, nullable) triples.
    pub fn list(columns: &[(&str, ColType, bool)]) -> Vec<Column> {
        columns.iter().map(|&(n, t, null)| Column::new(n, t, null)).collect()
    }
}

/// One value of a row.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Cell<'a> {
    Null,
    Str(&'a str),
    I64(i64),
    U64(u64),
    F64(f64),
    Bool(bool),
}

/// The output formats of a table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TableFormat {
    Csv,
    Parquet,
}

/// Where a table's rows go, one at a time: a file ([`TableWriter`]) or a database.
pub trait RowSink {
    /// Appends a row; `row` has one cell per column of the table.
    fn row(&mut self, row: &[Cell]) -> io::Result<()>;
}

impl<W: Write + Send> RowSink for TableWriter<W> {
    fn row(&mut self, row: &[Cell]) -> io::Result<()> {
        TableWriter::row(self, row)
    }
}

/// Writes rows as CSV or Parquet.
pub enum TableWriter<W: Write + Send> {
    Csv(CsvWriter<W>),
    Parquet(Box<ParquetWriter<W>>),
}

impl<W: Write + Send> TableWriter<W> {
    /// Starts a table with `columns` in `format`.
    pub fn new(format: TableFormat, columns: Vec<Column>, out: W) -> io::Result<TableWriter<W>> {
        Ok(match format {
            TableFormat::Csv => TableWriter::Csv(CsvWriter::new(columns, out)?),
            TableFormat::Parquet => TableWriter::Parquet(Box::new(ParquetWriter::new(columns, out)?)),
        })
    }

    /// Appends a row; `row` has one cell per column.
    pub fn row(&mut self, row: &[Cell]) -> io::Result<()> {
        match self {
            TableWriter::Csv(w) => w.row(row),
            TableWriter::Parquet(w) => w.row(row),
        }
    }

    /// Writes what is buffered and the file's footer; returns the number of rows.
    pub fn finish(self) -> io::Result<u64> {
        match self {
            TableWriter::Csv(w) => w.finish(),
            TableWriter::Parquet(w) => w.finish(),
        }
    }
}

// ---------------------------------------------------------------------------
// CSV

/// Streams rows as CSV.
pub struct CsvWriter<W: Write> {
    out: W,
    columns: usize,
    rows: u64,
}

/// Writes one CSV field. A text a spreadsheet would take for a formula (starting with
/// `=`, `+`, `-`, `@`, a tab or a carriage return: `=cmd|' /C calc'!A0` as an event
/// name) is written after a `'`, which spreadsheets show as text (OWASP's rule against
/// CSV injection); numbers are written as numbers and never touched.
fn csv_field<W: Write>(out: &mut W, s: &str) -> io::Result<()> {
    let formula: &[u8] = if s.starts_with(['=', '+', '-', '@', '\t', '\r']) { b"'" } else { b"" };
    if s.contains([',', '"', '\n', '\r']) {
        out.write_all(b"\"")?;
        out.write_all(formula)?;
        let mut parts = s.split('"');
        if let Some(p) = parts.next() {
            out.write_all(p.as_bytes())?;
        }
        for p in parts {
            out.write_all(b"\"\"")?;
            out.write_all(p.as_bytes())?;
        }
        out.write_all(b"\"")
    } else {
        out.write_all(formula)?;
        out.write_all(s.as_bytes())
    }
}

impl<W: Write> CsvWriter<W> {
    fn new(columns: Vec<Column>, mut out: W) -> io::Result<CsvWriter<W>> {
        for (i, c) in columns.iter().enumerate() {
            if i > 0 {
                out.write_all(b",")?;
            }
            csv_field(&mut out, &c.name)?;
        }
        out.write_all(b"\n")?;
        Ok(CsvWriter { out, columns: columns.len(), rows: 0 })
    }

    fn row(&mut self, row: &[Cell]) -> io::Result<()> {
        debug_assert_eq!(row.len(), self.columns);
        for (i, c) in row.iter().enumerate() {
            if i > 0 {
                self.out.write_all(b",")?;
            }
            match *c {
                Cell::Null => {}
                Cell::Str(s) => csv_field(&mut self.out, s)?,
                Cell::I64(v) => write!(self.out, "{v}")?,
                Cell::U64(v) => write!(self.out, "{v}")?,
                Cell::F64(v) if v.is_finite() => write!(self.out, "{v}")?,
                Cell::F64(v) => write!(
                    self.out,
                    "{}",
                    if v.is_nan() {
                        "NaN"
                    } else if v > 0.0 {
                        "inf"
                    } else {
                        "-inf"
                    }
                )?,
                Cell::Bool(v) => self.out.write_all(if v { b"true" } else { b"false" })?,
            }
        }
        self.out.write_all(b"\n")?;
        self.rows += 1;
        Ok(())
    }

    fn finish(mut self) -> io::Result<u64> {
        self.out.flush()?;
        Ok(self.rows)
    }
}

// ---------------------------------------------------------------------------
// Parquet

/// One column's values for the row group being filled.
enum Buf {
    /// Strings: one arena and end offsets, and definition levels.
    Str {
        arena: Vec<u8>,
        ends: Vec<usize>,
    },
    I64(Vec<i64>),
    F64(Vec<f64>),
    Bool(Vec<bool>),
}

struct ColBuf {
    col: Column,
    values: Buf,
    /// Definition levels (1 = value, 0 = null); only for nullable columns.
    defs: Vec<i16>,
}

/// Writes rows as a Parquet file, one row group every [`ROWS_PER_GROUP`] rows.
pub struct ParquetWriter<W: Write + Send> {
    file: SerializedFileWriter<W>,
    cols: Vec<ColBuf>,
    in_group: usize,
    rows: u64,
}

fn pq_err(e: parquet::errors::ParquetError) -> io::Error {
    io::Error::other(format!("parquet: {e}"))
}

impl<W: Write + Send> ParquetWriter<W> {
    fn new(columns: Vec<Column>, out: W) -> io::Result<ParquetWriter<W>> {
        let fields = columns
            .iter()
            .map(|c| {
                let (physical, logical) = match c.ty {
                    ColType::Str => (PhysicalType::BYTE_ARRAY, Some(LogicalType::String)),
                    ColType::I64 => (PhysicalType::INT64, None),
                    ColType::U64 => (
                        PhysicalType::INT64,
                        Some(LogicalType::Integer(parquet::basic::IntType { bit_width: 64, is_signed: false })),
                    ),
                    ColType::F64 => (PhysicalType::DOUBLE, None),
                    ColType::Bool => (PhysicalType::BOOLEAN, None),
                };
                let rep = if c.nullable { Repetition::OPTIONAL } else { Repetition::REQUIRED };
                Type::primitive_type_builder(&c.name, physical)
                    .with_repetition(rep)
                    .with_logical_type(logical)
                    .build()
                    .map(Arc::new)
            })
            .collect::<Result<Vec<_>, _>>()
            .map_err(pq_err)?;
        let schema = Type::group_type_builder("schema").with_fields(fields).build().map_err(pq_err)?;
        let props = WriterProperties::builder()
            .set_compression(Compression::SNAPPY)
            .set_max_row_group_row_count(Some(ROWS_PER_GROUP))
            .set_created_by(format!("stepscope {}", env!("CARGO_PKG_VERSION")))
            .build();
        let file = SerializedFileWriter::new(out, Arc::new(schema), Arc::new(props)).map_err(pq_err)?;
        let cols = columns
            .into_iter()
            .map(|col| {
                let values = match col.ty {
                    ColType::Str => Buf::Str { arena: Vec::new(), ends: Vec::new() },
                    ColType::I64 | ColType::U64 => Buf::I64(Vec::new()),
                    ColType::F64 => Buf::F64(Vec::new()),
                    ColType::Bool => Buf::Bool(Vec::new()),
                };
                ColBuf { col, values, defs: Vec::new() }
            })
            .collect();
        Ok(ParquetWriter { file, cols, in_group: 0, rows: 0 })
    }

    fn row(&mut self, row: &[Cell]) -> io::Result<()> {
        for (c, cell) in self.cols.iter_mut().zip(row) {
            let present = !matches!(cell, Cell::Null);
            if c.col.nullable {
                c.defs.push(i16::from(present));
            } else if !present {
                return Err(io::Error::other(format!("column {} has no value in row {}", c.col.name, self.rows)));
            }
            match (&mut c.values, *cell) {
                (_, Cell::Null) => {}
                (Buf::Str { arena, ends }, Cell::Str(s)) => {
                    arena.extend_from_slice(s.as_bytes());
                    ends.push(arena.len());
                }
                (Buf::I64(v), Cell::I64(x)) => v.push(x),
                // Unsigned: stored as its bits, which the column's type reads back.
                (Buf::I64(v), Cell::U64(x)) if c.col.ty == ColType::U64 => v.push(x as i64),
                (Buf::F64(v), Cell::F64(x)) => v.push(x),
                (Buf::F64(v), Cell::I64(x)) => v.push(x as f64),
                (Buf::Bool(v), Cell::Bool(x)) => v.push(x),
                (_, other) => {
                    return Err(io::Error::other(format!("column {}: unexpected value {other:?}", c.col.name)));
                }
            }
        }
        self.in_group += 1;
        self.rows += 1;
        if self.in_group >= ROWS_PER_GROUP {
            self.flush_group()?;
        }
        Ok(())
    }

    fn flush_group(&mut self) -> io::Result<()> {
        if self.in_group == 0 {
            return Ok(());
        }
        let mut rg = self.file.next_row_group().map_err(pq_err)?;
        for c in &mut self.cols {
            let Some(mut w) = rg.next_column().map_err(pq_err)? else {
                return Err(io::Error::other("parquet: fewer columns than the schema"));
            };
            let defs = if c.col.nullable { Some(c.defs.as_slice()) } else { None };
            match &mut c.values {
                Buf::Str { arena, ends } => {
                    let bytes = bytes::Bytes::from(std::mem::take(arena));
                    let mut start = 0;
                    let values: Vec<ByteArray> = ends
                        .iter()
                        .map(|&end| {
                            let b = ByteArray::from(bytes.slice(start..end));
                            start = end;
                            b
                        })
                        .collect();
                    ends.clear();
                    w.typed::<ByteArrayType>().write_batch(&values, defs, None).map_err(pq_err)?;
                }
                Buf::I64(v) => {
                    w.typed::<Int64Type>().write_batch(v, defs, None).map_err(pq_err)?;
                    v.clear();
                }
                Buf::F64(v) => {
                    w.typed::<DoubleType>().write_batch(v, defs, None).map_err(pq_err)?;
                    v.clear();
                }
                Buf::Bool(v) => {
                    w.typed::<BoolType>().write_batch(v, defs, None).map_err(pq_err)?;
                    v.clear();
                }
            }
            c.defs.clear();
            w.close().map_err(pq_err)?;
        }
        rg.close().map_err(pq_err)?;
        self.in_group = 0;
        Ok(())
    }

    fn finish(mut self) -> io::Result<u64> {
        self.flush_group()?;
        let mut inner = self.file.into_inner().map_err(pq_err)?;
        inner.flush()?;
        Ok(self.rows)
    }
}

#[cfg(test)]
mod tests {
    use super::csv_field;

    fn field(s: &str) -> String {
        let mut out = Vec::new();
        csv_field(&mut out, s).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn csv_text_a_spreadsheet_would_evaluate_is_written_as_text() {
        assert_eq!(field("=cmd|' /C calc'!A0"), "'=cmd|' /C calc'!A0");
        assert_eq!(field("@SUM(A1)"), "'@SUM(A1)");
        assert_eq!(field("-2+3,x"), "\"'-2+3,x\"");
        assert_eq!(field("\tx"), "'\tx");
        assert_eq!(field("fusion.1"), "fusion.1");
        assert_eq!(field("a \"b\""), "\"a \"\"b\"\"\"");
    }
}
