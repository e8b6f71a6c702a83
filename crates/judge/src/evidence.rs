//! What the rules share to build their evidence, titles and advice.

use stepscope_model::device::host_cpu_plane;
use stepscope_model::steps::Step;
use stepscope_model::Profile;

use crate::finding::Evidence;

/// Why a profile may hold no device ops, and what to do: for the `no-device-activity`
/// rule and the commands that find no op.
pub const NO_OPS_WHY: &str = "On CPU, XLA records its ops from JAX 0.4.33 on (0.4.31 and earlier record none): \
     upgrade jax and jaxlib. On a GPU or TPU, the device tracer recorded nothing: look for profiler errors in the \
     job's log (for CUPTI_ERROR_INSUFFICIENT_PRIVILEGES, allow GPU profiling for non-root users)";

/// Why a capture taken with host tracing off lacks what it lacks.
pub const HOST_TRACING_OFF: &str = "This capture was taken with host_tracer_level=0: the host recorded no step \
     annotations (StepTraceAnnotation), no kernel launches and, on CPU, no XLA ops. Capture with \
     host_tracer_level ≥ 1 (JAX's default is 2): the annotations in the code are fine";

pub fn ev(what: impl Into<String>, host: &str) -> Evidence {
    Evidence {
        what: what.into(),
        host: host.to_string(),
        start_ps: None,
        duration_ps: None,
        step_num: None,
        detail: String::new(),
    }
}

pub fn at(mut e: Evidence, start_ps: i64, duration_ps: i64) -> Evidence {
    e.start_ps = Some(start_ps);
    e.duration_ps = Some(duration_ps);
    e
}

/// Evidence located in step `st`: `what`, over `duration_ps` from `start_ps`.
pub fn in_step(what: impl Into<String>, st: &Step, start_ps: i64, duration_ps: i64) -> Evidence {
    let mut e = at(ev(what, &st.host), start_ps, duration_ps);
    e.step_num = Some(st.step_num);
    e
}

pub fn ms(ps: i64) -> String {
    format!("{:.3} ms", ps as f64 / 1e9)
}

pub fn or_unknown(s: &str) -> &str {
    if s.is_empty() {
        "(unknown)"
    } else {
        s
    }
}

/// What the host was doing in `[lo, hi)`: the host event covering most of it that is
/// not the step itself.
pub fn host_activity(profile: &Profile, host: &str, lo: i64, hi: i64) -> String {
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
