//! The `stepscope` binary: everything lives in the library ([`stepscope::main_from`]).

fn main() -> std::process::ExitCode {
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
