//! `stepscope ops`: the op profile.

use std::process::ExitCode;

use stepscope_analysis::ops::{self, GroupBy, OpRow};

use crate::human;
use crate::load;
use crate::opts::OpsArgs;
use crate::table::{csv, Table};

/// `--host-at-a-time`: the run's op profile, one host in memory at a time: each host's
/// rows summed ([`ops::OpRowsPart`]), as the run read whole sums them.
fn host_at_a_time(ops_args: &OpsArgs, by: GroupBy) -> anyhow::Result<ops::Ops> {
    // Each host's note that its HLO cannot be read, once.
    let notes = std::cell::RefCell::new(Vec::new());
    let note = |profile: &stepscope_analysis::Profile| {
        let mut notes = notes.borrow_mut();
        if let Some(n) = crate::notes::unreadable_hlo_note(profile).filter(|n| !notes.contains(n)) {
            notes.push(n);
        }
        Ok(())
    };
    let (result, _) = load::host_at_a_time(&ops_args.common.input, ops_args.peaks.user(), |_, hosts, read| {
        stepscope_analysis::fold::ops_by_host(hosts, by, ops_args.depth, read, &note)
    })?;
    for n in notes.into_inner() {
        errln!("stepscope: note: {n}");
    }
    Ok(result)
}

pub fn run(ops_args: &OpsArgs) -> anyhow::Result<ExitCode> {
    let args = &ops_args.common;
    let by = ops_args.by.group();
    // The devices' busy time, for the text's note on what the op time sums (read whole).
    let text = !args.output.json && !args.output.csv;
    let busy = std::cell::Cell::new(None);
    let whole = |mut profile: stepscope_analysis::Profile| {
        profile.set_peaks(ops_args.peaks.user());
        if let Some(note) = crate::notes::unreadable_hlo_note(&profile) {
            errln!("stepscope: note: {note}");
        }
        if text {
            busy.set(Some(stepscope_analysis::devices::devices(&profile).all.busy_ps));
        }
        Ok(ops::ops(&profile, by, ops_args.depth))
    };
    let mut result = match &ops_args.parts {
        Some(dir) => crate::cmd::part::ops_of_parts(&args.input, dir, by, ops_args.depth, ops_args.peaks.user())?,
        None => load::whole_or_by_host(&args.input, &args.select, ops_args.host_at_a_time, "rows", whole, || {
            host_at_a_time(ops_args, by)
        })?,
    };
    let all_rows = result.ops.len();
    let largest = result.ops.iter().map(|r| r.self_ps).max();
    if let Some(min) = ops_args.min_self {
        result.ops.retain(|r| r.self_ps >= min);
    }
    let total_rows = result.ops.len();
    result.ops.truncate(args.select.rows());
    if args.output.json {
        outln!("{}", serde_json::to_string(&result)?);
        return Ok(ExitCode::SUCCESS);
    }
    if args.output.csv {
        let header = [
            "name",
            "module",
            "category",
            "count",
            "total_ps",
            "self_ps",
            "avg_ps",
            "min_ps",
            "max_ps",
            "device_time_pct",
            "flops",
            "bytes_accessed",
            "flops_per_s",
            "bytes_per_s",
            "bound",
            "program_id",
        ];
        let opt = |v: Option<String>| v.unwrap_or_default();
        let rows: Vec<Vec<String>> = result
            .ops
            .iter()
            .map(|r| {
                vec![
                    r.name.clone(),
                    r.module.clone(),
                    r.category.clone(),
                    r.count.to_string(),
                    r.total_ps.to_string(),
                    r.self_ps.to_string(),
                    r.avg_ps.to_string(),
                    r.min_ps.to_string(),
                    r.max_ps.to_string(),
                    format!("{:.3}", r.device_time_pct),
                    opt(r.flops.map(|v| v.to_string())),
                    opt(r.bytes_accessed.map(|v| v.to_string())),
                    opt(r.flops_per_s.map(|v| format!("{v:.0}"))),
                    opt(r.bytes_per_s.map(|v| format!("{v:.0}"))),
                    r.bound.unwrap_or("").to_string(),
                    opt(r.program_id.map(|v| v.to_string())),
                ]
            })
            .collect();
        out!("{}", csv(&header, &rows));
        return Ok(ExitCode::SUCCESS);
    }
    if let (0, Some(min), Some(largest)) = (total_rows, ops_args.min_self, largest) {
        outln!(
            "no row has a self time of {} or more (--min-self); the largest of the {all_rows}: {}",
            human::duration_ps(min),
            human::duration_ps(largest)
        );
        return Ok(ExitCode::SUCCESS);
    }
    if total_rows == 0 {
        let why = format!("no XLA ops found in this profile. {}", stepscope_judge::advise::NO_OPS_WHY);
        out!("{}", human::wrap("", &why, crate::table::prose_width()));
        return Ok(ExitCode::SUCCESS);
    }
    let kept = match ops_args.min_self {
        Some(min) => format!(" with a self time of {} or more (of {all_rows})", human::duration_ps(min)),
        None => String::new(),
    };
    outln!(
        "{} of op time in {} rows by {}{kept} (showing {})",
        human::duration_ps(result.op_time_ps),
        total_rows,
        format!("{by:?}").to_lowercase(),
        result.ops.len()
    );
    out!("{}", op_table(&result.ops, by, true).text());
    out!("{}", human::wrap("", &op_time_note(result.op_time_ps, busy.get()), crate::table::prose_width()));
    Ok(ExitCode::SUCCESS)
}

/// What the op time and the % column are shares of: each row's time over every op's,
/// summed, in which ops that ran at once each count; beside it, where known, the time
/// the devices were busy (each device's ops merged: the wall clock they took).
pub fn op_time_note(op_time_ps: i64, busy_ps: Option<i64>) -> String {
    let sum = format!(
        "(%: each row's share of the {} of op time, every op's time summed (ops that ran at once each count)",
        human::duration_ps(op_time_ps)
    );
    match busy_ps {
        Some(busy) => format!(
            "{sum}; the devices were busy {} (each device's ops merged, summed over devices))",
            human::duration_ps(busy)
        ),
        None => format!("{sum})"),
    }
}

/// The text table of op rows (also used by `summary`, whose one screen leaves out the
/// total: `with_total` false).
pub fn op_table(rows: &[OpRow], by: GroupBy, with_total: bool) -> Table {
    let first = match by {
        GroupBy::Op => "OP",
        GroupBy::Category => "CATEGORY",
        GroupBy::Module => "MODULE",
        GroupBy::Scope => "SCOPE",
        GroupBy::Line => "LINE",
        GroupBy::Stack => "STACK (outermost first)",
    };
    let by_line = by == GroupBy::Line;
    // Total time (with the ops inside: a while loop's body, a nested scope) where it
    // differs from the self time of some row (user guide 003's "Self Time vs Total Time").
    let total = with_total && rows.iter().any(|r| r.total_ps != r.self_ps);
    let mut head = vec![first, "SELF", "%", "COUNT", "AVG", "CATEGORY", "RATE"];
    if total {
        head.insert(1, "TOTAL");
    }
    if by_line {
        head.insert(1, "FUNCTION");
    }
    let at = |name: &str| head.iter().position(|h| *h == name);
    // On a narrow terminal: the total (the self time ranks the rows), the category,
    // then the function (the line names it).
    let optional: Vec<usize> = [at("TOTAL"), at("CATEGORY"), at("FUNCTION")].into_iter().flatten().collect();
    let mut t = Table::new(head);
    t.keep_end = by == GroupBy::Stack;
    t.optional = optional;
    let labels = source_labels(rows, by);
    for (r, label) in rows.iter().zip(labels) {
        let rate = match (r.flops_per_s, r.bytes_per_s) {
            (Some(f), _) => human::rate(f, "FLOP/s"),
            (None, Some(b)) => human::rate(b, "B/s"),
            _ => String::new(),
        };
        let mut cells = vec![
            label,
            human::duration_ps(r.self_ps),
            format!("{:.1}", r.device_time_pct),
            // Executions: on a GPU, a GEMM and the memset before it are one.
            human::count(r.executions),
            human::duration_ps(r.avg_ps),
            crate::table::fit(&r.category, 14),
            rate,
        ];
        if total {
            cells.insert(1, human::duration_ps(r.total_ps));
        }
        if by_line {
            let function = r.stack.as_ref().and_then(|s| s.first()).map(|f| short_function(&f.function));
            cells.insert(1, function.unwrap_or_default());
        }
        t.push(cells);
    }
    t
}

/// Op rows' labels: an op's name, with its program where several programs hold an op
/// of that name and module ([`OpRow::program`]: `custom-call.1 in jit_dot(49)`), or its
/// module where ops of that name from several modules are among the rows
/// (`custom-call.1 in jit_update`).
pub fn op_labels(rows: &[OpRow]) -> Vec<String> {
    placed_labels(rows.iter().map(|r| (r.name.as_str(), r.module.as_str(), r.program.as_deref())))
}

/// Labels of `(op, module, program)` rows: the op, `op in program` where the row has a
/// program, `op in module` where ops of that name from several modules are among them.
pub fn placed_labels<'a>(rows: impl Iterator<Item = (&'a str, &'a str, Option<&'a str>)> + Clone) -> Vec<String> {
    let mut modules: std::collections::HashMap<&str, Vec<&str>> = Default::default();
    for (op, module, _) in rows.clone() {
        let seen = modules.entry(op).or_default();
        if !seen.contains(&module) {
            seen.push(module);
        }
    }
    rows.map(|(op, module, program)| match program {
        Some(p) => format!("{op} in {p}"),
        None if !module.is_empty() && modules.get(op).is_some_and(|m| m.len() > 1) => format!("{op} in {module}"),
        None => op.to_string(),
    })
    .collect()
}

/// Row labels for the table: by line, `file.py:LINE` (the whole path where two files
/// share a name); by stack, `f:LINE › g:LINE (file.py)` with the file once where one
/// file holds every frame. By op, an op of a name several programs share, with its
/// program: `custom-call.1 in jit_dot(49)`. Other groupings: the row's name. JSON and
/// CSV keep the whole names.
fn source_labels(rows: &[OpRow], by: GroupBy) -> Vec<String> {
    if !matches!(by, GroupBy::Line | GroupBy::Stack) {
        return if by == GroupBy::Op { op_labels(rows) } else { rows.iter().map(|r| r.name.clone()).collect() };
    }
    let mut paths_by_base: std::collections::HashMap<&str, std::collections::HashSet<&str>> = Default::default();
    for f in rows.iter().filter_map(|r| r.stack.as_ref()).flatten() {
        paths_by_base.entry(base_name(&f.file)).or_default().insert(&f.file);
    }
    let file = |path: &str| -> String {
        let base = base_name(path);
        if paths_by_base.get(base).is_some_and(|p| p.len() > 1) {
            path.to_string()
        } else {
            base.to_string()
        }
    };
    rows.iter()
        .map(|r| match r.stack.as_deref() {
            None | Some([]) => r.name.clone(),
            Some([f]) if by == GroupBy::Line => format!("{}:{}", file(&f.file), f.line),
            Some(frames) => {
                let one_file = frames.iter().all(|f| f.file == frames[0].file);
                let parts: Vec<String> = frames
                    .iter()
                    .map(|f| match one_file {
                        true => format!("{}:{}", short_function(&f.function), f.line),
                        false => format!("{} ({}:{})", short_function(&f.function), file(&f.file), f.line),
                    })
                    .collect();
                let joined = parts.join(" › ");
                if one_file {
                    format!("{joined} ({})", file(&frames[0].file))
                } else {
                    joined
                }
            }
        })
        .collect()
}

/// The last part of a path.
fn base_name(path: &str) -> &str {
    path.rsplit(['/', '\\']).next().unwrap_or(path)
}

/// A Python qualified name without its `<locals>` parts: `main.<locals>.mlp` → `main.mlp`.
fn short_function(name: &str) -> String {
    name.replace(".<locals>.", ".")
}
