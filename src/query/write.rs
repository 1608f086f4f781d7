//! Writes (INSERT, UPDATE, DELETE, BATCH) and DDL.
//!
//! A write becomes a list of mutations (a storage key and the cells to merge into it). Applying
//! them locks the logical partitions involved (striped locks, in order), reads the current rows,
//! merges with last-write-wins, and commits everything as one atomic storage batch.

use super::eval::{eval, Ctx, Val};
use super::row::{self, Cell, Marker, RowData, KIND_HEADER, KIND_ROW};
use super::{
    invalid, resolve_keyspace, resolve_table, Engine, Outcome, QueryOptions, Result, Session,
};
use crate::cql::ast::{
    Assignment, Batch, Delete, DeleteTarget, Insert, InsertValues, Operator, Relation, RelationLhs,
    Statement, Term, Using,
};
use crate::cql::types::CqlType;
use crate::partition::token::{partition_key_bytes, token_of, Token};
use crate::schema::{ddl, ColumnKind, Schema, TableDef};
use crate::storage::{Space, WriteBatch};
use bytes::Bytes;
use std::sync::Arc;

use super::bind::BoundValues;

/// Longest partition key Cassandra accepts.
pub const MAX_KEY_BYTES: usize = 65535;
/// Longest TTL (20 years).
pub const MAX_TTL: i64 = 630_720_000;

pub fn statement_timestamp(session: &mut Session, opts: &QueryOptions) -> i64 {
    opts.timestamp.unwrap_or_else(|| session.next_timestamp())
}

/// The provisioned throughput that applies to a table (its own, else none).
pub fn table_throughput(_schema: &Schema, t: &TableDef) -> Option<i64> {
    t.options
        .cosmosdb_provisioned_throughput
        .or(t.options.cosmosdb_autoscale_max_throughput)
}

/// Splits a table's physical partitions until there are enough for its throughput
/// (ceil(RU / 10,000)); called after ALTER TABLE.
fn ensure_throughput_layout(engine: &Engine, ks: &str, table: &str) -> Result<()> {
    let schema = engine.schema();
    let Some(t) = schema.keyspace(ks).and_then(|k| k.tables.get(table)) else {
        return Ok(());
    };
    let n = crate::partition::map::partitions_for_throughput(table_throughput(&schema, t));
    crate::partition::split::ensure_partitions(&engine.maps, &*engine.store, t.storage_id, n)?;
    Ok(())
}

/// Admits a write on the throughput budgets of the physical partitions it touches (before
/// anything is read or stored); returns each table's per-partition RU/s.
fn admit_writes(engine: &Engine, muts: &[Mutation]) -> Result<Vec<(u64, Option<f64>)>> {
    let schema = engine.schema();
    let mut rates: Vec<(u64, Option<f64>)> = Vec::new();
    let mut parts: Vec<Arc<crate::partition::map::PhysicalPartition>> = Vec::new();
    let mut part_rates: Vec<Option<f64>> = Vec::new();
    for m in muts {
        let Some(map) = engine.maps.get(m.table.storage_id) else {
            continue;
        };
        let rate = crate::partition::throttle::provisioned_ru(&schema, &m.table)
            .map(|ru| crate::partition::throttle::partition_rate(ru, map.parts.len()));
        if !rates.iter().any(|(s, _)| *s == m.table.storage_id) {
            rates.push((m.table.storage_id, rate));
        }
        let p = map.route(table_token(&m.table, &m.pk));
        if !parts.iter().any(|q| Arc::ptr_eq(q, p)) {
            parts.push(Arc::clone(p));
            part_rates.push(rate);
        }
    }
    let list: Vec<_> = parts.iter().map(|p| &**p).zip(part_rates).collect();
    crate::partition::throttle::admit(&engine.limits.throughput, &list)?;
    Ok(rates)
}

/// One write to one storage key.
pub struct Mutation {
    pub table: Arc<TableDef>,
    pub pk: Bytes,
    pub key: Vec<u8>,
    pub update: RowData,
}

/// The token of a partition key (serialized as Cassandra hashes it): Murmur3 of the whole key,
/// or for hierarchical (MultiHash) tables the concatenated per-level hashes.
pub fn table_token(table: &TableDef, pk: &[u8]) -> Token {
    match table.options.partition_key_kind {
        crate::schema::PartitionKeyKind::Hash => token_of(pk),
        crate::schema::PartitionKeyKind::MultiHash => {
            let n = table.partition_key.len();
            match crate::partition::token::split_composite(pk, n) {
                Some(parts) => crate::partition::token::multihash_token(&parts),
                None => token_of(pk),
            }
        }
    }
}

/// Values of the partition key or clustering columns restricted by `=` / `IN` in a WHERE clause:
/// one list of candidate values per column (None where a column is not restricted).
pub fn key_values(
    table: &TableDef,
    rels: &[Relation],
    ctx: &Ctx,
    columns: &[usize],
) -> Result<Vec<Option<Vec<Bytes>>>> {
    let mut out: Vec<Option<Vec<Bytes>>> = vec![None; columns.len()];
    for r in rels {
        let RelationLhs::Column(name) = &r.lhs else {
            continue;
        };
        let Some(pos) = columns.iter().position(|&i| table.columns[i].name == *name) else {
            continue;
        };
        let col = &table.columns[columns[pos]];
        let vals = match r.op {
            Operator::Eq => vec![key_value(eval(&r.rhs, &col.ty, name, ctx)?, col)?],
            Operator::In => in_values(&r.rhs, &col.ty, name, ctx)?
                .into_iter()
                .map(|v| key_value(v, col))
                .collect::<Result<Vec<_>>>()?,
            _ => continue,
        };
        if out[pos].is_some() {
            return Err(invalid(format!(
                "{name} cannot be restricted by more than one relation if it includes an Equal"
            )));
        }
        out[pos] = Some(vals);
    }
    Ok(out)
}

/// The values of an IN restriction: a list of terms or one marker bound to a list.
pub fn in_values(rhs: &Term, ty: &CqlType, name: &str, ctx: &Ctx) -> Result<Vec<Val>> {
    match rhs {
        Term::List(items) | Term::Tuple(items) => {
            items.iter().map(|t| eval(t, ty, name, ctx)).collect()
        }
        other => {
            let list_ty = CqlType::List(Box::new(ty.clone()));
            match eval(other, &list_ty, name, ctx)? {
                Val::Value(b) => Ok(split_list(&b)
                    .ok_or_else(|| invalid(format!("Invalid list value for IN on {name}")))?
                    .into_iter()
                    .map(Val::Value)
                    .collect()),
                Val::Null => Err(invalid(format!("Invalid null value for {name}"))),
                Val::Unset => Err(invalid(format!("Invalid unset value for {name}"))),
            }
        }
    }
}

/// Elements of a serialized list or set.
pub fn split_list(b: &Bytes) -> Option<Vec<Bytes>> {
    if b.len() < 4 {
        return None;
    }
    let n = i32::from_be_bytes(b[0..4].try_into().ok()?);
    if n < 0 || n as usize > b.len() {
        return None;
    }
    let mut pos = 4;
    let mut out = Vec::with_capacity(n as usize);
    for _ in 0..n {
        let len = i32::from_be_bytes(b.get(pos..pos + 4)?.try_into().ok()?);
        pos += 4;
        if len < 0 {
            return None;
        }
        let end = pos.checked_add(len as usize)?;
        out.push(b.slice(pos..end.min(b.len())));
        if end > b.len() {
            return None;
        }
        pos = end;
    }
    Some(out)
}

fn key_value(v: Val, col: &crate::schema::ColumnDef) -> Result<Bytes> {
    match v {
        Val::Value(b) => {
            if col.kind == ColumnKind::PartitionKey && b.len() > MAX_KEY_BYTES {
                return Err(invalid(format!(
                    "Key length of {} is longer than maximum of {MAX_KEY_BYTES}",
                    b.len()
                )));
            }
            Ok(b)
        }
        Val::Null => Err(invalid(format!(
            "Invalid null value in condition for column {}",
            col.name
        ))),
        Val::Unset => Err(invalid(format!(
            "Invalid unset value for column {}",
            col.name
        ))),
    }
}

/// Cartesian product of per-column candidate values.
fn combinations(cols: &[Vec<Bytes>]) -> Vec<Vec<Bytes>> {
    let mut out: Vec<Vec<Bytes>> = vec![Vec::new()];
    for vals in cols {
        let mut next = Vec::with_capacity(out.len() * vals.len());
        for prefix in &out {
            for v in vals {
                let mut p = prefix.clone();
                p.push(v.clone());
                next.push(p);
            }
        }
        out = next;
    }
    out
}

fn missing(table: &TableDef, idx: &[usize], have: &[Option<Vec<Bytes>>]) -> Vec<String> {
    idx.iter()
        .zip(have)
        .filter(|(_, h)| h.is_none())
        .map(|(&i, _)| table.columns[i].name.clone())
        .collect()
}

/// The serialized partition keys a WHERE clause (or INSERT) names.
fn partition_keys(table: &TableDef, pk_vals: Vec<Option<Vec<Bytes>>>) -> Result<Vec<Bytes>> {
    let miss = missing(table, &table.partition_key, &pk_vals);
    if !miss.is_empty() {
        return Err(invalid(format!(
            "Some partition key parts are missing: {}",
            miss.join(", ")
        )));
    }
    let cols: Vec<Vec<Bytes>> = pk_vals.into_iter().map(|v| v.unwrap_or_default()).collect();
    Ok(combinations(&cols)
        .into_iter()
        .map(|parts| {
            let refs: Vec<&[u8]> = parts.iter().map(|b| &b[..]).collect();
            Bytes::from(partition_key_bytes(&refs))
        })
        .collect())
}

fn clustering_types(table: &TableDef) -> Vec<(&CqlType, bool)> {
    table
        .clustering_columns()
        .map(|c| (&c.ty, c.desc))
        .collect()
}

fn row_key(table: &TableDef, pk: &[u8], clustering: &[Bytes]) -> Vec<u8> {
    let mut k = row::partition_prefix(table.storage_id, table_token(table, pk), pk);
    k.push(KIND_ROW);
    row::encode_clustering(&clustering_types(table), clustering, &mut k);
    k
}

fn header_key(table: &TableDef, pk: &[u8]) -> Vec<u8> {
    let mut k = row::partition_prefix(table.storage_id, table_token(table, pk), pk);
    k.push(KIND_HEADER);
    k
}

struct WriteParams {
    ts: i64,
    ttl: i32,
    expiry: i32,
}

fn using_params(
    table: &TableDef,
    using: &Using,
    ctx: &Ctx,
    default_ts: i64,
) -> Result<WriteParams> {
    let ts = match &using.timestamp {
        Some(t) => match eval(t, &CqlType::Bigint, "[timestamp]", ctx)? {
            Val::Value(b) if b.len() == 8 => i64::from_be_bytes(b[..].try_into().expect("8")),
            Val::Unset => default_ts,
            _ => return Err(invalid("Invalid null value of timestamp")),
        },
        None => default_ts,
    };
    let ttl: i64 = match &using.ttl {
        Some(t) => match eval(t, &CqlType::Int, "[ttl]", ctx)? {
            Val::Value(b) if b.len() == 4 => {
                i32::from_be_bytes(b[..].try_into().expect("4")) as i64
            }
            Val::Unset => table.options.default_time_to_live as i64,
            _ => return Err(invalid("Invalid null value of TTL")),
        },
        None => table.options.default_time_to_live as i64,
    };
    if ttl < 0 {
        return Err(invalid(format!(
            "A TTL must be greater or equal to 0, but was {ttl}"
        )));
    }
    if ttl > MAX_TTL {
        return Err(invalid(format!(
            "ttl is too large. requested ({ttl}) maximum ({MAX_TTL})"
        )));
    }
    let expiry = if ttl == 0 {
        0
    } else {
        (super::now_secs() as i64 + ttl).min(i32::MAX as i64) as i32
    };
    Ok(WriteParams {
        ts,
        ttl: ttl as i32,
        expiry,
    })
}

fn cell_for(col: u32, v: Val, p: &WriteParams) -> Option<Cell> {
    match v {
        Val::Unset => None,
        Val::Null => Some(Cell {
            col,
            ts: p.ts,
            ttl: 0,
            expiry: 0,
            value: None,
            local_deletion: super::now_secs(),
        }),
        Val::Value(b) => Some(Cell {
            col,
            ts: p.ts,
            ttl: p.ttl,
            expiry: p.expiry,
            value: Some(b),
            local_deletion: 0,
        }),
    }
}

fn reject_counter_table(table: &TableDef, what: &str) -> Result<()> {
    if table.is_counter_table() {
        return Err(invalid(format!(
            "{what} statements are not allowed on counter tables, use UPDATE instead"
        )));
    }
    Ok(())
}

fn insert_mutations(
    engine: &Engine,
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
    let InsertValues::Values { columns, values } = &ins.values else {
        return Err(invalid("INSERT JSON is not supported yet"));
    };
    if columns.len() != values.len() {
        return Err(invalid(format!(
            "Unmatched column names/values: {} columns but {} values",
            columns.len(),
            values.len()
        )));
    }
    let p = using_params(table, &ins.using, ctx, ts)?;
    let mut pk_vals: Vec<Option<Vec<Bytes>>> = vec![None; table.partition_key.len()];
    let mut ck_vals: Vec<Option<Vec<Bytes>>> = vec![None; table.clustering.len()];
    let mut cells: Vec<Cell> = Vec::new();
    let mut static_cells: Vec<Cell> = Vec::new();
    for (i, (name, term)) in columns.iter().zip(values).enumerate() {
        if columns[..i].contains(name) {
            return Err(invalid(format!(
                "Multiple definitions found for column {name}"
            )));
        }
        let col = table.column(name).ok_or_else(|| {
            invalid(format!(
                "Undefined column name {name} in table {}.{}",
                table.keyspace, table.name
            ))
        })?;
        let v = eval(term, &col.ty, name, ctx)?;
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
                pk_vals[col.position] = Some(vec![v]);
            }
            ColumnKind::Clustering => {
                ck_vals[col.position] = Some(vec![key_value(v, col)?]);
            }
            ColumnKind::Regular => cells.extend(cell_for(col.id, v, &p)),
            ColumnKind::Static => static_cells.extend(cell_for(col.id, v, &p)),
        }
    }
    let miss = missing(table, &table.clustering, &ck_vals);
    if !miss.is_empty() {
        return Err(invalid(format!(
            "Some clustering keys are missing: {}",
            miss.join(", ")
        )));
    }
    let pks = partition_keys(table, pk_vals)?;
    let ck: Vec<Bytes> = ck_vals
        .into_iter()
        .map(|v| v.unwrap_or_default().remove(0))
        .collect();
    cells.sort_by_key(|c| c.col);
    static_cells.sort_by_key(|c| c.col);
    let _ = engine;
    let mut out = Vec::new();
    for pk in pks {
        out.push(Mutation {
            table: Arc::clone(table),
            key: row_key(table, &pk, &ck),
            pk: pk.clone(),
            update: RowData {
                marker: Some(Marker {
                    ts: p.ts,
                    ttl: p.ttl,
                    expiry: p.expiry,
                }),
                deletion: None,
                cells: cells.clone(),
            },
        });
        if !static_cells.is_empty() {
            out.push(Mutation {
                table: Arc::clone(table),
                key: header_key(table, &pk),
                pk,
                update: RowData {
                    cells: static_cells.clone(),
                    ..Default::default()
                },
            });
        }
    }
    Ok(out)
}

/// Checks that a WHERE clause of UPDATE/DELETE restricts only primary key columns with = / IN.
fn check_write_where(table: &TableDef, rels: &[Relation]) -> Result<()> {
    for r in rels {
        match &r.lhs {
            RelationLhs::Column(c) => {
                let col = table.column(c).ok_or_else(|| {
                    invalid(format!("Undefined column name {c} in table {}.{}", table.keyspace, table.name))
                })?;
                if !matches!(col.kind, ColumnKind::PartitionKey | ColumnKind::Clustering) {
                    return Err(invalid(format!(
                        "Non PRIMARY KEY columns found in where clause: {c} "
                    ).trim_end().to_string()));
                }
                if col.kind == ColumnKind::PartitionKey && !matches!(r.op, Operator::Eq | Operator::In) {
                    return Err(invalid(format!(
                        "Only EQ and IN relation are supported on the partition key (unless you use the token() function) for {c}"
                    )));
                }
            }
            RelationLhs::Token(_) => {
                return Err(invalid(
                    "The token function cannot be used in WHERE clauses for UPDATE and DELETE statements",
                ))
            }
            _ => {}
        }
    }
    Ok(())
}

fn update_mutations(
    table: &Arc<TableDef>,
    up: &crate::cql::ast::Update,
    ctx: &Ctx,
    ts: i64,
) -> Result<Vec<Mutation>> {
    if up.conditions.is_some() {
        return Err(invalid("Conditional updates are not supported yet"));
    }
    check_write_where(table, &up.where_clause)?;
    let p = using_params(table, &up.using, ctx, ts)?;
    let mut cells = Vec::new();
    let mut static_cells = Vec::new();
    for a in &up.assignments {
        let (column, value) = match a {
            Assignment::Set { column, value } => (column, value),
            other => {
                return Err(invalid(format!(
                    "This kind of assignment is not supported yet: {other:?}"
                )))
            }
        };
        let col = table.column(column).ok_or_else(|| {
            invalid(format!(
                "Undefined column name {column} in table {}.{}",
                table.keyspace, table.name
            ))
        })?;
        if matches!(col.kind, ColumnKind::PartitionKey | ColumnKind::Clustering) {
            return Err(invalid(format!(
                "PRIMARY KEY part {column} found in SET part"
            )));
        }
        if col.ty.is_counter() {
            return Err(invalid(format!(
                "Cannot set the value of counter column {column} (counters can only be incremented/decremented, not set)"
            )));
        }
        let v = eval(value, &col.ty, column, ctx)?;
        let target = if col.kind == ColumnKind::Static {
            &mut static_cells
        } else {
            &mut cells
        };
        target.extend(cell_for(col.id, v, &p));
    }
    cells.sort_by_key(|c: &Cell| c.col);
    static_cells.sort_by_key(|c: &Cell| c.col);
    let pks = partition_keys(
        table,
        key_values(table, &up.where_clause, ctx, &table.partition_key)?,
    )?;
    let ck_vals = key_values(table, &up.where_clause, ctx, &table.clustering)?;
    let mut out = Vec::new();
    let need_rows = !cells.is_empty() || static_cells.is_empty();
    let cks = if need_rows {
        let miss = missing(table, &table.clustering, &ck_vals);
        if !miss.is_empty() {
            return Err(invalid(format!(
                "Some clustering keys are missing: {}",
                miss.join(", ")
            )));
        }
        combinations(
            &ck_vals
                .into_iter()
                .map(|v| v.unwrap_or_default())
                .collect::<Vec<_>>(),
        )
    } else {
        Vec::new()
    };
    for pk in pks {
        for ck in &cks {
            out.push(Mutation {
                table: Arc::clone(table),
                key: row_key(table, &pk, ck),
                pk: pk.clone(),
                update: RowData {
                    cells: cells.clone(),
                    ..Default::default()
                },
            });
        }
        if !static_cells.is_empty() {
            out.push(Mutation {
                table: Arc::clone(table),
                key: header_key(table, &pk),
                pk: pk.clone(),
                update: RowData {
                    cells: static_cells.clone(),
                    ..Default::default()
                },
            });
        }
    }
    Ok(out)
}

fn delete_mutations(
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
    check_write_where(table, &del.where_clause)?;
    let p = using_params(
        table,
        &Using {
            ttl: None,
            timestamp: del.using.timestamp.clone(),
        },
        ctx,
        ts,
    )?;
    let now = super::now_secs();
    let pks = partition_keys(
        table,
        key_values(table, &del.where_clause, ctx, &table.partition_key)?,
    )?;
    let ck_vals = key_values(table, &del.where_clause, ctx, &table.clustering)?;
    let given = ck_vals.iter().take_while(|v| v.is_some()).count();
    if ck_vals.iter().skip(given).any(|v| v.is_some()) {
        let first_missing = &table.columns[table.clustering[given]].name;
        return Err(invalid(format!(
            "PRIMARY KEY column \"{}\" cannot be restricted as preceding column \"{first_missing}\" is not restricted",
            table.columns[table.clustering[ck_vals.iter().rposition(|v| v.is_some()).unwrap_or(0)]].name
        )));
    }
    let mut cells = Vec::new();
    let mut static_cells = Vec::new();
    for t in &del.targets {
        let DeleteTarget::Column(name) = t else {
            return Err(invalid(
                "Deleting collection elements or fields is not supported yet",
            ));
        };
        let col = table.column(name).ok_or_else(|| {
            invalid(format!(
                "Undefined column name {name} in table {}.{}",
                table.keyspace, table.name
            ))
        })?;
        if matches!(col.kind, ColumnKind::PartitionKey | ColumnKind::Clustering) {
            return Err(invalid(format!(
                "Invalid identifier {name} for deletion (should not be a PRIMARY KEY part)"
            )));
        }
        let c = Cell {
            col: col.id,
            ts: p.ts,
            ttl: 0,
            expiry: 0,
            value: None,
            local_deletion: now,
        };
        if col.kind == ColumnKind::Static {
            static_cells.push(c)
        } else {
            cells.push(c)
        }
    }
    cells.sort_by_key(|c| c.col);
    static_cells.sort_by_key(|c| c.col);
    let mut out = Vec::new();
    for pk in pks {
        if given == table.clustering.len() && (del.targets.is_empty() || !cells.is_empty()) {
            let cks = combinations(
                &ck_vals
                    .iter()
                    .map(|v| v.clone().unwrap_or_default())
                    .collect::<Vec<_>>(),
            );
            for ck in cks {
                out.push(Mutation {
                    table: Arc::clone(table),
                    key: row_key(table, &pk, &ck),
                    pk: pk.clone(),
                    update: if del.targets.is_empty() {
                        RowData {
                            deletion: Some((p.ts, now)),
                            ..Default::default()
                        }
                    } else {
                        RowData {
                            cells: cells.clone(),
                            ..Default::default()
                        }
                    },
                });
            }
        } else if given == 0 && del.targets.is_empty() {
            // The whole partition: a partition deletion in its header.
            out.push(Mutation {
                table: Arc::clone(table),
                key: header_key(table, &pk),
                pk: pk.clone(),
                update: RowData {
                    deletion: Some((p.ts, now)),
                    ..Default::default()
                },
            });
        } else if del.targets.is_empty() || !cells.is_empty() {
            return Err(invalid(
                "Range deletions (a prefix of the clustering columns) are not supported yet",
            ));
        }
        if !static_cells.is_empty() {
            out.push(Mutation {
                table: Arc::clone(table),
                key: header_key(table, &pk),
                pk: pk.clone(),
                update: RowData {
                    cells: static_cells.clone(),
                    ..Default::default()
                },
            });
        }
    }
    Ok(out)
}

fn mutations_for(
    engine: &Engine,
    schema: &Schema,
    keyspace: Option<&str>,
    st: &Statement,
    ctx: &Ctx,
    ts: i64,
) -> Result<Vec<Mutation>> {
    match st {
        Statement::Insert(i) => {
            let t = resolve_table(schema, keyspace, &i.table)?;
            check_writable(t)?;
            insert_mutations(engine, t, i, ctx, ts)
        }
        Statement::Update(u) => {
            let t = resolve_table(schema, keyspace, &u.table)?;
            check_writable(t)?;
            update_mutations(t, u, ctx, ts)
        }
        Statement::Delete(d) => {
            let t = resolve_table(schema, keyspace, &d.table)?;
            check_writable(t)?;
            delete_mutations(t, d, ctx, ts)
        }
        _ => Err(invalid(
            "Only INSERT, UPDATE and DELETE statements are allowed in a BATCH",
        )),
    }
}

fn check_writable(t: &TableDef) -> Result<()> {
    if t.virtual_table {
        return Err(invalid(format!(
            "Modification on table {}.{} is not allowed: it is a system table",
            t.keyspace, t.name
        )));
    }
    Ok(())
}

/// The mutations of one INSERT/UPDATE/DELETE with its own bound values.
pub fn statement_mutations(
    engine: &Engine,
    schema: &Schema,
    keyspace: Option<&str>,
    st: &Statement,
    binds: &BoundValues,
    ts: i64,
) -> Result<Vec<Mutation>> {
    let ctx = Ctx {
        binds,
        max_value_bytes: engine.limits.max_value_bytes,
    };
    mutations_for(engine, schema, keyspace, st, &ctx, ts)
}

pub fn execute_single(
    engine: &Engine,
    keyspace: Option<&str>,
    st: &Statement,
    binds: &BoundValues,
    ts: i64,
    rctx: &super::RequestCtx,
) -> Result<Outcome> {
    let schema = engine.schema();
    let ctx = Ctx {
        binds,
        max_value_bytes: engine.limits.max_value_bytes,
    };
    let muts = mutations_for(engine, &schema, keyspace, st, &ctx, ts)?;
    apply_with(engine, muts, Some(rctx))?;
    Ok(Outcome::Void)
}

pub fn execute_batch(
    engine: &Engine,
    keyspace: Option<&str>,
    b: &Batch,
    binds: &BoundValues,
    ts: i64,
    rctx: &super::RequestCtx,
) -> Result<Outcome> {
    let schema = engine.schema();
    let ctx = Ctx {
        binds,
        max_value_bytes: engine.limits.max_value_bytes,
    };
    let ts = match &b.using.timestamp {
        Some(t) => match eval(t, &CqlType::Bigint, "[timestamp]", &ctx)? {
            Val::Value(v) if v.len() == 8 => i64::from_be_bytes(v[..].try_into().expect("8")),
            _ => ts,
        },
        None => ts,
    };
    let mut all = Vec::new();
    for st in &b.statements {
        all.extend(mutations_for(engine, &schema, keyspace, st, &ctx, ts)?);
    }
    apply_with(engine, all, Some(rctx))?;
    Ok(Outcome::Void)
}

/// Applies mutations atomically: locks their partitions, merges with stored rows, commits.
pub fn apply(engine: &Engine, muts: Vec<Mutation>) -> Result<()> {
    apply_with(engine, muts, None)
}

/// `apply`, reporting warnings (logical partitions near their size limit) to the request.
pub fn apply_with(
    engine: &Engine,
    muts: Vec<Mutation>,
    rctx: Option<&super::RequestCtx>,
) -> Result<()> {
    if muts.is_empty() {
        return Ok(());
    }
    let rates = admit_writes(engine, &muts)?;
    let mut stripes: Vec<usize> = muts
        .iter()
        .map(|m| engine.lock_stripe(m.table.storage_id, &m.pk))
        .collect();
    stripes.sort_unstable();
    stripes.dedup();
    let _guards: Vec<_> = stripes.iter().map(|&i| engine.stripe(i).lock()).collect();
    let mut batch = WriteBatch::default();
    // Several mutations of one batch may hit the same key: merge them in order.
    let mut merged: Vec<(Vec<u8>, RowData)> = Vec::with_capacity(muts.len());
    // Per merged key: (storage id, token, partition key, stored bytes before) for size accounting.
    let mut owners: Vec<(u64, Token, Bytes, usize)> = Vec::with_capacity(muts.len());
    for m in muts {
        if let Some((_, row)) = merged.iter_mut().find(|(k, _)| *k == m.key) {
            row.merge(m.update);
            continue;
        }
        let stored = engine.store.get(Space::Data, &m.key)?;
        owners.push((
            m.table.storage_id,
            table_token(&m.table, &m.pk),
            m.pk.clone(),
            stored.as_ref().map_or(0, |b| m.key.len() + b.len()),
        ));
        let mut current = match stored {
            Some(b) => RowData::decode(&b)?,
            None => RowData::default(),
        };
        current.merge(m.update);
        merged.push((m.key, current));
    }
    let mut sizes = crate::partition::sizes::Accounting::default();
    let limits = &engine.limits.partitions;
    for ((k, row), (sid, token, pk, old_len)) in merged.into_iter().zip(owners) {
        let mut buf = Vec::with_capacity(row.encoded_len());
        row.encode(&mut buf);
        sizes.key_change(limits, sid, token, &pk, old_len, k.len() + buf.len())?;
        batch.put(Space::Data, k, buf);
    }
    sizes.prepare(&*engine.store, limits, &mut batch, rctx)?;
    let touched = sizes.commit(&engine.maps, || engine.store.commit(batch))?;
    if let Some(c) = rctx {
        c.add_charge(sizes.request_units());
    }
    for (sid, p, ru) in &touched {
        engine.splitter.check(*sid, p);
        if let Some(rate) = rates.iter().find(|(s, _)| s == sid).and_then(|r| r.1) {
            p.stats
                .bucket
                .debit(rate, engine.limits.throughput.burst, *ru);
        }
    }
    Ok(())
}

// ------------------------------------------------------------------ DDL

pub fn execute_ddl(engine: &Engine, keyspace: Option<&str>, st: &Statement) -> Result<Outcome> {
    let done = |c: Option<ddl::SchemaChange>| -> Outcome {
        match c {
            Some(c) => Outcome::SchemaChange(c),
            None => Outcome::Void,
        }
    };
    let cat = &engine.catalog;
    match st {
        Statement::CreateKeyspace {
            name,
            if_not_exists,
            properties,
        } => {
            let c = cat.update(|s, _| ddl::create_keyspace(s, name, *if_not_exists, properties))?;
            Ok(done(c))
        }
        Statement::AlterKeyspace {
            name,
            if_exists,
            properties,
        } => {
            let c = cat.update(|s, _| ddl::alter_keyspace(s, name, *if_exists, properties))?;
            Ok(done(c))
        }
        Statement::DropKeyspace { name, if_exists } => {
            let res = cat.update(|s, batch| {
                let r = ddl::drop_keyspace(s, name, *if_exists)?;
                if let Some((_, tables)) = &r {
                    for t in tables {
                        engine.maps.remove(t.storage_id, batch);
                        purge_marker(t.storage_id, batch);
                    }
                }
                Ok(r)
            })?;
            if let Some((_, tables)) = &res {
                for t in tables {
                    spawn_purge(engine, t.storage_id);
                }
            }
            Ok(done(res.map(|r| r.0)))
        }
        Statement::CreateTable(ct) => {
            let ks = resolve_keyspace(keyspace, &ct.name)?;
            let mut new_map = None;
            let res = cat.update(|s, batch| {
                let r = ddl::create_table(s, ks, ct)?;
                if let Some((_, t)) = &r {
                    let tp = table_throughput(s, t);
                    new_map = Some((
                        t.storage_id,
                        engine.maps.initial_layout(t.storage_id, tp, batch),
                    ));
                }
                Ok(r)
            })?;
            if let Some((sid, map)) = new_map {
                engine.maps.install(sid, map);
            }
            Ok(done(res.map(|r| r.0)))
        }
        Statement::AlterTable {
            name,
            if_exists,
            action,
            if_column_not_exists,
            if_column_exists,
        } => {
            let ks = resolve_keyspace(keyspace, name)?;
            let flags = ddl::AlterFlags {
                if_exists: *if_exists,
                if_column_not_exists: *if_column_not_exists,
                if_column_exists: *if_column_exists,
            };
            let c = cat
                .update(|s, _| ddl::alter_table(s, ks, name, flags, action, super::now_micros()))?;
            ensure_throughput_layout(engine, ks, &name.name)?;
            Ok(done(c.map(|r| r.0)))
        }
        Statement::DropTable { name, if_exists } => {
            let ks = resolve_keyspace(keyspace, name)?;
            let res = cat.update(|s, batch| {
                let r = ddl::drop_table(s, ks, &name.name, *if_exists)?;
                if let Some((_, t)) = &r {
                    engine.maps.remove(t.storage_id, batch);
                    purge_marker(t.storage_id, batch);
                }
                Ok(r)
            })?;
            if let Some((_, t)) = &res {
                spawn_purge(engine, t.storage_id);
            }
            Ok(done(res.map(|r| r.0)))
        }
        Statement::Truncate(name) => {
            let schema = engine.schema();
            let t = resolve_table(&schema, keyspace, name)?;
            check_writable(t)?;
            let (ks, tname) = (t.keyspace.clone(), t.name.clone());
            let mut swap = None;
            cat.update(|s, batch| {
                let k = s.require_keyspace(&ks)?.clone();
                let old = s.require_table(&ks, &tname)?.clone();
                let mut t = (*old).clone();
                t.storage_id = s.next_storage_id;
                s.next_storage_id += 1;
                let map = engine
                    .maps
                    .initial_layout(t.storage_id, table_throughput(s, &t), batch);
                engine.maps.remove(old.storage_id, batch);
                purge_marker(old.storage_id, batch);
                swap = Some((old.storage_id, t.storage_id, map));
                let mut k = (*k).clone();
                k.tables.insert(tname.clone(), Arc::new(t));
                s.keyspaces.insert(ks.clone(), Arc::new(k));
                Ok(())
            })?;
            if let Some((old, new, map)) = swap {
                engine.maps.install(new, map);
                spawn_purge(engine, old);
            }
            Ok(Outcome::Void)
        }
        Statement::CreateType {
            name,
            if_not_exists,
            fields,
        } => {
            let ks = resolve_keyspace(keyspace, name)?;
            let c =
                cat.update(|s, _| ddl::create_type(s, ks, &name.name, *if_not_exists, fields))?;
            Ok(done(c))
        }
        Statement::DropType { name, if_exists } => {
            let ks = resolve_keyspace(keyspace, name)?;
            let c = cat.update(|s, _| ddl::drop_type(s, ks, &name.name, *if_exists))?;
            Ok(done(c))
        }
        Statement::AlterType { .. } => Err(invalid("ALTER TYPE is not supported yet")),
        Statement::CreateIndex { .. } | Statement::DropIndex { .. } => {
            Err(invalid("Secondary indexes are not supported yet"))
        }
        _ => Err(invalid("Unsupported statement")),
    }
}

fn purge_key(storage_id: u64) -> Vec<u8> {
    let mut k = b"purge/".to_vec();
    k.extend_from_slice(&storage_id.to_be_bytes());
    k
}

fn purge_marker(storage_id: u64, batch: &mut WriteBatch) {
    batch.put(Space::Meta, purge_key(storage_id), Vec::new());
}

/// Deletes the data of a dropped or truncated table in the background, in bounded batches;
/// the purge marker makes a restart finish the job.
pub fn spawn_purge(engine: &Engine, storage_id: u64) {
    let store = Arc::clone(&engine.store);
    std::thread::spawn(move || {
        if let Err(e) = purge(&*store, storage_id) {
            tracing::warn!(storage_id, error = %e, "purging table data failed; will retry at restart");
        }
    });
}

fn purge(store: &dyn crate::storage::Store, storage_id: u64) -> crate::storage::Result<()> {
    const BATCH: usize = 1000;
    let lo = storage_id.to_be_bytes();
    let hi = (storage_id + 1).to_be_bytes();
    loop {
        let mut batch = WriteBatch::default();
        for item in store
            .scan(
                Space::Data,
                std::ops::Bound::Included(&lo[..]),
                std::ops::Bound::Excluded(&hi[..]),
                false,
            )
            .take(BATCH)
        {
            batch.delete(Space::Data, item?.0);
        }
        let n = batch.ops.len();
        store.commit(batch)?;
        if n < BATCH {
            break;
        }
    }
    crate::partition::sizes::purge(store, storage_id)?;
    let mut batch = WriteBatch::default();
    batch.delete(Space::Meta, purge_key(storage_id));
    store.commit(batch)
}

/// Finishes purges interrupted by a restart.
pub fn resume_purges(engine: &Engine) -> Result<()> {
    let prefix = b"purge/";
    let end = crate::storage::prefix_successor(prefix).expect("successor");
    let ids: Vec<u64> = engine
        .store
        .scan(
            Space::Meta,
            std::ops::Bound::Included(&prefix[..]),
            std::ops::Bound::Excluded(&end[..]),
            false,
        )
        .filter_map(|r| r.ok())
        .filter_map(|(k, _)| {
            k.get(prefix.len()..)
                .and_then(|b| b.try_into().ok())
                .map(u64::from_be_bytes)
        })
        .collect();
    for id in ids {
        spawn_purge(engine, id);
    }
    Ok(())
}
