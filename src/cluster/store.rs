//! The store of a cluster node: table data in the shared PostgreSQL database (every node reads
//! it; owners write it, fenced by their epochs), metadata (schema, partition maps) in etcd,
//! the cluster batch log in PostgreSQL's `ringgate_meta` (`shared_data`), so every node sees one copy.

use super::EtcdMetaStore;
use crate::storage::handle::{MetaStore, PartitionStore};
use crate::storage::{Result, ScanIter, Space, Store, WriteBatch};
use bytes::Bytes;
use std::ops::Bound;
use std::sync::Arc;

pub struct ClusterStore {
    data: Arc<dyn Store>,
    meta: Arc<EtcdMetaStore>,
}

impl ClusterStore {
    pub fn new(data: Arc<dyn Store>, meta: Arc<EtcdMetaStore>) -> ClusterStore {
        ClusterStore { data, meta }
    }

    /// The metadata store with its compare-and-swap commit.
    pub fn etcd_meta(&self) -> &Arc<EtcdMetaStore> {
        &self.meta
    }
}

impl Store for ClusterStore {
    fn get(&self, space: Space, key: &[u8]) -> Result<Option<Bytes>> {
        match space {
            Space::Meta => self.meta.meta_get(key),
            _ => self.data.get(space, key),
        }
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
            _ => self.data.scan(space, lower, upper, reverse),
        }
    }

    /// Data writes go to PostgreSQL; a batch holding metadata too is refused (the two stores
    /// cannot commit atomically together, and nothing above writes such a batch).
    fn commit(&self, batch: WriteBatch) -> Result<()> {
        if batch.ops.iter().any(|op| op.space == Space::Meta) {
            return Err(crate::storage::StorageError::Io(
                "a cluster node cannot commit metadata and data in one batch".into(),
            ));
        }
        self.data.commit(batch)
    }

    fn flush(&self) -> Result<()> {
        self.data.flush()
    }

    fn metadata(&self) -> &dyn MetaStore {
        &*self.meta
    }

    fn partitions(&self) -> Option<&dyn PartitionStore> {
        self.data.partitions()
    }

    fn shared_data(&self) -> Option<&dyn Store> {
        Some(&*self.data)
    }
}
