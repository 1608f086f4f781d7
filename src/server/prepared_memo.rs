//! The prepared statements a connection executed last, kept by the connection.
//!
//! Why: looking an EXECUTE's statement up in the engine's cache takes a read lock that every
//! request of every connection shares (its counter's cache line moves between the cores) and a
//! SipHash of the id: about 350 instructions of a prepared point request. A connection mostly
//! executes the same few statements, so it keeps the last `MAX_STATEMENTS` it looked up, for as
//! long as the engine's cache gained no statement (`Engine::prepared_generation`; only a
//! PREPARE adds one, and only an add evicts one): until then each kept statement is exactly
//! what a lookup would give.

use crate::query::{Engine, Prepared};
use bytes::Bytes;
use std::sync::Arc;

/// Statements kept per connection (a linear search over their ids).
const MAX_STATEMENTS: usize = 8;

/// See the module doc.
#[derive(Default)]
pub(super) struct PreparedMemo {
    /// The engine's `prepared_generation` when these were looked up.
    generation: u64,
    /// (id, statement), the most recently looked up last.
    kept: Vec<(Bytes, Arc<Prepared>)>,
}

impl PreparedMemo {
    /// The statement prepared under `id` (None: the engine has none, the client must prepare
    /// it again).
    pub(super) fn get(&mut self, engine: &Engine, id: &[u8]) -> Option<Arc<Prepared>> {
        let generation = engine.prepared_generation();
        if generation != self.generation {
            self.kept.clear();
            self.generation = generation;
        }
        if let Some((_, p)) = self.kept.iter().find(|(k, _)| k[..] == *id) {
            return Some(Arc::clone(p));
        }
        let p = engine.get_prepared(id).ok()?;
        if self.kept.len() == MAX_STATEMENTS {
            self.kept.remove(0);
        }
        self.kept.push((Bytes::copy_from_slice(id), Arc::clone(&p)));
        Some(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::query::Session;

    fn engine(dir: &std::path::Path) -> Engine {
        crate::query::test_engine(dir)
    }

    /// A kept statement is the engine's own while no PREPARE happened; after one (which may
    /// have evicted it, or replaced it under a newer schema) the memo looks up again.
    #[test]
    fn keeps_statements_until_the_cache_gains_one() {
        let dir = tempfile::tempdir().unwrap();
        let e = engine(dir.path());
        let s = Session::default();
        let a = e.prepare(&s, "SELECT * FROM system.local", None).unwrap();
        let mut memo = PreparedMemo::default();
        assert!(memo.get(&e, &[0u8; 16]).is_none(), "unknown id");
        let got = memo.get(&e, &a.id).unwrap();
        assert!(Arc::ptr_eq(&got, &a));
        assert!(Arc::ptr_eq(&memo.get(&e, &a.id).unwrap(), &a), "kept");
        assert_eq!(memo.kept.len(), 1);
        let b = e.prepare(&s, "SELECT * FROM system.peers", None).unwrap();
        assert!(Arc::ptr_eq(&memo.get(&e, &b.id).unwrap(), &b));
        assert_eq!(memo.kept.len(), 1, "the PREPARE emptied it");
        assert!(Arc::ptr_eq(&memo.get(&e, &a.id).unwrap(), &a));
        assert_eq!(memo.kept.len(), 2);
    }
}
