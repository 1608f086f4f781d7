//! The engine's clock: wall time (write timestamps, TTL expiry, local deletion times,
//! gc_grace) and monotonic time (token-bucket refill, server-side retry), from one source
//! that tests can replace.
//!
//! A leaf. `Clock::system()` reads the operating system's clocks; `Clock::manual(at)` stands
//! still until a test moves it (`advance`), so TTL expiry, gc_grace and throttling are tested
//! without sleeping (`tests/engine/`). The engine holds one (`Engine::clock`) and hands it to
//! what reads time; a request reads it about once per statement.
//!
//! Why an `Option` and not a trait object: the system clock is the hot path (every point
//! read and write), and a `None` check before `SystemTime::now()` costs a predictable
//! branch, where a `dyn` call could not be inlined. A manual clock is one atomic load.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Where time comes from; cloning shares it (a manual clock moves for every clone).
#[derive(Debug, Clone, Default)]
pub struct Clock {
    manual: Option<Arc<Manual>>,
}

#[derive(Debug)]
struct Manual {
    /// Microseconds since the Unix epoch.
    now_micros: AtomicI64,
    /// What `instant()` returns at `start_micros`: monotonic time moves with wall time.
    base: Instant,
    start_micros: i64,
}

/// Microseconds since the Unix epoch on the system clock (zero before the epoch). For what
/// names the real time whatever the engine's clock: uuids, backups, batch log ids.
pub fn system_micros() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as i64)
}

impl Clock {
    /// The operating system's clocks.
    pub fn system() -> Clock {
        Clock { manual: None }
    }

    /// A clock that reads `at_micros` (since the Unix epoch) until `advance` moves it.
    pub fn manual(at_micros: i64) -> Clock {
        Clock {
            manual: Some(Arc::new(Manual {
                now_micros: AtomicI64::new(at_micros),
                base: Instant::now(),
                start_micros: at_micros,
            })),
        }
    }

    /// Whether this is a manual clock.
    pub fn is_manual(&self) -> bool {
        self.manual.is_some()
    }

    /// Moves a manual clock forward (wall and monotonic time alike).
    ///
    /// # Panics
    /// On the system clock: only tests move time.
    pub fn advance(&self, by: Duration) {
        let m = self.manual.as_ref().expect("only a manual clock moves");
        m.now_micros
            .fetch_add(by.as_micros() as i64, Ordering::Relaxed);
    }

    /// Microseconds since the Unix epoch.
    #[inline]
    pub fn now_micros(&self) -> i64 {
        match &self.manual {
            None => system_micros(),
            Some(m) => m.now_micros.load(Ordering::Relaxed),
        }
    }

    /// Milliseconds since the Unix epoch: the clock of expiry (TTL) and liveness.
    #[inline]
    pub fn now_millis(&self) -> i64 {
        self.now_micros().div_euclid(1000)
    }

    /// Seconds since the Unix epoch: the clock of local deletion times and gc_grace.
    #[inline]
    pub fn now_secs(&self) -> i32 {
        (self.now_micros() / 1_000_000) as i32
    }

    /// Monotonic time (buckets, retry deadlines). A manual clock's instants move only with
    /// `advance`.
    #[inline]
    pub fn instant(&self) -> Instant {
        match &self.manual {
            None => Instant::now(),
            Some(m) => {
                let moved = m.now_micros.load(Ordering::Relaxed) - m.start_micros;
                m.base + Duration::from_micros(moved.max(0) as u64)
            }
        }
    }
}

/// Test hooks that widen a window for a kill -9 or a race (e.g. `RINGGATE_TEST_SWEEP_PAUSE_MS`):
/// sleeps for the milliseconds environment variable `var` gives (0 or unset: not at all). `cached`
/// is the call site's own cell, so the variable is read once.
pub fn test_pause(var: &str, cached: &std::sync::OnceLock<u64>) {
    let ms = *cached.get_or_init(|| {
        std::env::var(var)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    });
    if ms > 0 {
        std::thread::sleep(Duration::from_millis(ms));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manual_clock_moves_only_when_advanced_and_for_every_clone() {
        let c = Clock::manual(1_000_000_000_000_000);
        let twin = c.clone();
        let (t0, i0) = (c.now_micros(), c.instant());
        assert_eq!(c.now_micros(), t0);
        twin.advance(Duration::from_millis(1500));
        assert_eq!(c.now_micros(), t0 + 1_500_000);
        assert_eq!(c.now_millis(), t0 / 1000 + 1500);
        assert_eq!(c.now_secs(), (t0 / 1_000_000) as i32 + 1);
        assert_eq!(c.instant() - i0, Duration::from_millis(1500));
    }

    #[test]
    fn the_system_clock_reads_the_wall_clock() {
        let c = Clock::system();
        let (a, b) = (system_micros(), c.now_micros());
        assert!((b - a).abs() < 60_000_000, "{a} vs {b}");
        assert!(!c.is_manual());
    }
}
