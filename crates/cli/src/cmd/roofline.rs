//! `stepscope roofline`: each op's FLOPs per byte against the device's roofs.

use std::process::ExitCode;

use stepscope_analysis::roofline;

use crate::args::AnalysisArgs;
use crate::human;
use crate::load;
use crate::table::{csv, Table};

pub fn run(args: &AnalysisArgs) -> anyhow::Result<ExitCode> {
    let profile = load::profile(&args.input, &args.select)?;
    let mut r = roofline::roofline(&profile);
    r.ops.truncate(args.select.rows());
    if args.output.json {
        println!("{}", serde_json::to_string(&r)?);
        return Ok(ExitCode::SUCCESS);
    }
    let num = |v: Option<f64>, d: usize| v.map(|v| format!("{v:.d$}")).unwrap_or_default();
    if args.output.csv {
        let header = [
            "name",
            "module",
            "self_ps",
            "flops",
            "bytes_accessed",
            "arithmetic_intensity",
            "flops_per_s",
            "roof_flops_per_s",
            "roof_pct",
            "bound",
        ];
        let rows: Vec<Vec<String>> = r
            .ops
            .iter()
            .map(|o| {
                vec![
                    o.name.clone(),
                    o.module.clone(),
                    o.self_ps.to_string(),
                    o.flops.map(|v| v.to_string()).unwrap_or_default(),
                    o.bytes_accessed.map(|v| v.to_string()).unwrap_or_default(),
                    num(o.arithmetic_intensity, 4),
                    num(o.flops_per_s, 0),
                    num(o.roof_flops_per_s, 0),
                    num(o.roof_pct, 3),
                    o.bound.unwrap_or("").to_string(),
                ]
            })
            .collect();
        print!("{}", csv(&header, &rows));
        return Ok(ExitCode::SUCCESS);
    }
    for d in &r.devices {
        let model = d.gpu_model.map(|m| format!(" ({m})")).unwrap_or_default();
        match (d.peak_flops_per_s, d.peak_bytes_per_s) {
            (Some(f), Some(b)) => println!(
                "{}{model}: peak {} · memory {} · ridge {:.0} FLOP/byte",
                d.device,
                human::rate(f, "FLOP/s"),
                human::rate(b, "B/s"),
                f / b
            ),
            (None, Some(b)) => println!("{}{model}: memory {} · peak FLOP/s unknown", d.device, human::rate(b, "B/s")),
            _ => println!("{}: roofs unknown (no peaks in the profile and not a known device)", d.device),
        }
    }
    if r.ops.is_empty() {
        println!("no op has FLOPs and bytes: the profile records none and its HLO gave none");
        return Ok(ExitCode::SUCCESS);
    }
    println!();
    let mut t = Table::new(vec!["OP", "SELF", "FLOP/BYTE", "ACHIEVED", "ROOF", "% ROOF", "BOUND"]);
    for o in &r.ops {
        t.push(vec![
            o.name.clone(),
            human::duration_ps(o.self_ps),
            num(o.arithmetic_intensity, 1),
            o.flops_per_s.map(|v| human::rate(v, "FLOP/s")).unwrap_or_default(),
            o.roof_flops_per_s.map(|v| human::rate(v, "FLOP/s")).unwrap_or_default(),
            num(o.roof_pct, 1),
            o.bound.unwrap_or("").to_string(),
        ]);
    }
    print!("{}", t.text());
    Ok(ExitCode::SUCCESS)
}
