//! `stepscope compile`: XLA compilation on the host, per module.

use std::process::ExitCode;

use stepscope_analysis::compile;

use crate::human;
use crate::load;
use crate::opts::ByHostArgs;
use crate::table::{csv, Table};

pub fn run(by_host: &ByHostArgs) -> anyhow::Result<ExitCode> {
    let args = &by_host.common;
    let c = load::analysis(by_host, compile::compile, |run, hosts, read| {
        stepscope_analysis::fold::compile_by_host(run, hosts, read, &|_| Ok(()))
    })?;
    if args.output.json {
        outln!("{}", serde_json::to_string(&c)?);
        return Ok(ExitCode::SUCCESS);
    }
    if args.output.csv {
        let header = ["host", "module", "module_from", "start_ps", "lowering_ps", "backend_ps", "total_ps"];
        let rows: Vec<Vec<String>> = c
            .compiles
            .iter()
            .map(|e| {
                vec![
                    e.host.clone(),
                    e.module.clone(),
                    e.module_from.to_string(),
                    e.start_ps.to_string(),
                    e.lowering_ps.to_string(),
                    e.backend_ps.to_string(),
                    e.total_ps.to_string(),
                ]
            })
            .collect();
        out!("{}", csv(&header, &rows));
        return Ok(ExitCode::SUCCESS);
    }
    if c.compiles.is_empty() {
        outln!("no XLA compilation in this capture (the steady state was captured: good)");
        return Ok(ExitCode::SUCCESS);
    }
    outln!("{} compiling {} time(s)", human::duration_ps(c.total_ps), c.compiles.len());
    let mut t = Table::new(vec!["MODULE", "TOTAL", "COUNT", "MAX"]);
    for m in c.modules.iter().take(args.select.rows()) {
        let name = if m.module.is_empty() { "(unknown module)".to_string() } else { m.module.clone() };
        t.push(vec![name, human::duration_ps(m.total_ps), human::count(m.count), human::duration_ps(m.max_ps)]);
    }
    out!("{}", t.text());
    outln!();
    let mut t = Table::new(vec!["COMPILE", "AT", "LOWERING", "BACKEND", "TOTAL"]);
    for e in c.compiles.iter().take(args.select.rows()) {
        let name = match (e.module.is_empty(), e.module_from) {
            (true, _) => "(unknown module)".to_string(),
            (false, "next_run") => format!("{} (ran next)", e.module),
            _ => e.module.clone(),
        };
        t.push(vec![
            name,
            human::duration_ps(e.start_ps),
            human::duration_ps(e.lowering_ps),
            human::duration_ps(e.backend_ps),
            human::duration_ps(e.total_ps),
        ]);
    }
    out!("{}", t.text());
    Ok(ExitCode::SUCCESS)
}
