//! `stepscope steps`: every step and how it spent its time.

use std::process::ExitCode;

use clap::Args;
use stepscope_analysis::{devices, steps};

use crate::human;
use crate::load;
use crate::opts::CostArgs;
use crate::table::{csv, Table};

#[derive(Args, Debug)]
pub struct StepsArgs {
    #[command(flatten)]
    pub cost: CostArgs,
    /// Read the run a host at a time, in one host's memory whatever the host count, for
    /// the same steps. What a run of several hosts gets without asking.
    #[arg(long, conflicts_with = "host")]
    pub host_at_a_time: bool,
    /// Each step's critical path: what its time went to (the what-if model's graph of
    /// the step replayed; docs/whatif.md): its largest part in a column, every part in
    /// `--json`.
    #[arg(long)]
    pub critical_path: bool,
    /// Reduce the run from the parts in this folder, written by `stepscope part --for
    /// steps` (with `--critical-path` where asked here; `summary --parts` says more).
    #[arg(long, value_name = "DIR", conflicts_with = "host")]
    pub parts: Option<std::path::PathBuf>,
}

/// Whether the text output's note on timing is wanted for `s`: steps timed on the device.
fn note_wanted(cost_args: &CostArgs, s: &steps::Steps) -> bool {
    let out = &cost_args.common.output;
    !out.json && !out.csv && s.timing == steps::StepTiming::Device
}

/// `--host-at-a-time`: the run's steps, one host in memory at a time, and where the
/// note is wanted the devices' utilisation (a second pass).
fn host_at_a_time(cost_args: &CostArgs, critical_paths: bool) -> anyhow::Result<(steps::Steps, Option<f64>)> {
    let input = &cost_args.common.input;
    let (s, _) = load::host_at_a_time(input, cost_args.peaks.user(), |run, hosts, read| {
        stepscope_analysis::fold::steps_by_host(run, hosts, read, &|_| Ok(()), critical_paths)
    })?;
    if !note_wanted(cost_args, &s) {
        return Ok((s, None));
    }
    let (d, _) = load::host_at_a_time(input, Default::default(), |run, hosts, read| {
        stepscope_analysis::fold::devices_by_host(run, hosts, read, &|_| Ok(()))
    })?;
    Ok((s, Some(d.all.utilization_pct)))
}

pub fn run(steps_args: &StepsArgs) -> anyhow::Result<ExitCode> {
    let cost_args = &steps_args.cost;
    let args = &cost_args.common;
    // The devices' utilisation, where the note says who waits: the run's, as `summary`,
    // `devices` and the web's overview give it.
    let whole = |mut profile: stepscope_analysis::Profile| {
        profile.set_peaks(cost_args.peaks.user());
        let mut s = steps::steps(&profile);
        if steps_args.critical_path {
            stepscope_analysis::whatif::add_critical_paths(&profile, &mut s.steps);
        }
        let utilization = note_wanted(cost_args, &s).then(|| devices::devices(&profile).all.utilization_pct);
        Ok((s, utilization))
    };
    let of_parts = |dir: &std::path::Path| {
        let (s, d) =
            crate::cmd::part::steps_of_parts(&args.input, dir, steps_args.critical_path, cost_args.peaks.user())?;
        let utilization = note_wanted(cost_args, &s).then_some(d.all.utilization_pct);
        anyhow::Ok((s, utilization))
    };
    let (mut s, utilization_pct) = match &steps_args.parts {
        Some(dir) => of_parts(dir)?,
        None => load::whole_or_by_host(&args.input, &args.select, steps_args.host_at_a_time, "steps", whole, || {
            host_at_a_time(cost_args, steps_args.critical_path)
        })?,
    };
    // Of every step, before `--top` keeps the slowest.
    let note = utilization_pct.map(|u| {
        let timed: Vec<&steps::Step> = s.timed().collect();
        let median = |v: Vec<i64>| steps::Distribution::of(&v).median_ps;
        crate::notes::timing_note(
            median(timed.iter().map(|st| st.duration_ps).collect()),
            median(timed.iter().map(|st| st.host_duration_ps).collect()),
            u,
            s.steps.iter().filter(|st| st.cut).count(),
        )
    });
    let all = s.steps.len();
    // `--top N`: the N slowest steps, in step order.
    if let Some(n) = args.select.top.filter(|&n| n > 0 && n < all) {
        let mut slowest: Vec<usize> = (0..all).collect();
        slowest.sort_by_key(|&i| (std::cmp::Reverse(s.steps[i].duration_ps), i));
        slowest.truncate(n);
        slowest.sort_unstable();
        s.steps = slowest.into_iter().map(|i| s.steps[i].clone()).collect();
    }
    if args.output.json {
        outln!("{}", serde_json::to_string(&s)?);
        return Ok(ExitCode::SUCCESS);
    }
    if args.output.csv {
        let rows: Vec<Vec<String>> = s
            .steps
            .iter()
            .map(|st| {
                vec![
                    st.step_num.to_string(),
                    st.host.clone(),
                    st.name.clone(),
                    st.start_ps.to_string(),
                    st.duration_ps.to_string(),
                    st.host_start_ps.to_string(),
                    st.host_duration_ps.to_string(),
                    st.cut.to_string(),
                    st.device_busy_ps.to_string(),
                    st.device_idle_ps.to_string(),
                    st.compile_ps.to_string(),
                    st.device_work_ps.map(|w| w.to_string()).unwrap_or_default(),
                    st.flops.map(|f| f.to_string()).unwrap_or_default(),
                    st.flops_utilization_pct.map(|u| format!("{u:.4}")).unwrap_or_default(),
                ]
            })
            .collect();
        let header = [
            "step_num",
            "host",
            "name",
            "start_ps",
            "duration_ps",
            "host_start_ps",
            "host_duration_ps",
            "cut",
            "device_busy_ps",
            "device_idle_ps",
            "compile_ps",
            "device_work_ps",
            "flops",
            "flops_utilization_pct",
        ];
        out!("{}", csv(&header, &rows));
        return Ok(ExitCode::SUCCESS);
    }
    if s.steps.is_empty() {
        outln!("no steps found: wrap each training step in jax.profiler.StepTraceAnnotation(\"train\", step_num=i)");
        return Ok(ExitCode::SUCCESS);
    }
    match s.steps.len() {
        n if n < all => outln!("the {n} slowest of {all} steps (from {})", source_label(s.source)),
        n => outln!("{n} steps (from {})", source_label(s.source)),
    }
    let device = s.timing == steps::StepTiming::Device;
    if let Some(note) = note {
        out!("{}", human::wrap("", &note, crate::table::prose_width()));
    }
    if let Some(note) = crate::notes::not_run_note(s.dispatched_not_run, s.launches_not_run) {
        out!("{}", human::wrap("", &note, crate::table::prose_width()));
    }
    // The work each step launched, which differs from the busy time within the step
    // when the loop dispatches ahead.
    let work = s.steps.iter().any(|st| st.device_work_ps.is_some());
    let mut head = vec!["STEP", "HOST", "START", "DURATION", "DEVICE BUSY", "IDLE", "COMPILE"];
    if device {
        head.insert(4, "DISPATCH");
    }
    if work {
        head.push("LAUNCHED");
    }
    let flops = s.steps.iter().any(|st| st.flops_utilization_pct.is_some());
    if flops {
        head.extend(["FLOPS", "FLOPS UTIL %"]);
    }
    let critical = s.steps.iter().any(|st| !st.critical_path.is_empty());
    if critical {
        head.push("CRITICAL");
    }
    let at = |name: &str| head.iter().position(|h| *h == name);
    // Where the table would not fit: the FLOPs (their rate stays), then the start, then
    // the host of a run of one.
    let optional: Vec<usize> = ["FLOPS", "START", "HOST"].iter().filter_map(|h| at(h)).collect();
    let left: Vec<usize> = at("CRITICAL").into_iter().collect();
    let mut t = Table::new(head);
    (t.optional, t.left) = (optional, left);
    for st in &s.steps {
        let mut row = vec![
            st.step_num.to_string(),
            st.host.clone(),
            human::duration_ps(st.start_ps),
            if st.cut {
                format!("{} (cut)", human::duration_ps(st.duration_ps))
            } else {
                human::duration_ps(st.duration_ps)
            },
            human::duration_ps(st.device_busy_ps),
            human::duration_ps(st.device_idle_ps),
            human::duration_ps(st.compile_ps),
        ];
        if device {
            row.insert(4, human::duration_ps(st.host_duration_ps));
        }
        if work {
            row.push(st.device_work_ps.map(human::duration_ps).unwrap_or_default());
        }
        if flops {
            row.push(st.flops.map(|f| human::rate(f as f64, "FLOP")).unwrap_or_default());
            row.push(st.flops_utilization_pct.map(|u| format!("{u:.1}")).unwrap_or_default());
        }
        if critical {
            row.push(critical_words(st));
        }
        t.push(row);
    }
    out!("{}", t.text());
    if device {
        outln!("DISPATCH: the host's span of the step (its annotation)");
    }
    if work {
        outln!("LAUNCHED: device time of the ops each step launched (GPU: by correlation_id; CPU: by run)");
    }
    if flops {
        outln!("FLOPS: the ops that started in the step; UTIL: over the step's time at the devices' peak FLOP/s");
    }
    if critical {
        outln!("CRITICAL: the largest part of the step's critical path, its share of the path (--json: every part)");
    }
    Ok(ExitCode::SUCCESS)
}

/// The largest part of a step's critical path and its share: `dispatch 64%`.
fn critical_words(st: &steps::Step) -> String {
    let total: i64 = st.critical_path.iter().map(|p| p.ps).sum();
    match st.critical_path.first() {
        Some(p) if total > 0 => format!("{} {:.0}%", p.node.replace('_', " "), 100.0 * p.ps as f64 / total as f64),
        _ => String::new(),
    }
}

/// A few words on where steps came from.
pub fn source_label(s: steps::StepSource) -> &'static str {
    steps::source_words(s)
}
