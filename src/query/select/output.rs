//! Collecting output rows: projection of each row, aggregation one group at a time, and the
//! decision when a page is full.

use super::*;

/// Collects output rows and decides when a page is full.
pub(super) struct Output<'a> {
    pub(super) rows: Rows,
    pub(super) proj: &'a [(Proj, String, CqlType)],
    pub(super) table: &'a TableDef,
    pub(super) page_rows: usize,
    pub(super) page_bytes: usize,
    pub(super) remaining: Option<usize>,
    pub(super) now: i64,
    /// Aggregate queries: the groups being accumulated.
    pub(super) agg: Option<Aggregation>,
    /// The last emit stopped before consuming its row: resume at that row.
    pub(super) resume_inclusive: bool,
    /// SELECT JSON: each row becomes one `[json]` text cell (for aggregates, each group's
    /// row when it is written).
    pub(super) json: bool,
    /// An aggregate query (`agg` is taken out while a row is accumulated).
    pub(super) aggregating: bool,
    /// PER PARTITION LIMIT (DISTINCT is a limit of one).
    pub(super) per_partition: Option<usize>,
    /// The partition the per-partition count is for, and its count.
    pub(super) cur_pk: Option<Bytes>,
    pub(super) cur_count: usize,
    /// The table's partition map and what the scan read per physical partition (for RU).
    pub(super) map: Option<Arc<crate::partition::map::PartitionMap>>,
    pub(super) meter:
        smallvec::SmallVec<[(Arc<crate::partition::map::PhysicalPartition>, u64, u64); 1]>,
    /// A selector failed (an operation's division by zero): the query fails with it.
    pub(super) error: std::cell::RefCell<Option<crate::query::QueryError>>,
    /// Partitions are read from snapshots even where a scan's first read alone would do
    /// (`read.rs::scan_partition`): the query runs again so when `wants_snapshots`.
    pub(super) snapshot_reads: bool,
    /// A partition read stopped where its scan would have read the store a second time: what
    /// the output holds is to be dropped and the query run again with `snapshot_reads`.
    pub(super) wants_snapshots: bool,
}

/// Aggregation state: one group at a time (rows arrive in primary key order, so a GROUP BY on
/// a primary key prefix sees each group's rows together).
pub(super) struct Aggregation {
    /// GROUP BY columns (a prefix of the primary key); empty: one group for the whole result.
    pub(super) group_cols: Vec<usize>,
    pub(super) key: Option<Vec<Option<Bytes>>>,
    /// Per output column its aggregates' accumulators (none for other selectors).
    pub(super) accs: Vec<Vec<crate::query::aggregate::Accumulator>>,
    /// The cells of the group's first row (values of the non-aggregate selectors).
    pub(super) first: BytesMut,
    pub(super) rows: usize,
    /// Groups written so far.
    pub(super) groups: usize,
}

impl Aggregation {
    pub(super) fn new(
        proj: &[(Proj, String, CqlType)],
        t: &TableDef,
        group_cols: Vec<usize>,
    ) -> Aggregation {
        Aggregation {
            group_cols,
            key: None,
            accs: Self::fresh(proj, t),
            first: BytesMut::new(),
            rows: 0,
            groups: 0,
        }
    }
    pub(super) fn fresh(
        proj: &[(Proj, String, CqlType)],
        t: &TableDef,
    ) -> Vec<Vec<crate::query::aggregate::Accumulator>> {
        use crate::query::aggregate::Accumulator;
        proj.iter()
            .map(|(p, _, _)| match p {
                Proj::Agg(kind, col) => vec![Accumulator::new(
                    *kind,
                    col.map_or(&CqlType::Bigint, |c| &t.columns[c].ty),
                )],
                Proj::AggOf(call) => call
                    .aggs
                    .iter()
                    .map(|(kind, _, ty)| Accumulator::new(*kind, ty))
                    .collect(),
                _ => Vec::new(),
            })
            .collect()
    }
}

pub(super) enum Flow {
    Continue,
    /// Page full or limit reached; `bool`: more rows may follow.
    Stop(bool),
}

impl Output<'_> {
    /// Stored entries a read would take to fill the page or reach the limit, and one more to
    /// learn whether more follow (entries that are no row, such as deleted ones, aside).
    pub(super) fn entries_wanted(&self) -> usize {
        let page_left = self.page_rows.saturating_sub(self.rows.count as usize);
        page_left
            .min(self.remaining.unwrap_or(usize::MAX))
            .saturating_add(1)
    }

    /// Counts one stored row read (RU are charged for what is read, not only returned).
    pub(super) fn scanned(&mut self, token: Token, bytes: usize) {
        let Some(map) = &self.map else {
            return;
        };
        match self.meter.last_mut() {
            Some((p, rows, b)) if p.contains(token) => {
                *rows += 1;
                *b += bytes as u64;
            }
            _ => self
                .meter
                .push((Arc::clone(map.route(token)), 1, bytes as u64)),
        }
    }

    pub(super) fn emit(
        &mut self,
        token: Token,
        pk: &[u8],
        ck: &[Bytes],
        row: &RowData,
        statics: &RowData,
    ) -> Flow {
        if let Some(limit) = self.per_partition {
            if self.cur_pk.as_deref() != Some(pk) {
                self.cur_pk = Some(Bytes::copy_from_slice(pk));
                self.cur_count = 0;
            }
            // With GROUP BY the limit counts groups (a row starting a new one), as Cassandra.
            let counts = match &self.agg {
                Some(agg) if self.aggregating => {
                    agg.rows == 0 || agg.key.as_ref() != Some(&self.group_key(pk, ck, row, statics))
                }
                _ => true,
            };
            if counts {
                if self.cur_count >= limit {
                    return Flow::Continue;
                }
                self.cur_count += 1;
            }
        }
        if self.agg.is_some() {
            return self.aggregate_row(token, pk, ck, row, statics);
        }
        self.project(token, pk, ck, row, statics);
        if self.error.borrow().is_some() {
            return Flow::Stop(false);
        }
        self.row_done()
    }

    /// The paging state to resume after (or, when the last emit did not consume its row, at)
    /// `key`.
    pub(super) fn page_state(&self, partition: u32, key: Vec<u8>) -> Bytes {
        PagingState {
            partition,
            last_key: key,
            remaining: self.remaining.map(|r| r as u32),
            partition_rows: self.cur_count as u32,
            inclusive: self.resume_inclusive,
        }
        .encode()
    }

    /// Feeds one row to the current group; a row of a new group first writes the finished group.
    pub(super) fn aggregate_row(
        &mut self,
        token: Token,
        pk: &[u8],
        ck: &[Bytes],
        row: &RowData,
        statics: &RowData,
    ) -> Flow {
        let t = self.table;
        let pk_parts: Vec<&[u8]> = if t.partition_key.len() == 1 {
            vec![pk]
        } else {
            split_composite(pk, t.partition_key.len()).unwrap_or_default()
        };
        let key = self.group_key(pk, ck, row, statics);
        let mut agg = self.agg.take().expect("aggregate query");
        if agg.rows > 0 && agg.key.as_ref() != Some(&key) {
            self.agg = Some(agg);
            if let Flow::Stop(more) = self.flush_group() {
                // This row starts the next group: the next page starts with it.
                self.resume_inclusive = true;
                return Flow::Stop(more);
            }
            agg = self.agg.take().expect("aggregate query");
        }
        if agg.rows == 0 {
            agg.key = Some(key);
            let start = self.rows.content.len();
            self.project(token, pk, ck, row, statics);
            agg.first = self.rows.content.split_off(start);
            if self.error.borrow().is_some() {
                self.agg = Some(agg);
                return Flow::Stop(false);
            }
        }
        let rc = RowCtx::stored(t, &pk_parts, ck, (row, statics), self.now, &self.error);
        for ((p, _, _), accs) in self.proj.iter().zip(agg.accs.iter_mut()) {
            match (p, &mut accs[..]) {
                (Proj::Agg(_, col), [acc]) => acc.add(
                    col.and_then(|c| column_value(t, c, &pk_parts, ck, row, statics, self.now)),
                ),
                (Proj::AggOf(call), accs) => {
                    for ((_, input, _), acc) in call.aggs.iter().zip(accs) {
                        acc.add(eval_sexpr(input, &rc).as_deref());
                    }
                }
                _ => {}
            }
        }
        agg.rows += 1;
        self.agg = Some(agg);
        Flow::Continue
    }

    /// Feeds one row of a system or virtual table (cells by column index) to the aggregation,
    /// as `aggregate_row` does for stored rows. These tables are small and answered in one
    /// page, so a finished group is written without stopping for the page size.
    pub(super) fn aggregate_cells<'r>(&mut self, get: &dyn Fn(usize) -> Option<&'r [u8]>) {
        let mut agg = self.agg.take().expect("aggregate query");
        let key: Vec<Option<Bytes>> = agg
            .group_cols
            .iter()
            .map(|&c| get(c).map(Bytes::copy_from_slice))
            .collect();
        if agg.rows > 0 && agg.key.as_ref() != Some(&key) {
            self.agg = Some(agg);
            let _ = self.flush_group();
            agg = self.agg.take().expect("aggregate query");
        }
        if agg.rows == 0 {
            agg.key = Some(key);
            let start = self.rows.content.len();
            for (p, _, _) in self.proj {
                match p {
                    Proj::Column(i) => self.rows.push_cell(get(*i)),
                    _ => self.rows.push_cell(None),
                }
            }
            agg.first = self.rows.content.split_off(start);
        }
        for ((p, _, _), accs) in self.proj.iter().zip(agg.accs.iter_mut()) {
            // Computed inputs (`Proj::AggOf`) are not evaluated over these tables' cells.
            if let (Proj::Agg(_, col), [acc]) = (p, &mut accs[..]) {
                acc.add(col.and_then(get));
            }
        }
        agg.rows += 1;
        self.agg = Some(agg);
    }

    /// Writes the current group's row (for a query without GROUP BY, also when no row matched).
    /// The GROUP BY values of a row (empty without GROUP BY).
    pub(super) fn group_key(
        &self,
        pk: &[u8],
        ck: &[Bytes],
        row: &RowData,
        statics: &RowData,
    ) -> Vec<Option<Bytes>> {
        let Some(agg) = &self.agg else {
            return Vec::new();
        };
        let t = self.table;
        let pk_parts: Vec<&[u8]> = if t.partition_key.len() == 1 {
            vec![pk]
        } else {
            split_composite(pk, t.partition_key.len()).unwrap_or_default()
        };
        agg.group_cols
            .iter()
            .map(|&c| {
                column_value(t, c, &pk_parts, ck, row, statics, self.now)
                    .map(Bytes::copy_from_slice)
            })
            .collect()
    }

    pub(super) fn flush_group(&mut self) -> Flow {
        let mut agg = self.agg.take().expect("aggregate query");
        if agg.rows == 0 && (!agg.group_cols.is_empty() || agg.groups > 0) {
            self.agg = Some(agg);
            return Flow::Continue;
        }
        let first = std::mem::take(&mut agg.first);
        let mut cells = &first[..];
        let row_start = self.rows.content.len();
        for ((p, _, _), acc) in self.proj.iter().zip(&agg.accs) {
            // The first row's cell of this column (a placeholder for aggregates).
            let cell: Option<&[u8]> = if cells.len() >= 4 {
                let len = i32::from_be_bytes(cells[..4].try_into().expect("4 bytes"));
                let (c, rest) = if len < 0 {
                    (None, &cells[4..])
                } else {
                    let end = (4 + len as usize).min(cells.len());
                    (Some(&cells[4..end]), &cells[end..])
                };
                cells = rest;
                c
            } else {
                None
            };
            match (p, &acc[..]) {
                (Proj::Agg(..), [acc]) => self.rows.push_cell(acc.finish().as_deref()),
                (Proj::AggOf(call), accs) => {
                    let results: Vec<Option<Vec<u8>>> = accs.iter().map(|a| a.finish()).collect();
                    let v = finish_agg_call(call, &results, self.table, self.now, &self.error);
                    self.rows.push_cell(v.as_deref());
                }
                _ => self.rows.push_cell(cell),
            }
        }
        self.row_as_json_from(row_start);
        agg.accs = Aggregation::fresh(self.proj, self.table);
        agg.rows = 0;
        agg.key = None;
        agg.groups += 1;
        self.agg = Some(agg);
        self.row_done()
    }

    /// Writes the cells of one row's selectors into the result.
    pub(super) fn project(
        &mut self,
        token: Token,
        pk: &[u8],
        ck: &[Bytes],
        row: &RowData,
        statics: &RowData,
    ) {
        let t = self.table;
        // No list for the usual one-column key (scans project every row).
        let one = [pk];
        let many: Vec<&[u8]>;
        let pk_parts: &[&[u8]] = if t.partition_key.len() == 1 {
            &one
        } else {
            many = split_composite(pk, t.partition_key.len()).unwrap_or_default();
            &many
        };
        let row_start = self.rows.content.len();
        for (p, _, _) in self.proj {
            let tok_bytes;
            let v: Option<&[u8]> = match p {
                Proj::Column(i) => column_value(t, *i, pk_parts, ck, row, statics, self.now),
                Proj::Token => {
                    tok_bytes = token.to_be_bytes();
                    Some(&tok_bytes[..])
                }
                Proj::Timing(i, timing) => {
                    let v = timing_value(t, *i, *timing, row, statics, self.now);
                    self.rows.push_cell(v.as_ref().map(TimingValue::bytes));
                    continue;
                }
                Proj::ToJson(inner, ty) => {
                    let raw = match &**inner {
                        Proj::Column(i) => {
                            column_value(t, *i, pk_parts, ck, row, statics, self.now)
                        }
                        _ => None,
                    };
                    let json = match raw {
                        Some(b) => value::to_json(ty, b),
                        None => "null".to_string(),
                    };
                    self.rows.push_cell(Some(json.as_bytes()));
                    continue;
                }
                Proj::Agg(..) | Proj::AggOf(..) => None,
                Proj::Expr(e) => {
                    let rc = RowCtx::stored(t, pk_parts, ck, (row, statics), self.now, &self.error);
                    let v = eval_sexpr(e, &rc);
                    self.rows.push_cell(v.as_deref());
                    continue;
                }
            };
            self.rows.push_cell(v);
        }
        if !self.aggregating {
            self.row_as_json_from(row_start);
        }
    }

    /// SELECT JSON: turns the cells written from `row_start` on (one row) into its JSON cell.
    pub(super) fn row_as_json_from(&mut self, row_start: usize) {
        if self.json {
            let json = row_json(self.proj, &self.rows.content[row_start..]);
            self.rows.content.truncate(row_start);
            self.rows.push_cell(Some(json.as_bytes()));
        }
    }

    /// Counts a written row against LIMIT and the page.
    pub(super) fn row_done(&mut self) -> Flow {
        self.rows.count += 1;
        if let Some(r) = &mut self.remaining {
            *r -= 1;
            if *r == 0 {
                return Flow::Stop(false);
            }
        }
        if self.rows.count as usize >= self.page_rows || self.rows.content.len() >= self.page_bytes
        {
            return Flow::Stop(true);
        }
        Flow::Continue
    }
}
