//! One module per subcommand.

pub mod export;
pub mod info;
pub mod kernels;
pub mod ls;
pub mod ops;
pub mod steps;
pub mod summary;
