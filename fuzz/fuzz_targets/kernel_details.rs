//! parse_kernel_details on arbitrary UTF-8 text.
#![no_main]

use libfuzzer_sys::fuzz_target;
use stepscope_analysis::kernels::{parse_kernel_details, uses_tensor_cores};

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let d = parse_kernel_details(text);
        let _ = d.shared_mem_bytes();
        let _ = uses_tensor_cores(text);
    }
});
