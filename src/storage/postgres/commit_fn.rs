//! A partition commit as one statement: the server-side function `ringgate_commit` checks the
//! owner epoch, locks and checks the conditions and applies the writes, in the implicit
//! transaction of that one statement. One round trip per commit (the statement is prepared
//! once per connection; tokio-postgres sends Bind/Execute/Sync together), where the explicit
//! transaction took six (BEGIN, owner row, advisory locks, condition rows, writes, COMMIT).
//!
//! The steps and their reasons are `handle.rs`'s (module doc): the owner row `FOR SHARE`,
//! then the advisory locks of the condition keys (sorted by the caller, so two commits cannot
//! deadlock), then the condition rows `FOR UPDATE` and their values; a PL/pgSQL function
//! takes a new snapshot per statement under READ COMMITTED, so each check sees every commit
//! that finished before it, as the separate statements did. A refusal writes nothing and is
//! returned as a status, not raised: `(0, 0)` applied, `(1, current epoch)` fenced, `(2, i)`
//! the i-th condition (0-based) does not hold.
//!
//! Outcome: an error answered by the server means rolled back; a statement sent whose answer
//! never came (the connection broke) is `Unknown`, as a COMMIT without answer was.

use super::errors::commit_failed;
use super::pool::Pool;
use super::write::Sorted;
use crate::storage::handle::{Condition, Epoch};
use crate::storage::{Result, StorageError};
use std::sync::Arc;

/// Created with the tables (`schema.rs`); `CREATE OR REPLACE`, so a newer release replaces it.
pub(super) const CREATE_FUNCTION: &str = r#"
CREATE OR REPLACE FUNCTION ringgate_commit(
    p_sid int8, p_pid int8, p_epoch int8, p_locks int8[],
    p_cond_keys bytea[], p_cond_vals bytea[],
    p_keys bytea[], p_vals bytea[], p_tokens int8[], p_dels bytea[],
    p_size_keys bytea[], p_size_vals bytea[], p_size_dels bytea[],
    OUT status int4, OUT detail int8)
LANGUAGE plpgsql AS $fn$
DECLARE
    cur int8;
    i int4;
    found_v bytea;
BEGIN
    SELECT epoch INTO cur FROM ringgate_owner
        WHERE storage_id = p_sid AND partition_id = p_pid FOR SHARE;
    IF NOT FOUND THEN cur := 0; END IF;
    IF cur <> p_epoch THEN status := 1; detail := cur; RETURN; END IF;
    IF cardinality(p_cond_keys) > 0 THEN
        PERFORM pg_advisory_xact_lock(x) FROM unnest(p_locks) AS x;
        PERFORM 1 FROM ringgate_data WHERE k = ANY(p_cond_keys) FOR UPDATE;
        FOR i IN 1 .. cardinality(p_cond_keys) LOOP
            SELECT v INTO found_v FROM ringgate_data WHERE k = p_cond_keys[i];
            IF NOT FOUND THEN found_v := NULL; END IF;
            IF found_v IS DISTINCT FROM p_cond_vals[i] THEN
                status := 2; detail := i - 1; RETURN;
            END IF;
        END LOOP;
    END IF;
    IF cardinality(p_keys) > 0 THEN
        INSERT INTO ringgate_data (k, v, token)
            SELECT * FROM unnest(p_keys, p_vals, p_tokens)
            ON CONFLICT (k) DO UPDATE SET v = excluded.v,
                token = COALESCE(excluded.token, ringgate_data.token);
    END IF;
    IF cardinality(p_dels) > 0 THEN
        DELETE FROM ringgate_data WHERE k = ANY(p_dels);
    END IF;
    IF cardinality(p_size_keys) > 0 THEN
        INSERT INTO ringgate_sizes (k, v) SELECT * FROM unnest(p_size_keys, p_size_vals)
            ON CONFLICT (k) DO UPDATE SET v = excluded.v;
    END IF;
    IF cardinality(p_size_dels) > 0 THEN
        DELETE FROM ringgate_sizes WHERE k = ANY(p_size_dels);
    END IF;
    status := 0; detail := 0;
END
$fn$;
"#;

const CALL: &str = "SELECT status, detail FROM ringgate_commit(\
    $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)";

/// What a refused commit was refused for.
pub(super) enum Refused {
    /// The owner row holds this epoch.
    Fenced(Epoch),
    /// This condition (its index) does not hold.
    Conflict(usize),
}

/// Runs the commit; `Ok(Err(..))` when the function refused it (nothing written).
pub(super) fn call(
    pool: &Arc<Pool>,
    ids: (u64, u64, Epoch),
    conditions: &[Condition],
    data: Sorted,
    sizes: Sorted,
) -> Result<std::result::Result<(), Refused>> {
    let mut locks: Vec<i64> = conditions.iter().map(|x| lock_key(x.key())).collect();
    locks.sort_unstable();
    locks.dedup();
    let cond_keys: Vec<&[u8]> = conditions.iter().map(|x| &x.key()[..]).collect();
    let cond_vals: Vec<Option<&[u8]>> = conditions.iter().map(expected).collect();
    let (sid, pid, epoch) = (ids.0 as i64, ids.1 as i64, ids.2 as i64);
    let (keys, values, deleted) = (refs(&data.keys), refs(&data.values), refs(&data.deleted));
    let (size_keys, size_values, size_deleted) =
        (refs(&sizes.keys), refs(&sizes.values), refs(&sizes.deleted));
    let mut lease = pool.get()?;
    let c = lease.conn();
    if c.client.is_closed() {
        // Died while idle: nothing was sent, so the outcome is known (nothing happened).
        lease.discard();
        return Err(StorageError::Unavailable(
            "PostgreSQL: connection closed".into(),
        ));
    }
    let stmt = c.stmt(CALL)?;
    let params: [&(dyn tokio_postgres::types::ToSql + Sync); 13] = [
        &sid,
        &pid,
        &epoch,
        &locks,
        &cond_keys,
        &cond_vals,
        &keys,
        &values,
        &data.tokens,
        &deleted,
        &size_keys,
        &size_values,
        &size_deleted,
    ];
    let row = match c.wait(c.client.query_one(&stmt, &params)) {
        Ok(row) => row,
        Err(e) => return Err(commit_failed(lease, e)),
    };
    let (status, detail): (i32, i64) = (row.get(0), row.get(1));
    Ok(match status {
        0 => Ok(()),
        1 => Err(Refused::Fenced(detail as u64)),
        _ => Err(Refused::Conflict(detail as usize)),
    })
}

fn refs(v: &[bytes::Bytes]) -> Vec<&[u8]> {
    v.iter().map(|b| &b[..]).collect()
}

/// The value a condition expects (None: absent).
fn expected(c: &Condition) -> Option<&[u8]> {
    match c {
        Condition::Absent(_) => None,
        Condition::Unchanged { read, .. } => read.as_deref(),
    }
}

/// The advisory lock key of a condition key (FNV-1a, 64 bits: stable across processes).
fn lock_key(key: &[u8]) -> i64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in key {
        h = (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
    }
    h as i64
}
