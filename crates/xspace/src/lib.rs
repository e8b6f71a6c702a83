//! Readers for the profile files JAX writes, into one columnar model.
//!
//! - [`xplane`]: `*.xplane.pb` (a serialized `tensorflow.profiler.XSpace`), memory-mapped
//!   and walked straight into columns, planes and lines decoded in parallel.
//! - [`trace_json`]: Chrome trace JSON (`*.trace.json.gz`, `perfetto_trace.json.gz`, `.json`).
//! - [`discover`]: finds runs and host files in a TensorBoard-layout log directory.
//!
//! Every reader returns a [`Space`] per host; see [`model`].

pub mod buffers;
pub mod column;
pub mod discover;
pub mod error;
pub mod files;
pub mod hlo;
pub mod mapguard;
mod mem;
pub mod model;
pub mod pprof;
pub mod room;
mod stat;
mod stat_wire;
pub mod trace_json;
mod wire;
pub mod xplane;

pub use column::Column;
pub use error::{Error, Result};
pub use model::{
    EventMeta, EventStats, Format, Line, Plane, Progress, Source, Space, Span, Stat, StatKind, StatLookup, StatMeta,
    StatValue,
};
