//! `stepscope advise`: rules with evidence and advice.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;
use stepscope_judge::advise::{self, Finding, Severity};
use stepscope_judge::by_host::advise_by_host;

use crate::human;
use crate::load;
use crate::opts::{Input, Select};

#[derive(Args, Debug)]
pub struct AdviseArgs {
    #[command(flatten)]
    pub input: Input,
    /// Only this host (its file name without .xplane.pb).
    #[arg(long, value_name = "HOST", value_parser = crate::opts::host_name())]
    pub host: Option<String>,
    /// Read the run a host at a time, in one host's memory whatever the host count,
    /// for the same findings. What a run of several hosts gets without asking.
    #[arg(long, conflicts_with = "host")]
    pub host_at_a_time: bool,
    /// Judge the run from the parts in this folder, written by `stepscope part` with
    /// the same thresholds and peaks (`summary --parts` says more).
    #[arg(long, value_name = "DIR", conflicts_with = "host")]
    pub parts: Option<PathBuf>,
    /// A TOML file overriding rule thresholds (e.g. `utilization_pct = 70`); keys are
    /// listed in `stepscope advise --json` under "thresholds".
    #[arg(long, value_name = "FILE")]
    pub thresholds: Option<PathBuf>,
    /// Print JSON (schema `stepscope.advise/1`).
    #[arg(long, conflicts_with = "csv")]
    pub json: bool,
    /// Print CSV: one row per finding (its evidence joined by " | ").
    #[arg(long)]
    pub csv: bool,
    #[command(flatten)]
    pub peaks: crate::opts::PeakArgs,
}

pub fn run(args: &AdviseArgs) -> anyhow::Result<ExitCode> {
    let (th, peaks) = crate::opts::thresholds_and_peaks(args.thresholds.as_deref(), &args.peaks)?;
    let select = Select { host: args.host.clone(), top: None };
    let whole = |mut profile: stepscope_analysis::Profile| {
        profile.set_peaks(peaks);
        Ok(advise::advise(&profile, &th))
    };
    let by_host = || {
        let judge = |run: &str, hosts, read: &mut load::Reader| advise_by_host(run, hosts, &th, read, &|_| Ok(()));
        let (mut a, unread) = load::host_at_a_time_judged(&args.input, peaks, &th, judge)?;
        if !unread.is_empty() {
            a.health.recheck_hosts(0, &unread);
        }
        Ok(a)
    };
    let of_parts = |dir: &Path| {
        let (judged, unread) = crate::cmd::part::judged_of_parts(&args.input, dir, advise::TOP_OPS, &th, peaks)?;
        let mut a = advise::Advice::new(&judged.overview, &th, judged.findings);
        if !unread.is_empty() {
            a.health.recheck_hosts(0, &unread);
        }
        anyhow::Ok(a)
    };
    let a = match &args.parts {
        Some(dir) => of_parts(dir)?,
        None => load::whole_or_by_host(&args.input, &select, args.host_at_a_time, "findings", whole, by_host)?,
    };
    if args.json {
        outln!("{}", serde_json::to_string(&a)?);
        return Ok(ExitCode::SUCCESS);
    }
    if args.csv {
        let rows: Vec<Vec<String>> = (a.findings.iter())
            .map(|f| {
                let severity = serde_json::to_value(f.severity).ok().and_then(|v| v.as_str().map(String::from));
                let evidence: Vec<String> = (f.evidence.iter())
                    .map(|e| if e.detail.is_empty() { e.what.clone() } else { format!("{} ({})", e.what, e.detail) })
                    .collect();
                vec![
                    severity.unwrap_or_default(),
                    f.rule.to_string(),
                    f.title.clone(),
                    f.value.to_string(),
                    f.threshold.to_string(),
                    f.unit.to_string(),
                    evidence.join(" | "),
                    f.advice.clone(),
                ]
            })
            .collect();
        let header = ["severity", "rule", "title", "value", "threshold", "unit", "evidence", "advice"];
        out!("{}", crate::table::csv(&header, &rows));
        return Ok(ExitCode::SUCCESS);
    }
    print_health(&a.health);
    if a.findings.is_empty() {
        outln!("no findings: every rule is within its threshold");
        return Ok(ExitCode::SUCCESS);
    }
    for f in &a.findings {
        print_finding(f, true);
        outln!();
    }
    Ok(ExitCode::SUCCESS)
}

/// What fixing a finding's cause would gain, in words: `fix this: -6.53 ms a step
/// (68.4%), projected (stepscope whatif PATH --remove callbacks)`.
pub fn gain_line(g: &stepscope_judge::advise::Gain) -> String {
    format!(
        "fix this: -{} a step ({:.1}% of the step), projected (stepscope whatif PATH {})",
        human::duration_ps(g.gain_ps),
        g.gain_pct,
        g.gain_edit
    )
}

/// Prints one finding; `full` adds evidence and advice.
pub fn print_finding(f: &Finding, full: bool) {
    let sev = match f.severity {
        Severity::Critical => "CRITICAL",
        Severity::Warning => "WARNING",
        Severity::Info => "INFO",
    };
    let unit = match f.unit {
        "pct" => "%",
        "s" => " s",
        "us" => " µs",
        _ => "",
    };
    // The title whole, wrapped, its rule id after it.
    let width = crate::table::prose_width();
    out!("{}", human::wrap(&format!("{sev:<8} "), &format!("{}  [{}]", f.title, f.rule), width));
    if let Some(g) = &f.gain {
        out!("{}", human::wrap("         ", &gain_line(g), width));
    }
    for c in &f.caveats {
        out!("{}", human::wrap("         ! ", c, width));
    }
    if !full {
        return;
    }
    outln!("         {} {:.1}{unit}, threshold {:.1}{unit}", f.rule, f.value, f.threshold);
    for e in &f.evidence {
        let when = match (e.start_ps, e.duration_ps) {
            (Some(s), Some(d)) if d > 0 => format!(" (at {} for {})", human::duration_ps(s), human::duration_ps(d)),
            (Some(s), _) => format!(" (at {})", human::duration_ps(s)),
            _ => String::new(),
        };
        out!("{}", human::wrap("         · ", &format!("{}{when}", e.what), width));
        if !e.detail.is_empty() {
            out!("{}", human::wrap("           ", &e.detail, width));
        }
    }
    out!("{}", human::wrap("         → ", &f.advice, width));
}

/// The capture's health: one line where every check is ok, else each that is not, with
/// what it affects and its fix.
pub fn print_health(h: &stepscope_judge::health::Health) {
    use stepscope_judge::health::Status;
    let width = crate::table::prose_width();
    let word = |st: Status| match st {
        Status::Ok => "ok",
        Status::Caution => "caution",
        Status::Bad => "bad",
    };
    if h.status == Status::Ok {
        let steps = h.checks.iter().find(|c| c.check == "steps").map(|c| c.what.as_str()).unwrap_or("");
        out!("{}", human::wrap("", &format!("CAPTURE HEALTH  ok: {steps}"), width));
        outln!();
        return;
    }
    outln!("CAPTURE HEALTH  {}: read the numbers below with these in mind", word(h.status));
    for c in h.checks.iter().filter(|c| c.status != Status::Ok) {
        out!("{}", human::wrap("  ", &format!("[{}] {}: {}", word(c.status), c.check, c.what), width));
        out!("{}", human::wrap("    ", &format!("affects: {}", c.affects), width));
        out!("{}", human::wrap("    ", &format!("fix: {}", c.fix), width));
    }
    outln!();
}
