//! `PostgresStore`: the `Store` contract (and `MetaStore`) on PostgreSQL tables.
//!
//! A storage batch is one transaction (its writes grouped per key space table, `write.rs`);
//! reads are single statements or paged scans (`scan.rs`). Acknowledged means committed:
//! `synchronous_commit = on` for every connection (`pool.rs`). There is no compaction to hook a
//! purge filter into and no file backup: `set_purge_filter`/`compact` do nothing (expired and
//! deleted data is removed by ordinary writes: `query::purge_pass` and the tombstone sweeper)
//! and `backup` refuses (use PostgreSQL's own: pg_dump, pg_basebackup).

use super::pool::Pool;
use super::scan::{self, Source};
use super::{errors::in_txn, schema, table_of, write};
use crate::storage::{
    handle::MetaStore, handle::PartitionStore, Result, ScanIter, Space, StorageError, Store,
    WriteBatch, MAX_KEY_BYTES,
};
use bytes::Bytes;
use std::ops::Bound;
use std::str::FromStr;
use std::sync::Arc;

/// Where the database is and how many connections to use.
#[derive(Debug, Clone)]
pub struct PgConfig {
    /// A libpq connection string: `postgresql://user@host:port/dbname` or `host=... port=...`.
    pub url: String,
    pub pool_size: usize,
}

pub struct PostgresStore {
    pub(super) pool: Arc<Pool>,
}

impl PostgresStore {
    /// Connects, and creates or checks the tables (`schema.rs`).
    pub fn open(config: &PgConfig) -> Result<PostgresStore> {
        let pg = tokio_postgres::Config::from_str(&config.url).map_err(|e| {
            StorageError::Io(format!("storage.postgres: bad connection settings: {e}"))
        })?;
        let pool = Pool::new(pg, config.pool_size)?;
        schema::migrate(&pool)?;
        Ok(PostgresStore { pool })
    }

    pub(super) fn source(&self) -> Source {
        Source::Pool(Arc::clone(&self.pool))
    }
}

/// Refuses keys the embedded store would refuse too, so both backends answer alike.
pub(super) fn check_key_len(key: &[u8]) -> Result<()> {
    if key.len() > MAX_KEY_BYTES {
        return Err(StorageError::KeyTooLong(key.len()));
    }
    Ok(())
}

impl Store for PostgresStore {
    fn get(&self, space: Space, key: &[u8]) -> Result<Option<Bytes>> {
        scan::get(&self.source(), table_of(space), key)
    }

    fn scan(
        &self,
        space: Space,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        reverse: bool,
    ) -> ScanIter {
        scan::scan(self.source(), table_of(space), lower, upper, reverse)
    }

    fn commit(&self, batch: WriteBatch) -> Result<()> {
        if batch.ops.is_empty() {
            return Ok(());
        }
        let mut by_space: [(Space, Vec<write::Write>); 3] = [
            (Space::Data, vec![]),
            (Space::Sizes, vec![]),
            (Space::Meta, vec![]),
        ];
        for op in batch.ops {
            check_key_len(&op.key)?;
            let slot = by_space.iter_mut().find(|(s, _)| *s == op.space);
            if let Some((_, v)) = slot {
                v.push((op.key, op.value, None));
            }
        }
        in_txn(&self.pool, "BEGIN", |c| {
            for (space, writes) in by_space {
                if !writes.is_empty() {
                    write::apply(c, table_of(space), writes)?;
                }
            }
            Ok(())
        })
    }

    fn flush(&self) -> Result<()> {
        // Every acknowledged commit is already durable in PostgreSQL.
        Ok(())
    }

    fn metadata(&self) -> &dyn MetaStore {
        self
    }

    fn partitions(&self) -> Option<&dyn PartitionStore> {
        Some(self)
    }
}

impl MetaStore for PostgresStore {
    fn meta_get(&self, key: &[u8]) -> Result<Option<Bytes>> {
        Store::get(self, Space::Meta, key)
    }

    fn meta_scan(&self, lower: Bound<&[u8]>, upper: Bound<&[u8]>) -> ScanIter {
        Store::scan(self, Space::Meta, lower, upper, false)
    }

    fn meta_commit(&self, writes: Vec<(Bytes, Option<Bytes>)>) -> Result<()> {
        let mut batch = WriteBatch::default();
        for (key, value) in writes {
            match value {
                Some(v) => batch.put(Space::Meta, key, v),
                None => batch.delete(Space::Meta, key),
            }
        }
        Store::commit(self, batch)
    }
}
