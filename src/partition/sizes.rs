//! Logical partition sizes and per-physical-partition accounting.
//!
//! Every logical partition (one partition key of one table) has a size record in the sizes
//! space (`Space::Sizes`, in its physical partition's key range, so it moves with a split):
//! key `[storage id u64 BE][token, order-preserving][partition key bytes]`, value
//! the partition's stored bytes (u64 BE): the sum over its stored keys (header and rows) of key
//! length + encoded value length. The write path (`query::write::apply`) knows the old and new
//! size of every key it writes (it reads before it writes), so it updates the record in the same
//! atomic batch as the data: the records are exact after any crash. Partitions of tables
//! without clustering columns store no records: theirs are derived from their rows
//! (`derived_sizes.rs`, chosen per partition in its map); the functions here read either.
//!
//! Per physical partition the bytes and the number of logical partitions live in memory
//! (`PartStats`, atomics), rebuilt at startup by counting the records ([`rebuild`]): the first
//! `STARTUP_CHUNKS` chunks before the server answers, the rest on a background thread while it
//! does (10,000,000 logical partitions take about 30 s to count on a busy 2-core machine;
//! answering after that would be an outage at every restart). A partition being counted
//! (`PartStats::counting`) is counted as a split counts a child (`split_watch.rs`), so writes
//! continue and the counts end exact; until then its counters read low and splits of it wait
//! ([`recount`] alone recounts one partition, e.g. one this node takes over). A write holds the shared
//! lock of each physical partition it touches while it commits and updates the counters; a split
//! counts one child's records in chunks, each under the parent's exclusive lock, with writes in
//! between reporting changes to records already counted (`split_watch.rs`), and swaps the map
//! under the lock after the last chunk, so the children start with exact numbers, the parent's
//! writers wait at most one chunk, and other partitions are never blocked.
//!
//! Compactions that purge expired or deleted data change stored bytes without a write; the
//! tombstone sweeper (`query::purge`) recounts those partitions afterwards ([`Accounting::recount`]),
//! so the records catch up within seconds of a compaction.

use super::derived_sizes::{self, SizeSource};
use super::handles::Handles;
use super::map::{PartitionMap, PartitionMaps, PhysicalPartition};
use super::split_watch::{count_chunks, Counted};
use crate::error::ClientError as QueryError;
use crate::storage::PartitionHandle;
use crate::storage::{Space, StorageError, WriteBatch};
use crate::tokens::{Token, MAX_TOKEN, MIN_TOKEN};
use bytes::Bytes;
use parking_lot::RwLock;
use smallvec::SmallVec;
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Arc;

/// Partition limits (settings `partitions.*`).
#[derive(Debug, Clone)]
pub struct PartitionLimits {
    /// A physical partition splits when its data passes this many bytes.
    pub physical_split_bytes: u64,
    /// Largest logical partition (one partition key).
    pub logical_max_bytes: u64,
    /// Largest row (entity).
    pub row_max_bytes: u64,
}

impl Default for PartitionLimits {
    fn default() -> Self {
        PartitionLimits {
            physical_split_bytes: 30 << 30,
            logical_max_bytes: 20 << 30,
            row_max_bytes: 2 << 20,
        }
    }
}

/// Longest partition key (all components serialized).
pub const MAX_PARTITION_KEY_BYTES: usize = 65535;

/// Live accounting of one physical partition.
#[derive(Debug, Default)]
pub struct PartStats {
    /// Shared by writes while they commit and count; exclusive for a split.
    pub lock: RwLock<()>,
    pub bytes: AtomicI64,
    pub logical: AtomicI64,
    /// Set (under the exclusive lock) once the partition has been replaced by its children.
    pub retired: AtomicBool,
    /// The counters are being rebuilt ([`recount`]): `bytes` and `logical` are not exact yet.
    pub counting: AtomicBool,
    /// A split is queued or was found impossible (one logical partition).
    pub split_queued: AtomicBool,
    /// Request units consumed.
    pub consumed: super::ru::Consumption,
    /// Throughput budget.
    pub bucket: super::throttle::Bucket,
    /// The logical partitions consuming the most RU.
    pub hot: super::hot::HotKeys,
    /// This process's handle on the partition (`handles.rs`).
    pub handle: super::handles::HandleSlot,
    /// Writes' changes to records a split in progress has already counted.
    pub split_watch: super::split_watch::SplitWatch,
    /// The partition's size records in memory, once counted (`size_memo.rs`).
    pub memo: super::size_memo::SizeMemo,
}

fn token_bytes(t: Token) -> [u8; 8] {
    ((t as u64) ^ (1 << 63)).to_be_bytes()
}

fn token_from(b: &[u8]) -> Token {
    let mut a = [0u8; 8];
    a.copy_from_slice(b);
    (u64::from_be_bytes(a) ^ (1 << 63)) as i64
}

fn table_prefix(storage_id: u64) -> Vec<u8> {
    storage_id.to_be_bytes().to_vec()
}

pub fn size_key(storage_id: u64, token: Token, pk: &[u8]) -> Vec<u8> {
    // Sized once: built on every write (three times), growing it cost two reallocations.
    let mut k = Vec::with_capacity(16 + pk.len());
    k.extend_from_slice(&storage_id.to_be_bytes());
    k.extend_from_slice(&token_bytes(token));
    k.extend_from_slice(pk);
    k
}

/// Whether the physical partition holding `token` derives its size records from its rows
/// (`derived_sizes.rs`): a write then stores none.
fn derives_sizes(maps: &PartitionMaps, storage_id: u64, token: Token) -> bool {
    maps.get(storage_id)
        .is_some_and(|m| m.route(token).sizes == SizeSource::Rows)
}

/// One decoded size record.
pub struct SizeRecord {
    pub storage_id: u64,
    pub token: Token,
    pub pk: Vec<u8>,
    pub bytes: i64,
}

fn decode(k: &[u8], v: &[u8]) -> Option<SizeRecord> {
    let rest = k;
    if rest.len() < 16 || v.len() != 8 {
        return None;
    }
    let mut sid = [0u8; 8];
    sid.copy_from_slice(&rest[..8]);
    let mut b = [0u8; 8];
    b.copy_from_slice(v);
    Some(SizeRecord {
        storage_id: u64::from_be_bytes(sid),
        token: token_from(&rest[8..16]),
        pk: rest[16..].to_vec(),
        bytes: u64::from_be_bytes(b) as i64,
    })
}

/// The records of physical partition `p` (of table `storage_id`, read through `handle`), in
/// token order: those it stores, or those derived from its rows (`derived_sizes.rs`).
pub fn scan_range(
    handle: &dyn PartitionHandle,
    storage_id: u64,
    p: &PhysicalPartition,
) -> impl Iterator<Item = Result<SizeRecord, StorageError>> {
    scan_range_after(handle, storage_id, p, p.end, None)
}

/// The records of `p` whose token is at most `end` (the first partition, starting at
/// MIN_TOKEN, also owns the empty key's MIN_TOKEN), resuming after the record whose key is
/// `after` when given.
pub fn scan_range_after(
    handle: &dyn PartitionHandle,
    storage_id: u64,
    p: &PhysicalPartition,
    end: Token,
    after: Option<&[u8]>,
) -> impl Iterator<Item = Result<SizeRecord, StorageError>> {
    let start = p.start;
    let lo = if start == MIN_TOKEN {
        table_prefix(storage_id)
    } else {
        let mut k = table_prefix(storage_id);
        k.extend_from_slice(&token_bytes(start + 1));
        k
    };
    let hi = if end == MAX_TOKEN {
        table_prefix(storage_id.wrapping_add(1))
    } else {
        let mut k = table_prefix(storage_id);
        k.extend_from_slice(&token_bytes(end + 1));
        k
    };
    let lower = match after {
        Some(k) if k >= &lo[..] => Bound::Excluded(k),
        _ => Bound::Included(&lo[..]),
    };
    let upper = Bound::Excluded(&hi[..]);
    let records: Box<dyn Iterator<Item = _>> = match p.sizes {
        SizeSource::Rows => Box::new(derived_sizes::scan(handle, lower, upper)),
        SizeSource::Records => Box::new(handle.scan_sizes(lower, upper).filter_map(
            |item| match item {
                Ok((k, v)) => decode(&k, &v).map(Ok),
                Err(e) => Some(Err(e)),
            },
        )),
    };
    records
}

/// Every record of a table, partition after partition through their handles, in token order.
pub fn scan_table<'a>(
    handles: &'a Handles,
    storage_id: u64,
    map: &'a PartitionMap,
) -> impl Iterator<Item = Result<SizeRecord, StorageError>> + 'a {
    map.parts.iter().flat_map(move |p| {
        let records: Box<dyn Iterator<Item = _>> = match handles.read(storage_id, p) {
            Ok(h) => Box::new(scan_range(&**h, storage_id, p)),
            Err(e) => Box::new(std::iter::once(Err(e))),
        };
        records
    })
}

/// The `keep` largest of `records` as (bytes, token, partition key), largest first (ties by
/// token), in memory bounded by `keep` (a table may hold millions of logical partitions).
pub fn largest(
    records: impl Iterator<Item = SizeRecord>,
    keep: usize,
) -> Vec<(i64, Token, Vec<u8>)> {
    let order =
        |a: &(i64, Token, Vec<u8>), b: &(i64, Token, Vec<u8>)| b.0.cmp(&a.0).then(a.1.cmp(&b.1));
    let mut top: Vec<(i64, Token, Vec<u8>)> = Vec::with_capacity(4 * keep + 1);
    for r in records {
        top.push((r.bytes, r.token, r.pk));
        if top.len() > 4 * keep {
            top.sort_by(order);
            top.truncate(keep);
        }
    }
    top.sort_by(order);
    top.truncate(keep);
    top
}

/// The recorded size of the logical partition whose size record key is `key` (0: no record),
/// routed through the table's current partition map: from the partition's memo when it holds
/// every record, else read through its handle (derived from its rows where it keeps no
/// records).
pub fn recorded_at(
    maps: &PartitionMaps,
    handles: &Handles,
    storage_id: u64,
    token: Token,
    key: &[u8],
) -> Result<u64, StorageError> {
    let map = maps
        .get(storage_id)
        .ok_or_else(|| StorageError::Corrupt(format!("no partition map for table {storage_id}")))?;
    let p = map.route(token);
    if let Some(bytes) = p.stats.memo.get(&key[8..]) {
        return Ok(bytes);
    }
    let handle = handles.read(storage_id, p)?;
    if p.sizes == SizeSource::Rows {
        return derived_sizes::lookup(&**handle, storage_id, token, &key[16..]);
    }
    Ok(match handle.get_size(key)? {
        Some(v) if v.len() == 8 => u64::from_be_bytes(v[..].try_into().expect("8 bytes")),
        _ => 0,
    })
}

/// Chunks of size records (`split_watch::CHUNK_RECORDS` each, about 0.3 s for all on this
/// machine) counted at startup before the server answers: small data directories start with
/// exact counters, large ones finish in the background.
const STARTUP_CHUNKS: usize = 64;

/// Chunks counted per step of the background recount (between checks that the engine and the
/// partition still exist).
const BACKGROUND_STEP_CHUNKS: usize = 16;

/// Attempts of the background recount of one partition that fail on a storage error.
const BACKGROUND_ATTEMPTS: u32 = 60;

/// Recounts the counters of physical partition `p` of table `storage_id` from its size
/// records, at most `budget` chunks (decremented), each under the partition's exclusive lock,
/// while writes run in between (`split_watch.rs`). Returns true once the counters are exact (or
/// the partition was retired); false when the budget ran out first: call again to go on.
pub fn recount(
    handle: &dyn PartitionHandle,
    storage_id: u64,
    p: &PhysicalPartition,
    budget: &mut usize,
) -> Result<bool, StorageError> {
    p.stats.counting.store(true, Ordering::SeqCst);
    let done = match count_chunks(handle, storage_id, p, p.end, budget)? {
        Counted::Paused => return Ok(false),
        Counted::Retired => None,
        Counted::Done(guard, _) => {
            // Every record was counted into the memo (`count_chunks` fills it when counting
            // the whole partition): complete under the same hold of the lock.
            p.stats.memo.complete();
            Some(guard)
        }
    };
    let (bytes, logical) = p.stats.split_watch.totals();
    p.stats.split_watch.stop();
    if done.is_some() {
        p.stats.bytes.store(bytes, Ordering::SeqCst);
        p.stats.logical.store(logical, Ordering::SeqCst);
    }
    p.stats.counting.store(false, Ordering::SeqCst);
    Ok(true)
}

/// Rebuilds every partition's counters from the size records (at startup): up to
/// `STARTUP_CHUNKS` chunks now, the rest on a background thread that stops when the engine
/// (its handles) is dropped. `on_counted` runs for each partition once it is exact (the
/// engine queues a split check).
pub fn rebuild(
    handles: &Arc<Handles>,
    maps: &Arc<PartitionMaps>,
    on_counted: impl Fn(u64, &PhysicalPartition) + Send + 'static,
) -> Result<(), StorageError> {
    let mut all = Vec::new();
    for (sid, map) in maps.all() {
        for p in &map.parts {
            p.stats.counting.store(true, Ordering::SeqCst);
            // Until its count (the batch log replay wrote records past it).
            p.stats.memo.off();
            all.push((sid, Arc::clone(p)));
        }
    }
    let mut budget = STARTUP_CHUNKS;
    let mut rest = Vec::new();
    for (sid, p) in all {
        if budget > 0 && recount(&**handles.read(sid, &p)?, sid, &p, &mut budget)? {
            on_counted(sid, &p);
        } else {
            rest.push((sid, p));
        }
    }
    if rest.is_empty() {
        return Ok(());
    }
    tracing::info!(
        partitions = rest.len(),
        "counting logical partition sizes in the background"
    );
    let (handles, maps) = (Arc::downgrade(handles), Arc::downgrade(maps));
    std::thread::Builder::new()
        .name("size-recount".into())
        .spawn(move || {
            for (sid, p) in rest {
                if !recount_in_background(&handles, &maps, sid, &p) {
                    return;
                }
                on_counted(sid, &p);
            }
            tracing::info!("logical partition sizes counted");
        })
        .map_err(|e| StorageError::Io(format!("cannot start the size recount: {e}")))?;
    Ok(())
}

/// Rebuilds one partition's counters from its size records, through `handle` (a cluster node
/// that has just taken the partition over, before it serves it: no write is in flight).
pub fn rebuild_partition(
    handle: &dyn PartitionHandle,
    storage_id: u64,
    p: &super::map::PhysicalPartition,
) -> Result<(), StorageError> {
    // Exclusive (no write is in flight; it orders this count with the memo's updates).
    let _guard = p.stats.lock.write();
    p.stats.memo.begin();
    let (mut bytes, mut logical) = (0i64, 0i64);
    for r in scan_range(handle, storage_id, p) {
        let r = match r {
            Ok(r) => r,
            Err(e) => {
                p.stats.memo.off();
                return Err(e);
            }
        };
        bytes += r.bytes;
        logical += 1;
        p.stats
            .memo
            .set(&size_key(storage_id, r.token, &r.pk)[8..], r.bytes as u64);
    }
    p.stats.memo.complete();
    p.stats.bytes.store(bytes, Ordering::SeqCst);
    p.stats.logical.store(logical, Ordering::SeqCst);
    Ok(())
}

/// One partition's background recount, in steps; false when the engine is gone.
fn recount_in_background(
    handles: &std::sync::Weak<Handles>,
    maps: &std::sync::Weak<PartitionMaps>,
    sid: u64,
    p: &PhysicalPartition,
) -> bool {
    let mut failures = 0u32;
    loop {
        let (Some(handles), Some(maps)) = (handles.upgrade(), maps.upgrade()) else {
            return false;
        };
        // A dropped or truncated table's partitions are not counted (their data is going).
        let current = maps
            .get(sid)
            .is_some_and(|m| m.parts.iter().any(|q| std::ptr::eq(&**q, p)));
        if !current {
            p.stats.counting.store(false, Ordering::SeqCst);
            return true;
        }
        let mut budget = BACKGROUND_STEP_CHUNKS;
        match handles
            .read(sid, p)
            .and_then(|h| recount(&**h, sid, p, &mut budget))
        {
            Ok(true) => return true,
            Ok(false) => {}
            Err(e) => {
                failures += 1;
                tracing::warn!(storage_id = sid, partition = p.id, error = %e, "size recount failed");
                if failures >= BACKGROUND_ATTEMPTS {
                    // Left counting: its splits keep failing until a restart counts it.
                    p.stats.memo.off();
                    return true;
                }
                std::thread::sleep(std::time::Duration::from_secs(1));
            }
        }
    }
}

/// The size change of one logical partition in one write.
struct PkChange {
    storage_id: u64,
    token: Token,
    pk: Bytes,
    old: i64,
    new: i64,
    /// Request units of this partition's writes.
    ru: f64,
    /// Its size record, when the caller learnt it from the memo under the partition's stripe
    /// (`prepare` need not ask again).
    recorded: Option<u64>,
}

/// What a write changes in the logical partition sizes, checked against the limits.
#[derive(Default)]
pub struct Accounting {
    /// Inline room for one: a point write's accounting allocates no list.
    changes: SmallVec<[PkChange; 1]>,
}

fn human(n: u64) -> String {
    const UNITS: [(u64, &str); 3] = [(1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")];
    for (u, name) in UNITS {
        if n >= u && n.is_multiple_of(u) {
            return format!("{} {name}", n / u);
        }
    }
    format!("{n} bytes")
}

impl Accounting {
    /// Records that partition `pk` was found to hold `actual` bytes while its record says
    /// `recorded` (a recount after compaction purged some of its data).
    pub fn recount(
        &mut self,
        storage_id: u64,
        token: Token,
        pk: &Bytes,
        recorded: u64,
        actual: u64,
    ) {
        self.changes.push(PkChange {
            storage_id,
            token,
            pk: pk.clone(),
            old: 0,
            new: actual as i64 - recorded as i64,
            ru: 0.0,
            recorded: None,
        });
    }

    /// Records that a key of partition `pk` goes from `old_len` to `new_len` stored bytes
    /// (key + value; 0 = absent). Checks the partition key and row limits.
    pub fn key_change(
        &mut self,
        limits: &PartitionLimits,
        storage_id: u64,
        token: Token,
        pk: &Bytes,
        old_len: usize,
        new_len: usize,
    ) -> Result<(), QueryError> {
        let lens = (old_len, new_len);
        self.key_change_recorded(limits, storage_id, token, pk, lens, None)
    }

    /// `key_change` (`lens`: old and new length) by a caller that may know the partition's
    /// size record (`recorded`, from the memo, exact while it holds the partition's stripe).
    pub fn key_change_recorded(
        &mut self,
        limits: &PartitionLimits,
        storage_id: u64,
        token: Token,
        pk: &Bytes,
        (old_len, new_len): (usize, usize),
        recorded: Option<u64>,
    ) -> Result<(), QueryError> {
        if pk.len() > MAX_PARTITION_KEY_BYTES {
            return Err(QueryError::Invalid(format!(
                "Key length of {} is longer than maximum of {MAX_PARTITION_KEY_BYTES}",
                pk.len()
            )));
        }
        if new_len as u64 > limits.row_max_bytes && new_len > old_len {
            return Err(QueryError::Invalid(format!(
                "Row size of {new_len} bytes exceeds the maximum row size of {} ({} bytes)",
                human(limits.row_max_bytes),
                limits.row_max_bytes
            )));
        }
        let delta = new_len as i64 - old_len as i64;
        let ru = super::ru::write_key_cost(old_len, new_len);
        match self
            .changes
            .iter_mut()
            .find(|c| c.storage_id == storage_id && c.pk == *pk)
        {
            Some(c) => {
                c.new += delta;
                c.ru += ru;
                c.recorded = c.recorded.or(recorded);
            }
            None => self.changes.push(PkChange {
                storage_id,
                token,
                pk: pk.clone(),
                old: 0,
                new: delta,
                ru,
                recorded,
            }),
        }
        Ok(())
    }

    /// Request units of the whole write.
    pub fn request_units(&self) -> f64 {
        self.changes.iter().map(|c| c.ru).sum()
    }

    /// Reads the current sizes (the caller holds the partitions' write stripes), checks the
    /// logical partition limit, warns past 90% of it (through `warn`: the request's client
    /// warnings), and adds the new size records to `batch`.
    pub fn prepare(
        &mut self,
        (maps, handles): (&PartitionMaps, &Handles),
        limits: &PartitionLimits,
        batch: &mut WriteBatch,
        warn: Option<&dyn Fn(String)>,
    ) -> Result<(), QueryError> {
        for c in &mut self.changes {
            // The record's key is built once, and only when the record is read or written
            // (tables whose sizes derive from their rows write none).
            let (old, read_key) = match c.recorded {
                Some(bytes) => (bytes as i64, None),
                None => {
                    let key = size_key(c.storage_id, c.token, &c.pk);
                    let bytes = recorded_at(maps, handles, c.storage_id, c.token, &key)?;
                    (bytes as i64, Some(key))
                }
            };
            let delta = c.new;
            c.old = old;
            c.new = (old + delta).max(0);
            let max = limits.logical_max_bytes as i64;
            if delta > 0 && c.new > max {
                return Err(QueryError::Invalid(format!(
                    "Partition key reached maximum size of {} ({} bytes): this write would take it from {} to {} bytes",
                    human(limits.logical_max_bytes),
                    limits.logical_max_bytes,
                    old,
                    c.new
                )));
            }
            if delta > 0 && c.new * 10 > max * 9 {
                if let Some(warn) = warn {
                    warn(format!(
                        "Partition key is at {:.1}% of the maximum logical partition size of {} ({} of {} bytes)",
                        c.new as f64 * 100.0 / max as f64,
                        human(limits.logical_max_bytes),
                        c.new,
                        max
                    ));
                }
            }
            if c.new == c.old || derives_sizes(maps, c.storage_id, c.token) {
                continue;
            }
            let key = read_key.unwrap_or_else(|| size_key(c.storage_id, c.token, &c.pk));
            if c.new == 0 {
                batch.delete(Space::Sizes, key);
            } else {
                batch.put(Space::Sizes, key, (c.new as u64).to_be_bytes().to_vec());
            }
        }
        Ok(())
    }

    /// Commits (via `commit`) while holding the shared lock of every physical partition the
    /// write touches, then updates their counters. Returns the partitions touched (to check
    /// for splits) with the request units written to each.
    pub fn commit<E>(
        &self,
        maps: &PartitionMaps,
        commit: impl FnOnce() -> Result<(), E>,
    ) -> Result<TouchedList, E> {
        let mut commit = Some(commit);
        loop {
            let mut parts = self.partitions(maps);
            let held = ReadHeld::lock(&parts);
            if parts
                .iter()
                .any(|(_, p, _)| p.stats.retired.load(Ordering::SeqCst))
            {
                // Split while we waited: route again with the new map.
                drop(held);
                continue;
            }
            if let Some(f) = commit.take() {
                if let Err(e) = f() {
                    // What was written is unknown: the memos answer nothing until recounted.
                    for (_, p, _) in &parts {
                        p.stats.memo.off();
                    }
                    return Err(e);
                }
            }
            let ru = self.count(&parts);
            drop(held);
            for ((_, _, r), add) in parts.iter_mut().zip(ru) {
                *r = add;
            }
            return Ok(parts);
        }
    }

    /// The physical partitions the changes fall in, by (storage id, partition id), each with
    /// no request units yet.
    fn partitions(&self, maps: &PartitionMaps) -> TouchedList {
        // The last table's map (a write is mostly of one table: no list of maps).
        let mut map: Option<(u64, Arc<PartitionMap>)> = None;
        let mut parts = TouchedList::with_capacity(self.changes.len());
        for c in &self.changes {
            if map.as_ref().is_none_or(|(s, _)| *s != c.storage_id) {
                let Some(m) = maps.get(c.storage_id) else {
                    continue;
                };
                map = Some((c.storage_id, m));
            }
            let p = map.as_ref().expect("set above").1.route(c.token);
            if !parts
                .iter()
                .any(|(s, q, _)| *s == c.storage_id && q.id == p.id)
            {
                parts.push((c.storage_id, Arc::clone(p), 0.0));
            }
        }
        parts.sort_by_key(|(s, p, _)| (*s, p.id));
        parts
    }

    /// Counts the committed changes in their partitions (`parts`, locked shared): bytes,
    /// logical partitions, consumption, heat, memo and split watch; the request units of each
    /// partition, in the order of `parts` (at most a few: a write's partitions).
    fn count(&self, parts: &[Touched]) -> SmallVec<[f64; 1]> {
        let mut ru: SmallVec<[f64; 1]> = smallvec::smallvec![0.0f64; parts.len()];
        let now = super::ru::unix_now();
        for c in &self.changes {
            let Some((i, (_, p, _))) = parts.iter().enumerate().find(|(_, (s, p, _))| {
                *s == c.storage_id
                    && (p.contains(c.token) || p.start == MIN_TOKEN && c.token == MIN_TOKEN)
            }) else {
                continue;
            };
            p.stats.bytes.fetch_add(c.new - c.old, Ordering::SeqCst);
            p.stats.consumed.add_at(c.ru, now);
            p.stats.hot.record_at(c.token, &c.pk, c.ru, now);
            ru[i] += c.ru;
            let dl = (c.new > 0) as i64 - (c.old > 0) as i64;
            if dl != 0 {
                p.stats.logical.fetch_add(dl, Ordering::SeqCst);
            }
            if c.new != c.old {
                let key = super::size_memo::key(c.token, &c.pk);
                match c.old {
                    0 => p.stats.memo.set_new(&key, c.new as u64),
                    _ => p.stats.memo.set(&key, c.new as u64),
                }
            }
            let key = || size_key(c.storage_id, c.token, &c.pk);
            p.stats
                .split_watch
                .record_change(c.token, key, c.new - c.old, dl);
        }
        ru
    }
}

/// A partition a write touched: (storage id, partition, request units written to it).
pub type Touched = (u64, Arc<super::map::PhysicalPartition>, f64);
/// The partitions a write touched (inline room for a point write's one).
pub type TouchedList = SmallVec<[Touched; 1]>;

/// The shared locks of a write's partitions (`PartStats::lock`), held until this drops (no
/// list of guards).
struct ReadHeld<'a>(&'a [Touched]);

impl<'a> ReadHeld<'a> {
    /// Locks each partition's lock shared, in the order of `parts` (sorted by (storage id,
    /// partition id): every holder of several locks takes them in one order).
    fn lock(parts: &'a [Touched]) -> ReadHeld<'a> {
        for (_, p, _) in parts {
            // Unlocked in `drop` (the guard's only job).
            std::mem::forget(p.stats.lock.read());
        }
        ReadHeld(parts)
    }
}

impl Drop for ReadHeld<'_> {
    fn drop(&mut self) {
        for (_, p, _) in self.0 {
            // SAFETY: `lock` took this shared lock for this value and forgot its guard.
            unsafe { p.stats.lock.force_unlock_read() };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `largest` keeps what a full sort would put first, for many sizes and ties.
    #[test]
    fn largest_is_the_head_of_a_full_sort() {
        let mut x = 12345u64;
        for n in [0usize, 1, 5, 20, 81, 1000] {
            let records: Vec<SizeRecord> = (0..n)
                .map(|i| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    SizeRecord {
                        storage_id: 1,
                        token: (x >> 8) as i64 % 50,
                        pk: i.to_be_bytes().to_vec(),
                        bytes: (x % 7) as i64,
                    }
                })
                .collect();
            let mut model: Vec<(i64, Token, Vec<u8>)> = (records.iter())
                .map(|r| (r.bytes, r.token, r.pk.clone()))
                .collect();
            model.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
            let top = largest(records.into_iter(), 20);
            assert_eq!(top.len(), n.min(20));
            let key = |t: &(i64, Token, Vec<u8>)| (t.0, t.1);
            let want: Vec<_> = model.iter().take(20).map(key).collect();
            assert_eq!(top.iter().map(key).collect::<Vec<_>>(), want, "{n}");
        }
    }

    #[test]
    fn keys_sort_by_token_and_decode() {
        let a = size_key(7, -5, b"x");
        let b = size_key(7, 3, b"a");
        let c = size_key(8, MIN_TOKEN, b"");
        assert!(a < b && b < c);
        let r = decode(&b, &42u64.to_be_bytes()).unwrap();
        assert_eq!(
            (r.storage_id, r.token, &r.pk[..], r.bytes),
            (7, 3, &b"a"[..], 42)
        );
        assert_eq!(human(1 << 20), "1 MiB");
        assert_eq!(human(20 << 30), "20 GiB");
        assert_eq!(human(1000), "1000 bytes");
    }
}
