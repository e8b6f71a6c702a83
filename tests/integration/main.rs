//! stepscope's integration tests: the real binary against real captures.
//!
//! Counts and values are cross-checked against `tests/support/xspace_ref.py`, an
//! independent reader built on Python's protobuf runtime (installed by
//! `scripts/test.sh`).

mod util;
mod verdicts;
mod whatif;

mod ahead;
mod analyses;
mod capture;
mod capture_hostile;

mod cost;
mod devices;
mod discovery;
mod docs;
mod errors;
mod export;
mod gpu;
mod health;
mod hostile;
mod hostile_mcp;
mod hostile_tables;
mod hostile_writes;
mod info;
mod judgement;
mod memory;
mod nothing_lost;
mod output;
mod parts;
mod remote;
mod robustness;
mod scopes;
mod server;
mod server_concurrency;
mod server_load;
mod sources;
mod sql;
