//! The per-partition contract on the embedded store.
//!
//! Owner epochs are persisted in `meta` as `owner/[storage id u64 BE][partition id u64 BE]` ->
//! epoch u64 BE (written, durably, when a newer epoch opens the partition). In memory each
//! opened partition has one `PartState`: its current epoch under a read-write lock, and
//! `KEY_LOCKS` mutexes striped by key hash. A commit holds the epoch shared (an owner change
//! takes it exclusive, so it waits for commits in flight and fences every later one) and the
//! stripes of its condition keys, in index order, while it checks the epoch and its conditions
//! and writes its journal batch: the checks and the write are one atomic step for every key a
//! condition names, and commits on other keys of the partition run in parallel (one mutex per
//! partition serialized a one-partition table's writers: about a fifth of write throughput on
//! two cores). fjall's optimistic transactions would do it too, but need a different database
//! type for every keyspace. Only the fsync wait (`storage.sync = "fsync"`) happens after it is
//! released: the journal is sequential, so a later commit is never durable before this one.
//! One process owns a data directory (`dir_lock.rs`), so the in-memory epoch is authoritative;
//! the persisted one fences an older owner across restarts.
//! The table of opened partitions is bounded by the partitions that exist: retiring one
//! removes its entry.

use super::commit_group::{Space as GroupSpace, Target};
use super::embedded::{
    boxed_iter, clamp_lower, clamp_upper, snapshot_range, EmbeddedStore, GroupCommit,
};
use super::handle::*;
use super::stripe_set::{Held, StripeSet};
use super::write_stamps::{self, Counter};
use super::{HexKey, Result, ScanIter, Space, StorageError, SyncMode, MAX_KEY_BYTES};
use bytes::Bytes;
use fjall::{Database, Keyspace, PersistMode, Readable};
use parking_lot::{Mutex, RwLock};
use std::collections::HashMap;
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Opened partitions by (storage id, partition id).
#[derive(Default)]
pub(crate) struct Owners(Mutex<HashMap<(u64, u64), Arc<PartState>>>);

/// Condition-key lock stripes per opened partition.
const KEY_LOCKS: usize = 64;

/// One partition's owner epoch, condition-key locks and write stamps (`write_stamps.rs`),
/// both striped by key hash.
struct PartState {
    /// Unique in the process (a stamp names the state it was taken from).
    id: u64,
    epoch: RwLock<Epoch>,
    keys: [Mutex<()>; KEY_LOCKS],
    stamps: [Counter; KEY_LOCKS],
}

impl PartState {
    fn new(epoch: Epoch) -> PartState {
        static NEXT_ID: AtomicU64 = AtomicU64::new(1);
        PartState {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            epoch: RwLock::new(epoch),
            keys: std::array::from_fn(|_| Mutex::new(())),
            stamps: std::array::from_fn(|_| Counter::default()),
        }
    }

    /// The stripes of `keys` (a set: locked lowest first, so no deadlock).
    fn stripes<'a>(&self, keys: impl Iterator<Item = &'a Bytes>) -> StripeSet {
        StripeSet::of(keys.map(|k| stripe_of(k)))
    }
}

const _: () = assert!(KEY_LOCKS <= super::stripe_set::MAX_STRIPES);

fn stripe_of(key: &[u8]) -> usize {
    crate::fast_hash::hash_of(key) as usize % KEY_LOCKS
}

fn owner_key(storage_id: u64, partition_id: u64) -> Vec<u8> {
    [
        &b"owner/"[..],
        &storage_id.to_be_bytes(),
        &partition_id.to_be_bytes(),
    ]
    .concat()
}

impl EmbeddedStore {
    /// The partition's state, loaded from its persisted epoch on first use.
    fn part_state(&self, storage_id: u64, partition_id: u64) -> Result<Arc<PartState>> {
        let mut owners = self.owners.0.lock();
        if let Some(st) = owners.get(&(storage_id, partition_id)) {
            return Ok(Arc::clone(st));
        }
        let epoch = self.stored_epoch(storage_id, partition_id)?;
        let st = Arc::new(PartState::new(epoch));
        owners.insert((storage_id, partition_id), Arc::clone(&st));
        Ok(st)
    }

    fn stored_epoch(&self, storage_id: u64, partition_id: u64) -> Result<Epoch> {
        let Some(v) = self.meta.get(owner_key(storage_id, partition_id))? else {
            return Ok(0);
        };
        let b: [u8; 8] = v[..]
            .try_into()
            .map_err(|_| StorageError::Corrupt("owner epoch record is not 8 bytes".into()))?;
        Ok(u64::from_be_bytes(b))
    }

    /// Persists a partition's epoch durably (an owner change must survive a crash).
    fn store_epoch(&self, storage_id: u64, partition_id: u64, epoch: Epoch) -> Result<()> {
        let key = owner_key(storage_id, partition_id);
        self.meta.insert(key, epoch.to_be_bytes())?;
        self.db.persist(PersistMode::SyncData)?;
        Ok(())
    }
}

impl PartitionStore for EmbeddedStore {
    fn open_partition(&self, part: PartitionRef, epoch: Epoch) -> Result<Arc<dyn PartitionHandle>> {
        let state = self.part_state(part.storage_id, part.partition_id)?;
        {
            let mut current = state.epoch.write();
            if epoch < *current || epoch == RETIRED_EPOCH {
                return Err(fenced(&part, epoch, *current));
            }
            if epoch > *current {
                self.store_epoch(part.storage_id, part.partition_id, epoch)?;
                *current = epoch;
            }
        }
        Ok(Arc::new(EmbeddedHandle {
            part,
            epoch,
            state,
            db: self.db.clone(),
            data: self.data.clone(),
            sizes: self.sizes.clone(),
            sync: self.sync,
            group: Arc::clone(&self.group),
            free_space: Arc::clone(&self.free_space),
            plain_writes: Arc::clone(&self.plain_writes),
            row_cache: Arc::clone(&self.row_cache),
        }))
    }

    fn current_epoch(&self, storage_id: u64, partition_id: u64) -> Result<Epoch> {
        Ok(*self.part_state(storage_id, partition_id)?.epoch.read())
    }

    fn drop_data(&self, storage_id: u64) -> Result<()> {
        let lo = storage_id.to_be_bytes();
        let hi = storage_id.wrapping_add(1).to_be_bytes();
        for space in [Space::Data, Space::Sizes] {
            super::delete_range(self, space, &lo, &hi)?;
        }
        let prefix = owner_key(storage_id, 0);
        let prefix = &prefix[..prefix.len() - 8];
        let end = super::prefix_successor(prefix).expect("owner prefix has no 0xff");
        super::delete_range(self, Space::Meta, prefix, &end)?;
        self.owners
            .0
            .lock()
            .retain(|&(sid, _), _| sid != storage_id);
        Ok(())
    }

    fn drop_prefix(&self, prefix: &[u8]) -> Result<()> {
        match super::prefix_successor(prefix) {
            Some(end) => super::delete_range(self, Space::Data, prefix, &end),
            None => Err(StorageError::Io(
                "drop_prefix: a prefix of 0xff bytes only".into(),
            )),
        }
    }

    fn retire_partition(&self, storage_id: u64, partition_id: u64) -> Result<()> {
        let state = self.part_state(storage_id, partition_id)?;
        let mut current = state.epoch.write();
        self.store_epoch(storage_id, partition_id, RETIRED_EPOCH)?;
        *current = RETIRED_EPOCH;
        drop(current);
        // Its handles keep the (retired) state; a later open reloads the retired epoch.
        self.owners.0.lock().remove(&(storage_id, partition_id));
        Ok(())
    }
}

fn fenced(part: &PartitionRef, epoch: Epoch, current: Epoch) -> StorageError {
    StorageError::Fenced {
        storage_id: part.storage_id,
        partition_id: part.partition_id,
        epoch,
        current,
    }
}

fn out_of_range(part: &PartitionRef, key: &[u8]) -> StorageError {
    StorageError::OutOfRange {
        storage_id: part.storage_id,
        partition_id: part.partition_id,
        key: HexKey(Bytes::copy_from_slice(key)),
    }
}

fn check_range(part: &PartitionRef, key: &[u8]) -> Result<()> {
    if part.range.contains(key) {
        Ok(())
    } else {
        Err(out_of_range(part, key))
    }
}

struct EmbeddedHandle {
    part: PartitionRef,
    epoch: Epoch,
    state: Arc<PartState>,
    db: Database,
    data: Keyspace,
    sizes: Keyspace,
    sync: SyncMode,
    group: Arc<GroupCommit>,
    /// The store's disk reserve: handle commits are refused below it too.
    free_space: Arc<super::free_space::FreeSpaceGuard>,
    /// The store's writes to the data space outside the handles (`write_stamps.rs`).
    plain_writes: Arc<Counter>,
    row_cache: Arc<super::row_cache::RowCache>,
}

impl PartitionHandle for EmbeddedHandle {
    fn partition(&self) -> &PartitionRef {
        &self.part
    }

    fn epoch(&self) -> Epoch {
        self.epoch
    }

    fn get(&self, key: &[u8]) -> Result<Option<Bytes>> {
        check_range(&self.part, key)?;
        if key.len() > MAX_KEY_BYTES {
            return Ok(None);
        }
        self.read(key)
    }

    fn prefers_point_reads(&self) -> bool {
        true
    }

    fn cheap_snapshots(&self) -> bool {
        // A snapshot is a sequence number registered with fjall's tracker.
        true
    }

    fn get_stamped(&self, key: &[u8]) -> Result<(Option<Bytes>, Option<ReadStamp>)> {
        check_range(&self.part, key)?;
        if key.len() > MAX_KEY_BYTES {
            return Ok((None, None));
        }
        // Taken before the read: see `write_stamps.rs`.
        let stamp = self.stamp(key);
        Ok((self.read(key)?, stamp))
    }

    fn stamp(&self, key: &[u8]) -> Option<ReadStamp> {
        if !self.part.range.contains(key) || key.len() > MAX_KEY_BYTES {
            return None;
        }
        let stripe = &self.state.stamps[stripe_of(key)];
        write_stamps::stamp(self.state.id, stripe, &self.plain_writes)
    }

    fn changed_since(&self, key: &[u8], stamp: &ReadStamp) -> bool {
        let stripe = &self.state.stamps[stripe_of(key)];
        !write_stamps::still(stamp, self.state.id, stripe, &self.plain_writes)
    }

    fn scan(&self, lower: Bound<&[u8]>, upper: Bound<&[u8]>, reverse: bool) -> ScanIter {
        scan_within(
            &self.db,
            &self.data,
            &self.part.range,
            (lower, upper),
            reverse,
        )
    }

    fn scan_local(
        &self,
        prefix: &[u8],
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        reverse: bool,
    ) -> ScanIter {
        let own = KeyRange::of_prefixed_tokens(prefix, self.part.start, self.part.end);
        scan_within(&self.db, &self.data, &own, (lower, upper), reverse)
    }

    fn get_size(&self, key: &[u8]) -> Result<Option<Bytes>> {
        check_range(&self.part, key)?;
        if key.len() > MAX_KEY_BYTES {
            return Ok(None);
        }
        Ok(self.sizes.get(key)?.map(Bytes::from))
    }

    fn scan_sizes(&self, lower: Bound<&[u8]>, upper: Bound<&[u8]>) -> ScanIter {
        scan_within(
            &self.db,
            &self.sizes,
            &self.part.range,
            (lower, upper),
            false,
        )
    }

    fn snapshot(&self) -> Arc<dyn PartitionSnapshot> {
        Arc::new(EmbeddedSnapshot {
            snap: self.db.snapshot(),
            data: self.data.clone(),
            part: self.part.clone(),
        })
    }

    fn commit(&self, commit: PartitionCommit) -> Result<()> {
        let keys = commit.writes.iter().chain(&commit.sizes).map(|(k, _)| k);
        for key in keys.chain(commit.conditions.iter().map(Condition::key)) {
            check_range(&self.part, key)?;
            if key.len() > MAX_KEY_BYTES {
                return Err(StorageError::KeyTooLong(key.len()));
            }
        }
        for l in &commit.local {
            if !self.part.owns_token(l.token) {
                return Err(out_of_range(&self.part, &l.key));
            }
            if l.key.len() > MAX_KEY_BYTES {
                return Err(StorageError::KeyTooLong(l.key.len()));
            }
        }
        let current = self.state.epoch.read();
        let stripes = self
            .state
            .stripes(commit.conditions.iter().map(Condition::key));
        let held = Held::lock(&self.state.keys, stripes);
        if *current != self.epoch {
            return Err(fenced(&self.part, self.epoch, *current));
        }
        for cond in &commit.conditions {
            if self.unchanged_since_read(cond) {
                continue;
            }
            let now = self.data.get(cond.key())?;
            if !cond.holds(now.as_deref()) {
                // The reader may have had it from the row cache, and a compaction's purge
                // rewrites keys under the cache (`row_cache.rs`): read the store next time.
                self.row_cache.forget(cond.key());
                return Err(StorageError::Conflict {
                    key: HexKey(cond.key().clone()),
                });
            }
        }
        if commit.writes.is_empty() && commit.sizes.is_empty() && commit.local.is_empty() {
            return Ok(());
        }
        self.free_space.check()?;
        // Counted on the written keys' stripes from before the write until after it (whether
        // it succeeds or not): stamps taken meanwhile are none, earlier ones expire.
        let written = commit.writes.iter().map(|(k, _)| k);
        let written = self
            .state
            .stripes(written.chain(commit.local.iter().map(|l| &l.key)));
        let writing = write_stamps::begin_set(&self.state.stamps, written);
        let cached = (commit.writes.iter().map(|(k, _)| &k[..]))
            .chain(commit.local.iter().map(|l| &l.key[..]));
        let mut caching = self.row_cache.begin(cached);
        // What the row cache keeps of this commit: its writes to keys it holds the lock of.
        for (key, value) in &commit.writes {
            if commit.conditions.iter().any(|c| c.key() == key) {
                caching.will_store(key, value.as_deref());
            }
        }
        // SyncMode::None: the journal reaches the OS before the answer does (`settle.rs`).
        let deferred = self.sync == SyncMode::None;
        let durability = (!deferred).then_some(PersistMode::Buffer);
        let ops = commit.writes.len() + commit.local.len() + commit.sizes.len();
        let mut batch = Vec::with_capacity(ops);
        // Local records first: fjall applies a batch to its memtables one key at a time and
        // reads see each key as it lands, so a reader that reads a row and then its local
        // records (the change feed's reverse record, `query::changefeed::read`) must never
        // find the row newer than them.
        let local = commit.local.into_iter().map(|l| (l.key, l.value));
        for (key, value) in local.chain(commit.writes) {
            batch.push((GroupSpace::Data, key, value));
        }
        for (key, value) in commit.sizes {
            batch.push((GroupSpace::Sizes, key, value));
        }
        let target = Target {
            db: &self.db,
            data: &self.data,
            sizes: &self.sizes,
            durability,
        };
        self.group.batches.commit(&target, batch)?;
        caching.stored();
        if deferred {
            self.group.settle.deferred();
        }
        drop(writing);
        drop(held);
        drop(current);
        self.group.after_commit(&self.db, self.sync)
    }
}

impl EmbeddedHandle {
    /// A point read of the data space, through the row cache.
    fn read(&self, key: &[u8]) -> Result<Option<Bytes>> {
        (self.row_cache).read_through(key, || Ok(self.data.get(key)?.map(Bytes::from)))
    }

    /// Whether `cond` is an `Unchanged` whose read's stamp shows no write since (it holds
    /// without reading the key again; `write_stamps.rs`).
    fn unchanged_since_read(&self, cond: &Condition) -> bool {
        let Condition::Unchanged {
            key,
            stamp: Some(stamp),
            ..
        } = cond
        else {
            return false;
        };
        !PartitionHandle::changed_since(self, key, stamp)
    }
}

/// The keys of `space` within `own` and `(lower, upper)`, as of one instant.
fn scan_within(
    db: &Database,
    space: &Keyspace,
    own: &KeyRange,
    (lower, upper): (Bound<&[u8]>, Bound<&[u8]>),
    reverse: bool,
) -> ScanIter {
    let (lower, upper) = own.clamp(lower, upper);
    let range = (clamp_lower(lower), clamp_upper(upper));
    snapshot_range(db, space, range, reverse)
}

struct EmbeddedSnapshot {
    snap: fjall::Snapshot,
    data: Keyspace,
    part: PartitionRef,
}

impl PartitionSnapshot for EmbeddedSnapshot {
    fn get(&self, key: &[u8]) -> Result<Option<Bytes>> {
        check_range(&self.part, key)?;
        if key.len() > MAX_KEY_BYTES {
            return Ok(None);
        }
        Ok(self.snap.get(&self.data, key)?.map(Bytes::from))
    }

    fn scan(&self, lower: Bound<&[u8]>, upper: Bound<&[u8]>, reverse: bool) -> ScanIter {
        let (lower, upper) = self.part.range.clamp(lower, upper);
        let range = (clamp_lower(lower), clamp_upper(upper));
        boxed_iter(self.snap.range::<Vec<u8>, _>(&self.data, range), reverse)
    }
}

impl MetaStore for EmbeddedStore {
    fn meta_get(&self, key: &[u8]) -> Result<Option<Bytes>> {
        super::Store::get(self, Space::Meta, key)
    }

    fn meta_scan(&self, lower: Bound<&[u8]>, upper: Bound<&[u8]>) -> ScanIter {
        super::Store::scan(self, Space::Meta, lower, upper, false)
    }

    fn meta_commit(&self, writes: Vec<(Bytes, Option<Bytes>)>) -> Result<()> {
        let mut batch = super::WriteBatch::default();
        for (key, value) in writes {
            match value {
                Some(v) => batch.put(Space::Meta, key, v),
                None => batch.delete(Space::Meta, key),
            }
        }
        super::Store::commit(self, batch)
    }
}
