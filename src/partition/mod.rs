//! Tokens, the physical partition map of each table, splits, and request-unit accounting.

pub mod derived_sizes;
pub mod dirty;
pub mod handles;
pub mod hot;
pub mod map;
pub mod move_runner;
pub mod moves;
pub mod ownership;
pub mod placement;
pub mod ru;
pub mod served;
pub mod size_memo;
pub mod sizes;
pub mod split;
pub mod split_watch;
pub mod throttle;
pub mod views;
