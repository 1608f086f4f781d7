//! TTL expiry, by moving the clock.

use super::support::open;

#[test]
fn a_ttl_cell_lives_exactly_its_ttl() {
    let mut t = open(&[]);
    t.ok("CREATE TABLE ks.t (k int PRIMARY KEY, v int)");
    t.ok("INSERT INTO ks.t (k, v) VALUES (1, 7) USING TTL 10");
    t.advance_ms(4_000);
    // TTL() counts down with the clock.
    assert_eq!(
        t.ints("SELECT v, TTL(v) FROM ks.t WHERE k = 1"),
        [[Some(7), Some(6)]]
    );
    t.advance_ms(5_999);
    assert_eq!(t.ints("SELECT v FROM ks.t WHERE k = 1"), [[Some(7)]]);
    t.advance_ms(1);
    // The row marker expired with the cell: no row at all.
    assert!(t.ints("SELECT v FROM ks.t WHERE k = 1").is_empty());
    assert!(t.ints("SELECT k FROM ks.t").is_empty());
}

#[test]
fn an_expired_row_marker_leaves_the_row_to_its_live_cells() {
    let mut t = open(&[]);
    t.ok("CREATE TABLE ks.t (k int PRIMARY KEY, v int, w int)");
    t.ok("INSERT INTO ks.t (k, v) VALUES (1, 1) USING TTL 1");
    t.ok("UPDATE ks.t SET w = 5 WHERE k = 1");
    t.advance_ms(1_000);
    // The marker and v expired; w (no TTL) keeps the row alive.
    assert_eq!(
        t.ints("SELECT k, v, w FROM ks.t WHERE k = 1"),
        [[Some(1), None, Some(5)]]
    );
    t.ok("DELETE w FROM ks.t WHERE k = 1");
    assert!(t.ints("SELECT k FROM ks.t WHERE k = 1").is_empty());
}

#[test]
fn the_table_default_ttl_applies_and_ttl_0_overrides_it() {
    let mut t = open(&[]);
    t.ok("CREATE TABLE ks.t (k int PRIMARY KEY, v int) WITH default_time_to_live = 60");
    t.ok("INSERT INTO ks.t (k, v) VALUES (1, 1)");
    t.ok("INSERT INTO ks.t (k, v) VALUES (2, 2) USING TTL 0");
    t.ok("INSERT INTO ks.t (k, v) VALUES (3, 3) USING TTL 120");
    t.advance_ms(60_000);
    assert_eq!(
        t.ints("SELECT k, TTL(v) FROM ks.t WHERE k IN (1, 2, 3)"),
        [[Some(2), None], [Some(3), Some(60)]]
    );
    t.advance_ms(60_000);
    assert_eq!(t.ints("SELECT k FROM ks.t"), [[Some(2)]]);
}

#[test]
fn collection_elements_expire_one_by_one() {
    let mut t = open(&[]);
    t.ok("CREATE TABLE ks.t (k int PRIMARY KEY, s set<int>)");
    t.ok("UPDATE ks.t USING TTL 10 SET s = s + {1} WHERE k = 1");
    t.ok("UPDATE ks.t USING TTL 20 SET s = s + {2} WHERE k = 1");
    t.advance_ms(10_000);
    let rows = t.rows("SELECT s FROM ks.t WHERE k = 1");
    // A set<int> of one element: [n=1][len=4][2].
    let one_elem = [
        &1i32.to_be_bytes()[..],
        &4i32.to_be_bytes(),
        &2i32.to_be_bytes(),
    ]
    .concat();
    assert_eq!(rows, [[Some(one_elem)]]);
    t.advance_ms(10_000);
    assert!(t.rows("SELECT s FROM ks.t WHERE k = 1").is_empty());
}

#[test]
fn a_conditional_insert_sees_an_expired_row_as_absent() {
    let mut t = open(&[]);
    t.ok("CREATE TABLE ks.t (k int PRIMARY KEY, v int)");
    t.ok("INSERT INTO ks.t (k, v) VALUES (1, 1) USING TTL 5");
    let applied = |t: &mut super::support::TestEngine| {
        t.rows("INSERT INTO ks.t (k, v) VALUES (1, 2) IF NOT EXISTS")[0][0].clone()
    };
    assert_eq!(applied(&mut t), Some(vec![0]));
    t.advance_ms(5_000);
    assert_eq!(applied(&mut t), Some(vec![1]));
    assert_eq!(t.ints("SELECT v FROM ks.t WHERE k = 1"), [[Some(2)]]);
}
