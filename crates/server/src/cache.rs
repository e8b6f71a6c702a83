//! Decoded runs, loaded once and kept in a small least-recently-used cache.
//!
//! Loading runs on the blocking pool (callers are inside `spawn_blocking`); two
//! requests for the same run wait on one load. What is derived from a run is computed
//! once, on those blocking threads, never inside the rayon pool that computing it
//! uses ([`Derived`]): a request thread waits, a pool thread never does.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use stepscope_analysis::peaks::UserPeaks;
use stepscope_analysis::profile::{alone, clock_offsets};
use stepscope_analysis::steps::{self, RunDecisions, Steps};
use stepscope_analysis::timeline::{RunTracks, Timeline};
use stepscope_analysis::{Derived, Profile};
use stepscope_xspace::discover::Run;
use stepscope_xspace::Progress;

use crate::root::Root;

/// Runs (per host selection) kept decoded.
pub const DEFAULT_RUNS: usize = 4;

/// Runs whose hosts' clock offsets are kept.
const OFFSET_RUNS: usize = 16;

/// A decoded run and what is derived from it once.
pub struct Entry {
    pub profile: Profile,
    /// The run as discovered (its folder, host files and device-memory profiles).
    pub run: Run,
    timeline: Derived<Timeline>,
    steps: Derived<Steps>,
}

impl Entry {
    /// The timeline index, built on first use.
    pub fn timeline(&self) -> &Timeline {
        self.timeline.get_or_compute(|| Timeline::build(&self.profile))
    }

    /// The steps, found on first use, with their critical paths (the what-if graphs,
    /// which the overview's findings replay too).
    pub fn steps(&self) -> &Steps {
        self.steps.get_or_compute(|| {
            let mut s = steps::steps(&self.profile);
            stepscope_analysis::whatif::add_critical_paths(&self.profile, &mut s.steps);
            s
        })
    }
}

/// Run name, its files' modification time (a rewritten run loads again), host, and
/// the run's decisions it is read under (a host of a run read a host at a time).
type Key = (String, SystemTime, Option<String>, Option<RunDecisions>);
/// Run name and its files' modification time.
type RunKey = (String, SystemTime);
type Slot = Arc<Derived<Result<Arc<Entry>, LoadError>>>;

/// Why a run could not be loaded: one line, and whether its hosts were refused as too
/// large to read together (they can still be read one at a time).
#[derive(Clone, Debug)]
pub struct LoadError {
    pub message: String,
    pub too_large: bool,
}

impl From<String> for LoadError {
    fn from(message: String) -> LoadError {
        LoadError { message, too_large: false }
    }
}

impl From<&str> for LoadError {
    fn from(message: &str) -> LoadError {
        LoadError::from(message.to_string())
    }
}
/// A run (as [`RunKey`]) and a question about it (a route and its parameters).
type AnswerKey = (RunKey, String);
/// An answer, or its failure (status, message).
type Answer<V> = Arc<Derived<Result<Arc<V>, (u16, String)>>>;

/// Answers about a whole run kept, each made from its hosts one at a time.
const ANSWERS: usize = 16;

/// Answers about runs, each made once by the first request that asks (others wait for
/// it) and kept while it is among the most recent `capacity`.
struct Kept<V> {
    capacity: usize,
    slots: Mutex<VecDeque<(AnswerKey, Answer<V>)>>,
}

impl<V> Kept<V> {
    fn new(capacity: usize) -> Kept<V> {
        Kept { capacity, slots: Mutex::default() }
    }

    /// Answer `question` about `run` as its files are now, made by `make` on the first
    /// request; a failure is not kept, nor an answer `make` says not to keep (one that
    /// a host read again may change): the next request makes it again.
    fn get(
        &self,
        run: &Run,
        question: String,
        make: impl FnOnce() -> Result<(V, bool), (u16, String)>,
    ) -> Result<Arc<V>, (u16, String)> {
        let key: AnswerKey = ((run.rel.clone(), run.modified), question);
        let slot = {
            let mut slots = self
                .slots
                .lock()
                .map_err(|_| (500, "server state is poisoned — restart stepscope serve".to_string()))?;
            let slot = match slots.iter().position(|(k, _)| *k == key) {
                Some(i) => slots.remove(i).map(|(_, s)| s).unwrap_or_default(),
                None => Answer::default(),
            };
            slots.push_front((key.clone(), slot.clone()));
            slots.truncate(self.capacity);
            slot
        };
        let mut keep = true;
        let result = (slot.get_or_compute(|| {
            make().map(|(value, keep_it)| {
                keep = keep_it;
                Arc::new(value)
            })
        }))
        .clone();
        if result.is_err() || !keep {
            if let Ok(mut slots) = self.slots.lock() {
                slots.retain(|(k, s)| !(k == &key && Arc::ptr_eq(s, &slot)));
            }
        }
        result
    }
}

pub struct Cache {
    capacity: usize,
    slots: Mutex<VecDeque<(Key, Slot)>>,
    /// Per run (name, modification time): its hosts' clock offsets, found once for
    /// however many of its hosts are read alone (each host's entry would otherwise peek
    /// at every host's file again). The most recent [`OFFSET_RUNS`] kept.
    offsets: Mutex<VecDeque<(RunKey, Arc<Vec<i64>>)>>,
    /// The devices' peaks given to `serve`, set on every run read.
    peaks: UserPeaks,
    /// Answers made from a run's hosts read one at a time (its hosts' summaries), the
    /// most recent [`ANSWERS`]: a pod's hundreds of hosts are read once, not on every
    /// visit, and two requests for one answer wait on one making.
    answers: Kept<Vec<u8>>,
    /// The timeline's tracks of runs read a host at a time, and where each lives.
    tracks: Kept<RunTracks>,
    /// Runs refused as too large to read whole with no other run kept: asked again,
    /// they are refused at once, and the hosts kept stay (a pod's timeline keeps the
    /// hosts it draws). Until its files change or the server restarts, such a run is
    /// read a host at a time even if memory was freed since.
    too_large: Mutex<VecDeque<(RunKey, LoadError)>>,
}

impl Cache {
    pub fn new(capacity: usize, peaks: UserPeaks) -> Cache {
        Cache {
            capacity: capacity.max(1),
            slots: Mutex::new(VecDeque::new()),
            offsets: Mutex::default(),
            peaks,
            answers: Kept::new(ANSWERS),
            tracks: Kept::new(OFFSET_RUNS),
            too_large: Mutex::default(),
        }
    }

    /// The answer `question` about `run` as its files are now: made by `make` on the
    /// first request (others wait for it), kept while it is among the most recent
    /// [`ANSWERS`]. A failure is not kept, nor an answer `make` says not to keep (one
    /// that a host read again may change): the next request makes it again.
    pub fn answer(
        &self,
        run: &Run,
        question: String,
        make: impl FnOnce() -> Result<(Vec<u8>, bool), (u16, String)>,
    ) -> Result<Arc<Vec<u8>>, (u16, String)> {
        self.answers.get(run, question, make)
    }

    /// The timeline's tracks of `run` read a host at a time, as its files are now:
    /// made by `make` once, as [`Cache::answer`].
    pub fn run_tracks(
        &self,
        run: &Run,
        make: impl FnOnce() -> Result<(RunTracks, bool), (u16, String)>,
    ) -> Result<Arc<RunTracks>, (u16, String)> {
        self.tracks.get(run, String::new(), make)
    }

    /// The clock offsets of `run`'s hosts ([`clock_offsets`]), found on the first call
    /// for the run as it is now; where a host's file could not be read for its start (a
    /// file being written), found again on the next call.
    fn offsets(&self, run: &Run) -> Arc<Vec<i64>> {
        let key = (run.rel.clone(), run.modified);
        let known = self.offsets.lock().ok().and_then(|o| o.iter().find(|(k, _)| *k == key).map(|(_, v)| v.clone()));
        if let Some(v) = known {
            return v;
        }
        // Found outside the lock: two requests may both peek; both get the same answer.
        let (found, all_read) = clock_offsets(run);
        let found = Arc::new(found);
        if !all_read {
            return found;
        }
        if let Ok(mut o) = self.offsets.lock() {
            o.retain(|(k, _)| *k != key);
            o.push_front((key, found.clone()));
            o.truncate(OFFSET_RUNS);
        }
        found
    }

    /// The run `run` (default: the newest) of `root`, only host `host` when given.
    /// Blocks while the run is read.
    pub fn get(&self, root: &Root, run: Option<&str>, host: Option<&str>) -> Result<Arc<Entry>, LoadError> {
        self.entry(root.run(run)?, host, None)
    }

    /// Host `host` of `run` read alone, on the run's clock and under the run's
    /// `decisions` (a host of a run read a host at a time: its numbers are those the run
    /// read whole gives it), kept as [`Cache::get`] keeps runs.
    pub fn host_in_run(&self, run: Run, host: &str, decisions: RunDecisions) -> Result<Arc<Entry>, LoadError> {
        self.entry(run, Some(host), Some(decisions))
    }

    /// `run`, only host `host` when given, under `decisions` when given.
    fn entry(&self, run: Run, host: Option<&str>, decisions: Option<RunDecisions>) -> Result<Arc<Entry>, LoadError> {
        let run_key: RunKey = (run.rel.clone(), run.modified);
        if host.is_none() {
            let known = self.too_large.lock().ok().and_then(|t| t.iter().find(|(k, _)| *k == run_key).cloned());
            if let Some((_, refused)) = known {
                return Err(refused);
            }
        }
        if let Some(h) = host {
            if !run.hosts.iter().any(|f| f.host == h) {
                let names: Vec<&str> = run.hosts.iter().map(|f| f.host.as_str()).collect();
                return Err(
                    format!("no host named {h:?} in run {:?} — pick one of: {}", run.rel, names.join(", ")).into()
                );
            }
        }
        let key: Key = (run.rel.clone(), run.modified, host.map(str::to_string), decisions);
        let slot = {
            let mut slots = self.slots.lock().map_err(|_| "server state is poisoned — restart stepscope serve")?;
            let slot = match slots.iter().position(|(k, _)| *k == key) {
                Some(i) => slots.remove(i).map(|(_, s)| s).filter(|s| !file_changed(s)).unwrap_or_default(),
                None => Slot::default(),
            };
            slots.push_front((key.clone(), slot.clone()));
            slots.truncate(self.capacity);
            slot
        };
        let result = slot
            .get_or_compute(|| {
                // As the CLI's `--host`: that host's file alone, on the run's clock (the
                // other hosts' session starts peeked at).
                let offsets = (host.is_some() && run.hosts.len() > 1).then(|| self.offsets(&run));
                let (to_read, offset) = match host.and_then(|h| alone(&run, h, offsets.as_deref().map(Vec::as_slice))) {
                    Some((one, offset)) => (one, Some(offset)),
                    None => (run.clone(), None),
                };
                // Where it would not fit beside the other runs kept, they go, and it is
                // read again; refused then, it is refused at once the next time.
                let read = match to_read.load_readable(&Progress::default(), host) {
                    Err(e) if e.memory_refused.is_some() && self.keep_only(&key) => {
                        to_read.load_readable(&Progress::default(), host)
                    }
                    read => read,
                }
                .map_err(|e| {
                    let refused =
                        LoadError { message: e.to_string(), too_large: e.memory_refused.is_some_and(|n| n > 1) };
                    if refused.too_large {
                        if let Ok(mut t) = self.too_large.lock() {
                            t.retain(|(k, _)| *k != run_key);
                            t.push_front((run_key.clone(), refused.clone()));
                            t.truncate(OFFSET_RUNS);
                        }
                    }
                    refused
                })?;
                let mut profile = Profile::of_read(run.rel.clone(), read.spaces, offset);
                profile.unread_hosts = read.unread;
                if let Some(h) = host {
                    profile.retain_host(h);
                }
                if let Some(d) = decisions {
                    profile.set_decisions(d);
                }
                profile.set_peaks(self.peaks);
                Ok(Arc::new(Entry {
                    profile,
                    run: run.clone(),
                    timeline: Derived::default(),
                    steps: Derived::default(),
                }))
            })
            .clone();
        if result.is_err() {
            // Don't keep failures: the file may be complete on the next try.
            if let Ok(mut slots) = self.slots.lock() {
                slots.retain(|(k, s)| !(k == &key && Arc::ptr_eq(s, &slot)));
            }
        }
        result
    }

    /// Host `host` of `run` read alone on the run's clock, not kept: for a run read a
    /// host at a time. Where it would not fit beside the runs kept, they go.
    pub fn read_host(&self, run: &Run, host: &str) -> Result<Profile, LoadError> {
        let offsets = (run.hosts.len() > 1).then(|| self.offsets(run));
        let (one, offset) = alone(run, host, offsets.as_deref().map(Vec::as_slice))
            .ok_or_else(|| LoadError::from(format!("no host named {host:?} in run {:?}", run.rel)))?;
        let key: Key = (run.rel.clone(), run.modified, Some(host.to_string()), None);
        let read = match one.load_readable(&Progress::default(), Some(host)) {
            Err(e) if e.memory_refused.is_some() && self.keep_only(&key) => {
                one.load_readable(&Progress::default(), Some(host))
            }
            read => read,
        }
        .map_err(|e| LoadError { message: e.to_string(), too_large: false })?;
        let mut profile = Profile::of_read(run.rel.clone(), read.spaces, Some(offset));
        profile.set_peaks(self.peaks);
        Ok(profile)
    }

    /// Drops every kept run but `key`'s (each is freed once no request holds it) and
    /// hands the freed memory back to the system, so that a large run that would not fit
    /// beside them may. False where none was kept and no memory went back.
    fn keep_only(&self, key: &Key) -> bool {
        let dropped: Vec<(Key, Slot)> = match self.slots.lock() {
            Ok(mut slots) => {
                let (keep, drop): (VecDeque<_>, VecDeque<_>) = slots.drain(..).partition(|(k, _)| k == key);
                *slots = keep;
                drop.into_iter().collect()
            }
            Err(_) => return false,
        };
        let any = !dropped.is_empty();
        drop(dropped);
        // Freed memory, of these runs or of answers made a host at a time, goes back.
        #[cfg(all(target_os = "linux", target_env = "gnu"))]
        // SAFETY: malloc_trim only returns free heap pages to the system.
        let trimmed = unsafe { libc::malloc_trim(0) == 1 };
        #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
        let trimmed = false;
        any || trimmed
    }
}

/// Whether a loaded run's files shrank under their maps (a capture copied over them):
/// such a run is read again, from the files as they are now.
fn file_changed(slot: &Slot) -> bool {
    matches!(slot.get(), Some(Ok(entry)) if !entry.profile.changed_hosts().is_empty())
}
