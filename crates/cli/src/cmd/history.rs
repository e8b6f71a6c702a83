//! `stepscope history LOGDIR…`: every run over time, and the first that moved.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use stepscope_analysis::ops::GroupBy;
use stepscope_report::history::{History, HISTORY_TOP};
use stepscope_xspace::discover::{self, captured};

use crate::human;
use crate::load;
use crate::opts::{Input, Output, Select};
use crate::table::{csv, Table};

#[derive(Args, Debug)]
pub struct HistoryArgs {
    /// Log directories whose runs make the history (a nightly benchmark folder, CI
    /// artifacts); local, or gs://BUCKET/PATH or s3://BUCKET/PATH.
    #[arg(required = true, value_name = "LOGDIR")]
    pub logdirs: Vec<PathBuf>,
    /// Only this host (its file name without .xplane.pb).
    #[arg(long, value_name = "HOST", value_parser = crate::opts::host_name())]
    pub host: Option<String>,
    #[command(flatten)]
    pub output: Output,
    /// Read each run a host at a time, in one host's memory whatever the host count,
    /// for the same numbers. What a run of several hosts gets without asking.
    #[arg(long, conflicts_with = "host")]
    pub host_at_a_time: bool,
}

/// A run to read: the run, the log directory it was found in, and its label (its
/// folder, as `diff` and `summary` take it; a bucket's as gs://…).
struct Found {
    run: discover::Run,
    logdir: PathBuf,
    label: String,
}

pub fn run(args: &HistoryArgs) -> anyhow::Result<ExitCode> {
    let mut found: Vec<Found> = Vec::new();
    for logdir in &args.logdirs {
        let listing = crate::remote::Listing::of(logdir)?;
        let runs = crate::remote::Listing::find_runs(listing.as_ref(), logdir)?;
        for run in runs {
            let dir = run.dir.display().to_string();
            let label = listing.as_ref().map_or_else(|| dir.clone(), |l| l.shown(&dir));
            found.push(Found { run, logdir: logdir.clone(), label });
        }
    }
    if found.is_empty() {
        anyhow::bail!(
            "no profile found under {} — point at folders jax.profiler.trace wrote into (they hold \
             plugins/profile/<run>/<host>.xplane.pb)",
            args.logdirs.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
        );
    }
    found.sort_by_cached_key(|f| (discover::capture_key(&f.run), f.label.clone()));

    // One run at a time beside the one before it: one profile held (two runs' sides),
    // whatever the count.
    let select = Select { host: args.host.clone(), top: None };
    let mut history = History::default();
    let mut previous = None;
    let mut first_error = None;
    for f in found {
        let input = Input { path: f.logdir, run: Some(f.run.rel.clone()) };
        // A run that cannot be read is listed as such; the others are compared.
        let want = (GroupBy::Op, HISTORY_TOP, false);
        match load::side(&input, &select, args.host_at_a_time, want) {
            Ok((side, _)) => {
                history.add(f.label, captured(&f.run.rel), &side, previous.as_ref());
                previous = Some(side);
            }
            Err(e) => {
                history.unread(f.label, captured(&f.run.rel), format!("{e:#}"));
                first_error.get_or_insert(e);
            }
        }
    }
    match first_error {
        Some(e) if history.runs.is_empty() => Err(e),
        _ => print(&history, &args.output),
    }
}

fn print(h: &History, output: &Output) -> anyhow::Result<ExitCode> {
    if output.json {
        outln!("{}", serde_json::to_string(h)?);
        return Ok(ExitCode::SUCCESS);
    }
    let moved = h.change.as_ref().map(|c| c.index);
    if output.csv {
        let header = [
            "run",
            "captured",
            "step_count",
            "step_median_ps",
            "step_mad_ps",
            "device_utilization_pct",
            "top_op",
            "change",
        ];
        let rows: Vec<Vec<String>> = (h.runs.iter().enumerate())
            .map(|(i, r)| {
                vec![
                    r.run.label.clone(),
                    r.captured.clone().unwrap_or_default(),
                    r.run.step_count.to_string(),
                    r.run.step_time.median_ps.to_string(),
                    r.run.step_time.mad_ps.to_string(),
                    format!("{:.2}", r.run.device_utilization_pct),
                    r.run.top_ops.first().map(|o| o.name.clone()).unwrap_or_default(),
                    (moved == Some(i)).to_string(),
                ]
            })
            .collect();
        out!("{}", csv(&header, &rows));
        return Ok(ExitCode::SUCCESS);
    }
    let mut t = Table::new(vec!["CAPTURED", "STEPS", "MEDIAN", "VS FIRST", "UTIL", "TOP OP", "RUN"]);
    // Where tables are cut to fit, the top op and the run's label share what the other
    // columns (about 60 characters) leave, each cut in the middle.
    let room = crate::table::width().unwrap_or(0).saturating_sub(60).max(40);
    let (top_room, run_room) = (room / 3, room - room / 3);
    for (i, r) in h.runs.iter().enumerate() {
        let top = r.run.top_ops.first().map(|o| o.name.clone()).unwrap_or_else(|| "—".into());
        let top = crate::table::fit(&top, top_room);
        let mark = if moved == Some(i) { "  ← changed" } else { "" };
        t.push(vec![
            r.captured.clone().unwrap_or_else(|| "—".into()),
            r.run.step_count.to_string(),
            human::duration_ps(r.run.step_time.median_ps),
            format!("{:.0}%", r.run.step_time_vs_first_pct),
            format!("{:.1}%", r.run.device_utilization_pct),
            top,
            format!("{}{mark}", crate::table::fit(&r.run.label, run_room.saturating_sub(mark.chars().count()))),
        ]);
    }
    out!("{}", t.text());
    outln!();
    let width = crate::table::prose_width();
    for u in &h.runs_unread {
        out!("{}", human::wrap("", &format!("Not read: {} ({}).", u.run, u.error), width));
    }
    for n in &h.not_compared {
        let note = format!(
            "Not compared: {} ran other programs than {} (their ops match for {:.0}% of the op time); the runs \
             after it are compared with it.",
            n.run, n.previous, n.matched_op_time_pct
        );
        out!("{}", human::wrap("", &note, width));
    }
    let Some(c) = &h.change else {
        let note = format!(
            "No run moved beyond run-to-run noise ({} runs, each against the one before it; `stepscope diff A B` \
             shows one pair in full).",
            h.runs.len()
        );
        out!("{}", human::wrap("", &note, width));
        return Ok(ExitCode::SUCCESS);
    };
    let st = &c.step_time;
    let pct = st.delta_pct.map(|p| format!(" ({p:+.1}%)")).unwrap_or_default();
    let what = if c.cause == "step_time" {
        format!("step time {}{pct}", human::signed_duration_ps(st.delta_ps))
    } else {
        format!("step time within noise ({}{pct}), but ops moved", human::signed_duration_ps(st.delta_ps))
    };
    let note = format!(
        "CHANGED first at {}: {what} against {} (noise {}: the two runs' step spreads); `stepscope diff {} {}` \
         shows it in full.",
        c.run,
        c.previous,
        human::duration_ps(st.noise_ps),
        c.previous,
        c.run
    );
    out!("{}", human::wrap("", &note, width));
    for o in &c.ops {
        outln!("  {:<40} {} a step", crate::table::fit(&o.name, 40), human::signed_duration_ps(o.delta_per_step_ps));
    }
    Ok(ExitCode::SUCCESS)
}
