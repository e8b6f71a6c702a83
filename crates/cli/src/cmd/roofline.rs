//! `stepscope roofline`: each op's FLOPs per byte against the device's roofs.

use std::process::ExitCode;

use stepscope_analysis::peaks::PeakSource;
use stepscope_analysis::roofline;

use crate::human;
use crate::load;
use crate::opts::CostArgs;
use crate::table::{csv, Table};

#[derive(clap::Args, Debug)]
pub struct RooflineArgs {
    #[command(flatten)]
    pub cost: CostArgs,
    /// Read the run a host at a time, in one host's memory whatever the host count, for
    /// the same rows. What a run of several hosts gets without asking.
    #[arg(long, conflicts_with = "host")]
    pub host_at_a_time: bool,
}

pub fn run(roofline_args: &RooflineArgs) -> anyhow::Result<ExitCode> {
    let cost_args = &roofline_args.cost;
    let args = &cost_args.common;
    let peaks = cost_args.peaks.user();
    let whole = |mut profile: stepscope_analysis::Profile| {
        profile.set_peaks(peaks);
        Ok(roofline::roofline(&profile))
    };
    let by_host = || {
        let r = load::host_at_a_time(&args.input, peaks, |_, hosts, read| {
            stepscope_analysis::fold::roofline_by_host(hosts, read, &|_| Ok(()))
        })?;
        Ok(r.0)
    };
    let asked = roofline_args.host_at_a_time;
    let mut r = load::whole_or_by_host(&args.input, &args.select, asked, "rows", whole, by_host)?;
    r.ops.truncate(args.select.rows());
    if args.output.json {
        outln!("{}", serde_json::to_string(&r)?);
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
        out!("{}", csv(&header, &rows));
        return Ok(ExitCode::SUCCESS);
    }
    for d in &r.devices {
        let model = d.model.map(|m| format!(" ({m})")).unwrap_or_default();
        // Where a peak was read, when not the profile itself.
        let from = |s: Option<PeakSource>| match s {
            Some(PeakSource::User) => " (yours)",
            Some(PeakSource::DataSheet) => " (data sheet)",
            _ => "",
        };
        let flops =
            d.peak_flops_per_s.map(|f| format!("peak {}{}", human::rate(f, "FLOP/s"), from(d.peak_flops_source)));
        let bytes =
            d.peak_bytes_per_s.map(|b| format!("memory {}{}", human::rate(b, "B/s"), from(d.peak_bytes_source)));
        match (flops, bytes, d.ridge_flops_per_byte) {
            (Some(f), Some(b), Some(ridge)) => proseln!("{}{model}: {f} · {b} · ridge {ridge:.0} FLOP/byte", d.device),
            (f, b, _) if f.is_some() || b.is_some() => proseln!(
                "{}{model}: {} — give the other with --peak-flops / --peak-bandwidth",
                d.device,
                f.or(b).unwrap_or_default()
            ),
            _ => proseln!(
                "{}: roofs unknown (no peaks in the profile and not a known device): give them with \
                 --peak-flops RATE --peak-bandwidth RATE (e.g. 2T, 100G)",
                d.device
            ),
        }
    }
    if r.ops.is_empty() {
        outln!("no op has FLOPs and bytes: the profile records none and its HLO gave none");
        return Ok(ExitCode::SUCCESS);
    }
    outln!();
    let mut t = Table::new(vec!["OP", "SELF", "FLOP/BYTE", "ACHIEVED", "ROOF", "% ROOF", "BOUND"]);
    for (o, label) in r.ops.iter().zip(crate::cmd::ops::op_labels(&r.ops)) {
        t.push(vec![
            label,
            human::duration_ps(o.self_ps),
            num(o.arithmetic_intensity, 1),
            o.flops_per_s.map(|v| human::rate(v, "FLOP/s")).unwrap_or_default(),
            o.roof_flops_per_s.map(|v| human::rate(v, "FLOP/s")).unwrap_or_default(),
            // A rate above the roof is marked, never printed as if it were possible.
            match o.roof_pct {
                Some(p) if p > 100.0 => format!("{p:.1} !"),
                p => num(p, 1),
            },
            o.bound.unwrap_or("").to_string(),
        ]);
    }
    out!("{}", t.text());
    let above = r.ops.iter().filter(|o| o.roof_pct.is_some_and(|p| p > 100.0)).count();
    if above > 0 {
        let why = format!(
            "! {above} op(s) above 100% of their roof: the roof is lower than the device's (a peak given with \
             --peak-flops / --peak-bandwidth, or a data sheet's for another part), the op's operands sat in a cache \
             faster than the memory the roof assumes, or its time holds less than all its work"
        );
        outln!("{}", human::wrap("", &why, crate::table::prose_width()));
    }
    Ok(ExitCode::SUCCESS)
}
