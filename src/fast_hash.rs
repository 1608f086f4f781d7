//! A fast, non-cryptographic hasher for the hot path's small maps and lock stripes.
//!
//! Why: the standard `HashMap` hashes with SipHash-1-3, about 100-200 instructions per
//! key; a prepared point write hashed a dozen keys (partition maps by storage id, lock stripes
//! by partition key, its commit's partitions), 6% of its CPU in callgrind. The keys hashed
//! here are storage ids, partition ids and partition keys whose worst case is only contention
//! on a lock stripe or a longer probe in a small table, never a wrong answer; maps keyed by
//! what clients choose freely and that grow with it (HashDoS) keep SipHash.
//!
//! The mix: each 8-byte word is folded in as FxHash does (rotate, xor, multiply by an odd
//! constant), the length last, then `finish` runs Murmur3's 64-bit finalizer so that the low
//! bits (`% stripes`, hashbrown's buckets) depend on every input bit.

use std::hash::{BuildHasherDefault, Hasher};

const K: u64 = 0x517c_c1b7_2722_0a95;

/// See the module doc.
#[derive(Default, Clone, Copy)]
pub struct FastHasher(u64);

impl FastHasher {
    #[inline]
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(K);
    }
}

impl Hasher for FastHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.add(u64::from_le_bytes(c.try_into().expect("8 bytes")));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut tail = [0u8; 8];
            tail[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(tail));
        }
        self.add(bytes.len() as u64);
    }

    #[inline]
    fn write_u64(&mut self, n: u64) {
        self.add(n);
    }

    #[inline]
    fn write_usize(&mut self, n: usize) {
        self.add(n as u64);
    }

    #[inline]
    fn finish(&self) -> u64 {
        let mut k = self.0;
        k ^= k >> 33;
        k = k.wrapping_mul(0xff51_afd7_ed55_8ccd);
        k ^= k >> 33;
        k = k.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        k ^ (k >> 33)
    }
}

/// `HashMap` hasher state for [`FastHasher`].
pub type BuildFast = BuildHasherDefault<FastHasher>;

/// A `HashMap` with [`FastHasher`].
pub type FastMap<K, V> = std::collections::HashMap<K, V, BuildFast>;

/// The hash of `value` (for lock stripes).
#[inline]
pub fn hash_of(value: &(impl std::hash::Hash + ?Sized)) -> u64 {
    let mut h = FastHasher::default();
    value.hash(&mut h);
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Keys that differ in one byte, or only in length (a tail of zero bytes), hash apart,
    /// and consecutive ids spread over the stripes (the low bits see every input bit).
    #[test]
    fn spreads_keys_over_stripes() {
        assert_ne!(hash_of(&b"ab"[..]), hash_of(&b"ab\0"[..]));
        assert_ne!(hash_of(&b"abcdefgh1"[..]), hash_of(&b"abcdefgh2"[..]));
        let mut used = [0u32; 64];
        for id in 0..6400u64 {
            used[(hash_of(&id) % 64) as usize] += 1;
        }
        assert!(used.iter().all(|&n| (50..=150).contains(&n)), "{used:?}");
        let mut used = [0u32; 64];
        for id in 0..6400u64 {
            used[(hash_of(&id.to_be_bytes()[..]) % 64) as usize] += 1;
        }
        assert!(used.iter().all(|&n| (50..=150).contains(&n)), "{used:?}");
    }
}
