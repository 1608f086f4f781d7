//! Purging expired and deleted data after gc_grace_seconds, so disk space comes back.
//!
//! The store runs a filter over table data while it compacts (in key order). For each row it
//! drops tombstones, expired cells and markers, and row deletions once gc_grace_seconds have
//! passed since they were written (or expired); a row left empty is removed. Rows that follow
//! their partition header in the same compaction also lose what the partition deletion and range
//! tombstones shadow. Writes merge with the stored row, so a cell tombstone shadows nothing in
//! another key and dropping it after gc_grace_seconds is safe. Partition deletions and range
//! tombstones are kept: rows they shadow may live in parts of the store a compaction does not see.

use super::row::{self, RowData, KIND_HEADER, KIND_ROW};
use super::Engine;
use crate::storage::{Purge, PurgeFilter};
use bytes::Bytes;
use std::collections::HashMap;
use std::sync::{Arc, Weak};

/// Installs the purge filter of this engine's tables into its store.
pub fn install(engine: &Arc<Engine>) {
    let weak: Weak<Engine> = Arc::downgrade(engine);
    engine
        .store
        .set_purge_filter(Arc::new(move || -> PurgeFilter {
            let gc: HashMap<u64, i32> = match weak.upgrade() {
                Some(e) => {
                    let schema = e.schema();
                    schema
                        .keyspaces
                        .values()
                        .flat_map(|k| k.tables.values())
                        .map(|t| (t.storage_id, t.options.gc_grace_seconds))
                        .collect()
                }
                None => HashMap::new(),
            };
            let mut f = Filter {
                gc,
                now: super::now_secs(),
                header: None,
            };
            Box::new(move |k: &[u8], v: &[u8]| f.filter(k, v))
        }));
}

struct Filter {
    /// gc_grace_seconds per table storage id (tables unknown to this snapshot are kept as is).
    gc: HashMap<u64, i32>,
    now: i32,
    /// The last partition header seen: its partition prefix and content.
    header: Option<(Vec<u8>, RowData)>,
}

impl Filter {
    fn filter(&mut self, key: &[u8], value: &[u8]) -> Purge {
        let Some(sid) = key
            .get(..8)
            .and_then(|b| b.try_into().ok())
            .map(u64::from_be_bytes)
        else {
            return Purge::Keep;
        };
        let Some(&gc) = self.gc.get(&sid) else {
            return Purge::Keep;
        };
        let Some((kind_at, kind)) = kind_of(key) else {
            return Purge::Keep;
        };
        let Ok(mut data) = RowData::decode(&Bytes::copy_from_slice(value)) else {
            return Purge::Keep;
        };
        let before = data.clone();
        if kind == KIND_HEADER {
            purge_row(&mut data, self.now, gc);
            self.header = Some((key[..kind_at].to_vec(), data.clone()));
        } else if kind == KIND_ROW {
            if let Some((prefix, h)) = &self.header {
                if key.starts_with(prefix) && prefix.len() == kind_at {
                    if let Some((dts, _)) = h.deletion {
                        data.shadow_at(dts);
                    }
                    if let Some(dts) = h.range_deletion(&key[kind_at + 1..]) {
                        data.shadow_at(dts);
                    }
                }
            }
            purge_row(&mut data, self.now, gc);
            purge_row_deletion(&mut data, self.now, gc);
        } else {
            return Purge::Keep;
        }
        if data == before {
            Purge::Keep
        } else if data.marker.is_none()
            && data.deletion.is_none()
            && data.cells.is_empty()
            && data.complex.is_empty()
            && data.ranges.is_empty()
        {
            Purge::Remove
        } else {
            let mut out = Vec::with_capacity(data.encoded_len());
            data.encode(&mut out);
            Purge::Replace(out)
        }
    }
}

/// Position and value of the kind byte of a table data key.
fn kind_of(key: &[u8]) -> Option<(usize, u8)> {
    let d = row::decode_key(key, &[]).ok()?;
    // [storage id][token][escaped key][kind]: the escaped key ends with 0x00 0x01.
    let mut at = 16;
    loop {
        match (key.get(at), key.get(at + 1)) {
            (Some(0), Some(1)) => break,
            (Some(0), Some(_)) => at += 2,
            (Some(_), _) => at += 1,
            (None, _) => return None,
        }
    }
    Some((at + 2, d.kind))
}

/// Drops what is purgeable in a row (or header) at `now` with `gc` seconds of grace.
fn purge_row(row: &mut RowData, now: i32, gc: i32) {
    let gone = |t: i32| i64::from(t) + i64::from(gc) <= i64::from(now);
    let expired = |ms: i64| ms != 0 && ms.div_euclid(1000) + i64::from(gc) <= i64::from(now);
    row.cells.retain(|c| {
        if c.value.is_none() {
            !gone(c.local_deletion)
        } else {
            !expired(c.expiry)
        }
    });
    if row.marker.is_some_and(|m| expired(m.expiry)) {
        row.marker = None;
    }
    for c in &mut row.complex {
        c.elems.retain(|e| {
            if e.value.is_none() {
                !gone(e.local_deletion)
            } else {
                !expired(e.expiry)
            }
        });
        if c.deletion.is_some_and(|(_, ldt)| gone(ldt)) {
            c.deletion = None;
        }
    }
    row.complex
        .retain(|c| c.deletion.is_some() || !c.elems.is_empty());
}

/// Drops a row deletion once purgeable. Rows only: a row deletion shadows only its own key,
/// whose older content was merged away when it was written; a partition header's deletion
/// shadows rows under other keys and is kept.
fn purge_row_deletion(row: &mut RowData, now: i32, gc: i32) {
    if row
        .deletion
        .is_some_and(|(_, ldt)| i64::from(ldt) + i64::from(gc) <= i64::from(now))
    {
        row.deletion = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::query::row::{Cell, Marker};

    fn cell(col: u32, ts: i64, expiry: i64, v: Option<&'static [u8]>, ldt: i32) -> Cell {
        Cell {
            col,
            ts,
            ttl: if expiry != 0 { 10 } else { 0 },
            expiry,
            value: v.map(Bytes::from_static),
            local_deletion: ldt,
        }
    }

    #[test]
    fn purges_after_grace() {
        let mut r = RowData {
            marker: Some(Marker {
                ts: 1,
                ttl: 10,
                expiry: 100_000,
            }),
            deletion: None,
            cells: vec![
                cell(1, 1, 100_000, Some(b"a"), 0),
                cell(2, 1, 0, None, 100),
                cell(3, 1, 0, Some(b"keep"), 0),
            ],
            ranges: Vec::new(),
            ..Default::default()
        };
        let mut early = r.clone();
        purge_row(&mut early, 105, 10);
        assert_eq!(early, r, "nothing before gc_grace_seconds");
        purge_row(&mut r, 110, 10);
        assert!(r.marker.is_none());
        assert_eq!(r.cells.len(), 1);
        assert_eq!(r.cells[0].col, 3);
        let mut d = RowData {
            deletion: Some((5, 100)),
            ..Default::default()
        };
        purge_row_deletion(&mut d, 100, 0);
        assert!(d.deletion.is_none());
    }
}
