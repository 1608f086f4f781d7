//! `schema::diff::changes` (the SCHEMA_CHANGE events a cluster node pushes when it adopts a
//! schema another node wrote) gives, for every kind of DDL, exactly the change the DDL itself
//! reported on the node that ran it.

use super::support::open;
use ringgate::query::Outcome;
use ringgate::schema::diff::changes;

#[test]
fn the_diff_of_each_ddl_is_the_change_it_reported() {
    let mut t = open(&[]);
    let statements = [
        "CREATE KEYSPACE k2 WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}",
        "ALTER KEYSPACE k2 WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 2}",
        "CREATE TYPE k2.addr (street text)",
        "ALTER TYPE k2.addr ADD nr int",
        "CREATE TABLE k2.t (pk int PRIMARY KEY, v text)",
        "ALTER TABLE k2.t ADD home frozen<addr>",
        "ALTER TABLE k2.t WITH comment = 'c'",
        "CREATE INDEX t_v ON k2.t (v)",
        "DROP INDEX k2.t_v",
        "ALTER TABLE k2.t DROP home",
        "DROP TABLE k2.t",
        "DROP TYPE k2.addr",
        "CREATE TABLE k2.u (pk int PRIMARY KEY)",
        "DROP KEYSPACE k2",
    ];
    for q in statements {
        let before = t.engine.schema();
        let reported = match t.ok(q) {
            Outcome::SchemaChange(c) => c,
            other => panic!("{q}: {other:?}"),
        };
        let after = t.engine.schema();
        assert_eq!(changes(&before, &after), [reported], "{q}");
    }
}

#[test]
fn a_new_keyspace_with_content_gives_every_creation_and_no_change_gives_none() {
    let mut t = open(&[]);
    let empty = t.engine.schema();
    t.ok("CREATE KEYSPACE k3 WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}");
    t.ok("CREATE TYPE k3.p (x int)");
    t.ok("CREATE TABLE k3.t (pk int PRIMARY KEY)");
    let full = t.engine.schema();
    let text: Vec<String> = changes(&empty, &full)
        .iter()
        .map(|c| format!("{} {:?}", c.change.as_str(), c.target))
        .collect();
    assert_eq!(
        text,
        [
            r#"CREATED Keyspace("k3")"#,
            r#"CREATED Type("k3", "p")"#,
            r#"CREATED Table("k3", "t")"#,
        ]
    );
    assert!(changes(&full, &full).is_empty());
}
