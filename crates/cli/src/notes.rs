//! Sentences the commands share about how a run's steps were measured (timed on the
//! device, cut by the capture, cold; used by `steps`, `summary`, `compare`, `diff` and
//! `check`), and about HLO that cannot be read (`ops`, `hlo`). They depend on nothing
//! but the text helpers and the profile.

use crate::human;

/// Where steps are timed on the device ([`StepTiming::Device`](stepscope_analysis::steps::StepTiming::Device)): what was
/// measured and why, in one sentence. Where the dispatch takes as long as the work,
/// the device's busy share of the steps (`busy_pct`) tells who waits: a device idle
/// for a tenth of its steps or more waits for the host; a busy one makes the host
/// wait for room in its queue.
pub fn timing_note(device_median_ps: i64, host_median_ps: i64, busy_pct: f64, cut: usize) -> String {
    let mut note = format!(
        "The loop dispatches ahead of its device: a step's annotation closes before its work runs \
         (device step {}, host dispatch {}, medians), so stepscope times each step on the device, \
         up to the end of the work it launched.",
        human::duration_ps(device_median_ps),
        human::duration_ps(host_median_ps)
    );
    if host_median_ps.saturating_mul(10) >= device_median_ps.saturating_mul(9) {
        note.push_str(match busy_pct < 90.0 {
            true => " The dispatch takes as long as the work: the device waits for the host, which sets the pace.",
            false => {
                " The dispatch takes as long as the work, and the device is busy: the host waits for room in the \
                 device's queue, and the device sets the pace."
            }
        });
    }
    if cut > 0 {
        let s = if cut == 1 { " is" } else { "s are" };
        note.push_str(&format!(
            " {cut} step{s} left out of the statistics: the capture holds only part of their work (marked cut)."
        ));
    }
    note
}

/// Where the capture stopped before jitted calls' work ran
/// ([`Steps::dispatched_not_run`](stepscope_analysis::steps::Steps::dispatched_not_run),
/// XLA:CPU) or GPU launches' work ran ([`Steps::launches_not_run`](stepscope_analysis::steps::Steps::launches_not_run)).
pub fn not_run_note(calls: u64, launches: u64) -> Option<String> {
    let what = match (calls, launches) {
        (0, 0) => return None,
        (calls, 0) => format!("the work of at least {calls} jitted call(s) ran"),
        (0, launches) => format!("the work of {launches} GPU launch(es) ran"),
        (calls, launches) => {
            format!("the work of at least {calls} jitted call(s) and of {launches} GPU launch(es) ran")
        }
    };
    Some(format!(
        "The capture stopped before {what} (JAX returns from a call before its work runs): those steps' work \
         is not in the profile. Wait for the last step's outputs before stopping (jax.block_until_ready), or \
         capture with stepscope.trace, which waits."
    ))
}

/// Where a run's steps compiled ([`Overview::cold_steps`](stepscope_analysis::overview::Overview::cold_steps)):
/// what its step time is, in one sentence; `None` where none did.
pub fn cold_note(label: &str, cold: u64, steps: u64) -> Option<String> {
    match cold {
        0 => None,
        c if c >= steps => Some(format!(
            "{label}: every step is cold (it compiled, or is the first run after a compile): its time is a first \
             call's (compilation, a cold start), not a warm step's: capture steps after a warm-up to compare"
        )),
        c => Some(format!("{label}: {c} of {steps} steps are cold: its step time is the {} warm steps'", steps - c)),
    }
}

/// The programs of `profile` whose HLO cannot be read, in one line (none: nothing).
pub fn unreadable_hlo_note(profile: &stepscope_analysis::Profile) -> Option<String> {
    let modules = profile.hlo_modules();
    unreadable_note(&modules.iter().flat_map(|m| m.unreadable()).collect::<Vec<_>>())
}

/// [`unreadable_hlo_note`] of the programs `bad` (each with why its HLO cannot be read).
pub fn unreadable_note(bad: &[(&str, String)]) -> Option<String> {
    let (first, why) = bad.first()?;
    let more = if bad.len() > 1 { format!(" and {} more", bad.len() - 1) } else { String::new() };
    Some(format!(
        "the HLO of program {first}{more} cannot be read ({why}); its ops have no category, FLOPs or source line"
    ))
}
