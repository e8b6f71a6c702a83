//! What the rules read besides the overview: the analyses they judge, computed side by
//! side once per run ([`Inputs`]), and the overview with them
//! ([`overview_and_inputs`]).

use stepscope_analysis::ops;
use stepscope_analysis::overview::{self, Overview};
use stepscope_analysis::steps::{self, Steps};
use stepscope_analysis::{collectives, compile, devices, memory};
use stepscope_model::device::host_cpu_plane;
use stepscope_model::device::{events_named, jit_calls};
use stepscope_model::records::FastMap;
use stepscope_model::stats::Intervals;
use stepscope_model::{OpSource, Profile};

/// The overview and what the rules read besides, side by side. The memory analysis
/// and the host scopes need none of what [`warm`] builds: they run meanwhile.
pub fn overview_and_inputs(profile: &Profile, top: usize) -> (Overview, Inputs) {
    // The shared work is computed on this thread (never inside the pool, see
    // crates/model/src/profile.rs) while a thread of its own runs the memory analysis,
    // which reads none of it; both use the pool.
    let memory = std::thread::scope(|s| {
        let memory = s.spawn(|| memory::memory(profile, None, 3));
        // The host scopes need nothing else: found meanwhile too.
        let scopes = s.spawn(|| {
            profile.host_scopes();
        });
        // The op profile needs only the devices: it is built on a thread of its own
        // while this one measures the steps and the device time.
        profile.device_set();
        let op_profile = s.spawn(|| ops::warm(profile));
        profile.prepare();
        op_profile.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        scopes.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        memory.join()
    })
    .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
    rayon::join(|| overview::overview(profile, top), || Inputs::gather_with(profile, memory))
}

/// The analyses the rules read besides the overview, computed side by side.
pub struct Inputs {
    pub compile: compile::Compile,
    pub collectives: collectives::Collectives,
    pub devices: devices::Devices,
    pub memory: memory::Memory,
    pub steps: StepPasses,
}

/// What the rules read off every device's timeline against the steps.
pub struct StepPasses {
    /// (index into the steps, ps) for each step: how long it waited for its first op.
    pub leading_idle: Vec<(usize, i64)>,
    /// XLA programs launched per step, and per module.
    pub dispatches: (f64, Vec<(String, f64)>),
}

impl StepPasses {
    /// The passes of a run whose leading idle is `leading_idle` and whose launches are
    /// counted in `dispatches`.
    pub fn of(leading_idle: Vec<(usize, i64)>, dispatches: &Dispatches) -> StepPasses {
        StepPasses { leading_idle, dispatches: dispatches.per_step() }
    }
}

impl Inputs {
    pub fn gather(profile: &Profile) -> Inputs {
        profile.prepare();
        let (memory, (compile, (collectives, devices), steps)) =
            rayon::join(|| memory::memory(profile, None, 3), || Inputs::others(profile));
        Inputs { compile, collectives, devices, memory, steps }
    }

    /// The inputs, the memory analysis already made.
    pub fn gather_with(profile: &Profile, memory: memory::Memory) -> Inputs {
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
                    || rayon::join(|| leading_idle(profile, steps), || dispatches(profile, steps).per_step()),
                )
            },
            || rayon::join(|| collectives::collectives(profile), || devices::devices(profile)),
        );
        (compile, analyses, StepPasses { leading_idle, dispatches })
    }
}

/// The XLA programs launched in some hosts' steps, counted: per step and device
/// ([`Dispatches::per_step`]) once every host's are added up.
#[derive(Clone, Debug, Default)]
pub struct Dispatches {
    launches: u64,
    per_module: std::collections::HashMap<String, u64>,
    steps: usize,
    devices: usize,
}
stepscope_model::wire_struct!(Dispatches { launches, per_module, steps, devices });

impl Dispatches {
    pub fn add(&mut self, other: Dispatches) {
        self.launches += other.launches;
        for (m, n) in other.per_module {
            *self.per_module.entry(m).or_default() += n;
        }
        self.steps += other.steps;
        self.devices += other.devices;
    }

    /// Mean launches per step (per device), and per module, largest first.
    pub fn per_step(&self) -> (f64, Vec<(String, f64)>) {
        let denom = (self.steps.max(1) * self.devices.max(1)) as f64;
        let mut v: Vec<(String, f64)> = self.per_module.iter().map(|(m, n)| (m.clone(), *n as f64 / denom)).collect();
        v.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        (self.launches as f64 / denom, v)
    }
}

/// The XLA programs `profile`'s devices that took part launched in `steps`.
pub fn dispatches(profile: &Profile, steps: &Steps) -> Dispatches {
    let mut devices = profile.devices();
    devices.retain(|d| steps::took_part(profile, d));
    let mut per_module: std::collections::HashMap<String, u64> = std::collections::HashMap::new();
    let windows = |host: &str| -> Vec<(i64, i64)> {
        steps.steps.iter().filter(|s| s.host == host).map(|s| s.host_span()).collect()
    };
    let inside = |w: &[(i64, i64)], t: i64| {
        let i = w.partition_point(|x| x.1 <= t);
        w.get(i).is_some_and(|x| x.0 <= t)
    };
    let mut launches = 0u64;
    let mut gpu_hosts: Vec<usize> = Vec::new();
    for d in &devices {
        let w = windows(d.host);
        if d.source == OpSource::Kernels && d.plane.line("XLA Modules").is_none() {
            // GPU: a run of a program is one host event `<module>:XLA GPU module` (XLA's
            // annotation of it, on the thread that ran it), counted once a host.
            if !gpu_hosts.contains(&d.host_index) {
                gpu_hosts.push(d.host_index);
                for (module, n) in gpu_module_runs(profile, d.host_index, &w) {
                    launches += n;
                    *per_module.entry(module).or_default() += n;
                }
            }
        } else if let Some(line) = d.plane.line("XLA Modules") {
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
    Dispatches { launches, per_module, steps: steps.steps.len(), devices: devices.len() }
}

/// The runs of each program its host annotated (`<module>:XLA GPU module` events) that
/// started in `windows` (sorted, disjoint), by module name.
fn gpu_module_runs(profile: &Profile, host: usize, windows: &[(i64, i64)]) -> Vec<(String, u64)> {
    let Some(plane) = profile.hosts.get(host).and_then(host_cpu_plane) else { return Vec::new() };
    let mut runs: FastMap<&str, u64> = FastMap::default();
    for (meta, t) in events_named(plane, |name| name.ends_with(":XLA GPU module")) {
        let at = windows.partition_point(|x| x.1 <= t);
        if windows.get(at).is_some_and(|x| x.0 <= t) {
            *runs.entry(plane.event_name(meta)).or_default() += 1;
        }
    }
    (runs.into_iter()).filter_map(|(name, n)| Some((name.strip_suffix(":XLA GPU module")?.to_string(), n))).collect()
}

/// Per step (by index): device idle from the step's start to its first op, or to the
/// host's first call of a jitted function in the step where that came first — the
/// dispatch of the step's work is no input work, even where a loop that waits for
/// each step makes the device wait for it.
pub fn leading_idle(profile: &Profile, steps: &Steps) -> Vec<(usize, i64)> {
    let mut devices = profile.devices();
    devices.retain(|d| steps::took_part(profile, d));
    let busy: Vec<(&str, &Intervals)> = devices.iter().map(|d| (d.host, steps::active_intervals(profile, d))).collect();
    let calls: Vec<(&str, Vec<i64>)> = profile.hosts.iter().map(|h| (h.host.as_str(), jit_calls(h))).collect();
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
            let call = (calls.iter().find(|(h, _)| *h == st.host))
                .and_then(|(_, c)| c.get(c.partition_point(|&t| t < st.start_ps)).copied())
                .unwrap_or(first);
            Some((at, first.min(call).saturating_sub(st.start_ps)))
        })
        .collect()
}
