//! The profile model and every analysis stepscope shows.
//!
//! Pure functions over decoded [`Space`](stepscope_xspace::Space)s: no printing, no
//! HTTP. Each analysis returns plain structs that serialize to the versioned JSON the
//! CLI prints (`schema` fields), with units in every field name.

pub mod advise;
mod cache;
pub mod check;
pub mod collectives;
mod command_buffer;
pub mod compare;
pub mod compile;
pub mod cost;
pub mod device_time;
pub mod devices;
pub mod diff;
pub mod hlo_context;
pub mod kernels;
pub mod live;
pub mod memory;
pub mod ops;
pub mod peaks;
pub mod profile;
pub mod roofline;
pub mod scopes;
pub mod source;
pub mod stats;
pub mod steps;
pub mod summary;
pub mod timeline;

pub use cache::Derived;
pub use profile::{Device, DeviceKind, Keys, OpEvent, Profile};
