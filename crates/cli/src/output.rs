//! Where `export -o OUT` writes, without ever replacing what it must not.
//!
//! - OUT does not exist, or is a regular file: the export is written into a file
//!   with no name in OUT's folder (`O_TMPFILE`), which is named OUT only when it is
//!   complete. A failed or killed export (even by SIGKILL) leaves nothing behind, and
//!   an existing OUT stays whole until the new one replaces it. Where the file
//!   system cannot make unnamed files, a hidden named one is used and removed on
//!   failure and on SIGINT, SIGTERM and SIGHUP.
//! - OUT is a FIFO or a character device (`/dev/null`, `/dev/stdout`): written
//!   through, as a stream; it is never replaced.
//! - OUT is a symbolic link: followed. A link to a regular file replaces that file
//!   (the link stays); a link to a FIFO or a device writes through it; a link to
//!   nothing is refused.
//! - Anything else (a folder, a block device, a socket) is refused in one line.

use std::ffi::CString;
use std::fs::File;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicPtr, Ordering};

use anyhow::{anyhow, bail};

/// An output opened for writing: [`Output::commit`] puts it in place.
pub struct Output {
    file: File,
    place: Place,
    /// Bytes written.
    pub written_bytes: u64,
}

enum Place {
    /// Written straight into OUT (a FIFO or a device).
    Through,
    /// An unnamed file, linked as `target` on commit.
    Unnamed { target: PathBuf },
    /// A hidden named file, renamed to `target` on commit, removed otherwise.
    Named { temp: PathBuf, target: PathBuf },
}

impl Output {
    /// Opens `out` for writing as the module's rules say.
    pub fn open(out: &Path) -> anyhow::Result<Output> {
        let target = match std::fs::symlink_metadata(out) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => out.to_path_buf(),
            Err(e) => bail!("cannot write {}: {e} — check the path", out.display()),
            Ok(meta) if meta.file_type().is_symlink() => match out.canonicalize() {
                Ok(real) => real,
                Err(_) => bail!(
                    "{} is a link to {}, which does not exist — give the file to write itself with -o",
                    out.display(),
                    std::fs::read_link(out).map(|p| p.display().to_string()).unwrap_or_else(|_| "?".into())
                ),
            },
            Ok(_) => out.to_path_buf(),
        };
        match std::fs::metadata(&target) {
            Err(_) => Output::replacing(target),
            Ok(meta) => {
                let t = meta.file_type();
                if t.is_file() {
                    Output::replacing(target)
                } else if t.is_fifo() || t.is_char_device() {
                    Output::through(out, &target)
                } else {
                    bail!(
                        "{} is {}; stepscope writes an export to a new or regular file, a FIFO or a character \
                         device — give a file name with -o",
                        out.display(),
                        kind_of(&meta)
                    )
                }
            }
        }
    }

    /// Writes through a FIFO or a device (a FIFO waits here for its reader).
    fn through(out: &Path, target: &Path) -> anyhow::Result<Output> {
        use std::os::unix::fs::OpenOptionsExt;
        let file = std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NOCTTY)
            .open(target)
            .map_err(|e| anyhow!("cannot write {}: {e} — check its permissions", out.display()))?;
        Ok(Output { file, place: Place::Through, written_bytes: 0 })
    }

    /// A new file that becomes `target` on commit.
    fn replacing(target: PathBuf) -> anyhow::Result<Output> {
        let folder = match target.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        if let Some(file) = unnamed_in(&folder) {
            return Ok(Output { file, place: Place::Unnamed { target }, written_bytes: 0 });
        }
        let temp = hidden_name(&target, "partial");
        let file = std::fs::OpenOptions::new().write(true).create_new(true).open(&temp).map_err(|e| {
            anyhow!("cannot create a file in {}: {e} — check that the folder exists and is writable", folder.display())
        })?;
        remove_on_signal(&temp);
        Ok(Output { file, place: Place::Named { temp, target }, written_bytes: 0 })
    }

    /// Puts the complete output in place (flushes a stream) — unless a profile it was
    /// made from shrank while it was read: then what was written came partly from
    /// zeros, and the file at the target stays as it was.
    pub fn commit(mut self) -> anyhow::Result<()> {
        if !matches!(self.place, Place::Through) && stepscope_xspace::mapguard::any_changed() {
            let changed = stepscope_xspace::mapguard::changed_files();
            let which = changed.first().map_or_else(|| "a profile".into(), |p| p.display().to_string());
            bail!(
                "{which} changed while it was read, so {} was not written (a file there was kept as it was) — run \
                 again once the profile is written whole",
                self.target().display()
            );
        }
        let place = std::mem::replace(&mut self.place, Place::Through);
        match &place {
            Place::Through => Ok(()),
            Place::Unnamed { target } => {
                let fd = format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&self.file));
                let temp = hidden_name(target, "new");
                link_follow(Path::new(&fd), &temp)
                    .and_then(|()| {
                        std::fs::rename(&temp, target).inspect_err(|_| {
                            let _ = std::fs::remove_file(&temp);
                        })
                    })
                    .map_err(|e| anyhow!("cannot write {}: {e} — check the folder is writable", target.display()))
            }
            Place::Named { temp, target } => {
                let moved = std::fs::rename(temp, target);
                forget_on_signal();
                if moved.is_err() {
                    let _ = std::fs::remove_file(temp);
                }
                moved.map_err(|e| anyhow!("cannot write {}: {e} — check the folder is writable", target.display()))
            }
        }
    }
}

impl Output {
    /// Where the output goes.
    fn target(&self) -> &Path {
        match &self.place {
            Place::Through => Path::new("the output"),
            Place::Unnamed { target } | Place::Named { target, .. } => target,
        }
    }

    /// Opens `out`, a file of a folder stepscope writes (a table, a manifest), to be
    /// put in place whole on commit: it must be absent or a regular file. A link, a
    /// FIFO, a device or a folder planted there is refused — never followed, written
    /// through or replaced.
    pub fn open_plain(out: &Path) -> anyhow::Result<Output> {
        plain_or_absent(out)?;
        Output::replacing(out.to_path_buf())
    }
}

/// Refuses `out` unless it is absent or a regular file ([`Output::open_plain`]'s rule):
/// to check a destination before the work that ends in writing it.
pub fn plain_or_absent(out: &Path) -> anyhow::Result<()> {
    match std::fs::symlink_metadata(out) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => bail!("cannot write {}: {e} — check the path", out.display()),
        Ok(meta) if meta.file_type().is_file() => Ok(()),
        Ok(meta) => bail!(
            "{} is {}, not a file stepscope wrote — remove it, or write into another folder",
            out.display(),
            kind_of(&meta)
        ),
    }
}

/// What a path that is not a regular file is, in words (`files::odd_kind`, and
/// links, folders and block devices named as such).
pub fn kind_of(meta: &std::fs::Metadata) -> &'static str {
    let t = meta.file_type();
    if t.is_symlink() {
        "a link"
    } else if t.is_dir() {
        "a folder"
    } else if t.is_block_device() {
        "a block device"
    } else {
        stepscope_xspace::files::odd_kind(meta).unwrap_or("a regular file")
    }
}

/// `rel`'s folders made under `base`, one at a time, none followed where it is a link:
/// a link planted at a folder of `rel` is refused, so nothing is written outside
/// `base`. Returns `base.join(rel)`.
pub fn folders_below(base: &Path, rel: &Path) -> anyhow::Result<PathBuf> {
    let mut at = base.to_path_buf();
    for part in rel.components() {
        let std::path::Component::Normal(name) = part else {
            bail!("{}: not a plain folder name below {}", rel.display(), base.display());
        };
        at.push(name);
        match std::fs::symlink_metadata(&at) {
            Ok(meta) if meta.is_dir() => continue,
            Ok(meta) => bail!(
                "{} is {}, not a folder stepscope made — remove it, or write into another folder",
                at.display(),
                kind_of(&meta)
            ),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => bail!("cannot make {}: {e} — check the path", at.display()),
        }
        match std::fs::create_dir(&at) {
            Ok(()) => {}
            // Made meanwhile by another writer (hosts written in parallel): a folder is fine.
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                if !std::fs::symlink_metadata(&at).is_ok_and(|m| m.is_dir()) {
                    bail!("{} appeared as something other than a folder — write into another folder", at.display());
                }
            }
            Err(e) => bail!("cannot make {}: {e} — check the path", at.display()),
        }
    }
    Ok(at)
}

impl Drop for Output {
    fn drop(&mut self) {
        // Not committed: an unnamed file vanishes with its descriptor; a named one is removed.
        if let Place::Named { temp, .. } = &self.place {
            let _ = std::fs::remove_file(temp);
            forget_on_signal();
        }
    }
}

impl Write for Output {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.file.write(buf)?;
        self.written_bytes += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush()
    }
}

/// `.NAME.PID.WHAT` beside `target`.
fn hidden_name(target: &Path, what: &str) -> PathBuf {
    let name = target.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    target.with_file_name(format!(".{name}.{}.stepscope-{what}", std::process::id()))
}

/// A file without a name in `folder`, where the system makes them (Linux `O_TMPFILE`
/// on most local file systems, with `/proc` to name it later).
#[cfg(target_os = "linux")]
fn unnamed_in(folder: &Path) -> Option<File> {
    use std::os::unix::fs::OpenOptionsExt;
    if !Path::new("/proc/self/fd").is_dir() {
        return None;
    }
    std::fs::OpenOptions::new().write(true).mode(0o666).custom_flags(libc::O_TMPFILE).open(folder).ok()
}

#[cfg(not(target_os = "linux"))]
fn unnamed_in(_: &Path) -> Option<File> {
    None
}

/// Gives the file `from` (a `/proc/self/fd` link) the name `to`.
fn link_follow(from: &Path, to: &Path) -> std::io::Result<()> {
    let c = |p: &Path| CString::new(p.as_os_str().as_bytes()).map_err(std::io::Error::other);
    let (from, to) = (c(from)?, c(to)?);
    // SAFETY: two NUL-terminated paths.
    let r =
        unsafe { libc::linkat(libc::AT_FDCWD, from.as_ptr(), libc::AT_FDCWD, to.as_ptr(), libc::AT_SYMLINK_FOLLOW) };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// The named partial file removed by the signal handler (a leaked C string).
static PARTIAL: AtomicPtr<libc::c_char> = AtomicPtr::new(std::ptr::null_mut());

/// Removes `temp` if the process is ended by SIGINT, SIGTERM or SIGHUP.
fn remove_on_signal(temp: &Path) {
    let Ok(c) = CString::new(temp.as_os_str().as_bytes()) else { return };
    PARTIAL.store(c.into_raw(), Ordering::SeqCst);
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: installs a handler that only calls unlink, signal and raise.
        unsafe {
            libc::signal(sig, on_signal as *const () as libc::sighandler_t);
        }
    }
}

/// The partial file is gone or in place: the handler has nothing to remove. (The
/// path's few bytes are left allocated: a handler running now may still read them.)
fn forget_on_signal() {
    PARTIAL.store(std::ptr::null_mut(), Ordering::SeqCst);
}

extern "C" fn on_signal(sig: libc::c_int) {
    let path = PARTIAL.load(Ordering::SeqCst);
    // SAFETY: unlink, signal and raise are async-signal-safe; `path` is a live C string.
    unsafe {
        if !path.is_null() {
            libc::unlink(path);
        }
        libc::signal(sig, libc::SIG_DFL);
        libc::raise(sig);
    }
}
