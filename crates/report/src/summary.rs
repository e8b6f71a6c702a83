//! The summary: the overview of a run (`stepscope_analysis::overview`) with the most
//! important findings of the rules (`stepscope_judge`). Its JSON is the baseline
//! format `check` compares against.

use std::ops::Deref;

use serde::Serialize;
use stepscope_judge::advise::{self, Advice, Finding, Thresholds};
use stepscope_model::Profile;

pub use stepscope_analysis::overview::{
    host_tracer_level, is_collective, Breakdown, DeviceGroup, Environment, Overview,
};

/// The overview of a run and its top findings.
#[derive(Clone, Debug, Serialize)]
pub struct Summary {
    #[serde(flatten)]
    pub overview: Overview,
    /// The allocator nearest its capacity (user guide 003: peak under 90% of device
    /// memory); absent where the profile records no allocations.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_peak: Option<MemoryPeak>,
    /// The most important findings of [`advise`] (at most 3).
    pub findings: Vec<Finding>,
    /// Whether the capture can be trusted, and for what ([`crate::health`]); absent
    /// from an overview without findings (what `diff`, `compare` and `check` read).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub health: Option<stepscope_judge::health::Health>,
    /// True where the run was read a host at a time ([`summary_by_host`]: a run too
    /// large to read whole), for the same numbers and findings; absent otherwise.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub read_a_host_at_a_time: bool,
}

/// One allocator's peak against its capacity.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MemoryPeak {
    pub host: String,
    pub allocator: String,
    pub peak_bytes: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capacity_bytes: Option<u64>,
    /// The peak as a share of the capacity, percent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capacity_pct: Option<f64>,
}

/// The allocator nearest its capacity; where none records one, the highest peak.
fn memory_peak(memory: &stepscope_analysis::memory::Memory) -> Option<MemoryPeak> {
    nearest_capacity(memory_peaks(memory))
}

/// Every allocator's peak that holds memory, in the memory analysis' order.
fn memory_peaks(memory: &stepscope_analysis::memory::Memory) -> Vec<MemoryPeak> {
    (memory.allocators.iter().filter(|a| a.peak_in_use_bytes > 0))
        .map(|a| MemoryPeak {
            host: a.host.clone(),
            allocator: a.name.clone(),
            peak_bytes: a.peak_in_use_bytes,
            capacity_bytes: a.capacity_bytes.filter(|c| *c > 0),
            capacity_pct: a.capacity_pct(),
        })
        .collect()
}

/// Of allocators' peaks (of hosts in order), the one nearest its capacity; where none
/// records one, the highest; ordered first as the memory analysis orders allocators
/// (highest peak first, then by name).
fn nearest_capacity(mut peaks: Vec<MemoryPeak>) -> Option<MemoryPeak> {
    peaks.sort_by(|a, b| b.peak_bytes.cmp(&a.peak_bytes).then_with(|| a.allocator.cmp(&b.allocator)));
    let share = |a: &MemoryPeak| a.capacity_pct.unwrap_or(-1.0);
    // Of allocators tied, the first in that order (as the memory view lists them):
    // `max_by` would keep the last.
    peaks.into_iter().reduce(|best, x| {
        match share(&x).total_cmp(&share(&best)).then(x.peak_bytes.cmp(&best.peak_bytes)) {
            std::cmp::Ordering::Greater => x,
            _ => best,
        }
    })
}

impl Summary {
    /// The run's host files that could not be read (a run read a host at a time learns
    /// them after its hosts are summed up): in the overview, and in the health.
    pub fn set_hosts_unread(&mut self, unread: Vec<stepscope_xspace::discover::Unread>) {
        if let Some(h) = &mut self.health {
            h.recheck_hosts(self.overview.environment.hosts.len(), &unread);
        }
        self.overview.hosts_unread = unread;
    }
}

/// A summary reads as its overview: `s.step_time`, `s.breakdown`, …
impl Deref for Summary {
    type Target = Overview;

    fn deref(&self) -> &Overview {
        &self.overview
    }
}

/// Builds the overview with its top findings; `top` ops are listed.
pub fn summary(profile: &Profile, top: usize) -> Summary {
    let (overview, inputs) = advise::overview_and_inputs(profile, top);
    let mut findings = advise::findings_with(profile, &overview, &Thresholds::default(), &inputs);
    let health = Some(stepscope_judge::health::judged(&overview, &mut findings));
    findings.truncate(3);
    Summary { overview, memory_peak: memory_peak(&inputs.memory), findings, health, read_a_host_at_a_time: false }
}

/// The summary of a run read a host at a time, in one host's memory whatever the host
/// count ([`stepscope_judge::by_host`]): its overview, memory peak and findings are the
/// run's read whole. `read` as the fold takes it; `check` is asked of each host once
/// summed up (whether its file changed under it).
pub fn summary_by_host<E>(
    run: &str,
    hosts: usize,
    top: usize,
    read: &mut stepscope_analysis::fold::Reader<E>,
    check: &stepscope_analysis::fold::Check<E>,
) -> Result<Summary, E> {
    let th = Thresholds::default();
    let judged = stepscope_judge::by_host::judged_by_host(run, hosts, top, &th, read, &mut |p, _| check(p))?;
    Ok(judged_summary(judged.overview, &judged.inputs, &judged.findings))
}

/// The summary of a run read a host at a time and judged (its hosts mapped here, as
/// [`summary_by_host`] maps them, or elsewhere).
pub fn judged_summary(overview: Overview, inputs: &advise::Inputs, findings: &[Finding]) -> Summary {
    let mut findings = findings.to_vec();
    let health = Some(stepscope_judge::health::judged(&overview, &mut findings));
    findings.truncate(3);
    let top = findings;
    Summary { overview, memory_peak: memory_peak(&inputs.memory), findings: top, health, read_a_host_at_a_time: true }
}

/// What the overview of a run read a host at a time shows, made by one pass over its
/// hosts: its summary, every finding ([`stepscope_judge::advise::advise`]) and its steps
/// (`stepscope steps`), each as the run read whole has it.
pub struct Views {
    pub summary: Summary,
    pub advice: Advice,
    pub steps: stepscope_analysis::steps::Steps,
    /// Each host's name and own summary (`summary --host HOST`), made as the host is
    /// first read, in the run's host order: the hosts table of the same pass.
    pub hosts: Vec<(String, Summary)>,
}

/// [`Views`] of a run read a host at a time, `top` ops in the summary; `read` and
/// `check` as [`summary_by_host`] takes them.
pub fn views_by_host<E>(
    run: &str,
    hosts: usize,
    top: usize,
    read: &mut stepscope_analysis::fold::Reader<E>,
    check: &stepscope_analysis::fold::Check<E>,
) -> Result<Views, E> {
    let th = Thresholds::default();
    // Each host's own summary, where it is first read (alone, under its own decisions:
    // as `summary --host HOST` reads it); a host read again under the run's is not.
    let mut own: Vec<(String, Summary)> = Vec::new();
    // With their critical paths, as the steps of a run read whole (the judge's gains
    // made the host's what-if graphs).
    let mut keep = |p: &Profile, part: &stepscope_analysis::overview::OverviewPart| {
        check(p).map(|()| {
            for space in &p.hosts {
                if p.hosts.len() == 1 && !own.iter().any(|(host, _)| *host == space.host) {
                    own.push((space.host.clone(), summary(p, top)));
                }
            }
            let mut steps = stepscope_analysis::fold::steps_with_flops(p, part);
            stepscope_analysis::whatif::add_critical_paths(p, &mut steps);
            steps
        })
    };
    let judged = stepscope_judge::by_host::judged_by_host(run, hosts, top, &th, read, &mut keep)?;
    let steps =
        stepscope_analysis::fold::run_steps(&judged.overview, judged.kept.into_iter().flatten().collect(), hosts);
    let advice = Advice::new(&judged.overview, &th, judged.findings);
    let summary = judged_summary(judged.overview, &judged.inputs, &advice.findings);
    Ok(Views { summary, advice, steps: steps.0, hosts: own })
}

/// [`overview`] of a run read a host at a time (what `check` reads of a pod too large
/// to read whole): the overview of the run read whole, `read` as the fold takes it.
pub fn overview_by_host<E>(
    run: &str,
    hosts: usize,
    top: usize,
    read: &mut stepscope_analysis::fold::Reader<E>,
) -> Result<Summary, E> {
    let (overview, _) = stepscope_analysis::fold::overview_by_host(run, hosts, top, read, &mut |_, _| Ok(()))?;
    Ok(of_overview(overview))
}

/// A run's overview, read a host at a time, as a summary without findings.
pub fn of_overview(overview: Overview) -> Summary {
    Summary { overview, memory_peak: None, findings: Vec::new(), health: None, read_a_host_at_a_time: true }
}

/// The overview without findings, as a summary (what `diff`, `compare` and `check`
/// read).
pub fn overview(profile: &Profile, top: usize) -> Summary {
    Summary {
        overview: stepscope_analysis::overview::overview(profile, top),
        memory_peak: None,
        findings: Vec::new(),
        health: None,
        read_a_host_at_a_time: false,
    }
}
