//! `stepscope serve` under load and against misbehaving clients: many concurrent tile
//! requests, slow and stalled clients, oversized requests. Plain std TCP clients.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::server::{enc, request, serve, Reply, Served, CPU_RUN};
use crate::util::fixture;

/// The server's header-read timeout (crates/server/src/http.rs, HEADER_READ_TIMEOUT).
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// Resident memory of a process, from /proc/PID/status.
fn rss_bytes(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc/PID/status");
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).expect("VmRSS line");
    let kb: u64 = line.split_whitespace().nth(1).and_then(|v| v.parse().ok()).expect("VmRSS kB");
    kb * 1024
}

/// Sends raw bytes and reads the answer's status line (None when the server closed
/// the connection without answering).
fn raw(port: u16, bytes: &[u8]) -> Option<u16> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(30))).expect("timeout");
    // The server may answer and close before reading everything: ignore write errors.
    let _ = s.write_all(bytes);
    let mut buf = Vec::new();
    let _ = s.read_to_end(&mut buf);
    let head = String::from_utf8_lossy(&buf);
    head.split(' ').nth(1).and_then(|c| c.parse().ok())
}

/// A quick request that must answer 200 within a second.
fn answers_quickly(s: &Served, what: &str) {
    let t = Instant::now();
    let r = s.get("api/runs");
    let took = t.elapsed();
    assert_eq!(r.status, 200, "{what}: {}", r.text());
    assert!(took < Duration::from_secs(1), "{what}: api/runs took {took:?}");
}

#[test]
fn two_hundred_concurrent_tile_requests_all_answer_with_bounded_memory() {
    let s = serve(&fixture("cpu-transformer"), &[]);
    let pid = s.child.id();
    let idle_rss = rss_bytes(pid);
    let run = enc(CPU_RUN);
    let tracks = s.api(&format!("timeline/tracks?run={run}"));
    let (t0, t1) = (tracks["start_ps"].as_i64().unwrap(), tracks["end_ps"].as_i64().unwrap() + 1);
    let ids: Vec<(u64, u64)> = tracks["tracks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t["id"].as_u64().unwrap(), t["events"].as_u64().unwrap()))
        .collect();
    assert!(ids.len() >= 2, "{} tracks", ids.len());
    let tile_path = |id: u64| format!("timeline/tile?run={run}&track={id}&start_ps={t0}&end_ps={t1}&px=2000");
    // The answers one at a time, to compare the concurrent ones with.
    let expected: Vec<Value> = ids.iter().map(|&(id, _)| s.api(&tile_path(id))).collect();
    for (e, &(id, events)) in expected.iter().zip(&ids) {
        let counted: u64 = e["box_count"].as_array().unwrap().iter().map(|c| c.as_u64().unwrap()).sum();
        assert_eq!(counted, events, "track {id}: the tile's boxes count every event");
    }

    let peak = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watcher = {
        let (peak, done) = (peak.clone(), done.clone());
        std::thread::spawn(move || {
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                peak.fetch_max(rss_bytes(pid), std::sync::atomic::Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(10));
            }
        })
    };
    let start = std::sync::Arc::new(std::sync::Barrier::new(200));
    let clients: Vec<_> = (0..200)
        .map(|i| {
            let k = i % ids.len();
            let (port, path, start) = (s.port, format!("/{}/api/{}", s.token, tile_path(ids[k].0)), start.clone());
            std::thread::spawn(move || {
                start.wait();
                (k, request(port, "GET", &path))
            })
        })
        .collect();
    let replies: Vec<(usize, Reply)> = clients.into_iter().map(|c| c.join().expect("client thread")).collect();
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    watcher.join().unwrap();
    for (k, r) in &replies {
        assert_eq!(r.status, 200, "{}", r.text());
        assert_eq!(r.header("content-type"), Some("application/json"));
        assert_eq!(&r.json(), &expected[*k], "a concurrent answer differs from the sequential one");
    }
    let peak = peak.load(std::sync::atomic::Ordering::Relaxed).max(rss_bytes(pid));
    let bound = 10 * idle_rss + 200 * 1024 * 1024;
    eprintln!("serve RSS: idle {} MB, peak under 200 concurrent tiles {} MB", idle_rss >> 20, peak >> 20);
    assert!(peak < bound, "RSS peaked at {peak} bytes (idle {idle_rss}, bound {bound})");
}

#[test]
fn slow_and_stalled_clients_do_not_block_others_and_stalled_ones_are_dropped() {
    let s = serve(&fixture("cpu-transformer"), &[]);
    answers_quickly(&s, "before");
    let port = s.port;

    // A client sending a whole request one byte per 100 ms still gets its answer.
    let slow = {
        let req = format!("GET /{}/api/runs HTTP/1.0\r\n\r\n", s.token);
        std::thread::spawn(move || {
            let mut c = TcpStream::connect(("127.0.0.1", port)).expect("connect");
            c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
            for b in req.bytes() {
                c.write_all(&[b]).expect("send a byte");
                std::thread::sleep(Duration::from_millis(100));
            }
            let mut buf = Vec::new();
            c.read_to_end(&mut buf).expect("read");
            String::from_utf8_lossy(&buf).into_owned()
        })
    };
    // A client that never finishes its headers is dropped after the header timeout.
    let stalled = {
        let head = format!("GET /{}/api/runs HTTP/1.1\r\nHost: 127.0.0.1\r\n", s.token);
        std::thread::spawn(move || {
            let mut c = TcpStream::connect(("127.0.0.1", port)).expect("connect");
            c.set_read_timeout(Some(HEADER_TIMEOUT * 3)).unwrap();
            c.write_all(head.as_bytes()).expect("send");
            let t = Instant::now();
            let mut buf = [0u8; 256];
            let closed = matches!(c.read(&mut buf), Ok(0) | Err(_));
            (closed, t.elapsed())
        })
    };
    // And 50 connections that send nothing at all.
    let idle: Vec<TcpStream> = (0..50).map(|_| TcpStream::connect(("127.0.0.1", port)).expect("connect")).collect();

    for i in 0..5 {
        std::thread::sleep(Duration::from_millis(500));
        answers_quickly(&s, &format!("while slow clients wait ({i})"));
    }
    let body = slow.join().expect("slow client");
    assert!(body.starts_with("HTTP/1.") && body.contains(" 200 "), "slow client got {body:?}");
    assert!(body.contains(CPU_RUN), "{body}");

    let (closed, after) = stalled.join().expect("stalled client");
    assert!(closed, "the server never closed a connection that did not finish its headers");
    assert!(
        after >= HEADER_TIMEOUT - Duration::from_secs(1) && after < HEADER_TIMEOUT + Duration::from_secs(3),
        "stalled client dropped after {after:?}, want about {HEADER_TIMEOUT:?}"
    );
    // The silent connections were dropped too.
    for mut c in idle {
        c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        assert!(matches!(c.read(&mut [0u8; 16]), Ok(0) | Err(_)), "an idle connection was kept open");
    }
    answers_quickly(&s, "after");
}

/// A log directory with one run of two hosts: the CPU capture under two names.
fn two_host_run() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    let run = tmp.path().join("plugins/profile/2026_01_01_00_00_00");
    std::fs::create_dir_all(&run).unwrap();
    let src = fixture("cpu-transformer").join(CPU_RUN).join("vm.xplane.pb");
    std::fs::copy(&src, run.join("a.xplane.pb")).unwrap();
    std::fs::copy(&src, run.join("b.xplane.pb")).unwrap();
    tmp
}

#[test]
fn oversized_requests_are_refused_and_responses_are_capped() {
    let s = serve(&fixture("cpu-transformer"), &[]);
    let tok = &s.token;
    let host = "Host: 127.0.0.1\r\nConnection: close\r\n";
    // A long query string (over 8 KiB) → 414, with or without a valid route.
    let long = "x".repeat(9000);
    assert_eq!(raw(s.port, format!("GET /{tok}/api/runs?q={long} HTTP/1.1\r\n{host}\r\n").as_bytes()), Some(414));
    assert_eq!(raw(s.port, format!("GET /{tok}/{long} HTTP/1.1\r\n{host}\r\n").as_bytes()), Some(414));
    // Just under the bound is answered.
    let fits = "x".repeat(7000);
    assert_eq!(raw(s.port, format!("GET /{tok}/api/runs?q={fits} HTTP/1.1\r\n{host}\r\n").as_bytes()), Some(200));
    // Headers over 64 KiB → 431 from the HTTP layer.
    let big_header = format!("X-Pad: {}\r\n", "y".repeat(70_000));
    let r = raw(s.port, format!("GET /{tok}/api/runs HTTP/1.1\r\n{host}{big_header}\r\n").as_bytes());
    assert_eq!(r, Some(431));
    // A body → 413, whatever the method is allowed to be.
    let body = "z".repeat(1000);
    let req = format!("GET /{tok}/api/runs HTTP/1.1\r\n{host}Content-Length: {}\r\n\r\n{body}", body.len());
    assert_eq!(raw(s.port, req.as_bytes()), Some(413));
    let req =
        format!("GET /{tok}/api/runs HTTP/1.1\r\n{host}Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n");
    assert_eq!(raw(s.port, req.as_bytes()), Some(413));
    assert_eq!(request(s.port, "POST", &format!("/{tok}/api/runs")).status, 405);
    // Response sizes are bounded by parameters that are capped.
    let r = s.get("api/timeline/tile?track=0&start_ps=0&end_ps=1000000&px=16385");
    assert_eq!(r.status, 400, "{}", r.text());
    // Search: one host has over 5,000 matches of "t", two copies of it over 10,000.
    let one = s.api("timeline/search?q=t&limit=100000000")["total"].as_u64().unwrap();
    assert!((5_001..10_000).contains(&one), "{one} matches on one host");
    let two = two_host_run();
    let s2 = serve(two.path(), &[]);
    let all = s2.api("timeline/search?q=t&limit=100000000");
    assert_eq!(all["total"].as_u64(), Some(2 * one));
    assert_eq!(all["matches"].as_array().unwrap().len(), 10_000, "search matches are capped at 10,000");
    let r = s.get("api/timeline/search?q=a&limit=99999999999999999999999");
    assert_eq!(r.status, 400, "{}", r.text());
    // The server still answers after all that.
    assert_eq!(s.get("api/runs").status, 200);
}

#[test]
fn hundreds_of_half_sent_requests_do_not_stall_pages() {
    let s = serve(&fixture("cpu-transformer"), &[]);
    answers_quickly(&s, "before");
    let port = s.port;
    // 300 connections from someone without the token, each sending half a request
    // line and then nothing (more than the server's connection slots).
    let mut held: Vec<TcpStream> = (0..300)
        .map(|_| {
            let mut c = TcpStream::connect(("127.0.0.1", port)).expect("connect");
            c.write_all(b"GET /api/ru").expect("send");
            c
        })
        .collect();
    // And 100 more that send nothing at all, opened again as the server drops them.
    let t = Instant::now();
    let mut worst = Duration::ZERO;
    while t.elapsed() < HEADER_TIMEOUT + Duration::from_secs(2) {
        held.extend((0..20).map(|_| TcpStream::connect(("127.0.0.1", port)).expect("connect")));
        let asked = Instant::now();
        answers_quickly(&s, "while half-sent requests wait");
        worst = worst.max(asked.elapsed());
        std::thread::sleep(Duration::from_millis(300));
    }
    eprintln!("slowest page request among {} held connections: {worst:?}", held.len());
    // Half-sent lines without the token were answered with the bare 404 at once.
    let mut first = held.swap_remove(0);
    first.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut buf = String::new();
    let _ = first.read_to_string(&mut buf);
    assert!(buf.is_empty() || buf.starts_with("HTTP/1.1 404"), "{buf:?}");
}

#[test]
fn requests_naming_another_host_are_refused() {
    let s = serve(&fixture("cpu-transformer"), &[]);
    let path = format!("/{}/api/runs", s.token);
    for (host, want) in [
        ("127.0.0.1:1", 200),
        ("localhost:8080", 200),
        ("[::1]:6007", 200),
        ("evil.example:6007", 421),
        ("localhost.evil.example", 421),
    ] {
        let mut c = TcpStream::connect(("127.0.0.1", s.port)).expect("connect");
        c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        write!(c, "GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n").unwrap();
        let mut buf = String::new();
        c.read_to_string(&mut buf).unwrap();
        assert!(buf.starts_with(&format!("HTTP/1.1 {want} ")), "Host {host}: {buf}");
    }
    // Two Host headers, the first good: which one a proxy checked is unknown, so 400.
    for hosts in ["127.0.0.1:1\r\nHost: evil.example", "evil.example\r\nHost: 127.0.0.1:1"] {
        let mut c = TcpStream::connect(("127.0.0.1", s.port)).expect("connect");
        c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        write!(c, "GET {path} HTTP/1.1\r\nHost: {hosts}\r\nConnection: close\r\n\r\n").unwrap();
        let mut buf = String::new();
        c.read_to_string(&mut buf).unwrap();
        assert!(buf.starts_with("HTTP/1.1 400 "), "Host {hosts:?}: {buf}");
    }
}

#[test]
fn a_client_holding_every_slot_idle_does_not_keep_others_waiting() {
    let s = serve(&fixture("cpu-transformer"), &[]);
    // 256 keep-alive connections, each answered once and then idle: every slot held.
    let mut held = Vec::new();
    for _ in 0..256 {
        let mut c = TcpStream::connect(("127.0.0.1", s.port)).expect("connect");
        c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        write!(c, "GET /{}/api/runs HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", s.token).unwrap();
        let mut buf = [0u8; 4096];
        let n = c.read(&mut buf).unwrap();
        assert!(buf[..n].starts_with(b"HTTP/1.1 200"), "{}", String::from_utf8_lossy(&buf[..n]));
        held.push(c);
    }
    // A newcomer is answered as soon as the oldest idle connection closes, not when the
    // keep-alive timeout (10 s) frees a slot.
    answers_quickly(&s, "with every slot held by idle connections");
}

#[test]
fn hundreds_of_clients_stalled_mid_header_with_the_token_do_not_delay_others() {
    let s = serve(&fixture("cpu-transformer"), &[]);
    answers_quickly(&s, "before");
    // 300 connections that show the token (so pass the door) and stall mid-header:
    // more than the server's 256 slots.
    let held: Vec<TcpStream> = (0..300)
        .map(|_| {
            let mut c = TcpStream::connect(("127.0.0.1", s.port)).expect("connect");
            write!(c, "GET /{}/api/runs HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Half: ", s.token).expect("send");
            c
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    for i in 0..5 {
        answers_quickly(&s, &format!("request {i} among {} stalled connections", held.len()));
    }
}
