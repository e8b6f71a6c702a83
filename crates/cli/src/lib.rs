//! The `stepscope` command as a library: parse arguments, call the library crates,
//! print. `src/main.rs` and the Python package's `stepscope` command both call
//! [`main_from`], so they behave the same.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;

/// `println!` for text meant for a terminal: the characters that steer a terminal
/// (escape sequences from a host name, an op name) are printed as escapes
/// ([`human::clean`]).
macro_rules! outln {
    () => { println!() };
    ($($arg:tt)*) => { println!("{}", crate::human::clean(&format!($($arg)*))) };
}

/// `print!` with [`outln!`]'s escaping.
macro_rules! out {
    ($($arg:tt)*) => { print!("{}", crate::human::clean(&format!($($arg)*))) };
}

/// [`outln!`] for a line of prose (a headline, a note): wrapped to the width tables
/// are cut to ([`table::width`]: the terminal's or `$COLUMNS`; whole in a file or a
/// pipe), its later lines indented two more than its first.
macro_rules! proseln {
    ($($arg:tt)*) => {
        print!("{}", crate::human::clean(&crate::human::wrap_line(&format!($($arg)*), crate::table::width())))
    };
}

/// `eprintln!` with [`outln!`]'s escaping.
macro_rules! errln {
    ($($arg:tt)*) => { eprintln!("{}", crate::human::clean(&format!($($arg)*))) };
}

mod args;
mod cmd;
mod examples;
mod human;
mod load;
mod notes;
mod opts;
mod output;
mod ray;
mod remote;
mod table;

/// Like other Unix tools, end quietly when the reader of our output goes away
/// (`stepscope ops … | head`): `println!` panics on a closed stdout, and that panic
/// becomes a silent exit 0. Called by the binary's `main` and by the Python package's
/// `stepscope` command. (SIGPIPE itself stays ignored, so a peer that closes a
/// socket during `capture` is an error we report, not a signal that kills us.)
pub fn quiet_on_closed_stdout() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let msg = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or("");
        if let Some(why) = msg.strip_prefix("failed printing to stdout: ") {
            if why.contains("Broken pipe") {
                std::process::exit(0);
            }
            // Standard output cannot be written (a full disk, a closed terminal): one
            // line, as for any other error.
            let fix = if why.contains("os error 28") { full_disk_fix() } else { "check where the output goes" };
            eprintln!("stepscope: cannot write the output: {why} — {fix}");
            std::process::exit(2);
        }
        default(info);
    }));
}

/// Runs the command line `args` (the first item is the program name) and returns the
/// exit code: 0 on success, 1 where a command reports a failed check, 2 on errors,
/// which are printed as one line `stepscope: …` on stderr.
pub fn main_from<I, T>(args: I) -> ExitCode
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    ExitCode::from(run_args(args))
}

/// The line for profile files that shrank while this command read them (reads past
/// their new end gave zeros, so what it printed cannot be trusted).
fn changed_while_read() -> Option<String> {
    let files = stepscope_xspace::mapguard::changed_files();
    let first = files.first()?;
    let more = if files.len() > 1 { format!(" (and {} more)", files.len() - 1) } else { String::new() };
    Some(format!(
        "{}{more} changed while it was read — nothing above can be trusted; run again once the file is written whole \
         (a copy over it, such as scp or cp, was still under way)",
        first.display()
    ))
}

/// [`main_from`] with the exit code as a number (for callers that cannot use
/// `ExitCode`, such as the Python package's `stepscope` command).
pub fn run_args<I, T>(args: I) -> u8
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let args: Vec<OsString> = args.into_iter().map(Into::into).collect();
    let cli = match args::Cli::try_parse_from(&args) {
        Ok(cli) => cli,
        // --help and --version print to stdout and succeed.
        Err(err) if !err.use_stderr() => {
            let _ = err.print();
            return 0;
        }
        // Usage errors: one line, and exit 2.
        Err(err) => {
            errln!("stepscope: {}", usage_error(&err, &args));
            return 2;
        }
    };
    // Reads confined to folders, where `stepscope mcp` (or a user) asks for it.
    if let Some(roots) = std::env::var_os(stepscope_xspace::files::ROOTS_VAR).filter(|r| !r.is_empty()) {
        stepscope_xspace::files::confine(&std::env::split_paths(&roots).collect::<Vec<_>>());
    }
    if let Some(address) = &cli.ray {
        return ray::forward(address, &args);
    }
    // The server answers for a changed file request by request; a command answers once.
    let serving = matches!(cli.command, args::Command::Serve(_));
    let result = run(cli);
    if let Some(line) = (!serving).then(changed_while_read).flatten() {
        errln!("stepscope: {line}");
        return 2;
    }
    match result {
        // ExitCode is opaque but comparable: find the number it stands for.
        Ok(code) => (0..=u8::MAX).find(|&n| ExitCode::from(n) == code).unwrap_or(1),
        // The reader of our output went away (`stepscope export … -o - | head`): end
        // quietly, as Unix tools do.
        Err(err) if broken_pipe(&err) => 0,
        Err(err) => {
            let mut line = one_line(&format!("{err:#}"));
            if disk_full(&err) {
                line = format!("{line} — {}", full_disk_fix());
            }
            errln!("stepscope: {line}");
            2
        }
    }
}

/// True when `err` comes from a write to a full disk.
fn disk_full(err: &anyhow::Error) -> bool {
    err.chain().any(|e| {
        e.downcast_ref::<std::io::Error>().is_some_and(|e| e.kind() == std::io::ErrorKind::StorageFull)
            || e.to_string().contains("(os error 28)")
    })
}

/// What to do about a full disk.
fn full_disk_fix() -> &'static str {
    "the disk is full: free space on it, or write to another disk"
}

/// True when `err` comes from writing to a pipe whose reader is gone.
fn broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|e| e.downcast_ref::<std::io::Error>().is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe))
}

/// A message on one line: its lines joined, runs of blanks made one space.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A clap usage error as one line: clap's message without its usage block, and where
/// to read the usage.
fn usage_error(err: &clap::Error, args: &[OsString]) -> String {
    let text = err.render().to_string();
    let message = text.split("\n\nUsage:").next().unwrap_or(&text);
    let message = message.split("\n\nFor more information").next().unwrap_or(message);
    // clap's tip to pass an unknown flag as a value (`use '-- --csv'`) misleads: the
    // command does not take that flag.
    let message = message.split("\n\n  tip: to pass").next().unwrap_or(message);
    let mut message = one_line(message.trim_start_matches("error:"));
    let command = args.iter().skip(1).filter_map(|a| a.to_str()).find(|a| {
        use clap::CommandFactory;
        args::Cli::command().find_subcommand(a).is_some()
    });
    if !message.contains("tip:") {
        if let Some(flag) = similar_flag(err, command) {
            message.push_str(&format!(" tip: a similar argument exists: '--{flag}'"));
        }
    }
    match command {
        Some(c) => format!("{message} — see `stepscope {c} --help`"),
        None => format!("{message} — see `stepscope --help`"),
    }
}

/// For an unknown `--flag` clap found nothing like (it misses swapped letters:
/// `--tpo`), the command's long flag one edit away (two for longer names), where
/// there is exactly one nearest.
fn similar_flag(err: &clap::Error, command: Option<&str>) -> Option<String> {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    use clap::CommandFactory;
    if err.kind() != ErrorKind::UnknownArgument {
        return None;
    }
    let Some(ContextValue::String(arg)) = err.get(ContextKind::InvalidArg) else { return None };
    let given = arg.strip_prefix("--")?.split('=').next()?;
    let cli = args::Cli::command();
    let cmd = command.and_then(|c| cli.find_subcommand(c)).unwrap_or(&cli);
    let limit = if given.chars().count() <= 4 { 1 } else { 2 };
    let mut near: Vec<(usize, &str)> = (cmd.get_arguments().filter_map(|a| a.get_long()))
        .map(|l| (edits(given, l), l))
        .filter(|&(d, _)| d <= limit)
        .collect();
    near.sort_unstable();
    match near.as_slice() {
        [(d, l), rest @ ..] if rest.first().is_none_or(|r| r.0 > *d) => Some(l.to_string()),
        _ => None,
    }
}

/// Edits from `a` to `b`: insertions, deletions, substitutions and swaps of two
/// neighbouring letters, one each (optimal string alignment).
fn edits(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            d[i][j] = (d[i - 1][j] + 1).min(d[i][j - 1] + 1).min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                d[i][j] = d[i][j].min(d[i - 2][j - 2] + 1);
            }
        }
    }
    d[a.len()][b.len()]
}

/// Loads PATH as the commands do (`--run NAME`, `--host HOST`, the same errors),
/// for the Python package's `stepscope.load`.
pub fn load_profile(
    path: PathBuf,
    run: Option<String>,
    host: Option<String>,
) -> anyhow::Result<stepscope_analysis::Profile> {
    Ok(load_run(path, run, host)?.0)
}

/// Like [`load_profile`], also returning the run found (its folder and the files
/// beside it, such as a device-memory pprof).
pub fn load_run(
    path: PathBuf,
    run: Option<String>,
    host: Option<String>,
) -> anyhow::Result<(stepscope_analysis::Profile, stepscope_xspace::discover::Run)> {
    load::profile_and_run(&opts::Input { path, run }, &opts::Select { host, top: None })
}

fn run(cli: args::Cli) -> anyhow::Result<ExitCode> {
    table::set_wide(cli.wide);
    remote::set_cache(cli.cache);
    match cli.command {
        args::Command::Ls(a) => cmd::ls::run(&a),
        args::Command::Info(a) => cmd::info::run(&a),
        args::Command::Summary(a) => cmd::summary::run(&a),
        args::Command::Steps(a) => cmd::steps::run(&a),
        args::Command::Ops(a) => cmd::ops::run(&a),
        args::Command::Scopes(a) => cmd::scopes::run(&a),
        args::Command::Roofline(a) => cmd::roofline::run(&a),
        args::Command::Kernels(a) => cmd::kernels::run(&a),
        args::Command::Memory(a) => cmd::memory::run(&a),
        args::Command::Buffers(a) => cmd::buffers::run(&a),
        args::Command::Collectives(a) => cmd::collectives::run(&a),
        args::Command::Compile(a) => cmd::compile::run(&a),
        args::Command::Devices(a) => cmd::devices::run(&a),
        args::Command::Hlo(a) => cmd::hlo::run(&a),
        args::Command::Advise(a) => cmd::advise::run(&a),
        args::Command::Part(a) => cmd::part::run(&a),
        args::Command::Whatif(a) => cmd::whatif::run(&a),
        args::Command::Diff(a) => cmd::diff::run(&a),
        args::Command::Compare(a) => cmd::compare::run(&a),
        args::Command::History(a) => cmd::history::run(&a),
        args::Command::Tables(a) => cmd::tables::run(&a),
        args::Command::Sql(a) => cmd::sql::run(&a),
        args::Command::Check(a) => cmd::check::run(&a),
        args::Command::Serve(a) => cmd::serve::run(&a),
        args::Command::Capture(a) => cmd::capture::run(&a),
        args::Command::Top(a) => cmd::top::run(&a),
        args::Command::Export(a) => cmd::export::run(&a),
        args::Command::Mcp(a) => cmd::mcp::run(&a),
    }
}
