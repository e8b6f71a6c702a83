//! The HTTP layer: a hyper HTTP/1.1 accept loop with limits, and one handler for every
//! request. The handler checks the token and the request's size, then serves an
//! embedded page, runs an API route on the blocking pool, or streams an export.

use std::convert::Infallible;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::Query;
use axum::http::{header, HeaderValue, Method, Request, Response, StatusCode};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};

use crate::api::{self, ApiError, Params};
use crate::response::{api_error, respond};
use crate::{assets, download, gate, token, App};

/// Pages may load only the server's own scripts, styles and data.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
                   connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// Connections served at once; further clients wait in the listen queue.
pub const MAX_CONNECTIONS: usize = 256;
/// A request line and headers must arrive within this time (also the keep-alive idle time).
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// The longest request line and headers read (hyper answers 431 beyond).
pub const MAX_HEAD_BYTES: usize = 64 * 1024;
/// The longest path and query string answered (414 beyond).
pub const MAX_URI_BYTES: usize = 8 * 1024;

/// Accepts connections; each passes the door ([`crate::gate`]) before it takes one
/// of [`MAX_CONNECTIONS`] slots and is served.
pub async fn serve(listener: std::net::TcpListener, app: Arc<App>) -> anyhow::Result<()> {
    listener.set_nonblocking(true)?;
    let listener = tokio::net::TcpListener::from_std(listener)?;
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    // The connections holding a slot, oldest first.
    let served = Arc::new(gate::Arrivals::default());
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(_) => {
                // Out of file descriptors or a connection reset before accept: try again shortly.
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let app = app.clone();
        let (slots, served) = (slots.clone(), served.clone());
        tokio::spawn(async move {
            let gate::Verdict::Enter(stream) = app.pending.admit(stream, &app.token).await else { return };
            let permit = match slots.clone().try_acquire_owned() {
                Ok(p) => p,
                Err(_) => {
                    // Every slot is held (a client can keep 256 idle keep-alive
                    // connections): the oldest connection is asked to close once its
                    // request is answered, so a newcomer waits for one answer, not
                    // for the keep-alive timeout.
                    served.send_oldest_away();
                    let Ok(p) = slots.acquire_owned().await else { return };
                    p
                }
            };
            let busy = gate::Busy::default();
            let (id, shed) = served.join(MAX_CONNECTIONS, Some(busy.clone()));
            let counted = busy.clone();
            let service = service_fn(move |req: Request<hyper::body::Incoming>| {
                let (app, busy) = (app.clone(), counted.clone());
                async move {
                    let answering = Answering::new(busy);
                    Ok::<_, Infallible>(
                        handle(app, req).await.map(|body| Body::new(Counted { body, _answering: answering })),
                    )
                }
            });
            let conn = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_READ_TIMEOUT)
                .max_header_size(MAX_HEAD_BYTES)
                .serve_connection(TokioIo::new(stream), service);
            tokio::pin!(conn);
            tokio::select! {
                _ = conn.as_mut() => {}
                // Sent away: one answering nothing (idle, or stalled in a request's
                // head) is closed now; one answering finishes that answer first.
                _ = shed => if busy.load(Ordering::SeqCst) > 0 {
                    conn.as_mut().graceful_shutdown();
                    let _ = conn.await;
                }
            }
            served.leave(id);
            drop(permit);
        });
    }
}

/// A request being answered, counted in its connection's [`gate::Busy`] until its
/// answer's body is sent or dropped.
struct Answering(gate::Busy);

impl Answering {
    fn new(busy: gate::Busy) -> Answering {
        busy.fetch_add(1, Ordering::SeqCst);
        Answering(busy)
    }
}

impl Drop for Answering {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// An answer's body that keeps its request counted while it is sent.
struct Counted {
    body: Body,
    _answering: Answering,
}

impl http_body::Body for Counted {
    type Data = bytes::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<bytes::Bytes>, Self::Error>>> {
        std::pin::Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

/// The one answer to anything outside the token or not found: no detail.
fn not_found() -> Response<Body> {
    respond(StatusCode::NOT_FOUND, "text/plain; charset=utf-8", "not found\n")
}

async fn handle<B>(app: Arc<App>, req: Request<B>) -> Response<Body> {
    if req.method() != Method::GET && req.method() != Method::HEAD {
        return respond(StatusCode::METHOD_NOT_ALLOWED, "text/plain; charset=utf-8", "read-only\n");
    }
    let has_body = req.headers().contains_key(header::TRANSFER_ENCODING)
        || req.headers().get(header::CONTENT_LENGTH).is_some_and(|v| v.as_bytes() != b"0");
    if has_body {
        return respond(StatusCode::PAYLOAD_TOO_LARGE, "text/plain; charset=utf-8", "requests take no body\n");
    }
    if req.uri().path_and_query().map_or(0, |pq| pq.as_str().len()) > MAX_URI_BYTES {
        return respond(StatusCode::URI_TOO_LONG, "text/plain; charset=utf-8", "URI too long\n");
    }
    if req.headers().get_all(header::HOST).iter().nth(1).is_some() {
        // Which one would a proxy have checked? Neither is trusted.
        return respond(StatusCode::BAD_REQUEST, "text/plain; charset=utf-8", "more than one Host header\n");
    }
    if let Some(host) = req.headers().get(header::HOST) {
        if !host_allowed(host.as_bytes(), &app.host_names) {
            // A page of another site reaching us through its own DNS name (DNS rebinding).
            return respond(
                StatusCode::MISDIRECTED_REQUEST,
                "text/plain; charset=utf-8",
                "unknown Host: open the URL stepscope printed (http://127.0.0.1:PORT/TOKEN/)\n",
            );
        }
    }
    // The raw (still percent-encoded) path: nothing below decodes it into a file name.
    let path = req.uri().path();
    let Some(rest) = path.strip_prefix('/') else { return not_found() };
    let (tok, rest) = rest.split_once('/').unwrap_or((rest, ""));
    if !token::same(tok, &app.token) {
        return not_found();
    }
    if !path[1..].contains('/') {
        // `/TOKEN` → `/TOKEN/`, so relative links resolve.
        let mut r = respond(StatusCode::PERMANENT_REDIRECT, "text/plain; charset=utf-8", "");
        if let Ok(v) = HeaderValue::from_str(&format!("/{}/", app.token)) {
            r.headers_mut().insert(header::LOCATION, v);
        }
        return r;
    }
    if let Some(route) = rest.strip_prefix("api/") {
        let params = match Query::<Vec<(String, String)>>::try_from_uri(req.uri()) {
            Ok(Query(pairs)) => Params::new(pairs),
            Err(e) => return api_error(ApiError::bad(format!("bad query string: {e}"))),
        };
        if route == "export" {
            let gzip = (req.headers().get_all(header::ACCEPT_ENCODING).iter())
                .any(|v| v.to_str().is_ok_and(download::accepts_gzip));
            return download::export(app, params, gzip).await;
        }
        let Some(handler) = api::route(route) else {
            return api_error(ApiError::not_found(format!("no API route {route:?} — see docs/api.md")));
        };
        if route == "sql" {
            return query(app, params).await;
        }
        let app = app.clone();
        return match tokio::task::spawn_blocking(move || api::answer(&app, handler, &params)).await {
            Ok(Ok(body)) => respond(StatusCode::OK, "application/json", body),
            Ok(Err(e)) => api_error(e),
            Err(e) => api_error(ApiError { status: 500, message: format!("request failed: {e}") }),
        };
    }
    match assets::get(rest) {
        Some(bytes) => {
            let ct = if rest.is_empty() { "text/html; charset=utf-8" } else { assets::content_type(rest) };
            let mut r = respond(StatusCode::OK, ct, bytes);
            r.headers_mut().insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
            r
        }
        None => not_found(),
    }
}

/// Runs an `api/sql` query: [`api::MAX_QUERIES`] at once, each on a thread of its own
/// at a lower priority, so that queries, however heavy, leave the blocking pool and the
/// processor to the other requests; one that waits [`api::SQL_QUEUE_WAIT`] for a turn
/// is refused. The answer is streamed as the rows come ([`Streamed`]): its status is
/// decided by the query's first chunk, or by its end where the whole answer is smaller.
async fn query(app: Arc<App>, params: Params) -> Response<Body> {
    let busy = || {
        api_error(ApiError {
            status: 503,
            message: format!("{} queries are running — try again in a few seconds", api::MAX_QUERIES),
        })
    };
    let Ok(Ok(turn)) = tokio::time::timeout(api::SQL_QUEUE_WAIT, app.queries.acquire()).await else {
        return busy();
    };
    // The turn is the query thread's until its last chunk is sent (or it ends).
    turn.forget();
    let turn = Turn(app.clone());
    let (first_tx, first_rx) = tokio::sync::oneshot::channel();
    let (chunks_tx, chunks_rx) = tokio::sync::mpsc::channel(4);
    let on_thread = app.clone();
    let spawned = std::thread::Builder::new().name("stepscope-sql".into()).spawn(move || {
        let _turn = turn;
        lower_priority();
        let mut out = Streamed { chunks: chunks_tx, buf: Vec::new(), first: Some(first_tx) };
        let ran = api::sql_to(&on_thread, &params, &mut out);
        match (ran, out.first.take()) {
            // Nothing sent yet: the error is the answer.
            (Err(e), Some(first)) => drop(first.send(Err(e))),
            (_, first) => {
                out.first = first;
                let _ = out.send();
            }
        }
    });
    if spawned.is_err() {
        return busy();
    }
    match first_rx.await {
        Ok(Ok(())) => respond(StatusCode::OK, "application/json", Body::new(crate::download::ChannelBody(chunks_rx))),
        Ok(Err(e)) => api_error(e),
        Err(_) => api_error(ApiError { status: 500, message: "the query failed — run it again".into() }),
    }
}

/// A query's turn ([`App::queries`]), given back when dropped.
struct Turn(Arc<App>);

impl Drop for Turn {
    fn drop(&mut self) {
        self.0.queries.add_permits(1);
    }
}

/// An `api/sql` answer written by its query's thread: sent in chunks of
/// [`STREAM_CHUNK_BYTES`] down a bounded channel (the query waits while the client
/// reads), the first telling the HTTP layer the answer has begun.
struct Streamed {
    chunks: tokio::sync::mpsc::Sender<std::io::Result<bytes::Bytes>>,
    buf: Vec<u8>,
    /// Told once, when the first chunk goes (or the answer ends without one).
    first: Option<tokio::sync::oneshot::Sender<Result<(), ApiError>>>,
}

/// Bytes of an `api/sql` answer sent at a time.
const STREAM_CHUNK_BYTES: usize = 256 << 10;

impl Streamed {
    /// Sends what is written so far; an error once the client has gone.
    fn send(&mut self) -> std::io::Result<()> {
        if let Some(first) = self.first.take() {
            let _ = first.send(Ok(()));
        }
        if self.buf.is_empty() {
            return Ok(());
        }
        let chunk = bytes::Bytes::from(std::mem::take(&mut self.buf));
        self.chunks
            .blocking_send(Ok(chunk))
            .map_err(|_| std::io::Error::new(std::io::ErrorKind::BrokenPipe, "the client went away"))
    }
}

impl std::io::Write for Streamed {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.buf.extend_from_slice(b);
        if self.buf.len() >= STREAM_CHUNK_BYTES {
            self.send()?;
        }
        Ok(b.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Lowers the calling thread's scheduling priority (nice 10), where the system allows.
fn lower_priority() {
    #[cfg(target_os = "linux")]
    // SAFETY: sets the niceness of this thread (its own id); no memory is touched.
    unsafe {
        libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, 10);
    }
}

/// Whether a `Host` header names this server: an IP address, `localhost`, or one of
/// `names` (this machine's, when it listens beyond loopback), with any port — a
/// tunnel (`ssh -L 8080:127.0.0.1:6007`) changes the port. A DNS name of someone
/// else's pointing at this machine is refused.
fn host_allowed(host: &[u8], names: &[String]) -> bool {
    let Ok(host) = std::str::from_utf8(host) else { return false };
    let name = match host.strip_prefix('[') {
        // [v6]:port
        Some(rest) => match rest.split_once(']') {
            Some((v6, port)) if port.is_empty() || port.starts_with(':') => {
                return v6.parse::<std::net::Ipv6Addr>().is_ok()
            }
            _ => return false,
        },
        None => host.rsplit_once(':').map_or(host, |(name, _)| name),
    };
    name.parse::<std::net::Ipv4Addr>().is_ok()
        || name.eq_ignore_ascii_case("localhost")
        || names.iter().any(|n| n.eq_ignore_ascii_case(name))
}

#[cfg(test)]
mod tests {
    use super::host_allowed;

    #[test]
    fn hosts_are_addresses_localhost_or_this_machine() {
        let names = ["node1".to_string()];
        for ok in ["127.0.0.1:6007", "127.0.0.1", "localhost:8080", "LOCALHOST", "[::1]:6007", "[::1]", "10.0.0.5:1"] {
            assert!(host_allowed(ok.as_bytes(), &names), "{ok}");
        }
        assert!(host_allowed(b"node1:6007", &names));
        for bad in ["evil.example:6007", "evil.example", "localhost.evil.example:1", "[::1", "[evil]:1", "node2:1", ""]
        {
            assert!(!host_allowed(bad.as_bytes(), &names), "{bad}");
        }
        assert!(!host_allowed(b"node1:6007", &[]));
    }
}
