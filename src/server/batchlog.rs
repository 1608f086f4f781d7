//! The cluster batch log: a LOGGED batch whose partitions have different owners
//! (`spanning.rs`) is all-or-nothing across nodes as Cassandra's batchlog makes it. Before any
//! part is sent, the coordinator stores the batch as it will be sent again; it deletes the
//! entry once every part answered (all applied, or none). An entry left behind (the
//! coordinator died, a part failed or timed out) is replayed: the batch runs again, through the
//! normal path (fanned out or forwarded to whoever owns its partitions now), with its logged
//! timestamp, so parts already applied are written again with the same cells.
//!
//! Where: PostgreSQL's `ringgate_meta` table (`Store::shared_data`), not etcd: entries are as
//! large as the batches (etcd refuses requests over ~1.5 MiB and keeps every revision until
//! compaction), and PostgreSQL is the data store every node reaches already.
//!
//! Entry: key `cluster_batchlog/<node>/<created ms, 16 hex digits>-<uuid>` (`<node>`: the
//! coordinator's name), value: the request (a BATCH, or a QUERY of a `BEGIN BATCH` statement;
//! an EXECUTE becomes that QUERY) as a protocol v4 request frame: its timestamp set, prepared
//! statements as their text (so any node can run it), custom payload `ringgate-keyspace` =
//! the keyspace it runs in.
//!
//! Replay (every `REPLAY_EVERY_MS`, at most `MAX_PER_ROUND` entries of each kind): a node
//! replays its own entries older than `REPLAY_AFTER_MS` (after a restart too; read under its own
//! key prefix), and the live member with the lowest name replays those of nodes that are no
//! longer live members. Node names hold no `/` (`cluster.node_name`). The batch goes to this node itself
//! over an internal connection with payload `ringgate-batchlog-replay` = the entry key (so it
//! is not logged again), and the entry is deleted when it applied, or when it answered an
//! error that no replay can change (Invalid, Syntax, Unauthorized...: nothing was applied).

use super::Shared;
use crate::protocol::frame::decode_envelope;
use crate::protocol::request::{
    decode_request, encode_request, BatchStatementKind, Request, RequestEnvelope,
};
use crate::protocol::response::{error_code, ErrorResponse};
use crate::protocol::types::read_int;
use crate::storage::{Space, Store, WriteBatch};
use bytes::{Bytes, BytesMut};
use std::ops::Bound;
use std::sync::Arc;

/// Custom payload key of a replayed batch (its value: the entry's key).
pub const REPLAY_KEY: &str = "ringgate-batchlog-replay";
const PREFIX: &str = "cluster_batchlog/";
const REPLAY_EVERY_MS: u64 = 2_000;
/// Above forwarding's answer deadline (`peer::REQUEST_MS`): a live coordinator has its answers
/// by then (a replay of an entry still in flight would only write the same cells again).
const REPLAY_AFTER_MS: u64 = 10_000;
const MAX_PER_ROUND: usize = 64;
/// Largest entry read back (the protocol's frame limit).
const MAX_ENTRY_BYTES: usize = crate::protocol::frame::DEFAULT_MAX_BODY;

/// Whether `env` is a replay of a batch log entry.
pub fn is_replay(env: &RequestEnvelope) -> bool {
    super::forward::payload_value(env, REPLAY_KEY).is_some()
}

fn unavailable(m: String) -> ErrorResponse {
    super::forward::unavailable(format!("the batch log cannot be written: {m}"))
}

/// Stores the batch of `env` with timestamp `ts`; returns the entry's key.
pub async fn write(
    shared: &Arc<Shared>,
    env: &RequestEnvelope,
    keyspace: Option<&str>,
    ts: i64,
) -> Result<Vec<u8>, ErrorResponse> {
    let (frame, node) = (entry(shared, env, keyspace, ts)?, node_name(shared));
    let now_ms = crate::clock::Clock::system().now_millis() as u64;
    let key = format!("{PREFIX}{node}/{now_ms:016x}-{}", uuid::Uuid::new_v4()).into_bytes();
    let (shared, k) = (Arc::clone(shared), key.clone());
    blocking(move || {
        let store = data(&shared)?;
        let mut batch = WriteBatch::default();
        batch.put(Space::Meta, k, frame.to_vec());
        store.commit(batch).map_err(|e| e.to_string())
    })
    .await
    .map_err(unavailable)?;
    Ok(key)
}

/// Deletes an entry (a failure is logged: the entry is replayed later, harmlessly).
pub async fn delete(shared: &Arc<Shared>, key: Vec<u8>) {
    let shared = Arc::clone(shared);
    let done = blocking(move || {
        let mut batch = WriteBatch::default();
        batch.delete(Space::Meta, key);
        data(&shared)?.commit(batch).map_err(|e| e.to_string())
    })
    .await;
    if let Err(e) = done {
        tracing::warn!(error = %e, "a batch log entry could not be deleted; it will be replayed");
    }
}

fn node_name(shared: &Shared) -> String {
    (shared.engine.node.cluster.as_ref()).map_or_else(String::new, |c| c.name().to_string())
}

fn data(shared: &Shared) -> Result<&dyn Store, String> {
    (shared.engine.store.shared_data()).ok_or_else(|| "no shared data store".to_string())
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, String> + Send + 'static,
) -> Result<T, String> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| e.to_string())?
}

/// The entry's value: the request with its timestamp, statements as text (module doc).
fn entry(
    shared: &Shared,
    env: &RequestEnvelope,
    keyspace: Option<&str>,
    ts: i64,
) -> Result<Bytes, ErrorResponse> {
    let mut keyspace = keyspace.map(str::to_string);
    let prepared = |id: &Bytes| {
        (shared.engine.get_prepared(id)).map_err(|e| ErrorResponse::new(e.code(), e.to_string()))
    };
    let req = match &env.request {
        Request::Batch(b) => {
            let mut b = b.clone();
            b.timestamp.get_or_insert(ts);
            b.now_in_seconds = None;
            keyspace = b.keyspace.take().or(keyspace);
            let texts =
                (b.statements.iter()).any(|s| matches!(s.kind, BatchStatementKind::Query(_)));
            for s in &mut b.statements {
                if let BatchStatementKind::Prepared(id) = &s.kind {
                    let p = prepared(id)?;
                    keyspace = prepared_keyspace(p.keyspace.as_deref(), keyspace, texts)?;
                    s.kind = BatchStatementKind::Query(p.query.clone());
                }
            }
            Request::Batch(b)
        }
        // A `BEGIN BATCH` statement, as text or prepared.
        Request::Query(q) => {
            let mut q = q.clone();
            q.params.timestamp.get_or_insert(ts);
            q.params.now_in_seconds = None;
            keyspace = q.params.keyspace.take().or(keyspace);
            Request::Query(q)
        }
        Request::Execute(e) => {
            let p = prepared(&e.id)?;
            let mut params = e.params.clone();
            params.timestamp.get_or_insert(ts);
            params.now_in_seconds = None;
            // A prepared statement resolves its tables in the keyspace it was prepared in.
            keyspace = p.keyspace.clone().or(params.keyspace.take()).or(keyspace);
            Request::Query(crate::protocol::request::Query {
                query: p.query.clone(),
                params,
            })
        }
        _ => return Err(unavailable("not a write".into())),
    };
    let payload: Vec<(String, Bytes)> = keyspace
        .map(|k| (super::forward::KEYSPACE_KEY.to_string(), Bytes::from(k)))
        .into_iter()
        .collect();
    let mut out = BytesMut::new();
    encode_request(&mut out, 4, 0, false, Some(&payload), &req)
        .map_err(|e| unavailable(e.to_string()))?;
    Ok(out.freeze())
}

/// The keyspace the logged request runs in, given a statement prepared in `prepared` (it
/// resolves its tables there) and the request's `current` one; `texts`: the request also has
/// statements as text, which resolve in `current`.
fn prepared_keyspace(
    prepared: Option<&str>,
    current: Option<String>,
    texts: bool,
) -> Result<Option<String>, ErrorResponse> {
    match (prepared, current) {
        (Some(p), Some(c)) if p != c => Err(mixed_keyspaces()),
        (Some(_), None) if texts => Err(mixed_keyspaces()),
        (Some(p), None) => Ok(Some(p.to_string())),
        (_, c) => Ok(c),
    }
}

fn mixed_keyspaces() -> ErrorResponse {
    ErrorResponse::invalid(
        "a LOGGED batch over partitions of several nodes cannot mix statements prepared in \
         another keyspace than the session's: qualify its tables with their keyspace",
    )
}

/// The entry's node and creation time from its key.
fn parse_key(key: &[u8]) -> Option<(&str, u64)> {
    let rest = std::str::from_utf8(key).ok()?.strip_prefix(PREFIX)?;
    let (node, tail) = rest.rsplit_once('/')?;
    let created_ms = u64::from_str_radix(tail.get(..16)?, 16).ok()?;
    Some((node, created_ms))
}

/// Whether this node replays an entry of `node` created at `created_ms` (module doc).
fn replays(me: &str, lowest_live: Option<&str>, live: bool, node: &str, age_ms: u64) -> bool {
    age_ms >= REPLAY_AFTER_MS && (node == me || (!live && lowest_live == Some(me)))
}

/// Starts the replay loop (cluster mode only).
pub fn start(shared: &Arc<Shared>) {
    if shared.engine.node.cluster.is_none() || shared.engine.store.shared_data().is_none() {
        return;
    }
    let shared = Arc::clone(shared);
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(std::time::Duration::from_millis(REPLAY_EVERY_MS)).await;
            if let Err(e) = round(&shared).await {
                tracing::warn!(error = %e, "cluster batch log replay failed; trying again");
            }
        }
    });
}

async fn round(shared: &Arc<Shared>) -> Result<(), String> {
    let Some(cluster) = shared.engine.node.cluster.clone() else {
        return Ok(());
    };
    let members = cluster.members();
    let lowest = members.keys().next().map(String::as_str);
    let me = cluster.name().to_string();
    let (s, live) = (
        Arc::clone(shared),
        members.keys().cloned().collect::<Vec<_>>(),
    );
    let orphans = lowest == Some(me.as_str());
    // Own entries under their own prefix, so others' many entries never hide them.
    let entries = blocking(move || {
        let store = data(&s)?;
        let mut out = scan_entries(store, &format!("{PREFIX}{me}/"), |_| true)?;
        if orphans {
            out.extend(scan_entries(store, PREFIX, |node| {
                !live.iter().any(|m| m == node)
            })?);
        }
        Ok(out)
    })
    .await?;
    let now_ms = crate::clock::Clock::system().now_millis() as u64;
    for (key, value) in entries {
        let Some((node, created_ms)) = parse_key(&key) else {
            continue;
        };
        let age_ms = now_ms.saturating_sub(created_ms);
        let live = members.contains_key(node);
        if replays(cluster.name(), lowest, live, node, age_ms) {
            replay(shared, &cluster.member().advertise, key, value).await;
        }
    }
    Ok(())
}

/// Up to `MAX_PER_ROUND` entries under `prefix` whose node `keep` accepts.
fn scan_entries(
    store: &dyn Store,
    prefix: &str,
    keep: impl Fn(&str) -> bool,
) -> Result<Vec<(Bytes, Bytes)>, String> {
    let hi = crate::storage::prefix_successor(prefix.as_bytes()).expect("no 0xff in names");
    let (lo, hi) = (Bound::Included(prefix.as_bytes()), Bound::Excluded(&hi[..]));
    let kept = store
        .scan(Space::Meta, lo, hi, false)
        .filter(|item| match item {
            Ok((k, _)) => parse_key(k).is_some_and(|(node, _)| keep(node)),
            Err(_) => true,
        });
    kept.take(MAX_PER_ROUND)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())
}

/// Runs one entry's batch again through this node; deletes the entry when it is done.
async fn replay(shared: &Arc<Shared>, addr: &str, key: Bytes, value: Bytes) {
    let env = match decode(value) {
        Ok(env) => env,
        Err(e) => {
            tracing::error!(error = %e, "an unreadable batch log entry is left in place");
            return;
        }
    };
    let mut payload = vec![(REPLAY_KEY.to_string(), key.clone())];
    payload.extend(env.custom_payload.clone().unwrap_or_default());
    let answer = shared.peers.request(addr, &payload, &env.request).await;
    let finished = match &answer {
        Ok(a) if a.opcode != crate::protocol::frame::Opcode::Error => true,
        Ok(a) => match read_int(&mut a.body.clone()) {
            Ok(code) if permanent(code) => {
                tracing::warn!(
                    code,
                    "a logged batch cannot be replayed; its entry is dropped"
                );
                true
            }
            _ => false,
        },
        Err(_) => false,
    };
    tracing::info!(finished, "replayed a cluster batch log entry");
    if finished {
        delete(shared, key.to_vec()).await;
    }
}

/// Errors no replay can change (nothing was applied).
fn permanent(code: i32) -> bool {
    use error_code::*;
    matches!(
        code,
        SYNTAX | INVALID | CONFIG | UNAUTHORIZED | ALREADY_EXISTS | FUNCTION_FAILURE
    )
}

fn decode(mut value: Bytes) -> Result<RequestEnvelope, String> {
    let mut buf = BytesMut::from(&value.split_off(0)[..]);
    let (header, body) = decode_envelope(&mut buf, MAX_ENTRY_BYTES)
        .map_err(|e| e.to_string())?
        .ok_or("a truncated entry")?;
    decode_request(&header, body).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Keys carry the node and the creation time.
    #[test]
    fn keys_name_their_node_and_age() {
        let key = format!("{PREFIX}n-1.a_b/{:016x}-x", 1234u64);
        assert_eq!(parse_key(key.as_bytes()), Some(("n-1.a_b", 1234)));
        assert_eq!(parse_key(b"cluster_batchlog/a/12"), None);
        assert_eq!(parse_key(b"other/a/0000000000000001-x"), None);
    }

    /// Own entries once old; a gone node's by the lowest live member only; a live node's
    /// never by another.
    #[test]
    fn who_replays_what() {
        let old = REPLAY_AFTER_MS;
        assert!(replays("b", Some("a"), true, "b", old));
        assert!(!replays("b", Some("a"), true, "b", old - 1));
        assert!(replays("a", Some("a"), false, "c", old));
        assert!(!replays("b", Some("a"), false, "c", old));
        assert!(!replays("a", Some("a"), true, "c", old));
    }

    /// An entry decodes back to the batch it stored, with its keyspace in the payload.
    #[test]
    fn entries_decode_to_their_batch() {
        use crate::protocol::request::{Batch, BatchStatement};
        let b = Batch {
            kind: 0,
            statements: vec![BatchStatement {
                kind: BatchStatementKind::Query("INSERT INTO t (k) VALUES (?)".into()),
                values: vec![crate::protocol::request::Value::Set(Bytes::from_static(
                    b"1",
                ))],
            }],
            consistency: 1,
            serial_consistency: None,
            timestamp: Some(77),
            keyspace: None,
            now_in_seconds: None,
        };
        let payload = vec![("ringgate-keyspace".to_string(), Bytes::from_static(b"ks"))];
        let mut out = BytesMut::new();
        encode_request(
            &mut out,
            4,
            0,
            false,
            Some(&payload),
            &Request::Batch(b.clone()),
        )
        .unwrap();
        let env = decode(out.freeze()).unwrap();
        assert_eq!(env.request, Request::Batch(b));
        assert_eq!(env.custom_payload, Some(payload));
    }
}
