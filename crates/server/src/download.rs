//! `api/export`: the run as a Perfetto trace or gzipped Chrome trace JSON, sent as a
//! download. A Perfetto trace goes gzip-compressed (`Content-Encoding: gzip`, which the
//! browser undoes as it saves) to a client that accepts it: a third of the bytes
//! through an SSH tunnel.
//!
//! The exporter writes into an unnamed temporary file in the system's temporary folder
//! (never into the served folder), which is then streamed to the client in chunks, so
//! neither the server's memory nor the response buffer grows with the trace.

use std::io::{BufWriter, Seek};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::Body;
use axum::http::{header, HeaderValue, Response, StatusCode};
use bytes::Bytes;
use http_body::Frame;
use stepscope_export::{chrome, perfetto};
use tokio::io::AsyncReadExt;
use tokio::sync::mpsc;

use crate::api::{ApiError, Params};
use crate::response::{api_error, respond};
use crate::App;

/// Exports written at once; further requests wait their turn.
pub const MAX_EXPORTS: usize = 2;
/// Bytes read from the temporary file per chunk sent.
const CHUNK_BYTES: usize = 256 * 1024;

#[derive(Clone, Copy)]
enum Format {
    Perfetto,
    Chrome,
}

/// A finished export: the file (at its start), its length and the name to save it as.
struct Export {
    file: std::fs::File,
    bytes: u64,
    file_name: String,
    content_type: &'static str,
    /// `Content-Encoding`, where the bytes are compressed for the transfer only.
    encoding: Option<&'static str>,
}

/// Whether an `Accept-Encoding` header value accepts gzip (a `q=0` refuses it).
pub fn accepts_gzip(value: &str) -> bool {
    value.split(',').any(|part| {
        let mut it = part.split(';').map(str::trim);
        let coding = it.next().unwrap_or("");
        let refused = it.any(|p| p.strip_prefix("q=").is_some_and(|q| q.parse::<f32>().is_ok_and(|q| q <= 0.0)));
        (coding.eq_ignore_ascii_case("gzip") || coding == "*") && !refused
    })
}

pub async fn export(app: Arc<App>, q: Params, gzip: bool) -> Response<Body> {
    let format = match q.str("format").unwrap_or("") {
        "perfetto" => Format::Perfetto,
        "chrome" => Format::Chrome,
        other => return api_error(ApiError::bad(format!("format={other:?}: use perfetto or chrome"))),
    };
    let Ok(_turn) = app.exports.acquire().await else {
        return api_error(ApiError { status: 503, message: "the server is shutting down".into() });
    };
    let made = {
        let app = app.clone();
        tokio::task::spawn_blocking(move || write(&app, &q, format, gzip)).await
    };
    let ex = match made {
        Ok(Ok(ex)) => ex,
        Ok(Err(e)) => return api_error(e),
        Err(e) => return api_error(ApiError { status: 500, message: format!("export failed: {e}") }),
    };
    let (tx, rx) = mpsc::channel(4);
    tokio::spawn(send_file(tokio::fs::File::from_std(ex.file), tx));
    let mut r = respond(StatusCode::OK, ex.content_type, Body::new(ChannelBody(rx)));
    let h = r.headers_mut();
    h.insert(header::CONTENT_LENGTH, HeaderValue::from(ex.bytes));
    if let Some(encoding) = ex.encoding {
        h.insert(header::CONTENT_ENCODING, HeaderValue::from_static(encoding));
    }
    h.insert(header::VARY, HeaderValue::from_static("accept-encoding"));
    if let Ok(v) = HeaderValue::from_str(&format!("attachment; filename=\"{}\"", ex.file_name)) {
        h.insert(header::CONTENT_DISPOSITION, v);
    }
    r
}

/// Writes the export of the requested run into a temporary file; a Perfetto trace
/// gzip-compressed where `gzip`.
fn write(app: &App, q: &Params, format: Format, gzip: bool) -> Result<Export, ApiError> {
    let e = q.entry(app)?;
    let failed = |err: std::io::Error| ApiError {
        status: 500,
        message: format!("cannot write the export to a temporary file: {err} — check the temporary folder (TMPDIR)"),
    };
    let file = tempfile::tempfile().map_err(failed)?;
    let mut out = BufWriter::with_capacity(1 << 20, file);
    let base = file_stem(&e.run.name, q.str("host").filter(|h| !h.is_empty()));
    let mut encoding = None;
    let (file_name, content_type) = match format {
        Format::Perfetto if gzip => {
            let mut gz = flate2::write::GzEncoder::new(&mut out, flate2::Compression::fast());
            perfetto::write_perfetto(&e.profile.hosts, BufWriter::with_capacity(1 << 20, &mut gz)).map_err(failed)?;
            gz.finish().map_err(failed)?;
            encoding = Some("gzip");
            (format!("{base}.pftrace"), "application/octet-stream")
        }
        Format::Perfetto => {
            perfetto::write_perfetto(&e.profile.hosts, &mut out).map_err(failed)?;
            (format!("{base}.pftrace"), "application/octet-stream")
        }
        Format::Chrome => {
            let mut gz = flate2::write::GzEncoder::new(&mut out, flate2::Compression::fast());
            chrome::write_chrome(&e.profile.hosts, BufWriter::with_capacity(1 << 20, &mut gz)).map_err(failed)?;
            gz.finish().map_err(failed)?;
            (format!("{base}.trace.json.gz"), "application/gzip")
        }
    };
    let mut file = out.into_inner().map_err(|err| failed(err.into_error()))?;
    q.changed_files()?;
    let bytes = file.stream_position().map_err(failed)?;
    file.rewind().map_err(failed)?;
    Ok(Export { file, bytes, file_name, content_type, encoding })
}

/// A file name made of the run's and host's names, only `[A-Za-z0-9._-]`.
fn file_stem(run: &str, host: Option<&str>) -> String {
    let clean = |s: &str| -> String {
        s.chars().map(|c| if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') { c } else { '_' }).collect()
    };
    let run = run.strip_suffix(".xplane.pb").or_else(|| run.strip_suffix(".trace.json.gz")).unwrap_or(run);
    let mut stem = clean(run).trim_start_matches('.').to_string();
    if let Some(h) = host {
        stem.push('-');
        stem.push_str(&clean(h));
    }
    if stem.is_empty() {
        stem.push_str("profile");
    }
    stem
}

/// Reads the file in chunks into the channel until it ends or the client goes away.
async fn send_file(mut file: tokio::fs::File, tx: mpsc::Sender<std::io::Result<Bytes>>) {
    loop {
        let mut buf = vec![0u8; CHUNK_BYTES];
        match file.read(&mut buf).await {
            Ok(0) => return,
            Ok(n) => {
                buf.truncate(n);
                if tx.send(Ok(Bytes::from(buf))).await.is_err() {
                    return;
                }
            }
            Err(e) => {
                let _ = tx.send(Err(e)).await;
                return;
            }
        }
    }
}

/// A response body fed by a channel of chunks.
pub(crate) struct ChannelBody(pub(crate) mpsc::Receiver<std::io::Result<Bytes>>);

impl http_body::Body for ChannelBody {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        self.0.poll_recv(cx).map(|chunk| chunk.map(|r| r.map(Frame::data)))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn gzip_is_accepted_unless_refused() {
        use super::accepts_gzip;
        assert!(accepts_gzip("gzip, deflate, br, zstd"));
        assert!(accepts_gzip("br;q=1.0, GZIP;q=0.5"));
        assert!(accepts_gzip("*"));
        assert!(!accepts_gzip("gzip;q=0, br"));
        assert!(!accepts_gzip("identity"));
        assert!(!accepts_gzip(""));
    }

    #[test]
    fn file_names_are_plain() {
        assert_eq!(super::file_stem("2026_11_21_22_29_17", None), "2026_11_21_22_29_17");
        assert_eq!(super::file_stem("tpu_inference_2.xplane.pb", Some("h 1")), "tpu_inference_2-h_1");
        assert_eq!(super::file_stem("a\"b/../c", None), "a_b_.._c");
        assert_eq!(super::file_stem("..", None), "profile");
    }
}
