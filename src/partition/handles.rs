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
//!
//! Cluster mode ([`Handles::cluster`]): no `node-epoch` (the nodes share one metadata store;
//! each partition's epoch comes from etcd when this node takes it). The slot holds a
//! [`Served`](super::served::Served) handle, set once like the single node's: reads go through
//! a read-only handle, commits through the owner handle the ownership loop
//! (`partition/ownership.rs`) installs while this node owns the partition, and fail with
//! `NotOwner` otherwise. [`Handles::placement`] reads the same state.

use super::served::Served;
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
/// another name, every partition is `Remote(<node name>)`, and the ownership loop assigns
/// every partition to that node (`ownership.rs`). Set once at startup
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
    /// Cluster mode: ownership and epochs come from the ownership loop.
    cluster: bool,
    /// Cluster mode: this node, whose lease must be valid for it to serve anything.
    node: Option<Arc<crate::cluster::ClusterNode>>,
    /// Starts an ownership round now (a split made partitions nobody owns yet).
    wake: Arc<tokio::sync::Notify>,
    /// Cluster mode: brings this node's schema up to the cluster's before a partition it took
    /// is served ([`Handles::catch_up_schema`]; set by `query::follow`).
    schema_gate: OnceLock<SchemaGate>,
}

/// See [`Handles::set_schema_gate`].
pub type SchemaGate = Box<dyn Fn() -> Result<(), String> + Send + Sync>;

/// This process's handle on one physical partition, opened on first use.
#[derive(Default)]
pub struct HandleSlot {
    handle: OnceLock<Arc<dyn PartitionHandle>>,
    /// Cluster mode: the same handle as `handle`, with its ownership state.
    served: OnceLock<Arc<Served>>,
}

impl HandleSlot {
    /// Cluster mode: the partition's served state, once created.
    pub fn served(&self) -> Option<&Arc<Served>> {
        self.served.get()
    }
}

impl std::fmt::Debug for HandleSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let epoch = self.handle.get().map(|h| h.epoch());
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
        Ok(Handles {
            store,
            epoch,
            cluster: false,
            node: None,
            wake: Arc::default(),
            schema_gate: OnceLock::new(),
        })
    }

    /// A cluster node's handles: no process epoch (see the module doc); every partition is
    /// `Unowned` until the ownership loop takes it.
    pub fn cluster(store: Arc<dyn Store>, node: Arc<crate::cluster::ClusterNode>) -> Handles {
        Handles {
            store,
            epoch: 0,
            cluster: true,
            node: Some(node),
            wake: Arc::default(),
            schema_gate: OnceLock::new(),
        }
    }

    /// Cluster mode: Unavailable while this node's lease is not valid by its own clock (it
    /// was paused or cut off from etcd past its lease): requests it received meanwhile must
    /// not land anywhere, neither here (PostgreSQL would fence them anyway) nor forwarded to
    /// the partitions' new owners, since their clients may have seen newer writes since. It
    /// serves again once it holds a new lease (`ClusterNode` joins again by itself).
    pub fn require_lease(&self) -> Result<(), StorageError> {
        match &self.node {
            Some(n) if !n.lease().is_valid() => Err(StorageError::Unavailable(format!(
                "node {} lost its cluster lease (paused or cut off from etcd past {} ms); it \
                 serves again once it has joined again",
                n.name(),
                n.lease_ms()
            ))),
            _ => Ok(()),
        }
    }

    /// What the ownership loop waits on besides its timer: notified when partitions appeared
    /// that need an owner now (split children), so they are taken in milliseconds.
    pub fn ownership_wake(&self) -> &Arc<tokio::sync::Notify> {
        &self.wake
    }

    /// Cluster mode: this node.
    pub fn node(&self) -> Option<&Arc<crate::cluster::ClusterNode>> {
        self.node.as_ref()
    }

    /// Sets what [`Handles::catch_up_schema`] runs (once; later calls are ignored).
    pub fn set_schema_gate(&self, gate: SchemaGate) {
        let _ = self.schema_gate.set(gate);
    }

    /// Cluster mode, before a partition this node just took is served: adopts every schema
    /// change committed before now, so its writes maintain every index whose entries the
    /// previous owner built (`partition::ownership`, `query::index_cluster`).
    pub fn catch_up_schema(&self) -> Result<(), StorageError> {
        match self.schema_gate.get() {
            Some(gate) => gate().map_err(|e| {
                StorageError::Unavailable(format!("the cluster schema cannot be read: {e}"))
            }),
            None => Ok(()),
        }
    }

    pub fn is_cluster(&self) -> bool {
        self.cluster
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
        let slot = &part.stats.handle.handle;
        if let Some(h) = slot.get() {
            return Ok(h);
        }
        if self.cluster {
            let served = self.served(storage_id, part)?;
            return Ok(slot.get_or_init(|| Arc::clone(served) as Arc<dyn PartitionHandle>));
        }
        let r = part.reference(storage_id);
        let h = self.partitions()?.open_partition(r, self.epoch)?;
        // A racing first use may have set it: either handle has this process's epoch.
        Ok(slot.get_or_init(|| h))
    }

    fn partitions(&self) -> Result<&dyn crate::storage::PartitionStore, StorageError> {
        self.store
            .partitions()
            .ok_or_else(|| StorageError::Io("the store offers no per-partition handles".into()))
    }

    /// Opens partition `r` as owner `epoch` (cluster mode: the epoch etcd handed out), which
    /// fences every handle with an older one.
    pub fn open_owner(
        &self,
        r: PartitionRef,
        epoch: Epoch,
    ) -> Result<Arc<dyn PartitionHandle>, StorageError> {
        self.partitions()?.open_partition(r, epoch)
    }

    /// A read-only handle on partition `r` (cluster mode: reads need no epoch).
    pub fn open_reader(&self, r: PartitionRef) -> Result<Arc<dyn PartitionHandle>, StorageError> {
        self.partitions()?.read_only(r)
    }

    /// Cluster mode: the owner handle of a partition this node serves (None otherwise).
    pub fn owner_handle(&self, part: &PhysicalPartition) -> Option<Arc<dyn PartitionHandle>> {
        part.stats.handle.served().and_then(|s| s.owner())
    }

    /// Cluster mode: the partition's served state (created `Unowned`, with its read-only
    /// handle, on first use).
    pub fn served<'p>(
        &self,
        storage_id: u64,
        part: &'p PhysicalPartition,
    ) -> Result<&'p Arc<Served>, StorageError> {
        let slot = &part.stats.handle.served;
        if let Some(s) = slot.get() {
            return Ok(s);
        }
        let r = part.reference(storage_id);
        let reader = self.partitions()?.read_only(r.clone())?;
        Ok(slot.get_or_init(|| Arc::new(Served::new(r, reader))))
    }

    /// Whether every partition is `Local`, whichever it is (a single node, the test hook
    /// unset): callers may skip routing a statement's partitions for placement.
    pub fn all_local(&self) -> bool {
        !self.cluster && TEST_OWNER.get().is_none()
    }

    /// Where partition `part` of table `storage_id` is served. Writes and single-partition
    /// reads of a partition that is not `Local` go to its owner; scans read it here.
    pub fn placement(&self, _storage_id: u64, part: &PhysicalPartition) -> Placement {
        if let Some(owner) = TEST_OWNER.get() {
            return Placement::Remote(owner.clone());
        }
        if !self.cluster {
            return Placement::Local;
        }
        match part.stats.handle.served.get() {
            Some(s) => s.placement(),
            None => Placement::Unowned,
        }
    }

    /// Retires a partition (a split parent): every handle's later commit is `Fenced`.
    pub fn retire(&self, part: &PartitionRef) -> Result<(), StorageError> {
        match self.store.partitions() {
            Some(parts) => parts.retire(part),
            None => Ok(()),
        }
    }
}
