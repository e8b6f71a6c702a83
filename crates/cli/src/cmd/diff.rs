//! `stepscope diff A B`: what changed from run A to run B.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use stepscope_report::diff::{self, OpDiff};

use crate::human;
use crate::load;
use crate::opts::{By, Input, Output, Select};
use crate::table::{csv, Table};

#[derive(Args, Debug)]
pub struct DiffArgs {
    /// The baseline run (a log directory, run folder or profile file).
    pub a: PathBuf,
    /// The run to compare with it.
    pub b: PathBuf,
    /// Compare the op profile grouped by op (default), category, module, name-stack
    /// scope, Python source line or stack.
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
    /// Replay A's steps with this change (`stepscope whatif`'s words, a finding's
    /// gain_edit: "--scale dot.1=0.125") and set the projection beside B as measured:
    /// is B's fix worth what the model said?
    #[arg(long, value_name = "EDIT", allow_hyphen_values = true)]
    pub whatif: Option<String>,
    /// Read run A from the parts in this folder: `stepscope part --for diff` of each
    /// host, and `--for diff-rows --within` the span `part --span-of` gives (docs/scale.md).
    #[arg(long, value_name = "DIR", conflicts_with = "host")]
    pub parts_a: Option<PathBuf>,
    /// Read run B from the parts in this folder, as `--parts-a`.
    #[arg(long, value_name = "DIR", conflicts_with = "host")]
    pub parts_b: Option<PathBuf>,
}

/// The diff's rows as CSV (ops, kernels and host scopes, a `kind` column apart).
fn csv_of(d: &diff::Diff) -> String {
    let header = [
        "kind",
        "name",
        "b_name",
        "module",
        "category",
        "status",
        "matched_by",
        "a_count",
        "b_count",
        "a_total_ps",
        "b_total_ps",
        "delta_ps",
        "a_per_step_ps",
        "b_per_step_ps",
        "delta_per_step_ps",
        "within_noise",
        "b_module",
    ];
    let row = |kind: &str, r: &OpDiff| {
        vec![
            kind.to_string(),
            r.name.clone(),
            r.b_name.clone().unwrap_or_default(),
            r.module.clone(),
            r.category.clone(),
            r.status.to_string(),
            r.matched_by.to_string(),
            r.a_count.to_string(),
            r.b_count.to_string(),
            r.a_total_ps.to_string(),
            r.b_total_ps.to_string(),
            r.delta_ps.to_string(),
            r.a_per_step_ps.to_string(),
            r.b_per_step_ps.to_string(),
            r.delta_per_step_ps.to_string(),
            r.within_noise.to_string(),
            r.b_module.clone().unwrap_or_default(),
        ]
    };
    let by = d.by.name();
    let rows: Vec<Vec<String>> = (d.ops.iter().map(|r| row(by, r)))
        .chain(d.kernels.iter().map(|r| row("kernel", r)))
        .chain(d.scopes.iter().map(|r| row("host_scope", r)))
        .collect();
    csv(&header, &rows)
}

/// `--whatif EDIT`: A's steps replayed with the edit (A read whole, as `stepscope
/// whatif` reads it), beside B's steps in `d`.
fn whatif_beside(args: &DiffArgs, words: &str, d: &diff::Diff) -> anyhow::Result<diff::WhatifBeside> {
    use stepscope_analysis::whatif;
    let edit = whatif::Edit::parse(words).map_err(|e| anyhow::anyhow!("--whatif {words:?}: {e}"))?;
    if edit.is_empty() {
        anyhow::bail!("--whatif needs a change: --whatif \"--scale dot.1=0.125\" (stepscope whatif --help)");
    }
    let input = Input { path: args.a.clone(), run: None };
    let (profile, _) = load::profile_and_run(&input, &args.select)?;
    diff::WhatifBeside::project(&profile, &edit, d).map_err(|r| match r {
        diff::WhatifRefused::Unknown(t) => {
            anyhow::anyhow!(
                "--whatif: no {} ran in A ({}) — `stepscope ops` lists the names",
                t.what(),
                args.a.display()
            )
        }
        diff::WhatifRefused::NoSteps { a } => anyhow::anyhow!(
            "--whatif compares A's replayed steps with B's: {} has no timed steps — mark them with \
             jax.profiler.StepTraceAnnotation",
            if a { "A" } else { "B" }
        ),
    })
}

/// `WHAT IF A (--remove input): 9.29 ms → 6.20 ms projected (-33.3%); B measured
/// 5.01 ms (-45.1%): the projection is 11.8 points under B's gain`.
fn whatif_words(w: &diff::WhatifBeside) -> String {
    let verdict = if w.within_noise {
        "B is within the noise of the projection".to_string()
    } else {
        format!(
            "the projection is {:.1} points {} B's gain",
            w.projected_less_measured_pct.abs(),
            match w.projected_less_measured_pct >= 0.0 {
                true => "over",
                false => "under",
            }
        )
    };
    format!(
        "WHAT IF A ({}): {} → {} projected ({:+.1}%); B measured {} ({:+.1}%): {verdict}{}",
        w.edit,
        human::duration_ps(w.a_step_ps),
        human::duration_ps(w.projected_step_ps),
        -w.projected_gain_pct,
        human::duration_ps(w.b_step_ps),
        -w.measured_gain_pct,
        match w.steps_left_out {
            0 => String::new(),
            n => format!(" ({n} of A's steps left out: their replay missed them by more than 5%)"),
        }
    )
}

/// Runs of one name (guide 004's `<stamp>/{lcam,tad}_trace/plugins/profile/<same
/// second>`) are each named by the shortest path that tells them apart, as `compare`
/// names its runs.
fn name_apart(args: &DiffArgs, d: &mut diff::Diff) {
    if d.a.run == d.b.run {
        let labels = crate::cmd::compare::labels(&[args.a.clone(), args.b.clone()]);
        let [a, b] = <[String; 2]>::try_from(labels).unwrap_or_default();
        (d.a.run, d.b.run) = (a, b);
    }
}

pub fn run(args: &DiffArgs) -> anyhow::Result<ExitCode> {
    let want = (args.by.group(), 0, true);
    // A run read from its parts is not read here: it is not checked against the other.
    let side = |p: &PathBuf, parts: &Option<PathBuf>| {
        let input = Input { path: p.clone(), run: None };
        match parts {
            Some(dir) => anyhow::Ok((crate::cmd::part::side_of_parts(&input, dir, want)?, None)),
            None => load::side(&input, &args.select, args.host_at_a_time, want).map(|(s, r)| (s, Some(r))),
        }
    };
    let ((a, run_a), (b, run_b)) = (side(&args.a, &args.parts_a)?, side(&args.b, &args.parts_b)?);
    if let (Some(run_a), Some(run_b)) = (&run_a, &run_b) {
        refuse_one_run_twice(args, run_a, run_b)?;
    }
    let mut d = diff::diff_sides(&a, &b);
    d.truncate(args.select.rows());
    name_apart(args, &mut d);
    if let Some(words) = &args.whatif {
        d.whatif = Some(whatif_beside(args, words, &d)?);
    }
    if args.output.json {
        outln!("{}", serde_json::to_string(&d)?);
        return Ok(ExitCode::SUCCESS);
    }
    if args.output.csv {
        out!("{}", csv_of(&d));
        return Ok(ExitCode::SUCCESS);
    }
    let t = &d.step_time;
    let whatif_line = d.whatif.as_ref().map(whatif_words);
    match t.delta_pct {
        Some(pct) => outln!(
            "STEP TIME (median)  {} → {}  {}{} ({pct:+.1}%){}",
            human::duration_ps(t.a_median_ps),
            human::duration_ps(t.b_median_ps),
            if t.delta_ps >= 0 { "+" } else { "" },
            human::duration_ps(t.delta_ps),
            match (d.same_program, t.noise_known) {
                (false, _) => "  — not a change: other programs, see below",
                (true, true) => "",
                (true, false) => "  — not a measured change: see below",
            },
        ),
        None => {
            let side = |n: u64, ps: i64| if n == 0 { "—".to_string() } else { human::duration_ps(ps) };
            outln!(
                "STEP TIME (median)  {} → {}  (no change to give: {} has no steps — mark them with \
                 jax.profiler.StepTraceAnnotation or stepscope.step)",
                side(d.a.step_count, t.a_median_ps),
                side(d.b.step_count, t.b_median_ps),
                if d.a.step_count == 0 { "A" } else { "B" }
            )
        }
    }
    let (a, b) =
        (format!("A: {} ({} steps)", d.a.run, d.a.step_count), format!("B: {} ({} steps)", d.b.run, d.b.step_count));
    // Side by side where they fit, else one above the other.
    match 2 + a.chars().count() + 3 + b.chars().count() <= crate::table::prose_width() {
        true => outln!("  {a}   {b}"),
        false => outln!("  {a}\n  {b}"),
    }
    if let Some(note) = diff::other_programs_note(d.matched_op_time_pct) {
        out!("{}", human::wrap("  ", &note, crate::table::prose_width()));
    }
    if let Some(line) = whatif_line {
        out!("{}", human::wrap("  ", &line, crate::table::prose_width()));
    }
    for (label, side, step_ps) in [("A", &d.a, t.a_median_ps), ("B", &d.b, t.b_median_ps)] {
        if let Some(note) = crate::notes::cold_note(label, side.cold_steps, side.step_count) {
            out!("{}", human::wrap("  ", &note, crate::table::prose_width()));
        }
        // Said where it is 1% of a step or more (the JSON always has it).
        if side.ops_outside_steps_ps > 0 && side.ops_outside_steps_ps.saturating_mul(100) >= step_ps {
            let note = format!(
                "{label}: {} of op time ran before its first step or after its last (work dispatched before the \
                 capture or after the steps): left out of the per-step op times below",
                human::duration_ps(side.ops_outside_steps_ps)
            );
            out!("{}", human::wrap("  ", &note, crate::table::prose_width()));
        }
    }
    if !t.noise_known && d.a.step_count > 0 && d.b.step_count > 0 {
        let few = |label: &str, side: &stepscope_report::diff::RunSide| match side.step_count - side.cold_steps {
            0 => format!("{label} has no warm step"),
            1 => format!("{label} has one warm step"),
            n => format!("{label} has {n} warm steps"),
        };
        let note = format!(
            "cannot tell whether this is a change: {} and {}, and no noise estimate comes from fewer than 2 —              capture at least {} warm steps a side (after a warm-up step) to compare",
            few("A", &d.a),
            few("B", &d.b),
            stepscope_report::diff::MIN_STEPS_FOR_NOISE
        );
        out!("{}", human::wrap("  ", &note, crate::table::prose_width()));
    }
    if t.noise_ps > 0 {
        let noise = format!(
            "noise: step time spread {} (A) and {} (B), 1.48 × the median absolute deviation, which one slow \
             step does not widen; changes under {} a step are within it (marked ~)",
            human::duration_ps(t.a_spread_ps),
            human::duration_ps(t.b_spread_ps),
            human::duration_ps(t.noise_ps)
        );
        out!("{}", human::wrap("  ", &noise, crate::table::prose_width()));
    }
    outln!();
    let mut bt = Table::new(vec!["AVERAGE STEP", "A", "B", "CHANGE"]);
    // A run without steps has no average step: its column and the change are "—".
    let (a_steps, b_steps) = (d.a.step_count > 0, d.b.step_count > 0);
    let dash = || "—".to_string();
    for p in &d.breakdown {
        bt.push(vec![
            p.part.replace('_', " "),
            if a_steps { human::duration_ps(p.a_ps) } else { dash() },
            if b_steps { human::duration_ps(p.b_ps) } else { dash() },
            if a_steps && b_steps { human::signed_duration_ps(p.delta_ps) } else { dash() },
        ]);
    }
    out!("{}", bt.text());
    let ops_title = match d.by.name() {
        "op" => "OPS".to_string(),
        by => format!("OPS BY {}", by.to_uppercase()),
    };
    for (title, rows) in [(ops_title.as_str(), &d.ops), ("HOST SCOPES", &d.scopes), ("KERNELS", &d.kernels)] {
        if rows.is_empty() {
            continue;
        }
        outln!();
        outln!("{title} by effect on step time (per step)");
        if std::ptr::eq(rows, &d.ops) {
            let mut across: Vec<(&str, &str)> =
                rows.iter().filter_map(|r| Some((r.module.as_str(), r.b_module.as_deref()?))).collect();
            across.sort_unstable();
            across.dedup();
            for (a, b) in across {
                outln!("  ops of A's {a} paired by name with B's {b}");
            }
            for (side, only) in [("A", &d.only_in_a), ("B", &d.only_in_b)] {
                if only.rows > 0 {
                    outln!(
                        "  {} {} only in {side}: {} a step ({} executions)",
                        only.rows,
                        if only.rows == 1 { "row" } else { "rows" },
                        human::duration_ps(only.per_step_ps),
                        human::count(only.count)
                    );
                }
            }
        }
        let mut ot = Table::new(vec!["NAME", "CHANGE", "A", "B", "STATUS"]);
        for r in rows.iter() {
            let name = match &r.b_name {
                Some(b) => format!("{} → {b}", r.name),
                None => r.name.clone(),
            };
            let noise = if r.within_noise { " ~" } else { "" };
            ot.push(vec![
                name,
                format!("{}{noise}", human::signed_duration_ps(r.delta_per_step_ps)),
                human::duration_ps(r.a_per_step_ps),
                human::duration_ps(r.b_per_step_ps),
                r.status.to_string(),
            ]);
        }
        out!("{}", ot.text());
    }
    if let (Some(a), Some(b)) = (d.memory.a_peak_bytes, d.memory.b_peak_bytes) {
        outln!();
        outln!("MEMORY PEAK  {} → {}", human::bytes(a), human::bytes(b));
    }
    Ok(ExitCode::SUCCESS)
}

/// A folder of several runs stands for its newest: where that makes A and B the same
/// run, the diff would compare a run with itself. Refused, naming the runs to pick from.
fn refuse_one_run_twice(
    args: &DiffArgs,
    a: &stepscope_xspace::discover::Run,
    b: &stepscope_xspace::discover::Run,
) -> anyhow::Result<()> {
    let files = |r: &stepscope_xspace::discover::Run| -> Vec<PathBuf> {
        r.hosts.iter().map(|h| std::fs::canonicalize(&h.path).unwrap_or_else(|_| h.path.clone())).collect()
    };
    if files(a) != files(b) || (a.among <= 1 && b.among <= 1) {
        return Ok(());
    }
    let (folder, run) = if a.among > 1 { (&args.a, a) } else { (&args.b, b) };
    let runs = stepscope_xspace::discover::find_runs(folder).unwrap_or_default();
    let names: Vec<String> = runs.iter().map(|r| folder.join(&r.rel).display().to_string()).collect();
    anyhow::bail!(
        "A and B are one run, {} (the newest of the {} under {}) — diff two of them: {}",
        run.dir.display(),
        run.among,
        folder.display(),
        names.join(", ")
    )
}
