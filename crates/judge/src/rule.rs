//! A rule: one unit of judgement, with its id, the threshold it compares against and
//! the check that reads the analyses ([`Context`]) and says what it found.

use crate::context::Context;
use crate::finding::Finding;

/// One rule of `advise`. Each lives in its own file under `rules/`, as `RULE`, with
/// its own tests; [`crate::rules::ALL`] lists them in the order they run.
#[derive(Clone, Copy)]
pub struct Rule {
    /// The finding's `rule` (stable: users filter and gate on it).
    pub id: &'static str,
    /// The [`crate::thresholds::Thresholds`] field the rule compares against (its
    /// `threshold` in the finding); `None` for rules that state a fact.
    pub threshold: Option<&'static str>,
    /// True for rules that judge steps: they do not run on a capture without steps.
    pub needs_steps: bool,
    /// Adds the rule's findings (none, one, or one per allocator or host) to `out`.
    pub check: fn(&Context, &mut Vec<Finding>),
}
