//! ringgate: a Cassandra-compatible data gateway with Cosmos DB-style physical partitions.
//!
//! Layers, data flowing one way: `protocol` -> `server` -> `cql` -> `schema` -> `query` ->
//! `partition` -> `storage`. See docs/ARCHITECTURE.md.

pub mod admin;
pub mod config;
pub mod cql;
pub mod metrics;
pub mod partition;
pub mod protocol;
pub mod query;
pub mod schema;
pub mod server;
pub mod storage;
