//! The per-partition storage contract: a handle per physical partition, opened with an owner
//! epoch, for reads (get, ordered scans both ways, a snapshot shared by several reads) and an
//! atomic commit that carries conditions.
//!
//! Why: a physical partition is the unit that can live on another machine and be handed from one
//! owner to another. A handle is what its owner holds; the epoch fences the previous owner out
//! (a newer epoch opening the partition makes every older handle's commit fail with
//! [`StorageError::Fenced`](super::StorageError::Fenced)). Conditions make read-merge-write and
//! lightweight transactions exact without a process-wide lock: a commit names the keys it read
//! and what it read, and fails with [`StorageError::Conflict`](super::StorageError::Conflict)
//! when one changed.
//!
//! A backend implements it as follows (the embedded store in `embedded_handle.rs`; a
//! PostgreSQL backend: a table `owner(storage_id, partition_id, epoch)`, and a commit is one
//! transaction that reads the owner row `FOR SHARE`, checks the epoch, checks each condition
//! against the row it names (`FOR UPDATE`), writes, and commits).
//!
//! Keys are [`Space::Data`](super::Space::Data) keys; every key a commit or a condition names
//! must lie in the handle's [`KeyRange`], and reads are clamped to it. A commit also carries
//! the partition's size records ([`Space::Sizes`](super::Space::Sizes), keyed like its data, so
//! range-checked the same way) and *local* records: data-space entries kept outside the row key
//! range that belong to the partition through the token of the row they describe (secondary
//! index entries, `[index id][value][token]...`). The storage layer cannot parse their keys, so
//! the writer names the token and the handle checks that the partition owns it; a PostgreSQL
//! backend stores that token in the record's row, as an index table's column.

use super::{Result, ScanIter};
use bytes::Bytes;
use smallvec::SmallVec;
use std::ops::Bound;
use std::sync::Arc;

/// A scan's lower and upper key bounds (`PartitionHandle::get_and_scans`).
pub type ScanBounds<'a> = (Bound<&'a [u8]>, Bound<&'a [u8]>);

/// An owner epoch: opening a partition with epoch `e` fences every handle with a smaller one.
pub type Epoch = u64;

/// The epoch a retired partition (a split parent, a dropped table) is set to: no handle can
/// open it or commit to it again.
pub const RETIRED_EPOCH: Epoch = u64::MAX;

/// Data keys `[lo, hi)` (`hi` None: up to the end of the key space).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyRange {
    pub lo: Vec<u8>,
    pub hi: Option<Vec<u8>>,
}

impl KeyRange {
    /// The data keys of table `storage_id` whose token is in `(start, end]` (the physical
    /// partition's token range; a start of i64::MIN includes i64::MIN). Data keys begin `[storage id u64 BE][token u64 BE, sign bit
    /// flipped]`, so the range is `[sid ‖ flip(start + 1), sid ‖ flip(end) + 1)`.
    pub fn of_tokens(storage_id: u64, start: i64, end: i64) -> KeyRange {
        KeyRange::of_prefixed_tokens(&storage_id.to_be_bytes(), start, end)
    }

    /// The keys `prefix ‖ [token u64 BE, sign bit flipped] ‖ ...` whose token is in
    /// `(start, end]`, as [`KeyRange::of_tokens`] (which is this with the storage id as prefix).
    pub fn of_prefixed_tokens(prefix: &[u8], start: i64, end: i64) -> KeyRange {
        let at = |t: i64| [prefix, &flip(t)[..]].concat();
        let lo = match start {
            // The first partition also holds the keys at i64::MIN (the empty partition key's
            // token), as the partition maps assign them.
            i64::MIN => prefix.to_vec(),
            // (i64::MAX, ...] holds no token: an empty range.
            i64::MAX => super::prefix_successor(prefix).unwrap_or_default(),
            _ => at(start + 1),
        };
        let hi = super::prefix_successor(&at(end));
        KeyRange { lo, hi }
    }

    pub fn contains(&self, key: &[u8]) -> bool {
        key >= &self.lo[..] && self.hi.as_deref().is_none_or(|hi| key < hi)
    }

    /// `lower`/`upper` narrowed to this range.
    pub fn clamp<'a>(
        &'a self,
        lower: Bound<&'a [u8]>,
        upper: Bound<&'a [u8]>,
    ) -> (Bound<&'a [u8]>, Bound<&'a [u8]>) {
        let lower = match lower {
            Bound::Included(k) | Bound::Excluded(k) if k >= &self.lo[..] => lower,
            _ => Bound::Included(&self.lo[..]),
        };
        let upper = match (upper, self.hi.as_deref()) {
            (_, None) => upper,
            (Bound::Included(k) | Bound::Excluded(k), Some(hi)) if k < hi => upper,
            (_, Some(hi)) => Bound::Excluded(hi),
        };
        (lower, upper)
    }
}

fn flip(t: i64) -> [u8; 8] {
    ((t as u64) ^ (1 << 63)).to_be_bytes()
}

/// Which physical partition a handle addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionRef {
    pub storage_id: u64,
    pub partition_id: u64,
    /// Token range `(start, end]` (a start of i64::MIN includes i64::MIN).
    pub start: i64,
    pub end: i64,
    pub range: KeyRange,
    /// The storage group (database server) holding the partition, as its map entry names it
    /// (None: the default group). Only a backend of several groups (a cluster's
    /// `ClusterStore`) reads it; a single store ignores it.
    pub group: Option<String>,
}

impl PartitionRef {
    pub fn new(storage_id: u64, partition_id: u64, start: i64, end: i64) -> PartitionRef {
        PartitionRef {
            storage_id,
            partition_id,
            start,
            end,
            range: KeyRange::of_tokens(storage_id, start, end),
            group: None,
        }
    }

    /// The same partition, held by storage group `group`.
    pub fn in_group(mut self, group: Option<String>) -> PartitionRef {
        self.group = group;
        self
    }

    /// Whether `token` is in the partition's range (the rule of [`KeyRange::of_tokens`]).
    pub fn owns_token(&self, token: i64) -> bool {
        (token > self.start || self.start == i64::MIN) && token <= self.end
    }
}

/// A data-space record outside the row key range, owned through its row's token (see the
/// module doc).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalWrite {
    pub token: i64,
    pub key: Bytes,
    /// None deletes the key.
    pub value: Option<Bytes>,
}

/// A condition a commit checks atomically with its writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Condition {
    /// The key holds no value.
    Absent(Bytes),
    /// The key still holds exactly what was read earlier (None: still absent). The value is
    /// the version: stored rows carry write timestamps, so an equal value is the same write.
    /// `stamp`: what [`PartitionHandle::get_stamped`] gave with `read`, if anything; a backend
    /// may use it to know the key unchanged without reading it again.
    Unchanged {
        key: Bytes,
        read: Option<Bytes>,
        stamp: Option<ReadStamp>,
    },
}

/// What the embedded store saw when it read a key (`storage::write_stamps`): opaque outside
/// the storage layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadStamp {
    pub(crate) owner: u64,
    pub(crate) key: u64,
    pub(crate) store: u64,
}

impl Condition {
    pub fn key(&self) -> &Bytes {
        match self {
            Condition::Absent(key) | Condition::Unchanged { key, .. } => key,
        }
    }

    /// Whether the condition holds for the key's current value.
    pub fn holds(&self, current: Option<&[u8]>) -> bool {
        match self {
            Condition::Absent(_) => current.is_none(),
            Condition::Unchanged { read, .. } => read.as_deref() == current,
        }
    }
}

/// One atomic commit to one physical partition: all conditions hold and every write is applied,
/// or nothing is.
#[derive(Debug, Default, Clone)]
pub struct PartitionCommit {
    /// Inline room for a point write's one condition and one write (no list allocated).
    pub conditions: SmallVec<[Condition; 1]>,
    /// `(key, value)`; a None value deletes the key.
    pub writes: SmallVec<[(Bytes, Option<Bytes>); 1]>,
    /// Size records (`Space::Sizes`), `(key, value)` as `writes`.
    pub sizes: Vec<(Bytes, Option<Bytes>)>,
    /// Records owned through a token (secondary-index entries, change feed records). A
    /// reader that sees one of the commit's `writes` sees these too (contract test
    /// `visibility.rs`).
    pub local: Vec<LocalWrite>,
}

impl PartitionCommit {
    pub fn put(&mut self, key: impl Into<Bytes>, value: impl Into<Bytes>) -> &mut Self {
        self.writes.push((key.into(), Some(value.into())));
        self
    }
    pub fn delete(&mut self, key: impl Into<Bytes>) -> &mut Self {
        self.writes.push((key.into(), None));
        self
    }
    pub fn require(&mut self, condition: Condition) -> &mut Self {
        self.conditions.push(condition);
        self
    }

    pub fn is_empty(&self) -> bool {
        self.conditions.is_empty()
            && self.writes.is_empty()
            && self.sizes.is_empty()
            && self.local.is_empty()
    }

    /// The writes as a plain storage batch (conditions left out): what the batch log records
    /// and replays.
    pub fn to_batch(&self) -> super::WriteBatch {
        use super::Space;
        let mut b = super::WriteBatch::default();
        let all = (self.writes.iter().map(|(k, v)| (Space::Data, k, v)))
            .chain(self.sizes.iter().map(|(k, v)| (Space::Sizes, k, v)))
            .chain(self.local.iter().map(|l| (Space::Data, &l.key, &l.value)));
        for (space, key, value) in all {
            match value {
                Some(v) => b.put(space, key.clone(), v.clone()),
                None => b.delete(space, key.clone()),
            }
        }
        b
    }
}

/// Consistent reads of one partition at one point in time, shared by several reads.
pub trait PartitionSnapshot: Send + Sync {
    fn get(&self, key: &[u8]) -> Result<Option<Bytes>>;
    /// Keys within the partition's range and `(lower, upper)`, ascending or descending.
    fn scan(&self, lower: Bound<&[u8]>, upper: Bound<&[u8]>, reverse: bool) -> ScanIter;
}

/// The owner's handle on one physical partition.
pub trait PartitionHandle: Send + Sync {
    fn partition(&self) -> &PartitionRef;
    fn epoch(&self) -> Epoch;
    /// The current value (reads need no epoch check: fencing protects writes).
    fn get(&self, key: &[u8]) -> Result<Option<Bytes>>;
    /// Whether a read that knows every key it needs (a partition header and whole row keys)
    /// should `get` them one by one rather than `scan` the range that holds them. True where a
    /// point lookup is the cheaper access: an LSM store's `get` consults each disk table's
    /// bloom filter and stops at the newest version, while a range scan seeks into every
    /// memtable and disk table. A backend that answers each `get` with a round trip (PostgreSQL)
    /// keeps the one scan. Either way a read sees the same rows.
    fn prefers_point_reads(&self) -> bool {
        false
    }
    /// `get`, with a stamp to put in a [`Condition::Unchanged`] on what it read (None: the
    /// commit compares by reading the key again, as backends without stamps always do).
    fn get_stamped(&self, key: &[u8]) -> Result<(Option<Bytes>, Option<ReadStamp>)> {
        Ok((self.get(key)?, None))
    }
    /// A stamp for a read of `key` made now by other means (the caller knows its value), if
    /// the backend gives stamps and no write of its stripe is in flight.
    fn stamp(&self, _key: &[u8]) -> Option<ReadStamp> {
        None
    }
    /// Whether `key`, read under `stamp` (from [`PartitionHandle::stamp`] just before the
    /// read), can have changed since: false when no write of its stripe began since. A backend
    /// without stamps answers true (it never knows).
    fn changed_since(&self, _key: &[u8], _stamp: &ReadStamp) -> bool {
        true
    }
    /// Keys within the partition's range and `(lower, upper)`; each scan is consistent in itself.
    fn scan(&self, lower: Bound<&[u8]>, upper: Bound<&[u8]>, reverse: bool) -> ScanIter;
    /// Local records (see the module doc) keyed `prefix ‖ [token u64 BE, sign bit flipped] ‖
    /// ...` whose token the partition owns, within `(lower, upper)`: one secondary-index
    /// value's entries of this partition (`prefix` = `[index id][value]`) are one such range.
    fn scan_local(
        &self,
        prefix: &[u8],
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        reverse: bool,
    ) -> ScanIter;
    fn snapshot(&self) -> Arc<dyn PartitionSnapshot>;
    /// Whether [`PartitionHandle::snapshot`] costs about what one read costs, so that a read
    /// of a partition that needs several lookups makes them all in one (`query::select`:
    /// isolation). A backend whose snapshot holds a connection in a transaction says false.
    fn cheap_snapshots(&self) -> bool {
        false
    }
    /// Whether a scan through this handle reads its range in several accesses, each of the
    /// store as it is then (PostgreSQL: a statement per page), not one state whole (the
    /// embedded store's scans read a snapshot). A partition read then reads its header and
    /// slices with `get_and_scans`, and from a snapshot when one access is not enough
    /// (`query::select::read::scan_partition`).
    fn scans_read_in_parts(&self) -> bool {
        false
    }
    /// The values of `keys` (data keys of the partition; None: absent), all read in one access
    /// that sees one state of the store, where the backend has such an access (PostgreSQL: one
    /// statement); None where it has not, and the caller makes the reads consistent by other
    /// means (stamps, a snapshot: `query::select::points`).
    fn get_together(&self, _keys: &[Vec<u8>]) -> Option<Result<Vec<Option<Bytes>>>> {
        None
    }
    /// `get(key)` (None: no key, and the value comes back None) and a `scan(lower, upper,
    /// reverse)` of each of `slices` in one access that sees one state of the store, where the
    /// backend has one (PostgreSQL: one statement); None where it has not. Each scan holds
    /// what that access read of its slice: at least its first `first_entries` entries, or as
    /// many as the backend's bound on one access's bytes lets in (all of them if the slice has
    /// fewer); a scan with more entries than that ends with
    /// [`crate::storage::StorageError::ReadAgain`] instead of reading again. The scans come in
    /// the order of `slices`.
    fn get_and_scans(
        &self,
        _key: Option<&[u8]>,
        _slices: &[ScanBounds],
        _reverse: bool,
        _first_entries: usize,
    ) -> Option<Result<(Option<Bytes>, Vec<ScanIter>)>> {
        None
    }
    /// A size record of the partition (`Space::Sizes`, keyed like its data).
    fn get_size(&self, key: &[u8]) -> Result<Option<Bytes>>;
    /// The partition's size records within `(lower, upper)`, ascending.
    fn scan_sizes(&self, lower: Bound<&[u8]>, upper: Bound<&[u8]>) -> ScanIter;
    /// Checks the epoch, the key range and every condition, and applies the writes, atomically
    /// and durably. Errors: `Fenced`, `Conflict`, `OutOfRange`, or the backend's own.
    fn commit(&self, commit: PartitionCommit) -> Result<()>;

    // Moving a partition to another store (cluster mode, `partition::moves`): what a copy
    // needs beyond the reads above. Backends whose partitions never move need not offer them.

    /// At most `limit` of the partition's local records of every prefix, in (token, key)
    /// order, after `after` (None: from the first).
    fn local_records(&self, after: Option<(i64, &[u8])>, limit: usize) -> Result<Vec<LocalWrite>> {
        let _ = (after, limit);
        Err(not_movable())
    }

    /// One local record's current value (`token`: the token it is owned through).
    fn get_local(&self, key: &[u8], token: i64) -> Result<Option<Bytes>> {
        let _ = (key, token);
        Err(not_movable())
    }

    /// Deletes at most `limit` of the partition's records (rows, local records, size
    /// records), checking the epoch as a commit does; how many it deleted (0: none is left).
    fn clear_some(&self, limit: usize) -> Result<u64> {
        let _ = limit;
        Err(not_movable())
    }
}

fn not_movable() -> super::StorageError {
    super::StorageError::Io("this storage backend does not move partitions".into())
}

/// Hands out partition handles.
pub trait PartitionStore: Send + Sync {
    /// Opens the partition as owner `epoch` (persisted): fails with `Fenced` when a newer epoch
    /// has opened it; an older epoch's handles are fenced from now on. Reopening with the
    /// current epoch is allowed (the same owner after a restart).
    fn open_partition(&self, part: PartitionRef, epoch: Epoch) -> Result<Arc<dyn PartitionHandle>>;
    /// A handle for reads only (a cluster node's view of a partition another node owns:
    /// reads need no epoch): it fences nobody, and its commits fail with `NotOwner`, writing
    /// nothing. Backends whose partitions have one process as owner need not offer it.
    fn read_only(&self, part: PartitionRef) -> Result<Arc<dyn PartitionHandle>> {
        Err(super::StorageError::NotOwner {
            storage_id: part.storage_id,
            partition_id: part.partition_id,
            owner: None,
        })
    }
    /// The latest epoch that opened the partition (0: never opened).
    fn current_epoch(&self, storage_id: u64, partition_id: u64) -> Result<Epoch>;
    /// Deletes every record of a table storage id that no longer exists (a dropped or
    /// truncated table: its rows and size records; a dropped index: its entries) and its
    /// partitions' owner records. Idempotent: an interrupted run is finished by calling it
    /// again (the caller keeps a marker until it returns).
    fn drop_data(&self, storage_id: u64) -> Result<()>;
    /// Deletes every data-space record whose key starts with `prefix`: local records of a
    /// dropped table kept under a prefix of their own (change-feed entries). Idempotent, as
    /// `drop_data`.
    fn drop_prefix(&self, prefix: &[u8]) -> Result<()>;
    /// Fences the partition for good (its range now belongs to its split children, or its
    /// table is gone): every handle's commit fails with `Fenced` and it cannot be opened again.
    fn retire_partition(&self, storage_id: u64, partition_id: u64) -> Result<()>;
    /// [`retire_partition`](Self::retire_partition) of the partition `part` names (a store of
    /// several groups retires it in its group only).
    fn retire(&self, part: &PartitionRef) -> Result<()> {
        self.retire_partition(part.storage_id, part.partition_id)
    }
}

/// Schema, partition maps and server metadata: a small ordered key space of its own, never
/// part of a partition commit (a distributed backend keeps it in a consensus store).
pub trait MetaStore: Send + Sync {
    fn meta_get(&self, key: &[u8]) -> Result<Option<Bytes>>;
    fn meta_scan(&self, lower: Bound<&[u8]>, upper: Bound<&[u8]>) -> ScanIter;
    /// Applies the writes atomically (a None value deletes).
    fn meta_commit(&self, writes: Vec<(Bytes, Option<Bytes>)>) -> Result<()>;

    /// Whether other processes write this store too (cluster mode: etcd). Then changes built
    /// on what was read go through [`meta_commit_if`](Self::meta_commit_if), since a copy in
    /// memory may be stale.
    fn is_shared(&self) -> bool {
        false
    }

    /// The value with a revision token for [`meta_commit_if`](Self::meta_commit_if). A store
    /// only this process writes has no revisions (always 0): its writers serialize in memory.
    fn meta_get_versioned(&self, key: &[u8]) -> Result<Option<(Bytes, i64)>> {
        Ok(self.meta_get(key)?.map(|v| (v, 0)))
    }

    /// The revision [`meta_get_versioned`](Self::meta_get_versioned) would give, without
    /// the value (0: absent, or a store without revisions).
    fn meta_revision(&self, key: &[u8]) -> Result<i64> {
        Ok(self.meta_get_versioned(key)?.map_or(0, |(_, r)| r))
    }

    /// Applies `writes` atomically if `key` is still at `revision` (0: absent), else
    /// `StorageError::Conflict` with nothing written. A store only this process writes
    /// commits unconditionally.
    fn meta_commit_if(
        &self,
        key: &[u8],
        revision: i64,
        writes: Vec<(Bytes, Option<Bytes>)>,
    ) -> Result<()> {
        let _ = (key, revision);
        self.meta_commit(writes)
    }
}
