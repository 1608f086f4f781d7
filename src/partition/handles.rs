//! The handles this process holds on the physical partitions it owns (`storage::handle`).
//!
//! One process owns every partition of an embedded store, as one owner *epoch*: at startup it
//! takes the next value of the counter `meta` `node-epoch` (u64 BE, persisted durably before
//! any partition is opened), and opens each partition with it on first use, which fences the
//! handles of any earlier process. A partition retired by a split (or a dropped table) answers
//! `Fenced`: the handle is forgotten and the writer routes again through the current map.
//!
//! The cache holds at most one handle per partition opened since startup; retired ones are
//! removed when a commit finds them fenced.

use crate::partition::map::PhysicalPartition;
use crate::storage::handle::{Epoch, PartitionHandle, PartitionRef};
use crate::storage::{Space, StorageError, Store, WriteBatch};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::Arc;

const EPOCH_KEY: &[u8] = b"node-epoch";

pub struct Handles {
    store: Arc<dyn Store>,
    epoch: Epoch,
    open: Mutex<HashMap<(u64, u64), Arc<dyn PartitionHandle>>>,
}

impl Handles {
    /// Takes this process's owner epoch (the stored one plus one, made durable).
    pub fn start(store: Arc<dyn Store>) -> Result<Handles, StorageError> {
        let before =
            match store.get(Space::Meta, EPOCH_KEY)? {
                Some(v) => u64::from_be_bytes(v[..].try_into().map_err(|_| {
                    StorageError::Corrupt("node-epoch record is not 8 bytes".into())
                })?),
                None => 0,
            };
        let epoch = before + 1;
        let mut batch = WriteBatch::default();
        batch.put(
            Space::Meta,
            EPOCH_KEY.to_vec(),
            epoch.to_be_bytes().to_vec(),
        );
        store.commit(batch)?;
        store.flush()?;
        Ok(Handles {
            store,
            epoch,
            open: Mutex::default(),
        })
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
        let Some(parts) = self.store.partitions() else {
            return Ok(None);
        };
        let key = (storage_id, part.id);
        if let Some(h) = self.open.lock().get(&key) {
            return Ok(Some(Arc::clone(h)));
        }
        let r = PartitionRef::new(storage_id, part.id, part.start, part.end);
        let h = parts.open_partition(r, self.epoch)?;
        self.open.lock().insert(key, Arc::clone(&h));
        Ok(Some(h))
    }

    /// Forgets a handle that was found fenced (its partition split or its table went away).
    pub fn forget(&self, storage_id: u64, partition_id: u64) {
        self.open.lock().remove(&(storage_id, partition_id));
    }

    /// Retires a partition (a split parent): every handle's later commit is `Fenced`.
    pub fn retire(&self, storage_id: u64, partition_id: u64) -> Result<(), StorageError> {
        self.forget(storage_id, partition_id);
        match self.store.partitions() {
            Some(parts) => parts.retire_partition(storage_id, partition_id),
            None => Ok(()),
        }
    }
}
