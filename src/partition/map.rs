//! Physical partitions: each table's token ring (MIN, MAX] is covered by contiguous ranges
//! (start, end], each with its own id and accounting. Every read and write is routed through the
//! map. Maps are persisted in the metadata space and swapped atomically (readers never lock).

use super::derived_sizes::SizeSource;
use super::sizes::PartStats;
use super::throttle::{Provisioned, SharedPool};
use crate::fast_hash::FastMap;
use crate::storage::{Space, StorageError, Store, WriteBatch};
use crate::tokens::{Token, MAX_TOKEN, MIN_TOKEN};
use arc_swap::ArcSwap;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// The RU/s one physical partition can serve (Cosmos DB's figure).
pub const RU_PER_PHYSICAL_PARTITION: i64 = 10_000;

/// One physical partition: the token range (start, end].
#[derive(Debug, Serialize, Deserialize)]
pub struct PhysicalPartition {
    pub id: u64,
    pub start: Token,
    pub end: Token,
    /// The storage group holding the partition's data (cluster mode; `cluster::groups`).
    /// None: the default group (maps written before groups, and single nodes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// Where its size records come from (`derived_sizes.rs`); absent: `Records`.
    #[serde(default, skip_serializing_if = "SizeSource::is_records")]
    pub sizes: SizeSource,
    /// Live accounting (not persisted: rebuilt from the size records at startup).
    #[serde(skip)]
    pub stats: PartStats,
}

impl PhysicalPartition {
    pub fn contains(&self, t: Token) -> bool {
        t > self.start && t <= self.end
    }

    /// What a storage handle for the partition addresses.
    pub fn reference(&self, storage_id: u64) -> crate::storage::handle::PartitionRef {
        crate::storage::handle::PartitionRef::new(storage_id, self.id, self.start, self.end)
            .in_group(self.group.clone())
    }

    /// The name of the group holding it.
    pub fn group_name(&self) -> &str {
        self.group
            .as_deref()
            .unwrap_or(crate::cluster::groups::DEFAULT_GROUP)
    }
}

/// A table's partitions, sorted by token, covering (MIN, MAX] with no gap or overlap.
#[derive(Debug)]
pub struct PartitionMap {
    pub parts: Vec<Arc<PhysicalPartition>>,
}

impl PartitionMap {
    /// The partition owning `t`.
    pub fn route(&self, t: Token) -> &Arc<PhysicalPartition> {
        let i = self.parts.partition_point(|p| p.end < t);
        // The last partition ends at MAX_TOKEN, so `i` is in range for every token; MIN_TOKEN
        // (only the empty key) goes to the first partition.
        &self.parts[i.min(self.parts.len() - 1)]
    }

    /// Partitions overlapping the token range (lo, hi] in token order.
    pub fn overlapping(&self, lo: Token, hi: Token) -> &[Arc<PhysicalPartition>] {
        if lo >= hi {
            return &[];
        }
        let first = self.parts.partition_point(|p| p.end <= lo);
        let last = self.parts.partition_point(|p| p.start < hi);
        &self.parts[first..last.max(first)]
    }

    pub fn check(&self) -> bool {
        !self.parts.is_empty()
            && self.parts[0].start == MIN_TOKEN
            && self.parts[self.parts.len() - 1].end == MAX_TOKEN
            && self.parts.windows(2).all(|w| w[0].end == w[1].start)
    }
}

/// Equal token ranges for `n` partitions.
fn equal_ranges(n: u64) -> Vec<(Token, Token)> {
    let n = n.max(1) as i128;
    let span = MAX_TOKEN as i128 - MIN_TOKEN as i128;
    (0..n)
        .map(|i| {
            let s = MIN_TOKEN as i128 + span * i / n;
            let e = MIN_TOKEN as i128 + span * (i + 1) / n;
            (s as i64, e as i64)
        })
        .collect()
}

/// The number of physical partitions a throughput needs: ceil(RU / 10,000), at least one.
pub fn partitions_for_throughput(ru: Option<i64>) -> u64 {
    match ru {
        Some(ru) if ru > 0 => {
            ((ru + RU_PER_PHYSICAL_PARTITION - 1) / RU_PER_PHYSICAL_PARTITION) as u64
        }
        _ => 1,
    }
}

#[derive(Serialize, Deserialize)]
struct StoredMap {
    parts: Vec<PhysicalPartition>,
}

const MAP_PREFIX: &[u8] = b"pmap/";

fn map_key(storage_id: u64) -> Vec<u8> {
    let mut k = MAP_PREFIX.to_vec();
    k.extend_from_slice(&storage_id.to_be_bytes());
    k
}

const NEXT_ID_KEY: &[u8] = b"pmap-next-id";
/// Shared metadata: rewritten with every split's map, so other nodes notice the split by one
/// small read ([`PartitionMaps::follow`]) instead of scanning every map.
const MAPS_CHANGED_KEY: &[u8] = b"pmap-changed";
/// The first partition id of a table whose ids are its own (shared metadata).
const FIRST_TABLE_ID: u64 = 1;
/// Attempts of a split's compare-and-swap on its table's map against other nodes' splits.
const MAX_MAP_ATTEMPTS: usize = 32;

/// All tables' partition maps.
pub struct PartitionMaps {
    /// Looked up several times per write: keyed by storage id with the fast hasher.
    maps: ArcSwap<FastMap<u64, Arc<PartitionMap>>>,
    next_id: AtomicU64,
    /// The revision of [`MAPS_CHANGED_KEY`] last followed (shared metadata).
    followed: std::sync::atomic::AtomicI64,
    store: Arc<dyn Store>,
    /// Keyspaces' shared throughput pools, by keyspace name (at most one per keyspace).
    pools: ArcSwap<HashMap<String, Arc<SharedPool>>>,
    /// Held from reading a table's map to installing its replacement in a split, so two
    /// splits at once (the background splitter and ALTER ... throughput) each build on the
    /// other's result instead of the second dropping the first one's children.
    replacing: parking_lot::Mutex<()>,
    /// Partitions a new table starts with at least (`cluster.initial_partitions` in cluster
    /// mode, 1 on a single node).
    min_initial: AtomicU64,
    /// Cluster mode: the storage groups for new partitions, least data first
    /// (`cluster::groups::least_data_first`); unset: no group (the default one).
    placer: std::sync::OnceLock<Placer>,
}

/// Gives the storage groups ordered for new partitions (least data first).
pub type Placer = Arc<dyn Fn() -> Vec<String> + Send + Sync>;

impl PartitionMaps {
    /// Loads every stored map.
    pub fn open(store: Arc<dyn Store>) -> Result<PartitionMaps, StorageError> {
        let mut maps = FastMap::default();
        for item in scan_maps(&*store) {
            let (sid, map) = decode_entry(item?)?;
            maps.insert(sid, Arc::new(map));
        }
        let next_id = match store.metadata().meta_get(NEXT_ID_KEY)? {
            Some(v) if v.len() == 8 => u64::from_be_bytes(v[..].try_into().expect("8 bytes")),
            _ => 1,
        };
        Ok(PartitionMaps {
            replacing: parking_lot::Mutex::new(()),
            maps: ArcSwap::from_pointee(maps),
            next_id: AtomicU64::new(next_id),
            followed: Default::default(),
            store,
            pools: ArcSwap::from_pointee(HashMap::new()),
            min_initial: AtomicU64::new(1),
            placer: std::sync::OnceLock::new(),
        })
    }

    /// The map of a table (tables created before their map exist only for a moment during DDL;
    /// callers treat a missing map as one partition over the whole ring).
    pub fn get(&self, storage_id: u64) -> Option<Arc<PartitionMap>> {
        self.maps.load().get(&storage_id).cloned()
    }

    /// New tables start with at least `n` partitions (equal token ranges).
    /// The end tokens of a new table's partitions (the least layout it starts with).
    pub fn initial_end_tokens(&self) -> Vec<i64> {
        let n = self.min_initial.load(Ordering::Relaxed);
        equal_ranges(n).into_iter().map(|(_, end)| end).collect()
    }

    /// Cluster mode: where new tables' partitions go (set once, at startup).
    pub fn set_placer(&self, placer: Placer) {
        let _ = self.placer.set(placer);
    }

    pub fn set_min_initial_partitions(&self, n: u64) {
        self.min_initial.store(n.max(1), Ordering::Relaxed);
    }

    /// Adds the initial layout of a new table to `batch` (committed with the schema change) and
    /// returns the map to install once the batch is committed.
    pub fn initial_layout(
        &self,
        (storage_id, sizes): (u64, SizeSource),
        throughput: Option<i64>,
        batch: &mut WriteBatch,
    ) -> Arc<PartitionMap> {
        let n = partitions_for_throughput(throughput).max(self.min_initial.load(Ordering::Relaxed));
        let ranges = equal_ranges(n);
        // Shared metadata (cluster mode): ids are per table (see the module doc), and a new
        // storage id (unique through the schema's compare-and-swap) has none yet.
        let first = match self.store.metadata().is_shared() {
            true => FIRST_TABLE_ID,
            false => {
                let first = (self.next_id).fetch_add(ranges.len() as u64, Ordering::SeqCst);
                let next = (first + ranges.len() as u64).to_be_bytes().to_vec();
                batch.put(Space::Meta, NEXT_ID_KEY, next);
                first
            }
        };
        let groups: Vec<Option<String>> = match self.placer.get() {
            Some(placer) => (crate::cluster::groups::spread(ranges.len(), &placer()))
                .into_iter()
                .map(Some)
                .collect(),
            None => vec![None; ranges.len()],
        };
        let parts: Vec<PhysicalPartition> = ranges
            .into_iter()
            .zip(groups)
            .enumerate()
            .map(|(i, ((start, end), group))| {
                let p = PhysicalPartition {
                    id: first + i as u64,
                    start,
                    end,
                    group,
                    sizes,
                    stats: PartStats::default(),
                };
                // A new storage id has no size records: its memo holds them all (none). A
                // start recounts (`sizes::rebuild`, which also covers `Engine::ensure_maps`'
                // maps for older tables), a takeover too (`sizes::rebuild_partition`).
                p.stats.memo.begin();
                p.stats.memo.complete();
                p
            })
            .collect();
        batch.put(Space::Meta, map_key(storage_id), encode_parts(&parts));
        Arc::new(PartitionMap {
            parts: parts.into_iter().map(Arc::new).collect(),
        })
    }

    /// Makes a map current (after its batch committed).
    pub fn install(&self, storage_id: u64, map: Arc<PartitionMap>) {
        debug_assert!(map.check());
        self.maps.rcu(|m| {
            let mut m = FastMap::clone(m);
            m.insert(storage_id, Arc::clone(&map));
            m
        });
    }

    /// Forgets a dropped table's map; adds the deletion to `batch`.
    pub fn remove(&self, storage_id: u64, batch: &mut WriteBatch) {
        batch.delete(Space::Meta, map_key(storage_id));
        self.maps.rcu(|m| {
            let mut m = FastMap::clone(m);
            m.remove(&storage_id);
            m
        });
    }

    /// The shared throughput pool of a keyspace with these settings. A pool is kept while its
    /// settings stay the same; a change (ALTER KEYSPACE) starts a new one. Pools of keyspaces no
    /// longer in the schema are dropped when a pool is created, so there is at most one per
    /// keyspace.
    pub fn shared_pool(
        &self,
        schema: &crate::schema::Schema,
        keyspace: &str,
        provisioned: Provisioned,
    ) -> Arc<SharedPool> {
        if let Some(p) = self.pools.load().get(keyspace) {
            if p.provisioned == provisioned {
                return Arc::clone(p);
            }
        }
        let fresh = Arc::new(SharedPool::new(keyspace, provisioned));
        let mut chosen = Arc::clone(&fresh);
        self.pools.rcu(|m| {
            let mut m: HashMap<_, _> = m
                .iter()
                .filter(|(k, _)| schema.keyspace(k).is_some())
                .map(|(k, v)| (k.clone(), Arc::clone(v)))
                .collect();
            match m.get(keyspace) {
                Some(p) if p.provisioned == provisioned => chosen = Arc::clone(p),
                _ => {
                    chosen = Arc::clone(&fresh);
                    m.insert(keyspace.to_string(), Arc::clone(&fresh));
                }
            }
            m
        });
        chosen
    }

    /// The current shared pool of a keyspace, if one was used.
    pub fn pool_of(&self, keyspace: &str) -> Option<Arc<SharedPool>> {
        self.pools.load().get(keyspace).cloned()
    }

    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// Replaces partition `parent` of a table by two children split at `boundary` (the left
    /// child is (start, boundary], the right (boundary, end]), with the given accounting. The
    /// new map is committed in one batch (a crash leaves the old or the new map) and then
    /// installed. The caller holds the parent's write lock, so no write to its range is in
    /// flight. Returns the children, or None if the parent is no longer in the map.
    /// Shared metadata: a compare-and-swap on the table's stored map (other nodes split
    /// other partitions of it), the children numbered after the largest id in it.
    pub fn replace_with_children(
        &self,
        storage_id: u64,
        parent: &PhysicalPartition,
        boundary: Token,
        left: (i64, i64),
        right: (i64, i64),
    ) -> Result<Option<[Arc<PhysicalPartition>; 2]>, StorageError> {
        let _replacing = self.replacing.lock();
        let at = SplitAt {
            parent,
            boundary,
            left,
            right,
        };
        let meta = self.store.metadata();
        if meta.is_shared() {
            return self.replace_shared(storage_id, &at);
        }
        let Some(map) = self.get(storage_id) else {
            return Ok(None);
        };
        let first = self.next_id.fetch_add(2, Ordering::SeqCst);
        let Some((new_map, children)) = split_map(&map, &at, first) else {
            return Ok(None);
        };
        let mut batch = WriteBatch::default();
        batch.put(
            Space::Meta,
            NEXT_ID_KEY,
            self.next_id.load(Ordering::SeqCst).to_be_bytes().to_vec(),
        );
        batch.put(
            Space::Meta,
            map_key(storage_id),
            encode_arcs(&new_map.parts),
        );
        crate::storage::commit_meta(meta, batch)?;
        self.install(storage_id, Arc::new(new_map));
        Ok(Some(children))
    }

    fn replace_shared(
        &self,
        storage_id: u64,
        at: &SplitAt,
    ) -> Result<Option<[Arc<PhysicalPartition>; 2]>, StorageError> {
        let meta = self.store.metadata();
        let key = map_key(storage_id);
        for _ in 0..MAX_MAP_ATTEMPTS {
            let Some((doc, revision)) = meta.meta_get_versioned(&key)? else {
                return Ok(None);
            };
            let current = self.get(storage_id);
            let stored = decode_map(storage_id, &doc)?;
            let map = match merge_stored(current.as_deref(), stored) {
                Some(m) => Arc::new(m),
                None => current.expect("unchanged means present"),
            };
            let first = map.parts.iter().map(|p| p.id).max().unwrap_or(0) + 1;
            let Some((new_map, children)) = split_map(&map, at, first) else {
                return Ok(None);
            };
            let mut batch = WriteBatch::default();
            batch.put(Space::Meta, key.clone(), encode_arcs(&new_map.parts));
            batch.put(
                Space::Meta,
                MAPS_CHANGED_KEY,
                storage_id.to_be_bytes().to_vec(),
            );
            match crate::storage::commit_meta_if(meta, &key, revision, batch) {
                Ok(()) => {
                    self.install(storage_id, Arc::new(new_map));
                    return Ok(Some(children));
                }
                Err(StorageError::Conflict { .. }) => continue,
                Err(e) => return Err(e),
            }
        }
        Err(StorageError::Unavailable(format!(
            "the partition map of table {storage_id} changed concurrently \
             {MAX_MAP_ATTEMPTS} times"
        )))
    }

    /// Shared metadata: the table's map with partition `pid` placed in group `to` (a move's
    /// switch, `moves.rs`), built on the stored map and handed to `commit`, which writes it
    /// together with its own checks (true: written); then installed here. False when the
    /// partition is no longer stored (split, dropped) or `commit` refused.
    pub fn regroup(
        &self,
        storage_id: u64,
        pid: u64,
        to: &str,
        commit: impl FnOnce(&crate::cluster::moves::NewMap) -> Result<bool, StorageError>,
    ) -> Result<bool, StorageError> {
        let _replacing = self.replacing.lock();
        let key = map_key(storage_id);
        let meta = self.store.metadata();
        let Some((doc, revision)) = meta.meta_get_versioned(&key)? else {
            return Ok(false);
        };
        let stored = decode_map(storage_id, &doc)?;
        let current = self.get(storage_id);
        let map = match merge_stored(current.as_deref(), stored) {
            Some(m) => m,
            None => clone_map(&current.expect("unchanged means present")),
        };
        if !map.parts.iter().any(|p| p.id == pid) {
            return Ok(false);
        }
        let parts: Vec<Arc<PhysicalPartition>> = (map.parts.iter())
            .map(|p| match p.id == pid {
                true => Arc::new(PhysicalPartition {
                    id: p.id,
                    start: p.start,
                    end: p.end,
                    group: Some(to.to_string()),
                    sizes: p.sizes,
                    stats: PartStats::default(),
                }),
                false => Arc::clone(p),
            })
            .collect();
        let change = crate::cluster::moves::NewMap {
            key,
            revision,
            value: encode_arcs(&parts),
            changed_key: MAPS_CHANGED_KEY.to_vec(),
            changed_value: storage_id.to_be_bytes().to_vec(),
        };
        if !commit(&change)? {
            return Ok(false);
        }
        self.install(storage_id, Arc::new(PartitionMap { parts }));
        Ok(true)
    }

    /// Shared metadata: the group the stored map places partition `pid` in (None: no such
    /// partition stored).
    pub fn stored_group(&self, storage_id: u64, pid: u64) -> Result<Option<String>, StorageError> {
        let Some(doc) = self.store.metadata().meta_get(&map_key(storage_id))? else {
            return Ok(None);
        };
        let stored = decode_map(storage_id, &doc)?;
        let part = stored.parts.iter().find(|p| p.id == pid);
        Ok(part.map(|p| p.group_name().to_string()))
    }

    /// Shared metadata: reloads the maps when a split (on any node) rewrote one since the
    /// last call; true if it did. New and dropped tables' maps come with their schema change
    /// (`Catalog::refresh`).
    pub fn follow(&self) -> Result<bool, StorageError> {
        let meta = self.store.metadata();
        if !meta.is_shared() {
            return Ok(false);
        }
        self.follow_to(meta.meta_revision(MAPS_CHANGED_KEY)?)
    }

    /// Reloads the maps unless they follow `revision` (the change key's, just read) already;
    /// true if it did.
    fn follow_to(&self, revision: i64) -> Result<bool, StorageError> {
        if revision == self.followed.load(Ordering::Acquire) {
            return Ok(false);
        }
        self.reload()?;
        self.followed.store(revision, Ordering::Release);
        Ok(true)
    }

    /// The revision of the maps' change key that the maps here follow (0: none yet, or a
    /// single node); the token for [`PartitionMaps::unchanged_since`]. Stored after the reload
    /// it names, so the maps here are at least as new.
    pub fn followed_revision(&self) -> i64 {
        self.followed.load(Ordering::Acquire)
    }

    /// Shared metadata: whether no node changed a map (a split, a move's switch) since
    /// `followed_revision` returned `since`, by a linearizable read of the change key; when
    /// one did, the maps are reloaded before it answers false. True on a single node.
    pub fn unchanged_since(&self, since: i64) -> Result<bool, StorageError> {
        let meta = self.store.metadata();
        if !meta.is_shared() {
            return Ok(true);
        }
        let revision = meta.meta_revision(MAPS_CHANGED_KEY)?;
        if revision == since {
            return Ok(true);
        }
        self.follow_to(revision)?;
        Ok(false)
    }

    /// Shared metadata: loads the maps other nodes wrote (new tables', split tables') and
    /// forgets those no longer stored (dropped tables); partitions unchanged stay as they are.
    pub fn reload(&self) -> Result<(), StorageError> {
        let _replacing = self.replacing.lock();
        let at_scan = self.maps.load_full();
        let mut stored = Vec::new();
        for item in scan_maps(&*self.store) {
            stored.push(decode_entry(item?)?);
        }
        let stored: Vec<(u64, Arc<PartitionMap>)> = (stored.into_iter())
            .map(|(sid, m)| (sid, Arc::new(m)))
            .collect();
        // A map a local DDL installed during the scan (its table created after the scan
        // read) is kept, not lost to the older listing.
        self.maps.rcu(|now| {
            let mut next: FastMap<u64, Arc<PartitionMap>> = (now.iter())
                .filter(|(sid, _)| !at_scan.contains_key(*sid))
                .map(|(sid, m)| (*sid, Arc::clone(m)))
                .collect();
            for (sid, map) in &stored {
                let cur = now.get(sid);
                let merged = match merge_stored(cur.map(|c| &**c), clone_map(map)) {
                    Some(m) => Arc::new(m),
                    None => Arc::clone(cur.expect("unchanged means present")),
                };
                next.insert(*sid, merged);
            }
            next
        });
        Ok(())
    }

    /// Every table's current map.
    pub fn all(&self) -> Vec<(u64, Arc<PartitionMap>)> {
        self.maps
            .load()
            .iter()
            .map(|(k, v)| (*k, Arc::clone(v)))
            .collect()
    }
}

/// A split: the partition, where, and the children's accounting (bytes, logical partitions).
struct SplitAt<'a> {
    parent: &'a PhysicalPartition,
    boundary: Token,
    left: (i64, i64),
    right: (i64, i64),
}

/// `map` with the parent replaced by two children numbered `first`, `first + 1`; None if the
/// parent (same id and range) is not in it or the boundary is outside it.
fn split_map(
    map: &PartitionMap,
    at: &SplitAt,
    first: u64,
) -> Option<(PartitionMap, [Arc<PhysicalPartition>; 2])> {
    let (parent, boundary) = (at.parent, at.boundary);
    let pos = map
        .parts
        .iter()
        .position(|p| p.id == parent.id && p.start == parent.start && p.end == parent.end)?;
    if boundary <= parent.start || boundary >= parent.end {
        return None;
    }
    // Keys do not move in a split: the children share the parent's rows, so they stay in its
    // storage group (moving one elsewhere is a partition move, issue 18).
    // The children take the parent's size records in memory (the caller holds the parent's
    // exclusive lock, and writes reach the children only once the new map is installed).
    let [left_memo, right_memo] = parent.stats.memo.split(boundary);
    let child = |id: u64,
                 start: Token,
                 end: Token,
                 (bytes, logical): (i64, i64),
                 memo: super::size_memo::SizeMemo| {
        let p = PhysicalPartition {
            id,
            start,
            end,
            group: parent.group.clone(),
            sizes: parent.sizes,
            stats: PartStats {
                memo,
                ..PartStats::default()
            },
        };
        p.stats.bytes.store(bytes, Ordering::SeqCst);
        p.stats.logical.store(logical, Ordering::SeqCst);
        Arc::new(p)
    };
    let l = child(first, parent.start, boundary, at.left, left_memo);
    let r = child(first + 1, boundary, parent.end, at.right, right_memo);
    let mut parts = map.parts.clone();
    parts.splice(pos..=pos, [Arc::clone(&l), Arc::clone(&r)]);
    let new_map = PartitionMap { parts };
    new_map.check().then_some((new_map, [l, r]))
}

/// A map sharing `map`'s partitions (the stored listing may be merged more than once).
fn clone_map(map: &PartitionMap) -> PartitionMap {
    PartitionMap {
        parts: map.parts.clone(),
    }
}

fn scan_maps(store: &dyn Store) -> crate::storage::ScanIter {
    let prefix = MAP_PREFIX;
    let end = crate::storage::prefix_successor(prefix).expect("prefix has a successor");
    store.metadata().meta_scan(
        std::ops::Bound::Included(prefix),
        std::ops::Bound::Excluded(&end[..]),
    )
}

/// A stored map entry: (storage id, map), checked to cover the ring.
fn decode_entry((k, v): (bytes::Bytes, bytes::Bytes)) -> Result<(u64, PartitionMap), StorageError> {
    let id_bytes: [u8; 8] = k[MAP_PREFIX.len()..]
        .try_into()
        .map_err(|_| StorageError::Corrupt("bad partition map key".into()))?;
    let sid = u64::from_be_bytes(id_bytes);
    Ok((sid, decode_map(sid, &v)?))
}

fn decode_map(sid: u64, v: &[u8]) -> Result<PartitionMap, StorageError> {
    let stored: StoredMap = serde_json::from_slice(v)
        .map_err(|e| StorageError::Corrupt(format!("bad partition map: {e}")))?;
    let map = PartitionMap {
        parts: stored.parts.into_iter().map(Arc::new).collect(),
    };
    if !map.check() {
        return Err(StorageError::Corrupt(format!(
            "partition map of table {sid} does not cover the ring"
        )));
    }
    Ok(map)
}

/// `stored` with the partitions `current` already has (same id and range) kept as they
/// are, so their live accounting survives a reload; None when nothing differs.
fn merge_stored(current: Option<&PartitionMap>, stored: PartitionMap) -> Option<PartitionMap> {
    // A partition moved to another group (issue 18) is a new object: its handles are opened
    // on the new group.
    let same = |a: &PhysicalPartition, b: &PhysicalPartition| {
        a.id == b.id && a.start == b.start && a.end == b.end && a.group == b.group
    };
    let known = |p: &Arc<PhysicalPartition>| {
        current.and_then(|c| c.parts.iter().find(|q| same(q, p)).cloned())
    };
    let parts: Vec<_> = stored
        .parts
        .iter()
        .map(|p| known(p).unwrap_or_else(|| Arc::clone(p)))
        .collect();
    let unchanged = current.is_some_and(|c| {
        c.parts.len() == parts.len() && c.parts.iter().zip(&parts).all(|(a, b)| Arc::ptr_eq(a, b))
    });
    (!unchanged).then_some(PartitionMap { parts })
}

fn encode_arcs(parts: &[Arc<PhysicalPartition>]) -> Vec<u8> {
    #[derive(Serialize)]
    struct Out<'a> {
        parts: Vec<&'a PhysicalPartition>,
    }
    serde_json::to_vec(&Out {
        parts: parts.iter().map(|p| &**p).collect(),
    })
    .expect("partition map serializes")
}

fn encode_parts(parts: &[PhysicalPartition]) -> Vec<u8> {
    #[derive(Serialize)]
    struct Out<'a> {
        parts: &'a [PhysicalPartition],
    }
    serde_json::to_vec(&Out { parts }).expect("partition map serializes")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two splits of different partitions of one table at once (the background splitter and
    /// ALTER ... throughput): each must keep the other's children, in memory and on disk.
    #[test]
    fn concurrent_splits_of_one_table_keep_every_child() {
        use crate::storage::{EmbeddedStore, SyncMode};
        use std::sync::Barrier;
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn Store> =
            Arc::new(EmbeddedStore::open(dir.path(), SyncMode::None).unwrap());
        let maps = Arc::new(PartitionMaps::open(Arc::clone(&store)).unwrap());
        for sid in 100..140u64 {
            let mut batch = WriteBatch::default();
            let map = maps.initial_layout((sid, SizeSource::Records), Some(20_000), &mut batch);
            store.commit(batch).unwrap();
            maps.install(sid, Arc::clone(&map));
            assert_eq!(map.parts.len(), 2);
            let barrier = Arc::new(Barrier::new(2));
            let splits: Vec<_> = map
                .parts
                .iter()
                .map(|p| {
                    let (maps, barrier, p) =
                        (Arc::clone(&maps), Arc::clone(&barrier), Arc::clone(p));
                    std::thread::spawn(move || {
                        let mid = ((p.start as i128 + p.end as i128) / 2) as Token;
                        barrier.wait();
                        maps.replace_with_children(sid, &p, mid, (0, 0), (0, 0))
                            .unwrap()
                    })
                })
                .collect();
            for s in splits {
                assert!(s.join().unwrap().is_some());
            }
            let now = maps.get(sid).unwrap();
            assert_eq!(
                now.parts.len(),
                4,
                "table {sid}: a split's children were lost"
            );
            assert!(now.check());
            let reopened = PartitionMaps::open(Arc::clone(&store)).unwrap();
            assert_eq!(
                reopened.get(sid).unwrap().parts.len(),
                4,
                "table {sid} on disk"
            );
        }
    }

    /// A second process's view (another node): it loads a split and a drop another writer
    /// committed, keeps its unchanged partitions (their live accounting) as they were, and
    /// keeps a map installed after its listing was read.
    #[test]
    fn reload_follows_another_writer_and_keeps_what_did_not_change() {
        use crate::storage::{EmbeddedStore, SyncMode};
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn Store> =
            Arc::new(EmbeddedStore::open(dir.path(), SyncMode::None).unwrap());
        let writer = PartitionMaps::open(Arc::clone(&store)).unwrap();
        for sid in [100, 101] {
            let mut batch = WriteBatch::default();
            let map = writer.initial_layout((sid, SizeSource::Records), Some(20_000), &mut batch);
            store.commit(batch).unwrap();
            writer.install(sid, map);
        }
        let follower = PartitionMaps::open(Arc::clone(&store)).unwrap();
        let kept = Arc::clone(&follower.get(100).unwrap().parts[1]);
        kept.stats.bytes.store(77, Ordering::SeqCst);
        let parent = Arc::clone(&writer.get(100).unwrap().parts[0]);
        let mid = ((parent.start as i128 + parent.end as i128) / 2) as Token;
        writer
            .replace_with_children(100, &parent, mid, (0, 0), (0, 0))
            .unwrap()
            .unwrap();
        let mut batch = WriteBatch::default();
        writer.remove(101, &mut batch);
        store.commit(batch).unwrap();
        follower.reload().unwrap();
        let now = follower.get(100).unwrap();
        assert_eq!(now.parts.len(), 3);
        assert!(now.check());
        assert!(
            Arc::ptr_eq(&now.parts[2], &kept),
            "unchanged partition replaced"
        );
        assert_eq!(now.parts[2].stats.bytes.load(Ordering::SeqCst), 77);
        assert!(follower.get(101).is_none(), "dropped table's map kept");
        follower.reload().unwrap();
        assert!(
            Arc::ptr_eq(&follower.get(100).unwrap(), &now),
            "no-op reload swapped"
        );
    }

    fn map(n: u64) -> PartitionMap {
        PartitionMap {
            parts: equal_ranges(n)
                .into_iter()
                .enumerate()
                .map(|(i, (start, end))| {
                    Arc::new(PhysicalPartition {
                        id: i as u64,
                        start,
                        end,
                        group: None,
                        sizes: SizeSource::Records,
                        stats: PartStats::default(),
                    })
                })
                .collect(),
        }
    }

    /// Maps written before storage groups and derived sizes have no group (the default one)
    /// and size records, and are written back without either field; a group and a size
    /// source survive a round trip; a split's children keep their parent's.
    #[test]
    fn groups_and_size_sources_persist_default_and_follow_splits() {
        let old = br#"{"parts":[{"id":1,"start":-9223372036854775808,"end":9223372036854775807}]}"#;
        let m = decode_map(7, old).unwrap();
        assert_eq!(m.parts[0].group, None);
        assert_eq!(m.parts[0].group_name(), "default");
        assert_eq!(m.parts[0].sizes, SizeSource::Records);
        assert_eq!(encode_arcs(&m.parts), old.to_vec());
        let grouped = PartitionMap {
            parts: vec![Arc::new(PhysicalPartition {
                id: 1,
                start: MIN_TOKEN,
                end: MAX_TOKEN,
                group: Some("g2".into()),
                sizes: SizeSource::Rows,
                stats: PartStats::default(),
            })],
        };
        let back = decode_map(7, &encode_arcs(&grouped.parts)).unwrap();
        assert_eq!(back.parts[0].group.as_deref(), Some("g2"));
        assert_eq!(back.parts[0].reference(7).group.as_deref(), Some("g2"));
        assert_eq!(back.parts[0].sizes, SizeSource::Rows);
        let at = SplitAt {
            parent: &grouped.parts[0],
            boundary: 0,
            left: (0, 0),
            right: (0, 0),
        };
        let (_, children) = split_map(&grouped, &at, 2).unwrap();
        for c in children {
            assert_eq!(c.group.as_deref(), Some("g2"));
            assert_eq!(c.sizes, SizeSource::Rows);
        }
        // A partition moved to another group is not the same partition to a reload.
        assert!(merge_stored(Some(&grouped), decode_map(7, old).unwrap()).is_some());
    }

    #[test]
    fn layouts_cover_the_ring() {
        for n in [1, 2, 3, 4, 7, 64] {
            let m = map(n);
            assert!(m.check(), "{n}");
            assert_eq!(m.parts.len() as u64, n);
        }
        assert_eq!(partitions_for_throughput(None), 1);
        assert_eq!(partitions_for_throughput(Some(400)), 1);
        assert_eq!(partitions_for_throughput(Some(10_000)), 1);
        assert_eq!(partitions_for_throughput(Some(10_100)), 2);
        assert_eq!(partitions_for_throughput(Some(40_000)), 4);
    }

    #[test]
    fn routing_and_overlap() {
        let m = map(4);
        for t in [MIN_TOKEN, MIN_TOKEN + 1, -1, 0, 1, MAX_TOKEN] {
            let p = m.route(t);
            assert!(p.contains(t) || t == MIN_TOKEN);
        }
        assert_eq!(m.route(MAX_TOKEN).id, 3);
        let b = m.parts[1].end;
        assert_eq!(m.route(b).id, 1);
        assert_eq!(m.route(b + 1).id, 2);
        assert_eq!(m.overlapping(MIN_TOKEN, MAX_TOKEN).len(), 4);
        assert_eq!(m.overlapping(b, b + 1).len(), 1);
        assert_eq!(m.overlapping(b - 1, b + 1).len(), 2);
        assert!(m.overlapping(5, 5).is_empty());
    }
}
