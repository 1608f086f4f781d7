//! Reads: point gets and ordered scans that page through a key range.
//!
//! A scan never loads its whole range: it fetches pages of `LIMIT n` rows in key order (an
//! index range scan, ascending or descending) and resumes after the last key it returned. The
//! page adapts to the rows' size: it starts at `FIRST_PAGE_ROWS`, doubles while pages stay under
//! `SMALL_PAGE_BYTES` and halves above `LARGE_PAGE_BYTES`, within [1, `MAX_PAGE_ROWS`].
//! Scans through the pool read each page at its own point in time (each page is consistent,
//! the whole scan is not, as with a paged CQL query); scans of a snapshot run every page in the
//! snapshot's REPEATABLE READ transaction, so they see one point in time.
//!
//! A partition read's header and slices, or a range read's next rows (`get_and_scans`), are
//! one statement instead: each slice's page sized to what the read wants and bounded in bytes
//! by a running total (`sum(...) OVER (ORDER BY k ROWS UNBOUNDED PRECEDING)`, which
//! PostgreSQL computes as the index scan streams, so the `LIMIT` still stops it); a slice with
//! more rows than that ends with `ReadAgain`, and the reader goes on in another statement
//! where that splits no
//! partition (a range read's), else reads from a snapshot. The running total costs the server
//! about as much again as the rows' scan (0.5 us a row, measured); a bound that cost nothing
//! there (reading the answer as it streams and cancelling the rest) was tried and dropped:
//! a cancel request is not acknowledged, and one that arrives late cancels a later statement.

use super::errors::map_err;
use super::pool::{Conn, Lease, Pool};
use crate::storage::{Entry, Result, ScanIter, StorageError};
use bytes::Bytes;
use parking_lot::Mutex;
use std::collections::VecDeque;
use std::ops::Bound;
use std::sync::Arc;

const FIRST_PAGE_ROWS: i64 = 64;
const MAX_PAGE_ROWS: i64 = 1024;
const SMALL_PAGE_BYTES: usize = 1 << 20;
/// The least share of `SMALL_PAGE_BYTES` each scan of `get_and_scans` may read.
const MIN_SHARE_BYTES: usize = 64 << 10;
/// Rows each scan of `get_and_scans` reads at most: the bytes bound it first for small rows
/// (a CQL page of the drivers' default 5,000 rows of a wide partition is one statement).
const MAX_FIRST_ROWS: i64 = 8192;
const LARGE_PAGE_BYTES: usize = 4 << 20;

/// Where reads run: any pooled connection, or one snapshot's transaction.
#[derive(Clone)]
pub(super) enum Source {
    Pool(Arc<Pool>),
    Snapshot(Arc<SnapConn>),
}

/// A connection inside a REPEATABLE READ READ ONLY transaction (or why it could not start).
pub(super) struct SnapConn(pub Mutex<std::result::Result<Lease, String>>);

impl Source {
    pub fn run<T>(&self, f: impl FnOnce(&mut Conn) -> Result<T>) -> Result<T> {
        match self {
            Source::Pool(pool) => f(pool.get()?.conn()),
            Source::Snapshot(snap) => match &mut *snap.0.lock() {
                Ok(lease) => f(lease.conn()),
                Err(e) => Err(StorageError::Unavailable(e.clone())),
            },
        }
    }
}

pub(super) fn get(source: &Source, table: &str, key: &[u8]) -> Result<Option<Bytes>> {
    source.run(|c| {
        let stmt = c.stmt(&format!("SELECT v FROM {table} WHERE k = $1"))?;
        let row = c
            .wait(c.client.query_opt(&stmt, &[&key]))
            .map_err(map_err)?;
        Ok(row.map(|r| Bytes::from(r.get::<_, Vec<u8>>(0))))
    })
}

/// The values of `keys`, in their order (None: absent), read by one statement.
pub(super) fn get_many(
    source: &Source,
    table: &str,
    keys: &[Vec<u8>],
) -> Result<Vec<Option<Bytes>>> {
    let mut found: Vec<(Vec<u8>, Bytes)> = source.run(|c| {
        let stmt = c.stmt(&format!("SELECT k, v FROM {table} WHERE k = ANY($1)"))?;
        let keys: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
        let rows = c.wait(c.client.query(&stmt, &[&keys])).map_err(map_err)?;
        let row = |r: &tokio_postgres::Row| (r.get(0), Bytes::from(r.get::<_, Vec<u8>>(1)));
        Ok(rows.iter().map(row).collect())
    })?;
    found.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    let value_of = |key: &Vec<u8>| {
        let at = found.binary_search_by(|(k, _)| k.cmp(key)).ok()?;
        Some(found[at].1.clone())
    };
    Ok(keys.iter().map(value_of).collect())
}

pub(super) fn scan(
    source: Source,
    table: &'static str,
    lower: Bound<&[u8]>,
    upper: Bound<&[u8]>,
    reverse: bool,
) -> ScanIter {
    Box::new(PagedScan::new(source, table, lower, upper, reverse))
}

/// The value of `key` (if asked: None reads no key) and the scan of each of `slices`, all
/// read by one statement (one snapshot: the value and those pages are one state of the
/// table): each scan's page holds at least `first_entries` rows (within [`FIRST_PAGE_ROWS`,
/// `MAX_FIRST_ROWS`]) or the rows of a share of `SMALL_PAGE_BYTES`; a scan with more ends with
/// `ReadAgain` (it reads no more).
pub(super) fn get_and_scans(
    source: Source,
    table: &'static str,
    key: Option<&[u8]>,
    (slices, first_entries): (&[crate::storage::handle::ScanBounds], usize),
    reverse: bool,
) -> Result<(Option<Bytes>, Vec<ScanIter>)> {
    type Param<'a> = &'a (dyn tokio_postgres::types::ToSql + Sync);
    let mut scans: Vec<PagedScan> = (slices.iter())
        .map(|&(lower, upper)| PagedScan::new(source.clone(), table, lower, upper, reverse))
        .collect();
    let limit = (first_entries as i64).clamp(FIRST_PAGE_ROWS, MAX_FIRST_ROWS);
    let bytes = (SMALL_PAGE_BYTES / scans.len().max(1)).max(MIN_SHARE_BYTES) as i64;
    // Each row tagged with what it belongs to: -1 the key, else its scan's index.
    let mut parts = Vec::with_capacity(scans.len() + 1);
    if key.is_some() {
        parts.push(format!(
            "SELECT -1, k, v, 0::bigint FROM {table} WHERE k = $1"
        ));
    }
    let mut next_param = parts.len() + 1;
    for (i, scan) in scans.iter_mut().enumerate() {
        scan.again = false;
        let page = scan.bounded_sql(next_param);
        parts.push(format!("SELECT {i}, p.k, p.v, p.upto FROM ({page}) p"));
        next_param += scan.params(&0).count() + 1;
    }
    let sql = parts.join(" UNION ALL ");
    let rows = source.run(|c| {
        let stmt = c.stmt(&sql)?;
        let key = key.as_ref().map(|k| k as Param);
        let cap: Param = &bytes;
        let pages = (scans.iter()).flat_map(|s| s.params(&limit).chain(std::iter::once(cap)));
        let params: Vec<_> = key.into_iter().chain(pages).collect();
        c.wait(c.client.query(&stmt, &params)).map_err(map_err)
    })?;
    let mut value = None;
    // Each scan's rows and the largest running total of their bytes.
    let mut pages: Vec<(Page, i64)> = scans.iter().map(|_| (Vec::new(), 0)).collect();
    for r in &rows {
        let entry: (Vec<u8>, Vec<u8>) = (r.get(1), r.get(2));
        match usize::try_from(r.get::<_, i32>(0)) {
            Ok(i) => {
                pages[i].0.push(entry);
                pages[i].1 = pages[i].1.max(r.get::<_, i64>(3));
            }
            Err(_) => value = Some(Bytes::from(entry.1)),
        }
    }
    for (scan, (mut page, upto)) in scans.iter_mut().zip(pages) {
        // A union's rows come in no promised order: each page is put in its scan's.
        page.sort_unstable_by(|a, b| {
            if reverse {
                b.0.cmp(&a.0)
            } else {
                a.0.cmp(&b.0)
            }
        });
        // More may follow the page if it reached its row limit or its share of bytes.
        let more = page.len() as i64 == limit || upto >= bytes;
        scan.take_page(page, limit, more);
    }
    let scans = scans.into_iter().map(|s| Box::new(s) as ScanIter).collect();
    Ok((value, scans))
}

/// Rows of a scan's page: (key, value).
type Page = Vec<(Vec<u8>, Vec<u8>)>;

struct PagedScan {
    source: Source,
    table: &'static str,
    lower: Bound<Vec<u8>>,
    upper: Bound<Vec<u8>>,
    reverse: bool,
    buf: VecDeque<Entry>,
    done: bool,
    page_rows: i64,
    /// Whether the scan may read its next page (`get_and_scans`' may not: `ReadAgain`).
    again: bool,
}

impl PagedScan {
    fn new(
        source: Source,
        table: &'static str,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        reverse: bool,
    ) -> PagedScan {
        PagedScan {
            source,
            table,
            lower: lower.map(<[u8]>::to_vec),
            upper: upper.map(<[u8]>::to_vec),
            reverse,
            buf: VecDeque::new(),
            done: false,
            page_rows: FIRST_PAGE_ROWS,
            again: true,
        }
    }

    /// `SELECT ... WHERE <bounds> ORDER BY k <dir> LIMIT $n`, bounds as parameters numbered
    /// from `$first` (then the limit: [`PagedScan::params`]).
    fn sql(&self, first: usize) -> String {
        let (filter, dir, limit) = self.filter(first);
        format!(
            "SELECT k, v FROM {}{filter} ORDER BY k {dir} LIMIT {limit}",
            self.table
        )
    }

    /// [`PagedScan::sql`] with each row's running total of key and value bytes (`upto`), up to
    /// the row that reaches the parameter after the limit's (a byte budget).
    fn bounded_sql(&self, first: usize) -> String {
        let (filter, dir, limit) = self.filter(first);
        let bytes = first + self.params(&0).count();
        format!(
            "SELECT k, v, upto FROM (SELECT k, v, sum(octet_length(k) + octet_length(v)) \
             OVER (ORDER BY k {dir} ROWS UNBOUNDED PRECEDING) AS upto FROM {}{filter} \
             ORDER BY k {dir} LIMIT {limit}) w WHERE upto - octet_length(k) - octet_length(v) < ${bytes}",
            self.table
        )
    }

    /// The scan's WHERE clause (bounds as parameters numbered from `$first`), its direction
    /// and the limit's parameter.
    fn filter(&self, first: usize) -> (String, &'static str, String) {
        let mut conds = Vec::new();
        for (b, incl, excl) in [(&self.lower, ">=", ">"), (&self.upper, "<=", "<")] {
            let n = first + conds.len();
            match b {
                Bound::Included(_) => conds.push(format!("k {incl} ${n}")),
                Bound::Excluded(_) => conds.push(format!("k {excl} ${n}")),
                Bound::Unbounded => {}
            }
        }
        let filter = if conds.is_empty() {
            String::new()
        } else {
            format!(" WHERE {}", conds.join(" AND "))
        };
        let dir = if self.reverse { "DESC" } else { "ASC" };
        (filter, dir, format!("${}", first + conds.len()))
    }

    /// The parameters of [`PagedScan::sql`]: the bounds' keys, then `limit`.
    fn params<'a>(
        &'a self,
        limit: &'a i64,
    ) -> impl Iterator<Item = &'a (dyn tokio_postgres::types::ToSql + Sync)> {
        let keys = [&self.lower, &self.upper]
            .into_iter()
            .filter_map(|b| match b {
                Bound::Included(k) | Bound::Excluded(k) => Some(k),
                Bound::Unbounded => None,
            });
        let keys = keys.map(|k| k as &(dyn tokio_postgres::types::ToSql + Sync));
        keys.chain(std::iter::once(
            limit as &(dyn tokio_postgres::types::ToSql + Sync),
        ))
    }

    fn fetch(&mut self) -> Result<()> {
        let sql = self.sql(1);
        let limit = self.page_rows;
        let params: Vec<_> = self.params(&limit).collect();
        let rows = self.source.run(|c| {
            let stmt = c.stmt(&sql)?;
            c.wait(c.client.query(&stmt, &params)).map_err(map_err)
        })?;
        let page: Vec<_> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
        let more = page.len() as i64 == limit;
        self.take_page(page, limit, more);
        Ok(())
    }

    /// Buffers one page read with `limit`, in the scan's order: the scan is done unless `more`
    /// may follow, else goes on after its last key; the next page's size follows this one's
    /// bytes.
    fn take_page(&mut self, page: Page, limit: i64, more: bool) {
        let mut bytes = 0usize;
        for (k, v) in page {
            bytes += k.len() + v.len();
            self.buf.push_back((Bytes::from(k), Bytes::from(v)));
        }
        if !more {
            self.done = true;
        } else if let Some((last, _)) = self.buf.back() {
            let after = Bound::Excluded(last.to_vec());
            if self.reverse {
                self.upper = after;
            } else {
                self.lower = after;
            }
        }
        self.page_rows = if bytes > LARGE_PAGE_BYTES {
            (limit / 2).max(1)
        } else if bytes < SMALL_PAGE_BYTES {
            (limit * 2).min(MAX_PAGE_ROWS)
        } else {
            limit
        };
    }
}

impl Iterator for PagedScan {
    type Item = Result<Entry>;

    fn next(&mut self) -> Option<Result<Entry>> {
        if self.buf.is_empty() && !self.done && !self.again {
            self.done = true;
            return Some(Err(StorageError::ReadAgain));
        }
        if self.buf.is_empty() && !self.done {
            if let Err(e) = self.fetch() {
                self.done = true;
                return Some(Err(e));
            }
        }
        self.buf.pop_front().map(Ok)
    }
}
