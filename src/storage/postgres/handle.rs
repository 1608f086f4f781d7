//! The per-partition contract on PostgreSQL: owner epochs in `ringgate_owner`, handles whose
//! commit is one transaction, snapshots as REPEATABLE READ transactions.
//!
//! A commit (READ COMMITTED):
//! 1. `SELECT epoch FROM ringgate_owner ... FOR SHARE`: a different epoch is `Fenced`. The
//!    share lock is held to the end, so an owner change (`open_partition` with a newer epoch,
//!    `retire_partition`: both lock the row for update) waits for commits in flight and every
//!    later commit sees the new epoch: the check and the writes are atomic against it.
//! 2. A transaction-scoped advisory lock per condition key (FNV-1a of the key; sorted, so two
//!    commits cannot deadlock on them), then `SELECT k, v ... FOR UPDATE` of the condition
//!    keys: a condition that does not hold is `Conflict`. The advisory lock is what makes
//!    `Absent` exact: two commits that both expect a key absent are serialized even though
//!    there is no row yet to lock, and each statement of a READ COMMITTED transaction sees
//!    everything committed before it started.
//! 3. The writes (data with local records' tokens, sizes), then COMMIT.
//!
//! All three run in one statement, the server-side function of `commit_fn.rs` (one round
//! trip).
//!
//! Key ranges and local records' tokens are checked before anything is sent (`OutOfRange`).

use super::commit_fn::{self, Refused};
use super::errors::{in_txn, map_err};
use super::pool::Conn;
use super::scan::{self, SnapConn, Source};
use super::store::{check_key_len, PostgresStore};
use super::{write, DATA, SIZES};
use crate::storage::handle::*;
use crate::storage::{HexKey, Result, ScanIter, StorageError};
use bytes::Bytes;
use parking_lot::Mutex;
use std::ops::Bound;
use std::sync::Arc;

pub(super) fn fenced(part: &PartitionRef, epoch: Epoch, current: Epoch) -> StorageError {
    StorageError::Fenced {
        storage_id: part.storage_id,
        partition_id: part.partition_id,
        epoch,
        current,
    }
}

fn check_range(part: &PartitionRef, key: &[u8]) -> Result<()> {
    if part.range.contains(key) {
        return check_key_len(key);
    }
    Err(StorageError::OutOfRange {
        storage_id: part.storage_id,
        partition_id: part.partition_id,
        key: HexKey(Bytes::copy_from_slice(key)),
    })
}

/// The owner row's epoch (0: none), locked `FOR SHARE` or `FOR UPDATE`.
pub(super) fn locked_epoch(
    c: &mut Conn,
    storage_id: u64,
    partition_id: u64,
    lock: &str,
) -> Result<Epoch> {
    let stmt = c.stmt(&format!(
        "SELECT epoch FROM ringgate_owner WHERE storage_id = $1 AND partition_id = $2 {lock}"
    ))?;
    let ids = (storage_id as i64, partition_id as i64);
    let row = c
        .wait(c.client.query_opt(&stmt, &[&ids.0, &ids.1]))
        .map_err(map_err)?;
    Ok(row.map_or(0, |r| r.get::<_, i64>(0) as u64))
}

/// Sets the owner row's epoch (creating it), inside a transaction.
fn set_epoch(c: &mut Conn, storage_id: u64, partition_id: u64, epoch: Epoch) -> Result<()> {
    let stmt = c.stmt(
        "INSERT INTO ringgate_owner (storage_id, partition_id, epoch) VALUES ($1, $2, $3) \
         ON CONFLICT (storage_id, partition_id) DO UPDATE SET epoch = excluded.epoch",
    )?;
    let row = (storage_id as i64, partition_id as i64, epoch as i64);
    c.wait(c.client.execute(&stmt, &[&row.0, &row.1, &row.2]))
        .map_err(map_err)?;
    Ok(())
}

/// Creates the owner row if missing, so that it can be locked `FOR UPDATE`.
fn ensure_owner_row(c: &mut Conn, storage_id: u64, partition_id: u64) -> Result<()> {
    let stmt = c.stmt(
        "INSERT INTO ringgate_owner (storage_id, partition_id, epoch) VALUES ($1, $2, 0) \
         ON CONFLICT DO NOTHING",
    )?;
    let ids = (storage_id as i64, partition_id as i64);
    c.wait(c.client.execute(&stmt, &[&ids.0, &ids.1]))
        .map_err(map_err)?;
    Ok(())
}

impl PartitionStore for PostgresStore {
    fn open_partition(&self, part: PartitionRef, epoch: Epoch) -> Result<Arc<dyn PartitionHandle>> {
        in_txn(&self.pool, "BEGIN", |c| {
            ensure_owner_row(c, part.storage_id, part.partition_id)?;
            let current = locked_epoch(c, part.storage_id, part.partition_id, "FOR UPDATE")?;
            if epoch < current || epoch == RETIRED_EPOCH || current == RETIRED_EPOCH {
                return Err(fenced(&part, epoch, current));
            }
            if epoch > current {
                set_epoch(c, part.storage_id, part.partition_id, epoch)?;
            }
            Ok(())
        })?;
        Ok(Arc::new(PgHandle {
            store_source: self.source(),
            pool: Arc::clone(&self.pool),
            part,
            epoch,
            read_only: false,
        }))
    }

    /// Epoch 0 would pass the epoch check of a partition never opened (its owner row holds 0),
    /// so the handle refuses commits itself, before any statement is sent.
    fn read_only(&self, part: PartitionRef) -> Result<Arc<dyn PartitionHandle>> {
        Ok(Arc::new(PgHandle {
            store_source: self.source(),
            pool: Arc::clone(&self.pool),
            part,
            epoch: 0,
            read_only: true,
        }))
    }

    fn current_epoch(&self, storage_id: u64, partition_id: u64) -> Result<Epoch> {
        self.source()
            .run(|c| locked_epoch(c, storage_id, partition_id, ""))
    }

    fn drop_data(&self, storage_id: u64) -> Result<()> {
        let lo = storage_id.to_be_bytes().to_vec();
        let hi = crate::storage::prefix_successor(&lo);
        for table in [DATA, SIZES] {
            drop_range(&self.pool, table, &lo, hi.as_deref())?;
        }
        in_txn(&self.pool, "BEGIN", |c| {
            let stmt = c.stmt("DELETE FROM ringgate_owner WHERE storage_id = $1")?;
            c.wait(c.client.execute(&stmt, &[&(storage_id as i64)]))
                .map_err(map_err)?;
            Ok(())
        })
    }

    fn drop_prefix(&self, prefix: &[u8]) -> Result<()> {
        let end = crate::storage::prefix_successor(prefix);
        drop_range(&self.pool, DATA, prefix, end.as_deref())
    }

    fn retire_partition(&self, storage_id: u64, partition_id: u64) -> Result<()> {
        in_txn(&self.pool, "BEGIN", |c| {
            set_epoch(c, storage_id, partition_id, RETIRED_EPOCH)
        })
    }
}

/// Deletes the keys of `table` in `[lo, hi)` (hi None: to the end) in transactions of at most
/// `DROP_BATCH` rows each, so that dropping a large table holds no long transaction; the
/// caller's marker makes the whole idempotent.
fn drop_range(
    pool: &Arc<super::pool::Pool>,
    table: &str,
    lo: &[u8],
    hi: Option<&[u8]>,
) -> Result<()> {
    const DROP_BATCH: i64 = 10_000;
    let upper = match hi {
        Some(_) => "AND k < $2",
        None => "AND $2::bytea IS NULL",
    };
    let sql = format!(
        "DELETE FROM {table} WHERE k IN \
         (SELECT k FROM {table} WHERE k >= $1 {upper} ORDER BY k LIMIT {DROP_BATCH})"
    );
    loop {
        let deleted = in_txn(pool, "BEGIN", |c| {
            let stmt = c.stmt(&sql)?;
            c.wait(c.client.execute(&stmt, &[&lo, &hi]))
                .map_err(map_err)
        })?;
        if deleted < DROP_BATCH as u64 {
            return Ok(());
        }
    }
}

struct PgHandle {
    store_source: Source,
    pool: Arc<super::pool::Pool>,
    part: PartitionRef,
    epoch: Epoch,
    /// Opened without an epoch (`read_only`): every commit is `NotOwner`.
    read_only: bool,
}

impl PgHandle {
    fn refuse_if_read_only(&self) -> Result<()> {
        if !self.read_only {
            return Ok(());
        }
        Err(StorageError::NotOwner {
            storage_id: self.part.storage_id,
            partition_id: self.part.partition_id,
            owner: None,
        })
    }

    fn validate(&self, commit: &PartitionCommit) -> Result<()> {
        let keys = commit.writes.iter().chain(&commit.sizes).map(|(k, _)| k);
        for key in keys.chain(commit.conditions.iter().map(Condition::key)) {
            check_range(&self.part, key)?;
        }
        for l in &commit.local {
            if !self.part.owns_token(l.token) {
                return Err(StorageError::OutOfRange {
                    storage_id: self.part.storage_id,
                    partition_id: self.part.partition_id,
                    key: HexKey(l.key.clone()),
                });
            }
            check_key_len(&l.key)?;
        }
        Ok(())
    }
}

impl PartitionHandle for PgHandle {
    fn partition(&self) -> &PartitionRef {
        &self.part
    }

    fn epoch(&self) -> Epoch {
        self.epoch
    }

    fn get(&self, key: &[u8]) -> Result<Option<Bytes>> {
        check_range(&self.part, key)?;
        scan::get(&self.store_source, DATA, key)
    }

    fn scan(&self, lower: Bound<&[u8]>, upper: Bound<&[u8]>, reverse: bool) -> ScanIter {
        let (lower, upper) = self.part.range.clamp(lower, upper);
        scan::scan(self.store_source.clone(), DATA, lower, upper, reverse)
    }

    fn scan_local(
        &self,
        prefix: &[u8],
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        reverse: bool,
    ) -> ScanIter {
        let own = KeyRange::of_prefixed_tokens(prefix, self.part.start, self.part.end);
        let (lower, upper) = own.clamp(lower, upper);
        scan::scan(self.store_source.clone(), DATA, lower, upper, reverse)
    }

    /// A statement per page (READ COMMITTED: one snapshot each).
    fn scans_read_in_parts(&self) -> bool {
        true
    }

    /// One statement: READ COMMITTED gives each statement one snapshot.
    fn get_together(&self, keys: &[Vec<u8>]) -> Option<Result<Vec<Option<Bytes>>>> {
        let checked = keys.iter().try_for_each(|k| check_range(&self.part, k));
        Some(checked.and_then(|()| scan::get_many(&self.store_source, DATA, keys)))
    }

    fn get_and_scans(
        &self,
        key: Option<&[u8]>,
        slices: &[ScanBounds],
        reverse: bool,
        first_entries: usize,
    ) -> Option<Result<(Option<Bytes>, Vec<ScanIter>)>> {
        if let Some(Err(e)) = key.map(|k| check_range(&self.part, k)) {
            return Some(Err(e));
        }
        let slices: Vec<ScanBounds> = (slices.iter())
            .map(|&(lower, upper)| self.part.range.clamp(lower, upper))
            .collect();
        let source = self.store_source.clone();
        let first = (&slices[..], first_entries);
        Some(scan::get_and_scans(source, DATA, key, first, reverse))
    }

    fn get_size(&self, key: &[u8]) -> Result<Option<Bytes>> {
        check_range(&self.part, key)?;
        scan::get(&self.store_source, SIZES, key)
    }

    fn scan_sizes(&self, lower: Bound<&[u8]>, upper: Bound<&[u8]>) -> ScanIter {
        let (lower, upper) = self.part.range.clamp(lower, upper);
        scan::scan(self.store_source.clone(), SIZES, lower, upper, false)
    }

    fn local_records(&self, after: Option<(i64, &[u8])>, limit: usize) -> Result<Vec<LocalWrite>> {
        super::moving::local_records(&self.store_source, &self.part, after, limit)
    }

    fn get_local(&self, key: &[u8], token: i64) -> Result<Option<Bytes>> {
        super::moving::get_local(&self.store_source, &self.part, key, token)
    }

    fn clear_some(&self, limit: usize) -> Result<u64> {
        self.refuse_if_read_only()?;
        super::moving::clear_some(&self.pool, &self.part, self.epoch, limit)
    }

    fn snapshot(&self) -> Arc<dyn PartitionSnapshot> {
        Arc::new(PgSnapshot {
            conn: Arc::new(begin_snapshot(&self.pool)),
            part: self.part.clone(),
        })
    }

    fn commit(&self, commit: PartitionCommit) -> Result<()> {
        self.refuse_if_read_only()?;
        self.validate(&commit)?;
        let p = &self.part;
        let local = (commit.local.into_iter()).map(|l| (l.key, l.value, Some(l.token)));
        let data = (commit.writes.into_iter())
            .map(|(k, v)| (k, v, None))
            .chain(local);
        let sizes = commit.sizes.into_iter().map(|(k, v)| (k, v, None));
        let ids = (p.storage_id, p.partition_id, self.epoch);
        let (data, sizes) = (
            write::sorted(data.collect()),
            write::sorted(sizes.collect()),
        );
        match commit_fn::call(&self.pool, ids, &commit.conditions, data, sizes)? {
            Ok(()) => Ok(()),
            Err(Refused::Fenced(current)) => Err(fenced(p, self.epoch, current)),
            Err(Refused::Conflict(i)) => Err(StorageError::Conflict {
                key: HexKey(commit.conditions[i].key().clone()),
            }),
        }
    }
}

/// A connection in a REPEATABLE READ READ ONLY transaction whose snapshot is taken now (a
/// first statement fixes it; BEGIN alone does not).
fn begin_snapshot(pool: &Arc<super::pool::Pool>) -> SnapConn {
    let begun = pool.get().map_err(|e| e.to_string()).and_then(|mut lease| {
        let sql = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; SELECT 1";
        match lease.conn().batch(sql) {
            Ok(()) => Ok(lease),
            Err(e) => {
                let text = map_err(e).to_string();
                lease.discard();
                Err(text)
            }
        }
    });
    SnapConn(Mutex::new(begun))
}

impl Drop for SnapConn {
    fn drop(&mut self) {
        let slot = std::mem::replace(self.0.get_mut(), Err(String::new()));
        if let Ok(mut lease) = slot {
            if lease.conn().batch("ROLLBACK").is_err() {
                lease.discard();
            }
        }
    }
}

struct PgSnapshot {
    conn: Arc<SnapConn>,
    part: PartitionRef,
}

impl PartitionSnapshot for PgSnapshot {
    fn get(&self, key: &[u8]) -> Result<Option<Bytes>> {
        check_range(&self.part, key)?;
        scan::get(&Source::Snapshot(Arc::clone(&self.conn)), DATA, key)
    }

    fn scan(&self, lower: Bound<&[u8]>, upper: Bound<&[u8]>, reverse: bool) -> ScanIter {
        let (lower, upper) = self.part.range.clamp(lower, upper);
        let source = Source::Snapshot(Arc::clone(&self.conn));
        scan::scan(source, DATA, lower, upper, reverse)
    }
}
