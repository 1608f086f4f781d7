//! The per-partition storage contract (`ringgate::storage::handle`), one file per behaviour:
//! reads (get, scans, snapshots), conditional commits, fencing by owner epoch, key-range
//! enforcement. One test binary (each links the whole crate). A second backend runs the same
//! tests by changing `support::open`.
#![allow(dead_code)]

mod conditions;
mod cost;
mod fencing;
mod ranges;
mod reads;
mod support;
