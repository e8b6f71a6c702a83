//! One module per subcommand.

pub mod collectives;
pub mod compile;
pub mod devices;
pub mod hlo;
pub mod info;
pub mod kernels;
pub mod ls;
pub mod memory;
pub mod ops;
pub mod steps;
pub mod summary;
