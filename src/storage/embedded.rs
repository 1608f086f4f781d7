//! The embedded store: fjall (an LSM tree with a write-ahead journal) in the data directory.
//!
//! Every commit writes one journal batch and hands it to the operating system before returning,
//! except a partition handle's commit with `SyncMode::None`, whose batch reaches the OS before
//! any answer is sent (`settle.rs`): an acknowledged write survives `kill -9`. With `SyncMode::Fsync` commits also wait for an
//! fsync; concurrent committers share one fsync (group commit).

use super::free_space::FreeSpaceGuard;
use super::row_cache::RowCache;
use super::{
    Purge, PurgeFilter, PurgeFilterFactory, Result, ScanIter, Space, StorageError, Store, SyncMode,
    WriteBatch, MAX_KEY_BYTES,
};
use bytes::Bytes;
use fjall::compaction::filter::{CompactionFilter, Context, Factory, ItemAccessor, Verdict};
use fjall::{Database, Keyspace, KeyspaceCreateOptions, PersistMode};
use parking_lot::{Condvar, Mutex};
use std::ops::Bound;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

pub struct EmbeddedStore {
    /// Journal writeback and memtable freeing off the commit path (`background.rs`). First,
    /// so it stops before the key spaces it holds clones of close.
    _background: Option<super::background::Background>,
    pub(super) db: Database,
    pub(super) data: Keyspace,
    pub(super) meta: Keyspace,
    pub(super) sizes: Keyspace,
    pub(super) sync: SyncMode,
    pub(super) group: Arc<GroupCommit>,
    purge: Arc<PurgeSlot>,
    pub(super) free_space: Arc<FreeSpaceGuard>,
    /// Owner epochs and commit mutexes of the partitions opened through handles.
    pub(super) owners: super::embedded_handle::Owners,
    /// Writes to the data space that do not go through a handle (`write_stamps.rs`).
    pub(super) plain_writes: Arc<super::write_stamps::Counter>,
    /// Point reads through the handles (`row_cache.rs`).
    pub(super) row_cache: Arc<RowCache>,
}

impl Drop for EmbeddedStore {
    fn drop(&mut self) {
        // The row cache holds the database (to ask about compactions) and the database the
        // purge slot: let go of the cycle so the database closes.
        *self.purge.1.write() = None;
    }
}

/// The purge filter factory, installed after the store is open (by the query layer), and the
/// row cache its changes must leave (`row_cache.rs`).
#[derive(Default)]
struct PurgeSlot(
    parking_lot::RwLock<Option<PurgeFilterFactory>>,
    parking_lot::RwLock<Option<Arc<RowCache>>>,
);

impl std::panic::RefUnwindSafe for PurgeSlot {}

impl Factory for PurgeSlot {
    fn name(&self) -> &str {
        "ringgate-purge"
    }

    fn make_filter(&self, _ctx: &Context) -> Box<dyn CompactionFilter> {
        crate::metrics::global().compactions.inc();
        Box::new(PurgeRun {
            filter: self.0.read().as_ref().map(|f| f()),
            cache: self.1.read().clone(),
            changed: Some(Vec::new()),
            began: false,
        })
    }
}

/// One compaction's purge filter, and the keys it changed (None: more than the row cache
/// takes one by one).
struct PurgeRun {
    filter: Option<PurgeFilter>,
    cache: Option<Arc<RowCache>>,
    changed: Option<Vec<Vec<u8>>>,
    began: bool,
}

impl PurgeRun {
    /// The filter dropped or rewrote `key`.
    fn record_change(&mut self, key: &[u8]) {
        crate::metrics::global().purged_entries.inc();
        let Some(cache) = &self.cache else {
            return;
        };
        if !std::mem::replace(&mut self.began, true) {
            cache.purge_began();
        }
        if let Some(keys) = &mut self.changed {
            if keys.len() < super::row_cache::MAX_PURGED_KEYS {
                keys.push(key.to_vec());
            } else {
                self.changed = None;
            }
        }
    }
}

impl Drop for PurgeRun {
    fn drop(&mut self) {
        if let Some(cache) = self.cache.as_ref().filter(|_| self.began) {
            cache.purged(self.changed.as_deref());
        }
    }
}

impl CompactionFilter for PurgeRun {
    fn filter_item(
        &mut self,
        item: ItemAccessor<'_>,
        _ctx: &Context,
    ) -> fjall::compaction::filter::CompactionFilterResult {
        let Some(f) = self.filter.as_mut() else {
            return Ok(Verdict::Keep);
        };
        let value = item.value()?;
        let verdict = match f(item.key(), &value) {
            Purge::Keep => return Ok(Verdict::Keep),
            Purge::Remove => Verdict::Remove,
            Purge::Replace(v) => Verdict::ReplaceValue(v.into()),
        };
        self.record_change(item.key());
        Ok(verdict)
    }
}

/// Leader/follower fsync batching: the first committer to find no fsync running becomes the
/// leader and syncs everything committed so far; the others wait for a sync that covers them.
#[derive(Default)]
pub(super) struct GroupCommit {
    committed: AtomicU64,
    state: Mutex<SyncState>,
    done: Condvar,
    /// `SyncMode::None`: handle commits written to the OS before answers (`settle.rs`).
    pub(super) settle: super::settle::Settle,
    /// Handle commits applied in groups (`commit_group.rs`).
    pub(super) batches: super::commit_group::CommitGroup,
}

#[derive(Default)]
struct SyncState {
    synced: u64,
    syncing: bool,
}

/// The block cache's capacity unless `storage.block_cache_bytes` says otherwise: fjall's own
/// default (32 MiB) holds about 400,000 rows of a small table, so a scan of a larger one
/// loaded, checked and decompressed every block again (a quarter of its instructions per row;
/// the cache fills only with blocks read).
pub const DEFAULT_BLOCK_CACHE_BYTES: u64 = 256 << 20;

impl EmbeddedStore {
    pub fn open(dir: &Path, sync: SyncMode) -> Result<EmbeddedStore> {
        Self::open_with_cache(dir, sync, DEFAULT_BLOCK_CACHE_BYTES)
    }

    /// `open` with a block cache of `block_cache_bytes` (decompressed data, index and filter
    /// blocks of the disk tables, shared by every key space).
    pub fn open_with_cache(
        dir: &Path,
        sync: SyncMode,
        block_cache_bytes: u64,
    ) -> Result<EmbeddedStore> {
        std::fs::create_dir_all(dir).map_err(|e| {
            StorageError::Io(format!(
                "cannot create data directory {}: {e}",
                dir.display()
            ))
        })?;
        let purge = Arc::new(PurgeSlot::default());
        let slot = Arc::clone(&purge);
        // fjall's folder: its tables and the journals the background thread writes back.
        let store_dir = dir.join("store");
        let db = Database::builder(&store_dir)
            .cache_size(block_cache_bytes)
            .with_compaction_filter_factories(Arc::new(move |name: &str| {
                (name == "data").then(|| Arc::clone(&slot) as Arc<dyn Factory>)
            }))
            .open()?;
        let data = db.keyspace("data", KeyspaceCreateOptions::default)?;
        let meta = db.keyspace("meta", KeyspaceCreateOptions::default)?;
        let sizes = db.keyspace("sizes", KeyspaceCreateOptions::default)?;
        let background = super::background::Background::start(
            // With fsync, commits write the journal to disk as they go.
            matches!(sync, SyncMode::None).then_some(store_dir.as_path()),
            vec![data.clone(), meta.clone(), sizes.clone()],
        );
        let store = EmbeddedStore {
            _background: background,
            db,
            data,
            meta,
            sizes,
            sync,
            group: Arc::default(),
            purge,
            free_space: Arc::new(FreeSpaceGuard::new(dir.to_path_buf(), 0)),
            owners: Default::default(),
            plain_writes: Default::default(),
            row_cache: Arc::new(RowCache::new(0, Box::new(|| true))),
        };
        let store = store.with_row_cache_bytes(super::row_cache::DEFAULT_ROW_CACHE_BYTES);
        let moved = super::legacy_sizes::move_records(&store)?;
        if moved > 0 {
            tracing::info!("moved {moved} size records from the metadata space to the sizes space");
        }
        Ok(store)
    }

    /// Refuses commits while the data directory has less than `min_free_bytes` available
    /// (0: never), so the store never runs into a full disk (see `free_space`).
    pub fn with_min_free_bytes(mut self, dir: &Path, min_free_bytes: u64) -> EmbeddedStore {
        self.free_space = Arc::new(FreeSpaceGuard::new(dir.to_path_buf(), min_free_bytes));
        self
    }

    /// A row cache of `row_cache_bytes` (0: none) for the point reads through handles opened
    /// from now on (`row_cache.rs`).
    pub fn with_row_cache_bytes(mut self, row_cache_bytes: u64) -> EmbeddedStore {
        let (db, data) = (self.db.clone(), self.data.clone());
        let idle = move || {
            use fjall::AbstractTree;
            // Installation holds the version lock: once it is free, none is half done.
            db.active_compactions() == 0 && {
                drop(data.tree.get_version_history_lock());
                true
            }
        };
        self.row_cache = Arc::new(RowCache::new(row_cache_bytes, Box::new(idle)));
        *self.purge.1.write() = Some(Arc::clone(&self.row_cache));
        self
    }

    /// Makes `data_dir` (new or empty) a data directory holding exactly the backup in `from`.
    pub fn restore(from: &Path, data_dir: &Path) -> Result<super::backup::Manifest> {
        let manifest = super::backup::read_manifest(from)?;
        super::backup::require_empty_dir(data_dir)?;
        let store = EmbeddedStore::open(data_dir, SyncMode::None)?;
        for (name, ks) in store.backup_spaces() {
            let want = manifest.spaces.get(name).ok_or_else(|| {
                StorageError::Corrupt(format!("the manifest lists no {name} space"))
            })?;
            let mut ingest = ks.start_ingestion()?;
            super::backup::read_space(&from.join(format!("{name}.kv")), want, &mut |k, v| {
                ingest.write(k, v).map_err(StorageError::from)
            })?;
            ingest.finish()?;
        }
        store.flush()?;
        Ok(manifest)
    }

    /// The fjall keyspaces a backup holds, by file name: all of them (size records live in
    /// `sizes`, next to nothing else, since they moved out of `meta`).
    fn backup_spaces(&self) -> [(&'static str, &Keyspace); 3] {
        [
            ("meta", &self.meta),
            ("sizes", &self.sizes),
            ("data", &self.data),
        ]
    }

    pub(super) fn space(&self, space: Space) -> &Keyspace {
        match space {
            Space::Data => &self.data,
            Space::Meta => &self.meta,
            Space::Sizes => &self.sizes,
        }
    }

    /// Waits until the commit just made is durable (a no-op unless `SyncMode::Fsync`).
    pub(super) fn after_commit(&self) -> Result<()> {
        self.group.after_commit(&self.db, self.sync)
    }
}

impl GroupCommit {
    pub(super) fn after_commit(&self, db: &Database, sync: SyncMode) -> Result<()> {
        if sync == SyncMode::Fsync {
            let ticket = self.committed.fetch_add(1, Ordering::AcqRel) + 1;
            self.wait_durable(db, ticket)?;
        }
        Ok(())
    }

    fn wait_durable(&self, db: &Database, ticket: u64) -> Result<()> {
        let g = self;
        let mut st = g.state.lock();
        loop {
            if st.synced >= ticket {
                return Ok(());
            }
            if !st.syncing {
                st.syncing = true;
                let target = g.committed.load(Ordering::Acquire);
                drop(st);
                let res = db.persist(PersistMode::SyncData);
                st = g.state.lock();
                st.syncing = false;
                if res.is_ok() {
                    st.synced = st.synced.max(target);
                }
                g.done.notify_all();
                res?;
            } else {
                g.done.wait(&mut st);
            }
        }
    }
}

impl Store for EmbeddedStore {
    fn metadata(&self) -> &dyn super::handle::MetaStore {
        self
    }
    fn partitions(&self) -> Option<&dyn super::handle::PartitionStore> {
        Some(self)
    }

    fn get(&self, space: Space, key: &[u8]) -> Result<Option<Bytes>> {
        if key.len() > MAX_KEY_BYTES {
            // No such key can be stored.
            return Ok(None);
        }
        Ok(self.space(space).get(key)?.map(Bytes::from))
    }

    fn scan(
        &self,
        space: Space,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        reverse: bool,
    ) -> ScanIter {
        let range = (clamp_lower(lower), clamp_upper(upper));
        snapshot_range(&self.db, self.space(space), range, reverse)
    }

    fn commit(&self, batch: WriteBatch) -> Result<()> {
        if batch.ops.is_empty() {
            return Ok(());
        }
        if let Some(op) = batch.ops.iter().find(|op| op.key.len() > MAX_KEY_BYTES) {
            return Err(StorageError::KeyTooLong(op.key.len()));
        }
        self.free_space.check()?;
        let _writing =
            (batch.ops.iter().any(|op| op.space == Space::Data)).then(|| self.plain_writes.begin());
        // Their keys leave the row cache (no lock held: nothing stored back).
        let data_keys = (batch.ops.iter())
            .filter(|op| op.space == Space::Data)
            .map(|op| &op.key[..]);
        let _caching = self.row_cache.begin(data_keys);
        let mut b = self.db.batch().durability(Some(PersistMode::Buffer));
        for op in batch.ops {
            let ks = self.space(op.space);
            match op.value {
                Some(v) => b.insert(ks, op.key, v),
                None => b.remove(ks, op.key),
            }
        }
        b.commit()?;
        self.after_commit()
    }

    fn settle_commits(&self) -> Result<()> {
        self.group.settle.settle(&self.db)
    }

    fn has_unsettled_commits(&self) -> bool {
        self.group.settle.has_unsettled()
    }

    fn flush(&self) -> Result<()> {
        self.db.persist(PersistMode::SyncAll)?;
        Ok(())
    }

    fn set_purge_filter(&self, filter: PurgeFilterFactory) {
        *self.purge.0.write() = Some(filter);
    }

    fn purges_in_compactions(&self) -> bool {
        true
    }

    fn compact(&self) -> Result<()> {
        self.data.rotate_memtable_and_wait()?;
        let _counted = self.row_cache.own_compaction();
        self.data.major_compact()?;
        Ok(())
    }

    fn backup(&self, dir: &Path, progress: &dyn Fn(u64)) -> Result<super::backup::Manifest> {
        use fjall::Readable;
        super::backup::require_empty_dir(dir)?;
        // One cross-keyspace snapshot: both spaces as of the same instant.
        let snapshot = self.db.snapshot();
        let mut spaces = std::collections::BTreeMap::new();
        let mut done = 0u64;
        for (name, ks) in self.backup_spaces() {
            let items = snapshot.iter(ks).map(|g| {
                let (k, v) = g.into_inner()?;
                Ok((k.to_vec(), v.to_vec()))
            });
            let file = dir.join(format!("{name}.kv"));
            let sum = super::backup::write_space(&file, items, &|n| progress(done + n))?;
            done += sum.entries;
            spaces.insert(name.to_string(), sum);
        }
        drop(snapshot);
        super::backup::write_manifest(dir, spaces)
    }
}

/// The keys of `space` in `range`, as of one instant: fjall reads at its newest sequence
/// number see a batch's keys as its memtable inserts land, one by one, so a plain range could
/// show part of a commit (a single-partition batch must be seen whole, as in Cassandra); a
/// snapshot reads only whole commits, for the same cost (a plain range opens a snapshot too).
pub(super) fn snapshot_range(
    db: &Database,
    space: &Keyspace,
    range: (Bound<Vec<u8>>, Bound<Vec<u8>>),
    reverse: bool,
) -> ScanIter {
    use fjall::Readable;
    boxed_iter(db.snapshot().range::<Vec<u8>, _>(space, range), reverse)
}

/// A fjall range as a [`ScanIter`], descending when `reverse`.
pub(super) fn boxed_iter(iter: fjall::Iter, reverse: bool) -> ScanIter {
    let map = |g: fjall::Guard| -> Result<(Bytes, Bytes)> {
        let (k, v) = g.into_inner()?;
        Ok((Bytes::from(k), Bytes::from(v)))
    };
    if reverse {
        Box::new(iter.rev().map(map))
    } else {
        Box::new(iter.map(map))
    }
}

/// A lower scan bound the store accepts. A bound key `k` longer than [`MAX_KEY_BYTES`] becomes
/// "after its first MAX_KEY_BYTES bytes" `t`: a stored key (at most that long) is above `k`
/// exactly when it is above `t`, since `t` is the only stored key that starts with `t`.
pub(super) fn clamp_lower(b: Bound<&[u8]>) -> Bound<Vec<u8>> {
    match b {
        Bound::Included(k) | Bound::Excluded(k) if k.len() > MAX_KEY_BYTES => {
            Bound::Excluded(k[..MAX_KEY_BYTES].to_vec())
        }
        b => b.map(<[u8]>::to_vec),
    }
}

/// An upper scan bound the store accepts: a too-long `k` becomes "up to and including its
/// first MAX_KEY_BYTES bytes" (the same reasoning as [`clamp_lower`]).
pub(super) fn clamp_upper(b: Bound<&[u8]>) -> Bound<Vec<u8>> {
    match b {
        Bound::Included(k) | Bound::Excluded(k) if k.len() > MAX_KEY_BYTES => {
            Bound::Included(k[..MAX_KEY_BYTES].to_vec())
        }
        b => b.map(<[u8]>::to_vec),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn collect(it: ScanIter) -> Vec<Vec<u8>> {
        it.map(|r| r.unwrap().0.to_vec()).collect()
    }

    #[test]
    fn the_block_cache_holds_what_it_is_given() {
        let dir = tempfile::tempdir().unwrap();
        let s = EmbeddedStore::open_with_cache(dir.path(), SyncMode::None, 8 << 20).unwrap();
        assert_eq!(s.db.cache_capacity(), 8 << 20);
        drop(s);
        let s = EmbeddedStore::open(dir.path(), SyncMode::None).unwrap();
        assert_eq!(s.db.cache_capacity(), DEFAULT_BLOCK_CACHE_BYTES);
    }

    #[test]
    fn batches_scans_and_reopen() {
        let dir = std::env::temp_dir().join(format!("ringgate-store-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        {
            let s = EmbeddedStore::open(&dir, SyncMode::Fsync).unwrap();
            let mut b = WriteBatch::default();
            for k in [3u8, 1, 2, 5] {
                b.put(Space::Data, vec![k], vec![k * 10]);
            }
            b.put(Space::Meta, &b"m"[..], &b"x"[..]);
            s.commit(b).unwrap();
            let mut b = WriteBatch::default();
            b.delete(Space::Data, vec![5u8]);
            s.commit(b).unwrap();
            let fwd = collect(s.scan(Space::Data, Bound::Included(&[2]), Bound::Unbounded, false));
            assert_eq!(fwd, vec![vec![2], vec![3]]);
            let rev = collect(s.scan(Space::Data, Bound::Unbounded, Bound::Excluded(&[3]), true));
            assert_eq!(rev, vec![vec![2], vec![1]]);
        }
        let s = EmbeddedStore::open(&dir, SyncMode::None).unwrap();
        assert_eq!(
            s.get(Space::Data, &[3]).unwrap().unwrap(),
            Bytes::from(vec![30u8])
        );
        assert_eq!(
            s.get(Space::Meta, b"m").unwrap().unwrap(),
            Bytes::from_static(b"x")
        );
        assert!(s.get(Space::Data, &[5]).unwrap().is_none());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn keys_over_the_limit_are_errors_not_panics() {
        let dir = std::env::temp_dir().join(format!("ringgate-store-long-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let s = EmbeddedStore::open(&dir, SyncMode::None).unwrap();
        let longest = vec![7u8; MAX_KEY_BYTES];
        let too_long = vec![7u8; MAX_KEY_BYTES + 1];
        let mut b = WriteBatch::default();
        b.put(Space::Data, longest.clone(), vec![1u8]);
        s.commit(b).unwrap();
        let mut b = WriteBatch::default();
        b.put(Space::Data, vec![1u8], vec![1u8]);
        b.put(Space::Data, too_long.clone(), vec![1u8]);
        assert!(matches!(
            s.commit(b),
            Err(StorageError::KeyTooLong(n)) if n == MAX_KEY_BYTES + 1
        ));
        // Nothing of the refused batch was written.
        assert!(s.get(Space::Data, &[1]).unwrap().is_none());
        assert!(s.get(Space::Data, &too_long).unwrap().is_none());
        assert!(s.get(Space::Data, &longest).unwrap().is_some());
        // Scans with too-long bounds see exactly the keys on the right side of them.
        let above = |lo: Bound<&[u8]>| collect(s.scan(Space::Data, lo, Bound::Unbounded, false));
        assert!(above(Bound::Included(&too_long)).is_empty());
        let below = |hi: Bound<&[u8]>| collect(s.scan(Space::Data, Bound::Unbounded, hi, false));
        assert_eq!(below(Bound::Excluded(&too_long)), vec![longest.clone()]);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
