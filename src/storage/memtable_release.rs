//! Memtables are freed on the store's background thread, not under the tree's version lock.
//!
//! Why: fjall's tree frees a flushed memtable when it drops the last version that holds it, in
//! `SuperVersions::maintenance`, which runs under the tree's version lock (a write lock); a
//! commit's memtable insert takes that lock to read, and holds fjall's journal lock meanwhile,
//! so every commit waits. Freeing a 64 MiB memtable (a skiplist of some 400,000 small
//! allocations) took 130-250 ms: the p999 stall of `scripts/bench`'s 64 x 4 writes (perf:
//! commits off the CPU in `Tree::append_entry` and `Journal::get_writer` while a worker ran
//! `drop_in_place<Memtable>` under `maintenance`).
//!
//! So the background thread keeps a reference to each tree's active memtable, taken every tick,
//! and lets go of it once it is the only holder left (the tree dropped it: flushed, so
//! unreachable): the memtable is then freed here, with no lock held. A memtable costs its memory
//! at most one tick longer. One that lived less than a tick is not seen, and is freed by the
//! tree as before (it is small).

use std::any::Any;
use std::sync::Arc;

/// More references than any store holds (a tree keeps its active memtable and at most a few
/// sealed ones): past it, new memtables are left to the tree.
const MAX_HELD: usize = 64;

/// The memtables the background thread holds.
#[derive(Default)]
pub(super) struct MemtableRelease {
    held: Vec<Arc<dyn Any + Send + Sync>>,
}

impl MemtableRelease {
    /// Takes a reference to each tree's active memtable and frees those only this holds; how
    /// many it freed.
    pub(super) fn tick(&mut self, trees: &[&fjall::AnyTree]) -> usize {
        use fjall::AbstractTree;
        for tree in trees {
            let active: Arc<dyn Any + Send + Sync> = tree.active_memtable();
            let known = self.held.iter().any(|m| Arc::ptr_eq(m, &active));
            if !known && self.held.len() < MAX_HELD {
                self.held.push(active);
            }
        }
        let before = self.held.len();
        // `strong_count` 1: the tree and its readers let go; no one can reach it again.
        self.held.retain(|m| Arc::strong_count(m) > 1);
        before - self.held.len()
    }

    #[cfg(test)]
    fn held(&self) -> usize {
        self.held.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fjall::{Database, KeyspaceCreateOptions};

    /// On a fjall tree of its own (an `EmbeddedStore`'s thread would hold them too).
    #[test]
    fn flushed_memtables_are_freed_here() {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::builder(dir.path()).open().unwrap();
        let ks = db.keyspace("t", KeyspaceCreateOptions::default).unwrap();
        let mut release = MemtableRelease::default();
        let mut freed = 0;
        for round in 0u8..20 {
            ks.insert([round; 8], [round; 64]).unwrap();
            freed += release.tick(&[&ks.tree]);
            ks.rotate_memtable_and_wait().unwrap(); // seals and flushes the memtable
            freed += release.tick(&[&ks.tree]);
            assert!(
                release.held() <= 4,
                "round {round}: {} held",
                release.held()
            );
        }
        assert!(freed >= 10, "freed {freed} of 20 flushed memtables");
        // Every row is still read: nothing the tree reads was freed.
        assert_eq!(ks.iter().count(), 20);
    }
}
