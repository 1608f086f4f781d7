//! Group commit of partition handle batches: concurrent handle commits of one store share one
//! fjall batch, applied by whichever of them finds no group being applied (the leader); the
//! others wait for it, spinning first.
//!
//! Why: fjall applies a batch's memtable inserts under the database's journal mutex, which
//! every commit takes. Two runtime threads committing point writes met there at almost every
//! write: the one that found it held slept on a futex and the other woke it (0.89 futex calls
//! and 0.41 context switches per write at 4 x 32 in `scripts/bench`; taking and releasing the
//! mutex were 16% of the server's CPU, and the machine sat 14-20% idle, since a runtime thread
//! asleep has nothing else to run). Here a committer that finds a group being applied queues
//! its batch for that group's successor and spins for about one commit's length before it
//! sleeps; the leader applies every batch queued when it starts as one fjall batch (one trip
//! through the journal mutex, one journal entry).
//!
//! What holds: a request's items land in one fjall batch, atomically; its commit returns only
//! once that batch is applied, with the batch's result (a failed fjall commit fails every
//! request of its group: fjall is poisoned then); until then its thread holds the request's
//! own locks (owner epoch, condition stripes, write stamps), so whatever it checked still holds
//! when its items land. Items of different requests to one key are applied in queue order,
//! the order their commits arrived, as separate commits would be.
//!
//! Bounds: a group takes at most `MAX_GROUP_BATCHES` batches; the queue holds one batch per
//! thread inside a commit; a sleeping follower re-checks at least every `SLEEP_CHECK`.

use super::Result;
use super::StorageError;
use bytes::Bytes;
use fjall::{Database, Keyspace, PersistMode};
use parking_lot::{Condvar, Mutex};
use smallvec::SmallVec;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// Batches one group applies at most (the rest wait for the next).
const MAX_GROUP_BATCHES: usize = 64;
/// Rounds of `SPIN_HINTS` pause instructions a follower spins before it yields: about 15 us on
/// this machine's cores, a point write's commit.
const SPIN_ROUNDS: u32 = 20;
const SPIN_HINTS: u32 = 32;
/// Yields of the thread after spinning, before it sleeps.
const YIELD_ROUNDS: u32 = 8;
/// A sleeping follower wakes at least this often to look again (no wake-up can be lost, but a
/// bound keeps a mistake from hanging a request).
const SLEEP_CHECK: Duration = Duration::from_millis(1);

/// Which key space an item goes to (all handles of a store share them).
#[derive(Clone, Copy)]
pub(super) enum Space {
    Data,
    Sizes,
}

/// One request's writes: (space, key, value; None deletes).
pub(super) type Batch = Vec<(Space, Bytes, Option<Bytes>)>;

/// The store's key spaces and durability, as the leader applies a group.
pub(super) struct Target<'a> {
    pub db: &'a Database,
    pub data: &'a Keyspace,
    pub sizes: &'a Keyspace,
    pub durability: Option<PersistMode>,
}

/// See the module doc.
#[derive(Default)]
pub(super) struct CommitGroup {
    queue: Mutex<Vec<Queued>>,
    /// Held by the leader while it applies a group.
    leading: Mutex<()>,
    /// Sleeping followers wait here (with `queue`) for a leader to finish.
    finished: Condvar,
}

struct Queued {
    batch: Batch,
    slot: Arc<Slot>,
}

/// A queued batch's outcome, set once (by its group's leader, or as an abandoned group drops).
#[derive(Default)]
struct Slot(OnceLock<std::result::Result<(), String>>);

impl Slot {
    fn outcome(&self) -> Option<Result<()>> {
        let res = self.0.get()?;
        Some(res.clone().map_err(StorageError::Io))
    }

    /// Sets the outcome unless it is set already.
    fn set(&self, res: &std::result::Result<(), String>) {
        let _ = self.0.set(res.clone());
    }
}

impl CommitGroup {
    /// Applies `batch` to `target`, in a group with the batches of concurrent commits; returns
    /// once it is applied.
    pub(super) fn commit(&self, target: &Target, batch: Batch) -> Result<()> {
        let slot = Arc::new(Slot::default());
        self.queue.lock().push(Queued {
            batch,
            slot: Arc::clone(&slot),
        });
        let mut waits = 0u32;
        loop {
            if let Some(outcome) = slot.outcome() {
                return outcome;
            }
            if let Some(lead) = self.leading.try_lock() {
                self.lead(target, lead);
                continue;
            }
            waits += 1;
            if waits <= SPIN_ROUNDS {
                for _ in 0..SPIN_HINTS {
                    std::hint::spin_loop();
                }
            } else if waits <= SPIN_ROUNDS + YIELD_ROUNDS {
                std::thread::yield_now();
            } else {
                self.sleep(&slot);
            }
        }
    }

    /// Waits for the running group to finish (or `SLEEP_CHECK`), unless it already did.
    fn sleep(&self, slot: &Slot) {
        let mut queue = self.queue.lock();
        // Under the queue's lock, which the leader takes to announce its end: either the end
        // is seen here, or the wait starts before the announcement.
        if slot.outcome().is_some() || !self.leading.is_locked() {
            return;
        }
        self.finished.wait_for(&mut queue, SLEEP_CHECK);
    }

    /// Applies the batches queued now (up to `MAX_GROUP_BATCHES`) as one fjall batch, gives
    /// each its outcome, lets go of the lead and wakes the sleepers.
    fn lead(&self, target: &Target, lead: parking_lot::MutexGuard<'_, ()>) {
        let mut group = Group({
            let mut queue = self.queue.lock();
            let n = queue.len().min(MAX_GROUP_BATCHES);
            queue.drain(..n).collect()
        });
        if !group.0.is_empty() {
            let res = apply(target, &mut group.0).map_err(|e| e.to_string());
            for q in &group.0 {
                q.slot.set(&res);
            }
        }
        // Every batch has its outcome: nothing left for the drop to fail.
        group.0.clear();
        drop(group);
        drop(lead);
        let _queue = self.queue.lock();
        self.finished.notify_all();
    }
}

/// The batches one leader took. Should applying them panic, each still gets an outcome (a
/// failure) as this is dropped, so that no follower waits for it forever.
/// Inline room for a few batches: a group of one or two allocates no list.
struct Group(SmallVec<[Queued; 2]>);

impl Drop for Group {
    fn drop(&mut self) {
        if self.0.is_empty() {
            return;
        }
        let abandoned = Err("the store's commit panicked".to_string());
        for q in &self.0 {
            q.slot.set(&abandoned);
        }
    }
}

/// Applies the group's batches, in queue order, as one fjall batch (their items moved out).
fn apply(target: &Target, group: &mut [Queued]) -> std::result::Result<(), fjall::Error> {
    let ops = group.iter().map(|q| q.batch.len()).sum();
    let mut b =
        fjall::OwnedWriteBatch::with_capacity(target.db.clone(), ops).durability(target.durability);
    for q in group {
        for (space, key, value) in q.batch.drain(..) {
            let space = match space {
                Space::Data => target.data,
                Space::Sizes => target.sizes,
            };
            match value {
                Some(v) => b.insert(space, key, v),
                None => b.remove(space, key),
            }
        }
    }
    b.commit()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fresh database with the two key spaces a group writes to.
    fn open() -> (tempfile::TempDir, Database, Keyspace, Keyspace) {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::builder(dir.path()).open().unwrap();
        let data = db.keyspace("data", fjall::KeyspaceCreateOptions::default);
        let sizes = db.keyspace("sizes", fjall::KeyspaceCreateOptions::default);
        (dir, db.clone(), data.unwrap(), sizes.unwrap())
    }

    /// Threads committing at once: every batch is applied, each of its items, and the queue
    /// is left empty.
    #[test]
    fn concurrent_commits_all_land() {
        let (_dir, db, data, sizes) = open();
        let group = CommitGroup::default();
        const THREADS: u64 = 4;
        const PER_THREAD: u64 = 500;
        std::thread::scope(|s| {
            for t in 0..THREADS {
                let (db, data, sizes, group) = (&db, &data, &sizes, &group);
                s.spawn(move || {
                    let target = Target {
                        db,
                        data,
                        sizes,
                        durability: None,
                    };
                    for i in 0..PER_THREAD {
                        let key = Bytes::from(format!("{t}/{i:04}"));
                        let size = Bytes::from(i.to_be_bytes().to_vec());
                        let row = Bytes::from_static(b"row");
                        let batch = vec![
                            (Space::Data, key.clone(), Some(row)),
                            (Space::Sizes, key, Some(size)),
                        ];
                        group.commit(&target, batch).unwrap();
                    }
                });
            }
        });
        assert_eq!(data.len().unwrap() as u64, THREADS * PER_THREAD);
        assert_eq!(sizes.len().unwrap() as u64, THREADS * PER_THREAD);
        assert_eq!(
            sizes.get("3/0499").unwrap().as_deref(),
            Some(&499u64.to_be_bytes()[..])
        );
        assert!(group.queue.lock().is_empty());
    }

    /// A delete and a later write of one key by two requests, queued in that order and
    /// applied by one leader as one fjall batch, leave the write.
    #[test]
    fn items_of_one_group_apply_in_queue_order() {
        let (_dir, db, data, sizes) = open();
        let target = Target {
            db: &db,
            data: &data,
            sizes: &sizes,
            durability: None,
        };
        let group = CommitGroup::default();
        let key = Bytes::from_static(b"k");
        data.insert(&key[..], "old").unwrap();
        let slots: Vec<Arc<Slot>> = (0..2).map(|_| Arc::default()).collect();
        for (value, slot) in [None, Some(Bytes::from_static(b"new"))]
            .into_iter()
            .zip(&slots)
        {
            group.queue.lock().push(Queued {
                batch: vec![(Space::Data, key.clone(), value)],
                slot: Arc::clone(slot),
            });
        }
        group.lead(&target, group.leading.lock());
        assert_eq!(data.get(&key[..]).unwrap().as_deref(), Some(&b"new"[..]));
        assert!(slots.iter().all(|s| matches!(s.outcome(), Some(Ok(())))));
    }

    /// Batches a leader took and never applied (its commit panicked) fail instead of leaving
    /// their committers waiting.
    #[test]
    fn an_abandoned_group_fails_its_batches() {
        let slot = Arc::<Slot>::default();
        drop(Group(smallvec::smallvec![Queued {
            batch: Vec::new(),
            slot: Arc::clone(&slot),
        }]));
        match slot.outcome() {
            Some(Err(StorageError::Io(e))) => assert_eq!(e, "the store's commit panicked"),
            _ => panic!("the batch has no failure"),
        }
    }
}
