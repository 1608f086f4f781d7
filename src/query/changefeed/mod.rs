//! The change feed: `SELECT ... WHERE COSMOS_CHANGEFEED_START_TIME() = '...'` answers the latest
//! version of every row inserted or updated since that time, in order of modification, and a
//! paging state that continues the feed for ever (Cosmos DB's API for Cassandra serves it so).
//!
//! Which tables: those with Cassandra's change data capture option, `WITH cdc = true`
//! (`write::records`): recording costs point writes about a fifth of their throughput
//! (scripts/bench), so it is opt-in; a feed query on another table is refused.
//!
//! Storage (`keys.rs`): every row write also writes, in the same partition commit, a feed
//! entry `[0xFF 0x01][table storage id u64 BE][sequence u64 BE][row key tail]` (empty value)
//! and a reverse record `[0xFF 0x02][storage id][row key tail]` -> sequence (u64 BE); the row
//! key tail is the row's data key without its storage id (token, partition key, kind,
//! clustering). An update reads the reverse record and deletes the row's previous entry, so
//! the feed holds one entry per row: its latest version. Both are *local* records owned
//! through the row's token (`storage::handle::LocalWrite`), like secondary-index entries, so a
//! commit still touches one physical partition and a split moves nothing.
//!
//! Sequences (`clock.rs`) come from one hybrid clock per process: `max(now in µs, last + 1)`,
//! recovered per table from its highest stored entry before the table's first write or feed
//! read after a start, so they grow across restarts and splits. A reader only reads up to
//! the highest sequence below every write still in flight, so an entry can never appear behind
//! a position a consumer has already passed.
//!
//! The paging state (`paging.rs`) holds the last feed key consumed and a fingerprint of the
//! query's scope (token ranges, partition keys), not a partition id: it stays exact across
//! splits (keys never move) and restarts (sequences only grow).
//!
//! `plan.rs` recognizes the predicates and strips them from the SELECT (the rest is planned as
//! usual: `pk = ...` and `token(pk) > a AND token(pk) <= b` become the feed's scope);
//! `read.rs` reads one bounded page; `write.rs` adds the records to a row write.

pub mod clock;
pub mod keys;
pub mod paging;
pub mod plan;
pub mod read;
pub mod write;

pub use plan::{bind_type, detect, FeedQuery};
