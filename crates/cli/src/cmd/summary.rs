//! `stepscope summary`: the overview of a run.

use std::process::ExitCode;

use clap::Args;
use stepscope_analysis::ops::GroupBy;
use stepscope_report::hosts::{self, HostSummary, HostsSummary};
use stepscope_report::summary::{self, Summary};

use crate::human;
use crate::load;
use crate::opts::CostArgs;
use crate::table::{csv, Table};

#[derive(Args, Debug)]
pub struct SummaryArgs {
    #[command(flatten)]
    pub cost: CostArgs,
    /// A row per host, each host read alone (what `--host HOST` prints for it), and
    /// how the hosts spread: for a pod, in one host's memory whatever the host count.
    #[arg(long, conflicts_with = "host")]
    pub per_host: bool,
    /// Read the run a host at a time, in one host's memory whatever the host count,
    /// for the same numbers and findings. What a run of several hosts gets
    /// without asking.
    #[arg(long, conflicts_with_all = ["host", "per_host"])]
    pub host_at_a_time: bool,
    /// Reduce the run from the parts in this folder (`host-I.part`, written by
    /// `stepscope part`, on the machines that hold the hosts; `host-I.unread`: a host
    /// that could not be read, its error): the numbers and findings of the run read
    /// here a host at a time (`--host-at-a-time`'s, also for a run of one host). A host
    /// with neither is read here.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["host", "per_host"])]
    pub parts: Option<std::path::PathBuf>,
}

pub fn run(summary_args: &SummaryArgs) -> anyhow::Result<ExitCode> {
    let cost_args = &summary_args.cost;
    if summary_args.per_host {
        return per_host(cost_args);
    }
    let args = &cost_args.common;
    if let Some(dir) = &summary_args.parts {
        let th = stepscope_judge::advise::Thresholds::default();
        let top = args.select.rows();
        let (judged, unread) = crate::cmd::part::judged_of_parts(&args.input, dir, top, &th, cost_args.peaks.user())?;
        let mut s = summary::judged_summary(judged.overview, &judged.inputs, &judged.findings);
        s.set_hosts_unread(unread);
        return print(&s, args);
    }
    let same = "numbers and findings";
    let whole = |mut profile: stepscope_analysis::Profile| {
        profile.set_peaks(cost_args.peaks.user());
        Ok(summary::summary(&profile, args.select.rows()))
    };
    let s = load::whole_or_by_host(&args.input, &args.select, summary_args.host_at_a_time, same, whole, || {
        host_at_a_time(cost_args)
    })?;
    print(&s, args)
}

/// `s` as `args` ask: JSON, CSV or text.
fn print(s: &Summary, args: &crate::opts::AnalysisArgs) -> anyhow::Result<ExitCode> {
    if args.output.json {
        outln!("{}", serde_json::to_string(&s)?);
    } else if args.output.csv {
        out!("{}", csv(&["metric", "value"], &metric_rows(s)));
    } else {
        print_text(s);
    }
    Ok(ExitCode::SUCCESS)
}

/// The headline numbers as (metric, value) rows.
fn metric_rows(s: &Summary) -> Vec<Vec<String>> {
    let b = &s.breakdown;
    let t = &s.step_time;
    [
        ("step_count", s.step_count as i64),
        ("step_mean_ps", t.mean_ps),
        ("step_median_ps", t.median_ps),
        ("step_p90_ps", t.p90_ps),
        ("step_min_ps", t.min_ps),
        ("step_max_ps", t.max_ps),
        ("step_std_ps", t.std_ps),
        ("device_compute_ps", b.device_compute_ps),
        ("collectives_ps", b.collectives_ps),
        ("host_to_device_ps", b.host_to_device_ps),
        ("device_to_host_ps", b.device_to_host_ps),
        ("device_to_device_ps", b.device_to_device_ps),
        ("async_wait_ps", b.async_wait_ps),
        ("host_callback_ps", b.host_callback_ps),
        ("runtime_overhead_ps", b.runtime_overhead_ps),
        ("compile_ps", b.compile_ps),
        ("device_idle_ps", b.device_idle_ps),
    ]
    .iter()
    .map(|(k, v)| vec![k.to_string(), v.to_string()])
    .chain(std::iter::once(vec!["device_utilization_pct".into(), format!("{:.2}", s.device_utilization_pct)]))
    .chain(s.flops_per_step.map(|f| vec!["flops_per_step".into(), format!("{f:.0}")]))
    .chain(s.flops_utilization_pct.map(|u| vec!["flops_utilization_pct".into(), format!("{u:.4}")]))
    .collect()
}

fn print_text(s: &Summary) {
    let env = &s.environment;
    let devices: Vec<String> = env
        .devices
        .iter()
        .map(|d| {
            if d.model.is_empty() {
                format!("{} × {:?}", d.count, d.kind)
            } else {
                format!("{} × {}", d.count, d.model)
            }
        })
        .collect();
    let devices = if devices.is_empty() { "no devices".to_string() } else { devices.join(", ") };
    outln!("run {}  ·  {} host(s)  ·  {devices}", s.run, env.hosts.len());
    for v in &env.versions {
        outln!("{v}");
    }
    outln!();
    if let Some(h) = &s.health {
        crate::cmd::advise::print_health(h);
    }
    print_capture(s);
    if s.step_count == 0 {
        match env.host_tracer_level {
            Some(0) => out!(
                "{}",
                human::wrap(
                    "",
                    &format!("no steps found: {}", stepscope_judge::advise::HOST_TRACING_OFF),
                    crate::table::prose_width()
                )
            ),
            _ => outln!(
                "no steps found: wrap each training step in jax.profiler.StepTraceAnnotation(\"train\", step_num=i)"
            ),
        }
        if !env.devices.is_empty() {
            // Each device is then measured over its own span, first op to last.
            proseln!(
                "device utilisation {:.1}% (computing {:.1}%) over each device's own span (first op to last); \
                 `stepscope devices PATH` splits it",
                s.device_utilization_pct,
                s.device_compute_pct
            );
            print_left_out(s);
        }
    } else {
        let t = &s.step_time;
        outln!("STEP TIME  {} steps (from {})", s.step_count, crate::cmd::steps::source_label(s.step_source));
        outln!(
            "  mean {} median {} p90 {} min {} max {} std {}",
            human::duration_ps(t.mean_ps),
            human::duration_ps(t.median_ps),
            human::duration_ps(t.p90_ps),
            human::duration_ps(t.min_ps),
            human::duration_ps(t.max_ps),
            human::duration_ps(t.std_ps)
        );
        if let Some(host) = &s.host_step_time {
            let note =
                crate::notes::timing_note(t.median_ps, host.median_ps, s.device_utilization_pct, s.steps_cut as usize);
            out!("{}", human::wrap("  ", &note, crate::table::prose_width()));
        }
        if let Some(w) = &s.warm_step_time {
            proseln!(
                "  {} of {} steps cold (compiled, or a first run after a compile); the {} warm steps: mean {} median {} (what compare, diff and check rank by)",
                s.cold_steps,
                s.step_count,
                w.count,
                human::duration_ps(w.mean_ps),
                human::duration_ps(w.median_ps)
            );
        } else if let Some(note) = crate::notes::cold_note("this run", s.cold_steps, s.step_count) {
            out!("{}", human::wrap("  ", &note, crate::table::prose_width()));
        }
        if let Some(note) = crate::notes::not_run_note(s.dispatched_not_run, s.launches_not_run) {
            out!("{}", human::wrap("  ", &note, crate::table::prose_width()));
        }
        outln!();
        let b = &s.breakdown;
        if env.devices.is_empty() {
            proseln!(
                "AVERAGE STEP  {}  ·  no device activity recorded: no breakdown (see the findings)",
                human::duration_ps(b.step_ps)
            );
        } else {
            print_breakdown(s);
        }
    }
    if let Some(m) = &s.memory_peak {
        let of = match (m.capacity_bytes, m.capacity_pct) {
            (Some(c), Some(p)) => format!(" of {} ({p:.1}%)", human::bytes(c)),
            _ => String::new(),
        };
        proseln!(
            "MEMORY  peak {}{of} on {} {}  ·  stepscope memory PATH",
            human::bytes(m.peak_bytes),
            m.host,
            m.allocator
        );
    }
    if !s.findings.is_empty() {
        outln!();
        outln!("TOP FINDINGS (all, with evidence and advice: stepscope advise PATH)");
        for f in &s.findings {
            crate::cmd::advise::print_finding(f, false);
        }
    }
    outln!();
    if s.top_ops.is_empty() {
        outln!("no XLA ops found in this profile");
    } else {
        outln!("TOP OPS (by self time)");
        out!("{}", crate::cmd::ops::op_table(&s.top_ops, GroupBy::Op, false).text());
        let note = crate::cmd::ops::op_time_note(s.attribution.op_ps, None);
        out!("{}", human::wrap("", &note, crate::table::prose_width()));
    }
}

/// The devices the numbers leave out, in one line (none: nothing); the hosts that
/// could not be read, a line each.
fn print_left_out(s: &Summary) {
    for u in &s.hosts_unread {
        let line = format!("host {} was not read: {} — the numbers are the other hosts'", u.host, u.error);
        outln!("{}", human::wrap("", &line, crate::table::prose_width()));
    }
    let hosts = s.environment.hosts.len() > 1;
    if let Some(line) = crate::cmd::devices::left_out_line(&s.devices_left_out, hosts) {
        outln!("{}", human::wrap("", &line, crate::table::prose_width()));
    }
}

/// The capture as a whole, where it holds compilation: first, since the steps (and
/// the average step) may not show it at all.
fn print_capture(s: &Summary) {
    let Some(c) = &s.capture else { return };
    let outside = match c.compile_outside_steps_ps {
        0 => "all of it in steps".to_string(),
        ps if ps == c.compile_ps => "none of it in a step".to_string(),
        ps => format!("{} of it outside the steps", human::duration_ps(ps)),
    };
    let line = format!(
        "CAPTURE  {}  ·  XLA compiling {} of it ({:.1}%; {outside})",
        human::duration_ps(c.span_ps),
        human::duration_ps(c.compile_ps),
        c.compile_pct
    );
    out!("{}", human::wrap("", &line, crate::table::prose_width()));
    outln!();
}

/// Where the average step went, one bar per part.
fn print_breakdown(s: &Summary) {
    let b = &s.breakdown;
    let flops = match (s.flops_per_step, s.flops_utilization_pct) {
        (Some(f), Some(u)) => format!("  ·  FLOPs utilisation {u:.1}% ({} a step)", human::rate(f, "FLOP")),
        _ => String::new(),
    };
    // Busy is not computing: waits on async copies, collectives and host callbacks keep
    // a device busy.
    let callbacks = match b.host_callback_ps {
        0 => String::new(),
        ps => format!(", in host callbacks {:.1}%", 100.0 * ps as f64 / b.step_ps.max(1) as f64),
    };
    proseln!(
        "AVERAGE STEP  {}  ·  device utilisation {:.1}% (computing {:.1}%{callbacks}){flops}",
        human::duration_ps(b.step_ps),
        s.device_utilization_pct,
        s.device_compute_pct
    );
    print_left_out(s);
    let parts = [
        ("device compute", b.device_compute_ps, true),
        ("collectives", b.collectives_ps, true),
        ("host → device copies", b.host_to_device_ps, true),
        ("device → host copies", b.device_to_host_ps, true),
        ("device ↔ device copies", b.device_to_device_ps, false),
        ("waiting on async copies", b.async_wait_ps, false),
        ("host callbacks (Python)", b.host_callback_ps, false),
        ("runtime between ops", b.runtime_overhead_ps, false),
        ("compile", b.compile_ps, true),
        match b.device_idle_queued_ps {
            Some(_) => ("device idle", b.device_idle_ps, true),
            None => ("device idle (host-bound)", b.device_idle_ps, true),
        },
    ];
    let line = |name: &str, ps: i64| {
        let pct = if b.step_ps > 0 { 100.0 * ps as f64 / b.step_ps as f64 } else { 0.0 };
        let bar = "█".repeat((pct / 4.0).round() as usize);
        outln!("  {name:<26} {:>10} {pct:>5.1}%  {bar}", human::duration_ps(ps));
    };
    // The parts most runs have always show; the others when they hold time.
    for (name, ps, _) in parts.into_iter().filter(|&(_, ps, always)| always || ps > 0) {
        line(name, ps);
    }
    // Where kernels are linked to their launches: idle split by whether launched work
    // was waiting to start.
    if let Some(queued) = b.device_idle_queued_ps {
        let launching = b.device_idle_launching_ps.unwrap_or(0);
        line("  host launched nothing", b.device_idle_ps - queued - launching);
        line("  host in launch calls", launching);
        line("  launched, not started", queued);
    }
    // Where the host recorded input work (data-loading scopes, device_put): the idle
    // time it held the device up, and the host time it took.
    if let (Some(idle), Some(host)) = (b.device_idle_input_ps, b.host_input_ps) {
        line("  of idle: waiting on input", idle);
        let pct = if b.step_ps > 0 { 100.0 * host as f64 / b.step_ps as f64 } else { 0.0 };
        outln!("  host input work {} a step ({pct:.1}%): see stepscope scopes", human::duration_ps(host));
    }
}

/// `--host-at-a-time`: the run's summary, one host in memory at a time.
fn host_at_a_time(cost_args: &CostArgs) -> anyhow::Result<Summary> {
    let args = &cost_args.common;
    let th = stepscope_judge::thresholds::Thresholds::default();
    let (mut s, unread) = load::host_at_a_time_judged(&args.input, cost_args.peaks.user(), &th, |run, hosts, read| {
        summary::summary_by_host(run, hosts, args.select.rows(), read, &|_| Ok(()))
    })?;
    s.set_hosts_unread(unread);
    Ok(s)
}

/// `--per-host`: each host's summary, one host in memory at a time.
fn per_host(cost_args: &CostArgs) -> anyhow::Result<ExitCode> {
    let args = &cost_args.common;
    let mut rows: Vec<HostSummary> = Vec::new();
    let mut run = String::new();
    // A host whose file cannot be read is listed as such; the others are summarised.
    let mut unread = Vec::new();
    load::each_host(&args.input, None, Some(&mut unread), &mut |host, mut profile| {
        profile.set_peaks(cost_args.peaks.user());
        run = profile.run.clone();
        rows.push(HostSummary { host: host.to_string(), summary: summary::summary(&profile, args.select.rows()) });
        Ok(())
    })?;
    let h = hosts::hosts(&run, rows, unread);
    if args.output.json {
        outln!("{}", serde_json::to_string(&h)?);
    } else if args.output.csv {
        out!("{}", host_csv(&h));
    } else {
        print_hosts(&h);
    }
    Ok(ExitCode::SUCCESS)
}

/// What a host's row shows of its summary (`None`: no timed steps / no devices).
struct HostCells<'a> {
    steps: u64,
    median_ps: Option<i64>,
    p90_ps: Option<i64>,
    utilization_pct: Option<f64>,
    top_op: &'a str,
    /// The rule of its most important finding.
    top_finding: &'a str,
}

impl<'a> HostCells<'a> {
    fn of(h: &'a HostSummary) -> HostCells<'a> {
        let s = &h.summary;
        let (t, timed) = (s.ranked_step_time(), s.step_count > 0);
        HostCells {
            steps: s.step_count,
            median_ps: timed.then_some(t.median_ps),
            p90_ps: timed.then_some(t.p90_ps),
            utilization_pct: (!s.environment.devices.is_empty()).then_some(s.device_utilization_pct),
            top_op: s.top_ops.first().map_or("", |o| o.name.as_str()),
            top_finding: s.findings.first().map_or("", |f| f.rule),
        }
    }
}

fn host_csv(h: &HostsSummary) -> String {
    let header = ["host", "steps", "step_median_ps", "step_p90_ps", "device_utilization_pct", "top_op", "top_finding"];
    let rows: Vec<Vec<String>> = (h.hosts.iter())
        .map(|row| {
            let c = HostCells::of(row);
            let opt = |v: Option<i64>| v.map(|x| x.to_string()).unwrap_or_default();
            // As --json has it (0.00 for a host without devices).
            let util = row.summary.device_utilization_pct;
            vec![
                row.host.clone(),
                c.steps.to_string(),
                opt(c.median_ps),
                opt(c.p90_ps),
                format!("{util:.2}"),
                c.top_op.to_string(),
                c.top_finding.to_string(),
            ]
        })
        .collect();
    csv(&header, &rows)
}

fn print_hosts(h: &HostsSummary) {
    outln!("run {}  ·  {} host(s), each read alone (`summary --host HOST` shows one whole)", h.run, h.hosts.len());
    let mut t = Table::new(vec!["HOST", "STEPS", "MEDIAN STEP", "P90", "UTIL", "TOP OP", "TOP FINDING"]);
    let or_dash = |s: &str| if s.is_empty() { "—".to_string() } else { s.to_string() };
    for row in &h.hosts {
        let c = HostCells::of(row);
        let dur = |v: Option<i64>| v.map(human::duration_ps).unwrap_or_else(|| "—".into());
        t.push(vec![
            row.host.clone(),
            human::count(c.steps),
            dur(c.median_ps),
            dur(c.p90_ps),
            c.utilization_pct.map_or_else(|| "—".into(), |u| format!("{u:.1}%")),
            c.top_op.to_string(),
            or_dash(c.top_finding),
        ]);
    }
    out!("{}", t.text());
    for u in &h.hosts_unread {
        let line = format!("host {} was not read: {} — the rows are the other hosts'", u.host, u.error);
        outln!("{}", human::wrap("", &line, crate::table::prose_width()));
    }
    if let (Some(d), Some(slow), Some(excess)) = (&h.step_median, &h.slowest_host, h.slowest_excess_pct) {
        outln!(
            "median step across hosts: min {} median {} max {} ({slow}, {excess:+.1}% over the median host)",
            human::duration_ps(d.min_ps),
            human::duration_ps(d.median_ps),
            human::duration_ps(d.max_ps)
        );
    }
    if let (Some(lo), Some(mid), Some(hi)) = (h.utilization_pct_min, h.utilization_pct_median, h.utilization_pct_max) {
        outln!("device utilisation across hosts: min {lo:.1}% median {mid:.1}% max {hi:.1}%");
    }
}
