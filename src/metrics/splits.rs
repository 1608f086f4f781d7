//! The most recent physical partition splits, for the dashboard: a bounded log (the oldest
//! entry goes when it is full).

use parking_lot::Mutex;
use std::collections::VecDeque;

/// Splits remembered.
pub const RECENT_SPLITS: usize = 64;

/// One committed split: table (by storage id), the parent and its two children.
#[derive(Debug, Clone, serde::Serialize)]
pub struct SplitEvent {
    pub storage_id: u64,
    pub parent: u64,
    pub children: [u64; 2],
    /// The token the parent was split at (the left child ends there).
    pub boundary: i64,
    pub at_ms: i64,
}

#[derive(Default)]
pub struct RecentSplits(Mutex<VecDeque<SplitEvent>>);

impl RecentSplits {
    pub const fn new() -> RecentSplits {
        RecentSplits(Mutex::new(VecDeque::new()))
    }
    pub fn record(&self, e: SplitEvent) {
        let mut q = self.0.lock();
        if q.len() == RECENT_SPLITS {
            q.pop_front();
        }
        q.push_back(e);
    }
    /// The remembered splits, newest first.
    pub fn newest_first(&self) -> Vec<SplitEvent> {
        self.0.lock().iter().rev().cloned().collect()
    }
}
