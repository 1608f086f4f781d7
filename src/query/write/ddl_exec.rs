//! Executing DDL statements: the schema change, its storage side (new tables' layout,
//! throughput splits, dropped tables' data) and the outcome the client sees.

use super::*;

pub fn execute_ddl(engine: &Engine, keyspace: Option<&str>, st: &Statement) -> Result<Outcome> {
    let done = |c: Option<ddl::SchemaChange>| -> Outcome {
        match c {
            Some(c) => Outcome::SchemaChange(c),
            None => Outcome::Void,
        }
    };
    let cat = &engine.catalog;
    match st {
        Statement::CreateKeyspace {
            name,
            if_not_exists,
            properties,
        } => {
            let c = cat.update(|s, _| {
                ddl::create_keyspace(
                    s,
                    name,
                    *if_not_exists,
                    properties,
                    &engine.node.data_center,
                )
            })?;
            Ok(done(c))
        }
        Statement::AlterKeyspace {
            name,
            if_exists,
            properties,
        } => {
            let c = cat.update(|s, _| {
                ddl::alter_keyspace(s, name, *if_exists, properties, &engine.node.data_center)
            })?;
            Ok(done(c))
        }
        Statement::DropKeyspace { name, if_exists } => {
            let res = cat.update(|s, batch| {
                let r = ddl::drop_keyspace(s, name, *if_exists)?;
                if let Some((_, tables)) = &r {
                    for t in tables {
                        engine.maps.remove(t.storage_id, batch);
                        for id in table_storage_ids(t) {
                            purge_marker(id, batch);
                        }
                    }
                }
                Ok(r)
            })?;
            if let Some((_, tables)) = &res {
                for t in tables {
                    for id in table_storage_ids(t) {
                        spawn_purge(engine, id);
                    }
                }
            }
            Ok(done(res.map(|r| r.0)))
        }
        Statement::CreateTable(ct) => {
            let ks = resolve_keyspace(keyspace, &ct.name)?;
            let mut new_map = None;
            let res = cat.update(|s, batch| {
                let r = ddl::create_table(s, ks, ct)?;
                if let Some((_, t)) = &r {
                    let tp = table_throughput(s, t);
                    new_map = Some((
                        t.storage_id,
                        engine.maps.initial_layout(t.storage_id, tp, batch),
                    ));
                }
                Ok(r)
            })?;
            if let Some((sid, map)) = new_map {
                engine.maps.install(sid, map);
            }
            Ok(done(res.map(|r| r.0)))
        }
        Statement::AlterTable {
            name,
            if_exists,
            action,
            if_column_not_exists,
            if_column_exists,
        } => {
            let ks = resolve_keyspace(keyspace, name)?;
            let flags = ddl::AlterFlags {
                if_exists: *if_exists,
                if_column_not_exists: *if_column_not_exists,
                if_column_exists: *if_column_exists,
            };
            let c = cat.update(|s, _| {
                ddl::alter_table(s, ks, name, flags, action, engine.clock.now_micros())
            })?;
            ensure_throughput_layout(engine, ks, &name.name)?;
            Ok(done(c.map(|r| r.0)))
        }
        Statement::DropTable { name, if_exists } => {
            let ks = resolve_keyspace(keyspace, name)?;
            let res = cat.update(|s, batch| {
                let r = ddl::drop_table(s, ks, &name.name, *if_exists)?;
                if let Some((_, t)) = &r {
                    engine.maps.remove(t.storage_id, batch);
                    for id in table_storage_ids(t) {
                        purge_marker(id, batch);
                    }
                }
                Ok(r)
            })?;
            if let Some((_, t)) = &res {
                for id in table_storage_ids(t) {
                    spawn_purge(engine, id);
                }
            }
            Ok(done(res.map(|r| r.0)))
        }
        Statement::Truncate(name) => {
            let schema = engine.schema();
            let t = resolve_table(&schema, keyspace, name)?;
            check_writable(t)?;
            let (ks, tname) = (t.keyspace.clone(), t.name.clone());
            let mut swap = None;
            cat.update(|s, batch| {
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
                let map = engine
                    .maps
                    .initial_layout(t.storage_id, table_throughput(s, &t), batch);
                engine.maps.remove(old.storage_id, batch);
                for id in table_storage_ids(&old) {
                    purge_marker(id, batch);
                }
                swap = Some((table_storage_ids(&old), t.storage_id, map));
                let mut k = (*k).clone();
                k.tables.insert(tname.clone(), Arc::new(t));
                s.keyspaces.insert(ks.clone(), Arc::new(k));
                Ok(())
            })?;
            if let Some((old, new, map)) = swap {
                engine.maps.install(new, map);
                for id in old {
                    spawn_purge(engine, id);
                }
            }
            Ok(Outcome::Void)
        }
        Statement::CreateType {
            name,
            if_not_exists,
            fields,
        } => {
            let ks = resolve_keyspace(keyspace, name)?;
            let c =
                cat.update(|s, _| ddl::create_type(s, ks, &name.name, *if_not_exists, fields))?;
            Ok(done(c))
        }
        Statement::DropType { name, if_exists } => {
            let ks = resolve_keyspace(keyspace, name)?;
            let c = cat.update(|s, _| ddl::drop_type(s, ks, &name.name, *if_exists))?;
            Ok(done(c))
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
            Ok(done(c))
        }
        Statement::CreateIndex {
            name,
            table,
            target,
            if_not_exists,
            custom_class,
            ..
        } => {
            let ks = resolve_keyspace(keyspace, table)?;
            let res = cat.update(|s, _| {
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
                    crate::query::index::build(engine, &t, &index)?;
                    Ok(Outcome::SchemaChange(change))
                }
                None => Ok(Outcome::Void),
            }
        }
        Statement::DropIndex { name, if_exists } => {
            let ks = resolve_keyspace(keyspace, name)?;
            let res = cat.update(|s, batch| {
                let r = ddl::drop_index(s, ks, &name.name, *if_exists)?;
                if let Some((_, ix)) = &r {
                    purge_marker(ix.storage_id, batch);
                }
                Ok(r)
            })?;
            match res {
                Some((change, ix)) => {
                    spawn_purge(engine, ix.storage_id);
                    Ok(Outcome::SchemaChange(change))
                }
                None => Ok(Outcome::Void),
            }
        }
        _ => Err(invalid("Unsupported statement")),
    }
}
