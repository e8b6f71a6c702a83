//! One module per subcommand.

pub mod info;
pub mod kernels;
pub mod ls;
pub mod memory;
pub mod ops;
pub mod steps;
pub mod summary;
