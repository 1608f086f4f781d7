//! Point reads: a partition read whose slices each name one whole row key (`Plan::points`)
//! looks up the partition header and each row with the handle's `get` instead of scanning.
//!
//! Why: on the embedded store a range scan seeks into every memtable and disk table (it cannot
//! ask a bloom filter whether a table holds the key), so a point read of data in disk tables
//! spent most of its CPU there; a `get` skips the tables whose bloom filter rules the key out
//! and stops at the newest version. The rows are the ones the scan meets, fed to the same
//! [`PartitionRows`] (header shadowing, TTL, filters, statics, limits, paging), counted as
//! stored rows read the same way (`Output::scanned`: the trace's "Read N stored rows" and the
//! RU charge); the header is not counted, as in the scan.
//!
//! Isolation: a write to one partition is applied atomically (one commit), and a read of it
//! must see all of it or none, as in Cassandra, but separate `get`s each see the store as it is
//! then: a header read before a commit of header and row, and the row read after it, would
//! give the new row under the old statics. So when a read looks up more than one key, each
//! lookup is made under a write stamp (`storage::write_stamps`: taken before it, while no
//! write of the key's stripe is in flight) and the lookups count only if no stamp expired by
//! the time the last one is done: then no write of any of those keys began or was in flight
//! during the read, and what it saw is one state of the partition. Otherwise it looks again
//! (`STAMPED_ATTEMPTS` times), then reads the keys from one snapshot of the store (always
//! consistent, but past the row cache). A single lookup is consistent by itself and takes no
//! stamp, which keeps the point read of a table without clustering columns as it was. A backend
//! that reads several keys in one access of one state (PostgreSQL: one statement,
//! `PartitionHandle::get_together`) does that instead.

use super::*;
use smallvec::SmallVec;

/// One named partition of a read: its index in the plan's partition list (for the page
/// state), token and key prefix (`row::partition_prefix`).
pub(super) struct PartitionAt {
    pub(super) index: u32,
    pub(super) token: Token,
    pub(super) prefix: Vec<u8>,
}

/// Tries of stamped lookups before a read takes a snapshot (module doc): writes of the same
/// stripes are rare enough that a second try nearly always finds them done.
const STAMPED_ATTEMPTS: usize = 3;

/// Reads the rows of one partition that `plan`'s point slices name, one `get` each (the
/// header first, if the table has one: it shadows them), in the read's order; true when the
/// output is full (the page state is set, and a resumed page scans on from that row).
pub(super) fn read_points(
    handle: &dyn PartitionHandle,
    reader: &mut PartitionRows,
    out: &mut Output,
    plan: &Plan,
    ck_types: &[(&CqlType, bool)],
    at: PartitionAt,
) -> Result<bool> {
    let PartitionAt {
        index,
        token,
        prefix,
    } = at;
    // Looking up a header the table never stores (`TableDef::stores_headers`) would cost a
    // search of every memtable and a bloom probe of every disk table per read (about a tenth
    // of a point read).
    let has_header = reader.t.stores_headers();
    let keys = point_keys(plan, prefix, has_header);
    let mut values = read_together(handle, &keys)?.into_iter();
    let mut keys = keys.into_iter();
    let header = match has_header {
        true => {
            keys.next();
            values.next().flatten()
        }
        false => None,
    };
    reader.start(header.as_ref(), out.now, false)?;
    let mut decoder = row::KeyDecoder::default();
    for (key, value) in keys.zip(values) {
        let Some(v) = value else {
            continue;
        };
        out.scanned(token, key.len() + v.len());
        let dk = decoder.decode(&key, ck_types)?;
        // The clustering key bytes: what follows the partition prefix and the kind byte.
        let ck = &key[dk.prefix_len + 1..];
        if let Flow::Stop(more) = reader.row(out, &dk, Some(ck), &v)? {
            if more {
                out.rows.paging_state = Some(out.page_state(index, key));
            }
            return Ok(true);
        }
    }
    Ok(false)
}

/// The keys a point read looks up, in the read's order: the header's (if `has_header`), then
/// each named row's. Inline room for a header and a row: the common point read allocates no
/// list, and its last key reuses `prefix`'s buffer.
fn point_keys(plan: &Plan, prefix: Vec<u8>, has_header: bool) -> Keys {
    let n = plan.slices.len();
    // `Plan::points` holds only slices from an included whole key.
    let named =
        (0..n).filter_map(
            |j| match &plan.slices[if plan.reversed { n - 1 - j } else { j }].0 {
                Bound::Included(ck) => Some(ck),
                _ => None,
            },
        );
    let mut keys = Keys::new();
    let mut rows_prefix = prefix;
    if has_header {
        keys.push(header_key(rows_prefix.clone()));
    }
    rows_prefix.push(KIND_ROW);
    let mut named = named.peekable();
    while let Some(ck) = named.next() {
        if named.peek().is_some() {
            keys.push([&rows_prefix[..], ck].concat());
        } else {
            rows_prefix.extend_from_slice(ck);
            keys.push(std::mem::take(&mut rows_prefix));
        }
    }
    keys
}

/// A point read's keys, and what it found under them.
type Keys = SmallVec<[Vec<u8>; 2]>;
type Values = SmallVec<[Option<Bytes>; 2]>;

/// The values of `keys`, as of one state of the store (module doc).
pub(super) fn read_together(handle: &dyn PartitionHandle, keys: &[Vec<u8>]) -> Result<Values> {
    if let [key] = keys {
        return Ok(smallvec::smallvec![handle.get(key)?]);
    }
    if let Some(values) = handle.get_together(keys) {
        return Ok(values?.into_iter().collect());
    }
    for _ in 0..STAMPED_ATTEMPTS {
        if let Some(values) = read_stamped(handle, keys)? {
            return Ok(values);
        }
    }
    let snapshot = handle.snapshot();
    let values = keys.iter().map(|k| snapshot.get(k));
    Ok(values.collect::<std::result::Result<_, _>>()?)
}

/// One try of stamped lookups: the values, or None if a write of one of the keys' stripes
/// was in flight or began before the last lookup was done.
fn read_stamped(handle: &dyn PartitionHandle, keys: &[Vec<u8>]) -> Result<Option<Values>> {
    let mut stamps: SmallVec<[_; 2]> = SmallVec::with_capacity(keys.len());
    let mut values = Values::with_capacity(keys.len());
    for key in keys {
        // Taken before the lookup (`write_stamps.rs`).
        let Some(stamp) = handle.stamp(key) else {
            return Ok(None);
        };
        stamps.push(stamp);
        values.push(handle.get(key)?);
    }
    let changed = keys
        .iter()
        .zip(&stamps)
        .any(|(k, s)| handle.changed_since(k, s));
    Ok((!changed).then_some(values))
}

#[cfg(test)]
mod tests {
    use super::super::watched::watched;
    use super::*;

    fn found(values: Values) -> Vec<Option<Vec<u8>>> {
        values.into_iter().map(|v| v.map(|b| b.to_vec())).collect()
    }

    /// Reads the three keys through a handle `restless` or not: the store's values, with
    /// (lookups, snapshots) as given.
    fn reads_all_three(restless: bool, want_counts: (usize, usize)) {
        let dir = tempfile::tempdir().unwrap();
        let (_store, h, keys) = watched(dir.path(), restless);
        let values = read_together(&h, &keys).unwrap();
        let want = vec![Some(b"1".to_vec()), Some(b"2".to_vec()), None];
        assert_eq!(found(values), want);
        assert_eq!(h.counts(), want_counts);
    }

    /// With no write in the way, the lookups count on their first try: no snapshot.
    #[test]
    fn quiet_lookups_count_on_the_first_try() {
        reads_all_three(false, (3, 0));
    }

    /// Lookups whose stamps keep expiring are tried `STAMPED_ATTEMPTS` times, then read from
    /// one snapshot, which gives the same values.
    #[test]
    fn restless_lookups_fall_back_to_one_snapshot() {
        reads_all_three(true, (STAMPED_ATTEMPTS * 3, 1));
    }

    /// One key is one lookup, consistent by itself: no stamp, no snapshot.
    #[test]
    fn a_single_key_is_one_plain_lookup() {
        let dir = tempfile::tempdir().unwrap();
        let (_store, h, keys) = watched(dir.path(), true);
        let values = read_together(&h, &keys[1..2]).unwrap();
        assert_eq!(found(values), vec![Some(b"2".to_vec())]);
        assert_eq!(h.counts(), (1, 0));
    }
}
