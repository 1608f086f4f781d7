//! Request units (RU): the deterministic cost model and per-physical-partition consumption.
//!
//! The same operation on the same data always costs the same. Sizes are stored bytes (key and
//! encoded row, as accounted in `sizes`), `kb = bytes / 1024`. Calibrated to Azure Cosmos DB's
//! published anchor points:
//!
//! | operation | cost | anchors |
//! |-----------|------|---------|
//! | read (per stored row scanned, including rows filtered out or dead) | `10/11 + kb/11` | 1 KB row = 1 RU, 100 KB row = 10 RU; 1,000 rows of 1 KB = 1,000 RU |
//! | read request | at least 1 RU | an empty point read costs 1 RU |
//! | write (per stored key written: row or partition header) | `500/99 + 44.5/99 x kb` | 1 KB insert = 5.5 RU, 100 KB = 50 RU |
//! | write replacing an existing stored key | twice the above | replace = 2 x insert |
//! | DDL, USE, DESCRIBE, system and virtual table reads | 1 RU | |
//!
//! A batch costs the sum of its writes. The charge is returned in the `RequestCharge` custom
//! payload of every response (errors included: what was consumed before the error).

use super::map::PhysicalPartition;
use parking_lot::Mutex;
use std::sync::Arc;

/// Fixed cost of schema statements, USE, DESCRIBE and system/virtual table reads.
pub const FIXED_RU: f64 = 1.0;

const READ_ROW_BASE: f64 = 10.0 / 11.0;
const READ_PER_KB: f64 = 1.0 / 11.0;
const WRITE_BASE: f64 = 500.0 / 99.0;
const WRITE_PER_KB: f64 = 44.5 / 99.0;

/// The cost of reading `rows` stored rows of `bytes` in total (at least 1 RU per request).
pub fn read_cost(rows: u64, bytes: u64) -> f64 {
    (rows as f64 * READ_ROW_BASE + bytes as f64 / 1024.0 * READ_PER_KB).max(1.0)
}

/// The cost of writing one stored key of `new_len` bytes that held `old_len` bytes before
/// (0 = absent).
pub fn write_key_cost(old_len: usize, new_len: usize) -> f64 {
    let c = WRITE_BASE + new_len as f64 / 1024.0 * WRITE_PER_KB;
    if old_len > 0 {
        2.0 * c
    } else {
        c
    }
}

/// Seconds of per-second consumption kept (autoscale looks at the recent peak).
pub const HISTORY_SECONDS: usize = 10;

/// RU consumed by one physical partition (or one shared budget), per second.
#[derive(Debug, Default)]
pub struct Consumption {
    inner: Mutex<Window>,
}

#[derive(Debug, Default)]
struct Window {
    second: u64,
    current: f64,
    /// Completed seconds, most recent first: `past[i]` is second `second - 1 - i`.
    past: [f64; HISTORY_SECONDS],
    total: f64,
}

/// Time since the Unix epoch (zero if the clock is before it).
pub(crate) fn unix_now() -> std::time::Duration {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
}

fn now_sec() -> u64 {
    unix_now().as_secs()
}

impl Window {
    fn roll(&mut self, sec: u64) {
        if sec <= self.second {
            return;
        }
        let gap = (sec - self.second) as usize;
        if gap > HISTORY_SECONDS {
            self.past = [0.0; HISTORY_SECONDS];
        } else {
            // Second `self.second` is now `gap` seconds ago; the ones after it were idle.
            self.past.rotate_right(gap);
            self.past[gap - 1] = self.current;
            for x in &mut self.past[..gap - 1] {
                *x = 0.0;
            }
        }
        self.current = 0.0;
        self.second = sec;
    }
}

impl Consumption {
    pub fn add(&self, ru: f64) {
        self.add_at(ru, unix_now());
    }
    /// `add` at `now` (since the Unix epoch: a caller that read the clock already).
    pub fn add_at(&self, ru: f64, now: std::time::Duration) {
        let mut w = self.inner.lock();
        w.roll(now.as_secs());
        w.current += ru;
        w.total += ru;
    }
    /// RU consumed during the last complete second.
    pub fn last_second(&self) -> f64 {
        let mut w = self.inner.lock();
        w.roll(now_sec());
        w.past[0]
    }
    /// The current (partial) second followed by the last complete seconds, most recent first.
    pub fn history(&self) -> [f64; HISTORY_SECONDS + 1] {
        let mut w = self.inner.lock();
        w.roll(now_sec());
        let mut out = [0.0; HISTORY_SECONDS + 1];
        out[0] = w.current;
        out[1..].copy_from_slice(&w.past);
        out
    }
    pub fn total(&self) -> f64 {
        self.inner.lock().total
    }
}

/// The highest per-second sum of several consumptions over the recent history.
pub fn recent_peak<'a>(parts: impl Iterator<Item = &'a Consumption>) -> f64 {
    let mut sums = [0.0f64; HISTORY_SECONDS + 1];
    for c in parts {
        for (s, v) in sums.iter_mut().zip(c.history()) {
            *s += v;
        }
    }
    sums.into_iter().fold(0.0, f64::max)
}

/// Adds read consumption to the partitions a scan touched: (partition, rows, bytes).
pub fn charge_partitions(parts: &[(Arc<PhysicalPartition>, u64, u64)], now: std::time::Duration) {
    for (p, rows, bytes) in parts {
        p.stats.consumed.add_at(read_cost(*rows, *bytes), now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn anchor_points() {
        let close = |a: f64, b: f64| (a - b).abs() / b < 0.10;
        assert!(close(read_cost(1, 1024), 1.0));
        assert!(close(read_cost(1, 100 * 1024), 10.0));
        assert!(close(read_cost(1000, 1000 * 1024), 1000.0));
        assert_eq!(read_cost(0, 0), 1.0);
        assert!(close(write_key_cost(0, 1024), 5.5));
        assert!(close(write_key_cost(0, 100 * 1024), 50.0));
        assert!(close(write_key_cost(1024, 1024), 11.0));
    }

    #[test]
    fn history_rolls_by_second() {
        let mut w = Window {
            second: 100,
            current: 5.0,
            ..Default::default()
        };
        w.roll(101);
        assert_eq!((w.current, w.past[0]), (0.0, 5.0));
        w.current = 7.0;
        w.roll(103);
        assert_eq!(&w.past[..4], &[0.0, 7.0, 5.0, 0.0]);
        w.roll(200);
        assert_eq!(w.past, [0.0; HISTORY_SECONDS]);
    }
}
