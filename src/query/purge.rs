//! Purging expired and deleted data after gc_grace_seconds, so disk space comes back.
//!
//! Words, one meaning each: *purge* is what the compaction filter does (drop data past
//! gc_grace_seconds while the store compacts; "purgeable": past it); *sweep* is what the
//! tombstone sweeper does (rewrite a queued partition through the write path so expired
//! partition and range tombstones go with the rows they shadow); deleting a dropped or
//! truncated table's data is *drop data* (`write/dropped.rs`), not either of these.
//!
//! The store runs a filter over table data while it compacts (in key order). For each row it
//! drops tombstones, expired cells and markers, and row deletions once gc_grace_seconds have
//! passed since they were written (or expired); a row left empty is removed. Rows that follow
//! their partition header in the same compaction also lose what the partition deletion and range
//! tombstones shadow. Writes merge with the stored row, so a cell tombstone shadows nothing in
//! another key and dropping it after gc_grace_seconds is safe.
//!
//! Partition deletions and range tombstones shadow rows under other keys, which may live in parts
//! of the store a compaction does not see, so the filter keeps them and queues their partition
//! instead. The tombstone sweeper then rewrites that partition through the normal write path,
//! under the partition's lock: rows lose what the purgeable tombstones shadow (emptied rows are
//! deleted, index entries and partition sizes follow), and the header drops the tombstones last.

use super::row::{self, RowData, KIND_HEADER, KIND_ROW};
use super::Engine;
use crate::storage::{Purge, PurgeFilter, Space, WriteBatch};
use bytes::Bytes;
use parking_lot::Mutex;
use std::collections::{BTreeSet, HashMap};
use std::ops::Bound;
use std::sync::{Arc, Weak};
use std::time::Duration;

/// Partitions queued for the tombstone sweeper at most (more wait for a later compaction).
const MAX_QUEUED: usize = 65_536;
/// Rows rewritten per committed batch (one hold of the partition lock) while sweeping.
const SWEEP_BATCH_ROWS: usize = 1000;
/// Rows looked at per hold of the partition lock while sweeping.
const SWEEP_SCAN_ROWS: usize = 10_000;
/// How often the background sweeper looks at its queue.
const SWEEP_EVERY: Duration = Duration::from_secs(10);

/// Test hook: `RINGGATE_TEST_SWEEP_PAUSE_MS` sleeps that long before each chunk of a sweep
/// (outside the partition lock), so that a kill -9 test can land between chunks
/// (`tests/python/test_sweep_faults.py`).
fn chunk_pause() {
    static PAUSE_MS: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    crate::clock::test_pause("RINGGATE_TEST_SWEEP_PAUSE_MS", &PAUSE_MS);
}

/// Header keys of partitions whose partition deletion or range tombstones can be purged.
#[derive(Default)]
pub struct SweepQueue(Mutex<BTreeSet<Vec<u8>>>);

impl SweepQueue {
    fn push(&self, header_key: &[u8]) {
        let mut q = self.0.lock();
        if q.len() < MAX_QUEUED && !q.contains(header_key) {
            q.insert(header_key.to_vec());
        }
    }

    fn take(&self) -> Vec<Vec<u8>> {
        std::mem::take(&mut *self.0.lock()).into_iter().collect()
    }
}

/// Installs the purge filter of this engine's tables into its store and starts the tombstone
/// sweeper (a thread that ends with the engine).
pub fn install(engine: &Arc<Engine>) {
    let weak: Weak<Engine> = Arc::downgrade(engine);
    let queue = Arc::clone(&engine.sweep_queue);
    let sweeper = Weak::clone(&weak);
    let clock = engine.clock.clone();
    let spawned = std::thread::Builder::new()
        .name("ringgate-sweeper".into())
        .spawn(move || loop {
            std::thread::sleep(SWEEP_EVERY);
            let Some(e) = sweeper.upgrade() else { return };
            if let Err(err) = sweep_tombstones(&e) {
                tracing::warn!(error = %err, "sweeping purgeable tombstones failed; will retry");
            }
        });
    if let Err(e) = spawned {
        tracing::warn!(error = %e, "could not start the tombstone sweeper");
    }
    engine
        .store
        .set_purge_filter(Arc::new(move || -> PurgeFilter {
            let gc = weak.upgrade().map(|e| grace_of(&e)).unwrap_or_default();
            filter(gc, clock.now_secs(), Arc::clone(&queue))
        }));
}

/// A purge filter of the engine's tables as of now, for one run over keys in key order (a
/// compaction's, or a purge pass's: `purge_pass.rs`).
pub(super) fn filter_of(engine: &Engine) -> PurgeFilter {
    let queue = Arc::clone(&engine.sweep_queue);
    filter(grace_of(engine), engine.clock.now_secs(), queue)
}

/// gc_grace_seconds of every table, by storage id.
fn grace_of(engine: &Engine) -> HashMap<u64, i32> {
    let schema = engine.schema();
    let tables = schema.keyspaces.values().flat_map(|k| k.tables.values());
    tables
        .map(|t| (t.storage_id, t.options.gc_grace_seconds))
        .collect()
}

fn filter(gc: HashMap<u64, i32>, now: i32, queue: Arc<SweepQueue>) -> PurgeFilter {
    let mut f = Filter {
        gc,
        now,
        header: None,
        queue,
        queued: Vec::new(),
    };
    Box::new(move |k: &[u8], v: &[u8]| f.filter(k, v))
}

struct Filter {
    /// gc_grace_seconds per table storage id (tables unknown to this snapshot are kept as is).
    gc: HashMap<u64, i32>,
    now: i32,
    /// The last partition header seen: its partition prefix and content.
    header: Option<(Vec<u8>, RowData)>,
    /// Where partitions with purgeable partition/range tombstones go.
    queue: Arc<SweepQueue>,
    /// The header key of the partition queued last (its keys come in a run).
    queued: Vec<u8>,
}

impl Filter {
    /// Queues the partition with key prefix `prefix` for the sweeper (once per run of keys).
    fn queue_partition(&mut self, prefix: &[u8]) {
        if self.queued.len() == prefix.len() + 1 && self.queued.starts_with(prefix) {
            return;
        }
        self.queued.clear();
        self.queued.extend_from_slice(prefix);
        self.queued.push(KIND_HEADER);
        self.queue.push(&self.queued);
    }

    fn filter(&mut self, key: &[u8], value: &[u8]) -> Purge {
        let Some(sid) = key
            .get(..8)
            .and_then(|b| b.try_into().ok())
            .map(u64::from_be_bytes)
        else {
            return Purge::Keep;
        };
        let Some(&gc) = self.gc.get(&sid) else {
            return Purge::Keep;
        };
        let Some((kind_at, kind)) = kind_of(key) else {
            return Purge::Keep;
        };
        let Ok(mut data) = RowData::decode(&Bytes::copy_from_slice(value)) else {
            return Purge::Keep;
        };
        let before = data.clone();
        if kind == KIND_HEADER {
            purge_row(&mut data, self.now, gc);
            if has_purgeable_tombstones(&data, self.now, gc) {
                self.queue_partition(&key[..kind_at]);
            }
            self.header = Some((key[..kind_at].to_vec(), data.clone()));
        } else if kind == KIND_ROW {
            if let Some((prefix, h)) = &self.header {
                if key.starts_with(prefix) && prefix.len() == kind_at {
                    if let Some((dts, _)) = h.deletion {
                        data.shadow_at(dts);
                    }
                    if let Some(dts) = h.range_deletion(&key[kind_at + 1..]) {
                        data.shadow_at(dts);
                    }
                }
            }
            purge_row(&mut data, self.now, gc);
            purge_row_deletion(&mut data, self.now, gc);
        } else {
            return Purge::Keep;
        }
        if data == before {
            return Purge::Keep;
        }
        // Stored bytes changed without a write: the sweeper recounts the partition's size.
        self.queue_partition(&key[..kind_at]);
        if is_empty(&data) {
            Purge::Remove
        } else {
            let mut out = Vec::with_capacity(data.encoded_len());
            data.encode(&mut out);
            Purge::Replace(out)
        }
    }
}

/// Position and value of the kind byte of a table data key.
fn kind_of(key: &[u8]) -> Option<(usize, u8)> {
    let d = row::decode_key(key, &[]).ok()?;
    // [storage id][token][escaped key][kind]: the escaped key ends with 0x00 0x01.
    let mut at = 16;
    loop {
        match (key.get(at), key.get(at + 1)) {
            (Some(0), Some(1)) => break,
            (Some(0), Some(_)) => at += 2,
            (Some(_), _) => at += 1,
            (None, _) => return None,
        }
    }
    Some((at + 2, d.kind))
}

/// Drops what is purgeable in a row (or header) at `now` with `gc` seconds of grace.
fn purge_row(row: &mut RowData, now: i32, gc: i32) {
    let expired = |ms: i64| ms != 0 && ms.div_euclid(1000) + i64::from(gc) <= i64::from(now);
    // A tombstone goes gc_grace_seconds after it was written, a value as long after it expired.
    let keep = |value: &Option<Bytes>, ldt: i32, expiry: i64| {
        if value.is_none() {
            !gone(ldt, now, gc)
        } else {
            !expired(expiry)
        }
    };
    row.cells
        .retain(|c| keep(&c.value, c.deletion_secs, c.expiry_ms));
    if row.marker.is_some_and(|m| expired(m.expiry_ms)) {
        row.marker = None;
    }
    for c in &mut row.complex {
        c.elems
            .retain(|e| keep(&e.value, e.deletion_secs, e.expiry_ms));
        if c.deletion.is_some_and(|(_, ldt)| gone(ldt, now, gc)) {
            c.deletion = None;
        }
    }
    row.complex
        .retain(|c| c.deletion.is_some() || !c.elems.is_empty());
}

fn gone(ldt: i32, now: i32, gc: i32) -> bool {
    i64::from(ldt) + i64::from(gc) <= i64::from(now)
}

fn has_purgeable_tombstones(header: &RowData, now: i32, gc: i32) -> bool {
    header.deletion.is_some_and(|(_, ldt)| gone(ldt, now, gc))
        || header.ranges.iter().any(|r| gone(r.deletion_secs, now, gc))
}

/// Sweeps the partitions queued by compactions (see the module documentation); returns how
/// many partitions lost tombstones.
pub fn sweep_tombstones(engine: &Engine) -> super::Result<usize> {
    let mut swept = 0;
    for key in engine.sweep_queue.take() {
        if sweep_partition(engine, &key)? {
            swept += 1;
            crate::metrics::global().swept_partitions.inc();
        }
    }
    Ok(swept)
}

/// Sweeps every partition of a table now, as if compactions had queued them all (maintenance,
/// like `nodetool garbagecollect`; it reads the whole table). Returns how many partitions lost
/// tombstones. Cluster mode: only the physical partitions this node owns (a sweep commits
/// through the owner's handle; each node sweeps its own, as each Cassandra node does).
pub fn sweep_table(engine: &Engine, keyspace: &str, table: &str) -> super::Result<usize> {
    let schema = engine.schema();
    let t = schema
        .keyspaces
        .get(keyspace)
        .and_then(|k| k.tables.get(table))
        .ok_or_else(|| super::invalid(format!("unconfigured table {table}")))?;
    let Some(map) = engine.maps.get(t.storage_id) else {
        return Ok(0);
    };
    let mut swept = 0;
    let mut last_partition: Option<Vec<u8>> = None;
    let mut scans = Vec::with_capacity(map.parts.len());
    for p in map
        .parts
        .iter()
        .filter(|p| is_local(engine, t.storage_id, p))
    {
        let handle = engine.handles.read(t.storage_id, p)?;
        scans.push(handle.scan(Bound::Unbounded, Bound::Unbounded, false));
    }
    for item in scans.into_iter().flatten() {
        let (k, _) = item?;
        let Some((kind_at, _)) = kind_of(&k) else {
            continue;
        };
        if last_partition.as_deref() == Some(&k[..kind_at]) {
            continue;
        }
        last_partition = Some(k[..kind_at].to_vec());
        let mut header_key = k[..kind_at].to_vec();
        header_key.push(KIND_HEADER);
        if sweep_partition(engine, &header_key)? {
            swept += 1;
        }
    }
    Ok(swept)
}

/// Sweeps one queued partition (by header key) under its lock: removes its expired partition
/// deletion and range tombstones with what they shadow, then recounts its stored bytes. Returns
/// whether tombstones were swept.
fn sweep_partition(engine: &Engine, header_key: &[u8]) -> super::Result<bool> {
    let Some((kind_at, KIND_HEADER)) = kind_of(header_key) else {
        return Ok(false);
    };
    let sid = u64::from_be_bytes(header_key[..8].try_into().expect("checked by kind_of"));
    let schema = engine.schema();
    let Some(table) = schema
        .keyspaces
        .values()
        .flat_map(|k| k.tables.values())
        .find(|t| t.storage_id == sid)
    else {
        return Ok(false);
    };
    let dk = row::decode_key(header_key, &[])?;
    // Cluster mode: another node's partition is its owner's to sweep (moved since queued).
    let owned = (engine.maps.get(sid)).is_some_and(|m| is_local(engine, sid, m.route(dk.token)));
    if !owned {
        return Ok(false);
    }
    let p = Part {
        handle: engine.handle_at(sid, dk.token)?,
        table,
        header_key,
        prefix: &header_key[..kind_at],
        pk: dk.pk,
        token: dk.token,
    };
    let swept = sweep_shadowed(engine, &p)?;
    recount(engine, &p)?;
    Ok(swept)
}

fn is_local(engine: &Engine, sid: u64, p: &crate::partition::map::PhysicalPartition) -> bool {
    engine.handles.placement(sid, p) == crate::partition::handles::Placement::Local
}

/// One logical partition being swept.
struct Part<'a> {
    /// The handle of the physical partition that holds it (reads; commits are routed again).
    handle: Arc<dyn crate::storage::PartitionHandle>,
    table: &'a crate::schema::TableDef,
    header_key: &'a [u8],
    /// `[storage id][token][escaped partition key]`: the start of all its keys.
    prefix: &'a [u8],
    pk: Bytes,
    token: crate::tokens::Token,
}

impl Part<'_> {
    /// Its keys of `kind` (header or rows) after `from` (Unbounded: all), as a scan (a
    /// snapshot taken now).
    fn scan(&self, kind: u8, from: Bound<&[u8]>) -> crate::storage::ScanIter {
        let mut lo = self.prefix.to_vec();
        lo.push(kind);
        let mut hi = self.prefix.to_vec();
        hi.push(kind + 1);
        let lo = match from {
            Bound::Unbounded => Bound::Included(&lo[..]),
            b => b,
        };
        self.handle.scan(lo, Bound::Excluded(&hi), false)
    }

    /// Commits one chunk (its rows, index entries and size record) to the partition, through
    /// the handle of the physical partition that holds it now.
    fn commit(
        &self,
        engine: &Engine,
        sizes: crate::partition::sizes::Accounting,
        batch: WriteBatch,
    ) -> super::Result<()> {
        let owner = (self.table.storage_id, self.token);
        sizes.commit(&engine.maps, || {
            let owners = vec![owner; batch.ops.len()];
            let parts = super::write::by_partition::split(
                &engine.maps,
                &engine.handles,
                batch,
                &owners,
                Vec::new(),
            )?;
            crate::storage::batch_log::commit_parts(&*engine.store, parts)
        })?;
        Ok(())
    }

    /// The partition's write lock (every write to it holds it).
    fn lock<'e>(&self, engine: &'e Engine) -> parking_lot::MutexGuard<'e, ()> {
        engine
            .stripe(engine.lock_stripe(self.table.storage_id, &self.pk))
            .lock()
    }
}

/// Removes the partition's expired partition deletion and range tombstones and what they
/// shadow. Rows go in chunks, each read and rewritten under the partition lock (writes to the
/// partition wait for one chunk at most, never for the whole partition); the tombstones go in
/// the last chunk, so until then they still shadow the rows not yet swept.
fn sweep_shadowed(engine: &Engine, p: &Part) -> super::Result<bool> {
    let gc = p.table.options.gc_grace_seconds;
    let (pdel, purged) = {
        let _guard = p.lock(engine);
        let Some(hv) = p.handle.get(p.header_key)? else {
            return Ok(false);
        };
        let header = RowData::decode(&hv)?;
        let now = engine.clock.now_secs();
        if !has_purgeable_tombstones(&header, now, gc) {
            return Ok(false);
        }
        let pdel = header.deletion.filter(|&(_, ldt)| gone(ldt, now, gc));
        let purged: Vec<_> = header
            .ranges
            .into_iter()
            .filter(|r| gone(r.deletion_secs, now, gc))
            .collect();
        (pdel, purged)
    };
    let now_ms = engine.clock.now_millis();
    let limits = &engine.limits.partitions;
    let sid = p.table.storage_id;
    let mut resume: Option<Vec<u8>> = None;
    loop {
        chunk_pause();
        let _guard = p.lock(engine);
        let from = resume.as_deref().map_or(Bound::Unbounded, Bound::Excluded);
        let mut rows = p.scan(KIND_ROW, from).peekable();
        let mut batch = WriteBatch::default();
        let mut sizes = crate::partition::sizes::Accounting::default();
        let (mut changed, mut scanned) = (0, 0);
        while changed < SWEEP_BATCH_ROWS && scanned < SWEEP_SCAN_ROWS {
            let Some(item) = rows.next() else { break };
            let (k, v) = item?;
            scanned += 1;
            resume = Some(k.to_vec());
            let old = RowData::decode(&v)?;
            let mut new = old.clone();
            if let Some((dts, _)) = pdel {
                new.shadow_at(dts);
            }
            let ck = &k[p.prefix.len() + 1..];
            if let Some(dts) = purged
                .iter()
                .filter(|r| r.covers(ck))
                .map(|r| r.timestamp_micros)
                .max()
            {
                new.shadow_at(dts);
            }
            if new == old {
                continue;
            }
            changed += 1;
            super::index::maintain(p.table, &k, &old, &new, now_ms, &mut batch);
            let new_len = put_or_delete(&mut batch, &k, &new);
            sizes.key_change(limits, sid, p.token, &p.pk, k.len() + v.len(), new_len)?;
        }
        let last = rows.peek().is_none();
        if last {
            // The header as it is now (writes may have come in between chunks): drop exactly
            // the tombstones found purgeable, keep anything newer.
            if let Some(hv) = p.handle.get(p.header_key)? {
                let mut header = RowData::decode(&hv)?;
                if header.deletion.is_some() && header.deletion == pdel {
                    header.deletion = None;
                }
                header.ranges.retain(|r| !purged.contains(r));
                let new_len = put_or_delete(&mut batch, p.header_key, &header);
                let old_len = p.header_key.len() + hv.len();
                sizes.key_change(limits, sid, p.token, &p.pk, old_len, new_len)?;
            }
        }
        sizes.prepare((&engine.maps, &engine.handles), limits, &mut batch, None)?;
        p.commit(engine, sizes, batch)?;
        if last {
            return Ok(true);
        }
    }
}

/// Writes `row` under `key` (or deletes the key when the row is empty); returns the stored
/// bytes (key + value, 0 when deleted).
fn put_or_delete(batch: &mut WriteBatch, key: &[u8], row: &RowData) -> usize {
    if is_empty(row) {
        batch.delete(Space::Data, key.to_vec());
        return 0;
    }
    let mut buf = Vec::with_capacity(row.encoded_len());
    row.encode(&mut buf);
    let len = key.len() + buf.len();
    batch.put(Space::Data, key.to_vec(), buf);
    len
}

/// Brings the partition's size record in line with the bytes it stores (compactions purge
/// data without a write, so the record can be too high). The count reads snapshots taken under
/// the partition lock together with the record, and runs without the lock; the correction is a
/// delta, applied under the lock again, so writes in between keep their own changes.
fn recount(engine: &Engine, p: &Part) -> super::Result<()> {
    let sid = p.table.storage_id;
    let (scans, recorded) = {
        let _guard = p.lock(engine);
        let scans = [
            p.scan(KIND_HEADER, Bound::Unbounded),
            p.scan(KIND_ROW, Bound::Unbounded),
        ];
        // What the counters hold: the memo, else the record. (A partition that derives its
        // records and has no memo reads its rows' own bytes here, so its counters are not
        // corrected until its next count: a restart, a takeover.)
        let key = crate::partition::sizes::size_key(sid, p.token, &p.pk);
        let (maps, handles) = (&engine.maps, &engine.handles);
        let recorded = crate::partition::sizes::recorded_at(maps, handles, sid, p.token, &key)?;
        (scans, recorded)
    };
    let mut actual = 0u64;
    for scan in scans {
        for item in scan {
            let (k, v) = item?;
            actual += (k.len() + v.len()) as u64;
        }
    }
    if recorded == actual {
        return Ok(());
    }
    let _guard = p.lock(engine);
    let mut sizes = crate::partition::sizes::Accounting::default();
    sizes.recount(sid, p.token, &p.pk, recorded, actual);
    let mut batch = WriteBatch::default();
    let limits = &engine.limits.partitions;
    sizes.prepare((&engine.maps, &engine.handles), limits, &mut batch, None)?;
    p.commit(engine, sizes, batch)
}

fn is_empty(r: &RowData) -> bool {
    r.marker.is_none()
        && r.deletion.is_none()
        && r.cells.is_empty()
        && r.complex.is_empty()
        && r.ranges.is_empty()
}

/// Drops a row deletion once purgeable. Rows only: a row deletion shadows only its own key,
/// whose older content was merged away when it was written; a partition header's deletion
/// shadows rows under other keys and is kept.
fn purge_row_deletion(row: &mut RowData, now: i32, gc: i32) {
    if row.deletion.is_some_and(|(_, ldt)| gone(ldt, now, gc)) {
        row.deletion = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::query::row::{Cell, Marker};

    fn cell(col: u32, ts: i64, expiry: i64, v: Option<&'static [u8]>, ldt: i32) -> Cell {
        Cell {
            col,
            timestamp_micros: ts,
            ttl_secs: if expiry != 0 { 10 } else { 0 },
            expiry_ms: expiry,
            value: v.map(Bytes::from_static),
            deletion_secs: ldt,
        }
    }

    #[test]
    fn purges_after_grace() {
        let mut r = RowData {
            marker: Some(Marker {
                timestamp_micros: 1,
                ttl_secs: 10,
                expiry_ms: 100_000,
            }),
            deletion: None,
            cells: vec![
                cell(1, 1, 100_000, Some(b"a"), 0),
                cell(2, 1, 0, None, 100),
                cell(3, 1, 0, Some(b"keep"), 0),
            ],
            ranges: Vec::new(),
            ..Default::default()
        };
        let mut early = r.clone();
        purge_row(&mut early, 105, 10);
        assert_eq!(early, r, "nothing before gc_grace_seconds");
        purge_row(&mut r, 110, 10);
        assert!(r.marker.is_none());
        assert_eq!(r.cells.len(), 1);
        assert_eq!(r.cells[0].col, 3);
        let mut d = RowData {
            deletion: Some((5, 100)),
            ..Default::default()
        };
        purge_row_deletion(&mut d, 100, 0);
        assert!(d.deletion.is_none());
    }
}
