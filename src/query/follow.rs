//! Cluster mode: following the schema and partition maps other nodes write to etcd.
//!
//! A thread per node reads the schema document's revision every [`POLL_MS`] and, when another
//! node changed it, has the catalog adopt it (`Catalog::refresh`): the partition maps are
//! reloaded first (the hook set in [`install`]), so a new table is never visible without
//! its map, then the schema becomes current and its changes go out as SCHEMA_CHANGE events
//! (`server` subscribes to `Catalog::subscribe`). Why polling and not an etcd watch: one
//! small read per interval per node is bounded and needs no reconnect logic; a change is
//! seen within the interval, well before a driver's schema-agreement wait gives up (10 s).
//!
//! A split made by another node changes a map, not the schema: `PartitionMaps::follow` reads
//! one small key the split rewrites and reloads the maps when it moved.

use super::Engine;
use std::sync::{Arc, OnceLock, Weak};
use std::time::{Duration, Instant};

/// How often the stored schema's revision is read.
pub const POLL_MS: u64 = 200;

/// Sets the catalog's map-reload hook (always) and, with a shared metadata store, starts the
/// follower thread, which ends with the engine.
pub fn install(engine: &Arc<Engine>) {
    let maps = Arc::clone(&engine.maps);
    engine
        .catalog
        .set_before_adopt(Box::new(move || maps.reload().map_err(|e| e.to_string())));
    if !engine.store.metadata().is_shared() {
        return;
    }
    let weak = Arc::downgrade(engine);
    engine.handles.set_schema_gate(Box::new(move || {
        let Some(e) = weak.upgrade() else {
            return Ok(());
        };
        if e.catalog.refresh().map_err(|err| err.to_string())? {
            e.handles.ownership_wake().notify_one();
        }
        Ok(())
    }));
    let (weak, builder) = (
        Arc::downgrade(engine),
        super::index_cluster::Builder::start(engine),
    );
    let spawned = std::thread::Builder::new()
        .name("schema-follow".into())
        .spawn(move || follow(weak, builder));
    if let Err(e) = spawned {
        tracing::error!(error = %e, "cannot start the schema follower");
    }
}

fn follow(engine: Weak<Engine>, builder: Option<super::index_cluster::Builder>) {
    let mut failing = false;
    let mut published = None;
    let mut delayed = false;
    let mut maps_followed = Instant::now();
    loop {
        std::thread::sleep(Duration::from_millis(POLL_MS));
        let Some(e) = engine.upgrade() else { return };
        if !delayed && test_delay_ms() > 0 && e.catalog.behind().unwrap_or(false) {
            drop(e);
            std::thread::sleep(Duration::from_millis(test_delay_ms()));
            delayed = true;
            continue;
        }
        delayed = false;
        // Before the refresh, and again after it (below): a driver waiting for schema
        // agreement after DDL on another node sees this node's new version at once.
        publish_version(&e, &mut published);
        let maps_due = maps_followed.elapsed() >= Duration::from_millis(test_maps_every_ms());
        if maps_due {
            maps_followed = Instant::now();
        }
        match (e.catalog.refresh()).and_then(|s| Ok((maps_due && follow_maps(&e)?) || s)) {
            Ok(changed) => {
                if changed {
                    // New tables' or split children's partitions: the ones assigned here are
                    // taken now, not at the next ownership round (up to lease/5 later), so the
                    // first writes to a new table do not wait for an owner.
                    e.handles.ownership_wake().notify_one();
                }
                // After the refresh: a new index is adopted (this node's writes maintain it)
                // before its existing rows are scanned, on the builder's thread
                // (`index_cluster`). Not while etcd cannot be read: every record lookup would
                // fail and log.
                if let Some(b) = &builder {
                    b.kick();
                }
                if failing {
                    tracing::info!("reading the cluster schema works again");
                }
                failing = false;
            }
            // Logged once per outage, not every interval.
            Err(err) if !failing => {
                tracing::warn!(error = %err, "cannot read the cluster schema");
                failing = true;
            }
            Err(_) => {}
        }
        publish_version(&e, &mut published);
    }
}

/// Publishes the schema version this node serves (system.peers on the other nodes shows it)
/// when it or the node's lease changed since the last time.
fn publish_version(e: &Engine, published: &mut Option<(uuid::Uuid, u64)>) {
    let Some(node) = &e.node.cluster else { return };
    let now = (e.schema().version, node.lease_generation());
    if *published == Some(now) {
        return;
    }
    match crate::cluster::schema_versions::publish(node, &now.0.to_string()) {
        Ok(()) => *published = Some(now),
        Err(err) => tracing::warn!(error = %err, "cannot publish this node's schema version"),
    }
}

/// Reloads the partition maps when another node split a partition (true then).
fn follow_maps(e: &Engine) -> Result<bool, crate::error::ClientError> {
    e.maps
        .follow()
        .map_err(|err| crate::error::ClientError::Server(err.to_string()))
}

/// Test hook (`RINGGATE_TEST_FOLLOW_DELAY_MS`): the follower adopts a schema change it sees
/// this much later, so a test can act while this node serves an older schema than the
/// cluster's (`tests/python/test_cluster_index.py`).
fn test_delay_ms() -> u64 {
    static DELAY: OnceLock<u64> = OnceLock::new();
    test_ms(&DELAY, "RINGGATE_TEST_FOLLOW_DELAY_MS")
}

/// Test hook (`RINGGATE_TEST_FOLLOW_MAPS_MS`): the follower reads the maps' change key only
/// this often instead of every [`POLL_MS`], so a test can read through a node whose maps are
/// behind the cluster's (`tests/python/test_partition_moves.py`).
fn test_maps_every_ms() -> u64 {
    static EVERY: OnceLock<u64> = OnceLock::new();
    test_ms(&EVERY, "RINGGATE_TEST_FOLLOW_MAPS_MS")
}

/// A test hook's milliseconds, read once (0: unset).
fn test_ms(cell: &OnceLock<u64>, var: &str) -> u64 {
    *cell.get_or_init(|| {
        std::env::var(var)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    })
}
