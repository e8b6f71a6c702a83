//! Resolving PATH and loading a run, with a progress bar on a terminal.

use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use stepscope_xspace::discover::{self, Run, Unread};
use stepscope_xspace::{Progress, Space};

use stepscope_analysis::Profile;

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
    let mut run = match crate::remote::run(&input.path, input.run.as_deref())? {
        Some(run) => run,
        None => discover::resolve(&input.path, input.run.as_deref())?,
    };
    let mut clock_offset_ps = None;
    if let Some(host) = must {
        if !run.hosts.iter().any(|h| h.host == host) {
            let names: Vec<&str> = run.hosts.iter().map(|h| h.host.as_str()).collect();
            anyhow::bail!("no host named {host:?} in this run — pick one of: {}", names.join(", "));
        }
        if run.hosts.len() > 1 {
            clock_offset_ps = Some(stepscope_analysis::profile::clock_offset_ps(&run, host));
            run.hosts.retain(|h| h.host == host);
        }
    }
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
    for u in &readable.unread {
        errln!(
            "stepscope: note: host {} was not read ({}); the numbers are the other {} host(s)'",
            u.host,
            u.error,
            readable.spaces.len()
        );
    }
    Ok(Loaded { run, spaces: readable.spaces, unread: readable.unread, clock_offset_ps })
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
    let mut spaces = loaded.spaces;
    let mut profile = match (loaded.clock_offset_ps, spaces.len()) {
        (Some(offset), 1) => Profile::one_host(loaded.run.rel.clone(), spaces.remove(0), offset),
        _ => Profile::new(loaded.run.rel.clone(), spaces),
    };
    profile.unread_hosts = loaded.unread;
    if let Some(h) = &select.host {
        if !profile.retain_host(h) {
            anyhow::bail!("no host named {h:?} in this run — pick one of: {}", hosts.join(", "));
        }
    }
    Ok((profile, loaded.run))
}
