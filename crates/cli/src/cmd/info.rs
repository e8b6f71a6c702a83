//! `stepscope info`: what a profile holds.

use std::process::ExitCode;

use serde::Serialize;
use stepscope_xspace::{Format, Space};

use crate::human;
use crate::load;
use crate::opts::InfoArgs;

#[derive(Serialize)]
struct InfoJson<'a> {
    schema: &'static str,
    run: &'a str,
    events_total: u64,
    hosts: Vec<HostJson>,
    /// Host files that could not be read, each with why.
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    hosts_unread: &'a [stepscope_xspace::discover::Unread],
}

#[derive(Serialize)]
struct HostJson {
    /// Its events ([`Space::event_count`]), for the run's total.
    #[serde(skip)]
    events: u64,
    host: String,
    path: String,
    format: &'static str,
    file_bytes: u64,
    /// Earliest event start and latest event end, ps since the session start.
    time_span_ps: Option<[i64; 2]>,
    versions: Vec<(String, String)>,
    devices: Vec<DeviceJson>,
    planes: Vec<PlaneJson>,
}

#[derive(Serialize)]
struct DeviceJson {
    name: String,
    /// `GPU`, `TPU`, … from the plane name `/device:KIND:N`.
    kind: String,
    /// Vendor or model when the plane records one.
    model: String,
    events: u64,
}

#[derive(Serialize)]
struct PlaneJson {
    name: String,
    events: u64,
    lines: Vec<LineJson>,
    /// Lines without events past the first 4,096 of the plane: counted, not listed.
    empty_lines_not_kept: u64,
}

#[derive(Serialize)]
struct LineJson {
    name: String,
    events: u64,
}

pub fn run(args: &InfoArgs) -> anyhow::Result<ExitCode> {
    // Each host's rows need only that host: a run too large to read whole is read a
    // host at a time.
    let whole = |loaded: load::Loaded| {
        let path = |host: &str| loaded.run.hosts.iter().find(|f| f.host == host).map(|f| f.path.clone());
        let hosts = loaded.spaces.iter().map(|space| host_json(space, path(&space.host))).collect();
        Ok((loaded.run.rel.clone(), hosts, loaded.unread))
    };
    let by_host = || {
        let mut hosts = Vec::new();
        let (run, unread) =
            load::each_space(&args.input, &mut |path, space| hosts.push(host_json(&space, Some(path))))?;
        Ok((run.rel, hosts, unread))
    };
    let load_whole = || load::load(&args.input, None);
    let (run, hosts, unread) = load::loaded_or_by_host(
        load::many_hosts(&args.input, args.host_at_a_time)?,
        "rows",
        load_whole,
        whole,
        by_host,
    )?;
    let info = InfoJson {
        schema: "stepscope.info/1",
        run: &run,
        events_total: hosts.iter().map(|h| h.events).sum(),
        hosts,
        hosts_unread: &unread,
    };
    if args.output.json {
        outln!("{}", serde_json::to_string(&info)?);
    } else if args.output.csv {
        // One row per line (a plane without lines has one row with an empty line).
        let mut rows = Vec::new();
        for h in &info.hosts {
            for p in &h.planes {
                if p.lines.is_empty() {
                    rows.push(vec![h.host.to_string(), p.name.to_string(), String::new(), p.events.to_string()]);
                }
                for l in &p.lines {
                    rows.push(vec![h.host.to_string(), p.name.to_string(), l.name.to_string(), l.events.to_string()]);
                }
            }
        }
        out!("{}", crate::table::csv(&["host", "plane", "line", "events"], &rows));
    } else {
        print_text(&info);
    }
    Ok(ExitCode::SUCCESS)
}

/// What `space`, read from `path`, holds.
fn host_json(space: &Space, path: Option<std::path::PathBuf>) -> HostJson {
    HostJson {
        events: space.event_count(),
        host: space.host.clone(),
        path: path.map(|p| p.display().to_string()).unwrap_or_default(),
        format: match space.format {
            Format::XSpace => "xspace",
            Format::TraceJson => "trace_json",
        },
        file_bytes: space.file_bytes,
        time_span_ps: space.time_span_ps().map(|(a, b)| [a, b]),
        versions: versions(space),
        devices: devices(space),
        planes: (space.planes.iter())
            .map(|p| PlaneJson {
                name: p.name.clone(),
                events: p.event_count(),
                lines: (p.lines.iter().filter(|l| !l.is_counter))
                    .map(|l| LineJson { name: l.name.clone(), events: l.len() as u64 })
                    .collect(),
                empty_lines_not_kept: p.empty_lines_not_kept,
            })
            .collect(),
    }
}

/// The device planes, with their kind and model.
fn devices(space: &Space) -> Vec<DeviceJson> {
    space
        .planes
        .iter()
        .filter_map(|p| {
            let rest = p.name.strip_prefix("/device:")?;
            let kind = rest.split(':').next().unwrap_or(rest);
            let model = ["device_type_string", "device_vendor"]
                .iter()
                .find_map(|k| p.plane_stat(k).map(|s| p.stat_display(&s)))
                .unwrap_or_default();
            Some(DeviceJson { name: p.name.clone(), kind: kind.to_string(), model, events: p.event_count() })
        })
        .collect()
}

/// Framework versions the profile records (plane stats naming a version).
fn versions(space: &Space) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for plane in &space.planes {
        for s in &plane.stats {
            let name = plane.stat_name(s.meta());
            if name.contains("version") {
                out.push((name.to_string(), plane.stat_display(s)));
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

fn print_text(info: &InfoJson) {
    outln!("run {}  ·  {} events in {} host(s)", info.run, human::count(info.events_total), info.hosts.len());
    for h in &info.hosts {
        let span = h.time_span_ps.map_or("no events".to_string(), |[a, b]| human::duration_ps(b.saturating_sub(a)));
        outln!();
        outln!("host {}  ·  {} {}  ·  span {}", h.host, human::bytes(h.file_bytes), h.format, span);
        for (k, v) in &h.versions {
            outln!("  {k}: {v}");
        }
        let mut kinds: Vec<(&str, &str, usize)> = Vec::new();
        for d in &h.devices {
            match kinds.iter_mut().find(|k| k.0 == d.kind && k.1 == d.model) {
                Some(k) => k.2 += 1,
                None => kinds.push((&d.kind, &d.model, 1)),
            }
        }
        for (kind, model, n) in kinds {
            let model = if model.is_empty() { String::new() } else { format!(" ({model})") };
            outln!("  devices: {n} × {kind}{model}");
        }
        outln!("  {:<62} {:>15}", "PLANE / LINE", "EVENTS");
        for p in &h.planes {
            outln!("  {:<62} {:>15}", crate::table::fit(&p.name, 62), human::count(p.events));
            for l in &p.lines {
                outln!("    {:<60} {:>15}", crate::table::fit(&l.name, 60), human::count(l.events));
            }
            if p.empty_lines_not_kept > 0 {
                let more = format!("({} more lines without events)", human::count(p.empty_lines_not_kept));
                outln!("    {more:<60} {:>15}", 0);
            }
        }
    }
}
