//! Counting a splitting partition's left child without blocking its writers for the whole scan.
//!
//! A split must start each child with exact byte and logical-partition counts, so it counts
//! the left child's size records. Holding the parent's exclusive lock for the whole scan would
//! stall every write to the partition for as long as millions of records take to read. Instead
//! the split counts in chunks of `CHUNK_RECORDS`, each under the exclusive lock, and releases
//! the lock in between. The watch remembers the last record key counted (`cursor`); a write
//! committed between chunks (under the shared lock) that changes a record the split has
//! already counted (key <= cursor, token <= boundary) adds its change to the watch, and one it
//! has not yet reached is simply read by a later chunk (scans read the latest data, and no
//! write runs during a chunk). After the last chunk, still under the lock, the counts are exact.
//!
//! The startup recount of a partition's counters (`sizes::recount`) is the same count with the
//! partition's end as the boundary, so the server can answer while it runs (see `sizes.rs`).

use super::map::PhysicalPartition;
use super::sizes::{scan_range_after, size_key};
use crate::storage::{PartitionHandle, StorageError};
use crate::tokens::Token;
use parking_lot::{Mutex, RwLockWriteGuard};
use std::sync::atomic::{AtomicBool, Ordering};

/// Size records counted per hold of the parent's exclusive lock.
pub const CHUNK_RECORDS: usize = 4096;

#[derive(Debug, Default)]
struct Watch {
    boundary: Token,
    /// Key of the last size record counted (None: nothing counted yet).
    cursor: Option<Vec<u8>>,
    bytes: i64,
    logical: i64,
}

/// Lives in `PartStats`; empty unless a split is counting.
#[derive(Debug, Default)]
pub struct SplitWatch {
    active: AtomicBool,
    watch: Mutex<Watch>,
}

impl SplitWatch {
    /// Starts counting (call under the exclusive lock).
    pub fn start(&self, boundary: Token) {
        *self.watch.lock() = Watch {
            boundary,
            ..Watch::default()
        };
        self.active.store(true, Ordering::SeqCst);
    }

    pub fn is_active(&self) -> bool {
        self.active.load(Ordering::SeqCst)
    }

    pub fn stop(&self) {
        self.active.store(false, Ordering::SeqCst);
    }

    /// Where the next chunk starts (after this key), and the boundary.
    pub fn position(&self) -> (Option<Vec<u8>>, Token) {
        let w = self.watch.lock();
        (w.cursor.clone(), w.boundary)
    }

    /// A chunk counted records up to `cursor`.
    pub fn counted(&self, cursor: Vec<u8>, bytes: i64, logical: i64) {
        let mut w = self.watch.lock();
        w.cursor = Some(cursor);
        w.bytes += bytes;
        w.logical += logical;
    }

    /// The left child's (bytes, logical partitions) so far.
    pub fn totals(&self) -> (i64, i64) {
        let w = self.watch.lock();
        (w.bytes, w.logical)
    }

    /// A write changed the record `key()` (at `token`) by `bytes`, `logical` (under the shared
    /// lock): counted here when the split has already passed it.
    pub fn record_change(
        &self,
        token: Token,
        key: impl FnOnce() -> Vec<u8>,
        bytes: i64,
        logical: i64,
    ) {
        if !self.active.load(Ordering::SeqCst) {
            return;
        }
        let mut w = self.watch.lock();
        let passed = token <= w.boundary && w.cursor.as_deref().is_some_and(|c| key()[..] <= *c);
        if passed {
            w.bytes += bytes;
            w.logical += logical;
        }
    }
}

/// How far [`count_chunks`] got.
pub enum Counted<'a> {
    /// Every record up to the boundary is counted: the partition's exclusive lock, held, and
    /// the longest time it was held in one go (µs).
    Done(RwLockWriteGuard<'a, ()>, u64),
    /// The chunk budget ran out; the watch keeps its place for the next call.
    Paused,
    /// The partition was split (retired) meanwhile.
    Retired,
}

/// Counts the size records of `part` with tokens up to `boundary` into its watch, one chunk
/// per hold of its exclusive lock, at most `budget` chunks (decremented); starts the watch
/// unless a previous call left it counting. Counting the whole partition (`boundary` is its
/// end: the recount, `sizes::recount`) also fills its memo (`size_memo.rs`); a split's count
/// (a boundary inside) leaves it alone.
pub fn count_chunks<'a>(
    handle: &dyn PartitionHandle,
    sid: u64,
    part: &'a PhysicalPartition,
    boundary: Token,
    budget: &mut usize,
) -> Result<Counted<'a>, StorageError> {
    let watch = &part.stats.split_watch;
    let memo = (boundary == part.end).then_some(&part.stats.memo);
    let mut longest_us = 0u64;
    while *budget > 0 {
        *budget -= 1;
        let guard = part.stats.lock.write();
        let held = std::time::Instant::now();
        if part.stats.retired.load(Ordering::SeqCst) {
            return Ok(Counted::Retired);
        }
        if !watch.is_active() {
            watch.start(boundary);
            if let Some(memo) = memo {
                memo.begin();
            }
        }
        let (after, _) = watch.position();
        let (mut bytes, mut logical, mut last) = (0i64, 0i64, None);
        for r in scan_range_after(handle, sid, part, boundary, after.as_deref()).take(CHUNK_RECORDS)
        {
            let r = r?;
            bytes += r.bytes;
            logical += 1;
            let key = size_key(sid, r.token, &r.pk);
            if let Some(memo) = memo {
                memo.set(&key[8..], r.bytes as u64);
            }
            last = Some(key);
        }
        let done = logical < CHUNK_RECORDS as i64;
        if let Some(key) = last {
            watch.counted(key, bytes, logical);
        }
        longest_us = longest_us.max(held.elapsed().as_micros() as u64);
        if done {
            return Ok(Counted::Done(guard, longest_us));
        }
        drop(guard);
    }
    Ok(Counted::Paused)
}
