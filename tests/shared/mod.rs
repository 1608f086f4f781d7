//! Helpers shared by the engine-level test crates (each includes this folder by `#[path]`;
//! a crate may leave some of them unused).
#![allow(dead_code)]

pub mod cells;
pub mod node;
