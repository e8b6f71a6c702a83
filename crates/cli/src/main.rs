//! The `stepscope` command: parse arguments, call the library crates, print.

use std::process::ExitCode;

use clap::Parser;

mod args;
mod cmd;
mod human;
mod load;
mod table;

fn main() -> ExitCode {
    match run() {
        Ok(code) => code,
        Err(err) => {
            eprintln!("stepscope: {err:#}");
            ExitCode::from(2)
        }
    }
}

fn run() -> anyhow::Result<ExitCode> {
    let cli = args::Cli::parse();
    match cli.command {
        args::Command::Ls(a) => cmd::ls::run(&a),
        args::Command::Info(a) => cmd::info::run(&a),
        args::Command::Summary(a) => cmd::summary::run(&a),
        args::Command::Steps(a) => cmd::steps::run(&a),
        args::Command::Ops(a) => cmd::ops::run(&a),
        args::Command::Kernels(a) => cmd::kernels::run(&a),
    }
}
