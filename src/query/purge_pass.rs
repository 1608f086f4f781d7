//! Purging where the store has no compactions (PostgreSQL): a pass over the table data of the
//! physical partitions this node owns, deciding for every key what a compaction would
//! (`purge.rs`'s filter: expired cells and markers, tombstones and row deletions past
//! gc_grace_seconds, rows a partition deletion or range tombstone shadows) and writing that
//! through ordinary commits.
//!
//! Why: on the embedded store compactions purge as they rewrite; a PostgreSQL table is never
//! rewritten, so without this pass deleted and expired data stayed forever (reads skipped it,
//! disk space never came back). It runs every `storage.postgres.purge_every_secs` on a
//! background thread, and when the `compact` maintenance command is run.
//!
//! Safety: a pass reads without locks and commits each change under the condition that the
//! key still holds what it read (`Condition::Unchanged`): a write in between wins and the key
//! waits for the next pass; no write is lost. What a pass removes is what no read returns
//! anyway, so a write that merged the old value back brings back only invisible data. As
//! after a compaction, the filter queues each changed partition for the tombstone sweeper,
//! which sweeps its partition and range tombstones and recounts its size record.
//!
//! Bounds: a pass reads `CHUNK_KEYS` keys per scan and commits each chunk's changes at once
//! (key by key when one of them conflicts); memory is one chunk. A background pass reads at most
//! `storage.postgres.purge_bytes_per_second` (it competes with requests for the database, as
//! compactions do: Cassandra throttles them to 64 MiB/s by default); `compact` runs unpaced. A
//! physical partition that fails (moved or split under the pass) is left for the next pass and
//! the others go on.

use super::Engine;
use crate::format::keys::key_token;
use crate::partition::handles::Placement;
use crate::storage::{Condition, Purge, PurgeFilter, Space, StorageError, WriteBatch};
use bytes::Bytes;
use std::ops::Bound;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

/// Keys read per scan of a pass; one chunk's changes are one commit.
const CHUNK_KEYS: usize = 1000;

/// One change a pass makes: the key, the value it read, the new value (None: removed).
type Change = (Bytes, Bytes, Option<Bytes>);

/// Starts the background passes (a thread that ends with the engine) on a store that does not
/// purge in compactions, each reading at most `bytes_per_second`; `every` zero: none.
pub fn start(engine: &Arc<Engine>, every: Duration, bytes_per_second: u64) {
    if engine.store.purges_in_compactions() || every.is_zero() {
        return;
    }
    let weak: Weak<Engine> = Arc::downgrade(engine);
    let spawned = std::thread::Builder::new()
        .name("ringgate-purger".into())
        .spawn(move || loop {
            std::thread::sleep(every);
            let Some(e) = weak.upgrade() else { return };
            match run(&e, Pace::new(bytes_per_second)) {
                Ok(0) => {}
                Ok(n) => tracing::info!("purge pass: {n} expired or deleted entries purged"),
                Err(err) => tracing::warn!(error = %err, "purge pass failed; will retry"),
            }
        });
    if let Err(e) = spawned {
        tracing::warn!(error = %e, "could not start the purge passes");
    }
}

/// How fast a pass reads: after each chunk it sleeps until its reads so far took at least
/// their bytes at `bytes_per_second` (0: no limit).
pub struct Pace {
    bytes_per_second: u64,
    started: Instant,
    read_bytes: u64,
}

impl Pace {
    pub fn new(bytes_per_second: u64) -> Pace {
        Pace {
            bytes_per_second,
            started: Instant::now(),
            read_bytes: 0,
        }
    }

    /// Unpaced (`compact`: the operator asked for it now).
    pub fn unlimited() -> Pace {
        Pace::new(0)
    }

    /// Counts `bytes` read, `elapsed` after the start; how long to wait before reading on.
    fn wait_after(&mut self, bytes: u64, elapsed: Duration) -> Duration {
        self.read_bytes += bytes;
        if self.bytes_per_second == 0 {
            return Duration::ZERO;
        }
        let due = Duration::from_secs_f64(self.read_bytes as f64 / self.bytes_per_second as f64);
        due.saturating_sub(elapsed)
    }

    fn read(&mut self, bytes: u64) {
        let wait = self.wait_after(bytes, self.started.elapsed());
        if !wait.is_zero() {
            std::thread::sleep(wait);
        }
    }
}

/// One pass over every table's data in the physical partitions this node owns; returns how
/// many keys it removed or rewrote. A partition that fails is logged and left for the next
/// pass; the first failure is returned once the others are done.
pub fn run(engine: &Engine, mut pace: Pace) -> super::Result<u64> {
    let mut filter = super::purge::filter_of(engine);
    let (mut purged, mut failed) = (0, None);
    for (sid, map) in engine.maps.all() {
        for part in map.parts.iter() {
            if engine.handles.placement(sid, part) != Placement::Local {
                continue;
            }
            match pass_partition(engine, (&mut filter, &mut pace), sid, part) {
                Ok(n) => purged += n,
                Err(e) => {
                    tracing::warn!(storage_id = sid, partition = part.id, error = %e,
                        "purge pass: a physical partition failed; the next pass retries it");
                    failed.get_or_insert(e);
                }
            }
        }
    }
    match failed {
        Some(e) => Err(e),
        None => Ok(purged),
    }
}

/// Purges one physical partition, chunk by chunk, in key order (the filter needs each
/// partition header before its rows).
fn pass_partition(
    engine: &Engine,
    (filter, pace): (&mut PurgeFilter, &mut Pace),
    sid: u64,
    part: &crate::partition::map::PhysicalPartition,
) -> super::Result<u64> {
    let handle = engine.handles.read(sid, part)?;
    let mut after: Option<Bytes> = None;
    let mut purged = 0;
    loop {
        let lower = after.as_deref().map_or(Bound::Unbounded, Bound::Excluded);
        let mut changes: Vec<Change> = Vec::new();
        let (mut read, mut read_bytes) = (0, 0);
        for item in handle.scan(lower, Bound::Unbounded, false).take(CHUNK_KEYS) {
            let (key, value) = item?;
            read += 1;
            read_bytes += (key.len() + value.len()) as u64;
            match filter(&key, &value) {
                Purge::Keep => {}
                Purge::Remove => changes.push((key.clone(), value, None)),
                Purge::Replace(v) => changes.push((key.clone(), value, Some(v.into()))),
            }
            after = Some(key);
        }
        purged += commit(engine, sid, changes)?;
        pace.read(read_bytes);
        if read < CHUNK_KEYS {
            return Ok(purged);
        }
    }
}

/// Commits `changes` at once, or key by key when one conflicts (a write came between);
/// returns how many were applied.
fn commit(engine: &Engine, sid: u64, changes: Vec<Change>) -> super::Result<u64> {
    if changes.is_empty() {
        return Ok(0);
    }
    let n = changes.len() as u64;
    match commit_conditional(engine, sid, changes.clone()) {
        Ok(()) => {
            crate::metrics::global().purged_entries.add(n);
            Ok(n)
        }
        Err(StorageError::Conflict { .. }) if n > 1 => {
            let mut applied = 0;
            for change in changes {
                applied += commit(engine, sid, vec![change])?;
            }
            Ok(applied)
        }
        Err(StorageError::Conflict { .. }) => Ok(0),
        Err(e) => Err(e.into()),
    }
}

/// Writes `changes` in one commit, each under the condition that its key still holds the
/// value read.
fn commit_conditional(engine: &Engine, sid: u64, changes: Vec<Change>) -> Result<(), StorageError> {
    let mut batch = WriteBatch::default();
    let mut owners = Vec::with_capacity(changes.len());
    let mut conditions = Vec::with_capacity(changes.len());
    for (key, read, new) in changes {
        let token = key_token(&key)
            .ok_or_else(|| StorageError::Io("purge pass: a data key without a token".into()))?;
        match new {
            Some(v) => batch.put(Space::Data, key.clone(), v),
            None => batch.delete(Space::Data, key.clone()),
        };
        owners.push((sid, token));
        let cond = Condition::Unchanged {
            key,
            read: Some(read),
            stamp: None,
        };
        conditions.push((sid, token, cond));
    }
    let (maps, handles) = (&engine.maps, &engine.handles);
    let parts = super::write::by_partition::split(maps, handles, batch, &owners, conditions)?;
    // One physical partition at a time (a split since the scan can route a chunk to two):
    // `commit_parts` would log several parts together and commit them without their
    // conditions (it expects the writer to hold the partitions' locks), and a purge that
    // ignored its condition could delete a write that came in between.
    for part in parts {
        crate::storage::batch_log::commit_parts(&*engine.store, smallvec::smallvec![part])?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::keys::row_key;
    use crate::query::{Outcome, QueryOptions, Session};

    fn run_cql(e: &Engine, q: &str) -> Outcome {
        e.query(&mut Session::default(), q, &QueryOptions::default())
            .unwrap()
    }

    fn rows(e: &Engine, q: &str) -> i32 {
        match run_cql(e, q) {
            Outcome::Rows(r) => r.count,
            _ => panic!("not rows"),
        }
    }

    /// An engine with table `p.t (k int PRIMARY KEY, v int)`, gc_grace_seconds 0.
    fn engine_with_table(dir: &std::path::Path) -> Engine {
        let e = crate::query::test_engine(dir);
        let ks = "CREATE KEYSPACE p WITH replication = \
                  {'class': 'SimpleStrategy', 'replication_factor': 1}";
        run_cql(&e, ks);
        run_cql(
            &e,
            "CREATE TABLE p.t (k int PRIMARY KEY, v int) WITH gc_grace_seconds = 0",
        );
        e
    }

    fn table(e: &Engine) -> Arc<crate::schema::TableDef> {
        let schema = e.schema();
        Arc::clone(&schema.keyspaces["p"].tables["t"])
    }

    /// (storage id, data key of `k`, what the store holds under it now).
    fn stored(e: &Engine, k: i32) -> (u64, Bytes, Bytes) {
        let t = table(e);
        let key = Bytes::from(row_key(&t, &k.to_be_bytes(), &[]));
        let token = key_token(&key).unwrap();
        let value = e.handle_at(t.storage_id, token).unwrap().get(&key).unwrap();
        (t.storage_id, key, value.unwrap())
    }

    /// A change whose key was written after the pass read it is not applied (the write
    /// stays); in a chunk with it, the other changes still are.
    #[test]
    fn a_write_after_the_read_wins_over_the_purge() {
        let dir = tempfile::tempdir().unwrap();
        let e = engine_with_table(dir.path());
        for k in [1, 2] {
            run_cql(&e, &format!("DELETE FROM p.t WHERE k = {k}"));
        }
        let (sid, key1, tombstone1) = stored(&e, 1);
        let (_, key2, tombstone2) = stored(&e, 2);
        run_cql(&e, "INSERT INTO p.t (k, v) VALUES (1, 7)");
        let changes = vec![(key1, tombstone1, None), (key2.clone(), tombstone2, None)];
        assert_eq!(commit(&e, sid, changes).unwrap(), 1);
        assert_eq!(rows(&e, "SELECT v FROM p.t WHERE k = 1"), 1);
        let t = table(&e);
        let token = key_token(&key2).unwrap();
        let handle = e.handle_at(t.storage_id, token).unwrap();
        assert_eq!(
            handle.get(&key2).unwrap(),
            None,
            "the unchanged tombstone went"
        );
    }

    /// A paced pass waits until its reads took their bytes at the rate; unlimited never waits.
    #[test]
    fn a_pass_reads_no_faster_than_its_pace() {
        let mut pace = Pace::new(1_000_000);
        let ms = Duration::from_millis;
        assert_eq!(pace.wait_after(500_000, ms(100)), ms(400));
        assert_eq!(pace.wait_after(500_000, ms(1_200)), Duration::ZERO);
        assert_eq!(pace.wait_after(1_000_000, ms(1_500)), ms(500));
        let mut free = Pace::unlimited();
        assert_eq!(free.wait_after(u64::MAX / 2, ms(1)), Duration::ZERO);
    }

    /// A pass purges what is past gc_grace_seconds and keeps the rest; a second finds nothing.
    #[test]
    fn a_pass_purges_row_deletions_and_keeps_live_rows() {
        let dir = tempfile::tempdir().unwrap();
        let e = engine_with_table(dir.path());
        for k in 0..2500 {
            run_cql(&e, &format!("INSERT INTO p.t (k, v) VALUES ({k}, {k})"));
        }
        for k in (0..2500).step_by(3) {
            run_cql(&e, &format!("DELETE FROM p.t WHERE k = {k}"));
        }
        assert_eq!(run(&e, Pace::unlimited()).unwrap(), 834);
        assert_eq!(run(&e, Pace::unlimited()).unwrap(), 0);
        assert_eq!(rows(&e, "SELECT k FROM p.t"), 2500 - 834);
    }
}
