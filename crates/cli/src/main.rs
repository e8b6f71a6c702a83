//! The `stepscope` binary: everything lives in the library ([`stepscope::main_from`]).

fn main() -> std::process::ExitCode {
    stepscope::main_from(std::env::args_os())
}
