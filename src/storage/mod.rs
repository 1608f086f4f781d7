//! The storage contract: an ordered, durable key-value store with two key spaces (table data and
//! metadata), range scans in both directions, and atomic batches.
//!
//! On top of it, the per-partition contract (`handle.rs`): a handle per physical partition,
//! opened with an owner epoch, whose commits carry conditions; and the metadata store.
//!
//! This is deliberately small so that a distributed engine can sit behind it later: every batch
//! the layers above commit touches one physical partition's key range (plus metadata), so an
//! implementation may shard by physical partition.

mod background;
pub mod backup;
pub mod batch_log;
pub mod blocking;
mod commit_group;
pub mod dir_lock;
pub mod embedded;
mod embedded_handle;
pub mod free_space;
pub mod handle;
mod journal_writeback;
mod legacy_sizes;
mod memtable_release;
pub mod postgres;
pub mod row_cache;
mod settle;
mod stripe_set;
pub(crate) mod write_stamps;

use bytes::Bytes;
use std::ops::Bound;
use std::sync::Arc;

pub use embedded::{EmbeddedStore, DEFAULT_BLOCK_CACHE_BYTES};
pub use handle::{
    Condition, Epoch, KeyRange, MetaStore, PartitionCommit, PartitionHandle, PartitionRef,
    PartitionSnapshot, PartitionStore, RETIRED_EPOCH,
};

#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    #[error("storage I/O error: {0}")]
    Io(String),
    #[error("storage is corrupt: {0}")]
    Corrupt(String),
    /// A batch held a key longer than [`MAX_KEY_BYTES`]; nothing of the batch was written.
    #[error("Key length of {0} is longer than the storage maximum of {MAX_KEY_BYTES}")]
    KeyTooLong(usize),
    /// The data directory's file system has less free space than the reserve; nothing of the
    /// batch was written (see `free_space`).
    #[error(
        "No space left on device: the data directory has {free_bytes} bytes free, under the \
         reserve of {min_free_bytes} bytes (storage.min_free_bytes); writes are refused until \
         space is freed"
    )]
    DiskFull {
        free_bytes: u64,
        min_free_bytes: u64,
    },
    /// A commit's condition did not hold: the key changed since it was read (or exists).
    /// Nothing of the commit was written; reading again and retrying can succeed.
    #[error("conflict: key {key} changed since it was read")]
    Conflict { key: HexKey },
    /// A newer owner epoch has opened the partition (or it was retired by a split): this
    /// handle can never commit again; the caller reopens or re-routes.
    #[error(
        "physical partition {partition_id} of table storage {storage_id} is owned by epoch \
         {current}, not this handle's {epoch}"
    )]
    Fenced {
        storage_id: u64,
        partition_id: u64,
        epoch: u64,
        current: u64,
    },
    /// A key outside the handle's partition range (a bug in the caller, or a stale map).
    #[error(
        "key {key} is outside physical partition {partition_id} of table storage {storage_id}"
    )]
    OutOfRange {
        storage_id: u64,
        partition_id: u64,
        key: HexKey,
    },
    /// Cluster mode: this node does not own the partition (`owner`: the node that does, None
    /// when no live node holds it now). Nothing was written; the request goes to the owner.
    #[error(
        "physical partition {partition_id} of table storage {storage_id} is owned by {}",
        owner.as_deref().unwrap_or("no live node")
    )]
    NotOwner {
        storage_id: u64,
        partition_id: u64,
        owner: Option<String>,
    },
    /// Cluster mode: the commit spans physical partitions owned by different nodes, each
    /// (storage id, partition id, owner: None for this node). Nothing was written; the request
    /// is sent to each owner for its partitions (`server::spanning`).
    #[error("the statement touches physical partitions owned by different nodes ({} partitions)", parts.len())]
    Spans {
        parts: Vec<(u64, u64, Option<String>)>,
    },
    /// The backend cannot be reached now (networked backends); a retry may succeed.
    #[error("storage unavailable: {0}")]
    Unavailable(String),
    /// A scan of `PartitionHandle::get_and_scans` has more entries than its one access read:
    /// going on would read the store again, as it is then. The caller reads from a snapshot.
    #[error("the scan needs another read of the store")]
    ReadAgain,
    /// A networked backend lost its connection while the commit was being committed: it may or
    /// may not have been applied (and may become visible later). Not retryable as such (a
    /// blind retry could apply a non-idempotent write twice); the client sees a WriteTimeout,
    /// Cassandra's answer for a write whose outcome is unknown.
    #[error("the outcome of the commit is unknown (connection lost while committing): {0}")]
    Unknown(String),
}

impl StorageError {
    /// Whether trying the same operation again can succeed: after a `Conflict` (read again
    /// first) or while the backend is `Unavailable`. `Fenced` needs a new handle, not a retry.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            StorageError::Conflict { .. } | StorageError::Unavailable(_)
        )
    }
}

/// A key shown in an error: hex, at most 64 bytes of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HexKey(pub Bytes);

impl std::fmt::Display for HexKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        const SHOWN_BYTES: usize = 64;
        for b in self.0.iter().take(SHOWN_BYTES) {
            write!(f, "{b:02x}")?;
        }
        if self.0.len() > SHOWN_BYTES {
            write!(f, "... ({} bytes)", self.0.len())?;
        }
        Ok(())
    }
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

/// What a client sees of a storage failure: a refused key is the request's fault (Invalid); a
/// commit of unknown outcome is a WriteTimeout (as Cassandra answers a write it cannot confirm);
/// anything else is the server's.
impl From<StorageError> for crate::error::ClientError {
    fn from(e: StorageError) -> Self {
        match e {
            StorageError::KeyTooLong(_) => crate::error::ClientError::Invalid(e.to_string()),
            StorageError::Unknown(_) => crate::error::ClientError::WriteTimeout(
                e.to_string(),
                crate::error::WriteType::Simple,
            ),
            StorageError::NotOwner { ref owner, .. } => crate::error::ClientError::NotOwner {
                owner: owner.clone(),
                message: e.to_string(),
            },
            StorageError::Spans { ref parts } => crate::error::ClientError::Spans {
                parts: parts.clone(),
                message: e.to_string(),
                logged: false,
            },
            StorageError::Unavailable(_) => crate::error::ClientError::Unavailable(e.to_string()),
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
    /// Per-partition records that live in their physical partition's key range beside the rows
    /// (keys start `[storage id u64 BE][token u64 BE, sign bit flipped]` as data keys do, so a
    /// partition's `KeyRange` covers them too): the logical partitions' size records.
    Sizes,
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
    /// Makes every commit made so far survive `kill -9` where commits defer that (the embedded
    /// store with `SyncMode::None`, `settle.rs`); called before answers are sent. A no-op by
    /// default: other stores' commits are as durable as they get when they return.
    fn settle_commits(&self) -> Result<()> {
        Ok(())
    }
    /// Whether a commit made so far waits for `settle_commits` (a connection writer then lets
    /// the other connections' requests run first: one settle covers their commits too).
    fn has_unsettled_commits(&self) -> bool {
        false
    }
    /// The metadata store (`handle.rs`): schema, partition maps, server records.
    fn metadata(&self) -> &dyn handle::MetaStore;
    /// The per-partition contract (`handle.rs`), if this backend offers it.
    fn partitions(&self) -> Option<&dyn handle::PartitionStore> {
        None
    }
    /// Cluster mode: the shared data store by itself (PostgreSQL), whose `Meta` space holds
    /// what every node must reach and may be data-sized (the cluster batch log,
    /// `server::batchlog`); the cluster's own metadata lives in etcd. Default: none.
    fn shared_data(&self) -> Option<&dyn Store> {
        None
    }
    /// Cluster mode: the names of every storage group, each with a shared data store as
    /// `shared_data` is this node's (other nodes' batch log entries are in theirs). Default:
    /// none.
    fn shared_data_groups(&self) -> Result<Vec<String>> {
        Ok(Vec::new())
    }
    /// Cluster mode: storage group `name`'s shared data store (connected on first use).
    fn shared_data_of(&self, name: &str) -> Result<Arc<dyn Store>> {
        Err(StorageError::Unavailable(format!(
            "no storage group {name}: not a cluster"
        )))
    }
    /// Installs the filter that background compactions apply to table data, so that data the
    /// layer above no longer needs (expired, deleted) leaves the disk. Default: none.
    fn set_purge_filter(&self, _filter: PurgeFilterFactory) {}
    /// Compacts table data now, applying the purge filter (maintenance and tests).
    fn compact(&self) -> Result<()> {
        Ok(())
    }
    /// Whether compactions run the purge filter (`set_purge_filter`), so expired and deleted
    /// data leaves the store by itself; where not (PostgreSQL), `query::purge_pass` does it.
    fn purges_in_compactions(&self) -> bool {
        false
    }
    /// Writes every key of both key spaces as of one instant into `dir` (new or empty), while
    /// commits continue (`backup.rs`); `progress` gets the entries written so far.
    fn backup(&self, _dir: &std::path::Path, _progress: &dyn Fn(u64)) -> Result<backup::Manifest> {
        Err(StorageError::Io("this store cannot take backups".into()))
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

/// Commits a batch of metadata writes through the metadata store (one atomic commit); a write
/// to another key space is a caller's bug, refused whole.
pub fn commit_meta(meta: &dyn handle::MetaStore, batch: WriteBatch) -> Result<()> {
    meta.meta_commit(meta_writes(batch)?)
}

/// [`commit_meta`] if `key` is still at `revision` (`MetaStore::meta_commit_if`).
pub fn commit_meta_if(
    meta: &dyn handle::MetaStore,
    key: &[u8],
    revision: i64,
    batch: WriteBatch,
) -> Result<()> {
    meta.meta_commit_if(key, revision, meta_writes(batch)?)
}

fn meta_writes(batch: WriteBatch) -> Result<Vec<(Bytes, Option<Bytes>)>> {
    let mut writes = Vec::with_capacity(batch.ops.len());
    for op in batch.ops {
        if op.space != Space::Meta {
            return Err(StorageError::Corrupt(format!(
                "a metadata commit holds a {:?}-space key",
                op.space
            )));
        }
        writes.push((op.key, op.value));
    }
    Ok(writes)
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
