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

use super::*;

/// One named partition of a read: its index in the plan's partition list (for the page
/// state), token and key prefix (`row::partition_prefix`).
pub(super) struct PartitionAt {
    pub(super) index: u32,
    pub(super) token: Token,
    pub(super) prefix: Vec<u8>,
}

/// Reads the rows of one partition that `plan`'s point slices name, one `get` each (the
/// header first, if the table has one: it shadows them), in the read's order; true when the output is full (the
/// page state is set, and a resumed page scans on from that row).
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
    let mut key = header_key(prefix);
    if reader.t.clustering.is_empty() {
        // A table without clustering columns stores no partition header: it can have no
        // static columns, and DELETE of its partition deletes the one row, a deletion kept in
        // the row (`write/delete.rs`, since the first stored format). Looking one up would
        // cost a search of every memtable and a bloom probe of every disk table per read
        // (about a tenth of a point read). Tested: `a_flat_table_stores_no_partition_header`.
        reader.start(None, out.now, false)?;
    } else {
        reader.load(handle, &key, out.now, false)?;
    }
    key.pop();
    key.push(KIND_ROW);
    let rows_len = key.len();
    let n = plan.slices.len();
    for j in 0..n {
        let (lo, _) = &plan.slices[if plan.reversed { n - 1 - j } else { j }];
        // `Plan::points` holds only slices from an included whole key.
        let Bound::Included(ck) = lo else {
            continue;
        };
        key.truncate(rows_len);
        key.extend_from_slice(ck);
        let Some(v) = handle.get(&key)? else {
            continue;
        };
        out.scanned(token, key.len() + v.len());
        let dk = row::decode_key(&key, ck_types)?;
        if let Flow::Stop(more) = reader.row(out, &dk, Some(ck), &v)? {
            if more {
                out.rows.paging_state = Some(out.page_state(index, key));
            }
            return Ok(true);
        }
    }
    Ok(false)
}
