//! Types beyond the limits of `cql::type_size` stored by an older version (before DDL bounded
//! them): the schema loads, but statements that would walk such a type (result and bind
//! metadata, validation, comparison) are refused with the reason, never by overflowing the
//! stack or expanding a shared type graph; the table can still be truncated and dropped, and
//! other tables work.

use crate::support::{self, TestEngine};
use ringgate::query::{Engine, EngineLimits, QueryOptions, Session};
use ringgate::schema::system::NodeInfo;
use serde_json::{json, Value};
use std::sync::Arc;

/// Rewrites the stored schema document as an older version could have written it: `types`
/// appended to keyspace ks (in dependency order, as stored) and column `x` of table t given
/// type `x_type`. Then opens a second engine over the same store, which loads that document.
fn engine_over_stored_schema(t: &TestEngine, types: Vec<Value>, x_type: &str) -> Arc<Engine> {
    let meta = t.store.metadata();
    let doc = meta.meta_get(b"schema").unwrap().expect("a stored schema");
    let mut doc: Value = serde_json::from_slice(&doc).unwrap();
    let ks = named(&mut doc["keyspaces"], "ks");
    ks["types"].as_array_mut().unwrap().extend(types);
    let table = named(&mut ks["tables"], "t");
    let x = named(&mut table["columns"], "x");
    x["ty"] = json!(x_type);
    let bytes = serde_json::to_vec(&doc).unwrap();
    meta.meta_commit(vec![(
        bytes::Bytes::from_static(b"schema"),
        Some(bytes.into()),
    )])
    .unwrap();
    let node = NodeInfo {
        listen: "127.0.0.1:9042".parse().unwrap(),
        host_id: ringgate::schema::system::host_id(&*t.store).unwrap(),
        cluster_name: "t".into(),
        data_center: "dc".into(),
        rack: "r".into(),
        tokens: ringgate::schema::system::node_tokens(1),
        native_protocol_version: "5".into(),
        cluster: None,
    };
    let e = Engine::new(Arc::clone(&t.store), node, EngineLimits::default()).unwrap();
    Arc::new(e)
}

/// The element of a JSON array whose "name" is `name`.
fn named<'a>(array: &'a mut Value, name: &str) -> &'a mut Value {
    array
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|v| v["name"] == name)
        .unwrap()
}

fn setup() -> TestEngine {
    let mut t = support::open(&[]);
    t.ok("CREATE TYPE ks.u0 (f int)");
    t.ok("CREATE TABLE ks.t (id int PRIMARY KEY, x frozen<u0>)");
    t.ok("INSERT INTO ks.t (id, x) VALUES (1, {f: 1})");
    t.ok("CREATE TABLE ks.ok (id int PRIMARY KEY, v int)");
    t
}

fn run(e: &Engine, q: &str) -> Result<ringgate::query::Outcome, String> {
    e.query(&mut Session::default(), q, &QueryOptions::default())
        .map_err(|err| err.to_string())
}

/// Every statement on t that walks x's type is refused with `why`; the rest still works.
fn assert_refused_and_usable(e: &Engine, why: &str) {
    for q in [
        "SELECT * FROM ks.t",
        "SELECT x FROM ks.t WHERE id = 1",
        "SELECT id FROM ks.t WHERE id = 1",
        "INSERT INTO ks.t (id) VALUES (2)",
        "UPDATE ks.t SET x = null WHERE id = 1",
        "DELETE FROM ks.t WHERE id = 1",
        "BEGIN BATCH INSERT INTO ks.ok (id, v) VALUES (1, 1); INSERT INTO ks.t (id) VALUES (3); APPLY BATCH",
    ] {
        // Not expect_err: Debug of the outcome would walk the deep type.
        let Err(err) = run(e, q) else {
            panic!("{q}: not refused")
        };
        assert!(err.contains(why), "{q}: {err}");
    }
    let err = e
        .prepare(&Session::default(), "SELECT * FROM ks.t WHERE id = ?", None)
        .map(|_| ())
        .expect_err("PREPARE");
    assert!(err.to_string().contains(why), "PREPARE: {err}");
    run(e, "INSERT INTO ks.ok (id, v) VALUES (1, 1)").unwrap();
    run(e, "SELECT * FROM ks.ok").unwrap();
    run(e, "TRUNCATE ks.t").unwrap();
    run(e, "ALTER TABLE ks.t DROP x").unwrap();
    run(e, "INSERT INTO ks.t (id) VALUES (4)").unwrap();
    run(e, "DROP TABLE ks.t").unwrap();
}

#[test]
fn a_stored_chain_of_user_types_beyond_the_depth_limit_is_refused_not_walked() {
    let t = setup();
    // u1 (f frozen<u0>) ... u5000: 5,000 levels, 50 times the limit.
    let types = (1..=5000)
        .map(|i| json!({"name": format!("u{i}"), "fields": [["f", format!("frozen<u{}>", i - 1)]]}))
        .collect();
    let e = engine_over_stored_schema(&t, types, "frozen<u5000>");
    assert_refused_and_usable(&e, "nested too deeply");
}

#[test]
fn a_stored_shared_type_graph_beyond_the_size_limit_is_refused_not_expanded() {
    let t = setup();
    // Two fields of the previous type, 40 levels: 2^40 component types if expanded.
    let types = (1..=40)
        .map(|i| {
            let prev = format!("frozen<u{}>", i - 1);
            json!({"name": format!("u{i}"), "fields": [["a", prev.clone()], ["b", prev]]})
        })
        .collect();
    let e = engine_over_stored_schema(&t, types, "frozen<u40>");
    assert_refused_and_usable(&e, "too large");
}
