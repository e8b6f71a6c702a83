//! `gs://` and `s3://` paths: their profile files are brought into the cache
//! (`--cache DIR`, default `~/.cache/stepscope/remote`) and read from there, so every
//! command reads a bucket as it reads a local folder ([`stepscope_remote`]).

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

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
    let url = url?;
    let cache = CACHE.get().cloned().unwrap_or_else(stepscope_remote::default_cache);
    stepscope_remote::mirror(&url, &cache, true)
}
