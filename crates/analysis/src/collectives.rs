//! Collectives: all-reduce, all-gather, reduce-scatter, all-to-all,
//! collective-permute and send/recv time per op, and how much of it compute
//! overlapped — read from the device-time model ([`crate::device_time`]), in each
//! device's window, so the totals equal the summary's and the devices' collectives.
//!
//! A collective's time is the time its ops ran (a synchronous op's span; an async
//! pair's `-start` and `-done` ops). The overlapped time is compute running at the
//! same time on the same device, and the exposed time is the rest — what the
//! collective costs the step. An async pair is also in flight from its start op's
//! start to its done op's end: the compute that ran meanwhile is what running it
//! asynchronously hid.

use std::collections::HashMap;

use serde::Serialize;

use stepscope_model::device_time::Part;
use stepscope_model::stats::{pct, sum_ps, Intervals};
use stepscope_model::{Device, OpEvent, Profile};

use crate::keyed::Keyed;

/// The collectives of a run.
#[derive(Clone, Debug, Serialize)]
pub struct Collectives {
    pub schema: &'static str,
    pub run: String,
    /// Sum over devices of the time a collective op ran, in each device's window.
    pub total_ps: i64,
    /// Of that, time compute ran alongside.
    pub overlapped_ps: i64,
    /// `total_ps - overlapped_ps`: the devices' collective time (`stepscope devices`),
    /// whose mean share of the window is the summary's collectives part.
    pub exposed_ps: i64,
    pub overlap_pct: f64,
    /// Time collective ops ran outside the devices' windows (before, between or after
    /// the steps): not in the numbers above.
    pub outside_window_ps: i64,
    /// Per op (summed over devices), largest exposed time first.
    pub ops: Vec<CollectiveRow>,
}

/// One collective op, over all its executions on all devices.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CollectiveRow {
    /// The op name (an async pair under its start op's name without `-start`).
    pub name: String,
    /// `all-reduce`, `all-gather`, `reduce-scatter`, `all-to-all`,
    /// `collective-permute`, or `other`.
    pub kind: String,
    pub module: String,
    pub is_async: bool,
    pub count: u64,
    pub devices: u64,
    /// Time its ops ran, in the devices' windows.
    pub total_ps: i64,
    pub overlapped_ps: i64,
    pub exposed_ps: i64,
    pub overlap_pct: f64,
    pub avg_ps: i64,
    pub max_ps: i64,
    /// Async pairs: time from each start op's start to its done op's end.
    pub in_flight_ps: i64,
    /// Async pairs: compute that ran while they were in flight.
    pub compute_in_flight_ps: i64,
    /// Bytes one participant sent over the interconnect, over all executions on all
    /// devices ([`crate::cost::collective_bytes`]: bus-bandwidth convention, from the
    /// op's HLO and its replica groups, or the devices that ran it where it names none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bytes_moved: Option<u64>,
    /// `bytes_moved` over the time the transfers took (an async pair's flight, a
    /// synchronous op's span): the bus bandwidth achieved, bytes/s.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bus_bytes_per_s: Option<f64>,
}

/// The kind of a collective op name, in either spelling (`all-gather.3`, `all_gather.3`).
pub fn collective_kind(name: &str) -> &'static str {
    let n = name.to_ascii_lowercase().replace('_', "-");
    for k in ["all-reduce", "all-gather", "reduce-scatter", "ragged-all-to-all", "all-to-all", "collective-permute"] {
        if n.contains(k) {
            return k;
        }
    }
    if n.contains("allreduce") {
        return "all-reduce";
    }
    "other"
}

/// One execution of a collective: its op spans and, for an async pair, its flight.
struct Run<'a> {
    name: String,
    module: &'a str,
    is_async: bool,
    /// The spans its ops ran (one, or an async pair's start and done).
    spans: Vec<(i64, i64)>,
    /// Start op's start to done op's end (async pairs).
    flight: Option<(i64, i64)>,
}

/// The most collective ends [`ends_by_host`] keeps of a host (its first): a pod's
/// hosts are held side by side until merged, and a few thousand pair well enough.
pub const MAX_COLLECTIVE_ENDS: usize = 2048;

/// Per host of `profile`, in its order: when the collectives of its first device that
/// ran any ended, in time order (an async pair at its done's end), the first
/// [`MAX_COLLECTIVE_ENDS`]. Collectives end together on every participant, so these
/// are what a run's hosts' clocks are compared by
/// ([`crate::overview::Overview::clock_skews`]).
pub fn ends_by_host(profile: &Profile) -> Vec<Vec<i64>> {
    let devices = profile.devices();
    (0..profile.hosts.len())
        .map(|host| {
            let ends = devices.iter().filter(|d| d.host_index == host).map(|d| {
                let mut e: Vec<i64> =
                    runs(profile, d).iter().filter_map(|r| r.spans.iter().map(|s| s.1).max()).collect();
                e.sort_unstable();
                e.truncate(MAX_COLLECTIVE_ENDS);
                e
            });
            ends.into_iter().find(|e| !e.is_empty()).unwrap_or_default()
        })
        .collect()
}

/// The collectives a device ran (its ops the model names collectives), async pairs
/// joined.
fn runs<'a>(profile: &Profile, d: &Device<'a>) -> Vec<Run<'a>> {
    let ops = d.cached_ops();
    let kinds = &profile.time_base().kinds[d.index].of_op;
    let mut colls: Vec<OpEvent> =
        (0..ops.recs.len()).filter(|&i| kinds[i] == Part::Collective).map(|i| ops.event(d.plane, i)).collect();
    colls.sort_by_key(|o| o.start_ps);
    let mut out = Vec::new();
    // Async starts wait for their done, matched by name with `-start` → `-done`.
    let mut open: HashMap<String, Vec<OpEvent>> = HashMap::new();
    for op in colls {
        if let Some(base) = op.name.split_once("-start").map(|(a, b)| format!("{a}{b}")) {
            open.entry(base).or_default().push(op);
        } else if let Some(base) = op.name.split_once("-done").map(|(a, b)| format!("{a}{b}")) {
            let start = open.get_mut(&base).and_then(|v| if v.is_empty() { None } else { Some(v.remove(0)) });
            let done = (op.start_ps, op.end_ps());
            out.push(match start {
                Some(s) => Run {
                    name: base,
                    module: op.module,
                    is_async: true,
                    spans: vec![(s.start_ps, s.end_ps()), done],
                    flight: Some((s.start_ps, op.end_ps())),
                },
                None => Run {
                    name: op.name.to_string(),
                    module: op.module,
                    is_async: true,
                    spans: vec![done],
                    flight: None,
                },
            });
        } else {
            let span = (op.start_ps, op.end_ps());
            out.push(Run {
                name: op.name.to_string(),
                module: op.module,
                is_async: false,
                spans: vec![span],
                flight: None,
            });
        }
    }
    // Starts whose done the capture cut off: their own span.
    for (base, starts) in open {
        for s in starts {
            let span = (s.start_ps, s.end_ps());
            out.push(Run { name: base.clone(), module: s.module, is_async: true, spans: vec![span], flight: None });
        }
    }
    out
}

/// Builds the collectives analysis.
pub fn collectives(profile: &Profile) -> Collectives {
    assemble(&profile.run, CollectivesPart::of(profile))
}

/// The collectives of some hosts of a run, summed per op, before the ops are ranked
/// ([`assemble`]): a run read a host at a time adds up each host's.
#[derive(Default)]
pub struct CollectivesPart {
    /// Per (op name, module), in the order first seen.
    rows: Keyed<(String, String), Acc>,
    total_ps: i64,
    exposed_ps: i64,
    outside_window_ps: i64,
}
stepscope_model::wire_struct!(CollectivesPart { rows, total_ps, exposed_ps, outside_window_ps });

/// One collective op's executions, summed.
#[derive(Default)]
struct Acc {
    kind: &'static str,
    is_async: bool,
    count: u64,
    devices: Vec<String>,
    total: i64,
    overlapped: i64,
    max: i64,
    in_flight: i64,
    compute_in_flight: i64,
    /// The transfers' own time, whole (not cut to the windows).
    transfer: i64,
    /// What the HLO of the first host that ran it says: the instruction's category
    /// where it is a collective (`None` inside: found, not a collective), and the shape
    /// its bytes are counted from.
    hlo: Option<Option<String>>,
    shape: Option<crate::cost::CollectiveShape>,
}
stepscope_model::wire_struct!(Acc {
    kind,
    is_async,
    count,
    devices,
    total,
    overlapped,
    max,
    in_flight,
    compute_in_flight,
    transfer,
    hlo,
    shape,
});

impl CollectivesPart {
    /// The collectives of every host of `profile`, each op's HLO looked up on the host
    /// that ran it.
    pub fn of(profile: &Profile) -> CollectivesPart {
        let mut part = CollectivesPart::default();
        for host in 0..profile.hosts.len() {
            part.add(CollectivesPart::of_host(profile, host));
        }
        part
    }

    /// The collectives the devices of host `host` (its index in `profile.hosts`) ran.
    fn of_host(profile: &Profile, host: usize) -> CollectivesPart {
        let model = profile.device_time();
        let devices = profile.devices();
        let mut part = CollectivesPart::default();
        let mine = devices.iter().zip(&model.devices).filter(|(d, _)| d.host_index == host);
        for (d, t) in mine {
            part.total_ps = part.total_ps.saturating_add(t.collective_ops.total());
            part.exposed_ps = part.exposed_ps.saturating_add(t.part_ps(Part::Collective));
            let id = d.id();
            let window = Intervals::new(t.window.clone());
            let compute = stepscope_model::profile::compute_ops(profile, d);
            // Compute within the window under [lo, hi).
            let compute_within = |lo: i64, hi: i64| {
                let from = t.window.partition_point(|w| w.1 <= lo);
                let spans = t.window[from..].iter().take_while(|w| w.0 < hi);
                sum_ps(spans.map(|&(a, b)| compute.overlap(a.max(lo), b.min(hi))))
            };
            for run in runs(profile, d) {
                // The run's time in the window, and the compute under it.
                let all = Intervals::new(run.spans);
                let mine = all.within(&t.window);
                part.outside_window_ps = part.outside_window_ps.saturating_add(all.total() - mine.total());
                let len = mine.total();
                let overlapped = overlap(compute, &mine);
                let flight = run.flight.map(|(lo, hi)| (window.overlap(lo, hi), compute_within(lo, hi)));
                if len == 0 && flight.is_none_or(|f| f.0 == 0) {
                    continue;
                }
                let a = part.row(run.name.clone(), run.module.to_string());
                a.kind = collective_kind(&run.name);
                a.is_async |= run.is_async;
                a.count += 1;
                if !a.devices.contains(&id) {
                    a.devices.push(id.clone());
                }
                a.total = a.total.saturating_add(len);
                a.overlapped = a.overlapped.saturating_add(overlapped);
                a.max = a.max.max(len);
                a.transfer = a.transfer.saturating_add(match run.flight {
                    Some((lo, hi)) => hi - lo,
                    None => all.total(),
                });
                if let Some((in_flight, under)) = flight {
                    a.in_flight = a.in_flight.saturating_add(in_flight);
                    a.compute_in_flight = a.compute_in_flight.saturating_add(under);
                }
            }
        }
        let hlo = std::slice::from_ref(&profile.hlo_modules()[host]);
        for ((name, module), a) in part.rows.iter_mut() {
            // What the instruction's opcode says it is (`psum_invariant.7` is an
            // all-reduce); one execution's bytes: the op's instruction, an async pair's
            // by its start's name.
            a.hlo = crate::ops::instruction(hlo, name, module, None)
                .map(|(m, i)| Some(m.category(i)).filter(|c| stepscope_model::device_time::is_collective(c)));
            let start = name.replacen(a.kind, &format!("{}-start", a.kind), 1);
            a.shape = [name.as_str(), start.as_str()].into_iter().find_map(|n| {
                crate::ops::instruction(hlo, n, module, None).and_then(|(m, i)| crate::cost::CollectiveShape::of(m, i))
            });
        }
        part
    }

    fn row(&mut self, name: String, module: String) -> &mut Acc {
        self.rows.entry((name, module), Acc::default).0
    }

    /// Adds another host's collectives (a host after those already added): each op's
    /// kind and HLO stay the first host's that ran it.
    pub fn add(&mut self, other: CollectivesPart) {
        self.total_ps = self.total_ps.saturating_add(other.total_ps);
        self.exposed_ps = self.exposed_ps.saturating_add(other.exposed_ps);
        self.outside_window_ps = self.outside_window_ps.saturating_add(other.outside_window_ps);
        for (key, o) in other.rows.into_items() {
            self.rows.add(key, o, |a, o| {
                a.is_async |= o.is_async;
                a.count += o.count;
                for id in o.devices {
                    if !a.devices.contains(&id) {
                        a.devices.push(id);
                    }
                }
                a.total = a.total.saturating_add(o.total);
                a.overlapped = a.overlapped.saturating_add(o.overlapped);
                a.max = a.max.max(o.max);
                a.transfer = a.transfer.saturating_add(o.transfer);
                a.in_flight = a.in_flight.saturating_add(o.in_flight);
                a.compute_in_flight = a.compute_in_flight.saturating_add(o.compute_in_flight);
            });
        }
    }
}

/// The collectives analysis of run `run` from its hosts' collectives, summed.
pub fn assemble(run: &str, part: CollectivesPart) -> Collectives {
    let mut ops: Vec<CollectiveRow> = (part.rows.into_items().into_iter())
        .map(|((name, module), a)| {
            let bytes_moved =
                (a.shape.as_ref()).and_then(|s| s.bytes(a.devices.len() as i64)).map(|b| b.saturating_mul(a.count));
            CollectiveRow {
                kind: a.hlo.flatten().unwrap_or_else(|| a.kind.to_string()),
                name,
                module,
                is_async: a.is_async,
                count: a.count,
                devices: a.devices.len() as u64,
                total_ps: a.total,
                overlapped_ps: a.overlapped,
                exposed_ps: a.total - a.overlapped,
                overlap_pct: pct(a.overlapped, a.total),
                avg_ps: a.total / a.count.max(1) as i64,
                max_ps: a.max,
                in_flight_ps: a.in_flight,
                compute_in_flight_ps: a.compute_in_flight,
                bytes_moved,
                bus_bytes_per_s: bytes_moved.filter(|_| a.transfer > 0).map(|b| b as f64 / (a.transfer as f64 / 1e12)),
            }
        })
        .collect();
    ops.sort_by(|a, b| b.exposed_ps.cmp(&a.exposed_ps).then(b.total_ps.cmp(&a.total_ps)).then(a.name.cmp(&b.name)));
    let (total_ps, exposed_ps) = (part.total_ps, part.exposed_ps);
    Collectives {
        schema: "stepscope.collectives/1",
        run: run.to_string(),
        total_ps,
        overlapped_ps: total_ps - exposed_ps,
        exposed_ps,
        overlap_pct: pct(total_ps - exposed_ps, total_ps),
        outside_window_ps: part.outside_window_ps,
        ops,
    }
}

/// The length of `a` ∩ `b`.
fn overlap(a: &Intervals, b: &Intervals) -> i64 {
    let mut c = a.cursor();
    sum_ps(b.spans().iter().map(|&(lo, hi)| c.overlap(lo, hi)))
}
