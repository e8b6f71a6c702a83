//! Judgement: rules that read the analyses and say what is wrong, with the measured
//! value, the threshold it crossed, evidence (the worst steps, ops, gaps, with times),
//! and what to do about it.
//!
//! Rules (ids are stable; thresholds are fields of [`Thresholds`]):
//! `no-steps`, `too-few-steps`, `captured-compilation`, `compile-time`,
//! `host-tracing-off`, `no-device-activity`, `low-utilization`, `host-bound-gaps`, `launch-queued`,
//! `gaps-between-steps`, `input-bound`,
//! `many-small-ops`, `many-dispatches`,
//! `host-device-copies`, `dominant-op`, `collectives-exposed`, `memory-near-capacity`,
//! `memory-bandwidth`, `step-jitter`, `stragglers`, `truncated`.

use serde::{Deserialize, Serialize};

use crate::cache::FastMap;
use crate::collectives::{self, pct};
use crate::compile;
use crate::device_time::Part;
use crate::devices;
use crate::memory;
use crate::ops::{self, GroupBy};
use crate::profile::{host_cpu_plane, OpSource, Profile};
use crate::stats::{sum_ps, Intervals};
use crate::steps::{self, Steps};
use crate::summary::{self, Summary};

/// Memory-bound ops below peak bandwidth are a warning when they take this share of
/// op time, percent (a note below it).
const MEMORY_BOUND_TIME_PCT: f64 = 10.0;

/// Why a profile may hold no device ops, and what to do: for the `no-device-activity`
/// rule and the commands that find no op.
pub const NO_OPS_WHY: &str = "On CPU, XLA records its ops from JAX 0.4.33 on (0.4.31 and earlier record none): \
     upgrade jax and jaxlib. On a GPU or TPU, the device tracer recorded nothing: look for profiler errors in the \
     job's log (for CUPTI_ERROR_INSUFFICIENT_PRIVILEGES, allow GPU profiling for non-root users)";

/// Why a capture taken with host tracing off lacks what it lacks.
pub const HOST_TRACING_OFF: &str = "This capture was taken with host_tracer_level=0: the host recorded no step \
     annotations (StepTraceAnnotation), no kernel launches and, on CPU, no XLA ops. Capture with \
     host_tracer_level ≥ 1 (JAX's default is 2): the annotations in the code are fine";

/// Rule thresholds; any may be overridden from a TOML file (`[thresholds]` table or
/// top-level keys with these names).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Thresholds {
    /// Device utilisation below this is low, percent.
    pub utilization_pct: f64,
    /// Device idle (not compiling, not copying) above this share of the step, percent.
    pub host_overhead_pct: f64,
    /// Device idle with launched work not started above this share of the step, percent.
    pub launch_queued_pct: f64,
    /// Compile time above this, seconds.
    pub compile_s: f64,
    /// Ops shorter than this are "small", µs.
    pub small_op_us: f64,
    /// Small ops above this share of op executions, percent…
    pub small_op_share_pct: f64,
    /// …and above this share of op time, percent.
    pub small_op_time_pct: f64,
    /// More XLA program launches per step than this (each is a host dispatch).
    pub dispatches_per_step: f64,
    /// Host↔device copies above this share of the step, percent.
    pub copies_pct: f64,
    /// One op above this share of op time, percent.
    pub dominant_op_pct: f64,
    /// Exposed collective time above this share of the step, percent.
    pub collectives_exposed_pct: f64,
    /// Devices waiting on async copies (`copy-done`) above this share of the step, percent.
    pub async_wait_pct: f64,
    /// XLA:CPU runtime time between the ops of a program above this share of the step, percent.
    pub runtime_overhead_pct: f64,
    /// Memory peak above this share of the allocator's capacity, percent.
    pub memory_capacity_pct: f64,
    /// Achieved bandwidth of memory-bound ops below this share of peak, percent.
    pub memory_bandwidth_pct: f64,
    /// Slow steps: p90 step time above the median by more than this, percent.
    pub step_jitter_pct: f64,
    /// Device idle before a step's first op above this share of the step, percent.
    pub input_bound_pct: f64,
    /// Fewer steps than this cannot be judged.
    pub min_steps: u64,
    /// A device computing this much longer than its peers' median, percent.
    pub straggler_pct: f64,
    /// The devices' peak compute, FLOP/s, where the profile has none (a CPU) or you
    /// know better ([`crate::peaks`]); applied with [`Thresholds::peaks`].
    pub peak_flops_per_s: Option<f64>,
    /// The devices' peak memory bandwidth, bytes/s.
    pub peak_bytes_per_s: Option<f64>,
}

impl Thresholds {
    /// The peaks this file gives, for [`Profile::set_peaks`] (before analysing).
    pub fn peaks(&self) -> crate::peaks::UserPeaks {
        crate::peaks::UserPeaks { flops_per_s: self.peak_flops_per_s, bytes_per_s: self.peak_bytes_per_s }
    }
}

impl Default for Thresholds {
    fn default() -> Thresholds {
        Thresholds {
            utilization_pct: 80.0,
            host_overhead_pct: 10.0,
            launch_queued_pct: 10.0,
            compile_s: 2.0,
            small_op_us: 10.0,
            small_op_share_pct: 50.0,
            small_op_time_pct: 20.0,
            dispatches_per_step: 20.0,
            copies_pct: 10.0,
            dominant_op_pct: 50.0,
            collectives_exposed_pct: 10.0,
            async_wait_pct: 20.0,
            runtime_overhead_pct: 10.0,
            memory_capacity_pct: 90.0,
            memory_bandwidth_pct: 60.0,
            step_jitter_pct: 20.0,
            input_bound_pct: 20.0,
            min_steps: 3,
            straggler_pct: devices::STRAGGLER_EXCESS_PCT,
            peak_flops_per_s: None,
            peak_bytes_per_s: None,
        }
    }
}

/// How bad a finding is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Critical,
    Warning,
    Info,
}

/// One piece of evidence: what, where in the timeline, how long.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Evidence {
    pub what: String,
    pub host: String,
    pub start_ps: Option<i64>,
    pub duration_ps: Option<i64>,
    /// e.g. the step number.
    pub step_num: Option<i64>,
    pub detail: String,
}

/// One finding of a rule.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Finding {
    pub rule: &'static str,
    pub severity: Severity,
    pub title: String,
    pub value: f64,
    pub threshold: f64,
    /// Unit of `value` and `threshold` (`pct`, `s`, `count`, `us`).
    pub unit: &'static str,
    pub evidence: Vec<Evidence>,
    pub advice: String,
}

/// All findings of a run.
#[derive(Clone, Debug, Serialize)]
pub struct Advice {
    pub schema: &'static str,
    pub run: String,
    pub thresholds: Thresholds,
    /// Most severe first, then by how far past the threshold.
    pub findings: Vec<Finding>,
}

/// Runs every rule.
pub fn advise(profile: &Profile, th: &Thresholds) -> Advice {
    let (s, inputs) = summary::overview_and_inputs(profile, 10);
    Advice {
        schema: "stepscope.advise/1",
        run: profile.run.clone(),
        thresholds: th.clone(),
        findings: findings_with(profile, &s, th, &inputs),
    }
}

/// The analyses the rules read besides the overview, computed side by side.
pub(crate) struct Inputs {
    compile: compile::Compile,
    collectives: collectives::Collectives,
    devices: devices::Devices,
    memory: memory::Memory,
    steps: StepPasses,
}

/// What the rules read off every device's timeline against the steps.
struct StepPasses {
    /// (index into the steps, ps) for each step: how long it waited for its first op.
    leading_idle: Vec<(usize, i64)>,
    /// XLA programs launched per step, and per module.
    dispatches: (f64, Vec<(String, f64)>),
}

impl Inputs {
    pub(crate) fn gather(profile: &Profile) -> Inputs {
        profile.prepare();
        let (memory, (compile, (collectives, devices), steps)) =
            rayon::join(|| memory::memory(profile, None, 3), || Inputs::others(profile));
        Inputs { compile, collectives, devices, memory, steps }
    }

    /// The inputs, the memory analysis already made.
    pub(crate) fn gather_with(profile: &Profile, memory: memory::Memory) -> Inputs {
        let (compile, (collectives, devices), steps) = Inputs::others(profile);
        Inputs { compile, collectives, devices, memory, steps }
    }

    /// All but the memory analysis, side by side: the two passes over the devices'
    /// timelines against the steps beside the compile, collectives and devices
    /// analyses.
    fn others(profile: &Profile) -> (compile::Compile, (collectives::Collectives, devices::Devices), StepPasses) {
        let steps = steps::cached(profile);
        let ((compile, (leading_idle, dispatches)), analyses) = rayon::join(
            || {
                rayon::join(
                    || compile::compile(profile),
                    || rayon::join(|| leading_idle(profile, steps), || dispatches_per_step(profile, steps)),
                )
            },
            || rayon::join(|| collectives::collectives(profile), || devices::devices(profile)),
        );
        (compile, analyses, StepPasses { leading_idle, dispatches })
    }
}

fn ev(what: impl Into<String>, host: &str) -> Evidence {
    Evidence {
        what: what.into(),
        host: host.to_string(),
        start_ps: None,
        duration_ps: None,
        step_num: None,
        detail: String::new(),
    }
}

fn at(mut e: Evidence, start_ps: i64, duration_ps: i64) -> Evidence {
    e.start_ps = Some(start_ps);
    e.duration_ps = Some(duration_ps);
    e
}

fn ms(ps: i64) -> String {
    format!("{:.3} ms", ps as f64 / 1e9)
}

/// The findings for a run whose overview is `s` (rules share its numbers).
pub fn findings(profile: &Profile, s: &Summary, th: &Thresholds) -> Vec<Finding> {
    findings_with(profile, s, th, &Inputs::gather(profile))
}

/// [`findings`] with the other analyses already made.
pub(crate) fn findings_with(profile: &Profile, s: &Summary, th: &Thresholds, inputs: &Inputs) -> Vec<Finding> {
    let steps = steps::cached(profile);
    let (dispatches, by_module) = (inputs.steps.dispatches.0, &inputs.steps.dispatches.1);
    let mut out = Vec::new();
    let b = &s.breakdown;
    let step_pct = |ps: i64| pct(ps, b.step_ps);

    // --- steps present, enough of them, steady state
    let host_tracing_off = summary::host_tracer_level(profile) == Some(0);
    if steps.steps.is_empty() {
        out.push(Finding {
            rule: "no-steps",
            severity: Severity::Warning,
            title: "no training steps found".into(),
            value: 0.0,
            threshold: 1.0,
            unit: "count",
            evidence: vec![],
            advice: match host_tracing_off {
                true => HOST_TRACING_OFF.into(),
                false => "wrap each training step in `with jax.profiler.StepTraceAnnotation(\"train\", step_num=i):` \
                          so step time and the breakdown can be measured"
                    .into(),
            },
        });
    } else if host_tracing_off {
        out.push(Finding {
            rule: "host-tracing-off",
            severity: Severity::Info,
            title: "host tracing was off (host_tracer_level=0)".into(),
            value: 0.0,
            threshold: 1.0,
            unit: "count",
            evidence: vec![],
            advice: format!(
                "the steps come from {} instead of the step annotations, and what the host did between device \
                 work (Python, input, launches) was not recorded: the host-side findings cannot be judged. {}",
                crate::steps::source_words(steps.source),
                HOST_TRACING_OFF
            ),
        });
    }
    if !steps.steps.is_empty() && (steps.steps.len() as u64) < th.min_steps {
        out.push(Finding {
            rule: "too-few-steps",
            severity: Severity::Warning,
            title: format!("only {} step(s) captured", steps.steps.len()),
            value: steps.steps.len() as f64,
            threshold: th.min_steps as f64,
            unit: "count",
            evidence: vec![],
            advice: format!(
                "capture at least {} steady-state steps (e.g. steps 100–105) so averages mean something",
                th.min_steps
            ),
        });
    }
    let compiled_in_steps: Vec<&steps::Step> = steps.steps.iter().filter(|st| st.compile_ps > 0).collect();
    if !compiled_in_steps.is_empty() {
        let total = sum_ps(compiled_in_steps.iter().map(|st| st.compile_ps));
        out.push(Finding {
            rule: "captured-compilation",
            severity: Severity::Warning,
            title: format!("{} step(s) include XLA compilation ({})", compiled_in_steps.len(), ms(total)),
            value: step_pct(total / steps.steps.len().max(1) as i64),
            threshold: 0.0,
            unit: "pct",
            evidence: compiled_in_steps
                .iter()
                .take(3)
                .map(|st| {
                    let mut e = at(
                        ev(format!("step {} compiles for {}", st.step_num, ms(st.compile_ps)), &st.host),
                        st.start_ps,
                        st.duration_ps,
                    );
                    e.step_num = Some(st.step_num);
                    e
                })
                .collect(),
            advice: "the capture includes compilation, not the steady state: run a few warm-up steps before \
                     starting the trace (or start it at step 100), and check shapes/static args don't change per step"
                .into(),
        });
    }
    let comp = &inputs.compile;
    let compile_s = comp.total_ps as f64 / 1e12;
    if compile_s > th.compile_s {
        out.push(Finding {
            rule: "compile-time",
            severity: Severity::Warning,
            title: format!("XLA compilation took {compile_s:.2} s"),
            value: compile_s,
            threshold: th.compile_s,
            unit: "s",
            evidence: comp
                .compiles
                .iter()
                .take(3)
                .map(|c| at(ev(format!("compile of {}", or_unknown(&c.module)), &c.host), c.start_ps, c.total_ps))
                .collect(),
            advice: "cache compilations across runs (jax.config.update('jax_compilation_cache_dir', …)), avoid \
                     recompiles from changing shapes or Python scalars passed as static args"
                .into(),
        });
    }
    // --- no device time at all: the rules that read it cannot judge
    let device_time = !profile.devices().is_empty();
    if !device_time {
        out.push(Finding {
            rule: "no-device-activity",
            severity: Severity::Warning,
            title: "no device activity recorded (no device planes or ops)".into(),
            value: 0.0,
            threshold: 1.0,
            unit: "count",
            evidence: vec![],
            advice: match host_tracing_off {
                true => format!("device time, the step breakdown and the op tables need them. {HOST_TRACING_OFF}"),
                false => format!("device time, the step breakdown and the op tables need them. {NO_OPS_WHY}"),
            },
        });
    }
    if steps.steps.is_empty() {
        finish(&mut out);
        return out;
    }

    // --- utilisation and where the idle time goes
    if device_time && s.device_utilization_pct < th.utilization_pct {
        let mut worst: Vec<&steps::Step> = steps.steps.iter().collect();
        worst.sort_by_key(|st| std::cmp::Reverse(st.device_idle_ps));
        out.push(Finding {
            rule: "low-utilization",
            severity: if s.device_utilization_pct < th.utilization_pct / 2.0 {
                Severity::Critical
            } else {
                Severity::Warning
            },
            title: format!("devices are busy {:.1}% of the step", s.device_utilization_pct),
            value: s.device_utilization_pct,
            threshold: th.utilization_pct,
            unit: "pct",
            evidence: worst
                .iter()
                .take(3)
                .map(|st| {
                    let mut e = at(
                        ev(format!("step {}: device idle {}", st.step_num, ms(st.device_idle_ps)), &st.host),
                        st.start_ps,
                        st.duration_ps,
                    );
                    e.step_num = Some(st.step_num);
                    e
                })
                .collect(),
            advice: "see the rules below for where the idle time goes (host work, copies, compile); larger batches \
                     or fusing more work per jitted step raise utilisation"
                .into(),
        });
    }
    // Where kernels are linked to their launches, idle in which launched work had not
    // started is not the host's doing: it has its own rule. So has idle while the host
    // did recorded input work (`input-bound`).
    let queued_ps = b.device_idle_queued_ps.unwrap_or(0);
    let input_ps = b.device_idle_input_ps.unwrap_or(0);
    let host_overhead = step_pct((b.device_idle_ps - queued_ps - input_ps).max(0));
    if device_time && host_overhead > th.host_overhead_pct {
        out.push(Finding {
            rule: "host-bound-gaps",
            severity: if host_overhead > 3.0 * th.host_overhead_pct { Severity::Critical } else { Severity::Warning },
            title: format!("the device waits on the host {host_overhead:.1}% of the step"),
            value: host_overhead,
            threshold: th.host_overhead_pct,
            unit: "pct",
            evidence: {
                let mut evidence = idle_gaps(profile, steps, 3);
                if let Some(launching) = b.device_idle_launching_ps.filter(|&l| l > 0) {
                    let what = format!(
                        "of the mean step's idle {}, {} with the host inside launch calls (cuLaunchKernel, \
                         cuGraphLaunch) of work not started",
                        ms(b.device_idle_ps),
                        ms(launching)
                    );
                    evidence.insert(0, ev(what, ""));
                }
                if input_ps > 0 {
                    let what = format!(
                        "not counted: {} of the mean step's idle {} with the host loading input (input-bound)",
                        ms(input_ps),
                        ms(b.device_idle_ps)
                    );
                    evidence.insert(0, ev(what, ""));
                }
                evidence
            },
            advice: "the host is the bottleneck between device work: move Python work (logging, metrics, data \
                     preparation, `float(loss)` syncs) out of the step, prefetch input, and dispatch the next step \
                     before blocking on this one's result"
                .into(),
        });
    }
    let queued = step_pct(queued_ps);
    if device_time && queued > th.launch_queued_pct {
        let model = crate::device_time::device_time(profile);
        let evidence = (profile.devices().iter().zip(&model.devices))
            .filter_map(|(d, t)| Some((d, t, t.idle_queued_ps.filter(|&q| q > 0)?)))
            .take(3)
            .map(|(d, t, q)| {
                ev(
                    format!(
                        "{}: idle {} of its {} window, {} of it with launched work not started",
                        d.name,
                        ms(t.part_ps(Part::Idle)),
                        ms(t.window_ps()),
                        ms(q)
                    ),
                    d.host,
                )
            })
            .collect();
        out.push(Finding {
            rule: "launch-queued",
            severity: Severity::Warning,
            title: format!("launched work waits to start {queued:.1}% of the step"),
            value: queued,
            threshold: th.launch_queued_pct,
            unit: "pct",
            evidence,
            advice: "the host had launched the work but the device had not started it: each kernel launch costs \
                     microseconds, which many small kernels add up (fuse ops, keep XLA's command buffers — CUDA \
                     graphs — on), or kernels waited on a dependency: a host callback, a copy from pageable host \
                     memory, another stream. `stepscope steps PATH` shows the work each step launched"
                .into(),
        });
    }
    let between = between_steps(steps);
    let span: i64 = {
        let lo = steps.steps.iter().map(|s| s.start_ps).min().unwrap_or(0);
        let hi = steps.steps.iter().map(|s| s.end_ps()).max().unwrap_or(0);
        hi.saturating_sub(lo)
    };
    let between_pct = pct(sum_ps(between.iter().map(|g| g.1)), span);
    if between_pct > th.host_overhead_pct {
        let mut worst = between.clone();
        worst.sort_by_key(|g| std::cmp::Reverse(g.1));
        out.push(Finding {
            rule: "gaps-between-steps",
            severity: if between_pct > 3.0 * th.host_overhead_pct { Severity::Critical } else { Severity::Warning },
            title: format!("{between_pct:.1}% of the time passes between steps"),
            value: between_pct,
            threshold: th.host_overhead_pct,
            unit: "pct",
            evidence: worst
                .iter()
                .take(3)
                .map(|(st, gap)| {
                    let mut e = at(
                        ev(format!("after step {}: {} until the next", st.step_num, ms(*gap)), &st.host),
                        st.end_ps(),
                        *gap,
                    );
                    e.step_num = Some(st.step_num);
                    e.detail = host_activity(profile, &st.host, st.end_ps(), st.end_ps() + gap);
                    e
                })
                .collect(),
            advice: "the loop does work outside the annotated step (sleeps, logging, checkpoints, evaluation, data \
                     loading): move it off the training thread, do it every N steps, or include it in the step \
                     annotation to see it"
                .into(),
        });
    }
    let advice_input = "the input pipeline is on the critical path: prefetch batches on a background thread \
                        (e.g. a double-buffered iterator with jax.device_put ahead of time) and keep data loading \
                        out of the step";
    if let Some(idle_input) = b.device_idle_input_ps.filter(|_| device_time) {
        // Measured: the device idle while the host did input work (scopes, transfers).
        let input_pct = step_pct(idle_input);
        if input_pct > th.input_bound_pct {
            let sc = crate::scopes::scopes(profile);
            let mut worst: Vec<&crate::scopes::ScopeRow> = sc.scopes.iter().filter(|r| r.input).collect();
            worst.sort_by_key(|r| std::cmp::Reverse(r.per_step_ps.unwrap_or(0)));
            let host_pct = step_pct(b.host_input_ps.unwrap_or(0));
            out.push(Finding {
                rule: "input-bound",
                severity: if input_pct > 2.5 * th.input_bound_pct { Severity::Critical } else { Severity::Warning },
                title: format!("the device waits on input {input_pct:.1}% of the step"),
                value: input_pct,
                threshold: th.input_bound_pct,
                unit: "pct",
                evidence: std::iter::once(ev(
                    format!(
                        "input work ({}) takes {} of the {} step on the host ({host_pct:.1}%); no op ran for {} of it",
                        sc.input.names.join(", "),
                        ms(b.host_input_ps.unwrap_or(0)),
                        ms(b.step_ps),
                        ms(idle_input)
                    ),
                    "",
                ))
                .chain(worst.iter().take(3).map(|r| {
                    ev(
                        format!(
                            "scope {}: {} a step ({:.1}% of the step), the device busy {} during it",
                            r.path,
                            ms(r.per_step_ps.unwrap_or(0)),
                            r.step_pct.unwrap_or(0.0),
                            ms(r.device_busy_ps / r.count.max(1) as i64)
                        ),
                        &r.host,
                    )
                }))
                .collect(),
                advice: advice_input.into(),
            });
        }
    } else {
        let input: Vec<(&steps::Step, i64)> =
            inputs.steps.leading_idle.iter().filter_map(|&(i, ps)| Some((steps.steps.get(i)?, ps))).collect();
        let input_pct = pct(sum_ps(input.iter().map(|(_, ps)| *ps)), sum_ps(steps.steps.iter().map(|s| s.duration_ps)));
        if device_time && input_pct > th.input_bound_pct {
            let mut worst = input.clone();
            worst.sort_by_key(|(_, ps)| std::cmp::Reverse(*ps));
            out.push(Finding {
                rule: "input-bound",
                severity: Severity::Warning,
                title: format!("steps wait {input_pct:.1}% of their time before the device starts"),
                value: input_pct,
                threshold: th.input_bound_pct,
                unit: "pct",
                evidence: worst
                    .iter()
                    .take(3)
                    .map(|(st, ps)| {
                        let mut e = at(
                            ev(format!("step {}: {} before the first op", st.step_num, ms(*ps)), &st.host),
                            st.start_ps,
                            *ps,
                        );
                        e.step_num = Some(st.step_num);
                        e.detail = host_activity(profile, &st.host, st.start_ps, st.start_ps + ps);
                        e
                    })
                    .collect(),
                advice: "the input pipeline is on the critical path: prefetch batches on a background thread \
                         (e.g. a double-buffered iterator with jax.device_put ahead of time) and keep data loading out \
                         of the step"
                    .into(),
            });
        }
    }

    // --- ops
    let op_rows = ops::ops(profile, GroupBy::Op, 0);
    let total_execs: u64 = op_rows.ops.iter().map(|r| r.count).sum();
    let small_us = th.small_op_us;
    let small: Vec<&ops::OpRow> = op_rows.ops.iter().filter(|r| (r.avg_ps as f64) < small_us * 1e6).collect();
    let small_execs: u64 = small.iter().map(|r| r.count).sum();
    let small_share = pct(small_execs as i64, total_execs as i64);
    let small_time = pct(sum_ps(small.iter().map(|r| r.self_ps)), op_rows.op_time_ps);
    let per_step = total_execs / steps.steps.len().max(1) as u64;
    if small_share > th.small_op_share_pct && small_time > th.small_op_time_pct && per_step >= 100 {
        let mut by_count = small.clone();
        by_count.sort_by_key(|r| std::cmp::Reverse(r.count));
        out.push(Finding {
            rule: "many-small-ops",
            severity: Severity::Warning,
            title: format!(
                "{small_share:.0}% of {per_step} ops per step run under {small_us} µs ({small_time:.0}% of op time)"
            ),
            value: small_share,
            threshold: th.small_op_share_pct,
            unit: "pct",
            evidence: by_count
                .iter()
                .take(5)
                .map(|r| {
                    let mut e = ev(format!("{} × {} (avg {})", r.count, r.name, ms(r.avg_ps)), "");
                    e.detail = r.module.clone();
                    e
                })
                .collect(),
            advice:
                "launch overhead dominates small ops: jit larger functions (whole train step, lax.scan over \
                     layers or micro-steps) so XLA can fuse them, and avoid calling many tiny jitted functions per step"
                    .into(),
        });
    }
    if dispatches > th.dispatches_per_step {
        out.push(Finding {
            rule: "many-dispatches",
            severity: Severity::Warning,
            title: format!("{dispatches:.0} XLA programs launched per step"),
            value: dispatches,
            threshold: th.dispatches_per_step,
            unit: "count",
            evidence: by_module.iter().take(5).map(|(m, n)| ev(format!("{m}: {n:.1} launches per step"), "")).collect(),
            advice: "every jitted call is a separate dispatch from Python: jit the whole step (or lax.scan / vmap \
                     over the loop) instead of calling small jitted functions many times per step"
                .into(),
        });
    }
    if let Some(top) = op_rows.ops.first() {
        if top.device_time_pct > th.dominant_op_pct {
            out.push(Finding {
                rule: "dominant-op",
                severity: Severity::Info,
                title: format!("{} takes {:.1}% of op time", top.name, top.device_time_pct),
                value: top.device_time_pct,
                threshold: th.dominant_op_pct,
                unit: "pct",
                evidence: vec![{
                    let mut e = ev(
                        format!("{} × {} in {} (avg {})", top.count, top.name, or_unknown(&top.module), ms(top.avg_ps)),
                        "",
                    );
                    e.detail = top.category.clone();
                    e
                }],
                advice: if top.category == "command buffer" {
                    "these are library kernels (cuBLAS, cuDNN) that XLA ran inside a command buffer (a CUDA graph), \
                     where the profile does not say which HLO op launched each: `stepscope kernels PATH` lists them \
                     with their grid and time; XLA_FLAGS=--xla_gpu_enable_command_buffer= (empty) turns command \
                     buffers off for a capture that names every op"
                        .to_string()
                } else {
                    format!(
                        "optimise this op first: `stepscope hlo PATH {}` shows its HLO, fusion and source line; check \
                         its shapes, dtype (bf16 on accelerators) and layout",
                        top.name
                    )
                },
            });
        }
    }
    // Memory bandwidth of memory-bound ops, where peaks are known. Ops shorter than a
    // small op cannot approach peak bandwidth (launch and tail effects dominate): their
    // cost is their count, which `many-small-ops` judges.
    let small_ps = (th.small_op_us * 1e6) as i64;
    let mem_bound: Vec<&ops::OpRow> = op_rows
        .ops
        .iter()
        .filter(|r| r.bound == Some("memory") && r.bytes_per_s.is_some() && r.avg_ps >= small_ps)
        .collect();
    let dev = profile.devices();
    let peak = dev.iter().find_map(|d| crate::peaks::of(d).bytes_per_s);
    let t = sum_ps(mem_bound.iter().map(|r| r.self_ps));
    if let (Some(peak), true) = (peak, t > 0) {
        let bytes: f64 = mem_bound.iter().filter_map(|r| r.bytes_accessed).map(|b| b as f64).sum();
        let share = 100.0 * bytes / (t as f64 / 1e12) / peak;
        let time_pct = if op_rows.op_time_ps > 0 { 100.0 * t as f64 / op_rows.op_time_ps as f64 } else { 0.0 };
        if share < th.memory_bandwidth_pct {
            // The ops that lose the most time to the bandwidth they leave unused.
            let lost = |r: &ops::OpRow| r.self_ps as f64 * (1.0 - r.bytes_per_s.unwrap_or(0.0) / peak).max(0.0);
            let mut worst = mem_bound.clone();
            worst.sort_by(|a, b| lost(b).total_cmp(&lost(a)));
            out.push(Finding {
                rule: "memory-bandwidth",
                severity: if time_pct >= MEMORY_BOUND_TIME_PCT { Severity::Warning } else { Severity::Info },
                title: format!(
                    "memory-bound ops reach {share:.0}% of peak bandwidth ({} GB/s of {:.0}), in {time_pct:.0}% of op time",
                    (share * peak / 100.0 / 1e9).round(),
                    peak / 1e9
                ),
                value: share,
                threshold: th.memory_bandwidth_pct,
                unit: "pct",
                evidence: worst
                    .iter()
                    .take(3)
                    .map(|r| {
                        let b = r.bytes_per_s.unwrap_or(0.0);
                        let mut e = ev(
                            format!(
                                "{}: {:.0} GB/s ({:.0}% of peak), {} in {} × {}",
                                r.name,
                                b / 1e9,
                                100.0 * b / peak,
                                ms(r.self_ps),
                                r.count,
                                ms(r.avg_ps)
                            ),
                            "",
                        );
                        e.detail = r.category.clone();
                        e
                    })
                    .collect(),
                advice: "these ops move data well below the memory's peak: check their layouts (`stepscope hlo PATH OP` \
                         shows shapes; transposes and padding to the hardware tile), fuse the elementwise chains \
                         around them, and use bf16 where f32 is not needed, which halves the bytes"
                    .into(),
            });
        }
    }

    // --- copies
    let copies_pct = step_pct(b.host_to_device_ps + b.device_to_host_ps + b.device_to_device_ps);
    if copies_pct > th.copies_pct {
        out.push(Finding {
            rule: "host-device-copies",
            severity: Severity::Warning,
            title: format!("copies take {copies_pct:.1}% of the step"),
            value: copies_pct,
            threshold: th.copies_pct,
            unit: "pct",
            evidence: largest_copies(profile, 3),
            advice: "keep data on the device between steps, transfer once (jax.device_put outside the loop), \
                     prefetch the next batch asynchronously, and avoid pulling values to the host (float(x), \
                     np.asarray) inside the step"
                .into(),
        });
    }

    // --- async waits and the runtime between ops (the device-time model's parts)
    let wait_pct = step_pct(b.async_wait_ps);
    if wait_pct > th.async_wait_pct {
        out.push(Finding {
            rule: "async-waits",
            severity: Severity::Warning,
            title: format!("devices wait on async copies {wait_pct:.1}% of the step"),
            value: wait_pct,
            threshold: th.async_wait_pct,
            unit: "pct",
            evidence: top_ops_of_kind(profile, crate::device_time::Part::AsyncWait, 3),
            advice: "the device sits in `copy-done` ops waiting for async copies (host offloading, memory-space \
                     moves): see what each step copies (`stepscope hlo PATH copy-start`), keep those buffers in \
                     device memory, or give the copies compute to overlap"
                .into(),
        });
    }
    let overhead_pct = step_pct(b.runtime_overhead_ps);
    if overhead_pct > th.runtime_overhead_pct {
        out.push(Finding {
            rule: "runtime-overhead",
            severity: Severity::Info,
            title: format!("the XLA:CPU runtime spends {overhead_pct:.1}% of the step between ops"),
            value: overhead_pct,
            threshold: th.runtime_overhead_pct,
            unit: "pct",
            evidence: vec![],
            advice: "inside each program the executor hands ops to host threads; many small ops make that \
                     overhead show: fuse them (larger jitted functions, fewer tiny ops), or use a larger batch"
                .into(),
        });
    }

    // --- collectives and devices
    let coll = &inputs.collectives;
    let exposed_pct = step_pct(b.collectives_ps);
    if exposed_pct > th.collectives_exposed_pct {
        out.push(Finding {
            rule: "collectives-exposed",
            severity: Severity::Warning,
            title: format!("collectives not overlapped with compute take {exposed_pct:.1}% of the step"),
            value: exposed_pct,
            threshold: th.collectives_exposed_pct,
            unit: "pct",
            evidence: coll
                .ops
                .iter()
                .take(3)
                .map(|r| {
                    ev(
                        format!(
                            "{} × {} ({}): {} exposed, {:.0}% overlapped",
                            r.count,
                            r.name,
                            r.kind,
                            ms(r.exposed_ps),
                            r.overlap_pct
                        ),
                        "",
                    )
                })
                .collect(),
            advice: "overlap communication with compute: enable XLA's async collectives and latency-hiding \
                     scheduler, shard so reductions happen per layer (not all at the end), and check for \
                     stragglers that make everyone wait"
                .into(),
        });
    }
    let dev = &inputs.devices;
    let stragglers: Vec<&devices::Straggler> =
        dev.stragglers.iter().filter(|s| s.excess_pct > th.straggler_pct).collect();
    if !stragglers.is_empty() {
        let worst = stragglers.iter().map(|s| s.excess_pct).fold(0.0, f64::max);
        out.push(Finding {
            rule: "stragglers",
            severity: Severity::Warning,
            title: format!("{} device(s)/host(s) compute up to {worst:.0}% longer than their peers", stragglers.len()),
            value: worst,
            threshold: th.straggler_pct,
            unit: "pct",
            evidence: stragglers
                .iter()
                .map(|s| {
                    let mut e = ev(
                        format!(
                            "{} {}: compute {} vs peers' median {}",
                            s.host,
                            s.device,
                            ms(s.compute_ps),
                            ms(s.peer_median_ps)
                        ),
                        &s.host,
                    );
                    e.detail = format!("peers spend {} in collectives", ms(s.peer_collective_ps));
                    e
                })
                .collect(),
            advice: "a slow device or host holds every collective back: look for uneven shards (batch or sequence \
                     padding), a host busier with input work, or thermal/clock differences"
                .into(),
        });
    }

    // --- memory
    let mem = &inputs.memory;
    for a in &mem.allocators {
        let Some(cap) = a.capacity_bytes.filter(|c| *c > 0) else { continue };
        let share = pct(a.peak_in_use_bytes as i64, cap as i64);
        if share > th.memory_capacity_pct {
            out.push(Finding {
                rule: "memory-near-capacity",
                severity: if share > 98.0 { Severity::Critical } else { Severity::Warning },
                title: format!("{} {} peaks at {share:.1}% of its capacity", a.host, a.name),
                value: share,
                threshold: th.memory_capacity_pct,
                unit: "pct",
                evidence: a
                    .live_at_peak
                    .iter()
                    .map(|l| {
                        let mut e = at(
                            ev(format!("{} bytes live: {} {}", l.bytes, or_unknown(&l.op), l.shape), &a.host),
                            l.allocated_at_ps,
                            0,
                        );
                        e.detail = a.name.clone();
                        e
                    })
                    .collect(),
                advice: "close to out-of-memory: donate buffers (jit donate_argnums), rematerialise activations \
                         (jax.checkpoint), shard parameters/optimizer state, or lower the batch size"
                    .into(),
            });
        }
    }

    // --- jitter
    let d = &s.step_time;
    if d.count >= 3 && d.median_ps > 0 {
        let cv = pct(d.p90_ps - d.median_ps, d.median_ps);
        if cv > th.step_jitter_pct {
            // GPUs: the device work each step launched, to tell a step that ran work
            // queued by earlier ones (a loop that dispatches ahead) from a slow one.
            let launched = steps::steps(profile);
            let launched_ps = |st: &steps::Step| {
                launched.steps.iter().find(|l| (l.host.as_str(), l.start_ps) == (&st.host, st.start_ps))?.device_work_ps
            };
            let mut slow: Vec<&steps::Step> = steps.steps.iter().collect();
            slow.sort_by_key(|st| std::cmp::Reverse(st.duration_ps));
            let mut held_earlier = false;
            out.push(Finding {
                rule: "step-jitter",
                severity: Severity::Warning,
                title: format!(
                    "slow steps: p90 step time is {cv:.1}% above the median (slowest {} vs median {})",
                    ms(d.max_ps),
                    ms(d.median_ps)
                ),
                value: cv,
                threshold: th.step_jitter_pct,
                unit: "pct",
                evidence: slow
                    .iter()
                    .take(3)
                    .map(|st| {
                        let mut e = at(
                            ev(format!("step {} took {}", st.step_num, ms(st.duration_ps)), &st.host),
                            st.start_ps,
                            st.duration_ps,
                        );
                        e.step_num = Some(st.step_num);
                        e.detail = format!("device idle {}, compile {}", ms(st.device_idle_ps), ms(st.compile_ps));
                        // Busy a quarter beyond the work it launched: earlier steps' work ran in it.
                        if let Some(w) = launched_ps(st).filter(|&w| st.device_busy_ps > w.saturating_mul(5) / 4) {
                            held_earlier = true;
                            e.detail.push_str(&format!(
                                "; its device ran {} but it launched {}: work queued by earlier steps ran in it",
                                ms(st.device_busy_ps),
                                ms(w)
                            ));
                        }
                        e
                    })
                    .collect(),
                advice: match held_earlier {
                    false => "uneven steps point at periodic host work (checkpointing, logging, eval, garbage \
                              collection), recompilation, or input stalls: compare the slow steps' timelines with a \
                              median one"
                        .into(),
                    true => "a slow step here ran device work that earlier steps launched (the loop dispatches \
                             ahead, and the device caught up in it): judge steps by the work each launched \
                             (`stepscope steps PATH`, LAUNCHED), or block on each step's result while profiling; \
                             otherwise uneven steps point at periodic host work, recompilation or input stalls"
                        .into(),
                },
            });
        }
    }

    // --- truncation
    for space in &profile.hosts {
        let events = space.event_count();
        let capped = space.format == stepscope_xspace::Format::TraceJson && events >= 1_000_000;
        let dropped = space.warnings.iter().chain(&space.errors).find(|w| {
            let w = w.to_ascii_lowercase();
            w.contains("drop") || w.contains("truncat") || w.contains("buffer full") || w.contains("exceed")
        });
        if capped || dropped.is_some() {
            out.push(Finding {
                rule: "truncated",
                severity: Severity::Warning,
                title: format!("the profile of {} looks truncated", space.host),
                value: events as f64,
                threshold: 1_000_000.0,
                unit: "count",
                evidence: vec![{
                    let mut e = ev(format!("{events} events"), &space.host);
                    e.detail =
                        dropped.cloned().unwrap_or_else(|| "trace JSON is capped at 1,000,000 events by JAX".into());
                    e
                }],
                advice: "read the .xplane.pb instead of the trace JSON (it has every event), or capture fewer steps"
                    .into(),
            });
        }
    }
    finish(&mut out);
    out
}

fn or_unknown(s: &str) -> &str {
    if s.is_empty() {
        "(unknown)"
    } else {
        s
    }
}

fn finish(out: &mut [Finding]) {
    out.sort_by(|a, b| {
        let over = |f: &Finding| if f.threshold != 0.0 { (f.value / f.threshold - 1.0).abs() } else { f.value.abs() };
        a.severity.cmp(&b.severity).then(over(b).total_cmp(&over(a))).then(a.rule.cmp(b.rule))
    });
}

/// The largest device-idle gaps inside steps, with what the host was doing.
fn idle_gaps(profile: &Profile, steps: &Steps, n: usize) -> Vec<Evidence> {
    let devices = profile.devices();
    let mut gaps: Vec<(i64, i64, &steps::Step)> = Vec::new();
    for d in &devices {
        let busy = steps::active_intervals(profile, d);
        for st in steps.steps.iter().filter(|s| s.host == d.host) {
            let (lo, hi) = (st.start_ps, st.end_ps());
            let mut cur = lo;
            let spans = busy.spans();
            let first = spans.partition_point(|s| s.1 <= lo);
            for &(a, b) in &spans[first..] {
                if a >= hi {
                    break;
                }
                if a > cur {
                    gaps.push((cur, a, st));
                }
                cur = cur.max(b);
            }
            if cur < hi {
                gaps.push((cur, hi, st));
            }
        }
    }
    gaps.sort_by_key(|(a, b, _)| std::cmp::Reverse(b.saturating_sub(*a)));
    let mut out: Vec<Evidence> = Vec::new();
    for (a, b, st) in gaps {
        // Devices of one host share gaps; report each stretch once.
        if out
            .iter()
            .any(|e| e.host == st.host && e.start_ps.is_some_and(|s| s < b && s + e.duration_ps.unwrap_or(0) > a))
        {
            continue;
        }
        let mut e = at(
            ev(format!("device idle {} in step {}", ms(b.saturating_sub(a)), st.step_num), &st.host),
            a,
            b.saturating_sub(a),
        );
        e.step_num = Some(st.step_num);
        e.detail = host_activity(profile, &st.host, a, b);
        out.push(e);
        if out.len() == n {
            break;
        }
    }
    out
}

/// What the host was doing in `[lo, hi)`: the host event covering most of it that is
/// not the step itself.
fn host_activity(profile: &Profile, host: &str, lo: i64, hi: i64) -> String {
    let Some(space) = profile.hosts.iter().find(|h| h.host == host) else { return String::new() };
    let Some(plane) = host_cpu_plane(space) else { return String::new() };
    let step_key = plane.stat_id("step_num");
    let mut best: Option<(i64, i64, &str)> = None;
    for line in &plane.lines {
        let first = line.starts().partition_point(|s| s < lo.saturating_sub(hi.saturating_sub(lo).saturating_mul(100)));
        for i in first..line.len() {
            let (a, b) = (line.start_ps(i), line.end_ps(i));
            if a >= hi {
                break;
            }
            let ov = b.min(hi).saturating_sub(a.max(lo));
            if ov <= 0 || step_key.is_some_and(|k| plane.event_stat(line, i, k).is_some()) {
                continue;
            }
            let name = plane.event_name(line.meta(i));
            if name.starts_with("end: ") {
                continue;
            }
            let better = match best {
                None => true,
                Some((bov, blen, _)) => ov > bov || (ov == bov && b.saturating_sub(a) < blen),
            };
            if better {
                best = Some((ov, b.saturating_sub(a), name));
            }
        }
    }
    match best {
        Some((ov, _, name)) => format!("host: {name} ({} of it)", ms(ov)),
        None => "host: no recorded activity (Python without the python tracer, or waiting)".into(),
    }
}

/// Each step followed by a gap before the next step of its host: (step, gap).
fn between_steps(steps: &Steps) -> Vec<(&steps::Step, i64)> {
    let mut out = Vec::new();
    for (i, st) in steps.steps.iter().enumerate() {
        if let Some(next) = steps.steps[i + 1..].iter().find(|n| n.host == st.host) {
            let gap = next.start_ps.saturating_sub(st.end_ps());
            if gap > 0 {
                out.push((st, gap));
            }
        }
    }
    out
}

/// Mean XLA program launches per step (per device), and per module, largest first.
fn dispatches_per_step(profile: &Profile, steps: &Steps) -> (f64, Vec<(String, f64)>) {
    let devices = profile.devices();
    let mut per_module: std::collections::HashMap<String, u64> = std::collections::HashMap::new();
    let windows = |host: &str| -> Vec<(i64, i64)> {
        steps.steps.iter().filter(|s| s.host == host).map(|s| (s.start_ps, s.end_ps())).collect()
    };
    let inside = |w: &[(i64, i64)], t: i64| {
        let i = w.partition_point(|x| x.1 <= t);
        w.get(i).is_some_and(|x| x.0 <= t)
    };
    let mut launches = 0u64;
    for d in &devices {
        let w = windows(d.host);
        if let Some(line) = d.plane.line("XLA Modules") {
            let mut by_meta: FastMap<u32, u64> = FastMap::default();
            for i in 0..line.len() {
                if inside(&w, line.start_ps(i)) {
                    launches += 1;
                    *by_meta.entry(line.meta(i)).or_default() += 1;
                }
            }
            for (meta, n) in by_meta {
                *per_module.entry(d.plane.event_name(meta).to_string()).or_default() += n;
            }
        } else {
            // XLA:CPU: one run_id per launch (kept with the op records; other devices
            // without a modules line: the ops' `run_id` stat).
            let ops = d.cached_ops();
            let mut seen: FastMap<(u32, i64), ()> = FastMap::default();
            let mut launched: FastMap<u32, u64> = FastMap::default();
            // A launch's ops come one after another: one already counted is skipped
            // without a lookup.
            let mut counted: Option<(u32, i64)> = None;
            for r in &ops.recs {
                if ops.run_id(r).is_some() && counted == ops.run_id(r).map(|run| (r.module, run)) {
                    continue;
                }
                let run = ops.run_id(r).or_else(|| match d.source {
                    OpSource::HostOps => None,
                    _ => {
                        let line = &d.plane.lines[r.line as usize];
                        d.stat(line, r.index as usize, d.keys.run_id).and_then(|s| d.plane.stat_i64(&s))
                    }
                });
                if let Some(run) = run {
                    if inside(&w, r.start_ps(d.plane)) {
                        if seen.insert((r.module, run), ()).is_none() {
                            launches += 1;
                            *launched.entry(r.module).or_default() += 1;
                        }
                        // Counted now or on an earlier line: the rest of it adds nothing.
                        counted = Some((r.module, run));
                    }
                }
            }
            for (m, n) in launched {
                *per_module.entry(ops.names[m as usize].to_string()).or_default() += n;
            }
        }
    }
    let denom = (steps.steps.len().max(1) * devices.len().max(1)) as f64;
    let mut v: Vec<(String, f64)> = per_module.into_iter().map(|(m, n)| (m, n as f64 / denom)).collect();
    v.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    (launches as f64 / denom, v)
}

/// Per step (by index): device idle from the step's start to its first op.
fn leading_idle(profile: &Profile, steps: &Steps) -> Vec<(usize, i64)> {
    let devices = profile.devices();
    let busy: Vec<(&str, &Intervals)> = devices.iter().map(|d| (d.host, steps::active_intervals(profile, d))).collect();
    steps
        .steps
        .iter()
        .enumerate()
        .filter_map(|(at, st)| {
            let first = busy
                .iter()
                .filter(|(h, _)| *h == st.host)
                .filter_map(|(_, iv)| {
                    let spans = iv.spans();
                    let i = spans.partition_point(|s| s.1 <= st.start_ps);
                    spans.get(i).map(|s| s.0.max(st.start_ps)).filter(|&t| t < st.end_ps())
                })
                .min()?;
            Some((at, first.saturating_sub(st.start_ps)))
        })
        .collect()
}

/// The longest copy events: device copy ops, else host-side transfers.
/// The `n` ops of `kind` with the most self time, as evidence.
fn top_ops_of_kind(profile: &Profile, kind: crate::device_time::Part, n: usize) -> Vec<Evidence> {
    let rows = ops::ops(profile, GroupBy::Op, 0).ops;
    rows.iter()
        .filter(|r| crate::device_time::op_kind(&r.name, &r.category, "") == kind)
        .take(n)
        .map(|r| {
            ev(
                format!("{}: {} over {} runs ({:.1}% of op time)", r.name, ms(r.self_ps), r.count, r.device_time_pct),
                "",
            )
        })
        .collect()
}

fn largest_copies(profile: &Profile, n: usize) -> Vec<Evidence> {
    let mut found: Vec<(i64, i64, String, String)> = Vec::new();
    let base = profile.time_base();
    for d in profile.devices() {
        let ops = d.cached_ops();
        for (i, kind) in base.kinds[d.index].of_op.iter().enumerate() {
            if matches!(kind, Part::HostToDevice | Part::DeviceToHost | Part::DeviceToDevice) {
                let op = ops.event(d.plane, i);
                found.push((op.duration_ps, op.start_ps, op.name.to_string(), d.host.to_string()));
            }
        }
    }
    for (h, time) in profile.hosts.iter().zip(&base.hosts) {
        for (iv, what) in [(&time.to_device, "host → device transfer"), (&time.to_host, "device → host transfer")] {
            for &(a, b) in iv.spans() {
                found.push((b.saturating_sub(a), a, what.to_string(), h.host.clone()));
            }
        }
    }
    found.sort_by_key(|f| std::cmp::Reverse(f.0));
    found.into_iter().take(n).map(|(d, s, name, host)| at(ev(format!("{name}: {}", ms(d)), &host), s, d)).collect()
}
