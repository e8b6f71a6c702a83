//! Read-only SQL over stepscope's tables (`stepscope sql`, the web UI's query page,
//! the MCP `sql` tool).
//!
//! A [`Db`] is a private SQLite database in a temporary file (SQLite's own: deleted when
//! the database is dropped, pages beyond its cache spill there, so memory stays bounded
//! whatever the tables' size). It is filled with the tables a query names
//! ([`referenced`]) — from profiles, host by host, through
//! [`stepscope_export::tables::host_tables`] ([`Db::add_run`]), or from the Parquet files
//! `stepscope tables` wrote ([`Db::add_tables_dir`]) — with `run` and `host` columns
//! where a table has none of its own, then queried: one statement, a query, nothing that
//! writes, within a time limit ([`Db::query`]).

mod load;
mod out;
mod parquet_check;
mod parquet_in;
mod query;

pub use load::PutHost;
pub use out::{CsvResults, JsonResults, SCHEMA};
pub use parquet_in::is_tables_dir;
pub use query::{columns_named, referenced, Limits, Results};

use std::collections::HashMap;

use rusqlite::Connection;

/// SQLite's own memory, at most (its page caches and sorts; what is larger spills to
/// its temporary files): the process-wide hard limit, set with the first database.
pub const MAX_HEAP_BYTES: i64 = 1 << 30;

/// One database's page cache, KiB.
const CACHE_KIB: i64 = 64 * 1024;

/// A private database of tables to query.
pub struct Db {
    conn: Connection,
    /// Each table made so far, with every column its rows brought, in order (what the
    /// errors list).
    columns: HashMap<String, Vec<String>>,
    /// Each table made so far, with the columns it holds (of `columns`, those the query
    /// may read).
    made: HashMap<String, Vec<String>>,
    /// The columns the query may read, lower-cased ([`columns_named`]); `None`: every
    /// column.
    only: Option<Vec<String>>,
}

impl Db {
    /// An empty database in a private temporary file.
    pub fn new() -> Result<Db, String> {
        static LIMIT: std::sync::Once = std::sync::Once::new();
        // SAFETY: sets SQLite's process-wide heap limit; safe to call at any time.
        LIMIT.call_once(|| unsafe {
            rusqlite::ffi::sqlite3_hard_heap_limit64(MAX_HEAP_BYTES);
        });
        // "" is SQLite's private temporary on-disk database, deleted when closed.
        let conn = Connection::open("").map_err(|e| {
            format!("cannot make a temporary database: {e} — check that the temporary folder (TMPDIR) is writable")
        })?;
        conn.execute_batch(&format!(
            "PRAGMA page_size = 65536; PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF; PRAGMA cache_size = -{CACHE_KIB};"
        ))
        .map_err(|e| {
            format!("cannot set up the temporary database: {e} — check that the temporary folder (TMPDIR) is writable")
        })?;
        Ok(Db { conn, columns: HashMap::new(), made: HashMap::new(), only: None })
    }

    /// An empty database for `sql`: its tables will hold only the columns `sql` may
    /// read ([`columns_named`]), so that a query of a few columns of a large table
    /// inserts those few.
    pub fn for_query(sql: &str) -> Result<Db, String> {
        let mut db = Db::new()?;
        db.only = columns_named(sql);
        Ok(db)
    }

    /// The tables made so far, each with every column its rows brought, by name.
    pub fn tables(&self) -> Vec<(&str, &[String])> {
        let mut t: Vec<(&str, &[String])> = self.columns.iter().map(|(k, v)| (k.as_str(), v.as_slice())).collect();
        t.sort();
        t
    }
}
