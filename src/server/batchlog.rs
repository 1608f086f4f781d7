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
//! longer live members. Both read every registered storage group's `ringgate_meta`, not only
//! the replaying node's own: a gone node's entries are in its group, which may be any (and
//! would otherwise wait for it to come back). Node names hold no `/` (`cluster.node_name`). The batch goes to this node itself
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
use crate::storage::{Entry, Space, Store, WriteBatch};
use bytes::{Bytes, BytesMut};
use std::collections::BTreeSet;
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
/// Seeks past live nodes' entries, and keys read, per group and round while looking for gone
/// nodes' entries.
const MAX_SEEKS: usize = 64;
const MAX_EXAMINED: usize = 1024;
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
    let done = blocking(move || remove(data(&shared)?, key)).await;
    if let Err(e) = done {
        tracing::warn!(error = %e, "a batch log entry could not be deleted; it will be replayed");
    }
}

fn remove(store: &dyn Store, key: Vec<u8>) -> Result<(), String> {
    let mut batch = WriteBatch::default();
    batch.delete(Space::Meta, key);
    store.commit(batch).map_err(|e| e.to_string())
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
    crate::storage::blocking::spawn(f)
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
        let failing = Failing::default();
        for turn in 0usize.. {
            tokio::time::sleep(std::time::Duration::from_millis(REPLAY_EVERY_MS)).await;
            if let Err(e) = round(&shared, turn, &failing).await {
                tracing::warn!(error = %e, "cluster batch log replay failed; trying again");
            }
        }
    });
}

/// The groups whose batch log could not be read last round: each outage is logged once (a
/// group down for minutes would otherwise log every round on every node).
type Failing = Arc<parking_lot::Mutex<BTreeSet<String>>>;

/// An entry read for replay, with the group's store it is in (where it is deleted).
struct Found {
    store: Arc<dyn Store>,
    key: Bytes,
    value: Bytes,
}

async fn round(shared: &Arc<Shared>, turn: usize, failing: &Failing) -> Result<(), String> {
    let Some(cluster) = shared.engine.node.cluster.clone() else {
        return Ok(());
    };
    let members = cluster.members();
    let lowest = members.keys().next().map(String::as_str);
    let me = cluster.name().to_string();
    let live: BTreeSet<String> = members.keys().cloned().collect();
    let orphans = lowest == Some(me.as_str());
    let (s, failing) = (Arc::clone(shared), Arc::clone(failing));
    let found = blocking(move || {
        let live = orphans.then_some(&live);
        Ok(collect(&s, &me, live, turn, &failing))
    })
    .await?;
    let now_ms = crate::clock::Clock::system().now_millis() as u64;
    for f in found {
        let Some((node, created_ms)) = parse_key(&f.key) else {
            continue;
        };
        let age_ms = now_ms.saturating_sub(created_ms);
        let live = members.contains_key(node);
        if replays(cluster.name(), lowest, live, node, age_ms) {
            replay(shared, &cluster.member().advertise, f).await;
        }
    }
    Ok(())
}

/// This round's entries from every storage group: this node's own (written in its group, but
/// a restart may have given it another) and, with `live` (this node replays for the gone),
/// those of nodes not in `live`: at most `MAX_PER_ROUND` of each kind in all, the groups
/// visited from the `turn`-th on so that one group's backlog does not keep the others'
/// entries waiting. A group that cannot be read is left for the next round.
fn collect(
    shared: &Shared,
    me: &str,
    live: Option<&BTreeSet<String>>,
    turn: usize,
    failing: &Failing,
) -> Vec<Found> {
    let store = &shared.engine.store;
    let mut names = match store.shared_data_groups() {
        Ok(names) if !names.is_empty() => names,
        Ok(_) => return Vec::new(),
        Err(e) => {
            tracing::warn!(error = %e, "the storage groups' batch logs cannot be listed");
            return Vec::new();
        }
    };
    let first = turn % names.len();
    names.rotate_left(first);
    let (mut own_left, mut gone_left) = (MAX_PER_ROUND, MAX_PER_ROUND);
    let mut out = Vec::new();
    for name in names {
        let read = store.shared_data_of(&name).map_err(|e| e.to_string());
        let read = read.and_then(|g| {
            let own = own_entries(&*g, me, own_left)?;
            let gone = match live {
                Some(live) => gone_entries(&*g, live, gone_left)?,
                None => Vec::new(),
            };
            Ok((g, own, gone))
        });
        let (g, own, gone) = match read {
            Ok(r) => r,
            Err(e) => {
                if failing.lock().insert(name.clone()) {
                    tracing::warn!(group = %name, error = %e, "a storage group's batch log cannot be read; trying every round");
                }
                continue;
            }
        };
        if failing.lock().remove(&name) {
            tracing::info!(group = %name, "a storage group's batch log is readable again");
        }
        own_left -= own.len();
        gone_left -= gone.len();
        out.extend(own.into_iter().chain(gone).map(|(key, value)| Found {
            store: Arc::clone(&g),
            key,
            value,
        }));
    }
    out
}

/// Up to `max` of node `me`'s entries (under its own key prefix, so that others' many
/// entries never hide them).
fn own_entries(store: &dyn Store, me: &str, max: usize) -> Result<Vec<Entry>, String> {
    let prefix = format!("{PREFIX}{me}/");
    let hi = crate::storage::prefix_successor(prefix.as_bytes()).expect("no 0xff in names");
    let (lo, hi) = (Bound::Included(prefix.as_bytes()), Bound::Excluded(&hi[..]));
    (store.scan(Space::Meta, lo, hi, false).take(max))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())
}

/// Up to `max` entries of nodes not in `live`. A live node's entries are skipped with one
/// seek past its key prefix; at most `MAX_SEEKS` seeks and `MAX_EXAMINED` keys read per call.
fn gone_entries(
    store: &dyn Store,
    live: &BTreeSet<String>,
    max: usize,
) -> Result<Vec<Entry>, String> {
    let end = crate::storage::prefix_successor(PREFIX.as_bytes()).expect("no 0xff");
    let (mut from, mut out, mut examined) = (PREFIX.as_bytes().to_vec(), Vec::new(), 0);
    for _ in 0..MAX_SEEKS {
        let mut past = None;
        let range = (Bound::Included(&from[..]), Bound::Excluded(&end[..]));
        for item in store.scan(Space::Meta, range.0, range.1, false) {
            let (key, value) = item.map_err(|e| e.to_string())?;
            examined += 1;
            if out.len() >= max || examined > MAX_EXAMINED {
                return Ok(out);
            }
            match parse_key(&key) {
                Some((node, _)) if live.contains(node) => {
                    past = crate::storage::prefix_successor(format!("{PREFIX}{node}/").as_bytes());
                    break;
                }
                Some(_) => out.push((key, value)),
                None => {}
            }
        }
        match past {
            Some(next) => from = next,
            None => return Ok(out),
        }
    }
    Ok(out)
}

/// Runs one entry's batch again through this node; deletes the entry when it is done.
async fn replay(shared: &Arc<Shared>, addr: &str, found: Found) {
    let Found { store, key, value } = found;
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
        let done = blocking(move || remove(&*store, key.to_vec())).await;
        if let Err(e) = done {
            tracing::warn!(error = %e, "a replayed batch log entry could not be deleted");
        }
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
