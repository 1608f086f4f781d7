//! Shared by the storage contract tests (`tests/storage_contract/`): a fresh store of each
//! backend, data keys at a token, and a partition layout. Every test runs once per backend
//! (`each_backend`): the embedded store in a temporary data directory, PostgreSQL in a new
//! database of the test binary's server (`pg.rs`; skipped loudly without binaries).

use ringgate::storage::postgres::{PgConfig, PostgresStore};
use ringgate::storage::{EmbeddedStore, PartitionRef, PartitionStore, Store, SyncMode};
use std::path::PathBuf;
use std::sync::Arc;

pub const SID: u64 = 42;

/// Both contracts of one backend.
pub trait Contract: Store + PartitionStore {}
impl<T: Store + PartitionStore> Contract for T {}

/// A fresh place for one backend's data: a data directory (removed when dropped) or a new
/// PostgreSQL database. Opening it again is a restart.
pub enum TempDir {
    Embedded(PathBuf),
    Postgres(String),
}

impl TempDir {
    pub fn embedded(name: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!("ringgate-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        TempDir::Embedded(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if let TempDir::Embedded(dir) = self {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// Runs `test` on the embedded store, then on PostgreSQL (when its binaries are there).
pub fn each_backend(name: &str, test: impl Fn(&TempDir)) {
    test(&TempDir::embedded(name));
    if let Some(pg) = super::pg::server() {
        eprintln!("{name}: the same on PostgreSQL");
        test(&TempDir::Postgres(pg.new_database(name)));
    }
}

pub fn open(dir: &TempDir) -> Arc<dyn Contract> {
    match dir {
        TempDir::Embedded(path) => Arc::new(EmbeddedStore::open(path, SyncMode::None).unwrap()),
        TempDir::Postgres(url) => {
            let config = PgConfig {
                url: url.clone(),
                pool_size: 8,
            };
            Arc::new(PostgresStore::open(&config).unwrap())
        }
    }
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
