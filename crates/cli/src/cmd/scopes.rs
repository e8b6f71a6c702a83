//! `stepscope scopes`: the user's own host scopes (TraceAnnotation), nested, per step.

use std::process::ExitCode;

use stepscope_analysis::scopes;

use crate::human;
use crate::load;
use crate::opts::ByHostArgs;
use crate::table::{csv, Table};

pub fn run(by_host: &ByHostArgs) -> anyhow::Result<ExitCode> {
    let args = &by_host.common;
    let mut s = load::analysis(by_host, scopes::scopes, |run, hosts, read| {
        stepscope_analysis::fold::scopes_by_host(run, hosts, read, &|_| Ok(()))
    })?;
    // A tree: every row unless --top asks for fewer.
    if let Some(n) = args.select.top.filter(|&n| n > 0) {
        s.scopes.truncate(n);
    }
    if args.output.json {
        outln!("{}", serde_json::to_string(&s)?);
        return Ok(ExitCode::SUCCESS);
    }
    let opt = |v: Option<i64>| v.map(|v| v.to_string()).unwrap_or_default();
    if args.output.csv {
        let header = [
            "path",
            "name",
            "depth",
            "host",
            "count",
            "total_ps",
            "self_ps",
            "avg_ps",
            "per_step_ps",
            "step_pct",
            "device_busy_ps",
            "device_work_ps",
            "input",
        ];
        let rows: Vec<Vec<String>> = s
            .scopes
            .iter()
            .map(|r| {
                vec![
                    r.path.clone(),
                    r.name.clone(),
                    r.depth.to_string(),
                    r.host.clone(),
                    r.count.to_string(),
                    r.total_ps.to_string(),
                    r.self_ps.to_string(),
                    r.avg_ps.to_string(),
                    opt(r.per_step_ps),
                    r.step_pct.map(|p| format!("{p:.3}")).unwrap_or_default(),
                    r.device_busy_ps.to_string(),
                    opt(r.device_work_ps),
                    r.input.to_string(),
                ]
            })
            .collect();
        out!("{}", csv(&header, &rows));
        return Ok(ExitCode::SUCCESS);
    }
    if s.scopes.is_empty() {
        let why = "no host scopes found. Name the parts of your step with `with jax.profiler.TraceAnnotation(\"data_loading\"):` \
                   (or stepscope.scope / profile_scope) inside `jax.profiler.StepTraceAnnotation(\"train\", step_num=i)`, \
                   with host tracing on (host_tracer_level 1 or more).";
        out!("{}", human::wrap("", why, crate::table::prose_width()));
        return Ok(ExitCode::SUCCESS);
    }
    let hosts: std::collections::BTreeSet<&str> = s.scopes.iter().map(|r| r.host.as_str()).collect();
    let several_hosts = hosts.len() > 1;
    let work = s.scopes.iter().any(|r| r.device_work_ps.is_some());
    let head = format!(
        "{} host scope paths{}",
        s.scopes.len(),
        match s.step_count {
            0 => String::from(" (no steps: per-step figures need StepTraceAnnotation)"),
            n => format!(" over {n} steps of {} on average{}", human::duration_ps(s.step_ps), on_host(&s)),
        }
    );
    out!("{}", human::wrap("", &head, crate::table::prose_width()));
    let mut head = vec!["SCOPE", "COUNT", "TOTAL", "SELF", "PER STEP", "% STEP", "DEVICE BUSY"];
    if work {
        head.push("LAUNCHED");
    }
    if several_hosts {
        head.push("HOST");
    }
    let mut t = Table::new(head);
    for r in &s.scopes {
        let mark = if r.input { "  [input]" } else { "" };
        let mut row = vec![
            format!("{}{}{mark}", "  ".repeat(r.depth), r.name),
            human::count(r.count),
            human::duration_ps(r.total_ps),
            human::duration_ps(r.self_ps),
            r.per_step_ps.map(human::duration_ps).unwrap_or_default(),
            r.step_pct.map(|p| format!("{p:.1}")).unwrap_or_default(),
            human::duration_ps(r.device_busy_ps),
        ];
        if work {
            row.push(r.device_work_ps.map(human::duration_ps).unwrap_or_default());
        }
        if several_hosts {
            row.push(r.host.clone());
        }
        t.push(row);
    }
    out!("{}", t.text());
    let i = &s.input;
    if s.step_count > 0 && i.host_input_ps > 0 {
        outln!();
        let idle = match i.device_idle_input_ps {
            // Input loaded between steps (a step that is one run of a program) or
            // while the device ran earlier work.
            0 => "none of it left the device idle inside a step".to_string(),
            ps => format!(
                "the device had nothing to run for {} of it ({:.1}% of the step)",
                human::duration_ps(ps),
                i.device_idle_input_pct
            ),
        };
        let line = format!(
            "input work ({}): {} a step on the host ({:.1}% of the step{}); {idle}",
            i.names.join(", "),
            human::duration_ps(i.host_input_ps),
            i.host_input_pct,
            if differs(&s) { " on the host" } else { "" },
        );
        out!("{}", human::wrap("", &line, crate::table::prose_width()));
    }
    Ok(ExitCode::SUCCESS)
}

/// The steps on the host last other than as timed (a loop that dispatches ahead,
/// steps that are a module's runs) by more than 1%: the scopes' shares are of the
/// host's.
fn differs(s: &scopes::Scopes) -> bool {
    (s.host_step_ps - s.step_ps).abs() * 100 > s.step_ps.abs()
}

/// What the scopes' shares are of, where it is not the step as timed.
fn on_host(s: &scopes::Scopes) -> String {
    match differs(s) {
        true => format!("; {} on the host, where scopes run (% STEP is of that)", human::duration_ps(s.host_step_ps)),
        false => String::new(),
    }
}
