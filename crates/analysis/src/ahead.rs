//! A run's hosts read ahead of a fold, several at once, as many as fit the memory the
//! process may take.
//!
//! The folds ([`crate::fold`]) take each host in turn from a [`Reader`](crate::fold::Reader).
//! [`read_ahead`] gives them one whose hosts were read (and their model built) on
//! other threads while the fold summed up the ones before: the fold's order and its
//! answer are those of a read one host at a time, and only the wall time differs.
//!
//! How many at once: no more than the machine's cores, and no more than fit under the
//! ceiling ([`room::ceiling`]: `STEPSCOPE_MEMORY_LIMIT`, or what the process holds plus
//! the free memory). What a host takes is measured, not guessed: the first host is
//! read alone and summed up by the fold before any other starts, and the process's
//! peak resident memory from its read until the fold is done with it (the fold's own
//! work on it counts: its what-if graphs, its parts), per byte of its file, sizes every
//! other host by its file's bytes. A host is started only where what the process held
//! before the first host, the sizes of the hosts held (being read, read and waiting, or
//! in the fold's hands) and its own fit under the ceiling; one that does not fit even
//! beside them is read alone, where its own read refuses it with the one-line error
//! that says so if it does not fit at all. (Resident memory now would count the pages
//! a dropped host freed, which the allocator keeps for the next.)

use std::sync::{Condvar, Mutex, MutexGuard};

use stepscope_model::Profile;
use stepscope_xspace::room;

/// A host's slot: not yet started, being read, read (taken by the fold once).
enum Slot<E> {
    Waiting,
    Reading,
    Ready(Box<Result<Profile, E>>),
    Taken,
}

/// The readers' shared state.
struct State<E> {
    slots: Vec<Slot<E>>,
    /// The next host to start.
    next: usize,
    /// Hosts being read.
    reading: usize,
    /// Per host, the bytes its measured size reserves from its start until the fold
    /// takes the next host (it has dropped this one by then); their sum.
    held: Vec<u64>,
    held_bytes: u64,
    /// Peak resident bytes per byte of file, measured on the first host read and
    /// summed up.
    per_file_byte: Option<f64>,
    /// The host being measured, and the process's resident and peak resident bytes
    /// before it was read.
    measuring: Option<(usize, Option<(u64, u64)>)>,
    /// The last host the fold took.
    taken: Option<usize>,
    /// The host the fold waits for.
    wanted: Option<usize>,
    /// The fold is done: start nothing more.
    done: bool,
}

/// The peak a host takes per byte of its file before one is measured: the first host
/// is read alone, so this only reserves it (its own read checks that it fits, as a
/// run's check before reading does, [`room::needed_bytes`]).
const UNMEASURED_PER_FILE_BYTE: f64 = 1.0;

/// What a host is taken to need beyond its first host's measured peak: the pages the
/// allocator keeps for each reader thread, the hosts' parts the fold keeps, its last
/// phase over them, and one host's peak varying from read to read (8 copies of a GPU
/// capture: up to 1.6% over a limit without it).
const MEASURED_MARGIN: f64 = 1.25;

/// The least a host is taken to need per byte of its file, however little its first
/// host's read was seen to add (its pages may have been resident already).
const MIN_PER_FILE_BYTE: f64 = 0.25;

/// Where the peak resident memory cannot be measured (a system without /proc):
/// a host's peak per byte of its file, as measured on the 126 MB bench capture with
/// room (bench/README.md) and rounded up.
const FALLBACK_PER_FILE_BYTE: f64 = 2.0;

/// Runs `fold` with a [`Reader`](crate::fold::Reader) of a run's hosts (each one's
/// file bytes in `file_bytes`): host `i` is
/// `read(i)`, made ready (`warm`) on a reader thread ahead of the fold, or read on the
/// fold's thread where it asks for a host again or out of turn. No more hosts are read
/// at once than there are cores ([`threads`]). A `STEPSCOPE_MEMORY_LIMIT` that is no
/// amount is `refuse`d before any host is read.
pub fn read_ahead<E: Send, T>(
    file_bytes: &[u64],
    read: &(dyn Fn(usize) -> Result<Profile, E> + Sync),
    warm: &(dyn Fn(&Profile) + Sync),
    refuse: impl FnOnce(stepscope_xspace::Error) -> E,
    fold: impl FnOnce(&mut dyn FnMut(usize, bool) -> Result<Profile, E>) -> T,
) -> Result<T, E> {
    let n = file_bytes.len();
    let ceiling = room::ceiling().map_err(refuse)?.map(|(bytes, _)| bytes);
    let state = Mutex::new(State {
        slots: (0..n).map(|_| Slot::Waiting).collect(),
        next: 0,
        reading: 0,
        held: vec![0; n],
        held_bytes: 0,
        per_file_byte: None,
        measuring: None,
        taken: None,
        wanted: None,
        done: false,
    });
    let changed = Condvar::new();
    let base = room::resident_bytes().unwrap_or(0);
    let shared = Shared { file_bytes, ceiling, base, state: &state, changed: &changed, threads: threads() };
    std::thread::scope(|s| {
        for _ in 0..shared.threads.min(n) {
            s.spawn(|| shared.work(read, warm));
        }
        let mut take = |i: usize, again: bool| shared.take(i, again, read);
        let answer = fold(&mut take);
        shared.lock().done = true;
        changed.notify_all();
        Ok(answer)
    })
}

/// What the reader threads and the fold share.
struct Shared<'s, E> {
    file_bytes: &'s [u64],
    ceiling: Option<u64>,
    /// What the process held before the first host was read.
    base: u64,
    state: &'s Mutex<State<E>>,
    changed: &'s Condvar,
    threads: usize,
}

impl<E> Shared<'_, E> {
    fn lock(&self) -> MutexGuard<'_, State<E>> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A reader thread: starts the next host whenever it may, until none is left or
    /// the fold is done.
    fn work(&self, read: &(dyn Fn(usize) -> Result<Profile, E> + Sync), warm: &(dyn Fn(&Profile) + Sync)) {
        loop {
            let Some(i) = self.next_host() else { return };
            let made = read(i).inspect(|p| warm(p));
            self.finish(i, made);
        }
    }

    /// Records host `i` read (or refused: what it reserved is freed, and a host refused
    /// while it was to be measured leaves the next to be), and wakes the others.
    fn finish(&self, i: usize, made: Result<Profile, E>) {
        let mut st = self.lock();
        if made.is_err() {
            st.held_bytes -= std::mem::take(&mut st.held[i]);
            if st.measuring.is_some_and(|(m, _)| m == i) {
                st.measuring = None;
            }
        }
        st.slots[i] = Slot::Ready(Box::new(made));
        st.reading -= 1;
        drop(st);
        self.changed.notify_all();
    }

    /// Once the fold is done with the host being measured (it takes another): what a
    /// host takes, per byte of its file, from the process's peak since before that
    /// host was read.
    fn measure(&self, st: &mut State<E>) {
        let Some((m, before)) = st.measuring else { return };
        if st.taken != Some(m) {
            return;
        }
        st.measuring = None;
        let file = self.file_bytes[m].max(1) as f64;
        let per_byte = match (before, room::peak_resident_bytes()) {
            // The process's peak, where this host raised it (else an earlier peak hides it).
            (Some((resident, was)), Some(peak)) if peak > was => peak.saturating_sub(resident) as f64 / file,
            _ => FALLBACK_PER_FILE_BYTE,
        };
        st.per_file_byte = Some((per_byte * MEASURED_MARGIN).max(MIN_PER_FILE_BYTE));
    }

    /// Waits until the next host may be started, and reserves it; `None` where none is
    /// left or the fold is done.
    fn next_host(&self) -> Option<usize> {
        let mut st = self.lock();
        loop {
            if st.done || st.next >= st.slots.len() {
                return None;
            }
            let i = st.next;
            // The first host is read alone, to measure what a host takes; the others
            // no further ahead of the fold than there are threads.
            let from = st.wanted.or(st.taken.map(|t| t + 1)).unwrap_or(0);
            let may = match st.per_file_byte {
                None => st.measuring.is_none() && st.reading == 0,
                Some(_) => i < from + self.threads,
            };
            if may {
                let per_byte = st.per_file_byte.unwrap_or(UNMEASURED_PER_FILE_BYTE);
                let need = (self.file_bytes[i] as f64 * per_byte) as u64;
                // Nothing else is held: no host is being read, and the fold holds none.
                let alone = st.reading == 0 && (st.wanted == Some(i) || st.taken.is_none());
                // Alone (the host the fold held before is dropped), a host is read
                // whether it fits or not: its own read checks the memory it needs
                // and refuses it with the one line that says so.
                if alone || self.fits(st.held_bytes + need) {
                    if st.per_file_byte.is_none() {
                        st.measuring = Some((i, room::resident_bytes().zip(room::peak_resident_bytes())));
                    }
                    st.next += 1;
                    st.reading += 1;
                    st.slots[i] = Slot::Reading;
                    st.held[i] = need;
                    st.held_bytes += need;
                    return Some(i);
                }
            }
            st = self.changed.wait(st).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// Whether hosts that take `need` bytes fit under the ceiling beside what the
    /// process held before the first host was read.
    fn fits(&self, need: u64) -> bool {
        self.ceiling.is_none_or(|ceiling| self.base.saturating_add(need) <= ceiling)
    }

    /// Host `i` for the fold: read ahead where it was, else read now (asked `again`,
    /// or a second time).
    fn take(&self, i: usize, again: bool, read: &(dyn Fn(usize) -> Result<Profile, E> + Sync)) -> Result<Profile, E> {
        let mut st = self.lock();
        if again || !matches!(st.slots.get(i), Some(Slot::Waiting | Slot::Reading | Slot::Ready(_))) {
            drop(st);
            return read(i);
        }
        // The fold is done with the host before: measured now where it was the first.
        self.measure(&mut st);
        st.wanted = Some(i);
        self.changed.notify_all();
        loop {
            if let Some(slot @ Slot::Ready(_)) = st.slots.get_mut(i) {
                let made = std::mem::replace(slot, Slot::Taken);
                // The fold asks for this host once it dropped the one before.
                if let Some(t) = st.taken.replace(i) {
                    st.held_bytes -= std::mem::take(&mut st.held[t]);
                }
                st.wanted = None;
                drop(st);
                self.changed.notify_all();
                if let Slot::Ready(made) = made {
                    return *made;
                }
                return read(i);
            }
            st = self.changed.wait(st).unwrap_or_else(|p| p.into_inner());
        }
    }
}

/// How many hosts are read at once at most: the cores there are.
pub fn threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Whether a run of several hosts is read together, as one profile, on every surface:
/// `STEPSCOPE_READ_TOGETHER=1`, the reference the tests hold the merges to.
pub fn read_together() -> bool {
    std::env::var_os(READ_TOGETHER).is_some_and(|v| v == "1")
}

/// The variable [`read_together`] reads.
pub const READ_TOGETHER: &str = "STEPSCOPE_READ_TOGETHER";
