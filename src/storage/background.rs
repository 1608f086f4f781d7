//! The embedded store's background thread: every [`TICK_MS`] it starts the disk writes of the
//! active journal (`journal_writeback.rs`, `storage.sync = "none"` only) and frees the
//! memtables the trees flushed (`memtable_release.rs`). Both keep work that would otherwise run
//! under a lock every commit takes off the commit path. It holds clones of the store's key
//! spaces, and the store stops (and joins) it before it closes them.

use super::journal_writeback::Active;
use super::memtable_release::MemtableRelease;
use fjall::Keyspace;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// How often the thread works: at 40,000 small writes a second, about 2 MB of journal, and a
/// flushed memtable kept this much longer at most.
pub const TICK_MS: u64 = 100;

/// The thread of one store; stops (and is joined) when dropped.
pub struct Background {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Background {
    /// Starts the thread for the store's `spaces`, writing back the journals in
    /// `journal_folder` if given (None if no thread could be started: the store works as
    /// before, with the stalls).
    pub fn start(journal_folder: Option<&Path>, spaces: Vec<Keyspace>) -> Option<Background> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let mut journal = journal_folder.map(Active::new);
        let mut memtables = MemtableRelease::default();
        let spawned = std::thread::Builder::new()
            .name("store-background".into())
            .spawn(move || {
                let trees: Vec<&fjall::AnyTree> = spaces.iter().map(|k| &k.tree).collect();
                while !flag.load(Ordering::Acquire) {
                    std::thread::park_timeout(Duration::from_millis(TICK_MS));
                    if let Some(j) = &mut journal {
                        j.tick();
                    }
                    memtables.tick(&trees);
                }
            });
        match spawned {
            Ok(thread) => Some(Background {
                stop,
                thread: Some(thread),
            }),
            Err(e) => {
                tracing::warn!(error = %e, "cannot start the store's background thread");
                None
            }
        }
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            t.thread().unpark();
            let _ = t.join();
        }
    }
}
