//! Connections still in their handshake, so that silent sockets cannot hold every slot.
//!
//! A connection is in its handshake from accept until it is ready for queries (STARTUP done
//! and, with `auth.enabled`, logged in). Each one is registered here in accept order. Two things
//! end a handshake that takes too long: its own deadlines (`limits.startup_timeout_ms`,
//! `limits.auth_timeout_ms`, enforced by the connection), and the listener, which closes the
//! oldest connection still in its handshake whenever fewer than `limits.reserved_connections`
//! slots are free, so a client that can log in always finds room. Ready connections are never
//! closed this way.

use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;
use tokio::time::Instant;

/// The registry: accept sequence number -> the connection's eviction signal. Bounded by
/// `limits.max_connections` (one entry per accepted connection holding a slot).
#[derive(Default)]
pub struct Handshakes {
    pending: Mutex<BTreeMap<u64, Arc<Notify>>>,
    next_id: Mutex<u64>,
}

impl Handshakes {
    /// Registers a just-accepted connection.
    pub fn register(self: &Arc<Self>) -> Pending {
        let id = {
            let mut next = self.next_id.lock();
            *next += 1;
            *next
        };
        let evict = Arc::new(Notify::new());
        self.pending.lock().insert(id, Arc::clone(&evict));
        Pending {
            id,
            evict,
            registry: Arc::clone(self),
        }
    }

    /// Signals the oldest connection still in its handshake to close; false if there is none.
    pub fn evict_oldest(&self) -> bool {
        match self.pending.lock().pop_first() {
            Some((_, evict)) => {
                // notify_one keeps the signal if the connection is not waiting right now.
                evict.notify_one();
                true
            }
            None => false,
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.pending.lock().len()
    }
}

/// One connection's entry; removed when the handshake finishes or the connection ends.
pub struct Pending {
    id: u64,
    evict: Arc<Notify>,
    registry: Arc<Handshakes>,
}

impl Pending {
    /// The handshake is done: the connection can no longer be evicted.
    pub fn finish(&self) {
        self.registry.pending.lock().remove(&self.id);
    }

    /// Completes when the listener wants this connection closed to make room.
    pub async fn evicted(&self) {
        self.evict.notified().await
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        self.finish();
    }
}

/// A connection's side of its handshake: the deadline it is under and the eviction signal.
pub struct HandshakeClock {
    pending: Pending,
    deadline: Instant,
    auth_timeout: Duration,
    started: bool,
    done: bool,
}

impl HandshakeClock {
    pub fn new(pending: Pending, limits: &crate::config::Limits) -> Self {
        HandshakeClock {
            pending,
            deadline: Instant::now() + Duration::from_millis(limits.startup_timeout_ms),
            auth_timeout: Duration::from_millis(limits.auth_timeout_ms),
            started: false,
            done: false,
        }
    }

    /// Records the connection's progress after each request: STARTUP restarts the clock with
    /// the authentication timeout; being ready ends the handshake.
    pub fn progress(&mut self, started: bool, authenticated: bool) {
        if self.done {
            return;
        }
        if started && !self.started {
            self.started = true;
            self.deadline = Instant::now() + self.auth_timeout;
        }
        if started && authenticated {
            self.done = true;
            self.pending.finish();
        }
    }

    /// Completes, with the reason, when the connection must close: its handshake took too long
    /// or the listener needs its slot. Never completes once the handshake is done.
    pub async fn expired(&self) -> &'static str {
        if self.done {
            return std::future::pending().await;
        }
        tokio::select! {
            _ = tokio::time::sleep_until(self.deadline) => {
                if self.started { "not logged in within limits.auth_timeout_ms" }
                else { "no STARTUP within limits.startup_timeout_ms" }
            }
            _ = self.pending.evicted() => "closed in its handshake to make room for new clients",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_oldest_unfinished_handshake_is_evicted_first() {
        let reg = Arc::new(Handshakes::default());
        let first = reg.register();
        let second = reg.register();
        let third = reg.register();
        first.finish();
        assert!(reg.evict_oldest());
        // The signal waits for the connection to look at it.
        tokio::time::timeout(std::time::Duration::from_secs(5), second.evicted())
            .await
            .expect("second evicted");
        drop(third);
        assert_eq!(reg.len(), 0);
        assert!(!reg.evict_oldest());
    }
}
