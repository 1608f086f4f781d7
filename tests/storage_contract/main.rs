//! The per-partition storage contract (`ringgate::storage::handle`), one file per behaviour:
//! reads (get, scans, snapshots), conditional commits, fencing by owner epoch, key-range
//! enforcement, what a reader sees of a commit in flight. One test binary (each links the
//! whole crate). Every test runs on the embedded store and on PostgreSQL
//! (`support::each_backend`, `pg.rs`).
#![allow(dead_code)]

mod conditions;
mod cost;
mod fencing;
mod pg;
mod pg_errors;
mod pg_local;
mod ranges;
mod reads;
mod support;
mod visibility;
