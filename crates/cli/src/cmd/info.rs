//! `stepscope info`: what a profile holds.

use std::process::ExitCode;

use serde::Serialize;
use stepscope_xspace::{Format, Space};

use crate::args::InfoArgs;
use crate::human;
use crate::load;

#[derive(Serialize)]
struct InfoJson<'a> {
    schema: &'static str,
    run: &'a str,
    events_total: u64,
    hosts: Vec<HostJson<'a>>,
}

#[derive(Serialize)]
struct HostJson<'a> {
    host: &'a str,
    path: String,
    format: &'static str,
    file_bytes: u64,
    /// Earliest event start and latest event end, ps since the session start.
    time_span_ps: Option<[i64; 2]>,
    versions: Vec<(String, String)>,
    devices: Vec<&'a str>,
    planes: Vec<PlaneJson<'a>>,
}

#[derive(Serialize)]
struct PlaneJson<'a> {
    name: &'a str,
    events: u64,
    lines: Vec<LineJson<'a>>,
}

#[derive(Serialize)]
struct LineJson<'a> {
    name: &'a str,
    events: u64,
}

pub fn run(args: &InfoArgs) -> anyhow::Result<ExitCode> {
    let loaded = load::load(&args.input)?;
    let hosts: Vec<HostJson> = loaded
        .spaces
        .iter()
        .zip(&loaded.run.hosts)
        .map(|(space, file)| HostJson {
            host: &space.host,
            path: file.path.display().to_string(),
            format: match space.format {
                Format::XSpace => "xspace",
                Format::TraceJson => "trace_json",
            },
            file_bytes: space.file_bytes,
            time_span_ps: space.time_span_ps().map(|(a, b)| [a, b]),
            versions: versions(space),
            devices: space.planes.iter().filter(|p| p.name.starts_with("/device:")).map(|p| p.name.as_str()).collect(),
            planes: space
                .planes
                .iter()
                .map(|p| PlaneJson {
                    name: &p.name,
                    events: p.event_count(),
                    lines: p
                        .lines
                        .iter()
                        .filter(|l| !l.is_counter)
                        .map(|l| LineJson { name: &l.name, events: l.len() as u64 })
                        .collect(),
                })
                .collect(),
        })
        .collect();
    let info = InfoJson {
        schema: "stepscope.info/1",
        run: &loaded.run.rel,
        events_total: loaded.spaces.iter().map(Space::event_count).sum(),
        hosts,
    };
    if args.output.json {
        println!("{}", serde_json::to_string(&info)?);
    } else {
        print_text(&info);
    }
    Ok(ExitCode::SUCCESS)
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
    println!("run {}  ·  {} events in {} host(s)", info.run, human::count(info.events_total), info.hosts.len());
    for h in &info.hosts {
        let span = h.time_span_ps.map_or("no events".to_string(), |[a, b]| human::duration_ps(b - a));
        println!();
        println!("host {}  ·  {} {}  ·  span {}", h.host, human::bytes(h.file_bytes), h.format, span);
        for (k, v) in &h.versions {
            println!("  {k}: {v}");
        }
        if !h.devices.is_empty() {
            println!("  devices: {}", h.devices.join(", "));
        }
        println!("  {:<62} {:>15}", "PLANE / LINE", "EVENTS");
        for p in &h.planes {
            println!("  {:<62} {:>15}", human::fit(p.name, 62), human::count(p.events));
            for l in &p.lines {
                println!("    {:<60} {:>15}", human::fit(l.name, 60), human::count(l.events));
            }
        }
    }
}

