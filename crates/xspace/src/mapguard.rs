//! File maps that survive their file shrinking under them.
//!
//! Reading a mapped page that lies past the file's end raises SIGBUS, which kills the
//! process: it happens whenever a profile is truncated or copied over while it is
//! mapped (`scp` of a new capture over the one `serve` is showing). Every profile is
//! mapped through a [`GuardedMap`]: its address range is registered in a fixed table,
//! and a SIGBUS inside a registered range maps zero-filled pages over the rest of that
//! range and marks the map changed. The read that faulted goes on over zeros (the
//! decoders take any bytes without panicking), and whoever holds the map asks
//! [`GuardedMap::changed`] before trusting what was made from it.
//!
//! A SIGBUS outside every registered range goes to the handler that was there before
//! (Rust's own, which tells a stack overflow), or ends the process as it would have.

use std::fs::File;
use std::ops::Deref;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{Mutex, OnceLock};

/// Maps registered at once; past this a file is read into memory instead.
const SLOTS: usize = 16384;

/// A slot's `len` while it is being filled in.
const FILLING: usize = usize::MAX;

struct Slot {
    start: AtomicUsize,
    /// 0: free; [`FILLING`]: claimed; else the mapped length in bytes.
    len: AtomicUsize,
    changed: AtomicBool,
}

#[allow(clippy::declare_interior_mutable_const)]
const FREE: Slot = Slot { start: AtomicUsize::new(0), len: AtomicUsize::new(0), changed: AtomicBool::new(false) };

static TABLE: [Slot; SLOTS] = [FREE; SLOTS];

/// The page size, set when the handler is installed.
static PAGE_BYTES: AtomicUsize = AtomicUsize::new(4096);

/// The SIGBUS action in place before ours (None: ours could not be installed).
static PREVIOUS: OnceLock<Option<libc::sigaction>> = OnceLock::new();

/// The files whose maps were dropped changed ([`changed_files`]).
static CHANGED_FILES: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// A read-only map of a whole file whose reads past a shrunk file's end give zeros.
pub struct GuardedMap {
    map: memmap2::Mmap,
    slot: usize,
    path: PathBuf,
}

/// The files that shrank under a map of this process, once the map is dropped: a
/// command checks this before it ends, since what it printed may have been read from
/// zeros.
pub fn changed_files() -> Vec<PathBuf> {
    CHANGED_FILES.lock().map(|f| f.clone()).unwrap_or_default()
}

/// Whether a file mapped now, or one whose map was dropped, shrank under its map:
/// what this process made from its files cannot be trusted, nor written anywhere.
pub fn any_changed() -> bool {
    let live = TABLE.iter().any(|s| {
        let len = s.len.load(SeqCst);
        len != 0 && len != FILLING && s.changed.load(SeqCst)
    });
    live || CHANGED_FILES.lock().map(|f| !f.is_empty()).unwrap_or(false)
}

impl GuardedMap {
    /// Maps `file` (opened from `path`) read-only. `None` when no guard can be set (the handler could not be
    /// installed, or [`SLOTS`] maps are alive): the caller reads the file instead.
    pub fn map(file: &File, path: &Path) -> std::io::Result<Option<GuardedMap>> {
        if !installed() {
            return Ok(None);
        }
        let Some(slot) = claim() else { return Ok(None) };
        // SAFETY: a read-only map; a file that shrinks while mapped is what the guard
        // is for (reads past its end give zeros and mark the map changed).
        let map = match unsafe { memmap2::Mmap::map(file) } {
            Ok(m) => m,
            Err(e) => {
                TABLE[slot].len.store(0, SeqCst);
                return Err(e);
            }
        };
        let s = &TABLE[slot];
        s.changed.store(false, SeqCst);
        s.start.store(map.as_ptr() as usize, SeqCst);
        // An empty map has no pages to fault; its slot still marks it as ours.
        s.len.store(map.len().max(1), SeqCst);
        Ok(Some(GuardedMap { map, slot, path: path.to_path_buf() }))
    }

    /// True when the file shrank under the map and a read past its new end gave zeros:
    /// nothing made from these bytes can be trusted.
    pub fn changed(&self) -> bool {
        TABLE[self.slot].changed.load(SeqCst)
    }

    /// Lets the kernel drop the resident pages of `start..start + len` (whole pages);
    /// they read back from the file on the next access.
    pub fn dont_need(&self, start: usize, len: usize) {
        // SAFETY: a read-only file mapping: after MADV_DONTNEED its pages read back from
        // the file (or, past a shrunk file's end, from the guard's zero pages).
        let _ = unsafe { self.map.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, start, len) };
    }
}

impl Deref for GuardedMap {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.map
    }
}

impl Drop for GuardedMap {
    fn drop(&mut self) {
        // Unregistered before `map` is unmapped (fields drop after this body).
        let s = &TABLE[self.slot];
        if s.changed.load(SeqCst) {
            if let Ok(mut files) = CHANGED_FILES.lock() {
                if !files.contains(&self.path) {
                    files.push(self.path.clone());
                }
            }
        }
        s.len.store(FILLING, SeqCst);
        s.start.store(0, SeqCst);
        s.len.store(0, SeqCst);
    }
}

/// A free slot, marked [`FILLING`].
fn claim() -> Option<usize> {
    TABLE.iter().position(|s| s.len.compare_exchange(0, FILLING, SeqCst, SeqCst).is_ok())
}

/// Installs the SIGBUS handler once; false where it could not be.
fn installed() -> bool {
    PREVIOUS
        .get_or_init(|| {
            // SAFETY: sysconf and sigaction with a zeroed, then filled, action; the
            // handler only reads atomics and calls mmap.
            unsafe {
                let page = libc::sysconf(libc::_SC_PAGESIZE);
                if page > 0 {
                    PAGE_BYTES.store(page as usize, SeqCst);
                }
                let mut action: libc::sigaction = std::mem::zeroed();
                action.sa_sigaction = on_sigbus as *const () as usize;
                action.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
                libc::sigemptyset(&mut action.sa_mask);
                let mut previous: libc::sigaction = std::mem::zeroed();
                (libc::sigaction(libc::SIGBUS, &action, &mut previous) == 0).then_some(previous)
            }
        })
        .is_some()
}

extern "C" fn on_sigbus(sig: libc::c_int, info: *mut libc::siginfo_t, context: *mut libc::c_void) {
    // SAFETY: the kernel hands a valid siginfo to an SA_SIGINFO handler.
    let addr = unsafe { (*info).si_addr() } as usize;
    let page = PAGE_BYTES.load(SeqCst);
    for slot in TABLE.iter() {
        let len = slot.len.load(SeqCst);
        if len == 0 || len == FILLING {
            continue;
        }
        let start = slot.start.load(SeqCst);
        if addr < start || addr - start >= len {
            continue;
        }
        let from = addr & !(page - 1);
        let end = (start + len).div_ceil(page) * page;
        // SAFETY: replaces pages of a map this process made and still holds (the slot
        // is cleared before the map is unmapped) with private zero pages.
        let zeros = unsafe {
            libc::mmap(
                from as *mut libc::c_void,
                end - from,
                libc::PROT_READ,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
                -1,
                0,
            )
        };
        if zeros != libc::MAP_FAILED {
            slot.changed.store(true, SeqCst);
            return;
        }
        break;
    }
    pass_on(sig, info, context);
}

/// Hands a SIGBUS that is not ours to the action that was there before.
fn pass_on(sig: libc::c_int, info: *mut libc::siginfo_t, context: *mut libc::c_void) {
    let previous = PREVIOUS.get().copied().flatten();
    match previous {
        Some(p) if p.sa_sigaction != libc::SIG_DFL && p.sa_sigaction != libc::SIG_IGN => {
            // SAFETY: the previous handler, called as it was registered to be called.
            unsafe {
                if p.sa_flags & libc::SA_SIGINFO != 0 {
                    let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                        std::mem::transmute(p.sa_sigaction);
                    f(sig, info, context);
                } else {
                    let f: extern "C" fn(libc::c_int) = std::mem::transmute(p.sa_sigaction);
                    f(sig);
                }
            }
        }
        _ => {
            // The default action: returning re-runs the faulting read, which now ends
            // the process as it would have without us.
            // SAFETY: resets one signal's action.
            unsafe {
                libc::signal(libc::SIGBUS, libc::SIG_DFL);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn a_file_that_shrinks_under_its_map_reads_zeros_and_says_so() {
        let dir = std::env::temp_dir().join(format!("stepscope-mapguard-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("shrinks.xplane.pb");
        let page = PAGE_BYTES.load(SeqCst).max(4096);
        let mut f = File::create(&path).unwrap();
        f.write_all(&vec![7u8; page * 3]).unwrap();
        drop(f);
        let file = File::open(&path).unwrap();
        let map = GuardedMap::map(&file, &path).unwrap().expect("a guard is installed");
        assert_eq!(map[page * 2 + 5], 7);
        assert!(!map.changed());
        map.dont_need(0, page * 3);
        std::fs::OpenOptions::new().write(true).open(&path).unwrap().set_len(page as u64).unwrap();
        // Without the guard this read ends the process with SIGBUS.
        let past_end: u64 = map[page..].iter().map(|&b| b as u64).sum();
        assert_eq!(past_end, 0);
        assert_eq!(map[0], 7, "the part still in the file reads as before");
        assert!(map.changed());
        let other = GuardedMap::map(&file, &path).unwrap().unwrap();
        assert_eq!(other.len(), page);
        assert!(!other.changed(), "a map made after the change is whole");
        drop(map);
        drop(other);
        assert!(changed_files().contains(&path));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
