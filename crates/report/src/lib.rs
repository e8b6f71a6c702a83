pub mod check;
pub mod compare;
pub mod diff;
pub mod history;
pub mod hosts;
pub mod live;
pub mod side;
pub mod summary;
