//! The change feed's paging state: where the consumer is, and for which scope.
//!
//! Format (version 0xCF, a first byte ordinary paging states never have):
//! `[0xCF][storage id u64 BE][scope fingerprint u64 BE][position: the last feed key consumed
//! without its prefix, [seq u64 BE][row key tail]]`. No partition id: positions are in the
//! table's one sequence order, which splits and restarts keep.

use crate::query::{invalid, Result};
use bytes::{BufMut, Bytes, BytesMut};

const VERSION: u8 = 0xCF;

/// Longest position accepted (a row key tail is bounded by the store's key limit).
const MAX_POSITION_BYTES: usize = crate::storage::MAX_KEY_BYTES;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FeedPosition {
    pub storage_id: u64,
    pub scope: u64,
    /// `[seq][tail]` of the last entry consumed; a first page: `[start seq]` with no tail
    /// (nothing at or after it was consumed).
    pub after: Vec<u8>,
    /// Whether `after` itself is still to be read (a first page).
    pub inclusive: bool,
}

impl FeedPosition {
    pub fn encode(&self) -> Bytes {
        let mut b = BytesMut::with_capacity(18 + self.after.len());
        b.put_u8(VERSION);
        b.put_u8(self.inclusive as u8);
        b.put_u64(self.storage_id);
        b.put_u64(self.scope);
        b.extend_from_slice(&self.after);
        b.freeze()
    }

    pub fn decode(b: &[u8]) -> Result<FeedPosition> {
        let bad = || invalid("Invalid value for the paging state of a change feed query");
        if b.len() < 26 || b[0] != VERSION || b.len() > 18 + MAX_POSITION_BYTES || b[1] > 1 {
            return Err(bad());
        }
        let u64_at = |at: usize| u64::from_be_bytes(b[at..at + 8].try_into().expect("8 bytes"));
        Ok(FeedPosition {
            inclusive: b[1] == 1,
            storage_id: u64_at(2),
            scope: u64_at(10),
            after: b[18..].to_vec(),
        })
    }
}

/// A stable fingerprint of a scope (FNV-1a over its token ranges and partition keys), so a
/// paging state is refused by a query of another scope.
pub fn fingerprint(ranges: &[(i128, i128)], keys: &[Bytes]) -> u64 {
    let mut h: u64 = 0xcbf29ce484222325;
    let mut eat = |bytes: &[u8]| {
        for &x in bytes {
            h = (h ^ x as u64).wrapping_mul(0x100000001b3);
        }
    };
    for (lo, hi) in ranges {
        eat(&lo.to_be_bytes());
        eat(&hi.to_be_bytes());
    }
    for k in keys {
        eat(&(k.len() as u64).to_be_bytes());
        eat(k);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip_and_refusals() {
        let p = FeedPosition {
            storage_id: 7,
            scope: 42,
            after: vec![1, 2, 3, 4, 5, 6, 7, 8, 9],
            inclusive: false,
        };
        assert_eq!(FeedPosition::decode(&p.encode()).unwrap(), p);
        assert!(FeedPosition::decode(&[2, 0, 0]).is_err());
        let mut b = p.encode().to_vec();
        b[1] = 9;
        assert!(FeedPosition::decode(&b).is_err());
        assert_ne!(fingerprint(&[(0, 5)], &[]), fingerprint(&[(0, 6)], &[]));
    }
}
