//! `gs://` and `s3://` paths: their profile files are brought into the cache
//! (`--cache DIR`, default `~/.cache/stepscope/remote`) and read from there, so every
//! command reads a bucket as it reads a local folder ([`stepscope_remote`]).

use std::path::{Path, PathBuf};

use std::sync::OnceLock;
use stepscope_xspace::discover::{self, Run};
use stepscope_xspace::Format;

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

/// A folder of this process's own under the cache, removed when dropped: what is
/// written there before it is put into a bucket (`tables -o gs://…`).
pub fn staging() -> anyhow::Result<tempfile::TempDir> {
    let under = cache().join("staging");
    std::fs::create_dir_all(&under)
        .map_err(|e| anyhow::anyhow!("cannot make {}: {e} — check --cache", under.display()))?;
    tempfile::Builder::new()
        .prefix("tables-")
        .tempdir_in(&under)
        .map_err(|e| anyhow::anyhow!("cannot make a folder in {}: {e} — check --cache", under.display()))
}

/// `path` itself, or, for a bucket's URL holding the tables `tables -o URL` wrote, the
/// local copy of those tables (their manifest and Parquet files fetched into the
/// cache); a bucket's log directory stays its URL (read as profiles are).
pub fn tables_folder(path: &Path) -> anyhow::Result<PathBuf> {
    let Some(url) = path.to_str().and_then(stepscope_remote::parse) else { return Ok(path.to_path_buf()) };
    match stepscope_remote::list_tables(&url?, stepscope_export::tables::MANIFEST)? {
        Some(listed) => listed.fetch(&cache(), |_| true, true),
        None => Ok(path.to_path_buf()),
    }
}

/// The cache folder of this process.
fn cache() -> PathBuf {
    CACHE.get().cloned().unwrap_or_else(stepscope_remote::default_cache)
}

/// A bucket's listing as a folder of empty files (of the objects' sizes and times),
/// alive while this is: discovery searches it as it searches a folder, without
/// anything being fetched.
pub struct Listing {
    listed: stepscope_remote::Listed,
    dir: tempfile::TempDir,
    /// The path standing for the URL in it.
    pub root: PathBuf,
}

impl Listing {
    /// The listing of a `gs://` or `s3://` PATH; `None` for a local path.
    pub fn of(path: &Path) -> anyhow::Result<Option<Listing>> {
        let Some(url) = path.to_str().and_then(stepscope_remote::parse) else { return Ok(None) };
        let listed = stepscope_remote::list(&url?)?;
        let dir = tempfile::tempdir().map_err(|e| anyhow::anyhow!("cannot make a folder for the listing: {e}"))?;
        let root = listed.placeholders(dir.path(), &cache())?;
        Ok(Some(Listing { listed, dir, root }))
    }

    /// The runs under `path` (a local folder, or the listing's for a bucket), an
    /// error naming the bucket, never the listing's own folder.
    pub fn find_runs(listing: Option<&Listing>, path: &Path) -> anyhow::Result<Vec<Run>> {
        discover::find_runs(listing.map_or(path, |l| &l.root)).map_err(|e| Listing::error(listing, &e))
    }

    /// `e` with a listing's folder named as the bucket (as it is, for a local path).
    pub fn error(listing: Option<&Listing>, e: &dyn std::fmt::Display) -> anyhow::Error {
        let text = e.to_string();
        anyhow::anyhow!("{}", listing.map_or_else(|| text.clone(), |l| l.shown(&text)))
    }

    /// `text` (a path, a note, an error) with the listing's folder named as the bucket.
    pub fn shown(&self, text: &str) -> String {
        text.replace(&*self.dir.path().to_string_lossy(), &self.listed.bucket_url())
    }

    /// The object key a path in the listing stands for.
    fn key(&self, path: &Path) -> anyhow::Result<String> {
        Ok(path.strip_prefix(self.dir.path())?.to_string_lossy().into_owned())
    }
}

/// For a `gs://` or `s3://` PATH of several objects, the run asked for (`--run`, else
/// the newest) and its hosts' names, from the bucket's listing alone: nothing is
/// fetched. `None` for a local path or one object.
pub fn plan(path: &Path, run: Option<&str>) -> anyhow::Result<Option<(String, Vec<String>)>> {
    let Some(listing) = Listing::of(path)? else { return Ok(None) };
    if listing.listed.is_one_object() {
        return Ok(None);
    }
    let chosen = discover::resolve(&listing.root, run).map_err(|e| Listing::error(Some(&listing), &e))?;
    Ok(Some((chosen.rel.clone(), chosen.hosts.iter().map(|h| h.host.clone()).collect())))
}

/// For a `gs://` or `s3://` PATH, the run asked for (`--run`, else the newest), found
/// on the bucket's listing as discovery finds it in a folder: only its files (and the
/// device-memory profiles it reads) are fetched, not every run under the URL. `None`
/// for a local path.
pub fn run(path: &Path, run: Option<&str>, only: Option<&str>) -> anyhow::Result<Option<Run>> {
    let Some(listing) = Listing::of(path)? else { return Ok(None) };
    let cache = cache();
    let listed = &listing.listed;
    if listed.is_one_object() {
        let local = listed.fetch(&cache, |_| true, true)?;
        return Ok(Some(discover::resolve(&local, run)?));
    }
    let mut chosen = discover::resolve(&listing.root, run).map_err(|e| Listing::error(Some(&listing), &e))?;
    // One host of several read alone: its file is fetched, and of the others only the
    // plane whose session start aligns the hosts' clocks, read in place.
    let alone = only.filter(|o| chosen.hosts.len() > 1 && chosen.hosts.iter().any(|h| h.host == *o));
    let fetched = |h: &discover::HostFile| alone.is_none_or(|o| o == h.host) || h.format != Format::XSpace;
    let mut keys = std::collections::HashSet::new();
    for p in chosen.hosts.iter().filter(|h| fetched(h)).map(|h| &h.path).chain(&chosen.pprof) {
        keys.insert(listing.key(p)?);
    }
    listed.fetch(&cache, |k| keys.contains(k), true)?;
    let local = |p: &Path| -> anyhow::Result<PathBuf> { Ok(listed.cached_path(&cache, &listing.key(p)?)) };
    for h in &mut chosen.hosts {
        if fetched(h) {
            h.path = local(&h.path)?;
            continue;
        }
        let key = listing.key(&h.path)?;
        h.path = match listed.peek(&cache, &key, stepscope_analysis::profile::TASK_ENVIRONMENT) {
            Ok(peeked) => peeked,
            // A file whose fields cannot be walked (damaged, or of no XSpace): fetched
            // whole, so that it is judged as a full read judges it.
            Err(_) => {
                listed.fetch(&cache, |k| k == key, true)?;
                local(&h.path)?
            }
        };
    }
    chosen.pprof = chosen.pprof.iter().map(|p| local(p)).collect::<anyhow::Result<_>>()?;
    chosen.dir = local(&chosen.dir)?;
    for note in &mut chosen.skipped {
        *note = listing.shown(note);
    }
    Ok(Some(chosen))
}
