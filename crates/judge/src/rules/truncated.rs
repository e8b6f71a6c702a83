//! `truncated`: A host's profile that looks truncated (capped trace JSON, dropped events).

use crate::context::Context;
use crate::evidence::*;
use crate::finding::{Finding, Severity};
use crate::rule::Rule;

pub const RULE: Rule = Rule { id: "truncated", threshold: None, needs_steps: true, check };

fn check(cx: &Context, out: &mut Vec<Finding>) {
    for t in cx.facts.truncated() {
        out.push(Finding {
            gain: None,
            caveats: Vec::new(),
            rule: RULE.id,
            severity: Severity::Warning,
            title: format!("the profile of {} looks truncated", t.host),
            value: t.events as f64,
            threshold: 1_000_000.0,
            unit: "count",
            evidence: vec![{
                let mut e = ev(format!("{} events", t.events), &t.host);
                e.detail = t.detail;
                e
            }],
            advice: "read the .xplane.pb instead of the trace JSON (it has every event), or capture fewer steps".into(),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::RULE;
    use crate::testing::Run;

    #[test]
    fn fires_on_a_host_whose_profile_says_events_were_dropped() {
        let mut run = Run::of("cpu-clean");
        assert!(run.check(&RULE).is_empty());
        let host = run.profile.hosts[0].host.clone();
        run.profile.hosts[0].warnings.push("1234 events dropped: buffer full".into());
        let f = run.one(&RULE);
        assert_eq!(f.evidence[0].host, host);
        assert_eq!(f.evidence[0].detail, "1234 events dropped: buffer full");
        assert_eq!(f.value, run.profile.hosts[0].event_count() as f64);
    }
}
