//! One module per subcommand.

pub mod advise;
pub mod buffers;
pub mod capture;
pub mod check;
pub mod collectives;
pub mod compare;
pub mod compile;
pub mod devices;
pub mod diff;
pub mod export;
pub mod history;
pub mod hlo;
pub mod info;
pub mod kernels;
pub mod ls;
pub mod mcp;
pub mod memory;
pub mod ops;
pub mod roofline;
pub mod scopes;
pub mod serve;
pub mod sql;
pub mod steps;
pub mod summary;
pub mod tables;
pub mod top;
