//! The profile model: a run's hosts and what is derived from them once, in stages,
//! for every analysis to read (docs/architecture.md).
//!
//! Modules in layer order; each uses only those above it in this list:
//!
//! - [`wire`]: what a host is reduced to, as bytes (a run's hosts mapped elsewhere);
//! - [`stats`], [`derived`]: interval and distribution helpers; cells computed once;
//! - [`records`]: a device's executed ops as compact records;
//! - [`hlo_ops`]: an executed op's HLO instruction;
//! - [`programs`]: one program across the hosts of a run, by its HLO;
//! - [`device`]: a device, its stat keys and its records;
//! - [`kinds`]: what an op's time is (compute, collective, copy, async wait);
//! - [`command_buffer`]: GPU kernels of a command buffer credited to their instructions;
//! - [`pool`]: when an XLA:CPU op handed to the intra-op thread pool finished;
//! - [`discover`] (stage 1): the devices of every host and their op records;
//! - [`steps`]: the steps and the host events they are measured against;
//! - [`dispatch`]: which host call dispatched each XLA:CPU program run;
//! - [`enqueue`]: which host call enqueued each TPU program run, by its flows (and
//!   XLA:CPU's dispatches beside them);
//! - [`work`]: the device work a host window (a step, a scope) launched;
//! - [`busy`]: one pass over each device's ops (busy, active, kinds, launch gaps);
//! - [`time_base`] (stage 2): the above for every device, and the steps measured;
//! - [`executions`]: which of a GPU op's kernels make one execution of it;
//! - [`device_time`] (stage 3): every device's window split into named parts;
//! - [`host_scopes`]: the user's host scopes and input work;
//! - [`profile`]: [`Profile`], which holds the stages and computes each once, in order.
//!
//! No module here knows an analysis: the analyses (`stepscope-analysis`), the rules
//! (`stepscope-judge`) and the reports (`stepscope-report`) are built on this crate.

pub mod busy;
pub mod command_buffer;
pub mod derived;
pub mod device;
pub mod device_time;
pub mod discover;
pub mod dispatch;
pub mod enqueue;
pub mod executions;
pub mod hlo_ops;
pub mod host_scopes;
pub mod kinds;
pub mod pool;
pub mod profile;
pub mod programs;
pub mod records;
pub mod stats;
pub mod steps;
pub mod time_base;
pub mod wire;
pub mod work;

pub use derived::{Derived, Memo};
pub use device::{Device, DeviceKind, Keys, OpSource, UserPeaks};
pub use profile::Profile;
pub use records::OpEvent;
