//! CREATE / ALTER / DROP KEYSPACE: replication options validated as Cassandra 5.0 does for a
//! one-data-centre cluster.

use super::*;

pub(super) const SIMPLE: &str = "org.apache.cassandra.locator.SimpleStrategy";
pub(super) const NTS: &str = "org.apache.cassandra.locator.NetworkTopologyStrategy";

/// The replication options of CREATE/ALTER KEYSPACE `keyspace`, validated as Cassandra 5.0 does
/// for a cluster whose only data centre is `data_center`.
pub(super) fn replication_from(
    props: &Properties,
    existing: Option<&BTreeMap<String, String>>,
    keyspace: &str,
    data_center: &str,
) -> Result<BTreeMap<String, String>, SchemaError> {
    let Some((_, v)) = props.values.iter().find(|(k, _)| k == "replication") else {
        return match existing {
            Some(r) => Ok(r.clone()),
            None => Err(config("Missing mandatory option 'replication'")),
        };
    };
    let mut map = prop_map("replication", v)?;
    let class = map
        .remove("class")
        .ok_or_else(|| config("Missing replication strategy class"))?;
    let class =
        match class.as_str() {
            "SimpleStrategy" | SIMPLE => SIMPLE,
            "NetworkTopologyStrategy" | NTS => NTS,
            "LocalStrategy" | "org.apache.cassandra.locator.LocalStrategy" => return Err(config(
                "Unable to use given strategy class: LocalStrategy is reserved for internal use.",
            )),
            other => {
                return Err(config(format!(
                    "Unable to find replication strategy class '{other}'"
                )))
            }
        };
    let check_rf = |key: &str, v: &str| -> Result<(), SchemaError> {
        let rf = v.split('/').next().unwrap_or(v);
        match rf.trim().parse::<i64>() {
            Ok(n) if n >= 0 => Ok(()),
            _ => Err(config(format!(
                "Replication factor must be non-negative integer; found {v} for '{key}'"
            ))),
        }
    };
    if class == SIMPLE {
        let rf = map.get("replication_factor").ok_or_else(|| {
            config("SimpleStrategy requires a replication_factor strategy option.")
        })?;
        check_rf("replication_factor", rf)?;
        if let Some(k) = map.keys().find(|k| *k != "replication_factor") {
            return Err(config(format!(
                "Unrecognized strategy option {{{k}}} passed to SimpleStrategy for keyspace {keyspace}"
            )));
        }
    } else {
        if map.is_empty() {
            return Err(config(
                "Configuration for at least one datacenter must be present",
            ));
        }
        // Only the cluster's data centres (and replication_factor, for all of them) are options.
        if let Some(k) = map
            .keys()
            .find(|k| *k != "replication_factor" && *k != data_center)
        {
            return Err(config(format!(
                "Unrecognized strategy option {{{k}}} passed to NetworkTopologyStrategy for keyspace {keyspace}"
            )));
        }
        for (k, v) in &map {
            check_rf(k, v)?;
        }
    }
    map.insert("class".into(), class.into());
    Ok(map)
}

pub fn create_keyspace(
    schema: &mut Schema,
    name: &str,
    if_not_exists: bool,
    props: &Properties,
    data_center: &str,
) -> Result<Option<SchemaChange>, SchemaError> {
    check_name("Keyspace", name)?;
    if schema.keyspaces.contains_key(name) {
        if if_not_exists {
            return Ok(None);
        }
        return Err(SchemaError::AlreadyExists {
            message: format!("Cannot add existing keyspace \"{name}\""),
            keyspace: name.into(),
            table: String::new(),
        });
    }
    let mut ks = KeyspaceDef {
        name: name.into(),
        replication: replication_from(props, None, name, data_center)?,
        durable_writes: true,
        cosmosdb_provisioned_throughput: None,
        cosmosdb_autoscale_max_throughput: None,
        tables: BTreeMap::new(),
        types: BTreeMap::new(),
        system: false,
        is_virtual: false,
    };
    apply_keyspace_props(&mut ks, props)?;
    schema.keyspaces.insert(name.into(), Arc::new(ks));
    Ok(Some(SchemaChange {
        change: ChangeKind::Created,
        target: ChangeTarget::Keyspace(name.into()),
    }))
}

pub(super) fn apply_keyspace_props(
    ks: &mut KeyspaceDef,
    props: &Properties,
) -> Result<(), SchemaError> {
    check_one_throughput(props)?;
    for (k, v) in &props.values {
        match k.as_str() {
            "replication" => {}
            "durable_writes" => ks.durable_writes = prop_bool(k, v)?,
            "cosmosdb_provisioned_throughput" | "cosmosdb_autoscale_max_throughput" => {
                set_throughput(
                    k,
                    v,
                    &mut ks.cosmosdb_provisioned_throughput,
                    &mut ks.cosmosdb_autoscale_max_throughput,
                )?
            }
            other => return Err(SchemaError::Syntax(format!("Unknown property '{other}'"))),
        }
    }
    Ok(())
}

pub fn alter_keyspace(
    schema: &mut Schema,
    name: &str,
    if_exists: bool,
    props: &Properties,
    data_center: &str,
) -> Result<Option<SchemaChange>, SchemaError> {
    check_not_system(schema, name)?;
    let Some(existing) = schema.keyspaces.get(name) else {
        if if_exists {
            return Ok(None);
        }
        return Err(invalid(format!("Keyspace '{name}' does not exist")));
    };
    let mut ks = (**existing).clone();
    ks.replication = replication_from(props, Some(&existing.replication), name, data_center)?;
    apply_keyspace_props(&mut ks, props)?;
    schema.keyspaces.insert(name.into(), Arc::new(ks));
    Ok(Some(SchemaChange {
        change: ChangeKind::Updated,
        target: ChangeTarget::Keyspace(name.into()),
    }))
}

/// A dropped keyspace: the change and its tables (whose data must be removed).
pub type DroppedKeyspace = (SchemaChange, Vec<Arc<TableDef>>);

/// Drops a keyspace; returns the change and the dropped tables (their data must be removed).
pub fn drop_keyspace(
    schema: &mut Schema,
    name: &str,
    if_exists: bool,
) -> Result<Option<DroppedKeyspace>, SchemaError> {
    check_not_system(schema, name)?;
    let Some(ks) = schema.keyspaces.remove(name) else {
        if if_exists {
            return Ok(None);
        }
        return Err(invalid(format!(
            "Cannot drop non existing keyspace '{name}'."
        )));
    };
    Ok(Some((
        SchemaChange {
            change: ChangeKind::Dropped,
            target: ChangeTarget::Keyspace(name.into()),
        },
        ks.tables.values().cloned().collect(),
    )))
}
