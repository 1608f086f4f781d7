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

use crate::tokens::Token;
use parking_lot::Mutex;
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
