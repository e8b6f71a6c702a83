//! `stepscope devices`: per-device and per-host rows, and stragglers.

use std::process::ExitCode;
use stepscope_analysis::device_time::WindowSource;

use stepscope_analysis::devices;

use crate::human;
use crate::load;
use crate::opts::ByHostArgs;
use crate::table::{csv, Table};

#[derive(clap::Args, Debug)]
pub struct DevicesArgs {
    #[command(flatten)]
    pub by_host: ByHostArgs,
    /// Reduce the run from the parts in this folder, written by `stepscope part --for
    /// devices` (`summary --parts` says more).
    #[arg(long, value_name = "DIR", conflicts_with = "host")]
    pub parts: Option<std::path::PathBuf>,
}

pub fn run(devices_args: &DevicesArgs) -> anyhow::Result<ExitCode> {
    let by_host = &devices_args.by_host;
    let args = &by_host.common;
    let d = match &devices_args.parts {
        Some(dir) => crate::cmd::part::devices_of_parts(&args.input, dir)?,
        None => load::analysis(by_host, devices::devices, |run, hosts, read| {
            stepscope_analysis::fold::devices_by_host(run, hosts, read, &|_| Ok(()))
        })?,
    };
    if args.output.json {
        outln!("{}", serde_json::to_string(&d)?);
        return Ok(ExitCode::SUCCESS);
    }
    if args.output.csv {
        let header = [
            "host",
            "device",
            "kind",
            "op_count",
            "window_ps",
            "busy_ps",
            "compute_ps",
            "collective_ps",
            "copy_ps",
            "async_wait_ps",
            "host_callback_ps",
            "runtime_overhead_ps",
            "compile_ps",
            "host_copy_ps",
            "idle_ps",
            "idle_queued_ps",
            "idle_launching_ps",
            "window_source",
            "utilization_pct",
            "straggler",
            "took_part",
        ];
        let rows: Vec<Vec<String>> = d
            .devices
            .iter()
            .map(|r| {
                vec![
                    r.host.clone(),
                    r.device.clone(),
                    format!("{:?}", r.kind).to_lowercase(),
                    r.op_count.to_string(),
                    r.window_ps.to_string(),
                    r.busy_ps.to_string(),
                    r.compute_ps.to_string(),
                    r.collective_ps.to_string(),
                    r.copy_ps.to_string(),
                    r.async_wait_ps.to_string(),
                    r.host_callback_ps.to_string(),
                    r.runtime_overhead_ps.to_string(),
                    r.compile_ps.to_string(),
                    r.host_copy_ps.to_string(),
                    r.idle_ps.to_string(),
                    r.idle_queued_ps.map(|q| q.to_string()).unwrap_or_default(),
                    r.idle_launching_ps.map(|q| q.to_string()).unwrap_or_default(),
                    serde_json::to_value(r.window_source)
                        .ok()
                        .and_then(|v| v.as_str().map(String::from))
                        .unwrap_or_default(),
                    format!("{:.2}", r.utilization_pct),
                    r.straggler.to_string(),
                    r.took_part.to_string(),
                ]
            })
            .collect();
        out!("{}", csv(&header, &rows));
        return Ok(ExitCode::SUCCESS);
    }
    if d.devices.is_empty() {
        outln!("no device ran XLA ops in this profile");
        return Ok(ExitCode::SUCCESS);
    }
    // Where kernels are linked to their launches, the idle time in which the host was
    // in launch calls, and in which launched work had not started yet.
    let queued = d.devices.iter().any(|r| r.idle_queued_ps.is_some());
    let mut header = vec![
        "DEVICE",
        "UTIL",
        "COMPUTE",
        "COLLECTIVES",
        "COPIES",
        "ASYNC WAIT",
        "OVERHEAD",
        "IDLE",
        "WINDOW",
        "OPS",
        "",
    ];
    // Host callbacks where a device ran any.
    let callbacks = d.devices.iter().any(|r| r.host_callback_ps > 0);
    if queued {
        header.splice(8..8, ["IN LAUNCH", "QUEUED"]);
    }
    if callbacks {
        header.insert(6, "CALLBACKS");
    }
    // On a narrow terminal these go first (the JSON and --wide keep them).
    let optional: Vec<usize> = ["OPS", "WINDOW", "ASYNC WAIT", "OVERHEAD"]
        .iter()
        .filter_map(|name| header.iter().position(|h| h == name))
        .collect();
    let mut t = Table::new(header);
    t.optional = optional;
    for r in d.devices.iter().take(args.select.rows().max(1)) {
        let window = match r.window_source {
            WindowSource::HostSteps => "host steps",
            WindowSource::OwnSteps => "own steps",
            WindowSource::OwnSpan => "own span",
            WindowSource::Empty => "none",
        };
        let mut row = vec![
            // The host only where there are several.
            match d.hosts.len() {
                1 => r.device.clone(),
                _ => format!("{} {}", r.host, r.device),
            },
            format!("{:.1}%", r.utilization_pct),
            human::duration_ps(r.compute_ps),
            human::duration_ps(r.collective_ps),
            human::duration_ps(r.copy_ps + r.host_copy_ps),
            human::duration_ps(r.async_wait_ps),
            human::duration_ps(r.runtime_overhead_ps),
            human::duration_ps(r.idle_ps + r.compile_ps),
            format!("{} {window}", human::duration_ps(r.window_ps)),
            human::count(r.op_count),
            match (r.straggler, r.took_part) {
                (true, _) => "straggler".into(),
                (false, false) => "no work".into(),
                (false, true) => String::new(),
            },
        ];
        if queued {
            let or_dash = |ps: Option<i64>| ps.map(human::duration_ps).unwrap_or_else(|| "—".into());
            row.splice(8..8, [or_dash(r.idle_launching_ps), or_dash(r.idle_queued_ps)]);
        }
        if callbacks {
            row.insert(6, human::duration_ps(r.host_callback_ps));
        }
        t.push(row);
    }
    out!("{}", t.text());
    if d.devices.len() > args.select.rows() {
        outln!("({} more devices: --top N shows more)", d.devices.len() - args.select.rows());
    }
    let a = &d.all;
    let working = match a.working_device_count == a.device_count {
        true => String::new(),
        false => format!(", {} working", a.working_device_count),
    };
    proseln!(
        "all {} device(s) on {} host(s){working}: utilisation {:.1}%, compute spread {:.1}% (max − min over median)",
        a.device_count,
        a.host_count,
        a.utilization_pct,
        a.compute_spread_pct
    );
    if let Some(line) = left_out_line(&d.left_out, d.hosts.len() > 1) {
        outln!("{line}");
    }
    if d.hosts.len() > 1 {
        outln!();
        let mut t = Table::new(vec!["HOST", "STEP", "COMPUTE", "COLLECTIVES", "UTIL", "CLOCK SHIFT", ""]);
        for h in &d.hosts {
            t.push(vec![
                h.host.clone(),
                human::duration_ps(h.step_mean_ps),
                human::duration_ps(h.compute_ps),
                human::duration_ps(h.collective_ps),
                format!("{:.1}%", h.utilization_pct),
                human::duration_ps(h.clock_offset_ps),
                if h.straggler { "straggler".into() } else { String::new() },
            ]);
        }
        out!("{}", t.text());
    }
    for s in &d.stragglers {
        proseln!(
            "straggler: {} {} computes {} vs a median of {} for its peers (+{:.0}%); the peers spend {} in collectives",
            s.host,
            s.device,
            human::duration_ps(s.compute_ps),
            human::duration_ps(s.peer_median_ps),
            s.excess_pct,
            human::duration_ps(s.peer_collective_ps)
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// One line naming the devices the run's numbers leave out ([`devices::left_out`]), at
/// most three by name; `None` where there are none. `hosts` names their hosts too.
pub fn left_out_line(left: &[devices::LeftOut], hosts: bool) -> Option<String> {
    let named: Vec<String> = left
        .iter()
        .take(3)
        .map(|l| {
            let name = if hosts { format!("{} {}", l.host, l.device) } else { l.device.clone() };
            format!("{name} ({} ops, {})", human::count(l.op_count), human::duration_ps(l.busy_ps))
        })
        .collect();
    let more = match left.len().saturating_sub(named.len()) {
        0 => String::new(),
        n => format!(" and {n} more"),
    };
    (!left.is_empty())
        .then(|| format!("left out: {}{more}, which ran only copies (no compute, no collective)", named.join(", ")))
}
