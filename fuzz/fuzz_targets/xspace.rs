//! decode_xspace on arbitrary bytes, then every analysis on whatever decodes.
#![no_main]

use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use stepscope_xspace::{xplane::decode_xspace, Progress, Source};

#[path = "common.rs"]
mod common;

fuzz_target!(|data: &[u8]| {
    let progress = Progress::default();
    if let Ok(space) = decode_xspace(Arc::new(Source::Owned(data.to_vec())), "fuzz", &progress) {
        // HLO protos carried in the metadata plane are decoded lazily: touch them all.
        for e in stepscope_xspace::hlo::hlo_modules(&space).entries() {
            let _ = e.module();
        }
        common::analyse(space);
    }
});
