//! Planning a SELECT: where to read (named partitions, a token range, an index), which
//! clustering slices, what to filter, GROUP BY columns, and whether an index serves the query.

use super::*;

/// GROUP BY columns: a prefix of the primary key (partition key columns, then clustering columns,
/// in order).
pub(super) fn group_by_columns(t: &TableDef, sel: &Select) -> Result<Vec<usize>> {
    let key_order: Vec<usize> = t
        .partition_key
        .iter()
        .chain(&t.clustering)
        .copied()
        .collect();
    let mut out = Vec::with_capacity(sel.group_by.len());
    for (n, name) in sel.group_by.iter().enumerate() {
        let i = column_index(t, name)?;
        if key_order.get(n) != Some(&i) {
            return Err(invalid(
                "Group by currently only support groups of columns following their declared order in the PRIMARY KEY",
            ));
        }
        out.push(i);
    }
    if !out.is_empty() && out.len() < t.partition_key.len() {
        return Err(invalid(format!(
            "Group by is not supported on only a part of the partition key (missing {})",
            t.partition_key[out.len()..]
                .iter()
                .map(|&i| t.columns[i].name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    Ok(out)
}

/// Where to read: named partitions, or a token range (lo exclusive, hi inclusive).
pub(super) enum Target {
    Partitions(Vec<Bytes>),
    Range(i128, i128),
    /// Several token ranges (lo exclusive, hi inclusive), sorted and disjoint: the ranges of the
    /// key prefixes a query gives on a hierarchical (MultiHash) table.
    Ranges(Vec<(i128, i128)>),
    /// The rows a secondary index lists for one value, within a token range.
    Index {
        index: crate::schema::IndexDef,
        ty: CqlType,
        value: Bytes,
        lo: i128,
        hi: i128,
    },
}

pub(super) struct Plan {
    pub(super) target: Target,
    /// Key range of rows inside a partition (relative to the partition prefix + KIND_ROW).
    pub(super) slices: Vec<KeyRange>,
    pub(super) filters: Vec<Filter>,
    pub(super) limit: Option<usize>,
    pub(super) reversed: bool,
    /// Whether a partition with no matching row yields its static-only row: Cassandra does so
    /// only when the query selects whole partitions (no restriction on clustering or regular
    /// columns) or is DISTINCT.
    pub(super) static_rows: bool,
    /// Each slice names one whole row key: its lower bound is `Included(key)` and no other
    /// key lies in it (every clustering column restricted by = / IN, each of a type whose key
    /// has no suffix, or no clustering columns at all). A partition read then looks the keys
    /// up one by one (`select::points`) instead of scanning.
    pub(super) points: bool,
    /// The token of each partition `Target::Partitions` names, in its order (empty for other
    /// targets): computed once here, as admission, routing, reading and the heat record each
    /// need it (a murmur3 hash of the key each time cost about 1.5% of a point read).
    pub(super) tokens: Vec<Token>,
}

/// Cassandra's `queriesFullPartitions` (or DISTINCT): no relation names a clustering column or
/// a regular (non-static) column.
pub(super) fn selects_whole_partitions(t: &TableDef, sel: &Select) -> bool {
    if sel.distinct {
        return true;
    }
    !sel.where_clause.iter().any(|r| match &r.lhs {
        RelationLhs::Tuple(_) => true,
        RelationLhs::Column(c) | RelationLhs::Element(c, _) => t
            .column(c)
            .is_some_and(|c| matches!(c.kind, ColumnKind::Clustering | ColumnKind::Regular)),
        RelationLhs::Token(_) | RelationLhs::Function(_) => false,
    })
}

/// The values of `c IN (...)`: nulls match nothing; an unset element is refused, as
/// Cassandra's `checkBindValueSet` does for each value of the list.
fn in_list(rhs: &Term, ty: &CqlType, name: &str, ctx: &Ctx) -> Result<Vec<Bytes>> {
    let mut out = Vec::new();
    for v in in_values(rhs, ty, name, ctx)? {
        match v {
            Val::Value(b) => out.push(b),
            Val::Null => {}
            Val::Unset => return Err(invalid(format!("Invalid unset value for column {name}"))),
        }
    }
    Ok(out)
}

pub(super) fn eval_one(term: &Term, ty: &CqlType, name: &str, ctx: &Ctx) -> Result<Bytes> {
    eval_unset_as(term, ty, name, ctx, || {
        format!("Invalid unset value for column {name}")
    })
}

/// [`eval_one`] with the error an unset value gets from the caller (Cassandra words it by
/// where the value is: a tuple field, a whole tuple, a whole IN list).
pub(super) fn eval_unset_as(
    term: &Term,
    ty: &CqlType,
    name: &str,
    ctx: &Ctx,
    unset: impl FnOnce() -> String,
) -> Result<Bytes> {
    match eval(term, ty, name, ctx)? {
        Val::Value(b) => Ok(b),
        Val::Null => Err(invalid(format!(
            "Invalid null value in condition for column {name}"
        ))),
        Val::Unset => Err(invalid(unset())),
    }
}

/// Plans `sel` on `t` for one request; `shape` is its bind-independent part, which also
/// checked the WHERE clause's rules that need no values (`shape_of`).
pub(super) fn plan(t: &TableDef, sel: &Select, ctx: &Ctx, shape: &Shape) -> Result<Plan> {
    if let Some(point) = &shape.point {
        return point.plan(t, sel, ctx, shape.static_rows);
    }
    let mut need_filtering = false;
    // Validate every relation first.
    let (token, tuple_filters, entry_filters) = check_relations(t, sel, ctx)?;
    // Partition key: all components by = / IN.
    let pk_vals = key_values(t, &sel.where_clause, ctx, &t.partition_key)?;
    let target = read_target(t, sel, pk_vals, &token, &mut need_filtering)?;
    // Clustering: = / IN on a prefix, then at most one slice column.
    let single_partition = matches!(target, Target::Partitions(_));
    let (prefix_vals, slice_col) = clustering_access(t, sel, ctx)?;
    let used_ck = prefix_vals.len() + usize::from(slice_col.is_some());
    // Everything not used for key access becomes a filter.
    let mut filters = column_filters(t, sel, ctx, single_partition, used_ck, &mut need_filtering)?;
    if !single_partition && (used_ck > 0 || !tuple_filters.is_empty()) {
        need_filtering = true;
    }
    if let Some(f) = tuple_filters.first() {
        // A multi-column restriction must follow the clustering columns restricted before it.
        let first = t.columns[f.col].position;
        if first > used_ck {
            need_filtering = true;
        }
    }
    filters.extend(tuple_filters);
    if !entry_filters.is_empty() {
        need_filtering = true;
    }
    filters.extend(entry_filters);
    let (target, need_filtering) = use_index(
        t,
        target,
        &filters,
        need_filtering,
        single_partition,
        sel.allow_filtering,
    );
    if need_filtering && !sel.allow_filtering {
        return Err(invalid(FILTERING_MSG));
    }
    let slices = if single_partition {
        clustering_slices(t, &prefix_vals, slice_col.as_ref())
    } else {
        vec![(Bound::Unbounded, Bound::Unbounded)]
    };
    let limit = limit_value(sel.limit.as_ref(), "[limit]", "LIMIT", ctx)?;
    let reversed = reversed_order(t, sel, single_partition)?;
    let points =
        single_partition && names_whole_rows(t, prefix_vals.len(), slice_col.is_some(), &slices);
    let tokens = match &target {
        Target::Partitions(keys) => keys.iter().map(|k| table_token(t, k)).collect(),
        _ => Vec::new(),
    };
    Ok(Plan {
        target,
        slices,
        filters,
        limit,
        reversed,
        static_rows: shape.static_rows,
        points,
        tokens,
    })
}

/// `Plan::points` of a single-partition read with `prefix_len` clustering columns given by
/// = / IN and `slices` from them. A row key is the order parts of its clustering values then
/// their suffixes; a key without suffixes that names every column is a whole key, and another
/// stored serialization of equal values would be the same bytes.
pub(super) fn names_whole_rows(
    t: &TableDef,
    prefix_len: usize,
    has_slice: bool,
    slices: &[KeyRange],
) -> bool {
    !has_slice
        && prefix_len == t.clustering.len()
        && t.clustering_columns()
            .all(|c| value::key_has_no_suffix(&c.ty))
        && slices
            .iter()
            .all(|(lo, _)| matches!(lo, Bound::Included(_)))
}

/// The token range `token(...)` relations restrict to (lo exclusive, hi inclusive).
struct TokenBounds {
    lo: i128,
    hi: i128,
    /// Whether any relation is on `token(...)`.
    given: bool,
}

/// Checks every relation (columns exist, token() relations are well formed), and gathers the
/// token bounds and the multi-column and collection-element filters.
fn check_relations(
    t: &TableDef,
    sel: &Select,
    ctx: &Ctx,
) -> Result<(TokenBounds, Vec<Filter>, Vec<Filter>)> {
    let mut bounds = TokenBounds {
        lo: MIN_TOKEN as i128 - 1,
        hi: MAX_TOKEN as i128,
        given: false,
    };
    let mut tuple_filters: Vec<Filter> = Vec::new();
    let mut entry_filters: Vec<Filter> = Vec::new();
    for r in &sel.where_clause {
        match &r.lhs {
            RelationLhs::Column(c) => {
                column_index(t, c)?;
            }
            RelationLhs::Function(f) => {
                return Err(invalid(format!(
                    "Unknown function {f}() in a WHERE relation"
                )));
            }
            RelationLhs::Token(cols) => token_relation(t, cols, r, ctx, &mut bounds)?,
            RelationLhs::Tuple(cols) => tuple_filters.push(tuple_filter(t, cols, r, ctx)?),
            RelationLhs::Element(c, key) => entry_filters.push(entry_filter(t, c, key, r, ctx)?),
        }
    }
    Ok((bounds, tuple_filters, entry_filters))
}

/// Narrows `bounds` by one `token(cols) <op> value` relation.
fn token_relation(
    t: &TableDef,
    cols: &[String],
    r: &Relation,
    ctx: &Ctx,
    bounds: &mut TokenBounds,
) -> Result<()> {
    let pk: Vec<&str> = t.pk_columns().map(|c| c.name.as_str()).collect();
    if cols.iter().map(String::as_str).collect::<Vec<_>>() != pk {
        return Err(invalid(format!(
            "The token function arguments must be in the partition key order: {}",
            pk.join(", ")
        )));
    }
    bounds.given = true;
    let v = match &r.rhs {
        // token(k1, k2) > token(?, ?): the token of a partition key given as terms
        Term::Function { name, args, .. } if name == "token" => {
            let pk_cols: Vec<_> = t.pk_columns().collect();
            if args.len() != pk_cols.len() {
                return Err(invalid(format!(
                    "Invalid number of arguments in call to function system.token: {} required but {} provided",
                    pk_cols.len(),
                    args.len()
                )));
            }
            let mut parts = Vec::with_capacity(args.len());
            for (a, c) in args.iter().zip(&pk_cols) {
                parts.push(eval_one(a, &c.ty, &c.name, ctx)?);
            }
            let refs: Vec<&[u8]> = parts.iter().map(|p| &p[..]).collect();
            let pk = partition_key_bytes(&refs);
            Bytes::copy_from_slice(&table_token(t, &pk).to_be_bytes())
        }
        other => eval_one(other, &CqlType::Bigint, "partition key token", ctx)?,
    };
    let tok = i64::from_be_bytes(
        v[..]
            .try_into()
            .map_err(|_| invalid("Invalid token value"))?,
    ) as i128;
    match r.op {
        Operator::Gt => bounds.lo = bounds.lo.max(tok),
        Operator::Ge => bounds.lo = bounds.lo.max(tok - 1),
        Operator::Le => {
            // Cassandra: a range ending at the minimum token runs to the end of the ring.
            if tok != MIN_TOKEN as i128 {
                bounds.hi = bounds.hi.min(tok)
            }
        }
        Operator::Lt => bounds.hi = bounds.hi.min(tok - 1),
        Operator::Eq => {
            bounds.lo = bounds.lo.max(tok - 1);
            bounds.hi = bounds.hi.min(tok);
        }
        _ => {
            return Err(invalid(format!(
                "Unsupported operator {} on token()",
                r.op.as_str()
            )))
        }
    }
    Ok(())
}

/// Where to read: the named partitions when every partition key column is given by = / IN,
/// the token ranges of a hierarchical key prefix, else a token range (maybe filtering).
fn read_target(
    t: &TableDef,
    sel: &Select,
    pk_vals: Vec<Option<Vec<Bytes>>>,
    token: &TokenBounds,
    need_filtering: &mut bool,
) -> Result<Target> {
    let pk_given = pk_vals.iter().filter(|v| v.is_some()).count();
    if pk_given == t.partition_key.len() {
        if token.given {
            return Err(invalid(
                "Columns of the partition key cannot be restricted by both token() and = or IN",
            ));
        }
        return Ok(Target::Partitions(named_partitions(t, pk_vals)?));
    }
    if let Some(ranges) = multihash_prefix_ranges(t, &pk_vals, token.lo, token.hi) {
        // A prefix of a hierarchical key: only the token ranges holding it are read; the given
        // levels are re-checked per row (hashes of different prefixes can share a range).
        return Ok(Target::Ranges(ranges));
    }
    if pk_given > 0 {
        // Cassandra: a restriction an index can serve makes a partial partition key a filter
        // of the index query (use_index decides whether it still needs ALLOW FILTERING).
        // Cassandra 4 and 5 answer a partial partition key with the plain filtering message
        // (3.x named the parts: "Partition key parts: b must be restricted as other parts are").
        if !sel.allow_filtering && !restricts_indexed_column(t, sel) {
            return Err(invalid(FILTERING_MSG));
        }
        *need_filtering = true;
    }
    Ok(Target::Range(token.lo, token.hi))
}

/// Whether a single-column relation names a column with a secondary index.
fn restricts_indexed_column(t: &TableDef, sel: &Select) -> bool {
    sel.where_clause.iter().any(|r| match &r.lhs {
        RelationLhs::Column(c) => t.indexes.iter().any(|x| x.column == *c),
        _ => false,
    })
}

/// The partition keys of every combination of the given values, in partition key order.
fn named_partitions(t: &TableDef, pk_vals: Vec<Option<Vec<Bytes>>>) -> Result<Vec<Bytes>> {
    let mut keys = Vec::new();
    let cols: Vec<Vec<Bytes>> = pk_vals.into_iter().map(|v| v.unwrap_or_default()).collect();
    let mut combos: Vec<Vec<Bytes>> = vec![Vec::new()];
    for vals in &cols {
        combos = combos
            .into_iter()
            .flat_map(|p| {
                vals.iter().map(move |v| {
                    let mut p = p.clone();
                    p.push(v.clone());
                    p
                })
            })
            .collect();
    }
    // Cassandra reads IN partitions in partition key order (by each component's comparator),
    // without duplicates.
    let pk_types: Vec<&CqlType> = t.pk_columns().map(|c| &c.ty).collect();
    combos.sort_by(|a, b| {
        a.iter()
            .zip(b)
            .zip(&pk_types)
            .map(|((x, y), ty)| value::compare(ty, x, y))
            .find(|o| o.is_ne())
            .unwrap_or(Ordering::Equal)
    });
    for parts in combos {
        let k = partition_key_of(&parts)?;
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    Ok(keys)
}

/// The clustering prefix given by = / IN (values per column), and the column after it
/// restricted by a slice with its bounds.
type ClusteringAccess = (Vec<Vec<Bytes>>, Option<(usize, Vec<(Operator, Bytes)>)>);

fn clustering_access(t: &TableDef, sel: &Select, ctx: &Ctx) -> Result<ClusteringAccess> {
    let mut prefix_vals: Vec<Vec<Bytes>> = Vec::new();
    let mut slice_col: Option<(usize, Vec<(Operator, Bytes)>)> = None;
    for &ci in &t.clustering {
        let col = &t.columns[ci];
        let rels: Vec<&Relation> = sel
            .where_clause
            .iter()
            .filter(|r| matches!(&r.lhs, RelationLhs::Column(c) if *c == col.name))
            .collect();
        if rels.is_empty() {
            break;
        }
        let eq = rels
            .iter()
            .find(|r| matches!(r.op, Operator::Eq | Operator::In));
        if let Some(r) = eq {
            if slice_col.is_some() {
                break;
            }
            let vals = if r.op == Operator::Eq {
                vec![eval_one(&r.rhs, &col.ty, &col.name, ctx)?]
            } else {
                in_list(&r.rhs, &col.ty, &col.name, ctx)?
            };
            prefix_vals.push(vals);
        } else {
            let mut bounds = Vec::new();
            for r in rels {
                if !matches!(
                    r.op,
                    Operator::Lt | Operator::Le | Operator::Gt | Operator::Ge
                ) {
                    continue;
                }
                bounds.push((r.op, eval_one(&r.rhs, &col.ty, &col.name, ctx)?));
            }
            slice_col = Some((ci, bounds));
            break;
        }
    }
    Ok((prefix_vals, slice_col))
}

/// The single-column relations not used for key access, as filters; sets `need_filtering`
/// where Cassandra asks for ALLOW FILTERING.
fn column_filters(
    t: &TableDef,
    sel: &Select,
    ctx: &Ctx,
    single_partition: bool,
    used_ck: usize,
    need_filtering: &mut bool,
) -> Result<Vec<Filter>> {
    let mut filters = Vec::new();
    for r in &sel.where_clause {
        let RelationLhs::Column(name) = &r.lhs else {
            continue;
        };
        let ci = column_index(t, name)?;
        let col = &t.columns[ci];
        let used = match col.kind {
            ColumnKind::PartitionKey => single_partition,
            ColumnKind::Clustering => col.position < used_ck && single_partition,
            _ => false,
        };
        if used {
            continue;
        }
        match col.kind {
            ColumnKind::Clustering if !single_partition => {}
            // A slice of a partition key column reads every partition (Cassandra: ALLOW
            // FILTERING); = / IN of hierarchical key levels are read through token ranges.
            ColumnKind::PartitionKey => {
                if !matches!(r.op, Operator::Eq | Operator::In) {
                    *need_filtering = true;
                }
            }
            _ => *need_filtering = true,
        }
        if col.kind == ColumnKind::Clustering && col.position >= used_ck {
            *need_filtering = true;
        }
        filters.push(Filter {
            col: ci,
            op: r.op,
            values: filter_values(r, col, name, ctx)?,
            tuple: None,
            entry: false,
        });
    }
    Ok(filters)
}

/// The values a single-column filter compares with.
fn filter_values(
    r: &Relation,
    col: &crate::schema::ColumnDef,
    name: &str,
    ctx: &Ctx,
) -> Result<Vec<Bytes>> {
    Ok(match r.op {
        Operator::In => in_list(&r.rhs, &col.ty, name, ctx)?,
        Operator::Eq | Operator::Ne | Operator::Lt | Operator::Le | Operator::Gt | Operator::Ge => {
            vec![eval_one(&r.rhs, &col.ty, name, ctx)?]
        }
        Operator::Contains | Operator::ContainsKey => {
            vec![eval_one(&r.rhs, &contains_type(col, r.op)?, name, ctx)?]
        }
        other => {
            return Err(invalid(format!(
                "Operator {} is not supported yet",
                other.as_str()
            )))
        }
    })
}

/// Whether ORDER BY reverses the clustering order (only on clustering columns, within named
/// partitions).
pub(super) fn reversed_order(t: &TableDef, sel: &Select, single_partition: bool) -> Result<bool> {
    let mut reversed = false;
    if let Some((first, dir)) = sel.order_by.first() {
        let ci = column_index(t, first)?;
        let col = &t.columns[ci];
        if col.kind != ColumnKind::Clustering {
            return Err(invalid(format!(
                "Order by is currently only supported on the clustered columns of the PRIMARY KEY, got {first}"
            )));
        }
        if !single_partition {
            return Err(invalid(
                "ORDER BY is only supported when the partition key is restricted by an EQ or an IN.",
            ));
        }
        reversed = (*dir == crate::cql::ast::Order::Desc) != col.desc;
    }
    Ok(reversed)
}

/// A secondary index on a column restricted by `=` serves the query: a scan becomes an index
/// lookup, and within one partition the restriction needs no ALLOW FILTERING. Returns the target
/// and whether the query still filters.
pub(super) fn use_index(
    t: &TableDef,
    target: Target,
    filters: &[Filter],
    need_filtering: bool,
    single_partition: bool,
    allow_filtering: bool,
) -> (Target, bool) {
    use crate::schema::IndexKind;
    if !need_filtering || t.indexes.is_empty() {
        return (target, need_filtering);
    }
    // The index that answers a filter: `=` on a value index, CONTAINS on a values index,
    // CONTAINS KEY on a keys index.
    let index_for = |f: &Filter| -> Option<&crate::schema::IndexDef> {
        if f.tuple.is_some() {
            return None;
        }
        t.indexes.iter().find(|x| {
            x.column == t.columns[f.col].name
                && match f.op {
                    Operator::Eq if f.entry => x.kind == IndexKind::Entries,
                    Operator::Eq => matches!(x.kind, IndexKind::Value | IndexKind::Full),
                    Operator::Contains => x.kind == IndexKind::Values,
                    Operator::ContainsKey => x.kind == IndexKind::Keys,
                    _ => false,
                }
        })
    };
    let indexed = |f: &Filter| index_for(f).is_some();
    if single_partition {
        // Filtering only on indexed columns is what the index is for.
        let still = filters
            .iter()
            .any(|f| !indexed(f) && t.columns[f.col].kind != ColumnKind::PartitionKey);
        return (target, still);
    }
    let Target::Range(lo, hi) = target else {
        return (target, need_filtering);
    };
    let Some(f) = filters.iter().find(|f| indexed(f)) else {
        return (Target::Range(lo, hi), need_filtering);
    };
    // Outside named partitions every key restriction is a filter too: the index serves one,
    // more than one is filtering (Cassandra's needFiltering counts the restrictions alike).
    let others = filters.len() > 1;
    if others && !allow_filtering {
        return (Target::Range(lo, hi), need_filtering);
    }
    let col = &t.columns[f.col];
    let has_statics = t.columns.iter().any(|c| c.kind == ColumnKind::Static);
    if col.kind == ColumnKind::Static || (col.kind == ColumnKind::PartitionKey && has_statics) {
        // Index entries are kept for rows only, and a static value (or a partition key
        // component of a partition that may hold only its static row) belongs to the
        // partition: the query is answered by a scan that checks each partition (every row of
        // a matching partition, or its static-only row), with the index's permission.
        return (Target::Range(lo, hi), others);
    }
    let index = index_for(f).expect("checked above").clone();
    let ty = crate::query::index::indexed_type(&index, &col.ty);
    (
        Target::Index {
            index,
            ty,
            value: if f.entry {
                Bytes::from(value::encode_tuple(&[
                    Some(&f.values[0]),
                    Some(&f.values[1]),
                ]))
            } else {
                f.values[0].clone()
            },
            lo,
            hi,
        },
        others,
    )
}
