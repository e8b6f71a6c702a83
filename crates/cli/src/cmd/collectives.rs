//! `stepscope collectives`: collective time per op and how much compute hid it.

use std::process::ExitCode;

use stepscope_analysis::collectives;

use crate::human;
use crate::load;
use crate::opts::ByHostArgs;
use crate::table::{csv, Table};

pub fn run(by_host: &ByHostArgs) -> anyhow::Result<ExitCode> {
    let args = &by_host.common;
    let mut c = load::analysis(by_host, collectives::collectives, |run, hosts, read| {
        stepscope_analysis::fold::collectives_by_host(run, hosts, read, &|_| Ok(()))
    })?;
    c.ops.truncate(args.select.rows());
    if args.output.json {
        outln!("{}", serde_json::to_string(&c)?);
        return Ok(ExitCode::SUCCESS);
    }
    let rows: Vec<Vec<String>> = c
        .ops
        .iter()
        .map(|r| {
            vec![
                r.name.clone(),
                r.kind.clone(),
                r.module.clone(),
                r.is_async.to_string(),
                r.count.to_string(),
                r.devices.to_string(),
                r.total_ps.to_string(),
                r.overlapped_ps.to_string(),
                r.exposed_ps.to_string(),
                format!("{:.2}", r.overlap_pct),
                r.bytes_moved.map(|b| b.to_string()).unwrap_or_default(),
                r.bus_bytes_per_s.map(|b| format!("{b:.0}")).unwrap_or_default(),
            ]
        })
        .collect();
    if args.output.csv {
        let header = [
            "name",
            "kind",
            "module",
            "is_async",
            "count",
            "devices",
            "total_ps",
            "overlapped_ps",
            "exposed_ps",
            "overlap_pct",
            "bytes_moved",
            "bus_bytes_per_s",
        ];
        out!("{}", csv(&header, &rows));
        return Ok(ExitCode::SUCCESS);
    }
    let outside = if c.outside_window_ps > 0 {
        format!(
            "; {} more ran outside the devices' steps (not counted: `stepscope devices` shows each window)",
            human::duration_ps(c.outside_window_ps)
        )
    } else {
        String::new()
    };
    if c.ops.is_empty() {
        match c.outside_window_ps {
            0 => proseln!(
                "no collectives (all-reduce, all-gather, reduce-scatter, all-to-all, collective-permute) in this profile"
            ),
            _ => proseln!("no collectives in the devices' steps{outside}"),
        }
        return Ok(ExitCode::SUCCESS);
    }
    let head = format!(
        "{} in collectives over all devices' steps: {} exposed, {} ({:.1}%) overlapped by compute{outside}",
        human::duration_ps(c.total_ps),
        human::duration_ps(c.exposed_ps),
        human::duration_ps(c.overlapped_ps),
        c.overlap_pct
    );
    out!("{}", human::wrap("", &head, crate::table::prose_width()));
    let mut t = Table::new(vec!["OP", "EXPOSED", "TOTAL", "OVERLAP", "COUNT", "AVG", "MOVED", "BUS BW", "KIND"]);
    for r in &c.ops {
        t.push(vec![
            format!("{}{}", r.name, if r.is_async { " (async)" } else { "" }),
            human::duration_ps(r.exposed_ps),
            human::duration_ps(r.total_ps),
            format!("{:.1}%", r.overlap_pct),
            human::count(r.count),
            human::duration_ps(r.avg_ps),
            r.bytes_moved.map(human::bytes).unwrap_or_default(),
            r.bus_bytes_per_s.map(|b| human::rate(b, "B/s")).unwrap_or_default(),
            r.kind.clone(),
        ]);
    }
    out!("{}", t.text());
    let key = "MOVED: bytes each participant sent (bus bytes: all-reduce 2(n-1)/n of its data); BUS BW: over the \
               transfers' time";
    out!("{}", human::wrap("", key, crate::table::prose_width()));
    Ok(ExitCode::SUCCESS)
}
