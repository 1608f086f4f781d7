//! The batch log: a write that spans physical partitions is committed one partition at a
//! time, atomic as a whole, as Cassandra's batchlog makes LOGGED batches atomic.
//!
//! [`commit_parts`] first writes the whole write (every part's final keys and values) as one
//! log entry in `meta`, then commits each part (one physical partition each, through its
//! handle), then deletes the entry. [`replay`] (at startup, before anything reads) commits every entry still present part
//! by part and deletes it: the parts hold final values (rows already merged, size records
//! already computed) and the writer held its partitions' locks until it finished, so applying
//! a part twice writes the same bytes. A crash before the entry is written leaves nothing of
//! the write; after it, all of it once the server is back.
//!
//! Entry: key `batchlog/[id u64 BE]` (ids from the clock in ns at startup, then counting),
//! value `[parts u32 BE]` then per part `[ops u32 BE]` and per op `[space u8: 0 data, 1 meta,
//! 2 sizes][key length u32 BE][key][1 put | 0 delete][value length u32 BE][value]`. Its size is
//! that of the write, which the batch size limits bound.

use super::handle::{PartitionCommit, PartitionHandle};
use super::{Op, Result, Space, StorageError, Store, WriteBatch};
use bytes::{Buf, BufMut, Bytes};
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::sync::OnceLock;

const PREFIX: &[u8] = b"batchlog/";

/// Test hook: `RINGGATE_TEST_BATCHLOG_PAUSE_MS` sleeps that long before each part's commit, so
/// that a kill -9 test can land between parts (`tests/python/test_batch_log.py`).
fn pause_ms() -> u64 {
    static PAUSE: OnceLock<u64> = OnceLock::new();
    *PAUSE.get_or_init(|| {
        std::env::var("RINGGATE_TEST_BATCHLOG_PAUSE_MS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    })
}

fn next_key() -> Vec<u8> {
    static NEXT: OnceLock<AtomicU64> = OnceLock::new();
    let next = NEXT.get_or_init(|| {
        let now_ns = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        AtomicU64::new(now_ns)
    });
    let id = next.fetch_add(1, Ordering::Relaxed);
    [PREFIX, &id.to_be_bytes()].concat()
}

/// One physical partition's part of a write, committed through its handle (or, on a store
/// without handles, as a plain batch).
pub struct Part {
    pub handle: Option<Arc<dyn PartitionHandle>>,
    pub commit: PartitionCommit,
}

impl Part {
    fn commit(self, store: &dyn Store) -> Result<()> {
        match self.handle {
            Some(h) => h.commit(self.commit),
            None => store.commit(self.commit.to_batch()),
        }
    }
}

/// One write's parts: inline room for one (a point write's commit allocates no list).
pub type Parts = smallvec::SmallVec<[Part; 1]>;

/// Commits `parts` (each one physical partition's writes): a single part directly, with its
/// conditions; several through a batch log entry. The parts of a logged write commit without
/// their conditions: once the first part is applied the write must finish (the entry replays
/// it after a crash), so the writer must own every partition's lock; the caller holds them.
///
/// Cluster mode (a store with `shared_data`): no entry; each part commits by itself with its
/// conditions (a conflict makes the caller read, merge and commit every part again: the same
/// bytes where a part was applied). A LOGGED batch is logged a level up instead, as its
/// request, by the cluster batch log (`server::batchlog`): final values replayed after a
/// takeover could overwrite newer writes of the new owner, and etcd (the shared `meta`)
/// refuses data-sized entries. An UNLOGGED write may then apply in part, as in Cassandra.
pub fn commit_parts(store: &dyn Store, mut parts: Parts) -> Result<()> {
    parts.retain(|p| !p.commit.is_empty());
    if parts.len() <= 1 {
        return match parts.pop() {
            Some(p) => p.commit(store),
            None => Ok(()),
        };
    }
    if store.shared_data().is_some() {
        for part in parts {
            pause();
            part.commit(store)?;
        }
        return Ok(());
    }
    let key = next_key();
    let batches: Vec<WriteBatch> = parts.iter().map(|p| p.commit.to_batch()).collect();
    let entry = (
        Bytes::from(key.clone()),
        Some(Bytes::from(encode(&batches))),
    );
    store.metadata().meta_commit(vec![entry])?;
    for mut part in parts {
        pause();
        part.commit.conditions.clear();
        part.commit(store)?;
    }
    finish(store, key)
}

fn pause() {
    let pause_ms = pause_ms();
    if pause_ms > 0 {
        std::thread::sleep(std::time::Duration::from_millis(pause_ms));
    }
}

fn finish(store: &dyn Store, key: Vec<u8>) -> Result<()> {
    store.metadata().meta_commit(vec![(key.into(), None)])
}

/// Finishes every logged write a crash interrupted, at startup before anything reads; returns
/// how many. `apply_part` commits one part (one physical partition's writes, as a plain batch)
/// through that partition's handle: the caller routes it (storage cannot parse index keys).
pub fn replay(
    store: &dyn Store,
    apply_part: &mut dyn FnMut(WriteBatch) -> Result<()>,
) -> Result<usize> {
    let hi = super::prefix_successor(PREFIX).expect("prefix has no 0xff");
    let entries: Vec<_> = store
        .metadata()
        .meta_scan(Bound::Included(PREFIX), Bound::Excluded(&hi[..]))
        .collect::<Result<_>>()?;
    let n = entries.len();
    for (key, value) in entries {
        for part in decode(value)? {
            pause();
            apply_part(part)?;
        }
        finish(store, key.to_vec())?;
    }
    Ok(n)
}

fn space_byte(space: Space) -> u8 {
    match space {
        Space::Data => 0,
        Space::Meta => 1,
        Space::Sizes => 2,
    }
}

fn encode(parts: &[WriteBatch]) -> Vec<u8> {
    let mut out = Vec::new();
    out.put_u32(parts.len() as u32);
    for part in parts {
        out.put_u32(part.ops.len() as u32);
        for op in &part.ops {
            out.put_u8(space_byte(op.space));
            out.put_u32(op.key.len() as u32);
            out.put_slice(&op.key);
            out.put_u8(op.value.is_some() as u8);
            let value = op.value.as_deref().unwrap_or_default();
            out.put_u32(value.len() as u32);
            out.put_slice(value);
        }
    }
    out
}

fn corrupt(what: &str) -> StorageError {
    StorageError::Corrupt(format!("batch log entry: {what}"))
}

fn take(buf: &mut Bytes, n: usize) -> Result<Bytes> {
    if buf.remaining() < n {
        return Err(corrupt("truncated"));
    }
    Ok(buf.split_to(n))
}

fn take_u32(buf: &mut Bytes) -> Result<usize> {
    Ok(take(buf, 4)?.get_u32() as usize)
}

fn decode(mut buf: Bytes) -> Result<Vec<WriteBatch>> {
    let n_parts = take_u32(&mut buf)?;
    // Counts are checked against the bytes left, so a corrupt count cannot allocate much.
    let mut parts = Vec::with_capacity(n_parts.min(buf.len()));
    for _ in 0..n_parts {
        let n_ops = take_u32(&mut buf)?;
        let mut ops = Vec::with_capacity(n_ops.min(buf.len()));
        for _ in 0..n_ops {
            let space = match take(&mut buf, 1)?[0] {
                0 => Space::Data,
                1 => Space::Meta,
                2 => Space::Sizes,
                _ => return Err(corrupt("unknown space")),
            };
            let key_len = take_u32(&mut buf)?;
            let key = take(&mut buf, key_len)?;
            let is_put = take(&mut buf, 1)?[0] == 1;
            let value_len = take_u32(&mut buf)?;
            let value = take(&mut buf, value_len)?;
            ops.push(Op {
                space,
                key,
                value: is_put.then_some(value),
            });
        }
        parts.push(WriteBatch { ops });
    }
    Ok(parts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_round_trip_and_replay_finishes_them() {
        let dir = std::env::temp_dir().join(format!("ringgate-batchlog-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let store = super::super::EmbeddedStore::open(&dir, super::super::SyncMode::None).unwrap();
        let mut a = WriteBatch::default();
        a.put(Space::Data, &b"a"[..], &b"1"[..]);
        a.delete(Space::Data, &b"gone"[..]);
        let mut b = WriteBatch::default();
        b.put(Space::Sizes, &b"b"[..], &b""[..]);
        let parts = vec![a, b];
        let decoded = decode(Bytes::from(encode(&parts))).unwrap();
        assert_eq!(format!("{decoded:?}"), format!("{parts:?}"));
        assert!(decode(Bytes::from(encode(&parts)).slice(..9)).is_err());

        // An entry a crash left behind (logged, nothing applied) is applied by replay.
        let mut old = WriteBatch::default();
        old.put(Space::Data, &b"gone"[..], &b"x"[..]);
        store.commit(old).unwrap();
        let mut log = WriteBatch::default();
        log.put(Space::Meta, next_key(), encode(&parts));
        store.commit(log).unwrap();
        let mut apply = |part: WriteBatch| store.commit(part);
        assert_eq!(replay(&store, &mut apply).unwrap(), 1);
        assert_eq!(store.get(Space::Data, b"a").unwrap().unwrap(), &b"1"[..]);
        assert!(store.get(Space::Data, b"gone").unwrap().is_none());
        assert!(store.get(Space::Sizes, b"b").unwrap().is_some());
        assert_eq!(replay(&store, &mut apply).unwrap(), 0);
        drop(store);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
