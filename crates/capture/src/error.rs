//! Capture failures as one line: what went wrong — what to do.

use std::error::Error as StdError;
use std::fmt;
use std::time::Duration;

use crate::{Options, Target};

/// Why a capture failed, and the fix.
#[derive(Debug, Clone)]
pub struct CaptureError {
    pub what: String,
    pub fix: String,
    /// A connect failure another attempt may cure.
    pub(crate) retryable: bool,
}

impl fmt::Display for CaptureError {
    /// One line whatever the parts hold: line breaks and other control characters
    /// print as spaces.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use fmt::Write;
        for c in self.what.chars().chain(" — ".chars()).chain(self.fix.chars()) {
            f.write_char(if invisible(c) { ' ' } else { c })?;
        }
        Ok(())
    }
}

impl StdError for CaptureError {}

const START_SERVER: &str = "jax.profiler.start_server(PORT)";

impl CaptureError {
    pub fn new(what: impl Into<String>, fix: impl Into<String>) -> CaptureError {
        CaptureError { what: what.into(), fix: fix.into(), retryable: false }
    }

    fn retryable(mut self) -> CaptureError {
        self.retryable = true;
        self
    }

    fn refused(target: &Target) -> CaptureError {
        CaptureError::new(
            format!("nothing is listening on {target} (connection refused)"),
            format!("check the port, and that the job called {START_SERVER} and is still running"),
        )
    }

    pub(crate) fn empty(target: &Target, duration: Duration) -> CaptureError {
        CaptureError::new(
            format!("the trace from {target} is empty: the job recorded nothing in {}", human(duration)),
            "capture while the job is running steps, or for longer (--duration)",
        )
    }

    pub(crate) fn no_xspace(target: &Target) -> CaptureError {
        CaptureError::new(
            format!("{target} answered without a trace"),
            "this profiler server does not send traces back (emit_xspace): upgrade JAX in the job",
        )
    }

    pub(crate) fn not_xspace(target: &Target, why: &str) -> CaptureError {
        CaptureError::new(
            format!("{target} sent a trace that is not a valid XSpace ({})", shorten(why)),
            "capture again; if it keeps failing, report the JAX version",
        )
    }

    pub(crate) fn silent(target: &Target, wait: Duration) -> CaptureError {
        CaptureError::new(
            format!("{target} accepted the connection but sent no gRPC answer within {}", human(wait)),
            format!("it is not a JAX profiler server, or it hangs: point at the port the job passed to {START_SERVER}"),
        )
    }

    pub(crate) fn deadline(target: &Target, deadline: Duration) -> CaptureError {
        CaptureError::new(
            format!("{target} did not send the trace within {}", human(deadline)),
            "the job may be hung or the trace very large: check the job, capture for a shorter --duration, \
             lower the tracer levels, or wait longer (--grace)",
        )
    }

    fn too_large(target: &Target, text: &str, limit_bytes: usize) -> CaptureError {
        // tonic says "decoded message length too large: found N bytes, the limit is: M bytes".
        let found = text
            .split("found ")
            .nth(1)
            .and_then(|r| r.split(' ').next())
            .and_then(|n| n.parse::<u64>().ok())
            .map(|n| format!(" is {},", human_bytes(n)))
            .unwrap_or_default();
        CaptureError::new(
            format!("the trace from {target}{found} larger than the {} limit", human_bytes(limit_bytes as u64)),
            "capture for a shorter --duration, lower --host-tracer-level / --python-tracer-level, \
             or allow more with --max-size",
        )
    }
}

/// Longest piece of a peer's text (a status message, an error's cause) put into a message.
const PEER_TEXT_CHARS: usize = 200;

/// Longest status message looked at, bytes: a peer may send megabytes.
const STATUS_TEXT_BYTES: usize = 4096;

/// Characters that would break the one-line message or hide part of it: control
/// characters and the Unicode direction and zero-width marks.
fn invisible(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{feff}')
}

/// `text` fit for one line: terminal escape sequences are dropped, runs of whitespace
/// and invisible characters become one space, and text past [`PEER_TEXT_CHARS`] is cut,
/// ending in `…`.
fn shorten(text: &str) -> String {
    let mut out = String::new();
    let mut chars = 0;
    let mut gap = false;
    let mut it = text.chars().peekable();
    while let Some(c) = it.next() {
        if c == '\u{1b}' && it.peek() == Some(&'[') {
            // A CSI sequence (colours, cursor moves): parameters up to a final byte in @..~.
            it.next();
            for c in it.by_ref() {
                if ('@'..='~').contains(&c) {
                    break;
                }
            }
            continue;
        }
        if c.is_whitespace() || invisible(c) {
            gap = true;
            continue;
        }
        if chars >= PEER_TEXT_CHARS {
            out.push('…');
            break;
        }
        if gap && !out.is_empty() {
            out.push(' ');
            chars += 1;
        }
        gap = false;
        out.push(c);
        chars += 1;
    }
    out
}

/// The longest prefix of `text` at most `max` bytes long, cut at a character boundary.
fn prefix(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// `16 MiB`, `2 GiB`, `1.5 GiB`, `900 KiB`, `100 bytes`.
fn human_bytes(n: u64) -> String {
    let units = [(1u64 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")];
    for (size, unit) in units {
        if n >= size - size / 200 {
            let v = format!("{:.1}", n as f64 / size as f64);
            return format!("{} {unit}", v.strip_suffix(".0").unwrap_or(&v));
        }
    }
    format!("{n} bytes")
}

/// `1.5s`, `300ms`.
fn human(d: Duration) -> String {
    if d.as_millis() < 1000 {
        format!("{}ms", d.as_millis())
    } else if d.subsec_millis() == 0 {
        format!("{}s", d.as_secs())
    } else {
        format!("{:.1}s", d.as_secs_f64())
    }
}

/// `top` and the messages of `source` and its sources, split at ": " into distinct
/// parts (cases ignored, trailing dots dropped), in order.
fn error_parts(top: String, mut source: Option<&(dyn StdError + 'static)>) -> Vec<String> {
    let mut texts = vec![top];
    while let Some(e) = source {
        texts.push(e.to_string());
        source = e.source();
    }
    let mut parts: Vec<String> = Vec::new();
    for t in texts.iter().take(16) {
        // A peer's text may be megabytes with thousands of ": ": look at its start only.
        for p in prefix(t, STATUS_TEXT_BYTES).split(": ").take(16) {
            let p = p.trim().trim_end_matches('.').to_string();
            if !p.is_empty() && !parts.iter().any(|q| q.eq_ignore_ascii_case(&p)) {
                parts.push(p);
            }
        }
    }
    parts
}

/// The error and all its sources, joined by ": ", shortened to one line.
fn chain(err: &(dyn StdError + 'static)) -> String {
    shorten(&error_parts(err.to_string(), err.source()).join(": "))
}

/// The first `std::io::Error` in the chain.
fn io_kind(err: &(dyn StdError + 'static)) -> Option<std::io::ErrorKind> {
    let mut cur = Some(err);
    while let Some(e) = cur {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            return Some(io.kind());
        }
        cur = e.source();
    }
    None
}

/// A failed connection attempt.
pub(crate) fn classify_connect(
    target: &Target,
    err: &(dyn StdError + 'static),
    connect_timeout: Duration,
) -> CaptureError {
    let text = chain(err);
    let lower = text.to_lowercase();
    match io_kind(err) {
        Some(std::io::ErrorKind::ConnectionRefused) => return CaptureError::refused(target).retryable(),
        Some(std::io::ErrorKind::TimedOut) => return timed_out(target, connect_timeout),
        _ => {}
    }
    if lower.contains("timed out") {
        return timed_out(target, connect_timeout);
    }
    if lower.contains("dns error") || lower.contains("lookup address") || lower.contains("name or service not known") {
        return CaptureError::new(format!("cannot resolve the host {:?}", target.host), "check the host name");
    }
    CaptureError::new(
        format!("cannot connect to {target} ({text})"),
        format!("check the address, and that the job called {START_SERVER}"),
    )
    .retryable()
}

fn timed_out(target: &Target, connect_timeout: Duration) -> CaptureError {
    CaptureError::new(
        format!("{target} did not accept a connection within {}", human(connect_timeout)),
        "check the host, the port and any firewall between here and the job",
    )
    .retryable()
}

/// Where in a call a failure happened.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stage {
    /// The probe right after connecting.
    Probe,
    /// Waiting for the connection to be usable.
    Ready,
    /// The `Profile` call itself.
    Call,
}

/// The status message and its sources as distinct parts.
fn status_parts(status: &tonic::Status) -> Vec<String> {
    error_parts(prefix(status.message(), STATUS_TEXT_BYTES).to_string(), status.source())
}

/// A failed `Profile` call as an error.
pub(crate) fn call_error(target: &Target, stage: Stage, status: &tonic::Status, o: &Options) -> CaptureError {
    classify_call(target, stage, status, o).unwrap_or_else(|| {
        let parts = status_parts(status);
        CaptureError::new(
            format!("capture from {target} failed ({:?}: {})", status.code(), shorten(&parts.join(": "))),
            "check the job's log for profiler errors, then capture again",
        )
    })
}

/// Explains a failed call; `None` where a probe's failure shows a working gRPC server
/// (or, for a real call, nothing more specific is known).
pub(crate) fn classify_call(
    target: &Target,
    stage: Stage,
    status: &tonic::Status,
    o: &Options,
) -> Option<CaptureError> {
    use tonic::Code;
    let parts = status_parts(status);
    let lower = parts.join(": ").to_lowercase();
    let text = shorten(&parts.join(": "));
    let root = shorten(parts.last().map(String::as_str).unwrap_or_default());
    let not_profiler = |why: String| {
        CaptureError::new(
            format!("{target} is not a JAX profiler server ({why})"),
            format!("point at the port the job passed to {START_SERVER}"),
        )
    };
    // A peer that speaks gRPC but whose answer cannot be taken.
    let broken = |what: String| {
        CaptureError::new(
            what,
            format!(
                "it is not a JAX profiler server, or a broken one: point at the port the job passed to {START_SERVER}"
            ),
        )
    };
    if status.source().and_then(io_kind) == Some(std::io::ErrorKind::ConnectionRefused) {
        return Some(CaptureError::refused(target));
    }
    // HTTP/2's ENHANCE_YOUR_CALM, from a header block past all limits (a status
    // message of megabytes, say).
    if ["excessive load", "header_list", "too_many_continuations"].iter().any(|p| lower.contains(p)) {
        return Some(broken(format!("{target} sent an answer whose headers are too large to read ({root})")));
    }
    let protocol = [
        "protocol error",
        "frame with invalid size",
        "invalid http",
        "invalid content-type",
        "malformed",
        "connection preface",
        "invalid compression flag",
        "unexpected content-type",
    ];
    if protocol.iter().any(|p| lower.contains(p)) {
        // Past the probe, the peer has shown that it speaks gRPC: this answer broke the rules.
        return Some(match stage {
            Stage::Probe => not_profiler(format!("it does not speak gRPC: {root}")),
            Stage::Ready | Stage::Call => broken(format!("{target} broke the gRPC protocol in its answer ({root})")),
        });
    }
    let closed =
        ["connection reset", "broken pipe", "connection closed", "stream closed", "error reading a body", "eof"];
    let broke = closed.iter().any(|p| lower.contains(p));
    if stage == Stage::Probe {
        return match status.code() {
            Code::Unimplemented => None,
            _ if broke => Some(not_profiler(format!("it closed the connection at once: {root}"))),
            _ => None,
        };
    }
    match status.code() {
        // tonic's check of the answer's announced length (OutOfRange in tonic 0.12).
        Code::OutOfRange | Code::ResourceExhausted if lower.contains("message length too large") => {
            return Some(CaptureError::too_large(target, &lower, o.max_response_bytes))
        }
        // prost could not read the answer.
        Code::Internal if lower.starts_with("failed to decode protobuf") => {
            return Some(broken(format!("{target} sent an answer that is not a profiler response ({root})")))
        }
        Code::Unimplemented => return Some(not_profiler("it answers gRPC but has no ProfilerService".into())),
        Code::DeadlineExceeded => return Some(CaptureError::deadline(target, o.duration + o.margin)),
        Code::Cancelled if lower.contains("timeout expired") => {
            return Some(CaptureError::deadline(target, o.duration + o.margin))
        }
        _ => {}
    }
    if lower.contains("another profil") || (lower.contains("already") && lower.contains("session")) {
        return Some(CaptureError::new(
            format!("{target} is already being profiled ({text})"),
            "wait for the other capture (TensorBoard, another stepscope, jax.profiler.trace) to finish",
        ));
    }
    if broke || (stage == Stage::Call && matches!(status.code(), Code::Unavailable | Code::Unknown)) {
        return Some(CaptureError::new(
            format!("the connection to {target} broke during the capture ({root})"),
            "the job probably exited or crashed: check that it is running, then capture again",
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_durations() {
        assert_eq!(human(Duration::from_millis(300)), "300ms");
        assert_eq!(human(Duration::from_secs(32)), "32s");
        assert_eq!(human(Duration::from_millis(2500)), "2.5s");
    }

    #[test]
    fn peer_text_is_shortened_to_one_line() {
        let s = shorten("a\r\n\tb \u{1b}[31mred\u{1b}[0m\u{0}\u{7} \u{202e}c");
        assert_eq!(s, "a b red c");
        for long in ["x: ".repeat(100_000), "x".repeat(100_000), "xy ".repeat(100_000), "x\n".repeat(100_000)] {
            let s = shorten(&long);
            assert!((PEER_TEXT_CHARS..=PEER_TEXT_CHARS + 2).contains(&s.chars().count()), "{s}");
            assert!(s.ends_with('…'));
        }
        assert_eq!(shorten(""), "");
        assert_eq!(prefix("aé", 2), "a");
    }

    #[test]
    fn sizes_for_people() {
        assert_eq!(human_bytes(16 << 20), "16 MiB");
        assert_eq!(human_bytes((2 << 30) - 1), "2 GiB");
        assert_eq!(human_bytes(3 << 29), "1.5 GiB");
        assert_eq!(human_bytes(900 << 10), "900 KiB");
        assert_eq!(human_bytes(100), "100 bytes");
    }

    #[test]
    fn one_line_with_fix() {
        let t: Target = "h:1".parse().unwrap();
        let e = CaptureError::empty(&t, Duration::from_secs(2));
        let s = e.to_string();
        assert!(!s.contains('\n') && s.contains(" — ") && s.contains("h:1") && s.contains("2s"), "{s}");
        assert_eq!(CaptureError::new("a\nb\r", "c\u{7}").to_string(), "a b  — c ");
    }
}
