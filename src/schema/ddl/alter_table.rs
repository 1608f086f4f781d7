//! ALTER TABLE: adding, dropping and renaming columns, and changing options, with
//! Cassandra's checks and IF [NOT] EXISTS.

use super::*;

/// The IF [NOT] EXISTS parts of ALTER TABLE.
#[derive(Debug, Clone, Copy, Default)]
pub struct AlterFlags {
    pub if_exists: bool,
    /// `ADD IF NOT EXISTS`: existing columns are skipped.
    pub if_column_not_exists: bool,
    /// `DROP IF EXISTS` / `RENAME IF EXISTS`: missing columns are skipped.
    pub if_column_exists: bool,
}

pub fn alter_table(
    schema: &mut Schema,
    keyspace: &str,
    name: &QualifiedName,
    flags: AlterFlags,
    action: &AlterTableAction,
    now_micros: i64,
) -> Result<Option<(SchemaChange, Arc<TableDef>)>, SchemaError> {
    check_not_system(schema, keyspace)?;
    // AlterTableStatement: a missing keyspace is a missing table (IF EXISTS: a no-op).
    let Some(ks) = schema.keyspace(keyspace).cloned() else {
        if flags.if_exists {
            return Ok(None);
        }
        return Err(invalid(format!(
            "Table '{keyspace}.{}' doesn't exist",
            name.name
        )));
    };
    let Some(old) = ks.tables.get(&name.name) else {
        if flags.if_exists {
            return Ok(None);
        }
        return Err(invalid(format!(
            "Table '{keyspace}.{}' doesn't exist",
            name.name
        )));
    };
    let mut t = (**old).clone();
    match action {
        AlterTableAction::Add(cols) => {
            for c in cols {
                if t.column(&c.name).is_some() && flags.if_column_not_exists {
                    continue;
                }
                if t.column(&c.name).is_some() {
                    return Err(invalid(format!(
                        "Column with name '{}' already exists",
                        c.name
                    )));
                }
                let ty = resolve_bounded_type(schema, keyspace, &c.ty)?;
                if c.is_static && t.clustering.is_empty() {
                    return Err(invalid(format!(
                        "Static columns are only useful (and thus allowed) if the table has at least one clustering column (adding static column {})",
                        c.name
                    )));
                }
                if ty.is_counter() != t.is_counter_table() && t.value_columns().next().is_some() {
                    return Err(invalid(
                        "Cannot mix counter and non counter columns in the same table",
                    ));
                }
                if let Some((_, old_ty, _)) = t.dropped.iter().find(|(n, _, _)| *n == c.name) {
                    if *old_ty != ty.to_string() {
                        return Err(invalid(format!(
                            "Cannot re-add previously dropped column '{}' of type {}, incompatible with previous type {}",
                            c.name, ty, old_ty
                        )));
                    }
                }
                t.columns.push(value_column(c, ty, t.next_column_id));
                t.next_column_id += 1;
            }
        }
        AlterTableAction::Drop(cols, timestamp) => {
            for c in cols {
                let Some(col) = t.column(c).cloned() else {
                    if flags.if_column_exists {
                        continue;
                    }
                    return Err(invalid(format!(
                        "Column {c} was not found in table {}",
                        t.name
                    )));
                };
                if matches!(col.kind, ColumnKind::PartitionKey | ColumnKind::Clustering) {
                    return Err(invalid(format!("Cannot drop PRIMARY KEY column {c}")));
                }
                let deps: Vec<&str> = t
                    .indexes
                    .iter()
                    .filter(|i| i.column == *c)
                    .map(|i| i.name.as_str())
                    .collect();
                if !deps.is_empty() {
                    return Err(invalid(format!(
                        "Cannot drop column {c} because it has dependent secondary indexes ({})",
                        deps.join(", ")
                    )));
                }
                t.columns.retain(|x| x.name != *c);
                t.dropped.retain(|(n, _, _)| n != c);
                let at = timestamp.unwrap_or(now_micros);
                t.dropped.push((c.clone(), col.ty.to_string(), at));
            }
        }
        AlterTableAction::Rename(pairs) => {
            for (from, to) in pairs {
                let Some(idx) = t.column_index(from) else {
                    if flags.if_column_exists {
                        continue;
                    }
                    return Err(invalid(format!(
                        "Column {from} was not found in table {}",
                        t.name
                    )));
                };
                if !matches!(
                    t.columns[idx].kind,
                    ColumnKind::PartitionKey | ColumnKind::Clustering
                ) {
                    return Err(invalid(format!(
                        "Cannot rename non PRIMARY KEY column {from}"
                    )));
                }
                if t.column(to).is_some() {
                    return Err(invalid(format!(
                        "Cannot rename column {from} to {to} in table {}; another column with that name already exists",
                        t.name
                    )));
                }
                t.columns[idx].name = to.clone();
            }
        }
        AlterTableAction::AlterType(col, _) => {
            return Err(invalid(format!(
                "Altering column types is no longer supported (column {col})"
            )));
        }
        AlterTableAction::With(props) => {
            if !props.clustering_order.is_empty() {
                return Err(invalid("Cannot change CLUSTERING ORDER of a table"));
            }
            apply_table_props(&mut t.options, props, false)?;
        }
    }
    let indexes = std::mem::take(&mut t.indexes);
    let mut t = assemble_table(
        t.keyspace,
        t.name,
        t.id,
        t.storage_id,
        t.columns,
        t.options,
        t.next_column_id,
        t.dropped,
    );
    t.indexes = indexes;
    let t = Arc::new(t);
    let mut ks = (*ks).clone();
    ks.tables.insert(name.name.clone(), Arc::clone(&t));
    schema.keyspaces.insert(keyspace.into(), Arc::new(ks));
    Ok(Some((
        SchemaChange {
            change: ChangeKind::Updated,
            target: ChangeTarget::Table(keyspace.into(), name.name.clone()),
        },
        t,
    )))
}
