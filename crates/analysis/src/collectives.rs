//! Collectives: all-reduce, all-gather, reduce-scatter, all-to-all and
//! collective-permute time per op, and how much of it compute overlapped.
//!
//! A synchronous collective's time is its own span; an asynchronous pair
//! (`all-reduce-start.3` … `all-reduce-done.3`) is in flight from the start op's
//! start to the done op's end. Compute is every other op of the same device; the
//! overlapped time is compute running while the collective is in flight, and the
//! exposed time is the rest — the time the collective costs the step.

use std::collections::HashMap;

use rayon::prelude::*;
use serde::Serialize;

use crate::profile::{Device, OpEvent, Profile};
use crate::stats::{sum_ps, Intervals};

/// The collectives of a run.
#[derive(Clone, Debug, Serialize)]
pub struct Collectives {
    pub schema: &'static str,
    pub run: String,
    /// Sum over devices of time with a collective in flight.
    pub total_ps: i64,
    /// Of that, time compute ran alongside.
    pub overlapped_ps: i64,
    /// `total_ps - overlapped_ps`.
    pub exposed_ps: i64,
    pub overlap_pct: f64,
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
    pub total_ps: i64,
    pub overlapped_ps: i64,
    pub exposed_ps: i64,
    pub overlap_pct: f64,
    pub avg_ps: i64,
    pub max_ps: i64,
}

/// The kind of a collective op name.
pub fn collective_kind(name: &str) -> &'static str {
    let n = name.to_ascii_lowercase();
    for k in ["all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute"] {
        if n.contains(k) {
            return k;
        }
    }
    if n.contains("allreduce") {
        return "all-reduce";
    }
    "other"
}

/// One in-flight collective.
struct Flight<'a> {
    name: String,
    module: &'a str,
    is_async: bool,
    lo: i64,
    hi: i64,
}

/// Collectives of one device and the compute that ran on it.
fn flights<'a>(d: &Device<'a>) -> (Vec<Flight<'a>>, Intervals) {
    let ops = d.cached_ops();
    let flags = d.collective_flags();
    if !ops.recs.iter().any(|r| flags[r.name as usize]) {
        // Compute time only matters for overlap with collectives.
        return (Vec::new(), Intervals::new(Vec::new()));
    }
    let mut compute: Vec<(i64, i64)> = Vec::new();
    let mut colls: Vec<OpEvent> = Vec::new();
    for (i, r) in ops.recs.iter().enumerate() {
        if flags[r.name as usize] {
            colls.push(ops.event(d.plane, i));
            continue;
        }
        // Back-to-back ops merge as they come (in line and time order), so the list
        // stays short; the intervals merge the rest.
        let (_, start, end, _) = ops.span(d.plane, i);
        match compute.last_mut() {
            Some(last) if (last.0..=last.1).contains(&start) => last.1 = last.1.max(end),
            _ => compute.push((start, end)),
        }
    }
    colls.sort_by_key(|o| o.start_ps);
    let mut out = Vec::new();
    // Async starts wait for their done, matched by name with `-start` → `-done`.
    let mut open: HashMap<String, Vec<OpEvent>> = HashMap::new();
    for op in colls {
        if let Some(base) = op.name.split_once("-start").map(|(a, b)| format!("{a}{b}")) {
            open.entry(base).or_default().push(op);
        } else if let Some(base) = op.name.split_once("-done").map(|(a, b)| format!("{a}{b}")) {
            let start = open.get_mut(&base).and_then(|v| if v.is_empty() { None } else { Some(v.remove(0)) });
            let (lo, name) = match start {
                Some(s) => (s.start_ps, base),
                None => (op.start_ps, op.name.to_string()),
            };
            out.push(Flight { name, module: op.module, is_async: true, lo, hi: op.end_ps() });
        } else {
            out.push(Flight {
                name: op.name.to_string(),
                module: op.module,
                is_async: false,
                lo: op.start_ps,
                hi: op.end_ps(),
            });
        }
    }
    // Starts whose done the capture cut off: their own span.
    for (base, starts) in open {
        for s in starts {
            out.push(Flight { name: base.clone(), module: s.module, is_async: true, lo: s.start_ps, hi: s.end_ps() });
        }
    }
    (out, Intervals::new(compute))
}

/// Builds the collectives analysis.
pub fn collectives(profile: &Profile) -> Collectives {
    #[derive(Default)]
    struct Acc {
        kind: &'static str,
        is_async: bool,
        count: u64,
        devices: Vec<String>,
        total: i64,
        overlapped: i64,
        max: i64,
    }
    let mut rows: HashMap<(String, String), Acc> = HashMap::new();
    // Each device's collectives with the compute overlapping them, devices in parallel.
    let devices = profile.devices();
    let per_device: Vec<Vec<(Flight, i64)>> = devices
        .par_iter()
        .map(|d| {
            let (fl, compute) = flights(d);
            let mut compute = compute.cursor();
            fl.into_iter()
                .map(|f| {
                    let overlapped = compute.overlap(f.lo, f.hi);
                    (f, overlapped)
                })
                .collect()
        })
        .collect();
    for (d, fl) in devices.iter().zip(per_device) {
        let id = d.id();
        for (f, overlapped) in fl {
            let len = f.hi.saturating_sub(f.lo).max(0);
            let a = rows.entry((f.name.clone(), f.module.to_string())).or_default();
            a.kind = collective_kind(&f.name);
            a.is_async |= f.is_async;
            a.count += 1;
            if !a.devices.contains(&id) {
                a.devices.push(id.clone());
            }
            a.total = a.total.saturating_add(len);
            a.overlapped = a.overlapped.saturating_add(overlapped);
            a.max = a.max.max(len);
        }
    }
    let mut ops: Vec<CollectiveRow> = rows
        .into_iter()
        .map(|((name, module), a)| CollectiveRow {
            name,
            kind: a.kind.to_string(),
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
        })
        .collect();
    ops.sort_by(|a, b| b.exposed_ps.cmp(&a.exposed_ps).then(b.total_ps.cmp(&a.total_ps)).then(a.name.cmp(&b.name)));
    let total_ps = sum_ps(ops.iter().map(|r| r.total_ps));
    let overlapped_ps = sum_ps(ops.iter().map(|r| r.overlapped_ps));
    Collectives {
        schema: "stepscope.collectives/1",
        run: profile.run.clone(),
        total_ps,
        overlapped_ps,
        exposed_ps: total_ps - overlapped_ps,
        overlap_pct: pct(overlapped_ps, total_ps),
        ops,
    }
}

pub(crate) fn pct(part: i64, whole: i64) -> f64 {
    if whole > 0 {
        100.0 * part as f64 / whole as f64
    } else {
        0.0
    }
}
