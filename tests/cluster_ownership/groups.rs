//! Storage groups (`cluster::groups`): two databases registered as two groups, one by a node's
//! own settings at startup and one through `system_views.storage_groups`; a new table's
//! partitions spread over them, each partition's rows in its group's database and nowhere
//! else, reads and DROP visiting both; new partitions go to the group with the least data by
//! the owners' size counters. (Two databases of one PostgreSQL server: to ringgate they are
//! two servers, reached by different connection strings; `tests/python/test_cluster_groups.py`
//! runs two real servers.)

use crate::support::{until, Backing, Node, SETTLE};
use ringgate::query::{Outcome, QueryError};
use ringgate::storage::postgres::{PgConfig, PostgresStore};
use ringgate::storage::{Space, Store};
use std::collections::BTreeMap;
use std::ops::Bound;

/// The second database, as a group spec's columns: (hosts, dbname).
fn second_database(test: &str) -> (String, String, String) {
    let url = crate::pg::server().unwrap().new_database(test);
    let field = |k: &str| {
        (url.split_whitespace())
            .find_map(|kv| kv.strip_prefix(&format!("{k}=")))
            .unwrap()
            .to_string()
    };
    let hosts = format!("{}:{}", field("host"), field("port"));
    (url.clone(), hosts, field("dbname"))
}

fn store(url: &str) -> PostgresStore {
    PostgresStore::open(&PgConfig {
        url: url.into(),
        pool_size: 2,
    })
    .unwrap()
}

/// The data keys of table `sid` in one database.
fn keys_of(db: &PostgresStore, sid: u64) -> Vec<Vec<u8>> {
    let (lo, hi) = (sid.to_be_bytes(), (sid + 1).to_be_bytes());
    db.scan(
        Space::Data,
        Bound::Included(&lo),
        Bound::Excluded(&hi),
        false,
    )
    .map(|r| r.unwrap().0.to_vec())
    .collect()
}

/// The token of a data key (`[sid][token, sign bit flipped]...`).
fn token_of_key(key: &[u8]) -> i64 {
    (u64::from_be_bytes(key[8..16].try_into().unwrap()) ^ (1 << 63)) as i64
}

/// system_views.storage_groups as this node shows it: name -> (physical partitions, bytes).
fn view(n: &mut Node) -> BTreeMap<String, (i64, i64)> {
    let Outcome::Rows(rows) =
        n.ok("SELECT name, physical_partitions, bytes FROM system_views.storage_groups")
    else {
        panic!("rows expected");
    };
    let cells = crate::shared::cells::cells(&rows.content);
    let int = |c: &Option<Vec<u8>>| i64::from_be_bytes(c.as_ref().unwrap()[..].try_into().unwrap());
    (cells.chunks(3))
        .map(|r| {
            let name = String::from_utf8(r[0].clone().unwrap()).unwrap();
            (name, (int(&r[1]), int(&r[2])))
        })
        .collect()
}

fn groups_of(n: &Node, sid: u64) -> Vec<String> {
    let map = n.engine.maps.get(sid).unwrap();
    map.parts
        .iter()
        .map(|p| p.group_name().to_string())
        .collect()
}

#[test]
fn a_registered_group_holds_its_partitions_rows_and_nothing_else() {
    let Some(b) = Backing::start("groups_routing") else {
        return;
    };
    let (url_b, hosts_b, db_b) = second_database("groups_routing_b");
    let mut a = Node::start_with(&b, "a", 19301, &["cluster.initial_partitions=4"]);
    // Bad registrations are refused with a reason, and register nothing.
    let e = a
        .run("INSERT INTO system_views.storage_groups (name, hosts) VALUES ('no pe', 'h:1')")
        .unwrap_err();
    assert!(e.to_string().contains("storage group name"), "{e}");
    let e = (a.run(
        "INSERT INTO system_views.storage_groups (name, hosts, dbname) \
         VALUES ('gone', '127.0.0.1:1', 'x')",
    ))
    .unwrap_err();
    assert!(e.to_string().contains("not reachable"), "{e}");
    let add = format!(
        "INSERT INTO system_views.storage_groups (name, hosts, dbname, user_name) \
         VALUES ('second', '{hosts_b}', '{db_b}', 'postgres')"
    );
    a.ok(&add);
    let names: Vec<String> = view(&mut a).into_keys().collect();
    assert_eq!(names, ["default", "second"]);
    // Registering again changes nothing.
    let Outcome::Rows(again) = a.ok(&add) else {
        panic!()
    };
    let cells = crate::shared::cells::cells(&again.content);
    let result = String::from_utf8(cells[1].clone().unwrap()).unwrap();
    assert!(result.contains("already registered"), "{result}");

    a.ok("CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}");
    a.ok("CREATE TABLE ks.t (k int PRIMARY KEY, v int)");
    let sid = a.storage_id("ks", "t");
    // Both groups empty: spread, ties by name.
    assert_eq!(
        groups_of(&a, sid),
        ["default", "second", "default", "second"]
    );
    until(SETTLE, || a.local(sid).len() == 4).expect("a owns every partition");
    for k in 0..200 {
        a.ok(&format!("INSERT INTO ks.t (k, v) VALUES ({k}, {k})"));
    }
    let map = a.engine.maps.get(sid).unwrap();
    let dbs = [("default", store(&b.pg_url)), ("second", store(&url_b))];
    let mut total = 0;
    for (group, db) in &dbs {
        let keys = keys_of(db, sid);
        assert!(!keys.is_empty(), "group {group} holds none of the rows");
        for k in &keys {
            let owner = map.route(token_of_key(k));
            assert_eq!(
                owner.group_name(),
                *group,
                "a row of partition {} in {group}",
                owner.id
            );
        }
        total += keys.len();
    }
    assert_eq!(total, 200, "every row in exactly one group");
    // Reads through the node see both groups: a full scan, a point read in each group.
    assert_eq!(a.count("SELECT k FROM ks.t"), 200);
    for k in [0, 1, 2, 3, 199] {
        assert_eq!(a.int(&format!("SELECT v FROM ks.t WHERE k = {k}")), Some(k));
    }
    let view_now = view(&mut a);
    assert_eq!(view_now["default"].0, 2);
    assert_eq!(view_now["second"].0, 2);
    // The change feed's records live with their rows' partitions, in both groups; its reads
    // (a scan of the feed's keys, a get of each row's reverse record) visit every group.
    a.ok("CREATE TABLE ks.f (k int PRIMARY KEY, v int) WITH cdc = true");
    let fsid = a.storage_id("ks", "f");
    until(SETTLE, || a.local(fsid).len() == 4).expect("a owns the feed table");
    for k in 0..100 {
        a.ok(&format!("INSERT INTO ks.f (k, v) VALUES ({k}, {k})"));
        a.ok(&format!("INSERT INTO ks.f (k, v) VALUES ({k}, {})", k + 1));
    }
    let feed = "SELECT k, v FROM ks.f WHERE COSMOS_CHANGEFEED_START_TIME() = '2000-01-01 00:00:00'";
    assert_eq!(a.count(feed), 100, "each row once, its latest version");
    // DROP deletes the data in every group.
    a.ok("DROP TABLE ks.t");
    let gone = until(SETTLE, || {
        dbs.iter().all(|(_, db)| keys_of(db, sid).is_empty())
    });
    assert!(gone.is_some(), "a group kept a dropped table's rows");
}

#[test]
fn new_partitions_go_to_the_group_with_the_least_data() {
    let Some(b) = Backing::start("groups_least_data") else {
        return;
    };
    let (url_b, _, _) = second_database("groups_least_data_b");
    let one = ["cluster.initial_partitions=1"];
    let mut a = Node::start_with(&b, "a", 19311, &one);
    // Node b's own settings name another database and group: it registers it at startup.
    let url_set = format!("storage.postgres.url=\"{url_b}\"");
    let mut nb = Node::start_with(
        &b,
        "b",
        19312,
        &[one[0], "storage.group=\"second\"", &url_set],
    );
    let names: Vec<String> = view(&mut a).into_keys().collect();
    assert_eq!(names, ["default", "second"]);
    a.ok("CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}");
    let create = |n: &mut Node, t: &str| {
        n.ok(&format!("CREATE TABLE ks.{t} (k int PRIMARY KEY, v text)"));
        let sid = n.storage_id("ks", t);
        groups_of(n, sid)
    };
    assert_eq!(create(&mut a, "t1"), ["default"], "a tie goes by name");
    // t1 gets data; its owner publishes the bytes.
    let big = "x".repeat(4000);
    write_rows(&mut a, &mut nb, "t1", 0..30, &big);
    until(SETTLE, || view(&mut a)["default"].1 > 100_000).expect("default's bytes published");
    assert_eq!(create(&mut a, "t2"), ["second"]);
    // t2 is still empty: second has the least data still.
    assert_eq!(create(&mut nb, "t3"), ["second"]);
    write_rows(&mut a, &mut nb, "t2", 0..60, &big);
    until(SETTLE, || {
        let v = view(&mut nb);
        v["second"].1 > v["default"].1
    })
    .expect("second's bytes published");
    assert_eq!(create(&mut a, "t4"), ["default"]);
    let v = view(&mut a);
    assert_eq!((v["default"].0, v["second"].0), (2, 2));
}

/// Writes rows `keys` of table `t` through whichever of the two nodes owns each (the
/// in-process engines do not forward).
fn write_rows(a: &mut Node, b: &mut Node, t: &str, keys: std::ops::Range<i32>, v: &str) {
    for k in keys {
        let q = format!("INSERT INTO ks.{t} (k, v) VALUES ({k}, '{v}')");
        let done = until(SETTLE, || {
            [&mut *a, &mut *b].into_iter().any(|n| match n.run(&q) {
                Ok(_) => true,
                Err(QueryError::NotOwner { .. }) => false,
                // The other node has not followed the schema change yet.
                Err(e) if e.to_string().contains("does not exist") => false,
                Err(e) => panic!("{t} {k}: {e}"),
            })
        });
        assert!(done.is_some(), "no node took the write of {t} {k}");
    }
}
