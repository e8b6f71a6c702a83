//! The timeline of a run too large to hold whole, read a host at a time: its tracks
//! are listed once, from each host read alone and dropped ([`TracksPart`], put together
//! by [`RunTracks::assemble`]) with the ids the run read whole gives them; a track's
//! tiles and events are then read from its host alone, so only the hosts on screen are
//! held. Each host is read under the run's decisions ([`RunTracks::decisions`]), so
//! that its steps, and the derived lines that follow them, are those of the run.

use stepscope_model::steps::{RunDecisions, Step};
use stepscope_model::Profile;

use super::{
    busy_tracks, check_tiles, counter_tracks, selected_ids, steps_tracks, DerivedTrack, Match, Search, Timeline, Track,
    Tracks, MAX_SEARCH_MATCHES,
};
use crate::memory::Allocator;

/// What the run's list of tracks takes of one host: its tracks (ids from 0), its Steps
/// track, its allocators with a bytes-in-use timeline (ranked with the other hosts'
/// as the memory analysis ranks them), its devices' busy counters and its devices.
pub struct TracksPart {
    host: String,
    tracks: Vec<Track>,
    steps: Vec<DerivedTrack>,
    allocators: Vec<Allocator>,
    busy: Vec<DerivedTrack>,
    devices: Vec<String>,
}

impl TracksPart {
    /// The part of `profile`, a host read alone whose steps are `steps`.
    pub fn of(profile: &Profile, steps: &[Step]) -> TracksPart {
        let mut allocators = crate::memory::memory(profile, None, 1).allocators;
        allocators.retain(|a| a.timeline.len() > 1);
        for a in &mut allocators {
            // The counter reads only that the timeline has two points.
            a.timeline.truncate(2);
            a.timeline.shrink_to_fit();
        }
        TracksPart {
            host: profile.hosts.first().map(|s| s.host.clone()).unwrap_or_default(),
            tracks: Timeline::build(profile).tracks(profile).tracks,
            steps: steps_tracks(profile, steps),
            allocators,
            busy: busy_tracks(profile),
            devices: profile.devices().iter().map(|d| d.id()).collect(),
        }
    }
}

/// Tracks by host: each host's name, and the ids of its tracks among its own.
pub type ByHost<'a> = Vec<(&'a str, Vec<u32>)>;

/// The tracks of a run read a host at a time, and where each lives.
pub struct RunTracks {
    /// As the run read whole lists them (but for `read_a_host_at_a_time`).
    pub tracks: Tracks,
    /// The run's decisions, under which each host is read.
    pub decisions: RunDecisions,
    /// Each host read, in run order: its name and the id of its first track.
    hosts: Vec<(String, u32)>,
    /// Every device of the run (`host/plane`), in order.
    devices: Vec<String>,
}

impl RunTracks {
    /// The tracks of run `run` from its hosts' parts (hosts in order), read under
    /// `decisions`.
    pub fn assemble(run: &str, parts: Vec<TracksPart>, decisions: RunDecisions) -> RunTracks {
        let (mut tracks, mut hosts, mut devices) = (Vec::new(), Vec::new(), Vec::new());
        // As the run read whole lists its derived tracks: the Steps tracks, the
        // allocators' counters, ranked as the memory analysis ranks them, then the
        // devices' busy shares.
        let (mut derived, mut allocators, mut busy) = (Vec::new(), Vec::new(), Vec::new());
        for p in parts {
            let first = tracks.len() as u32;
            hosts.push((p.host, first));
            tracks.extend(p.tracks.into_iter().map(|t| Track { id: t.id + first, ..t }));
            derived.extend(p.steps);
            allocators.extend(p.allocators);
            busy.extend(p.busy);
            devices.extend(p.devices);
        }
        derived.extend(counter_tracks(&crate::memory::assemble(run, allocators).allocators));
        derived.extend(busy);
        let mut tracks = Tracks::of(run, derived, tracks);
        tracks.read_a_host_at_a_time = true;
        RunTracks { tracks, decisions, hosts, devices }
    }

    /// The host of track `id` and the track's id among its host's alone.
    pub fn host_of(&self, id: u32) -> Result<(&str, u32), String> {
        if id as usize >= self.tracks.tracks.len() {
            return Err(format!("no track {id}"));
        }
        let at = self.hosts.partition_point(|h| h.1 <= id).saturating_sub(1);
        let (host, first) = &self.hosts[at];
        Ok((host, id - first))
    }

    /// The hosts read, in run order, each with the id of its first track.
    pub fn hosts(&self) -> impl Iterator<Item = (&str, u32)> {
        self.hosts.iter().map(|(h, first)| (h.as_str(), *first))
    }

    /// Checks a request for tiles as [`Timeline::tiles`] does.
    pub fn check_tiles(&self, ids: &[u32], px: u32, max_rows: usize) -> Result<(), String> {
        let depth = |id: u32| self.tracks.tracks[id as usize].depth as usize;
        check_tiles(ids, self.tracks.tracks.len(), depth, px, max_rows)
    }

    /// The host of device `device` (`host/plane`).
    pub fn host_of_device(&self, device: &str) -> Result<&str, String> {
        let host = self.hosts.iter().map(|h| h.0.as_str()).filter(|h| {
            device.strip_prefix(h).is_some_and(|rest| rest.starts_with('/')) && self.devices.iter().any(|d| d == device)
        });
        host.max_by_key(|h| h.len())
            .ok_or_else(|| format!("no device {device:?} — pick one of: {}", self.devices.join(", ")))
    }

    /// The tracks an area selection of `tracks` (every track of the run's own lines
    /// when empty) over `[start_ps, end_ps)` reads, checked as [`Timeline::select`]
    /// checks them, each once and in order; and by host, in run order, the ids of its
    /// tracks among its own.
    pub fn selected(&self, start_ps: i64, end_ps: i64, tracks: &[u32]) -> Result<(Vec<u32>, ByHost<'_>), String> {
        let all = &self.tracks.tracks;
        let ids = selected_ids(all.len(), |id| all[id as usize].derived, (start_ps, end_ps), tracks)?;
        let mut by_host: ByHost = Vec::new();
        for &id in &ids {
            let (host, local) = self.host_of(id)?;
            match by_host.last_mut() {
                Some((h, locals)) if *h == host => locals.push(local),
                _ => by_host.push((host, vec![local])),
            }
        }
        Ok((ids, by_host))
    }
}

/// A search of a run read a host at a time: each host's matches, their tracks' ids made
/// the run's, merged as the run read whole lists them ([`Timeline::search`], or from
/// `offset` [`Timeline::search_in_time`]).
pub struct HostSearch<'q> {
    query: &'q str,
    offset: Option<usize>,
    limit: usize,
    total: u64,
    /// The first `limit` in track order; from `offset`, the first `offset + limit` in
    /// time order (the page is the last `limit`).
    matches: Vec<Match>,
}

impl<'q> HostSearch<'q> {
    /// A search for `query`, `limit` matches (at most [`MAX_SEARCH_MATCHES`]) listed from
    /// `offset` in time order where given, else the first in track order.
    pub fn new(query: &'q str, offset: Option<usize>, limit: usize) -> HostSearch<'q> {
        HostSearch { query, offset, limit: limit.min(MAX_SEARCH_MATCHES), total: 0, matches: Vec::new() }
    }

    /// Adds the matches of a host (the next in run order) whose first track is track
    /// `first` of the run.
    pub fn add(&mut self, timeline: &Timeline, profile: &Profile, first: u32) {
        let (total, mine) = match self.offset {
            None => {
                let s = timeline.search(profile, self.query, self.limit - self.matches.len());
                (s.total, s.matches)
            }
            Some(offset) => timeline.matches_in_time(profile, self.query, 0..offset.saturating_add(self.limit)),
        };
        self.total += total;
        self.matches.extend(mine.into_iter().map(|m| m.in_run(first)));
        if let Some(offset) = self.offset {
            self.matches.sort_unstable_by_key(|m| (m.start_ps, m.track, m.index));
            self.matches.truncate(offset.saturating_add(self.limit));
        }
    }

    /// The search of the hosts added.
    pub fn finish(self) -> Search {
        match self.offset {
            None => Search::of(self.query, self.total, None, self.matches),
            Some(offset) => {
                let from = offset.min(self.total as usize);
                Search::of(self.query, self.total, Some(from as u64), self.matches.into_iter().skip(from).collect())
            }
        }
    }
}
