//! Physical partition splits.
//!
//! Storage-driven: when a write leaves a physical partition above `partitions.physical_split_bytes`
//! it is queued for the background splitter thread. The splitter picks the boundary token from
//! the logical partition size records so each child holds as close to half of the data as the
//! logical partitions allow (not the token midpoint), counts the left child's records exactly
//! in chunks under the parent's exclusive lock (writers run between chunks, see
//! `split_watch.rs`), and after the last chunk, still under the lock, commits the new map in one
//! batch and swaps it in.
//! Keys do not contain the partition id, so a split moves no data; a crash leaves the old or
//! the new map, and both cover the ring.
//!
//! Throughput-driven: raising a table's throughput above (partitions x 10,000 RU/s) splits the
//! largest partitions (by data, else by token range) until there are ceil(RU / 10,000).

use super::handles::Handles;
use super::map::{PartitionMaps, PhysicalPartition};
use super::sizes::scan_range;
use super::split_watch::{count_chunks, Counted};
use crate::storage::StorageError;
use crate::tokens::Token;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{channel, Sender};
use std::sync::Arc;

/// Queues storage-driven splits for the background splitter thread.
#[derive(Clone)]
pub struct Splitter {
    tx: Sender<(u64, u64)>,
    split_bytes: u64,
}

impl Splitter {
    pub fn start(maps: Arc<PartitionMaps>, handles: Arc<Handles>, split_bytes: u64) -> Splitter {
        let (tx, rx) = channel::<(u64, u64)>();
        std::thread::Builder::new()
            .name("partition-splitter".into())
            .spawn(move || {
                while let Ok(first) = rx.recv() {
                    let mut queue = vec![first];
                    while let Some((sid, pid)) = queue.pop() {
                        match split_one(&maps, &handles, sid, pid, Some(split_bytes)) {
                            Ok(Some(children)) => {
                                for c in children {
                                    if c.stats.bytes.load(Ordering::SeqCst) as u64 > split_bytes {
                                        c.stats.split_queued.store(true, Ordering::SeqCst);
                                        queue.push((sid, c.id));
                                    }
                                }
                            }
                            Ok(None) => {}
                            Err(e) => {
                                tracing::warn!(storage_id = sid, partition = pid, error = %e, "partition split failed");
                                if let Some(p) = maps
                                    .get(sid)
                                    .and_then(|m| m.parts.iter().find(|p| p.id == pid).cloned())
                                {
                                    p.stats.split_queued.store(false, Ordering::SeqCst);
                                }
                            }
                        }
                    }
                }
            })
            .expect("spawn the partition splitter");
        Splitter { tx, split_bytes }
    }

    /// Queues a split of `p` if it is above the threshold (once).
    pub fn check(&self, storage_id: u64, p: &PhysicalPartition) {
        if p.stats.bytes.load(Ordering::SeqCst).max(0) as u64 > self.split_bytes
            && !p.stats.split_queued.swap(true, Ordering::SeqCst)
        {
            let _ = self.tx.send((storage_id, p.id));
        }
    }

    /// Queues every partition above the threshold (at startup).
    pub fn check_all(&self, maps: &PartitionMaps) {
        for (sid, map) in maps.all() {
            for p in &map.parts {
                self.check(sid, p);
            }
        }
    }
}

/// Splits partition `pid` of table `sid` in two. With a threshold, only if its data is above it
/// and the data can be divided (at least two tokens); without, always (at the token midpoint when
/// it holds fewer than two tokens). Returns the children.
pub fn split_one(
    maps: &PartitionMaps,
    handles: &Handles,
    sid: u64,
    pid: u64,
    threshold: Option<u64>,
) -> Result<Option<[Arc<PhysicalPartition>; 2]>, StorageError> {
    let Some(map) = maps.get(sid) else {
        return Ok(None);
    };
    let Some(parent) = map.parts.iter().find(|p| p.id == pid).cloned() else {
        return Ok(None);
    };
    // Only the owner splits (cluster mode): it alone has exact counters and may retire the
    // parent; the owner's next write to it queues it again.
    if handles.placement(sid, &parent) != super::handles::Placement::Local {
        parent.stats.split_queued.store(false, Ordering::SeqCst);
        return Ok(None);
    }
    wait_counted(&parent)?;
    if let Some(th) = threshold {
        if parent.stats.bytes.load(Ordering::SeqCst).max(0) as u64 <= th {
            parent.stats.split_queued.store(false, Ordering::SeqCst);
            return Ok(None);
        }
    }
    // Bytes per token, in token order (no lock: the boundary only needs to be about right).
    let handle = handles.read(sid, &parent)?;
    let mut per_token: Vec<(Token, i64)> = Vec::new();
    for r in scan_range(&**handle, sid, &parent) {
        let r = r?;
        match per_token.last_mut() {
            Some((t, b)) if *t == r.token => *b += r.bytes,
            _ => per_token.push((r.token, r.bytes)),
        }
    }
    let total: i64 = per_token.iter().map(|(_, b)| b).sum();
    let boundary = if per_token.len() >= 2 && total > 0 {
        let mut cum = 0i64;
        let mut best = (i64::MAX, per_token[0].0);
        for (t, b) in &per_token[..per_token.len() - 1] {
            cum += b;
            let off = (2 * cum - total).abs();
            if off < best.0 {
                best = (off, *t);
            }
        }
        best.1
    } else if threshold.is_none() {
        ((parent.start as i128 + parent.end as i128) / 2) as i64
    } else {
        // One logical partition: it cannot be divided (it is bounded by the logical limit).
        return Ok(None);
    };
    let mut unbounded = usize::MAX;
    let (guard, locked_us) = match count_chunks(&**handle, sid, &parent, boundary, &mut unbounded) {
        Ok(Counted::Done(guard, us)) => (guard, us),
        other => {
            parent.stats.split_watch.stop();
            return other.map(|_| None);
        }
    };
    let (lb, lc) = parent.stats.split_watch.totals();
    parent.stats.split_watch.stop();
    let tb = parent.stats.bytes.load(Ordering::SeqCst);
    let tc = parent.stats.logical.load(Ordering::SeqCst);
    let res = maps.replace_with_children(sid, &parent, boundary, (lb, lc), (tb - lb, tc - lc))?;
    if res.is_some() {
        parent.stats.retired.store(true, Ordering::SeqCst);
        crate::metrics::global().splits.inc();
        // The parent's range now belongs to its children: fence every handle on it, under its
        // lock, so no commit through it can land after the new map took effect.
        handles.retire(&parent.reference(sid))?;
        // Cluster mode: the children have no owner yet; take them now, not a round later.
        handles.ownership_wake().notify_one();
    }
    drop(guard);
    if let Some([l, r]) = &res {
        crate::metrics::global()
            .recent_splits
            .record(crate::metrics::SplitEvent {
                storage_id: sid,
                parent: pid,
                children: [l.id, r.id],
                boundary,
                at_ms: chrono::Utc::now().timestamp_millis(),
            });
        if let Some(node) = handles.node() {
            let meta = maps.store().metadata();
            super::moves::place_split_children(node, meta, sid, &parent, &[l.clone(), r.clone()]);
        }
        tracing::info!(
            storage_id = sid,
            parent = pid,
            left = l.id,
            right = r.id,
            boundary,
            parent_bytes = tb,
            left_bytes = lb,
            right_bytes = tb - lb,
            locked_us,
            "physical partition split"
        );
    }
    Ok(res)
}

/// Longest a split waits for the startup recount of its partition's counters.
const COUNTED_WAIT: std::time::Duration = std::time::Duration::from_secs(120);

/// Waits until the partition's counters are exact (`sizes::rebuild` counts them in the
/// background after a start): a split divides them between its children.
fn wait_counted(p: &PhysicalPartition) -> Result<(), StorageError> {
    wait_counted_for(p, COUNTED_WAIT)
}

fn wait_counted_for(
    p: &PhysicalPartition,
    longest: std::time::Duration,
) -> Result<(), StorageError> {
    let since = std::time::Instant::now();
    while p.stats.counting.load(Ordering::SeqCst) {
        if since.elapsed() >= longest {
            return Err(StorageError::Unavailable(format!(
                "the sizes of physical partition {} are still being counted since startup",
                p.id
            )));
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    Ok(())
}

/// Splits a table's partitions until it has at least `n` (throughput-driven).
pub fn ensure_partitions(
    maps: &PartitionMaps,
    handles: &Handles,
    sid: u64,
    n: u64,
) -> Result<(), StorageError> {
    for _ in 0..(4 * n + 16) {
        let Some(map) = maps.get(sid) else {
            return Ok(());
        };
        if map.parts.len() as u64 >= n {
            return Ok(());
        }
        // The partition with the most data, else the widest range, among those served here
        // (only the owner splits; ALTER on a node owning none of them splits nothing).
        let local = |p: &&Arc<PhysicalPartition>| {
            handles.placement(sid, p) == super::handles::Placement::Local
        };
        let Some(p) = map.parts.iter().filter(local).max_by_key(|p| {
            (
                p.stats.bytes.load(Ordering::SeqCst),
                p.end as i128 - p.start as i128,
            )
        }) else {
            return Ok(());
        };
        split_one(maps, handles, sid, p.id, None)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::partition::derived_sizes::SizeSource;
    use crate::partition::sizes::{Accounting, PartitionLimits};
    use crate::partition::split_watch::CHUNK_RECORDS;
    use crate::storage::{EmbeddedStore, Store, SyncMode, WriteBatch};
    use crate::tokens::MIN_TOKEN;
    use bytes::Bytes;
    use std::sync::atomic::AtomicBool;

    /// One write through the real accounting path: the row of partition `i` gets a value of
    /// `value_len` bytes (None: deleted), its size record (if the partition keeps them)
    /// follows. One writer at a time (it reads the old row unlocked).
    fn write(maps: &PartitionMaps, handles: &Handles, sid: u64, i: u64, value_len: Option<usize>) {
        let limits = PartitionLimits::default();
        let token = MIN_TOKEN + 1 + (i as i64) * (1 << 40);
        let pk = Bytes::from(i.to_be_bytes().to_vec());
        let mut key = crate::format::keys::partition_prefix(sid, token, &pk);
        key.push(crate::format::keys::KIND_ROW);
        let p = maps.get(sid).unwrap().route(token).clone();
        let handle = handles.read(sid, &p).unwrap();
        let old = handle.get(&key).unwrap().map_or(0, |v| key.len() + v.len());
        let new = value_len.map_or(0, |n| key.len() + n);
        let mut acc = Accounting::default();
        acc.key_change(&limits, sid, token, &pk, old, new).unwrap();
        let mut batch = WriteBatch::default();
        acc.prepare((maps, handles), &limits, &mut batch, None)
            .unwrap();
        let commit = || {
            let p = maps.get(sid).unwrap().route(token).clone();
            let mut c = crate::storage::PartitionCommit {
                sizes: batch.ops.into_iter().map(|op| (op.key, op.value)).collect(),
                ..Default::default()
            };
            match value_len {
                Some(n) => c.put(key, vec![7u8; n]),
                None => c.delete(key),
            };
            handles.read(sid, &p)?.commit(c)
        };
        acc.commit(maps, commit).unwrap();
    }

    /// The partition's memo holds exactly its stored size records (`size_memo.rs`).
    fn assert_memo_exact(handles: &Handles, sid: u64, p: &PhysicalPartition) {
        let handle = handles.read(sid, p).unwrap();
        let mut n = 0;
        for r in scan_range(&**handle, sid, p) {
            let r = r.unwrap();
            let key = crate::partition::sizes::size_key(sid, r.token, &r.pk);
            assert_eq!(p.stats.memo.get(&key[8..]), Some(r.bytes as u64), "{p:?}");
            n += 1;
        }
        assert_eq!(p.stats.memo.records(), Some(n), "{p:?}");
    }

    /// A store with table `sid` (its sizes from `source`) in one partition holding a bit more
    /// than 3 chunks of logical partitions of about 100 bytes each (keys 0..n).
    #[allow(clippy::type_complexity)]
    fn table_of_chunks(
        sid: u64,
        source: SizeSource,
    ) -> (
        tempfile::TempDir,
        Arc<PartitionMaps>,
        Arc<Handles>,
        Arc<crate::partition::map::PartitionMap>,
        u64,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn Store> =
            Arc::new(EmbeddedStore::open(dir.path(), SyncMode::None).unwrap());
        let maps = Arc::new(PartitionMaps::open(Arc::clone(&store)).unwrap());
        let handles = Arc::new(Handles::start(Arc::clone(&store)).unwrap());
        let mut batch = WriteBatch::default();
        let map = maps.initial_layout((sid, source), None, &mut batch);
        store.commit(batch).unwrap();
        maps.install(sid, Arc::clone(&map));
        let n = 3 * CHUNK_RECORDS as u64 + 100;
        for i in 0..n {
            write(&maps, &handles, sid, i, Some(73));
        }
        (dir, maps, handles, map, n)
    }

    /// Writes keep landing (on both sides of the boundary, on records the split has and has not
    /// counted yet) while the split counts in chunks: the children still start exact.
    #[test]
    fn a_split_counts_exactly_while_writes_continue_between_its_chunks() {
        for (sid, source) in [(7, SizeSource::Records), (8, SizeSource::Rows)] {
            split_while_writing(sid, source);
        }
    }

    fn split_while_writing(sid: u64, source: SizeSource) {
        let (_dir, maps, handles, map, n) = table_of_chunks(sid, source);
        // Counted as at a start: the partition's memo holds its records, and the split
        // divides it between the children (writes below read and update it).
        let parent = Arc::clone(&map.parts[0]);
        let handle = Arc::clone(handles.read(sid, &parent).unwrap());
        let mut all = usize::MAX;
        assert!(crate::partition::sizes::recount(&*handle, sid, &parent, &mut all).unwrap());
        assert_memo_exact(&handles, sid, &parent);
        let stop = Arc::new(AtomicBool::new(false));
        let writer = std::thread::spawn({
            let (maps, handles, stop) =
                (Arc::clone(&maps), Arc::clone(&handles), Arc::clone(&stop));
            move || {
                let mut i = 0u64;
                while !stop.load(Ordering::SeqCst) {
                    // Grow one partition, drop another's only key, create a new one.
                    write(&maps, &handles, sid, (i * 7919) % n, Some(83));
                    if i < n / 2 {
                        write(&maps, &handles, sid, i * 2 + 1, None);
                    }
                    write(&maps, &handles, sid, n + i, Some(3));
                    i += 1;
                }
            }
        });
        let pid = map.parts[0].id;
        let children = split_one(&maps, &handles, sid, pid, None)
            .unwrap()
            .expect("split");
        stop.store(true, Ordering::SeqCst);
        writer.join().unwrap();
        for child in children {
            let (mut bytes, mut logical) = (0i64, 0i64);
            let handle = handles.read(sid, &child).unwrap();
            for r in scan_range(&**handle, sid, &child) {
                bytes += r.unwrap().bytes;
                logical += 1;
            }
            assert_eq!(child.stats.bytes.load(Ordering::SeqCst), bytes, "{child:?}");
            assert_eq!(
                child.stats.logical.load(Ordering::SeqCst),
                logical,
                "{child:?}"
            );
            assert_memo_exact(&handles, sid, &child);
        }
        assert_eq!(
            parent.stats.memo.get(&[0; 9]),
            None,
            "the parent's memo is off"
        );
    }

    /// The startup recount (`sizes::recount`) in steps of one chunk, with writes between the
    /// steps on records counted and not yet counted: it ends exact, and a split waits for it.
    #[test]
    fn a_recount_in_steps_ends_exact_while_writes_continue() {
        for (sid, source) in [(9, SizeSource::Records), (10, SizeSource::Rows)] {
            recount_while_writing(sid, source);
        }
    }

    fn recount_while_writing(sid: u64, source: SizeSource) {
        let (_dir, maps, handles, map, n) = table_of_chunks(sid, source);
        let p = Arc::clone(&map.parts[0]);
        // As after a restart: counters lost.
        p.stats.bytes.store(0, Ordering::SeqCst);
        p.stats.logical.store(0, Ordering::SeqCst);
        let handle = Arc::clone(handles.read(sid, &p).unwrap());
        let mut steps = 0u64;
        loop {
            let mut budget = 1;
            if crate::partition::sizes::recount(&*handle, sid, &p, &mut budget).unwrap() {
                break;
            }
            assert!(p.stats.counting.load(Ordering::SeqCst));
            // A split cannot divide counters that are not exact yet.
            assert!(wait_counted_for(&p, std::time::Duration::ZERO).is_err());
            write(&maps, &handles, sid, (steps * 7919) % n, Some(83));
            if steps < n / 2 {
                write(&maps, &handles, sid, steps * 2 + 1, None);
            }
            write(&maps, &handles, sid, n + steps, Some(3));
            steps += 1;
        }
        assert!(steps >= 3, "counted in {steps} steps");
        assert!(!p.stats.counting.load(Ordering::SeqCst));
        let (mut bytes, mut logical) = (0i64, 0i64);
        for r in scan_range(&*handle, sid, &p) {
            bytes += r.unwrap().bytes;
            logical += 1;
        }
        assert_eq!(p.stats.bytes.load(Ordering::SeqCst), bytes);
        assert_eq!(p.stats.logical.load(Ordering::SeqCst), logical);
        assert!(wait_counted_for(&p, std::time::Duration::ZERO).is_ok());
        // The memo filled with the chunks and took the writes in between: exact, and it
        // follows the writes after.
        assert_memo_exact(&handles, sid, &p);
        for i in 0..100 {
            write(&maps, &handles, sid, i, Some(80));
            write(&maps, &handles, sid, i * 2 + 1, None);
            write(&maps, &handles, sid, 2 * n + i, Some(5));
        }
        assert_memo_exact(&handles, sid, &p);
    }
}
