//! A cold `stepscope serve` hit by a page's first requests all at once: every analysis
//! route of a run requested together, before anything about the run was computed,
//! on every fixture, with rayon pools of one thread, two threads and the default.
//! Each request must answer within 30 s (the shared work of a run is computed once,
//! outside the pool: see crates/model/src/profile.rs).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::server::serve_with;
use crate::util::root;

/// Routes a page asks for at once (the overview asks for the first three).
const ROUTES: &[&str] = &[
    "summary",
    "steps",
    "advise",
    "devices",
    "ops",
    "ops?by=scope",
    "ops?by=module",
    "ops?by=line",
    "scopes",
    "roofline",
    "kernels",
    "memory",
    "memory/buffers",
    "collectives",
    "compile",
    "timeline/tracks",
    "timeline/search?q=fusion",
    "timeline/tiles?tracks=0,1&start_ps=0&end_ps=1000000000000&px=1000",
    "runs",
];

/// The longest any request may take.
const LIMIT: Duration = Duration::from_secs(30);

/// The fixture runs (each a log directory holding one run).
fn fixture_dirs() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(root().join("tests/fixtures"))
        .expect("read tests/fixtures")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.join("plugins").is_dir())
        .collect();
    dirs.sort();
    assert!(dirs.len() >= 10, "expected the committed fixture runs, found {dirs:?}");
    dirs
}

/// GET `/TOKEN/api/ROUTE`: its status, or why none came within [`LIMIT`].
fn get(port: u16, token: &str, route: &str) -> Result<u16, String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).map_err(|e| format!("connect: {e}"))?;
    s.set_read_timeout(Some(LIMIT)).map_err(|e| e.to_string())?;
    write!(s, "GET /{token}/api/{route} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n")
        .map_err(|e| format!("send: {e}"))?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).map_err(|e| format!("no answer: {e}"))?;
    let head = String::from_utf8_lossy(&buf[..buf.len().min(64)]).into_owned();
    head.split(' ').nth(1).and_then(|c| c.parse().ok()).ok_or_else(|| format!("no status line in {head:?}"))
}

/// Two fresh servers per fixture, each asked every route at once.
fn cold_servers_answer_every_route_at_once(threads: Option<&str>) {
    let env: Vec<(&str, &str)> = threads.map(|t| ("RAYON_NUM_THREADS", t)).into_iter().collect();
    for dir in fixture_dirs() {
        for round in 0..2 {
            let s = serve_with(&dir, &[], &env);
            let (port, token) = (s.port, s.token.clone());
            let started = Instant::now();
            let asked: Vec<_> = ROUTES
                .iter()
                .map(|&route| {
                    let token = token.clone();
                    (route, std::thread::spawn(move || get(port, &token, route)))
                })
                .collect();
            for (route, h) in asked {
                let what = format!("{} round {round}, RAYON_NUM_THREADS={threads:?}: api/{route}", dir.display());
                match h.join().expect("request thread") {
                    Ok(status) => {
                        assert!(status < 500, "{what} answered {status}");
                        if ["summary", "steps", "advise", "devices", "ops"].contains(&route) {
                            assert_eq!(status, 200, "{what}");
                        }
                    }
                    Err(e) => panic!("{what}: {e} after {:?}", started.elapsed()),
                }
            }
        }
    }
}

#[test]
fn cold_servers_answer_concurrent_first_requests_with_one_pool_thread() {
    cold_servers_answer_every_route_at_once(Some("1"));
}

#[test]
fn cold_servers_answer_concurrent_first_requests_with_two_pool_threads() {
    cold_servers_answer_every_route_at_once(Some("2"));
}

#[test]
fn cold_servers_answer_concurrent_first_requests_with_the_default_pool() {
    cold_servers_answer_every_route_at_once(None);
}
