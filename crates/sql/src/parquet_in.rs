//! Reading a folder `stepscope tables` wrote: its manifest, then each wanted table's
//! Parquet files, their run and host from the Hive partition folders they lie in.

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

use parquet::basic::Type as PhysicalType;
use parquet::file::reader::{FileReader, SerializedFileReader};
use parquet::record::Field;
use stepscope_export::table::{Cell, ColType, Column, RowSink};
use stepscope_export::tables::TABLES;

use crate::Db;

/// The manifest `stepscope tables` writes at the top of its folder.
pub const MANIFEST: &str = "stepscope_tables.json";

/// The manifest's schema this reader reads.
const SCHEMA: &str = "stepscope.tables/1";

/// How deep partition folders go under a table's folder (run=…/host=…).
const MAX_DEPTH: usize = 4;

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
            let mut files = Vec::new();
            parquet_files(&dir.join(table), 0, &mut files)
                .map_err(|e| format!("cannot list {}: {e}", dir.join(table).display()))?;
            files.sort();
            for file in files {
                let rel = file.strip_prefix(dir.join(table)).unwrap_or(&file).to_path_buf();
                let partition = |key: &str| {
                    rel.components()
                        .find_map(|c| c.as_os_str().to_str()?.strip_prefix(key)?.strip_prefix('=').map(percent_decoded))
                };
                let (run, host) = (partition("run"), partition("host"));
                if !keep(run.as_deref(), host.as_deref()) {
                    continue;
                }
                rows += self.add_parquet(table, &file, run.as_deref(), host.as_deref()).map_err(|e| {
                    format!("cannot read {}: {e} — is it a table `stepscope tables` wrote?", file.display())
                })?;
            }
        }
        Ok(rows)
    }

    /// Adds the rows of one Parquet file to `table`, with its partition values.
    fn add_parquet(&mut self, table: &str, path: &Path, run: Option<&str>, host: Option<&str>) -> io::Result<u64> {
        let file = File::open(path)?;
        if !file.metadata()?.is_file() {
            return Err(io::Error::other("not a regular file"));
        }
        // The reader is not promised never to panic on a damaged file: that file is an
        // error, not the end of the process.
        let read = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.read_parquet(table, file, run, host)));
        read.unwrap_or_else(|_| Err(io::Error::other("a damaged Parquet file")))
    }

    fn read_parquet(&mut self, table: &str, file: File, run: Option<&str>, host: Option<&str>) -> io::Result<u64> {
        let reader = SerializedFileReader::new(file).map_err(io::Error::other)?;
        let schema = reader.metadata().file_metadata().schema_descr_ptr();
        let columns = (schema.columns().iter())
            .map(|c| {
                let ty = match c.physical_type() {
                    PhysicalType::BYTE_ARRAY | PhysicalType::FIXED_LEN_BYTE_ARRAY => ColType::Str,
                    PhysicalType::DOUBLE | PhysicalType::FLOAT => ColType::F64,
                    PhysicalType::BOOLEAN => ColType::Bool,
                    _ => ColType::I64,
                };
                Column::new(c.name(), ty, c.max_def_level() > 0)
            })
            .collect::<Vec<_>>();
        let names = self.ensure(table, &columns)?;
        let partitions: Vec<Option<&str>> =
            names[columns.len()..].iter().map(|p| if p == "run" { run } else { host }).collect();
        let mut rows = reader.get_row_iter(None).map_err(io::Error::other)?;
        self.insert(table, &names, &partitions, &mut |out: &mut dyn RowSink| {
            let mut texts: Vec<String> = Vec::new();
            for row in rows.by_ref() {
                let row = row.map_err(io::Error::other)?;
                texts.clear();
                let fields: Vec<&Field> = row.get_column_iter().map(|(_, f)| f).collect();
                for f in &fields {
                    texts.push(match f {
                        Field::Null | Field::Bool(_) | Field::Long(_) | Field::Double(_) | Field::Str(_) => {
                            String::new()
                        }
                        other => other.to_string(),
                    });
                }
                let cells: Vec<Cell> = (fields.iter().zip(&texts))
                    .map(|(f, text)| match f {
                        Field::Null => Cell::Null,
                        Field::Bool(b) => Cell::Bool(*b),
                        Field::Long(v) => Cell::I64(*v),
                        Field::Double(v) => Cell::F64(*v),
                        Field::Str(s) => Cell::Str(s),
                        _ => Cell::Str(text),
                    })
                    .collect();
                out.row(&cells)?;
            }
            Ok(())
        })
    }
}

/// Checks `dir`'s manifest: a folder of tables, in a version this reader reads.
fn check_manifest(dir: &Path) -> Result<(), String> {
    let path = dir.join(MANIFEST);
    let text = read_small(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
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
        None => Err(format!("{} is not a manifest `stepscope tables` wrote (no \"schema\")", path.display())),
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

/// The `.parquet` files under `dir`, partition folders at most [`MAX_DEPTH`] deep.
fn parquet_files(dir: &Path, depth: usize, out: &mut Vec<PathBuf>) -> io::Result<()> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    for entry in entries {
        let entry = entry?;
        let ty = entry.file_type()?;
        let path = entry.path();
        if ty.is_dir() && depth < MAX_DEPTH {
            parquet_files(&path, depth + 1, out)?;
        } else if ty.is_file() && path.extension().is_some_and(|e| e == "parquet") {
            out.push(path);
        }
    }
    Ok(())
}

/// A Hive partition value decoded (`%2F` → `/`); a `%` not followed by two hex digits
/// stays as it is.
fn percent_decoded(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        match (b[i], b.get(i + 1).and_then(|&c| hex(c)), b.get(i + 2).and_then(|&c| hex(c))) {
            (b'%', Some(h), Some(l)) => {
                out.push((h * 16 + l) as u8);
                i += 3;
            }
            (c, _, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    #[test]
    fn partition_values_are_decoded() {
        assert_eq!(super::percent_decoded("plugins%2Fprofile%2F2026_11_01"), "plugins/profile/2026_11_01");
        assert_eq!(super::percent_decoded("vm-1.a%20b"), "vm-1.a b");
        assert_eq!(super::percent_decoded("100%"), "100%");
        assert_eq!(super::percent_decoded("%zz%4"), "%zz%4");
    }
}
