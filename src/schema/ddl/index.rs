//! CREATE / DROP INDEX: secondary indexes on a table's columns, with Cassandra's checks on
//! what can be indexed.

use super::*;

/// Adds a secondary index; returns the change and the table with its new index.
pub fn create_index(
    schema: &mut Schema,
    keyspace: &str,
    table_name: &str,
    name: Option<&str>,
    target: &ast::IndexTarget,
    if_not_exists: bool,
    custom_class: Option<&str>,
) -> Result<Option<(SchemaChange, Arc<TableDef>, crate::schema::IndexDef)>, SchemaError> {
    use crate::schema::{IndexDef, IndexKind};
    check_not_system(schema, keyspace)?;
    if let Some(c) = custom_class {
        return Err(invalid(format!(
            "Custom index classes are not supported (got '{c}'); use CREATE INDEX without USING"
        )));
    }
    let ks = target_keyspace(schema, keyspace)?.clone();
    let table = ks
        .tables
        .get(table_name)
        // CreateIndexStatement names the table alone
        .ok_or_else(|| invalid(format!("Table '{table_name}' doesn't exist")))?
        .clone();
    let (column, kind) = match target {
        ast::IndexTarget::Column(c) => (c, None),
        ast::IndexTarget::Values(c) => (c, Some(IndexKind::Values)),
        ast::IndexTarget::Keys(c) => (c, Some(IndexKind::Keys)),
        ast::IndexTarget::Entries(c) => (c, Some(IndexKind::Entries)),
        ast::IndexTarget::Full(c) => (c, Some(IndexKind::Full)),
    };
    let col = table
        .column(column)
        .ok_or_else(|| invalid(format!("Column '{column}' does not exist")))?;
    if col.ty.references_duration() {
        return Err(invalid(match col.ty.unfrozen() {
            CqlType::List(_) | CqlType::Set(_) | CqlType::Map(..) => {
                "Secondary indexes are not supported on collections containing durations"
            }
            CqlType::Tuple(_) => {
                "Secondary indexes are not supported on tuples containing durations"
            }
            CqlType::Udt(_) => "Secondary indexes are not supported on UDTs containing durations",
            _ => "Secondary indexes are not supported on duration columns",
        }));
    }
    if col.ty.is_counter() {
        return Err(invalid("Cannot create secondary index on a counter column"));
    }
    if col.kind == ColumnKind::PartitionKey && table.partition_key.len() == 1 {
        return Err(invalid(format!(
            "Cannot create secondary index on the only partition key column {column}"
        )));
    }
    let is_collection = matches!(
        col.ty.unfrozen(),
        CqlType::List(_) | CqlType::Set(_) | CqlType::Map(_, _)
    );
    let kind = match (kind, is_collection, col.ty.is_frozen()) {
        (None, true, false) => IndexKind::Values,
        (None, _, _) => IndexKind::Value,
        (Some(IndexKind::Full), true, true) => IndexKind::Full,
        (Some(IndexKind::Full), _, _) => {
            return Err(invalid(
                "full() indexes can only be created on frozen collections",
            ))
        }
        (Some(k), true, false) => {
            if matches!(k, IndexKind::Keys | IndexKind::Entries)
                && !matches!(col.ty.unfrozen(), CqlType::Map(_, _))
            {
                return Err(invalid(format!(
                    "Cannot create index on {} of column {column} with non-map type",
                    if k == IndexKind::Keys { "keys" } else { "entries" }
                )));
            }
            k
        }
        (Some(_), true, true) => {
            return Err(invalid(format!(
                "Cannot create values() index on frozen column {column}. Frozen collections only support full() indexes"
            )))
        }
        (Some(_), false, _) => {
            return Err(invalid(format!(
                "Cannot create keys(), values() or entries() index on non-collection column {column}"
            )))
        }
    };
    let name = match name {
        Some(n) => n.to_string(),
        None => {
            let mut base = format!("{table_name}_{column}_idx");
            base.retain(|c| c.is_ascii_alphanumeric() || c == '_');
            let mut n = base.clone();
            let mut i = 1;
            while ks
                .tables
                .values()
                .any(|t| t.indexes.iter().any(|x| x.name == n))
            {
                n = format!("{base}_{i}");
                i += 1;
            }
            n
        }
    };
    check_name("Index", &name)?;
    if ks
        .tables
        .values()
        .any(|t| t.indexes.iter().any(|x| x.name == name))
    {
        if if_not_exists {
            return Ok(None);
        }
        return Err(invalid(format!("Index '{name}' already exists")));
    }
    if let Some(dup) = table
        .indexes
        .iter()
        .find(|x| x.column == *column && x.kind == kind)
    {
        if if_not_exists {
            return Ok(None);
        }
        return Err(invalid(format!(
            "Index {name} is a duplicate of existing index {}",
            dup.name
        )));
    }
    let index = IndexDef {
        name,
        column: column.clone(),
        kind,
        storage_id: schema.next_storage_id,
    };
    schema.next_storage_id += 1;
    let mut t = (*table).clone();
    t.indexes.push(index.clone());
    let t = Arc::new(t);
    let mut ks = (*ks).clone();
    ks.tables.insert(table_name.to_string(), Arc::clone(&t));
    schema.keyspaces.insert(keyspace.into(), Arc::new(ks));
    Ok(Some((
        SchemaChange {
            change: ChangeKind::Updated,
            target: ChangeTarget::Table(keyspace.into(), table_name.into()),
        },
        t,
        index,
    )))
}

/// Removes a secondary index by name; returns the change and the dropped index.
pub fn drop_index(
    schema: &mut Schema,
    keyspace: &str,
    name: &str,
    if_exists: bool,
) -> Result<Option<(SchemaChange, crate::schema::IndexDef)>, SchemaError> {
    check_not_system(schema, keyspace)?;
    // DropIndexStatement: a missing keyspace is a missing index (IF EXISTS: a no-op). The
    // message ends with a stray quote in Cassandra 5.0 too.
    let found = schema.keyspace(keyspace).cloned().and_then(|ks| {
        let table = ks
            .tables
            .values()
            .find(|t| t.indexes.iter().any(|i| i.name == name))
            .cloned()?;
        Some((ks, table))
    });
    let Some((ks, table)) = found else {
        if if_exists {
            return Ok(None);
        }
        return Err(invalid(format!("Index '{keyspace}.{name}' doesn't exist'")));
    };
    let mut t = (*table).clone();
    let pos = t
        .indexes
        .iter()
        .position(|i| i.name == name)
        .expect("found above");
    let index = t.indexes.remove(pos);
    let table_name = t.name.clone();
    let mut ks = (*ks).clone();
    ks.tables.insert(table_name.clone(), Arc::new(t));
    schema.keyspaces.insert(keyspace.into(), Arc::new(ks));
    Ok(Some((
        SchemaChange {
            change: ChangeKind::Updated,
            target: ChangeTarget::Table(keyspace.into(), table_name),
        },
        index,
    )))
}
