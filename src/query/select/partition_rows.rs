//! The rows of one partition as the read loops meet them: shadowed by the partition header,
//! collections assembled, filtered and emitted (with the statics-only row when none pass).

use super::*;

/// The rows of one partition at a time, as the read loops meet them: each row is shadowed by
/// the partition header (partition deletion, range tombstones), gets its collections assembled,
/// and is emitted if it is live and passes the filters. A partition none of whose rows passed
/// emits its statics-only row (partition-list reads).
pub(super) struct PartitionRows<'a> {
    pub(super) t: &'a TableDef,
    pub(super) filters: &'a [Filter],
    /// [`Plan::static_rows`].
    pub(super) static_rows: bool,
    /// The current partition's header (static cells, deletion, range tombstones), materialized.
    pub(super) header: RowData,
    /// A row of the current partition passed (or an earlier page did: resuming inside it).
    pub(super) matched: bool,
    /// Each row is decoded into this one (its buffers are reused from row to row).
    scratch: RowData,
}

impl<'a> PartitionRows<'a> {
    pub(super) fn new(t: &'a TableDef, plan: &'a Plan) -> Self {
        PartitionRows {
            t,
            filters: &plan.filters,
            static_rows: plan.static_rows,
            header: RowData::default(),
            matched: false,
            scratch: RowData::default(),
        }
    }

    /// Starts a partition whose header is the stored value `header` (None: it has none).
    pub(super) fn start(&mut self, header: Option<&Bytes>, now: i64, resumed: bool) -> Result<()> {
        self.header = match header {
            Some(b) => RowData::decode(b)?,
            None => RowData::default(),
        };
        complex::materialize(&mut self.header, self.t, None, now);
        self.matched = resumed;
        Ok(())
    }

    /// Feeds one stored row (`value`) of the current partition; `ranges_key`: its clustering
    /// key bytes, for the range tombstones (None: they are not applied).
    pub(super) fn row(
        &mut self,
        out: &mut Output,
        dk: &row::DecodedKey,
        ranges_key: Option<&[u8]>,
        value: &Bytes,
    ) -> Result<Flow> {
        // The scratch row is borrowed beside the header, not moved out and back: a
        // `RowData` is some 150 bytes, copied twice per row read.
        RowData::decode_into(value, &mut self.scratch)?;
        let rules = Rules {
            t: self.t,
            filters: self.filters,
            header: &self.header,
        };
        let flow = rules.emit_row(out, dk, ranges_key, &mut self.scratch);
        self.matched |= flow.is_some();
        Ok(flow.unwrap_or(Flow::Continue))
    }

    /// Ends the partition: if none of its rows passed, its live static cells make a row.
    pub(super) fn statics(&self, out: &mut Output, token: Token, pk: &[u8]) -> Flow {
        let now = out.now;
        if self.matched
            || !self.static_rows
            || !self.t.has_static()
            || !self.header.cells.iter().any(|c| c.is_live(now))
        {
            return Flow::Continue;
        }
        let mut statics = self.header.clone();
        if let Some((dts, _)) = self.header.deletion {
            statics.shadow_at(dts);
        }
        let none = RowData::default();
        if statics.is_live(now) && passes(self.t, self.filters, pk, &[], &none, &statics, now) {
            return out.emit(token, pk, &[], &none, &statics);
        }
        Flow::Continue
    }
}

/// Whether a partition read finds its header in the scan of its first slice: forward, not
/// resumed, and the first slice starts at the partition's first row (nothing lies between the
/// header and that row, so the scan reads no extra rows).
pub(super) fn one_seek(plan: &Plan, resumed: bool) -> bool {
    !plan.reversed
        && !resumed
        && plan.slices.first().is_some_and(|(lo, _)| match lo {
            Bound::Unbounded => true,
            Bound::Included(k) => k.is_empty(),
            Bound::Excluded(_) => false,
        })
}

/// The storage key of the header of the partition whose key prefix is `prefix`.
pub(super) fn header_key(mut prefix: Vec<u8>) -> Vec<u8> {
    prefix.push(KIND_HEADER);
    prefix
}

/// What a row of the current partition is shadowed and filtered by.
struct Rules<'r> {
    t: &'r TableDef,
    filters: &'r [Filter],
    header: &'r RowData,
}

impl Rules<'_> {
    /// Shadows the decoded row `data` by the partition header and emits it if it is live and
    /// passes the filters (Some: it did, with the output's flow).
    fn emit_row(
        &self,
        out: &mut Output,
        dk: &row::DecodedKey,
        ranges_key: Option<&[u8]>,
        data: &mut RowData,
    ) -> Option<Flow> {
        let now = out.now;
        if let Some((dts, _)) = self.header.deletion {
            data.shadow_at(dts);
        }
        if let (Some(ck), false) = (ranges_key, self.header.ranges.is_empty()) {
            if let Some(dts) = self.header.range_deletion(ck) {
                data.shadow_at(dts);
            }
        }
        complex::materialize(data, self.t, None, now);
        let (pk, ck) = (&dk.pk[..], &dk.clustering[..]);
        if !data.is_live(now) || !passes(self.t, self.filters, pk, ck, data, self.header, now) {
            return None;
        }
        Some(out.emit(dk.token, pk, ck, data, self.header))
    }
}
