//! Finding profiles: a file, a run folder, or a log directory at any depth.
//!
//! `jax.profiler.trace(log_dir)` writes `<log_dir>/plugins/profile/<run>/<host>.xplane.pb`
//! (plus `<host>.trace.json.gz` and maybe `perfetto_trace.json.gz`). A run is any
//! folder that directly holds profile files; its hosts are its `*.xplane.pb` files,
//! or, when it has none, its trace JSON files. Nothing here writes anything.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use rayon::prelude::*;

use crate::error::{Error, Result};
use crate::model::{Format, Progress, Space};

/// One host's profile file in a run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostFile {
    pub host: String,
    pub path: PathBuf,
    pub format: Format,
    pub bytes: u64,
}

/// One capture: a folder of host files.
#[derive(Clone, Debug)]
pub struct Run {
    /// The run folder's name, e.g. `2024_05_01_12_00_00`.
    pub name: String,
    /// The run's path relative to the folder searched (`name` when it is the folder itself).
    pub rel: String,
    pub dir: PathBuf,
    /// Latest modification time of its profile files.
    pub modified: SystemTime,
    /// When the capture started, as the Python package's manifest beside it records
    /// (`stepscope_manifest.json`: `started_unix_ns`); `None` where there is none.
    pub started_unix_ns: Option<u64>,
    /// The files to read, one per host.
    pub hosts: Vec<HostFile>,
    /// Device-memory profiles (pprof) found beside them, else in the nearest folder
    /// above them in the folder searched (a log directory's `memory.prof`).
    pub pprof: Vec<PathBuf>,
    /// Files named like profiles that were not read, each with why
    /// (`x.xplane.pb: a FIFO, not a regular file`): one note each for the user.
    pub skipped: Vec<String>,
    /// How many runs the folder searched held, this one among them (1 for a run
    /// folder or a file).
    pub among: usize,
}

impl Run {
    /// Bytes of the host files.
    pub fn bytes(&self) -> u64 {
        self.hosts.iter().map(|h| h.bytes).sum()
    }

    /// Reads every host file, in parallel, counting bytes read into `progress`; an
    /// error, before anything is read, where they would not fit in memory
    /// ([`crate::room::check`]).
    pub fn load(&self, progress: &Progress) -> Result<Vec<Space>> {
        self.fits()?;
        self.hosts.par_iter().map(|h| read_file(&h.path, h.format, &h.host, progress)).collect()
    }

    /// Reads every host file that can be read: a broken host (a capture that crashed
    /// while writing, a file cut short) is set aside with its error, and the others
    /// are read. An error only when no host can be read (then the first host's), when
    /// `must` names a host that cannot be, or, before anything is read, when the hosts
    /// would not fit in memory ([`crate::room::check`]).
    pub fn load_readable(&self, progress: &Progress, must: Option<&str>) -> Result<Readable> {
        self.fits()?;
        let results: Vec<Result<Space>> =
            self.hosts.par_iter().map(|h| read_file(&h.path, h.format, &h.host, progress)).collect();
        let mut readable = Readable { spaces: Vec::new(), unread: Vec::new() };
        let mut first_error = None;
        for (h, r) in self.hosts.iter().zip(results) {
            match r {
                Ok(space) => readable.spaces.push(space),
                Err(e) if must == Some(h.host.as_str()) => return Err(e),
                Err(e) => {
                    readable.unread.push(Unread { host: h.host.clone(), error: e.to_string() });
                    first_error.get_or_insert(e);
                }
            }
        }
        match first_error {
            Some(e) if readable.spaces.is_empty() => Err(e),
            _ => Ok(readable),
        }
    }

    /// Whether reading every host of the run at once fits in memory
    /// ([`crate::room::check`]): an error that says what to do where it does not.
    pub fn fits(&self) -> Result<()> {
        let hosts: Vec<(&str, u64)> = self
            .hosts
            .iter()
            .map(|h| (h.host.as_str(), crate::room::needed_bytes(&h.path, h.format, h.bytes)))
            .collect();
        crate::room::check(&hosts)
    }
}

/// The hosts of a run that could be read, and those that could not.
pub struct Readable {
    pub spaces: Vec<Space>,
    pub unread: Vec<Unread>,
}

/// A host file that could not be read, and why (one line).
#[derive(Clone, Debug, serde::Serialize)]
pub struct Unread {
    pub host: String,
    pub error: String,
}

/// The kind of profile file a name stands for, if any.
pub fn format_of_name(name: &str) -> Option<Format> {
    if name.ends_with(".xplane.pb") {
        Some(Format::XSpace)
    } else if name.ends_with(".json") || name.ends_with(".json.gz") {
        Some(Format::TraceJson)
    } else {
        None
    }
}

/// The names JAX gives its trace JSON files (`HOST.trace.json.gz`, `perfetto_trace.json.gz`).
fn is_jax_trace_name(name: &str) -> bool {
    name.ends_with(".trace.json.gz") || name.ends_with(".trace.json") || name.starts_with("perfetto_trace.json")
}

/// Whether a `.json` / `.json.gz` file of another name holds a Chrome trace: an object
/// naming `traceEvents`, or an array whose first element is a trace event (an object
/// with a `ph` phase), in its first 64 KiB (of text). Other JSON (XProf's exported tool
/// data `[{"cols":…}]`, results a script saved, a config) is no trace.
fn looks_like_trace(path: &Path) -> bool {
    use std::io::Read;
    const HEAD: u64 = 64 << 10;
    let Ok((file, _)) = crate::files::open_regular(path) else { return false };
    let mut raw = Vec::new();
    if file.take(HEAD).read_to_end(&mut raw).is_err() {
        return false;
    }
    let text = if raw.starts_with(&[0x1f, 0x8b]) {
        let mut out = Vec::new();
        // A cut gzip stream still yields its first bytes.
        let _ = flate2::read::MultiGzDecoder::new(&raw[..]).take(HEAD).read_to_end(&mut out);
        out
    } else {
        raw
    };
    // As the reader takes it: without a byte-order mark, UTF-16 as UTF-8.
    let mut utf8 = Vec::new();
    let _ = crate::trace_json::Utf8Text::new(&text[..]).read_to_end(&mut utf8);
    head_is_trace(&utf8)
}

/// [`looks_like_trace`] on the file's first bytes.
fn head_is_trace(text: &[u8]) -> bool {
    let mut rest = text.iter().skip_while(|b| b.is_ascii_whitespace());
    match rest.next() {
        Some(b'[') => {
            // The first element, up to its first nested value: an object with a `ph` key.
            let element: Vec<u8> = rest.skip_while(|b| b.is_ascii_whitespace()).copied().take(4096).collect();
            element.first() == Some(&b'{') && element.windows(4).any(|w| w == b"\"ph\"")
        }
        Some(b'{') => text.windows(13).any(|w| w == b"\"traceEvents\""),
        _ => false,
    }
}

/// A device-memory profile's file name (`memory.prof`, `*.pprof`, `*.pb.gz`).
pub fn is_pprof_name(name: &str) -> bool {
    name.ends_with(".prof") || name.ends_with(".pprof") || name.ends_with(".pb.gz")
}

/// Reads one profile file in the given format.
pub fn read_file(path: &Path, format: Format, host: &str, progress: &Progress) -> Result<Space> {
    match format {
        Format::XSpace => crate::xplane::read_xspace(path, progress),
        Format::TraceJson => crate::trace_json::read_trace_json(path, host),
    }
}

/// Guesses a file's format from its first bytes: gzip or JSON text → trace JSON, else XSpace.
fn sniff(path: &Path) -> Result<Format> {
    use std::io::Read;
    let mut head = [0u8; 64];
    let (mut f, _) = crate::files::open_regular(path)?;
    let n = f.read(&mut head).map_err(|e| Error::io(path, &e))?;
    let first = head[..n].iter().find(|b| !b.is_ascii_whitespace());
    Ok(match (head.get(..2), first) {
        (Some([0x1f, 0x8b]), _) if n >= 2 => Format::TraceJson,
        (_, Some(b'{' | b'[')) => Format::TraceJson,
        _ => Format::XSpace,
    })
}

/// Lists the runs under `dir` (the folder itself when it is a run), oldest first.
pub fn find_runs(dir: &Path) -> Result<Vec<Run>> {
    Ok(find_runs_noting(dir)?.0)
}

/// [`find_runs`], with the notes of files skipped in folders that hold no run.
fn find_runs_noting(dir: &Path) -> Result<(Vec<Run>, Vec<String>)> {
    let meta = std::fs::metadata(dir).map_err(|e| Error::io(dir, &e))?;
    if !crate::files::inside_roots(dir) {
        return Err(crate::files::outside_roots(dir));
    }
    if !meta.is_dir() {
        return Err(Error::new(
            format!("{} is a file, not a log directory", dir.display()),
            "pass the folder given to jax.profiler.trace, or use `stepscope info FILE` for one file",
        ));
    }
    let mut found =
        Found { runs: Vec::new(), stray: Vec::new(), budget: MAX_WALK_ENTRIES, entered: Default::default() };
    walk(dir, dir, 0, &mut found, &[])?;
    let Found { mut runs, stray, .. } = found;
    runs.sort_by_cached_key(capture_key);
    Ok((runs, stray))
}

/// What a walk of a log directory found.
struct Found {
    runs: Vec<Run>,
    /// Notes of files skipped in folders that hold no run.
    stray: Vec<String>,
    /// Entries left to look at.
    budget: usize,
    /// Folders entered, by device and inode: a symbolic link back up the tree is
    /// entered once.
    entered: std::collections::HashSet<(u64, u64)>,
}

/// Folders deeper than this are not searched (the entries' budget bounds the walk
/// too; this keeps a chain of links from going deeper than any log directory).
const MAX_WALK_DEPTH: usize = 64;
const MAX_WALK_ENTRIES: usize = 200_000;

/// Adds the runs under `dir` to `found`. `above`: the device-memory profiles of the
/// nearest folder above that holds any (`jax.profiler.save_device_memory_profile` into
/// the log directory), for a run that holds none of its own.
fn walk(root: &Path, dir: &Path, depth: usize, found: &mut Found, above: &[PathBuf]) -> Result<()> {
    if let Ok(meta) = std::fs::metadata(dir) {
        use std::os::unix::fs::MetadataExt;
        if !found.entered.insert((meta.dev(), meta.ino())) {
            return Ok(());
        }
    }
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        // Unreadable sub-folders are skipped; an unreadable root is an error.
        Err(e) if depth > 0 => {
            let _ = e;
            return Ok(());
        }
        Err(e) => return Err(Error::io(dir, &e)),
    };
    let mut subdirs = Vec::new();
    let mut hosts = Vec::new();
    let mut pprof = Vec::new();
    let mut skipped = Vec::new();
    let mut modified = SystemTime::UNIX_EPOCH;
    let mut started_unix_ns = None;
    for entry in entries.flatten() {
        if found.budget == 0 {
            return Err(Error::new(
                format!("{} holds too many files to search for profiles", root.display()),
                "point at the log directory given to jax.profiler.trace, or at one run folder",
            ));
        }
        found.budget -= 1;
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        // Follows symlinks; a folder met again is not entered again; nothing outside the
        // roots (`files::confine`) is listed.
        let Ok(meta) = std::fs::metadata(&path) else { continue };
        if !crate::files::inside_roots(&path) {
            skipped.push(format!("{}: outside the folders this stepscope may read", path.display()));
            continue;
        }
        if meta.is_dir() {
            if name.starts_with('.') {
                continue;
            }
            if depth < MAX_WALK_DEPTH {
                subdirs.push(path);
            } else {
                found.stray.push(format!("{}: deeper than {MAX_WALK_DEPTH} folders, not searched", path.display()));
            }
            continue;
        }
        let profile_like = format_of_name(&name).is_some() || is_pprof_name(&name);
        if let Some(kind) = crate::files::odd_kind(&meta).filter(|_| profile_like) {
            // Reading it could block for good (a FIFO) or never end (a device).
            skipped.push(format!("{}: {kind}, not a regular file", path.display()));
            continue;
        }
        // The Python package's manifest beside the profile: known, not a trace; it says
        // when the capture started.
        if name == "stepscope_manifest.json" {
            started_unix_ns = manifest_start(&path, &meta);
            continue;
        }
        if let Some(format) = format_of_name(&name) {
            if format == Format::TraceJson && !is_jax_trace_name(&name) && !looks_like_trace(&path) {
                // A JSON file of the user's own (`wall.json`, a config) beside the profiles.
                skipped.push(format!(
                    "{}: a JSON file that is not a trace (no \"traceEvents\", no array of trace events)",
                    path.display()
                ));
                continue;
            }
            let host = crate::xplane::host_from_file_name(&path);
            hosts.push(HostFile { host, path, format, bytes: meta.len() });
            modified = modified.max(meta.modified().unwrap_or(SystemTime::UNIX_EPOCH));
        } else if is_pprof_name(&name) {
            pprof.push(path);
        }
    }
    // This folder's memory profiles, else those of the nearest folder above.
    pprof.sort();
    let pprof = if pprof.is_empty() { above.to_vec() } else { pprof };
    if let Some(hosts) = choose_hosts(hosts) {
        let name = dir.file_name().map_or_else(|| dir.display().to_string(), |n| n.to_string_lossy().into_owned());
        let rel = match dir.strip_prefix(root) {
            Ok(r) if !r.as_os_str().is_empty() => r.to_string_lossy().into_owned(),
            _ => name.clone(),
        };
        skipped.sort();
        let run_pprof = pprof.clone();
        found.runs.push(Run {
            name,
            rel,
            dir: dir.to_path_buf(),
            modified,
            started_unix_ns,
            hosts,
            pprof: run_pprof,
            skipped,
            among: 1,
        });
    } else {
        found.stray.extend(skipped);
    }
    let above = pprof;
    subdirs.sort();
    for sub in subdirs {
        walk(root, &sub, depth + 1, found, &above)?;
    }
    Ok(())
}

/// Picks the files that stand for the run's hosts: XSpaces when there are any, else
/// per-host trace JSON, else the Perfetto JSON.
fn choose_hosts(mut files: Vec<HostFile>) -> Option<Vec<HostFile>> {
    files.sort_by(|a, b| a.path.cmp(&b.path));
    let pick =
        |pred: &dyn Fn(&HostFile) -> bool| -> Vec<HostFile> { files.iter().filter(|f| pred(f)).cloned().collect() };
    let is_name = |f: &HostFile, suffix: &str| f.path.to_string_lossy().ends_with(suffix);
    let xplanes = pick(&|f| f.format == Format::XSpace);
    if !xplanes.is_empty() {
        return Some(xplanes);
    }
    let traces = pick(&|f| is_name(f, ".trace.json.gz") || is_name(f, ".trace.json"));
    if !traces.is_empty() {
        return Some(traces);
    }
    let rest = pick(&|f| f.format == Format::TraceJson);
    (!rest.is_empty()).then_some(rest)
}

/// Resolves what a user passed as PATH into the one run to read: a profile file
/// (a run of one host), a run folder, or a log directory (its newest run, or the
/// run named `run`).
pub fn resolve(path: &Path, run: Option<&str>) -> Result<Run> {
    let meta = std::fs::metadata(path).map_err(|e| Error::io(path, &e))?;
    if !crate::files::inside_roots(path) {
        return Err(crate::files::outside_roots(path));
    }
    if let Some(kind) = crate::files::odd_kind(&meta) {
        return Err(crate::files::not_regular(path, kind));
    }
    if meta.is_file() {
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        if name == "stepscope_manifest.json" {
            let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
            return Err(Error::new(
                format!("{} is the manifest stepscope writes beside a capture, not a trace", path.display()),
                format!("pass the run folder it is in: {}", dir.display()),
            ));
        }
        let format = match format_of_name(&name) {
            Some(f) => f,
            None if is_pprof_name(&name.to_ascii_lowercase()) => {
                return Err(Error::new(
                    format!(
                        "{} is a device-memory profile (pprof, as jax.profiler.save_device_memory_profile \
                         writes), not a trace",
                        path.display()
                    ),
                    format!(
                        "read it with `stepscope memory {0}`, or beside its capture with `stepscope memory LOGDIR \
                         --pprof {0}`",
                        path.display()
                    ),
                ));
            }
            None => sniff(path)?,
        };
        let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
        let host = crate::xplane::host_from_file_name(path);
        let modified = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
        let hf = HostFile { host, path: path.to_path_buf(), format, bytes: meta.len() };
        let pprof = Vec::new();
        return Ok(Run {
            name: name.clone(),
            rel: name,
            dir,
            modified,
            started_unix_ns: None,
            hosts: vec![hf],
            pprof,
            skipped: Vec::new(),
            among: 1,
        });
    }
    let (mut runs, stray) = find_runs_noting(path)?;
    if runs.is_empty() {
        let skipped = match stray.first() {
            Some(first) => format!(" (skipped {first})"),
            None => String::new(),
        };
        return Err(Error::new(
            format!("no profile found under {}{skipped}", path.display()),
            "point at the folder given to jax.profiler.trace (it holds plugins/profile/<run>/<host>.xplane.pb), a run folder or a profile file",
        ));
    }
    let among = runs.len();
    let mut chosen = match run {
        None => runs.swap_remove(runs.len() - 1),
        Some(want) => {
            let names: Vec<String> = runs.iter().map(|r| r.rel.clone()).collect();
            runs.into_iter().rev().find(|r| r.rel == want || r.name == want).ok_or_else(|| {
                Error::new(
                    format!("no run named {want:?} under {}", path.display()),
                    format!("pick one of: {}", names.join(", ")),
                )
            })?
        }
    };
    // What was skipped in the folders searched that hold no run is said too.
    chosen.skipped.extend(stray);
    chosen.among = among;
    Ok(chosen)
}

/// The capture time a run's folder name holds (`…/2024_05_01_12_00_00`), as
/// `2024-05-01 12:00:00`.
pub fn captured(rel: &str) -> Option<String> {
    let [y, mo, d, h, mi, s] = name_time(rel)?;
    Some(format!("{y:04}-{mo:02}-{d:02} {h:02}:{mi:02}:{s:02}"))
}

/// The time JAX put in run folder `rel`'s name (`2026_11_21_23_32_11`, or
/// `…_11_2` for a second run of that second): year, month, day, hour, minute, second.
fn name_time(rel: &str) -> Option<[i64; 6]> {
    let name = rel.rsplit(['/', '\\']).next()?;
    let mut parts: Vec<&str> = name.split('_').collect();
    let digits = |p: &&str, n: usize| p.len() == n && p.bytes().all(|b| b.is_ascii_digit());
    // JAX names a second run of the same second `…_SS_2`.
    if parts.len() == 7 && parts[6].bytes().all(|b| b.is_ascii_digit()) && !parts[6].is_empty() {
        parts.pop();
    }
    let ok = parts.len() == 6 && digits(&parts[0], 4) && parts[1..].iter().all(|p| digits(p, 2));
    let mut out = [0i64; 6];
    for (o, p) in out.iter_mut().zip(&parts) {
        *o = p.parse().ok()?;
    }
    ok.then_some(out)
}

/// Unix seconds as `YYYY-MM-DD HH:MM:SS` (UTC).
pub fn utc(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Civil date from days since 1970-01-01 (proleptic Gregorian).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}", rem / 3600, rem / 60 % 60, rem % 60)
}

/// What runs are put in capture order by: when run `r`'s capture started — the
/// manifest's start where the Python package wrote one, else the time JAX put in its
/// folder's name, else its files' time, ns since 1970 — then its path in natural
/// order (`run_2` before `run_10`, JAX's second run of a second `…_SS_2` after the
/// first). A copy keeps the order (the files' time is the last resort).
pub fn capture_key(r: &Run) -> (u128, Vec<NamePart>) {
    let from_name = || captured_unix_s(&r.rel).map(|s| u128::from(s) * 1_000_000_000);
    let from_files = || r.modified.duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    let started = r.started_unix_ns.map(u128::from).or_else(from_name).unwrap_or_else(from_files);
    (started, natural(&r.rel))
}

/// A piece of a name in natural order: a run of digits by its value, else text.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum NamePart {
    Number(u128, usize),
    Text(String),
}

/// `name` split into runs of digits (compared by value, then by length: `02` after
/// `2`) and of other characters.
pub fn natural(name: &str) -> Vec<NamePart> {
    let mut parts = Vec::new();
    let mut rest = name;
    while let Some(c) = rest.chars().next() {
        let digit = c.is_ascii_digit();
        let end = rest.find(|ch: char| ch.is_ascii_digit() != digit).unwrap_or(rest.len());
        let (run, tail) = rest.split_at(end);
        parts.push(match (digit, run.trim_start_matches('0').parse::<u128>()) {
            (true, Ok(v)) => NamePart::Number(v, run.len()),
            (true, Err(_)) if run.bytes().all(|b| b == b'0') => NamePart::Number(0, run.len()),
            _ => NamePart::Text(run.to_string()),
        });
        rest = tail;
    }
    parts
}

/// The capture start a manifest records (`"started_unix_ns": N`), reading at most
/// 1 MiB of it; `None` where it is larger, unreadable or holds none.
fn manifest_start(path: &Path, meta: &std::fs::Metadata) -> Option<u64> {
    if !meta.is_file() || meta.len() > 1 << 20 {
        return None;
    }
    let text = std::fs::read(path).ok()?;
    let v: serde_json::Value = serde_json::from_slice(&text).ok()?;
    v.get("started_unix_ns")?.as_u64()
}

/// The time JAX put in run folder `rel`'s name (`2026_11_21_23_32_11`), Unix seconds
/// as if UTC (JAX writes the local time; runs of one machine compare alike).
fn captured_unix_s(rel: &str) -> Option<u64> {
    let [y, m, d, hh, mm, ss] = name_time(rel)?;
    // Days since 1970-01-01 of a civil date (proleptic Gregorian).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    u64::try_from(days * 86_400 + hh * 3600 + mm * 60 + ss).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capture_time_from_the_run_name() {
        assert_eq!(captured("plugins/profile/2026_11_21_23_32_11").as_deref(), Some("2026-11-21 23:32:11"));
        assert_eq!(captured("2026_11_21_23_32_11"), captured("x/2026_11_21_23_32_11"));
        assert_eq!(captured("plugins/profile/my_run"), None);
        assert_eq!(captured("2026_11_21_23_32"), None);
        // A second run in the same second.
        assert_eq!(captured("plugins/profile/2026_11_21_23_32_11_2").as_deref(), Some("2026-11-21 23:32:11"));
        assert_eq!(captured("2026_11_21_23_32_11_x"), None);
    }

    #[test]
    fn runs_sort_by_when_they_started_then_in_natural_order() {
        let s = captured_unix_s("plugins/profile/2023_11_14_22_13_20").unwrap();
        assert_eq!(utc(s), "2023-11-14 22:13:20");
        assert_eq!(utc(captured_unix_s("2000_02_29_00_00_00").unwrap()), "2000-02-29 00:00:00");
        let mut names = vec!["opt_10", "opt_2", "opt_1", "2026_11_21_23_32_11_2", "2026_11_21_23_32_11"];
        names.sort_by_key(|n| natural(n));
        assert_eq!(names, ["2026_11_21_23_32_11", "2026_11_21_23_32_11_2", "opt_1", "opt_2", "opt_10"]);
        assert!(natural("a02") > natural("a2") && natural("a2") < natural("a3"));
        assert_eq!(natural(""), vec![]);
        // Digits past any integer stay in order as text.
        assert!(natural(&"9".repeat(50)) != natural(&"8".repeat(50)));
    }

    #[test]
    fn utc_dates() {
        assert_eq!(utc(0), "1970-01-01 00:00:00");
        assert_eq!(utc(1_700_000_000), "2023-11-14 22:13:20");
        assert_eq!(utc(951_782_400), "2000-02-29 00:00:00");
    }

    use super::head_is_trace;

    #[test]
    fn only_trace_events_make_json_a_trace() {
        for yes in [
            &b"{\"displayTimeUnit\":\"ns\",\"traceEvents\":[]}"[..],
            b" [ {\"name\":\"a\",\"ph\":\"X\",\"ts\":1,\"dur\":2}]",
            b"[{\"ph\":\"M\",\"name\":\"process_name\"}",
        ] {
            assert!(head_is_trace(yes), "{}", String::from_utf8_lossy(yes));
        }
        for no in [&b"[{\"cols\":[1]}]"[..], b"[]", b"[1, 2, 3]", b"{\"step_ms\": 3.2}", b"[[{\"ph\":\"X\"}]]", b""] {
            assert!(!head_is_trace(no), "{}", String::from_utf8_lossy(no));
        }
    }
}
