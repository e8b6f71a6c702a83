//! Decoder and analysis micro-benchmarks. Each analysis gets a freshly decoded
//! profile per iteration (outside the timed part): analyses cache their shared work
//! per profile, so reusing one would time the cache.

use std::path::PathBuf;
use std::sync::Arc;

use divan::Bencher;
use stepscope_analysis::ops::{self, GroupBy};
use stepscope_analysis::timeline::Timeline;
use stepscope_analysis::{steps, summary, Profile};
use stepscope_xspace::xplane::{decode_xspace, read_xspace};
use stepscope_xspace::{Progress, Source};

fn main() {
    divan::main();
}

fn capture() -> PathBuf {
    if let Some(p) = std::env::var_os("STEPSCOPE_BENCH_FILE") {
        return PathBuf::from(p);
    }
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/fixtures/cpu-transformer/plugins/profile");
    let run = std::fs::read_dir(dir).expect("fixture run folder").flatten().next().expect("a run").path();
    std::fs::read_dir(&run)
        .expect("run folder")
        .flatten()
        .map(|e| e.path())
        .find(|p| p.to_string_lossy().ends_with(".xplane.pb"))
        .expect("an .xplane.pb in the fixture")
}

fn profile() -> Profile {
    let space = read_xspace(&capture(), &Progress::default()).expect("decodes");
    Profile::new("bench", vec![space])
}

#[divan::bench(sample_count = 10)]
fn decode(b: Bencher) {
    let bytes = Arc::new(Source::Owned(std::fs::read(capture()).expect("read")));
    b.counter(divan::counter::BytesCount::new(bytes.len()))
        .bench(|| decode_xspace(bytes.clone(), "bench", &Progress::default()).expect("decodes").event_count());
}

#[divan::bench(sample_count = 10)]
fn devices_and_ops(b: Bencher) {
    b.with_inputs(profile).bench_local_refs(|p| p.devices().iter().map(|d| d.ops().len()).sum::<usize>());
}

#[divan::bench(sample_count = 10)]
fn steps(b: Bencher) {
    b.with_inputs(profile).bench_local_refs(|p| steps::steps(p).steps.len());
}

#[divan::bench(sample_count = 10)]
fn op_profile(b: Bencher) {
    b.with_inputs(profile).bench_local_refs(|p| ops::ops(p, GroupBy::Op, 0).ops.len());
}

#[divan::bench(sample_count = 10)]
fn summary_with_findings(b: Bencher) {
    b.with_inputs(profile).bench_local_refs(|p| summary::summary(p, 10).findings.len());
}

/// The timeline's whole-track tile of the busiest track at 2,000 px (what the web UI
/// asks first), built once per iteration from an indexed profile; `json` also
/// encodes it as the server does.
#[divan::bench(args = ["tile", "json"], sample_count = 20)]
fn timeline_whole_track(b: Bencher, what: &str) {
    let p = profile();
    let timeline = Timeline::build(&p);
    let tracks = timeline.tracks(&p);
    let t = tracks.tracks.iter().max_by_key(|t| t.events).expect("a track");
    let tile = || timeline.tile(&p, t.id, tracks.start_ps, tracks.end_ps + 1, 2000).expect("a tile");
    b.bench_local(|| match what {
        "tile" => tile().box_count.len(),
        _ => serde_json::to_vec(&tile()).expect("encodes").len(),
    });
}

/// Filling a column (what the decoder does per event, four times): starts a few µs
/// apart with jitter, and short lengths, 1 M values each.
#[divan::bench(args = ["starts", "lengths"], sample_count = 20)]
fn column_fill(b: Bencher, kind: &str) {
    let values: Vec<i64> = (0..1_000_000i64)
        .map(|i| match kind {
            "starts" => 1_000_000_000 + i * 3_000_000 + (i * 7919) % 1_000_000,
            _ => 1_000 + (i * 7919) % 900_000,
        })
        .collect();
    b.counter(divan::counter::ItemsCount::new(values.len()))
        .bench(|| values.iter().copied().collect::<stepscope_xspace::Column>().len());
}
