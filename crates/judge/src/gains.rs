//! What fixing a finding's cause would gain: the edit each rule assumes of the step
//! (`stepscope whatif`'s, docs/whatif.md), and of a run read a host at a time the
//! hosts' replays of the edits its rules may ask for, summed up as the run's.
//!
//! A rule attaches its gain with `Finding::with_gain(cx.gain(&edit))`: the context
//! replays the run's steps with the edit (held whole) or adds up its hosts' replays of
//! it (read a host at a time), so that both give the same gain.

use rayon::prelude::*;
use stepscope_analysis::ops::OpRow;
use stepscope_analysis::whatif::{Edit, Replayed, Settled, Target};
use stepscope_model::device_time::Part;
use stepscope_model::Profile;

pub fn remove_compile() -> Edit {
    Edit { remove_compile: true, ..Default::default() }
}

pub fn remove_callbacks() -> Edit {
    Edit { remove_callbacks: true, ..Default::default() }
}

pub fn remove_input() -> Edit {
    Edit { remove_input: true, ..Default::default() }
}

pub fn prefetch_copies() -> Edit {
    Edit { prefetch_copies: true, ..Default::default() }
}

pub fn jit() -> Edit {
    Edit { jit: true, ..Default::default() }
}

pub fn balance() -> Edit {
    Edit { balance: true, ..Default::default() }
}

pub fn dispatch_ahead() -> Edit {
    Edit { dispatch_ahead: true, ..Default::default() }
}

/// The collectives fully overlapped: their time beside nothing goes.
pub fn overlap_collectives() -> Edit {
    Edit { scale: vec![(Target::Part(Part::Collective), 0.0)], ..Default::default() }
}

/// These ops' time gone: copies not made, an op's whole time (the most its fix gains).
pub fn remove_ops(rows: &[&OpRow]) -> Edit {
    let mut names: Vec<&str> = rows.iter().map(|r| r.name.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    Edit { scale: names.into_iter().map(|n| (Target::Op(n.to_string()), 0.0)).collect(), ..Default::default() }
}

/// What a host keeps of the what-if model for a run read a host at a time: its replays
/// of the edits the rules may ask for (`by_host::candidate_edits`), made as it is read
/// (its graphs are not kept: a pod's would outweigh the rest of what is kept of it),
/// and the names of the ops it ran.
pub struct HostReplays {
    replayer: Settled,
    ran: Vec<String>,
    /// Of a run of several hosts: its steps join the other hosts' ([`Replayer::of_run`]).
    in_pod: bool,
}
stepscope_model::wire_struct!(HostReplays { replayer, ran, in_pod });

/// The key a host's [`HostReplays`] made ahead ([`make_ahead`]) are kept under in its
/// memo: the edits' words, and whether the host is of a pod.
#[derive(PartialEq)]
struct AheadKey(Vec<String>, bool);

impl AheadKey {
    fn of(edits: &[Edit], in_pod: bool) -> AheadKey {
        AheadKey(edits.iter().map(Edit::describe).collect(), in_pod)
    }
}

/// One host's [`HostReplays`] of `edits`, a host of a run of several (`in_pod`) or not:
/// those made ahead of it where they were ([`make_ahead`], taken from its memo), else
/// made now.
pub fn host_replays(profile: &Profile, edits: Vec<Edit>, in_pod: bool) -> HostReplays {
    let ahead = profile.memo().take::<AheadKey, HostReplays>(&AheadKey::of(&edits, in_pod));
    ahead.unwrap_or_else(|| replays_now(profile, edits, in_pod))
}

/// [`host_replays`] made while the host waits to be summed up (read ahead of the fold
/// on another thread: `stepscope_analysis::ahead`), kept in its memo until asked for.
/// A host the run then reads again under other decisions starts with an empty memo.
pub fn make_ahead(profile: &Profile, edits: Vec<Edit>, in_pod: bool) {
    let key = AheadKey::of(&edits, in_pod);
    profile.memo().ensure(key, || replays_now(profile, edits, in_pod));
}

fn replays_now(profile: &Profile, edits: Vec<Edit>, in_pod: bool) -> HostReplays {
    let replayer = Settled::of(profile, &edits, in_pod);
    let mut ran: Vec<String> =
        profile.devices().iter().flat_map(|d| d.cached_ops().names.iter().map(|n| n.to_string())).collect();
    ran.sort_unstable();
    ran.dedup();
    HostReplays { replayer, ran, in_pod }
}

impl HostReplays {
    /// `edit` of the ops this host ran (an op it did not run changes nothing here).
    fn own(&self, edit: &Edit) -> Edit {
        let mut own = edit.clone();
        own.scale.retain(|(t, _)| match t {
            Target::Op(name) => self.ran.binary_search(name).is_ok(),
            _ => true,
        });
        own
    }

    /// This host's `edit` ([`Self::own`]) where it was not made ready to replay it.
    pub fn missing(&self, edit: &Edit) -> Option<Edit> {
        let own = self.own(edit);
        self.replayer.replay(&own).is_none().then_some(own)
    }

    /// Made ready to replay `edits` too, of `profile`: this host read again.
    pub fn add(&mut self, profile: &Profile, edits: Vec<Edit>) {
        self.replayer.absorb(Settled::of(profile, &edits, self.in_pod));
    }
}

/// A run's replay of `edit` from its hosts' ([`host_replays`]): on each host, the edit
/// of the ops that host ran, added up. `None` where a host was not made ready to replay
/// that edit.
pub fn run_replay(hosts: &[HostReplays], edit: &Edit) -> Option<Replayed> {
    let replays: Option<Vec<Replayed>> = hosts.par_iter().map(|h| h.replayer.replay(&h.own(edit))).collect();
    let mut run = Replayed::default();
    for r in replays? {
        run.add(r);
    }
    Some(run)
}
