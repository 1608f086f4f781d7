//! Row filters: the restrictions a read checks per row (column relations, CONTAINS, map
//! entries, multi-column tuples), and the value helpers (map entries, UDT fields, collection
//! membership) the filters and LWT conditions share.

use super::*;

/// A restriction evaluated per row.
pub(super) struct Filter {
    pub(super) col: usize,
    pub(super) op: Operator,
    pub(super) values: Vec<Bytes>,
    /// A multi-column restriction `(c1, c2) op (v1, v2)`: the columns (the first is `col`) and
    /// one tuple per value (several for IN).
    pub(super) tuple: Option<(Vec<usize>, Vec<Vec<Bytes>>)>,
    /// `m[k] = v`: `values` holds the key and the value of the map entry.
    pub(super) entry: bool,
}

/// Lexicographic comparison of a row's values with a tuple, column by column.
pub(super) fn compare_tuple(
    t: &TableDef,
    cols: &[usize],
    row: &[Option<&[u8]>],
    tuple: &[Bytes],
) -> Option<Ordering> {
    for ((&ci, v), x) in cols.iter().zip(row).zip(tuple) {
        let o = value::compare(&t.columns[ci].ty, (*v)?, x);
        if o != Ordering::Equal {
            return Some(o);
        }
    }
    Some(Ordering::Equal)
}

impl Filter {
    pub(super) fn matches_tuple(&self, t: &TableDef, row: &[Option<&[u8]>]) -> bool {
        let Some((cols, tuples)) = &self.tuple else {
            return false;
        };
        let cmp = |tuple: &Vec<Bytes>| compare_tuple(t, cols, row, tuple);
        match self.op {
            Operator::Eq | Operator::In => tuples.iter().any(|x| cmp(x) == Some(Ordering::Equal)),
            Operator::Lt => cmp(&tuples[0]) == Some(Ordering::Less),
            Operator::Le => matches!(cmp(&tuples[0]), Some(Ordering::Less | Ordering::Equal)),
            Operator::Gt => cmp(&tuples[0]) == Some(Ordering::Greater),
            Operator::Ge => matches!(cmp(&tuples[0]), Some(Ordering::Greater | Ordering::Equal)),
            _ => false,
        }
    }

    pub(super) fn matches(&self, ty: &CqlType, v: Option<&[u8]>) -> bool {
        let Some(v) = v else { return false };
        if self.entry {
            let CqlType::Map(kt, vt) = ty.unfrozen() else {
                return false;
            };
            return value::map_entries(v)
                .map(|es| {
                    es.iter().any(|(k, x)| {
                        value::compare(kt, k, &self.values[0]) == Ordering::Equal
                            && value::compare(vt, x, &self.values[1]) == Ordering::Equal
                    })
                })
                .unwrap_or(false);
        }
        match self.op {
            Operator::Eq | Operator::In => self
                .values
                .iter()
                .any(|x| value::compare(ty, v, x) == Ordering::Equal),
            Operator::Ne => self
                .values
                .iter()
                .all(|x| value::compare(ty, v, x) != Ordering::Equal),
            Operator::Lt => value::compare(ty, v, &self.values[0]) == Ordering::Less,
            Operator::Le => value::compare(ty, v, &self.values[0]) != Ordering::Greater,
            Operator::Gt => value::compare(ty, v, &self.values[0]) == Ordering::Greater,
            Operator::Ge => value::compare(ty, v, &self.values[0]) != Ordering::Less,
            Operator::Contains | Operator::ContainsKey => contains(ty, self.op, v, &self.values[0]),
            _ => false,
        }
    }
}

/// The value of the entry with key `key` (of type `kt`) in serialized map `v`.
pub(crate) fn map_value<'a>(kt: &CqlType, v: &'a [u8], key: &[u8]) -> Option<&'a [u8]> {
    value::map_entries(v)
        .ok()?
        .into_iter()
        .find(|(k, _)| value::compare(kt, k, key) == Ordering::Equal)
        .map(|(_, x)| x)
}

/// Field (component) `i` of a serialized UDT or tuple; None when null or absent.
pub(crate) fn field_value(v: &[u8], i: usize) -> Option<&[u8]> {
    value::tuple_components(v).ok()?.get(i).copied().flatten()
}

/// Whether collection `v` of type `ty` holds `x`: as an element of a list or set or a value of
/// a map (CONTAINS), or as a key of a map (CONTAINS KEY).
pub(crate) fn contains(ty: &CqlType, op: Operator, v: &[u8], x: &[u8]) -> bool {
    let same = |t: &CqlType, e: &[u8]| value::compare(t, e, x) == Ordering::Equal;
    match (op, ty.unfrozen()) {
        (Operator::Contains, CqlType::List(e) | CqlType::Set(e)) => value::collection_elements(v)
            .is_ok_and(|mut it| it.any(|i| i.ok().flatten().is_some_and(|i| same(e, i)))),
        (Operator::Contains, CqlType::Map(_, vt)) => {
            value::map_entries(v).is_ok_and(|es| es.iter().any(|(_, i)| same(vt, i)))
        }
        (Operator::ContainsKey, CqlType::Map(kt, _)) => {
            value::map_entries(v).is_ok_and(|es| es.iter().any(|(k, _)| same(kt, k)))
        }
        _ => false,
    }
}

/// The type CONTAINS (a list or set element, a map value) or CONTAINS KEY (a map key)
/// compares with; None for other operators and for types without one.
pub(crate) fn contains_operand(ty: &CqlType, op: Operator) -> Option<CqlType> {
    match (op, ty.unfrozen()) {
        (Operator::Contains, CqlType::List(e) | CqlType::Set(e) | CqlType::Map(_, e)) => {
            Some((**e).clone())
        }
        (Operator::ContainsKey, CqlType::Map(k, _)) => Some((**k).clone()),
        _ => None,
    }
}

/// The element type CONTAINS (or the key type CONTAINS KEY) compares with, or Cassandra's
/// error for a column that has none.
pub(crate) fn contains_type(col: &crate::schema::ColumnDef, op: Operator) -> Result<CqlType> {
    if let Some(t) = contains_operand(&col.ty, op) {
        return Ok(t);
    }
    match op {
        Operator::Contains => Err(invalid(format!(
            "Cannot use CONTAINS on non-collection column {}",
            col.name
        ))),
        _ => Err(invalid(format!(
            "Cannot use CONTAINS KEY on non-map column {}",
            col.name
        ))),
    }
}

/// Every column restriction as a row filter (virtual tables are filtered in memory).
pub(super) fn all_filters(t: &TableDef, sel: &Select, ctx: &Ctx) -> Result<Vec<Filter>> {
    let mut out = Vec::new();
    for r in &sel.where_clause {
        let RelationLhs::Column(name) = &r.lhs else {
            return Err(invalid(
                "Only column restrictions are supported on system tables",
            ));
        };
        let ci = column_index(t, name)?;
        let ty = &t.columns[ci].ty;
        let values = match r.op {
            Operator::In => in_values(&r.rhs, ty, name, ctx)?
                .into_iter()
                .filter_map(|v| v.bytes().cloned())
                .collect(),
            Operator::Eq
            | Operator::Ne
            | Operator::Lt
            | Operator::Le
            | Operator::Gt
            | Operator::Ge => {
                vec![eval_one(&r.rhs, ty, name, ctx)?]
            }
            other => {
                return Err(invalid(format!(
                    "Operator {} is not supported on system tables",
                    other.as_str()
                )))
            }
        };
        out.push(Filter {
            col: ci,
            op: r.op,
            values,
            tuple: None,
            entry: false,
        });
    }
    Ok(out)
}

/// `m[k] = v` on a map column: rows whose map holds that entry.
pub(super) fn entry_filter(
    t: &TableDef,
    c: &str,
    key: &Term,
    r: &Relation,
    ctx: &Ctx,
) -> Result<Filter> {
    let ci = column_index(t, c)?;
    let CqlType::Map(kt, vt) = t.columns[ci].ty.unfrozen() else {
        return Err(invalid(format!("Column {c} cannot be used as a map")));
    };
    if r.op != Operator::Eq {
        return Err(invalid(format!(
            "Only EQ relations are supported on map entries (column {c})"
        )));
    }
    Ok(Filter {
        col: ci,
        op: Operator::Eq,
        values: vec![eval_one(key, kt, c, ctx)?, eval_one(&r.rhs, vt, c, ctx)?],
        tuple: None,
        entry: true,
    })
}

/// A multi-column restriction `(c1, c2) op (v1, v2)` on consecutive clustering columns.
pub(super) fn tuple_filter(
    t: &TableDef,
    cols: &[String],
    r: &Relation,
    ctx: &Ctx,
) -> Result<Filter> {
    let (idx, tuples) = tuple_values(t, cols, r, ctx)?;
    Ok(Filter {
        col: idx[0],
        op: r.op,
        values: Vec::new(),
        tuple: Some((idx, tuples)),
        entry: false,
    })
}

/// The columns (indexes, in clustering order) and values of a multi-column relation
/// `(c1, c2) op (v1, v2)`: one tuple, or one per IN element; with Cassandra's errors for
/// columns that are not consecutive clustering columns and for malformed tuples.
pub(crate) fn tuple_values(
    t: &TableDef,
    cols: &[String],
    r: &Relation,
    ctx: &Ctx,
) -> Result<(Vec<usize>, Vec<Vec<Bytes>>)> {
    let idx: Vec<usize> = cols
        .iter()
        .map(|c| column_index(t, c))
        .collect::<Result<_>>()?;
    for (n, &ci) in idx.iter().enumerate() {
        let c = &t.columns[ci];
        if c.kind != ColumnKind::Clustering {
            return Err(invalid(format!(
                "Multi-column relations can only be applied to clustering columns but was applied to: {}",
                c.name
            )));
        }
        if n > 0 && c.position != t.columns[idx[n - 1]].position + 1 {
            return Err(invalid(
                "Clustering columns must appear in the PRIMARY KEY order in multi-column relations",
            ));
        }
    }
    let types: Vec<CqlType> = idx.iter().map(|&i| t.columns[i].ty.clone()).collect();
    let tuple_ty = CqlType::Tuple(types.clone());
    let name = format!("({})", cols.join(","));
    let one = |term: &Term| -> Result<Vec<Bytes>> {
        match term {
            Term::Tuple(items) if items.len() == types.len() => items
                .iter()
                .zip(&types)
                .zip(cols)
                .map(|((it, ty), c)| eval_one(it, ty, c, ctx))
                .collect(),
            Term::Tuple(items) => Err(invalid(format!(
                "Expected {} elements in value tuple, but got {}: {name}",
                types.len(),
                items.len()
            ))),
            other => {
                let b = eval_one(other, &tuple_ty, &name, ctx)?;
                let parts = value::tuple_components(&b)
                    .map_err(|e| invalid(format!("Invalid tuple value for {name}: {e}")))?;
                if parts.len() != types.len() {
                    return Err(invalid(format!("Invalid tuple value for {name}")));
                }
                parts
                    .into_iter()
                    .map(|p| {
                        p.map(Bytes::copy_from_slice).ok_or_else(|| {
                            invalid(format!("Invalid null value in tuple for {name}"))
                        })
                    })
                    .collect()
            }
        }
    };
    let tuples = match (r.op, &r.rhs) {
        (Operator::In, Term::List(items)) => items.iter().map(one).collect::<Result<Vec<_>>>()?,
        (Operator::In, other) => {
            let list_ty = CqlType::List(Box::new(tuple_ty.clone()));
            let b = eval_one(other, &list_ty, &name, ctx)?;
            let elems = crate::query::write::split_list(&b)
                .ok_or_else(|| invalid(format!("Invalid list value for IN on {name}")))?;
            elems
                .iter()
                .map(|e| {
                    value::tuple_components(e)
                        .map_err(|x| invalid(format!("Invalid tuple value for {name}: {x}")))?
                        .into_iter()
                        .map(|p| {
                            p.map(Bytes::copy_from_slice).ok_or_else(|| {
                                invalid(format!("Invalid null value in tuple for {name}"))
                            })
                        })
                        .collect::<Result<Vec<_>>>()
                })
                .collect::<Result<Vec<_>>>()?
        }
        (Operator::Eq | Operator::Lt | Operator::Le | Operator::Gt | Operator::Ge, term) => {
            vec![one(term)?]
        }
        (op, _) => {
            return Err(invalid(format!(
                "Unsupported operator {} in a multi-column relation",
                op.as_str()
            )))
        }
    };
    Ok((idx, tuples))
}
