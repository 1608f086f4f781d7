//! Executing DDL statements: the schema change, its storage side (new tables' layout,
//! throughput splits, dropped tables' data) and the outcome the client sees. One function
//! per statement whose storage side is more than the schema swap.

use super::*;
use crate::cql::ast::{AlterTableAction, CreateTable, QualifiedName};
use crate::partition::derived_sizes::SizeSource;

pub fn execute_ddl(engine: &Engine, keyspace: Option<&str>, st: &Statement) -> Result<Outcome> {
    let cat = &engine.catalog;
    let dc = &engine.node.data_center;
    match st {
        Statement::CreateKeyspace {
            name,
            if_not_exists,
            properties,
        } => {
            let c =
                cat.update(|s, _| ddl::create_keyspace(s, name, *if_not_exists, properties, dc))?;
            Ok(outcome(c))
        }
        Statement::AlterKeyspace {
            name,
            if_exists,
            properties,
        } => {
            let c = cat.update(|s, _| ddl::alter_keyspace(s, name, *if_exists, properties, dc))?;
            Ok(outcome(c))
        }
        Statement::DropKeyspace { name, if_exists } => drop_keyspace(engine, name, *if_exists),
        Statement::CreateTable(ct) => create_table(engine, keyspace, ct),
        Statement::AlterTable {
            name,
            if_exists,
            action,
            if_column_not_exists,
            if_column_exists,
        } => {
            let flags = ddl::AlterFlags {
                if_exists: *if_exists,
                if_column_not_exists: *if_column_not_exists,
                if_column_exists: *if_column_exists,
            };
            alter_table(engine, keyspace, name, flags, action)
        }
        Statement::DropTable { name, if_exists } => drop_table(engine, keyspace, name, *if_exists),
        Statement::Truncate(name) => truncate(engine, keyspace, name),
        Statement::CreateType {
            name,
            if_not_exists,
            fields,
        } => {
            let ks = resolve_keyspace(keyspace, name)?;
            let c =
                cat.update(|s, _| ddl::create_type(s, ks, &name.name, *if_not_exists, fields))?;
            Ok(outcome(c))
        }
        Statement::DropType { name, if_exists } => {
            let ks = resolve_keyspace(keyspace, name)?;
            let c = cat.update(|s, _| ddl::drop_type(s, ks, &name.name, *if_exists))?;
            Ok(outcome(c))
        }
        Statement::AlterType {
            name,
            if_exists,
            action,
            if_field_not_exists,
            if_field_exists,
        } => {
            let ks = resolve_keyspace(keyspace, name)?;
            let c = cat.update(|s, _| {
                ddl::alter_type(
                    s,
                    ks,
                    &name.name,
                    *if_exists,
                    action,
                    *if_field_not_exists,
                    *if_field_exists,
                )
            })?;
            Ok(outcome(c))
        }
        Statement::CreateIndex { .. } => create_index(engine, keyspace, st),
        Statement::DropIndex { name, if_exists } => drop_index(engine, keyspace, name, *if_exists),
        _ => Err(invalid("Unsupported statement")),
    }
}

/// A schema change for the client, or nothing (IF [NOT] EXISTS that changed nothing).
fn outcome(c: Option<ddl::SchemaChange>) -> Outcome {
    match c {
        Some(c) => Outcome::SchemaChange(c),
        None => Outcome::Void,
    }
}

/// Drops the keyspace, its tables' maps, and their data in the background.
fn drop_keyspace(engine: &Engine, name: &str, if_exists: bool) -> Result<Outcome> {
    let res = engine.catalog.update(|s, batch| {
        let r = ddl::drop_keyspace(s, name, if_exists)?;
        if let Some((_, tables)) = &r {
            for t in tables {
                engine.maps.remove(t.storage_id, batch);
                for id in table_storage_ids(t) {
                    drop_data_marker(id, batch);
                }
            }
        }
        Ok(r)
    })?;
    if let Some((_, tables)) = &res {
        for t in tables {
            for id in table_storage_ids(t) {
                spawn_drop_data(engine, id);
            }
        }
    }
    Ok(outcome(res.map(|r| r.0)))
}

/// Creates the table with its initial partition map (committed with the schema).
fn create_table(engine: &Engine, keyspace: Option<&str>, ct: &CreateTable) -> Result<Outcome> {
    let ks = resolve_keyspace(keyspace, &ct.name)?;
    let mut new_map = None;
    let res = engine.catalog.update(|s, batch| {
        let r = ddl::create_table(s, ks, ct)?;
        if let Some((_, t)) = &r {
            let tp = table_throughput(s, t);
            new_map = Some((
                t.storage_id,
                engine
                    .maps
                    .initial_layout((t.storage_id, SizeSource::for_new_table(t)), tp, batch),
            ));
        }
        Ok(r)
    })?;
    if let Some((sid, map)) = new_map {
        engine.maps.install(sid, map);
        // Cluster mode: its partitions are taken now, not at the next ownership round.
        engine.handles.ownership_wake().notify_one();
    }
    Ok(outcome(res.map(|r| r.0)))
}

/// Alters the table; a throughput change may split its partitions.
fn alter_table(
    engine: &Engine,
    keyspace: Option<&str>,
    name: &QualifiedName,
    flags: ddl::AlterFlags,
    action: &AlterTableAction,
) -> Result<Outcome> {
    let ks = resolve_keyspace(keyspace, name)?;
    let c = engine
        .catalog
        .update(|s, _| ddl::alter_table(s, ks, name, flags, action, engine.clock.now_micros()))?;
    ensure_throughput_layout(engine, ks, &name.name)?;
    Ok(outcome(c.map(|r| r.0)))
}

/// Drops the table and its map; its data (and its indexes') goes in the background.
fn drop_table(
    engine: &Engine,
    keyspace: Option<&str>,
    name: &QualifiedName,
    if_exists: bool,
) -> Result<Outcome> {
    let ks = resolve_keyspace(keyspace, name)?;
    let res = engine.catalog.update(|s, batch| {
        let r = ddl::drop_table(s, ks, &name.name, if_exists)?;
        if let Some((_, t)) = &r {
            engine.maps.remove(t.storage_id, batch);
            for id in table_storage_ids(t) {
                drop_data_marker(id, batch);
            }
        }
        Ok(r)
    })?;
    if let Some((_, t)) = &res {
        for id in table_storage_ids(t) {
            spawn_drop_data(engine, id);
        }
    }
    Ok(outcome(res.map(|r| r.0)))
}

/// TRUNCATE: the table (and its indexes) get new storage ids and a new map in one schema
/// swap; the old data goes in the background.
fn truncate(engine: &Engine, keyspace: Option<&str>, name: &QualifiedName) -> Result<Outcome> {
    let schema = engine.schema();
    let t = super::super::resolve_table_any(&schema, keyspace, name)?;
    check_writable(t)?;
    let (ks, tname) = (t.keyspace.clone(), t.name.clone());
    let mut swap = None;
    engine.catalog.update(|s, batch| {
        let k = s.require_keyspace(&ks)?.clone();
        let old = s.require_table(&ks, &tname)?.clone();
        let mut t = (*old).clone();
        t.storage_id = s.next_storage_id;
        s.next_storage_id += 1;
        // Index entries start empty too.
        for ix in &mut t.indexes {
            ix.storage_id = s.next_storage_id;
            s.next_storage_id += 1;
        }
        // Its data starts empty: a table without clustering columns derives its sizes.
        let ids = (t.storage_id, SizeSource::for_new_table(&t));
        let map = engine
            .maps
            .initial_layout(ids, table_throughput(s, &t), batch);
        engine.maps.remove(old.storage_id, batch);
        for id in table_storage_ids(&old) {
            drop_data_marker(id, batch);
        }
        swap = Some((table_storage_ids(&old), t.storage_id, map));
        let mut k = (*k).clone();
        k.tables.insert(tname.clone(), Arc::new(t));
        s.keyspaces.insert(ks.clone(), Arc::new(k));
        Ok(())
    })?;
    if let Some((old, new, map)) = swap {
        engine.maps.install(new, map);
        engine.handles.ownership_wake().notify_one();
        for id in old {
            spawn_drop_data(engine, id);
        }
    }
    Ok(Outcome::Void)
}

/// Creates the index and writes the entries of the table's existing rows.
fn create_index(engine: &Engine, keyspace: Option<&str>, st: &Statement) -> Result<Outcome> {
    let Statement::CreateIndex {
        name,
        table,
        target,
        if_not_exists,
        custom_class,
        ..
    } = st
    else {
        return Err(invalid("Unsupported statement"));
    };
    let ks = resolve_keyspace(keyspace, table)?;
    let res = engine.catalog.update(|s, _| {
        ddl::create_index(
            s,
            ks,
            &table.name,
            name.as_deref(),
            target,
            *if_not_exists,
            custom_class.as_deref(),
        )
    })?;
    match res {
        Some((change, t, index)) => {
            let built = if crate::query::index_cluster::applies(engine) {
                crate::query::index_cluster::wait_built(engine, &t, &index)
            } else {
                crate::query::index::build(engine, &t, &index)
            };
            if let Err(e) = built {
                roll_back_index(engine, ks, &index);
                return Err(e);
            }
            Ok(Outcome::SchemaChange(change))
        }
        None => Ok(Outcome::Void),
    }
}

/// Takes an index whose build failed for good out of the schema again, so it never answers
/// from partial entries; the entries written so far (by the build and by writes meanwhile) go
/// with its storage id, as a dropped index's do.
fn roll_back_index(engine: &Engine, ks: &str, index: &crate::schema::IndexDef) {
    if let Err(e) = remove_index(engine, ks, &index.name, true) {
        tracing::warn!(index = %index.name, error = %e, "could not remove an index whose build failed")
    }
}

/// Removes the index from the schema (with its data-deletion marker, in the same swap) and
/// deletes its entries in the background; None when it did not exist (`if_exists`).
fn remove_index(
    engine: &Engine,
    ks: &str,
    name: &str,
    if_exists: bool,
) -> Result<Option<(ddl::SchemaChange, crate::schema::IndexDef)>> {
    let res = engine.catalog.update(|s, batch| {
        let r = ddl::drop_index(s, ks, name, if_exists)?;
        if let Some((_, ix)) = &r {
            drop_data_marker(ix.storage_id, batch);
        }
        Ok(r)
    })?;
    if let Some((_, ix)) = &res {
        spawn_drop_data(engine, ix.storage_id);
    }
    Ok(res)
}

/// Drops the index; its entries go in the background.
fn drop_index(
    engine: &Engine,
    keyspace: Option<&str>,
    name: &QualifiedName,
    if_exists: bool,
) -> Result<Outcome> {
    let ks = resolve_keyspace(keyspace, name)?;
    Ok(match remove_index(engine, ks, &name.name, if_exists)? {
        Some((change, _)) => Outcome::SchemaChange(change),
        None => Outcome::Void,
    })
}
