//! The `stepscope` binary: everything lives in the library ([`stepscope::main_from`]).

fn main() -> std::process::ExitCode {
    large_allocations_mapped();
    stepscope::quiet_on_closed_stdout();
    stepscope::main_from(std::env::args_os())
}

/// Buffers of 256 KiB and more (columns, op records, intervals) come straight from
/// mmap, so memory an analysis frees goes back to the system at once and peak RSS
/// follows what is live (glibc otherwise raises this threshold after the first large
/// frees, and keeps what later buffers free in its heaps). Shrinking or growing such a
/// buffer is an mremap, not a copy. Measured: summary of a 111 MB TPU profile peaks
/// at 161 MB instead of 175 MB, in the same time.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn large_allocations_mapped() {
    // SAFETY: mallopt only tunes glibc's allocator; it is called before any other
    // thread exists.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 256 * 1024);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn large_allocations_mapped() {}
