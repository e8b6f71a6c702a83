//! `stepscope hlo PATH OP`: an op's HLO instruction, fusion body, shapes and source.

use std::process::ExitCode;

use clap::Args;
use stepscope_analysis::hlo_context::{self, HloContext, Instruction, RunHlo};
use stepscope_analysis::hlo_graph::{self, HloGraph, Node};
use stepscope_analysis::ops::OpRow;
use stepscope_analysis::Profile;

use crate::human;
use crate::load;
use crate::opts::{Input, Select};

#[derive(Args, Debug)]
pub struct HloArgs {
    #[command(flatten)]
    pub input: Input,
    /// The HLO op (instruction) name, as `stepscope ops` lists it, e.g. `fusion.12`.
    pub op: String,
    /// Only look in the module of this name (`jit_train_step`), or in one program of it
    /// (`jit_dot(49)`, as `ops` labels an op that several programs hold; `jit_dot(49) on
    /// host2` for a host's program that another host numbers differently).
    #[arg(long, value_name = "NAME")]
    pub module: Option<String>,
    /// Only this host (its file name without .xplane.pb).
    #[arg(long, value_name = "HOST", value_parser = crate::opts::host_name())]
    pub host: Option<String>,
    /// Print JSON (schema `stepscope.hlo/1`; with --graph, `stepscope.hlo_graph/1`).
    #[arg(long)]
    pub json: bool,
    /// The op's neighbourhood as a graph: operands and users --depth levels out and
    /// the fusion body, each with its time and FLOPs, as Graphviz DOT (`| dot -Tsvg >
    /// op.svg`), or JSON with --json.
    #[arg(long)]
    pub graph: bool,
    /// With --graph: how many levels of operands and of users (1 to 6).
    #[arg(long, value_name = "N", default_value_t = 2, requires = "graph")]
    pub depth: u32,
    /// Read the run a host at a time, in one host's memory whatever the host count, for
    /// the same answer. What a run of several hosts gets without asking.
    #[arg(long, conflicts_with = "host")]
    pub host_at_a_time: bool,
}

/// What `hlo` shows of an op: its context, or with `--graph` its neighbourhood.
enum Shown {
    Context(Box<HloContext>),
    Graph(Box<HloGraph>),
}

pub fn run(args: &HloArgs) -> anyhow::Result<ExitCode> {
    let select = Select { host: args.host.clone(), top: None };
    let (op, module) = (args.op.as_str(), args.module.as_deref());
    // The op's context (or graph) from the profile that holds it, beside the run's op
    // profile.
    let show = |p: &Profile, rows: Vec<OpRow>| match args.graph {
        true => hlo_graph::graph_with(p, (op, module, args.depth), || rows).map(|g| Shown::Graph(Box::new(g))),
        false => hlo_context::hlo_context_with(p, op, module, || rows).map(|c| Shown::Context(Box::new(c))),
    };
    let whole = |p: Profile| {
        let run = RunHlo::of(&p);
        Ok((show(&p, run.ops.clone()), run))
    };
    let by_host = || {
        let made = load::host_at_a_time(&args.input, Default::default(), |_, hosts, read| {
            stepscope_analysis::fold::hlo_by_host(hosts, (op, module), read, &|_| Ok(()), show)
        });
        Ok(made?.0)
    };
    let (shown, run) = load::loaded_or_by_host(
        load::by_host(&args.input, &select, args.host_at_a_time)?,
        "answer",
        || load::profile(&args.input, &select),
        whole,
        by_host,
    )?;
    let ctx = match shown {
        Some(Shown::Graph(g)) => {
            match args.json {
                true => outln!("{}", serde_json::to_string(&g)?),
                false => out!("{}", dot(&g)),
            }
            return Ok(ExitCode::SUCCESS);
        }
        Some(Shown::Context(ctx)) => ctx,
        None => return Err(not_found(args, &run)),
    };
    if args.json {
        outln!("{}", serde_json::to_string(&ctx)?);
        return Ok(ExitCode::SUCCESS);
    }
    proseln!("{}  ·  program {}  ·  computation {}", ctx.instruction.name, ctx.program, ctx.computation);
    if !ctx.other_programs.is_empty() {
        let more = ctx.other_programs.len().saturating_sub(4);
        proseln!(
            "  also in {}{}: `--module {}` shows that program's",
            ctx.other_programs.iter().take(4).cloned().collect::<Vec<_>>().join(", "),
            if more > 0 { format!(" and {more} more") } else { String::new() },
            ctx.other_programs[0]
        );
    }
    if let Some(c) = &ctx.call_cycle {
        proseln!(
            "  note: computation {c} of this module calls itself (the module is damaged: XLA makes no such \
             cycle); costs stop where the cycle returns"
        );
    }
    outln!();
    proseln!("  {}", ctx.instruction.text);
    print_where(&ctx.instruction, "  ");
    print_stack(&ctx.instruction, "  ");
    if let Some(r) = &ctx.profile {
        proseln!(
            "  ran {} time(s){}: total {}, self {}, avg {} ({:.1}% of op time){}",
            human::count(r.executions),
            if r.executions != r.count { format!(" as {} kernels", human::count(r.count)) } else { String::new() },
            human::duration_ps(r.total_ps),
            human::duration_ps(r.self_ps),
            human::duration_ps(r.avg_ps),
            r.device_time_pct,
            r.category.is_empty().then(String::new).unwrap_or_else(|| format!(", category {}", r.category))
        );
    } else {
        proseln!("  did not run in this capture");
    }
    let c = &ctx.cost;
    if c.flops > 0 || c.bytes > 0 {
        let transcendentals = if c.transcendentals > 0 {
            format!(" and {} transcendentals", human::count(c.transcendentals))
        } else {
            String::new()
        };
        let intensity = if c.flops > 0 && c.bytes > 0 {
            format!(" ({:.3} FLOP/byte)", c.flops as f64 / c.bytes as f64)
        } else {
            String::new()
        };
        proseln!(
            "  one execution: {}{transcendentals}, {} read and written{intensity}",
            human::rate(c.flops as f64, "FLOP"),
            human::bytes(c.bytes)
        );
    }
    if let Some(b) = c.collective_bytes {
        proseln!("  each participant sends {} over the interconnect an execution (bus bytes)", human::bytes(b));
    }
    if !ctx.operands.is_empty() {
        outln!();
        proseln!("OPERANDS");
        for o in &ctx.operands {
            proseln!("  %{} = {} {}  ({})", o.name, o.shape, o.opcode, human::bytes(o.shape_bytes));
        }
    }
    if !ctx.fused_body.is_empty() {
        outln!();
        proseln!("FUSED BODY ({} instructions, root last)", ctx.fused_body.len());
        for i in &ctx.fused_body {
            proseln!("  {}", i.text);
            print_where(i, "      ");
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Why there is no HLO of `args.op` in the run (`run`: what its HLO says).
fn not_found(args: &HloArgs, run: &RunHlo) -> anyhow::Error {
    if !run.has_modules {
        return anyhow::anyhow!(
            "this profile holds no HLO modules (no `/host:metadata` plane) — capture an .xplane.pb with \
             jax.profiler.trace; trace JSON files do not carry HLO"
        );
    }
    // Not found, and some HLO cannot be read: the op may be in it.
    let bad: Vec<(&str, String)> = run.unreadable.iter().map(|(p, why)| (p.as_str(), why.clone())).collect();
    if let Some(note) = crate::notes::unreadable_note(&bad) {
        return anyhow::anyhow!(
            "no readable HLO instruction named {:?}: {note} — capture the profile again, or copy it whole",
            args.op
        );
    }
    // An op of some program, but not of the one asked for: name those it ran in.
    if let Some(want) = &args.module {
        let of_programs = run.ops.iter().filter(|r| r.name == args.op && !r.module.is_empty());
        let mut ran_in: Vec<&str> = of_programs.map(|r| r.program.as_deref().unwrap_or(&r.module)).collect();
        ran_in.sort_unstable();
        ran_in.dedup();
        if !ran_in.is_empty() {
            return anyhow::anyhow!(
                "no HLO instruction named {:?} in module {want:?}; it ran in {} — pass one of those to --module",
                args.op,
                ran_in.join(", ")
            );
        }
    }
    // A name `ops` lists that no module holds: work the runtime ran itself.
    if let Some(row) = run.ops.iter().find(|r| r.name == args.op) {
        use stepscope_analysis::device_time::{op_kind, Part};
        let what = match op_kind(&row.name, &row.category, "") {
            Part::HostToDevice => "a host-to-device copy",
            Part::DeviceToHost => "a device-to-host copy",
            Part::DeviceToDevice => "a copy within or between devices",
            _ => "a kernel the runtime launched itself",
        };
        return anyhow::anyhow!(
            "{:?} is {what}, not an HLO instruction: it has no HLO to show — `stepscope ops PATH` and \
             `stepscope kernels PATH` give its time ({} over {} runs)",
            args.op,
            human::duration_ps(row.total_ps),
            row.count
        );
    }
    anyhow::anyhow!(
        "no HLO instruction named {:?}{} in this run's modules — list op names with `stepscope ops PATH`",
        args.op,
        args.module.as_ref().map(|m| format!(" in module {m:?}")).unwrap_or_default()
    )
}

fn print_where(i: &Instruction, indent: &str) {
    if !i.op_name.is_empty() {
        proseln!("{indent}jax: {}", i.op_name);
    }
    if !i.source_file.is_empty() {
        let function = if i.source_function.is_empty() { String::new() } else { format!(" in {}", i.source_function) };
        proseln!("{indent}at {}:{}{function}", i.source_file, i.source_line);
    }
}

/// The instruction's Python stack, outermost first, one frame a line.
fn print_stack(i: &Instruction, indent: &str) {
    if i.stack.len() < 2 {
        return;
    }
    proseln!("{indent}stack (outermost first):");
    for f in &i.stack {
        proseln!("{indent}  {}", f.folded());
    }
}

/// A name quoted for DOT.
fn quoted(s: &str) -> String {
    format!("\"{}\"", escaped(s))
}

/// `s` escaped for a quoted DOT string.
fn escaped(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

/// One node's DOT statement: name, opcode and shape, time and FLOPs where known.
fn dot_node(id: &str, n: &Node, op: bool) -> String {
    let mut label = vec![n.name.clone(), format!("{} {}", n.opcode, n.shape)];
    let mut numbers = Vec::new();
    if let Some(t) = n.total_ps {
        numbers.push(format!("{} × {}", human::duration_ps(t), human::count(n.executions.unwrap_or(0))));
    }
    if n.flops > 0 {
        numbers.push(human::rate(n.flops as f64, "FLOP"));
    }
    if !numbers.is_empty() {
        label.push(numbers.join(" · "));
    }
    let label = label.iter().map(|l| escaped(l)).collect::<Vec<_>>().join("\\n");
    let style = if op { ", style=filled, fillcolor=\"#fde7a9\"" } else { "" };
    format!("  {} [label=\"{label}\"{style}];\n", quoted(id))
}

/// The graph as Graphviz DOT: operands left of the op, users right, the fused body
/// in a box of its own.
fn dot(g: &HloGraph) -> String {
    let mut out = format!("digraph {} {{\n", quoted(&g.op));
    out.push_str("  rankdir=LR;\n  node [shape=box, fontname=\"monospace\", fontsize=10];\n");
    for n in &g.nodes {
        out.push_str(&dot_node(&n.name, n, n.name == g.op));
    }
    for e in &g.edges {
        out.push_str(&format!("  {} -> {};\n", quoted(&e.from), quoted(&e.to)));
    }
    if let Some(f) = &g.fused {
        out.push_str(&format!(
            "  subgraph cluster_fused {{\n  label={};\n",
            quoted(&format!("fused body {}", f.computation))
        ));
        for n in &f.nodes {
            out.push_str(&dot_node(&format!("fused/{}", n.name), n, false));
        }
        for e in &f.edges {
            out.push_str(&format!(
                "  {} -> {};\n",
                quoted(&format!("fused/{}", e.from)),
                quoted(&format!("fused/{}", e.to))
            ));
        }
        out.push_str("  }\n");
    }
    if g.nodes_cut > 0 {
        out.push_str(&format!("  // {} neighbour(s) left out\n", g.nodes_cut));
    }
    out.push_str("}\n");
    out
}
