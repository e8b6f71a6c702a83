//! The `stepscope` command as a library: parse arguments, call the library crates,
//! print. `src/main.rs` and the Python package's `stepscope` command both call
//! [`main_from`], so they behave the same.

use std::ffi::OsString;
use std::process::ExitCode;

use clap::Parser;

mod args;
mod cmd;
mod human;
mod load;
mod table;

/// Runs the command line `args` (the first item is the program name) and returns the
/// exit code: 0 on success, 1 where a command reports a failed check, 2 on errors,
/// which are printed as one line `stepscope: …` on stderr.
pub fn main_from<I, T>(args: I) -> ExitCode
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let cli = match args::Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(err) => {
            // --help and --version print to stdout and succeed; usage errors exit 2.
            let _ = err.print();
            return if err.use_stderr() { ExitCode::from(2) } else { ExitCode::SUCCESS };
        }
    };
    match run(cli) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("stepscope: {err:#}");
            ExitCode::from(2)
        }
    }
}

fn run(cli: args::Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        args::Command::Ls(a) => cmd::ls::run(&a),
        args::Command::Info(a) => cmd::info::run(&a),
        args::Command::Summary(a) => cmd::summary::run(&a),
        args::Command::Steps(a) => cmd::steps::run(&a),
        args::Command::Ops(a) => cmd::ops::run(&a),
        args::Command::Kernels(a) => cmd::kernels::run(&a),
        args::Command::Export(a) => cmd::export::run(&a),
    }
}
