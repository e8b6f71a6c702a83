//! Storing captures in TensorBoard layout, never leaving a partial file.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use crate::{Capture, CaptureError};

/// What [`write_run`] wrote.
#[derive(Debug, Clone)]
pub struct Written {
    /// `<logdir>/plugins/profile/<run>`.
    pub run_dir: PathBuf,
    /// One `<host>.xplane.pb` per capture, in capture order.
    pub files: Vec<PathBuf>,
}

/// The run folder name JAX uses for `time`: local time as `YYYY_MM_DD_HH_MM_SS`.
pub fn run_name(time: SystemTime) -> String {
    let t: chrono::DateTime<chrono::Local> = time.into();
    t.format("%Y_%m_%d_%H_%M_%S").to_string()
}

/// `time` as local `HH:MM:SS`, for live views.
pub fn local_clock(time: SystemTime) -> String {
    let t: chrono::DateTime<chrono::Local> = time.into();
    t.format("%H:%M:%S").to_string()
}

/// Writes every capture as `<logdir>/plugins/profile/<run>/<host>.xplane.pb`, the
/// run named after `time` (a later second when that folder already exists). Each file
/// is written to a hidden temporary name and renamed into place; on any failure the
/// files written so far and the run folder are removed.
pub fn write_run(logdir: &Path, captures: &[Capture], time: SystemTime) -> Result<Written, CaptureError> {
    let io = |what: String, e: std::io::Error| {
        CaptureError::new(format!("{what}: {e}"), "check that the log directory is writable and the disk has room")
    };
    let profile_dir = logdir.join("plugins").join("profile");
    std::fs::create_dir_all(&profile_dir).map_err(|e| io(format!("cannot create {}", profile_dir.display()), e))?;
    let mut run_dir = None;
    for s in 0..120 {
        let dir = profile_dir.join(run_name(time + Duration::from_secs(s)));
        match std::fs::create_dir(&dir) {
            Ok(()) => {
                run_dir = Some(dir);
                break;
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(io(format!("cannot create {}", dir.display()), e)),
        }
    }
    let run_dir = run_dir.ok_or_else(|| {
        CaptureError::new(
            format!("{} already holds runs for the next two minutes", profile_dir.display()),
            "pass another --logdir",
        )
    })?;
    let mut files = Vec::new();
    for c in captures {
        match write_one(&run_dir, &c.space.host, &c.bytes) {
            Ok(p) => files.push(p),
            Err(e) => {
                for f in &files {
                    let _ = std::fs::remove_file(f);
                }
                let _ = std::fs::remove_dir(&run_dir);
                return Err(io(format!("cannot write into {}", run_dir.display()), e));
            }
        }
    }
    Ok(Written { run_dir, files })
}

fn write_one(dir: &Path, host: &str, bytes: &[u8]) -> std::io::Result<PathBuf> {
    let path = dir.join(format!("{host}.xplane.pb"));
    let tmp = dir.join(format!(".{host}.xplane.pb.{}.tmp", std::process::id()));
    let result = (|| {
        let mut f = std::fs::OpenOptions::new().write(true).create_new(true).open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        drop(f);
        std::fs::rename(&tmp, &path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result.map(|()| path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_names_sort_and_look_like_jax() {
        let a = run_name(SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000));
        let b = run_name(SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_001));
        assert_eq!(a.len(), 19, "{a}");
        assert!(a.chars().all(|c| c.is_ascii_digit() || c == '_'));
        assert!(a < b);
    }
}
