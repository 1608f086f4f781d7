//! The storage contract: an ordered, durable key-value store with two key spaces (table data and
//! metadata), range scans in both directions, and atomic batches.
//!
//! This is deliberately small so that a distributed engine can sit behind it later: every batch
//! the layers above commit touches one physical partition's key range (plus metadata), so an
//! implementation may shard by physical partition.

pub mod dir_lock;
pub mod embedded;

use bytes::Bytes;
use std::ops::Bound;
use std::sync::Arc;

pub use embedded::EmbeddedStore;

#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    #[error("storage I/O error: {0}")]
    Io(String),
    #[error("storage is corrupt: {0}")]
    Corrupt(String),
    /// A batch held a key longer than [`MAX_KEY_BYTES`]; nothing of the batch was written.
    #[error("Key length of {0} is longer than the storage maximum of {MAX_KEY_BYTES}")]
    KeyTooLong(usize),
}

/// The longest key the store holds (fjall stores key lengths as u16 and panics above it).
/// Callers refuse longer keys with a clear error before they build a batch; the store checks
/// again, so a longer key is an error, never a panic.
pub const MAX_KEY_BYTES: usize = u16::MAX as usize;

impl From<fjall::Error> for StorageError {
    fn from(e: fjall::Error) -> Self {
        StorageError::Io(e.to_string())
    }
}

pub type Result<T> = std::result::Result<T, StorageError>;

/// What a client sees of a storage failure: a refused key is the request's fault (Invalid);
/// anything else is the server's.
impl From<StorageError> for crate::error::ClientError {
    fn from(e: StorageError) -> Self {
        match e {
            StorageError::KeyTooLong(_) => crate::error::ClientError::Invalid(e.to_string()),
            _ => crate::error::ClientError::Server(e.to_string()),
        }
    }
}

/// Which key space an operation addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Space {
    /// Table rows (keys start with the table's storage id).
    Data,
    /// Schema, physical partition maps and other server metadata.
    Meta,
}

/// How writes are made durable before they are acknowledged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SyncMode {
    /// Written to the operating system before acknowledging: survives `kill -9` of the server.
    None,
    /// fsync before acknowledging (group commit): survives power loss.
    Fsync,
}

/// One write of an atomic batch.
#[derive(Debug, Clone)]
pub struct Op {
    pub space: Space,
    pub key: Bytes,
    /// None deletes the key.
    pub value: Option<Bytes>,
}

/// A set of writes applied atomically: all or none survive a crash.
#[derive(Debug, Default, Clone)]
pub struct WriteBatch {
    pub ops: Vec<Op>,
}

impl WriteBatch {
    pub fn put(&mut self, space: Space, key: impl Into<Bytes>, value: impl Into<Bytes>) {
        self.ops.push(Op {
            space,
            key: key.into(),
            value: Some(value.into()),
        });
    }
    pub fn delete(&mut self, space: Space, key: impl Into<Bytes>) {
        self.ops.push(Op {
            space,
            key: key.into(),
            value: None,
        });
    }
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }
}

/// A key-value pair from a scan.
pub type Entry = (Bytes, Bytes);

/// An iterator over a key range; it reads a consistent snapshot taken when it was created.
pub type ScanIter = Box<dyn Iterator<Item = Result<Entry>> + Send>;

/// What a purge filter decides for one table data entry while the store compacts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Purge {
    Keep,
    Remove,
    Replace(Vec<u8>),
}

/// A purge filter over `(key, value)` entries of [`Space::Data`], called in key order.
pub type PurgeFilter = Box<dyn FnMut(&[u8], &[u8]) -> Purge + Send>;

/// Makes a purge filter for one compaction run (the layer above decides what is purgeable).
pub type PurgeFilterFactory = Arc<dyn Fn() -> PurgeFilter + Send + Sync>;

/// The storage contract.
pub trait Store: Send + Sync + 'static {
    fn get(&self, space: Space, key: &[u8]) -> Result<Option<Bytes>>;
    /// Keys in `(lower, upper)` bounds, ascending, or descending when `reverse`.
    fn scan(
        &self,
        space: Space,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        reverse: bool,
    ) -> ScanIter;
    /// Applies the batch atomically and durably (per the store's sync mode) before returning.
    fn commit(&self, batch: WriteBatch) -> Result<()>;
    /// Makes everything committed so far durable on disk (used at shutdown).
    fn flush(&self) -> Result<()>;
    /// Installs the filter that background compactions apply to table data, so that data the
    /// layer above no longer needs (expired, deleted) leaves the disk. Default: none.
    fn set_purge_filter(&self, _filter: PurgeFilterFactory) {}
    /// Compacts table data now, applying the purge filter (maintenance and tests).
    fn compact(&self) -> Result<()> {
        Ok(())
    }
}

/// The smallest key greater than every key starting with `prefix` (None: no such bound).
pub fn prefix_successor(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut out = prefix.to_vec();
    while let Some(last) = out.pop() {
        if last < 0xff {
            out.push(last + 1);
            return Some(out);
        }
    }
    None
}

/// Deletes every key of `space` in `[lo, hi)`, in batches of at most 1,000 keys (each batch
/// atomic, the whole not: callers that need it finished keep a marker until it returns).
pub fn delete_range(store: &dyn Store, space: Space, lo: &[u8], hi: &[u8]) -> Result<()> {
    const BATCH: usize = 1000;
    loop {
        let mut batch = WriteBatch::default();
        for item in store
            .scan(space, Bound::Included(lo), Bound::Excluded(hi), false)
            .take(BATCH)
        {
            batch.delete(space, item?.0);
        }
        let n = batch.ops.len();
        store.commit(batch)?;
        if n < BATCH {
            return Ok(());
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn prefix_successor_skips_ff() {
        assert_eq!(super::prefix_successor(&[1, 2]), Some(vec![1, 3]));
        assert_eq!(super::prefix_successor(&[1, 0xff]), Some(vec![2]));
        assert_eq!(super::prefix_successor(&[0xff, 0xff]), None);
    }
}
