//! `stepscope serve`: a read-only local web UI over a log directory, run or file.
//!
//! Every route lives under `/<token>/`, a 128-bit random path segment printed once at
//! start; any other request gets a bare 404. Pages are the embedded `web/` front end
//! (no file is ever read from the URL); the JSON API under `<token>/api/` names runs
//! only by their exact discovered name ([`root`]), loads each run once into a small
//! cache ([`cache`]) and answers each analysis from a table of routes ([`api`]);
//! `api/export` streams a Perfetto or Chrome trace as a download ([`download`]).

mod api;
mod assets;
mod cache;
mod download;
mod gate;
mod http;
mod response;
pub mod root;
mod token;

use std::net::{IpAddr, SocketAddr, TcpListener};
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context as _;

/// What to serve and where.
#[derive(Clone, Debug)]
pub struct Options {
    /// A log directory, a run folder or a profile file.
    pub root: PathBuf,
    /// Address to bind (127.0.0.1 unless asked otherwise).
    pub host: IpAddr,
    /// Port to bind; 0 picks a free one.
    pub port: u16,
    /// The devices' peaks, over the profile's and the data sheets'.
    pub peaks: stepscope_analysis::peaks::UserPeaks,
}

/// Shared state of a running server.
pub(crate) struct App {
    pub token: String,
    pub root: root::Root,
    pub cache: cache::Cache,
    /// Exports written at once (each holds a temporary file and a blocking thread).
    pub exports: tokio::sync::Semaphore,
    /// `api/sql` queries run at once (each on a thread of its own, at a lower priority).
    pub queries: tokio::sync::Semaphore,
    /// Connections still to show the token.
    pub pending: gate::Pending,
    /// Host names requests may name besides IP addresses and `localhost` (this
    /// machine's name, when listening beyond loopback).
    pub host_names: Vec<String>,
}

/// A bound server, ready to run.
pub struct Server {
    listener: TcpListener,
    app: Arc<App>,
    addr: SocketAddr,
}

impl Server {
    /// Checks the root, makes the token and binds the port.
    pub fn bind(opts: &Options) -> anyhow::Result<Server> {
        let root = root::Root::new(&opts.root)?;
        let listener = TcpListener::bind((opts.host, opts.port)).map_err(|e| {
            let fix = if e.kind() == std::io::ErrorKind::AddrInUse {
                "pass another --port, or --port 0 for a free one"
            } else {
                "check --host and --port"
            };
            anyhow::anyhow!("cannot listen on {}:{}: {e} — {fix}", opts.host, opts.port)
        })?;
        let addr = listener.local_addr().context("reading the bound address")?;
        let token = token::new_token().map_err(|e| anyhow::anyhow!("{e}"))?;
        let app = Arc::new(App {
            token,
            root,
            cache: cache::Cache::new(cache::DEFAULT_RUNS, opts.peaks),
            exports: tokio::sync::Semaphore::new(download::MAX_EXPORTS),
            queries: tokio::sync::Semaphore::new(api::MAX_QUERIES),
            pending: gate::Pending::default(),
            host_names: if opts.host.is_loopback() { Vec::new() } else { machine_names() },
        });
        Ok(Server { listener, app, addr })
    }

    /// The address bound.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The UI's address: `http://HOST:PORT/TOKEN/`.
    /// The URL to open on this machine: where the server listens on every address
    /// (`0.0.0.0`, `::`), its loopback address (a browser cannot open `0.0.0.0`).
    pub fn url(&self) -> String {
        let host = match self.addr.ip() {
            IpAddr::V4(ip) if ip.is_unspecified() => std::net::Ipv4Addr::LOCALHOST.to_string(),
            IpAddr::V6(ip) if ip.is_unspecified() => format!("[{}]", std::net::Ipv6Addr::LOCALHOST),
            IpAddr::V6(ip) => format!("[{ip}]"),
            ip => ip.to_string(),
        };
        format!("http://{host}:{}/{}/", self.addr.port(), self.app.token)
    }

    /// Serves until the process ends.
    pub fn run(self) -> anyhow::Result<()> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .max_blocking_threads(8)
            .enable_io()
            .enable_time()
            .build()
            .context("starting the server runtime")?;
        rt.block_on(http::serve(self.listener, self.app))
    }
}

/// This machine's names, as a browser reaching it over the network may send them in
/// `Host` (`node1`, `node1.cluster.local`).
fn machine_names() -> Vec<String> {
    let read = |p: &str| std::fs::read_to_string(p).ok().map(|s| s.trim().to_ascii_lowercase());
    let mut names: Vec<String> = [read("/proc/sys/kernel/hostname"), std::env::var("HOSTNAME").ok()]
        .into_iter()
        .flatten()
        .filter(|n| !n.is_empty())
        .collect();
    if let (Some(host), Some(domain)) = (read("/proc/sys/kernel/hostname"), read("/proc/sys/kernel/domainname")) {
        if !domain.is_empty() && domain != "(none)" {
            names.push(format!("{host}.{domain}"));
        }
    }
    names.sort();
    names.dedup();
    names
}
