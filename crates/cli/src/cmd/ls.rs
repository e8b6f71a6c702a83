//! `stepscope ls`: the runs in a log directory.

use std::process::ExitCode;
use std::time::UNIX_EPOCH;

use serde::Serialize;
use stepscope_xspace::discover::{self, captured, utc};

use crate::human;
use crate::opts::LsArgs;

#[derive(Serialize)]
struct LsJson<'a> {
    schema: &'static str,
    runs: Vec<RunJson<'a>>,
}

#[derive(Serialize)]
struct RunJson<'a> {
    run: &'a str,
    path: String,
    /// When the capture was taken, as its folder's name says (`jax.profiler.trace`
    /// names it by the capturing machine's local time): `YYYY-MM-DD HH:MM:SS`.
    #[serde(skip_serializing_if = "Option::is_none")]
    captured: Option<String>,
    modified_unix_s: u64,
    hosts: Vec<&'a str>,
    bytes: u64,
    /// The run's `stepscope_manifest.json` (written by the Python package's captures):
    /// its kind, steps, wall-clock timers, options, environment, as written.
    #[serde(skip_serializing_if = "Option::is_none")]
    manifest: Option<serde_json::Value>,
    /// The steps `stepscope steps` finds in it, for a local run of up to
    /// [`COUNT_STEPS_UP_TO_BYTES`] (read to count them).
    #[serde(skip_serializing_if = "Option::is_none")]
    steps: Option<usize>,
}

/// Local runs up to this size are read to count their steps; larger ones (or a
/// bucket's, which `ls` lists without fetching) show the steps their manifest lists.
const COUNT_STEPS_UP_TO_BYTES: u64 = 256 << 20;

/// The steps stepscope finds in `run` (as `steps` does), where it is small enough to
/// read for a listing and readable.
fn step_count(run: &discover::Run) -> Option<usize> {
    if run.bytes() > COUNT_STEPS_UP_TO_BYTES {
        return None;
    }
    let readable = run.load_readable(&stepscope_xspace::Progress::default(), None).ok()?;
    if readable.spaces.is_empty() {
        return None;
    }
    let profile = stepscope_analysis::Profile::new(run.rel.clone(), readable.spaces);
    Some(stepscope_analysis::steps::cached(&profile).steps.len())
}

pub fn run(args: &LsArgs) -> anyhow::Result<ExitCode> {
    // A bucket is listed, not fetched: its runs are found in a folder of empty files
    // standing for its objects, whose paths are shown as the bucket's.
    let listing = crate::remote::Listing::of(&args.logdir)?;
    let runs = crate::remote::Listing::find_runs(listing.as_ref(), &args.logdir)?;
    let path_of = |dir: &std::path::Path| {
        let text = dir.display().to_string();
        listing.as_ref().map_or_else(|| text.clone(), |l| l.shown(&text))
    };
    let rows: Vec<RunJson> = runs
        .iter()
        .map(|r| RunJson {
            run: &r.rel,
            path: path_of(&r.dir),
            captured: captured(&r.rel),
            modified_unix_s: r.modified.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs()),
            hosts: r.hosts.iter().map(|h| h.host.as_str()).collect(),
            bytes: r.bytes(),
            manifest: manifest(&r.dir),
            steps: if listing.is_none() { step_count(r) } else { None },
        })
        .collect();
    if args.output.json {
        outln!("{}", serde_json::to_string(&LsJson { schema: "stepscope.ls/1", runs: rows })?);
        return Ok(ExitCode::SUCCESS);
    }
    if rows.is_empty() {
        anyhow::bail!(
            "no profile found under {} — point at the folder given to jax.profiler.trace (it holds plugins/profile/<run>/<host>.xplane.pb)",
            args.logdir.display()
        );
    }
    if args.output.csv {
        let rows: Vec<Vec<String>> = (rows.iter())
            .map(|r| {
                vec![
                    r.run.to_string(),
                    r.path.clone(),
                    r.captured.clone().unwrap_or_default(),
                    r.modified_unix_s.to_string(),
                    r.hosts.join(" "),
                    r.bytes.to_string(),
                ]
            })
            .collect();
        let header = ["run", "path", "captured", "modified_unix_s", "hosts", "bytes"];
        out!("{}", crate::table::csv(&header, &rows));
        return Ok(ExitCode::SUCCESS);
    }
    // Run names whole, last: they are what `--run` takes (on a line of their own where
    // they do not fit the terminal). The capture time from the
    // run's name, else the files' time.
    let when: Vec<String> =
        rows.iter().map(|r| r.captured.clone().unwrap_or_else(|| format!("{} UTC", utc(r.modified_unix_s)))).collect();
    // As wide as the widest time (a run's own name is 19 characters, a file time 23).
    let w = when.iter().map(|t| t.chars().count()).max().unwrap_or(0).max(19);
    outln!("{:<w$}  {:>5}  {:>9}  {:>5}  RUN", "CAPTURED", "HOSTS", "SIZE", "STEPS");
    for (r, when) in rows.iter().zip(&when) {
        // The steps stepscope finds, else as the manifest lists them.
        let steps = (r.steps.map(|n| n.to_string()))
            .or_else(|| r.manifest.as_ref().and_then(|m| m["step_nums"].as_array().map(|s| s.len().to_string())))
            .unwrap_or_else(|| "—".into());
        let row = format!("{when:<w$}  {:>5}  {:>9}  {steps:>5}", r.hosts.len(), human::bytes(r.bytes));
        // A run too long for the rest of the line goes whole on a line of its own.
        match crate::table::width() {
            Some(width) if row.chars().count() + 2 + r.run.chars().count() > width => outln!("{row}\n    {}", r.run),
            _ => outln!("{row}  {}", r.run),
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The run's `stepscope_manifest.json`, when it has a readable one (a damaged one is
/// noted on stderr and left out).
fn manifest(dir: &std::path::Path) -> Option<serde_json::Value> {
    let path = dir.join("stepscope_manifest.json");
    if !path.is_file() {
        return None;
    }
    let parsed = stepscope_xspace::files::read_small_text(&path, "manifest")
        .map_err(|e| e.to_string())
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).map_err(|e| e.to_string()));
    match parsed {
        Ok(v) if v.is_object() => Some(v),
        Ok(_) => None,
        Err(e) => {
            errln!("stepscope: note: skipped {}: {e}", path.display());
            None
        }
    }
}
