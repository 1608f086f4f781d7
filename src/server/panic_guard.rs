//! The last line of defence of request handling: a panic while executing a request becomes a
//! Server error (0x0000) response instead of a request that is never answered.
//!
//! Panics are bugs and are fixed at their cause; this guard only makes sure that the client gets
//! an answer, the panic is logged with the request kind, and the connection (whose reader and
//! writer run in other tasks) stays usable. The engine's locks are parking_lot locks, which are
//! released on unwind and never poisoned, so later requests are not blocked by the failed one.

use crate::protocol::frame::Opcode;
use crate::protocol::request::Request;
use crate::protocol::response::ErrorResponse;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::OnceLock;

/// Test hook: when `RINGGATE_TEST_PANIC_QUERY` is set (non-empty), a QUERY whose text contains
/// it panics inside the guard, so an end-to-end test can force an internal error and check that
/// it is answered and the connection stays usable (`tests/python/test_exactness.py`). The
/// variable is read once.
pub(crate) fn test_panic(request: &Request) {
    static MARKER: OnceLock<Option<String>> = OnceLock::new();
    let marker = MARKER.get_or_init(|| {
        std::env::var("RINGGATE_TEST_PANIC_QUERY")
            .ok()
            .filter(|m| !m.is_empty())
    });
    if let (Some(m), Request::Query(q)) = (marker, request) {
        if q.query.contains(m.as_str()) {
            panic!("RINGGATE_TEST_PANIC_QUERY matched the request (test hook)");
        }
    }
}

/// Runs `f`; a panic is logged (with `what`, the request's opcode) and returned as the Server
/// error the client is sent.
pub(crate) fn answer_panics<T>(what: Opcode, f: impl FnOnce() -> T) -> Result<T, ErrorResponse> {
    // AssertUnwindSafe: on a panic nothing `f` borrowed is used again except the engine, whose
    // writes are atomic batches (a panic before the commit leaves nothing half written).
    catch_unwind(AssertUnwindSafe(f)).map_err(|payload| {
        let msg = payload
            .downcast_ref::<&str>()
            .map(|s| (*s).to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".to_string());
        tracing::error!(request = ?what, panic = %msg, "request handling panicked; answered with a Server error");
        ErrorResponse::server(format!("Internal error while executing the request: {msg}"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::response::error_code;

    #[test]
    fn a_panic_becomes_a_server_error() {
        let e = answer_panics(Opcode::Query, || -> u32 {
            panic!("index out of bounds: boom")
        })
        .expect_err("the panic is caught");
        assert_eq!(e.code, error_code::SERVER);
        assert!(e.message.contains("boom"), "{}", e.message);
        let e = answer_panics(Opcode::Query, || -> u32 { panic!("{} {}", "formatted", 7) })
            .expect_err("the panic is caught");
        assert!(e.message.contains("formatted 7"), "{}", e.message);
    }

    #[test]
    fn a_normal_result_passes_through() {
        assert_eq!(answer_panics(Opcode::Query, || 5).ok(), Some(5));
    }

    #[test]
    fn the_guard_can_be_used_again_after_a_panic() {
        let lock = parking_lot::Mutex::new(0);
        let _ = answer_panics(Opcode::Query, || {
            let _g = lock.lock();
            panic!("while holding a lock")
        });
        // The lock was released on unwind: the next request is not blocked.
        assert_eq!(
            answer_panics(Opcode::Query, || *lock.lock() + 1).ok(),
            Some(1)
        );
    }
}
