//! `stepscope compare RUN…`: several runs side by side.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use stepscope_report::compare;

use crate::human;
use crate::load;
use crate::opts::{By, Input, Output, Select};
use crate::table::{csv, Table};

#[derive(Args, Debug)]
pub struct CompareArgs {
    /// Two or more runs (log directories, run folders or profile files).
    #[arg(required = true, num_args = 2..)]
    pub runs: Vec<PathBuf>,
    /// Side by side, the op profile grouped by op (default), category, module,
    /// name-stack scope, Python source line or stack.
    #[arg(long, value_enum, default_value = "op")]
    pub by: By,
    #[command(flatten)]
    pub select: Select,
    #[command(flatten)]
    pub output: Output,
    /// Read each run a host at a time, in one host's memory whatever the host count,
    /// for the same numbers. What a run of several hosts gets without asking.
    #[arg(long, conflicts_with = "host")]
    pub host_at_a_time: bool,
}

pub fn run(args: &CompareArgs) -> anyhow::Result<ExitCode> {
    // One run held at a time: each is reduced to what the comparison reads of it.
    let want = (args.by.group(), args.select.rows(), false);
    let mut sides = Vec::new();
    for (p, label) in args.runs.iter().zip(labels(&args.runs)) {
        let input = Input { path: p.clone(), run: None };
        sides.push((label, load::side(&input, &args.select, args.host_at_a_time, want)?.0));
    }
    let mut c = compare::compare_sides(&sides, args.select.rows());
    for r in &mut c.runs {
        r.top_ops.truncate(3);
    }
    if args.output.json {
        outln!("{}", serde_json::to_string(&c)?);
        return Ok(ExitCode::SUCCESS);
    }
    let opt = |v: Option<u64>| v.map(|b| b.to_string()).unwrap_or_default();
    if args.output.csv {
        let header = [
            "label",
            "run",
            "step_count",
            "step_median_ps",
            "step_mean_ps",
            "step_p90_ps",
            "step_time_vs_first_pct",
            "device_compute_ps",
            "collectives_ps",
            "host_to_device_ps",
            "device_to_host_ps",
            "compile_ps",
            "device_idle_ps",
            "device_utilization_pct",
            "memory_peak_bytes",
            "top_op",
            "device_count",
            "scaling_efficiency_pct",
        ];
        let rows: Vec<Vec<String>> = c
            .runs
            .iter()
            .map(|r| {
                let b = &r.breakdown;
                vec![
                    r.label.clone(),
                    r.run.clone(),
                    r.step_count.to_string(),
                    r.step_time.median_ps.to_string(),
                    r.step_time.mean_ps.to_string(),
                    r.step_time.p90_ps.to_string(),
                    format!("{:.2}", r.step_time_vs_first_pct),
                    b.device_compute_ps.to_string(),
                    b.collectives_ps.to_string(),
                    b.host_to_device_ps.to_string(),
                    b.device_to_host_ps.to_string(),
                    b.compile_ps.to_string(),
                    b.device_idle_ps.to_string(),
                    format!("{:.2}", r.device_utilization_pct),
                    opt(r.memory_peak_bytes),
                    r.top_ops.first().map(|o| o.name.clone()).unwrap_or_default(),
                    r.device_count.to_string(),
                    r.scaling_efficiency_pct.map(|p| format!("{p:.2}")).unwrap_or_default(),
                ]
            })
            .collect();
        out!("{}", csv(&header, &rows));
        return Ok(ExitCode::SUCCESS);
    }
    let scaled = c.scaling_basis.is_some();
    // Each column says its statistic: the median step (of the warm steps where some are
    // cold) ranks the runs; compute and idle are parts of the mean step, shown beside it.
    let mut head = vec!["RUN", "DEVICES", "STEPS", "MEDIAN STEP", "VS FIRST"];
    if scaled {
        head.push("SCALING");
    }
    head.extend(["MEAN STEP", "COMPUTE", "IDLE", "UTIL", "MEM PEAK"]);
    let mut t = Table::new(head);
    for r in &c.runs {
        let mut cells = vec![
            r.label.clone(),
            r.device_count.to_string(),
            r.step_count.to_string(),
            human::duration_ps(r.step_time.median_ps),
            format!("{:.0}%", r.step_time_vs_first_pct),
        ];
        if scaled {
            cells.push(r.scaling_efficiency_pct.map(|p| format!("{p:.0}%")).unwrap_or_else(|| "—".into()));
        }
        cells.extend([
            human::duration_ps(r.breakdown.step_ps),
            human::duration_ps(r.breakdown.device_compute_ps),
            human::duration_ps(r.breakdown.device_idle_ps),
            format!("{:.1}%", r.device_utilization_pct),
            r.memory_peak_bytes.map(human::bytes).unwrap_or_default(),
        ]);
        t.push(cells);
    }
    out!("{}", t.text());
    let note = "MEDIAN STEP and VS FIRST: the median over each run's warm steps (all of them where none is cold); \
                COMPUTE, IDLE and UTIL: the parts of its MEAN STEP over every step timed.";
    out!("{}", human::wrap("", note, crate::table::prose_width()));
    if let (Some(basis), Some(base)) = (c.scaling_basis, &c.scaling_base) {
        let what = match basis {
            "flops" => "FLOP/s per device (the FLOPs a step ran over its median time)",
            _ => "steps a second per device (each run's step taken as the same work: strong scaling)",
        };
        let note = format!("SCALING: {what}, against {base}; 100% is linear scaling.");
        out!("{}", human::wrap("", &note, crate::table::prose_width()));
    }
    for r in &c.runs {
        if let Some(note) = crate::notes::cold_note(&r.label, r.cold_steps, r.step_count) {
            out!("{}", human::wrap("", &note, crate::table::prose_width()));
        }
    }
    let first = c.runs.first().map_or("", |r| r.label.as_str());
    for r in &c.runs {
        if let Some(note) = r.matched_op_time_pct.and_then(stepscope_report::diff::other_programs_note) {
            let note = format!("{} and {first}: {note}", r.label);
            out!("{}", human::wrap("", &note, crate::table::prose_width()));
        }
    }
    // Runs of fewer than 2 warm steps have no noise estimate: no difference from them
    // is a measured one (as `diff` says).
    let few: Vec<&str> = (c.runs.iter())
        .filter(|r| r.step_count > 0 && r.step_count.saturating_sub(r.cold_steps) < 2)
        .map(|r| r.label.as_str())
        .collect();
    if !few.is_empty() {
        let note = format!(
            "{} {} fewer than 2 warm steps: no noise estimate, so no difference in step time from {} is a \
             measured one — capture at least {} warm steps a run (after a warm-up step) to compare",
            few.join(", "),
            if few.len() == 1 { "has" } else { "have" },
            if few.len() == 1 { "it" } else { "them" },
            stepscope_report::diff::MIN_STEPS_FOR_NOISE
        );
        out!("{}", human::wrap("", &note, crate::table::prose_width()));
    }
    outln!();
    for r in &c.runs {
        let ops: Vec<String> =
            r.top_ops.iter().map(|o| format!("{} {}", o.name, human::duration_ps(o.self_ps))).collect();
        outln!("{}: {}", r.label, ops.join(", "));
    }
    let labels: Vec<&str> = c.runs.iter().map(|r| r.label.as_str()).collect();
    let by = c.by.name().to_uppercase();
    for (title, rows) in [(format!("{by} (per step)"), &c.rows), ("HOST SCOPE (per step)".to_string(), &c.scopes)] {
        if rows.is_empty() {
            continue;
        }
        outln!();
        let mut head: Vec<String> = vec![title];
        head.extend(labels.iter().map(|l| l.to_string()));
        head.push("SPREAD".into());
        let mut t = Table::new(head);
        for r in rows {
            let mut cells = vec![r.name.clone()];
            cells.extend(r.per_step_ps.iter().map(|v| v.map(human::duration_ps).unwrap_or_else(|| "—".into())));
            cells.push(human::duration_ps(r.spread_ps));
            t.push(cells);
        }
        out!("{}", t.text());
    }
    Ok(ExitCode::SUCCESS)
}

/// Each run's label: its path less the folders all the paths start with
/// (`tests/fixtures/cpu-dp4` → `cpu-dp4`), whole where that leaves nothing.
pub(crate) fn labels(runs: &[PathBuf]) -> Vec<String> {
    let parts: Vec<Vec<String>> =
        (runs.iter()).map(|p| p.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect()).collect();
    let shortest = parts.iter().map(Vec::len).min().unwrap_or(0);
    // Leave at least the last part of each.
    let common = (0..shortest.saturating_sub(1)).take_while(|&i| parts.iter().all(|p| p[i] == parts[0][i])).count();
    let labels: Vec<String> = parts.iter().map(|p| p[common..].join("/")).collect();
    let distinct = labels.iter().collect::<std::collections::HashSet<_>>().len() == labels.len();
    match distinct {
        true => labels,
        false => runs.iter().map(|p| p.display().to_string()).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::labels;
    use std::path::PathBuf;

    #[test]
    fn labels_drop_the_common_folders() {
        let p = |v: &[&str]| v.iter().map(PathBuf::from).collect::<Vec<_>>();
        assert_eq!(labels(&p(&["tests/fixtures/cpu-dp4", "tests/fixtures/cpu-clean"])), ["cpu-dp4", "cpu-clean"]);
        assert_eq!(labels(&p(&["runs/a/x.xplane.pb", "runs/b/x.xplane.pb"])), ["a/x.xplane.pb", "b/x.xplane.pb"]);
        assert_eq!(labels(&p(&["a", "b/c"])), ["a", "b/c"]);
        assert_eq!(labels(&p(&["same", "same"])), ["same", "same"]);
    }
}
