//! The paging state a client gets back and resumes with: where a paged query stopped, its
//! versioned encoding, and the check that refuses a malformed one.

use super::*;

/// For the paging fuzz target: a client's paging state decoded and encoded again (None when
/// it is refused).
#[doc(hidden)]
pub fn paging_state_roundtrip(b: &[u8]) -> Option<Bytes> {
    PagingState::decode(b).ok().map(|p| p.encode())
}

/// Where a paged query stopped.
#[derive(Debug, Default)]
pub(super) struct PagingState {
    /// Index into the partition list (partition-list queries).
    pub(super) partition: u32,
    /// Storage key of the last row returned (empty: start of the partition).
    pub(super) last_key: Vec<u8>,
    /// Rows still allowed by LIMIT.
    pub(super) remaining: Option<u32>,
    /// Rows already returned from the partition of `last_key` (PER PARTITION LIMIT).
    pub(super) partition_rows: u32,
    /// Resume at `last_key` itself (GROUP BY stopped before a row it did not consume).
    pub(super) inclusive: bool,
}

pub(super) const PAGING_VERSION: u8 = 2;

impl PagingState {
    pub(super) fn encode(&self) -> Bytes {
        let mut b = BytesMut::with_capacity(16 + self.last_key.len());
        b.put_u8(PAGING_VERSION);
        b.put_u32(self.partition);
        b.put_u32(self.remaining.map_or(u32::MAX, |r| r));
        b.put_u32(self.partition_rows | if self.inclusive { 1 << 31 } else { 0 });
        b.put_u32(self.last_key.len() as u32);
        b.extend_from_slice(&self.last_key);
        b.freeze()
    }
    pub(super) fn decode(b: &[u8]) -> Result<PagingState> {
        let bad = || invalid("Invalid value for the paging state");
        if b.len() < 17 || b[0] != PAGING_VERSION {
            return Err(bad());
        }
        let int = |at: usize| -> Result<u32> {
            Ok(u32::from_be_bytes(
                b[at..at + 4].try_into().map_err(|_| bad())?,
            ))
        };
        let (partition, remaining, partition_rows) = (int(1)?, int(5)?, int(9)?);
        let len = int(13)? as usize;
        if b.len() != 17 + len {
            return Err(bad());
        }
        Ok(PagingState {
            partition,
            remaining: (remaining != u32::MAX).then_some(remaining),
            partition_rows: partition_rows & !(1 << 31),
            inclusive: partition_rows & (1 << 31) != 0,
            last_key: b[17..].to_vec(),
        })
    }

    /// The bound a resumed scan starts from (ascending) or ends at (descending).
    pub(super) fn resume_bound(&self) -> Bound<Vec<u8>> {
        if self.inclusive {
            Bound::Included(self.last_key.clone())
        } else {
            Bound::Excluded(self.last_key.clone())
        }
    }
}
