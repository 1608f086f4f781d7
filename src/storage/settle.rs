//! Commits whose journal entries wait in the process's buffer until answers go out.
//!
//! Why: with `storage.sync = "none"` an acknowledged write must survive `kill -9`, so its
//! journal entry must reach the operating system before the client hears of it. Writing the
//! journal to the OS at every commit cost one `write` system call per point write. A partition
//! handle's commit on the embedded store (`SyncMode::None`) leaves its entry in fjall's journal
//! buffer and counts itself here (`deferred`); the connection writer calls `Store::settle_commits`
//! before it sends a batch of answers, and one `write` of the journal covers every commit made
//! so far, from every connection. Answers are the only acknowledgment: the journal is one
//! sequential file, so a crash loses a suffix of commits, never one without those before it;
//! its rotation (a memtable flush) and every metadata commit still write it out at once.

use super::Result;
use fjall::{Database, PersistMode};
use parking_lot::Mutex;
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};

/// Deferred commits counted, and how many of them the journal holds in the OS.
#[derive(Default)]
pub(super) struct Settle {
    deferred: AtomicU64,
    settled: AtomicU64,
    /// One writer of the journal at a time (others find their commits covered after it).
    writing: Mutex<()>,
}

impl Settle {
    /// Counts a commit whose journal entry was left in the buffer (after the entry was
    /// appended: a settle that sees the count writes the entry out).
    pub(super) fn deferred(&self) {
        self.deferred.fetch_add(1, SeqCst);
    }

    /// Whether a deferred commit is not in the OS yet.
    pub(super) fn has_unsettled(&self) -> bool {
        self.settled.load(SeqCst) < self.deferred.load(SeqCst)
    }

    /// Writes the journal to the OS if a deferred commit is not there yet.
    pub(super) fn settle(&self, db: &Database) -> Result<()> {
        let target = self.deferred.load(SeqCst);
        if self.settled.load(SeqCst) >= target {
            return Ok(());
        }
        let _one = self.writing.lock();
        if self.settled.load(SeqCst) >= target {
            return Ok(());
        }
        db.persist(PersistMode::Buffer)?;
        self.settled.fetch_max(target, SeqCst);
        Ok(())
    }
}
