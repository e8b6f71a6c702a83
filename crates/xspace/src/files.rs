//! Opening what a user names: regular files only, and small inputs read within a cap.
//!
//! A FIFO, a socket or a device named like a profile (`x.xplane.pb`, `memory.prof`,
//! `--baseline /dev/zero`) must not block stepscope in `open` or feed it without end:
//! files are opened without blocking (`O_NONBLOCK`, which regular files ignore) and
//! refused unless they are regular files. Small inputs (a baseline, a thresholds file,
//! a pprof) are refused past a size cap before they are read.

use std::fs::File;
use std::io::Read;
use std::path::Path;

use crate::{Error, Result};

/// The largest small input read whole: a baseline JSON, a metrics or thresholds
/// TOML, a compressed device-memory pprof.
pub const MAX_SMALL_INPUT_BYTES: u64 = 64 << 20;

/// The folders this process may read under, links resolved (`None`: anywhere): set
/// once, by [`confine`].
static ROOTS: std::sync::OnceLock<Vec<std::path::PathBuf>> = std::sync::OnceLock::new();

/// The environment variable that confines a stepscope process's reads to folders (a
/// path list, as `PATH` is): `stepscope mcp` sets it for the commands it runs.
pub const ROOTS_VAR: &str = "STEPSCOPE_ROOTS";

/// Confines every read of this process to `roots` (each resolved): a file or folder
/// whose real path lies outside them is left out of every listing and refused by
/// [`open_regular`], however a path inside led to it (a link to a folder, a run or a
/// file). Only the first call counts. A root that does not resolve is kept as
/// given.
pub fn confine(roots: &[std::path::PathBuf]) {
    let _ = ROOTS.set(roots.iter().map(|r| r.canonicalize().unwrap_or_else(|_| r.clone())).collect());
}

/// Whether `path`, links resolved, lies under the roots [`confine`] set (always, where
/// none were set; never, where it does not resolve).
pub fn inside_roots(path: &Path) -> bool {
    match ROOTS.get() {
        None => true,
        Some(roots) => path.canonicalize().is_ok_and(|real| roots.iter().any(|r| real.starts_with(r))),
    }
}

/// The error for a path outside the roots.
pub fn outside_roots(path: &Path) -> Error {
    Error::new(
        format!("{} lies outside the folders this stepscope may read (a link leads out of them)", path.display()),
        "read it from inside those folders, or give a root above it",
    )
}

/// What a path is, when it is not a regular file or a folder.
pub fn odd_kind(meta: &std::fs::Metadata) -> Option<&'static str> {
    use std::os::unix::fs::FileTypeExt;
    let t = meta.file_type();
    Some(if t.is_fifo() {
        "a FIFO"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_block_device() || t.is_char_device() {
        "a device"
    } else if t.is_file() || t.is_dir() {
        return None;
    } else {
        "not a regular file"
    })
}

/// Opens `path` for reading when it is a regular file inside the roots ([`confine`]),
/// never blocking on a FIFO or a device: the file and its length in bytes.
pub fn open_regular(path: &Path) -> Result<(File, u64)> {
    use std::os::unix::fs::OpenOptionsExt;
    if !inside_roots(path) {
        return Err(outside_roots(path));
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(|e| Error::io(path, &e))?;
    let meta = file.metadata().map_err(|e| Error::io(path, &e))?;
    if let Some(kind) = odd_kind(&meta) {
        return Err(not_regular(path, kind));
    }
    if meta.is_dir() {
        return Err(Error::new(format!("{} is a folder, not a file", path.display()), "pass a file"));
    }
    Ok((file, meta.len()))
}

/// The error for a path that is not a regular file.
pub fn not_regular(path: &Path, kind: &str) -> Error {
    Error::new(format!("{} is {kind}, not a regular file", path.display()), "pass a regular file")
}

/// Reads a small input whole: a regular file of at most [`MAX_SMALL_INPUT_BYTES`];
/// `what` names it in errors ("baseline", "thresholds file").
pub fn read_small(path: &Path, what: &str) -> Result<Vec<u8>> {
    read_capped(path, what, MAX_SMALL_INPUT_BYTES)
}

/// The most [`read_large`] reads whole: a host's part (what a pod's host is mapped to,
/// a few MiB a host for a 120 MB capture).
pub const MAX_LARGE_INPUT_BYTES: u64 = 1 << 30;

/// [`read_small`] of an input that may be larger: at most [`MAX_LARGE_INPUT_BYTES`].
pub fn read_large(path: &Path, what: &str) -> Result<Vec<u8>> {
    read_capped(path, what, MAX_LARGE_INPUT_BYTES)
}

/// [`read_small`] with a cap of `max` bytes.
fn read_capped(path: &Path, what: &str, max: u64) -> Result<Vec<u8>> {
    let (file, len) = open_regular(path)?;
    let too_big = || {
        Error::new(
            format!(
                "{} is too large for a {what} ({} MiB; at most {} MiB)",
                path.display(),
                len.div_ceil(1 << 20),
                max >> 20
            ),
            format!("pass the {what} stepscope wrote, not another file"),
        )
    };
    if len > max {
        return Err(too_big());
    }
    let mut out = Vec::with_capacity(len as usize);
    // A file that grows while read stops at the cap too.
    file.take(max + 1).read_to_end(&mut out).map_err(|e| Error::io(path, &e))?;
    if out.len() as u64 > max {
        return Err(too_big());
    }
    Ok(out)
}

/// [`read_small`] as UTF-8 text.
pub fn read_small_text(path: &Path, what: &str) -> Result<String> {
    String::from_utf8(read_small(path, what)?)
        .map_err(|_| Error::new(format!("{} is not text (not UTF-8)", path.display()), format!("pass a {what}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fifos_and_devices_are_refused_without_blocking() {
        let dir = tempfile_dir();
        let fifo = dir.join("x.xplane.pb");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let e = open_regular(&fifo).unwrap_err();
        assert!(e.what.contains("is a FIFO, not a regular file"), "{e}");
        let e = read_small(Path::new("/dev/zero"), "baseline").unwrap_err();
        assert!(e.what.contains("/dev/zero is a device"), "{e}");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn small_inputs_past_the_cap_are_refused_unread() {
        let dir = tempfile_dir();
        let big = dir.join("big.json");
        // Sparse: its length is past the cap, its blocks are not.
        File::create(&big).unwrap().set_len(MAX_SMALL_INPUT_BYTES + 1).unwrap();
        let e = read_small(&big, "baseline").unwrap_err();
        assert!(e.what.contains("too large for a baseline (65 MiB; at most 64 MiB)"), "{e}");
        std::fs::write(dir.join("ok.json"), b"{}").unwrap();
        assert_eq!(read_small_text(&dir.join("ok.json"), "baseline").unwrap(), "{}");
        std::fs::remove_dir_all(dir).unwrap();
    }

    fn tempfile_dir() -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!(
            "stepscope-files-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        std::fs::create_dir_all(&d).unwrap();
        d
    }
}
