//! CREATE / DROP TABLE: building a table definition from its columns (Cassandra's column
//! order, key checks) and its options.

use super::*;

/// Builds a table definition from its columns: orders them as Cassandra does (partition key,
/// clustering, then static and regular columns by name) and indexes the key columns.
#[allow(clippy::too_many_arguments)]
pub fn assemble_table(
    keyspace: String,
    name: String,
    id: Uuid,
    storage_id: u64,
    mut columns: Vec<ColumnDef>,
    options: TableOptions,
    next_column_id: u32,
    dropped: Vec<(String, String, i64)>,
) -> TableDef {
    let rank = |c: &ColumnDef| match c.kind {
        ColumnKind::PartitionKey => 0,
        ColumnKind::Clustering => 1,
        ColumnKind::Static => 2,
        ColumnKind::Regular => 3,
    };
    columns.sort_by(|a, b| {
        rank(a)
            .cmp(&rank(b))
            .then(a.position.cmp(&b.position))
            .then(a.name.as_bytes().cmp(b.name.as_bytes()))
    });
    let partition_key = columns
        .iter()
        .enumerate()
        .filter(|(_, c)| c.kind == ColumnKind::PartitionKey)
        .map(|(i, _)| i)
        .collect();
    let clustering = columns
        .iter()
        .enumerate()
        .filter(|(_, c)| c.kind == ColumnKind::Clustering)
        .map(|(i, _)| i)
        .collect();
    TableDef {
        keyspace,
        name,
        id,
        storage_id,
        columns,
        partition_key,
        clustering,
        options,
        next_column_id,
        virtual_table: false,
        dropped,
        indexes: Vec::new(),
    }
}

pub(super) fn apply_table_props(
    opts: &mut TableOptions,
    props: &Properties,
    creating: bool,
) -> Result<(), SchemaError> {
    check_one_throughput(props)?;
    for (k, v) in &props.values {
        match k.as_str() {
            "comment" => opts.comment = prop_string(k, v)?,
            "default_time_to_live" => {
                let n = table_int(k, v)?;
                if !(0..=630_720_000).contains(&n) {
                    return Err(config(format!(
                        "default_time_to_live must be greater than or equal to 0 and less than or equal to 630720000 (got {n})"
                    )));
                }
                opts.default_time_to_live = n;
            }
            "gc_grace_seconds" => opts.gc_grace_seconds = at_least(k, table_int(k, v)?, 0)?,
            "bloom_filter_fp_chance" => {
                opts.bloom_filter_fp_chance = bloom_filter_fp_chance(prop_f64(k, v)?)?
            }
            "crc_check_chance" => {
                let x = prop_f64(k, v)?;
                if !(0.0..=1.0).contains(&x) {
                    return Err(config(format!(
                        "crc_check_chance must be larger than or equal to 0 and smaller than or equal to 1.0 (got {})",
                        java_double(x)
                    )));
                }
                opts.crc_check_chance = x;
            }
            "caching" => opts.caching = caching_params(prop_map(k, v)?)?,
            "compaction" => opts.compaction = compaction_params(prop_map(k, v)?)?,
            "compression" => opts.compression = compression_params(prop_map(k, v)?)?,
            "extensions" => opts.extensions = prop_map(k, v)?,
            "memtable" => opts.memtable = prop_string(k, v)?,
            "memtable_flush_period_in_ms" => {
                opts.memtable_flush_period_in_ms = at_least(k, table_int(k, v)?, 0)?
            }
            "min_index_interval" => opts.min_index_interval = at_least(k, table_int(k, v)?, 1)?,
            "max_index_interval" => opts.max_index_interval = table_int(k, v)?,
            "read_repair" => opts.read_repair = prop_string(k, v)?,
            "speculative_retry" => opts.speculative_retry = speculative_retry(&prop_string(k, v)?)?,
            "additional_write_policy" => {
                opts.additional_write_policy = speculative_retry(&prop_string(k, v)?)?
            }
            "cdc" => opts.cdc = prop_bool(k, v)?,
            "cosmosdb_provisioned_throughput" | "cosmosdb_autoscale_max_throughput" => {
                set_throughput(
                    k,
                    v,
                    &mut opts.cosmosdb_provisioned_throughput,
                    &mut opts.cosmosdb_autoscale_max_throughput,
                )?
            }
            "cosmosdb_cell_level_timestamp" => {
                opts.cosmosdb_cell_level_timestamp = Some(prop_bool(k, v)?)
            }
            "cosmosdb_cell_level_timestamp_tombstones" => {
                opts.cosmosdb_cell_level_timestamp_tombstones = Some(prop_bool(k, v)?)
            }
            "cosmosdb_cell_level_timetolive" => {
                opts.cosmosdb_cell_level_timetolive = Some(prop_bool(k, v)?)
            }
            "partition_key_kind" => {
                let kind = match prop_string(k, v)?.to_ascii_lowercase().as_str() {
                    "hash" => PartitionKeyKind::Hash,
                    "multihash" => PartitionKeyKind::MultiHash,
                    other => {
                        return Err(invalid(format!(
                            "Unknown partition_key_kind '{other}': use 'Hash' or 'MultiHash'"
                        )))
                    }
                };
                if !creating && kind != opts.partition_key_kind {
                    return Err(invalid(
                        "partition_key_kind is fixed when a table is created and cannot be altered",
                    ));
                }
                opts.partition_key_kind = kind;
            }
            // Accepted for compatibility with Cassandra 5's DESCRIBE output; not used.
            "allow_auto_snapshot" | "incremental_backups" => {
                prop_bool(k, v)?;
            }
            "id" => {
                if !creating {
                    return Err(config("Cannot alter table id."));
                }
            }
            other => return Err(SchemaError::Syntax(format!("Unknown property '{other}'"))),
        }
    }
    check_index_intervals(opts)
}

pub(super) fn check_key_type(col: &str, ty: &CqlType) -> Result<(), SchemaError> {
    match ty {
        CqlType::Counter => Err(invalid(format!(
            "counter type is not supported for PRIMARY KEY column '{col}'"
        ))),
        CqlType::Duration => Err(invalid(format!(
            "duration type is not supported for PRIMARY KEY column '{col}'"
        ))),
        t if t.is_multi_cell() => Err(invalid(format!(
            "Invalid non-frozen collection type {t} for PRIMARY KEY component {col}"
        ))),
        _ => Ok(()),
    }
}

/// A regular or static column as declared (its kind set later if it is part of the key).
pub(super) fn value_column(c: &ast::ColumnDef, ty: CqlType, id: u32) -> ColumnDef {
    ColumnDef {
        name: c.name.clone(),
        ty,
        kind: if c.is_static {
            ColumnKind::Static
        } else {
            ColumnKind::Regular
        },
        position: 0,
        desc: false,
        id,
    }
}

/// Validates a CREATE TABLE and adds the table; returns the change and the new table.
pub fn create_table(
    schema: &mut Schema,
    keyspace: &str,
    stmt: &ast::CreateTable,
) -> Result<Option<(SchemaChange, Arc<TableDef>)>, SchemaError> {
    check_not_system(schema, keyspace)?;
    let name = stmt.name.name.as_str();
    let ks = target_keyspace(schema, keyspace)?.clone();
    check_table_name(keyspace, name)?;
    if ks.tables.contains_key(name) {
        if stmt.if_not_exists {
            return Ok(None);
        }
        return Err(SchemaError::AlreadyExists {
            message: format!(
                "Cannot add already existing table \"{name}\" to keyspace \"{keyspace}\""
            ),
            keyspace: keyspace.into(),
            table: name.into(),
        });
    }
    if stmt.properties.compact_storage {
        return Err(invalid(
            "COMPACT STORAGE tables are not supported starting with version 4.0",
        ));
    }
    if stmt.partition_key.is_empty() {
        return Err(invalid("No PRIMARY KEY specifed (exactly one required)"));
    }
    let mut columns: Vec<ColumnDef> = Vec::with_capacity(stmt.columns.len());
    for (i, c) in stmt.columns.iter().enumerate() {
        if columns.iter().any(|x| x.name == c.name) {
            return Err(invalid(format!(
                "Multiple definition of identifier {}",
                c.name
            )));
        }
        let ty = resolve_bounded_type(schema, keyspace, &c.ty)?;
        columns.push(value_column(c, ty, i as u32));
    }
    let mut seen_key: Vec<&str> = Vec::new();
    for (pos, k) in stmt.partition_key.iter().enumerate() {
        mark_key(
            &mut columns,
            k,
            ColumnKind::PartitionKey,
            pos,
            &mut seen_key,
        )?;
    }
    for (pos, k) in stmt.clustering.iter().enumerate() {
        mark_key(&mut columns, k, ColumnKind::Clustering, pos, &mut seen_key)?;
    }
    // CLUSTERING ORDER BY must list clustering columns, in their order.
    let order = &stmt.properties.clustering_order;
    for (i, (col, dir)) in order.iter().enumerate() {
        let Some(pos) = stmt.clustering.iter().position(|c| c == col) else {
            return Err(invalid(format!(
                "Only clustering key columns can be defined in CLUSTERING ORDER directive: {col} is not a clustering column"
            )));
        };
        if pos != i {
            return Err(invalid(
                "The order of columns in the CLUSTERING ORDER directive must match that of the clustering columns",
            ));
        }
        if let Some(c) = columns.iter_mut().find(|c| &c.name == col) {
            c.desc = *dir == Order::Desc;
        }
    }
    let has_counter = columns
        .iter()
        .any(|c| matches!(c.kind, ColumnKind::Regular | ColumnKind::Static) && c.ty.is_counter());
    let has_non_counter = columns
        .iter()
        .any(|c| matches!(c.kind, ColumnKind::Regular | ColumnKind::Static) && !c.ty.is_counter());
    if has_counter && has_non_counter {
        return Err(invalid(
            "Cannot mix counter and non counter columns in the same table",
        ));
    }
    if stmt.clustering.is_empty() {
        if let Some(c) = columns.iter().find(|c| c.kind == ColumnKind::Static) {
            return Err(invalid(format!(
                "Static column {} cannot be defined on a table without clustering columns (static columns are only useful (and thus allowed) if the table has at least one clustering column)",
                c.name
            )));
        }
    }
    let mut options = TableOptions::default();
    apply_table_props(&mut options, &stmt.properties, true)?;
    if has_counter && options.default_time_to_live != 0 {
        return Err(invalid(
            "Cannot set default_time_to_live on a table with counters",
        ));
    }
    if options.partition_key_kind == PartitionKeyKind::MultiHash {
        let n = stmt.partition_key.len();
        if !(2..=3).contains(&n) {
            return Err(invalid(format!(
                "partition_key_kind = 'MultiHash' needs a composite partition key of 2 or 3 levels (at most 3 levels are supported); this key has {n}"
            )));
        }
    }
    let n_cols = columns.len() as u32;
    let storage_id = schema.next_storage_id;
    schema.next_storage_id += 1;
    let table = Arc::new(assemble_table(
        keyspace.into(),
        name.into(),
        Uuid::new_v4(),
        storage_id,
        columns,
        options,
        n_cols,
        Vec::new(),
    ));
    let mut ks = (*ks).clone();
    ks.tables.insert(name.into(), Arc::clone(&table));
    schema.keyspaces.insert(keyspace.into(), Arc::new(ks));
    Ok(Some((
        SchemaChange {
            change: ChangeKind::Created,
            target: ChangeTarget::Table(keyspace.into(), name.into()),
        },
        table,
    )))
}

pub(super) fn mark_key<'a>(
    columns: &mut [ColumnDef],
    name: &'a str,
    kind: ColumnKind,
    pos: usize,
    seen: &mut Vec<&'a str>,
) -> Result<(), SchemaError> {
    if seen.contains(&name) {
        return Err(invalid(format!("Multiple definition of identifier {name}")));
    }
    seen.push(name);
    let c = columns.iter_mut().find(|c| c.name == name).ok_or_else(|| {
        invalid(format!(
            "Unknown definition {name} referenced in PRIMARY KEY"
        ))
    })?;
    if c.kind == ColumnKind::Static {
        return Err(invalid(format!(
            "Static column {name} cannot be part of the PRIMARY KEY"
        )));
    }
    check_key_type(name, &c.ty)?;
    c.kind = kind;
    c.position = pos;
    Ok(())
}

pub fn drop_table(
    schema: &mut Schema,
    keyspace: &str,
    name: &str,
    if_exists: bool,
) -> Result<Option<(SchemaChange, Arc<TableDef>)>, SchemaError> {
    check_not_system(schema, keyspace)?;
    // DropTableStatement: a missing keyspace is a missing table (IF EXISTS: a no-op).
    let ks = schema.keyspace(keyspace).cloned();
    let Some((ks, table)) = ks.and_then(|ks| ks.tables.get(name).cloned().map(|t| (ks, t))) else {
        if if_exists {
            return Ok(None);
        }
        return Err(invalid(format!("Table '{keyspace}.{name}' doesn't exist")));
    };
    let mut ks = (*ks).clone();
    ks.tables.remove(name);
    schema.keyspaces.insert(keyspace.into(), Arc::new(ks));
    Ok(Some((
        SchemaChange {
            change: ChangeKind::Dropped,
            target: ChangeTarget::Table(keyspace.into(), name.into()),
        },
        table,
    )))
}
