//! Devices and hosts: one row per device and per host, an all-device aggregate, and
//! the stragglers — devices (or hosts) that compute markedly longer than their peers,
//! so that everyone else waits for them in collectives.

use serde::Serialize;

use crate::steps;
use stepscope_model::device_time::{DeviceTimeline, Part, WindowSource};
use stepscope_model::stats::{pct, percentile_sorted, sum_ps};
use stepscope_model::{Device, DeviceKind, Profile};

/// A device (or host) is a straggler when its compute time exceeds the median of its
/// peers by this share.
pub const STRAGGLER_EXCESS_PCT: f64 = 10.0;

/// Per-device and per-host rows of a run.
#[derive(Clone, Debug, Serialize)]
pub struct Devices {
    pub schema: &'static str,
    pub run: String,
    pub devices: Vec<DeviceRow>,
    pub hosts: Vec<HostRow>,
    /// Every device together.
    pub all: Aggregate,
    pub stragglers: Vec<Straggler>,
    /// The devices left out of the aggregates ([`left_out`]); absent where none is.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub left_out: Vec<LeftOut>,
}

/// A device that took no part in the run's work: it ran ops (copies, waits on copies)
/// but no compute and no collective, so the run's aggregates leave it out.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LeftOut {
    pub host: String,
    pub device: String,
    pub op_count: u64,
    /// The time its ops ran.
    pub busy_ps: i64,
}
stepscope_model::wire_struct!(LeftOut { host, device, op_count, busy_ps });

/// The devices the run's aggregates leave out (see [`LeftOut`]), in device order.
pub fn left_out(profile: &Profile) -> Vec<LeftOut> {
    let model = profile.device_time();
    (profile.devices().iter().zip(&model.devices))
        .filter(|(_, t)| !t.took_part)
        .map(|(d, t)| LeftOut {
            host: d.host.to_string(),
            device: d.name.clone(),
            op_count: d.cached_ops().recs.len() as u64,
            busy_ps: t.busy_ps,
        })
        .collect()
}

/// One device.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DeviceRow {
    pub host: String,
    pub device: String,
    pub kind: DeviceKind,
    pub op_count: u64,
    /// Where the window comes from: the host's steps, the device's own steps, or its
    /// own span (see `crate::device_time`).
    pub window_source: WindowSource,
    /// The time measured against.
    pub window_ps: i64,
    /// Time some op ran: compute + collective + copy + async wait + host callback.
    pub busy_ps: i64,
    /// Ops other than collectives, copies and async waits.
    pub compute_ps: i64,
    /// Collectives not overlapped by compute (including waiting for peers).
    pub collective_ps: i64,
    /// Copies (host↔device, device↔device) not overlapped by the above.
    pub copy_ps: i64,
    /// `*-done` ops waiting for async copies, not overlapped by the above.
    pub async_wait_ps: i64,
    /// Host callbacks (a custom call into the host's Python), not overlapped by the above.
    pub host_callback_ps: i64,
    /// No op running inside a program (XLA:CPU executor time between ops).
    pub runtime_overhead_ps: i64,
    /// No op running while the host compiled.
    pub compile_ps: i64,
    /// No op running while an XLA:CPU host copied to or from its device on host threads.
    pub host_copy_ps: i64,
    /// No op running otherwise. The parts from `compute_ps` on add up to `window_ps`.
    pub idle_ps: i64,
    /// Of `idle_ps`, the time work the host had launched had not started yet (launch
    /// latency, queueing). GPUs, where the profile links kernels to launches
    /// (`correlation_id`); absent elsewhere.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idle_queued_ps: Option<i64>,
    /// Of the rest of `idle_ps`, the time the host was inside launch calls
    /// (`cuLaunchKernel`, `cuGraphLaunch`) of ops not started; the rest of idle, the
    /// host launched nothing. Absent as above.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idle_launching_ps: Option<i64>,
    pub utilization_pct: f64,
    /// Whether the device took part in the run's work (ran a compute op or a
    /// collective); one that did not (it only copied) is left out of the host's and
    /// the run's aggregates and of the stragglers' comparison.
    pub took_part: bool,
    pub straggler: bool,
}
stepscope_model::wire_struct!(DeviceRow {
    host,
    device,
    kind,
    op_count,
    window_source,
    window_ps,
    busy_ps,
    compute_ps,
    collective_ps,
    copy_ps,
    async_wait_ps,
    host_callback_ps,
    runtime_overhead_ps,
    compile_ps,
    host_copy_ps,
    idle_ps,
    idle_queued_ps,
    idle_launching_ps,
    utilization_pct,
    took_part,
    straggler,
});

/// One host.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct HostRow {
    pub host: String,
    pub device_count: u64,
    pub step_count: u64,
    pub step_mean_ps: i64,
    /// Mean over the host's devices that took part in the work (all of them where
    /// none did).
    pub compute_ps: i64,
    pub collective_ps: i64,
    /// Mean ops run by those devices: its work, which stragglers compare.
    pub op_count: u64,
    pub utilization_pct: f64,
    /// The shift applied to put the host on the run's clock.
    pub clock_offset_ps: i64,
    pub straggler: bool,
}
stepscope_model::wire_struct!(HostRow {
    host,
    device_count,
    step_count,
    step_mean_ps,
    compute_ps,
    collective_ps,
    op_count,
    utilization_pct,
    clock_offset_ps,
    straggler,
});

/// All devices together.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Aggregate {
    pub device_count: u64,
    /// Of `device_count`, those that took part in the run's work: utilisation and
    /// compute spread are theirs.
    pub working_device_count: u64,
    pub host_count: u64,
    pub busy_ps: i64,
    pub compute_ps: i64,
    pub collective_ps: i64,
    pub utilization_pct: f64,
    /// Spread of compute time across the devices that computed: (max − min) / median, percent.
    pub compute_spread_pct: f64,
}

/// A device or host that computes longer than its peers.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Straggler {
    pub host: String,
    /// Empty for a whole host.
    pub device: String,
    pub compute_ps: i64,
    pub peer_median_ps: i64,
    pub excess_pct: f64,
    /// Mean time the peers spent in collectives, for comparison.
    pub peer_collective_ps: i64,
    /// Its work (ops it ran) over its peers' median, percent above (below: negative).
    pub work_excess_pct: f64,
    /// True where its work is within [`SAME_WORK_PCT`] of its peers': it is slower at
    /// the same work (contention for cores, clocks), not given more of it.
    pub same_work: bool,
}
stepscope_model::wire_struct!(Straggler {
    host,
    device,
    compute_ps,
    peer_median_ps,
    excess_pct,
    peer_collective_ps,
    work_excess_pct,
    same_work,
});

/// Work within this share of the peers' median is the same work, percent.
pub const SAME_WORK_PCT: f64 = 5.0;

/// Builds the per-device and per-host rows.
pub fn devices(profile: &Profile) -> Devices {
    assemble(&profile.run, vec![DevicesPart::of(profile)])
}

/// What [`devices`] reads of a profile (of a whole run, or of one host of a run read a
/// host at a time under the run's decisions): its device rows, each marked against its
/// peers on its host, and its host rows (not yet against each other). Owned: a run read
/// a host at a time keeps only its hosts' parts, and [`assemble`] makes of them the
/// rows the run read whole has.
#[derive(Clone, Debug)]
pub struct DevicesPart {
    rows: Vec<DeviceRow>,
    hosts: Vec<HostRow>,
    /// Of devices against their host's peers.
    stragglers: Vec<Straggler>,
    left_out: Vec<LeftOut>,
}
stepscope_model::wire_struct!(DevicesPart { rows, hosts, stragglers, left_out });

impl DevicesPart {
    pub fn of(profile: &Profile) -> DevicesPart {
        let model = profile.device_time();
        let st = steps::cached(profile);
        let devs = profile.devices();
        let mut rows: Vec<DeviceRow> = devs.iter().zip(&model.devices).map(|(d, t)| device_row(d, t)).collect();
        let mut stragglers = Vec::new();
        // Devices against their peers: the other working devices of their host whose
        // main program is theirs.
        let programs: Vec<&str> = devs.iter().map(main_program).collect();
        for h in &profile.hosts {
            let mut groups: Vec<(&str, Vec<usize>)> = Vec::new();
            for i in (0..rows.len()).filter(|&i| rows[i].host == h.host && rows[i].took_part) {
                match groups.iter_mut().find(|(p, _)| *p == programs[i]) {
                    Some((_, ix)) => ix.push(i),
                    None => groups.push((programs[i], vec![i])),
                }
            }
            for (_, ix) in groups {
                let compute: Vec<i64> = ix.iter().map(|&i| rows[i].compute_ps).collect();
                let coll: Vec<i64> = ix.iter().map(|&i| rows[i].collective_ps).collect();
                let work: Vec<i64> = ix.iter().map(|&i| rows[i].op_count as i64).collect();
                for (k, s) in outliers(&compute, &coll, &work) {
                    let r = &mut rows[ix[k]];
                    r.straggler = true;
                    stragglers.push(Straggler { host: r.host.clone(), device: r.device.clone(), ..s });
                }
            }
        }
        let hosts = (profile.hosts.iter().enumerate())
            .map(|(hi, h)| {
                let all: Vec<&DeviceRow> = rows.iter().filter(|r| r.host == h.host).collect();
                let working: Vec<&DeviceRow> = all.iter().copied().filter(|r| r.took_part).collect();
                let mine = if working.is_empty() { &all } else { &working };
                let n = mine.len().max(1) as i64;
                let host_steps: Vec<i64> = st.timed().filter(|s| s.host == h.host).map(|s| s.duration_ps).collect();
                HostRow {
                    host: h.host.clone(),
                    device_count: all.len() as u64,
                    step_count: host_steps.len() as u64,
                    step_mean_ps: sum_ps(host_steps.iter().copied()) / host_steps.len().max(1) as i64,
                    compute_ps: sum_ps(mine.iter().map(|r| r.compute_ps)) / n,
                    op_count: mine.iter().map(|r| r.op_count).sum::<u64>() / n as u64,
                    collective_ps: sum_ps(mine.iter().map(|r| r.collective_ps)) / n,
                    utilization_pct: mean(mine.iter().filter(|r| r.window_ps > 0).map(|r| r.utilization_pct)),
                    clock_offset_ps: profile.clock_offset_ps.get(hi).copied().unwrap_or(0),
                    straggler: false,
                }
            })
            .collect();
        DevicesPart { rows, hosts, stragglers, left_out: left_out(profile) }
    }
}

/// The rows of a run from its parts (in host order): the hosts against each other, and
/// every device together.
pub fn assemble(run: &str, parts: Vec<DevicesPart>) -> Devices {
    let (mut rows, mut hosts, mut stragglers, mut left) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for p in parts {
        rows.extend(p.rows);
        hosts.extend(p.hosts);
        stragglers.extend(p.stragglers);
        left.extend(p.left_out);
    }
    // Hosts against each other.
    let compute: Vec<i64> = hosts.iter().map(|h| h.compute_ps).collect();
    let coll: Vec<i64> = hosts.iter().map(|h| h.collective_ps).collect();
    let work: Vec<i64> = hosts.iter().map(|h| h.op_count as i64).collect();
    for (k, s) in outliers(&compute, &coll, &work) {
        hosts[k].straggler = true;
        stragglers.push(Straggler { host: hosts[k].host.clone(), ..s });
    }
    let compute: Vec<i64> = {
        // Devices that ran no compute (copy-only ones) are no peers of those that did.
        let mut v: Vec<i64> = rows.iter().filter(|r| r.took_part).map(|r| r.compute_ps).filter(|&c| c > 0).collect();
        v.sort_unstable();
        v
    };
    let median = percentile_sorted(&compute, 50.0);
    let busy_ps = sum_ps(rows.iter().map(|r| r.busy_ps));
    let all = Aggregate {
        device_count: rows.len() as u64,
        working_device_count: rows.iter().filter(|r| r.took_part).count() as u64,
        host_count: hosts.len() as u64,
        busy_ps,
        compute_ps: sum_ps(rows.iter().map(|r| r.compute_ps)),
        collective_ps: sum_ps(rows.iter().map(|r| r.collective_ps)),
        // The summary's: the mean over the working devices (those with a window).
        utilization_pct: mean(rows.iter().filter(|r| r.took_part && r.window_ps > 0).map(|r| r.utilization_pct)),
        compute_spread_pct: match (compute.first(), compute.last()) {
            (Some(lo), Some(hi)) if median > 0 => pct(hi.saturating_sub(*lo), median),
            _ => 0.0,
        },
    };
    Devices {
        schema: "stepscope.devices/1",
        run: run.to_string(),
        devices: rows,
        hosts,
        all,
        stragglers,
        left_out: left,
    }
}

/// One device's row, from its timeline (stragglers are marked later, against its peers).
fn device_row(d: &Device, t: &DeviceTimeline) -> DeviceRow {
    let part = |p: Part| t.part_ps(p);
    DeviceRow {
        host: d.host.to_string(),
        device: d.name.clone(),
        kind: d.kind,
        op_count: d.cached_ops().recs.len() as u64,
        window_source: t.window_source,
        window_ps: t.window_ps(),
        busy_ps: t.busy_ps,
        compute_ps: part(Part::Compute),
        collective_ps: part(Part::Collective),
        copy_ps: sum_ps([part(Part::HostToDevice), part(Part::DeviceToHost), part(Part::DeviceToDevice)]),
        async_wait_ps: part(Part::AsyncWait),
        host_callback_ps: part(Part::HostCallback),
        runtime_overhead_ps: part(Part::RuntimeOverhead),
        compile_ps: part(Part::Compile),
        host_copy_ps: part(Part::HostCopyToDevice) + part(Part::HostCopyToHost),
        idle_ps: part(Part::Idle),
        idle_queued_ps: t.idle_queued_ps,
        idle_launching_ps: t.idle_launching_ps,
        utilization_pct: t.utilization_pct(),
        took_part: t.took_part,
        straggler: false,
    }
}

/// The program device `d` spent the most op time in (its ops' module name; "" for
/// none): devices are peers of the devices whose main program is the same, so a
/// device that also ran a small program of its own (a metric, a `device_put`) keeps
/// its peers.
fn main_program<'a>(d: &Device<'a>) -> &'a str {
    let ops = d.cached_ops();
    let mut time = vec![0i64; ops.names.len()];
    for (i, r) in ops.recs.iter().enumerate() {
        let t = &mut time[r.module as usize];
        *t = t.saturating_add(ops.op_ps(d.plane, i));
    }
    let best = (0..time.len()).filter(|&m| time[m] > 0).max_by_key(|&m| (time[m], std::cmp::Reverse(m)));
    best.map_or("", |m| &ops.names[m])
}

/// The mean of `values` (0 for none).
fn mean(values: impl IntoIterator<Item = f64>) -> f64 {
    let (sum, n) = values.into_iter().fold((0.0, 0usize), |(s, n), v| (s + v, n + 1));
    if n == 0 {
        0.0
    } else {
        sum / n as f64
    }
}

/// Indexes whose compute exceeds the median of the others by
/// [`STRAGGLER_EXCESS_PCT`], with the numbers (host and device left empty) and their
/// work (`work`: ops run) against the others'; needs at least two entries.
fn outliers(compute: &[i64], collective: &[i64], work: &[i64]) -> Vec<(usize, Straggler)> {
    let n = compute.len();
    if n < 2 {
        return Vec::new();
    }
    let mut out = Vec::new();
    for i in 0..n {
        let mut peers: Vec<i64> = (0..n).filter(|&j| j != i).map(|j| compute[j]).collect();
        peers.sort_unstable();
        let median = percentile_sorted(&peers, 50.0);
        let excess = pct(compute[i] - median, median);
        if median > 0 && excess > STRAGGLER_EXCESS_PCT {
            let peer_collective_ps = sum_ps((0..n).filter(|&j| j != i).map(|j| collective[j])) / (n - 1) as i64;
            let mut peer_work: Vec<i64> = (0..n).filter(|&j| j != i).map(|j| work[j]).collect();
            peer_work.sort_unstable();
            let work_median = percentile_sorted(&peer_work, 50.0);
            let work_excess_pct = pct(work[i] - work_median, work_median);
            out.push((
                i,
                Straggler {
                    host: String::new(),
                    device: String::new(),
                    compute_ps: compute[i],
                    peer_median_ps: median,
                    excess_pct: excess,
                    peer_collective_ps,
                    work_excess_pct,
                    same_work: work_median > 0 && work_excess_pct.abs() <= SAME_WORK_PCT,
                },
            ));
        }
    }
    out
}
