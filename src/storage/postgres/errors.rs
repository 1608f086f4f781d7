//! PostgreSQL errors as storage errors, and the transaction wrapper that tells a failed commit
//! from one whose outcome is unknown.
//!
//! Retryable (`Unavailable`): no connection or a lost one (I/O), connection exceptions (SQLSTATE
//! class 08), serialization failures and deadlocks (40), insufficient resources (53), operator
//! intervention (57P: shutdown, restart). Anything else is `Io` with PostgreSQL's message. A
//! COMMIT whose answer never came (the connection broke) is `Unknown`: PostgreSQL may have
//! committed it (it may even have reached a synchronous standby), so it is neither a success
//! nor a failure.

use super::pool::{wait, Conn, Pool};
use crate::storage::{Result, StorageError};
use std::sync::Arc;

pub(super) fn map_err(e: tokio_postgres::Error) -> StorageError {
    let text = match e.as_db_error() {
        Some(db) => format!("PostgreSQL: {db}"),
        None => format!("PostgreSQL: {e}"),
    };
    match e.code().map(|c| c.code()) {
        Some(c) if ["08", "40", "53", "57P"].iter().any(|p| c.starts_with(p)) => {
            StorageError::Unavailable(text)
        }
        Some(_) => StorageError::Io(text),
        None if e.is_closed() || io_source(&e) => StorageError::Unavailable(text),
        None => StorageError::Io(text),
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
    wait(c.client.batch_execute(begin)).map_err(map_err)?;
    match f(c) {
        Ok(v) => match wait(c.client.batch_execute("COMMIT")) {
            Ok(()) => Ok(v),
            // The server answered: the transaction is rolled back.
            Err(e) if e.as_db_error().is_some() => Err(map_err(e)),
            Err(e) => {
                lease.discard();
                Err(StorageError::Unknown(format!("PostgreSQL: {e}")))
            }
        },
        Err(e) => {
            if wait(c.client.batch_execute("ROLLBACK")).is_err() {
                lease.discard();
            }
            Err(e)
        }
    }
}
