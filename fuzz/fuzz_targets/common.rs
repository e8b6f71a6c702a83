//! Shared by the targets: runs every analysis and exporter over whatever decoded,
//! serializing each result, because they must not panic on weird-but-valid data either.

use stepscope_analysis::timeline::Timeline;
use stepscope_analysis::{collectives, compile, devices, hlo_context, kernels, memory, ops, scopes, steps, Profile};
use stepscope_export::table::{TableFormat, TableWriter};
use stepscope_export::{chrome, events, perfetto};
use stepscope_judge::advise::{self, Thresholds};
use stepscope_report::{compare, diff, live, summary};
use stepscope_xspace::Space;

pub fn analyse(space: Space) {
    let profile = Profile::new("fuzz", vec![space]);
    let _ = profile.devices();
    let steps = steps::steps(&profile);
    let _ = serde_json::to_vec(&steps);
    let summary = summary::summary(&profile, 10);
    let _ = serde_json::to_vec(&summary);
    for by in ops::GroupBy::ALL {
        let _ = serde_json::to_vec(&ops::ops(&profile, by, 2));
    }
    let _ = serde_json::to_vec(&ops::op_stacks(&profile));
    let _ = serde_json::to_vec(&scopes::scopes(&profile));
    let _ = stepscope_export::folded::write_folded(&ops::op_stacks(&profile), &mut std::io::sink());
    let _ = serde_json::to_vec(&kernels::kernels(&profile));
    let memory = memory::memory_full(&profile);
    let _ = serde_json::to_vec(&memory);
    // What the web UI asks when an allocator's peak is clicked.
    if let Some(a) = memory.allocators.first() {
        let _ = serde_json::to_vec(&memory::live_at(&profile, &a.host, &a.name, a.peak_time_ps, 5));
    }
    let _ = serde_json::to_vec(&collectives::collectives(&profile));
    let _ = serde_json::to_vec(&compile::compile(&profile));
    let _ = serde_json::to_vec(&devices::devices(&profile));
    let _ = serde_json::to_vec(&advise::advise(&profile, &Thresholds::default()));
    let _ = serde_json::to_vec(&live::snapshot(&profile, 5));
    if let Some(op) = summary.top_ops.first() {
        let _ = serde_json::to_vec(&hlo_context::hlo_context(&profile, &op.name, Some(&op.module)));
    }
    // The timeline: for the first tracks, the whole span and a 1 ns window, and an
    // event's details; a search.
    let timeline = Timeline::build(&profile);
    let tracks = timeline.tracks(&profile);
    let _ = serde_json::to_vec(&tracks);
    for t in tracks.tracks.iter().take(8) {
        let _ = serde_json::to_vec(&timeline.tile(&profile, t.id, (t.start_ps, t.end_ps, 800), usize::MAX));
        let mid = t.start_ps / 2 + t.end_ps / 2;
        let _ = serde_json::to_vec(&timeline.tile(&profile, t.id, (mid, mid.saturating_add(1_000), 100), usize::MAX));
        let _ = serde_json::to_vec(&timeline.event(&profile, &steps.steps, t.id, 0));
    }
    let _ = serde_json::to_vec(&timeline.search(&profile, "a", 20));
    // Every exporter, into a sink.
    let _ = chrome::write_chrome(&profile.hosts, std::io::sink());
    let _ = perfetto::write_perfetto(&profile.hosts, std::io::sink());
    for format in [TableFormat::Csv, TableFormat::Parquet] {
        if let Ok(mut table) = TableWriter::new(format, events::columns(), std::io::sink()) {
            let _ = events::write_events(&profile.hosts, &steps, &mut table);
        }
    }
    // Run against run: the profile against itself.
    let _ = serde_json::to_vec(&diff::diff(&profile, &profile));
    let _ = serde_json::to_vec(&diff::diff_by(&profile, &profile, ops::GroupBy::Line));
    let _ = serde_json::to_vec(&compare::compare(&[("a".into(), &profile), ("b".into(), &profile)], 5));
    let _ = serde_json::to_vec(&compare::compare_by(&[("a".into(), &profile)], 5, ops::GroupBy::Scope));
}
