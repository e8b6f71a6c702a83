//! A Parquet table file (as `stepscope tables` writes and `stepscope sql` reads) from
//! arbitrary bytes: the size checks, then the Parquet reader, then SQLite. A panic
//! anywhere is a finding (the CLI would catch it, but print it).
#![no_main]

use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use stepscope_sql::Db;
use stepscope_xspace::Source;

fuzz_target!(|data: &[u8]| {
    let Ok(mut db) = Db::new() else { return };
    let _ = db.add_parquet_bytes("ops", Arc::new(Source::Owned(data.to_vec())), Some("run"), Some("host"));
});
