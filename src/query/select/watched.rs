//! Tests' partition handle: a real one, watched and steered (the isolation of reads that
//! look up several keys, `points.rs` and `read.rs`).

use crate::storage::handle::{Epoch, PartitionCommit, PartitionRef, PartitionSnapshot};
use crate::storage::handle::{PartitionHandle, ReadStamp};
use crate::storage::{EmbeddedStore, Result, ScanIter, Store, SyncMode};
use bytes::Bytes;
use std::ops::Bound;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;

/// A real embedded partition handle whose stamps, when `restless`, always report a write
/// begun since (as under writes to the same stripes that never stop); counts lookups and
/// snapshots, and runs `before_scan` (if set) on the real handle before each scan (a write
/// landing between a read's lookups and its scan).
pub(super) struct Watched {
    pub(super) inner: Arc<dyn PartitionHandle>,
    pub(super) restless: bool,
    pub(super) gets: AtomicUsize,
    pub(super) snapshots: AtomicUsize,
    pub(super) before_scan: Option<BeforeScan>,
}

/// What runs on the real handle before each scan.
pub(super) type BeforeScan = Box<dyn Fn(&dyn PartitionHandle) + Send + Sync>;

impl Watched {
    pub(super) fn new(inner: Arc<dyn PartitionHandle>, restless: bool) -> Watched {
        Watched {
            inner,
            restless,
            gets: AtomicUsize::new(0),
            snapshots: AtomicUsize::new(0),
            before_scan: None,
        }
    }

    /// (lookups, snapshots) so far.
    pub(super) fn counts(&self) -> (usize, usize) {
        (self.gets.load(SeqCst), self.snapshots.load(SeqCst))
    }
}

impl PartitionHandle for Watched {
    fn partition(&self) -> &PartitionRef {
        self.inner.partition()
    }
    fn epoch(&self) -> Epoch {
        self.inner.epoch()
    }
    fn get(&self, key: &[u8]) -> Result<Option<Bytes>> {
        self.gets.fetch_add(1, SeqCst);
        self.inner.get(key)
    }
    fn stamp(&self, key: &[u8]) -> Option<ReadStamp> {
        self.inner.stamp(key)
    }
    fn changed_since(&self, key: &[u8], stamp: &ReadStamp) -> bool {
        self.restless || self.inner.changed_since(key, stamp)
    }
    fn scan(&self, lower: Bound<&[u8]>, upper: Bound<&[u8]>, reverse: bool) -> ScanIter {
        if let Some(f) = &self.before_scan {
            f(&*self.inner);
        }
        self.inner.scan(lower, upper, reverse)
    }
    fn scan_local(
        &self,
        prefix: &[u8],
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        reverse: bool,
    ) -> ScanIter {
        self.inner.scan_local(prefix, lower, upper, reverse)
    }
    fn snapshot(&self) -> Arc<dyn PartitionSnapshot> {
        self.snapshots.fetch_add(1, SeqCst);
        self.inner.snapshot()
    }
    fn get_size(&self, key: &[u8]) -> Result<Option<Bytes>> {
        self.inner.get_size(key)
    }
    fn scan_sizes(&self, lower: Bound<&[u8]>, upper: Bound<&[u8]>) -> ScanIter {
        self.inner.scan_sizes(lower, upper)
    }
    fn commit(&self, commit: PartitionCommit) -> Result<()> {
        self.inner.commit(commit)
    }
}

/// A watched handle on a fresh store holding `a` -> "1" and `b` -> "2" (`c` absent), with
/// the keys `[a, b, c]` (ascending).
pub(super) fn watched(
    dir: &std::path::Path,
    restless: bool,
) -> (Arc<dyn Store>, Watched, [Vec<u8>; 3]) {
    let store: Arc<dyn Store> = Arc::new(EmbeddedStore::open(dir, SyncMode::None).unwrap());
    let part = PartitionRef::new(7, 1, i64::MIN, i64::MAX);
    let inner = store.partitions().unwrap().open_partition(part, 1).unwrap();
    let keys =
        [1u8, 2, 3].map(|n| [&7u64.to_be_bytes()[..], &[0x80, 0, 0, 0, 0, 0, 0, n]].concat());
    let mut c = PartitionCommit::default();
    c.put(keys[0].clone(), &b"1"[..])
        .put(keys[1].clone(), &b"2"[..]);
    inner.commit(c).unwrap();
    (store, Watched::new(inner, restless), keys)
}
