//! `stepscope._native`: the Rust core for Python. Loads a profile the way the CLI does
//! and returns each analysis as the JSON text `stepscope <cmd> --json` prints; the
//! pure-Python package (`python/stepscope`) parses it into lists and dicts.

use std::path::PathBuf;

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use serde::Serialize;

use stepscope_analysis::ops::GroupBy;
use stepscope_analysis::peaks::UserPeaks;
use stepscope_analysis::{buffers, hlo_graph, kernels, memory, ops, roofline, scopes, steps, timeline, whatif};
use stepscope_judge::advise::{self, Thresholds};
use stepscope_report::{diff, summary};
use stepscope_xspace::pprof;

create_exception!(_native, StepscopeError, PyException, "A profile that cannot be read or analysed.");

/// The error as the CLI prints it after `stepscope: `.
fn err(e: impl std::fmt::Display) -> PyErr {
    StepscopeError::new_err(format!("{e:#}"))
}

/// A decoded run, ready for analyses.
#[pyclass(module = "stepscope._native", frozen)]
struct Profile {
    inner: stepscope_analysis::Profile,
    /// The device-memory pprof found beside the run, if any.
    pprof: Option<PathBuf>,
}

/// Runs `analysis` of `profiles` without the GIL and serializes its result to JSON;
/// an error where a profile's file changed under it (a new capture copied over it),
/// since the analysis then read zeros where the profile was.
fn analyse<T: Serialize>(
    py: Python<'_>,
    profiles: &[&stepscope_analysis::Profile],
    analysis: impl FnOnce() -> T + Send,
) -> PyResult<String> {
    let json = py.detach(|| serde_json::to_string(&analysis())).map_err(err)?;
    for p in profiles {
        if let Some(host) = p.changed_hosts().first() {
            return Err(StepscopeError::new_err(format!(
                "the profile of host {host} in {} changed while it was read (a copy over it was under way) — \
                 load it again with stepscope.load once the file is written whole",
                p.run
            )));
        }
    }
    Ok(json)
}

#[pymethods]
impl Profile {
    /// The run's name, as the CLI prints it.
    #[getter]
    fn run(&self) -> String {
        self.inner.run.clone()
    }

    /// The hosts kept (one per profile file).
    #[getter]
    fn hosts(&self) -> Vec<String> {
        self.inner.hosts.iter().map(|s| s.host.clone()).collect()
    }

    /// `stepscope steps --json`.
    fn steps_json(&self, py: Python<'_>) -> PyResult<String> {
        analyse(py, &[&self.inner], || steps::steps(&self.inner))
    }

    /// `stepscope scopes --json`.
    fn scopes_json(&self, py: Python<'_>) -> PyResult<String> {
        analyse(py, &[&self.inner], || scopes::scopes(&self.inner))
    }

    /// `stepscope summary --json --top TOP`.
    fn summary_json(&self, py: Python<'_>, top: usize) -> PyResult<String> {
        analyse(py, &[&self.inner], || summary::summary(&self.inner, rows(Some(top))))
    }

    /// `stepscope ops --json --by BY --depth DEPTH [--top TOP]` (every row when `top` is None).
    #[pyo3(signature = (by, depth, top=None))]
    fn ops_json(&self, py: Python<'_>, by: &str, depth: usize, top: Option<usize>) -> PyResult<String> {
        let by = GroupBy::parse(by).map_err(StepscopeError::new_err)?;
        analyse(py, &[&self.inner], || {
            let mut r = ops::ops(&self.inner, by, depth);
            r.ops.truncate(rows(top));
            r
        })
    }

    /// `stepscope roofline --json [--top TOP]` (every op when `top` is None).
    #[pyo3(signature = (top=None))]
    fn roofline_json(&self, py: Python<'_>, top: Option<usize>) -> PyResult<String> {
        analyse(py, &[&self.inner], || {
            let mut r = roofline::roofline(&self.inner);
            r.ops.truncate(rows(top));
            r
        })
    }

    /// `stepscope kernels --json [--top TOP]` (every kernel when `top` is None).
    #[pyo3(signature = (top=None))]
    fn kernels_json(&self, py: Python<'_>, top: Option<usize>) -> PyResult<String> {
        analyse(py, &[&self.inner], || {
            let mut k = kernels::kernels(&self.inner);
            k.kernels.truncate(rows(top));
            k
        })
    }

    /// `stepscope memory --json --top TOP [--pprof FILE]` (default: the pprof found
    /// beside the run).
    #[pyo3(signature = (top, pprof=None))]
    fn memory_json(&self, py: Python<'_>, top: usize, pprof: Option<PathBuf>) -> PyResult<String> {
        let path = pprof.or_else(|| self.pprof.clone());
        py.detach(|| {
            let pp = path.as_ref().map(|p| pprof::read_pprof(p)).transpose().map_err(err)?;
            let shown = path.as_ref().map(|p| p.display().to_string()).unwrap_or_default();
            let m = memory::memory(&self.inner, pp.as_ref().map(|p| (shown.as_str(), p)), rows(Some(top)));
            serde_json::to_string(&m).map_err(err)
        })
    }

    /// `stepscope buffers --json [--program P] [--memory-space N] [--top TOP]` (every
    /// buffer when `top` is None).
    #[pyo3(signature = (program, memory_space, top=None))]
    fn buffers_json(
        &self,
        py: Python<'_>,
        program: Option<String>,
        memory_space: i64,
        top: Option<usize>,
    ) -> PyResult<String> {
        py.detach(|| {
            let b = buffers::buffers(&self.inner, program.as_deref(), memory_space, top.unwrap_or(0))
                .map_err(|m| StepscopeError::new_err(m.message(program.as_deref().unwrap_or(""))))?;
            serde_json::to_string(&b).map_err(err)
        })
    }

    /// `stepscope hlo OP --graph --json [--module M] [--depth N]`.
    #[pyo3(signature = (op, module, depth))]
    fn hlo_graph_json(&self, py: Python<'_>, op: String, module: Option<String>, depth: u32) -> PyResult<String> {
        py.detach(|| {
            let g = hlo_graph::graph(&self.inner, &op, module.as_deref(), depth).ok_or_else(|| {
                StepscopeError::new_err(format!(
                    "no HLO instruction named {op:?} in this run's modules — list op names with ops()"
                ))
            })?;
            serde_json::to_string(&g).map_err(err)
        })
    }

    /// `stepscope advise --json`; `thresholds` is a JSON object of overrides.
    #[pyo3(signature = (thresholds=None))]
    fn advise_json(&self, py: Python<'_>, thresholds: Option<String>) -> PyResult<String> {
        let th: Thresholds = match thresholds {
            Some(t) => serde_json::from_str(&t).map_err(|e| {
                StepscopeError::new_err(format!(
                    "bad thresholds: {e} — use the names listed under \"thresholds\" in advise()"
                ))
            })?,
            None => Thresholds::default(),
        };
        th.check().map_err(|e| StepscopeError::new_err(format!("bad thresholds: {e}")))?;
        let (file, loaded) = (th.peaks(), self.inner.user_peaks());
        let differs = |a: Option<f64>, b: Option<f64>| a.is_some() && a != b;
        if differs(file.flops_per_s, loaded.flops_per_s) || differs(file.bytes_per_s, loaded.bytes_per_s) {
            return Err(StepscopeError::new_err(
                "peaks are the profile's: pass them to load(path, peak_flops=..., peak_bandwidth=...), not to advise()",
            ));
        }
        analyse(py, &[&self.inner], || advise::advise(&self.inner, &th))
    }

    /// `stepscope whatif --json EDIT`: `edit` in the CLI's words (a finding's
    /// `gain_edit`: `--remove callbacks`, `--scale dot.1=0.5`).
    fn whatif_json(&self, py: Python<'_>, edit: String) -> PyResult<String> {
        let e = whatif::Edit::parse(&edit).map_err(|m| StepscopeError::new_err(format!("bad edit {edit:?}: {m}")))?;
        if e.is_empty() {
            return Err(StepscopeError::new_err(
                "no change given — pass one: whatif(\"--remove compile\"), whatif(\"--scale dot.1=0.5\"), \
                 whatif(\"--jit\"); a finding's gain_edit is one",
            ));
        }
        if let Some(t) = whatif::unknown_targets(&self.inner, &e).first() {
            let by = t.listed_by().map(|by| format!("by={by:?}")).unwrap_or_default();
            return Err(StepscopeError::new_err(format!(
                "no {} ran in this run — ops({by}) lists the names",
                t.what()
            )));
        }
        analyse(py, &[&self.inner], || whatif::project(&self.inner, &e))
    }

    /// One window of the timeline, whole: the tracks with events in
    /// `[start_ps, end_ps)` (the run's span where `None`), each with its boxes drawn `px`
    /// wide (`stepscope.timeline_window/1`), for a picture drawn in the notebook itself.
    #[pyo3(signature = (start_ps=None, end_ps=None, px=1000, max_rows=4, max_tracks=24))]
    fn timeline_window_json(
        &self,
        py: Python<'_>,
        start_ps: Option<i64>,
        end_ps: Option<i64>,
        px: u32,
        max_rows: usize,
        max_tracks: usize,
    ) -> PyResult<String> {
        let window = py.detach(|| {
            let t = timeline::Timeline::build(&self.inner);
            t.window(&self.inner, (start_ps, end_ps), px, max_rows, max_tracks)
        });
        let window = window.map_err(StepscopeError::new_err)?;
        analyse(py, &[&self.inner], || window)
    }

    fn __repr__(&self) -> String {
        format!("<stepscope Profile run={:?} hosts={:?}>", self.inner.run, self.hosts())
    }
}

/// Resolves `path` (a log directory, run folder or profile file), reads the run (the
/// newest, or `run`) and keeps only `host` when given, exactly as the CLI does.
#[pyfunction]
#[pyo3(signature = (path, run=None, host=None, peak_flops=None, peak_bandwidth=None))]
fn load(
    py: Python<'_>,
    path: PathBuf,
    run: Option<String>,
    host: Option<String>,
    peak_flops: Option<f64>,
    peak_bandwidth: Option<f64>,
) -> PyResult<Profile> {
    for (name, v) in [("peak_flops", peak_flops), ("peak_bandwidth", peak_bandwidth)] {
        if v.is_some_and(|v| !(v.is_finite() && v > 0.0)) {
            return Err(StepscopeError::new_err(format!("{name} must be a positive rate per second, e.g. 3.5e12")));
        }
    }
    let (mut inner, run) = py.detach(|| stepscope::load_run(path, run, host)).map_err(err)?;
    inner.set_peaks(UserPeaks { flops_per_s: peak_flops, bytes_per_s: peak_bandwidth });
    Ok(Profile { inner, pprof: run.pprof.first().cloned() })
}

/// How many rows `top` asks for: every row for `None` or 0, as the CLI's `--top 0`.
fn rows(top: Option<usize>) -> usize {
    match top {
        None | Some(0) => usize::MAX,
        Some(n) => n,
    }
}

/// `stepscope diff A B --json --top TOP --by BY` for two loaded profiles.
#[pyfunction]
#[pyo3(signature = (a, b, top, by="op"))]
fn diff_json(py: Python<'_>, a: &Profile, b: &Profile, top: usize, by: &str) -> PyResult<String> {
    let by = GroupBy::parse(by).map_err(StepscopeError::new_err)?;
    analyse(py, &[&a.inner, &b.inner], || {
        let mut d = diff::diff_by(&a.inner, &b.inner, by);
        d.truncate(rows(Some(top)));
        d
    })
}

/// Runs the `stepscope` command line (`argv[0]` is the program name) and returns
/// its exit code.
#[pyfunction]
fn cli_main(py: Python<'_>, argv: Vec<std::ffi::OsString>) -> i32 {
    use std::io::Write;
    stepscope::quiet_on_closed_stdout();
    let code = py.detach(|| stepscope::run_args(argv));
    // Rust's stdout is flushed at exit only in a Rust `main`; here Python exits.
    let _ = std::io::stdout().flush();
    i32::from(code)
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("StepscopeError", m.py().get_type::<StepscopeError>())?;
    m.add_class::<Profile>()?;
    m.add_function(wrap_pyfunction!(load, m)?)?;
    m.add_function(wrap_pyfunction!(cli_main, m)?)?;
    m.add_function(wrap_pyfunction!(diff_json, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
