//! An etcd v3 client over etcd's JSON gateway (HTTP/1.1: `POST /v3/kv/range|put|deleterange|txn`,
//! `/v3/lease/grant|keepalive|timetolive|revoke`, `/v3/watch` as a stream), on tokio. A leaf: it imports nothing of the
//! crate.
//!
//! Why the gateway and not gRPC: a fresh machine has Rust and Python but no `protoc`, and
//! `cargo build` must work there. `etcd-client` generates its code with `protoc` at build time.
//! `etcdv3client` 0.4 ships pre-generated code (its `gen` feature is off by default), but it
//! brings tonic, hyper, h2, tower, axum and prost: 47 crates this crate does not already
//! have, measured (cargo --timings, release, this busy 2-core machine) at 83 s of compile
//! time of those crates alone, of 128 s for a scratch crate with tokio (and again for
//! `cargo test`'s debug build). This client is ~800 lines of code using only tokio and
//! serde_json, which the crate already has: no new dependency to build or audit. What it
//! gives up: one connection per request or watch (no HTTP/2 multiplexing), fine for a
//! control plane of a few requests per second per node.
//!
//! Formats: keys and values are base64 strings, int64 fields decimal strings, zero values
//! omitted (`types.rs`). Bounds: request bodies (`ClientOptions::max_request_bytes`),
//! response bodies and heads (`http.rs`), one deadline per request, at most
//! [`MAX_TXN_OPS`] operations per transaction.
//!
//! Errors say what the caller may assume (`EtcdError::is_retryable`, `may_have_applied`):
//! `Unavailable` (no endpoint could be connected: nothing was sent), `Timeout` (sent, no
//! answer in time) and `Interrupted` (connection broke mid-request): outcome unknown; `Server`
//! (etcd's gRPC status code and message).

mod b64;
mod client;
mod http;
mod stream;
mod txn;
mod types;
mod watch;

pub use client::{parse_endpoint, ClientOptions, EtcdClient, Lease};
pub use txn::{Cmp, Compare, Op, Target, Txn, MAX_TXN_OPS};
pub use types::{KeyValue, OpResponse, RangeResponse, TxnResponse};
pub use watch::{EventKind, Watch, WatchBatch, WatchEvent};

/// The smallest key greater than every key that starts with `prefix` (etcd's `range_end` of a
/// prefix read); a prefix of only 0xff bytes (or empty) ranges to the end, `[0]`.
pub fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0]
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EtcdError {
    /// No endpoint accepted a connection: the request was not sent.
    #[error("etcd unavailable: {detail}")]
    Unavailable { detail: String },
    /// The request was sent and no answer came in time (or the connection broke): it may or
    /// may not have been applied.
    #[error("etcd request to {endpoint} timed out after {after_ms} ms (outcome unknown)")]
    Timeout { endpoint: String, after_ms: u64 },
    /// The connection broke after the request was sent (etcd killed or restarted): it may or
    /// may not have been applied.
    #[error("etcd connection to {endpoint} broke mid-request: {detail} (outcome unknown)")]
    Interrupted { endpoint: String, detail: String },
    /// A watch asked for history etcd has compacted away: list again and watch from there.
    #[error("etcd revision {revision} is compacted")]
    Compacted { revision: i64 },
    /// etcd refused the request; `code` is the gRPC status code.
    #[error("etcd error (code {code}): {message}")]
    Server { code: i64, message: String },
    #[error("etcd request of {bytes} bytes exceeds the limit of {limit_bytes} bytes")]
    TooLarge { bytes: usize, limit_bytes: usize },
    #[error("etcd transaction of {ops} operations exceeds etcd's limit of {limit}")]
    TooManyOps { ops: usize, limit: usize },
    #[error("unexpected answer from etcd: {0}")]
    Protocol(String),
    #[error("etcd client configuration: {0}")]
    Config(String),
}

impl EtcdError {
    /// Whether the same request may succeed later: etcd unreachable, slow, or between leaders
    /// (gRPC Unavailable 14, DeadlineExceeded 4).
    pub fn is_retryable(&self) -> bool {
        match self {
            EtcdError::Unavailable { .. }
            | EtcdError::Timeout { .. }
            | EtcdError::Interrupted { .. } => true,
            EtcdError::Server { code, .. } => matches!(code, 4 | 14),
            _ => false,
        }
    }

    /// Whether a write that failed this way may still have been applied: read before retrying.
    pub fn may_have_applied(&self) -> bool {
        matches!(
            self,
            EtcdError::Timeout { .. } | EtcdError::Interrupted { .. }
        ) || matches!(self, EtcdError::Server { code: 4 | 14, .. })
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn prefix_end_is_the_next_key() {
        assert_eq!(super::prefix_end(b"meta/"), b"meta0");
        assert_eq!(super::prefix_end(b"a\xff"), b"b");
        assert_eq!(super::prefix_end(b"\xff"), b"\0");
    }
}
