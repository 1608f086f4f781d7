//! ringgate: a Cassandra-compatible data gateway with Cosmos DB-style physical partitions.
//!
//! Layers, each importing only those below it: `server` (with `config`) -> `query` ->
//! `partition` -> `format` -> `schema` -> `storage` -> leaves (`cql`, `error`, `tokens`, `protocol`, `clock`).
//! See docs/ARCHITECTURE.md.

pub mod admin;
pub mod allocator;
pub mod clock;
pub mod cluster;
pub mod config;
pub mod cql;
pub mod error;
pub mod etcd;
pub mod fast_hash;
pub mod format;
pub mod metrics;
pub mod partition;
pub mod protocol;
pub mod query;
pub mod schema;
pub mod server;
pub mod storage;
pub mod tokens;
