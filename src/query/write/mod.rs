//! Writes (INSERT, UPDATE, DELETE, BATCH) and DDL.
//!
//! A write becomes a list of mutations (a storage key and the cells to merge into it). Applying
//! them locks the logical partitions involved (striped locks, in order), reads the current rows,
//! merges with last-write-wins, and commits everything as one atomic storage batch.

use super::clustering::Restricted;
use super::complex::{self, ElemParams};
use super::eval::{eval, Ctx, Val};
use super::row::{self, Cell, ComplexCell, Elem, Marker, Pending, RowData};
use super::{
    invalid, resolve_keyspace, resolve_table, Engine, Outcome, QueryOptions, Result, Session,
    WriteType,
};
use crate::cql::ast::{
    Assignment, Batch, Conditions, Delete, DeleteTarget, Insert, InsertValues, Operator, Relation,
    RelationLhs, Statement, Term, Using,
};
use crate::cql::types::CqlType;
use crate::cql::value;
use crate::schema::{ddl, ColumnDef, ColumnKind, Schema, TableDef};
use crate::storage::{Space, WriteBatch, MAX_KEY_BYTES as STORE_MAX_KEY_BYTES};
use crate::tokens::{partition_key_bytes, Token};
use bytes::Bytes;
use std::sync::Arc;

use super::bind::BoundValues;

pub use crate::format::table_token;
pub(crate) use crate::format::{header_key, row_key};
// The submodules are seams of one statement path: each sees this module's imports and its
// siblings' items through `use super::*` (the globs below), so moving code between them needs
// no import changes.
mod admission;
mod apply;
mod batch;
pub(crate) mod by_partition;
mod ddl_exec;
mod delete;
mod dropped;
mod insert;
mod keys;
pub mod only_partitions;
mod params;
mod row_read;
pub(crate) mod same_row;
mod static_only;
mod update;

pub(crate) use self::admission::admit_writes;
pub(crate) use self::admission::charge_read;
pub use self::admission::table_throughput;
use self::admission::*;
pub use self::apply::apply;
pub use self::apply::apply_with;
pub(crate) use self::apply::{apply_once, conflict_backoff, contended, MAX_ATTEMPTS};
pub use self::batch::execute_batch;
pub use self::batch::run_batch;
pub use self::batch::BatchStmt;
pub use self::ddl_exec::execute_ddl;
use self::delete::*;
pub use self::dropped::resume_drop_data;
pub use self::dropped::spawn_drop_data;
use self::dropped::*;
use self::insert::*;
pub(crate) use self::keys::combinations;
pub(crate) use self::keys::in_product_exceeded;
pub use self::keys::in_values;
pub(crate) use self::keys::key_value;
pub use self::keys::key_values;
pub(crate) use self::keys::partition_key_of;
pub use self::keys::split_list;
pub use self::keys::MAX_IN_PRODUCT;
use self::keys::*;
pub use self::only_partitions::OnlyPartitions;
use self::params::*;
pub(crate) use self::static_only::check_static_only;
use self::update::*;

/// Longest partition key or clustering value Cassandra accepts.
pub const MAX_KEY_BYTES: usize = 65535;
/// Longest TTL (20 years).
pub const MAX_TTL: i64 = 630_720_000;

pub fn statement_timestamp(engine: &Engine, session: &mut Session, opts: &QueryOptions) -> i64 {
    opts.timestamp
        .unwrap_or_else(|| session.next_timestamp(&engine.clock))
}

/// One write to one storage key.
#[derive(Clone)]
pub struct Mutation {
    pub table: Arc<TableDef>,
    pub pk: Bytes,
    /// The token of `pk` (a write routes and charges by it several times: a Murmur3 hash each).
    pub token: Token,
    pub key: Vec<u8>,
    pub update: RowData,
}

/// The token a data key starts with (after its storage id; `format::keys`).
fn token_in_key(key: &[u8]) -> Token {
    crate::format::keys::key_token(key).expect("data keys start with id and token")
}

impl Mutation {
    /// A write of `update` to the row of partition `pk` with clustering values `ck`.
    fn row(table: &Arc<TableDef>, pk: Bytes, ck: &[Bytes], update: RowData) -> Mutation {
        let key = row_key(table, &pk, ck);
        Mutation {
            table: Arc::clone(table),
            token: token_in_key(&key),
            key,
            pk,
            update,
        }
    }

    /// A write of `update` to the header of partition `pk` (static cells, partition deletion,
    /// range tombstones).
    fn header(table: &Arc<TableDef>, pk: Bytes, update: RowData) -> Mutation {
        let key = header_key(table, &pk);
        Mutation {
            table: Arc::clone(table),
            token: token_in_key(&key),
            key,
            pk,
            update,
        }
    }
}

/// The mutations of a statement. `stripped`: the conditions the conditional path took off it
/// (they still decide Cassandra's static-only rule).
pub(crate) fn mutations_for(
    schema: &Schema,
    keyspace: Option<&str>,
    st: &Statement,
    stripped: Option<&Conditions>,
    ctx: &Ctx,
    ts: i64,
) -> Result<Vec<Mutation>> {
    let muts = match st {
        Statement::Insert(i) => {
            let t = resolve_table(schema, keyspace, &i.table)?;
            check_writable(t)?;
            insert_mutations(t, i, ctx, ts)
        }
        Statement::Update(u) => {
            let t = resolve_table(schema, keyspace, &u.table)?;
            check_writable(t)?;
            check_static_only(t, st, stripped)?;
            update_mutations(t, u, ctx, ts)
        }
        Statement::Delete(d) => {
            let t = resolve_table(schema, keyspace, &d.table)?;
            check_writable(t)?;
            check_static_only(t, st, stripped)?;
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
        now_micros: engine.clock.now_micros(),
    };
    mutations_for(schema, keyspace, st, None, &ctx, ts)
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
        now_micros: engine.clock.now_micros(),
    };
    if super::lwt::conditions(st).is_some() {
        let item = super::lwt::Item {
            st,
            ctx: &ctx,
            keyspace,
        };
        return super::lwt::execute(engine, &schema, &[item], ts, false, Some(rctx));
    }
    let muts = mutations_for(&schema, keyspace, st, None, &ctx, ts)?;
    let counter = muts.iter().any(|m| m.table.is_counter_table());
    let write_type = if counter {
        WriteType::Counter
    } else {
        WriteType::Simple
    };
    apply_with(engine, muts, Some(rctx), write_type)?;
    Ok(Outcome::Void)
}
