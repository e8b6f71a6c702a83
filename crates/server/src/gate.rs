//! The door every connection passes before it is served: its request line must show
//! the token (`GET /TOKEN…`) within [`TOKEN_DEADLINE`], and at most
//! [`MAX_PENDING`] connections may be waiting to show it — a new one sends the
//! oldest waiting one away. Half-sent requests from anyone on the machine can so
//! neither hold the server's connection slots nor keep a page waiting: a browser
//! shows the token in its first packet.
//!
//! The bytes read to check the token are replayed to the HTTP layer ([`Prefixed`]).
//! The token is compared only once all of its bytes are in, in constant time, so
//! how long a connection is kept says nothing about a partial guess.

use std::collections::VecDeque;
use std::io;
use std::pin::Pin;
use std::sync::Mutex;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::oneshot;

use crate::token;

/// Connections waiting to show the token; the next one sends the oldest away.
pub const MAX_PENDING: usize = 64;
/// How long a new connection has to show the token.
pub const TOKEN_DEADLINE: Duration = Duration::from_secs(5);

/// The connections waiting to show the token, oldest first.
#[derive(Default)]
pub struct Pending {
    waiting: Arrivals,
}

/// Connections in order of arrival, each of which can be sent away: those waiting at
/// the door, and those being served (`crate::http`).
#[derive(Default)]
pub struct Arrivals {
    queue: Mutex<Queue>,
}

/// The next connection's number, and each connection's number, the sender that sends
/// it away, and its count of requests being answered (none for those at the door).
type Queue = (u64, VecDeque<(u64, oneshot::Sender<()>, Option<Busy>)>);

/// A connection's requests being answered, bodies still sent included.
pub type Busy = std::sync::Arc<std::sync::atomic::AtomicUsize>;

impl Arrivals {
    /// Adds a connection, after sending one away when `max` are in
    /// ([`Arrivals::send_oldest_away`]): its number and the receiver told when it is
    /// sent away.
    pub fn join(&self, max: usize, busy: Option<Busy>) -> (u64, oneshot::Receiver<()>) {
        let (tx, rx) = oneshot::channel();
        let mut q = self.queue.lock().unwrap_or_else(|p| p.into_inner());
        let id = q.0;
        q.0 += 1;
        if q.1.len() >= max {
            send_away(&mut q.1);
        }
        q.1.push_back((id, tx, busy));
        (id, rx)
    }

    /// Removes connection `id`.
    pub fn leave(&self, id: u64) {
        let mut q = self.queue.lock().unwrap_or_else(|p| p.into_inner());
        q.1.retain(|(i, _, _)| *i != id);
    }

    /// Sends a connection away: the oldest that is answering nothing (idle, or still
    /// sending a request's head), else the oldest.
    pub fn send_oldest_away(&self) {
        let mut q = self.queue.lock().unwrap_or_else(|p| p.into_inner());
        send_away(&mut q.1);
    }
}

fn send_away(q: &mut VecDeque<(u64, oneshot::Sender<()>, Option<Busy>)>) {
    let idle =
        q.iter().position(|(_, _, b)| b.as_ref().is_some_and(|b| b.load(std::sync::atomic::Ordering::SeqCst) == 0));
    if let Some((_, away, _)) = q.remove(idle.unwrap_or(0)) {
        let _ = away.send(());
    }
}

/// What the door decided for a connection.
pub enum Verdict {
    /// It showed the token: serve it, its first bytes replayed.
    Enter(Prefixed),
    /// Anything else: it was answered (a bare 404) or dropped.
    Away,
}

impl Pending {
    /// Checks a new connection's request line against `token`.
    pub async fn admit(&self, mut stream: TcpStream, token: &str) -> Verdict {
        let (id, evicted) = self.waiting.join(MAX_PENDING, None);
        let verdict = tokio::select! {
            _ = evicted => None,
            read = tokio::time::timeout(TOKEN_DEADLINE, read_head(&mut stream, token)) => read.ok(),
        };
        self.waiting.leave(id);
        match verdict {
            Some(Ok(Ok(head))) => Verdict::Enter(Prefixed { head, at: 0, stream }),
            Some(Ok(Err(head))) => {
                // The server's root, as a browser opens `http://localhost:PORT/`: say
                // where the pages are (never the token); anything else, the bare 404.
                let root = [&b"GET / "[..], b"GET /index.html ", b"HEAD / "].iter().any(|r| head.starts_with(r));
                let _ = stream.write_all(if root { ROOT } else { NOT_FOUND }).await;
                let _ = stream.shutdown().await;
                // Read what the client still sends for a moment (closing with unread
                // bytes resets the connection, and the client may lose the answer).
                let mut sink = [0u8; 4096];
                let drain = async {
                    let mut left = LINGER_BYTES;
                    while left > 0 {
                        match stream.read(&mut sink).await {
                            Ok(0) | Err(_) => break,
                            Ok(n) => left = left.saturating_sub(n),
                        }
                    }
                };
                let _ = tokio::time::timeout(LINGER, drain).await;
                Verdict::Away
            }
            _ => Verdict::Away,
        }
    }
}

/// The bare 404 of a request outside the token (as the HTTP layer's).
const NOT_FOUND: &[u8] =
    b"HTTP/1.1 404 Not Found\r\ncontent-type: text/plain; charset=utf-8\r\ncache-control: no-store\r\n\
content-length: 10\r\nconnection: close\r\n\r\nnot found\n";

/// The answer to the server's root without the token.
const ROOT: &[u8] = b"HTTP/1.1 404 Not Found\r\ncontent-type: text/plain; charset=utf-8\r\ncache-control: no-store\r\n\
content-length: 226\r\nconnection: close\r\n\r\n\
stepscope serve: the pages are under a secret path. Open the URL that stepscope serve printed when it started \
(http://127.0.0.1:PORT/TOKEN/); it is printed again on each start. The token keeps other users of this machine out.\n";

/// How long, and how many bytes, a refused connection is still read after its answer.
const LINGER: Duration = Duration::from_secs(1);
const LINGER_BYTES: usize = 64 << 10;

/// The longest method read before the path.
const MAX_METHOD: usize = 16;

/// Reads a request line's start until it shows whether its path is under the token:
/// the bytes read, `Ok` when it is, `Err` when it is not.
async fn read_head(stream: &mut TcpStream, token: &str) -> io::Result<Result<Vec<u8>, Vec<u8>>> {
    let mut head = Vec::with_capacity(64);
    let mut buf = [0u8; 256];
    loop {
        if let Some(decided) = decide(&head, token) {
            return Ok(if decided { Ok(head) } else { Err(head) });
        }
        let n = stream.read(&mut buf).await?;
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        head.extend_from_slice(&buf[..n]);
    }
}

/// Whether `head` (a request's first bytes) asks for a path under `token`: `None`
/// while too few bytes are in to tell.
fn decide(head: &[u8], token: &str) -> Option<bool> {
    let Some(space) = head.iter().position(|&b| b == b' ') else {
        return (head.len() > MAX_METHOD).then_some(false);
    };
    let path = &head[space + 1..];
    // A path that ends (or does not start with "/") before a token's length is not
    // under it; that tells nothing of the token.
    let early = &path[..path.len().min(token.len() + 1)];
    if path.first().is_some_and(|&b| b != b'/') || early.iter().skip(1).any(|b| b" ?\r\n/".contains(b)) {
        return Some(false);
    }
    // "/" + token + one byte after it ("/", " ", "?").
    if path.len() < token.len() + 2 {
        return None;
    }
    let shown = std::str::from_utf8(&path[1..=token.len()]).unwrap_or("");
    Some(path[0] == b'/' && token::same(shown, token) && matches!(path[token.len() + 1], b'/' | b' ' | b'?'))
}

/// A connection whose first bytes were read by the door, replayed before the rest.
pub struct Prefixed {
    head: Vec<u8>,
    at: usize,
    stream: TcpStream,
}

impl AsyncRead for Prefixed {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if this.at < this.head.len() {
            let n = (this.head.len() - this.at).min(buf.remaining());
            buf.put_slice(&this.head[this.at..this.at + n]);
            this.at += n;
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut this.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for Prefixed {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }
    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canned_answers_say_their_length() {
        for answer in [ROOT, NOT_FOUND] {
            let text = std::str::from_utf8(answer).unwrap();
            let (head, body) = text.split_once("\r\n\r\n").unwrap();
            let length = head.lines().find_map(|l| l.strip_prefix("content-length: ")).unwrap();
            assert_eq!(length.parse::<usize>().unwrap(), body.len(), "{head}");
        }
    }

    const T: &str = "0123456789abcdef0123456789abcdef";

    #[test]
    fn the_token_decides_once_all_of_it_is_in() {
        assert_eq!(decide(b"GET /0123", T), None, "a partial token tells nothing");
        assert_eq!(decide(b"GET /f123", T), None, "nor does a wrong partial one");
        assert_eq!(decide(format!("GET /{T}").as_bytes(), T), None);
        assert_eq!(decide(format!("GET /{T}/api/runs").as_bytes(), T), Some(true));
        assert_eq!(decide(format!("HEAD /{T} HTTP/1.1").as_bytes(), T), Some(true));
        assert_eq!(decide(format!("GET /{T}?x").as_bytes(), T), Some(true));
        assert_eq!(decide(format!("GET /{T}x/").as_bytes(), T), Some(false));
        assert_eq!(decide(format!("GET /{}/", T.to_uppercase()).as_bytes(), T), Some(false));
        assert_eq!(decide(format!("GET //{T}").as_bytes(), T), Some(false));
        assert_eq!(decide(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n_______________", T), Some(false));
        assert_eq!(decide(b"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", T), Some(false));
        assert_eq!(decide(b"GET / HTTP/1.1\r\n\r\n", T), Some(false), "a short path is no token");
        assert_eq!(decide(b"GET /api/runs", T), Some(false));
        assert_eq!(decide(b"GET api", T), Some(false));
    }
}
