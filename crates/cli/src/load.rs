//! Resolving PATH and loading a run, with a progress bar on a terminal.

use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use stepscope_xspace::discover::{self, Readable, Run, Unread};
use stepscope_xspace::{Progress, Space};

use stepscope_analysis::ops::GroupBy;
use stepscope_analysis::profile::{alone, clock_offsets_ps};
use stepscope_analysis::Profile;
use stepscope_report::side::Side;

use crate::opts::{Input, Select};

/// A run and its decoded hosts.
pub struct Loaded {
    pub run: Run,
    pub spaces: Vec<Space>,
    /// Hosts that could not be read (each named in a note on stderr).
    pub unread: Vec<Unread>,
    /// Where only `--host` of several was read: its clock offset, as a read of every
    /// host aligns it.
    pub clock_offset_ps: Option<i64>,
}

/// Resolves `input` and reads every host of the run that can be read; fails only
/// when none can. With `must` (`--host`), reads that host alone (the others' files are
/// only peeked at for their session starts, which align the hosts' clocks), and fails
/// when it cannot.
pub fn load(input: &Input, must: Option<&str>) -> anyhow::Result<Loaded> {
    let mut run = resolve(input, must)?;
    let mut clock_offset_ps = None;
    if let Some(host) = must {
        if run.hosts.len() > 1 {
            let (one, offset) = alone(&run, host, None).ok_or_else(|| no_host(host, &run))?;
            (run, clock_offset_ps) = (one, Some(offset));
        }
    }
    let readable = read(&run, must)?;
    Ok(Loaded { run, spaces: readable.spaces, unread: readable.unread, clock_offset_ps })
}

/// Each host of `input`'s run read alone, as its file has it (on its own clock, as
/// [`load`] reads it), handed to `f` with its file's path before the next is read:
/// memory is one host's. A host whose file cannot be read is left out and returned
/// with why (where none could be read, the first one's error), with the run.
pub fn each_space(input: &Input, f: &mut dyn FnMut(std::path::PathBuf, Space)) -> anyhow::Result<(Run, Vec<Unread>)> {
    let run = resolve(input, None)?;
    let mut unread = Vec::new();
    for h in &run.hosts {
        let (one, _) = alone(&run, &h.host, None).ok_or_else(|| no_host(&h.host, &run))?;
        match read(&one, Some(&h.host)).map(|mut r| r.spaces.pop()) {
            Ok(Some(space)) => f(h.path.clone(), space),
            Ok(None) => {}
            Err(e) => unread.push(Unread { host: h.host.clone(), error: format!("{e:#}") }),
        }
    }
    note_unread(&unread, run.hosts.len() - unread.len())?;
    Ok((run, unread))
}

/// Reads the hosts of `input`'s run that `keep` keeps, one at a time, each alone on the
/// run's clock (the offsets are found once), and hands each to `f` with its name before
/// reading the next: memory is one host's. Returns the hosts read. A host whose file
/// cannot be read is an error, unless `unread` is given: then it is noted there (with
/// why) and the next is read.
pub fn each_host(
    input: &Input,
    only: Option<&str>,
    mut unread: Option<&mut Vec<stepscope_xspace::discover::Unread>>,
    f: &mut dyn FnMut(&str, Profile) -> anyhow::Result<()>,
) -> anyhow::Result<usize> {
    let hosts = Hosts::of(input, only)?;
    let mut read_hosts = 0;
    for host in hosts.names().into_iter().filter(|h| only.is_none_or(|o| o == *h)) {
        let profile = match (hosts.read(host), unread.as_deref_mut()) {
            (Ok(p), _) => p,
            (Err(e), Some(unread)) => {
                unread.push(stepscope_xspace::discover::Unread { host: host.to_string(), error: format!("{e:#}") });
                continue;
            }
            (Err(e), None) => return Err(e),
        };
        f(host, profile)?;
        read_hosts += 1;
    }
    Ok(read_hosts)
}

/// What the folds of `stepscope_analysis::fold` read hosts with: host `i` read alone,
/// `None` where it cannot be read the first time, an error where it cannot be read
/// `again`. (A file that changed under its map is named once the command is done:
/// the folds' checks are no-ops here.)
pub type Reader<'a> = stepscope_analysis::fold::Reader<'a, anyhow::Error>;

/// Reads `input`'s run a host at a time for `sum`, which is given the run's name, its
/// host count and the [`Reader`] of its hosts (each with the user's `peaks`). A host
/// whose file cannot be read is left out: noted as a whole run's read notes it, and
/// returned with the sum (where no host could be read, the first one's error).
pub fn host_at_a_time<T>(
    input: &Input,
    peaks: stepscope_analysis::peaks::UserPeaks,
    sum: impl FnOnce(&str, usize, &mut Reader) -> anyhow::Result<T>,
) -> anyhow::Result<(T, Vec<stepscope_xspace::discover::Unread>)> {
    host_at_a_time_of_run(input, peaks, |run, read| sum(&run.rel, run.hosts.len(), read))
}

/// [`host_at_a_time`] of a sum that judges the run's findings with `th`: each host's
/// replays of the edits the rules may ask for are made on the thread that read it,
/// ahead of its turn ([`stepscope_judge::by_host::ahead`]).
pub fn host_at_a_time_judged<T>(
    input: &Input,
    peaks: stepscope_analysis::peaks::UserPeaks,
    th: &stepscope_judge::thresholds::Thresholds,
    sum: impl FnOnce(&str, usize, &mut Reader) -> anyhow::Result<T>,
) -> anyhow::Result<(T, Vec<stepscope_xspace::discover::Unread>)> {
    let warm = |p: &stepscope_analysis::Profile, in_pod: bool| stepscope_judge::by_host::ahead(p, th, in_pod);
    host_at_a_time_warmed(input, peaks, &warm, |run, read| sum(&run.rel, run.hosts.len(), read))
}

/// [`host_at_a_time`], `sum` given the run found (its files beside the hosts').
pub fn host_at_a_time_of_run<T>(
    input: &Input,
    peaks: stepscope_analysis::peaks::UserPeaks,
    sum: impl FnOnce(&Run, &mut Reader) -> anyhow::Result<T>,
) -> anyhow::Result<(T, Vec<stepscope_xspace::discover::Unread>)> {
    host_at_a_time_warmed(input, peaks, &|_, _| {}, sum)
}

/// [`host_at_a_time_of_run`], `warm` asked of each host read ahead of the sum, on the
/// thread that read it (with whether the run has several hosts).
fn host_at_a_time_warmed<T>(
    input: &Input,
    peaks: stepscope_analysis::peaks::UserPeaks,
    warm: &(dyn Fn(&stepscope_analysis::Profile, bool) + Sync),
    sum: impl FnOnce(&Run, &mut Reader) -> anyhow::Result<T>,
) -> anyhow::Result<(T, Vec<stepscope_xspace::discover::Unread>)> {
    let hosts = Hosts::of(input, None)?;
    let names = hosts.names();
    let file_bytes: Vec<u64> = hosts.run.hosts.iter().map(|h| h.bytes).collect();
    let raw = |i: usize| {
        let mut p = hosts.read(names[i])?;
        p.set_peaks(peaks);
        Ok(p)
    };
    let mut unread = Vec::new();
    let refuse = |e: stepscope_xspace::Error| anyhow::Error::from(e);
    let in_pod = names.len() > 1;
    // What the sum keeps of each host until its reduce goes to a spill file, not to
    // memory (stepscope_analysis::wire::Spilling): a pod's memory does not grow with it.
    let _spilling = if in_pod { stepscope_analysis::wire::Spilling::start() } else { None };
    let ready = |p: &stepscope_analysis::Profile| {
        p.prepare();
        warm(p, in_pod);
    };
    let sum = stepscope_analysis::ahead::read_ahead(&file_bytes, &raw, &ready, refuse, |take| {
        let mut read = |i: usize, again: bool| match take(i, again) {
            Ok(p) => Ok(Some(p)),
            Err(e) if !again && !refused(&e) => {
                unread.push(stepscope_xspace::discover::Unread { host: names[i].to_string(), error: format!("{e:#}") });
                Ok(None)
            }
            Err(e) => Err(e),
        };
        sum(&hosts.run, &mut read)
    })??;
    note_unread(&unread, names.len() - unread.len())?;
    Ok((sum, unread))
}

/// Whether `e` refused a host that does not fit in memory: the command fails (a host
/// left out for want of memory would change the answer without a word).
fn refused(e: &anyhow::Error) -> bool {
    e.downcast_ref::<stepscope_xspace::Error>().is_some_and(|x| x.memory_refused.is_some())
}

/// The run `input` names and its hosts' names, in the run's order, without reading (or,
/// in a bucket, fetching) any host: what a driver of a run mapped elsewhere needs.
pub fn plan(input: &Input) -> anyhow::Result<(String, Vec<String>)> {
    if let Some(plan) = crate::remote::plan(&input.path, input.run.as_deref())? {
        return Ok(plan);
    }
    let run = resolve(input, None)?;
    Ok((run.rel.clone(), run.hosts.iter().map(|h| h.host.clone()).collect()))
}

/// A run's hosts, to be read one at a time, each alone on the run's clock (the
/// offsets are found once, from the hosts' session starts).
pub struct Hosts {
    run: Run,
    offsets: Vec<i64>,
}

impl Hosts {
    /// The hosts of `input`'s run (a bucket's fetched: with `only`, that host's file
    /// alone).
    pub fn of(input: &Input, only: Option<&str>) -> anyhow::Result<Hosts> {
        let run = resolve(input, only)?;
        let offsets = if run.hosts.len() > 1 { clock_offsets_ps(&run) } else { vec![0; run.hosts.len()] };
        Ok(Hosts { run, offsets })
    }

    /// The run's name (its folder, relative to the path given).
    pub fn run_name(&self) -> &str {
        &self.run.rel
    }

    /// The hosts' names, in the run's order.
    pub fn names(&self) -> Vec<&str> {
        self.run.hosts.iter().map(|h| h.host.as_str()).collect()
    }

    /// Host `host` read alone.
    pub fn read(&self, host: &str) -> anyhow::Result<Profile> {
        let run = &self.run;
        let (one, offset) = alone(run, host, Some(&self.offsets)).ok_or_else(|| no_host(host, run))?;
        let mut readable = read(&one, Some(host))?;
        let space = readable.spaces.pop().ok_or_else(|| no_host(host, run))?;
        Ok(Profile::one_host(run.rel.clone(), space, offset))
    }
}

/// The error for `--host HOST` where `run` has none of that name.
fn no_host(host: &str, run: &Run) -> anyhow::Error {
    let names: Vec<&str> = run.hosts.iter().map(|h| h.host.as_str()).collect();
    anyhow::anyhow!("no host named {host:?} in this run — pick one of: {}", names.join(", "))
}

/// The run `input` names (a bucket's fetched: with `only`, that host's file alone, the
/// others peeked at), with the notes of what was skipped and of which run was chosen.
fn resolve(input: &Input, only: Option<&str>) -> anyhow::Result<Run> {
    // A command may ask twice (how many hosts, then the hosts): the run is found, and
    // its notes printed, once.
    type Key = (std::path::PathBuf, Option<String>, Option<String>);
    static FOUND: std::sync::LazyLock<std::sync::Mutex<std::collections::HashMap<Key, Run>>> =
        std::sync::LazyLock::new(Default::default);
    let key = (input.path.clone(), input.run.clone(), only.map(str::to_string));
    let mut found = FOUND.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(run) = found.get(&key) {
        return Ok(run.clone());
    }
    let run = found_run(input, only)?;
    found.insert(key, run.clone());
    Ok(run)
}

/// [`resolve`], each time.
fn found_run(input: &Input, only: Option<&str>) -> anyhow::Result<Run> {
    let run = match crate::remote::run(&input.path, input.run.as_deref(), only)? {
        Some(run) => run,
        None => discover::resolve(&input.path, input.run.as_deref())?,
    };
    for note in &run.skipped {
        errln!("stepscope: note: skipped {note}");
    }
    if run.among > 1 && input.run.is_none() {
        errln!(
            "stepscope: note: reading {}, the newest of {} runs in {}; pick another with --run NAME (`stepscope ls {}` lists them)",
            run.rel,
            run.among,
            input.path.display(),
            input.path.display()
        );
    }
    Ok(run)
}

/// Reads `run`'s hosts (a bar on a terminal), with notes on what a host lacks or could
/// not give; fails only when none can be read, or `must` cannot.
fn read(run: &Run, must: Option<&str>) -> anyhow::Result<Readable> {
    let progress = Progress::default();
    let done = AtomicBool::new(false);
    let total = run.bytes();
    let readable = std::thread::scope(|s| {
        if std::io::stderr().is_terminal() {
            s.spawn(|| show_progress(&progress, &done, total));
        }
        let r = run.load_readable(&progress, must);
        done.store(true, Ordering::Relaxed);
        r
    })?;
    for space in &readable.spaces {
        let empty = space.empty_lines_not_kept();
        if empty > 0 {
            errln!(
                "stepscope: note: host {}: {empty} line(s) without events were left out (a plane keeps its first {} \
                 empty lines; they hold nothing to measure)",
                space.host,
                stepscope_xspace::model::MAX_EMPTY_LINES
            );
        }
        let damaged = space.damaged_durations();
        if damaged > 0 {
            errln!(
                "stepscope: note: host {}: {damaged} event(s) record an impossible length (over 13 days: the file is \
                 damaged); they are read as instants",
                space.host
            );
        }
    }
    note_unread(&readable.unread, readable.spaces.len())?;
    Ok(readable)
}

/// Notes each host that could not be read, beside the `read` hosts that were; where
/// none was, the first one's error.
pub fn note_unread(unread: &[stepscope_xspace::discover::Unread], read: usize) -> anyhow::Result<()> {
    if let (0, Some(first)) = (read, unread.first()) {
        anyhow::bail!("{}", first.error);
    }
    for u in unread {
        errln!(
            "stepscope: note: host {} was not read ({}); the numbers are the other {read} host(s)'",
            u.host,
            u.error
        );
    }
    Ok(())
}

/// Whether `input`'s run is read a host at a time: where `asked` (`--host-at-a-time`),
/// and wherever it has several hosts and no one host is selected (`--host`). Only one
/// host is read whole: a run of several is each host read alone, into the parts its
/// answers merge from ([`stepscope_analysis::fold`]), several at once as memory allows
/// ([`stepscope_analysis::ahead`]). `STEPSCOPE_READ_TOGETHER=1` reads a run's hosts
/// together instead: the reference the tests hold the merges to.
pub fn by_host(input: &Input, select: &Select, asked: bool) -> anyhow::Result<bool> {
    match select.host {
        Some(_) if !asked => Ok(false),
        _ => many_hosts(input, asked),
    }
}

/// [`by_host`] for a command that reads the whole run (no `--host`).
pub fn many_hosts(input: &Input, asked: bool) -> anyhow::Result<bool> {
    if asked {
        return Ok(true);
    }
    Ok(!stepscope_analysis::ahead::read_together() && resolve(input, None)?.hosts.len() > 1)
}

/// A command's answer from the run read whole (`whole`, given the profile), or, where
/// the run is read a host at a time ([`by_host`], `asked` or not) or where it is too
/// large to read whole, read a host at a time (`by_host`): the same `same`.
pub fn whole_or_by_host<T>(
    input: &Input,
    select: &Select,
    asked: bool,
    same: &str,
    whole: impl FnOnce(Profile) -> anyhow::Result<T>,
    by_host: impl FnOnce() -> anyhow::Result<T>,
) -> anyhow::Result<T> {
    let host_at_a_time = self::by_host(input, select, asked)?;
    loaded_or_by_host(host_at_a_time, same, || profile(input, select), whole, by_host)
}

/// [`whole_or_by_host`], the run read whole by `load`.
pub fn loaded_or_by_host<P, T>(
    host_at_a_time: bool,
    same: &str,
    load: impl FnOnce() -> anyhow::Result<P>,
    whole: impl FnOnce(P) -> anyhow::Result<T>,
    by_host: impl FnOnce() -> anyhow::Result<T>,
) -> anyhow::Result<T> {
    if host_at_a_time {
        return by_host();
    }
    match load() {
        Ok(p) => whole(p),
        Err(e) => match too_large(&e) {
            Some(what) => {
                errln!(
                    "stepscope: note: {what}: read a host at a time instead, for the same {same} \
                     (STEPSCOPE_MEMORY_LIMIT=none reads the hosts together)"
                );
                by_host()
            }
            None => Err(e),
        },
    }
}

/// The analysis `args` ask for: `whole` of the run read whole, or, where asked or where
/// the run is too large to read whole, `by_host` of it read a host at a time (the same
/// rows): [`whole_or_by_host`] and [`host_at_a_time`] for the analyses that need no
/// more than the run's hosts.
pub fn analysis<T>(
    args: &crate::opts::ByHostArgs,
    whole: impl FnOnce(&Profile) -> T,
    by_host: impl FnOnce(&str, usize, &mut Reader) -> anyhow::Result<T>,
) -> anyhow::Result<T> {
    let input = &args.common.input;
    let by_host = || Ok(host_at_a_time(input, Default::default(), by_host)?.0);
    whole_or_by_host(input, &args.common.select, args.host_at_a_time, "rows", |p| Ok(whole(&p)), by_host)
}

/// What `diff`, `compare` and `history` read of a run ([`Side`]: its overview with `top`
/// ops, its op profile over its steps grouped `by`, its kernels where asked), and the
/// run: of the run read whole, or, where `host_at_a_time` asks or where the run is too
/// large to read whole, of it read a host at a time (the same numbers).
pub fn side(
    input: &Input,
    select: &Select,
    host_at_a_time: bool,
    want: (GroupBy, usize, bool),
) -> anyhow::Result<(Side, Run)> {
    let (by, top, with_kernels) = want;
    let by_host = || {
        let made = host_at_a_time_of_run(input, Default::default(), |run, read| {
            Ok((Side::by_host(&run.rel, run.hosts.len(), want, read, &|_| Ok(()))?, run.clone()))
        });
        Ok(made?.0)
    };
    let whole = |(p, run): (Profile, Run)| Ok((Side::of(&p, by, top, with_kernels), run));
    let host_at_a_time = self::by_host(input, select, host_at_a_time)?;
    loaded_or_by_host(host_at_a_time, "numbers", || profile_and_run(input, select), whole, by_host)
}

/// Where `e` is a run whose hosts were refused as too large to read together: what it
/// said of it.
pub fn too_large(e: &anyhow::Error) -> Option<&str> {
    (e.downcast_ref::<stepscope_xspace::Error>())
        .filter(|x| x.memory_refused.is_some_and(|n| n > 1))
        .map(|x| x.what.as_str())
}

/// Draws a bar once a load has taken half a second; clears it when done.
fn show_progress(progress: &Progress, done: &AtomicBool, total: u64) {
    let start = Instant::now();
    let mut bar: Option<indicatif::ProgressBar> = None;
    while !done.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(50));
        if bar.is_none() && start.elapsed() >= Duration::from_millis(500) {
            let b = indicatif::ProgressBar::new(total);
            b.set_style(
                indicatif::ProgressStyle::with_template("reading {bar:40} {bytes}/{total_bytes} {elapsed}")
                    .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
            );
            bar = Some(b);
        }
        if let Some(b) = &bar {
            b.set_position(progress.bytes().min(total));
        }
    }
    if let Some(b) = bar {
        b.finish_and_clear();
    }
}

/// Loads the run as a [`Profile`], keeping only `--host` when given.
pub fn profile(input: &Input, select: &Select) -> anyhow::Result<Profile> {
    Ok(profile_and_run(input, select)?.0)
}

/// Like [`profile`], also returning the run (its folder and the files beside it).
pub fn profile_and_run(input: &Input, select: &Select) -> anyhow::Result<(Profile, Run)> {
    let loaded = load(input, select.host.as_deref())?;
    let hosts: Vec<String> = loaded.spaces.iter().map(|s| s.host.clone()).collect();
    let mut profile = Profile::of_read(loaded.run.rel.clone(), loaded.spaces, loaded.clock_offset_ps);
    profile.unread_hosts = loaded.unread;
    if let Some(h) = &select.host {
        if !profile.retain_host(h) {
            anyhow::bail!("no host named {h:?} in this run — pick one of: {}", hosts.join(", "));
        }
    }
    Ok((profile, loaded.run))
}
