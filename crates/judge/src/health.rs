//! Can this capture be trusted, and for what: one section that checks what every other
//! answer rests on — every host read, no events dropped, the work the steps dispatched
//! inside the capture, host tracing on, enough warm steps, not mostly compilation, op time
//! with its HLO op, the hosts' clocks in step, what the Python tracer cost — and for each
//! check that fails says what it affects and the capture change that fixes it. Findings
//! whose evidence sits in a part that is not healthy are told so ([`judged`]).

use crate::finding::Finding;
use serde::Serialize;
use stepscope_analysis::overview::{ClockSkew, Overview};
use stepscope_xspace::discover::Unread;

/// Whether the capture can be read as the program's steady state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Ok,
    /// Read with care: the check names what it affects.
    Caution,
    /// The answers it affects are not the program's.
    Bad,
}

/// One check of a capture's health.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Check {
    /// `hosts`, `events`, `work`, `host_tracing`, `steps`, `compilation`, `attribution`,
    /// `clocks`, `tracer`.
    pub check: &'static str,
    pub status: Status,
    /// What was found.
    pub what: String,
    /// Which answers it affects (empty where it is ok).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub affects: String,
    /// The capture change that fixes it (empty where it is ok).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub fix: String,
}

/// The capture's health: its worst check's status, and every check.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Health {
    pub status: Status,
    pub checks: Vec<Check>,
}

/// Warm steps below this give no noise estimate (`diff`'s and `compare`'s bar).
pub const MIN_WARM_STEPS: u64 = 5;

/// The health of the capture `o` is the overview of, from it and every finding of it
/// (`advise`'s, before any is cut).
pub fn health(o: &Overview, findings: &[Finding]) -> Health {
    let recompiles = findings.iter().any(|f| f.rule == "recompilation");
    let checks = vec![
        hosts(o),
        events(o, findings),
        work(o),
        host_tracing(o),
        steps(o, recompiles),
        compilation(o, findings),
        attribution(o),
        clocks(o),
        tracer(o),
    ];
    Health { status: checks.iter().map(|c| c.status).max().unwrap_or(Status::Ok), checks }
}

impl Health {
    /// The `hosts` check made again where the run's unread host files became known
    /// after the health was (a run read a host at a time learns them once its hosts
    /// are summed up): `read` files were read, `unread` were not.
    pub fn recheck_hosts(&mut self, read: usize, unread: &[Unread]) {
        for c in self.checks.iter_mut().filter(|c| c.check == "hosts") {
            *c = hosts_check(read, unread);
        }
        self.status = self.checks.iter().map(|c| c.status).max().unwrap_or(Status::Ok);
    }
}

fn check(check: &'static str, status: Status, what: String, affects: &str, fix: &str) -> Check {
    let (affects, fix) = match status {
        Status::Ok => (String::new(), String::new()),
        _ => (affects.to_string(), fix.to_string()),
    };
    Check { check, status, what, affects, fix }
}

fn hosts(o: &Overview) -> Check {
    hosts_check(o.environment.hosts.len(), &o.hosts_unread)
}

fn hosts_check(read: usize, unread: &[Unread]) -> Check {
    match unread.len() {
        0 => check("hosts", Status::Ok, format!("every host's file was read ({read})"), "", ""),
        n => check(
            "hosts",
            Status::Bad,
            format!(
                "{n} host file(s) could not be read: {}",
                unread.iter().map(|u| u.host.as_str()).collect::<Vec<_>>().join(", ")
            ),
            "every number of the run: they are the other hosts' only",
            "capture again, or read the hosts that were written whole (summary --host HOST)",
        ),
    }
}

/// Check `id` made bad by rule `rule`'s finding (its title is what was found), where it
/// fired.
fn bad_by(id: &'static str, findings: &[Finding], rule: &str, affects: &str, fix: &str) -> Option<Check> {
    findings.iter().find(|f| f.rule == rule).map(|f| check(id, Status::Bad, f.title.clone(), affects, fix))
}

fn events(o: &Overview, findings: &[Finding]) -> Check {
    if let Some(f) = findings.iter().find(|f| f.rule == "truncated") {
        let details: Vec<&str> = f.evidence.iter().map(|e| e.detail.as_str()).filter(|d| !d.is_empty()).collect();
        let what = match details.first() {
            Some(d) => format!("{}: {d}", f.title),
            None => f.title.clone(),
        };
        return check(
            "events",
            Status::Bad,
            what,
            "every count and time after the events stop; steps and ops there are missing",
            "read the .xplane.pb (it has every event) rather than the trace JSON, set \
             TF_PROFILER_TRACE_VIEWER_MAX_EVENTS higher when the JSON is written, or capture fewer steps",
        );
    }
    let what = match o.environment.trace_json {
        // A cap below the default one is seen where the Python tracer ran
        // (`facts::truncated`); without it, a capped JSON reads as a shorter capture.
        true => {
            "read from trace JSON: no sign of a cap (one below 1,000,000 events shows only where the \
                 Python tracer ran; the .xplane.pb always has every event)"
        }
        false => "no sign of a capped or dropped trace",
    };
    check("events", Status::Ok, what.into(), "", "")
}

fn work(o: &Overview) -> Check {
    let mut said = Vec::new();
    if o.steps_cut > 0 {
        said.push(format!("{} step(s) cut at the capture's edges (left out of the step time)", o.steps_cut));
    }
    if o.dispatched_not_run > 0 {
        said.push(format!("{} dispatched call(s) had not run when the capture stopped", o.dispatched_not_run));
    }
    if o.launches_not_run > 0 {
        said.push(format!("{} GPU launch(es) had not run when the capture stopped", o.launches_not_run));
    }
    match said.is_empty() {
        true => check("work", Status::Ok, "the work the steps dispatched ran inside the capture".into(), "", ""),
        false => check(
            "work",
            Status::Caution,
            said.join("; "),
            "the device time of the last steps, which the capture holds only part of",
            "block on the last step's result (jax.block_until_ready) before the trace stops",
        ),
    }
}

fn host_tracing(o: &Overview) -> Check {
    match o.environment.host_tracer_level {
        Some(0) => check(
            "host_tracing",
            Status::Bad,
            "host tracing was off (host_tracer_level=0): no steps, dispatches, input or XLA:CPU ops".into(),
            "steps, host-bound gaps, input and every CPU number",
            "capture with host_tracer_level=2 (jax.profiler.ProfileOptions) or the default options",
        ),
        _ => check("host_tracing", Status::Ok, "host tracing was on".into(), "", ""),
    }
}

/// `recompiles`: the program compiles in its steps (`recompilation`): cold steps are its
/// steady state, not the capture's fault.
fn steps(o: &Overview, recompiles: bool) -> Check {
    let warm = o.step_count.saturating_sub(o.cold_steps);
    if o.step_count == 0 {
        // With host tracing off, annotations (host events) were not recorded either.
        let fix = match o.environment.host_tracer_level {
            Some(0) => "turn host tracing on (host_tracing, above): step annotations are host events",
            _ => "wrap each training step in jax.profiler.StepTraceAnnotation(\"train\", step_num=i)",
        };
        return check(
            "steps",
            Status::Bad,
            "no steps found".into(),
            "step time, its breakdown and every what-if projection",
            fix,
        );
    }
    if warm == 0 && recompiles {
        return check(
            "steps",
            Status::Caution,
            format!("all {} step(s) compile: the program recompiles every step (advise: recompilation)", o.step_count),
            "the step time, which holds each step's compilation (the program's steady state while it recompiles)",
            "fix the recompilation (fixed shapes, static arguments), then capture again",
        );
    }
    if warm == 0 {
        return check(
            "steps",
            Status::Bad,
            format!("all {} step(s) are cold (compiled, or the first run after a compile)", o.step_count),
            "step time and every comparison: a first call's, not the steady state's",
            "run the step twice before the capture starts, then capture several steps",
        );
    }
    let t = o.ranked_step_time();
    // The median known within ± this share (two standard errors of the robust spread).
    let spread = 1.4826 * t.mad_ps as f64;
    let within_pct = |n: u64| 200.0 * spread / (n.max(1) as f64).sqrt() / t.median_ps.max(1) as f64;
    let cold = match o.cold_steps {
        0 => String::new(),
        n => format!(" ({n} cold left out)"),
    };
    if warm < MIN_WARM_STEPS {
        // Steps for the median within ±5% at this spread.
        let needed = ((200.0 * spread / (5.0 * t.median_ps.max(1) as f64)).powi(2)).ceil() as u64;
        return check(
            "steps",
            Status::Caution,
            format!("{warm} warm step(s){cold}: too few for a noise estimate"),
            "diff, compare and check cannot tell a change from step-to-step noise",
            &format!("capture at least {} warm steps (after a warm-up step)", needed.max(MIN_WARM_STEPS)),
        );
    }
    check(
        "steps",
        Status::Ok,
        format!("{warm} warm step(s){cold}: the median step is known within ±{:.1}%", within_pct(warm)),
        "",
        "",
    )
}

fn compilation(o: &Overview, findings: &[Finding]) -> Check {
    let pct = o.capture.as_ref().map_or(0.0, |c| c.compile_pct);
    let what = match pct > 0.0 {
        true => format!("compilation is {pct:.1}% of the capture"),
        false => "no compilation in the capture".to_string(),
    };
    bad_by(
        "compilation",
        findings,
        "captured-compilation",
        "the capture's time and utilisation: XLA compiling, not the program running",
        "run the step once before the capture starts (warm-up), so it holds warm steps only",
    )
    .unwrap_or_else(|| check("compilation", Status::Ok, what, "", ""))
}

/// Op time in kernels without an HLO op, at or above this share, is read with caution;
/// at or above [`ATTRIBUTION_BAD_PCT`], the op profile explains less than half the time.
const ATTRIBUTION_CAUTION_PCT: f64 = 5.0;
const ATTRIBUTION_BAD_PCT: f64 = 50.0;

/// How much of the op time has an HLO op behind it (its cost, its source line), and how
/// much ran in command buffers and was credited back to its ops.
fn attribution(o: &Overview) -> Check {
    let a = &o.attribution;
    if a.op_ps == 0 {
        return check("attribution", Status::Ok, "no op time to attribute".into(), "", "");
    }
    let share = |ps: i64| 100.0 * ps as f64 / a.op_ps as f64;
    let (no_hlo, buffers) = (share(a.no_hlo_ps), share(a.command_buffer_ps));
    let credited = match buffers >= 0.05 {
        true => format!(
            "; {buffers:.1}% ran in XLA command buffers and is credited to its HLO ops by kernel name and graph order"
        ),
        false => String::new(),
    };
    let status = match no_hlo {
        p if p >= ATTRIBUTION_BAD_PCT => Status::Bad,
        p if p >= ATTRIBUTION_CAUTION_PCT => Status::Caution,
        _ => Status::Ok,
    };
    let what = match a.no_hlo_ps {
        0 => format!("every op with device time has its HLO op{credited}"),
        _ if o.environment.trace_json => {
            format!("{no_hlo:.1}% of op time has no HLO op behind it: the trace JSON read holds no HLO")
        }
        _ => format!(
            "{no_hlo:.1}% of op time ran in kernels without an HLO op ({}){credited}",
            a.no_hlo_ops.iter().map(|n| short(n)).collect::<Vec<_>>().join(", ")
        ),
    };
    let fix = match o.environment.trace_json {
        true => {
            "trace JSON carries no HLO: read the .xplane.pb JAX writes beside it (the same events, with \
                 each op's HLO)"
        }
        false => {
            "library and runtime kernels (autotuning, cuDNN/MIOpen helpers) have no HLO op: warm up \
                  before the capture for autotuning; for kernels of a jitted program, capture with command \
                  buffers off (XLA_FLAGS=--xla_gpu_enable_command_buffer=) so each kernel names its op"
        }
    };
    check(
        "attribution",
        status,
        what,
        "the op profile's FLOPs, roofline and source lines for that share (by scope and line it has no source)",
        fix,
    )
}

/// A kernel's name without its C++ parameter list (the last bracketed part), at most
/// 48 characters.
fn short(name: &str) -> String {
    let mut bare = name;
    if name.ends_with(')') {
        let mut depth = 0;
        for (i, c) in name.char_indices().rev() {
            depth += match c {
                ')' => 1,
                '(' => -1,
                _ => 0,
            };
            if depth == 0 {
                bare = &name[..i];
                break;
            }
        }
    }
    match bare.chars().count() > 48 {
        true => format!("{}…", bare.chars().take(47).collect::<String>()),
        false => bare.to_string(),
    }
}

/// A host's clock is told apart from the first host's where its skew is this many
/// standard errors of the paired collectives' ends (their spread over √n) …
const SKEW_STANDARD_ERRORS: f64 = 3.0;
/// … and at least this long: under it, a timeline across hosts reads the same.
const SKEW_MIN_PS: i64 = 100_000_000;

/// The Python tracer's cost, at or above this share of the host's step, is read with
/// caution: the host's figures are that much slower than the program's.
const TRACER_CAUTION_PCT: f64 = 5.0;

/// What the Python tracer cost the steps' host time ([`stepscope_analysis::tracer`]).
fn tracer(o: &Overview) -> Check {
    let Some(t) = &o.python_tracer else {
        return check("tracer", Status::Ok, "the Python tracer was off (no Python call traced)".into(), "", "");
    };
    if t.calls_per_step == 0.0 {
        let what = format!("the Python tracer recorded {} call(s), none in the steps", t.calls);
        return check("tracer", Status::Ok, what, "", "");
    }
    let status = match t.cost_pct_of_host_step >= TRACER_CAUTION_PCT {
        true => Status::Caution,
        false => Status::Ok,
    };
    let what = format!(
        "the Python tracer recorded {:.0} calls a step; at about {:.2} µs each it slowed the host by about {} a \
         step ({:.1}% of the host's step)",
        t.calls_per_step,
        stepscope_analysis::tracer::PYTHON_CALL_COST_PS as f64 / 1e6,
        crate::evidence::ms(t.cost_per_step_ps),
        t.cost_pct_of_host_step
    );
    check(
        "tracer",
        status,
        what,
        "host dispatch, input and the host-bound gaps and gaps between steps they leave: overstated by about that \
         (device op times are not)",
        "capture with python_tracer_level=0 (jax.profiler.ProfileOptions; jax.profiler.trace records every Python \
         call by default)",
    )
}

/// The standard error of a skew, the median of n differences of spread σ: 1.2533 σ / √n.
fn error(s: &ClockSkew) -> f64 {
    1.2533 * s.spread_ps as f64 / (s.collectives as f64).sqrt()
}

/// The hosts whose clocks are told apart from the first host's.
fn clocks_off(o: &Overview) -> Vec<&ClockSkew> {
    (o.clock_skews.iter())
        .filter(|s| {
            let skew = s.skew_ps.saturating_abs();
            skew >= SKEW_MIN_PS && skew as f64 > SKEW_STANDARD_ERRORS * error(s)
        })
        .collect()
}

/// The hosts' clocks, from collectives that end together on every host
/// ([`ClockSkew`]).
fn clocks(o: &Overview) -> Check {
    if o.environment.hosts.len() < 2 {
        return check("clocks", Status::Ok, "one host: no clocks to compare".into(), "", "");
    }
    if o.clock_skews.is_empty() {
        let what = "no collectives ran on several hosts to compare their clocks by (they are aligned by their \
                    session starts)";
        return check("clocks", Status::Ok, what.into(), "", "");
    }
    let ms = |ps: i64| format!("{:.3} ms", ps as f64 / 1e9);
    let off = clocks_off(o);
    if off.is_empty() {
        let worst =
            o.clock_skews.iter().map(|s| s.skew_ps.saturating_abs().saturating_add((2.0 * error(s)) as i64)).max();
        let worst = worst.unwrap_or(0);
        let n = o.clock_skews.iter().map(|s| s.collectives).min().unwrap_or(0);
        let what =
            format!("the hosts' clocks agree within {} (from {n} or more collectives that end together)", ms(worst));
        return check("clocks", Status::Ok, what, "", "");
    }
    let said: Vec<String> = (off.iter())
        .map(|s| {
            format!(
                "{}'s clock reads {}{} against {}'s (±{}, {} collectives that end together)",
                s.host,
                if s.skew_ps > 0 { "+" } else { "" },
                ms(s.skew_ps),
                s.against,
                ms((2.0 * error(s)) as i64),
                s.collectives
            ) + &match s.steps_apart_ps {
                Some(apart) => format!(
                    "; its steps start {} from {}'s as read, {} with that corrected",
                    ms(apart),
                    s.against,
                    ms(apart.saturating_sub(s.skew_ps))
                ),
                None => String::new(),
            }
        })
        .collect();
    check(
        "clocks",
        Status::Caution,
        said.join("; "),
        "the timeline across hosts: where one host's events fall against another's (no finding reads one \
         host's clock against another's: stragglers compare work, each host's steps are replayed apart)",
        "keep the hosts' clocks in sync (chrony or PTP) before capturing; read a host's timeline alone (--host HOST)",
    )
}

/// A part of the capture that is not healthy, and which findings' evidence sitting in it
/// is told so ([`caveats`]).
struct Caveat {
    /// The rules it touches; `None`: every rule but those in `except`.
    rules: Option<&'static [&'static str]>,
    except: &'static [&'static str],
    /// The hosts (of a run of several) it is on; `None`: the whole run.
    hosts: Option<Vec<String>>,
    /// The steps it is in; `None`: every step.
    steps: Option<Vec<i64>>,
    /// What a finding is told; `{at}` stands for the hosts or steps its evidence shares
    /// with the part.
    says: String,
}

/// Rules that compare hosts with each other, or read one host's events against
/// another's.
const ACROSS_HOSTS: &[&str] = &["stragglers", "collectives-exposed", "async-waits"];
/// Rules that read the host's time, or the device's idling on it: what a tracer slows.
const HOST_SIDE: &[&str] = &[
    "host-bound-gaps",
    "gaps-between-steps",
    "many-dispatches",
    "runtime-overhead",
    "input-bound",
    "sync-every-step",
    "launch-queued",
    "low-utilization",
];
/// Rules about compilation itself: cold steps are their evidence, not a flaw of it.
const ABOUT_COMPILING: &[&str] = &["recompilation", "compile-time", "captured-compilation", "too-few-steps"];

/// The unhealthy parts of the capture `o` is the overview of, as `health` (made of
/// `findings`) checked it.
fn unhealthy_parts(o: &Overview, health: &Health, findings: &[Finding]) -> Vec<Caveat> {
    let not_ok = |id: &str| health.checks.iter().any(|c| c.check == id && c.status != Status::Ok);
    let several = o.environment.hosts.len() > 1;
    let mut parts = Vec::new();
    if not_ok("events") {
        let hosts: Vec<String> = (findings.iter().filter(|f| f.rule == "truncated"))
            .flat_map(|f| f.evidence.iter().map(|e| e.host.clone()))
            .collect();
        parts.push(Caveat {
            rules: None,
            except: &["truncated"],
            hosts: several.then_some(hosts),
            steps: None,
            says: "its evidence is on a host whose events stop early ({at}; health: events): what came after \
                   is missing from it"
                .into(),
        });
    }
    if !o.cut_step_nums.is_empty() {
        parts.push(Caveat {
            rules: None,
            except: &[],
            hosts: None,
            steps: Some(o.cut_step_nums.clone()),
            says: "step {at} of its evidence is cut: the capture stopped before its device work ran (or began \
                   after), so only part of it is held"
                .into(),
        });
    }
    let recompiles = findings.iter().any(|f| f.rule == "recompilation");
    if !o.cold_step_nums.is_empty() && !recompiles {
        parts.push(Caveat {
            rules: None,
            except: ABOUT_COMPILING,
            hosts: None,
            steps: Some(o.cold_step_nums.clone()),
            says: "step {at} of its evidence is cold (it compiled, or ran first after a compile): a first call's \
                   time, not a warm step's"
                .into(),
        });
    }
    if not_ok("compilation") {
        parts.push(Caveat {
            rules: Some(&["low-utilization", "host-bound-gaps", "gaps-between-steps", "step-jitter"]),
            except: &[],
            hosts: None,
            steps: None,
            says: "the capture is mostly compilation (health: compilation): the time this shares out is mostly \
                   XLA compiling"
                .into(),
        });
    }
    if not_ok("attribution") {
        parts.push(Caveat {
            rules: Some(&["dominant-op", "data-movement"]),
            except: &[],
            hosts: None,
            steps: None,
            says: format!(
                "{:.1}% of op time has no HLO op (health: attribution): that share has no cost or source line",
                100.0 * o.attribution.no_hlo_ps as f64 / o.attribution.op_ps.max(1) as f64
            ),
        });
    }
    if not_ok("clocks") {
        for s in clocks_off(o) {
            let ms = s.skew_ps as f64 / 1e9;
            parts.push(Caveat {
                rules: Some(ACROSS_HOSTS),
                except: &[],
                hosts: Some(vec![s.host.clone()]),
                steps: None,
                says: format!(
                    "its evidence is on {{at}}, whose clock reads {}{ms:.3} ms against {}'s (health: clocks): where \
                     its events fall against the other hosts' is off by that",
                    if ms > 0.0 { "+" } else { "" },
                    s.against
                ),
            });
        }
    }
    if let (true, Some(t)) = (not_ok("tracer"), &o.python_tracer) {
        parts.push(Caveat {
            rules: Some(HOST_SIDE),
            except: &[],
            hosts: None,
            steps: None,
            says: format!(
                "the Python tracer slowed the host by about {} a step (health: tracer): the host's share here is \
                 overstated by up to that",
                crate::evidence::ms(t.cost_per_step_ps)
            ),
        });
    }
    parts
}

/// Each of `findings` told where its evidence sits in an unhealthy part of the capture
/// (its [`Finding::caveats`], made anew), by the health it was judged with.
fn add_caveats(parts: &[Caveat], findings: &mut [Finding]) {
    for f in findings {
        f.caveats.clear();
        for p in parts {
            let touched = match p.rules {
                Some(rules) => rules.contains(&f.rule),
                None => !p.except.contains(&f.rule),
            };
            if !touched {
                continue;
            }
            let mut at: Vec<String> = Vec::new();
            if let Some(hosts) = &p.hosts {
                at = hosts.iter().filter(|h| f.evidence.iter().any(|e| &e.host == *h)).cloned().collect();
                at.dedup();
                if at.is_empty() {
                    continue;
                }
            }
            if let Some(steps) = &p.steps {
                let mut nums: Vec<i64> =
                    (f.evidence.iter()).filter_map(|e| e.step_num).filter(|n| steps.binary_search(n).is_ok()).collect();
                nums.sort_unstable();
                nums.dedup();
                if nums.is_empty() {
                    continue;
                }
                at = nums.iter().map(|n| n.to_string()).collect();
            }
            f.caveats.push(p.says.replace("{at}", &at.join(", ")));
        }
    }
}

/// The health of the capture `o` is the overview of ([`health`]), with each of
/// `findings` told where its evidence sits in a part of the capture that is not
/// healthy ([`Finding::caveats`]).
pub fn judged(o: &Overview, findings: &mut [Finding]) -> Health {
    let h = health(o, findings);
    add_caveats(&unhealthy_parts(o, &h, findings), findings);
    h
}
