//! Log directories in object storage: `gs://bucket/path` and `s3://bucket/path`.
//!
//! [`mirror`] brings the profile files under a URL (a log directory, a run folder or
//! one file) into a local cache folder that keeps the bucket's layout, and returns the
//! local path that stands for the URL; everything else in stepscope then reads that
//! path as it reads any local one (memory-mapped), so a remote run gives the same
//! output as a local copy.
//!
//! - Reading lists and reads; nothing is written to a bucket but by `stepscope tables -o
//!   gs://…` ([`put_files`]: the tables, each object put whole, the index last).
//! - One host of a run read alone (`--host`) is the only file of its run fetched; of the
//!   others, only the plane that aligns the hosts' clocks is read, in place
//!   ([`Listed::peek`]).
//! - Only profile files are fetched (`.xplane.pb`, trace JSON, memory profiles), each
//!   in 8 MiB ranged GETs, 8 at a time over all files: at most 64 MiB in flight, written
//!   straight to their place in the file, never a whole file in memory.
//! - A file already in the cache with the object's size and modification time is not
//!   fetched again; a partial one (`.part`) never stands for a file.
//! - Credentials and endpoints as each ecosystem sets them: Google's Application
//!   Default Credentials (`GOOGLE_APPLICATION_CREDENTIALS`, `gcloud auth
//!   application-default login`) and `STORAGE_EMULATOR_HOST`; AWS's environment
//!   (`AWS_ACCESS_KEY_ID`, …), its shared files with `AWS_PROFILE`, `AWS_ENDPOINT_URL`
//!   and `AWS_ALLOW_HTTP`.
//! - Every request has a time limit (`STEPSCOPE_REMOTE_TIMEOUT_S`, default 30 s) and two
//!   retries, so a stalled connection ends in an error, not a hang.

use std::fs::File;
use std::io::IsTerminal;
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Once};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{anyhow, bail, Context};
use futures_util::{StreamExt, TryStreamExt};
use object_store::aws::AmazonS3Builder;
use object_store::gcp::{GoogleCloudStorage, GoogleCloudStorageBuilder};
use object_store::path::Path as Key;
use object_store::{BackoffConfig, ClientOptions, ObjectMeta, ObjectStore, ObjectStoreExt, RetryConfig};

mod upload;
pub use upload::{objects, put_files, tail, UPLOAD_CHUNK_BYTES};

/// Bytes one ranged GET asks for.
const CHUNK_BYTES: u64 = 8 << 20;
/// Ranged GETs in flight at once.
const PARALLEL_GETS: usize = 8;
/// Most objects a listing may name: past this a listing is taken to be one without end.
const MAX_LISTED: usize = 1_000_000;
/// Most pages of one listing, and most pages in a row without an object: a service
/// that answers each page with a new token would otherwise be listed for ever.
const MAX_PAGES: usize = 20_000;
const MAX_EMPTY_PAGES: usize = 100;
/// The longest page token sent back (Cloud Storage's are a few hundred bytes).
const MAX_TOKEN_BYTES: usize = 16 << 10;
/// Most bytes of one JSON answer (a listing page, an object's metadata).
const MAX_JSON_BYTES: usize = 64 << 20;
/// The largest object size believed: a listing naming a larger one is wrong.
const MAX_OBJECT_BYTES: u64 = 256 << 30;

/// Where a remote URL points.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Url {
    pub scheme: Scheme,
    pub bucket: String,
    /// The key or key prefix, without leading or trailing `/`.
    pub key: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scheme {
    Gcs,
    S3,
}

impl Scheme {
    fn prefix(self) -> &'static str {
        match self {
            Scheme::Gcs => "gs",
            Scheme::S3 => "s3",
        }
    }
}

impl Url {
    /// `gs://BUCKET/KEY` (or `s3://…`) of a key of this URL's bucket.
    fn at(&self, key: &str) -> String {
        format!("{}://{}/{key}", self.scheme.prefix(), self.bucket)
    }
}

impl std::fmt::Display for Url {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}://{}/{}", self.scheme.prefix(), self.bucket, self.key)
    }
}

/// `gs://…` or `s3://…` as a [`Url`]; `None` for anything else (a local path).
pub fn parse(s: &str) -> Option<anyhow::Result<Url>> {
    let (scheme, rest) = if let Some(r) = s.strip_prefix("gs://") {
        (Scheme::Gcs, r)
    } else if let Some(r) = s.strip_prefix("s3://") {
        (Scheme::S3, r)
    } else {
        return None;
    };
    let (bucket, key) = rest.split_once('/').unwrap_or((rest, ""));
    if bucket.is_empty() {
        return Some(Err(anyhow!("{s}: no bucket — write {}://BUCKET/PATH", scheme.prefix())));
    }
    if key.split('/').any(|part| part == ".." || part == ".") {
        return Some(Err(anyhow!(
            "{s}: `.` and `..` are not folders in a bucket — write the path without them ({}://BUCKET/PATH)",
            scheme.prefix()
        )));
    }
    Some(Ok(Url { scheme, bucket: bucket.to_string(), key: key.trim_matches('/').to_string() }))
}

/// The default cache folder: `$XDG_CACHE_HOME/stepscope/remote`, else
/// `~/.cache/stepscope/remote`, else one under the system's temporary folder.
pub fn default_cache() -> PathBuf {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").filter(|v| !v.is_empty()).map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir);
    base.join("stepscope").join("remote")
}

/// Files a profile reader may want, named exactly: what discovery reads, and nothing
/// else (not checkpoints or TensorBoard's event files).
fn is_profile_file(key: &str) -> bool {
    let name = key.rsplit('/').next().unwrap_or(key);
    [".xplane.pb", ".trace.json.gz", ".trace.json", ".json.gz", ".json", ".prof", ".pprof", ".pb.gz"]
        .iter()
        .any(|ext| name.ends_with(ext))
}

/// Files of a listing worth fetching: profiles by the names JAX gives them, device
/// memory profiles, and JSON only inside a run folder (`plugins/profile/RUN/`) — not
/// `saved_model.pb`, nor the results or configs a job saves beside its profiles.
fn is_listed_profile(key: &str) -> bool {
    let name = key.rsplit('/').next().unwrap_or(key);
    let in_run = key.contains("plugins/profile/");
    name.ends_with(".xplane.pb")
        || is_jax_trace_name(name)
        || name.ends_with(".prof")
        || name.ends_with(".pprof")
        || (name.ends_with(".pb.gz") && !name.contains("tfevents"))
        || (in_run && (name.ends_with(".json") || name.ends_with(".json.gz")))
}

/// The names JAX gives its trace JSON (`HOST.trace.json.gz`, `perfetto_trace.json.gz`),
/// as discovery knows them.
fn is_jax_trace_name(name: &str) -> bool {
    name.ends_with(".trace.json.gz") || name.ends_with(".trace.json") || name.starts_with("perfetto_trace.json")
}

/// True for a key whose every `/`-separated part is a plain name: joined to the cache
/// folder it stays inside it.
fn is_plain_key(key: &str) -> bool {
    key.split('/').all(|part| !part.is_empty() && part != "." && part != "..") && !key.contains('\0')
}

/// Brings the profile files under `url` into `cache` (as `cache/gs|s3/BUCKET/KEY…`)
/// and returns the local path standing for `url`. `progress` draws a bar on stderr
/// once the download has taken a second (a line at the end where stderr is no
/// terminal).
pub fn mirror(url: &Url, cache: &Path, progress: bool) -> anyhow::Result<PathBuf> {
    list(url)?.fetch(cache, |_| true, progress)
}

/// The profile files under a URL, as listed (nothing fetched yet).
pub struct Listed {
    url: Url,
    objects: Vec<Object>,
}

/// Lists the profile files under `url` (or the one it names): an error when there is
/// none.
pub fn list(url: &Url) -> anyhow::Result<Listed> {
    let objects = runtime()?.block_on(list_async(url))?;
    Ok(Listed { url: url.clone(), objects })
}

/// The tables folder `stepscope tables -o URL` wrote at `url`, listed (its manifest
/// `manifest` and its `.parquet` files), when there is one; `None` where `url` holds
/// no such manifest.
pub fn list_tables(url: &Url, manifest: &str) -> anyhow::Result<Option<Listed>> {
    if !url.key.is_empty() && !is_plain_key(&url.key) {
        bail!("{url}: the path has an empty, `.` or `..` part — write it as the bucket lists it");
    }
    let client = client(url)?;
    let prefix = if url.key.is_empty() { String::new() } else { format!("{}/", url.key) };
    let index = format!("{prefix}{manifest}");
    let rt = runtime()?;
    // The manifest alone first: a log directory, which has none, is not listed twice.
    if rt.block_on(client.object(url, &index))?.is_none() {
        return Ok(None);
    }
    let all = rt.block_on(client.list(url, &prefix))?;
    let objects =
        (all.into_iter()).filter(|o| is_plain_key(&o.key) && (o.key == index || o.key.ends_with(".parquet"))).collect();
    Ok(Some(Listed { url: url.clone(), objects }))
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the download runtime")
}

async fn list_async(url: &Url) -> anyhow::Result<Vec<Object>> {
    if !url.key.is_empty() && !is_plain_key(&url.key) {
        bail!("{url}: the path has an empty, `.` or `..` part — write it as the bucket lists it");
    }
    let client = client(url)?;
    // One object (a file named by the URL), or every object under the URL as a folder.
    if let Some(object) = client.exact(url).await? {
        return Ok(vec![object]);
    }
    let prefix = if url.key.is_empty() { String::new() } else { format!("{}/", url.key) };
    let all = client.list(url, &prefix).await?;
    let found = all.len();
    // A key that would leave its folder in the cache (`..`, `/x`) is not fetched.
    let wanted: Vec<Object> = all.into_iter().filter(|o| is_listed_profile(&o.key) && is_plain_key(&o.key)).collect();
    if wanted.is_empty() && found == 0 && is_profile_file(&url.key) {
        return Err(no_object(url, &url.to_string()));
    }
    if wanted.is_empty() {
        bail!(
            "{url}: no profile files there ({found} other objects) — point at the log directory jax.profiler.trace wrote (list it with `{}`)",
            list_hint(url)
        );
    }
    Ok(wanted)
}

impl Listed {
    /// True when the URL names one object (a file), not a folder.
    pub fn is_one_object(&self) -> bool {
        self.objects.len() == 1 && self.objects[0].key == self.url.key
    }

    /// Makes every listed file in `dir` (as `dir/KEY`), empty but of its size and
    /// time (sparse: no disk is used), so that the listing can be searched for runs
    /// as a folder is, without fetching anything; returns the path standing for the URL.
    ///
    /// Discovery reads the first bytes of a JSON file of another name than JAX gives
    /// its traces, to tell a trace from other JSON: those are fetched into `cache`
    /// first, and copied whole.
    pub fn placeholders(&self, dir: &Path, cache: &Path) -> anyhow::Result<PathBuf> {
        let read_by_discovery = |key: &str| {
            let name = key.rsplit('/').next().unwrap_or(key);
            (name.ends_with(".json") || name.ends_with(".json.gz")) && !is_jax_trace_name(name)
        };
        if self.objects.iter().any(|o| read_by_discovery(&o.key)) {
            self.fetch(cache, read_by_discovery, true)?;
        }
        for o in &self.objects {
            let path = dir.join(&o.key);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent).with_context(|| format!("cannot create {}", parent.display()))?;
            }
            if read_by_discovery(&o.key) {
                std::fs::copy(self.cached_path(cache, &o.key), &path)
                    .with_context(|| format!("cannot copy {} for the listing", o.key))?;
                continue;
            }
            let f = File::create(&path).with_context(|| format!("cannot create {}", path.display()))?;
            f.set_len(o.size.min(MAX_OBJECT_BYTES)).with_context(|| format!("cannot size {}", path.display()))?;
            f.set_modified(o.modified).with_context(|| format!("cannot date {}", path.display()))?;
        }
        Ok(if self.url.key.is_empty() { dir.to_path_buf() } else { dir.join(&self.url.key) })
    }

    /// Fetches the listed files whose key `wanted` takes into `cache` (those not
    /// cached already); returns the local path standing for the URL.
    pub fn fetch(&self, cache: &Path, wanted: impl Fn(&str) -> bool, progress: bool) -> anyhow::Result<PathBuf> {
        let url = &self.url;
        let local_root = cache.join(url.scheme.prefix()).join(&url.bucket);
        let local = if url.key.is_empty() { local_root.clone() } else { local_root.join(&url.key) };
        let mut jobs = Vec::new();
        for object in self.objects.iter().filter(|o| wanted(&o.key)) {
            let target = local_root.join(&object.key);
            if !is_cached(&target, object) {
                jobs.push((object.clone(), target));
            }
        }
        if jobs.is_empty() {
            return Ok(local);
        }
        let client = client(url)?;
        let total: u64 = jobs.iter().map(|(o, _)| o.size).sum();
        let done = Arc::new(AtomicU64::new(0));
        let (finished, failed) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicBool::new(false)));
        let bar = (progress && total > 0).then(|| {
            let (done, finished, failed, what) = (done.clone(), finished.clone(), failed.clone(), url.to_string());
            std::thread::spawn(move || draw_progress(&what, total, &done, &finished, &failed))
        });
        let result = runtime().and_then(|rt| rt.block_on(fetch_all(&client, url, &jobs, &done)));
        if result.is_err() {
            // The error is the one line: no "downloaded" line beside it.
            failed.store(true, Ordering::Relaxed);
        }
        finished.store(true, Ordering::Relaxed);
        if let Some(bar) = bar {
            let _ = bar.join();
        }
        result?;
        Ok(local)
    }

    /// The plane called `plane` of the listed XSpace file at `key`, read with ranged
    /// reads of the file's field starts (none of the rest is fetched), as a one-plane
    /// XSpace; `None` where it has none. Written to `cache` under `peek/` (kept while
    /// the object's size and time are the same) and its path returned.
    pub fn peek(&self, cache: &Path, key: &str, plane: &str) -> anyhow::Result<PathBuf> {
        let object = (self.objects.iter().find(|o| o.key == key))
            .ok_or_else(|| anyhow!("{}: not in the listing", self.url.at(key)))?;
        let name: String = plane.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).collect();
        let path =
            cache.join("peek").join(self.url.scheme.prefix()).join(&self.url.bucket).join(format!("{key}.{name}"));
        if std::fs::metadata(&path).and_then(|m| m.modified()).ok() == Some(object.modified) {
            return Ok(path);
        }
        let bytes = upload::peek_plane(&self.url, key, object.size, plane)?.unwrap_or_default();
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).with_context(|| format!("cannot create {}", parent.display()))?;
        }
        // Whole or not at all, dated as the object so that a new capture is peeked again.
        let part = path.with_extension("part");
        new_part(&part)
            .and_then(|mut f| std::io::Write::write_all(&mut f, &bytes))
            .with_context(|| format!("cannot write {}", part.display()))?;
        open_part(&part)
            .and_then(|f| f.set_modified(object.modified))
            .with_context(|| format!("cannot date {}", part.display()))?;
        std::fs::rename(&part, &path).with_context(|| format!("cannot write {}", path.display()))?;
        Ok(path)
    }

    /// `gs://BUCKET` or `s3://BUCKET`.
    pub fn bucket_url(&self) -> String {
        format!("{}://{}", self.url.scheme.prefix(), self.url.bucket)
    }

    /// The local path in `cache` of the object at `key`.
    pub fn cached_path(&self, cache: &Path, key: &str) -> PathBuf {
        cache.join(self.url.scheme.prefix()).join(&self.url.bucket).join(key)
    }
}

/// An object as the cache needs it.
#[derive(Clone, Debug)]
struct Object {
    key: String,
    size: u64,
    modified: SystemTime,
}

impl Object {
    fn of(meta: ObjectMeta) -> Object {
        let t = meta.last_modified;
        let modified = system_time(t.timestamp(), t.timestamp_subsec_nanos());
        Object { key: meta.location.to_string(), size: meta.size, modified }
    }
}

fn system_time(secs: i64, nanos: u32) -> SystemTime {
    let base = if secs >= 0 {
        SystemTime::UNIX_EPOCH + Duration::from_secs(secs as u64)
    } else {
        SystemTime::UNIX_EPOCH - Duration::from_secs(secs.unsigned_abs())
    };
    base + Duration::from_nanos(u64::from(nanos))
}

/// A bucket's client: S3 through object_store; Cloud Storage through its JSON API
/// (what Google's own clients and the emulators speak; object_store's GCS client
/// speaks the XML API), with object_store finding its credentials (Application
/// Default Credentials, service-account keys, the metadata server).
enum Client {
    Gcs { gcs: GoogleCloudStorage, base: String, http: reqwest::Client, oauth: bool },
    S3 { store: Arc<dyn ObjectStore> },
}

impl Client {
    /// The object named exactly by the URL, when there is one (not for a folder).
    async fn exact(&self, url: &Url) -> anyhow::Result<Option<Object>> {
        if url.key.is_empty() || !is_profile_file(&url.key) {
            return Ok(None);
        }
        self.object(url, &url.key).await
    }

    /// The object at `key` of `url`'s bucket, where there is one.
    async fn object(&self, url: &Url, key: &str) -> anyhow::Result<Option<Object>> {
        match self {
            Client::S3 { store } => match store.head(&Key::from(key)).await {
                Ok(meta) => Ok(Some(Object::of(meta))),
                Err(object_store::Error::NotFound { .. }) => Ok(None),
                Err(e) => Err(explain(url, key, e)),
            },
            Client::Gcs { .. } => {
                let path = format!("/storage/v1/b/{}/o/{}", encode(&url.bucket), encode(key));
                match self.gcs_json(url, key, &path, &[]).await? {
                    Some(v) => Ok(Some(gcs_object(url, &v)?)),
                    None => Ok(None),
                }
            }
        }
    }

    /// Every object whose key starts with `prefix`.
    async fn list(&self, url: &Url, prefix: &str) -> anyhow::Result<Vec<Object>> {
        match self {
            Client::S3 { store } => {
                let prefix = (!prefix.is_empty()).then(|| Key::from(prefix));
                let mut listed = store.list(prefix.as_ref());
                let mut out = Vec::new();
                while let Some(item) = listed.next().await {
                    if out.len() >= MAX_LISTED {
                        return Err(too_many_listed(url));
                    }
                    match item {
                        Ok(meta) => out.push(Object::of(meta)),
                        // A key object_store will not name (`..`, `//`): its listing page
                        // is lost with it, so the listing cannot be trusted.
                        Err(e @ object_store::Error::InvalidPath { .. }) => bail!(
                            "{url}: the bucket holds a key that is no plain path ({}) — rename that object, or point at a folder without it",
                            one_line(&e)
                        ),
                        Err(e) => return Err(explain(url, &url.key, e)),
                    }
                }
                Ok(out)
            }
            Client::Gcs { .. } => {
                let path = format!("/storage/v1/b/{}/o", encode(&url.bucket));
                let mut out = Vec::new();
                let mut page: Option<String> = None;
                // The tokens seen, by hash: a token repeated means a listing without end.
                let mut seen_tokens = std::collections::HashSet::new();
                let (mut pages, mut empty) = (0usize, 0usize);
                loop {
                    pages += 1;
                    let mut query = vec![("prefix", prefix.to_string())];
                    if let Some(p) = page.take() {
                        query.push(("pageToken", p));
                    }
                    let Some(v) = self.gcs_json(url, prefix, &path, &query).await? else {
                        return Err(no_bucket(url, &url.to_string()));
                    };
                    let before = out.len();
                    for item in v.get("items").and_then(|i| i.as_array()).into_iter().flatten() {
                        out.push(gcs_object(url, item)?);
                    }
                    empty = if out.len() == before { empty + 1 } else { 0 };
                    if out.len() > MAX_LISTED {
                        return Err(too_many_listed(url));
                    }
                    match v.get("nextPageToken").and_then(|t| t.as_str()) {
                        Some(t) if !t.is_empty() => {
                            let endless = |why: String| {
                                anyhow!(
                                    "{url}: the storage service's listing does not end ({why}) — check \
                                     STORAGE_EMULATOR_HOST points at Cloud Storage or a real emulator"
                                )
                            };
                            if t.len() > MAX_TOKEN_BYTES {
                                return Err(endless(format!("a page token of {} bytes", t.len())));
                            }
                            if pages >= MAX_PAGES || empty >= MAX_EMPTY_PAGES {
                                return Err(endless(format!("{pages} pages, the last {empty} of them empty")));
                            }
                            let hash = {
                                use std::hash::{Hash, Hasher};
                                let mut h = std::collections::hash_map::DefaultHasher::new();
                                t.hash(&mut h);
                                h.finish()
                            };
                            if !seen_tokens.insert(hash) {
                                bail!(
                                    "{url}: the storage service sent the same page token twice ({:?}), so its listing \
                                     never ends — check STORAGE_EMULATOR_HOST points at Cloud Storage or a real emulator",
                                    t.chars().take(40).collect::<String>()
                                );
                            }
                            page = Some(t.to_string());
                        }
                        _ => return Ok(out),
                    }
                }
            }
        }
    }

    /// Bytes `range` of object `key`.
    async fn get_range(&self, url: &Url, key: &str, range: Range<u64>) -> anyhow::Result<bytes::Bytes> {
        match self {
            // The key as listed (`Key::from` would encode a `%` in it again).
            Client::S3 { store } => {
                let k = Key::parse(key).unwrap_or_else(|_| Key::from(key));
                store.get_range(&k, range).await.map_err(|e| explain(url, key, e))
            }
            Client::Gcs { .. } => {
                let path = format!("/download/storage/v1/b/{}/o/{}", encode(&url.bucket), encode(key));
                let resp = self
                    .gcs_get(url, key, &path, &[("alt", "media".to_string())], Some(&range))
                    .await?
                    .ok_or_else(|| anyhow!("{}: the object is gone — run the command again", url.at(key)))?;
                Ok(resp)
            }
        }
    }

    /// `req` with the bearer token of the credentials in use (none for an emulator).
    async fn gcs_authorized(
        &self,
        url: &Url,
        key: &str,
        req: reqwest::RequestBuilder,
    ) -> anyhow::Result<reqwest::RequestBuilder> {
        match self {
            Client::Gcs { gcs, oauth: true, .. } => {
                let token = gcs.credentials().get_credential().await.map_err(|e| explain(url, key, e))?;
                Ok(req.bearer_auth(&token.bearer))
            }
            _ => Ok(req),
        }
    }

    /// A GET of the Cloud Storage JSON API, parsed: the answer, or `None` for a 404.
    async fn gcs_json(
        &self,
        url: &Url,
        key: &str,
        path: &str,
        query: &[(&str, String)],
    ) -> anyhow::Result<Option<serde_json::Value>> {
        let Some(body) = self.gcs_get(url, key, path, query, None).await? else { return Ok(None) };
        serde_json::from_slice(&body)
            .map(Some)
            .map_err(|e| anyhow!("{}: the storage service sent what is not JSON ({e})", url.at(key)))
    }

    /// A GET of the Cloud Storage JSON API (of `range` of the answer when given): the
    /// answer's bytes, or `None` for a 404.
    async fn gcs_get(
        &self,
        url: &Url,
        key: &str,
        path: &str,
        query: &[(&str, String)],
        range: Option<&Range<u64>>,
    ) -> anyhow::Result<Option<bytes::Bytes>> {
        let Client::Gcs { base, http, .. } = self else { bail!("{url}: not a Cloud Storage bucket") };
        let at = url.at(key);
        let mut req = http.get(format!("{base}{path}")).query(query);
        if let Some(r) = range {
            req = req.header("Range", format!("bytes={}-{}", r.start, r.end.saturating_sub(1)));
        }
        let req = self.gcs_authorized(url, key, req).await?;
        let mut resp = req.send().await.map_err(|e| request_error(url, key, &e))?;
        let status = resp.status().as_u16();
        // Never more than was asked for: a body without end (or a whole object sent
        // for a range) is cut where it passes the limit.
        let limit = range.map_or(MAX_JSON_BYTES, |r| (r.end - r.start) as usize);
        let mut body = Vec::with_capacity(limit.min(CHUNK_BYTES as usize));
        while let Some(chunk) = resp.chunk().await.map_err(|e| request_error(url, key, &e))? {
            if body.len() + chunk.len() > limit {
                match range {
                    Some(r) => bail!(
                        "{at}: the storage service ignored Range (asked for bytes {}..{}, it sent more) — \
                         point STORAGE_EMULATOR_HOST at Cloud Storage or an emulator that keeps Range",
                        r.start,
                        r.end
                    ),
                    None => bail!(
                        "{at}: the storage service's answer (a listing or an object's metadata) is over {} MiB, \
                         which no listing page is — check STORAGE_EMULATOR_HOST",
                        MAX_JSON_BYTES >> 20
                    ),
                }
            }
            body.extend_from_slice(&chunk);
        }
        let body = bytes::Bytes::from(body);
        match status {
            200..=299 => Ok(Some(body)),
            404 => Ok(None),
            401 => bail!("{at}: no valid credentials: {}", login_hint(url.scheme)),
            403 => Err(denied(url, &at)),
            _ => {
                let text = String::from_utf8_lossy(&body);
                let text: String = text.split_whitespace().collect::<Vec<_>>().join(" ").chars().take(200).collect();
                bail!("{at}: the storage service answered {status}: {text}")
            }
        }
    }
}

/// A JSON API object resource as an [`Object`].
fn gcs_object(url: &Url, v: &serde_json::Value) -> anyhow::Result<Object> {
    let key = v.get("name").and_then(|n| n.as_str()).unwrap_or_default().to_string();
    let size = v.get("size").and_then(|s| s.as_str().and_then(|s| s.parse().ok()).or_else(|| s.as_u64()));
    let updated = v.get("updated").and_then(|u| u.as_str()).and_then(|u| chrono::DateTime::parse_from_rfc3339(u).ok());
    match (size, updated) {
        (Some(size), Some(t)) if !key.is_empty() => {
            Ok(Object { key, size, modified: system_time(t.timestamp(), t.timestamp_subsec_nanos()) })
        }
        _ => bail!("{}: the storage service described the object without a size or time", url.at(&key)),
    }
}

/// Percent-encoding of a path segment of the JSON API.
fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn request_error(url: &Url, key: &str, e: &reqwest::Error) -> anyhow::Error {
    let at = url.at(key);
    if e.is_timeout() {
        timed_out(&at)
    } else if e.is_connect() {
        cannot_connect(url, &at, &format!(" ({})", one_line(e)))
    } else if e.is_builder() {
        anyhow!(
            "{at}: the endpoint address is not a URL ({}) — set {} as http://HOST:PORT",
            one_line(e),
            endpoint_variable(url.scheme)
        )
    } else {
        anyhow!("{at}: {}", one_line(e))
    }
}

fn too_many_listed(url: &Url) -> anyhow::Error {
    anyhow!("{url}: the listing names more than {MAX_LISTED} objects — point at the log directory of one job")
}

fn timed_out(at: &str) -> anyhow::Error {
    anyhow!("{at}: no answer in time — check the network or the endpoint; STEPSCOPE_REMOTE_TIMEOUT_S sets the limit")
}

/// `detail`: why, as ` (…)`, or empty.
fn cannot_connect(url: &Url, at: &str, detail: &str) -> anyhow::Error {
    let endpoint = match url.scheme {
        Scheme::Gcs => "STORAGE_EMULATOR_HOST",
        Scheme::S3 => "AWS_ENDPOINT_URL",
    };
    anyhow!("{at}: cannot connect{detail} — check the network or the endpoint ({endpoint})")
}

fn no_bucket(url: &Url, at: &str) -> anyhow::Error {
    anyhow!("{at}: no bucket named {:?} — check the bucket's name ({})", url.bucket, list_hint(url))
}

fn no_object(url: &Url, at: &str) -> anyhow::Error {
    anyhow!("{at}: no such object — check the path ({})", list_hint(url))
}

fn login_hint(scheme: Scheme) -> &'static str {
    match scheme {
        Scheme::Gcs => "run `gcloud auth application-default login`, or set GOOGLE_APPLICATION_CREDENTIALS to a service-account key file",
        Scheme::S3 => "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE to a profile of ~/.aws/credentials",
    }
}

/// True when `target` holds the object already: same size, same modification time.
fn is_cached(target: &Path, object: &Object) -> bool {
    let Ok(m) = std::fs::metadata(target) else { return false };
    m.len() == object.size && m.modified().ok() == Some(object.modified)
}

/// Fetches every job's object into `TARGET.part` in ranged GETs, [`PARALLEL_GETS`] at
/// a time over all of them, then renames each complete file into place. A part file
/// is open only while a piece is written to it, so any number of objects is fetched
/// within the open-file limit; on failure no part file is left.
async fn fetch_all(
    client: &Client,
    url: &Url,
    jobs: &[(Object, PathBuf)],
    done: &Arc<AtomicU64>,
) -> anyhow::Result<()> {
    let result = fetch_parts(client, url, jobs, done).await;
    for (object, target) in jobs {
        let part = part_path(target);
        if result.is_err() {
            let _ = std::fs::remove_file(&part);
            continue;
        }
        let dated = open_part(&part).and_then(|f| {
            f.sync_all()?;
            f.set_modified(object.modified)
        });
        dated.with_context(|| format!("cannot date {}", part.display()))?;
        std::fs::rename(&part, target).with_context(|| format!("cannot move {} into place", part.display()))?;
    }
    result
}

/// A part file of the cache made anew (one left by a killed run removed first): never
/// a link or anything else found at its name written through (`O_EXCL`).
fn new_part(part: &Path) -> std::io::Result<File> {
    match std::fs::remove_file(part) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    File::options().write(true).create_new(true).open(part)
}

/// A part file of the cache opened again to write: a link put at its name meanwhile
/// is refused (`O_NOFOLLOW`), not written through.
fn open_part(part: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    File::options().write(true).custom_flags(libc::O_NOFOLLOW).open(part)
}

/// Makes each job's part file, sized, and fills it.
async fn fetch_parts(
    client: &Client,
    url: &Url,
    jobs: &[(Object, PathBuf)],
    done: &Arc<AtomicU64>,
) -> anyhow::Result<()> {
    for (meta, target) in jobs {
        if meta.size > MAX_OBJECT_BYTES {
            bail!(
                "{}: listed with a size of {} bytes, more than any profile ({} GiB) — the listing is wrong; \
                 check the bucket or STORAGE_EMULATOR_HOST",
                url.at(&meta.key),
                meta.size,
                MAX_OBJECT_BYTES >> 30
            );
        }
        let part = part_path(target);
        if let Some(dir) = part.parent() {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create the cache folder {}", dir.display()))?;
        }
        let file = new_part(&part).with_context(|| format!("cannot write {} in the cache", part.display()))?;
        file.set_len(meta.size).with_context(|| format!("cannot size {}", part.display()))?;
    }
    let pieces = jobs.iter().flat_map(|(meta, target)| {
        let starts = (0..meta.size).step_by(CHUNK_BYTES as usize);
        starts.map(move |at| (meta, part_path(target), at..(at + CHUNK_BYTES).min(meta.size)))
    });
    let gets = futures_util::stream::iter(pieces.map(|(object, part, range)| {
        let done = done.clone();
        async move {
            let bytes = client.get_range(url, &object.key, range.clone()).await?;
            if bytes.len() as u64 != range.end - range.start {
                bail!("{}: the object changed while it was read — run the command again", url.at(&object.key));
            }
            let at = range.start;
            let written =
                tokio::task::spawn_blocking(move || open_part(&part).and_then(|f| f.write_all_at(&bytes, at))).await;
            written.context("a cache write was cancelled")?.context("cannot write to the cache")?;
            done.fetch_add(range.end - range.start, Ordering::Relaxed);
            Ok(())
        }
    }))
    .buffer_unordered(PARALLEL_GETS);
    gets.try_collect::<Vec<()>>().await.map(|_| ())
}

fn part_path(target: &Path) -> PathBuf {
    let mut name = target.file_name().unwrap_or_default().to_os_string();
    name.push(".part");
    target.with_file_name(name)
}

fn list_hint(url: &Url) -> String {
    match url.scheme {
        Scheme::Gcs => format!("gcloud storage ls {url}"),
        Scheme::S3 => format!("aws s3 ls {url}/"),
    }
}

/// An object-store error as one line naming the bucket, the key and the fix.
fn explain(url: &Url, key: &str, e: object_store::Error) -> anyhow::Error {
    let at = url.at(key);
    let login = login_hint(url.scheme);
    let text = one_line(&e);
    let has = |words: &[&str]| words.iter().any(|w| text.contains(w));
    if is_missing_bucket(&text) {
        return no_bucket(url, &at);
    }
    // No credentials set: the client asked the cloud's instance metadata service
    // (there is none here), or found no key file.
    if has(&["169.254.169.254", "metadata.google.internal"]) {
        return anyhow!("{at}: no credentials: {login}");
    }
    match e {
        object_store::Error::NotFound { .. } => no_object(url, &at),
        object_store::Error::Unauthenticated { .. } => anyhow!("{at}: no valid credentials: {login}"),
        object_store::Error::PermissionDenied { .. } => denied(url, &at),
        _ if has(&["InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied", "403 Forbidden", "ExpiredToken"]) => {
            denied(url, &at)
        }
        _ if has(&["timed out", "deadline", "Timeout"]) => timed_out(&at),
        _ if has(&["Connection refused", "tcp connect error", "dns error"]) => cannot_connect(url, &at, ""),
        _ if has(&["credential", "Credential"]) => anyhow!("{at}: no credentials: {login} ({text})"),
        _ if has(&["URL scheme is not allowed"]) => anyhow!(
            "{at}: the endpoint is plain http:// — set AWS_ALLOW_HTTP=true for a local endpoint, or use https://"
        ),
        _ if has(&["404 Not Found"]) => no_object(url, &at),
        _ if has(&["empty host", "relative URL without a base", "invalid port", "invalid domain"]) => anyhow!(
            "{at}: the endpoint address is not a URL ({}) — set it as http://HOST:PORT",
            endpoint_variable(url.scheme)
        ),
        _ => anyhow!("{at}: {text}"),
    }
}

/// The variable that points a scheme's client at another endpoint.
fn endpoint_variable(scheme: Scheme) -> &'static str {
    match scheme {
        Scheme::Gcs => "STORAGE_EMULATOR_HOST",
        Scheme::S3 => "AWS_ENDPOINT_URL",
    }
}

fn denied(url: &Url, at: &str) -> anyhow::Error {
    anyhow!(
        "{at}: access denied — the credentials in use may not read bucket {:?}: {}",
        url.bucket,
        login_hint(url.scheme)
    )
}

fn is_missing_bucket(text: &str) -> bool {
    text.contains("NoSuchBucket") || text.contains("bucket does not exist") || text.contains("Bucket not found")
}

/// An error and its causes on one line.
fn one_line(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let t = c.to_string();
        if !s.contains(&t) {
            s.push_str(": ");
            s.push_str(&t);
        }
        cause = c.source();
    }
    let s = s.split_whitespace().collect::<Vec<_>>().join(" ");
    // An error may echo what was sent (a URL with a page token of any length): cut.
    const MAX_CHARS: usize = 400;
    if s.chars().count() <= MAX_CHARS {
        return s;
    }
    let head: String = s.chars().take(MAX_CHARS - 100).collect();
    let tail: String = s.chars().skip(s.chars().count() - 99).collect();
    format!("{head}…{tail}")
}

/// The client for `url`'s bucket, configured from the environment.
fn client(url: &Url) -> anyhow::Result<Client> {
    static PROVIDER: Once = Once::new();
    PROVIDER.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
    let timeout_s: u64 =
        std::env::var("STEPSCOPE_REMOTE_TIMEOUT_S").ok().and_then(|v| v.parse().ok()).unwrap_or(30).max(1);
    let (timeout, connect) = (Duration::from_secs(timeout_s), Duration::from_secs(timeout_s.min(10)));
    let mut options = ClientOptions::new().with_timeout(timeout).with_connect_timeout(connect);
    let retry = RetryConfig { backoff: BackoffConfig::default(), max_retries: 2, retry_timeout: 3 * timeout };
    let setup = |e: &dyn std::error::Error| {
        anyhow!("{url}: cannot set up the client ({}) — {}", one_line(e), login_hint(url.scheme))
    };
    match url.scheme {
        Scheme::Gcs => {
            let mut b = GoogleCloudStorageBuilder::from_env().with_bucket_name(&url.bucket).with_retry(retry);
            let emulator = std::env::var("STORAGE_EMULATOR_HOST").ok().filter(|h| !h.is_empty());
            let base = match &emulator {
                // The emulator takes no credentials: a key that names its address and
                // turns OAuth off, as object_store's own tests of emulators do.
                Some(host) => {
                    let base = if host.contains("://") { host.clone() } else { format!("http://{host}") };
                    let base = base.trim_end_matches('/').to_string();
                    let parsed = reqwest::Url::parse(&base).ok();
                    if !parsed.is_some_and(|u| u.host_str().is_some_and(|h| !h.is_empty()) && u.path() == "/") {
                        bail!("STORAGE_EMULATOR_HOST={host:?} is not an emulator's address — set it as HOST:PORT or http://HOST:PORT");
                    }
                    options = options.with_allow_http(true);
                    let key = format!(
                        r#"{{"private_key":"","private_key_id":"","client_email":"","gcs_base_url":{},"disable_oauth":true}}"#,
                        json_string(&base)
                    );
                    b = b.with_service_account_key(key);
                    base
                }
                None => "https://storage.googleapis.com".to_string(),
            };
            let gcs = b.with_client_options(options).build().map_err(|e| setup(&e))?;
            let http =
                reqwest::Client::builder().timeout(timeout).connect_timeout(connect).build().map_err(|e| setup(&e))?;
            Ok(Client::Gcs { gcs, base, http, oauth: emulator.is_none() })
        }
        Scheme::S3 => {
            let mut b = AmazonS3Builder::from_env().with_bucket_name(&url.bucket).with_retry(retry);
            if let Some(endpoint) = std::env::var("AWS_ENDPOINT_URL").ok().filter(|e| !e.is_empty()) {
                b = b.with_endpoint(endpoint).with_virtual_hosted_style_request(false);
            }
            if std::env::var("AWS_ALLOW_HTTP").is_ok_and(|v| v == "true" || v == "1") {
                options = options.with_allow_http(true);
            }
            if std::env::var("AWS_ACCESS_KEY_ID").is_err() {
                if let Some(p) = aws_profile()? {
                    b = b.with_access_key_id(p.key_id).with_secret_access_key(p.secret);
                    if let Some(t) = p.token {
                        b = b.with_token(t);
                    }
                    if let Some(r) = p.region.filter(|_| std::env::var("AWS_REGION").is_err()) {
                        b = b.with_region(r);
                    }
                }
            }
            let store = b.with_client_options(options).build().map_err(|e| setup(&e))?;
            Ok(Client::S3 { store: Arc::new(store) })
        }
    }
}

fn json_string(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Keys of a profile of AWS's shared files (`~/.aws/credentials`, region from
/// `~/.aws/config`).
struct AwsProfile {
    key_id: String,
    secret: String,
    token: Option<String>,
    region: Option<String>,
}

/// The profile `AWS_PROFILE` names (else `default`), when the shared files have it;
/// an error when `AWS_PROFILE` names one they lack.
fn aws_profile() -> anyhow::Result<Option<AwsProfile>> {
    let named = std::env::var("AWS_PROFILE").ok().filter(|p| !p.is_empty());
    let profile = named.clone().unwrap_or_else(|| "default".into());
    let home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_default();
    let creds_path = std::env::var_os("AWS_SHARED_CREDENTIALS_FILE")
        .map(PathBuf::from)
        .unwrap_or_else(|| home.join(".aws").join("credentials"));
    let config_path =
        std::env::var_os("AWS_CONFIG_FILE").map(PathBuf::from).unwrap_or_else(|| home.join(".aws").join("config"));
    // Read within a cap, and only regular files (a credentials file that is
    // /dev/zero was read to 4.2 GB).
    let (creds, config) = (read_ini(&creds_path), read_ini(&config_path));
    let section = ini_section(&creds, &profile);
    let config_section =
        ini_section(&config, &if profile == "default" { profile.clone() } else { format!("profile {profile}") });
    let get = |s: &[(String, String)], k: &str| s.iter().find(|(key, _)| key == k).map(|(_, v)| v.clone());
    match (get(&section, "aws_access_key_id"), get(&section, "aws_secret_access_key")) {
        (Some(key_id), Some(secret)) => Ok(Some(AwsProfile {
            key_id,
            secret,
            token: get(&section, "aws_session_token"),
            region: get(&config_section, "region").or_else(|| get(&section, "region")),
        })),
        _ if named.is_some() => bail!(
            "AWS_PROFILE={profile}: {} has no aws_access_key_id and aws_secret_access_key for it — add them, or set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY",
            creds_path.display()
        ),
        _ => Ok(None),
    }
}

/// The text of an AWS shared file: a regular file, its first MiB (nothing where it
/// is missing, not a regular file, or not text).
fn read_ini(path: &Path) -> String {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let Ok(file) = File::options().read(true).custom_flags(libc::O_NONBLOCK).open(path) else { return String::new() };
    if !file.metadata().is_ok_and(|m| m.is_file()) {
        return String::new();
    }
    let mut text = String::new();
    let _ = file.take(1 << 20).read_to_string(&mut text);
    text
}

/// The `key = value` lines of section `[name]` of an INI text.
fn ini_section(text: &str, name: &str) -> Vec<(String, String)> {
    let mut inside = false;
    let mut out = Vec::new();
    for line in text.lines().map(str::trim) {
        if line.starts_with('[') && line.ends_with(']') {
            inside = line[1..line.len() - 1].trim() == name;
        } else if inside {
            if let Some((k, v)) = line.split_once('=') {
                out.push((k.trim().to_string(), v.trim().to_string()));
            }
        }
    }
    out
}

/// A bar on stderr once a download has taken a second: bytes, share and rate; where
/// stderr is no terminal, one line at the end.
fn draw_progress(what: &str, total: u64, done: &AtomicU64, finished: &AtomicBool, failed: &AtomicBool) {
    let start = Instant::now();
    let tty = std::io::stderr().is_terminal();
    let mut drawn = false;
    let mb = |b: u64| b as f64 / 1e6;
    while !finished.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(100));
        let t = start.elapsed();
        if t < Duration::from_secs(1) || !tty {
            continue;
        }
        let d = done.load(Ordering::Relaxed);
        let width = 30;
        let filled = (d as f64 / total as f64 * width as f64) as usize;
        eprint!(
            "\rstepscope: downloading {what} [{}{}] {:.0} / {:.0} MB, {:.1} MB/s ",
            "#".repeat(filled.min(width)),
            " ".repeat(width - filled.min(width)),
            mb(d),
            mb(total),
            mb(d) / t.as_secs_f64()
        );
        drawn = true;
    }
    let t = start.elapsed();
    if drawn {
        eprint!("\r\x1b[K");
    }
    if t >= Duration::from_secs(1) && !failed.load(Ordering::Relaxed) {
        let d = done.load(Ordering::Relaxed);
        eprintln!(
            "stepscope: downloaded {:.1} MB of {what} in {:.1} s ({:.1} MB/s)",
            mb(d),
            t.as_secs_f64(),
            mb(d) / t.as_secs_f64()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        let u = parse("gs://bkt/logs/run1/").unwrap().unwrap();
        assert_eq!((u.scheme, u.bucket.as_str(), u.key.as_str()), (Scheme::Gcs, "bkt", "logs/run1"));
        assert_eq!(u.to_string(), "gs://bkt/logs/run1");
        let u = parse("s3://b").unwrap().unwrap();
        assert_eq!((u.scheme, u.key.as_str()), (Scheme::S3, ""));
        assert!(parse("/tmp/logdir").is_none());
        assert!(parse("gs:///x").unwrap().is_err());
    }

    #[test]
    fn profile_files_only() {
        assert!(is_profile_file("logs/plugins/profile/2024_01_01/host.xplane.pb"));
        assert!(is_profile_file("a/memory.prof"));
        assert!(!is_profile_file("ckpt/checkpoint_1/data.msgpack"));
        assert!(!is_profile_file("logs/events.out.tfevents.1.host"));
        for listed in [
            "logs/plugins/profile/2024_01_01/host.xplane.pb",
            "logs/plugins/profile/2024_01_01/host.trace.json.gz",
            "logs/plugins/profile/2024_01_01/trace.json",
            "logs/memory.prof",
            "logs/perfetto_trace.json.gz",
        ] {
            assert!(is_listed_profile(listed), "{listed}");
        }
        for not_listed in ["model/saved_model.pb", "logs/results.json", "logs/config.json.gz", "ckpt/state.pb"] {
            assert!(!is_listed_profile(not_listed), "{not_listed}");
        }
    }

    #[test]
    fn keys_stay_inside_the_cache() {
        assert!(is_plain_key("logs/plugins/profile/2024_01_01/host.xplane.pb"));
        for bad in ["../etc/passwd.json", "/etc/x.pb", "a//b.pb", "a/./b.pb", "a/../../b.pb", "a/b.pb/"] {
            assert!(!is_plain_key(bad), "{bad}");
        }
    }

    #[test]
    fn ini_sections() {
        let text = "[default]\naws_access_key_id = A\n[prod]\naws_access_key_id=B\naws_secret_access_key = S\n";
        assert_eq!(
            ini_section(text, "prod"),
            vec![("aws_access_key_id".into(), "B".into()), ("aws_secret_access_key".into(), "S".into())]
        );
        assert_eq!(ini_section(text, "none"), vec![]);
    }
}
