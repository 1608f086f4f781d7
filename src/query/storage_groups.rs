//! `system_views.storage_groups` (cluster mode): the storage groups (`cluster::groups`), each
//! with its hosts, the physical partitions the partition maps place there and the bytes their
//! owners count. `INSERT INTO system_views.storage_groups (name, hosts, dbname, user_name,
//! password) VALUES (...)` registers one, after connecting to it once (which also creates
//! ringgate's tables there): `hosts` is `host:port`, several comma-separated for a primary
//! with standbys. A group of that name already registered is left as it is (the answer says
//! so). New tables' partitions go to the groups with the least data from then on; partitions
//! placed earlier stay where they are (moving them is issue 18). Single nodes have no groups:
//! the view is empty and an INSERT is refused.

use super::{eval, invalid, maintenance, Engine, Outcome, Result};
use crate::cluster::groups::{self, GroupSpec};
use crate::cql::ast::{Insert, Statement};
use crate::schema::TableDef;
use bytes::Bytes;
use std::collections::BTreeMap;

pub const TABLE: &str = "storage_groups";

/// Whether the statement is a write to `system_views.storage_groups`.
pub fn targets<'a>(statement: &'a Statement, keyspace: Option<&str>) -> Option<&'a Insert> {
    maintenance::insert_into(statement, keyspace, TABLE)
}

/// Registers the group the INSERT describes; answers `(name, result)`.
pub fn run(engine: &Engine, ins: &Insert, ctx: &eval::Ctx) -> Result<Outcome> {
    if engine.node.cluster.is_none() {
        return Err(invalid(
            "storage groups exist in cluster mode only (cluster.etcd)",
        ));
    }
    let mut name = None;
    let mut spec = GroupSpec {
        hosts: vec![],
        dbname: "ringgate".into(),
        user: "postgres".into(),
        password: String::new(),
    };
    for (col, v) in maintenance::text_columns(ins, ctx, TABLE)? {
        let v = v.unwrap_or_default();
        match col.as_str() {
            "name" => name = Some(v),
            "hosts" => spec.hosts = v.split(',').map(|h| h.trim().to_string()).collect(),
            "dbname" => spec.dbname = v,
            "user_name" => spec.user = v,
            "password" => spec.password = v,
            "physical_partitions" | "bytes" => {
                return Err(invalid(format!(
                    "{col} is read-only in system_views.{TABLE}"
                )))
            }
            other => {
                return Err(invalid(format!(
                    "Undefined column name {other} in table system_views.{TABLE}"
                )))
            }
        }
    }
    let name = name.ok_or_else(|| invalid(format!("system_views.{TABLE} needs name")))?;
    groups::check_name(&name).map_err(invalid)?;
    spec.check().map_err(invalid)?;
    // Reachable, and ringgate's tables created, before any partition can be placed there.
    let config = crate::storage::postgres::PgConfig {
        url: spec.connection_string(),
        pool_size: 1,
    };
    crate::storage::postgres::PostgresStore::open(&config)
        .map_err(|e| invalid(format!("storage group {name} is not reachable: {e}")))?;
    let result = match groups::register(engine.store.metadata(), &name, &spec)? {
        true => "registered",
        false => "already registered (unchanged)",
    };
    tracing::info!(group = %name, hosts = ?spec.hosts, "storage group: {result}");
    let rows = maintenance::answer_row(TABLE, ("name", &name), result);
    Ok(Outcome::Rows(rows))
}

/// The view's rows (None: another table).
pub fn rows(engine: &Engine, t: &TableDef) -> Option<Vec<Vec<Option<Bytes>>>> {
    if t.keyspace != maintenance::KEYSPACE || t.name != TABLE {
        return None;
    }
    let Some(node) = &engine.node.cluster else {
        return Some(vec![]);
    };
    let registry = match groups::list(engine.store.metadata()) {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!(error = %e, "storage groups unreadable");
            return Some(vec![]);
        }
    };
    let ctl = node.control().clone();
    let bytes = (node.block_on(async move { groups::bytes(&ctl).await }))
        .ok()
        .and_then(|r| r.ok())
        .unwrap_or_default();
    let mut parts: BTreeMap<String, i64> = BTreeMap::new();
    for (_, map) in engine.maps.all() {
        for p in &map.parts {
            *parts.entry(p.group_name().to_string()).or_insert(0) += 1;
        }
    }
    let text = |s: &str| Some(Bytes::copy_from_slice(s.as_bytes()));
    let bigint = |v: i64| Some(Bytes::copy_from_slice(&v.to_be_bytes()));
    let out = (registry.iter())
        .map(|(name, spec)| {
            let cells = vec![
                ("name", text(name)),
                ("hosts", text(&spec.hosts.join(","))),
                ("dbname", text(&spec.dbname)),
                ("user_name", text(&spec.user)),
                (
                    "physical_partitions",
                    bigint(*parts.get(name).unwrap_or(&0)),
                ),
                ("bytes", bigint(*bytes.get(name).unwrap_or(&0))),
            ];
            maintenance::view_row(t, cells)
        })
        .collect();
    Some(out)
}
