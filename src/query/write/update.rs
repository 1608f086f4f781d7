//! UPDATE: the WHERE check shared with DELETE, and the mutations of the SET assignments
//! (values, collection and counter operations, UDT fields).

use super::*;

/// Checks that a WHERE clause of UPDATE/DELETE (`kind`) restricts only primary key columns
/// with = / IN, in StatementRestrictions' order and words (CONTAINS on a non-collection is
/// refused as the relation is prepared, before the statement's rules).
pub(super) fn check_write_where(table: &TableDef, rels: &[Relation], kind: &str) -> Result<()> {
    for r in rels {
        match &r.lhs {
            RelationLhs::Column(c) => {
                let col = crate::query::require_column(table, c)?;
                let ty = col.ty.unfrozen();
                if r.op == Operator::Contains
                    && !matches!(ty, CqlType::List(_) | CqlType::Set(_) | CqlType::Map(..))
                {
                    return Err(invalid(format!(
                        "Cannot use CONTAINS on non-collection column {c}"
                    )));
                }
                if r.op == Operator::ContainsKey && !matches!(ty, CqlType::Map(..)) {
                    return Err(invalid(format!(
                        "Cannot use CONTAINS KEY on non-map column {c}"
                    )));
                }
                if !matches!(col.kind, ColumnKind::PartitionKey | ColumnKind::Clustering) {
                    return Err(invalid(
                        format!("Non PRIMARY KEY columns found in where clause: {c} ")
                            .trim_end()
                            .to_string(),
                    ));
                }
                if col.kind == ColumnKind::PartitionKey
                    && !matches!(r.op, Operator::Eq | Operator::In)
                {
                    return Err(invalid(format!(
                        "Only EQ and IN relation are supported on the partition key (unless you use the token() function) for {kind} statements"
                    )));
                }
            }
            RelationLhs::Token(_) => {
                return Err(invalid(format!(
                    "The token function cannot be used in WHERE clauses for {kind} statements"
                )))
            }
            _ => {}
        }
    }
    Ok(())
}

pub(super) fn update_mutations(
    table: &Arc<TableDef>,
    up: &crate::cql::ast::Update,
    ctx: &Ctx,
    ts: i64,
) -> Result<Vec<Mutation>> {
    if up.conditions.is_some() {
        return Err(invalid("Conditional updates are not supported yet"));
    }
    check_write_where(table, &up.where_clause, "UPDATE")?;
    let p = using_params(table, &up.using, ctx, ts)?;
    let mut cells = RowData::default();
    let mut static_cells = RowData::default();
    if table.is_counter_table() {
        if up.using.ttl.is_some() {
            return Err(invalid("Cannot provide custom TTL for counter updates"));
        }
        if up.using.timestamp.is_some() {
            return Err(invalid(
                "Cannot provide custom timestamp for counter updates",
            ));
        }
    }
    for a in &up.assignments {
        let column = a.column();
        let col = crate::query::require_column(table, column)?;
        if matches!(col.kind, ColumnKind::PartitionKey | ColumnKind::Clustering) {
            return Err(invalid(format!(
                "PRIMARY KEY part {column} found in SET part"
            )));
        }
        let target = if col.kind == ColumnKind::Static {
            &mut static_cells
        } else {
            &mut cells
        };
        assign(target, col, a, ctx, &p)?;
    }
    sort_update(&mut cells);
    sort_update(&mut static_cells);
    let pks = partition_keys(
        table,
        key_values(table, &up.where_clause, ctx, &table.partition_key)?,
    )?;
    let ck = Restricted::from_where(table, &up.where_clause, ctx)?;
    if !ck.bounds.is_empty() {
        return Err(invalid(
            "Slice restrictions are not supported on the clustering columns in UPDATE statements",
        ));
    }
    let mut out = Vec::new();
    let has_static = !static_cells.cells.is_empty()
        || !static_cells.complex.is_empty()
        || !static_cells.pending.is_empty();
    let need_rows = !cells.cells.is_empty()
        || !cells.complex.is_empty()
        || !cells.pending.is_empty()
        || !has_static;
    let cks = if need_rows {
        let missing = ck.missing(table);
        if !missing.is_empty() {
            return Err(invalid(format!(
                "Some clustering keys are missing: {}",
                missing.join(", ")
            )));
        }
        ck.prefixes
    } else {
        Vec::new()
    };
    for pk in pks {
        for ck in &cks {
            out.push(Mutation::row(table, pk.clone(), ck, cells.clone()));
        }
        if has_static {
            out.push(Mutation::header(table, pk.clone(), static_cells.clone()));
        }
    }
    Ok(out)
}

/// The elements of a collection value `v` of type `ty` (list/set elements or map keys).
pub(super) fn items_of(v: &Bytes) -> Vec<Bytes> {
    value::collection_elements(v)
        .map(|it| {
            it.filter_map(|r| r.ok().flatten())
                .map(|e| v.slice_ref(e))
                .collect()
        })
        .unwrap_or_default()
}

pub(super) fn op_text(a: &Assignment) -> String {
    match a {
        Assignment::Set { column, .. } => format!("{column} = ?"),
        Assignment::SetElement { column, .. } => format!("{column}[?] = ?"),
        Assignment::SetField { column, field, .. } => format!("{column}.{field} = ?"),
        Assignment::Append { column, .. } => format!("{column} = {column} + ?"),
        Assignment::Prepend { column, .. } => format!("{column} = ? + {column}"),
        Assignment::Remove { column, .. } => format!("{column} = {column} - ?"),
    }
}

/// Adds one assignment of UPDATE to `upd`.
pub(super) fn assign(
    upd: &mut RowData,
    col: &ColumnDef,
    a: &Assignment,
    ctx: &Ctx,
    p: &WriteParams,
) -> Result<()> {
    let name = &col.name;
    let ep = elem_params(p);
    let multi = col.ty.is_multi_cell();
    let bad_op = |what: &str| {
        invalid(format!(
            "Invalid operation ({}) for {what} column {name}",
            op_text(a)
        ))
    };
    match a {
        Assignment::Set { value, .. } => {
            if col.ty.is_counter() {
                return Err(invalid(format!(
                    "Cannot set the value of counter column {name} (counters can only be incremented/decremented, not set)"
                )));
            }
            let v = eval(value, &col.ty, name, ctx)?;
            put_column(upd, col, v, p);
        }
        Assignment::Append { value, .. } | Assignment::Remove { value, .. }
            if col.ty.is_counter() =>
        {
            let delta = match eval(value, &CqlType::Bigint, name, ctx)? {
                Val::Value(b) if b.len() == 8 => {
                    i64::from_be_bytes(b[..].try_into().expect("8 bytes"))
                }
                Val::Unset => return Ok(()),
                _ => return Err(invalid("Invalid null value for counter increment")),
            };
            let delta = if matches!(a, Assignment::Remove { .. }) {
                delta.wrapping_neg()
            } else {
                delta
            };
            upd.pending.push(Pending::CounterAdd {
                col: col.id,
                delta,
                timestamp_micros: p.timestamp_micros,
            });
        }
        Assignment::Append { value, .. } | Assignment::Prepend { value, .. } => {
            let prepend = matches!(a, Assignment::Prepend { .. });
            if !multi || matches!(col.ty, CqlType::Udt(_)) {
                return Err(bad_op(if col.ty.is_collection() {
                    "frozen collection"
                } else if prepend {
                    "non list"
                } else {
                    "non counter"
                }));
            }
            if prepend && !matches!(col.ty, CqlType::List(_)) {
                return Err(bad_op("non list"));
            }
            let Val::Value(v) = eval(value, &col.ty, name, ctx)? else {
                return Ok(());
            };
            let elems = match &col.ty {
                CqlType::List(_) => complex::list_elems(items_of(&v), prepend, &ep),
                _ => complex::elems_of_value(&col.ty, &v, &ep),
            };
            put_elems(upd, col.id, elems);
        }
        Assignment::Remove { value, .. } => {
            if !multi || matches!(col.ty, CqlType::Udt(_)) {
                return Err(bad_op(if col.ty.is_collection() {
                    "frozen collection"
                } else {
                    "non counter"
                }));
            }
            match &col.ty {
                CqlType::List(_) => {
                    if let Val::Value(v) = eval(value, &col.ty, name, ctx)? {
                        upd.pending.push(Pending::ListRemove {
                            col: col.id,
                            values: items_of(&v),
                            timestamp_micros: p.timestamp_micros,
                        });
                    }
                }
                CqlType::Set(et) | CqlType::Map(et, _) => {
                    let set_ty = CqlType::Set(et.clone());
                    if let Val::Value(v) = eval(value, &set_ty, name, ctx)? {
                        let elems = items_of(&v)
                            .iter()
                            .map(|k| ep.elem(complex::key_path(et, k), None))
                            .collect();
                        put_elems(upd, col.id, elems);
                    }
                }
                _ => {}
            }
        }
        Assignment::SetElement { key, value, .. } => match &col.ty {
            CqlType::Map(kt, vt) => {
                let k = match eval(key, kt, name, ctx)? {
                    Val::Value(k) => k,
                    Val::Null => return Err(invalid("Invalid null map key")),
                    Val::Unset => return Err(invalid("Invalid unset map key")),
                };
                let v = match eval(value, vt, name, ctx)? {
                    Val::Value(v) => Some(v),
                    Val::Null => None,
                    Val::Unset => return Ok(()),
                };
                put_elems(upd, col.id, vec![ep.elem(complex::key_path(kt, &k), v)]);
            }
            CqlType::List(et) => {
                let index = match eval(key, &CqlType::Int, name, ctx)? {
                    Val::Value(b) if b.len() == 4 => {
                        i32::from_be_bytes(b[..].try_into().expect("4 bytes")) as i64
                    }
                    Val::Unset => return Err(invalid("Invalid unset value for list index")),
                    _ => return Err(invalid("Invalid null value for list index")),
                };
                let v = match eval(value, et, name, ctx)? {
                    Val::Value(v) => Some(v),
                    Val::Null => None,
                    Val::Unset => return Ok(()),
                };
                upd.pending.push(Pending::ListSet {
                    col: col.id,
                    index,
                    value: v,
                    timestamp_micros: p.timestamp_micros,
                    ttl_secs: p.ttl_secs,
                    expiry_ms: p.expiry_ms,
                });
            }
            _ => {
                return Err(invalid(format!(
                    "Invalid operation ({}) for {} column {name}",
                    op_text(a),
                    if col.ty.is_collection() {
                        "frozen collection"
                    } else {
                        "non list/map"
                    }
                )))
            }
        },
        Assignment::SetField { field, value, .. } => {
            let what = format!("operation ({})", op_text(a));
            let (i, fty) = udt_field(col, field, &what)?;
            let v = match eval(value, fty, name, ctx)? {
                Val::Value(v) => Some(v),
                Val::Null => None,
                Val::Unset => return Ok(()),
            };
            put_elems(upd, col.id, vec![ep.elem(complex::field_path(i), v)]);
        }
    }
    Ok(())
}
