//! Modification sequences: one hybrid clock per process, `max(now in µs, last + 1)`.
//!
//! Why a clock and not a counter: a consumer starts the feed at a wall-clock time, so the
//! sequence must be comparable with one; why hybrid: it must still grow when the clock stalls
//! or steps back, and across restarts (each table's highest stored sequence is read back
//! before its first write or feed read after a start, one reverse seek).
//!
//! Writes in flight: a writer takes its sequence before it commits, so a faster writer with a
//! later sequence may commit first. A reader reads only up to [`safe_bound`], the sequence
//! below every write still in flight, so it never passes a sequence that is yet to appear.
//! Bounded: one entry per write being applied (each holds its partitions' lock stripes).

use super::keys;
use crate::storage::{Space, Store};
use parking_lot::Mutex;
use std::collections::BTreeSet;
use std::ops::Bound;

struct State {
    last: u64,
    in_flight: BTreeSet<u64>,
    /// Tables whose highest stored sequence `last` already accounts for.
    recovered: BTreeSet<u64>,
}

static STATE: Mutex<State> = Mutex::new(State {
    last: 0,
    in_flight: BTreeSet::new(),
    recovered: BTreeSet::new(),
});

/// A sequence taken by a write: in flight until dropped (after the write committed or failed).
pub struct Ticket {
    pub seq: u64,
}

impl Drop for Ticket {
    fn drop(&mut self) {
        STATE.lock().in_flight.remove(&self.seq);
    }
}

fn now_micros() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

/// Takes the next sequence for a write to the tables `storage_ids`.
pub fn ticket(store: &dyn Store, storage_ids: &[u64]) -> crate::storage::Result<Ticket> {
    for &sid in storage_ids {
        recover(store, sid)?;
    }
    let mut s = STATE.lock();
    let seq = now_micros().max(s.last + 1);
    s.last = seq;
    s.in_flight.insert(seq);
    Ok(Ticket { seq })
}

/// The highest sequence a reader of table `storage_id` may read up to: every write with a
/// sequence up to it has committed (or failed).
pub fn safe_bound(store: &dyn Store, storage_id: u64) -> crate::storage::Result<u64> {
    recover(store, storage_id)?;
    let s = STATE.lock();
    Ok(match s.in_flight.first() {
        Some(&oldest) => oldest - 1,
        None => s.last,
    })
}

/// Makes the clock pass table `storage_id`'s highest stored sequence (once per process).
fn recover(store: &dyn Store, storage_id: u64) -> crate::storage::Result<()> {
    if STATE.lock().recovered.contains(&storage_id) {
        return Ok(());
    }
    let lo = keys::feed_prefix(storage_id);
    let hi = keys::feed_prefix(storage_id + 1);
    let highest = match store
        .scan(
            Space::Data,
            Bound::Included(&lo[..]),
            Bound::Excluded(&hi[..]),
            true,
        )
        .next()
    {
        Some(r) => keys::split_entry(&r?.0[lo.len()..]).map_or(0, |(seq, _)| seq),
        None => 0,
    };
    let mut s = STATE.lock();
    s.last = s.last.max(highest);
    s.recovered.insert(storage_id);
    Ok(())
}
