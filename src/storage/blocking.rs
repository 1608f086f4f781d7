//! Threads that may block: the storage contract is synchronous, and a backend that drives its
//! own I/O while it waits (PostgreSQL's connections, `postgres/pool.rs`) runs a runtime of its
//! own on the waiting thread. A thread inside an async context (a worker of the server's
//! runtime, or code under its `block_on`) must not do that (tokio panics), and tokio does not
//! tell such a thread from one of its blocking pool's. So callers that run storage work on the
//! blocking pool start it with `spawn`, which marks its thread; elsewhere a backend
//! assumes an async context when a runtime handle is current and waits on a thread of its own
//! instead (correct, slower).

use std::cell::Cell;

thread_local! {
    static MAY_BLOCK: Cell<bool> = const { Cell::new(false) };
}

/// Runs `f`, telling storage backends that this thread may block (not an async context).
fn may_block<R>(f: impl FnOnce() -> R) -> R {
    /// Puts the thread's mark back, also when `f` panics.
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            MAY_BLOCK.with(|m| m.set(self.0));
        }
    }
    let _restore = Restore(MAY_BLOCK.with(|m| m.replace(true)));
    f()
}

/// `tokio::task::spawn_blocking` of `f`, telling storage backends that its thread may block.
pub fn spawn<R: Send + 'static>(
    f: impl FnOnce() -> R + Send + 'static,
) -> tokio::task::JoinHandle<R> {
    tokio::task::spawn_blocking(move || may_block(f))
}

/// Whether this thread may block in place: inside `may_block`, or outside any runtime.
pub fn allowed() -> bool {
    MAY_BLOCK.with(Cell::get) || tokio::runtime::Handle::try_current().is_err()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plain_thread_may_block() {
        assert!(allowed());
    }

    #[test]
    fn a_runtime_thread_may_not_unless_it_says_so() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(async {
            assert!(!allowed());
            // Also true of its blocking pool's threads, unless started with `spawn`.
            assert!(!tokio::task::spawn_blocking(allowed).await.unwrap());
            assert!(may_block(allowed));
            assert!(!allowed());
            assert!(spawn(allowed).await.unwrap());
        });
    }
}
