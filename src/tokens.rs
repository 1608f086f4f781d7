//! Tokens exactly as Cassandra's Murmur3Partitioner computes them.
//!
//! MurmurHash3 x64_128 with seed 0; the token is the first 64-bit half as a signed long. Cassandra's
//! implementation reads the tail bytes (length % 16) as *signed* Java bytes, sign-extending them
//! before shifting; standard murmur3 zero-extends them. Long.MIN_VALUE maps to Long.MAX_VALUE and
//! the empty key gets the minimum token.

/// A position on the ring: -2^63 ..= 2^63-1 (MIN is never produced by a key but bounds ranges).
pub type Token = i64;

pub const MIN_TOKEN: Token = i64::MIN;
pub const MAX_TOKEN: Token = i64::MAX;

const C1: u64 = 0x87c3_7b91_1142_53d5;
const C2: u64 = 0x4cf5_ad43_2745_937f;

#[inline]
fn fmix(mut k: u64) -> u64 {
    k ^= k >> 33;
    k = k.wrapping_mul(0xff51_afd7_ed55_8ccd);
    k ^= k >> 33;
    k = k.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    k ^= k >> 33;
    k
}

/// Cassandra's `MurmurHash.hash3_x64_128(key, 0, len, 0)[0]`.
pub fn murmur3_cassandra_h1(data: &[u8]) -> i64 {
    let len = data.len();
    let nblocks = len / 16;
    let mut h1: u64 = 0;
    let mut h2: u64 = 0;

    for block in data.chunks_exact(16) {
        let (a, b) = block.split_at(8);
        let mut k1 = u64::from_le_bytes(a.try_into().expect("8 bytes"));
        let mut k2 = u64::from_le_bytes(b.try_into().expect("8 bytes"));

        k1 = k1.wrapping_mul(C1).rotate_left(31).wrapping_mul(C2);
        h1 ^= k1;
        h1 = h1
            .rotate_left(27)
            .wrapping_add(h2)
            .wrapping_mul(5)
            .wrapping_add(0x52dc_e729);

        k2 = k2.wrapping_mul(C2).rotate_left(33).wrapping_mul(C1);
        h2 ^= k2;
        h2 = h2
            .rotate_left(31)
            .wrapping_add(h1)
            .wrapping_mul(5)
            .wrapping_add(0x3849_5ab5);
    }

    let tail = &data[nblocks * 16..];
    // Java: `((long) key.get(offset + i)) << shift` with a signed byte: sign extension.
    let byte = |i: usize| tail[i] as i8 as i64 as u64;
    let mut k1: u64 = 0;
    let mut k2: u64 = 0;
    let rem = tail.len();
    if rem > 8 {
        for i in (8..rem).rev() {
            k2 ^= byte(i) << ((i - 8) * 8);
        }
        k2 = k2.wrapping_mul(C2).rotate_left(33).wrapping_mul(C1);
        h2 ^= k2;
    }
    if rem > 0 {
        for i in (0..rem.min(8)).rev() {
            k1 ^= byte(i) << (i * 8);
        }
        k1 = k1.wrapping_mul(C1).rotate_left(31).wrapping_mul(C2);
        h1 ^= k1;
    }

    h1 ^= len as u64;
    h2 ^= len as u64;
    h1 = h1.wrapping_add(h2);
    h2 = h2.wrapping_add(h1);
    h1 = fmix(h1);
    h2 = fmix(h2);
    h1 = h1.wrapping_add(h2);
    h1 as i64
}

/// The token of a serialized partition key (for composite keys, the composite encoding).
pub fn token_of(key: &[u8]) -> Token {
    if key.is_empty() {
        return MIN_TOKEN;
    }
    match murmur3_cassandra_h1(key) {
        i64::MIN => i64::MAX,
        t => t,
    }
}

/// Bits of the token given to each level of a hierarchical (MultiHash) key, by number of levels.
fn level_bits(levels: usize) -> &'static [u32] {
    match levels {
        2 => &[32, 32],
        _ => &[22, 21, 21],
    }
}

/// The token of a hierarchical partition key (`partition_key_kind = 'MultiHash'`, 2 or 3 levels).
///
/// Each level is hashed on its own (Cassandra's Murmur3 of the component's bytes, as an unsigned
/// 64-bit number) and the top bits of the hashes are concatenated: 32 + 32 bits for two levels,
/// 22 + 21 + 21 bits for three. The result `u` is mapped onto the ring as `u - 2^63`, which keeps
/// order, so every prefix of the key (level 1, or levels 1-2) owns one contiguous token range:
/// see [`multihash_prefix_range`]. Different prefixes can share a range only when their level
/// hashes collide in those top bits; queries filter rows by the actual values.
pub fn multihash_token(components: &[&[u8]]) -> Token {
    let bits = level_bits(components.len());
    let mut u: u64 = 0;
    let mut shift = 64u32;
    for (c, &b) in components.iter().zip(bits) {
        let h = murmur3_cassandra_h1(c) as u64;
        shift -= b;
        u |= (h >> (64 - b)) << shift;
    }
    // Token MIN is never produced by a key (the ring is (MIN, MAX]).
    let u = u.max(1);
    (u ^ (1 << 63)) as i64
}

/// The token range (start exclusive, end inclusive) that holds every key with the given prefix
/// of levels (`prefix.len()` < `levels`).
pub fn multihash_prefix_range<V: AsRef<[u8]>>(prefix: &[V], levels: usize) -> (Token, Token) {
    let bits = level_bits(levels);
    let mut u: u64 = 0;
    let mut shift = 64u32;
    for (c, &b) in prefix.iter().zip(bits) {
        let h = murmur3_cassandra_h1(c.as_ref()) as u64;
        shift -= b;
        u |= (h >> (64 - b)) << shift;
    }
    let lo = u;
    let hi = if shift == 0 {
        u
    } else {
        u | ((1u64 << shift) - 1)
    };
    let to_token = |x: u64| (x ^ (1 << 63)) as i64;
    // (start, end]: start is one below the lowest token of the range.
    let start = if lo <= 1 { MIN_TOKEN } else { to_token(lo) - 1 };
    (start, to_token(hi))
}

/// Cassandra's composite partition key encoding: per component a u16 big-endian length, the
/// bytes, then 0x00. Single-component keys are the raw value instead (see `partition_key_bytes`).
pub fn composite_key(components: &[&[u8]], out: &mut Vec<u8>) {
    for c in components {
        let len = u16::try_from(c.len()).unwrap_or(u16::MAX);
        out.extend_from_slice(&len.to_be_bytes());
        out.extend_from_slice(c);
        out.push(0);
    }
}

/// The serialized partition key that is hashed: raw value for one column, composite otherwise.
pub fn partition_key_bytes(components: &[&[u8]]) -> Vec<u8> {
    match components {
        [single] => single.to_vec(),
        many => {
            let mut out = Vec::with_capacity(many.iter().map(|c| c.len() + 3).sum());
            composite_key(many, &mut out);
            out
        }
    }
}

/// Splits a composite key back into its components (None if malformed).
pub fn split_composite(mut key: &[u8], n: usize) -> Option<Vec<&[u8]>> {
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        out.push(next_component(&mut key)?);
    }
    key.is_empty().then_some(out)
}

/// Component `i` of a composite key of `n` components, as [`split_composite`] finds it (None
/// if the key is malformed), without building the list (scans project keys row by row).
pub fn composite_part(mut key: &[u8], n: usize, i: usize) -> Option<&[u8]> {
    let mut part = None;
    for j in 0..n {
        let c = next_component(&mut key)?;
        if j == i {
            part = Some(c);
        }
    }
    key.is_empty().then_some(part).flatten()
}

/// The component `key` starts with (`[u16 length][bytes][0]`); moves `key` past it.
fn next_component<'a>(key: &mut &'a [u8]) -> Option<&'a [u8]> {
    let k: &'a [u8] = key;
    let len = u16::from_be_bytes([*k.first()?, *k.get(1)?]) as usize;
    let part = k.get(2..2 + len)?;
    *key = k.get(2 + len + 1..)?;
    Some(part)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_vectors() {
        assert_eq!(token_of(b"a"), -8839064797231613815);
        assert_eq!(token_of(&1i32.to_be_bytes()), -4069959284402364209);
        assert_eq!(token_of(&1i64.to_be_bytes()), 6292367497774912474);
        assert_eq!(token_of(b"123"), -7468325962851647638);
        assert_eq!(token_of(&[0xfe; 8]), -8927430733708461935);
        let key = partition_key_bytes(&[b"a", &1i32.to_be_bytes()]);
        assert_eq!(token_of(&key), 8247712171917364652);
        assert_eq!(token_of(b""), MIN_TOKEN);
    }

    #[test]
    fn multihash_prefixes_are_contiguous() {
        let key = |t: &str, u: &str, s: &str| {
            multihash_token(&[t.as_bytes(), u.as_bytes(), s.as_bytes()])
        };
        let (lo, hi) = multihash_prefix_range(&[b"tenant-7"], 3);
        let (ulo, uhi) = multihash_prefix_range(&[&b"tenant-7"[..], &b"user-1"[..]], 3);
        assert!(
            lo <= ulo && uhi <= hi,
            "a longer prefix lies inside the shorter one's range"
        );
        for u in 0..50 {
            for s in 0..5 {
                let t = key("tenant-7", &format!("user-{u}"), &format!("s{s}"));
                assert!(t > lo && t <= hi, "every key of the tenant is in its range");
                if u == 1 {
                    assert!(t > ulo && t <= uhi);
                }
            }
        }
        let other = key("tenant-8", "user-1", "s0");
        assert!(
            !(other > lo && other <= hi) || {
                let (olo, _) = multihash_prefix_range(&[b"tenant-8"], 3);
                olo == lo
            }
        );
        // two levels
        let (lo2, hi2) = multihash_prefix_range(&[b"a"], 2);
        let t2 = multihash_token(&[b"a", b"zzz"]);
        assert!(t2 > lo2 && t2 <= hi2);
        assert_eq!(hi2 as i128 - lo2 as i128, 1i128 << 32);
    }

    #[test]
    fn composite_round_trip() {
        let key = partition_key_bytes(&[b"abc", b"", &[1, 2]]);
        let parts = split_composite(&key, 3).unwrap();
        assert_eq!(parts, vec![&b"abc"[..], &b""[..], &[1u8, 2][..]]);
        assert!(split_composite(&key, 2).is_none());
        assert!(split_composite(&key[..key.len() - 1], 3).is_none());
    }
}
