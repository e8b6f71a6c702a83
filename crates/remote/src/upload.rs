//! Writing into a bucket: the files `stepscope tables` made in a local folder, put
//! under a `gs://` or `s3://` prefix, and the Parquet footers of the table files there,
//! read back to count their rows (`tables --index`).
//!
//! - A file is put in one request up to [`UPLOAD_CHUNK_BYTES`], else in parts of that
//!   size (Cloud Storage: a resumable upload; S3: a multipart upload), read from the
//!   file a part at a time: never a whole large file in memory. An object appears whole
//!   or not at all; a multipart upload that fails is aborted.
//! - Files go in the order given, one after another, so a caller that puts an index
//!   last has it appear only once everything it counts is there.

use std::io::Read;
use std::path::Path;

use anyhow::{anyhow, bail, Context};
use object_store::path::Path as Key;
use object_store::{ObjectStoreExt, PutPayload, WriteMultipart};

use crate::{client, encode, explain, request_error, runtime, Client, Url};

/// Bytes of one request's body: a larger file goes in parts of this size (a multiple
/// of 256 KiB, as Cloud Storage's resumable uploads need; at least S3's 5 MiB part).
/// `STEPSCOPE_UPLOAD_CHUNK_BYTES` sets it for Cloud Storage (rounded down to 256 KiB;
/// tests use small parts to go through the resumable path).
pub const UPLOAD_CHUNK_BYTES: usize = 8 << 20;

fn gcs_chunk() -> usize {
    let asked = std::env::var("STEPSCOPE_UPLOAD_CHUNK_BYTES").ok().and_then(|v| v.parse::<usize>().ok());
    let quantum = 256 << 10;
    (asked.unwrap_or(UPLOAD_CHUNK_BYTES) / quantum).max(1) * quantum
}

/// Puts each of `files` (paths relative to `dir`, `/`-separated) at `url`'s key
/// followed by the path, in order; returns the bytes put.
pub fn put_files(dir: &Path, files: &[String], url: &Url) -> anyhow::Result<u64> {
    let client = client(url)?;
    runtime()?.block_on(async {
        let mut total = 0u64;
        for rel in files {
            let key = if url.key.is_empty() { rel.clone() } else { format!("{}/{rel}", url.key) };
            total += put_file(&client, url, &dir.join(rel), &key).await?;
        }
        Ok(total)
    })
}

/// The next part of `file`: up to `buf`'s length, fewer only at its end.
fn read_part(file: &mut std::fs::File, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match file.read(&mut buf[got..])? {
            0 => break,
            n => got += n,
        }
    }
    Ok(got)
}

async fn put_file(client: &Client, url: &Url, path: &Path, key: &str) -> anyhow::Result<u64> {
    let at = url.at(key);
    let mut file = std::fs::File::open(path).with_context(|| format!("cannot read {}", path.display()))?;
    let size = file.metadata().with_context(|| format!("cannot read {}", path.display()))?.len();
    match client {
        Client::S3 { store } => {
            // As written: `Key::from` would encode the `%` of a partition's name again.
            let k = Key::parse(key).map_err(|e| anyhow!("{at}: not a key S3 takes ({e})"))?;
            let mut buf = vec![0u8; UPLOAD_CHUNK_BYTES];
            if size <= UPLOAD_CHUNK_BYTES as u64 {
                let n = read_part(&mut file, &mut buf)?;
                buf.truncate(n);
                store.put(&k, PutPayload::from(buf)).await.map_err(|e| explain(url, key, e))?;
                return Ok(size);
            }
            let upload = store.put_multipart(&k).await.map_err(|e| explain(url, key, e))?;
            let mut parts = WriteMultipart::new_with_chunk_size(upload, UPLOAD_CHUNK_BYTES);
            loop {
                let n = match read_part(&mut file, &mut buf) {
                    Ok(n) => n,
                    Err(e) => {
                        let _ = parts.abort().await;
                        return Err(anyhow!("cannot read {}: {e}", path.display()));
                    }
                };
                if n == 0 {
                    break;
                }
                // At most two parts in flight: memory stays a few parts.
                if let Err(e) = parts.wait_for_capacity(2).await {
                    return Err(explain(url, key, e));
                }
                parts.write(&buf[..n]);
            }
            parts.finish().await.map_err(|e| explain(url, key, e))?;
            Ok(size)
        }
        Client::Gcs { .. } => {
            let chunk = gcs_chunk();
            if size <= chunk as u64 {
                let mut buf = vec![0u8; size as usize];
                read_part(&mut file, &mut buf)?;
                let api = format!("/upload/storage/v1/b/{}/o", encode(&url.bucket));
                let query = [("uploadType", "media".to_string()), ("name", key.to_string())];
                client.gcs_request(url, key, reqwest::Method::POST, &api, &query, &[], buf).await?;
                return Ok(size);
            }
            // Resumable: a session, then the parts, each saying where it lies.
            let api = format!("/upload/storage/v1/b/{}/o", encode(&url.bucket));
            let query = [("uploadType", "resumable".to_string()), ("name", key.to_string())];
            let headers = [("X-Upload-Content-Length", size.to_string())];
            let session =
                (client.gcs_request(url, key, reqwest::Method::POST, &api, &query, &headers, Vec::new()).await?)
                    .location
                    .ok_or_else(|| anyhow!("{at}: the storage service opened no upload session (no Location)"))?;
            let mut buf = vec![0u8; chunk];
            let mut sent = 0u64;
            let mut last = 0u16;
            while sent < size {
                let n = read_part(&mut file, &mut buf)?;
                if n == 0 {
                    bail!("{}: the file shrank while it was put ({sent} of {size} bytes)", path.display());
                }
                let range = format!("bytes {}-{}/{size}", sent, sent + n as u64 - 1);
                let answer = (client.gcs_request(
                    url,
                    key,
                    reqwest::Method::PUT,
                    &session,
                    &[],
                    &[("Content-Range", range)],
                    buf[..n].to_vec(),
                ))
                .await?;
                sent += n as u64;
                last = answer.status;
                if sent < size && answer.status != 308 {
                    bail!("{at}: the storage service ended the upload early (answered {})", answer.status);
                }
            }
            // The last part is answered with the object (200, 201); 308 would mean it
            // still waits for bytes, and no object exists.
            if last == 308 {
                bail!("{at}: the storage service did not finish the upload (it still asks for bytes)");
            }
            Ok(size)
        }
    }
}

/// What a request of an upload answered: its status and `Location` header.
pub(crate) struct Sent {
    pub status: u16,
    pub location: Option<String>,
}

impl Client {
    /// A request of an upload to `target`: a path of the JSON API (`/upload/…`), or a
    /// resumable session's own address.
    #[allow(clippy::too_many_arguments)]
    async fn gcs_request(
        &self,
        url: &Url,
        key: &str,
        method: reqwest::Method,
        target: &str,
        query: &[(&str, String)],
        headers: &[(&str, String)],
        body: Vec<u8>,
    ) -> anyhow::Result<Sent> {
        let Client::Gcs { base, http, .. } = self else { bail!("{url}: not a Cloud Storage bucket") };
        let at = url.at(key);
        let target = if target.starts_with('/') { format!("{base}{target}") } else { target.to_string() };
        let mut req = http.request(method, target).query(query).body(body);
        for (k, v) in headers {
            req = req.header(*k, v);
        }
        let req = self.gcs_authorized(url, key, req).await?;
        let resp = req.send().await.map_err(|e| request_error(url, key, &e))?;
        let status = resp.status().as_u16();
        let location = resp.headers().get("location").and_then(|v| v.to_str().ok()).map(str::to_string);
        match status {
            200..=299 | 308 => Ok(Sent { status, location }),
            401 => bail!("{at}: no valid credentials: {}", crate::login_hint(url.scheme)),
            403 => bail!(
                "{at}: access denied — the credentials in use may not write to bucket {:?}: {}",
                url.bucket,
                crate::login_hint(url.scheme)
            ),
            404 => Err(crate::no_bucket(url, &at)),
            _ => {
                let text = resp.text().await.unwrap_or_default();
                let text: String = text.split_whitespace().collect::<Vec<_>>().join(" ").chars().take(200).collect();
                bail!("{at}: the storage service answered {status}: {text}")
            }
        }
    }
}

/// The objects under `url` (as a folder), each with its size: keys relative to the
/// URL's key.
pub fn objects(url: &Url) -> anyhow::Result<Vec<(String, u64)>> {
    let client = client(url)?;
    let prefix = if url.key.is_empty() { String::new() } else { format!("{}/", url.key) };
    let listed = runtime()?.block_on(client.list(url, &prefix))?;
    Ok(listed.into_iter().filter_map(|o| Some((o.key.strip_prefix(&prefix)?.to_string(), o.size))).collect())
}

/// The last `n` bytes of the object at `rel` (relative to `url`'s key) of size `size`.
pub fn tail(url: &Url, rel: &str, size: u64, n: u64) -> anyhow::Result<bytes::Bytes> {
    let client = client(url)?;
    let key = if url.key.is_empty() { rel.to_string() } else { format!("{}/{rel}", url.key) };
    runtime()?.block_on(client.get_range(url, &key, size.saturating_sub(n)..size))
}

/// Bytes read at each top-level field of an XSpace object while peeking: its key and
/// length, and a plane's id and name where the name is short.
const PEEK_HEAD: u64 = 128;
/// Most top-level fields walked while peeking (an XSpace holds a few dozen planes and
/// host names): past it the file is fetched whole instead.
const MAX_PEEK_FIELDS: usize = 4096;
/// The longest plane name read while peeking.
const MAX_PEEK_NAME: u64 = 4096;
/// The largest plane read while peeking (a host's environment plane is kilobytes): one
/// that claims more is taken as absent, not read.
const MAX_PEEK_PLANE: u64 = 16 << 20;

/// A varint at the start of `b`: its value and length.
fn varint(b: &[u8]) -> Option<(u64, usize)> {
    let mut v = 0u64;
    for (i, byte) in b.iter().enumerate().take(10) {
        v |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Some((v, i + 1));
        }
    }
    None
}

/// The plane called `name` of the XSpace object at `key` of `url`'s bucket, of size
/// `size`, read without fetching the rest: the object's top-level fields are
/// walked with one ranged read of each one's start (a plane's id and name come first),
/// and the plane wanted is read whole. Returned as a one-plane XSpace (what a reader
/// of the file reads of that plane); `None` where the object has no such plane.
pub(crate) fn peek_plane(url: &Url, key: &str, size: u64, name: &str) -> anyhow::Result<Option<Vec<u8>>> {
    let client = client(url)?;
    let key = key.to_string();
    let at = url.at(&key);
    let damaged =
        || anyhow!("{at}: not an XSpace where its fields were walked — the file is damaged; capture it again");
    runtime()?.block_on(async {
        let (mut pos, mut fields) = (0u64, 0usize);
        while pos < size {
            fields += 1;
            if fields > MAX_PEEK_FIELDS {
                return Err(damaged());
            }
            let head = client.get_range(url, &key, pos..size.min(pos + PEEK_HEAD)).await?;
            let (k, kl) = varint(&head).ok_or_else(damaged)?;
            let body = pos + kl as u64;
            pos = match k & 7 {
                0 => body + varint(&head[kl..]).ok_or_else(damaged)?.1 as u64,
                1 => body + 8,
                5 => body + 4,
                2 => {
                    let (len, ll) = varint(&head[kl..]).ok_or_else(damaged)?;
                    let start = body + ll as u64;
                    let end = start.checked_add(len).filter(|e| *e <= size).ok_or_else(damaged)?;
                    if k >> 3 == 1
                        && plane_named(&client, url, &key, &head, (start - pos) as usize, start, end, name).await?
                    {
                        if len > MAX_PEEK_PLANE {
                            return Ok(None);
                        }
                        let plane = client.get_range(url, &key, start..end).await?;
                        let mut out = vec![0x0a];
                        let mut n = len;
                        while n >= 0x80 {
                            out.push((n as u8 & 0x7f) | 0x80);
                            n >>= 7;
                        }
                        out.push(n as u8);
                        out.extend_from_slice(&plane);
                        return Ok(Some(out));
                    }
                    end
                }
                _ => return Err(damaged()),
            };
        }
        Ok(None)
    })
}

/// Whether the plane at `start..end` (its first bytes at `head[from..]`) is called `name`.
#[allow(clippy::too_many_arguments)]
async fn plane_named(
    client: &Client,
    url: &Url,
    key: &str,
    head: &[u8],
    from: usize,
    start: u64,
    end: u64,
    name: &str,
) -> anyhow::Result<bool> {
    // The plane's own fields, in the bytes read; its name is field 2.
    let mut b = head.get(from..).unwrap_or(&[]);
    let mut offset = start;
    loop {
        let Some((k, kl)) = varint(b) else { return Ok(false) };
        match (k >> 3, k & 7) {
            (2, 2) => {
                let Some((len, ll)) = varint(&b[kl..]) else { return Ok(false) };
                if len != name.len() as u64 || len > MAX_PEEK_NAME {
                    return Ok(false);
                }
                let s = offset + (kl + ll) as u64;
                let text = match b.get(kl + ll..kl + ll + len as usize) {
                    Some(t) => bytes::Bytes::copy_from_slice(t),
                    None if s + len <= end => client.get_range(url, key, s..s + len).await?,
                    None => return Ok(false),
                };
                return Ok(text.as_ref() == name.as_bytes());
            }
            (_, 0) => {
                let Some((_, vl)) = varint(&b[kl..]) else { return Ok(false) };
                b = &b[kl + vl..];
                offset += (kl + vl) as u64;
            }
            // The name comes after the id in what XLA writes; anything else first: not
            // worth more reads.
            _ => return Ok(false),
        }
    }
}
