//! Every analysis stepscope shows, over the profile model (`stepscope-model`).
//!
//! Pure functions of a [`Profile`]: no printing, no HTTP, no judgement (the rules are
//! `stepscope-judge`, the summary and comparisons `stepscope-report`). Each analysis
//! returns plain structs that serialize to the versioned JSON the CLI prints (`schema`
//! fields), with units in every field name. Analyses read the model's stages and may
//! read each other's results, in this order (each uses only those before it):
//! [`source`], [`cost`], [`peaks`], [`ops`], [`kernels`], [`roofline`], [`steps`],
//! [`scopes`], [`compile`], [`collectives`], [`devices`], [`buffers`], [`memory`],
//! [`hlo_context`], [`hlo_graph`], [`timeline`], [`overview`], [`fold`], [`whatif`].

pub mod ahead;
pub mod buffers;
pub mod collectives;
pub mod compile;
pub mod cost;
pub mod devices;
pub mod fold;
pub mod hlo_context;
pub mod hlo_graph;
pub mod kernels;
mod keyed;
pub mod memory;
pub mod ops;
pub mod overview;
pub mod peaks;
pub mod roofline;
pub mod scopes;
pub mod source;
pub mod steps;
pub mod timeline;
pub mod tracer;
pub mod whatif;

/// The model, as the analyses' callers name it (`stepscope_analysis::profile`, …).
pub use stepscope_model::{device_time, profile, stats, wire};
pub use stepscope_model::{wire_enum, wire_struct};
pub use stepscope_model::{Derived, Device, DeviceKind, Keys, OpEvent, Profile};
