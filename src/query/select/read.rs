//! Reading: admission on the physical partitions' throughput budgets, then the readers for
//! virtual (system) tables, stored tables (named partitions and token ranges) and index lookups.

use super::range_share::{RangeShare, Step};
use super::*;

/// Admits a read on the throughput budgets of the physical partitions it targets; returns
/// the table's budget.
pub(super) fn admit_read(
    engine: &Engine,
    schema: &crate::schema::Schema,
    t: &TableDef,
    plan: &Plan,
    map: Option<&crate::partition::map::PartitionMap>,
    opts: &QueryOptions,
) -> Result<Option<crate::partition::throttle::TableBudget>> {
    use crate::partition::throttle;
    let Some(map) = map else {
        return Ok(None);
    };
    // Cluster mode: a read of one partition key runs on its partition's owner (whose bucket
    // charges it); reads of several run here, reading the shared store.
    if let Target::Partitions(_) = &plan.target {
        if let [token] = plan.tokens[..] {
            let p = map.route(token);
            crate::partition::placement::require_local(&engine.handles, [(t.storage_id, &**p)])?;
        }
    }
    let budget = throttle::table_budget(&engine.maps, schema, t, map, &engine.limits.throughput);
    // Inline room for a point read's one partition and gate (no list allocated).
    let mut parts: smallvec::SmallVec<[&crate::partition::map::PhysicalPartition; 1]> =
        smallvec::SmallVec::new();
    match &plan.target {
        Target::Partitions(_) => {
            for &token in &plan.tokens {
                let p = map.route(token);
                if !parts.iter().any(|q| q.id == p.id) {
                    parts.push(p);
                }
            }
        }
        Target::Range(lo, hi) | Target::Index { lo, hi, .. } => parts.extend(
            map.parts
                .iter()
                .filter(|p| (p.end as i128) > *lo && (p.start as i128) < *hi)
                .map(|p| &**p),
        ),
        Target::Ranges(ranges) => parts.extend(
            map.parts
                .iter()
                .filter(|p| {
                    ranges
                        .iter()
                        .any(|&(lo, hi)| (p.end as i128) > lo && (p.start as i128) < hi)
                })
                .map(|p| &**p),
        ),
    }
    let mut gates: smallvec::SmallVec<[_; 1]> = parts.iter().map(|p| budget.gate(p)).collect();
    // Shared pools: one bucket may serve several partitions; ask it once.
    gates.dedup_by(|a, b| std::ptr::eq(a.bucket, b.bucket));
    let access = if opts.serial {
        // A SERIAL read runs a Paxos round (it writes), so it is admitted as a write.
        throttle::Access::Write(crate::query::WriteType::Cas)
    } else {
        throttle::Access::Read
    };
    let how = throttle::admit(
        &engine.limits.throughput,
        access,
        &gates,
        opts.ctx.held_since(),
    )?;
    opts.ctx.admitted(how);
    drop(gates); // they borrow the budget
    Ok(Some(budget))
}

pub(super) fn read_virtual(
    engine: &Engine,
    schema: &crate::schema::Schema,
    t: &TableDef,
    plan: &Plan,
    out: &mut Output,
    paging: Option<PagingState>,
    peers: Option<&crate::query::cluster_views::PeerRows>,
) -> Result<()> {
    let me = engine.node.cluster.as_ref().map(|c| c.name());
    let rows = if t.keyspace == "system_traces" {
        engine
            .traces
            .rows(t, engine.node.listen.ip(), engine.node.listen.port())
    } else if let Some(rows) = crate::query::storage_groups::rows(engine, t) {
        rows
    } else if let Some(rows) = crate::query::partition_moves::rows(engine, t) {
        rows
    } else {
        crate::partition::views::rows(
            &engine.maps,
            &engine.handles,
            schema,
            t,
            &engine.limits.throughput,
            me,
        )
        .or_else(|| crate::schema::system::virtual_rows(schema, &engine.node, t))
        .unwrap_or_default()
    };
    let rows = match (peers, me) {
        (Some(peers), Some(me)) => crate::query::cluster_views::merge(t, rows, me, peers),
        _ => rows,
    };
    let start = paging.map_or(0, |p| p.partition as usize);
    let mut idx = 0usize;
    for r in rows.iter() {
        let get = |i: usize| r.get(i).and_then(|c| c.as_deref());
        let ok = plan
            .filters
            .iter()
            .all(|f| f.matches(&t.columns[f.col].ty, get(f.col)));
        if !ok {
            continue;
        }
        idx += 1;
        if idx <= start {
            continue;
        }
        if out.agg.is_some() {
            out.aggregate_cells(&get);
            continue;
        }
        for (p, _, _) in out.proj {
            match p {
                Proj::Column(i) => out.rows.push_cell(get(*i)),
                Proj::ToJson(inner, ty) => {
                    let json = match &**inner {
                        Proj::Column(i) => get(*i).map(|b| value::to_json(ty, b)),
                        _ => None,
                    }
                    .unwrap_or_else(|| "null".into());
                    out.rows.push_cell(Some(json.as_bytes()));
                }
                Proj::Expr(e) => {
                    let none = RowData::default();
                    let rc = RowCtx {
                        t,
                        pk_parts: &[],
                        ck: &[],
                        row: &none,
                        statics: &none,
                        now: out.now,
                        err: &out.error,
                        values: Some(r),
                    };
                    let v = eval_sexpr(e, &rc);
                    out.rows.push_cell(v.as_deref());
                }
                _ => out.rows.push_cell(None),
            }
        }
        out.rows.count += 1;
        let limit_hit = out.remaining.as_mut().map(|r| {
            *r -= 1;
            *r == 0
        });
        if limit_hit == Some(true) {
            return Ok(());
        }
        if out.rows.count as usize >= out.page_rows {
            out.rows.paging_state = Some(out.page_state(idx as u32, Vec::new()));
            return Ok(());
        }
    }
    Ok(())
}

/// Reads rows of a stored table, routed through the physical partition map.
pub(super) fn read_stored(
    engine: &Engine,
    t: &TableDef,
    plan: &Plan,
    out: &mut Output,
    paging: Option<&PagingState>,
) -> Result<()> {
    let ck_types: Vec<(&CqlType, bool)> = t.clustering_columns().map(|c| (&c.ty, c.desc)).collect();
    let sid = t.storage_id;
    match &plan.target {
        Target::Partitions(keys) => {
            let mut reader = PartitionRows::new(t, plan);
            let start = paging.map_or(0, |p| p.partition as usize);
            for (i, (pk, &token)) in keys.iter().zip(&plan.tokens).enumerate().skip(start) {
                // Read through the handle of the physical partition that owns the key.
                let handle = engine.handle_at(sid, token)?;
                let resume = paging.filter(|p| p.partition as usize == i && !p.last_key.is_empty());
                let at = PartitionAt {
                    index: i as u32,
                    token,
                    prefix: row::partition_prefix(sid, token, pk),
                };
                // A page resumed inside the partition scans on from where it stopped.
                let stopped = if plan.points && resume.is_none() && handle.prefers_point_reads() {
                    read_points(&*handle, &mut reader, out, plan, &ck_types, at)?
                } else {
                    scan_partition(&*handle, &mut reader, out, plan, &ck_types, at, resume)?
                };
                if stopped {
                    return Ok(());
                }
                if let Flow::Stop(more) = reader.statics(out, token, pk) {
                    if more && i + 1 < keys.len() {
                        out.rows.paging_state = Some(out.page_state(i as u32 + 1, Vec::new()));
                    }
                    return Ok(());
                }
            }
            Ok(())
        }
        Target::Index {
            index,
            ty,
            value,
            lo,
            hi,
        } => read_index(engine, t, plan, out, paging, (index, ty, value), (*lo, *hi)),
        Target::Range(lo, hi) => read_ranges(engine, t, plan, out, paging, &[(*lo, *hi)]),
        Target::Ranges(ranges) => read_ranges(engine, t, plan, out, paging, ranges),
    }
}

/// Slices whose first pages one access reads with the header at most (an `IN` on clustering
/// columns has a slice per value; more are read from a snapshot).
const MAX_SLICES_TOGETHER: usize = 32;

/// Scans the rows of one named partition, slice after slice, through its `handle`; true when
/// the output is full (the page state is set).
fn scan_partition(
    handle: &dyn PartitionHandle,
    reader: &mut PartitionRows,
    out: &mut Output,
    plan: &Plan,
    ck_types: &[(&CqlType, bool)],
    at: PartitionAt,
    resume: Option<&PagingState>,
) -> Result<bool> {
    let PartitionAt {
        index: i,
        token,
        prefix,
    } = at;
    let header_key = header_key(prefix.clone());
    // Isolation (`points.rs`): separate reads of one partition, each of the store as it is
    // then, could straddle a write of it. Where snapshots are cheap a read that needs several
    // reads them from one, unless they are the header and one slice, which write stamps can
    // show to be one state without it (`stamped_header_and_scan`). Where a scan reads its
    // range in parts, each a state of its own (`scans_read_in_parts`: PostgreSQL's pages), the
    // header and every slice are read in one access (`get_and_scans`); a read that needs more
    // stops, and the query runs again from snapshots (`Output::snapshot_reads`).
    let in_parts = handle.scans_read_in_parts();
    // One seek: the header sorts just before the rows, so a forward read whose first slice
    // starts at the first row scans from the header on and meets it first (or learns there
    // is none). Others read the header on its own (with the slices, where that is one access).
    let mut header_pending = one_seek(plan, resume.is_some()) && !in_parts;
    let mut rows_prefix = prefix;
    rows_prefix.push(KIND_ROW);
    let bounds = slice_bounds(plan, &rows_prefix, &header_key, header_pending, resume);
    // The header and one slice: one state without a snapshot where stamps allow it.
    let stamped = match !header_pending && !in_parts && bounds.len() == 1 {
        true => stamped_header_and_scan(handle, &header_key, &bounds[0], plan.reversed)?,
        false => None,
    };
    let reads = plan.slices.len() + usize::from(!header_pending);
    let snapshot = match in_parts {
        false => stamped.is_none() && reads > 1 && handle.cheap_snapshots(),
        true => out.snapshot_reads || plan.slices.len() > MAX_SLICES_TOGETHER,
    };
    let snapshot = snapshot.then(|| handle.snapshot());
    // Reads of the store left outside a snapshot on such a backend (None: any).
    let mut accesses_left = (in_parts && snapshot.is_none()).then_some(1u32);
    let mut together = Vec::new().into_iter();
    if let Some((header, scan)) = stamped {
        together = vec![scan].into_iter();
        reader.start(header.as_ref(), out.now, resume.is_some())?;
    } else if !header_pending {
        let first = (&bounds[..], out.entries_wanted());
        let (header, scans) = read_header(handle, snapshot.as_deref(), &header_key, first, plan)?;
        together = scans.into_iter();
        accesses_left = accesses_left.map(|n| n - 1);
        reader.start(header.as_ref(), out.now, resume.is_some())?;
    }
    let mut keys = row::KeyDecoder::default();
    for (lo, hi) in &bounds {
        let iter = match (together.next(), &snapshot) {
            (Some(scan), _) => scan,
            (None, Some(s)) => s.scan(as_ref(lo), as_ref(hi), plan.reversed),
            (None, None) => {
                if accesses_left == Some(0) {
                    out.wants_snapshots = true;
                    return Ok(true);
                }
                accesses_left = accesses_left.map(|n| n - 1);
                handle.scan(as_ref(lo), as_ref(hi), plan.reversed)
            }
        };
        for item in iter {
            if let Err(crate::storage::StorageError::ReadAgain) = item {
                out.wants_snapshots = true;
                return Ok(true);
            }
            let (k, v) = item?;
            if header_pending {
                header_pending = false;
                let found = k[..] == header_key[..];
                reader.start(found.then_some(&v), out.now, false)?;
                if found {
                    continue;
                }
            }
            out.scanned(token, k.len() + v.len());
            let dk = keys.decode(&k, ck_types)?;
            let ck = k.get(rows_prefix.len()..).unwrap_or(&[]);
            if let Flow::Stop(more) = reader.row(out, &dk, Some(ck), &v)? {
                if more {
                    out.rows.paging_state = Some(out.page_state(i, k.to_vec()));
                }
                return Ok(true);
            }
        }
        if header_pending {
            // The first slice's scan met neither header nor row.
            header_pending = false;
            reader.start(None, out.now, false)?;
        }
    }
    Ok(false)
}

/// Reads token ranges (lo exclusive, hi inclusive), sorted and disjoint, through the physical
/// partitions that overlap them, in token order, each partition as one state of the store
/// (`range_share.rs`).
pub(super) fn read_ranges(
    engine: &Engine,
    t: &TableDef,
    plan: &Plan,
    out: &mut Output,
    paging: Option<&PagingState>,
    ranges: &[(i128, i128)],
) -> Result<()> {
    let ck_types: Vec<(&CqlType, bool)> = t.clustering_columns().map(|c| (&c.ty, c.desc)).collect();
    let sid = t.storage_id;
    let Some(map) = engine.maps.get(sid) else {
        return Ok(());
    };
    let resume = paging.filter(|p| !p.last_key.is_empty());
    // The partition a resumed page may go on inside (one with clustering columns: others
    // hold one key): its token and header key (its share reads the header with the rows after
    // the resume key, `range_share.rs`).
    let mut resumed_header = (resume.filter(|_| !ck_types.is_empty()))
        .and_then(|p| Some((p, row::decode_key(&p.last_key, &[]).ok()?)))
        .map(|(p, dk)| (dk.token, header_key(p.last_key[..dk.prefix_len].to_vec())));
    // The partition being read: token, key and key prefix (buffers reused from partition to
    // partition: a scan of one-row partitions starts one per row).
    let mut cur: Option<(Token, Vec<u8>, Vec<u8>)> = None;
    let mut reader = PartitionRows::new(t, plan);
    let mut flat = FlatScan::of(t, plan, out);
    // Ends the partition being read: its static row if none of its rows passed. A page that
    // fills up there resumes after all of the partition's keys.
    let end_partition = |reader: &PartitionRows,
                         out: &mut Output,
                         cur: &Option<(Token, Vec<u8>, Vec<u8>)>|
     -> bool {
        let Some((token, pk, prefix)) = cur else {
            return false;
        };
        match reader.statics(out, *token, pk) {
            Flow::Continue => false,
            Flow::Stop(more) => {
                if more {
                    let mut after = prefix.clone();
                    after.push(KIND_ROW + 1);
                    out.rows.paging_state = Some(out.page_state(0, after));
                }
                true
            }
        }
    };
    let mut keys = row::KeyDecoder::default();
    for &(lo, hi) in ranges {
        if lo >= hi {
            continue;
        }
        let lo_tok = lo.max(MIN_TOKEN as i128 - 1);
        // (lo, hi] over the ring; the empty key's MIN token belongs to the first partition.
        let parts: Vec<_> = parts_in(&map, lo, hi).cloned().collect();
        for p in parts {
            let a = (p.start as i128).max(lo_tok); // exclusive
            let b = (p.end as i128).min(hi); // inclusive
            if a >= b {
                continue;
            }
            let mut lo_key = sid.to_be_bytes().to_vec();
            if a >= MIN_TOKEN as i128 {
                lo_key.extend_from_slice(&row::token_bytes((a + 1) as i64));
            }
            let hi_key: Bound<Vec<u8>> = if b >= MAX_TOKEN as i128 {
                Bound::Excluded((sid + 1).to_be_bytes().to_vec())
            } else {
                let mut k = sid.to_be_bytes().to_vec();
                k.extend_from_slice(&row::token_bytes((b + 1) as i64));
                Bound::Excluded(k)
            };
            let mut lo_b = Bound::Included(lo_key);
            if let Some(p) = resume {
                lo_b = max_lo(lo_b, p.resume_bound());
            }
            let handle = engine.handles.read(sid, &p)?;
            let header = resumed_header.take_if(|(token, _)| p.contains(*token));
            let header = header.map(|(_, key)| key);
            let bounds = (lo_b, hi_key);
            let wanted = out.entries_wanted();
            let how = (out.snapshot_reads, ck_types.is_empty());
            let mut share = RangeShare::open(&**handle, how, bounds, header, wanted)?;
            loop {
                let (k, v) = match share.next(|| out.entries_wanted())? {
                    Step::Entry(entry) => entry,
                    Step::Done => break,
                    Step::RunAgain => {
                        out.wants_snapshots = true;
                        return Ok(());
                    }
                };
                // The fast path, outside a partition the general path started (it may have
                // met its header).
                let fast = flat.as_mut().filter(|_| {
                    cur.as_ref()
                        .is_none_or(|(_, _, prefix)| !k.starts_with(prefix))
                });
                match fast.and_then(|f| f.row(out, &k, &v)) {
                    Some(Flow::Continue) => continue,
                    Some(Flow::Stop(more)) => {
                        stop_at(out, more, &k);
                        return Ok(());
                    }
                    None => {}
                }
                let dk = keys.decode(&k, &ck_types)?;
                out.scanned(dk.token, k.len() + v.len());
                // The key up to its kind byte is the partition's prefix (`partition_prefix`).
                let prefix = &k[..dk.prefix_len];
                if cur.as_ref().is_none_or(|(_, _, p)| p[..] != *prefix) {
                    if end_partition(&reader, out, &cur) {
                        return Ok(());
                    }
                    // Resuming inside this partition: an earlier page returned its rows.
                    let resumed = resume.is_some_and(|p| p.last_key.starts_with(prefix));
                    if dk.kind != KIND_HEADER {
                        // The header sorts before the rows, so a scan that reaches the
                        // partition's first key without meeting one knows there is none; only
                        // a scan resumed mid-partition started past it and fetches it.
                        if resumed {
                            let header = share.header(&header_key(prefix.to_vec()))?;
                            reader.start(header.as_ref(), out.now, true)?;
                        } else {
                            reader.start(None, out.now, false)?;
                        }
                    }
                    let c = cur.get_or_insert_with(Default::default);
                    c.0 = dk.token;
                    c.1.clear();
                    c.1.extend_from_slice(&dk.pk);
                    c.2.clear();
                    c.2.extend_from_slice(prefix);
                }
                if dk.kind == KIND_HEADER {
                    reader.start(Some(&v), out.now, false)?;
                    continue;
                }
                let ck_start = cur.as_ref().map_or(0, |c| c.2.len() + 1);
                let ck = k.get(ck_start..).unwrap_or(&[]);
                if let Flow::Stop(more) = reader.row(out, &dk, Some(ck), &v)? {
                    stop_at(out, more, &k);
                    return Ok(());
                }
            }
        }
    }
    end_partition(&reader, out, &cur);
    Ok(())
}

/// A range scan's page filled at stored key `key`: when rows remain, the next page resumes
/// after it (both the flat and the general path stop this way).
fn stop_at(out: &mut Output, more: bool, key: &[u8]) {
    if more {
        out.rows.paging_state = Some(out.page_state(0, key.to_vec()));
    }
}

/// Reads the rows an index lists for one value, in token order, re-checking each row. Index
/// entries are local to the physical partition that holds their row: each partition
/// overlapping `(lo, hi]` is read through its handle, one range read of its entries for the
/// value, in token order, and paging continues across them (the resume key is an entry key).
pub(super) fn read_index(
    engine: &Engine,
    t: &TableDef,
    plan: &Plan,
    out: &mut Output,
    paging: Option<&PagingState>,
    (index, ty, value): (&crate::schema::IndexDef, &CqlType, &Bytes),
    (lo, hi): (i128, i128),
) -> Result<()> {
    if lo >= hi {
        return Ok(());
    }
    let Some(map) = engine.maps.get(t.storage_id) else {
        return Ok(());
    };
    let prefix = crate::query::index::value_prefix(index, ty, value);
    let mut lo_key = prefix.clone();
    if lo >= MIN_TOKEN as i128 {
        lo_key.extend_from_slice(&row::token_bytes((lo + 1) as i64));
    }
    let hi_key: Bound<Vec<u8>> = if hi >= MAX_TOKEN as i128 {
        prefix_successor(&prefix)
            .map(Bound::Excluded)
            .unwrap_or(Bound::Unbounded)
    } else {
        let mut k = prefix.clone();
        k.extend_from_slice(&row::token_bytes((hi + 1) as i64));
        Bound::Excluded(k)
    };
    let mut lo_b = Bound::Included(lo_key);
    if let Some(p) = paging.filter(|p| !p.last_key.is_empty()) {
        lo_b = max_lo(lo_b, p.resume_bound());
    }
    let mut reader = IndexRows {
        t,
        index,
        ty,
        ck_types: t.clustering_columns().map(|c| (&c.ty, c.desc)).collect(),
        rows: PartitionRows::new(t, plan),
        cur_pk: None,
    };
    for p in parts_in(&map, lo, hi) {
        let handle = engine.handles.read(t.storage_id, p)?;
        let entries = handle.scan_local(&prefix, as_ref(&lo_b), as_ref(&hi_key), false);
        if reader.read(&**handle, entries, out)? {
            return Ok(());
        }
    }
    Ok(())
}

/// The rows of one index value's entries, partition after partition.
struct IndexRows<'a> {
    t: &'a TableDef,
    index: &'a crate::schema::IndexDef,
    ty: &'a CqlType,
    ck_types: Vec<(&'a CqlType, bool)>,
    rows: PartitionRows<'a>,
    /// The partition `rows` was last started for.
    cur_pk: Option<Bytes>,
}

/// Index hits of one partition read as one group at most. A group's rows and its partition's
/// header are looked up together (`points::read_together`), so what a group reads is one state
/// of the partition, as a point read's keys are; a partition with more hits is read in several
/// groups. The bound keeps the lookups a page that fills mid-group wastes few.
const GROUP_HITS: usize = 32;

/// The consecutive hits of one partition, not read yet: the keys to look up (the partition
/// header's first, for a table that has headers) and each row's entry and decoded key.
#[derive(Default)]
struct Hits {
    keys: Vec<Vec<u8>>,
    rows: Vec<(Bytes, row::DecodedKey)>,
}

impl IndexRows<'_> {
    /// Reads the rows of one physical partition's `entries` through its `handle`; true when
    /// the output is full (the page state is set).
    fn read(
        &mut self,
        handle: &dyn PartitionHandle,
        entries: crate::storage::ScanIter,
        out: &mut Output,
    ) -> Result<bool> {
        let mut hits = Hits::default();
        for item in entries {
            let (entry, _) = item?;
            let Some(row_key) =
                crate::query::index::row_key_of_entry(self.t, self.index, self.ty, &entry)
            else {
                continue;
            };
            let dk = row::decode_key(&row_key, &self.ck_types)?;
            let same = hits
                .rows
                .first()
                .is_some_and(|(_, first)| first.pk == dk.pk);
            if (!same || hits.rows.len() == GROUP_HITS) && self.read_hits(handle, &mut hits, out)? {
                return Ok(true);
            }
            if hits.keys.is_empty() && self.t.stores_headers() {
                hits.keys.push(header_key(row::partition_prefix(
                    self.t.storage_id,
                    dk.token,
                    &dk.pk,
                )));
            }
            hits.keys.push(row_key);
            hits.rows.push((entry, dk));
        }
        self.read_hits(handle, &mut hits, out)
    }

    /// Looks up the rows `hits` names and their partition's header together, feeds the rows
    /// found and empties `hits`; true when the output is full (the page state is set).
    fn read_hits(
        &mut self,
        handle: &dyn PartitionHandle,
        hits: &mut Hits,
        out: &mut Output,
    ) -> Result<bool> {
        let Some((_, first)) = hits.rows.first() else {
            return Ok(false);
        };
        let mut values = super::points::read_together(handle, &hits.keys)?.into_iter();
        let has_header = hits.keys.len() > hits.rows.len();
        let header = if has_header {
            values.next().flatten()
        } else {
            None
        };
        // A later group of the same partition keeps whether a row of it passed.
        let resumed = self.cur_pk.as_ref() == Some(&first.pk) && self.rows.matched;
        self.cur_pk = Some(first.pk.clone());
        self.rows.start(header.as_ref(), out.now, resumed)?;
        let row_keys = hits.keys.drain(..).skip(usize::from(has_header));
        for ((entry, dk), (key, value)) in hits.rows.drain(..).zip(row_keys.zip(values)) {
            let Some(v) = value else {
                continue;
            };
            out.scanned(dk.token, key.len() + v.len());
            // The clustering key bytes: what follows the partition prefix and the kind byte.
            let ck = key.get(dk.prefix_len + 1..).unwrap_or(&[]);
            if let Flow::Stop(more) = self.rows.row(out, &dk, Some(ck), &v)? {
                if more {
                    out.rows.paging_state = Some(out.page_state(0, entry.to_vec()));
                }
                return Ok(true);
            }
        }
        Ok(false)
    }
}

/// A scan's lower and upper key bounds.
type KeyBounds = (Bound<Vec<u8>>, Bound<Vec<u8>>);

/// A partition's header read on its own: from `snapshot` if there is one, else together with
/// each slice's scan (`slices`, with at least the entries wanted of each) where the backend
/// reads them in one access (the scans are returned then, in the slices' order), else by
/// itself.
fn read_header(
    handle: &dyn PartitionHandle,
    snapshot: Option<&dyn crate::storage::PartitionSnapshot>,
    header_key: &[u8],
    (slices, wanted): (&[KeyBounds], usize),
    plan: &Plan,
) -> Result<(Option<Bytes>, Vec<crate::storage::ScanIter>)> {
    if let Some(s) = snapshot {
        return Ok((s.get(header_key)?, Vec::new()));
    }
    let bounds: Vec<_> = (slices.iter())
        .map(|(lo, hi)| (as_ref(lo), as_ref(hi)))
        .collect();
    match handle.get_and_scans(Some(header_key), &bounds, plan.reversed, wanted) {
        Some(read) => read.map_err(Into::into),
        None => Ok((handle.get(header_key)?, Vec::new())),
    }
}

/// A partition's header and its one slice's scan as one state of the store without a
/// snapshot (as `points.rs` reads several keys): the header through the handle's `get` (the
/// row cache's) under a write stamp, then the scan, whose state is fixed when it is made; if
/// no write of the header's stripe began since the stamp, the header was the scan state's.
/// None where the backend gives no stamp, a write of that stripe is in flight or one began:
/// the caller reads both from a snapshot. Why: the snapshot's `get` searches every memtable
/// (17.6% of the server's CPU in a profile of 10-row slices of partitions held in a memtable
/// of some 300,000 rows), where the row cache answers a header, written only by statics and
/// deletions, from memory (docs/PERFORMANCE.md, twelfth session).
fn stamped_header_and_scan(
    handle: &dyn PartitionHandle,
    header_key: &[u8],
    (lo, hi): &KeyBounds,
    reversed: bool,
) -> Result<Option<(Option<Bytes>, crate::storage::ScanIter)>> {
    let Some(stamp) = handle.stamp(header_key) else {
        return Ok(None);
    };
    let header = handle.get(header_key)?;
    let scan = handle.scan(as_ref(lo), as_ref(hi), reversed);
    Ok((!handle.changed_since(header_key, &stamp)).then_some((header, scan)))
}

/// The key bounds each slice of a partition read scans, in the read's order: the slices'
/// clustering bounds under the rows' prefix, the first from the header on when it is read in
/// the same scan (`header_pending`), narrowed to what a resumed page has not returned yet.
fn slice_bounds(
    plan: &Plan,
    rows_prefix: &[u8],
    header_key: &[u8],
    header_pending: bool,
    resume: Option<&PagingState>,
) -> Vec<KeyBounds> {
    let abs = |b: &Bound<Vec<u8>>, is_hi: bool| -> Bound<Vec<u8>> {
        match b {
            Bound::Included(k) => Bound::Included([rows_prefix, k].concat()),
            Bound::Excluded(k) => Bound::Excluded([rows_prefix, k].concat()),
            Bound::Unbounded if is_hi => {
                Bound::Excluded(prefix_successor(rows_prefix).expect("row prefix has a successor"))
            }
            Bound::Unbounded => Bound::Included(rows_prefix.to_vec()),
        }
    };
    let mut slices: Vec<&KeyRange> = plan.slices.iter().collect();
    if plan.reversed {
        slices.reverse();
    }
    let mut bounds = Vec::with_capacity(slices.len());
    for (i, (lo, hi)) in slices.into_iter().enumerate() {
        let mut lo = if header_pending && i == 0 {
            Bound::Included(header_key.to_vec())
        } else {
            abs(lo, false)
        };
        let mut hi = abs(hi, true);
        if let Some(p) = resume {
            if plan.reversed {
                hi = min_hi(hi, p.resume_bound());
            } else {
                lo = max_lo(lo, p.resume_bound());
            }
        }
        bounds.push((lo, hi));
    }
    bounds
}

pub(super) fn as_ref(b: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    match b {
        Bound::Included(k) => Bound::Included(&k[..]),
        Bound::Excluded(k) => Bound::Excluded(&k[..]),
        Bound::Unbounded => Bound::Unbounded,
    }
}

#[cfg(test)]
mod tests {
    use super::super::watched::watched;
    use super::*;
    use crate::storage::handle::PartitionCommit;

    /// A header's value and a slice's (key, value)s.
    type HeaderAndSlice = (Vec<u8>, Vec<(Vec<u8>, Vec<u8>)>);

    /// `stamped_header_and_scan` with key `a` as the header and `b..=c` as the slice (None:
    /// not taken).
    fn header_and_slice(h: &dyn PartitionHandle, keys: &[Vec<u8>; 3]) -> Option<HeaderAndSlice> {
        let slice = (
            Bound::Included(keys[1].clone()),
            Bound::Included(keys[2].clone()),
        );
        let (header, scan) = stamped_header_and_scan(h, &keys[0], &slice, false).unwrap()?;
        let rows = scan.map(|r| r.map(|(k, v)| (k.to_vec(), v.to_vec())).unwrap());
        Some((header.unwrap().to_vec(), rows.collect()))
    }

    /// With no write in the way, the header is one lookup (the row cache's) and the slice one
    /// scan: no snapshot.
    #[test]
    fn a_quiet_header_and_slice_take_no_snapshot() {
        let dir = tempfile::tempdir().unwrap();
        let (_store, h, keys) = watched(dir.path(), false);
        let got = header_and_slice(&h, &keys);
        assert_eq!(
            got,
            Some((b"1".to_vec(), vec![(keys[1].clone(), b"2".to_vec())]))
        );
        assert_eq!(h.counts(), (1, 0));
    }

    /// A write of the header that lands after its lookup and before the scan is made (so the
    /// scan's state holds it while the lookup did not): not one state, so None, and the
    /// caller reads both from a snapshot.
    #[test]
    fn a_header_written_before_the_scan_is_not_taken() {
        let dir = tempfile::tempdir().unwrap();
        let (_store, mut h, keys) = watched(dir.path(), false);
        let header = keys[0].clone();
        h.before_scan = Some(Box::new(move |inner| {
            let mut c = PartitionCommit::default();
            c.put(header.clone(), &b"9"[..]);
            inner.commit(c).unwrap();
        }));
        assert_eq!(header_and_slice(&h, &keys), None);
    }

    /// Stamps that report a write begun since (writes of the stripe that never stop): None.
    #[test]
    fn a_restless_header_is_not_taken() {
        let dir = tempfile::tempdir().unwrap();
        let (_store, h, keys) = watched(dir.path(), true);
        assert_eq!(header_and_slice(&h, &keys), None);
    }
}
