//! What moving a partition to another storage group needs of this backend
//! (`partition::moves`): its local records listed by token (through the partial index
//! `ringgate_data_local_token`, in (token, key) order so that a listing resumes after the last
//! record it gave), one local record read, and deleting everything of the partition (a copy
//! left by a move that did not finish, or the source's copy after one that did) in
//! transactions of a bounded number of rows, each fenced by the epoch like a commit.

use super::errors::{in_txn, map_err};
use super::handle::{fenced, locked_epoch};
use super::pool::Pool;
use super::scan::{self, Source};
use super::{DATA, SIZES};
use crate::storage::handle::{Epoch, LocalWrite, PartitionRef};
use crate::storage::{HexKey, Result, StorageError};
use bytes::Bytes;
use std::sync::Arc;

/// The partition's tokens as an inclusive SQL range (None: it holds no token).
fn token_bounds(part: &PartitionRef) -> Option<(i64, i64)> {
    match part.start {
        i64::MIN => Some((i64::MIN, part.end)),
        i64::MAX => None,
        s => Some((s + 1, part.end)),
    }
}

pub(super) fn local_records(
    source: &Source,
    part: &PartitionRef,
    after: Option<(i64, &[u8])>,
    limit: usize,
) -> Result<Vec<LocalWrite>> {
    let Some((lo, hi)) = token_bounds(part) else {
        return Ok(Vec::new());
    };
    let limit = limit.clamp(1, 10_000) as i64;
    source.run(|c| {
        let rows = match after {
            None => {
                let stmt = c.stmt(&format!(
                    "SELECT k, v, token FROM {DATA} WHERE token >= $1 AND token <= $2 \
                     ORDER BY token, k LIMIT $3"
                ))?;
                c.wait(c.client.query(&stmt, &[&lo, &hi, &limit]))
            }
            Some((token, key)) => {
                let stmt = c.stmt(&format!(
                    "SELECT k, v, token FROM {DATA} WHERE token >= $1 AND token <= $2 \
                     AND (token, k) > ($3, $4) ORDER BY token, k LIMIT $5"
                ))?;
                c.wait(c.client.query(&stmt, &[&lo, &hi, &token, &key, &limit]))
            }
        }
        .map_err(map_err)?;
        Ok(rows
            .iter()
            .map(|r| LocalWrite {
                key: Bytes::from(r.get::<_, Vec<u8>>(0)),
                value: Some(Bytes::from(r.get::<_, Vec<u8>>(1))),
                token: r.get(2),
            })
            .collect())
    })
}

pub(super) fn get_local(
    source: &Source,
    part: &PartitionRef,
    key: &[u8],
    token: i64,
) -> Result<Option<Bytes>> {
    if !part.owns_token(token) {
        return Err(StorageError::OutOfRange {
            storage_id: part.storage_id,
            partition_id: part.partition_id,
            key: HexKey(Bytes::copy_from_slice(key)),
        });
    }
    scan::get(source, DATA, key)
}

/// Deletes at most `limit` records of each kind (rows, local records, size records) in one
/// transaction holding the owner row `FOR SHARE` (another epoch: `Fenced`, nothing deleted).
pub(super) fn clear_some(
    pool: &Arc<Pool>,
    part: &PartitionRef,
    epoch: Epoch,
    limit: usize,
) -> Result<u64> {
    let limit = limit.clamp(1, 10_000) as i64;
    let (lo, hi) = (&part.range.lo[..], part.range.hi.as_deref());
    let upper = match hi {
        Some(_) => "AND k < $2",
        None => "AND $2::bytea IS NULL",
    };
    let by_key = |table: &str| {
        format!(
            "DELETE FROM {table} WHERE k IN \
             (SELECT k FROM {table} WHERE k >= $1 {upper} ORDER BY k LIMIT $3)"
        )
    };
    in_txn(pool, "BEGIN", |c| {
        let current = locked_epoch(c, part.storage_id, part.partition_id, "FOR SHARE")?;
        if current != epoch {
            return Err(fenced(part, epoch, current));
        }
        let mut deleted = 0;
        for table in [DATA, SIZES] {
            let stmt = c.stmt(&by_key(table))?;
            deleted += c
                .wait(c.client.execute(&stmt, &[&lo, &hi, &limit]))
                .map_err(map_err)?;
        }
        if let Some((tlo, thi)) = token_bounds(part) {
            let stmt = c.stmt(&format!(
                "DELETE FROM {DATA} WHERE k IN (SELECT k FROM {DATA} \
                 WHERE token >= $1 AND token <= $2 LIMIT $3)"
            ))?;
            deleted += c
                .wait(c.client.execute(&stmt, &[&tlo, &thi, &limit]))
                .map_err(map_err)?;
        }
        Ok(deleted)
    })
}
