//! SELECT: planning (which partitions, which clustering slices, what to filter), routing to
//! physical partitions, reading, projecting and paging.

use super::bind::BoundValues;
use super::complex;
use super::eval::{eval, Ctx, Val};
use super::row::{self, RowData, KIND_HEADER, KIND_ROW};
use super::write::{in_values, key_values, partition_key_of, table_token};
use super::{invalid, resolve_table, Engine, QueryOptions, Result, ResultColumn, Rows};
use crate::cql::ast::{Operator, Relation, RelationLhs, Select, Selection, SelectorExpr, Term};
use crate::cql::types::CqlType;
use crate::cql::value;
use crate::schema::{ColumnKind, TableDef};
use crate::storage::{prefix_successor, PartitionHandle};
use crate::tokens::{partition_key_bytes, split_composite, Token, MAX_TOKEN, MIN_TOKEN};
use bytes::{BufMut, Bytes, BytesMut};
use std::cmp::Ordering;
use std::ops::Bound;
use std::sync::Arc;

// The submodules are seams of one statement path: each sees this module's imports and its
// siblings' items through `use super::*` (the globs below), so moving code between them needs
// no import changes.
mod agg_expr;
mod cells;
mod feed;
mod filters;
mod flat_scan;
mod fresh;
mod limits;
mod output;
mod paging;
mod partition_rows;
mod plan;
mod point_plan;
mod points;
mod range_share;
mod read;
mod routing;
mod selection;
mod shape;
mod slices;
mod timing;
mod token_selector;
#[cfg(test)]
mod watched;

use self::agg_expr::*;
pub(crate) use self::cells::column_value;
use self::cells::*;
pub(crate) use self::filters::contains;
pub(crate) use self::filters::contains_operand;
pub(crate) use self::filters::contains_type;
pub(crate) use self::filters::field_value;
pub(crate) use self::filters::map_value;
pub(crate) use self::filters::tuple_values;
use self::filters::*;
use self::flat_scan::*;
use self::fresh::*;
use self::limits::*;
use self::output::*;
pub use self::paging::paging_state_roundtrip;
use self::paging::*;
use self::partition_rows::*;
use self::plan::*;
use self::point_plan::*;
use self::points::*;
use self::read::*;
use self::routing::*;
pub use self::selection::result_columns;
use self::selection::*;
use self::shape::*;
pub use self::shape::{Shape, ShapeCell};
pub(crate) use self::slices::clustering_slices;
pub(crate) use self::slices::max_lo;
pub(crate) use self::slices::min_hi;
use self::timing::*;

/// A range of storage keys.
pub(crate) type KeyRange = (Bound<Vec<u8>>, Bound<Vec<u8>>);

pub fn execute(
    engine: &Engine,
    keyspace: Option<&str>,
    sel: &Select,
    binds: &BoundValues,
    opts: &QueryOptions,
    described: Option<crate::query::Described>,
) -> Result<Rows> {
    for _ in 0..MAX_READS {
        // Before the maps are read for routing (`fresh.rs`).
        let since = engine.maps.followed_revision();
        let (rows, elsewhere) = read_once(engine, keyspace, sel, binds, opts, described)?;
        if !elsewhere || engine.maps.unchanged_since(since)? {
            return Ok(rows);
        }
        opts.ctx
            .trace(|| "A partition map changed during the read: reading again".to_string());
    }
    Err(super::QueryError::Unavailable(format!(
        "the partition maps changed during each of {MAX_READS} attempts of this read (splits or \
         moves going on); try again"
    )))
}

/// One run of a SELECT; with it, whether it read a partition this node does not own.
fn read_once(
    engine: &Engine,
    keyspace: Option<&str>,
    sel: &Select,
    binds: &BoundValues,
    opts: &QueryOptions,
    described: Option<crate::query::Described>,
) -> Result<(Rows, bool)> {
    let schema = engine.schema();
    let t = resolve_table(&schema, keyspace, &sel.table)?;
    if sel.json && t.virtual_table {
        return Err(invalid("SELECT JSON is not supported on system tables"));
    }
    let ctx = Ctx {
        binds,
        max_value_bytes: engine.limits.max_value_bytes,
        now_micros: engine.clock.now_micros(),
    };
    let feed = super::changefeed::detect(sel, &ctx)?;
    let sel = feed.as_ref().map_or(sel, |(_, rest)| rest);
    if feed.is_some() && t.virtual_table {
        return Err(invalid(
            "Change feed queries are not supported on system tables",
        ));
    }
    // A prepared statement's columns and shape, if described under this very schema (a change
    // of the table since would make them wrong) and not a feed query (it reads a rewritten
    // SELECT).
    let described = described.filter(|d| d.schema_version == schema.version && feed.is_none());
    let mut planned = None;
    let shape = shape_of(t, sel, &ctx, described.map(|d| d.shape), &mut planned)?;
    let (proj, group_cols) = (&shape.proj, shape.group_cols.clone());
    let aggregating = !group_cols.is_empty()
        || proj
            .iter()
            .any(|(p, _, _)| matches!(p, Proj::Agg(..) | Proj::AggOf(..)));
    // Without GROUP BY an aggregate query answers one row: it is not paged.
    let count_only = aggregating && group_cols.is_empty();
    let columns = match described {
        Some(d) => Arc::clone(d.result_columns),
        None => Arc::new(result_columns(t, sel)?),
    };
    let mut plan = plan(t, sel, &ctx, shape)?;
    if t.virtual_table {
        plan.filters = all_filters(t, sel, &ctx)?;
    }
    let per_partition = per_partition_limit(t, sel, proj, &ctx)?;
    if !t.virtual_table {
        opts.ctx.trace(|| routing(engine, t, &plan.target));
    }
    let paging = match &opts.paging_state {
        Some(b) if !count_only && feed.is_none() => Some(PagingState::decode(b)?),
        _ => None,
    };
    let page_rows = match opts.page_size {
        Some(n) if n > 0 && !count_only => n as usize,
        _ => usize::MAX,
    };
    let remaining = match (&paging, plan.limit) {
        (Some(p), Some(_)) => p.remaining.map(|r| r as usize),
        (_, l) => l,
    };
    // Built again for a second run that reads partitions from snapshots (`read_stored`).
    let new_output = |snapshot_reads: bool| {
        let mut out = Output {
            rows: Rows::new(Arc::clone(&columns)),
            proj,
            table: t,
            page_rows,
            page_bytes: if page_rows == usize::MAX {
                usize::MAX
            } else {
                engine.limits.max_page_bytes
            },
            remaining,
            now: ctx.now_micros.div_euclid(1000),
            agg: aggregating.then(|| Aggregation::new(proj, t, group_cols.clone())),
            resume_inclusive: false,
            json: sel.json,
            aggregating,
            per_partition,
            cur_pk: None,
            cur_count: 0,
            map: engine.maps.get(t.storage_id),
            meter: smallvec::SmallVec::new(),
            error: Default::default(),
            snapshot_reads,
            wants_snapshots: false,
        };
        if let (Some(_), Some(p)) = (out.per_partition, &paging) {
            // Resuming inside a partition: the rows it already returned count against its
            // limit.
            if let Ok(dk) = row::decode_key(&p.last_key, &[]) {
                out.cur_pk = Some(dk.pk);
                out.cur_count = p.partition_rows as usize;
            }
        }
        out
    };
    let mut out = new_output(false);
    let mut elsewhere = false;
    if t.virtual_table {
        opts.ctx.add_charge(crate::partition::ru::FIXED_RU);
        read_virtual(
            engine,
            &schema,
            t,
            &plan,
            &mut out,
            paging,
            opts.peer_rows.as_deref(),
        )?;
    } else {
        elsewhere = reads_elsewhere(engine, t.storage_id, &plan, out.map.as_deref());
        let budget = admit_read(engine, &schema, t, &plan, out.map.as_deref(), opts)?;
        let res = match &feed {
            Some((q, _)) => self::feed::read_feed(engine, t, &plan, &mut out, q, opts),
            None => match read_stored(engine, t, &plan, &mut out, paging.as_ref()) {
                // A partition read needed a second read of the store: once more from
                // snapshots, so that it sees one state of the partition.
                Ok(()) if out.wants_snapshots => {
                    out = new_output(true);
                    read_stored(engine, t, &plan, &mut out, paging.as_ref())
                }
                res => res,
            },
        };
        let (rows, bytes) = out
            .meter
            .iter()
            .fold((0, 0), |(r, b), (_, r2, b2)| (r + r2, b + b2));
        opts.ctx
            .add_charge(crate::partition::ru::read_cost(rows, bytes));
        // What the read cost in storage: a clustering slice reads only its rows (tests check
        // a slice of a wide partition reads no more than of a narrow one).
        opts.ctx.trace(|| {
            format!(
                "Read {rows} stored rows ({bytes} bytes) from {} physical partition(s)",
                out.meter.len()
            )
        });
        if opts.serial {
            // A SERIAL read is a Paxos round: charged a read plus a (minimal) write.
            let extra = crate::partition::ru::write_key_cost(0, 0);
            opts.ctx.add_charge(extra);
            if let (Some(b), Some((p, _, _))) = (&budget, out.meter.first()) {
                p.stats.consumed.add(extra);
                if opts.ctx.debits_budget() {
                    b.charge(&engine.limits.throughput, p, extra);
                }
            }
        }
        // One clock reading for the consumption and the heat (a point read pays for each).
        let now = crate::partition::ru::unix_now();
        crate::partition::ru::charge_partitions(&out.meter, now);
        // A single-partition read counts towards that logical partition's heat.
        if let (Target::Partitions(keys), [(p, rows, bytes)]) = (&plan.target, &out.meter[..]) {
            if let ([k], [token]) = (&keys[..], &plan.tokens[..]) {
                let ru = crate::partition::ru::read_cost(*rows, *bytes);
                p.stats.hot.record_at(*token, k, ru, now);
            }
        }
        if let Some(budget) = budget.as_ref().filter(|_| opts.ctx.debits_budget()) {
            for (p, rows, bytes) in &out.meter {
                budget.charge(
                    &engine.limits.throughput,
                    p,
                    crate::partition::ru::read_cost(*rows, *bytes),
                );
            }
        }
        res?;
        // Untraced statements: the slow query log's routing, built only for slow ones.
        if !opts.ctx.is_traced() {
            opts.ctx.note_if_slow(|| routing(engine, t, &plan.target));
        }
    }
    if let Some(e) = out.error.take() {
        return Err(e);
    }
    if out.agg.is_some() && out.rows.paging_state.is_none() && out.remaining != Some(0) {
        // The last group (or, without GROUP BY, the one result row) ends with the rows.
        let _ = out.flush_group();
    }
    Ok((out.rows, elsewhere))
}
