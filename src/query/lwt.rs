//! Lightweight transactions: INSERT ... IF NOT EXISTS, UPDATE/DELETE ... IF EXISTS / IF conditions,
//! and conditional batches (one partition).
//!
//! The partition's lock stripe is held while the current row is read, the conditions evaluated
//! and the mutations committed, so conditional writes on one partition are linearizable (every
//! write to the partition takes the same stripe). Reads see committed data only, so SERIAL and
//! LOCAL_SERIAL reads see the last applied write.

use super::eval::{eval, Ctx, Val};
use super::row::{self, RowData, KIND_ROW};
use super::write::{self, split_list, Mutation};
use super::{invalid, resolve_table, Engine, Outcome, Result, ResultColumn, Rows};
use crate::cql::ast::{Condition, Conditions, Operator, RelationLhs, Statement, Term};
use crate::cql::types::CqlType;
use crate::cql::value;
use crate::error::WriteType;
use crate::schema::{ColumnKind, Schema, TableDef};
use crate::storage::handle::Condition as StorageCondition;
use crate::storage::handle::ReadStamp;
use crate::tokens::split_composite;
use bytes::Bytes;
use std::cmp::Ordering;
use std::sync::Arc;

/// One statement of a conditional write: the statement, its bound values, its keyspace.
pub struct Item<'a> {
    pub st: &'a Statement,
    pub ctx: &'a Ctx<'a>,
    pub keyspace: Option<&'a str>,
}

/// The conditions of a statement, if any.
pub fn conditions(st: &Statement) -> Option<Conditions> {
    match st {
        Statement::Insert(i) if i.if_not_exists => Some(Conditions::IfNotExists),
        Statement::Update(u) => u.conditions.clone(),
        Statement::Delete(d) => d.conditions.clone(),
        _ => None,
    }
}

fn without_conditions(st: &Statement) -> Statement {
    let mut st = st.clone();
    match &mut st {
        Statement::Insert(i) => i.if_not_exists = false,
        Statement::Update(u) => u.conditions = None,
        Statement::Delete(d) => d.conditions = None,
        _ => {}
    }
    st
}

/// A condition evaluated against one row (or the static row when `row_key` is None).
struct Check {
    row_key: Option<Vec<u8>>,
    conds: Conditions,
    /// Evaluated column conditions (in the order of `conds`).
    values: Vec<CondEval>,
}

/// What part of a column a condition reads.
#[derive(Debug, Clone, PartialEq)]
enum Access {
    Whole,
    /// `m[key]`: a map entry's value (the key's type and value).
    MapKey(CqlType, Bytes),
    /// `l[index]`: a list element.
    ListIndex(i32),
    /// `u.field`: a UDT field (by position).
    Field(usize),
}

/// A column condition with its operands evaluated.
struct CondEval {
    col: usize,
    access: Access,
    /// The type of what is compared (the column's, its elements' or the field's).
    ty: CqlType,
    vals: Vec<Val>,
}

impl CondEval {
    /// The part of the column's current value the condition compares.
    fn read<'a>(&self, cur: Option<&'a [u8]>) -> Option<&'a [u8]> {
        let cur = cur?;
        match &self.access {
            Access::Whole => Some(cur),
            Access::MapKey(kt, key) => super::select::map_value(kt, cur, key),
            Access::ListIndex(i) => value::collection_elements(cur)
                .ok()?
                .nth(usize::try_from(*i).ok()?)
                .and_then(|e| e.ok().flatten()),
            Access::Field(i) => super::select::field_value(cur, *i),
        }
    }
}

/// Executes conditional statements (one, or a conditional batch) and returns the
/// `[applied]` result.
pub fn execute(
    engine: &Engine,
    schema: &Schema,
    items: &[Item],
    ts: i64,
    is_batch: bool,
    rctx: Option<&super::RequestCtx>,
) -> Result<Outcome> {
    let mut table: Option<Arc<TableDef>> = None;
    let mut pk: Option<Bytes> = None;
    let mut checks: Vec<Check> = Vec::new();
    let mut muts: Vec<Mutation> = Vec::new();
    // None: every column (IF [NOT] EXISTS); else the conditioned columns in order.
    let mut cond_cols: Option<Vec<usize>> = Some(Vec::new());
    for item in items {
        let (tname, kind) = match item.st {
            Statement::Insert(i) => (&i.table, "updates"),
            Statement::Update(u) => (&u.table, "updates"),
            Statement::Delete(d) => (&d.table, "deletions"),
            _ => {
                return Err(invalid(
                    "Only INSERT, UPDATE and DELETE statements are allowed in a BATCH",
                ))
            }
        };
        let t = resolve_table(schema, item.keyspace, tname)?;
        write::check_writable(t)?;
        match &table {
            Some(prev) if prev.storage_id != t.storage_id => {
                return Err(invalid("Batch with conditions cannot span multiple tables"))
            }
            _ => table = Some(Arc::clone(t)),
        }
        let conds = conditions(item.st);
        let using_ts = match item.st {
            Statement::Insert(i) => i.using.timestamp.is_some(),
            Statement::Update(u) => u.using.timestamp.is_some(),
            Statement::Delete(d) => d.using.timestamp.is_some(),
            _ => false,
        };
        if using_ts && conds.is_some() {
            return Err(invalid(
                "Cannot provide custom timestamp for conditional updates",
            ));
        }
        if conds.is_some() && has_in(t, item.st, ColumnKind::PartitionKey) {
            // Any IN, even of one value or none: Cassandra refuses the form, not the count.
            return Err(invalid(if is_batch {
                "Batch with conditions cannot span multiple partitions (you cannot use IN on the partition key)".to_string()
            } else {
                format!("IN on the partition key is not supported with conditional {kind}")
            }));
        }
        let plain = without_conditions(item.st);
        let m = write::mutations_for(schema, item.keyspace, &plain, conds.as_ref(), item.ctx, ts)?;
        for x in &m {
            match &pk {
                Some(p) if *p != x.pk => {
                    return Err(invalid(if is_batch {
                        "Batch with conditions cannot span multiple partitions".to_string()
                    } else {
                        format!("IN on the partition key is not supported with conditional {kind}")
                    }))
                }
                _ => pk = Some(x.pk.clone()),
            }
        }
        if let Some(conds) = conds {
            let row_key = match condition_row(t, item.st, item.ctx, &m, kind)? {
                Some(k) => Some(write::same_row::stored_row_key(engine, t, k)?),
                None => None,
            };
            if row_key.is_none() && !t.clustering.is_empty() {
                if let Statement::Delete(d) = item.st {
                    if d.targets.is_empty() {
                        return Err(invalid(
                            "DELETE statements must restrict all PRIMARY KEY columns with equality relations in order to use IF conditions",
                        ));
                    }
                }
                if matches!(conds, Conditions::IfNotExists) {
                    return Err(clustering_missing(t));
                }
            }
            let mut values = Vec::new();
            match &conds {
                Conditions::IfExists | Conditions::IfNotExists => cond_cols = None,
                Conditions::Columns(cs) => {
                    for c in cs {
                        let ce = condition_values(t, c, item.ctx)?;
                        let ci = ce.col;
                        let col = &t.columns[ci];
                        if col.kind == ColumnKind::Regular && row_key.is_none() {
                            return Err(clustering_missing(t));
                        }
                        if let Some(cols) = &mut cond_cols {
                            if !cols.contains(&ci) {
                                cols.push(ci);
                            }
                        }
                        values.push(ce);
                    }
                }
            }
            checks.push(Check {
                row_key,
                conds,
                values,
            });
        }
        muts.extend(m);
    }
    let (Some(t), Some(pk)) = (table, pk) else {
        return Err(invalid("A conditional write needs a statement"));
    };
    // Admitted on the partition's throughput budget before anything is read (charged read + write).
    let budgets = write::admit_writes(engine, &muts, super::WriteType::Cas, rctx)?;
    let stripe = engine.lock_stripe(t.storage_id, &pk);
    let _guard = engine.write_lock(stripe);
    for attempt in 0..write::MAX_ATTEMPTS {
        let mut decided: Vec<StorageCondition> = Vec::new();
        let mut read = (0u64, 0u64); // (stored keys found, bytes) for the read charge
        let now = engine.clock.now_millis();
        let header_key = write::header_key(&t, &pk);
        // Routed each attempt: a split may have moved the key to a child partition.
        let handle = engine.handle_at(t.storage_id, write::table_token(&t, &pk))?;
        // A header the table never stores (`TableDef::stores_headers`) is neither read nor held
        // unchanged.
        let stored_header = match t.stores_headers() {
            false => None,
            true => {
                let (stored, stamp) = handle.get_stamped(&header_key)?;
                decided.push(unchanged(&header_key, &stored, stamp));
                stored
            }
        };
        let mut header = match stored_header {
            Some(b) => {
                read = (read.0 + 1, read.1 + (header_key.len() + b.len()) as u64);
                RowData::decode(&b)?
            }
            None => RowData::default(),
        };
        if let Some((dts, _)) = header.deletion {
            // Statics are shadowed by the partition deletion; rows below.
            let ranges = std::mem::take(&mut header.ranges);
            header.shadow_at(dts);
            header.ranges = ranges;
            header.deletion = Some((dts, 0));
        }
        // Non-frozen collections and UDTs are read (and returned) as whole values.
        super::complex::materialize(&mut header, &t, None, now);
        let ck_start = header_key.len();
        let mut rows: Vec<(Vec<u8>, RowData)> = Vec::new();
        for c in &checks {
            if let Some(k) = &c.row_key {
                if rows.iter().any(|(rk, _)| rk == k) {
                    continue;
                }
                let (stored, stamp) = handle.get_stamped(k)?;
                decided.push(unchanged(k, &stored, stamp));
                let mut r = match stored {
                    Some(b) => {
                        read = (read.0 + 1, read.1 + (k.len() + b.len()) as u64);
                        RowData::decode(&b)?
                    }
                    None => RowData::default(),
                };
                if let Some((dts, _)) = header.deletion {
                    r.shadow_at(dts);
                }
                if let Some(dts) = header.range_deletion(k.get(ck_start..).unwrap_or(&[])) {
                    r.shadow_at(dts);
                }
                super::complex::materialize(&mut r, &t, None, now);
                rows.push((k.clone(), r));
            }
        }
        let empty = RowData::default();
        let mut applied = true;
        for c in &checks {
            let row = c
                .row_key
                .as_ref()
                .and_then(|k| rows.iter().find(|(rk, _)| rk == k))
                .map(|(_, r)| r);
            let exists = match row {
                Some(r) => r.is_live(now),
                None => header.cells.iter().any(|x| x.is_live(now)),
            };
            let ok = match &c.conds {
                Conditions::IfExists => exists,
                Conditions::IfNotExists => !exists,
                Conditions::Columns(cs) => {
                    let mut all = true;
                    for (cond, ce) in cs.iter().zip(&c.values) {
                        let col = &t.columns[ce.col];
                        let src = if col.kind == ColumnKind::Static {
                            &header
                        } else {
                            row.unwrap_or(&empty)
                        };
                        let cur = src
                            .cell(col.id)
                            .filter(|x| x.is_live(now))
                            .and_then(|x| x.value.as_deref());
                        if !holds(&ce.ty, cond.op, ce.read(cur), &ce.vals) {
                            all = false;
                            break;
                        }
                    }
                    all
                }
            };
            if !ok {
                applied = false;
                break;
            }
        }
        let ks_table = (t.keyspace.clone(), t.name.clone());
        let applied_col = ResultColumn {
            keyspace: ks_table.0.clone(),
            table: ks_table.1.clone(),
            name: "[applied]".into(),
            ty: CqlType::Boolean,
        };
        write::charge_read(engine, rctx, &t, &pk, read);
        if applied {
            // Committed on the condition that what was decided on is still there (see
            // `write::apply`): a writer outside this process's locks makes it read again.
            let token = write::table_token(&t, &pk);
            let decided = decided
                .into_iter()
                .map(|c| (t.storage_id, token, c))
                .collect();
            match write::apply_once(engine, muts.clone(), (rctx, &budgets), decided)? {
                Ok(()) => {}
                Err(e) if e.is_retryable() => {
                    write::conflict_backoff(attempt);
                    continue;
                }
                Err(e) => return Err(e.into()),
            }
            let mut out = Rows::new(Arc::new(vec![applied_col]));
            out.push_cell(Some(&[1]));
            out.count = 1;
            return Ok(Outcome::Rows(out));
        }
        // Not applied: the current values of the rows the conditions read.
        let cols: Vec<usize> = match cond_cols {
            None => (0..t.columns.len()).collect(),
            Some(c) => {
                let mut v: Vec<usize> = Vec::new();
                if is_batch {
                    v.extend(t.partition_key.iter().copied());
                    v.extend(t.clustering.iter().copied());
                }
                for i in c {
                    if !v.contains(&i) {
                        v.push(i);
                    }
                }
                v
            }
        };
        let mut columns = vec![applied_col];
        columns.extend(cols.iter().map(|&i| ResultColumn {
            keyspace: ks_table.0.clone(),
            table: ks_table.1.clone(),
            name: t.columns[i].name.clone(),
            ty: t.columns[i].ty.clone(),
        }));
        let mut out = Rows::new(Arc::new(columns));
        let pk_parts: Vec<&[u8]> = if t.partition_key.len() == 1 {
            vec![&pk[..]]
        } else {
            split_composite(&pk, t.partition_key.len()).unwrap_or_default()
        };
        let ck_types: Vec<(&CqlType, bool)> =
            t.clustering_columns().map(|c| (&c.ty, c.desc)).collect();
        let statics_live = header.cells.iter().any(|x| x.is_live(now));
        let mut emitted = false;
        let mut seen: Vec<&Vec<u8>> = Vec::new();
        for c in &checks {
            let Some(k) = &c.row_key else { continue };
            if seen.contains(&k) {
                continue;
            }
            seen.push(k);
            let Some((_, r)) = rows.iter().find(|(rk, _)| rk == k) else {
                continue;
            };
            if !r.is_live(now) {
                continue;
            }
            let dk = row::decode_key(k, &ck_types)?;
            push_row(
                &mut out,
                &t,
                &cols,
                &pk_parts,
                &dk.clustering,
                r,
                &header,
                now,
            );
            emitted = true;
        }
        // A partition without the row still answers its static columns, but only when the
        // conditions read some (Cassandra reads just the condition columns: without a static one
        // its static row is empty and the answer is `[applied]` alone).
        let reads_statics = cols
            .iter()
            .any(|&i| t.columns[i].kind == ColumnKind::Static);
        if !emitted && statics_live && reads_statics {
            push_row(
                &mut out,
                &t,
                &cols,
                &pk_parts,
                &[],
                &RowData::default(),
                &header,
                now,
            );
            emitted = true;
        }
        if !emitted {
            out = Rows::new(Arc::new(vec![ResultColumn {
                keyspace: ks_table.0,
                table: ks_table.1,
                name: "[applied]".into(),
                ty: CqlType::Boolean,
            }]));
            out.push_cell(Some(&[0]));
            out.count = 1;
        }
        return Ok(Outcome::Rows(out));
    }
    Err(write::contended(WriteType::Cas))
}

/// The condition that `key` still holds what a lightweight transaction `read` under `stamp`
/// (with a stamp, the commit knows without reading the key again when no write of its stripe
/// began since: `storage::write_stamps`).
fn unchanged(key: &[u8], read: &Option<Bytes>, stamp: Option<ReadStamp>) -> StorageCondition {
    StorageCondition::Unchanged {
        key: Bytes::copy_from_slice(key),
        read: read.clone(),
        stamp,
    }
}

/// The error for a condition that needs a row when the statement names no full row key.
fn clustering_missing(t: &TableDef) -> super::QueryError {
    let names: Vec<&str> = t.clustering_columns().map(|c| c.name.as_str()).collect();
    invalid(format!(
        "Some clustering keys are missing: {}",
        names.join(", ")
    ))
}

#[allow(clippy::too_many_arguments)]
fn push_row(
    out: &mut Rows,
    t: &TableDef,
    cols: &[usize],
    pk_parts: &[&[u8]],
    ck: &[Bytes],
    row: &RowData,
    statics: &RowData,
    now: i64,
) {
    out.push_cell(Some(&[0]));
    for &i in cols {
        let v = super::select::column_value(t, i, pk_parts, ck, row, statics, now);
        out.push_cell(v);
    }
    out.count += 1;
}

/// The row key a statement's conditions read (None: only static columns are concerned).
fn condition_row(
    t: &TableDef,
    st: &Statement,
    ctx: &Ctx,
    muts: &[Mutation],
    kind: &str,
) -> Result<Option<Vec<u8>>> {
    if let Statement::Insert(_) = st {
        return Ok(muts
            .iter()
            .find(|m| is_row_key(t, m))
            .map(|m| m.key.clone()));
    }
    let rels = match st {
        Statement::Update(u) => &u.where_clause,
        Statement::Delete(d) => &d.where_clause,
        _ => return Ok(None),
    };
    if has_in(t, st, ColumnKind::Clustering) {
        return Err(invalid(format!(
            "IN on the clustering key columns is not supported with conditional {kind}"
        )));
    }
    // Single- and multi-column relations alike (`(c1, c2) = (1, 2)`); IN was refused above.
    let ck = super::clustering::Restricted::from_where(t, rels, ctx)?;
    if ck.len < t.clustering.len() || !ck.bounds.is_empty() {
        return Ok(None);
    }
    let ck = ck
        .prefixes
        .into_iter()
        .next()
        .ok_or_else(|| clustering_missing(t))?;
    let pk = muts
        .first()
        .map(|m| m.pk.clone())
        .ok_or_else(|| invalid("A conditional write needs a partition key"))?;
    Ok(Some(write::row_key(t, &pk, &ck)))
}

/// Whether the WHERE clause of an UPDATE/DELETE restricts a column of `kind` with IN (also a
/// multi-column IN on clustering columns).
fn has_in(t: &TableDef, st: &Statement, kind: ColumnKind) -> bool {
    let rels = match st {
        Statement::Update(u) => &u.where_clause,
        Statement::Delete(d) => &d.where_clause,
        _ => return false,
    };
    rels.iter().filter(|r| r.op == Operator::In).any(|r| {
        let names: &[String] = match &r.lhs {
            RelationLhs::Column(c) => std::slice::from_ref(c),
            RelationLhs::Tuple(cs) => cs,
            _ => &[],
        };
        names
            .iter()
            .any(|n| t.column(n).is_some_and(|c| c.kind == kind))
    })
}

fn is_row_key(t: &TableDef, m: &Mutation) -> bool {
    let h = write::header_key(t, &m.pk);
    m.key.len() >= h.len() && m.key[h.len() - 1] == KIND_ROW
}

/// The column of a condition, the part of it read and its evaluated value(s).
fn condition_values(t: &TableDef, c: &Condition, ctx: &Ctx) -> Result<CondEval> {
    let ci = t
        .columns
        .iter()
        .position(|x| x.name == c.column)
        .ok_or_else(|| {
            invalid(format!(
                "Undefined column name {} in table {}.{}",
                c.column, t.keyspace, t.name
            ))
        })?;
    let col = &t.columns[ci];
    if matches!(col.kind, ColumnKind::PartitionKey | ColumnKind::Clustering) {
        return Err(invalid(format!(
            "PRIMARY KEY column '{}' cannot have IF conditions",
            col.name
        )));
    }
    if matches!(col.ty, CqlType::Counter) {
        return Err(invalid("Conditions on counters are not supported"));
    }
    let name = &col.name;
    let (access, ty) = match (&c.element, &c.field) {
        (Some(key), _) => match col.ty.unfrozen() {
            CqlType::Map(kt, vt) => match eval(key, kt, name, ctx)? {
                Val::Value(k) => (Access::MapKey((**kt).clone(), k), (**vt).clone()),
                Val::Null => return Err(invalid("Invalid null value for map access")),
                Val::Unset => return Err(invalid("Invalid unset value for map access")),
            },
            CqlType::List(et) => match eval(key, &CqlType::Int, name, ctx)? {
                Val::Value(k) if k.len() == 4 => (
                    Access::ListIndex(i32::from_be_bytes(k[..].try_into().expect("4 bytes"))),
                    (**et).clone(),
                ),
                Val::Unset => return Err(invalid("Invalid unset value for list index")),
                _ => return Err(invalid("Invalid null value for list index")),
            },
            CqlType::Set(_) => {
                return Err(invalid(format!(
                    "Invalid element access syntax for set column {name}"
                )))
            }
            _ => {
                return Err(invalid(format!(
                    "Invalid element access syntax for non-collection column {name}"
                )))
            }
        },
        (None, Some(f)) => {
            let CqlType::Udt(u) = col.ty.unfrozen() else {
                return Err(invalid(format!(
                    "Invalid field selection: {name} of type {} is not a user type",
                    col.ty
                )));
            };
            let Some(i) = u.fields.iter().position(|(n, _)| n == f) else {
                return Err(invalid(format!("Unknown field {f} for column {name}")));
            };
            (Access::Field(i), u.fields[i].1.clone())
        }
        (None, None) => (Access::Whole, col.ty.clone()),
    };
    let vals = match c.op {
        Operator::In => condition_in_values(&c.value, &ty, name, ctx)?,
        // CONTAINS / CONTAINS KEY (Cassandra 4.1+), on whole columns only (as parsed).
        Operator::Contains | Operator::ContainsKey => {
            let oty = super::select::contains_type(col, c.op)?;
            vec![eval(&c.value, &oty, name, ctx)?]
        }
        Operator::Eq | Operator::Ne | Operator::Lt | Operator::Le | Operator::Gt | Operator::Ge => {
            vec![eval(&c.value, &ty, name, ctx)?]
        }
        other => {
            return Err(invalid(format!(
                "Unsupported operator {} in a condition",
                other.as_str()
            )))
        }
    };
    for v in &vals {
        match v {
            Val::Unset => return Err(invalid("Invalid 'unset' value in condition")),
            Val::Null
                if matches!(
                    c.op,
                    Operator::Lt
                        | Operator::Le
                        | Operator::Gt
                        | Operator::Ge
                        | Operator::Contains
                        | Operator::ContainsKey
                ) =>
            {
                return Err(invalid(format!(
                    "Invalid comparison with null for operator \"{}\"",
                    c.op.as_str()
                )))
            }
            _ => {}
        }
    }
    Ok(CondEval {
        col: ci,
        access,
        ty,
        vals,
    })
}

/// The values of an IN condition as Cassandra binds them (`ColumnCondition`): unset elements
/// are left out (an IN of only unset elements holds for nothing); a whole list bound as null
/// or unset is refused.
fn condition_in_values(rhs: &Term, ty: &CqlType, name: &str, ctx: &Ctx) -> Result<Vec<Val>> {
    if let Term::List(items) | Term::Tuple(items) = rhs {
        let mut vals = Vec::with_capacity(items.len());
        for t in items {
            match eval(t, ty, name, ctx)? {
                Val::Unset => {}
                v => vals.push(v),
            }
        }
        return Ok(vals);
    }
    match eval(rhs, &CqlType::List(Box::new(ty.clone())), name, ctx)? {
        Val::Value(b) => Ok(split_list(&b)
            .ok_or_else(|| invalid(format!("Invalid list value for IN on {name}")))?
            .into_iter()
            .map(Val::Value)
            .collect()),
        Val::Null => Err(invalid("Invalid null list in IN condition")),
        Val::Unset => Err(invalid("Invalid 'unset' value in condition")),
    }
}

fn equal(ty: &CqlType, cur: Option<&[u8]>, v: &Val) -> bool {
    match (cur, v) {
        (None, Val::Null) => true,
        (Some(a), Val::Value(b)) => value::compare(ty, a, b) == Ordering::Equal,
        _ => false,
    }
}

/// Whether a condition holds for the current value of its column.
fn holds(ty: &CqlType, op: Operator, cur: Option<&[u8]>, vals: &[Val]) -> bool {
    match op {
        Operator::Eq => vals.first().is_some_and(|v| equal(ty, cur, v)),
        Operator::Ne => vals.first().is_some_and(|v| !equal(ty, cur, v)),
        Operator::In => vals.iter().any(|v| equal(ty, cur, v)),
        Operator::Contains | Operator::ContainsKey => match (cur, vals.first()) {
            (Some(cur), Some(Val::Value(x))) => super::select::contains(ty, op, cur, x),
            _ => false,
        },
        _ => {
            let (Some(a), Some(Val::Value(b))) = (cur, vals.first()) else {
                return false;
            };
            let o = value::compare(ty, a, b);
            match op {
                Operator::Lt => o == Ordering::Less,
                Operator::Le => o != Ordering::Greater,
                Operator::Gt => o == Ordering::Greater,
                Operator::Ge => o != Ordering::Less,
                _ => false,
            }
        }
    }
}
