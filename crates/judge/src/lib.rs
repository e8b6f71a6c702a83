//! Judgement: the rules that read the analyses of a run (`stepscope-analysis`) and
//! say what is wrong, with the measured value, the threshold it crossed, evidence
//! (the worst steps, ops, gaps, with times) and what to do about it.
//!
//! Modules in layer order; each uses only those before it: [`thresholds`],
//! [`finding`], [`evidence`], [`inputs`], [`facts`] (what the rules cite of the run's
//! events), [`context`], [`rule`], [`rules`] (one file a rule), [`advise`] (runs them),
//! [`by_host`] (runs them over a run read a host at a time).

pub mod advise;
pub mod by_host;
pub mod context;
pub mod evidence;
pub mod facts;
pub mod finding;
pub mod gains;
pub mod health;
pub mod inputs;
pub mod rule;
pub mod rules;
pub mod thresholds;

#[cfg(test)]
mod testing;
