//! DELETE: the mutations of whole rows, ranges, partitions, columns, collection elements and
//! UDT fields.

use super::*;

pub(super) fn delete_mutations(
    table: &Arc<TableDef>,
    del: &Delete,
    ctx: &Ctx,
    ts: i64,
) -> Result<Vec<Mutation>> {
    if del.conditions.is_some() {
        return Err(invalid("Conditional deletes are not supported yet"));
    }
    if del.using.ttl.is_some() {
        return Err(invalid("A DELETE statement cannot use TTL"));
    }
    check_write_where(table, &del.where_clause, "DELETE")?;
    let p = using_params(
        table,
        &Using {
            ttl: None,
            timestamp: del.using.timestamp.clone(),
        },
        ctx,
        ts,
    )?;
    let now = p.now_secs();
    let pks = partition_keys(
        table,
        key_values(table, &del.where_clause, ctx, &table.partition_key)?,
    )?;
    let ck = Restricted::from_where(table, &del.where_clause, ctx)?;
    // A range: a slice, or a prefix of the clustering columns (not all, not none).
    let is_range = !ck.bounds.is_empty() || (ck.len > 0 && ck.len < table.clustering.len());
    if is_range && !del.targets.is_empty() {
        return Err(invalid(
            "Range deletions are not supported for specific columns",
        ));
    }
    let mut cells = RowData::default();
    let mut static_cells = RowData::default();
    for t in &del.targets {
        let name = match t {
            DeleteTarget::Column(name)
            | DeleteTarget::Element(name, _)
            | DeleteTarget::Field(name, _) => name,
        };
        let col = crate::query::require_column(table, name)?;
        if matches!(col.kind, ColumnKind::PartitionKey | ColumnKind::Clustering) {
            return Err(invalid(format!(
                "Invalid identifier {name} for deletion (should not be a PRIMARY KEY part)"
            )));
        }
        let upd = if col.kind == ColumnKind::Static {
            &mut static_cells
        } else {
            &mut cells
        };
        delete_target(upd, col, t, ctx, &p, now)?;
    }
    sort_update(&mut cells);
    sort_update(&mut static_cells);
    let has_cells =
        !cells.cells.is_empty() || !cells.complex.is_empty() || !cells.pending.is_empty();
    let has_static = !static_cells.cells.is_empty()
        || !static_cells.complex.is_empty()
        || !static_cells.pending.is_empty();
    let mut out = Vec::new();
    // Range tombstones: clustering key byte ranges [lo, hi) of the partition's rows.
    let ranges: Vec<row::RangeTombstone> = if is_range {
        ck.ranges(table)
            .into_iter()
            .filter_map(|(lo, hi)| {
                let lo = match lo {
                    std::ops::Bound::Included(k) => k,
                    std::ops::Bound::Excluded(k) => row::prefix_successor_or_empty(k)?,
                    std::ops::Bound::Unbounded => Vec::new(),
                };
                let hi = match hi {
                    std::ops::Bound::Excluded(k) => Some(k),
                    std::ops::Bound::Included(k) => row::prefix_successor_or_empty(k),
                    std::ops::Bound::Unbounded => None,
                };
                if hi.as_ref().is_some_and(|h| *h <= lo) {
                    return None;
                }
                Some(row::RangeTombstone {
                    lo,
                    hi,
                    timestamp_micros: p.timestamp_micros,
                    deletion_secs: now,
                })
            })
            .collect()
    } else {
        Vec::new()
    };
    for pk in pks {
        if is_range {
            if !ranges.is_empty() {
                let update = RowData {
                    ranges: ranges.clone(),
                    ..Default::default()
                };
                out.push(Mutation::header(table, pk.clone(), update));
            }
        } else if ck.len == table.clustering.len() && (del.targets.is_empty() || has_cells) {
            for key in &ck.prefixes {
                let update = if del.targets.is_empty() {
                    RowData {
                        deletion: Some((p.timestamp_micros, now)),
                        ..Default::default()
                    }
                } else {
                    cells.clone()
                };
                out.push(Mutation::row(table, pk.clone(), key, update));
            }
        } else if del.targets.is_empty() {
            // The whole partition: a partition deletion in its header.
            let update = RowData {
                deletion: Some((p.timestamp_micros, now)),
                ..Default::default()
            };
            out.push(Mutation::header(table, pk.clone(), update));
        } else if has_cells {
            // Columns of every row of the partition: a range deletion, which Cassandra refuses
            // for specific columns.
            return Err(invalid(
                "Range deletions are not supported for specific columns",
            ));
        }
        if has_static {
            out.push(Mutation::header(table, pk.clone(), static_cells.clone()));
        }
    }
    Ok(out)
}

/// The position and type of `field` in non-frozen UDT column `col`, or Cassandra's errors
/// (`what` names the operation refused on a column that is not a non-frozen UDT).
pub(super) fn udt_field<'c>(
    col: &'c ColumnDef,
    field: &str,
    what: &str,
) -> Result<(usize, &'c CqlType)> {
    let name = &col.name;
    let CqlType::Udt(u) = &col.ty else {
        return Err(invalid(format!(
            "Invalid {what} for {} column {name}",
            if matches!(col.ty.unfrozen(), CqlType::Udt(_)) {
                "frozen UDT"
            } else {
                "non-UDT"
            }
        )));
    };
    match u.fields.iter().position(|(n, _)| n == field) {
        Some(i) => Ok((i, &u.fields[i].1)),
        None => Err(invalid(format!(
            "UDT column {name} does not have a field named {field}"
        ))),
    }
}

/// Adds the deletion of a column, collection element or UDT field to `upd`.
pub(super) fn delete_target(
    upd: &mut RowData,
    col: &ColumnDef,
    target: &DeleteTarget,
    ctx: &Ctx,
    p: &WriteParams,
    now: i32,
) -> Result<()> {
    let name = &col.name;
    let ep = ElemParams {
        timestamp_micros: p.timestamp_micros,
        ttl_secs: 0,
        expiry_ms: 0,
        now: i64::from(now) * 1000,
    };
    match target {
        DeleteTarget::Column(_) => {
            if col.ty.is_multi_cell() {
                upd.complex.push(ComplexCell {
                    col: col.id,
                    deletion: Some((p.timestamp_micros, now)),
                    elems: Vec::new(),
                });
            } else {
                upd.cells.push(Cell {
                    col: col.id,
                    timestamp_micros: p.timestamp_micros,
                    ttl_secs: 0,
                    expiry_ms: 0,
                    value: None,
                    deletion_secs: now,
                });
            }
        }
        DeleteTarget::Element(_, key) => match &col.ty {
            CqlType::Map(kt, _) | CqlType::Set(kt) => {
                let is_map = matches!(col.ty, CqlType::Map(..));
                let k = match eval(key, kt, name, ctx)? {
                    Val::Value(k) => k,
                    // Maps.DiscarderByKey refuses both; a set element left unset deletes nothing.
                    Val::Unset if is_map => return Err(invalid("Invalid unset map key")),
                    Val::Unset => return Ok(()),
                    Val::Null if is_map => return Err(invalid("Invalid null map key")),
                    Val::Null => return Err(invalid("Invalid null value for set element")),
                };
                put_elems(upd, col.id, vec![ep.elem(complex::key_path(kt, &k), None)]);
            }
            CqlType::List(_) => {
                let index = match eval(key, &CqlType::Int, name, ctx)? {
                    Val::Value(b) if b.len() == 4 => {
                        i32::from_be_bytes(b[..].try_into().expect("4 bytes")) as i64
                    }
                    Val::Unset => return Ok(()),
                    _ => return Err(invalid("Invalid null value for list index")),
                };
                upd.pending.push(Pending::ListSet {
                    col: col.id,
                    index,
                    value: None,
                    timestamp_micros: p.timestamp_micros,
                    ttl_secs: 0,
                    expiry_ms: 0,
                });
            }
            _ => {
                return Err(invalid(format!(
                    "Invalid deletion operation for {} column {name}",
                    if col.ty.is_collection() {
                        "frozen collection"
                    } else {
                        "non-collection"
                    }
                )))
            }
        },
        DeleteTarget::Field(_, field) => {
            let (i, _) = udt_field(col, field, "deletion operation")?;
            put_elems(upd, col.id, vec![ep.elem(complex::field_path(i), None)]);
        }
    }
    Ok(())
}
