//! The served root and the runs in it.
//!
//! The root is fixed at start. Runs are found by [`discover`] and then confined: a host
//! file whose real path (symlinks resolved) lies outside the root's real path is
//! dropped, and a run left with no host file is not listed. Requests name a run only
//! by its exact name from this list, so no path ever comes from a URL.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant, UNIX_EPOCH};

use serde::Serialize;
use stepscope_xspace::discover::{self, Run};
use stepscope_xspace::Format;

/// What `stepscope serve` was pointed at.
pub struct Root {
    /// As given on the command line.
    path: PathBuf,
    /// With symlinks resolved.
    real: PathBuf,
    is_file: bool,
    /// The last listing and when it was made, so requests don't walk the folder each time.
    listed: Mutex<Option<(Instant, Vec<Run>)>>,
}

/// How long a listing is reused to find a run by name.
const LISTING_TTL: Duration = Duration::from_secs(5);

/// A run as `api/runs` lists it.
#[derive(Clone, Debug, Serialize)]
pub struct RunJson {
    /// The name to pass as `?run=`.
    pub run: String,
    /// The run folder's own name.
    pub name: String,
    /// Latest modification time of its files, seconds since the Unix epoch.
    pub modified_unix_s: u64,
    pub bytes: u64,
    pub hosts: Vec<HostJson>,
}

/// A host file of a run.
#[derive(Clone, Debug, Serialize)]
pub struct HostJson {
    pub host: String,
    pub format: &'static str,
    pub file_bytes: u64,
}

impl Root {
    /// Checks that `path` exists and is readable.
    pub fn new(path: &Path) -> anyhow::Result<Root> {
        let meta = std::fs::metadata(path).map_err(|e| stepscope_xspace::Error::io(path, &e))?;
        let real = path.canonicalize().map_err(|e| stepscope_xspace::Error::io(path, &e))?;
        Ok(Root { path: path.to_path_buf(), real, is_file: meta.is_file(), listed: Mutex::new(None) })
    }

    /// The runs under the root, oldest first, confined to it.
    pub fn runs(&self) -> Result<Vec<Run>, stepscope_xspace::Error> {
        if self.is_file {
            return Ok(vec![discover::resolve(&self.path, None)?]);
        }
        let inside = |p: &Path| p.canonicalize().is_ok_and(|r| r.starts_with(&self.real));
        let mut runs = discover::find_runs(&self.path)?;
        for run in &mut runs {
            run.hosts.retain(|h| inside(&h.path));
            run.pprof.retain(|p| inside(p));
        }
        runs.retain(|r| !r.hosts.is_empty());
        if let Ok(mut listed) = self.listed.lock() {
            *listed = Some((Instant::now(), runs.clone()));
        }
        Ok(runs)
    }

    /// The run named exactly `name` (its `run` field), else the newest run, from a
    /// recent listing when the name is in it.
    pub fn run(&self, name: Option<&str>) -> Result<Run, String> {
        let recent = self
            .listed
            .lock()
            .ok()
            .and_then(|l| l.as_ref().filter(|(at, _)| at.elapsed() < LISTING_TTL).map(|(_, runs)| runs.clone()));
        let known = |runs: &[Run]| match name {
            None => true,
            Some(n) => runs.iter().any(|r| r.rel == n),
        };
        let runs = match recent {
            Some(runs) if known(&runs) => runs,
            _ => self.runs().map_err(|e| e.to_string())?,
        };
        match name {
            Some(want) => runs
                .into_iter()
                .rev()
                .find(|r| r.rel == want)
                .ok_or_else(|| format!("no run named {want:?} — GET api/runs lists them")),
            None => runs.into_iter().next_back().ok_or_else(|| "no profile found under the served folder".to_string()),
        }
    }
}

/// The listing of runs.
pub fn runs_json(runs: &[Run]) -> Vec<RunJson> {
    runs.iter()
        .map(|r| RunJson {
            run: r.rel.clone(),
            name: r.name.clone(),
            modified_unix_s: r.modified.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs()),
            bytes: r.bytes(),
            hosts: r
                .hosts
                .iter()
                .map(|h| HostJson {
                    host: h.host.clone(),
                    format: match h.format {
                        Format::XSpace => "xspace",
                        Format::TraceJson => "trace_json",
                    },
                    file_bytes: h.bytes,
                })
                .collect(),
        })
        .collect()
}
