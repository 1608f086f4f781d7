//! Background writeback of the embedded store's active journal (`storage.sync = "none"`).
//!
//! Why: fjall seals its journal when a memtable rotates, and sealing fsyncs the whole journal
//! file while it holds the journal's lock, so every commit waits for that fsync. With
//! `sync = "none"` nothing had asked for the journal's pages to be written before (the
//! kernel's own writeback starts after 30 s), so the sealing fsync wrote the 64 MB since the
//! last one: 165-242 ms in which no write committed (64 x 4 writes of `scripts/bench`, fsyncs
//! timed with `perf record -e syscalls:sys_enter_fsync,syscalls:sys_exit_fsync`); with this
//! writeback 55-82 ms in the same sitting (what is left is the disk's queue, shared with the
//! flushes' table writes, and its cache flush).
//!
//! Every tick (100 ms) the store's background thread (`background.rs`) asks the kernel to
//! start writing the active journal's dirty pages (Linux: `sync_file_range` with
//! `SYNC_FILE_RANGE_WRITE`, which starts the writes and returns; elsewhere `fdatasync`, on that
//! thread). It takes no lock of fjall's, so commits never wait for it, and the sealing fsync
//! finds at most about a tick's worth of pages left. It changes nothing a commit promises: with `sync = "none"` an acknowledged write
//! survives a crash of the process, not of the machine.
//!
//! The active journal is the highest-numbered `<n>.jnl` in the store's folder (fjall's
//! layout; should it change, no journal is found and the thread does nothing).

use std::fs::File;
use std::path::{Path, PathBuf};

/// The journal being written to, opened once per journal.
pub(super) struct Active {
    folder: PathBuf,
    open: Option<(u64, File)>,
}

impl Active {
    pub(super) fn new(folder: &Path) -> Active {
        Active {
            folder: folder.to_path_buf(),
            open: None,
        }
    }

    /// Starts the writeback of the active journal; its number, if one was found and opened.
    pub(super) fn tick(&mut self) -> Option<u64> {
        let newest = newest_journal(&self.folder)?;
        if self.open.as_ref().map(|(id, _)| *id) != Some(newest) {
            let path = self.folder.join(format!("{newest}.jnl"));
            self.open = Some((newest, File::open(path).ok()?));
        }
        let (id, file) = self.open.as_ref()?;
        start_writeback(file);
        Some(*id)
    }
}

/// The highest `<n>` of the `<n>.jnl` files in `folder`.
pub(super) fn newest_journal(folder: &Path) -> Option<u64> {
    let entries = std::fs::read_dir(folder).ok()?;
    (entries.filter_map(|e| e.ok()))
        .filter_map(|e| journal_number(&e.file_name().to_string_lossy()))
        .max()
}

fn journal_number(name: &str) -> Option<u64> {
    name.strip_suffix(".jnl")?.parse().ok()
}

#[cfg(target_os = "linux")]
fn start_writeback(file: &File) {
    use std::os::fd::AsRawFd;
    // SAFETY: a valid open descriptor; offset 0 and length 0 mean the whole file, and the flag
    // only starts the writes of dirty pages (no memory is passed).
    unsafe {
        libc::sync_file_range(file.as_raw_fd(), 0, 0, libc::SYNC_FILE_RANGE_WRITE);
    }
}

#[cfg(not(target_os = "linux"))]
fn start_writeback(file: &File) {
    let _ = file.sync_data();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_active_journal_is_the_highest_numbered() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(newest_journal(dir.path()), None);
        for name in [
            "0.jnl",
            "2.jnl",
            "10.jnl",
            "9.jnl",
            "lock",
            "x.jnl",
            "11.jnl.tmp",
        ] {
            std::fs::write(dir.path().join(name), b"").unwrap();
        }
        assert_eq!(newest_journal(dir.path()), Some(10));
        assert_eq!(newest_journal(&dir.path().join("missing")), None);
    }

    #[test]
    fn a_tick_moves_to_a_newer_journal() {
        let dir = tempfile::tempdir().unwrap();
        let mut active = Active::new(dir.path());
        assert_eq!(active.tick(), None);
        std::fs::write(dir.path().join("0.jnl"), b"x").unwrap();
        assert_eq!(active.tick(), Some(0));
        std::fs::write(dir.path().join("1.jnl"), b"x").unwrap();
        assert_eq!(active.tick(), Some(1));
    }

    /// On a real store: the journal a tick finds is the one fjall writes commits to.
    #[test]
    fn finds_the_journal_commits_go_to() {
        use crate::storage::{EmbeddedStore, Space, Store, SyncMode, WriteBatch};
        let dir = tempfile::tempdir().unwrap();
        let store = EmbeddedStore::open(dir.path(), SyncMode::None).unwrap();
        let folder = dir.path().join("store");
        let id = Active::new(&folder).tick().expect("fjall's active journal");
        // Incompressible bytes, so they are in the journal as they are.
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let value: Vec<u8> = (0..256)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        let mut b = WriteBatch::default();
        b.put(Space::Data, vec![1u8; 16], value.clone());
        store.commit(b).unwrap();
        store.settle_commits().unwrap();
        let journal = std::fs::read(folder.join(format!("{id}.jnl"))).unwrap();
        assert!(journal.windows(value.len()).any(|w| w == value));
    }
}
