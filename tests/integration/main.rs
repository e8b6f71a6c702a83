//! stepscope's integration tests: the real binary against real captures.
//!
//! Counts and values are cross-checked against `tests/support/xspace_ref.py`, an
//! independent reader built on Python's protobuf runtime (installed by
//! `scripts/test.sh`).

mod util;

mod analyses;

mod discovery;
mod errors;
mod info;
mod robustness;
