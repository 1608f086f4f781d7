//! Writes (INSERT, UPDATE, DELETE, BATCH) and DDL.
//!
//! A write becomes a list of mutations (a storage key and the cells to merge into it). Applying
//! them locks the logical partitions involved (striped locks, in order), reads the current rows,
//! merges with last-write-wins, and commits everything as one atomic storage batch.

use super::clustering::Restricted;
use super::complex::{self, ElemParams};
use super::eval::{eval, Ctx, Val};
use super::row::{self, Cell, ComplexCell, Elem, Marker, Pending, RowData, KIND_HEADER, KIND_ROW};
use super::{
    invalid, resolve_keyspace, resolve_table, Engine, Outcome, QueryOptions, Result, Session,
};
use crate::cql::ast::{
    Assignment, Batch, Delete, DeleteTarget, Insert, InsertValues, Operator, Relation, RelationLhs,
    Statement, Term, Using,
};
use crate::cql::types::CqlType;
use crate::cql::value;
use crate::partition::token::{partition_key_bytes, token_of, Token};
use crate::schema::{ddl, ColumnDef, ColumnKind, Schema, TableDef};
use crate::storage::{Space, WriteBatch, MAX_KEY_BYTES as STORE_MAX_KEY_BYTES};
use bytes::Bytes;
use std::sync::Arc;

use super::bind::BoundValues;

/// Longest partition key or clustering value Cassandra accepts.
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
/// anything is read or stored).
/// `write_type` is the protocol's (`SIMPLE`, `BATCH`, ...), for a server-side retry timeout.
pub(crate) fn admit_writes(
    engine: &Engine,
    muts: &[Mutation],
    write_type: &'static str,
    rctx: Option<&super::RequestCtx>,
) -> Result<()> {
    let (_, parts) = write_partitions(engine, muts);
    let gates: Vec<_> = parts.iter().map(|(p, b)| b.gate(p)).collect();
    let how = crate::partition::throttle::admit(
        &engine.limits.throughput,
        crate::partition::throttle::Access::Write(write_type),
        &gates,
        rctx.and_then(|c| c.held_since()),
    )?;
    if let Some(c) = rctx {
        c.admitted(how);
    }
    Ok(())
}

/// Whether a request's consumption is debited from its budgets (requests without a context are
/// internal and always are).
fn debits_budget(rctx: Option<&super::RequestCtx>) -> bool {
    rctx.is_none_or(|c| c.debits_budget())
}

/// Charges the read of a conditional write (`read`: stored keys and bytes read) to the request,
/// the partition's consumption and heat, and its throughput budget.
pub(crate) fn charge_read(
    engine: &Engine,
    rctx: Option<&super::RequestCtx>,
    t: &TableDef,
    pk: &[u8],
    read: (u64, u64),
) {
    let ru = crate::partition::ru::read_cost(read.0, read.1);
    if let Some(c) = rctx {
        c.add_charge(ru);
    }
    let Some(map) = engine.maps.get(t.storage_id) else {
        return;
    };
    let token = table_token(t, pk);
    let p = map.route(token);
    p.stats.consumed.add(ru);
    p.stats.hot.record(token, pk, ru);
    let schema = engine.schema();
    let budget = crate::partition::throttle::table_budget(
        &engine.maps,
        &schema,
        t,
        &map,
        &engine.limits.throughput,
    );
    if debits_budget(rctx) {
        budget.charge(&engine.limits.throughput, p, ru);
    }
}

type Budget = crate::partition::throttle::TableBudget;
type PartBudgets = Vec<(Arc<crate::partition::map::PhysicalPartition>, Budget)>;

/// Each table's throughput budget and the physical partitions the mutations touch with theirs.
fn write_partitions(engine: &Engine, muts: &[Mutation]) -> (Vec<(u64, Budget)>, PartBudgets) {
    let schema = engine.schema();
    let mut budgets: Vec<(u64, Budget)> = Vec::new();
    let mut parts: PartBudgets = Vec::new();
    for m in muts {
        let Some(map) = engine.maps.get(m.table.storage_id) else {
            continue;
        };
        let budget = match budgets.iter().find(|(s, _)| *s == m.table.storage_id) {
            Some((_, b)) => b.clone(),
            None => {
                let b = crate::partition::throttle::table_budget(
                    &engine.maps,
                    &schema,
                    &m.table,
                    &map,
                    &engine.limits.throughput,
                );
                budgets.push((m.table.storage_id, b.clone()));
                b
            }
        };
        let p = map.route(table_token(&m.table, &m.pk));
        if !parts.iter().any(|(q, _)| Arc::ptr_eq(q, p)) {
            parts.push((Arc::clone(p), budget));
        }
    }
    (budgets, parts)
}

/// One write to one storage key.
pub struct Mutation {
    pub table: Arc<TableDef>,
    pub pk: Bytes,
    pub key: Vec<u8>,
    pub update: RowData,
}

impl Mutation {
    /// A write of `update` to the row of partition `pk` with clustering values `ck`.
    fn row(table: &Arc<TableDef>, pk: &Bytes, ck: &[Bytes], update: RowData) -> Mutation {
        Mutation {
            table: Arc::clone(table),
            key: row_key(table, pk, ck),
            pk: pk.clone(),
            update,
        }
    }

    /// A write of `update` to the header of partition `pk` (static cells, partition deletion,
    /// range tombstones).
    fn header(table: &Arc<TableDef>, pk: &Bytes, update: RowData) -> Mutation {
        Mutation {
            table: Arc::clone(table),
            key: header_key(table, pk),
            pk: pk.clone(),
            update,
        }
    }
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
    check_in_product(table, columns, &out)?;
    Ok(out)
}

/// Most keys the `=` / `IN` values of a statement's partition key (or clustering key) columns
/// may combine to: each combination is a key to read or write, and `c1 IN ? AND c2 IN ? AND
/// c3 IN ?` with 100 values each would be a million. Cassandra's
/// `in_select_cartesian_product_fail_threshold` guardrail, always on here.
pub const MAX_IN_PRODUCT: usize = 10_000;

/// Refuses key values whose running product passes `MAX_IN_PRODUCT`, with the guardrail's error.
fn check_in_product(
    table: &TableDef,
    columns: &[usize],
    vals: &[Option<Vec<Bytes>>],
) -> Result<()> {
    let mut product = 1usize;
    for v in vals.iter().flatten() {
        product = product.saturating_mul(v.len());
        if product > MAX_IN_PRODUCT {
            let what = match columns.first().map(|&i| table.columns[i].kind) {
                Some(ColumnKind::PartitionKey) => "partition key",
                _ => "clustering key",
            };
            return Err(in_product_exceeded(what, product));
        }
    }
    Ok(())
}

/// The guardrail's error for `what` ("partition key" or "clustering key") whose `=` / `IN`
/// values combine to `product` keys.
pub(crate) fn in_product_exceeded(what: &str, product: usize) -> super::QueryError {
    invalid(format!(
        "Guardrail in_select_cartesian_product violated: Aborting query because the cartesian product of the IN restrictions on {what} produces {product} values, this exceeds fail threshold of {MAX_IN_PRODUCT}."
    ))
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

pub(crate) fn key_value(v: Val, col: &crate::schema::ColumnDef) -> Result<Bytes> {
    match v {
        Val::Value(b) => {
            // Cassandra's limit per key component (partition key and clustering values).
            if b.len() > MAX_KEY_BYTES {
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
pub(crate) fn combinations<'a, T: Clone + 'a>(
    cols: impl IntoIterator<Item = &'a Vec<T>>,
) -> Vec<Vec<T>> {
    let mut out: Vec<Vec<T>> = vec![Vec::new()];
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

/// An error naming the key columns (`idx`, `what`) that have no values in `have`, if any.
fn require_all(
    table: &TableDef,
    idx: &[usize],
    have: &[Option<Vec<Bytes>>],
    what: &str,
) -> Result<()> {
    let miss: Vec<&str> = idx
        .iter()
        .zip(have)
        .filter(|(_, h)| h.is_none())
        .map(|(&i, _)| table.columns[i].name.as_str())
        .collect();
    if miss.is_empty() {
        return Ok(());
    }
    Err(invalid(format!(
        "Some {what} are missing: {}",
        miss.join(", ")
    )))
}

/// The serialized partition keys a WHERE clause (or INSERT) names.
fn partition_keys(table: &TableDef, pk_vals: Vec<Option<Vec<Bytes>>>) -> Result<Vec<Bytes>> {
    require_all(table, &table.partition_key, &pk_vals, "partition key parts")?;
    let cols: Vec<Vec<Bytes>> = pk_vals.into_iter().map(|v| v.unwrap_or_default()).collect();
    combinations(&cols)
        .into_iter()
        .map(|parts| {
            let refs: Vec<&[u8]> = parts.iter().map(|b| &b[..]).collect();
            let k = Bytes::from(partition_key_bytes(&refs));
            check_partition_key(&k)?;
            Ok(k)
        })
        .collect()
}

/// Cassandra's rule for a serialized partition key: an empty key (a single-column key given as
/// `''` or an empty blob) is refused, by writes and reads alike.
pub(crate) fn check_partition_key(k: &[u8]) -> Result<()> {
    if k.is_empty() {
        return Err(invalid("Key may not be empty"));
    }
    Ok(())
}

/// Refuses mutations whose stored key would pass the store's key limit: a partition key and
/// clustering values each within Cassandra's 64 KiB can together, with the key's prefixes and
/// escaping, be longer than the store holds.
fn check_stored_keys(muts: &[Mutation]) -> Result<()> {
    match muts.iter().find(|m| m.key.len() > STORE_MAX_KEY_BYTES) {
        Some(m) => Err(invalid(format!(
            "The primary key is too long: stored with its prefixes it takes {} bytes, more than the maximum of {STORE_MAX_KEY_BYTES} (partition key and clustering values together)",
            m.key.len()
        ))),
        None => Ok(()),
    }
}

fn clustering_types(table: &TableDef) -> Vec<(&CqlType, bool)> {
    table
        .clustering_columns()
        .map(|c| (&c.ty, c.desc))
        .collect()
}

pub(crate) fn row_key(table: &TableDef, pk: &[u8], clustering: &[Bytes]) -> Vec<u8> {
    let mut k = row::partition_prefix(table.storage_id, table_token(table, pk), pk);
    k.push(KIND_ROW);
    row::encode_clustering(&clustering_types(table), clustering, &mut k);
    k
}

pub(crate) fn header_key(table: &TableDef, pk: &[u8]) -> Vec<u8> {
    let mut k = row::partition_prefix(table.storage_id, table_token(table, pk), pk);
    k.push(KIND_HEADER);
    k
}

struct WriteParams {
    ts: i64,
    ttl: i32,
    /// Milliseconds since the epoch; 0 = never.
    expiry: i64,
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
    // The deadline in milliseconds, rounded up: a cell is gone exactly when its TTL has elapsed
    // and never before.
    let expiry = if ttl == 0 {
        0
    } else {
        (super::now_micros() + 999).div_euclid(1000) + ttl * 1000
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

fn elem_params(p: &WriteParams) -> ElemParams {
    ElemParams {
        ts: p.ts,
        ttl: p.ttl,
        expiry: p.expiry,
        now: super::now_millis(),
    }
}

/// Adds the write of a whole value of column `col` to `upd`: one cell, or for a non-frozen
/// collection or UDT a collection deletion just below the write and one cell per element.
fn put_column(upd: &mut RowData, col: &ColumnDef, v: Val, p: &WriteParams) {
    if !col.ty.is_multi_cell() {
        upd.cells.extend(cell_for(col.id, v, p));
        return;
    }
    let now = super::now_secs();
    let (deletion_ts, elems) = match v {
        Val::Unset => return,
        Val::Null => (p.ts, Vec::new()),
        Val::Value(b) => (
            p.ts.saturating_sub(1),
            complex::elems_of_value(&col.ty, &b, &elem_params(p)),
        ),
    };
    upd.complex.push(ComplexCell {
        col: col.id,
        deletion: Some((deletion_ts, now)),
        elems,
    });
}

/// Adds elements (or element tombstones) to column `col`'s complex cell in `upd`.
fn put_elems(upd: &mut RowData, col: u32, elems: Vec<Elem>) {
    match upd.complex.iter_mut().find(|c| c.col == col) {
        Some(c) => {
            let merged = ComplexCell {
                col,
                deletion: None,
                elems,
            };
            let mut cur = std::mem::take(c);
            cur.col = col;
            // later assignments of one statement win over earlier ones at the same timestamp
            for e in merged.elems {
                match cur.elems.binary_search_by(|x| x.path.cmp(&e.path)) {
                    Ok(i) => cur.elems[i] = e,
                    Err(i) => cur.elems.insert(i, e),
                }
            }
            *c = cur;
        }
        None => {
            let mut elems = elems;
            elems.sort_by(|a, b| a.path.cmp(&b.path));
            upd.complex.push(ComplexCell {
                col,
                deletion: None,
                elems,
            });
        }
    }
}

fn sort_update(upd: &mut RowData) {
    upd.cells.sort_by_key(|c| c.col);
    upd.complex.sort_by_key(|c| c.col);
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
    let pairs: Vec<(String, Val)> = match &ins.values {
        InsertValues::Values { columns, values } => {
            if columns.len() != values.len() {
                return Err(invalid(format!(
                    "Unmatched column names/values: {} columns but {} values",
                    columns.len(),
                    values.len()
                )));
            }
            let mut pairs = Vec::with_capacity(columns.len());
            for (i, (name, term)) in columns.iter().zip(values).enumerate() {
                if columns[..i].contains(name) {
                    return Err(invalid(format!(
                        "Multiple definitions found for column {name}"
                    )));
                }
                let col = super::require_column(table, name)?;
                pairs.push((name.clone(), eval(term, &col.ty, name, ctx)?));
            }
            pairs
        }
        InsertValues::Json {
            value,
            default_unset,
        } => json_pairs(table, value, *default_unset, ctx)?,
    };
    let p = using_params(table, &ins.using, ctx, ts)?;
    let mut pk_vals: Vec<Option<Vec<Bytes>>> = vec![None; table.partition_key.len()];
    let mut ck_vals: Vec<Option<Vec<Bytes>>> = vec![None; table.clustering.len()];
    let mut cells = RowData::default();
    let mut static_cells = RowData::default();
    for (name, v) in pairs {
        let name = &name;
        let Some(col) = table.column(name) else {
            continue;
        };
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
        Some(
            ck_vals
                .into_iter()
                .map(|v| v.unwrap_or_default().remove(0))
                .collect(),
        )
    } else {
        None
    };
    let pks = partition_keys(table, pk_vals)?;
    sort_update(&mut cells);
    sort_update(&mut static_cells);
    let _ = engine;
    let mut out = Vec::new();
    for pk in pks {
        if let Some(ck) = &ck {
            let marker = Some(Marker {
                ts: p.ts,
                ttl: p.ttl,
                expiry: p.expiry,
            });
            out.push(Mutation::row(
                table,
                &pk,
                ck,
                RowData {
                    marker,
                    deletion: None,
                    ..cells.clone()
                },
            ));
        }
        if has_static {
            out.push(Mutation::header(table, &pk, static_cells.clone()));
        }
    }
    Ok(out)
}

/// The columns and values of `INSERT JSON`: every column of the table, those missing from the
/// object null (DEFAULT NULL) or left alone (DEFAULT UNSET).
fn json_pairs(
    table: &TableDef,
    value: &Term,
    default_unset: bool,
    ctx: &Ctx,
) -> Result<Vec<(String, Val)>> {
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
        pairs.push((col.name.clone(), v));
    }
    Ok(pairs)
}

/// Checks that a WHERE clause of UPDATE/DELETE restricts only primary key columns with = / IN.
fn check_write_where(table: &TableDef, rels: &[Relation]) -> Result<()> {
    for r in rels {
        match &r.lhs {
            RelationLhs::Column(c) => {
                let col = super::require_column(table, c)?;
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
        let column = match a {
            Assignment::Set { column, .. }
            | Assignment::SetElement { column, .. }
            | Assignment::SetField { column, .. }
            | Assignment::Append { column, .. }
            | Assignment::Prepend { column, .. }
            | Assignment::Remove { column, .. } => column,
        };
        let col = super::require_column(table, column)?;
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
            out.push(Mutation::row(table, &pk, ck, cells.clone()));
        }
        if has_static {
            out.push(Mutation::header(table, &pk, static_cells.clone()));
        }
    }
    Ok(out)
}

/// The elements of a collection value `v` of type `ty` (list/set elements or map keys).
fn items_of(v: &Bytes) -> Vec<Bytes> {
    value::collection_elements(v)
        .map(|it| {
            it.filter_map(|r| r.ok().flatten())
                .map(|e| v.slice_ref(e))
                .collect()
        })
        .unwrap_or_default()
}

fn op_text(a: &Assignment) -> String {
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
fn assign(
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
                ts: p.ts,
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
                            ts: p.ts,
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
                    _ => return Err(invalid("Invalid null value for map key")),
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
                    ts: p.ts,
                    ttl: p.ttl,
                    expiry: p.expiry,
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
        let col = super::require_column(table, name)?;
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
                    ts: p.ts,
                    local_deletion: now,
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
                out.push(Mutation::header(table, &pk, update));
            }
        } else if ck.len == table.clustering.len() && (del.targets.is_empty() || has_cells) {
            for key in &ck.prefixes {
                let update = if del.targets.is_empty() {
                    RowData {
                        deletion: Some((p.ts, now)),
                        ..Default::default()
                    }
                } else {
                    cells.clone()
                };
                out.push(Mutation::row(table, &pk, key, update));
            }
        } else if del.targets.is_empty() {
            // The whole partition: a partition deletion in its header.
            let update = RowData {
                deletion: Some((p.ts, now)),
                ..Default::default()
            };
            out.push(Mutation::header(table, &pk, update));
        } else if has_cells {
            // Columns of every row of the partition: a range deletion, which Cassandra refuses
            // for specific columns.
            return Err(invalid(
                "Range deletions are not supported for specific columns",
            ));
        }
        if has_static {
            out.push(Mutation::header(table, &pk, static_cells.clone()));
        }
    }
    Ok(out)
}

/// The position and type of `field` in non-frozen UDT column `col`, or Cassandra's errors
/// (`what` names the operation refused on a column that is not a non-frozen UDT).
fn udt_field<'c>(col: &'c ColumnDef, field: &str, what: &str) -> Result<(usize, &'c CqlType)> {
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
fn delete_target(
    upd: &mut RowData,
    col: &ColumnDef,
    target: &DeleteTarget,
    ctx: &Ctx,
    p: &WriteParams,
    now: i32,
) -> Result<()> {
    let name = &col.name;
    let ep = ElemParams {
        ts: p.ts,
        ttl: 0,
        expiry: 0,
        now: i64::from(now) * 1000,
    };
    match target {
        DeleteTarget::Column(_) => {
            if col.ty.is_multi_cell() {
                upd.complex.push(ComplexCell {
                    col: col.id,
                    deletion: Some((p.ts, now)),
                    elems: Vec::new(),
                });
            } else {
                upd.cells.push(Cell {
                    col: col.id,
                    ts: p.ts,
                    ttl: 0,
                    expiry: 0,
                    value: None,
                    local_deletion: now,
                });
            }
        }
        DeleteTarget::Element(_, key) => match &col.ty {
            CqlType::Map(kt, _) | CqlType::Set(kt) => {
                let k = match eval(key, kt, name, ctx)? {
                    Val::Value(k) => k,
                    Val::Unset => return Ok(()),
                    Val::Null => {
                        return Err(invalid(format!(
                            "Invalid null value for {} element",
                            if matches!(col.ty, CqlType::Map(..)) {
                                "map"
                            } else {
                                "set"
                            }
                        )))
                    }
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
                    ts: p.ts,
                    ttl: 0,
                    expiry: 0,
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

pub(crate) fn mutations_for(
    engine: &Engine,
    schema: &Schema,
    keyspace: Option<&str>,
    st: &Statement,
    ctx: &Ctx,
    ts: i64,
) -> Result<Vec<Mutation>> {
    let muts = match st {
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
    }?;
    check_stored_keys(&muts)?;
    Ok(muts)
}

pub(crate) fn check_writable(t: &TableDef) -> Result<()> {
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
    if super::lwt::conditions(st).is_some() {
        let item = super::lwt::Item {
            st,
            ctx: &ctx,
            keyspace,
        };
        return super::lwt::execute(engine, &schema, &[item], ts, false, Some(rctx));
    }
    let muts = mutations_for(engine, &schema, keyspace, st, &ctx, ts)?;
    let counter = muts.iter().any(|m| m.table.is_counter_table());
    let write_type = if counter { "COUNTER" } else { "SIMPLE" };
    apply_with(engine, muts, Some(rctx), write_type)?;
    Ok(Outcome::Void)
}

/// A BATCH given as CQL text (`BEGIN ... APPLY BATCH`).
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
    if b.using.ttl.is_some() {
        return Err(invalid(
            "Global TTL on the BATCH statement is not supported.",
        ));
    }
    let batch_ts = match &b.using.timestamp {
        Some(t) => match eval(t, &CqlType::Bigint, "[timestamp]", &ctx)? {
            Val::Value(v) if v.len() == 8 => Some(i64::from_be_bytes(v[..].try_into().expect("8"))),
            Val::Unset => None,
            _ => return Err(invalid("Invalid null value of timestamp")),
        },
        None => None,
    };
    let stmts: Vec<BatchStmt> = b
        .statements
        .iter()
        .map(|st| BatchStmt {
            st,
            ctx: &ctx,
            keyspace,
        })
        .collect();
    run_batch(engine, &schema, b.kind, batch_ts, &stmts, ts, rctx)
}

/// One statement of a batch with its bound values and keyspace.
pub struct BatchStmt<'a> {
    pub st: &'a Statement,
    pub ctx: &'a Ctx<'a>,
    pub keyspace: Option<&'a str>,
}

fn has_own_timestamp(st: &Statement) -> bool {
    match st {
        Statement::Insert(i) => i.using.timestamp.is_some(),
        Statement::Update(u) => u.using.timestamp.is_some(),
        Statement::Delete(d) => d.using.timestamp.is_some(),
        _ => false,
    }
}

/// Validates and runs a batch (CQL text or protocol BATCH) as Cassandra does: counter rules,
/// timestamps, conditions on one partition, size thresholds; then one atomic commit.
pub fn run_batch(
    engine: &Engine,
    schema: &Schema,
    kind: crate::cql::ast::BatchKind,
    batch_ts: Option<i64>,
    stmts: &[BatchStmt],
    ts: i64,
    rctx: &super::RequestCtx,
) -> Result<Outcome> {
    use crate::cql::ast::BatchKind;
    let has_conditions = stmts.iter().any(|s| super::lwt::conditions(s.st).is_some());
    if batch_ts.is_some() {
        if has_conditions {
            return Err(invalid(
                "Cannot provide custom timestamp for conditional BATCH",
            ));
        }
        if kind == BatchKind::Counter {
            return Err(invalid("Cannot provide custom timestamp for counter BATCH"));
        }
    }
    let (mut counters, mut non_counters) = (false, false);
    for s in stmts {
        if batch_ts.is_some() && has_own_timestamp(s.st) {
            return Err(invalid(
                "Timestamp must be set either on BATCH or individual statements",
            ));
        }
        let tname = match s.st {
            Statement::Insert(i) => &i.table,
            Statement::Update(u) => &u.table,
            Statement::Delete(d) => &d.table,
            _ => {
                return Err(invalid(
                    "Only INSERT, UPDATE and DELETE statements are allowed in a BATCH",
                ))
            }
        };
        if resolve_table(schema, s.keyspace, tname)?.is_counter_table() {
            counters = true;
        } else {
            non_counters = true;
        }
    }
    if batch_ts.is_some() && counters {
        return Err(invalid(
            "Cannot provide custom timestamp for a BATCH containing counters",
        ));
    }
    if kind == BatchKind::Counter && non_counters {
        return Err(invalid(
            "Cannot include non-counter statement in a counter batch",
        ));
    }
    if counters && non_counters {
        return Err(invalid(
            "Counter and non-counter mutations cannot exist in the same batch",
        ));
    }
    if kind == BatchKind::Logged && counters {
        return Err(invalid(
            "Cannot include a counter statement in a logged batch",
        ));
    }
    let ts = batch_ts.unwrap_or(ts);
    if has_conditions {
        let items: Vec<super::lwt::Item> = stmts
            .iter()
            .map(|s| super::lwt::Item {
                st: s.st,
                ctx: s.ctx,
                keyspace: s.keyspace,
            })
            .collect();
        return super::lwt::execute(engine, schema, &items, ts, true, Some(rctx));
    }
    let mut all = Vec::new();
    for s in stmts {
        all.extend(mutations_for(engine, schema, s.keyspace, s.st, s.ctx, ts)?);
    }
    check_batch_size(engine, &all, rctx)?;
    batch_warnings(kind, &all, rctx);
    let write_type = match kind {
        BatchKind::Logged => "BATCH",
        BatchKind::Unlogged => "UNLOGGED_BATCH",
        BatchKind::Counter => "COUNTER",
    };
    apply_with(engine, all, Some(rctx), write_type)?;
    Ok(Outcome::Void)
}

/// Table names as Cassandra prints a set of them: `[ks.a, ks.b]`.
fn table_set(muts: &[&Mutation]) -> (usize, String) {
    let mut names: Vec<String> = muts
        .iter()
        .map(|m| format!("{}.{}", m.table.keyspace, m.table.name))
        .collect();
    names.sort();
    names.dedup();
    (names.len(), format!("[{}]", names.join(", ")))
}

/// Cassandra's client warnings for unlogged batches over many partitions and for logged batches
/// on tables with gc_grace_seconds = 0.
fn batch_warnings(kind: crate::cql::ast::BatchKind, muts: &[Mutation], rctx: &super::RequestCtx) {
    use crate::cql::ast::BatchKind;
    /// Cassandra's unlogged_batch_across_partitions_warn_threshold.
    const UNLOGGED_PARTITIONS_WARN: usize = 10;
    if kind == BatchKind::Logged {
        let zero: Vec<&Mutation> = muts
            .iter()
            .filter(|m| m.table.options.gc_grace_seconds == 0)
            .collect();
        if !zero.is_empty() {
            let (n, names) = table_set(&zero);
            rctx.warn(format!(
                "Executing a LOGGED BATCH on table{} {names}, configured with a gc_grace_seconds of 0. The gc_grace_seconds is used to TTL batchlog entries, so setting gc_grace_seconds too low on tables involved in an atomic batch might cause batchlog entries to expire before being replayed.",
                if n == 1 { "" } else { "s" }
            ));
        }
        return;
    }
    let mut keys: Vec<&Bytes> = muts.iter().map(|m| &m.pk).collect();
    keys.sort_unstable();
    keys.dedup();
    if keys.len() > UNLOGGED_PARTITIONS_WARN {
        let all: Vec<&Mutation> = muts.iter().collect();
        let (n, names) = table_set(&all);
        rctx.warn(format!(
            "Unlogged batch covering {} partitions detected against table{} {names}. You should use a logged batch for atomicity, or asynchronous writes for performance.",
            keys.len(),
            if n == 1 { "" } else { "s" }
        ));
    }
}

/// Cassandra's batch size thresholds, for batches spanning more than one partition.
fn check_batch_size(engine: &Engine, muts: &[Mutation], rctx: &super::RequestCtx) -> Result<()> {
    let mut partitions: Vec<(u64, &Bytes)> =
        muts.iter().map(|m| (m.table.storage_id, &m.pk)).collect();
    partitions.sort_unstable();
    partitions.dedup();
    if partitions.len() <= 1 {
        return Ok(());
    }
    let size: usize = muts
        .iter()
        .map(|m| {
            m.update
                .cells
                .iter()
                .map(|c| c.value.as_ref().map_or(0, |v| v.len()) + 8)
                .sum::<usize>()
        })
        .sum();
    let warn = engine.limits.batch_warn_bytes;
    if size <= warn {
        return Ok(());
    }
    let mut tables: Vec<String> = muts
        .iter()
        .map(|m| format!("{}.{}", m.table.keyspace, m.table.name))
        .collect();
    tables.sort();
    tables.dedup();
    let tables = format!("[{}]", tables.join(", "));
    let fail = engine.limits.batch_fail_bytes;
    if size > fail {
        tracing::error!(
            "Batch for {tables} is of size {size}, exceeding specified threshold of {fail} by {}. (see batch_size_fail_threshold)",
            size - fail
        );
        return Err(invalid("Batch too large"));
    }
    rctx.warn(format!(
        "Batch for {tables} is of size {size}, exceeding specified threshold of {warn} by {}.",
        size - warn
    ));
    Ok(())
}

/// Applies mutations atomically: locks their partitions, merges with stored rows, commits.
pub fn apply(engine: &Engine, muts: Vec<Mutation>) -> Result<()> {
    apply_with(engine, muts, None, "SIMPLE")
}

/// `apply`, reporting warnings (logical partitions near their size limit) and the charge to the
/// request; `write_type` is the protocol's, for a server-side retry timeout.
pub fn apply_with(
    engine: &Engine,
    muts: Vec<Mutation>,
    rctx: Option<&super::RequestCtx>,
    write_type: &'static str,
) -> Result<()> {
    if muts.is_empty() {
        return Ok(());
    }
    admit_writes(engine, &muts, write_type, rctx)?;
    let stripes = stripes_of(engine, &muts);
    let _guards: Vec<_> = stripes.iter().map(|&i| engine.stripe(i).lock()).collect();
    apply_locked(engine, muts, rctx)
}

/// The lock stripes of the partitions mutations touch, sorted and distinct (lock them in order).
pub(crate) fn stripes_of(engine: &Engine, muts: &[Mutation]) -> Vec<usize> {
    let mut stripes: Vec<usize> = muts
        .iter()
        .map(|m| engine.lock_stripe(m.table.storage_id, &m.pk))
        .collect();
    stripes.sort_unstable();
    stripes.dedup();
    stripes
}

/// `apply` with the stripes of every mutation's partition already held by the caller.
pub(crate) fn apply_locked(
    engine: &Engine,
    muts: Vec<Mutation>,
    rctx: Option<&super::RequestCtx>,
) -> Result<()> {
    let budgets = write_partitions(engine, &muts).0;
    let mut batch = WriteBatch::default();
    // Several mutations of one batch may hit the same key: merge them in order. The stored
    // version is kept for tables with secondary indexes, to update their entries.
    struct Merged {
        key: Vec<u8>,
        table: Arc<TableDef>,
        old: Option<RowData>,
        row: RowData,
        /// (token, stored bytes before) for size accounting.
        token: Token,
        old_len: usize,
        pk: Bytes,
    }
    let mut merged: Vec<Merged> = Vec::with_capacity(muts.len());
    for m in muts {
        if let Some(x) = merged.iter_mut().find(|x| x.key == m.key) {
            x.row.merge(m.update);
            let pending = std::mem::take(&mut x.row.pending);
            x.row
                .apply_pending(pending, super::now_millis())
                .map_err(invalid)?;
            continue;
        }
        let stored = engine.store.get(Space::Data, &m.key)?;
        let token = table_token(&m.table, &m.pk);
        let old_len = stored.as_ref().map_or(0, |b| m.key.len() + b.len());
        let mut current = match stored {
            Some(b) => RowData::decode(&b)?,
            None => RowData::default(),
        };
        let old = (!m.table.indexes.is_empty()).then(|| current.clone());
        current.merge(m.update);
        let pending = std::mem::take(&mut current.pending);
        current
            .apply_pending(pending, super::now_millis())
            .map_err(invalid)?;
        merged.push(Merged {
            key: m.key,
            table: m.table,
            old,
            row: current,
            token,
            old_len,
            pk: m.pk,
        });
    }
    let now = super::now_millis();
    let mut sizes = crate::partition::sizes::Accounting::default();
    let limits = &engine.limits.partitions;
    for m in merged {
        if let Some(old) = &m.old {
            super::index::maintain(&m.table, &m.key, old, &m.row, now, &mut batch);
        }
        let mut buf = Vec::with_capacity(m.row.encoded_len());
        m.row.encode(&mut buf);
        sizes.key_change(
            limits,
            m.table.storage_id,
            m.token,
            &m.pk,
            m.old_len,
            m.key.len() + buf.len(),
        )?;
        batch.put(Space::Data, m.key, buf);
    }
    sizes.prepare(&*engine.store, limits, &mut batch, rctx)?;
    let touched = sizes.commit(&engine.maps, || engine.store.commit(batch))?;
    if let Some(c) = rctx {
        c.add_charge(sizes.request_units());
    }
    for (sid, p, ru) in &touched {
        engine.splitter.check(*sid, p);
        if let Some((_, b)) = budgets.iter().find(|(s, _)| s == sid) {
            if debits_budget(rctx) {
                b.charge(&engine.limits.throughput, p, *ru);
            }
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
            let c = cat.update(|s, _| {
                ddl::create_keyspace(
                    s,
                    name,
                    *if_not_exists,
                    properties,
                    &engine.node.data_center,
                )
            })?;
            Ok(done(c))
        }
        Statement::AlterKeyspace {
            name,
            if_exists,
            properties,
        } => {
            let c = cat.update(|s, _| {
                ddl::alter_keyspace(s, name, *if_exists, properties, &engine.node.data_center)
            })?;
            Ok(done(c))
        }
        Statement::DropKeyspace { name, if_exists } => {
            let res = cat.update(|s, batch| {
                let r = ddl::drop_keyspace(s, name, *if_exists)?;
                if let Some((_, tables)) = &r {
                    for t in tables {
                        engine.maps.remove(t.storage_id, batch);
                        for id in table_storage_ids(t) {
                            purge_marker(id, batch);
                        }
                    }
                }
                Ok(r)
            })?;
            if let Some((_, tables)) = &res {
                for t in tables {
                    for id in table_storage_ids(t) {
                        spawn_purge(engine, id);
                    }
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
                    for id in table_storage_ids(t) {
                        purge_marker(id, batch);
                    }
                }
                Ok(r)
            })?;
            if let Some((_, t)) = &res {
                for id in table_storage_ids(t) {
                    spawn_purge(engine, id);
                }
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
                // Index entries start empty too.
                for ix in &mut t.indexes {
                    ix.storage_id = s.next_storage_id;
                    s.next_storage_id += 1;
                }
                let map = engine
                    .maps
                    .initial_layout(t.storage_id, table_throughput(s, &t), batch);
                engine.maps.remove(old.storage_id, batch);
                for id in table_storage_ids(&old) {
                    purge_marker(id, batch);
                }
                swap = Some((table_storage_ids(&old), t.storage_id, map));
                let mut k = (*k).clone();
                k.tables.insert(tname.clone(), Arc::new(t));
                s.keyspaces.insert(ks.clone(), Arc::new(k));
                Ok(())
            })?;
            if let Some((old, new, map)) = swap {
                engine.maps.install(new, map);
                for id in old {
                    spawn_purge(engine, id);
                }
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
        Statement::AlterType {
            name,
            if_exists,
            action,
            if_field_not_exists,
            if_field_exists,
        } => {
            let ks = resolve_keyspace(keyspace, name)?;
            let c = cat.update(|s, _| {
                ddl::alter_type(
                    s,
                    ks,
                    &name.name,
                    *if_exists,
                    action,
                    *if_field_not_exists,
                    *if_field_exists,
                )
            })?;
            Ok(done(c))
        }
        Statement::CreateIndex {
            name,
            table,
            target,
            if_not_exists,
            custom_class,
            ..
        } => {
            let ks = resolve_keyspace(keyspace, table)?;
            let res = cat.update(|s, _| {
                ddl::create_index(
                    s,
                    ks,
                    &table.name,
                    name.as_deref(),
                    target,
                    *if_not_exists,
                    custom_class.as_deref(),
                )
            })?;
            match res {
                Some((change, t, index)) => {
                    super::index::build(engine, &t, &index)?;
                    Ok(Outcome::SchemaChange(change))
                }
                None => Ok(Outcome::Void),
            }
        }
        Statement::DropIndex { name, if_exists } => {
            let ks = resolve_keyspace(keyspace, name)?;
            let res = cat.update(|s, batch| {
                let r = ddl::drop_index(s, ks, &name.name, *if_exists)?;
                if let Some((_, ix)) = &r {
                    purge_marker(ix.storage_id, batch);
                }
                Ok(r)
            })?;
            match res {
                Some((change, ix)) => {
                    spawn_purge(engine, ix.storage_id);
                    Ok(Outcome::SchemaChange(change))
                }
                None => Ok(Outcome::Void),
            }
        }
        _ => Err(invalid("Unsupported statement")),
    }
}

/// The storage ids holding a table's data: its rows and its index entries.
fn table_storage_ids(t: &TableDef) -> Vec<u64> {
    std::iter::once(t.storage_id)
        .chain(t.indexes.iter().map(|i| i.storage_id))
        .collect()
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
    let lo = storage_id.to_be_bytes();
    let hi = (storage_id + 1).to_be_bytes();
    crate::storage::delete_range(store, Space::Data, &lo, &hi)?;
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
