//! A cluster node's handle on one physical partition (`handles.rs`): reads go through a
//! read-only handle (reads need no epoch, every node may read any partition), commits through
//! the owner handle while this node owns the partition, and fail with `NotOwner` otherwise.
//!
//! Why a wrapper that stays in the partition's slot instead of swapping the slot: the
//! partition's slot is set once (`OnceLock`, the single node's hot path: no lock, no lookup),
//! while ownership comes and goes; what changes is behind an `ArcSwap` that only commits and
//! `placement` read. A commit that loaded the owner handle just before ownership was lost
//! still reaches PostgreSQL, which refuses it (`Fenced`) once the next owner opened the
//! partition with its newer epoch: safety rests on the epoch, this is the fast refusal.

use super::handles::Placement;
use crate::storage::handle::{Epoch, PartitionHandle, PartitionRef, PartitionSnapshot};
use crate::storage::{Result, ScanIter, StorageError};
use arc_swap::ArcSwap;
use bytes::Bytes;
use std::ops::Bound;
use std::sync::Arc;

struct State {
    placement: Placement,
    /// The owner handle, opened with this node's etcd epoch: Some exactly when `Local`.
    owner: Option<Arc<dyn PartitionHandle>>,
}

pub struct Served {
    part: PartitionRef,
    reader: Arc<dyn PartitionHandle>,
    state: ArcSwap<State>,
}

impl Served {
    /// Starts `Unowned` (the ownership loop says otherwise on its next round).
    pub fn new(part: PartitionRef, reader: Arc<dyn PartitionHandle>) -> Served {
        Served {
            part,
            reader,
            state: ArcSwap::from_pointee(State {
                placement: Placement::Unowned,
                owner: None,
            }),
        }
    }

    pub fn placement(&self) -> Placement {
        self.state.load().placement.clone()
    }

    /// The owner handle while `Local`.
    pub fn owner(&self) -> Option<Arc<dyn PartitionHandle>> {
        self.state.load().owner.clone()
    }

    /// This node serves the partition through `owner` (opened with its epoch).
    pub fn serve(&self, owner: Arc<dyn PartitionHandle>) {
        self.state.store(Arc::new(State {
            placement: Placement::Local,
            owner: Some(owner),
        }));
    }

    /// This node no longer serves it (`placement` is `Remote` or `Unowned`): commits fail
    /// from now on. No-op when nothing changes (the loop calls it every round).
    pub fn elsewhere(&self, placement: Placement) {
        debug_assert!(placement != Placement::Local);
        if self.state.load().placement == placement {
            return;
        }
        self.state.store(Arc::new(State {
            placement,
            owner: None,
        }));
    }
}

impl PartitionHandle for Served {
    fn partition(&self) -> &PartitionRef {
        &self.part
    }

    fn epoch(&self) -> Epoch {
        self.state.load().owner.as_ref().map_or(0, |h| h.epoch())
    }

    fn get(&self, key: &[u8]) -> Result<Option<Bytes>> {
        self.reader.get(key)
    }

    fn scan(&self, lower: Bound<&[u8]>, upper: Bound<&[u8]>, reverse: bool) -> ScanIter {
        self.reader.scan(lower, upper, reverse)
    }

    fn scan_local(
        &self,
        prefix: &[u8],
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        reverse: bool,
    ) -> ScanIter {
        self.reader.scan_local(prefix, lower, upper, reverse)
    }

    fn snapshot(&self) -> Arc<dyn PartitionSnapshot> {
        self.reader.snapshot()
    }

    fn get_size(&self, key: &[u8]) -> Result<Option<Bytes>> {
        self.reader.get_size(key)
    }

    fn scan_sizes(&self, lower: Bound<&[u8]>, upper: Bound<&[u8]>) -> ScanIter {
        self.reader.scan_sizes(lower, upper)
    }

    fn commit(&self, commit: crate::storage::handle::PartitionCommit) -> Result<()> {
        let state = self.state.load();
        match (&state.owner, &state.placement) {
            (Some(h), _) => h.commit(commit),
            (None, placement) => Err(StorageError::NotOwner {
                storage_id: self.part.storage_id,
                partition_id: self.part.partition_id,
                owner: match placement {
                    Placement::Remote(node) => Some(node.clone()),
                    _ => None,
                },
            }),
        }
    }
}
