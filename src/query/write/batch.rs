//! BATCH: validation as Cassandra does it (counter rules, timestamps, conditions on one
//! partition, size thresholds and warnings), then one atomic commit.

use super::*;

/// A BATCH given as CQL text (`BEGIN ... APPLY BATCH`).
pub fn execute_batch(
    engine: &Engine,
    keyspace: Option<&str>,
    b: &Batch,
    binds: &BoundValues,
    ts: i64,
    rctx: &crate::query::RequestCtx,
) -> Result<Outcome> {
    let schema = engine.schema();
    let ctx = Ctx {
        binds,
        max_value_bytes: engine.limits.max_value_bytes,
        now_micros: engine.clock.now_micros(),
    };
    if b.using.ttl.is_some() {
        return Err(invalid(
            "Global TTL on the BATCH statement is not supported.",
        ));
    }
    let batch_ts = match &b.using.timestamp {
        Some(t) => params::using_timestamp(t, &ctx)?,
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

pub(super) fn has_own_timestamp(st: &Statement) -> bool {
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
    rctx: &crate::query::RequestCtx,
) -> Result<Outcome> {
    use crate::cql::ast::BatchKind;
    let has_conditions = stmts
        .iter()
        .any(|s| crate::query::lwt::conditions(s.st).is_some());
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
        let items: Vec<crate::query::lwt::Item> = stmts
            .iter()
            .map(|s| crate::query::lwt::Item {
                st: s.st,
                ctx: s.ctx,
                keyspace: s.keyspace,
            })
            .collect();
        return crate::query::lwt::execute(engine, schema, &items, ts, true, Some(rctx));
    }
    let mut all = Vec::new();
    for s in stmts {
        all.extend(mutations_for(schema, s.keyspace, s.st, None, s.ctx, ts)?);
    }
    check_batch_size(engine, &all, rctx)?;
    batch_warnings(kind, &all, rctx);
    let write_type = match kind {
        BatchKind::Logged => WriteType::Batch,
        BatchKind::Unlogged => WriteType::UnloggedBatch,
        BatchKind::Counter => WriteType::Counter,
    };
    apply_with(engine, all, Some(rctx), write_type)?;
    Ok(Outcome::Void)
}

/// Table names as Cassandra prints a set of them: `[ks.a, ks.b]`.
pub(super) fn table_set(muts: &[&Mutation]) -> (usize, String) {
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
pub(super) fn batch_warnings(
    kind: crate::cql::ast::BatchKind,
    muts: &[Mutation],
    rctx: &crate::query::RequestCtx,
) {
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
pub(super) fn check_batch_size(
    engine: &Engine,
    muts: &[Mutation],
    rctx: &crate::query::RequestCtx,
) -> Result<()> {
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
