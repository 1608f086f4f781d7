//! Writes to one key space table inside a transaction: all puts as one `INSERT ... SELECT FROM
//! unnest(...) ON CONFLICT DO UPDATE`, all deletes as one `DELETE ... WHERE k = ANY(...)`, so a
//! commit costs two statements per table whatever its size. One statement may touch a row only
//! once, so the last write of a key in the list wins (as in a storage batch). Rows are written
//! in key order, so two transactions writing the same keys lock them in the same order and
//! cannot deadlock on them.

use super::errors::map_err;
use super::pool::Conn;
use crate::storage::Result;
use bytes::Bytes;
use std::collections::BTreeMap;

/// One write: key, value (None deletes), and the token of a local record (data table only).
pub(super) type Write = (Bytes, Option<Bytes>, Option<i64>);

/// A list of writes with one entry per key (the last write of a key wins, as in a storage
/// batch), in key order: puts as parallel arrays, deletes apart.
#[derive(Default)]
pub(super) struct Sorted {
    pub keys: Vec<Bytes>,
    pub values: Vec<Bytes>,
    pub tokens: Vec<Option<i64>>,
    pub deleted: Vec<Bytes>,
}

pub(super) fn sorted(writes: Vec<Write>) -> Sorted {
    let mut last: BTreeMap<Bytes, (Option<Bytes>, Option<i64>)> = BTreeMap::new();
    for (k, v, t) in writes {
        last.insert(k, (v, t));
    }
    let mut out = Sorted::default();
    for (k, (v, t)) in last {
        match v {
            Some(v) => {
                out.keys.push(k);
                out.values.push(v);
                out.tokens.push(t);
            }
            None => out.deleted.push(k),
        }
    }
    out
}

pub(super) fn apply(c: &mut Conn, table: &str, writes: Vec<Write>) -> Result<()> {
    let Sorted {
        keys,
        values,
        tokens,
        deleted,
    } = sorted(writes);
    let keys: Vec<&[u8]> = keys.iter().map(|k| &k[..]).collect();
    let values: Vec<&[u8]> = values.iter().map(|v| &v[..]).collect();
    let deleted: Vec<&[u8]> = deleted.iter().map(|k| &k[..]).collect();
    if !keys.is_empty() {
        if table == super::DATA {
            // A write without a token (the plain `Store` path) keeps the record's token.
            let stmt = c.stmt(
                "INSERT INTO ringgate_data (k, v, token) \
                 SELECT * FROM unnest($1::bytea[], $2::bytea[], $3::int8[]) \
                 ON CONFLICT (k) DO UPDATE SET v = excluded.v, \
                 token = COALESCE(excluded.token, ringgate_data.token)",
            )?;
            c.wait(c.client.execute(&stmt, &[&keys, &values, &tokens]))
                .map_err(map_err)?;
        } else {
            let stmt = c.stmt(&format!(
                "INSERT INTO {table} (k, v) SELECT * FROM unnest($1::bytea[], $2::bytea[]) \
                 ON CONFLICT (k) DO UPDATE SET v = excluded.v"
            ))?;
            c.wait(c.client.execute(&stmt, &[&keys, &values]))
                .map_err(map_err)?;
        }
    }
    if !deleted.is_empty() {
        let stmt = c.stmt(&format!("DELETE FROM {table} WHERE k = ANY($1::bytea[])"))?;
        c.wait(c.client.execute(&stmt, &[&deleted]))
            .map_err(map_err)?;
    }
    Ok(())
}
