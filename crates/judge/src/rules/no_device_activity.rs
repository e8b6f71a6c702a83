//! `no-device-activity`: No device plane or op was recorded.

use crate::context::Context;
use crate::evidence::*;
use crate::finding::{Finding, Severity};
use crate::rule::Rule;

pub const RULE: Rule = Rule { id: "no-device-activity", threshold: None, needs_steps: false, check };

fn check(cx: &Context, out: &mut Vec<Finding>) {
    let (device_time, host_tracing_off) = (cx.device_time, cx.host_tracing_off);
    if !device_time {
        out.push(Finding {
            gain: None,
            caveats: Vec::new(),
            rule: RULE.id,
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
}

#[cfg(test)]
mod tests {
    use super::RULE;
    use crate::testing::Run;

    #[test]
    fn fires_where_no_device_ran_an_op() {
        // JAX 0.4.31 on CPU records no XLA ops.
        let run = Run::of("cpu-jax0431");
        assert!(run.profile.devices().is_empty());
        assert!(run.one(&RULE).advice.contains("0.4.33"));
        assert!(Run::of("cpu-clean").check(&RULE).is_empty());
    }
}
