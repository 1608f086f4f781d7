//! Storage contract: a reader that sees a commit's row write sees the commit's local records
//! too (read the row first, then the local record). The change feed relies on it: it emits an
//! entry only if the row's reverse record (a local record) still names the entry after the row
//! was read, and a reverse record older than the row read would emit one version twice.

use super::support::*;
use bytes::Bytes;
use ringgate::storage::handle::LocalWrite;
use ringgate::storage::{PartitionCommit, Space};
use std::sync::atomic::{AtomicBool, Ordering};

#[test]
fn a_row_write_is_never_seen_before_its_local_records() {
    each_backend(
        "contract-visibility",
        a_row_write_is_never_seen_before_its_local_records_on,
    );
}

fn version(v: Option<Bytes>) -> u64 {
    v.map_or(0, |b| u64::from_be_bytes(b[..].try_into().unwrap()))
}

fn a_row_write_is_never_seen_before_its_local_records_on(dir: &TempDir) {
    // Enough commits for the embedded store to show a row-first order (it did in every run
    // of 2,000, after a few hundred at most), few enough for PostgreSQL's round trips.
    const COMMITS: u64 = 2_000;
    let store = open(dir);
    let h = store.open_partition(parts()[1].clone(), 1).unwrap();
    let row = Bytes::from(key(5, b"row"));
    let local = Bytes::from_static(b"\xff\x02local");
    let done = AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            for v in 1..=COMMITS {
                let value = Bytes::copy_from_slice(&v.to_be_bytes());
                let mut c = PartitionCommit::default();
                c.put(row.clone(), value.clone());
                c.local.push(LocalWrite {
                    token: 5,
                    key: local.clone(),
                    value: Some(value),
                });
                h.commit(c).unwrap();
            }
            done.store(true, Ordering::SeqCst);
        });
        let mut reads = 0u64;
        while !done.load(Ordering::SeqCst) {
            let seen_row = version(h.get(&row).unwrap());
            let seen_local = version(store.get(Space::Data, &local).unwrap());
            assert!(
                seen_local >= seen_row,
                "after {reads} reads: row at version {seen_row}, its local record at {seen_local}"
            );
            reads += 1;
        }
    });
    assert_eq!(version(h.get(&row).unwrap()), COMMITS);
}
