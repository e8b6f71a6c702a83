//! `stepscope buffers PATH`: a program's memory as XLA planned it (XProf's memory
//! viewer): its allocations, the heap over program order, and the buffers live at the
//! peak with the instruction, shape and source line of each.

use std::process::ExitCode;

use clap::Args;
use stepscope_analysis::buffers::{self, Buffers};
use stepscope_analysis::fold::buffers_by_host;

use crate::human;
use crate::load;
use crate::opts::ByHostArgs;
use crate::table::{csv, Table};

#[derive(Args, Debug)]
pub struct BuffersArgs {
    #[command(flatten)]
    pub by_host: ByHostArgs,
    /// The program: a module name (`jit_train_step`, its latest compilation) or one
    /// program of it (`jit_train_step(52)`); default: the one that ran longest.
    #[arg(long, value_name = "NAME")]
    pub program: Option<String>,
    /// The memory space (XLA's buffer color): 0, the device's default memory; others
    /// are listed under the plan.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub memory_space: i64,
}

pub fn run(args: &BuffersArgs) -> anyhow::Result<ExitCode> {
    let a = &args.by_host.common;
    let (program, memory_space, top) = (args.program.as_deref(), args.memory_space, a.select.rows());
    let b = load::analysis(
        &args.by_host,
        |p| buffers::buffers(p, program, memory_space, top),
        |run, hosts, read| buffers_by_host(run, hosts, (program, memory_space, top), read, &|_| Ok(())),
    )?;
    let b = match b {
        Ok(b) => b,
        Err(missing) => anyhow::bail!("{}", missing.message(program.unwrap_or(""))),
    };
    if a.output.json {
        outln!("{}", serde_json::to_string(&b)?);
    } else if a.output.csv {
        out!("{}", live_csv(&b));
    } else {
        print_text(&b);
    }
    Ok(ExitCode::SUCCESS)
}

fn live_csv(b: &Buffers) -> String {
    let header = [
        "buffer_id",
        "size_bytes",
        "kind",
        "allocation",
        "instruction",
        "opcode",
        "shape",
        "op_name",
        "source",
        "shared_by",
    ];
    let rows: Vec<Vec<String>> = (b.live_at_peak.iter())
        .map(|l| {
            vec![
                l.buffer_id.to_string(),
                l.size_bytes.to_string(),
                l.kind.to_string(),
                l.allocation.to_string(),
                l.instruction.clone(),
                l.shape_index.iter().map(i64::to_string).collect::<Vec<_>>().join(","),
                l.opcode.clone(),
                l.shape.clone(),
                l.op_name.clone(),
                l.source.clone(),
                l.shared_by.to_string(),
            ]
        })
        .collect();
    csv(&header, &rows)
}

fn print_text(b: &Buffers) {
    proseln!(
        "{}  ·  host {}  ·  memory space {}  ·  {} in {} allocation(s)",
        b.program,
        b.host,
        b.memory_space,
        human::bytes(b.allocated_bytes),
        human::count(b.allocation_count)
    );
    outln!(
        "  parameters {}  outputs {}  constants {}  thread-local {}  temporaries {}",
        human::bytes(b.parameter_bytes),
        human::bytes(b.output_bytes),
        human::bytes(b.constant_bytes),
        human::bytes(b.thread_local_bytes),
        human::bytes(b.temporary_bytes)
    );
    let peak = match &b.heap {
        Some(h) => format!(
            "PEAK {}  at heap event {} of {} ({}): the heap (allocation {}, {}) holds {} live",
            human::bytes(b.peak_bytes),
            h.peak_event,
            human::count(h.events),
            h.peak_instruction,
            h.allocation,
            human::bytes(h.size_bytes),
            human::bytes(h.peak_live_bytes)
        ),
        None => format!(
            "PEAK {}  (no heap simulator trace in this memory space: every buffer is held throughout)",
            human::bytes(b.peak_bytes)
        ),
    };
    out!("{}", human::wrap("", &peak, crate::table::prose_width()));
    outln!();
    outln!(
        "LIVE AT THE PEAK  {} buffer(s), {}",
        human::count(b.live_at_peak_count),
        human::bytes(b.live_at_peak_bytes)
    );
    // The instruction first, the column cut to fit the terminal; the source goes where
    // even that does not make the table fit (a line under it says so).
    let mut t = Table::new(vec!["INSTRUCTION", "SIZE", "KIND", "OPCODE", "SHAPE", "SOURCE"]);
    t.optional = vec![5];
    t.left = vec![5];
    for l in &b.live_at_peak {
        t.push(vec![
            match l.shape_index.as_slice() {
                [] => l.instruction.clone(),
                index => {
                    format!("{} {{{}}}", l.instruction, index.iter().map(i64::to_string).collect::<Vec<_>>().join(","))
                }
            },
            human::bytes(l.size_bytes),
            l.kind.replace('_', "-"),
            l.opcode.clone(),
            crate::table::fit(&l.shape, 28),
            // A source line keeps its file's end and line where tables are cut.
            match crate::table::width() {
                Some(_) => human::elide_start(&l.source, 30),
                None => l.source.clone(),
            },
        ]);
    }
    out!("{}", t.text());
    if !b.other_memory_spaces.is_empty() {
        let spaces: Vec<String> = (b.other_memory_spaces.iter())
            .map(|s| {
                format!("{} ({}, {} allocation(s))", s.memory_space, human::bytes(s.allocated_bytes), s.allocations)
            })
            .collect();
        let note = format!("other memory spaces: {} — `--memory-space N` shows one", spaces.join(", "));
        out!("{}", human::wrap("", &note, crate::table::prose_width()));
    }
    if b.programs.len() > 1 {
        let note =
            format!("{} programs: `--program NAME` shows another (the largest: {})", b.programs.len(), largest(b));
        out!("{}", human::wrap("", &note, crate::table::prose_width()));
    }
}

fn largest(b: &Buffers) -> String {
    (b.programs.iter().filter(|p| p.program != b.program).take(3))
        .map(|p| format!("{} {}", p.program, human::bytes(p.allocated_bytes)))
        .collect::<Vec<_>>()
        .join(", ")
}
