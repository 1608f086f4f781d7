//! Tokens, the physical partition map of each table, splits, and request-unit accounting.

pub mod hot;
pub mod map;
pub mod ru;
pub mod sizes;
pub mod split;
pub mod throttle;
pub mod token;
pub mod views;
