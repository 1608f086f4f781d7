//! Reads: point gets and ordered scans that page through a key range.
//!
//! A scan never loads its whole range: it fetches pages of `LIMIT n` rows in key order (an
//! index range scan, ascending or descending) and resumes after the last key it returned. The
//! page adapts to the rows' size: it starts at `FIRST_PAGE_ROWS`, doubles while pages stay under
//! `SMALL_PAGE_BYTES` and halves above `LARGE_PAGE_BYTES`, within [1, `MAX_PAGE_ROWS`].
//! Scans through the pool read each page at its own point in time (each page is consistent,
//! the whole scan is not, as with a paged CQL query); scans of a snapshot run every page in the
//! snapshot's REPEATABLE READ transaction, so they see one point in time.

use super::errors::map_err;
use super::pool::{wait, Conn, Lease, Pool};
use crate::storage::{Entry, Result, ScanIter, StorageError};
use bytes::Bytes;
use parking_lot::Mutex;
use std::collections::VecDeque;
use std::ops::Bound;
use std::sync::Arc;

pub(super) const FIRST_PAGE_ROWS: i64 = 64;
const MAX_PAGE_ROWS: i64 = 1024;
const SMALL_PAGE_BYTES: usize = 1 << 20;
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
        let row = wait(c.client.query_opt(&stmt, &[&key])).map_err(map_err)?;
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
        let rows = wait(c.client.query(&stmt, &[&keys])).map_err(map_err)?;
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

/// The value of `key` and a scan of each of `slices` whose first pages are read by the same
/// statement (one snapshot: the value and those pages are one state of the table; later pages
/// are statements of their own, as in any scan).
pub(super) fn get_and_scans(
    source: Source,
    table: &'static str,
    key: &[u8],
    slices: &[crate::storage::handle::ScanBounds],
    reverse: bool,
) -> Result<(Option<Bytes>, Vec<ScanIter>)> {
    let mut scans: Vec<PagedScan> = (slices.iter())
        .map(|&(lower, upper)| PagedScan::new(source.clone(), table, lower, upper, reverse))
        .collect();
    // Each row tagged with what it belongs to: -1 the key, else its scan's index.
    let mut sql = format!("SELECT -1, k, v FROM {table} WHERE k = $1");
    let mut next_param = 2;
    for (i, scan) in scans.iter().enumerate() {
        let page = scan.sql(next_param);
        sql.push_str(&format!(" UNION ALL SELECT {i}, p.k, p.v FROM ({page}) p"));
        next_param += scan.params(&0).count();
    }
    let limit = FIRST_PAGE_ROWS;
    let rows = source.run(|c| {
        let stmt = c.stmt(&sql)?;
        let key: &(dyn tokio_postgres::types::ToSql + Sync) = &key;
        let pages = scans.iter().flat_map(|s| s.params(&limit));
        let params: Vec<_> = std::iter::once(key).chain(pages).collect();
        wait(c.client.query(&stmt, &params)).map_err(map_err)
    })?;
    let mut value = None;
    let mut pages: Vec<Vec<(Vec<u8>, Vec<u8>)>> = scans.iter().map(|_| Vec::new()).collect();
    for r in &rows {
        let entry: (Vec<u8>, Vec<u8>) = (r.get(1), r.get(2));
        match usize::try_from(r.get::<_, i32>(0)) {
            Ok(i) => pages[i].push(entry),
            Err(_) => value = Some(Bytes::from(entry.1)),
        }
    }
    for (scan, mut page) in scans.iter_mut().zip(pages) {
        // A union's rows come in no promised order: each page is put in its scan's.
        page.sort_unstable_by(|a, b| {
            if reverse {
                b.0.cmp(&a.0)
            } else {
                a.0.cmp(&b.0)
            }
        });
        scan.take_page(page, limit);
    }
    let scans = scans.into_iter().map(|s| Box::new(s) as ScanIter).collect();
    Ok((value, scans))
}

struct PagedScan {
    source: Source,
    table: &'static str,
    lower: Bound<Vec<u8>>,
    upper: Bound<Vec<u8>>,
    reverse: bool,
    buf: VecDeque<Entry>,
    done: bool,
    page_rows: i64,
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
        }
    }

    /// `SELECT ... WHERE <bounds> ORDER BY k <dir> LIMIT $n`, bounds as parameters numbered
    /// from `$first` (then the limit: [`PagedScan::params`]).
    fn sql(&self, first: usize) -> String {
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
        format!(
            "SELECT k, v FROM {}{filter} ORDER BY k {dir} LIMIT ${}",
            self.table,
            first + conds.len()
        )
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
            wait(c.client.query(&stmt, &params)).map_err(map_err)
        })?;
        let page = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
        self.take_page(page, limit);
        Ok(())
    }

    /// Buffers one page read with `limit`, in the scan's order: the scan is done when it was
    /// short, else goes on after its last key; the next page's size follows this one's bytes.
    fn take_page(&mut self, page: Vec<(Vec<u8>, Vec<u8>)>, limit: i64) {
        let rows = page.len();
        let mut bytes = 0usize;
        for (k, v) in page {
            bytes += k.len() + v.len();
            self.buf.push_back((Bytes::from(k), Bytes::from(v)));
        }
        if (rows as i64) < limit {
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
        if self.buf.is_empty() && !self.done {
            if let Err(e) = self.fetch() {
                self.done = true;
                return Some(Err(e));
            }
        }
        self.buf.pop_front().map(Ok)
    }
}
