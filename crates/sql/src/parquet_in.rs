//! Reading a folder `stepscope tables` wrote: its manifest, then each wanted table's
//! Parquet files, their run and host from the Hive partition folders they lie in.

use std::fs::File;
use std::io;
use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;

use parquet::basic::{LogicalType, Type as PhysicalType};
use parquet::column::reader::{ColumnReader, ColumnReaderImpl};
use parquet::data_type::{ByteArray, DataType};
use parquet::file::reader::{FileReader, SerializedFileReader};
use stepscope_export::table::{Cell, ColType, Column, RowSink};
use stepscope_export::tables::{parquet_files, partition_value, MANIFEST, SCHEMA, TABLES};
use stepscope_xspace::{files, xplane, Source};

use crate::parquet_check::{self, Layout};
use crate::Db;

/// Whether `dir` is a folder `stepscope tables` wrote.
pub fn is_tables_dir(dir: &Path) -> bool {
    dir.join(MANIFEST).is_file()
}

impl Db {
    /// Adds the tables `wanted` names from `dir`, a folder `stepscope tables` wrote:
    /// the files whose partition (run, host) `keep` keeps. Returns the rows added.
    pub fn add_tables_dir(
        &mut self,
        dir: &Path,
        wanted: &dyn Fn(&str) -> bool,
        keep: &dyn Fn(Option<&str>, Option<&str>) -> bool,
    ) -> Result<u64, String> {
        check_manifest(dir)?;
        let mut rows = 0;
        for table in TABLES.iter().filter(|t| wanted(t)) {
            let files = parquet_files(&dir.join(table)).map_err(|e| {
                format!("cannot list {}: {e} — check the folder's permissions", dir.join(table).display())
            })?;
            for file in files {
                let rel = file.strip_prefix(dir.join(table)).unwrap_or(&file).to_path_buf();
                let partition = |key: &str| {
                    rel.components()
                        .find_map(|c| c.as_os_str().to_str()?.strip_prefix(key)?.strip_prefix('=').map(partition_value))
                };
                let (run, host) = (partition("run"), partition("host"));
                if !keep(run.as_deref(), host.as_deref()) {
                    continue;
                }
                rows += self.add_parquet(table, &file, run.as_deref(), host.as_deref())?;
            }
        }
        Ok(rows)
    }

    /// Adds the rows of one Parquet file to `table`, with its partition values.
    fn add_parquet(&mut self, table: &str, path: &Path, run: Option<&str>, host: Option<&str>) -> Result<u64, String> {
        let (file, len) = files::open_regular(path).map_err(|e| e.to_string())?;
        let source = xplane::source_of(file, len, path).map_err(|e| e.to_string())?;
        // What passes the check should not make the reader panic; should it still, that
        // file is an error, not the end of the process.
        let read = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            self.add_parquet_bytes(table, Arc::clone(&source), run, host)
        }));
        if source.changed() {
            return Err(xplane::changed_while_read(path).to_string());
        }
        read.unwrap_or_else(|_| Err(io::Error::other("the Parquet reader failed on it"))).map_err(|e| {
            format!(
                "cannot read {}: {e} — it is damaged or not a table `stepscope tables` wrote; write the folder again",
                path.display()
            )
        })
    }

    /// Adds the rows of the Parquet file `bytes` to `table`. The file is checked
    /// against its own size first ([`parquet_check`]), so that nothing it claims is
    /// allocated or looped over unless the file can hold it. (Public for the fuzz
    /// target, which wants a panic to be seen: nothing here catches one.)
    pub fn add_parquet_bytes(
        &mut self,
        table: &str,
        bytes: Arc<Source>,
        run: Option<&str>,
        host: Option<&str>,
    ) -> io::Result<u64> {
        let layout = parquet_check::check(&bytes).map_err(|e| io::Error::other(e.to_string()))?;
        self.read_parquet(table, Bytes::from_owner(Mapped(bytes)), &layout, run, host)
    }

    fn read_parquet(
        &mut self,
        table: &str,
        file: Bytes,
        layout: &Layout,
        run: Option<&str>,
        host: Option<&str>,
    ) -> io::Result<u64> {
        let file_bytes = file.len() as u64;
        let reader = SerializedFileReader::new(file).map_err(io::Error::other)?;
        let schema = reader.metadata().file_metadata().schema_descr_ptr();
        let columns = (schema.columns().iter())
            .map(|c| {
                let unsigned = matches!(c.logical_type_ref(), Some(LogicalType::Integer(i)) if !i.is_signed);
                let ty = match c.physical_type() {
                    PhysicalType::BYTE_ARRAY | PhysicalType::FIXED_LEN_BYTE_ARRAY => ColType::Str,
                    PhysicalType::DOUBLE | PhysicalType::FLOAT => ColType::F64,
                    PhysicalType::BOOLEAN => ColType::Bool,
                    PhysicalType::INT64 if unsigned => ColType::U64,
                    _ => ColType::I64,
                };
                Column::new(c.name(), ty, c.max_def_level() > 0)
            })
            .collect::<Vec<_>>();
        if columns.len() != layout.columns || reader.num_row_groups() != layout.group_rows.len() {
            return Err(io::Error::other("its footer reads differently from its checked layout"));
        }
        let kept = self.ensure(table, &columns)?;
        let partitions: Vec<Option<&str>> =
            kept.partitions.iter().map(|p| if p == "run" { run } else { host }).collect();
        // Only the columns the table keeps are read; the others' cells are empty.
        let read: Vec<bool> = (0..columns.len()).map(|i| kept.at.contains(&i)).collect();
        // A dictionary value can be repeated in every row: what the rows expand to is
        // bounded too, so that a small file cannot fill the database's disk.
        let max_cell_bytes = file_bytes.saturating_mul(MAX_CELL_BYTES_PER_BYTE).saturating_add(MAX_CELL_BYTES_SLACK);
        let mut cell_bytes = 0u64;
        self.insert(table, &kept, &partitions, &mut |out: &mut dyn RowSink| {
            // A row group at a time, its columns read [`BATCH_ROWS`] rows at a time
            // (values and definition levels), then handed on row by row.
            for (g, &group_rows) in layout.group_rows.iter().enumerate() {
                let group = reader.get_row_group(g).map_err(io::Error::other)?;
                let mut readers = (0..columns.len())
                    .map(|i| read[i].then(|| group.get_column_reader(i)).transpose())
                    .collect::<parquet::errors::Result<Vec<_>>>()
                    .map_err(io::Error::other)?;
                let mut left = group_rows;
                while left > 0 {
                    let rows = left.min(BATCH_ROWS) as usize;
                    left -= rows as u64;
                    let cols = (readers.iter_mut().zip(&columns))
                        .map(|(r, c)| {
                            r.as_mut().map(|r| ColData::read(r, rows, c.nullable, c.ty == ColType::U64)).transpose()
                        })
                        .collect::<io::Result<Vec<_>>>()?;
                    let mut next = vec![0usize; cols.len()];
                    let mut cells: Vec<Cell> = Vec::with_capacity(cols.len());
                    for row in 0..rows {
                        cells.clear();
                        for (c, at) in cols.iter().zip(&mut next) {
                            let cell = match c {
                                Some(c) => c.cell(row, at)?,
                                None => Cell::Null,
                            };
                            cell_bytes += match cell {
                                Cell::Str(s) => s.len() as u64,
                                _ => 8,
                            };
                            cells.push(cell);
                        }
                        if cell_bytes > max_cell_bytes {
                            return Err(io::Error::other(format!(
                                "its rows expand to more than {max_cell_bytes} bytes, {MAX_CELL_BYTES_PER_BYTE}x its size \
                                 and more: damaged or not a table"
                            )));
                        }
                        out.row(&cells)?;
                    }
                }
            }
            Ok(())
        })
    }
}

/// Rows read of each column at a time.
const BATCH_ROWS: u64 = 8192;
/// The cells of a Parquet file's rows (text bytes, 8 for any other value) are at most
/// this many times its size, plus [`MAX_CELL_BYTES_SLACK`]: a table of `stepscope
/// tables` repeats a dictionary's names in many rows, but never this often.
const MAX_CELL_BYTES_PER_BYTE: u64 = 64;
const MAX_CELL_BYTES_SLACK: u64 = 256 << 20;

/// A file's bytes as the Parquet reader's buffer: slices of it are views, not copies,
/// and no read goes past its end.
struct Mapped(Arc<Source>);

impl AsRef<[u8]> for Mapped {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

/// Some rows of one column of a row group: their values (only the present ones) and,
/// for a nullable column, a definition level a row.
struct ColData {
    values: Values,
    defs: Vec<i16>,
    nullable: bool,
    /// An INT64 column marked unsigned: its values are u64 bits.
    unsigned: bool,
}

enum Values {
    Str(Vec<ByteArray>),
    I64(Vec<i64>),
    I32(Vec<i32>),
    F64(Vec<f64>),
    F32(Vec<f32>),
    Bool(Vec<bool>),
}

/// `rows` records of `r`: values and definition levels.
fn read_all<T: DataType>(
    r: &mut ColumnReaderImpl<T>,
    rows: usize,
    nullable: bool,
) -> io::Result<(Vec<T::T>, Vec<i16>)> {
    let (mut values, mut defs) = (Vec::with_capacity(rows), Vec::with_capacity(if nullable { rows } else { 0 }));
    let mut got = 0;
    while got < rows {
        let levels = if nullable { Some(&mut defs) } else { None };
        let (records, _, _) = r.read_records(rows - got, levels, None, &mut values).map_err(io::Error::other)?;
        if records == 0 {
            return Err(io::Error::other(format!("a row group ends after {got} of its {rows} rows")));
        }
        got += records;
    }
    Ok((values, defs))
}

impl ColData {
    fn read(reader: &mut ColumnReader, rows: usize, nullable: bool, unsigned: bool) -> io::Result<ColData> {
        let (values, defs) = match reader {
            ColumnReader::ByteArrayColumnReader(r) => {
                let (v, d) = read_all(r, rows, nullable)?;
                (Values::Str(v), d)
            }
            ColumnReader::Int64ColumnReader(r) => {
                let (v, d) = read_all(r, rows, nullable)?;
                (Values::I64(v), d)
            }
            ColumnReader::Int32ColumnReader(r) => {
                let (v, d) = read_all(r, rows, nullable)?;
                (Values::I32(v), d)
            }
            ColumnReader::DoubleColumnReader(r) => {
                let (v, d) = read_all(r, rows, nullable)?;
                (Values::F64(v), d)
            }
            ColumnReader::FloatColumnReader(r) => {
                let (v, d) = read_all(r, rows, nullable)?;
                (Values::F32(v), d)
            }
            ColumnReader::BoolColumnReader(r) => {
                let (v, d) = read_all(r, rows, nullable)?;
                (Values::Bool(v), d)
            }
            _ => return Err(io::Error::other("a column of a type `stepscope tables` does not write")),
        };
        Ok(ColData { values, defs, nullable, unsigned })
    }

    /// Row `row`'s cell; `next` is the column's next value (rows are asked for in
    /// order, and only a present value takes one).
    fn cell(&self, row: usize, next: &mut usize) -> io::Result<Cell<'_>> {
        if self.nullable && self.defs.get(row).copied().unwrap_or(0) == 0 {
            return Ok(Cell::Null);
        }
        let i = *next;
        *next += 1;
        let missing = || io::Error::other("a column holds fewer values than its rows");
        Ok(match &self.values {
            Values::Str(v) => {
                let bytes = v.get(i).ok_or_else(missing)?.data();
                Cell::Str(std::str::from_utf8(bytes).map_err(|_| io::Error::other("a text value is not UTF-8"))?)
            }
            Values::I64(v) if self.unsigned => Cell::U64(*v.get(i).ok_or_else(missing)? as u64),
            Values::I64(v) => Cell::I64(*v.get(i).ok_or_else(missing)?),
            Values::I32(v) => Cell::I64(i64::from(*v.get(i).ok_or_else(missing)?)),
            Values::F64(v) => Cell::F64(*v.get(i).ok_or_else(missing)?),
            Values::F32(v) => Cell::F64(f64::from(*v.get(i).ok_or_else(missing)?)),
            Values::Bool(v) => Cell::Bool(*v.get(i).ok_or_else(missing)?),
        })
    }
}

/// Checks `dir`'s manifest: a folder of tables, in a version this reader reads.
fn check_manifest(dir: &Path) -> Result<(), String> {
    let path = dir.join(MANIFEST);
    let text = read_small(&path)
        .map_err(|e| format!("cannot read {}: {e} — point at a folder `stepscope tables` wrote", path.display()))?;
    let schema = serde_json::from_str::<serde_json::Value>(&text)
        .ok()
        .and_then(|v| v.get("schema").and_then(|s| s.as_str()).map(String::from));
    match schema.as_deref() {
        Some(SCHEMA) => Ok(()),
        Some(other) => Err(format!(
            "{} holds tables of schema {other:?}, and this stepscope reads {SCHEMA:?} — write them again with this \
             stepscope's `tables`",
            dir.display()
        )),
        None => Err(format!(
            "{} is not a manifest `stepscope tables` wrote (no \"schema\") — write the folder again with `stepscope tables`",
            path.display()
        )),
    }
}

/// A small regular file's text (a manifest: at most 16 MiB).
fn read_small(path: &Path) -> io::Result<String> {
    use std::io::Read;
    let file = File::open(path)?;
    if !file.metadata()?.is_file() {
        return Err(io::Error::other("not a regular file"));
    }
    let mut text = String::new();
    file.take(16 << 20).read_to_string(&mut text)?;
    Ok(text)
}
