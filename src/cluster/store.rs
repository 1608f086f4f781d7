//! The store of a cluster node: table data in PostgreSQL databases, one per storage group
//! (`groups.rs`: every node reads them; owners write them, fenced by their epochs), metadata
//! (schema, partition maps, the group registry) in etcd, so every node sees one copy; the
//! cluster batch log (`server::batchlog`) in the `ringgate_meta` table of the node's own
//! group (`shared_data`; replays read every group's: `shared_data_of`).
//!
//! Per group one `PostgresStore` (its own bounded pool, `storage.postgres.pool_size`
//! connections), opened on first use from the registry (the node's own group at startup from
//! its settings). Partition handles are opened on the group their `PartitionRef` names (None:
//! the default group). What has no group to go by visits every registered group: global data
//! reads (the change feed's records: a get takes the first group that has the key, a scan
//! merges the groups' scans in key order; a key lives in one partition, so in one group),
//! `drop_data`/`drop_prefix`, `current_epoch` (the largest) and flush.

use super::groups::{self, DEFAULT_GROUP};
use super::EtcdMetaStore;
use crate::storage::handle::{Epoch, MetaStore, PartitionHandle, PartitionRef, PartitionStore};
use crate::storage::postgres::{PgConfig, PostgresStore};
use crate::storage::{Result, ScanIter, Space, StorageError, Store, WriteBatch};
use bytes::Bytes;
use parking_lot::{Mutex, RwLock};
use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long the list of registered groups is reused by reads that visit every group (a group
/// registered meanwhile holds no partition yet: only tables created after it place any there).
const REGISTRY_TTL: Duration = Duration::from_millis(1000);

pub struct ClusterStore {
    /// This node's own group (`storage.group`).
    own: String,
    /// Its store (also in `groups`): where this node's cluster batch log entries live.
    own_store: Arc<dyn Store>,
    groups: RwLock<BTreeMap<String, Arc<dyn Store>>>,
    /// Held while a group's store is opened, so each group gets one pool.
    opening: Mutex<()>,
    pool_size: usize,
    meta: Arc<EtcdMetaStore>,
    /// The registered names and when they were read.
    known: Mutex<Option<(Instant, Vec<String>)>>,
}

impl ClusterStore {
    /// `data`: the store of this node's own group `own`, opened from its settings.
    pub fn new(
        own: &str,
        data: Arc<dyn Store>,
        pool_size: usize,
        meta: Arc<EtcdMetaStore>,
    ) -> ClusterStore {
        ClusterStore {
            own: own.to_string(),
            own_store: Arc::clone(&data),
            groups: RwLock::new(BTreeMap::from([(own.to_string(), data)])),
            opening: Mutex::new(()),
            pool_size,
            meta,
            known: Mutex::new(None),
        }
    }

    /// The metadata store with its compare-and-swap commit.
    pub fn etcd_meta(&self) -> &Arc<EtcdMetaStore> {
        &self.meta
    }

    pub fn own_group(&self) -> &str {
        &self.own
    }

    /// The store of group `name`, connected on first use from its registry record.
    pub fn group(&self, name: &str) -> Result<Arc<dyn Store>> {
        if let Some(s) = self.groups.read().get(name) {
            return Ok(Arc::clone(s));
        }
        let _opening = self.opening.lock();
        if let Some(s) = self.groups.read().get(name) {
            return Ok(Arc::clone(s));
        }
        let spec = groups::lookup(&*self.meta, name)?.ok_or_else(|| {
            StorageError::Unavailable(format!("storage group {name} is not registered"))
        })?;
        let config = PgConfig {
            url: spec.connection_string(),
            pool_size: self.pool_size,
        };
        let store: Arc<dyn Store> = Arc::new(
            PostgresStore::open(&config)
                .map_err(|e| StorageError::Unavailable(format!("storage group {name}: {e}")))?,
        );
        tracing::info!(group = name, hosts = ?spec.hosts, "storage group connected");
        self.groups
            .write()
            .insert(name.to_string(), Arc::clone(&store));
        Ok(store)
    }

    fn group_of(&self, part: &PartitionRef) -> Result<Arc<dyn Store>> {
        self.group(part.group.as_deref().unwrap_or(DEFAULT_GROUP))
    }

    /// Every registered group's store (this node's own first).
    fn all(&self) -> Result<Vec<Arc<dyn Store>>> {
        let names = self.registered()?;
        let mut out = vec![self.group(&self.own)?];
        for n in names.iter().filter(|n| **n != self.own) {
            out.push(self.group(n)?);
        }
        Ok(out)
    }

    fn registered(&self) -> Result<Vec<String>> {
        let mut known = self.known.lock();
        if let Some((at, names)) = &*known {
            if at.elapsed() < REGISTRY_TTL {
                return Ok(names.clone());
            }
        }
        let names: Vec<String> = groups::list(&*self.meta)?.into_keys().collect();
        *known = Some((Instant::now(), names.clone()));
        Ok(names)
    }

    fn partitions_of(store: &dyn Store) -> Result<&dyn PartitionStore> {
        store
            .partitions()
            .ok_or_else(|| StorageError::Io("a storage group offers no partition handles".into()))
    }
}

impl Store for ClusterStore {
    fn get(&self, space: Space, key: &[u8]) -> Result<Option<Bytes>> {
        if space == Space::Meta {
            return self.meta.meta_get(key);
        }
        for g in self.all()? {
            if let Some(v) = g.get(space, key)? {
                return Ok(Some(v));
            }
        }
        Ok(None)
    }

    fn scan(
        &self,
        space: Space,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        reverse: bool,
    ) -> ScanIter {
        match space {
            // Metadata scans are small and collected whole (`meta.rs`): reversing is free.
            Space::Meta if reverse => {
                let mut all: Vec<_> = self.meta.meta_scan(lower, upper).collect();
                all.reverse();
                Box::new(all.into_iter())
            }
            Space::Meta => self.meta.meta_scan(lower, upper),
            _ => match self.all() {
                Ok(gs) if gs.len() == 1 => gs[0].scan(space, lower, upper, reverse),
                Ok(gs) => super::merge::merge(
                    gs.iter()
                        .map(|g| g.scan(space, lower, upper, reverse))
                        .collect(),
                    reverse,
                ),
                Err(e) => Box::new(std::iter::once(Err(e))),
            },
        }
    }

    /// Data writes go to PostgreSQL through partition handles; a plain batch is accepted only
    /// while there is one group (nothing above writes one in cluster mode). A batch holding
    /// metadata too is refused (the two stores cannot commit atomically together).
    fn commit(&self, batch: WriteBatch) -> Result<()> {
        if batch.ops.iter().any(|op| op.space == Space::Meta) {
            return Err(StorageError::Io(
                "a cluster node cannot commit metadata and data in one batch".into(),
            ));
        }
        match &self.all()?[..] {
            [one] => one.commit(batch),
            _ => Err(StorageError::Io(
                "with several storage groups, data is written through partition handles only"
                    .into(),
            )),
        }
    }

    fn flush(&self) -> Result<()> {
        for g in self.groups.read().values() {
            g.flush()?;
        }
        Ok(())
    }

    fn metadata(&self) -> &dyn MetaStore {
        &*self.meta
    }

    fn shared_data(&self) -> Option<&dyn Store> {
        Some(&*self.own_store)
    }

    fn shared_data_groups(&self) -> Result<Vec<String>> {
        self.registered()
    }

    fn shared_data_of(&self, name: &str) -> Result<Arc<dyn Store>> {
        self.group(name)
    }

    fn partitions(&self) -> Option<&dyn PartitionStore> {
        Some(self)
    }
}

impl PartitionStore for ClusterStore {
    fn open_partition(&self, part: PartitionRef, epoch: Epoch) -> Result<Arc<dyn PartitionHandle>> {
        let g = self.group_of(&part)?;
        Self::partitions_of(&*g)?.open_partition(part, epoch)
    }

    fn read_only(&self, part: PartitionRef) -> Result<Arc<dyn PartitionHandle>> {
        let g = self.group_of(&part)?;
        Self::partitions_of(&*g)?.read_only(part)
    }

    fn current_epoch(&self, storage_id: u64, partition_id: u64) -> Result<Epoch> {
        let mut max = 0;
        for g in self.all()? {
            max = max.max(Self::partitions_of(&*g)?.current_epoch(storage_id, partition_id)?);
        }
        Ok(max)
    }

    fn drop_data(&self, storage_id: u64) -> Result<()> {
        for g in self.all()? {
            Self::partitions_of(&*g)?.drop_data(storage_id)?;
        }
        Ok(())
    }

    fn drop_prefix(&self, prefix: &[u8]) -> Result<()> {
        for g in self.all()? {
            Self::partitions_of(&*g)?.drop_prefix(prefix)?;
        }
        Ok(())
    }

    /// Without a group to go by: every group (nothing above calls it; `retire` routes).
    fn retire_partition(&self, storage_id: u64, partition_id: u64) -> Result<()> {
        for g in self.all()? {
            Self::partitions_of(&*g)?.retire_partition(storage_id, partition_id)?;
        }
        Ok(())
    }

    fn retire(&self, part: &PartitionRef) -> Result<()> {
        let g = self.group_of(part)?;
        Self::partitions_of(&*g)?.retire(part)
    }
}
