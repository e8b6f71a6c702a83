pub mod check;
pub mod compare;
pub mod diff;
pub mod live;
pub mod summary;
