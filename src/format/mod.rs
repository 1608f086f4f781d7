//! The table format: how a table's data lies in the store, in one place.
//!
//! * `keys`: the data key of every row and partition header (storage id, order-preserving
//!   token, escaped partition key, kind, order-preserving clustering values), and the token of
//!   a partition key (Murmur3, or MultiHash levels).
//! * `plain_row`: a version-1 row value read in place (liveness and live cells, no row model),
//!   for scans of tables without clustering columns.
//! * `row`: the row model (row marker, cells, complex cells of non-frozen collections and UDTs,
//!   partition and range tombstones), its last-write-wins merge, and the versioned value
//!   encoding.
//!
//! Other records in the data space keep their key layout next to their owners for now:
//! secondary index entries (`query::index`: `[index id][value][row key tail]`), logical
//! partition size records (`partition::sizes`) and partition maps (`partition::map`).
//!
//! Layer: above `schema` (a key needs the table's definition), below `partition` and `query`,
//! which build and read every key through here. `query::row` is this module under its old
//! name.

pub mod keys;
#[cfg(test)]
mod merge_tests;
pub mod plain_row;
pub mod row;

pub use keys::*;
pub use row::*;

/// A stored key or value that does not decode: the store holds something this version did
/// not write.
#[derive(Debug, thiserror::Error)]
#[error("corrupt stored row: {0}")]
pub struct CorruptRow(pub &'static str);

/// A corrupt row is the server's failure, not the request's.
impl From<CorruptRow> for crate::error::ClientError {
    fn from(e: CorruptRow) -> Self {
        crate::error::ClientError::Server(e.to_string())
    }
}
