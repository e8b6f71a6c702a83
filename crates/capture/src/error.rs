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
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} — {}", self.what, self.fix)
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
            format!("{target} sent a trace that is not a valid XSpace ({why})"),
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
             or lower the tracer levels",
        )
    }
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
    for t in texts {
        for p in t.split(": ") {
            let p = p.trim().trim_end_matches('.').to_string();
            if !p.is_empty() && !parts.iter().any(|q| q.eq_ignore_ascii_case(&p)) {
                parts.push(p);
            }
        }
    }
    parts
}

/// The error and all its sources, joined by ": ".
fn chain(err: &(dyn StdError + 'static)) -> String {
    error_parts(err.to_string(), err.source()).join(": ")
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
    error_parts(status.message().to_string(), status.source())
}

/// A failed `Profile` call as an error.
pub(crate) fn call_error(target: &Target, stage: Stage, status: &tonic::Status, o: &Options) -> CaptureError {
    classify_call(target, stage, status, o).unwrap_or_else(|| {
        let parts = status_parts(status);
        CaptureError::new(
            format!("capture from {target} failed ({:?}: {})", status.code(), parts.join(": ")),
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
    let text = parts.join(": ");
    let lower = text.to_lowercase();
    let root = parts.last().cloned().unwrap_or_default();
    let not_profiler = |why: String| {
        CaptureError::new(
            format!("{target} is not a JAX profiler server ({why})"),
            format!("point at the port the job passed to {START_SERVER}"),
        )
    };
    if status.source().and_then(io_kind) == Some(std::io::ErrorKind::ConnectionRefused) {
        return Some(CaptureError::refused(target));
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
        return Some(not_profiler(format!("it does not speak gRPC: {root}")));
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
        Code::Unimplemented => return Some(not_profiler("it answers gRPC but has no ProfilerService".into())),
        Code::DeadlineExceeded => return Some(CaptureError::deadline(target, o.duration + o.margin)),
        Code::Cancelled if lower.contains("timeout expired") => {
            return Some(CaptureError::deadline(target, o.duration + o.margin))
        }
        Code::ResourceExhausted if lower.contains("too large") => {
            return Some(CaptureError::new(
                format!("the trace from {target} is larger than the {} MiB limit", (o.max_response_bytes >> 20) + 1),
                "capture for a shorter --duration, or lower --host-tracer-level / --python-tracer-level",
            ))
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
    fn one_line_with_fix() {
        let t: Target = "h:1".parse().unwrap();
        let e = CaptureError::empty(&t, Duration::from_secs(2));
        let s = e.to_string();
        assert!(!s.contains('\n') && s.contains(" — ") && s.contains("h:1") && s.contains("2s"), "{s}");
    }
}
