//! Change feed queries (`query::changefeed`) through SELECT's output: the feed reads the
//! entries, this turns each into a result row as any SELECT would (projection, header
//! shadowing, filters, page size and bytes, RU metering) and answers the feed's paging state.
//!
//! Deleted rows (with `CHANGEFEED_DELETES() = true`) appear with their primary key and null
//! columns; a partition-level deletion (whole partition or a clustering range) appears as a
//! row with only the partition key. A partition header whose static cells changed appears as
//! the partition's statics-only row.

use super::*;
use crate::query::changefeed::paging::{fingerprint, FeedPosition};
use crate::query::changefeed::read::{read_page, Found, Scope};
use crate::query::changefeed::FeedQuery;

/// Rows of a page when the client sets no page size.
const DEFAULT_PAGE_ROWS: usize = 5_000;
/// Feed entries a page reads at most (in scope or not): bounds one page's work.
const MAX_SCANNED_PER_PAGE: usize = 10_000;

pub(super) fn read_feed(
    engine: &Engine,
    t: &TableDef,
    plan: &Plan,
    out: &mut Output,
    q: &FeedQuery,
    opts: &QueryOptions,
) -> Result<()> {
    if !crate::query::changefeed::write::records(engine, t) {
        return Err(invalid(format!(
            "Table {}.{} records no change feed: ALTER TABLE {}.{} WITH cdc = true, or set changefeed.all_tables = true (it records changes from then on)",
            t.keyspace, t.name, t.keyspace, t.name
        )));
    }
    if out.agg.is_some() {
        return Err(invalid("Change feed queries support no aggregates"));
    }
    let scope = scope_of(&plan.target)?;
    let fp = fingerprint(&scope.ranges, &scope.keys);
    let pos = match &opts.paging_state {
        Some(b) => {
            let p = FeedPosition::decode(b)?;
            if p.storage_id != t.storage_id || p.scope != fp {
                return Err(invalid(
                    "The paging state is of another table or another change feed scope",
                ));
            }
            p
        }
        None => FeedPosition {
            storage_id: t.storage_id,
            scope: fp,
            after: q.start_micros.to_be_bytes().to_vec(),
            inclusive: true,
        },
    };
    // Without a page size a client asks for one answer (cqlsh with PAGING OFF): it gets no
    // paging state once the feed is read to its end.
    let one_shot = out.page_rows == usize::MAX;
    out.page_rows = out.page_rows.min(DEFAULT_PAGE_ROWS);
    out.page_bytes = out.page_bytes.min(engine.limits.max_page_bytes);
    let safe = crate::query::changefeed::clock::safe_bound(&*engine.store, t.storage_id)?;
    let types = crate::format::keys::clustering_types(t);
    let mut rows = PartitionRows::new(t, plan);
    rows.static_rows = true;
    let mut emit = |f: &Found| -> Result<bool> {
        out.scanned(
            f.token,
            f.key.len() + f.value.as_ref().map_or(0, |v| v.len()),
        );
        let dk = row::decode_key(f.key, &types)?;
        let prefix_len = crate::format::keys::partition_prefix(t.storage_id, f.token, f.pk).len();
        rows.start(f.header.as_ref(), out.now, false)?;
        let before = out.rows.count;
        let mut flow = match (&f.value, f.kind) {
            (Some(v), KIND_ROW) => rows.row(out, &dk, f.key.get(prefix_len + 1..), v)?,
            (_, KIND_HEADER) => rows.statics(out, f.token, f.pk),
            _ => Flow::Continue,
        };
        if q.deletes && out.rows.count == before && deleted(f, &rows.header, prefix_len, out.now)? {
            let ck: &[Bytes] = if f.kind == KIND_ROW {
                &dk.clustering
            } else {
                &[]
            };
            let none = RowData::default();
            flow = out.emit(f.token, f.pk, ck, &none, &none);
        }
        Ok(matches!(flow, Flow::Stop(_)))
    };
    let end = read_page(
        engine,
        t.storage_id,
        &scope,
        pos,
        safe,
        MAX_SCANNED_PER_PAGE,
        &mut emit,
    )?;
    opts.ctx.trace(|| {
        let parts: Vec<String> = (end.partitions.iter())
            .map(|(id, s, e, n)| format!("{id} ({s}, {e}]: {n} rows"))
            .collect();
        format!(
            "Change feed read {} entries up to sequence {safe}; physical partitions read: [{}]",
            end.scanned,
            parts.join(", ")
        )
    });
    if !(one_shot && end.caught_up) {
        out.rows.paging_state = Some(end.position.encode());
    }
    Ok(())
}

/// The feed's scope from the planned target of the SELECT without its feed predicates.
fn scope_of(target: &Target) -> Result<Scope> {
    let all = vec![(MIN_TOKEN as i128 - 1, MAX_TOKEN as i128)];
    Ok(match target {
        Target::Partitions(keys) => Scope {
            ranges: all,
            keys: keys.clone(),
        },
        Target::Range(lo, hi) => Scope {
            ranges: vec![(*lo, *hi)],
            keys: Vec::new(),
        },
        Target::Ranges(ranges) => Scope {
            ranges: ranges.clone(),
            keys: Vec::new(),
        },
        Target::Index { .. } => {
            return Err(invalid("Change feed queries cannot use secondary indexes"))
        }
    })
}

/// Whether the entry's row is gone (a header entry: its partition or a range was deleted).
fn deleted(f: &Found, header: &RowData, prefix_len: usize, now: i64) -> Result<bool> {
    if f.kind == KIND_HEADER {
        return Ok(header.deletion.is_some() || !header.ranges.is_empty());
    }
    let Some(v) = &f.value else {
        return Ok(true);
    };
    let mut data = RowData::decode(v)?;
    if let Some((dts, _)) = header.deletion {
        data.shadow_at(dts);
    }
    if let Some(dts) = f
        .key
        .get(prefix_len + 1..)
        .and_then(|ck| header.range_deletion(ck))
    {
        data.shadow_at(dts);
    }
    Ok(!data.is_live(now))
}
