//! A bounded pool of PostgreSQL connections, each driven by the thread waiting on it, used
//! synchronously.
//!
//! Why: the storage contract is synchronous (the query engine calls it from request threads),
//! tokio-postgres is async. Each connection has a current-thread tokio runtime of its own on
//! which its I/O task is spawned; a caller runs its statement with that runtime's `block_on`
//! (`Conn::wait`), so the calling thread sends the request, waits in the runtime's `epoll` for
//! the answer and reads it itself. Through a shared runtime thread (as before) every statement
//! cost two more thread wake-ups (waking that thread to send, being woken by it with the
//! answer): through the Python driver a point read took about 30% less of ringgate's CPU
//! without them, a sequential one half the time; at saturation, where one thread woke once for
//! many answers, throughput is unchanged (docs/PERFORMANCE.md, eleventh session).
//! A thread inside an async context cannot enter a runtime (startup code under the server's
//! `block_on`, a snapshot dropped on a worker), so there a statement runs on a scoped thread
//! of its own (`drive`; `storage::blocking` says which threads may block in place: the
//! blocking pool's, when started with `storage::blocking::spawn`).
//!
//! An idle connection's I/O task does not run, so the pool lets it look at its socket when it
//! is taken (`Conn::poll_idle`): a connection the server closed meanwhile (a restart, a
//! failover, `pg_terminate_backend`) is dropped then, never sent a commit.
//!
//! At most `max` connections; a caller that finds none idle and the pool full waits up to
//! `WAIT_MS` for one to come back, then gets `Unavailable` (so a leak or a burst cannot hang
//! requests forever). A connection whose socket closed is dropped when returned or taken.
//! Each connection's runtime is one `epoll` instance and a timer wheel: bounded with `max`.
//!
//! Failover (a group of a primary and standbys, issue 18): the connection settings list every
//! host with `target_session_attrs=read-write`, so a new connection reaches whichever host is
//! the primary now. A lost connection is dropped (above); a read-only answer (the server was
//! demoted) calls `note_demotion`, after which every connection of that pool (one storage
//! group's server) opened before it is dropped when next taken or returned; other groups'
//! pools keep theirs. `map_err` has no pool at hand, so it marks the thread, which is the one
//! holding the connection (statements run on the caller's thread), and the lease of that
//! pool, when it is returned or discarded on that thread, moves the pool's count on. A mark
//! left where no lease follows (a snapshot's connection returned by another thread) is at
//! worst counted by the next lease returned there: an extra reconnect of one pool; a stale
//! connection missed that way answers read-only again when used, and is counted then. While no
//! host takes a connection (the standby is not promoted yet) callers get `Unavailable` at once
//! for a backoff that doubles from `BACKOFF_MIN_MS` to `BACKOFF_MAX_MS` after each failed
//! attempt (reset by a success), so a failover does not turn every request into a connection
//! attempt.

use super::errors::map_err;
use crate::storage::{Result, StorageError};
use parking_lot::{Condvar, Mutex};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_postgres::{Client, NoTls, Statement};

/// How long a caller waits for a free connection before `Unavailable`.
const WAIT_MS: u64 = 10_000;
/// How long connecting may take before `Unavailable`.
const CONNECT_TIMEOUT_MS: u64 = 5_000;
/// Prepared statements kept per connection (scans prepare one per bound shape: few).
const MAX_STATEMENTS: usize = 64;
/// Yields that let an idle connection's I/O task see its socket (`Conn::poll_idle`).
const IDLE_POLL_YIELDS: usize = 3;
/// Fail-fast window after a failed connection attempt: first and largest.
const BACKOFF_MIN_MS: u64 = 50;
const BACKOFF_MAX_MS: u64 = 1_000;

thread_local! {
    /// A server answered this thread that it is read-only (module doc).
    static READ_ONLY_SEEN: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// A server answered that it is read-only: the pool of the connection this thread holds drops
/// its connections opened before (module doc).
pub(super) fn note_demotion() {
    READ_ONLY_SEEN.with(|seen| seen.set(true));
}

fn take_read_only_seen() -> bool {
    READ_ONLY_SEEN.with(|seen| seen.replace(false))
}

pub(super) struct Pool {
    config: tokio_postgres::Config,
    max: usize,
    state: Mutex<PoolState>,
    returned: Condvar,
    /// Read-only answers seen on this pool's connections (its server was demoted);
    /// connections opened before the latest are dropped.
    demotions: AtomicU64,
}

#[derive(Default)]
struct PoolState {
    idle: Vec<Conn>,
    /// Connections open, idle or lent.
    open: usize,
    /// After a failed connection attempt: no new attempt before `retry_at`.
    retry_at: Option<Instant>,
    backoff_ms: u64,
}

/// One connection and its prepared statements.
pub(super) struct Conn {
    pub client: Client,
    stmts: HashMap<String, Statement>,
    /// Its pool's `demotions` when it was opened.
    demotions: u64,
    /// The runtime its I/O task is spawned on, driven only by the thread waiting for an
    /// answer (module doc); `None` once dropped.
    rt: Option<tokio::runtime::Runtime>,
}

impl Drop for Conn {
    fn drop(&mut self) {
        // A connection may be dropped inside an async context (a snapshot released on the
        // server's runtime), where dropping a runtime in place would panic.
        if let Some(rt) = self.rt.take() {
            rt.shutdown_background();
        }
    }
}

impl Conn {
    /// Closed, or opened before its server answered that it is read-only (`demotions`: the
    /// pool's count).
    fn stale(&self, demotions: u64) -> bool {
        self.client.is_closed() || self.demotions < demotions
    }

    /// The statement for `sql`, prepared once per connection.
    pub fn stmt(&mut self, sql: &str) -> Result<Statement> {
        if let Some(s) = self.stmts.get(sql) {
            return Ok(s.clone());
        }
        let s = self.wait(self.client.prepare(sql)).map_err(map_err)?;
        if self.stmts.len() >= MAX_STATEMENTS {
            self.stmts.clear();
        }
        self.stmts.insert(sql.to_string(), s.clone());
        Ok(s)
    }

    /// Waits for a client future of this connection, the calling thread driving the
    /// connection's I/O meanwhile (module doc).
    pub fn wait<F>(&self, f: F) -> F::Output
    where
        F: std::future::Future + Send,
        F::Output: Send,
    {
        drive(
            self.rt
                .as_ref()
                .expect("a connection keeps its runtime until dropped"),
            f,
        )
    }

    /// Runs `sql` (statements without parameters) as one simple query.
    pub fn batch(&self, sql: &str) -> std::result::Result<(), tokio_postgres::Error> {
        self.wait(self.client.batch_execute(sql))
    }

    /// Lets the connection's I/O task see what arrived while it was idle (a closed socket:
    /// `is_closed` is true afterwards), so that a commit is never sent on a connection the
    /// server has already closed (its outcome would be unknown). Each yield of a
    /// current-thread runtime's `block_on` polls the I/O driver without waiting and then
    /// runs the tasks it woke; the first yield collects the socket's events, the next runs
    /// the task (tokio polls the waiting future first); a third is a margin. Tested by
    /// `tests/storage_contract/pg_errors.rs` (connections cut while idle).
    fn poll_idle(&self) {
        self.wait(async {
            for _ in 0..IDLE_POLL_YIELDS {
                tokio::task::yield_now().await;
            }
        });
    }
}

/// Runs `f` on `rt`, on this thread; on a thread that may be inside an async context (where a
/// runtime cannot be entered: startup code, a snapshot dropped on the server's runtime;
/// `storage::blocking`) on a thread of its own.
fn drive<F>(rt: &tokio::runtime::Runtime, f: F) -> F::Output
where
    F: std::future::Future + Send,
    F::Output: Send,
{
    if crate::storage::blocking::allowed() {
        return rt.block_on(f);
    }
    std::thread::scope(|s| {
        s.spawn(|| rt.block_on(f))
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p))
    })
}

impl Pool {
    pub fn new(config: tokio_postgres::Config, max: usize) -> Result<Arc<Pool>> {
        let mut config = config;
        config.connect_timeout(Duration::from_millis(CONNECT_TIMEOUT_MS));
        // Acknowledged means committed (and, with a synchronous standby, replicated), whatever
        // the server's default.
        config.options("-c synchronous_commit=on");
        Ok(Arc::new(Pool {
            config,
            max: max.max(1),
            state: Mutex::new(PoolState::default()),
            returned: Condvar::new(),
            demotions: AtomicU64::new(0),
        }))
    }

    /// An idle connection, a new one, or (pool full) the next one returned.
    pub fn get(self: &Arc<Self>) -> Result<Lease> {
        let mut st = self.state.lock();
        loop {
            if let Some(c) = st.idle.pop() {
                drop(st);
                c.poll_idle();
                if !c.stale(self.demotions()) {
                    return Ok(self.lease(c));
                }
                drop(c);
                st = self.state.lock();
                st.open -= 1;
                continue;
            }
            if st.open < self.max {
                if let Some(at) = st.retry_at.filter(|at| *at > Instant::now()) {
                    let ms = at.saturating_duration_since(Instant::now()).as_millis();
                    return Err(StorageError::Unavailable(format!(
                        "no PostgreSQL server takes connections (trying again in {ms} ms)"
                    )));
                }
                st.open += 1;
                drop(st);
                let connected = self.connect();
                let mut st = self.state.lock();
                return match connected {
                    Ok(c) => {
                        (st.retry_at, st.backoff_ms) = (None, 0);
                        Ok(self.lease(c))
                    }
                    Err(e) => {
                        st.open -= 1;
                        st.backoff_ms = (st.backoff_ms * 2).clamp(BACKOFF_MIN_MS, BACKOFF_MAX_MS);
                        st.retry_at = Some(Instant::now() + Duration::from_millis(st.backoff_ms));
                        drop(st);
                        self.returned.notify_one();
                        Err(e)
                    }
                };
            }
            if self
                .returned
                .wait_for(&mut st, Duration::from_millis(WAIT_MS))
                .timed_out()
            {
                return Err(StorageError::Unavailable(format!(
                    "no PostgreSQL connection free within {WAIT_MS} ms (storage.postgres.pool_size \
                     = {})",
                    self.max
                )));
            }
        }
    }

    fn demotions(&self) -> u64 {
        self.demotions.load(Ordering::SeqCst)
    }

    /// Counts a read-only answer this thread saw while it held one of this pool's connections.
    fn count_demotion(&self) {
        if take_read_only_seen() {
            self.demotions.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn lease(self: &Arc<Self>, conn: Conn) -> Lease {
        Lease {
            pool: Arc::clone(self),
            conn: Some(conn),
        }
    }

    /// Opens a connection; its I/O task runs on a runtime of its own until the socket closes,
    /// driven by whichever thread waits for an answer on it.
    fn connect(&self) -> Result<Conn> {
        let demotions = self.demotions();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| StorageError::Io(format!("cannot start a PostgreSQL runtime: {e}")))?;
        let (client, connection) = drive(&rt, self.config.connect(NoTls))
            .map_err(|e| StorageError::Unavailable(format!("cannot connect to PostgreSQL: {e}")))?;
        rt.spawn(async move {
            if let Err(e) = connection.await {
                tracing::warn!("PostgreSQL connection closed: {e}");
            }
        });
        Ok(Conn {
            client,
            stmts: HashMap::new(),
            demotions,
            rt: Some(rt),
        })
    }

    fn give_back(&self, conn: Conn) {
        self.count_demotion();
        let mut st = self.state.lock();
        if conn.stale(self.demotions()) {
            st.open -= 1;
        } else {
            st.idle.push(conn);
        }
        drop(st);
        self.returned.notify_one();
    }
}

/// A connection lent by the pool; returned when dropped. `discard` drops it instead (its
/// session is in an unknown state).
pub(super) struct Lease {
    pool: Arc<Pool>,
    conn: Option<Conn>,
}

impl Lease {
    pub fn conn(&mut self) -> &mut Conn {
        self.conn
            .as_mut()
            .expect("a lease holds its connection until dropped")
    }

    pub fn discard(mut self) {
        self.pool.count_demotion();
        if self.conn.take().is_some() {
            self.pool.state.lock().open -= 1;
            self.pool.returned.notify_one();
        }
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        if let Some(c) = self.conn.take() {
            self.pool.give_back(c);
        }
    }
}
