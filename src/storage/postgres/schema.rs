//! The tables, created (or checked) when the backend opens. `ringgate_version` holds the schema
//! version; a database written by a newer ringgate is refused, an older one is migrated in the
//! same transaction (there is only version 1 so far). The DDL runs under a transaction-scoped
//! advisory lock, so several nodes starting at once create the tables once.
//!
//! - `ringgate_data(k bytea primary key, v bytea, token int8)`: table rows, partition headers and
//!   local records (secondary-index entries); `token` is set for local records written through a
//!   partition handle (the token of the row they describe, `LocalWrite::token`), so a
//!   partition's local records can be found by token range (partial index
//!   `ringgate_data_local_token`), and NULL for everything else.
//! - `ringgate_sizes(k, v)`, `ringgate_meta(k, v)`: the `Sizes` and `Meta` key spaces.
//! - `ringgate_owner(storage_id, partition_id, epoch)`: owner epochs. u64 values are stored in
//!   int8 bit for bit (`as i64`), so `RETIRED_EPOCH` (u64::MAX) is -1 there; ringgate compares
//!   them as u64 after reading, never in SQL.
//!
//! - the function `ringgate_commit` (`commit_fn.rs`), replaced at every start.
//!
//! bytea compares bytewise (no collation applies), which is the order of ringgate's keys, so
//! every ordered scan, both ways, is a B-tree index range scan.

use super::errors::{in_txn, map_err};
use super::pool::Pool;
use crate::storage::{Result, StorageError};
use std::sync::Arc;

pub(super) const VERSION: i32 = 1;

/// An arbitrary constant: the advisory lock key of schema changes.
const DDL_LOCK: i64 = 0x7269_6e67_6761_7465; // "ringgate"

const CREATE: &str = "
CREATE TABLE IF NOT EXISTS ringgate_version (version int4 NOT NULL);
CREATE TABLE IF NOT EXISTS ringgate_data (k bytea PRIMARY KEY, v bytea NOT NULL, token int8);
CREATE INDEX IF NOT EXISTS ringgate_data_local_token ON ringgate_data (token)
    WHERE token IS NOT NULL;
CREATE TABLE IF NOT EXISTS ringgate_sizes (k bytea PRIMARY KEY, v bytea NOT NULL);
CREATE TABLE IF NOT EXISTS ringgate_meta (k bytea PRIMARY KEY, v bytea NOT NULL);
CREATE TABLE IF NOT EXISTS ringgate_owner (
    storage_id int8 NOT NULL, partition_id int8 NOT NULL, epoch int8 NOT NULL,
    PRIMARY KEY (storage_id, partition_id));
";

pub(super) fn migrate(pool: &Arc<Pool>) -> Result<()> {
    in_txn(pool, "BEGIN", |c| {
        c.wait(
            c.client
                .execute("SELECT pg_advisory_xact_lock($1)", &[&DDL_LOCK]),
        )
        .map_err(map_err)?;
        c.batch(CREATE).map_err(map_err)?;
        c.batch(super::commit_fn::CREATE_FUNCTION)
            .map_err(map_err)?;
        let rows = c
            .wait(c.client.query("SELECT version FROM ringgate_version", &[]))
            .map_err(map_err)?;
        match rows.first().map(|r| r.get::<_, i32>(0)) {
            None => {
                c.wait(c.client.execute(
                    "INSERT INTO ringgate_version (version) VALUES ($1)",
                    &[&VERSION],
                ))
                .map_err(map_err)?;
                Ok(())
            }
            Some(v) if v <= VERSION => Ok(()),
            Some(v) => Err(StorageError::Corrupt(format!(
                "the PostgreSQL database holds ringgate schema version {v}, newer than this \
                 release's {VERSION}: run a newer ringgate"
            ))),
        }
    })
}
