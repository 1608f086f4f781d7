//! EXECUTE of a prepared SELECT answers with the result columns PREPARE described while the
//! schema is the one it was described under, and describes them again after a schema change.

use crate::support::open;
use ringgate::query::{Binds, BoundValue, Outcome, QueryOptions};
use std::sync::Arc;

fn execute(
    t: &mut crate::support::TestEngine,
    p: &ringgate::query::Prepared,
    k: i32,
) -> ringgate::query::Rows {
    let opts = QueryOptions {
        binds: Binds::Positional(vec![BoundValue::Value(k.to_be_bytes().to_vec().into())]),
        ..Default::default()
    };
    match t.engine.execute(&mut t.session, p, &opts) {
        Ok(Outcome::Rows(rows)) => rows,
        other => panic!("EXECUTE: {:?}", other.map(|_| ())),
    }
}

#[test]
fn a_prepared_select_answers_its_described_columns_until_the_table_changes() {
    let mut t = open(&[]);
    t.ok("CREATE TABLE ks.t (k int PRIMARY KEY, a int)");
    t.ok("INSERT INTO ks.t (k, a) VALUES (1, 10)");
    let p = t
        .engine
        .prepare(&t.session, "SELECT * FROM ks.t WHERE k = ?", None)
        .unwrap();
    let rows = execute(&mut t, &p, 1);
    // The very columns PREPARE described, not a copy built again.
    assert!(Arc::ptr_eq(&rows.columns, &p.result_columns));
    assert_eq!(rows.count, 1);

    t.ok("ALTER TABLE ks.t ADD b int");
    t.ok("UPDATE ks.t SET b = 20 WHERE k = 1");
    // The statement prepared before the change: its columns are stale, the answer is not.
    let rows = execute(&mut t, &p, 1);
    let names: Vec<&str> = rows.columns.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["k", "a", "b"]);
    assert_eq!(p.result_columns.len(), 2);
    let cells = crate::shared::cells::cells(&rows.content);
    assert_eq!(cells.len(), 3, "one cell per column");
    assert_eq!(cells[2].as_deref(), Some(&20i32.to_be_bytes()[..]));
}
