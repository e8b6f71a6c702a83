//! `stepscope serve`: the web UI.

use std::io::Write as _;
use std::net::IpAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

/// Arguments of `stepscope serve`.
#[derive(Args, Debug)]
#[command(after_help = EXAMPLES)]
pub struct ServeArgs {
    /// A log directory (any depth), a run folder, or a profile file (default: the current folder).
    #[arg(default_value = ".")]
    pub path: PathBuf,
    /// Port to listen on; 0 picks a free one.
    #[arg(long, value_name = "N", default_value_t = 6007)]
    pub port: u16,
    /// Address to listen on (`--host` is an older name for it). Anything but a loopback
    /// address exposes the profiles to the network.
    #[arg(long = "bind", alias = "host", value_name = "ADDR", default_value = "127.0.0.1")]
    pub bind: IpAddr,
    /// Don't open a browser.
    #[arg(long)]
    pub no_open: bool,
    #[command(flatten)]
    pub peaks: crate::opts::PeakArgs,
}

const EXAMPLES: &str = "\
EXAMPLES:
    stepscope serve /tmp/logdir
        serve every run under a log directory, open the browser
    stepscope serve run.xplane.pb --port 0
        one file, on a free port
    stepscope serve /tmp/logdir --no-open
        on a remote machine; then on your laptop:
        ssh -L 6007:127.0.0.1:6007 REMOTE and open the printed URL
    stepscope serve /tmp/logdir --bind 0.0.0.0 --no-open
        reachable from other machines (prints the URL to use)";

pub fn run(args: &ServeArgs) -> anyhow::Result<ExitCode> {
    let opts = stepscope_server::Options {
        root: crate::remote::local(&args.path)?,
        host: args.bind,
        port: args.port,
        peaks: args.peaks.user(),
    };
    let server = stepscope_server::Server::bind(&opts)?;
    let url = server.url();
    let port = server.local_addr().port();
    {
        let mut out = std::io::stdout().lock();
        writeln!(out, "stepscope: serving {url}")?;
        out.flush()?;
    }
    if !args.bind.is_loopback() {
        errln!(
            "stepscope: warning: listening on {} makes these profiles readable by anyone who can reach this \
             machine and learns the URL; prefer the default 127.0.0.1 and a tunnel from your own machine:",
            args.bind
        );
        errln!("    ssh -L {port}:127.0.0.1:{port} {}", hostname());
        if args.bind.is_unspecified() {
            // The URL printed is this machine's own (a browser cannot open 0.0.0.0).
            let at = url.split_once("://").and_then(|(_, rest)| rest.split_once('/')).map_or("", |(_, path)| path);
            errln!("stepscope: from other machines: http://{}:{port}/{at}", hostname());
        }
    }
    if !args.no_open {
        open_browser(&url);
    }
    server.run()?;
    Ok(ExitCode::SUCCESS)
}

/// This machine's name, for the `ssh -L` hint.
fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "THIS_HOST".to_string())
}

/// Opens `url` in the desktop's browser; failing to is not an error.
fn open_browser(url: &str) {
    let program = if cfg!(target_os = "macos") { "open" } else { "xdg-open" };
    let child = std::process::Command::new(program)
        .arg(url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
    if let Ok(mut child) = child {
        std::thread::spawn(move || child.wait());
    }
}
