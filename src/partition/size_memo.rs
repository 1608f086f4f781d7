//! The size records of one physical partition, held in memory by the process that owns it.
//!
//! Every write reads the size record of each logical partition it touches (it needs the old
//! size for the logical limit and the counters). A read of the sizes space costs a memtable
//! and segment lookup, about 12% of a prepared point write's CPU; the owner already reads every
//! record of the partition when it counts its counters (`sizes::recount` at startup,
//! `sizes::rebuild_partition` on a takeover, a split's children from their parent), so it keeps
//! them: key = the size record key without its storage id (`[token][partition key bytes]`),
//! value = the recorded bytes.
//!
//! The stored records stay the truth: the memo only answers while it holds *every* record of
//! the partition (`Complete`; absence then means "no record"), and writes commit to storage
//! first and update the memo after (under the partition's shared lock). States:
//! - `Off`: answers nothing (default; after a commit error, whose outcome may be unknown; over
//!   the memory budget). Readers fall back to storage.
//! - `Building`: a count is in progress (its chunks run under the exclusive lock and add what
//!   they read; writes between chunks set their committed values), answers nothing yet.
//! - `Complete`: the count finished under the exclusive lock: holds every record.
//!
//! Memory: all memos of the process share one budget (`MEMORY_BYTES`, counted as table
//! capacity x entry size + key allocations); a memo that would pass it turns `Off` and frees
//! what it held, so a process with more logical partitions than fit reads those from storage as
//! before.

use crate::tokens::Token;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// Bytes all memos of the process may hold unless `partitions.size_memo_bytes` says otherwise
/// (about 1,000,000 records of short keys).
pub const MEMORY_BYTES: usize = 64 << 20;

/// A memory budget shared by memos.
#[derive(Debug)]
pub struct Budget {
    limit_bytes: AtomicUsize,
    used_bytes: AtomicUsize,
    /// Memos turned off for passing the budget (their partitions' new-key writes read the
    /// store from then on).
    over_budget: AtomicU64,
}

impl Budget {
    pub const fn new(limit_bytes: usize) -> Budget {
        Budget {
            limit_bytes: AtomicUsize::new(limit_bytes),
            used_bytes: AtomicUsize::new(0),
            over_budget: AtomicU64::new(0),
        }
    }

    /// Sets the limit, for memos charged from now on (at startup, before any count).
    pub fn set_limit_bytes(&self, limit_bytes: usize) {
        self.limit_bytes.store(limit_bytes, Ordering::SeqCst);
    }

    pub fn limit_bytes(&self) -> usize {
        self.limit_bytes.load(Ordering::SeqCst)
    }

    pub fn used_bytes(&self) -> usize {
        self.used_bytes.load(Ordering::SeqCst)
    }

    /// How many memos turned off for passing the budget.
    pub fn over_budget(&self) -> u64 {
        self.over_budget.load(Ordering::SeqCst)
    }
}

/// The process's budget.
pub static BUDGET: Budget = Budget::new(MEMORY_BYTES);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Off,
    Building,
    Complete,
}

/// Keyed by what clients choose (partition keys), so hashed with a per-map random seed
/// (HashDoS), by foldhash rather than the standard SipHash-1-3: a point write hashes its key
/// twice here, and SipHash was 3.4% of the server's CPU at 4 x 32 in `scripts/bench`. foldhash
/// (hashbrown's own default) is minimally DoS-resistant: colliding keys need its seed, which
/// a client could only infer by studying the server's timing at length.
type Records = HashMap<Box<[u8]>, u64, foldhash::fast::RandomState>;

#[derive(Debug)]
struct Inner {
    state: State,
    records: Records,
    /// Bytes of the key allocations (rounded up as the allocator does, about).
    key_bytes: usize,
    /// What this memo has added to its budget.
    charged_bytes: usize,
}

/// Lives in `PartStats`.
#[derive(Debug)]
pub struct SizeMemo {
    inner: Mutex<Inner>,
    budget: &'static Budget,
}

impl Default for SizeMemo {
    fn default() -> Self {
        SizeMemo::with_budget(&BUDGET)
    }
}

fn alloc_bytes(key: &[u8]) -> usize {
    key.len().next_multiple_of(16)
}

/// Partition key bytes up to which a [`MemoKey`] lives on the stack.
const SHORT_PK_BYTES: usize = 48;

/// A memo key, `[token, sign bit flipped][pk]`, without an allocation for short keys (a point
/// write builds one or two).
pub enum MemoKey {
    Short {
        bytes: [u8; 8 + SHORT_PK_BYTES],
        len: usize,
    },
    Long(Vec<u8>),
}

/// The memo key of the logical partition `pk` at `token`.
pub fn key(token: Token, pk: &[u8]) -> MemoKey {
    let t = ((token as u64) ^ (1 << 63)).to_be_bytes();
    if pk.len() > SHORT_PK_BYTES {
        return MemoKey::Long([&t[..], pk].concat());
    }
    let mut bytes = [0u8; 8 + SHORT_PK_BYTES];
    bytes[..8].copy_from_slice(&t);
    bytes[8..8 + pk.len()].copy_from_slice(pk);
    MemoKey::Short {
        bytes,
        len: 8 + pk.len(),
    }
}

impl std::ops::Deref for MemoKey {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            MemoKey::Short { bytes, len } => &bytes[..*len],
            MemoKey::Long(v) => v,
        }
    }
}

/// The token of a memo key (`[token, sign bit flipped][pk]`).
fn token_of(key: &[u8]) -> Token {
    let b: [u8; 8] = key[..8].try_into().expect("memo keys start with a token");
    (u64::from_be_bytes(b) ^ (1 << 63)) as i64
}

impl SizeMemo {
    pub fn with_budget(budget: &'static Budget) -> SizeMemo {
        SizeMemo {
            inner: Mutex::new(Inner {
                state: State::Off,
                records: Records::default(),
                key_bytes: 0,
                charged_bytes: 0,
            }),
            budget,
        }
    }

    /// The recorded bytes of `key` (a size record key without its storage id; 0: no record),
    /// when the memo holds every record of its partition; None: read storage.
    pub fn get(&self, key: &[u8]) -> Option<u64> {
        let m = self.inner.lock();
        (m.state == State::Complete).then(|| m.records.get(key).copied().unwrap_or(0))
    }

    /// How many records it holds, once complete.
    pub fn records(&self) -> Option<usize> {
        let m = self.inner.lock();
        (m.state == State::Complete).then(|| m.records.len())
    }

    /// Starts a count (under the partition's exclusive lock, before its first chunk): empty,
    /// taking records.
    pub fn begin(&self) {
        let mut m = self.inner.lock();
        self.clear(&mut m);
        m.state = State::Building;
    }

    /// The count finished (under the exclusive lock): the memo holds every record.
    pub fn complete(&self) {
        let mut m = self.inner.lock();
        if m.state == State::Building {
            m.state = State::Complete;
        }
    }

    /// Stops answering and frees what it holds.
    pub fn off(&self) {
        let mut m = self.inner.lock();
        self.clear(&mut m);
    }

    /// Whether it takes records (a count is running or done).
    pub fn is_on(&self) -> bool {
        self.inner.lock().state != State::Off
    }

    /// Record `key` now holds `bytes` (0: deleted): a record a count read, or a committed write.
    pub fn set(&self, key: &[u8], bytes: u64) {
        let mut m = self.inner.lock();
        if m.state == State::Off {
            return;
        }
        if bytes == 0 {
            if m.records.remove(key).is_some() {
                m.key_bytes -= alloc_bytes(key);
            }
        } else if let Some(v) = m.records.get_mut(key) {
            *v = bytes;
            return;
        } else {
            m.records.insert(key.into(), bytes);
            m.key_bytes += alloc_bytes(key);
        }
        self.charge(&mut m);
    }

    /// `set` for a record the caller found absent (its write takes it from 0 bytes): one hash
    /// of the key instead of a lookup and then an insert (still right if it is there).
    pub fn set_new(&self, key: &[u8], bytes: u64) {
        if bytes == 0 {
            return self.set(key, bytes);
        }
        let mut m = self.inner.lock();
        if m.state == State::Off {
            return;
        }
        if m.records.insert(key.into(), bytes).is_none() {
            m.key_bytes += alloc_bytes(key);
            self.charge(&mut m);
        }
    }

    /// Divides a complete memo between a split's children, (start, boundary] and (boundary,
    /// end] (under the parent's exclusive lock, before the children are installed); the parent
    /// turns off. Children of a memo that is not complete start off.
    pub fn split(&self, boundary: Token) -> [SizeMemo; 2] {
        let (left, right) = (
            SizeMemo::with_budget(self.budget),
            SizeMemo::with_budget(self.budget),
        );
        let mut m = self.inner.lock();
        let complete = m.state == State::Complete;
        let mut records = std::mem::take(&mut m.records);
        // The parent's charge goes first: the children take over the same records.
        self.clear(&mut m);
        drop(m);
        if complete {
            let moved: Records = records.extract_if(|k, _| token_of(k) > boundary).collect();
            for (child, records) in [(&left, records), (&right, moved)] {
                let mut c = child.inner.lock();
                c.key_bytes = records.keys().map(|k| alloc_bytes(k)).sum();
                c.records = records;
                c.state = State::Complete;
                child.charge(&mut c);
            }
        }
        [left, right]
    }

    fn footprint(m: &Inner) -> usize {
        m.records.capacity() * (std::mem::size_of::<(Box<[u8]>, u64)>() + 1) + m.key_bytes
    }

    /// Brings the budget in line with what the memo holds; turns it off past the budget.
    fn charge(&self, m: &mut Inner) {
        let now = Self::footprint(m);
        if now > m.charged_bytes {
            let more = now - m.charged_bytes;
            let used = self.budget.used_bytes.fetch_add(more, Ordering::SeqCst) + more;
            m.charged_bytes = now;
            if used > self.budget.limit_bytes() {
                self.budget.over_budget.fetch_add(1, Ordering::SeqCst);
                self.clear(m);
            }
        } else if now < m.charged_bytes {
            self.budget
                .used_bytes
                .fetch_sub(m.charged_bytes - now, Ordering::SeqCst);
            m.charged_bytes = now;
        }
    }

    fn clear(&self, m: &mut Inner) {
        m.state = State::Off;
        m.records = Records::default();
        m.key_bytes = 0;
        self.budget
            .used_bytes
            .fetch_sub(m.charged_bytes, Ordering::SeqCst);
        m.charged_bytes = 0;
    }
}

impl Drop for SizeMemo {
    fn drop(&mut self) {
        let m = self.inner.get_mut();
        self.budget
            .used_bytes
            .fetch_sub(m.charged_bytes, Ordering::SeqCst);
        m.charged_bytes = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(token: Token, pk: &[u8]) -> Vec<u8> {
        [&((token as u64) ^ (1 << 63)).to_be_bytes()[..], pk].concat()
    }

    fn leaked(limit_bytes: usize) -> &'static Budget {
        Box::leak(Box::new(Budget::new(limit_bytes)))
    }

    /// Short and long keys are the size record key without its storage id.
    #[test]
    fn memo_keys_are_size_keys_without_the_storage_id() {
        for pk in [
            &b""[..],
            b"k",
            &[7u8; SHORT_PK_BYTES],
            &[9u8; SHORT_PK_BYTES + 1],
        ] {
            let want = crate::partition::sizes::size_key(3, -42, pk);
            assert_eq!(&*super::key(-42, pk), &want[8..]);
        }
    }

    #[test]
    fn answers_only_once_complete_and_tracks_writes() {
        let budget = leaked(1 << 20);
        let m = SizeMemo::with_budget(budget);
        m.set(&key(1, b"a"), 10);
        assert_eq!(m.get(&key(1, b"a")), None, "off takes nothing");
        m.begin();
        m.set(&key(1, b"a"), 10);
        assert_eq!(m.get(&key(1, b"a")), None, "building answers nothing");
        m.complete();
        assert_eq!(m.get(&key(1, b"a")), Some(10));
        assert_eq!(
            m.get(&key(2, b"b")),
            Some(0),
            "complete: absent is no record"
        );
        m.set(&key(1, b"a"), 0);
        assert_eq!(m.get(&key(1, b"a")), Some(0));
        m.set_new(&key(3, b"c"), 5);
        m.set_new(&key(3, b"c"), 6);
        assert_eq!(
            m.get(&key(3, b"c")),
            Some(6),
            "set_new of a present record replaces it"
        );
        let one = budget.used_bytes();
        m.set_new(&key(3, b"c"), 0);
        assert_eq!(m.get(&key(3, b"c")), Some(0));
        assert!(budget.used_bytes() <= one);
        assert!(budget.used_bytes() > 0);
        drop(m);
        assert_eq!(budget.used_bytes(), 0, "dropping frees the budget");
    }

    #[test]
    fn over_the_budget_it_turns_off_and_frees_it() {
        let budget = leaked(4096);
        let m = SizeMemo::with_budget(budget);
        m.begin();
        for i in 0..1000i64 {
            m.set(&key(i, &i.to_be_bytes()), 1);
        }
        m.complete();
        assert_eq!(m.get(&key(1, b"x")), None);
        assert!(!m.is_on());
        assert_eq!(budget.used_bytes(), 0);
        assert_eq!(budget.over_budget(), 1, "counted once, when it turned off");
        // A larger limit (set before the next count) lets the same records stay.
        budget.set_limit_bytes(1 << 20);
        m.begin();
        for i in 0..1000i64 {
            m.set(&key(i, &i.to_be_bytes()), 1);
        }
        m.complete();
        assert_eq!(m.get(&key(1, &1i64.to_be_bytes())), Some(1));
        assert_eq!(budget.over_budget(), 1);
    }

    #[test]
    fn a_split_divides_the_records_by_token() {
        let budget = leaked(1 << 20);
        let m = SizeMemo::with_budget(budget);
        m.begin();
        for t in [-5i64, 0, 3, 7] {
            m.set(&key(t, b"k"), t.unsigned_abs() + 1);
        }
        m.complete();
        let [l, r] = m.split(3);
        assert_eq!(m.get(&key(0, b"k")), None, "the parent answers nothing");
        assert_eq!(l.get(&key(-5, b"k")), Some(6));
        assert_eq!(l.get(&key(3, b"k")), Some(4));
        assert_eq!(l.get(&key(7, b"k")), Some(0));
        assert_eq!(r.get(&key(7, b"k")), Some(8));
        assert_eq!(r.get(&key(0, b"k")), Some(0));
        drop((l, r));
        assert_eq!(budget.used_bytes(), 0);
        let building = SizeMemo::with_budget(budget);
        building.begin();
        let [l, r] = building.split(0);
        assert!(!l.is_on() && !r.is_on(), "only a complete memo is divided");
    }
}
