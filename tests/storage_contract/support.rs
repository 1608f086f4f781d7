//! Shared by the storage contract tests (`tests/storage_contract/`): a fresh store, data keys at a
//! token, and a partition layout. A second backend runs the same tests by changing `open`.

use ringgate::storage::{EmbeddedStore, PartitionRef, SyncMode};
use std::path::PathBuf;
use std::sync::Arc;

pub const SID: u64 = 42;

/// A fresh data directory, removed when dropped.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(name: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!("ringgate-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub fn open(dir: &TempDir) -> Arc<EmbeddedStore> {
    Arc::new(EmbeddedStore::open(&dir.0, SyncMode::None).unwrap())
}

/// A data key of table `sid` at `token` with `tail` after it (as the engine lays keys out).
pub fn key_of(sid: u64, token: i64, tail: &[u8]) -> Vec<u8> {
    let flipped = ((token as u64) ^ (1 << 63)).to_be_bytes();
    [&sid.to_be_bytes()[..], &flipped, tail].concat()
}

pub fn key(token: i64, tail: &[u8]) -> Vec<u8> {
    key_of(SID, token, tail)
}

/// Three physical partitions of table SID: (MIN, -100], (-100, 100], (100, MAX].
pub fn parts() -> [PartitionRef; 3] {
    [
        PartitionRef::new(SID, 1, i64::MIN, -100),
        PartitionRef::new(SID, 2, -100, 100),
        PartitionRef::new(SID, 3, 100, i64::MAX),
    ]
}
