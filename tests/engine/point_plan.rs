//! Point reads planned from a template kept with the statement (`query/select/point_plan.rs`)
//! answer as the general planner does. The oracle: the same statement with `IN (x)` for one
//! `= x`, which no template takes, so the general planner plans it. Also: bad bind values get
//! Cassandra's errors, in the same order, and statements the template must not take (repeated
//! columns, a refused ORDER BY) keep the general planner's errors.

use super::support::{open, TestEngine};
use ringgate::query::{Binds, BoundValue, Outcome, QueryOptions};

const FLAT: &str = "CREATE TABLE ks.f (k int PRIMARY KEY, v int)";
const WIDE: &str = "CREATE TABLE ks.w (a int, b int, c1 int, c2 int, s int static, v int, \
     PRIMARY KEY ((a, b), c1, c2)) WITH CLUSTERING ORDER BY (c1 DESC, c2 ASC)";

fn loaded() -> TestEngine {
    let mut t = open(&[]);
    t.ok(FLAT);
    t.ok(WIDE);
    for k in 0..6 {
        t.ok(&format!("INSERT INTO ks.f (k, v) VALUES ({k}, {})", k * 10));
        for c1 in 0..3 {
            for c2 in 0..3 {
                let v = k * 100 + c1 * 10 + c2;
                t.ok(&format!(
                    "INSERT INTO ks.w (a, b, c1, c2, s, v) VALUES ({k}, {}, {c1}, {c2}, {k}, {v})",
                    k % 2
                ));
            }
        }
    }
    t.ok("DELETE FROM ks.w WHERE a = 2 AND b = 0 AND c1 = 1");
    t.ok("DELETE FROM ks.f WHERE k = 3");
    t
}

/// `q` with `{k}` as `= k`, against the general planner's `IN (k)`.
fn same_rows(t: &mut TestEngine, q: &str, k: i32) {
    let point = q.replace("{k}", &format!("= {k}"));
    let general = q.replace("{k}", &format!("IN ({k})"));
    assert_eq!(t.ints(&point), t.ints(&general), "{point}");
}

#[test]
fn point_reads_answer_as_the_general_planner() {
    let mut t = loaded();
    let queries = [
        "SELECT * FROM ks.f WHERE k {k}",
        "SELECT v, k FROM ks.f WHERE k {k} LIMIT 1",
        "SELECT * FROM ks.w WHERE a {k} AND b = 0",
        "SELECT * FROM ks.w WHERE a {k} AND b = 1",
        "SELECT * FROM ks.w WHERE b = 0 AND a {k}",
        "SELECT v FROM ks.w WHERE a {k} AND b = 0 AND c1 = 2",
        "SELECT v FROM ks.w WHERE c2 = 1 AND a {k} AND c1 = 0 AND b = 0",
        "SELECT v FROM ks.w WHERE a {k} AND b = 0 ORDER BY c1 ASC",
        "SELECT v FROM ks.w WHERE a {k} AND b = 0 ORDER BY c1 DESC LIMIT 4",
        "SELECT v FROM ks.w WHERE a {k} AND b = 0 AND c1 = 1 ORDER BY c1 ASC, c2 DESC",
        "SELECT s FROM ks.w WHERE a {k} AND b = 0",
        "SELECT a, b, s FROM ks.w WHERE a {k} AND b = 0 PER PARTITION LIMIT 1",
        "SELECT v FROM ks.w WHERE a {k} AND b = 0 AND c1 = 2 ALLOW FILTERING",
    ];
    for q in queries {
        for k in 0..7 {
            same_rows(&mut t, q, k);
        }
    }
    // Something was read: the oracle is not comparing empty answers only.
    assert_eq!(
        t.ints("SELECT v FROM ks.w WHERE a = 4 AND b = 0 AND c1 = 2 AND c2 = 1"),
        [[Some(421)]]
    );
    assert_eq!(
        t.ints("SELECT v FROM ks.w WHERE a = 2 AND b = 0 AND c1 = 1")
            .len(),
        0
    );
}

fn execute_err(t: &mut TestEngine, q: &str, binds: Vec<BoundValue>) -> String {
    let p = t.engine.prepare(&t.session, q, None).unwrap();
    let opts = QueryOptions {
        binds: Binds::Positional(binds),
        ..Default::default()
    };
    match t.engine.execute(&mut t.session, &p, &opts) {
        Err(e) => e.to_string(),
        Ok(Outcome::Rows(r)) => panic!("{q}: answered {} rows", r.count),
        Ok(_) => panic!("{q}: answered"),
    }
}

#[test]
fn bad_key_values_get_cassandras_errors_in_the_where_clauses_order() {
    let mut t = loaded();
    let one = || BoundValue::Value(1i32.to_be_bytes().to_vec().into());
    let q = "SELECT * FROM ks.w WHERE b = ? AND a = ? AND c1 = ?";
    for _ in 0..2 {
        // Twice: the first EXECUTE keeps the template, the second plans from it.
        assert_eq!(
            execute_err(&mut t, q, vec![BoundValue::Null, BoundValue::Unset, one()]),
            "Invalid null value in condition for column b"
        );
        assert_eq!(
            execute_err(&mut t, q, vec![one(), BoundValue::Unset, BoundValue::Null]),
            "Invalid unset value for column a"
        );
        assert_eq!(
            execute_err(&mut t, q, vec![one(), one(), BoundValue::Unset]),
            "Invalid unset value for column c1"
        );
    }
}

#[test]
fn statements_no_template_takes_keep_the_general_planners_errors() {
    let mut t = loaded();
    let err = |t: &mut TestEngine, q: &str| t.run(q).unwrap_err().to_string();
    assert_eq!(
        err(&mut t, "SELECT * FROM ks.f WHERE k = 1 AND k = 2"),
        "k cannot be restricted by more than one relation if it includes an Equal"
    );
    assert_eq!(
        err(
            &mut t,
            "SELECT * FROM ks.w WHERE a = 1 AND b = 1 ORDER BY v"
        ),
        "Order by is currently only supported on the clustered columns of the PRIMARY KEY, got v"
    );
    // A clustering column after a gap: the general planner's filtering rule.
    assert!(err(
        &mut t,
        "SELECT * FROM ks.w WHERE a = 1 AND b = 1 AND c2 = 1"
    )
    .contains("ALLOW FILTERING"));
    assert_eq!(
        t.ints("SELECT v FROM ks.w WHERE a = 1 AND b = 1 AND c2 = 1 ALLOW FILTERING"),
        [[Some(121)], [Some(111)], [Some(101)]]
    );
}
