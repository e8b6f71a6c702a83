//! Capture a profile from a running JAX job, the way TensorBoard's "capture profile"
//! button does, without TensorBoard.
//!
//! `jax.profiler.start_server(port)` serves the gRPC service `tensorflow.ProfilerService`.
//! [`Session::capture`] calls its `Profile` method on every target at once, asking for
//! the XSpace inline (`emit_xspace`), and hands back the raw bytes together with their
//! decoded [`Space`]. [`write_run`] stores captures in TensorBoard layout
//! (`<logdir>/plugins/profile/<YYYY_MM_DD_HH_MM_SS>/<host>.xplane.pb`) through a
//! temporary file and a rename, so a reader never sees a partial file.
//!
//! Every failure is one [`CaptureError`] naming what went wrong and what to do.

mod error;
mod proto;
mod target;
mod write;

use std::sync::Arc;
use std::time::{Duration, Instant};

use stepscope_xspace::{Progress, Source, Space};
use tonic::transport::{Channel, Endpoint};

pub use error::CaptureError;
pub use target::{parse_duration, parse_size, parse_targets, Target};
pub use write::{local_clock, run_name, write_run, Written};

use error::{call_error, classify_call, classify_connect, Stage};

/// gRPC path of the profiling method.
const PROFILE_PATH: &str = "/tensorflow.ProfilerService/Profile";

/// A method no server implements, called once per connection to see that the peer speaks gRPC.
const PROBE_PATH: &str = "/tensorflow.ProfilerService/StepscopeProbe";

/// How to capture.
#[derive(Clone, Debug)]
pub struct Options {
    /// How long the job is traced.
    pub duration: Duration,
    /// Host tracer level (0 off, 1 user annotations, 2 + runtime, 3 verbose).
    pub host_tracer_level: u32,
    /// Device tracer level (0 off, 1 on).
    pub device_tracer_level: u32,
    /// Python tracer level (0 off, 1 every Python call).
    pub python_tracer_level: u32,
    /// Extra connection attempts after a refused or timed-out connect.
    pub retries: u32,
    /// Limit on one connection attempt.
    pub connect_timeout: Duration,
    /// Time allowed past `duration` for the job to stop tracing and send the trace.
    pub margin: Duration,
    /// Largest response accepted, bytes (at most [`DEFAULT_MAX_RESPONSE_BYTES`]). A
    /// larger answer is refused from its announced length, before it is read.
    pub max_response_bytes: usize,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            duration: Duration::from_secs(2),
            host_tracer_level: 2,
            device_tracer_level: 1,
            python_tracer_level: 0,
            retries: 2,
            connect_timeout: Duration::from_secs(3),
            margin: Duration::from_secs(30),
            max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
        }
    }
}

/// The default and largest [`Options::max_response_bytes`]: 2 GiB − 1, the most a
/// protobuf message can hold.
pub const DEFAULT_MAX_RESPONSE_BYTES: usize = (2 << 30) - 1;

/// Pause between connection attempts.
fn retry_pause() -> Duration {
    Duration::from_millis(300)
}

/// One target's capture: the XSpace bytes as received and their decoded form.
pub struct Capture {
    pub target: Target,
    /// The serialized XSpace, byte for byte as the job sent it.
    pub bytes: Arc<Source>,
    /// The decoded XSpace; `space.host` is the name the capture is stored under.
    pub space: Space,
    /// Wall time of the whole request, connection included.
    pub elapsed: Duration,
}

/// Captures from a fixed set of targets; keeps connections open between captures
/// (`stepscope top` captures again and again).
pub struct Session {
    runtime: tokio::runtime::Runtime,
    targets: Vec<Target>,
    channels: Vec<Option<Channel>>,
    options: Options,
}

impl Session {
    /// A session for `targets`; nothing is connected until the first capture.
    pub fn new(targets: Vec<Target>, options: Options) -> Result<Session, CaptureError> {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| {
            CaptureError::new(
                format!("cannot start the network runtime: {e}"),
                "check the system's thread and file limits",
            )
        })?;
        let channels = vec![None; targets.len()];
        Ok(Session { runtime, targets, channels, options })
    }

    /// The targets, in order.
    pub fn targets(&self) -> &[Target] {
        &self.targets
    }

    /// Captures every target at once for `options.duration`. Fails as a whole as
    /// soon as any target fails, with that target's error; the other requests are
    /// dropped. Host names are made unique across targets.
    pub fn capture(&mut self) -> Result<Vec<Capture>, CaptureError> {
        let options = self.options.clone();
        let targets = &self.targets;
        let channels = &mut self.channels;
        let mut captures = self.runtime.block_on(async {
            let jobs = targets.iter().zip(channels.iter_mut()).map(|(t, ch)| capture_one(t, ch, &options));
            try_join_all(jobs).await
        })?;
        name_hosts(&mut captures);
        Ok(captures)
    }
}

/// Runs futures concurrently on the current task; their outputs in order, or the
/// first error to arrive (the futures still running are dropped).
async fn try_join_all<T, E, F>(futures: impl Iterator<Item = F>) -> Result<Vec<T>, E>
where
    F: std::future::Future<Output = Result<T, E>>,
{
    use std::task::Poll;
    let mut running: Vec<_> = futures.map(Box::pin).collect();
    let mut out: Vec<Option<T>> = running.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (i, f) in running.iter_mut().enumerate() {
            if out[i].is_none() {
                match f.as_mut().poll(cx) {
                    Poll::Ready(Ok(v)) => out[i] = Some(v),
                    Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                    Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            Poll::Pending
        } else {
            Poll::Ready(Ok(()))
        }
    })
    .await?;
    Ok(out.into_iter().flatten().collect())
}

/// Connects (with retries) and captures one target.
async fn capture_one(target: &Target, channel: &mut Option<Channel>, o: &Options) -> Result<Capture, CaptureError> {
    let start = Instant::now();
    let ch = match channel {
        Some(ch) => ch.clone(),
        None => {
            let ch = connect(target, o).await?;
            *channel = Some(ch.clone());
            ch
        }
    };
    let result = call_profile(target, ch, o).await;
    if result.is_err() {
        // A failed call may have broken the connection; reconnect next time.
        *channel = None;
    }
    let bytes = result?;
    let source = Arc::new(Source::Owned(bytes));
    let space = stepscope_xspace::xplane::decode_xspace(source.clone(), "", &Progress::default())
        .map_err(|e| CaptureError::not_xspace(target, &e.to_string()))?;
    if space.event_count() == 0 {
        return Err(CaptureError::empty(target, o.duration));
    }
    Ok(Capture { target: target.clone(), bytes: source, space, elapsed: start.elapsed() })
}

/// Opens a channel to `target`, trying `1 + retries` times on connection failures.
async fn connect(target: &Target, o: &Options) -> Result<Channel, CaptureError> {
    let endpoint = Endpoint::from_shared(target.uri())
        .map_err(|e| {
            CaptureError::new(format!("{target} is not a usable address ({e})"), "write targets as HOST:PORT")
        })?
        .connect_timeout(o.connect_timeout)
        .tcp_nodelay(true);
    let mut attempt = 0;
    loop {
        let err = match tokio::time::timeout(o.connect_timeout, endpoint.connect()).await {
            Ok(Ok(ch)) => return probe(target, ch, o).await,
            Ok(Err(e)) => classify_connect(target, &e, o.connect_timeout),
            Err(_) => classify_connect(target, &TimedOut, o.connect_timeout),
        };
        if attempt >= o.retries || !err.retryable {
            return Err(err);
        }
        attempt += 1;
        tokio::time::sleep(retry_pause()).await;
    }
}

/// Checks that the peer answers gRPC at all, so that a peer that accepts connections
/// but never answers fails within the connect timeout instead of the capture deadline.
/// It calls a method no server has: a gRPC server answers `Unimplemented` at once.
async fn probe(target: &Target, channel: Channel, o: &Options) -> Result<Channel, CaptureError> {
    let mut grpc = tonic::client::Grpc::new(channel.clone());
    let call = async {
        grpc.ready().await.map_err(|e| tonic::Status::from_error(e.into()))?;
        let path = http::uri::PathAndQuery::from_static(PROBE_PATH);
        let codec = tonic::codec::ProstCodec::<proto::ProfileResponse, proto::ProfileResponse>::default();
        grpc.unary(tonic::Request::new(proto::ProfileResponse::default()), path, codec).await
    };
    match tokio::time::timeout(o.connect_timeout, call).await {
        Err(_) => Err(CaptureError::silent(target, o.connect_timeout)),
        Ok(Ok(_)) => Ok(channel),
        Ok(Err(status)) => match classify_call(target, Stage::Probe, &status, o) {
            None => Ok(channel),
            Some(e) => Err(e),
        },
    }
}

/// A connect that ran out of time.
#[derive(Debug)]
struct TimedOut;

impl std::fmt::Display for TimedOut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("connect timed out")
    }
}

impl std::error::Error for TimedOut {}

/// Calls `Profile` and returns the XSpace bytes.
async fn call_profile(target: &Target, channel: Channel, o: &Options) -> Result<Vec<u8>, CaptureError> {
    let limit = o.max_response_bytes.min(DEFAULT_MAX_RESPONSE_BYTES);
    let mut grpc = tonic::client::Grpc::new(channel).max_decoding_message_size(limit);
    let deadline = o.duration + o.margin;
    let request = proto::ProfileRequest {
        duration_ms: o.duration.as_millis().min(u64::MAX as u128) as u64,
        max_events: 0,
        tools: Vec::new(),
        opts: Some(proto::ProfileOptions {
            include_dataset_ops: false,
            host_tracer_level: o.host_tracer_level,
            device_tracer_level: o.device_tracer_level,
            python_tracer_level: o.python_tracer_level,
            version: 1,
            device_type: 0,
            enable_hlo_proto: true,
            start_timestamp_ns: 0,
            duration_ms: o.duration.as_millis().min(u64::MAX as u128) as u64,
            repository_path: String::new(),
        }),
        repository_root: String::new(),
        session_id: run_name(std::time::SystemTime::now()),
        host_name: target.host.clone(),
        emit_xspace: true,
    };
    let call = async {
        grpc.ready().await.map_err(|e| call_error(target, Stage::Ready, &tonic::Status::from_error(e.into()), o))?;
        let mut req = tonic::Request::new(request);
        req.set_timeout(deadline);
        let path = http::uri::PathAndQuery::from_static(PROFILE_PATH);
        let codec = tonic::codec::ProstCodec::<proto::ProfileRequest, proto::ProfileResponse>::default();
        grpc.unary(req, path, codec).await.map_err(|s| call_error(target, Stage::Call, &s, o))
    };
    let response = match tokio::time::timeout(deadline, call).await {
        Ok(r) => r?.into_inner(),
        Err(_) => return Err(CaptureError::deadline(target, deadline)),
    };
    // JAX sets empty_trace when nothing was recorded (it still sends an XSpace with
    // metadata planes only).
    if response.empty_trace {
        return Err(CaptureError::empty(target, o.duration));
    }
    if response.xspace.is_empty() {
        return Err(CaptureError::no_xspace(target));
    }
    // Without a copy where the received message is no longer shared (it is not, once
    // the call has ended).
    Ok(Vec::from(response.xspace))
}

/// Names each capture's host: the XSpace's host name, else the target's host;
/// made safe for a file name, with `_<port>` added where targets would collide.
fn name_hosts(captures: &mut [Capture]) {
    let base: Vec<String> = captures
        .iter()
        .map(|c| {
            let h = c.space.hostnames.iter().find(|h| !h.trim().is_empty()).cloned().unwrap_or(c.target.host.clone());
            sanitize(&h)
        })
        .collect();
    for (i, c) in captures.iter_mut().enumerate() {
        let shared = base.iter().filter(|b| **b == base[i]).count() > 1;
        c.space.host = if shared { format!("{}_{}", base[i], c.target.port) } else { base[i].clone() };
    }
}

/// Keeps letters, digits, `.`, `-` and `_`; everything else becomes `_`.
fn sanitize(name: &str) -> String {
    let s: String =
        name.chars().map(|c| if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') { c } else { '_' }).collect();
    let s = s.trim_start_matches('.').to_string();
    if s.is_empty() {
        "host".into()
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sanitize_names() {
        assert_eq!(sanitize("worker-0.example.com"), "worker-0.example.com");
        assert_eq!(sanitize("a/b:c d"), "a_b_c_d");
        assert_eq!(sanitize("../x"), "_x");
        assert_eq!(sanitize(""), "host");
        assert_eq!(sanitize("::1"), "__1");
    }
}
