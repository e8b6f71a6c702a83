//! The `stepscope` binary: everything lives in the library ([`stepscope::main_from`]).

fn main() -> std::process::ExitCode {
    // Like other Unix tools, end quietly when the reader of our output goes away
    // (`stepscope ops … | head`) instead of failing to print.
    #[cfg(unix)]
    // SAFETY: setting a signal disposition to its default before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    stepscope::main_from(std::env::args_os())
}
