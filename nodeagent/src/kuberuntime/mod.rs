//! (in progress)

pub mod logs;
