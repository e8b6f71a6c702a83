//! `stepscope part`: one host of a run mapped to the part its run's findings are
//! reduced from, for a run mapped on several machines (`stepscope.analyze_on_ray`,
//! docs/scale.md); `summary --parts DIR` and `advise --parts DIR` reduce the parts.
//!
//! A part is bytes ([`stepscope_model::wire`]) behind a header that names the build,
//! the run, the host, its place among the run's hosts and the settings it was mapped
//! with: the reduce refuses a part of another build, run, host or setting, in one line
//! that says to map it again.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;
use stepscope_analysis::fold::Mapped;
use stepscope_analysis::wire::{self, Wire};
use stepscope_judge::advise::Thresholds;
use stepscope_judge::by_host::{self, HostPart, Judged};

use crate::load;
use crate::opts::{Input, PeakArgs};

#[derive(Args, Debug)]
pub struct PartArgs {
    #[command(flatten)]
    pub input: Input,
    /// The host to map (its file name without .xplane.pb).
    #[arg(long, value_name = "HOST", value_parser = crate::opts::host_name(), required_unless_present = "plan")]
    pub host: Option<String>,
    /// Where to write the part: a file, or - for standard output.
    #[arg(short, long, value_name = "FILE", required_unless_present = "plan")]
    pub out: Option<PathBuf>,
    /// Print the run's name and hosts as the commands read them (JSON, schema
    /// `stepscope.part_plan/1`) and map nothing: what a driver hands out.
    #[arg(long, conflicts_with_all = ["host", "out"])]
    pub plan: bool,
    /// A thresholds file, as `advise --thresholds` takes it (the reduce must be given
    /// the same).
    #[arg(long, value_name = "FILE")]
    pub thresholds: Option<PathBuf>,
    #[command(flatten)]
    pub peaks: PeakArgs,
}

/// What a part's header holds, checked by the reduce.
struct Header {
    build: String,
    run: String,
    host: String,
    index: usize,
    hosts: usize,
    /// The thresholds and peaks it was mapped with.
    settings: String,
}
stepscope_analysis::wire_struct!(Header { build, run, host, index, hosts, settings });

/// The first bytes of every part.
const MAGIC: &[u8] = b"stepscope-part\n";

/// This build: a part is read back only by the build that wrote it.
fn build() -> String {
    format!("stepscope {} wire 1", env!("CARGO_PKG_VERSION"))
}

/// The settings a part is mapped with, in words.
fn settings(th: &Thresholds, peaks: stepscope_analysis::peaks::UserPeaks) -> String {
    let th = serde_json::to_string(th).unwrap_or_default();
    format!("thresholds {th}; peaks {:?} FLOP/s {:?} B/s", peaks.flops_per_s, peaks.bytes_per_s)
}

/// The thresholds and peaks of `--thresholds FILE` and the peak flags (the flags win).
pub fn thresholds_and_peaks(
    file: Option<&Path>,
    peaks: &PeakArgs,
) -> anyhow::Result<(Thresholds, stepscope_analysis::peaks::UserPeaks)> {
    let th = match file {
        Some(p) => crate::cmd::advise::read_thresholds(p)?,
        None => Thresholds::default(),
    };
    let (flag, file) = (peaks.user(), th.peaks());
    let peaks = stepscope_analysis::peaks::UserPeaks {
        flops_per_s: flag.flops_per_s.or(file.flops_per_s),
        bytes_per_s: flag.bytes_per_s.or(file.bytes_per_s),
    };
    Ok((th, peaks))
}

pub fn run(args: &PartArgs) -> anyhow::Result<ExitCode> {
    let hosts = load::Hosts::of(&args.input, args.host.as_deref())?;
    let names = hosts.names();
    if args.plan {
        let plan = serde_json::json!({"schema": "stepscope.part_plan/1", "run": hosts.run_name(), "hosts": names});
        outln!("{plan}");
        return Ok(ExitCode::SUCCESS);
    }
    let (Some(host), Some(out)) = (&args.host, &args.out) else {
        anyhow::bail!("give --host HOST and -o FILE, or --plan — `stepscope part --help` shows both")
    };
    let (th, peaks) = thresholds_and_peaks(args.thresholds.as_deref(), &args.peaks)?;
    let index = names.iter().position(|n| n == host).expect("Hosts::of found the host");
    let mut profile = hosts.read(host)?;
    profile.set_peaks(peaks);
    let mapped = by_host::map_host(&profile, names.len(), &th);
    drop(profile);
    let header = Header {
        build: build(),
        run: hosts.run_name().to_string(),
        host: host.clone(),
        index,
        hosts: names.len(),
        settings: settings(&th, peaks),
    };
    let mut bytes = MAGIC.to_vec();
    header.put(&mut bytes);
    mapped.put(&mut bytes);
    if out == Path::new("-") {
        use std::io::Write;
        let mut stdout = std::io::stdout().lock();
        stdout.write_all(&bytes).and_then(|()| stdout.flush())?;
    } else {
        let mut o = crate::output::Output::open(out)?;
        std::io::Write::write_all(&mut o, &bytes)?;
        o.commit()?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The file of host `index`'s part in a parts folder, and the file that says why a
/// host could not be mapped (its one-line error).
fn part_files(dir: &Path, index: usize) -> (PathBuf, PathBuf) {
    (dir.join(format!("host-{index}.part")), dir.join(format!("host-{index}.unread")))
}

/// The run `input` names judged from the parts in `dir` (`host-I.part` for host I,
/// `host-I.unread` holding the error of a host that could not be mapped; a host with
/// neither is mapped here), with thresholds `th` and `peaks`: what
/// [`by_host::judged_by_host`] makes of the run read here, and the hosts left out.
pub fn judged_of_parts(
    input: &Input,
    dir: &Path,
    top: usize,
    th: &Thresholds,
    peaks: stepscope_analysis::peaks::UserPeaks,
) -> anyhow::Result<(Judged<()>, Vec<stepscope_xspace::discover::Unread>)> {
    let meta = std::fs::metadata(dir)
        .map_err(|e| anyhow::anyhow!("--parts {}: {e} — give the folder the parts were written to", dir.display()))?;
    if !meta.is_dir() {
        anyhow::bail!("--parts {} is not a folder — give the folder the parts were written to", dir.display());
    }
    let hosts = load::Hosts::of(input, None)?;
    let names: Vec<String> = hosts.names().iter().map(|n| n.to_string()).collect();
    let run = hosts.run_name().to_string();
    let expected = |index: usize| Header {
        build: build(),
        run: run.clone(),
        host: names[index].clone(),
        index,
        hosts: names.len(),
        settings: settings(th, peaks),
    };
    let mut unread = Vec::new();
    let read_here = |i: usize| -> anyhow::Result<stepscope_analysis::Profile> {
        let mut p = hosts.read(&names[i])?;
        p.set_peaks(peaks);
        Ok(p)
    };
    let mut first = |i: usize| -> anyhow::Result<Option<Mapped<HostPart<()>>>> {
        let (part, why) = part_files(dir, i);
        if let Ok(text) = stepscope_xspace::files::read_small_text(&why, "host's error") {
            // The map's one-line error, as `stepscope part` printed it.
            let line = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("it could not be mapped");
            let error = line.strip_prefix("stepscope: ").unwrap_or(line).trim_end().to_string();
            unread.push(stepscope_xspace::discover::Unread { host: names[i].clone(), error });
            return Ok(None);
        }
        if !part.exists() {
            return Ok(Some(by_host::map_host(&read_here(i)?, names.len(), th)));
        }
        read_part(&part, &expected(i)).map(Some)
    };
    let mut again = |i: usize, _again: bool| read_here(i).map(Some);
    let judged = by_host::judged_of_parts(&run, names.len(), top, th, &mut first, &mut again)?;
    load::note_unread(&unread, names.len() - unread.len())?;
    Ok((judged, unread))
}

/// The part in `path`, whose header must be `want`'s.
fn read_part(path: &Path, want: &Header) -> anyhow::Result<Mapped<HostPart<()>>> {
    let again = format!("map it again with this stepscope (`stepscope part ... --host {}`)", want.host);
    let bytes = stepscope_xspace::files::read_large(path, "host's part")?;
    let Some(body) = bytes.strip_prefix(MAGIC) else {
        anyhow::bail!("{} is not a part stepscope wrote — {again}", path.display());
    };
    let mut b = wire::Bytes::new(body);
    let bad = |e: wire::WireError| anyhow::anyhow!("{} is damaged ({e}) — {again}", path.display());
    let header = Header::take(&mut b).map_err(bad)?;
    let differs = [
        ("build", &header.build, &want.build),
        ("run", &header.run, &want.run),
        ("host", &header.host, &want.host),
        ("settings", &header.settings, &want.settings),
    ];
    if let Some((what, had, wanted)) = differs.iter().find(|(_, a, b)| a != b) {
        anyhow::bail!("{} was mapped for another {what} ({had:?}, not {wanted:?}) — {again}", path.display());
    }
    if (header.index, header.hosts) != (want.index, want.hosts) {
        anyhow::bail!(
            "{} is host {} of {}, not {} of {} — {again}",
            path.display(),
            header.index,
            header.hosts,
            want.index,
            want.hosts
        );
    }
    let mapped = Mapped::take(&mut b).map_err(bad)?;
    if !b.is_empty() {
        return Err(bad(wire::WireError("bytes follow its end".into())));
    }
    Ok(mapped)
}
