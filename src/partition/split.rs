//! Physical partition splits.
//!
//! Storage-driven: when a write leaves a physical partition above `partitions.physical_split_bytes`
//! it is queued for the background splitter thread. The splitter picks the boundary token from
//! the logical partition size records so each child holds as close to half of the data as the
//! logical partitions allow (not the token midpoint), then takes the parent's exclusive lock,
//! counts the left child's records exactly, commits the new map in one batch and swaps it in.
//! Keys do not contain the partition id, so a split moves no data; a crash leaves the old or
//! the new map, and both cover the ring.
//!
//! Throughput-driven: raising a table's throughput above (partitions x 10,000 RU/s) splits the
//! largest partitions (by data, else by token range) until there are ceil(RU / 10,000).

use super::map::{PartitionMaps, PhysicalPartition};
use super::sizes::scan_range;
use super::token::Token;
use crate::storage::{StorageError, Store};
use std::sync::atomic::Ordering;
use std::sync::mpsc::{channel, Sender};
use std::sync::Arc;

/// Queues storage-driven splits for the background splitter thread.
pub struct Splitter {
    tx: Sender<(u64, u64)>,
    split_bytes: u64,
}

impl Splitter {
    pub fn start(maps: Arc<PartitionMaps>, store: Arc<dyn Store>, split_bytes: u64) -> Splitter {
        let (tx, rx) = channel::<(u64, u64)>();
        std::thread::Builder::new()
            .name("partition-splitter".into())
            .spawn(move || {
                while let Ok(first) = rx.recv() {
                    let mut queue = vec![first];
                    while let Some((sid, pid)) = queue.pop() {
                        match split_one(&maps, &*store, sid, pid, Some(split_bytes)) {
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
    store: &dyn Store,
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
    if let Some(th) = threshold {
        if parent.stats.bytes.load(Ordering::SeqCst).max(0) as u64 <= th {
            parent.stats.split_queued.store(false, Ordering::SeqCst);
            return Ok(None);
        }
    }
    // Bytes per token, in token order (no lock: the boundary only needs to be about right).
    let mut per_token: Vec<(Token, i64)> = Vec::new();
    for r in scan_range(store, sid, parent.start, parent.end) {
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
    let started = std::time::Instant::now();
    let _guard = parent.stats.lock.write();
    if parent.stats.retired.load(Ordering::SeqCst) {
        return Ok(None);
    }
    let (mut lb, mut lc) = (0i64, 0i64);
    for r in scan_range(store, sid, parent.start, boundary) {
        lb += r?.bytes;
        lc += 1;
    }
    let tb = parent.stats.bytes.load(Ordering::SeqCst);
    let tc = parent.stats.logical.load(Ordering::SeqCst);
    let res = maps.replace_with_children(sid, &parent, boundary, (lb, lc), (tb - lb, tc - lc))?;
    if res.is_some() {
        parent.stats.retired.store(true, Ordering::SeqCst);
    }
    let locked_us = started.elapsed().as_micros() as u64;
    drop(_guard);
    if let Some([l, r]) = &res {
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

/// Splits a table's partitions until it has at least `n` (throughput-driven).
pub fn ensure_partitions(
    maps: &PartitionMaps,
    store: &dyn Store,
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
        // The partition with the most data, else the widest range.
        let Some(p) = map.parts.iter().max_by_key(|p| {
            (
                p.stats.bytes.load(Ordering::SeqCst),
                p.end as i128 - p.start as i128,
            )
        }) else {
            return Ok(());
        };
        split_one(maps, store, sid, p.id, None)?;
    }
    Ok(())
}
