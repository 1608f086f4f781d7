//! Applying mutations: lock the partitions' stripes in order, merge with the stored rows
//! (last-write-wins), commit through each physical partition's handle.
//!
//! Read-merge-write is exact through the commit's conditions, not only through the lock
//! stripes (which stay as the fast path): every row read and merged is committed on the
//! condition that it still holds what was read (`Condition::Unchanged`), so a writer that does
//! not share this process's locks (another node over the same backend) makes the commit fail
//! with `Conflict` instead of losing its update. A conflict is read again and merged again, up
//! to `MAX_ATTEMPTS` times, then answered as Cassandra answers contention: a WriteTimeout.

use super::*;
use crate::error::WriteType;
use crate::query::changefeed::write as changefeed;
use crate::query::QueryError;
use crate::storage::handle::Condition;
use crate::storage::StorageError;
use smallvec::SmallVec;

/// The conditions of one attempt's commit: (storage id, token, condition).
type Conditions = SmallVec<[(u64, Token, Condition); 1]>;

/// Applies mutations atomically: locks their partitions, merges with stored rows, commits.
pub fn apply(engine: &Engine, muts: Vec<Mutation>) -> Result<()> {
    apply_with(engine, muts, None, WriteType::Simple)
}

/// `apply`, reporting warnings (logical partitions near their size limit) and the charge to the
/// request; `write_type` is the protocol's, for a server-side retry timeout.
pub fn apply_with(
    engine: &Engine,
    muts: Vec<Mutation>,
    rctx: Option<&crate::query::RequestCtx>,
    write_type: WriteType,
) -> Result<()> {
    let muts = match rctx.and_then(|c| c.only_partitions()) {
        Some(only) => super::only_partitions::keep(engine, muts, only)?,
        None => muts,
    };
    if muts.is_empty() {
        return Ok(());
    }
    let logged = |e| match e {
        QueryError::Spans { message, parts, .. } => QueryError::Spans {
            message,
            parts,
            logged: write_type == WriteType::Batch,
        },
        e => e,
    };
    let budgets = admit_writes(engine, &muts, write_type, rctx).map_err(logged)?;
    let stripes = stripes_of(engine, &muts);
    let _guards: SmallVec<[_; 2]> = stripes.iter().map(|&i| engine.write_lock(i)).collect();
    apply_locked(engine, muts, rctx, (write_type, &budgets)).map_err(logged)
}

/// Attempts of a write whose conditional commit conflicts (each reads again).
pub(crate) const MAX_ATTEMPTS: u32 = 8;

/// The lock stripes of the partitions mutations touch, sorted and distinct (lock them in order).
pub(crate) fn stripes_of(engine: &Engine, muts: &[Mutation]) -> SmallVec<[usize; 2]> {
    let mut stripes: SmallVec<[usize; 2]> = muts
        .iter()
        .map(|m| engine.lock_stripe(m.table.storage_id, &m.pk))
        .collect();
    stripes.sort_unstable();
    stripes.dedup();
    stripes
}

/// `apply` with the stripes of every mutation's partition already held by the caller; retries
/// a conditional commit that conflicts (see the module doc). `budgets`: what admission gave.
fn apply_locked(
    engine: &Engine,
    muts: Vec<Mutation>,
    rctx: Option<&crate::query::RequestCtx>,
    (write_type, budgets): (WriteType, &TableBudgets),
) -> Result<()> {
    for attempt in 0..MAX_ATTEMPTS {
        match apply_once(engine, muts.clone(), (rctx, budgets), Vec::new())? {
            Ok(()) => return Ok(()),
            Err(e) if e.is_retryable() => {
                tracing::debug!(attempt, error = %e, "write conflicted; reading again");
                conflict_backoff(attempt);
            }
            Err(e) => return Err(e.into()),
        }
    }
    Err(contended(write_type))
}

/// Cassandra's answer to a write that lost to contention too often.
pub(crate) fn contended(write_type: WriteType) -> QueryError {
    QueryError::WriteTimeout(
        format!("Operation timed out - received only 0 responses (the write conflicted with another writer {MAX_ATTEMPTS} times)"),
        write_type,
    )
}

/// Sleeps before attempt `attempt + 1` of a conflicted write (100 µs, doubling).
pub(crate) fn conflict_backoff(attempt: u32) {
    std::thread::sleep(std::time::Duration::from_micros(100 << attempt.min(10)));
}

/// One attempt, also committing on `extra` conditions (what a lightweight transaction decided
/// on), charged to `budgets` (what `admit_writes` gave): Ok(Err(e)) is a storage failure of
/// the commit itself, `Conflict` when a condition no longer held (nothing was written).
pub(crate) fn apply_once(
    engine: &Engine,
    muts: Vec<Mutation>,
    (rctx, budgets): (Option<&crate::query::RequestCtx>, &TableBudgets),
    extra: Vec<(u64, Token, Condition)>,
) -> Result<std::result::Result<(), StorageError>> {
    // The write's modification sequence, in flight until this attempt ends (change feed).
    let feed = changefeed::ticket(engine, &muts)?;
    // The attempt's one reading of the clock (pending list operations, index entries' liveness).
    let now = engine.clock.now_millis();
    // Inline room for a point write's one (`extra` is mostly an empty Vec, which becomes an
    // inline list without allocating).
    let mut conditions: Conditions = SmallVec::from_vec(extra);
    // A mutation writes one key (more for index entries and the change feed).
    let mut batch = WriteBatch {
        ops: Vec::with_capacity(muts.len()),
    };
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
        /// The stored value (a write that leaves it as it was is no change to the feed).
        stored: Option<Bytes>,
        /// The logical partition's size record, if the read learnt it (`row_read.rs`).
        recorded: Option<u64>,
    }
    let mut merged: SmallVec<[Merged; 1]> = SmallVec::with_capacity(muts.len());
    for mut m in muts {
        // Clustering values equal for Cassandra name one row (`same_row.rs`).
        if let Some(prefix) = same_row::order_prefix(&m.table, &m.key) {
            m.key = match merged.iter().find(|x| x.key.starts_with(&prefix)) {
                Some(x) => x.key.clone(),
                None => same_row::stored_row_key(engine, &m.table, m.key)?,
            };
        }
        if let Some(x) = merged.iter_mut().find(|x| x.key == m.key) {
            x.row.merge(m.update);
            let pending = std::mem::take(&mut x.row.pending);
            x.row.apply_pending(pending, now).map_err(invalid)?;
            continue;
        }
        let token = m.token;
        let super::row_read::RowRead {
            stored,
            stamp,
            recorded,
        } = super::row_read::read_row(engine, &m, token)?;
        conditions.push((
            m.table.storage_id,
            token,
            Condition::Unchanged {
                key: Bytes::copy_from_slice(&m.key),
                read: stored.clone(),
                stamp,
            },
        ));
        let old_len = stored.as_ref().map_or(0, |b| m.key.len() + b.len());
        let mut current = match &stored {
            Some(b) => RowData::decode(b)?,
            None => RowData::default(),
        };
        let old = (!m.table.indexes.is_empty()).then(|| current.clone());
        current.merge(m.update);
        let pending = std::mem::take(&mut current.pending);
        current.apply_pending(pending, now).map_err(invalid)?;
        merged.push(Merged {
            key: m.key,
            table: m.table,
            old,
            row: current,
            token,
            old_len,
            pk: m.pk,
            stored,
            recorded,
        });
    }
    let mut sizes = crate::partition::sizes::Accounting::default();
    let limits = &engine.limits.partitions;
    // The (table, token) of the row each op of `batch` belongs to, to split it by partition.
    let mut owners: SmallVec<[(u64, Token); 2]> = SmallVec::with_capacity(merged.len());
    for m in merged {
        if let Some(old) = &m.old {
            crate::query::index::check_indexed_sizes(&m.table, &m.key, &m.row, now)?;
            crate::query::index::maintain(&m.table, &m.key, old, &m.row, now, &mut batch);
        }
        let mut buf = Vec::with_capacity(m.row.encoded_len());
        m.row.encode(&mut buf);
        let lens = (m.old_len, m.key.len() + buf.len());
        sizes.key_change_recorded(limits, m.table.storage_id, m.token, &m.pk, lens, m.recorded)?;
        if let Some(f) = feed
            .as_ref()
            .filter(|_| m.stored.as_deref() != Some(&buf[..]))
            .filter(|_| changefeed::records(engine, &m.table))
        {
            changefeed::record(
                &*engine.store,
                m.table.storage_id,
                &m.key,
                f.seq,
                &mut batch,
            )?;
        }
        batch.put(Space::Data, m.key, buf);
        owners.resize(batch.ops.len(), (m.table.storage_id, m.token));
    }
    let warn = |m: String| {
        if let Some(c) = rctx {
            c.warn(m)
        }
    };
    sizes.prepare(
        (&engine.maps, &engine.handles),
        limits,
        &mut batch,
        Some(&warn),
    )?;
    let touched = sizes.commit(&engine.maps, || {
        let parts =
            super::by_partition::split(&engine.maps, &engine.handles, batch, &owners, conditions)?;
        crate::storage::batch_log::commit_parts(&*engine.store, parts)
    });
    let touched = match touched {
        Ok(t) => t,
        Err(e) => return Ok(Err(e)),
    };
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
    Ok(Ok(()))
}
