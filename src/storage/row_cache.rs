//! The row cache: the embedded store's point reads of data keys through a partition handle
//! (`get`, `get_stamped`) answered from memory: a key's value, or that it is absent. Filled by
//! those reads and by the commits that write the keys (write-through), bounded in bytes.
//!
//! Why: on the embedded store a point read was mostly fjall's `get` (56% of a prepared point
//! read's server CPU: the memtable's skiplist search, 3-5 us among the 300,000 entries a few
//! seconds of writes leave, then the disk tables' filters and blocks); a hash lookup here costs
//! a fraction of a microsecond (docs/PERFORMANCE.md). Cassandra has a row cache (off by
//! default), Cosmos DB an integrated cache; this one is never stale, so it is on by default.
//!
//! Never stale: an entry, when present, holds what the store holds. Writers keep it so, per
//! shard, with a [`Counter`] of writes begun and finished (as `write_stamps.rs` does for
//! conditions): a writer counts itself begun on the shards of its keys, removes their
//! entries, writes the store, then stores the values it wrote (only for keys its commit holds
//! the lock of, so that two writers of one key cannot store out of order; others stay
//! removed) and counts itself finished. A reader that misses takes the shard's stamp (none
//! while a write is in flight there), reads the store, and fills the entry under the shard's
//! lock only if no write began since: a fill can never put back a value a writer replaced.
//! Removing before the write keeps reads monotonic: once a reader has seen a write's value in
//! the store, no later reader finds the older value here.
//!
//! Purges: fjall's compaction filter (`Purge`) drops or rewrites dead data (expired cells,
//! tombstones past their grace) without a commit, and the bytes matter (request units, the
//! partition sizes a write derives from the row it read). A compaction whose filter changes a
//! key counts a store-wide purge as begun (from its first change, so compactions that change
//! nothing never hold fills back), remembers the keys it changed (at most
//! [`MAX_PURGED_KEYS`]; past it the whole cache is emptied) and removes their entries when it
//! finishes merging. fjall installs the merged tables after that and tells nothing when it has,
//! so a purge counts as settled only once no compaction is running (a reader that misses checks,
//! then takes the store's version lock once, which the installation holds): until then no read
//! fills an entry. Writes still store theirs: a write's value is the key's newest version,
//! which a compaction of older tables cannot change. A commit whose condition finds the store
//! differing from what its reader was given also removes the entry.
//!
//! Limits: `capacity_bytes` split over [`SHARDS`] shards; an entry costs its key, its value and
//! [`ENTRY_OVERHEAD_BYTES`]; one larger than an eighth of its shard is not kept. An entry is a
//! copy of key and value in one allocation (a value read from a disk table is a slice of its
//! whole block, a written one shares the client's request buffer). Entries are found by a
//! seeded 64-bit hash of the key and checked against it. Eviction: CLOCK per shard (an entry
//! read since the hand last passed it gets a second chance), at most two sweeps of the shard
//! per insert.

use super::stripe_set::{StripeSet, MAX_STRIPES};
use super::write_stamps::{begin_set, Counter, WritingSet};
use super::Result;
use bytes::Bytes;
use hashbrown::HashTable;
use parking_lot::Mutex;
use smallvec::SmallVec;
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};

/// Shards: one lock and one write counter each (as many as a stripe set can name).
pub const SHARDS: usize = MAX_STRIPES;

/// What an entry costs beyond its key and value: its clock slot (40 bytes) and the slot list's
/// spare capacity (up to as much again), its index bucket (5 bytes at 44-88% load), the shared
/// header the first read of a value over [`COPIED_VALUE_BYTES`] allocates (32), the
/// allocator's rounding. Measured (mimalloc's peak commit, `scripts/bench` write phases with
/// every row cached): about 95 bytes beside key and value (docs/PERFORMANCE.md).
pub const ENTRY_OVERHEAD_BYTES: usize = 112;

/// The row cache's capacity unless `storage.row_cache_bytes` says otherwise: half the block
/// cache, about 520,000 rows of 100-byte values (the budget counts such a row as about 260
/// bytes; each held costs the process about 240).
pub const DEFAULT_ROW_CACHE_BYTES: u64 = 128 << 20;

/// Values up to this many bytes leave the cache as copies, not as slices of the entry. The
/// copy reads the lines the key comparison just loaded; a slice counts a reference in the
/// entry's shared header, a line of its own that both runtime threads write, once when taken
/// and once when dropped (and the entry's first slice allocates that header).
const COPIED_VALUE_BYTES: usize = 256;

/// Keys one compaction's purge remembers; past it, the purge empties the whole cache.
pub const MAX_PURGED_KEYS: usize = 65_536;

pub(crate) struct RowCache {
    /// Writes begun and finished, per shard.
    writes: Box<[Counter]>,
    /// Purges begun, and those known installed (see the module doc).
    purges_begun: AtomicU64,
    purges_settled: AtomicU64,
    /// Compactions the store runs itself (`Store::compact`), which fjall does not count.
    own_compactions: AtomicU64,
    /// Whether fjall runs no compaction now (then every purge begun before is installed).
    compaction_idle: Box<dyn Fn() -> bool + Send + Sync>,
    shards: Box<[Mutex<Clock>]>,
    shard_budget_bytes: usize,
    /// Keys are hashed once, with a random seed (clients choose them): the top bits pick the
    /// shard, the whole hash the entry.
    seed: foldhash::fast::RandomState,
}

/// A cached lookup: the value, or None when the key is absent from the store.
pub(crate) type Cached = Option<Bytes>;

impl RowCache {
    /// A cache of `capacity_bytes` (0: none; every read goes to the store).
    /// `compaction_idle`: whether the store runs no compaction now, and all it ran are
    /// installed.
    pub(crate) fn new(
        capacity_bytes: u64,
        compaction_idle: Box<dyn Fn() -> bool + Send + Sync>,
    ) -> RowCache {
        let shards = if capacity_bytes == 0 { 0 } else { SHARDS };
        let seed = foldhash::fast::RandomState::default();
        RowCache {
            writes: (0..SHARDS).map(|_| Counter::default()).collect(),
            purges_begun: AtomicU64::new(0),
            purges_settled: AtomicU64::new(0),
            own_compactions: AtomicU64::new(0),
            compaction_idle,
            shards: (0..shards).map(|_| Mutex::new(Clock::new(&seed))).collect(),
            shard_budget_bytes: (capacity_bytes / SHARDS as u64) as usize,
            seed,
        }
    }

    /// The key's hash and shard.
    fn locate(&self, key: &[u8]) -> (u64, usize) {
        let hash = hash_key(&self.seed, key);
        (hash, (hash >> (64 - SHARD_BITS)) as usize)
    }

    /// The key's value through the cache: `read` (the store) on a miss, whose answer fills the
    /// entry unless a write to the shard began meanwhile.
    pub(crate) fn read_through(
        &self,
        key: &[u8],
        read: impl FnOnce() -> Result<Option<Bytes>>,
    ) -> Result<Option<Bytes>> {
        if self.shards.is_empty() {
            return read();
        }
        let (hash, i) = self.locate(key);
        let metrics = crate::metrics::global();
        if let Some(hit) = self.shards[i].lock().get(hash, key) {
            metrics.row_cache_hits.inc();
            return Ok(hit);
        }
        metrics.row_cache_misses.inc();
        let stamp = self.writes[i].quiet().zip(self.purge_stamp());
        let value = read()?;
        let budget = self.shard_budget_bytes;
        // The entry is built (an allocation and a copy) before the shard is locked.
        let fill = stamp.and_then(|st| Some((st, Slot::new(key, value.as_deref(), budget)?)));
        if let Some(((stamp, purges), slot)) = fill {
            let mut shard = self.shards[i].lock();
            // Under the lock a writer also stores and removes: see the module doc.
            if self.writes[i].unchanged_since(stamp) && self.purges_begun.load(SeqCst) == purges {
                shard.put(slot, hash, budget);
            }
        }
        Ok(value)
    }

    /// Counts a write of `keys` as begun and removes their entries; the returned value stores
    /// what the write wrote ([`CacheWrite::will_store`], [`CacheWrite::stored`]) and counts it
    /// finished when dropped.
    pub(crate) fn begin<'a>(&self, keys: impl Iterator<Item = &'a [u8]> + Clone) -> CacheWrite<'_> {
        let set = StripeSet::of(keys.clone().map(|k| self.locate(k).1));
        let writing = begin_set(&self.writes, set);
        for key in keys {
            self.forget(key);
        }
        CacheWrite {
            cache: self,
            _writing: writing,
            stores: SmallVec::new(),
        }
    }

    /// The purges begun, if every one of them is settled (settling them if no compaction
    /// runs): a read may fill under this stamp if no purge begins before it fills.
    fn purge_stamp(&self) -> Option<u64> {
        // Read before asking whether compactions run: a purge begun later is not settled.
        let begun = self.purges_begun.load(SeqCst);
        if self.purges_settled.load(SeqCst) == begun {
            return Some(begun);
        }
        if self.own_compactions.load(SeqCst) > 0 || !(self.compaction_idle)() {
            return None;
        }
        self.purges_settled.fetch_max(begun, SeqCst);
        Some(begun)
    }

    /// A compaction's filter changed its first key: no read fills until it is settled.
    pub(crate) fn purge_began(&self) {
        self.purges_begun.fetch_add(1, SeqCst);
    }

    /// A compaction's filter finished: its changed keys leave the cache (`None`: more than
    /// [`MAX_PURGED_KEYS`], every entry does).
    pub(crate) fn purged(&self, keys: Option<&[Vec<u8>]>) {
        match keys {
            Some(keys) => keys.iter().for_each(|k| self.forget(k)),
            None => {
                for shard in self.shards.iter() {
                    *shard.lock() = Clock::new(&self.seed);
                }
            }
        }
    }

    /// Counts a compaction the store runs itself until the value drops (fjall's count of
    /// running compactions leaves those out).
    pub(crate) fn own_compaction(&self) -> OwnCompaction<'_> {
        self.own_compactions.fetch_add(1, SeqCst);
        OwnCompaction(self)
    }

    /// Removes the key's entry (always safe: the next read reads the store).
    pub(crate) fn forget(&self, key: &[u8]) {
        let (hash, i) = self.locate(key);
        if let Some(shard) = self.shards.get(i) {
            shard.lock().remove(hash, key);
        }
    }

    /// Bytes held (keys, values and overhead), over every shard.
    #[cfg(test)]
    pub(crate) fn used_bytes(&self) -> usize {
        self.shards.iter().map(|s| s.lock().used_bytes).sum()
    }
}

/// A compaction the store runs itself (see [`RowCache::own_compaction`]).
pub(crate) struct OwnCompaction<'a>(&'a RowCache);

impl Drop for OwnCompaction<'_> {
    fn drop(&mut self) {
        self.0.own_compactions.fetch_sub(1, SeqCst);
    }
}

/// A write in flight on the cache (see [`RowCache::begin`]).
pub(crate) struct CacheWrite<'a> {
    cache: &'a RowCache,
    _writing: WritingSet<'a>,
    /// Entries to store once the write succeeded: (shard, key hash, entry); a point write
    /// stores one.
    stores: SmallVec<[(usize, u64, Slot); 1]>,
}

impl CacheWrite<'_> {
    /// The write will store `value` (None: delete) under `key`, which its commit holds the
    /// lock of: once it succeeded ([`CacheWrite::stored`]) the entry says so. Copies both
    /// (before the store takes the write's buffers).
    pub(crate) fn will_store(&mut self, key: &[u8], value: Option<&[u8]>) {
        let (hash, i) = self.cache.locate(key);
        if i < self.cache.shards.len() {
            if let Some(slot) = Slot::new(key, value, self.cache.shard_budget_bytes) {
                self.stores.push((i, hash, slot));
            }
        }
    }

    /// The write succeeded: stores what [`CacheWrite::will_store`] was told, then counts the
    /// write finished. (Dropped without this, the keys are left to the store.)
    pub(crate) fn stored(mut self) {
        let budget = self.cache.shard_budget_bytes;
        for (i, hash, slot) in self.stores.drain(..) {
            self.cache.shards[i].lock().put(slot, hash, budget);
        }
    }
}

/// Bits of a key's hash that pick its shard (the top ones).
const SHARD_BITS: u32 = 6;
const _: () = assert!(1 << SHARD_BITS == SHARDS);

/// A key's hash: its shard ([`RowCache::locate`]) and, through [`index_hash`], its place in
/// the shard's index.
fn hash_key(seed: &foldhash::fast::RandomState, key: &[u8]) -> u64 {
    std::hash::BuildHasher::hash_one(seed, key)
}

/// The hash a shard's index files a key under: its bits rotated so that the top ones, which
/// the index's tags take, are not the bits every key of the shard shares.
fn index_hash(hash: u64) -> u64 {
    hash.rotate_left(SHARD_BITS)
}

/// The index hash of the key `slot` holds (the index keeps no hash: growing it and evicting
/// hash the key again).
fn slot_hash(seed: &foldhash::fast::RandomState, slot: &Slot) -> u64 {
    index_hash(hash_key(seed, slot.key()))
}

/// Whether the slot an index entry names holds `key`.
fn holds<'a>(slots: &'a [Slot], key: &'a [u8]) -> impl Fn(&u32) -> bool + 'a {
    move |&at| slots[at as usize].key() == key
}

/// One shard: the entries' slots, found through an index of slot numbers by key hash, and the
/// hand that sweeps them.
struct Clock {
    /// Slot numbers, filed by [`index_hash`] of their key's hash; the hash is kept nowhere
    /// (4 bytes an entry instead of a stored hash's 8 in both index and slot): growing the
    /// index and evicting hash the slot's key again.
    index: HashTable<u32>,
    slots: Vec<Slot>,
    /// Slots of removed entries, reused first.
    free: Vec<u32>,
    hand: usize,
    used_bytes: usize,
    /// The cache's seed (for the keys' hashes).
    seed: foldhash::fast::RandomState,
}

/// An entry: its key and value in one allocation (40 bytes beside it).
struct Slot {
    /// The key, then the value (if present).
    data: Bytes,
    key_len: u32,
    present: bool,
    /// Read since the hand last passed (CLOCK's second chance).
    referenced: bool,
    live: bool,
}

impl Slot {
    /// A live entry holding a copy of `key` and `value`; None if it would cost more than an
    /// eighth of a shard of `shard_budget_bytes`.
    fn new(key: &[u8], value: Option<&[u8]>, shard_budget_bytes: usize) -> Option<Slot> {
        let data_len = key.len() + value.map_or(0, |v| v.len());
        if data_len + ENTRY_OVERHEAD_BYTES > shard_budget_bytes / 8 {
            return None;
        }
        let mut data = Vec::with_capacity(data_len);
        data.extend_from_slice(key);
        data.extend_from_slice(value.unwrap_or_default());
        Some(Slot {
            data: Bytes::from(data),
            key_len: key.len() as u32,
            present: value.is_some(),
            referenced: false,
            live: true,
        })
    }

    fn cost(&self) -> usize {
        self.data.len() + ENTRY_OVERHEAD_BYTES
    }

    fn key(&self) -> &[u8] {
        &self.data[..self.key_len as usize]
    }

    /// The value, for a reader: a copy when small (see [`COPIED_VALUE_BYTES`]), else a slice
    /// sharing the entry's allocation.
    fn value(&self) -> Bytes {
        let at = self.key_len as usize;
        match self.data.len() - at {
            n if n <= COPIED_VALUE_BYTES => Bytes::copy_from_slice(&self.data[at..]),
            _ => self.data.slice(at..),
        }
    }
}

impl Clock {
    fn new(seed: &foldhash::fast::RandomState) -> Clock {
        Clock {
            index: HashTable::new(),
            slots: Vec::new(),
            free: Vec::new(),
            hand: 0,
            used_bytes: 0,
            seed: seed.clone(),
        }
    }

    /// The slot of `key` (whose hash is `hash`), if it has an entry.
    fn find(&self, hash: u64, key: &[u8]) -> Option<u32> {
        let found = self.index.find(index_hash(hash), holds(&self.slots, key));
        found.copied()
    }

    fn get(&mut self, hash: u64, key: &[u8]) -> Option<Cached> {
        let at = self.find(hash, key)?;
        let slot = &mut self.slots[at as usize];
        slot.referenced = true;
        Some((slot.present).then(|| slot.value()))
    }

    fn remove(&mut self, hash: u64, key: &[u8]) {
        let found = self
            .index
            .find_entry(index_hash(hash), holds(&self.slots, key));
        if let Ok(entry) = found {
            let (at, _) = entry.remove();
            self.release(at);
        }
    }

    fn release(&mut self, at: u32) {
        let slot = &mut self.slots[at as usize];
        self.used_bytes -= slot.cost();
        slot.live = false;
        slot.data = Bytes::new();
        self.free.push(at);
    }

    /// Sets the entry of the slot's key (whose hash is `hash`), then evicts until the shard is
    /// within `budget_bytes`.
    fn put(&mut self, slot: Slot, hash: u64, budget_bytes: usize) {
        self.remove(hash, slot.key());
        self.used_bytes += slot.cost();
        let at = match self.free.pop() {
            Some(at) => {
                self.slots[at as usize] = slot;
                at
            }
            None => {
                self.slots.push(slot);
                (self.slots.len() - 1) as u32
            }
        };
        let (slots, seed) = (&self.slots, &self.seed);
        let rehash = |&i: &u32| slot_hash(seed, &slots[i as usize]);
        self.index.insert_unique(index_hash(hash), at, rehash);
        self.evict(budget_bytes, at);
    }

    /// CLOCK: sweeps from the hand, clearing second chances and removing entries without
    /// one, until within `budget_bytes` (never `keep`, the entry just set). Two sweeps
    /// suffice: the first clears every second chance.
    fn evict(&mut self, budget_bytes: usize, keep: u32) {
        let mut steps = 2 * self.slots.len();
        while self.used_bytes > budget_bytes && steps > 0 {
            steps -= 1;
            self.hand = (self.hand + 1) % self.slots.len();
            let at = self.hand as u32;
            let slot = &mut self.slots[self.hand];
            if !slot.live || at == keep || std::mem::take(&mut slot.referenced) {
                continue;
            }
            let hash = slot_hash(&self.seed, slot);
            if let Ok(entry) = self.index.find_entry(hash, |&i| i == at) {
                entry.remove();
            }
            self.release(at);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(s: &str) -> Bytes {
        Bytes::copy_from_slice(s.as_bytes())
    }

    fn read(cache: &RowCache, key: &str, store: Option<&str>) -> Option<Bytes> {
        cache
            .read_through(key.as_bytes(), || Ok(store.map(b)))
            .unwrap()
    }

    #[test]
    fn reads_fill_and_hits_skip_the_store() {
        let cache = RowCache::new(1 << 20, Box::new(|| true));
        assert_eq!(read(&cache, "k", Some("v1")), Some(b("v1")));
        assert_eq!(read(&cache, "absent", None), None);
        // Hits: the store's answer is not asked for.
        let hit = cache.read_through(b"k", || panic!("read the store"));
        assert_eq!(hit.unwrap(), Some(b("v1")));
        let hit = cache.read_through(b"absent", || panic!("read the store"));
        assert_eq!(hit.unwrap(), None);
    }

    /// Small values leave as copies and large ones as slices of the entry: both read back
    /// whole, at and around the size where one becomes the other, empty ones too.
    #[test]
    fn hits_give_the_whole_value_copied_or_shared() {
        let cache = RowCache::new(1 << 20, Box::new(|| true));
        let n = COPIED_VALUE_BYTES;
        for len in [0, 1, n - 1, n, n + 1, 4 * n] {
            let key = format!("k{len}");
            let value: Bytes = (0..len).map(|i| i as u8).collect();
            let stored = value.clone();
            let filled = cache.read_through(key.as_bytes(), || Ok(Some(stored)));
            assert_eq!(filled.unwrap().as_deref(), Some(&value[..]));
            let hit = cache.read_through(key.as_bytes(), || panic!("read the store"));
            assert_eq!(hit.unwrap().as_deref(), Some(&value[..]), "{len} bytes");
        }
    }

    #[test]
    fn a_write_replaces_the_entry_and_a_fill_under_a_write_is_dropped() {
        let cache = RowCache::new(1 << 20, Box::new(|| true));
        read(&cache, "k", Some("v1"));
        let keys = [b("k")];
        let mut w = cache.begin(keys.iter().map(|k| &k[..]));
        w.will_store(&keys[0], Some(b"v2"));
        // In flight: the entry is gone and a read of the store fills nothing.
        assert_eq!(read(&cache, "k", Some("v2")), Some(b("v2")));
        assert_eq!(read(&cache, "k", Some("v3")), Some(b("v3")));
        w.stored();
        assert_eq!(read(&cache, "k", Some("not read")), Some(b("v2")));
        // A write without `stored` (failed) or `will_store` (not its lock) leaves the key to
        // the store.
        let mut w = cache.begin(keys.iter().map(|k| &k[..]));
        w.will_store(&keys[0], Some(b"failed"));
        drop(w);
        assert_eq!(read(&cache, "k", Some("v3")), Some(b("v3")));
        cache.begin(keys.iter().map(|k| &k[..])).stored();
        assert_eq!(read(&cache, "k", Some("v4")), Some(b("v4")));
        assert_eq!(read(&cache, "k", Some("not read")), Some(b("v4")));
    }

    #[test]
    fn a_fill_after_a_write_began_since_the_miss_is_dropped() {
        let cache = RowCache::new(1 << 20, Box::new(|| true));
        let keys = [b("k")];
        let v = cache.read_through(b"k", || {
            // A writer begins and ends while this reader reads the store's old value.
            let mut w = cache.begin(keys.iter().map(|k| &k[..]));
            w.will_store(&keys[0], Some(b"new"));
            w.stored();
            Ok(Some(b("old")))
        });
        assert_eq!(v.unwrap(), Some(b("old")));
        assert_eq!(read(&cache, "k", Some("not read")), Some(b("new")));
    }

    /// A purge removes the keys it changed; until no compaction runs, no read fills (the
    /// store may still answer with the tables the purge replaces); a purge of too many keys
    /// empties the cache.
    #[test]
    fn purges_remove_their_keys_and_hold_fills_until_compactions_end() {
        use std::sync::atomic::AtomicBool;
        let idle = std::sync::Arc::new(AtomicBool::new(false));
        let flag = std::sync::Arc::clone(&idle);
        let cache = RowCache::new(1 << 20, Box::new(move || flag.load(SeqCst)));
        read(&cache, "purged", Some("expired cells"));
        read(&cache, "kept", Some("v"));
        cache.purge_began();
        cache.purged(Some(&[b"purged".to_vec()]));
        assert_eq!(read(&cache, "kept", Some("not read")), Some(b("v")));
        // Not installed yet: the store answers, nothing is filled.
        assert_eq!(
            read(&cache, "purged", Some("expired cells")),
            Some(b("expired cells"))
        );
        assert_eq!(read(&cache, "purged", Some("")), Some(b("")));
        // A write still stores its own (newest) value meanwhile.
        let keys = [b("written")];
        let mut w = cache.begin(keys.iter().map(|k| &k[..]));
        w.will_store(&keys[0], Some(b"w"));
        w.stored();
        assert_eq!(read(&cache, "written", Some("not read")), Some(b("w")));
        // Compactions ended: the next miss settles the purge and fills.
        idle.store(true, SeqCst);
        assert_eq!(read(&cache, "purged", Some("")), Some(b("")));
        assert_eq!(read(&cache, "purged", Some("not read")), Some(b("")));
        // Too many keys to name: every entry goes.
        cache.purge_began();
        cache.purged(None);
        assert_eq!(read(&cache, "kept", Some("v2")), Some(b("v2")));
        assert_eq!(read(&cache, "written", Some("w2")), Some(b("w2")));
    }

    #[test]
    fn a_disabled_cache_always_reads_the_store() {
        let cache = RowCache::new(0, Box::new(|| true));
        assert_eq!(read(&cache, "k", Some("v1")), Some(b("v1")));
        assert_eq!(read(&cache, "k", Some("v2")), Some(b("v2")));
        let keys = [b("k")];
        let mut w = cache.begin(keys.iter().map(|k| &k[..]));
        w.will_store(&keys[0], None);
        w.stored();
        assert_eq!(cache.used_bytes(), 0);
    }

    /// Random reads and writes over a small key space against a model store: every read
    /// answers what the store holds, and the cache stays within its budget.
    #[test]
    fn random_operations_agree_with_the_store_and_stay_in_budget() {
        let budget = (SHARDS * 16 * (ENTRY_OVERHEAD_BYTES + 40)) as u64;
        let cache = RowCache::new(budget, Box::new(|| true));
        let mut store: std::collections::HashMap<Bytes, Bytes> = Default::default();
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for step in 0..200_000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let key = Bytes::from(format!("key-{}", x % 2_000));
            match x % 5 {
                0 => {
                    let value = Bytes::from(format!("v{step}-{}", "x".repeat((x % 30) as usize)));
                    let keys = [key.clone()];
                    let mut w = cache.begin(keys.iter().map(|k| &k[..]));
                    if !x.is_multiple_of(3) {
                        w.will_store(&key, Some(&value));
                    }
                    store.insert(key.clone(), value.clone());
                    w.stored();
                }
                1 => {
                    let keys = [key.clone()];
                    let mut w = cache.begin(keys.iter().map(|k| &k[..]));
                    w.will_store(&key, None);
                    store.remove(&key);
                    w.stored();
                }
                _ => {
                    let got = cache
                        .read_through(&key, || Ok(store.get(&key).cloned()))
                        .unwrap();
                    assert_eq!(got.as_ref(), store.get(&key), "step {step}");
                }
            }
        }
        assert!(
            cache.used_bytes() <= budget as usize,
            "{}",
            cache.used_bytes()
        );
        assert!(
            cache.used_bytes() > budget as usize / 2,
            "{}",
            cache.used_bytes()
        );
        // The index files exactly the live slots, each under the hash the cache locates its
        // key by (and in the shard it picks).
        for (i, shard) in cache.shards.iter().enumerate() {
            let c = shard.lock();
            let live: Vec<u32> = (0..c.slots.len() as u32)
                .filter(|&at| c.slots[at as usize].live)
                .collect();
            assert_eq!(c.index.len(), live.len());
            for at in live {
                let key = c.slots[at as usize].key();
                let (hash, shard) = cache.locate(key);
                assert_eq!((shard, c.find(hash, key)), (i, Some(at)));
            }
        }
    }
}
