//! Routing a read over the table's physical partitions: MultiHash key-prefix token ranges,
//! and the routing line of a trace (single-partition, targeted, fan-out).

use super::*;

/// For a MultiHash table whose WHERE gives a prefix of the key levels (= or IN on levels 1..k,
/// k below the number of levels), the token ranges holding those prefixes, intersected with
/// (token_lo, token_hi]; None when the restriction is not such a prefix.
pub(super) fn multihash_prefix_ranges(
    t: &TableDef,
    pk_vals: &[Option<Vec<Bytes>>],
    token_lo: i128,
    token_hi: i128,
) -> Option<Vec<(i128, i128)>> {
    if t.options.partition_key_kind != crate::schema::PartitionKeyKind::MultiHash {
        return None;
    }
    let given = pk_vals.iter().take_while(|v| v.is_some()).count();
    if given == 0 || given == pk_vals.len() || pk_vals[given..].iter().any(|v| v.is_some()) {
        return None;
    }
    let mut ranges: Vec<(i128, i128)> =
        crate::query::write::combinations(pk_vals[..given].iter().flatten())
            .iter()
            .map(|prefix| {
                let (a, b) = crate::tokens::multihash_prefix_range(prefix, pk_vals.len());
                ((a as i128).max(token_lo), (b as i128).min(token_hi))
            })
            .filter(|(a, b)| a < b)
            .collect();
    ranges.sort_unstable();
    ranges.dedup();
    // Merge overlapping ranges (prefixes whose hashes collide).
    let mut merged: Vec<(i128, i128)> = Vec::with_capacity(ranges.len());
    for (a, b) in ranges {
        match merged.last_mut() {
            Some(last) if a <= last.1 => last.1 = last.1.max(b),
            _ => merged.push((a, b)),
        }
    }
    Some(merged)
}

/// How a read is routed over the table's physical partitions, for traces: single-partition,
/// targeted (N of M) or fan-out, with the partitions read.
pub(super) fn routing(engine: &Engine, t: &TableDef, target: &Target) -> String {
    let Some(map) = engine.maps.get(t.storage_id) else {
        return "Routing: table has no partition map".to_string();
    };
    let total = map.parts.len();
    let list = |ids: &[u64]| {
        ids.iter()
            .map(|i| i.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let over_ranges = |ranges: &[(i128, i128)]| -> Vec<u64> {
        let mut ids: Vec<u64> = map
            .parts
            .iter()
            .filter(|p| {
                ranges
                    .iter()
                    .any(|&(lo, hi)| (p.end as i128) > lo && (p.start as i128) < hi)
            })
            .map(|p| p.id)
            .collect();
        ids.dedup();
        ids
    };
    // A scan of the whole ring fans out; a key prefix or token range is targeted at the
    // partitions overlapping it (all of them, if it overlaps all).
    let describe = |ids: Vec<u64>, what: &str, targeted: bool| {
        if !targeted {
            format!(
                "Routing: fan-out to all {total} physical partitions ({what}): ids [{}]",
                list(&ids)
            )
        } else {
            format!(
                "Routing: targeted, {} of {total} physical partitions ({what}): ids [{}]",
                ids.len(),
                list(&ids)
            )
        }
    };
    match target {
        Target::Partitions(keys) => {
            let mut ids: Vec<u64> = keys
                .iter()
                .map(|k| map.route(table_token(t, k)).id)
                .collect();
            ids.sort_unstable();
            ids.dedup();
            if keys.len() == 1 {
                // The id and the position in token order, so "4 of 1" cannot be misread.
                let token = table_token(t, &keys[0]);
                let p = map.route(token);
                let position = map.parts.iter().position(|q| q.id == p.id).unwrap_or(0) + 1;
                format!(
                    "Routing: single-partition, physical partition id {} ({position} of {total}, tokens ({}, {}]), token {token}",
                    p.id, p.start, p.end
                )
            } else {
                format!(
                    "Routing: targeted, {} of {total} physical partitions for {} partition keys: ids [{}]",
                    ids.len(),
                    keys.len(),
                    list(&ids)
                )
            }
        }
        Target::Range(lo, hi) => {
            let full = *lo < MIN_TOKEN as i128 && *hi >= MAX_TOKEN as i128;
            describe(
                over_ranges(&[(*lo, *hi)]),
                if full { "full scan" } else { "token range" },
                !full,
            )
        }
        Target::Ranges(ranges) => describe(over_ranges(ranges), "key prefix", true),
        Target::Index { index, lo, hi, .. } => {
            // Index entries are local to each physical partition: one range read per
            // partition overlapping the token bounds, in token order.
            let full = *lo < MIN_TOKEN as i128 && *hi >= MAX_TOKEN as i128;
            let what = format!(
                "secondary index {}, local: one index range read per partition, in token order",
                index.name
            );
            describe(over_ranges(&[(*lo, *hi)]), &what, !full)
        }
    }
}
