//! `system_views.partition_moves` (cluster mode): moving physical partitions between storage
//! groups (issue 18; the move itself is `partition::moves`).
//!
//! `INSERT INTO system_views.partition_moves (keyspace_name, table_name, partition_id,
//! to_group) VALUES (...)` asks the partition's owner to move it to that group: the request
//! is recorded in etcd (`cluster::moves`) and the owner's ownership loop runs it within a
//! round; the answer says it is requested. Reading the view lists pending requests (`state`
//! 'requested') and the last outcome per partition ('moved', or 'failed' / 'unchanged' with
//! `detail`). `ringgate admin move` and `ringgate admin rebalance` use both.

use super::{eval, invalid, maintenance, Engine, Outcome, Result};
use crate::cluster::moves as records;
use crate::cql::ast::{Insert, InsertValues, Statement};
use crate::cql::types::CqlType;
use crate::schema::TableDef;
use bytes::Bytes;

pub const TABLE: &str = "partition_moves";

/// Whether the statement is a write to `system_views.partition_moves`.
pub fn targets<'a>(statement: &'a Statement, keyspace: Option<&str>) -> Option<&'a Insert> {
    maintenance::insert_into(statement, keyspace, TABLE)
}

/// What an INSERT names.
#[derive(Default)]
struct Asked {
    keyspace: Option<String>,
    table: Option<String>,
    partition_id: Option<i64>,
    to: Option<String>,
}

fn asked(ins: &Insert, ctx: &eval::Ctx) -> Result<Asked> {
    let InsertValues::Values { columns, values } = &ins.values else {
        return Err(invalid(format!(
            "INSERT JSON is not supported on system_views.{TABLE}"
        )));
    };
    let mut a = Asked::default();
    for (col, term) in columns.iter().zip(values) {
        let ty = match col.as_str() {
            "partition_id" => CqlType::Bigint,
            _ => CqlType::Text,
        };
        let v = match eval::eval(term, &ty, col, ctx)? {
            eval::Val::Value(b) => Some(b),
            _ => None,
        };
        let text = || v.as_ref().map(|b| String::from_utf8_lossy(b).into_owned());
        match col.as_str() {
            "keyspace_name" => a.keyspace = text(),
            "table_name" => a.table = text(),
            "to_group" => a.to = text(),
            "partition_id" => {
                a.partition_id = (v.as_deref())
                    .and_then(|b| <[u8; 8]>::try_from(b).ok())
                    .map(i64::from_be_bytes)
            }
            "from_group" | "state" | "detail" => {
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
    Ok(a)
}

/// Records the move the INSERT asks for; answers `(partition_id, result)`.
pub fn run(engine: &Engine, ins: &Insert, ctx: &eval::Ctx) -> Result<Outcome> {
    let Some(node) = &engine.node.cluster else {
        return Err(invalid(
            "partition moves exist in cluster mode only (cluster.etcd)",
        ));
    };
    let a = asked(ins, ctx)?;
    let (Some(ks), Some(name), Some(pid), Some(to)) = (a.keyspace, a.table, a.partition_id, a.to)
    else {
        return Err(invalid(format!(
            "system_views.{TABLE} needs keyspace_name, table_name, partition_id and to_group"
        )));
    };
    let schema = engine.schema();
    let t = schema.require_table(&ks, &name)?;
    let map = engine.maps.get(t.storage_id);
    if !map.is_some_and(|m| m.parts.iter().any(|p| p.id as i64 == pid)) {
        return Err(invalid(format!(
            "table {ks}.{name} has no physical partition {pid} (see system_views.physical_partitions)"
        )));
    }
    if crate::cluster::groups::lookup(engine.store.metadata(), &to)?.is_none() {
        return Err(invalid(format!("storage group {to} is not registered")));
    }
    let (ctl, sid, to2) = (node.control().clone(), t.storage_id, to.clone());
    node.block_on(async move { records::request(&ctl, sid, pid as u64, &to2).await })
        .map_err(crate::error::ClientError::Server)?
        .map_err(|e| crate::error::ClientError::Server(e.to_string()))?;
    tracing::info!(keyspace = %ks, table = %name, partition = pid, to = %to, "partition move requested");
    let rows = maintenance::answer_row(TABLE, ("partition_id", &pid.to_string()), "requested");
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
    let ctl = node.control().clone();
    let read = node.block_on(async move {
        let pending = records::requests(&ctl).await?;
        let done = records::outcomes(&ctl).await?;
        Ok::<_, crate::cluster::ControlError>((pending, done))
    });
    let (pending, done) = match read.and_then(|r| r.map_err(|e| e.to_string())) {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!(error = %e, "partition move records unreadable");
            return Some(vec![]);
        }
    };
    let schema = engine.schema();
    let by_id: std::collections::HashMap<u64, (&str, &str)> = (schema.keyspaces.values())
        .flat_map(|k| k.tables.values())
        .map(|t| (t.storage_id, (t.keyspace.as_str(), t.name.as_str())))
        .collect();
    let names = |sid: u64| by_id.get(&sid).map(|(k, n)| (k.to_string(), n.to_string()));
    let mut out = Vec::new();
    let requested = pending.into_iter().map(|(s, p, r)| {
        let row = (r.to, String::new(), "requested".to_string(), String::new());
        (s, p, row)
    });
    let ended = done.into_iter().map(|(s, p, o)| {
        let state = match (o.moved, o.from == o.to) {
            (true, _) => "moved",
            (false, true) => "unchanged",
            (false, false) => "failed",
        };
        (s, p, (o.to, o.from, state.to_string(), o.detail))
    });
    for (sid, pid, (to, from, state, detail)) in requested.chain(ended) {
        let Some((ks, name)) = names(sid) else {
            continue;
        };
        let text = |s: &str| Some(Bytes::copy_from_slice(s.as_bytes()));
        let cells = vec![
            ("keyspace_name", text(&ks)),
            ("table_name", text(&name)),
            (
                "partition_id",
                Some(Bytes::copy_from_slice(&(pid as i64).to_be_bytes())),
            ),
            ("to_group", text(&to)),
            (
                "from_group",
                (!from.is_empty()).then(|| text(&from)).flatten(),
            ),
            ("state", text(&state)),
            (
                "detail",
                (!detail.is_empty()).then(|| text(&detail)).flatten(),
            ),
        ];
        out.push(maintenance::view_row(t, cells));
    }
    Some(out)
}
