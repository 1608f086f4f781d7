//! CREATE INDEX over existing rows whose build fails for good (here: a value over the 64 KiB
//! an index entry can hold) leaves no index behind: it is rolled out of the schema, so no
//! query answers from its partial entries, and the same index can be created once the row is
//! fixed.

use crate::support;

#[test]
fn an_index_whose_build_fails_is_rolled_out_of_the_schema() {
    let mut t = support::open(&[]);
    t.ok("CREATE TABLE ks.t (id int PRIMARY KEY, v text)");
    for id in 0..50 {
        t.ok(&format!("INSERT INTO ks.t (id, v) VALUES ({id}, 'a')"));
    }
    let big = "x".repeat(70_000);
    t.ok(&format!("INSERT INTO ks.t (id, v) VALUES (1000, '{big}')"));

    let err = t
        .run("CREATE INDEX t_v ON ks.t (v)")
        .map(|_| ())
        .unwrap_err();
    assert!(err.to_string().contains("65535"), "{err}");
    let table = t.engine.schema().keyspaces["ks"].tables["t"].clone();
    assert!(
        table.indexes.is_empty(),
        "the failed index stayed in the schema"
    );
    let err = t
        .run("SELECT id FROM ks.t WHERE v = 'a'")
        .map(|_| ())
        .unwrap_err();
    assert!(err.to_string().contains("ALLOW FILTERING"), "{err}");
    // Writes go on without the index; once the row is fixed, the same index builds.
    t.ok("INSERT INTO ks.t (id, v) VALUES (50, 'a')");
    t.ok("DELETE FROM ks.t WHERE id = 1000");
    t.ok("CREATE INDEX t_v ON ks.t (v)");
    let mut ids: Vec<i32> = t
        .ints("SELECT id FROM ks.t WHERE v = 'a'")
        .into_iter()
        .map(|r| r[0].unwrap())
        .collect();
    ids.sort();
    assert_eq!(ids, (0..=50).collect::<Vec<_>>());
}
