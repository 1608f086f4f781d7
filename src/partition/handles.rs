//! The handles this process holds on the physical partitions it owns (`storage::handle`).
//!
//! One process owns every partition of an embedded store, as one owner *epoch*: at startup it
//! takes the next value of the counter `meta` `node-epoch` (u64 BE, persisted durably before
//! any partition is opened), and opens each partition with it on first use, which fences the
//! handles of any earlier process. A partition retired by a split (or a dropped table) answers
//! `Fenced`: the writer routes again through the current map, whose partitions have their own.
//!
//! Each partition's handle is kept in its live state (`PartStats::handle`, a [`HandleSlot`]),
//! set once on first use: reads and writes take it without a lock or a table lookup (a point
//! read costs what it did through the global store). A split's parent is dropped from the map
//! with its handle; a handle fenced by a newer owner stays fenced (commits answer `Fenced`).

use crate::partition::map::PhysicalPartition;
use crate::storage::handle::{Epoch, PartitionHandle, PartitionRef};
use crate::storage::{StorageError, Store};
use std::sync::{Arc, OnceLock};

const EPOCH_KEY: &[u8] = b"node-epoch";

/// Where a physical partition is served (cluster mode; a single node serves every partition).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Placement {
    /// This process owns it: reads and commits go through its handle here.
    Local,
    /// Node `name` owns it: requests for it are forwarded there (`ClientError::NotOwner`).
    Remote(String),
    /// No live node owns it right now (an owner died and its lease has not expired yet, or a
    /// node is taking it over).
    Unowned,
}

/// Test hook for forwarding (`RINGGATE_TEST_PLACEMENT_OWNER=<node name>`): on every node of
/// another name, every partition is `Remote(<node name>)`. Set once at startup
/// ([`set_test_placement_owner`]); unset, placement is the real one.
static TEST_OWNER: OnceLock<String> = OnceLock::new();

/// Reads the test hook's variable once for the node named `this_node` (cluster mode only).
pub fn set_test_placement_owner(this_node: &str) {
    match std::env::var("RINGGATE_TEST_PLACEMENT_OWNER") {
        Ok(owner) if !owner.is_empty() && owner != this_node => {
            let _ = TEST_OWNER.set(owner);
        }
        _ => {}
    }
}

pub struct Handles {
    store: Arc<dyn Store>,
    epoch: Epoch,
}

/// This process's handle on one physical partition, opened on first use.
#[derive(Default)]
pub struct HandleSlot(OnceLock<Arc<dyn PartitionHandle>>);

impl std::fmt::Debug for HandleSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let epoch = self.0.get().map(|h| h.epoch());
        f.debug_struct("HandleSlot").field("epoch", &epoch).finish()
    }
}

impl Handles {
    /// Takes this process's owner epoch (the stored one plus one, made durable).
    pub fn start(store: Arc<dyn Store>) -> Result<Handles, StorageError> {
        let before =
            match store.metadata().meta_get(EPOCH_KEY)? {
                Some(v) => u64::from_be_bytes(v[..].try_into().map_err(|_| {
                    StorageError::Corrupt("node-epoch record is not 8 bytes".into())
                })?),
                None => 0,
            };
        let epoch = before + 1;
        let value = epoch.to_be_bytes().to_vec().into();
        (store.metadata()).meta_commit(vec![(EPOCH_KEY.into(), Some(value))])?;
        store.flush()?;
        Ok(Handles { store, epoch })
    }

    pub fn epoch(&self) -> Epoch {
        self.epoch
    }

    /// The handle of partition `part` of table `storage_id`, opened on first use; None when the
    /// store does not offer per-partition handles.
    pub fn get(
        &self,
        storage_id: u64,
        part: &PhysicalPartition,
    ) -> Result<Option<Arc<dyn PartitionHandle>>, StorageError> {
        if self.store.partitions().is_none() {
            return Ok(None);
        }
        self.read(storage_id, part).map(|h| Some(Arc::clone(h)))
    }

    /// The handle to read partition `part` of table `storage_id` through (opened on first use).
    pub fn read<'p>(
        &self,
        storage_id: u64,
        part: &'p PhysicalPartition,
    ) -> Result<&'p Arc<dyn PartitionHandle>, StorageError> {
        let slot = &part.stats.handle.0;
        if let Some(h) = slot.get() {
            return Ok(h);
        }
        let parts = self
            .store
            .partitions()
            .ok_or_else(|| StorageError::Io("the store offers no per-partition handles".into()))?;
        let r = PartitionRef::new(storage_id, part.id, part.start, part.end);
        let h = parts.open_partition(r, self.epoch)?;
        // A racing first use may have set it: either handle has this process's epoch.
        Ok(slot.get_or_init(|| h))
    }

    /// Where partition `part` of table `storage_id` is served. Writes and single-partition
    /// reads of a partition that is not `Local` go to its owner; scans read it here.
    pub fn placement(&self, _storage_id: u64, _part: &PhysicalPartition) -> Placement {
        if let Some(owner) = TEST_OWNER.get() {
            return Placement::Remote(owner.clone());
        }
        Placement::Local
    }

    /// Retires a partition (a split parent): every handle's later commit is `Fenced`.
    pub fn retire(&self, storage_id: u64, partition_id: u64) -> Result<(), StorageError> {
        match self.store.partitions() {
            Some(parts) => parts.retire_partition(storage_id, partition_id),
            None => Ok(()),
        }
    }
}
