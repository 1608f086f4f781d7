//! INSERT (VALUES and JSON): the mutations of one statement.

use super::*;
use smallvec::SmallVec;

/// The values of a key's columns, in key order (None: not given).
type KeyParts = SmallVec<[Option<Bytes>; 4]>;

pub(super) fn insert_mutations(
    table: &Arc<TableDef>,
    ins: &Insert,
    ctx: &Ctx,
    ts: i64,
) -> Result<Vec<Mutation>> {
    reject_counter_table(table, "INSERT")?;
    if ins.if_not_exists {
        return Err(invalid(
            "Conditional updates (IF NOT EXISTS) are not supported yet",
        ));
    }
    let pairs: SmallVec<[(&ColumnDef, Val); 4]> = match &ins.values {
        InsertValues::Values { columns, values } => {
            if columns.len() != values.len() {
                return Err(invalid(format!(
                    "Unmatched column names/values: {} columns but {} values",
                    columns.len(),
                    values.len()
                )));
            }
            let mut pairs = SmallVec::with_capacity(columns.len());
            for (i, (name, term)) in columns.iter().zip(values).enumerate() {
                if columns[..i].contains(name) {
                    return Err(invalid(format!(
                        "Multiple definitions found for column {name}"
                    )));
                }
                let col = crate::query::require_column(table, name)?;
                pairs.push((col, eval(term, &col.ty, name, ctx)?));
            }
            pairs
        }
        InsertValues::Json {
            value,
            default_unset,
        } => SmallVec::from_vec(json_pairs(table, value, *default_unset, ctx)?),
    };
    let p = using_params(table, &ins.using, ctx, ts)?;
    // One value per key column (an INSERT names each once): inline lists, no allocation for
    // keys of up to four columns.
    let mut pk_vals: KeyParts = smallvec::smallvec![None; table.partition_key.len()];
    let mut ck_vals: KeyParts = smallvec::smallvec![None; table.clustering.len()];
    // One cell per regular column given, at most.
    let mut cells = RowData {
        cells: Vec::with_capacity(pairs.len()),
        ..RowData::default()
    };
    let mut static_cells = RowData::default();
    for (col, v) in pairs {
        let name = &col.name;
        match col.kind {
            ColumnKind::PartitionKey => {
                let v = match v {
                    Val::Null => {
                        return Err(invalid(format!(
                            "Invalid null value in condition for column {name}"
                        )))
                    }
                    other => key_value(other, col)?,
                };
                pk_vals[col.position] = Some(v);
            }
            ColumnKind::Clustering => {
                ck_vals[col.position] = Some(key_value(v, col)?);
            }
            ColumnKind::Regular => put_column(&mut cells, col, v, &p),
            ColumnKind::Static => put_column(&mut static_cells, col, v, &p),
        }
    }
    let has_static = !static_cells.cells.is_empty() || !static_cells.complex.is_empty();
    // Only static columns and no clustering key: the write goes to the static row alone.
    let need_row = !has_static
        || table.clustering.is_empty()
        || ck_vals.iter().any(Option::is_some)
        || !cells.cells.is_empty()
        || !cells.complex.is_empty();
    let ck: Option<Vec<Bytes>> = if need_row {
        require_all(table, &table.clustering, &ck_vals, "clustering keys")?;
        Some(ck_vals.into_iter().flatten().collect())
    } else {
        None
    };
    require_all(table, &table.partition_key, &pk_vals, "partition key parts")?;
    let pk_parts: SmallVec<[Bytes; 4]> = pk_vals.into_iter().flatten().collect();
    let pk = partition_key_of(&pk_parts)?;
    sort_update(&mut cells);
    sort_update(&mut static_cells);
    // An INSERT names one partition (no IN): a row write, a header write, or both.
    let mut out = Vec::with_capacity(ck.is_some() as usize + has_static as usize);
    // The key moves into the mutations (a clone of a key built from a Vec allocates the
    // shared header both copies then count on): into the row's, or the header's if any.
    let (row_pk, header_pk) = match has_static {
        true => (pk.clone(), Some(pk)),
        false => (pk, None),
    };
    if let Some(ck) = &ck {
        let marker = Some(Marker {
            timestamp_micros: p.timestamp_micros,
            ttl_secs: p.ttl_secs,
            expiry_ms: p.expiry_ms,
        });
        let row = RowData {
            marker,
            deletion: None,
            ..cells
        };
        out.push(Mutation::row(table, row_pk, ck, row));
    }
    if let Some(pk) = header_pk {
        out.push(Mutation::header(table, pk, static_cells));
    }
    Ok(out)
}

/// The columns and values of `INSERT JSON`: every column of the table, those missing from the
/// object null (DEFAULT NULL) or left alone (DEFAULT UNSET).
pub(super) fn json_pairs<'t>(
    table: &'t TableDef,
    value: &Term,
    default_unset: bool,
    ctx: &Ctx,
) -> Result<Vec<(&'t ColumnDef, Val)>> {
    let text = match eval(value, &CqlType::Text, "[json]", ctx)? {
        Val::Value(b) => String::from_utf8(b.to_vec()).map_err(|_| invalid("Invalid JSON"))?,
        _ => return Err(invalid("Got null for INSERT JSON values")),
    };
    let obj: serde_json::Map<String, serde_json::Value> = match serde_json::from_str(&text) {
        Ok(serde_json::Value::Object(m)) => m,
        Ok(_) => {
            return Err(invalid(format!(
                "Could not decode JSON string as a map: {text}"
            )))
        }
        Err(e) => {
            return Err(invalid(format!(
                "Could not decode JSON string as a map: {e}. (String was: {text})"
            )))
        }
    };
    let mut given: Vec<(String, &serde_json::Value)> = Vec::with_capacity(obj.len());
    for (k, v) in &obj {
        let name = match k.strip_prefix('"').and_then(|x| x.strip_suffix('"')) {
            Some(quoted) => quoted.replace("\"\"", "\""),
            None => k.to_lowercase(),
        };
        if table.column(&name).is_none() {
            return Err(invalid(format!(
                "JSON values map contains unrecognized column: {k}"
            )));
        }
        given.push((name, v));
    }
    let mut pairs = Vec::with_capacity(table.columns.len());
    for col in &table.columns {
        let v = match given.iter().find(|(n, _)| *n == col.name) {
            Some((_, j)) => match value::from_json(&col.ty, j) {
                Ok(b) => {
                    value::validate(&col.ty, &b).map_err(|e| {
                        invalid(format!("Error decoding JSON value for {}: {e}", col.name))
                    })?;
                    Val::Value(Bytes::from(b))
                }
                Err(value::ValueError::Null(_)) => Val::Null,
                Err(e) => {
                    return Err(invalid(format!(
                        "Error decoding JSON value for {}: {}",
                        col.name,
                        e.for_column(&col.name)
                    )))
                }
            },
            None if default_unset => Val::Unset,
            None => Val::Null,
        };
        if matches!(v, Val::Unset) && !matches!(col.kind, ColumnKind::PartitionKey) {
            continue;
        }
        pairs.push((col, v));
    }
    Ok(pairs)
}
