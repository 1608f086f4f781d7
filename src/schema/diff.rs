//! The schema changes between two snapshots, as the SCHEMA_CHANGE events a node pushes when it
//! adopts a schema another node wrote (cluster mode): the same events the DDL would have given
//! on this node. Order: keyspaces created, their types and tables created, types and tables
//! updated, tables and types dropped, keyspaces dropped (a dropped keyspace gives only its own
//! event, as Cassandra's drivers expect). Tables and types compare by their stored form, so a
//! change to anything persisted (columns, options, indexes) is an update.

use super::catalog::{table_fingerprint, type_fingerprint};
use super::ddl::{ChangeKind, ChangeTarget, SchemaChange};
use super::{KeyspaceDef, Schema};

pub fn changes(old: &Schema, new: &Schema) -> Vec<SchemaChange> {
    let mut out = Vec::new();
    let user = |s: &Schema| {
        s.keyspaces
            .values()
            .filter(|k| !k.system)
            .cloned()
            .collect::<Vec<_>>()
    };
    let (before, after) = (user(old), user(new));
    let find = |list: &[std::sync::Arc<KeyspaceDef>], name: &str| {
        list.iter().find(|k| k.name == name).cloned()
    };
    for k in &after {
        match find(&before, &k.name) {
            None => {
                out.push(change(
                    ChangeKind::Created,
                    ChangeTarget::Keyspace(k.name.clone()),
                ));
                members(None, k, &mut out);
            }
            Some(was) => {
                if keyspace_props_differ(&was, k) {
                    out.push(change(
                        ChangeKind::Updated,
                        ChangeTarget::Keyspace(k.name.clone()),
                    ));
                }
                members(Some(&was), k, &mut out);
            }
        }
    }
    for k in before.iter().filter(|k| find(&after, &k.name).is_none()) {
        out.push(change(
            ChangeKind::Dropped,
            ChangeTarget::Keyspace(k.name.clone()),
        ));
    }
    out
}

fn change(change: ChangeKind, target: ChangeTarget) -> SchemaChange {
    SchemaChange { change, target }
}

fn keyspace_props_differ(a: &KeyspaceDef, b: &KeyspaceDef) -> bool {
    a.replication != b.replication
        || a.durable_writes != b.durable_writes
        || a.cosmosdb_provisioned_throughput != b.cosmosdb_provisioned_throughput
        || a.cosmosdb_autoscale_max_throughput != b.cosmosdb_autoscale_max_throughput
}

/// Types and tables of one keyspace present in both snapshots (or only the new one).
fn members(was: Option<&KeyspaceDef>, now: &KeyspaceDef, out: &mut Vec<SchemaChange>) {
    let ks = &now.name;
    let target_type = |n: &String| ChangeTarget::Type(ks.clone(), n.clone());
    let target_table = |n: &String| ChangeTarget::Table(ks.clone(), n.clone());
    for (n, t) in &now.types {
        match was.and_then(|w| w.types.get(n)) {
            None => out.push(change(ChangeKind::Created, target_type(n))),
            Some(w) if type_fingerprint(w) != type_fingerprint(t) => {
                out.push(change(ChangeKind::Updated, target_type(n)))
            }
            Some(_) => {}
        }
    }
    for (n, t) in &now.tables {
        match was.and_then(|w| w.tables.get(n)) {
            None => out.push(change(ChangeKind::Created, target_table(n))),
            Some(w) if table_fingerprint(w) != table_fingerprint(t) => {
                out.push(change(ChangeKind::Updated, target_table(n)))
            }
            Some(_) => {}
        }
    }
    let Some(was) = was else { return };
    for n in was.tables.keys().filter(|n| !now.tables.contains_key(*n)) {
        out.push(change(ChangeKind::Dropped, target_table(n)));
    }
    for n in was.types.keys().filter(|n| !now.types.contains_key(*n)) {
        out.push(change(ChangeKind::Dropped, target_type(n)));
    }
}
