//! A cluster node's handle on one physical partition (`handles.rs`): reads go through a
//! read-only handle (reads need no epoch, every node may read any partition), commits through
//! the owner handle while this node owns the partition, and fail with `NotOwner` otherwise.
//!
//! Why a wrapper that stays in the partition's slot instead of swapping the slot: the
//! partition's slot is set once (`OnceLock`, the single node's hot path: no lock, no lookup),
//! while ownership comes and goes; what changes is behind an `ArcSwap` that only commits and
//! `placement` read. A commit that loaded the owner handle just before ownership was lost
//! still reaches PostgreSQL, which refuses it (`Fenced`) once the next owner opened the
//! partition with its newer epoch: safety rests on the epoch, this is the fast refusal.
//!
//! Moving the partition to another storage group (`moves.rs`) needs three things of it:
//! the keys committed while it is copied ([`Served::track`], `dirty.rs`), a moment when no
//! commit is in flight ([`Served::freeze`]: commits wait on the gate, a read-write lock each
//! commit holds shared), and the switch to the new group's handles ([`Served::switch`]),
//! after which waiting and later commits go to the new group.

use super::dirty::{Dirty, DirtyKey};
use super::handles::Placement;
use crate::storage::handle::{
    Epoch, LocalWrite, PartitionHandle, PartitionRef, PartitionSnapshot, ScanBounds,
};
use crate::storage::{Result, ScanIter, StorageError};
use arc_swap::ArcSwap;
use bytes::Bytes;
use parking_lot::{Mutex, RwLock, RwLockWriteGuard};
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

struct State {
    placement: Placement,
    /// The owner handle, opened with this node's etcd epoch: Some exactly when `Local`.
    owner: Option<Arc<dyn PartitionHandle>>,
}

pub struct Served {
    part: PartitionRef,
    reader: ArcSwap<Arc<dyn PartitionHandle>>,
    state: ArcSwap<State>,
    /// Held shared by every commit, exclusively by a move's last round and switch.
    gate: RwLock<()>,
    /// Whether `dirty` records (read without its lock on every commit).
    tracking: AtomicBool,
    dirty: Mutex<Option<Dirty>>,
}

impl Served {
    /// Starts `Unowned` (the ownership loop says otherwise on its next round).
    pub fn new(part: PartitionRef, reader: Arc<dyn PartitionHandle>) -> Served {
        Served {
            part,
            reader: ArcSwap::from_pointee(reader),
            state: ArcSwap::from_pointee(State {
                placement: Placement::Unowned,
                owner: None,
            }),
            gate: RwLock::new(()),
            tracking: AtomicBool::new(false),
            dirty: Mutex::new(None),
        }
    }

    /// From now on every commit's keys are recorded (at most `limit_bytes`). Waits for the
    /// commits in flight, whose keys it would miss.
    pub fn track(&self, limit_bytes: usize) {
        let _no_commit = self.gate.write();
        *self.dirty.lock() = Some(Dirty::new(limit_bytes));
        self.tracking.store(true, Ordering::Release);
    }

    /// The keys committed since `track` or the last call; Err(limit) when they overflowed.
    pub fn take_dirty(&self) -> std::result::Result<Vec<DirtyKey>, usize> {
        match &mut *self.dirty.lock() {
            Some(d) => d.take(),
            None => Ok(Vec::new()),
        }
    }

    pub fn stop_tracking(&self) {
        self.tracking.store(false, Ordering::Release);
        *self.dirty.lock() = None;
    }

    /// Waits for the commits in flight and holds every later one until the guard drops.
    pub fn freeze(&self) -> RwLockWriteGuard<'_, ()> {
        self.gate.write()
    }

    /// The partition now lives in another group: reads and commits go through these handles
    /// (called while frozen, so no commit is in flight on the old ones).
    pub fn switch(&self, owner: Arc<dyn PartitionHandle>, reader: Arc<dyn PartitionHandle>) {
        self.reader.store(Arc::new(reader));
        self.state.store(Arc::new(State {
            placement: Placement::Local,
            owner: Some(owner),
        }));
    }

    pub fn placement(&self) -> Placement {
        self.state.load().placement.clone()
    }

    /// The owner handle while `Local`.
    pub fn owner(&self) -> Option<Arc<dyn PartitionHandle>> {
        self.state.load().owner.clone()
    }

    /// This node serves the partition through `owner` (opened with its epoch).
    pub fn serve(&self, owner: Arc<dyn PartitionHandle>) {
        self.state.store(Arc::new(State {
            placement: Placement::Local,
            owner: Some(owner),
        }));
    }

    /// This node no longer serves it (`placement` is `Remote` or `Unowned`): commits fail
    /// from now on. No-op when nothing changes (the loop calls it every round).
    pub fn elsewhere(&self, placement: Placement) {
        debug_assert!(placement != Placement::Local);
        if self.state.load().placement == placement {
            return;
        }
        self.state.store(Arc::new(State {
            placement,
            owner: None,
        }));
    }
}

impl PartitionHandle for Served {
    fn partition(&self) -> &PartitionRef {
        &self.part
    }

    fn epoch(&self) -> Epoch {
        self.state.load().owner.as_ref().map_or(0, |h| h.epoch())
    }

    fn get(&self, key: &[u8]) -> Result<Option<Bytes>> {
        self.reader.load().get(key)
    }

    fn prefers_point_reads(&self) -> bool {
        self.reader.load().prefers_point_reads()
    }

    fn scan(&self, lower: Bound<&[u8]>, upper: Bound<&[u8]>, reverse: bool) -> ScanIter {
        self.reader.load().scan(lower, upper, reverse)
    }

    fn scan_local(
        &self,
        prefix: &[u8],
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        reverse: bool,
    ) -> ScanIter {
        self.reader.load().scan_local(prefix, lower, upper, reverse)
    }

    fn snapshot(&self) -> Arc<dyn PartitionSnapshot> {
        self.reader.load().snapshot()
    }

    fn cheap_snapshots(&self) -> bool {
        self.reader.load().cheap_snapshots()
    }

    fn scans_read_in_parts(&self) -> bool {
        self.reader.load().scans_read_in_parts()
    }

    fn get_together(&self, keys: &[Vec<u8>]) -> Option<Result<Vec<Option<Bytes>>>> {
        self.reader.load().get_together(keys)
    }

    fn get_and_scans(
        &self,
        key: Option<&[u8]>,
        slices: &[ScanBounds],
        reverse: bool,
        first_entries: usize,
    ) -> Option<Result<(Option<Bytes>, Vec<ScanIter>)>> {
        (self.reader.load()).get_and_scans(key, slices, reverse, first_entries)
    }

    fn get_size(&self, key: &[u8]) -> Result<Option<Bytes>> {
        self.reader.load().get_size(key)
    }

    fn scan_sizes(&self, lower: Bound<&[u8]>, upper: Bound<&[u8]>) -> ScanIter {
        self.reader.load().scan_sizes(lower, upper)
    }

    fn local_records(&self, after: Option<(i64, &[u8])>, limit: usize) -> Result<Vec<LocalWrite>> {
        self.reader.load().local_records(after, limit)
    }

    fn get_local(&self, key: &[u8], token: i64) -> Result<Option<Bytes>> {
        self.reader.load().get_local(key, token)
    }

    fn commit(&self, commit: crate::storage::handle::PartitionCommit) -> Result<()> {
        let _gate = self.gate.read();
        let tracked = (self.tracking.load(Ordering::Acquire)).then(|| Dirty::keys_of(&commit));
        let state = self.state.load();
        match (&state.owner, &state.placement) {
            (Some(h), _) => {
                let committed = h.commit(commit);
                if let (Some(keys), Some(d)) = (tracked, &mut *self.dirty.lock()) {
                    d.record(keys);
                }
                committed
            }
            (None, placement) => Err(StorageError::NotOwner {
                storage_id: self.part.storage_id,
                partition_id: self.part.partition_id,
                owner: match placement {
                    Placement::Remote(node) => Some(node.clone()),
                    _ => None,
                },
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::handle::PartitionCommit;
    use crate::storage::{EmbeddedStore, Store, SyncMode};

    fn handle(dir: &std::path::Path) -> (Arc<dyn Store>, Arc<dyn PartitionHandle>) {
        let store: Arc<dyn Store> = Arc::new(EmbeddedStore::open(dir, SyncMode::None).unwrap());
        let part = PartitionRef::new(7, 1, i64::MIN, i64::MAX);
        let h = store.partitions().unwrap().open_partition(part, 1).unwrap();
        (store, h)
    }

    fn key(n: u8) -> Bytes {
        let mut k = 7u64.to_be_bytes().to_vec();
        k.extend_from_slice(&[0x80, 0, 0, 0, 0, 0, 0, n]);
        Bytes::from(k)
    }

    fn put(s: &Served, n: u8) {
        let mut c = PartitionCommit::default();
        c.put(key(n), &b"v"[..]);
        s.commit(c).unwrap();
    }

    /// What a move relies on: tracked keys, commits held while frozen, the switch.
    #[test]
    fn tracks_holds_and_switches_commits() {
        let (da, db) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let ((_sa, a), (_sb, b)) = (handle(da.path()), handle(db.path()));
        let s = Arc::new(Served::new(a.partition().clone(), Arc::clone(&a)));
        s.serve(Arc::clone(&a));
        put(&s, 1);
        assert!(s.take_dirty().unwrap().is_empty(), "not tracking yet");
        s.track(1 << 20);
        put(&s, 2);
        assert_eq!(s.take_dirty().unwrap(), vec![DirtyKey::Data(key(2))]);

        let frozen = s.freeze();
        let done = Arc::new(AtomicBool::new(false));
        let writer = {
            let (s, done) = (Arc::clone(&s), Arc::clone(&done));
            std::thread::spawn(move || {
                put(&s, 3);
                done.store(true, Ordering::SeqCst);
            })
        };
        std::thread::sleep(std::time::Duration::from_millis(100));
        assert!(!done.load(Ordering::SeqCst), "a commit ran while frozen");
        s.switch(Arc::clone(&b), Arc::clone(&b));
        drop(frozen);
        writer.join().unwrap();
        // The held commit went to the new handle, and reads follow it.
        assert!(b.get(&key(3)).unwrap().is_some());
        assert!(a.get(&key(3)).unwrap().is_none());
        assert!(s.get(&key(3)).unwrap().is_some());
        assert_eq!(s.take_dirty().unwrap(), vec![DirtyKey::Data(key(3))]);
        s.stop_tracking();
        put(&s, 4);
        assert!(s.take_dirty().unwrap().is_empty());
    }
}
