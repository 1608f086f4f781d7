//! Tombstones and expired data leave the store gc_grace_seconds after they were written or
//! expired (the compaction filter and the tombstone sweeper), by moving the clock.

use super::support::{open, TestEngine};
use ringgate::query::purge::sweep_tombstones;

fn with_gc_grace(gc_grace_secs: u32) -> TestEngine {
    let mut t = open(&[]);
    t.ok(&format!(
        "CREATE TABLE ks.t (k int, c int, v int, PRIMARY KEY (k, c)) \
         WITH gc_grace_seconds = {gc_grace_secs}"
    ));
    t
}

#[test]
fn a_row_tombstone_is_dropped_once_gc_grace_has_passed() {
    let mut t = with_gc_grace(100);
    t.ok("INSERT INTO ks.t (k, c, v) VALUES (1, 0, 0)");
    t.ok("INSERT INTO ks.t (k, c, v) VALUES (1, 1, 1)");
    t.ok("DELETE FROM ks.t WHERE k = 1 AND c = 0");
    t.store.compact().unwrap();
    assert_eq!(t.data_keys(), 2, "the tombstone stays within gc_grace");
    t.advance_ms(99_999);
    t.store.compact().unwrap();
    assert_eq!(t.data_keys(), 2);
    t.advance_ms(1);
    t.store.compact().unwrap();
    assert_eq!(t.data_keys(), 1, "only the live row is left");
    assert_eq!(
        t.ints("SELECT c, v FROM ks.t WHERE k = 1"),
        [[Some(1), Some(1)]]
    );
}

#[test]
fn an_expired_row_is_dropped_gc_grace_after_it_expired() {
    let mut t = with_gc_grace(100);
    t.ok("INSERT INTO ks.t (k, c, v) VALUES (1, 0, 0) USING TTL 10");
    t.advance_ms(10_000);
    assert!(t.ints("SELECT v FROM ks.t WHERE k = 1").is_empty());
    t.store.compact().unwrap();
    // Expired, but it still shadows older copies elsewhere until gc_grace has passed.
    assert_eq!(t.data_keys(), 1);
    t.advance_ms(100_000);
    t.store.compact().unwrap();
    assert_eq!(t.data_keys(), 0);
}

#[test]
fn a_partition_deletion_is_swept_once_gc_grace_has_passed() {
    let mut t = with_gc_grace(3600);
    for c in 0..5 {
        t.ok(&format!("INSERT INTO ks.t (k, c, v) VALUES (1, {c}, {c})"));
    }
    t.ok("DELETE FROM ks.t WHERE k = 1");
    t.store.compact().unwrap();
    // The shadowed rows go; the deletion may still have to shadow data, so it stays.
    assert_eq!(t.data_keys(), 1);
    assert_eq!(sweep_tombstones(&t.engine).unwrap(), 0);
    t.advance_ms(3_600_000);
    // The compaction queues the partition for the sweeper, which drops the header.
    t.store.compact().unwrap();
    assert_eq!(sweep_tombstones(&t.engine).unwrap(), 1);
    assert_eq!(t.data_keys(), 0);
    // A row written after the purge is not shadowed by anything.
    t.ok("INSERT INTO ks.t (k, c, v) VALUES (1, 9, 9)");
    assert_eq!(t.ints("SELECT c FROM ks.t WHERE k = 1"), [[Some(9)]]);
}

#[test]
fn a_range_tombstone_is_swept_once_gc_grace_has_passed() {
    let mut t = with_gc_grace(60);
    for c in 0..10 {
        t.ok(&format!("INSERT INTO ks.t (k, c, v) VALUES (1, {c}, {c})"));
    }
    t.ok("DELETE FROM ks.t WHERE k = 1 AND c >= 5");
    t.store.compact().unwrap();
    // Rows 0..5, the covered rows gone, the header holding the range tombstone kept.
    assert_eq!(t.data_keys(), 5 + 1);
    assert_eq!(sweep_tombstones(&t.engine).unwrap(), 0);
    t.advance_ms(60_000);
    t.store.compact().unwrap();
    assert_eq!(sweep_tombstones(&t.engine).unwrap(), 1);
    assert_eq!(t.data_keys(), 5, "the emptied header is gone");
    assert_eq!(t.ints("SELECT c FROM ks.t WHERE k = 1").len(), 5);
}
