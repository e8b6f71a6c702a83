//! Every rule of `advise`, one a file, each with its id, threshold, evidence, advice
//! and tests. [`ALL`] is the order they run in (findings are then sorted: most severe
//! first, then by how far past the threshold).
//!
//! A new rule: a file here with `pub const RULE: Rule` and its check (see
//! [`crate::rule::Rule`]), a line in [`ALL`], its threshold as a field of
//! [`crate::thresholds::Thresholds`], a test on a real capture that fires it and one
//! that does not, and a line in docs/architecture.md's list.

pub mod async_waits;
pub mod captured_compilation;
pub mod collectives_exposed;
pub mod compile_time;
pub mod data_movement;
pub mod dominant_op;
pub mod gaps_between_steps;
pub mod host_bound_gaps;
pub mod host_callbacks;
pub mod host_device_copies;
pub mod host_tracing_off;
pub mod input_bound;
pub mod launch_queued;
pub mod low_occupancy;
pub mod low_utilization;
pub mod many_dispatches;
pub mod many_small_ops;
pub mod memory_bandwidth;
pub mod memory_near_capacity;
pub mod no_device_activity;
pub mod no_steps;
pub mod recompilation;
pub mod runtime_overhead;
pub mod step_jitter;
pub mod stragglers;
pub mod sync_every_step;
pub mod too_few_steps;
pub mod truncated;

use crate::rule::Rule;

/// Every rule, in the order they run.
pub const ALL: &[Rule] = &[
    no_steps::RULE,
    host_tracing_off::RULE,
    too_few_steps::RULE,
    recompilation::RULE,
    captured_compilation::RULE,
    compile_time::RULE,
    no_device_activity::RULE,
    low_utilization::RULE,
    host_bound_gaps::RULE,
    launch_queued::RULE,
    gaps_between_steps::RULE,
    input_bound::RULE,
    many_small_ops::RULE,
    many_dispatches::RULE,
    dominant_op::RULE,
    memory_bandwidth::RULE,
    low_occupancy::RULE,
    host_device_copies::RULE,
    data_movement::RULE,
    async_waits::RULE,
    host_callbacks::RULE,
    sync_every_step::RULE,
    runtime_overhead::RULE,
    collectives_exposed::RULE,
    stragglers::RULE,
    memory_near_capacity::RULE,
    step_jitter::RULE,
    truncated::RULE,
];

#[cfg(test)]
mod tests {
    use super::ALL;
    use crate::thresholds::Thresholds;

    #[test]
    fn ids_are_unique_and_thresholds_are_fields_with_units() {
        let mut ids: Vec<&str> = ALL.iter().map(|r| r.id).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), ALL.len(), "a rule id is used twice");
        let fields = serde_json::to_value(Thresholds::default()).unwrap();
        for rule in ALL {
            let Some(field) = rule.threshold else { continue };
            assert!(fields.get(field).is_some(), "{}: no threshold field {field}", rule.id);
            assert!(["_pct", "_s", "_us", "_steps", "_per_step"].iter().any(|u| field.ends_with(u)), "{field}");
        }
    }

    #[test]
    fn every_rule_is_documented() {
        let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/architecture.md")).unwrap();
        for rule in ALL {
            assert!(doc.contains(&format!("`{}`", rule.id)), "docs/architecture.md does not list {}", rule.id);
        }
    }
}
