//! One module per subcommand.

pub mod info;
pub mod kernels;
pub mod ls;
pub mod ops;
pub mod serve;
pub mod steps;
pub mod summary;
