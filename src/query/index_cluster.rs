//! Cluster mode: building a new secondary index's entries for the rows a table already has.
//!
//! Index entries are local to the physical partition of their row and only the partition's
//! owner may commit to it, so no one node can write them all. Each node builds the partitions
//! it owns: the node running CREATE INDEX right after the schema change, every other node when
//! its schema follower (`follow.rs`) has adopted the new index ([`build_missing`]; from then
//! on that node's writes maintain the entries themselves, so the scan misses no row). A
//! partition whose entries are all written gets the record
//! `meta` `index-built/[index storage id u64 BE][partition id u64 BE]` (empty value).
//!
//! CREATE INDEX answers success only once every partition of the table's current map has its
//! record ([`wait_built`]), so an index query through any node then finds every row a full
//! scan finds. It waits at most [`WAIT_MS`] (below the drivers' 10 s client timeout), polling
//! every [`POLL_MS`]; past that (an owner died and its lease has not expired yet) the index is
//! rolled back and the statement fails, rather than answering from partial entries.
//!
//! Where builds run: on the DDL node, in the statement's own wait ([`wait_built`]); on every
//! node, on one index builder thread ([`Builder`]), which the schema follower kicks after
//! each successful poll instead of building on its own thread, so a long build never delays
//! that node's schema following (DDL adopted, SCHEMA_CHANGE events, schema agreement). One
//! thread: at most one follower-driven build runs at once per node; kicks while it runs
//! coalesce into one more pass. Ordering is unchanged: a pass reads the schema the follower
//! has adopted, so this node's writes maintain an index before its scan begins.
//!
//! Owner changes: a partition's new owner (takeover) builds it when it has no record yet.
//! A split's children are new partitions without records: their owners build them again
//! (entries are idempotent puts, and the parent's were already in place since keys do not
//! move). A build fenced by a split just stops; the children cover its rows. The records go
//! with the index's data (`write::dropped`).

use super::Engine;
use crate::partition::handles::Placement;
use crate::schema::{IndexDef, TableDef};
use std::collections::HashSet;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

const BUILT_PREFIX: &[u8] = b"index-built/";
/// How long CREATE INDEX waits for every partition's owner to build it.
pub const WAIT_MS: u64 = 8_000;
const POLL_MS: u64 = 100;

/// True when the metadata is shared by a cluster (this module's path applies).
pub fn applies(engine: &Engine) -> bool {
    engine.store.metadata().is_shared()
}

/// `index-built/[index storage id]`: the prefix of one index's records.
pub fn built_prefix(index_storage_id: u64) -> Vec<u8> {
    let mut k = BUILT_PREFIX.to_vec();
    k.extend_from_slice(&index_storage_id.to_be_bytes());
    k
}

fn built_key(index_storage_id: u64, part_id: u64) -> Vec<u8> {
    let mut k = built_prefix(index_storage_id);
    k.extend_from_slice(&part_id.to_be_bytes());
    k
}

fn is_built(engine: &Engine, index: &IndexDef, part_id: u64) -> super::Result<bool> {
    let key = built_key(index.storage_id, part_id);
    Ok(engine.store.metadata().meta_get(&key)?.is_some())
}

/// Builds every partition of `table` this node owns that has no record yet (and not in
/// `known`, the (index, partition) pairs already seen built), recording each. A partition
/// fenced by a split is skipped: its children are built instead.
pub fn build_owned(
    engine: &Engine,
    table: &TableDef,
    index: &IndexDef,
    known: &mut HashSet<(u64, u64)>,
) -> super::Result<()> {
    let Some(map) = engine.maps.get(table.storage_id) else {
        return Ok(());
    };
    for p in &map.parts {
        if known.contains(&(index.storage_id, p.id))
            || engine.handles.placement(table.storage_id, p) != Placement::Local
        {
            continue;
        }
        if !is_built(engine, index, p.id)? {
            if !super::index::build_partition(engine, table, index, p)? {
                continue;
            }
            let key = built_key(index.storage_id, p.id).into();
            engine
                .store
                .metadata()
                .meta_commit(vec![(key, Some(bytes::Bytes::new()))])?;
            tracing::info!(index = %index.name, partition = p.id, "built the index entries of an owned partition");
        }
        known.insert((index.storage_id, p.id));
    }
    Ok(())
}

/// A builder pass: builds the owned, unbuilt partitions of every index.
pub fn build_missing(engine: &Engine, known: &mut HashSet<(u64, u64)>) {
    let schema = engine.schema();
    // Forgets dropped indexes, so the set stays as small as the schema's partitions.
    let live: HashSet<u64> = schema
        .keyspaces
        .values()
        .flat_map(|ks| ks.tables.values())
        .flat_map(|t| t.indexes.iter().map(|i| i.storage_id))
        .collect();
    known.retain(|(index, _)| live.contains(index));
    for ks in schema.keyspaces.values() {
        for table in ks.tables.values() {
            for index in &table.indexes {
                if let Err(e) = build_owned(engine, table, index, known) {
                    tracing::warn!(index = %index.name, error = %e, "building index entries failed; retrying at the next schema poll");
                }
            }
        }
    }
}

/// The node's index builder thread (see the module doc); it ends when this is dropped.
pub struct Builder {
    kicks: std::sync::mpsc::SyncSender<()>,
}

impl Builder {
    /// Starts the thread; None if it cannot be started (logged: builds then wait for the
    /// DDL node's own, and a new owner's partitions are not built).
    pub fn start(engine: &Arc<Engine>) -> Option<Builder> {
        // One kick queued at most: later ones coalesce into the pass it starts.
        let (kicks, queued) = std::sync::mpsc::sync_channel(1);
        let weak = Arc::downgrade(engine);
        let spawned = std::thread::Builder::new()
            .name("index-build".into())
            .spawn(move || run(weak, queued));
        match spawned {
            Ok(_) => Some(Builder { kicks }),
            Err(e) => {
                tracing::error!(error = %e, "cannot start the index builder");
                None
            }
        }
    }

    /// Asks for a [`build_missing`] pass (never blocks).
    pub fn kick(&self) {
        let _ = self.kicks.try_send(());
    }
}

fn run(engine: Weak<Engine>, queued: std::sync::mpsc::Receiver<()>) {
    // (index storage id, partition id) pairs seen built: each is checked in etcd once.
    let mut known = HashSet::new();
    while queued.recv().is_ok() {
        let Some(e) = engine.upgrade() else { return };
        build_missing(&e, &mut known);
    }
}

/// Waits until every partition of the table's current map has its record (Ok), or fails
/// after [`WAIT_MS`] naming the partitions still missing. Builds what this node owns
/// meanwhile (it may take a partition over while waiting).
pub fn wait_built(engine: &Engine, table: &TableDef, index: &IndexDef) -> super::Result<()> {
    let deadline = Instant::now() + Duration::from_millis(WAIT_MS);
    let mut known = HashSet::new();
    loop {
        if let Err(e) = build_owned(engine, table, index, &mut known) {
            tracing::info!(index = %index.name, error = %e, "building owned index entries failed; retrying");
        }
        let missing = missing_parts(engine, table, index)?;
        if missing.is_empty() {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(crate::error::ClientError::Server(format!(
                "Building index {} did not finish within {WAIT_MS} ms: the owners of physical partitions {missing:?} of the table have not built them (a node down?)",
                index.name
            )));
        }
        std::thread::sleep(Duration::from_millis(POLL_MS));
    }
}

fn missing_parts(engine: &Engine, table: &TableDef, index: &IndexDef) -> super::Result<Vec<u64>> {
    let Some(map) = engine.maps.get(table.storage_id) else {
        return Ok(Vec::new());
    };
    let mut missing = Vec::new();
    for p in &map.parts {
        if !is_built(engine, index, p.id)? {
            missing.push(p.id);
        }
    }
    Ok(missing)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_of_one_index_share_its_prefix_and_sort_by_partition() {
        let a = built_key(16, 2);
        let b = built_key(16, 10);
        assert!(a.starts_with(&built_prefix(16)) && b.starts_with(&built_prefix(16)));
        assert!(!built_key(17, 2).starts_with(&built_prefix(16)));
        assert!(a < b);
        assert_eq!(a.len(), BUILT_PREFIX.len() + 16);
    }
}
