//! `gs://` and `s3://` paths: their profile files are brought into the cache
//! (`--cache DIR`, default `~/.cache/stepscope/remote`) and read from there, so every
//! command reads a bucket as it reads a local folder ([`stepscope_remote`]).

use std::path::{Path, PathBuf};

use std::sync::OnceLock;
use stepscope_xspace::discover::{self, Run};

static CACHE: OnceLock<PathBuf> = OnceLock::new();

/// Sets the cache folder for this process (the first call wins).
pub fn set_cache(dir: Option<PathBuf>) {
    if let Some(dir) = dir {
        let _ = CACHE.set(dir);
    }
}

/// `path` itself, or for a `gs://` or `s3://` URL the local copy of what it names.
pub fn local(path: &Path) -> anyhow::Result<PathBuf> {
    let Some(url) = path.to_str().and_then(stepscope_remote::parse) else { return Ok(path.to_path_buf()) };
    stepscope_remote::mirror(&url?, &cache(), true)
}

/// The cache folder of this process.
fn cache() -> PathBuf {
    CACHE.get().cloned().unwrap_or_else(stepscope_remote::default_cache)
}

/// For a `gs://` or `s3://` PATH, the run asked for (`--run`, else the newest), found
/// on the bucket's listing as discovery finds it in a folder: only its files (and the
/// device-memory profiles it reads) are fetched, not every run under the URL. `None`
/// for a local path.
pub fn run(path: &Path, run: Option<&str>) -> anyhow::Result<Option<Run>> {
    let Some(url) = path.to_str().and_then(stepscope_remote::parse) else { return Ok(None) };
    let listed = stepscope_remote::list(&url?)?;
    let cache = cache();
    if listed.is_one_object() {
        let local = listed.fetch(&cache, |_| true, true)?;
        return Ok(Some(discover::resolve(&local, run)?));
    }
    let dir = tempfile::tempdir().map_err(|e| anyhow::anyhow!("cannot make a folder for the listing: {e}"))?;
    let root = listed.placeholders(dir.path(), &cache)?;
    let mut chosen = discover::resolve(&root, run).map_err(|e| in_bucket(e.into(), dir.path(), &listed))?;
    let key = |p: &Path| p.strip_prefix(dir.path()).map(|k| k.to_string_lossy().into_owned());
    let mut keys = std::collections::HashSet::new();
    for p in chosen.hosts.iter().map(|h| &h.path).chain(&chosen.pprof) {
        keys.insert(key(p)?);
    }
    listed.fetch(&cache, |k| keys.contains(k), true)?;
    let local = |p: &Path| -> anyhow::Result<PathBuf> { Ok(listed.cached_path(&cache, &key(p)?)) };
    for h in &mut chosen.hosts {
        h.path = local(&h.path)?;
    }
    chosen.pprof = chosen.pprof.iter().map(|p| local(p)).collect::<anyhow::Result<_>>()?;
    chosen.dir = local(&chosen.dir)?;
    let listing = dir.path().to_string_lossy().into_owned();
    for note in &mut chosen.skipped {
        *note = note.replace(&listing, &listed.bucket_url());
    }
    Ok(Some(chosen))
}

/// `e` with the listing's folder named as the bucket it stands for.
fn in_bucket(e: anyhow::Error, dir: &Path, listed: &stepscope_remote::Listed) -> anyhow::Error {
    anyhow::anyhow!("{}", format!("{e:#}").replace(&*dir.to_string_lossy(), &listed.bucket_url()))
}

/// For a `gs://` or `s3://` PATH, its listing as a folder of empty files (of the
/// objects' sizes and times) that lives while the returned folder does, the path
/// standing for the URL in it, and `gs://BUCKET`: enough to list runs without
/// fetching them. `None` for a local path.
pub fn listing(path: &Path) -> anyhow::Result<Option<(tempfile::TempDir, PathBuf, String)>> {
    let Some(url) = path.to_str().and_then(stepscope_remote::parse) else { return Ok(None) };
    let listed = stepscope_remote::list(&url?)?;
    let dir = tempfile::tempdir().map_err(|e| anyhow::anyhow!("cannot make a folder for the listing: {e}"))?;
    let root = listed.placeholders(dir.path(), &cache())?;
    Ok(Some((dir, root, listed.bucket_url())))
}
