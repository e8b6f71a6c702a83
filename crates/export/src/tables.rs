//! The profile's tables (`stepscope tables`, `stepscope sql`): which there are, and
//! each host's rows of them, written to any [`TableSink`] — Parquet files, or a SQL
//! database. Each table's rows are what the CLI prints with `--json` for that host.

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

use parquet::file::reader::{FileReader, SerializedFileReader};

use serde::Serialize;
use stepscope_analysis::ops::GroupBy;
use stepscope_analysis::{collectives, devices, kernels, memory, ops, scopes, steps, Profile};
use stepscope_judge::advise::{self, Thresholds};
use stepscope_xspace::discover::{captured, Run};

use crate::rows::Rows;
use crate::table::{Column, RowSink};
use crate::{events, op_events};

/// The manifest at the top of a tables folder, and its schema.
pub const MANIFEST: &str = "stepscope_tables.json";
pub const SCHEMA: &str = "stepscope.tables/1";

/// The tables, in the order they are written (docs/tables.md lists their columns).
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

/// Where tables go: each table is opened with its columns, filled, and closed.
pub trait TableSink {
    /// Writes table `name` of `columns`: `fill` hands its rows to the sink it is given.
    /// Returns the number of rows written.
    fn table(
        &mut self,
        name: &str,
        columns: &[Column],
        fill: &mut dyn FnMut(&mut dyn RowSink) -> io::Result<()>,
    ) -> io::Result<u64>;
}

/// One row of the `runs` table.
#[derive(Serialize)]
pub struct RunRow {
    pub run: String,
    pub captured: Option<String>,
    pub hosts: u64,
    pub bytes: u64,
}

/// The `runs` table's row of `run`.
pub fn run_row(run: &Run) -> RunRow {
    RunRow { run: run.rel.clone(), captured: captured(&run.rel), hosts: run.hosts.len() as u64, bytes: run.bytes() }
}

/// One row of the memory table: an allocator's bytes in use after one of its events.
#[derive(Serialize)]
pub struct MemoryPoint<'a> {
    host: &'a str,
    allocator: &'a str,
    time_ps: i64,
    in_use_bytes: u64,
}

/// The memory table's rows: every allocator's full timeline.
pub fn memory_points(m: &memory::Memory) -> Vec<MemoryPoint<'_>> {
    (m.allocators.iter())
        .flat_map(|a| {
            a.timeline.iter().map(|p| MemoryPoint {
                host: &a.host,
                allocator: &a.name,
                time_ps: p.time_ps,
                in_use_bytes: p.in_use_bytes,
            })
        })
        .collect()
}

/// The `.parquet` files under `dir`, in partition folders at most four deep (a
/// table's `run=…/host=…`), sorted; none where `dir` does not exist.
pub fn parquet_files(dir: &Path) -> io::Result<Vec<PathBuf>> {
    files_under(dir, &|path| path.extension().is_some_and(|e| e == "parquet"))
}

/// The regular files under `dir` that `keep` keeps, in folders at most four deep (a
/// tables folder's `table/run=…/host=…`), sorted; none where `dir` does not exist.
pub fn files_under(dir: &Path, keep: &dyn Fn(&Path) -> bool) -> io::Result<Vec<PathBuf>> {
    fn walk(dir: &Path, depth: usize, keep: &dyn Fn(&Path) -> bool, out: &mut Vec<PathBuf>) -> io::Result<()> {
        let entries = match std::fs::read_dir(dir) {
            Ok(e) => e,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e),
        };
        for entry in entries {
            let entry = entry?;
            let (ty, path) = (entry.file_type()?, entry.path());
            if ty.is_dir() && depth < 4 {
                walk(&path, depth + 1, keep, out)?;
            } else if ty.is_file() && keep(&path) {
                out.push(path);
            }
        }
        Ok(())
    }
    let mut out = Vec::new();
    walk(dir, 0, keep, &mut out)?;
    out.sort();
    Ok(out)
}

/// The Parquet files of `tables` under `dir` ([`parquet_files`] of each table's
/// folder), and their rows, from the files' footers.
pub fn count_files(dir: &Path, tables: &[&str]) -> io::Result<(u64, u64)> {
    let (mut files, mut rows) = (0, 0);
    for t in tables {
        for path in parquet_files(&dir.join(t))? {
            let reader = SerializedFileReader::new(File::open(&path)?)
                .map_err(|e| io::Error::other(format!("{}: {e}", path.display())))?;
            files += 1;
            rows += reader.metadata().file_metadata().num_rows().max(0) as u64;
        }
    }
    Ok((files, rows))
}

/// The length of a Parquet file's footer, from its last 8 bytes (the footer's length
/// and the magic `PAR1`).
pub fn footer_len(end: &[u8]) -> io::Result<u64> {
    match end {
        [a, b, c, d, b'P', b'A', b'R', b'1'] => Ok(u64::from(u32::from_le_bytes([*a, *b, *c, *d]))),
        _ => Err(io::Error::other("not a Parquet file (no PAR1 at its end)")),
    }
}

/// The rows a Parquet file holds, from its footer (the file metadata before the last 8
/// bytes).
pub fn footer_rows(footer: &[u8]) -> io::Result<u64> {
    let meta = parquet::file::metadata::ParquetMetaDataReader::decode_metadata(footer)
        .map_err(|e| io::Error::other(format!("its Parquet footer is not readable: {e}")))?;
    Ok(meta.file_metadata().num_rows().max(0) as u64)
}

/// Writes `rows` as table `name` to `sink`, unless there are none (no columns).
pub fn put_rows<T: Serialize>(sink: &mut dyn TableSink, name: &str, rows: &[T]) -> io::Result<u64> {
    if rows.is_empty() {
        return Ok(0);
    }
    let rows = Rows::of(rows)?;
    sink.table(name, rows.columns(), &mut |out| rows.emit(out))
}

/// Writes the tables of `profile` (one host's, or a run's) that `wanted` names, except
/// `runs`, to `sink`; a table with no rows is not opened. Only what a wanted table needs
/// is computed. Returns the rows written.
pub fn host_tables(profile: &Profile, wanted: &dyn Fn(&str) -> bool, sink: &mut dyn TableSink) -> io::Result<u64> {
    let mut rows = 0u64;
    let mut count = |n: u64| rows += n;
    let st = steps::steps(profile);
    if wanted("steps") {
        count(put_rows(sink, "steps", &st.steps)?);
    }
    if wanted("ops") || wanted("op_events") {
        let o = ops::ops(profile, GroupBy::Op, 0);
        if wanted("ops") {
            count(put_rows(sink, "ops", &o.ops)?);
        }
        if wanted("op_events") && !o.ops.is_empty() {
            count(
                sink.table("op_events", &op_events::columns(), &mut |out| {
                    op_events::write_op_events(profile, &st, out)
                })?,
            );
        }
    }
    if wanted("kernels") {
        count(put_rows(sink, "kernels", &kernels::kernels(profile).kernels)?);
    }
    if wanted("collectives") {
        count(put_rows(sink, "collectives", &collectives::collectives(profile).ops)?);
    }
    if wanted("scopes") {
        count(put_rows(sink, "scopes", &scopes::scopes(profile).scopes)?);
    }
    if wanted("devices") {
        count(put_rows(sink, "devices", &devices::devices(profile).devices)?);
    }
    if wanted("findings") {
        count(put_rows(sink, "findings", &advise::advise(profile, &Thresholds::default()).findings)?);
    }
    if wanted("memory") {
        let m = memory::memory_full(profile);
        count(put_rows(sink, "memory", &memory_points(&m))?);
    }
    if wanted("events") && profile.hosts.iter().any(|s| s.event_count() > 0) {
        count(sink.table("events", &events::columns(), &mut |out| events::write_events(&profile.hosts, &st, out))?);
    }
    Ok(rows)
}

/// A hive partition folder, `key=value`, the value percent-encoded as Hive and Spark
/// do (a run's name holds `/`).
pub fn partition(key: &str, value: &str) -> String {
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

/// A Hive partition value decoded (`%2F` → `/`); a `%` not followed by two hex digits
/// stays as it is.
pub fn partition_value(s: &str) -> String {
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
    use super::{partition, partition_value};

    #[test]
    fn partitions_are_percent_encoded_and_decoded() {
        assert_eq!(partition("run", "plugins/profile/2026_11_01"), "run=plugins%2Fprofile%2F2026_11_01");
        assert_eq!(partition("host", "vm-1.a b"), "host=vm-1.a%20b");
        assert_eq!(partition_value("plugins%2Fprofile%2F2026_11_01"), "plugins/profile/2026_11_01");
        assert_eq!(partition_value("vm-1.a%20b"), "vm-1.a b");
        assert_eq!(partition_value("100%"), "100%");
        assert_eq!(partition_value("%zz%4"), "%zz%4");
    }
}
