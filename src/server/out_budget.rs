//! Byte budgets on responses not yet written to their clients.
//!
//! A client that pipelines reads of 2 MiB rows and never reads the answers would otherwise
//! have the server hold every response in memory. Each connection counts the bytes of its
//! responses from when they are queued for its writer until they are written to the socket, and
//! all connections share a global count. A request waits before it executes while its
//! connection is over `limits.max_unsent_bytes_per_connection`, or while the global count is
//! over `limits.max_unsent_bytes` and its connection has anything unsent (a client that reads
//! its answers keeps being served). Waiting requests hold their in-flight slot, so the
//! connection soon stops reading requests too. The overshoot is at most the responses of the
//! requests already executing (one per runtime thread).

use parking_lot::Mutex;
use std::pin::pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::sync::Notify;

/// The count across connections.
pub struct GlobalOut {
    bytes: AtomicUsize,
    limit: usize,
    /// Woken whenever any connection writes: waiters re-check both counts.
    written: Notify,
}

impl GlobalOut {
    pub fn new(limit: usize) -> Arc<Self> {
        Arc::new(GlobalOut {
            bytes: AtomicUsize::new(0),
            limit,
            written: Notify::new(),
        })
    }

    #[cfg(test)]
    fn bytes(&self) -> usize {
        self.bytes.load(Ordering::Relaxed)
    }
}

/// One connection's count.
pub struct OutBudget {
    bytes: Mutex<usize>,
    limit: usize,
    global: Arc<GlobalOut>,
}

impl OutBudget {
    pub fn new(limit: usize, global: Arc<GlobalOut>) -> Self {
        OutBudget {
            bytes: Mutex::new(0),
            limit,
            global,
        }
    }

    /// Whether this connection may execute another request now.
    pub fn has_room(&self) -> bool {
        let mine = *self.bytes.lock();
        mine <= self.limit
            && (mine == 0 || self.global.bytes.load(Ordering::Relaxed) <= self.global.limit)
    }

    /// Waits until this connection may execute another request.
    pub async fn wait_for_room(&self) {
        if self.has_room() {
            return; // the common case, without touching the shared Notify
        }
        loop {
            // Registered before the check, so a write between the check and the wait wakes it.
            let mut written = pin!(self.global.written.notified());
            written.as_mut().enable();
            if self.has_room() {
                return;
            }
            written.await;
        }
    }

    /// Whether every queued response byte has been written to the socket.
    pub fn is_drained(&self) -> bool {
        *self.bytes.lock() == 0
    }

    /// `n` response bytes were queued for the writer.
    pub fn queued(&self, n: usize) {
        *self.bytes.lock() += n;
        self.global.bytes.fetch_add(n, Ordering::Relaxed);
    }

    /// `n` queued bytes were written to the socket.
    pub fn written(&self, n: usize) {
        {
            let mut mine = self.bytes.lock();
            let n = n.min(*mine);
            *mine -= n;
            self.global.bytes.fetch_sub(n, Ordering::Relaxed);
        }
        self.global.written.notify_waiters();
    }
}

impl Drop for OutBudget {
    /// Bytes never written (the client went away) leave the global count with the connection.
    fn drop(&mut self) {
        let left = *self.bytes.lock();
        self.written(left);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn a_connection_over_its_budget_waits_until_its_bytes_are_written() {
        let global = GlobalOut::new(1 << 30);
        let conn = Arc::new(OutBudget::new(100, Arc::clone(&global)));
        conn.queued(101);
        let waiter = tokio::spawn({
            let conn = Arc::clone(&conn);
            async move { conn.wait_for_room().await }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiter.is_finished());
        conn.written(50);
        tokio::time::timeout(Duration::from_secs(5), waiter)
            .await
            .expect("woken")
            .unwrap();
    }

    #[tokio::test]
    async fn over_the_global_budget_only_connections_with_unsent_bytes_wait() {
        let global = GlobalOut::new(100);
        let hog = OutBudget::new(1000, Arc::clone(&global));
        let reader = OutBudget::new(1000, Arc::clone(&global));
        hog.queued(500);
        assert!(!hog.has_room());
        assert!(reader.has_room());
        drop(hog);
        assert_eq!(global.bytes(), 0);
    }
}
