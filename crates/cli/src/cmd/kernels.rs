//! `stepscope kernels`: GPU kernel stats.

use std::process::ExitCode;

use stepscope_analysis::kernels;

use crate::human;
use crate::load;
use crate::opts::ByHostArgs;
use crate::table::{csv, Table};

pub fn run(by_host: &ByHostArgs) -> anyhow::Result<ExitCode> {
    let args = &by_host.common;
    let mut k = load::analysis(by_host, kernels::kernels, |_, hosts, read| {
        stepscope_analysis::fold::kernels_by_host(hosts, read, &|_| Ok(()))
    })?;
    let total_rows = k.kernels.len();
    k.kernels.truncate(args.select.rows());
    if args.output.json {
        outln!("{}", serde_json::to_string(&k)?);
        return Ok(ExitCode::SUCCESS);
    }
    let dims = |d: [u32; 3]| format!("{},{},{}", d[0], d[1], d[2]);
    let opt = |v: Option<String>| v.unwrap_or_default();
    if args.output.csv {
        let header = [
            "name",
            "op",
            "module",
            "count",
            "total_ps",
            "avg_ps",
            "min_ps",
            "max_ps",
            "grid",
            "block",
            "registers_per_thread",
            "shared_mem_bytes",
            "occupancy_pct",
            "tensor_core",
            "time_pct",
            "program_id",
        ];
        let rows: Vec<Vec<String>> = k
            .kernels
            .iter()
            .map(|r| {
                vec![
                    r.name.clone(),
                    r.op.clone(),
                    r.module.clone(),
                    r.count.to_string(),
                    r.total_ps.to_string(),
                    r.avg_ps.to_string(),
                    r.min_ps.to_string(),
                    r.max_ps.to_string(),
                    dims(r.grid),
                    dims(r.block),
                    opt(r.registers_per_thread.map(|v| v.to_string())),
                    opt(r.shared_mem_bytes.map(|v| v.to_string())),
                    opt(r.occupancy_pct.map(|v| format!("{v:.1}"))),
                    r.tensor_core.to_string(),
                    format!("{:.3}", r.time_pct),
                    opt(r.program_id.map(|p| p.to_string())),
                ]
            })
            .collect();
        out!("{}", csv(&header, &rows));
        return Ok(ExitCode::SUCCESS);
    }
    if total_rows == 0 {
        outln!("no GPU kernels in this profile (kernel stats need a GPU capture with the device tracer on)");
        return Ok(ExitCode::SUCCESS);
    }
    outln!(
        "{} of kernel time in {} kernels (showing {})",
        human::duration_ps(k.kernel_time_ps),
        total_rows,
        k.kernels.len()
    );
    let mut t = Table::new(vec!["KERNEL", "TOTAL", "%", "COUNT", "AVG", "GRID", "BLOCK", "REGS", "OCC", "TC", "OP"]);
    // On a narrow terminal the launch shape goes first, then registers, tensor cores
    // and occupancy.
    t.optional = vec![6, 5, 7, 9, 8];
    let or_dash = |v: Option<String>| v.unwrap_or_else(|| "—".into());
    let ops = crate::cmd::ops::placed_labels(
        k.kernels.iter().map(|r| (r.op.as_str(), r.module.as_str(), r.program.as_deref())),
    );
    for (r, op) in k.kernels.iter().zip(ops) {
        t.push(vec![
            r.name.clone(),
            human::duration_ps(r.total_ps),
            format!("{:.1}", r.time_pct),
            human::count(r.count),
            human::duration_ps(r.avg_ps),
            dims(r.grid),
            dims(r.block),
            or_dash(r.registers_per_thread.map(|n| n.to_string())),
            or_dash(r.occupancy_pct.map(|o| format!("{o:.0}%"))),
            if r.tensor_core { "yes".into() } else { String::new() },
            // The op, and where several programs or modules hold one of its name, whose.
            crate::table::fit(&op, if op.len() > r.op.len() { 32 } else { 14 }),
        ]);
    }
    out!("{}", t.text());
    let legend =
        "(REGS: registers per thread; OCC: occupancy the profile records; TC: uses tensor cores; —: not recorded)";
    out!("{}", crate::human::wrap("", legend, crate::table::prose_width()));
    Ok(ExitCode::SUCCESS)
}
