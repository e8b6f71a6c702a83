//! The `stepscope` binary: everything lives in the library ([`stepscope::main_from`]).

fn main() -> std::process::ExitCode {
    large_allocations_mapped();
    quiet_on_closed_stdout();
    stepscope::main_from(std::env::args_os())
}

/// Like other Unix tools, end quietly when the reader of our output goes away
/// (`stepscope ops … | head`): `println!` panics on a closed stdout, and that panic
/// becomes a silent exit 0. (SIGPIPE itself stays ignored, so a peer that closes a
/// socket during `capture` is an error we report, not a signal that kills us.)
fn quiet_on_closed_stdout() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let msg = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or("");
        if msg.starts_with("failed printing to stdout") && msg.contains("Broken pipe") {
            std::process::exit(0);
        }
        default(info);
    }));
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
