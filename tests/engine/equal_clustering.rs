//! Clustering values equal in value are one row (`query/write/same_row.rs`), and rows stored
//! before that rule under two serializations of one value (decimal 1.0 and 1.00) still read as
//! they were written; a later write reaches one of them, not a third key.

use crate::support::open;
use bytes::Bytes;
use ringgate::format::row_key;
use ringgate::storage::{Space, WriteBatch};

/// A decimal's serialized form: scale, then the unscaled value (two's complement).
fn decimal(unscaled: &[u8], scale: i32) -> Bytes {
    let mut b = scale.to_be_bytes().to_vec();
    b.extend_from_slice(unscaled);
    Bytes::from(b)
}

fn int(v: i32) -> Option<Vec<u8>> {
    Some(v.to_be_bytes().to_vec())
}

#[test]
fn rows_stored_under_two_serializations_still_read_and_take_later_writes() {
    let mut t = open(&[]);
    t.ok("CREATE TABLE ks.d (k int, c decimal, v int, PRIMARY KEY (k, c))");
    t.ok("INSERT INTO ks.d (k, c, v) VALUES (0, 1.0, 1)");
    // As an earlier version stored a second write with 1.00: the same row under its own key.
    let table = t.engine.schema().table("ks", "d").cloned().unwrap();
    let pk = Bytes::from(0i32.to_be_bytes().to_vec());
    let value = t
        .store
        .get(Space::Data, &row_key(&table, &pk, &[decimal(&[10], 1)]))
        .unwrap()
        .expect("the row of 1.0 is stored at its key");
    let mut batch = WriteBatch::default();
    batch.put(
        Space::Data,
        row_key(&table, &pk, &[decimal(&[100], 2)]),
        value,
    );
    t.store.commit(batch).unwrap();
    let both = t.rows("SELECT c, v FROM ks.d WHERE k = 0");
    assert_eq!(both.len(), 2, "both stored rows read as before");
    // A write naming the value reaches one of the two keys, never a third.
    t.ok("UPDATE ks.d SET v = 5 WHERE k = 0 AND c = 1.000");
    let after = t.rows("SELECT c, v FROM ks.d WHERE k = 0");
    assert_eq!(after.len(), 2, "{after:?}");
    let mut vs: Vec<_> = after.iter().map(|r| r[1].clone()).collect();
    vs.sort();
    assert_eq!(vs, vec![int(1), int(5)]);
    // A new row written twice under two serializations is one row with its first bytes.
    t.ok("INSERT INTO ks.d (k, c, v) VALUES (0, 2.50, 7)");
    t.ok("UPDATE ks.d SET v = 8 WHERE k = 0 AND c = 2.5");
    let two = t.rows("SELECT c, v FROM ks.d WHERE k = 0 AND c > 2");
    assert_eq!(
        two,
        vec![vec![Some(decimal(&[0, 250], 2).to_vec()), int(8)]]
    );
}
