//! `stepscope part`: one host of a run mapped to the part a command's answer for the
//! run is reduced from, for a run mapped on several machines
//! (`stepscope.analyze_on_ray`, docs/scale.md); `COMMAND --parts DIR` reduces the
//! parts (`summary`, `advise`, `steps`, `devices`, `ops`).
//!
//! A part is bytes ([`stepscope_analysis::wire`]) behind a header that names the build,
//! the kind of part, the run, the host, its place among the run's hosts and the
//! settings it was mapped with: the reduce refuses a part of another build, kind, run,
//! host or setting, in one line that says to map it again.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;
use stepscope_analysis::devices::DevicesPart;
use stepscope_analysis::fold::{self, HostSource, Mapped};
use stepscope_analysis::ops::{GroupBy, OpRowsPart, Ops};
use stepscope_analysis::overview::OverviewPart;
use stepscope_analysis::peaks::UserPeaks;
use stepscope_analysis::wire::{self, Wire};
use stepscope_analysis::Profile;
use stepscope_judge::advise::Thresholds;
use stepscope_judge::by_host::{self, HostPart, Judged};
use stepscope_report::side::{side_kept, steps_span, Side, SideKept, SideRows};
use stepscope_xspace::discover::Unread;

use crate::load;
use crate::opts::{By, Input, PeakArgs};

/// The commands a part is mapped for.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum For {
    /// `summary` and `advise` (one part serves both).
    Summary,
    Advise,
    Steps,
    Devices,
    Ops,
    Check,
    /// `diff`'s first read of a host (its steps' span, its scopes).
    Diff,
    /// `diff`'s second read of a host: its op rows within the run's steps' span
    /// (`--within`, from `part --span-of`), its kernels and memory peak.
    DiffRows,
}

#[derive(Args, Debug)]
pub struct PartArgs {
    #[command(flatten)]
    pub input: Input,
    /// The host to map (its file name without .xplane.pb).
    #[arg(long, value_name = "HOST", value_parser = crate::opts::host_name(), required_unless_present_any = ["plan", "span_of"])]
    pub host: Option<String>,
    /// Where to write the part: a file, or - for standard output.
    #[arg(short, long, value_name = "FILE", required_unless_present_any = ["plan", "span_of"])]
    pub out: Option<PathBuf>,
    /// Print the run's name and hosts as the commands read them (JSON, schema
    /// `stepscope.part_plan/1`) and map nothing: what a driver hands out.
    #[arg(long, conflicts_with_all = ["host", "out"])]
    pub plan: bool,
    /// The command the part is for.
    #[arg(long = "for", value_enum, default_value = "summary")]
    pub command: For,
    /// A thresholds file, as `advise --thresholds` takes it (the reduce must be given
    /// the same).
    #[arg(long, value_name = "FILE")]
    pub thresholds: Option<PathBuf>,
    /// For `steps --critical-path`.
    #[arg(long)]
    pub critical_path: bool,
    /// For `ops --by`.
    #[arg(long, value_enum, default_value = "op")]
    pub by: By,
    /// For `ops --depth`.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub depth: usize,
    /// For `--for diff-rows`: the run's steps' span, START_PS,END_PS, as `--span-of`
    /// prints it (none: the run has no steps).
    #[arg(long, value_name = "START_PS,END_PS", value_parser = parse_span)]
    pub within: Option<(i64, i64)>,
    /// Print the run's steps' span (JSON, schema `stepscope.part_span/1`) from the
    /// `--for diff` parts in this folder, and map nothing: what `--for diff-rows` needs.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["host", "out", "plan"])]
    pub span_of: Option<PathBuf>,
    #[command(flatten)]
    pub peaks: PeakArgs,
}

/// `START_PS,END_PS`.
fn parse_span(s: &str) -> Result<(i64, i64), String> {
    let bad = || format!("{s:?} is not START_PS,END_PS (two whole picoseconds, as `part --span-of` prints them)");
    let (a, b) = s.split_once(',').ok_or_else(bad)?;
    Ok((a.trim().parse().map_err(|_| bad())?, b.trim().parse().map_err(|_| bad())?))
}

/// What a part's header holds, checked by the reduce.
struct Header {
    build: String,
    /// The kind of part and the settings it was mapped with, in words.
    kind: String,
    run: String,
    host: String,
    index: usize,
    hosts: usize,
    /// The part's bytes after the header: their length and checksum ([`checksum`]).
    body_bytes: u64,
    body_sum: u64,
}
stepscope_analysis::wire_struct!(Header { build, kind, run, host, index, hosts, body_bytes, body_sum });

/// A checksum of a part's bytes (FNV-1a, 64 bits): a part damaged on its way is refused
/// before it is read.
fn checksum(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3))
}

/// The first bytes of every part.
const MAGIC: &[u8] = b"stepscope-part\n";

/// This build: a part is read back only by the build that wrote it.
fn build() -> String {
    format!("stepscope {} wire 3", env!("CARGO_PKG_VERSION"))
}

/// A part's kind, with the settings it is mapped with, in words: what the map and the
/// reduce must agree on.
pub fn kind(command: For, th: &Thresholds, peaks: UserPeaks, critical_path: bool, ops: (GroupBy, usize)) -> String {
    let peaks = format!("peaks {:?} FLOP/s {:?} B/s", peaks.flops_per_s, peaks.bytes_per_s);
    match command {
        For::Summary | For::Advise => {
            format!("findings; thresholds {}; {peaks}", serde_json::to_string(th).unwrap_or_default())
        }
        For::Steps => format!("steps; critical paths {critical_path}; {peaks}"),
        For::Devices => format!("devices; {peaks}"),
        For::Ops => format!("ops by {:?} to depth {}; {peaks}", ops.0, ops.1),
        For::Check => format!("overview; {peaks}"),
        For::Diff => format!("side; {peaks}"),
        For::DiffRows => format!("side rows by {:?}; {peaks}", ops.0),
    }
}

/// The kind of a `--for diff-rows` part: its grouping, the span it was cut to and the
/// peaks.
fn side_rows_kind(by: GroupBy, within: Option<(i64, i64)>, peaks: UserPeaks) -> String {
    let kind = kind(For::DiffRows, &Thresholds::default(), peaks, false, (by, 0));
    format!("{kind}; within {within:?}")
}

pub fn run(args: &PartArgs) -> anyhow::Result<ExitCode> {
    if let Some(dir) = &args.span_of {
        let span = side_span_of_parts(&args.input, dir)?;
        outln!("{}", serde_json::json!({"schema": "stepscope.part_span/1", "span": span}));
        return Ok(ExitCode::SUCCESS);
    }
    if args.plan {
        let (run, hosts) = load::plan(&args.input)?;
        let plan = serde_json::json!({"schema": "stepscope.part_plan/1", "run": run, "hosts": hosts});
        outln!("{plan}");
        return Ok(ExitCode::SUCCESS);
    }
    let hosts = load::Hosts::of(&args.input, args.host.as_deref())?;
    let names = hosts.names();
    let (Some(host), Some(out)) = (&args.host, &args.out) else {
        anyhow::bail!("give --host HOST and -o FILE, or --plan — `stepscope part --help` shows both")
    };
    if out == Path::new("-") && std::io::IsTerminal::is_terminal(&std::io::stdout()) {
        anyhow::bail!("a part is bytes, not for a terminal — give -o FILE, or pipe it (-o - | …)");
    }
    let (th, peaks) = crate::opts::thresholds_and_peaks(args.thresholds.as_deref(), &args.peaks)?;
    let ops = (args.by.group(), args.depth);
    let Some(index) = names.iter().position(|n| n == host) else {
        anyhow::bail!("no host named {host:?} in this run — pick one of: {}", names.join(", "));
    };
    let mut profile = hosts.read(host)?;
    profile.set_peaks(peaks);
    let mut body = Vec::new();
    match args.command {
        For::Summary | For::Advise => by_host::map_host(&profile, names.len(), &th).put(&mut body),
        For::Steps => map(&profile, true, &|p, o| fold::steps_kept(p, o, args.critical_path)).put(&mut body),
        For::Devices => map(&profile, false, &|p, _| DevicesPart::of(p)).put(&mut body),
        For::Ops => OpRowsPart::grouped(&profile, ops.0, ops.1).put(&mut body),
        For::Check => map(&profile, true, &|_, _| ()).put(&mut body),
        For::Diff => map(&profile, true, &|p, _| side_kept(p)).put(&mut body),
        For::DiffRows => SideRows::of(&profile, ops.0, args.within, true).put(&mut body),
    }
    drop(profile);
    let kind = match args.command {
        For::DiffRows => side_rows_kind(ops.0, args.within, peaks),
        command => kind(command, &th, peaks, args.critical_path, ops),
    };
    let header = Header {
        build: build(),
        kind,
        run: hosts.run_name().to_string(),
        host: host.clone(),
        index,
        hosts: names.len(),
        body_bytes: body.len() as u64,
        body_sum: checksum(&body),
    };
    let mut bytes = MAGIC.to_vec();
    header.put(&mut bytes);
    bytes.extend_from_slice(&body);
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

/// What a command keeps of a host, beside its overview part.
type Keep<'a, T> = dyn Fn(&Profile, &OverviewPart) -> T + 'a;

/// `profile` mapped under its own decisions, `keep` kept of it (op rows summed where
/// `ops`).
fn map<T>(profile: &Profile, ops: bool, keep: &Keep<T>) -> Mapped<T> {
    let Ok(mapped) = fold::map_host(profile, ops, &mut |p, o| Ok::<_, std::convert::Infallible>(keep(p, o)));
    mapped
}

/// A run's parts folder: its hosts, what each part must say of itself, and the hosts
/// that could not be mapped.
#[derive(Clone)]
struct Parts<'a> {
    dir: &'a Path,
    /// The run's input, its run named, for a host read here (in a bucket, that host's
    /// file alone is fetched).
    input: Input,
    run: String,
    names: Vec<String>,
    kind: String,
    peaks: UserPeaks,
    unread: Vec<Unread>,
}

impl<'a> Parts<'a> {
    fn open(input: &Input, dir: &'a Path, kind: String, peaks: UserPeaks) -> anyhow::Result<Parts<'a>> {
        let meta = std::fs::metadata(dir).map_err(|e| {
            anyhow::anyhow!("--parts {}: {e} — give the folder the parts were written to", dir.display())
        })?;
        if !meta.is_dir() {
            anyhow::bail!("--parts {} is not a folder — give the folder the parts were written to", dir.display());
        }
        let (run, names) = load::plan(input)?;
        let input = Input { path: input.path.clone(), run: Some(run.clone()) };
        Ok(Parts { dir, input, run, names, kind, peaks, unread: Vec::new() })
    }

    /// Host `i` read here, with the user's peaks.
    fn read_here(&self, i: usize) -> anyhow::Result<Profile> {
        let name = &self.names[i];
        let mut p = load::Hosts::of(&self.input, Some(name))?.read(name)?;
        p.set_peaks(self.peaks);
        Ok(p)
    }

    /// Host `i`'s part: `None` where `host-I.unread` says it could not be mapped (the
    /// host is then listed as unread); read here by `here` where there is neither.
    fn part<T: Wire>(&mut self, i: usize, here: impl FnOnce(&Profile) -> T) -> anyhow::Result<Option<T>> {
        let (part, why) = (self.dir.join(format!("host-{i}.part")), self.dir.join(format!("host-{i}.unread")));
        if let Ok(text) = stepscope_xspace::files::read_small_text(&why, "host's error") {
            // The map's one-line error, as `stepscope part` printed it.
            let line = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("it could not be mapped");
            let error = line.strip_prefix("stepscope: ").unwrap_or(line).trim_end().to_string();
            self.unread.push(Unread { host: self.names[i].clone(), error });
            return Ok(None);
        }
        if !part.exists() {
            return Ok(Some(here(&self.read_here(i)?)));
        }
        self.read_part(&part, i).map(Some)
    }

    /// The part in `path`, which must be host `index`'s, of this kind and build.
    fn read_part<T: Wire>(&self, path: &Path, index: usize) -> anyhow::Result<T> {
        self.read_part_of(path, index, &self.kind)
    }

    /// [`Parts::read_part`] of a part of kind `kind`.
    fn read_part_of<T: Wire>(&self, path: &Path, index: usize, kind: &str) -> anyhow::Result<T> {
        let host = &self.names[index];
        let again = format!("map it again with this stepscope (`stepscope part ... --host {host}`)");
        let bytes = stepscope_xspace::files::read_large(path, "host's part")?;
        let Some(body) = bytes.strip_prefix(MAGIC) else {
            anyhow::bail!("{} is not a part stepscope wrote — {again}", path.display());
        };
        let mut b = wire::Bytes::new(body);
        let bad = |e: wire::WireError| anyhow::anyhow!("{} is damaged ({e}) — {again}", path.display());
        let header = Header::take(&mut b).map_err(bad)?;
        let differs = [
            ("build", &header.build, &build()),
            ("run", &header.run, &self.run),
            ("host", &header.host, host),
            ("command or settings", &header.kind, &kind.to_string()),
        ];
        if let Some((what, had, wanted)) = differs.iter().find(|(_, a, b)| a != b) {
            anyhow::bail!("{} was mapped for another {what} ({had:?}, not {wanted:?}) — {again}", path.display());
        }
        if (header.index, header.hosts) != (index, self.names.len()) {
            anyhow::bail!(
                "{} is host {} of {}, not {index} of {} — {again}",
                path.display(),
                header.index,
                header.hosts,
                self.names.len()
            );
        }
        let body = b.take_bytes(b.len()).map_err(bad)?;
        if (body.len() as u64, checksum(body)) != (header.body_bytes, header.body_sum) {
            return Err(bad(wire::WireError(format!(
                "{} bytes where its header says {}, or not the bytes it wrote",
                body.len(),
                header.body_bytes
            ))));
        }
        wire::from_bytes(body).map_err(bad)
    }

    /// `reduce` of the run's hosts from their parts (`keep` of a host read here: one
    /// with no part, or one the run decides otherwise for than it did alone), and the
    /// hosts left out; their note is printed.
    fn fold<T: Wire, R>(
        mut self,
        ops: bool,
        keep: &Keep<T>,
        reduce: impl FnOnce(&str, usize, &mut dyn HostSource<T, anyhow::Error>) -> anyhow::Result<R>,
    ) -> anyhow::Result<(R, Vec<Unread>)> {
        let (run, hosts) = (self.run.clone(), self.names.len());
        let answer = {
            let this = std::cell::RefCell::new(&mut self);
            let mut first = |i: usize| this.borrow_mut().part(i, |p| map(p, ops, keep));
            let mut read = |i: usize, _again: bool| this.borrow().read_here(i).map(Some);
            let mut extra = |p: &Profile, o: &OverviewPart| Ok(keep(p, o));
            let mut local = fold::Local { read: &mut read, extra: &mut extra, ops };
            reduce(&run, hosts, &mut fold::Premapped { first: &mut first, local: &mut local })?
        };
        load::note_unread(&self.unread, hosts - self.unread.len())?;
        Ok((answer, self.unread))
    }
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
    peaks: UserPeaks,
) -> anyhow::Result<(Judged<()>, Vec<Unread>)> {
    let parts = Parts::open(input, dir, kind(For::Summary, th, peaks, false, (GroupBy::Op, 0)), peaks)?;
    let hosts = parts.names.len();
    let keep = |p: &Profile, o: &OverviewPart| by_host::host_kept(p, o, hosts, th);
    parts.fold::<HostPart<()>, _>(true, &keep, |run, hosts, source| by_host::judged_of(run, hosts, top, th, source))
}

/// The steps (`critical_path`: with theirs) and devices of the run `input` names, from
/// the parts in `dir`, as [`judged_of_parts`] reads them.
pub fn steps_of_parts(
    input: &Input,
    dir: &Path,
    critical_path: bool,
    peaks: UserPeaks,
) -> anyhow::Result<(stepscope_analysis::steps::Steps, stepscope_analysis::devices::Devices)> {
    let kind = kind(For::Steps, &Thresholds::default(), peaks, critical_path, (GroupBy::Op, 0));
    let keep = |p: &Profile, o: &OverviewPart| fold::steps_kept(p, o, critical_path);
    Ok(Parts::open(input, dir, kind, peaks)?.fold(true, &keep, fold::steps_of)?.0)
}

/// The devices of the run `input` names, from the parts in `dir`.
pub fn devices_of_parts(input: &Input, dir: &Path) -> anyhow::Result<stepscope_analysis::devices::Devices> {
    let kind = kind(For::Devices, &Thresholds::default(), UserPeaks::default(), false, (GroupBy::Op, 0));
    let keep = |p: &Profile, _: &OverviewPart| DevicesPart::of(p);
    Ok(Parts::open(input, dir, kind, UserPeaks::default())?.fold(false, &keep, fold::devices_of)?.0)
}

/// The op profile of the run `input` names, grouped `by` (scopes cut at `depth`), from
/// the parts in `dir`: each host's rows summed as the run read here sums them.
pub fn ops_of_parts(input: &Input, dir: &Path, by: GroupBy, depth: usize, peaks: UserPeaks) -> anyhow::Result<Ops> {
    let kind = kind(For::Ops, &Thresholds::default(), peaks, false, (by, depth));
    let mut parts = Parts::open(input, dir, kind, peaks)?;
    let mut rows = OpRowsPart::new(by);
    for i in 0..parts.names.len() {
        if let Some(part) = parts.part(i, |p| OpRowsPart::grouped(p, by, depth))? {
            rows.add(part);
        }
    }
    load::note_unread(&parts.unread, parts.names.len() - parts.unread.len())?;
    Ok(rows.finish())
}

/// The overview of the run `input` names (`top` ops), as `check` reads it, from the
/// parts in `dir`; the hosts left out listed in it.
pub fn overview_of_parts(input: &Input, dir: &Path, top: usize) -> anyhow::Result<stepscope_report::summary::Summary> {
    let kind = kind(For::Check, &Thresholds::default(), UserPeaks::default(), false, (GroupBy::Op, 0));
    let overview = |run: &str, hosts: usize, source: &mut dyn HostSource<(), anyhow::Error>| {
        fold::overview_of(run, hosts, top, source)
    };
    let (overview, unread) = Parts::open(input, dir, kind, UserPeaks::default())?.fold(true, &|_, _| (), overview)?;
    let mut s = stepscope_report::summary::of_overview(overview);
    s.overview.hosts_unread = unread;
    Ok(s)
}

/// The run's steps' span from the `--for diff` parts in `dir` (the hosts the run decides
/// otherwise for read here): what each host's `--for diff-rows` part is cut to.
pub fn side_span_of_parts(input: &Input, dir: &Path) -> anyhow::Result<Option<(i64, i64)>> {
    let parts = Parts::open(
        input,
        dir,
        kind(For::Diff, &Thresholds::default(), UserPeaks::default(), false, (GroupBy::Op, 0)),
        UserPeaks::default(),
    )?;
    let span = |run: &str, hosts: usize, source: &mut dyn HostSource<SideKept, anyhow::Error>| {
        Ok(steps_span(&fold::overview_ops_and_decisions_of(run, hosts, 0, source)?.2))
    };
    Ok(parts.fold(true, &|p, _| side_kept(p), span)?.0)
}

/// What `diff` reads of the run `input` names (its op rows grouped `by`, `top` ops),
/// from the parts in `dir`: `host-I.part` of `--for diff`, `host-I.rows` of `--for
/// diff-rows` (a host with no rows is read a second time here).
pub fn side_of_parts(input: &Input, dir: &Path, want: (GroupBy, usize, bool)) -> anyhow::Result<Side> {
    let first = kind(For::Diff, &Thresholds::default(), UserPeaks::default(), false, (GroupBy::Op, 0));
    let parts = Parts::open(input, dir, first, UserPeaks::default())?;
    // The second reads' parts are checked against the same run and hosts.
    let rows = parts.clone();
    let (by, _, with_kernels) = want;
    let mut second = |source: &mut dyn HostSource<SideKept, anyhow::Error>, i: usize, span: Option<(i64, i64)>| {
        let file = dir.join(format!("host-{i}.rows"));
        if file.exists() {
            return rows.read_part_of(&file, i, &side_rows_kind(by, span, UserPeaks::default())).map(Some);
        }
        Ok(source.read(i)?.map(|p| SideRows::of(&p, by, span, with_kernels)))
    };
    let side = |run: &str, hosts: usize, source: &mut dyn HostSource<SideKept, anyhow::Error>| {
        Side::of_source(run, hosts, want, source, &mut second)
    };
    Ok(parts.fold(true, &|p, _| side_kept(p), side)?.0)
}
