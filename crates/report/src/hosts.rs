//! A pod at a glance: each host's summary, every host read alone (`summary --per-host`),
//! and how the hosts spread. Memory is one host's at a time, whatever the host count;
//! each row is what `summary --host HOST` prints for that host.

use serde::Serialize;
use stepscope_model::stats::Distribution;
use stepscope_xspace::discover::Unread;

use crate::summary::Summary;

/// Each host's summary and the spread across hosts.
#[derive(Clone, Debug, Serialize)]
pub struct HostsSummary {
    pub schema: &'static str,
    pub run: String,
    pub hosts: Vec<HostSummary>,
    /// The hosts whose files could not be read, each with why.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub hosts_unread: Vec<Unread>,
    /// Across the hosts with timed steps: their ranked step times' medians
    /// ([`crate::summary::Summary::ranked_step_time`]), as a distribution of host values.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step_median: Option<Distribution>,
    /// The host with the longest median step, and how much longer than the median host's
    /// it is, percent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slowest_host: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slowest_excess_pct: Option<f64>,
    /// Across the hosts with devices: the least, median and most device utilisation of
    /// a host, percent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub utilization_pct_min: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub utilization_pct_median: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub utilization_pct_max: Option<f64>,
}

/// One host's summary, as `summary --host HOST --json` prints it.
#[derive(Clone, Debug, Serialize)]
pub struct HostSummary {
    pub host: String,
    pub summary: Summary,
}

/// The spread of `hosts`' summaries (each made from that host alone); `unread`: the
/// hosts whose files could not be read.
pub fn hosts(run: &str, hosts: Vec<HostSummary>, unread: Vec<Unread>) -> HostsSummary {
    let timed: Vec<(&str, i64)> = (hosts.iter())
        .filter(|h| h.summary.step_count > 0)
        .map(|h| (h.host.as_str(), h.summary.ranked_step_time().median_ps))
        .collect();
    let medians: Vec<i64> = timed.iter().map(|t| t.1).collect();
    let step_median = (!medians.is_empty()).then(|| Distribution::of(&medians));
    let slowest = timed.iter().max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(a.0)));
    let slowest_excess_pct = step_median
        .as_ref()
        .zip(slowest)
        .filter(|(d, _)| d.median_ps > 0)
        .map(|(d, s)| 100.0 * (s.1 - d.median_ps) as f64 / d.median_ps as f64);
    let mut util: Vec<f64> = (hosts.iter())
        .filter(|h| !h.summary.environment.devices.is_empty())
        .map(|h| h.summary.device_utilization_pct)
        .collect();
    util.sort_by(f64::total_cmp);
    let median = |v: &[f64]| match v.len() {
        0 => None,
        n if n % 2 == 1 => Some(v[n / 2]),
        n => Some((v[n / 2 - 1] + v[n / 2]) / 2.0),
    };
    HostsSummary {
        schema: "stepscope.summary_hosts/1",
        run: run.to_string(),
        step_median,
        slowest_host: slowest.map(|s| s.0.to_string()),
        slowest_excess_pct,
        utilization_pct_min: util.first().copied(),
        utilization_pct_median: median(&util),
        utilization_pct_max: util.last().copied(),
        hosts,
        hosts_unread: unread,
    }
}
