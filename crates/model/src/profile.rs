//! The model of a run: its hosts and, derived from them once in a fixed order, the
//! data every analysis reads. [`Profile`] holds the stages, each a [`Derived`] cell
//! computed from the ones before it on first use:
//!
//! 1. [`DeviceSet`] ([`crate::discover`]): the device descriptors and every device's op
//!    records (names interned, no stat lookups after this pass);
//! 2. [`TimeBase`] ([`crate::time_base`]): each device's busy and active intervals and
//!    its ops' kinds (one pass over its ops), the hosts' compile events and host-side
//!    copies (one pass over each host plane), and the steps, measured; before it, the
//!    hosts' GPU launches ([`Profile::launches`], one pass over each host plane with
//!    GPUs), which the op profile reads too;
//! 3. [`DeviceTime`] ([`crate::device_time`]): every device's window and its time split
//!    into named parts;
//!
//! and, from the hosts alone, the user's host scopes ([`crate::host_scopes`]) and the
//! HLO modules. Nothing here knows the analyses built on the model: their own results
//! are kept, by type and key, in a [`Memo`].
//!
//! A stage's computation uses the rayon pool, so it is only ever computed, or waited
//! for, by a thread outside the pool (the CLI's main thread, a server request's
//! blocking thread, a Python thread): every analysis asks for the stages it needs
//! before it starts parallel work ([`Profile::prepare`] asks for all of them), and
//! code running inside the pool only reads stages already there ([`Derived`] makes a
//! wrong order visible in debug builds instead of a hang). The stages are thread-safe
//! (the server shares a profile across requests) and are dropped when the profile's
//! hosts change ([`Profile::retain_host`]).

use std::sync::OnceLock;

use stepscope_xspace::discover::Run;
use stepscope_xspace::hlo::{hlo_modules, HloModules};
use stepscope_xspace::xplane::read_plane_named;
use stepscope_xspace::{Format, Plane, Space};

use crate::derived::{Derived, Memo};
use crate::device::{Device, UserPeaks};
use crate::device_time::DeviceTime;
use crate::discover::{find_devices, DeviceSet};
use crate::dispatch::Dispatches;
use crate::host_scopes::HostScopes;
use crate::stats::Intervals;
use crate::steps::{Launches, RunDecisions, Steps};
use crate::time_base::TimeBase;

/// A run: one [`Space`] per host, on one clock.
pub struct Profile {
    /// The run's name as discovery reported it.
    pub run: String,
    pub hosts: Vec<Space>,
    /// Per host: how far its events were shifted so that every host shares the clock
    /// of the earliest session start (0 for a single host, or when a host does not
    /// record its start).
    pub clock_offset_ps: Vec<i64>,
    /// The run's host files that could not be read (a capture that crashed while it
    /// wrote, a file cut short), each with why: the profile is the other hosts.
    pub unread_hosts: Vec<stepscope_xspace::discover::Unread>,
    /// Peaks the user gave, over the profile's and the data sheets' (the analyses'
    /// `peaks`).
    user_peaks: UserPeaks,
    /// The run's decisions, where this profile is one host of a run read a host at a
    /// time ([`Profile::set_decisions`]).
    decisions: RunDecisions,
    /// The model's stages and the analyses' memo, each computed once.
    cache: Cache,
}

/// The stages of one profile, each computed once, and the memo of the layers above.
#[derive(Default)]
struct Cache {
    /// Stage 1: the devices and their op records.
    pub devices: Derived<DeviceSet>,
    /// Per host: its launches of GPU work (needs stage 1).
    pub launches: Derived<Vec<Launches>>,
    /// Per host: its XLA:CPU dispatches, or its TPU runs' calls, linked to their runs
    /// (needs stage 1).
    pub dispatches: Derived<Vec<Dispatches>>,
    /// Stage 2: busy, compile and steps (needs stage 1 and the launches).
    pub time: Derived<TimeBase>,
    /// Stage 3: the device-time model (needs stages 1 and 2).
    pub device_time: Derived<DeviceTime>,
    /// The hosts' user scopes (needs nothing before it).
    pub scopes: Derived<Vec<HostScopes>>,
    /// Results of the analyses (op profiles by grouping), kept by type and key.
    pub memo: Memo,
    /// Per host: its HLO modules (found on first use, each decoded on first use;
    /// neither uses the rayon pool, so a plain cell).
    pub hlo: OnceLock<Vec<HloModules>>,
}

impl Profile {
    /// Wraps decoded hosts.
    ///
    /// Each host's times count from its own session start; with several hosts, events
    /// are shifted by the difference of `profile_start_time` (on the `Task
    /// Environment` plane) to the earliest host's, so times compare across hosts.
    pub fn new(run: impl Into<String>, mut hosts: Vec<Space>) -> Profile {
        let starts: Vec<Option<i64>> = hosts.iter().map(session_start_ns).collect();
        let mut clock_offset_ps = vec![0i64; hosts.len()];
        if hosts.len() > 1 && starts.iter().all(Option::is_some) {
            let min = starts.iter().flatten().copied().min().unwrap_or(0);
            for ((space, start), off) in hosts.iter_mut().zip(&starts).zip(&mut clock_offset_ps) {
                *off = start.unwrap_or(min).saturating_sub(min).saturating_mul(1000);
                shift(space, *off);
            }
        }
        Profile {
            run: run.into(),
            hosts,
            clock_offset_ps,
            unread_hosts: Vec::new(),
            user_peaks: Default::default(),
            decisions: RunDecisions::default(),
            cache: Cache::default(),
        }
    }

    /// The profile of the hosts read: where one host was read alone ([`alone`]), that
    /// host at its `clock_offset_ps`; else every host, aligned as [`Profile::new`] aligns
    /// them.
    pub fn of_read(run: impl Into<String>, mut spaces: Vec<Space>, clock_offset_ps: Option<i64>) -> Profile {
        match clock_offset_ps {
            Some(offset) if spaces.len() == 1 => Profile::one_host(run, spaces.remove(0), offset),
            _ => Profile::new(run, spaces),
        }
    }

    /// A profile of one host of a run read alone, its clock shifted by `clock_offset_ps`
    /// ([`clock_offset_ps`]), so that its times are those [`Profile::new`] gives it
    /// when every host of the run is read.
    pub fn one_host(run: impl Into<String>, mut space: Space, clock_offset_ps: i64) -> Profile {
        shift(&mut space, clock_offset_ps);
        Profile {
            run: run.into(),
            hosts: vec![space],
            clock_offset_ps: vec![clock_offset_ps],
            unread_hosts: Vec::new(),
            user_peaks: Default::default(),
            decisions: RunDecisions::default(),
            cache: Cache::default(),
        }
    }

    /// The hosts whose files shrank under their maps after they were read (a capture
    /// copied over them): what is read from them now is zeros, not the profile.
    pub fn changed_hosts(&self) -> Vec<&str> {
        self.hosts.iter().filter(|h| h.file_changed()).map(|h| h.host.as_str()).collect()
    }

    /// The peaks the user gave ([`Profile::set_peaks`]).
    pub fn user_peaks(&self) -> UserPeaks {
        self.user_peaks
    }

    /// Sets the peaks the user gives (`--peak-flops`, `--peak-bandwidth`): they
    /// override the profile's and the data sheets' on every device. Analyses already
    /// computed are dropped, so none reads the old peaks.
    pub fn set_peaks(&mut self, peaks: UserPeaks) {
        if peaks != self.user_peaks {
            self.user_peaks = peaks;
            self.cache = Cache::default();
        }
    }

    /// Gives the profile the run's decisions (see [`RunDecisions`]): a profile of one
    /// host of a run then measures it as the run's profile does. Stages already
    /// computed are dropped.
    pub fn set_decisions(&mut self, decisions: RunDecisions) {
        if decisions != self.decisions {
            self.decisions = decisions;
            self.cache = Cache::default();
        }
    }

    /// Keeps only the host called `name`; false when there is none.
    pub fn retain_host(&mut self, name: &str) -> bool {
        let keep: Vec<bool> = self.hosts.iter().map(|h| h.host == name).collect();
        let mut k = keep.iter();
        self.clock_offset_ps.retain(|_| *k.next().unwrap_or(&false));
        self.hosts.retain(|h| h.host == name);
        self.cache = Cache::default();
        !self.hosts.is_empty()
    }

    /// Every device that ran XLA ops, across hosts. A host whose device planes hold
    /// no events (a CPU capture) contributes its `/host:CPU` plane instead.
    ///
    /// The devices and their op records are found once per profile, on first use,
    /// with the pool's help: ask from outside the pool (see [`crate::profile`]).
    pub fn devices(&self) -> Vec<Device<'_>> {
        self.device_set()
            .slots
            .iter()
            .enumerate()
            .map(|(index, slot)| {
                let space = &self.hosts[slot.host_index];
                Device {
                    host: &space.host,
                    name: slot.name.clone(),
                    ordinal: slot.ordinal,
                    host_index: slot.host_index,
                    index,
                    plane: &space.planes[slot.plane_index],
                    keys: slot.keys,
                    kind: slot.kind,
                    source: slot.source,
                    slot,
                    user_peaks: self.user_peaks,
                }
            })
            .collect()
    }

    /// Per host (in [`Profile::hosts`] order): its HLO modules, found on first use and
    /// each decoded on first use.
    pub fn hlo_modules(&self) -> &[HloModules] {
        self.cache.hlo.get_or_init(|| self.hosts.iter().map(hlo_modules).collect())
    }

    /// Stage 1: the devices with their op records.
    pub fn device_set(&self) -> &DeviceSet {
        self.cache.devices.get_or_compute(|| find_devices(&self.hosts, self.hlo_modules()))
    }

    /// Per host (in [`Profile::hosts`] order): its launches of GPU work, from stage 1
    /// (asked for first, on this thread); empty on a host without GPUs.
    pub fn launches(&self) -> &[Launches] {
        self.device_set();
        self.cache.launches.get_or_compute(|| crate::steps::host_launches(&self.hosts, &self.devices()))
    }

    /// Per host (in [`Profile::hosts`] order): its XLA:CPU dispatches, or the calls that
    /// enqueued its TPUs' runs, each linked to the program run it started
    /// ([`crate::dispatch`], [`crate::enqueue`]), from stage 1 (asked for first, on this
    /// thread); empty on a host whose runs are linked to no call.
    pub fn dispatches(&self) -> &[Dispatches] {
        self.device_set();
        self.cache.dispatches.get_or_compute(|| crate::enqueue::host_calls(&self.hosts, &self.devices()))
    }

    /// Stage 2: busy, compile and steps, from stage 1, the launches and the dispatches
    /// (asked for first, on this thread).
    pub fn time_base(&self) -> &TimeBase {
        let (set, launches, dispatches) = (self.device_set(), self.launches(), self.dispatches());
        self.cache.time.get_or_compute(|| {
            let devices = self.devices();
            crate::time_base::measure(
                &self.hosts,
                self.hlo_modules(),
                set,
                &devices,
                launches,
                dispatches,
                self.decisions,
            )
        })
    }

    /// What links host windows of host `hi` to the device work launched in them
    /// ([`crate::work`]), from stage 2 (asked for first, on this thread).
    pub fn work_in(&self, hi: usize, windows: &[(i64, i64)]) -> crate::work::Launched {
        let base = self.time_base();
        let devices = self.devices();
        let links = crate::work::Links {
            devices: &devices,
            took_part: &base.took_part,
            launches: self.launches(),
            dispatches: self.dispatches(),
        };
        links.work_in(hi, windows)
    }

    /// Stage 3: the device-time model, from stages 1 and 2 (asked for first, on this
    /// thread).
    pub fn device_time(&self) -> &DeviceTime {
        let base = self.time_base();
        self.cache.device_time.get_or_compute(|| crate::device_time::build(&self.devices(), base))
    }

    /// The hosts' user scopes ([`crate::host_scopes`]), found once; asked for outside
    /// the rayon pool (finding them uses it).
    pub fn host_scopes(&self) -> &[HostScopes] {
        self.cache.scopes.get_or_compute(|| crate::host_scopes::find(&self.hosts))
    }

    /// Computes the shared work every analysis of device time reads (every stage),
    /// if it is not there yet. Call it from outside the rayon pool before parallel
    /// work that reads it.
    pub fn prepare(&self) {
        self.device_time();
    }

    /// The memo where the layers above keep their results for this profile
    /// (emptied with the stages).
    pub fn memo(&self) -> &Memo {
        &self.cache.memo
    }
}

/// The host's session start, ns since the Unix epoch (`profile_start_time`).
fn session_start_ns(space: &Space) -> Option<i64> {
    plane_session_start_ns(space.plane(TASK_ENVIRONMENT)?)
}

/// The plane that holds a host's session start.
/// The plane whose `profile_start_time` is the host's session start.
pub const TASK_ENVIRONMENT: &str = "Task Environment";

fn plane_session_start_ns(plane: &Plane) -> Option<i64> {
    plane.plane_stat("profile_start_time").and_then(|s| plane.stat_i64(&s))
}

/// Moves every event of `space` `offset_ps` later.
fn shift(space: &mut Space, offset_ps: i64) {
    if offset_ps != 0 {
        for line in space.planes.iter_mut().flat_map(|p| p.lines.iter_mut()) {
            line.shift_ps(offset_ps);
        }
    }
}

/// The clock offset [`Profile::new`] gives each host of `run` (in `run.hosts`' order)
/// when every host is read, found from the hosts' session starts alone: each XSpace
/// file's "Task Environment" plane is decoded, nothing else. A host whose file cannot be
/// read is left out, as a full read leaves it out. Found once for a run, however many of
/// its hosts are then read one at a time.
pub fn clock_offsets_ps(run: &Run) -> Vec<i64> {
    clock_offsets(run).0
}

/// [`clock_offsets_ps`], and whether every host's file could be read for its start
/// (where one could not, the offsets change once it can: they are not worth keeping).
pub fn clock_offsets(run: &Run) -> (Vec<i64>, bool) {
    let starts: Vec<Option<Option<i64>>> = (run.hosts.iter())
        .map(|h| match h.format {
            Format::XSpace => {
                read_plane_named(&h.path, TASK_ENVIRONMENT).ok().map(|p| p.as_ref().and_then(plane_session_start_ns))
            }
            Format::TraceJson => Some(None),
        })
        .collect();
    let read: Vec<Option<i64>> = starts.iter().flatten().copied().collect();
    let all_read = read.len() == starts.len();
    if read.len() < 2 || read.iter().any(Option::is_none) {
        return (vec![0; run.hosts.len()], all_read);
    }
    let min = read.iter().flatten().copied().min().unwrap_or(0);
    let offsets =
        (starts.iter()).map(|s| s.flatten().unwrap_or(min).saturating_sub(min).saturating_mul(1000)).collect();
    (offsets, all_read)
}

/// Host `host` of `run`, to be read alone: a run of that host's file only, and the
/// clock offset a read of every host gives it ([`Profile::one_host`]). `offsets` are
/// [`clock_offsets_ps`] of `run`, where they were found once for many hosts (`None`:
/// found here). `None` where `run` has no such host.
pub fn alone(run: &Run, host: &str, offsets: Option<&[i64]>) -> Option<(Run, i64)> {
    let i = run.hosts.iter().position(|h| h.host == host)?;
    let offset = match offsets {
        Some(o) => o.get(i).copied().unwrap_or(0),
        None if run.hosts.len() > 1 => clock_offsets_ps(run).get(i).copied().unwrap_or(0),
        None => 0,
    };
    Some((Run { hosts: vec![run.hosts[i].clone()], ..run.clone() }, offset))
}

/// The steps, measured (found once per profile: see [`Profile::prepare`]).
pub fn cached(profile: &Profile) -> &Steps {
    &profile.time_base().steps
}

/// The time device `d` was busy: the union of its op intervals, on every backend (on
/// XLA:CPU the executor's time between the ops of a program is not an op running:
/// the device-time model names it runtime overhead).
///
/// Computed once per device and profile (see [`Profile::prepare`]).
pub fn busy_intervals<'a>(profile: &'a Profile, d: &Device) -> &'a Intervals {
    &profile.time_base().busy[d.index]
}

/// Whether device `d` took part in the run's work: ran a compute op or a collective
/// ([`TimeBase::took_part`]; every device where none did). The run's aggregates, and
/// the evidence the rules cite, are taken over the devices that did.
pub fn took_part(profile: &Profile, d: &Device) -> bool {
    profile.time_base().took_part[d.index]
}

/// The time device `d` was active: ran an op, or, on XLA:CPU, was inside a program
/// (first op to last op of a `run_id`: the executor's time between ops is the
/// program's, not the host's). Gaps in it are the device waiting on its host.
pub fn active_intervals<'a>(profile: &'a Profile, d: &Device) -> &'a Intervals {
    &profile.time_base().active[d.index]
}

/// Per host, the events of its CPU plane that the compile analyses read, found in one
/// pass (once per profile: see [`Profile::prepare`]): (line, event, kinds) in line
/// order, then event order; kinds are [`crate::steps::COMPILE`] and [`crate::steps::COMPILER`].
pub fn host_compile_events(profile: &Profile) -> impl Iterator<Item = &[(u32, u32, u8)]> {
    profile.time_base().hosts.iter().map(|h| h.compile_events.as_slice())
}

/// What tells device `d`'s kernel executions apart: its host's launches (stage 2).
/// Asks for the launches only (no stage 2): call it outside the rayon pool first.
pub fn executions<'a>(profile: &'a Profile, d: &Device) -> crate::executions::Executions<'a> {
    let launches = profile.launches().get(d.host_index);
    let host = profile.hosts.get(d.host_index).and_then(crate::device::host_cpu_plane);
    crate::executions::Executions::new(launches, host, &d.cached_ops().names)
}

/// The device-time model of `profile` (computed once: see [`Profile::prepare`]).
pub fn device_time(profile: &Profile) -> &DeviceTime {
    profile.device_time()
}

/// The time device `d` ran compute ops (whole capture): what ran under its
/// collectives.
pub fn compute_ops<'a>(profile: &'a Profile, d: &Device) -> &'a Intervals {
    let base = profile.time_base();
    base.kinds[d.index].compute(&base.busy[d.index])
}
