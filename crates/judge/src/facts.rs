//! What the rules read of a run's own events beside its analyses: the evidence they
//! cite (the longest gaps and copies, the devices that queued or idled, each with
//! what its host was doing), its devices' peak bandwidth and its truncated hosts.
//!
//! Where the run is held whole they are found in it as a rule asks. Where it is read a
//! host at a time they are found in each host before it is dropped ([`HostFacts`]):
//! each host's first few, ranked as the run read whole ranks them ([`Found`]), so the
//! run's first few are among them ([`RunFacts::of`]).

use std::cmp::Reverse;

use stepscope_model::device_time::Part;
use stepscope_model::steps::{Step, Steps};
use stepscope_model::Profile;

use crate::evidence::{at, ev, host_activity, in_step, ms};
use crate::finding::Evidence;

/// How many pieces of evidence of each kind a rule cites.
pub const CITED: usize = 3;

/// The kinds of evidence found in a run's events, each cited by one rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `gaps-between-steps`: the longest gaps after a step before the next.
    BetweenSteps,
    /// `host-bound-gaps`: the longest device-idle stretches inside steps.
    IdleGaps,
    /// `input-bound`: the steps that waited longest for their first op.
    LeadingIdle,
    /// `host-device-copies`: the longest copies.
    Copies,
    /// `launch-queued`: the first devices whose launched work waited to start.
    Queued,
    /// `low-utilization` (no steps): the idlest devices.
    Idlest,
}

impl Kind {
    /// Every kind, in declaration order (`kind as usize` is its place).
    pub const ALL: [Kind; 6] =
        [Kind::BetweenSteps, Kind::IdleGaps, Kind::LeadingIdle, Kind::Copies, Kind::Queued, Kind::Idlest];

    /// This kind's first [`CITED`] in `profile`, whose steps are `steps` and whose
    /// steps waited `leading_idle` for their first op (by index into the steps).
    fn find(self, profile: &Profile, steps: &Steps, leading_idle: &[(usize, i64)]) -> Vec<Found> {
        match self {
            Kind::BetweenSteps => between_steps(profile, steps),
            Kind::IdleGaps => idle_gaps(profile, steps),
            Kind::LeadingIdle => waited(profile, steps, leading_idle),
            Kind::Copies => copies(profile),
            Kind::Queued => queued(profile),
            Kind::Idlest => idlest(profile),
        }
    }
}

/// Where a piece of evidence is, and so its rank among every piece of its kind: its
/// size, larger first, then its place in the run (devices before hosts; device, step,
/// host, then its order there), which breaks ties as the run read whole meets them.
#[derive(Clone, Copy, Debug)]
pub struct Place {
    pub size: i64,
    /// Its device, by index into the run's devices.
    pub device: Option<usize>,
    /// Its step, by index into the run's steps.
    pub step: Option<usize>,
    /// Its host, by index into the run's hosts (where it has a device, the device's;
    /// where a step, left 0: a step is in one host).
    pub host: usize,
    /// Its order within that place.
    pub order: i64,
}
stepscope_model::wire_struct!(Place { size, device, step, host, order });

impl Place {
    fn rank(&self) -> (Reverse<i64>, bool, Option<usize>, Option<usize>, usize, i64) {
        (Reverse(self.size), self.device.is_none(), self.device, self.step, self.host, self.order)
    }

    fn of_step(size: i64, step: usize) -> Place {
        Place { size, device: None, step: Some(step), host: 0, order: 0 }
    }
}

/// A piece of evidence at its place.
#[derive(Clone, Debug)]
pub struct Found {
    pub place: Place,
    pub evidence: Evidence,
}
stepscope_model::wire_struct!(Found { place, evidence });

/// The first `n` of `items` by the rank of their places.
fn first<T>(mut items: Vec<(Place, T)>, n: usize) -> Vec<(Place, T)> {
    items.sort_by_key(|(p, _)| p.rank());
    items.truncate(n);
    items
}

/// A host whose profile looks truncated: capped trace JSON, or events it says it
/// dropped.
#[derive(Clone, Debug)]
pub struct Truncated {
    pub host: String,
    pub events: u64,
    pub detail: String,
}
stepscope_model::wire_struct!(Truncated { host, events, detail });

/// The hosts of `profile` that look truncated, in order.
pub fn truncated(profile: &Profile) -> Vec<Truncated> {
    let mut out = Vec::new();
    for space in &profile.hosts {
        let events = space.event_count();
        let json = space.format == stepscope_xspace::Format::TraceJson;
        let dropped = space.warnings.iter().chain(&space.errors).find(|w| {
            let w = w.to_ascii_lowercase();
            w.contains("drop") || w.contains("truncat") || w.contains("buffer full") || w.contains("exceed")
        });
        let detail = match dropped {
            Some(w) => Some(w.clone()),
            None if json && events >= TRACE_VIEWER_MAX_EVENTS => {
                Some("trace JSON is capped at 1,000,000 events by JAX".into())
            }
            None if json => stopped_before_the_capture(space),
            None => None,
        };
        if let Some(detail) = detail {
            out.push(Truncated { host: space.host.clone(), events, detail });
        }
    }
    out
}

/// The events XProf's converter keeps in a trace JSON by default (the first ones, by
/// start time; `TF_PROFILER_TRACE_VIEWER_MAX_EVENTS` sets another cap).
pub const TRACE_VIEWER_MAX_EVENTS: u64 = 1_000_000;

/// Where a trace JSON holds the Python tracer's `start_trace` call but not the
/// `stop_trace` call that ended the capture, its events stop before the capture did:
/// a cap below the default one cut it (the Python tracer records the `stop_trace`
/// call it is stopped in, so a whole trace ends with it).
fn stopped_before_the_capture(space: &stepscope_xspace::Space) -> Option<String> {
    let traced = |call: &str| {
        (space.planes.iter()).any(|p| {
            (0..p.event_meta.len() as u32).any(|m| {
                let name = p.event_name(m);
                name.starts_with('$') && name.strip_suffix(call).is_some_and(|head| head.ends_with(' '))
            })
        })
    };
    if !traced("start_trace") || traced("stop_trace") {
        return None;
    }
    let span_ms = space.time_span_ps().map_or(0.0, |(lo, hi)| hi.saturating_sub(lo) as f64 / 1e9);
    Some(format!(
        "its events stop {span_ms:.1} ms in, before the capture's stop_trace: the trace JSON was capped \
         (XProf keeps the first TF_PROFILER_TRACE_VIEWER_MAX_EVENTS events, 1,000,000 by default)"
    ))
}

/// The peak memory bandwidth of the first of `profile`'s devices whose peak is known.
pub fn peak_bytes_per_s(profile: &Profile) -> Option<f64> {
    profile.devices().iter().find_map(|d| stepscope_analysis::peaks::of(d).bytes_per_s)
}

/// What the rules read of one host of a run read a host at a time: each kind's first
/// few, its truncation, its devices' peak bandwidth; and what places them in the run
/// (its devices and steps).
pub struct HostFacts {
    found: Vec<Vec<Found>>,
    truncated: Vec<Truncated>,
    peak_bytes_per_s: Option<f64>,
    hosts: usize,
    devices: usize,
    steps: usize,
}
stepscope_model::wire_struct!(HostFacts { found, truncated, peak_bytes_per_s, hosts, devices, steps });

impl HostFacts {
    /// The facts of `profile` (one host), measured under the run's decisions: its
    /// steps are `steps`, which waited `leading_idle` for their first op.
    pub fn of(profile: &Profile, steps: &Steps, leading_idle: &[(usize, i64)]) -> HostFacts {
        HostFacts {
            found: Kind::ALL.iter().map(|k| k.find(profile, steps, leading_idle)).collect(),
            truncated: truncated(profile),
            peak_bytes_per_s: peak_bytes_per_s(profile),
            hosts: profile.hosts.len(),
            devices: profile.devices().len(),
            steps: steps.steps.len(),
        }
    }
}

/// The facts of a run read a host at a time, from its hosts' ([`HostFacts`]).
#[derive(Clone, Debug, Default)]
pub struct RunFacts {
    found: Vec<Vec<Found>>,
    pub truncated: Vec<Truncated>,
    pub peak_bytes_per_s: Option<f64>,
}

impl RunFacts {
    /// The run's facts from its hosts', hosts in order; `step_at` maps each host's
    /// steps (the hosts' one after another) to their places in the run's.
    pub fn of(hosts: Vec<HostFacts>, step_at: &[usize]) -> RunFacts {
        let mut all: Vec<Vec<(Place, Evidence)>> = vec![Vec::new(); Kind::ALL.len()];
        let mut run = RunFacts::default();
        let (mut hosts_before, mut devices, mut steps) = (0, 0, 0);
        for h in hosts {
            for (into, found) in all.iter_mut().zip(h.found) {
                into.extend(found.into_iter().map(|mut f| {
                    let p = &mut f.place;
                    p.device = p.device.map(|d| d + devices);
                    p.step = p.step.map(|s| step_at[s + steps]);
                    p.host += hosts_before;
                    (f.place, f.evidence)
                }));
            }
            run.truncated.extend(h.truncated);
            run.peak_bytes_per_s = run.peak_bytes_per_s.or(h.peak_bytes_per_s);
            hosts_before += h.hosts;
            devices += h.devices;
            steps += h.steps;
        }
        run.found = (all.into_iter())
            .map(|f| first(f, CITED).into_iter().map(|(place, evidence)| Found { place, evidence }).collect())
            .collect();
        run
    }
}

/// Where the rules find the run's facts: the run held whole, or the facts of a run
/// read a host at a time.
pub enum Facts<'a> {
    Whole { profile: &'a Profile, steps: &'a Steps, leading_idle: &'a [(usize, i64)] },
    Run(&'a RunFacts),
}

impl Facts<'_> {
    /// The evidence of `kind` the rule cites.
    pub fn cited(&self, kind: Kind) -> Vec<Evidence> {
        let found = match self {
            Facts::Whole { profile, steps, leading_idle } => kind.find(profile, steps, leading_idle),
            Facts::Run(run) => run.found[kind as usize].clone(),
        };
        found.into_iter().map(|f| f.evidence).collect()
    }

    pub fn truncated(&self) -> Vec<Truncated> {
        match self {
            Facts::Whole { profile, .. } => truncated(profile),
            Facts::Run(run) => run.truncated.clone(),
        }
    }

    pub fn peak_bytes_per_s(&self) -> Option<f64> {
        match self {
            Facts::Whole { profile, .. } => peak_bytes_per_s(profile),
            Facts::Run(run) => run.peak_bytes_per_s,
        }
    }
}

/// Each step followed by a gap before the next step of its host: (its index, the
/// step, the gap).
pub fn gaps_between_steps(steps: &Steps) -> Vec<(usize, &Step, i64)> {
    let mut gaps = Vec::new();
    for (i, st) in steps.steps.iter().enumerate() {
        if let Some(next) = steps.steps[i + 1..].iter().find(|n| n.host == st.host) {
            let gap = next.start_ps.saturating_sub(st.end_ps());
            if gap > 0 {
                gaps.push((i, st, gap));
            }
        }
    }
    gaps
}

/// The longest gaps between steps, with what the host did in them.
fn between_steps(profile: &Profile, steps: &Steps) -> Vec<Found> {
    let gaps = gaps_between_steps(steps).into_iter().map(|(i, st, gap)| (Place::of_step(gap, i), st)).collect();
    let found = first(gaps, CITED).into_iter().map(|(place, st)| {
        let gap = place.size;
        let what = format!("after step {}: {} until the next", st.step_num, ms(gap));
        Found { place, evidence: in_step(what, st, st.end_ps(), gap) }
    });
    with_host_activity(profile, found.collect())
}

/// The largest device-idle gaps inside steps, each stretch once (devices of one host
/// share gaps), with what the host was doing.
fn idle_gaps(profile: &Profile, steps: &Steps) -> Vec<Found> {
    let devices = profile.devices();
    // (place, the step): the gap is `order` (its start) for `size`.
    let mut gaps: Vec<(Place, &Step)> = Vec::new();
    // A device that took no part in the work is idle all along: not the host's doing.
    for d in devices.iter().filter(|d| stepscope_model::profile::took_part(profile, d)) {
        let spans = stepscope_model::profile::active_intervals(profile, d).spans();
        for (i, st) in steps.steps.iter().enumerate().filter(|(_, s)| s.host == d.host) {
            let (lo, hi) = (st.start_ps, st.end_ps());
            let gap = |a: i64, b: i64| {
                let place = Place {
                    size: b.saturating_sub(a),
                    device: Some(d.index),
                    step: Some(i),
                    host: d.host_index,
                    order: a,
                };
                (place, st)
            };
            let mut cur = lo;
            let first = spans.partition_point(|s| s.1 <= lo);
            for &(a, b) in &spans[first..] {
                if a >= hi {
                    break;
                }
                if a > cur {
                    gaps.push(gap(cur, a));
                }
                cur = cur.max(b);
            }
            if cur < hi {
                gaps.push(gap(cur, hi));
            }
        }
    }
    gaps.sort_by_key(|(p, _)| p.rank());
    let mut out: Vec<Found> = Vec::new();
    for (place, st) in gaps {
        let (a, b) = (place.order, place.order + place.size);
        let seen = |e: &Evidence| e.start_ps.is_some_and(|s| s < b && s + e.duration_ps.unwrap_or(0) > a);
        if out.iter().any(|o| o.evidence.host == st.host && seen(&o.evidence)) {
            continue;
        }
        let what = format!("device idle {} in step {}", ms(place.size), st.step_num);
        out.push(Found { place, evidence: in_step(what, st, a, place.size) });
        if out.len() == CITED {
            break;
        }
    }
    with_host_activity(profile, out)
}

/// The steps that waited longest for their first op (`leading_idle`: by index into
/// `steps`), with what the host was doing.
fn waited(profile: &Profile, steps: &Steps, leading_idle: &[(usize, i64)]) -> Vec<Found> {
    let waits = (leading_idle.iter()).filter_map(|&(i, ps)| Some((Place::of_step(ps, i), steps.steps.get(i)?)));
    let found = first(waits.collect(), CITED).into_iter().map(|(place, st)| {
        let what = format!("step {}: {} before the first op", st.step_num, ms(place.size));
        Found { place, evidence: in_step(what, st, st.start_ps, place.size) }
    });
    with_host_activity(profile, found.collect())
}

/// Each piece's `detail`: what its host was doing over its span.
fn with_host_activity(profile: &Profile, mut found: Vec<Found>) -> Vec<Found> {
    for f in &mut found {
        let e = &mut f.evidence;
        let lo = e.start_ps.unwrap_or(0);
        e.detail = host_activity(profile, &e.host, lo, lo + e.duration_ps.unwrap_or(0));
    }
    found
}

/// The longest copy events: device copy ops, then host-side transfers.
fn copies(profile: &Profile) -> Vec<Found> {
    // (place, start, name, host)
    let mut found: Vec<(Place, (i64, &str, &str))> = Vec::new();
    let base = profile.time_base();
    let devices = profile.devices();
    for d in &devices {
        let ops = d.cached_ops();
        for (i, kind) in base.kinds[d.index].of_op.iter().enumerate() {
            if matches!(kind, Part::HostToDevice | Part::DeviceToHost | Part::DeviceToDevice) {
                let op = ops.event(d.plane, i);
                let place = Place {
                    size: op.duration_ps,
                    device: Some(d.index),
                    step: None,
                    host: d.host_index,
                    order: i as i64,
                };
                found.push((place, (op.start_ps, op.name, d.host)));
            }
        }
    }
    let transfers = [(0, "host → device transfer"), (1, "device → host transfer")];
    for (host, (h, time)) in profile.hosts.iter().zip(&base.hosts).enumerate() {
        for (which, what) in transfers {
            let spans = if which == 0 { time.to_device.spans() } else { time.to_host.spans() };
            for (i, &(a, b)) in spans.iter().enumerate() {
                let place = Place {
                    size: b.saturating_sub(a),
                    device: None,
                    step: None,
                    host,
                    order: (which << 40) | i as i64,
                };
                found.push((place, (a, what, h.host.as_str())));
            }
        }
    }
    let cited = first(found, CITED).into_iter().map(|(place, (start, name, host))| Found {
        place,
        evidence: at(ev(format!("{name}: {}", ms(place.size)), host), start, place.size),
    });
    cited.collect()
}

/// The first devices that took part whose launched work waited to start, in order.
fn queued(profile: &Profile) -> Vec<Found> {
    let model = profile.device_time();
    (profile.devices().iter().zip(&model.devices))
        .filter(|(_, t)| t.took_part)
        .filter_map(|(d, t)| Some((d, t, t.idle_queued_ps.filter(|&q| q > 0)?)))
        .take(CITED)
        .map(|(d, t, q)| Found {
            place: Place { size: 0, device: Some(d.index), step: None, host: d.host_index, order: 0 },
            evidence: ev(
                format!(
                    "{}: idle {} of its {} window, {} of it with launched work not started",
                    d.name,
                    ms(t.part_ps(Part::Idle)),
                    ms(t.window_ps()),
                    ms(q)
                ),
                d.host,
            ),
        })
        .collect()
}

/// The working devices idlest over their own span.
fn idlest(profile: &Profile) -> Vec<Found> {
    let model = profile.device_time();
    let devices = profile.devices();
    let working =
        (devices.iter().zip(&model.devices)).filter(|(_, t)| t.took_part && t.window_ps() > 0).map(|(d, t)| {
            // Ranked by utilisation, lowest first: a share is never negative, so its bits
            // order as it does.
            let size = -(t.utilization_pct().max(0.0).to_bits() as i64);
            (Place { size, device: Some(d.index), step: None, host: d.host_index, order: 0 }, (d, t))
        });
    let cited = first(working.collect(), CITED).into_iter().map(|(place, (d, t))| {
        let idle_ps = t.window_ps().saturating_sub(t.busy_ps);
        let what = format!("{}: idle {} of its {} span", d.name, ms(idle_ps), ms(t.window_ps()));
        Found { place, evidence: at(ev(what, d.host), t.window[0].0, t.window_ps()) }
    });
    cited.collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A piece of evidence of `size` on device `device` in step `step` of its host.
    fn found(size: i64, device: usize, step: usize, what: &str) -> Found {
        Found {
            place: Place { size, device: Some(device), step: Some(step), host: 0, order: 0 },
            evidence: ev(what, ""),
        }
    }

    fn host(found: Vec<Found>, devices: usize, steps: usize) -> HostFacts {
        let mut all = vec![Vec::new(); Kind::ALL.len()];
        all[Kind::IdleGaps as usize] = found;
        HostFacts { found: all, truncated: Vec::new(), peak_bytes_per_s: None, hosts: 1, devices, steps }
    }

    #[test]
    fn every_kind_is_at_its_place() {
        for (at, kind) in Kind::ALL.iter().enumerate() {
            assert_eq!(*kind as usize, at, "{kind:?}");
        }
    }

    /// Ties are broken by the place in the run: devices counted over the hosts before,
    /// steps at their place in the run's order, as the run read whole ranks them.
    #[test]
    fn each_hosts_evidence_is_ranked_at_its_place_in_the_run() {
        // Two hosts of two devices and two steps; the run's steps interleave the hosts'.
        let a = host(vec![found(5, 1, 1, "a1 s1"), found(5, 0, 1, "a0 s1"), found(7, 1, 0, "a1 s0")], 2, 2);
        let b = host(vec![found(5, 0, 0, "b0 s0"), found(9, 1, 1, "b1 s1")], 2, 2);
        let run = RunFacts::of(vec![a, b], &[0, 2, 1, 3]);
        let cited: Vec<&str> = run.found[Kind::IdleGaps as usize].iter().map(|f| f.evidence.what.as_str()).collect();
        assert_eq!(cited, ["b1 s1", "a1 s0", "a0 s1"]);
        let places: Vec<(Option<usize>, Option<usize>, usize)> =
            run.found[Kind::IdleGaps as usize].iter().map(|f| (f.place.device, f.place.step, f.place.host)).collect();
        assert_eq!(places, [(Some(3), Some(3), 1), (Some(1), Some(0), 0), (Some(0), Some(2), 0)]);
    }
}
