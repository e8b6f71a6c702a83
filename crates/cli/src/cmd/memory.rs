//! `stepscope memory`: allocator timelines, peaks, live allocations, and the
//! device-memory pprof by Python stack.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use stepscope_analysis::memory::{self, Memory};
use stepscope_xspace::discover::Run;
use stepscope_xspace::pprof;

use crate::human;
use crate::load;
use crate::opts::AnalysisArgs;
use crate::table::{csv, Table};

#[derive(Args, Debug)]
pub struct MemoryArgs {
    #[command(flatten)]
    pub common: AnalysisArgs,
    /// A device-memory profile (`jax.profiler.save_device_memory_profile`) to
    /// summarise by Python stack (default: a `*.prof` file in the run folder).
    #[arg(long, value_name = "FILE")]
    pub pprof: Option<PathBuf>,
    /// Read the run a host at a time, in one host's memory whatever the host count, for
    /// the same allocators. What a run of several hosts gets without asking.
    #[arg(long, conflicts_with = "host")]
    pub host_at_a_time: bool,
}

pub fn run(args: &MemoryArgs) -> anyhow::Result<ExitCode> {
    let a = &args.common;
    // PATH a device-memory profile itself (`memory.prof`): it alone, summarised.
    if is_pprof_file(&a.input.path) {
        if let Some(other) = &args.pprof {
            anyhow::bail!(
                "PATH {} is a device-memory profile already, and --pprof names {} — give one of them",
                a.input.path.display(),
                other.display()
            );
        }
        let pp = pprof::read_pprof(&a.input.path)?;
        let shown = a.input.path.display().to_string();
        let m = memory::pprof_only(&shown, &pp, a.select.rows());
        return print(&m, a, true);
    }
    let top = a.select.rows();
    // The device-memory profile: the one named, else the one found beside the run.
    let pprof_of = |run: &Run| -> anyhow::Result<Option<(String, pprof::Pprof)>> {
        match args.pprof.clone().or_else(|| run.pprof.first().cloned()) {
            Some(p) => Ok(Some((p.display().to_string(), pprof::read_pprof(&p)?))),
            None => Ok(None),
        }
    };
    let whole = |(profile, run): (stepscope_analysis::Profile, Run)| {
        let pp = pprof_of(&run)?;
        Ok((memory::memory(&profile, pp.as_ref().map(|(shown, p)| (shown.as_str(), p)), top), run))
    };
    let by_host = || {
        let ((mut m, run), _) = load::host_at_a_time_of_run(&a.input, Default::default(), |run, read| {
            let m = stepscope_analysis::fold::memory_by_host(&run.rel, run.hosts.len(), top, read, &|_| Ok(()))?;
            Ok((m, run.clone()))
        })?;
        if let Some((shown, p)) = pprof_of(&run)? {
            m.device_memory_profile = memory::pprof_only(&shown, &p, top).device_memory_profile;
        }
        Ok((m, run))
    };
    let load_whole = || load::profile_and_run(&a.input, &a.select);
    let (m, run) = load::loaded_or_by_host(
        load::by_host(&a.input, &a.select, args.host_at_a_time)?,
        "allocators",
        load_whole,
        whole,
        by_host,
    )?;
    print(&m, a, false)?;
    if m.device_memory_profile.is_none() && !a.output.json && !a.output.csv {
        // Where a device-memory profile was looked for, and how to make one.
        let above = if a.input.path.is_dir() && a.input.path != run.dir {
            format!(" or the folders above it up to {}", a.input.path.display())
        } else {
            String::new()
        };
        outln!();
        proseln!(
            "no device-memory profile (memory.prof, *.pprof) in {}{above}: save one there with \
             jax.profiler.save_device_memory_profile(PATH), or pass --pprof FILE",
            run.dir.display()
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// A regular file named as discovery names device-memory profiles (`*.prof`, …).
fn is_pprof_file(path: &std::path::Path) -> bool {
    let name = path.file_name().map(|n| n.to_string_lossy().to_ascii_lowercase()).unwrap_or_default();
    stepscope_xspace::discover::is_pprof_name(&name) && path.is_file()
}

fn print(m: &Memory, a: &crate::opts::AnalysisArgs, pprof_only: bool) -> anyhow::Result<ExitCode> {
    if a.output.json {
        outln!("{}", serde_json::to_string(m)?);
    } else if a.output.csv {
        out!("{}", allocator_csv(m));
    } else {
        print_text(m, pprof_only);
    }
    Ok(ExitCode::SUCCESS)
}

fn allocator_csv(m: &Memory) -> String {
    let header = [
        "host",
        "allocator",
        "peak_in_use_bytes",
        "peak_time_ps",
        "lifetime_peak_bytes",
        "capacity_bytes",
        "fragmentation_at_peak",
        "allocations",
        "deallocations",
        "untracked_at_peak_bytes",
    ];
    let rows: Vec<Vec<String>> = m
        .allocators
        .iter()
        .map(|a| {
            vec![
                a.host.clone(),
                a.name.clone(),
                a.peak_in_use_bytes.to_string(),
                a.peak_time_ps.to_string(),
                a.lifetime_peak_bytes.to_string(),
                a.capacity_bytes.map(|c| c.to_string()).unwrap_or_default(),
                format!("{:.6}", a.fragmentation_at_peak),
                a.allocations.to_string(),
                a.deallocations.to_string(),
                a.untracked_at_peak_bytes.to_string(),
            ]
        })
        .collect();
    csv(&header, &rows)
}

/// `pprof_only`: PATH was a device-memory profile alone (no allocators to speak of).
fn print_text(m: &Memory, pprof_only: bool) {
    if m.allocators.is_empty() && !pprof_only {
        outln!("no allocator events (MemoryAllocation) in this profile: XLA:CPU does not record them;");
        outln!("GPU and TPU captures do with the default host tracer level (2)");
    } else if !m.allocators.is_empty() {
        let mut t = Table::new(vec!["ALLOCATOR", "PEAK", "AT", "CAPACITY", "FRAG", "ALLOCS", "FREES"]);
        for a in &m.allocators {
            t.push(vec![
                format!("{} {}", a.host, a.name),
                human::bytes(a.peak_in_use_bytes),
                human::duration_ps(a.peak_time_ps),
                match a.capacity_bytes.map(|c| pct(a.peak_in_use_bytes, c)) {
                    None => "—".into(),
                    Some(p) if p > 0.0 && p < 0.05 => "<0.1%".into(),
                    Some(p) => format!("{p:.1}%"),
                },
                // No event recorded any fragmentation: unknown, not 0.
                match a.max_fragmentation > 0.0 {
                    true => format!("{:.2}", a.fragmentation_at_peak),
                    false => "—".into(),
                },
                human::count(a.allocations),
                human::count(a.deallocations),
            ]);
        }
        out!("{}", t.text());
        let key = "(CAPACITY: peak as a share of the allocator's limit; FRAG: fragmentation at the peak; —: not \
                   recorded)";
        out!("{}", human::wrap("", key, crate::table::prose_width()));
        if let Some(a) = m.allocators.iter().find(|a| !a.live_at_peak.is_empty()) {
            outln!();
            proseln!(
                "LIVE AT THE PEAK of {} {} ({} not seen allocated in the capture)",
                a.host,
                a.name,
                human::bytes(a.untracked_at_peak_bytes)
            );
            let mut t = Table::new(vec!["OP", "SIZE", "SHAPE", "SINCE"]);
            for l in &a.live_at_peak {
                let op = match (l.op.is_empty(), l.program.is_empty(), l.planned_as.is_empty()) {
                    (false, _, _) => l.op.clone(),
                    (true, false, false) => format!("{}: {}", l.program, l.planned_as),
                    (true, false, true) => format!("{}: size not in its plan", l.program),
                    (true, true, _) => "(unknown op)".to_string(),
                };
                let shape = if l.shape.is_empty() { l.data_type.clone() } else { l.shape.clone() };
                t.push(vec![
                    op,
                    human::bytes(l.bytes),
                    crate::table::fit(&shape, 28),
                    human::duration_ps(l.allocated_at_ps),
                ]);
            }
            out!("{}", t.text());
        }
    }
    if let Some(p) = &m.device_memory_profile {
        outln!();
        let head = format!(
            "DEVICE MEMORY PROFILE {}: {} in {} buffers",
            p.path,
            human::bytes(p.total_bytes.max(0) as u64),
            human::count(p.buffer_count.max(0) as u64)
        );
        out!("{}", human::wrap("", &head, crate::table::prose_width()));
        let shares = |v: &[memory::Share]| {
            v.iter()
                .map(|s| {
                    format!("{} {}", if s.name.is_empty() { "?" } else { &s.name }, human::bytes(s.bytes.max(0) as u64))
                })
                .collect::<Vec<_>>()
                .join(", ")
        };
        outln!("  by device: {}", shares(&p.by_device));
        outln!("  by kind:   {}", shares(&p.by_kind));
        let mut t = Table::new(vec!["ALLOCATED AT", "BYTES", "SHARE"]);
        for s in &p.by_site {
            t.push(vec![
                s.site.clone(),
                human::bytes(s.bytes.max(0) as u64),
                format!("{:.1}%", pct(s.bytes.max(0) as u64, p.total_bytes.max(0) as u64)),
            ]);
        }
        out!("{}", t.text());
    }
}

fn pct(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        100.0 * part as f64 / whole as f64
    }
}
