//! PostgreSQL errors as storage errors, and the transaction wrapper that tells a failed commit
//! from one whose outcome is unknown.
//!
//! Retryable (`Unavailable`): no connection or a lost one (I/O), connection exceptions (SQLSTATE
//! class 08), serialization failures and deadlocks (40), insufficient resources (53), operator
//! intervention (57P: shutdown, restart), a read-only server (25006: a primary that was demoted
//! to a standby in a failover; every connection of that server's pool opened before is then
//! dropped, see `pool::note_demotion`). Anything else is `Io` with PostgreSQL's message.
//!
//! A COMMIT (or the one-statement commit function) whose answer never came (the connection
//! broke) is `Unknown`: PostgreSQL may have committed it (it may even have reached a
//! synchronous standby), so it is neither a success nor a failure. So is one answered by a
//! shutdown or a cancel (57P01-03, 57014) or a connection error (08): a primary shut down or
//! demoted while the commit waited for its synchronous standby has already committed locally
//! (PostgreSQL says so in a warning) and the standby may have it too.

use super::pool::{note_demotion, Conn, Lease, Pool};
use crate::storage::{Result, StorageError};
use std::sync::Arc;

pub(super) fn map_err(e: tokio_postgres::Error) -> StorageError {
    let text = match e.as_db_error() {
        Some(db) => format!("PostgreSQL: {db}"),
        None => format!("PostgreSQL: {e}"),
    };
    match e.code().map(|c| c.code()) {
        Some("25006") => {
            note_demotion();
            StorageError::Unavailable(text)
        }
        Some(c) if ["08", "40", "53", "57P"].iter().any(|p| c.starts_with(p)) => {
            StorageError::Unavailable(text)
        }
        Some(_) => StorageError::Io(text),
        None if e.is_closed() || io_source(&e) => StorageError::Unavailable(text),
        None => StorageError::Io(text),
    }
}

/// The error of a statement that commits on `lease`'s connection, which is dropped when the
/// outcome is unknown (its session state is unknown too).
pub(super) fn commit_failed(lease: Lease, e: tokio_postgres::Error) -> StorageError {
    let e = commit_err(e);
    if matches!(e, StorageError::Unknown(_)) {
        lease.discard();
    }
    e
}

/// Outcome unknown unless the server surely rolled the commit back (see the module doc).
fn commit_err(e: tokio_postgres::Error) -> StorageError {
    let unknown = match e.code().map(|c| c.code()) {
        Some(c) => c.starts_with("08") || c.starts_with("57P") || c == "57014",
        None => e.as_db_error().is_none(),
    };
    match unknown {
        true => StorageError::Unknown(format!("PostgreSQL: {e}")),
        false => map_err(e),
    }
}

fn io_source(e: &tokio_postgres::Error) -> bool {
    std::error::Error::source(e).is_some_and(|s| s.is::<std::io::Error>())
}

/// Runs `f` between `begin` (a BEGIN statement) and COMMIT on a pooled connection; on an error
/// from `f` rolls back. A COMMIT that fails without an answer from the server is `Unknown`.
pub(super) fn in_txn<T>(
    pool: &Arc<Pool>,
    begin: &str,
    f: impl FnOnce(&mut Conn) -> Result<T>,
) -> Result<T> {
    let mut lease = pool.get()?;
    let c = lease.conn();
    c.batch(begin).map_err(map_err)?;
    match f(c) {
        Ok(v) => match c.batch("COMMIT") {
            Ok(()) => Ok(v),
            Err(e) => Err(commit_failed(lease, e)),
        },
        Err(e) => {
            if c.batch("ROLLBACK").is_err() {
                lease.discard();
            }
            Err(e)
        }
    }
}
