//! parse_trace_json on arbitrary bytes (plain or gzip), then every analysis.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use stepscope_xspace::trace_json::parse_trace_json;

#[path = "common.rs"]
mod common;

fuzz_target!(|data: &[u8]| {
    if let Ok(space) = parse_trace_json(data, "fuzz", Path::new("fuzz.trace.json")) {
        common::analyse(space);
    }
});
