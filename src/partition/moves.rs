//! Moving a physical partition to another storage group online (issue 18), run by its owner
//! on a blocking thread (`ownership.rs` starts one move or cleanup at a time per node):
//!
//! 1. A fresh epoch (`cluster::ownership::next_epoch`, while this node still owns the
//!    partition), the partition opened in the target group with it, and everything of it
//!    there deleted: a copy an unfinished earlier move left, fenced by the new epoch.
//! 2. [`Served::track`]: from now on the keys of every commit are recorded (`dirty.rs`).
//! 3. The bulk copy: rows, size records and local records (index and change-feed entries)
//!    read from the source page by page and committed to the target through the new handle,
//!    at most [`COPY_BATCH_BYTES`] or [`COPY_BATCH_RECORDS`] per commit.
//! 4. Catch-up rounds: the keys committed meanwhile are copied again (their value now, or
//!    their deletion), until a round has at most [`FINAL_KEYS`] (at most
//!    [`CATCH_UP_ROUNDS`] rounds).
//! 5. The switch: [`Served::freeze`] (commits wait, none in flight), the last keys copied,
//!    then one etcd transaction (`cluster::moves::switch`) that writes the map with the
//!    partition in the target group only if this node still owns the partition at its epoch
//!    and the map is unchanged, then [`Served::switch`] and the new map installed here;
//!    waiting commits go on in the target. Writers pause for the last round and one etcd
//!    transaction; readers through this node do not pause.
//! 6. The source's copy stays until [`cleanup`]: other nodes read partitions they do not own
//!    through their own handles (scans), on the group their map names, until they follow the
//!    new map (the follower polls every 200 ms); the copy is complete up to the switch, and a
//!    read that went there after the switch notices the maps' change key moved and reads
//!    again with the new map (`query/select/fresh.rs`), so it still sees every write
//!    acknowledged before it began.
//!
//! Failure before the switch (an error, lost ownership, a split or drop of the partition, a
//! write rate the copy cannot catch up with) leaves the partition where it was, serving
//! throughout. A switch transaction whose outcome is unknown (etcd did not answer) is settled
//! by reading the map again; if even that fails, the ownership loop gives the partition up,
//! and whoever takes it reads the map after taking it.

use super::dirty::DirtyKey;
use super::handles::Handles;
use super::map::{PartitionMaps, PhysicalPartition};
use super::served::Served;
use crate::cluster::moves::Outcome;
use crate::cluster::{ClusterNode, Ownership};
use crate::storage::handle::{LocalWrite, PartitionCommit, PartitionHandle};
use crate::storage::StorageError;
use std::ops::Bound;
use std::sync::Arc;
use std::time::Instant;

pub const COPY_BATCH_BYTES: usize = 1 << 20;
pub const COPY_BATCH_RECORDS: usize = 1000;
/// A catch-up round this small is the last, done while writes wait.
pub const FINAL_KEYS: usize = 64;
pub const CATCH_UP_ROUNDS: usize = 8;
/// The keys written during a move are kept in memory up to this many bytes (about 48 bytes
/// plus the key each); beyond, the move fails.
pub const DIRTY_LIMIT_BYTES: usize = 64 << 20;
/// Rows deleted per transaction when clearing a copy.
const CLEAR_BATCH: usize = 2000;
/// A copy is cleared in at most this many transactions (10^8 records per kind).
const MAX_CLEAR_BATCHES: usize = 50_000;

/// How a move ended.
pub enum Moved {
    /// The partition now lives in the target group; this is its owner handle there.
    Switched(Arc<dyn PartitionHandle>),
    /// It stays where it was.
    Failed(String),
    /// The switch's outcome could not be learned: the caller gives the partition up.
    Unknown(String),
}

/// What a move works on.
pub struct Move {
    pub node: Arc<ClusterNode>,
    pub maps: Arc<PartitionMaps>,
    pub handles: Arc<Handles>,
    pub storage_id: u64,
    pub part: Arc<PhysicalPartition>,
    pub own: Ownership,
    pub to: String,
}

fn etcd<T: Send + 'static>(
    node: &ClusterNode,
    f: impl std::future::Future<Output = crate::cluster::Result<T>> + Send + 'static,
) -> Result<T, String> {
    node.block_on(f)?.map_err(|e| e.to_string())
}

impl Move {
    fn served(&self) -> Result<Arc<Served>, String> {
        (self.part.stats.handle.served().cloned()).ok_or_else(|| "not served here".to_string())
    }

    /// Opens the partition in group `group` with a fresh epoch (fencing every older handle
    /// there).
    fn open_fresh(&self, group: &str) -> Result<Arc<dyn PartitionHandle>, String> {
        let (ctl, own) = (self.node.control().clone(), self.own.clone());
        let epoch = etcd(&self.node, async move {
            crate::cluster::ownership::next_epoch(&ctl, &own).await
        })?;
        let r = self
            .part
            .reference(self.storage_id)
            .in_group(Some(group.into()));
        self.handles.open_owner(r, epoch).map_err(|e| e.to_string())
    }

    pub fn run(&self) -> Moved {
        let served = match self.served() {
            Ok(s) => s,
            Err(e) => return Moved::Failed(e),
        };
        let Some(source) = served.owner() else {
            return Moved::Failed("this node does not serve the partition".into());
        };
        let prepared = self.open_fresh(&self.to).and_then(|target| {
            clear(&*target).map_err(|e| e.to_string())?;
            Ok(target)
        });
        let target = match prepared {
            Ok(t) => t,
            Err(e) => return Moved::Failed(e),
        };
        served.track(DIRTY_LIMIT_BYTES);
        let moved = self.copy_and_switch(&served, &*source, target);
        served.stop_tracking();
        moved
    }

    fn copy_and_switch(
        &self,
        served: &Served,
        source: &dyn PartitionHandle,
        target: Arc<dyn PartitionHandle>,
    ) -> Moved {
        let started = Instant::now();
        let copied = copy_all(source, &*target).and_then(|n| {
            test_pause();
            let last = catch_up(served, source, &*target)?;
            Ok((n, last))
        });
        let (records, last) = match copied {
            Ok(c) => c,
            Err(e) => return Moved::Failed(e),
        };
        let frozen = served.freeze();
        let paused = Instant::now();
        let mut keys = last;
        match served.take_dirty() {
            Ok(more) => keys.extend(more),
            Err(limit) => return Moved::Failed(overflow(limit)),
        }
        let last_keys = keys.len();
        if let Err(e) = copy_keys(source, &*target, keys) {
            return Moved::Failed(e.to_string());
        }
        let outcome = Outcome {
            from: self.part.group_name().to_string(),
            to: self.to.clone(),
            moved: true,
            detail: format!(
                "{records} records copied in {} ms; writes held {} ms for the last {last_keys} \
                 keys, then one etcd transaction switched it",
                started.elapsed().as_millis(),
                paused.elapsed().as_millis()
            ),
            finished_ms: crate::cluster::moves::now_ms(),
        };
        let switched = self.switch(&outcome);
        let reader = self.reader();
        let moved = match (switched, reader) {
            (Ok(true), Ok(reader)) => {
                served.switch(Arc::clone(&target), reader);
                Moved::Switched(target)
            }
            (Ok(true), Err(e)) => Moved::Unknown(format!("switched, but no reader: {e}")),
            (Ok(false), _) => Moved::Failed(
                "the partition's owner or map changed during the move; it stays".into(),
            ),
            (Err(e), _) => Moved::Unknown(e),
        };
        drop(frozen);
        tracing::info!(
            storage_id = self.storage_id,
            partition = self.part.id,
            to = %self.to,
            records,
            writes_paused_ms = paused.elapsed().as_millis() as u64,
            "partition move ended"
        );
        moved
    }

    fn reader(&self) -> Result<Arc<dyn PartitionHandle>, String> {
        let r = (self.part.reference(self.storage_id)).in_group(Some(self.to.clone()));
        self.handles.open_reader(r).map_err(|e| e.to_string())
    }

    /// The etcd switch; an unknown outcome is settled by reading the map (Err: still unknown).
    fn switch(&self, outcome: &Outcome) -> Result<bool, String> {
        let (ctl, own) = (self.node.control().clone(), self.own.clone());
        let node = Arc::clone(&self.node);
        let done = self
            .maps
            .regroup(self.storage_id, self.part.id, &self.to, |m| {
                let (m, outcome) = (m.clone(), outcome.clone());
                etcd(&node, async move {
                    crate::cluster::moves::switch(&ctl, &own, &m, &outcome).await
                })
                .map_err(StorageError::Unavailable)
            });
        match done {
            Ok(b) => Ok(b),
            Err(e) => match self.maps.stored_group(self.storage_id, self.part.id) {
                Ok(Some(g)) if g == self.to => {
                    self.maps.reload().map_err(|e| e.to_string())?;
                    Ok(true)
                }
                Ok(_) => Ok(false),
                Err(again) => Err(format!("{e}; reading the map again: {again}")),
            },
        }
    }
}

/// Test hook: `RINGGATE_TEST_MOVE_PAUSE_MS` sleeps that long after the bulk copy, so that
/// tests can write to the partition between the copy and the switch (those writes reach the
/// target only through the catch-up rounds).
fn test_pause() {
    let ms = std::env::var("RINGGATE_TEST_MOVE_PAUSE_MS").ok();
    if let Some(ms) = ms.and_then(|v| v.parse::<u64>().ok()) {
        std::thread::sleep(std::time::Duration::from_millis(ms.min(60_000)));
    }
}

fn overflow(limit: usize) -> String {
    format!(
        "more than {limit} bytes of keys were written during the copy: the partition is \
         written faster than it can be copied; try again when it is quieter"
    )
}

/// Deletes everything of the partition the handle addresses.
pub fn clear(h: &dyn PartitionHandle) -> Result<u64, StorageError> {
    let mut total = 0;
    for _ in 0..MAX_CLEAR_BATCHES {
        match h.clear_some(CLEAR_BATCH)? {
            0 => return Ok(total),
            n => total += n,
        }
    }
    Err(StorageError::Io(format!(
        "clearing a partition took more than {MAX_CLEAR_BATCHES} transactions"
    )))
}

/// A commit being filled up to the batch bounds.
#[derive(Default)]
struct Batch {
    commit: PartitionCommit,
    bytes: usize,
    records: usize,
}

impl Batch {
    fn full(&self) -> bool {
        self.bytes >= COPY_BATCH_BYTES || self.records >= COPY_BATCH_RECORDS
    }

    fn count(&mut self, bytes: usize) {
        self.bytes += bytes;
        self.records += 1;
    }

    /// Commits what it holds to `target` if full (or `force`), starting empty again.
    fn flush(&mut self, target: &dyn PartitionHandle, force: bool) -> Result<usize, StorageError> {
        if self.records == 0 || !(force || self.full()) {
            return Ok(0);
        }
        let b = std::mem::take(self);
        target.commit(b.commit)?;
        Ok(b.records)
    }
}

/// Copies every record of the partition; how many.
fn copy_all(source: &dyn PartitionHandle, target: &dyn PartitionHandle) -> Result<usize, String> {
    let e = |e: StorageError| e.to_string();
    let mut b = Batch::default();
    let mut n = 0;
    for item in source.scan(Bound::Unbounded, Bound::Unbounded, false) {
        let (k, v) = item.map_err(e)?;
        b.count(k.len() + v.len());
        b.commit.writes.push((k, Some(v)));
        n += b.flush(target, false).map_err(e)?;
    }
    for item in source.scan_sizes(Bound::Unbounded, Bound::Unbounded) {
        let (k, v) = item.map_err(e)?;
        b.count(k.len() + v.len());
        b.commit.sizes.push((k, Some(v)));
        n += b.flush(target, false).map_err(e)?;
    }
    let mut after: Option<(i64, bytes::Bytes)> = None;
    loop {
        let page =
            (source.local_records(after.as_ref().map(|(t, k)| (*t, &k[..])), 1000)).map_err(e)?;
        let Some(last) = page.last() else { break };
        after = Some((last.token, last.key.clone()));
        for l in page {
            b.count(l.key.len() + l.value.as_ref().map_or(0, |v| v.len()));
            b.commit.local.push(l);
            n += b.flush(target, false).map_err(e)?;
        }
    }
    n += b.flush(target, true).map_err(e)?;
    Ok(n)
}

/// Copies the keys written during the copy again until a round is small; the last round's
/// keys, to copy while writes wait.
fn catch_up(
    served: &Served,
    source: &dyn PartitionHandle,
    target: &dyn PartitionHandle,
) -> Result<Vec<DirtyKey>, String> {
    for _ in 0..CATCH_UP_ROUNDS {
        let keys = served.take_dirty().map_err(overflow)?;
        if keys.len() <= FINAL_KEYS {
            return Ok(keys);
        }
        copy_keys(source, target, keys).map_err(|e| e.to_string())?;
    }
    served.take_dirty().map_err(overflow)
}

/// Copies each key's current value in the source (or its absence) to the target.
fn copy_keys(
    source: &dyn PartitionHandle,
    target: &dyn PartitionHandle,
    keys: Vec<DirtyKey>,
) -> Result<(), StorageError> {
    let mut b = Batch::default();
    for key in keys {
        match key {
            DirtyKey::Data(k) => {
                let v = source.get(&k)?;
                b.count(k.len() + v.as_ref().map_or(0, |v| v.len()));
                b.commit.writes.push((k, v));
            }
            DirtyKey::Size(k) => {
                let v = source.get_size(&k)?;
                b.count(k.len() + v.as_ref().map_or(0, |v| v.len()));
                b.commit.sizes.push((k, v));
            }
            DirtyKey::Local(k, token) => {
                let value = source.get_local(&k, token)?;
                b.count(k.len() + value.as_ref().map_or(0, |v| v.len()));
                b.commit.local.push(LocalWrite {
                    token,
                    key: k,
                    value,
                });
            }
        }
        b.flush(target, false)?;
    }
    b.flush(target, true).map(|_| ())
}

/// Deletes the copy a finished move left in group `group` (`cluster::moves` cleanup record),
/// opening it there with a fresh epoch first: that fences the old owner handle there, and a
/// later move back into the group fences this cleanup in turn.
pub fn cleanup(m: &Move, group: &str) -> Result<u64, String> {
    let h = m.open_fresh(group)?;
    clear(&*h).map_err(|e| e.to_string())
}

/// After a split (cluster mode, several groups): each child goes to the group with the least
/// data (`cluster::groups::place_children`); a child placed elsewhere than its parent's group
/// is moved there by a request its owner runs (a split itself moves no rows). Errors reading
/// the groups are logged: the children then stay in the parent's group.
pub fn place_split_children(
    node: &ClusterNode,
    meta: &dyn crate::storage::MetaStore,
    sid: u64,
    parent: &PhysicalPartition,
    children: &[Arc<PhysicalPartition>; 2],
) {
    use std::sync::atomic::Ordering::Relaxed;
    let placed = (|| -> Result<[String; 2], String> {
        let names: Vec<String> = (crate::cluster::groups::list(meta))
            .map_err(|e| e.to_string())?
            .into_keys()
            .collect();
        if names.len() < 2 {
            return Ok([
                parent.group_name().to_string(),
                parent.group_name().to_string(),
            ]);
        }
        let ctl = node.control().clone();
        let bytes = etcd(
            node,
            async move { crate::cluster::groups::bytes(&ctl).await },
        )?;
        let sizes = [0, 1].map(|i| children[i].stats.bytes.load(Relaxed));
        let parent_bytes = sizes[0] + sizes[1];
        Ok(crate::cluster::groups::place_children(
            &names,
            &bytes,
            (parent.group_name(), parent_bytes),
            sizes,
        ))
    })();
    let groups = match placed {
        Ok(g) => g,
        Err(e) => {
            tracing::warn!(storage_id = sid, error = %e, "placing split children failed; they stay in their parent's group");
            return;
        }
    };
    for (child, to) in children.iter().zip(groups) {
        if to == child.group_name() {
            continue;
        }
        let (ctl, pid, to2) = (node.control().clone(), child.id, to.clone());
        let asked = etcd(node, async move {
            crate::cluster::moves::request(&ctl, sid, pid, &to2).await
        });
        match asked {
            Ok(()) => {
                tracing::info!(storage_id = sid, partition = child.id, to = %to, "split child placed in the group with the least data (move requested)")
            }
            Err(e) => {
                tracing::warn!(storage_id = sid, partition = child.id, error = %e, "requesting a split child's move failed")
            }
        }
    }
}
