//! The keys committed to a partition while it is being copied to another storage group
//! (`moves.rs`): the copy reads each key once, at some moment; a key committed after the
//! tracking began may have been read before its commit, so it is copied again from the
//! source (its value then, or its absence) until the last round, which runs while commits
//! wait (`Served::freeze`).
//!
//! Bounded in bytes: past [`Dirty::limit_bytes`] the set stops growing and is marked
//! overflowed, and the move fails (the writes themselves are unaffected): a partition written
//! faster than it can be copied is not moved.

use crate::storage::handle::PartitionCommit;
use bytes::Bytes;
use std::collections::HashSet;

/// One record to copy again.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum DirtyKey {
    Data(Bytes),
    Size(Bytes),
    /// A local record and the token it is owned through.
    Local(Bytes, i64),
}

impl DirtyKey {
    fn bytes(&self) -> usize {
        // The key plus a rough per-entry overhead of the set.
        48 + match self {
            DirtyKey::Data(k) | DirtyKey::Size(k) | DirtyKey::Local(k, _) => k.len(),
        }
    }
}

#[derive(Debug)]
pub struct Dirty {
    keys: HashSet<DirtyKey>,
    bytes: usize,
    limit_bytes: usize,
    overflowed: bool,
}

impl Dirty {
    pub fn new(limit_bytes: usize) -> Dirty {
        Dirty {
            keys: HashSet::new(),
            bytes: 0,
            limit_bytes,
            overflowed: false,
        }
    }

    /// Every key `commit` writes (not the keys it only checks: they do not change). Taken
    /// before the commit and recorded after it returned: a round that takes the set while
    /// the commit is in flight must not copy the key before the commit landed and then lose
    /// it.
    pub fn keys_of(commit: &PartitionCommit) -> Vec<DirtyKey> {
        let data = commit.writes.iter().map(|(k, _)| DirtyKey::Data(k.clone()));
        let sizes = commit.sizes.iter().map(|(k, _)| DirtyKey::Size(k.clone()));
        let local = (commit.local.iter()).map(|l| DirtyKey::Local(l.key.clone(), l.token));
        data.chain(sizes).chain(local).collect()
    }

    pub fn record(&mut self, keys: Vec<DirtyKey>) {
        for key in keys {
            if self.overflowed {
                return;
            }
            let bytes = key.bytes();
            if self.keys.insert(key) {
                self.bytes += bytes;
                self.overflowed = self.bytes > self.limit_bytes;
            }
        }
    }

    /// The keys recorded so far (the set starts empty again), or Err when it overflowed.
    pub fn take(&mut self) -> Result<Vec<DirtyKey>, usize> {
        if self.overflowed {
            return Err(self.limit_bytes);
        }
        self.bytes = 0;
        Ok(std::mem::take(&mut self.keys).into_iter().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::handle::LocalWrite;

    #[test]
    fn records_every_written_key_once_and_overflows_by_bytes() {
        let mut d = Dirty::new(1000);
        let mut c = PartitionCommit::default();
        c.put(&b"a"[..], &b"1"[..]).delete(&b"b"[..]);
        c.sizes.push((Bytes::from_static(b"s"), None));
        c.local.push(LocalWrite {
            token: 7,
            key: Bytes::from_static(b"i"),
            value: None,
        });
        d.record(Dirty::keys_of(&c));
        d.record(Dirty::keys_of(&c));
        let mut got = d.take().unwrap();
        got.sort_by_key(|k| format!("{k:?}"));
        assert_eq!(got.len(), 4);
        assert!(got.contains(&DirtyKey::Local(Bytes::from_static(b"i"), 7)));
        assert!(d.take().unwrap().is_empty());
        for i in 0..100u32 {
            let mut c = PartitionCommit::default();
            c.put(i.to_be_bytes().to_vec(), &b"v"[..]);
            d.record(Dirty::keys_of(&c));
        }
        assert_eq!(d.take(), Err(1000));
    }
}
