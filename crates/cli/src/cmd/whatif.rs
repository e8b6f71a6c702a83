//! `stepscope whatif`: the step replayed with a change (compile removed, an op made
//! faster, the loop jitted, …): the projected step and its parts beside the measured.

use std::process::ExitCode;

use clap::{Args, ValueEnum};
use stepscope_analysis::whatif::{self, Edit};

use crate::human;
use crate::load;
use crate::opts::{Input, Select};
use crate::table::Table;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Removable {
    /// The host's XLA compilation.
    Compile,
    /// Host callbacks (`io_callback`, `pure_callback`, `jax.debug.print`).
    Callbacks,
    /// The host's work in a step before it dispatched it (input, Python, sleeps).
    Input,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Prefetchable {
    /// Copies between host and device: made asynchronous, a step ahead.
    Copies,
    /// The input: the host's work before dispatch and its copies, a step ahead.
    Input,
}

#[derive(Args, Debug)]
pub struct WhatifArgs {
    #[command(flatten)]
    pub input: Input,
    /// Only this host (its file name without .xplane.pb).
    #[arg(long, value_name = "HOST", value_parser = crate::opts::host_name())]
    pub host: Option<String>,
    /// Remove this from every step (repeatable).
    #[arg(long, value_enum, value_name = "WHAT")]
    pub remove: Vec<Removable>,
    /// Make this asynchronous, a step ahead (repeatable).
    #[arg(long, value_enum, value_name = "WHAT")]
    pub prefetch: Vec<Prefetchable>,
    /// Scale an op (by HLO name: dot.31), ops as one set (dot.31,copy.2), a kind of op
    /// (compute, collectives, h2d, d2h, d2d), a category (category:convolution,
    /// category:loop_fusion), a name scope and the scopes inside it
    /// (scope:train_step/layer0/mlp) or a program (module:jit_train_step) by a factor:
    /// 0.5 is twice as fast, 0 removes it (repeatable). `stepscope ops --by
    /// category|scope|module` lists the names.
    #[arg(long, value_name = "NAME=FACTOR", value_parser = parse_scale)]
    pub scale: Vec<String>,
    /// One launch a step: the waits for dispatch go, and the elementwise ops of one-op
    /// programs fuse into their neighbours (what jitting op-by-op code does).
    #[arg(long)]
    pub jit: bool,
    /// Every device given the median device's busy time in each step.
    #[arg(long)]
    pub balance: bool,
    /// The loop never waits for its GPU or TPU (no sync every step): each step's host
    /// work runs while the device runs the step before.
    #[arg(long)]
    pub dispatch_ahead: bool,
    /// Show each step's measured, replayed and projected time.
    #[arg(long)]
    pub steps: bool,
    /// Print JSON (schema `stepscope.whatif/1`).
    #[arg(long)]
    pub json: bool,
}

/// Checks `NAME=FACTOR` as the edit will read it (a name holds no space: a category's
/// spaces are written `_`).
fn parse_scale(s: &str) -> Result<String, String> {
    whatif::parse_scale(s)?;
    match s.contains(char::is_whitespace) {
        true => Err(format!("{s:?}: a name holds no space (write a category's spaces as _: category:loop_fusion)")),
        false => Ok(s.to_string()),
    }
}

impl WhatifArgs {
    /// The edit, through the words every surface takes ([`Edit::parse`]).
    fn edit(&self) -> anyhow::Result<Edit> {
        let mut words: Vec<String> = Vec::new();
        let name = |v: Option<clap::builder::PossibleValue>| v.map(|v| v.get_name().to_string()).unwrap_or_default();
        words.extend(self.remove.iter().map(|r| format!("--remove {}", name(r.to_possible_value()))));
        words.extend(self.prefetch.iter().map(|p| format!("--prefetch {}", name(p.to_possible_value()))));
        words.extend(self.scale.iter().map(|s| format!("--scale {s}")));
        words.extend(self.jit.then(|| "--jit".to_string()));
        words.extend(self.balance.then(|| "--balance".to_string()));
        words.extend(self.dispatch_ahead.then(|| "--dispatch-ahead".to_string()));
        Edit::parse(&words.join(" ")).map_err(|e| anyhow::anyhow!("{e} — see stepscope whatif --help"))
    }
}

pub fn run(args: &WhatifArgs) -> anyhow::Result<ExitCode> {
    let edit = args.edit()?;
    if edit.is_empty() {
        anyhow::bail!(
            "no change given — say what to change: --remove compile|callbacks|input, --prefetch copies|input, \
             --scale OP=FACTOR, --jit, --balance or --dispatch-ahead (stepscope whatif --help)"
        );
    }
    let select = Select { host: args.host.clone(), top: None };
    let (profile, _) = load::profile_and_run(&args.input, &select)?;
    if let Some(t) = whatif::unknown_targets(&profile, &edit).first() {
        anyhow::bail!(
            "no {} ran in {} — `stepscope ops {}{}` lists the names it takes",
            t.what(),
            args.input.path.display(),
            args.input.path.display(),
            t.listed_by().map(|by| format!(" --by {by}")).unwrap_or_default()
        );
    }
    let p = whatif::project(&profile, &edit);
    if p.steps == 0 {
        anyhow::bail!(
            "no step to replay in {} — the what-if model replays timed steps: capture whole steps, with \
             jax.profiler.StepTraceAnnotation or several runs of the step's program",
            args.input.path.display()
        );
    }
    if args.json {
        outln!("{}", serde_json::to_string(&p)?);
        return Ok(ExitCode::SUCCESS);
    }
    print(&p, args.steps);
    Ok(ExitCode::SUCCESS)
}

fn print(p: &whatif::Projection, steps: bool) {
    outln!("what if: {}", p.edit);
    outln!(
        "step {} → {} projected: {} a step ({:.1}%), over {} steps{}",
        human::duration_ps(p.step_ps),
        human::duration_ps(p.projected_step_ps),
        human::signed_duration_ps(-p.gain_ps),
        -p.gain_pct,
        p.steps,
        match p.steps_left_out {
            0 => String::new(),
            n => format!(" ({n} left out: their replay missed them by more than {}%)", whatif::REPLAY_TOLERANCE_PCT),
        }
    );
    outln!(
        "replay of the unchanged steps: error mean {:.2}%, max {:.2}%",
        p.replay_error_mean_pct,
        p.replay_error_max_pct
    );
    outln!();
    let mut t = Table::new(vec!["PART (a step, slowest device)", "MEASURED", "PROJECTED", "CHANGE"]);
    for n in &p.parts {
        t.push(vec![
            n.name.to_string(),
            human::duration_ps(n.measured_ps),
            human::duration_ps(n.projected_ps),
            human::signed_duration_ps(n.projected_ps - n.measured_ps),
        ]);
    }
    out!("{}", t.text());
    if steps {
        outln!();
        let mut t = Table::new(vec!["STEP", "MEASURED", "REPLAYED", "PROJECTED"]);
        for s in &p.per_step {
            t.push(vec![
                s.step_num.to_string(),
                human::duration_ps(s.measured_ps),
                human::duration_ps(s.replayed_ps),
                human::duration_ps(s.projected_ps),
            ]);
        }
        out!("{}", t.text());
    }
}
