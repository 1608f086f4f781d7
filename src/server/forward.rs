//! Forwarding (cluster mode, design decision 6): a QUERY, EXECUTE or BATCH that addresses a
//! physical partition another node owns (`ClientError::NotOwner`) is sent to that node over an
//! internal connection (`peer.rs`) and its answer is relayed to the client as if local.
//!
//! What travels: the same request (values, consistency, serial consistency, paging state, page
//! size) as protocol v4, with the coordinator's default timestamp when the client gave none
//! (so the owner writes the timestamp this connection would have), and a custom payload:
//! `ringgate-forwarded` = the coordinator's node name (the owner never forwards it again: a
//! NotOwner there reaches the client as Unavailable) and `ringgate-keyspace` = the keyspace the
//! client's statement runs in (its USE or v5 keyspace; v4 cannot carry it). The answer's body,
//! warnings and custom payload (`RequestCharge`) go back unchanged; tracing stays with the
//! coordinator, which records the hop and the owner's answer time.
//!
//! An owner that does not know a prepared statement (UNPREPARED) gets it prepared from this
//! node's text and keyspace, then the request once more (per statement id). A request that
//! may have run but got no answer is a timeout to the client (its outcome is unknown); one
//! that surely did not run is Unavailable.
//!
//! With `auth.enabled` the internal connections log in as the first configured user
//! (`peer.rs`); a peer that refuses it answers Unavailable, saying so.

use super::peer::{Answer, PeerError};
use super::Shared;
use crate::protocol::frame::Opcode;
use crate::protocol::request::{Prepare, Request, RequestEnvelope};
use crate::protocol::response::{error_code, ErrorExtra, ErrorResponse, Response, ResponseExtras};
use crate::protocol::types::{read_int, read_short_bytes, read_string};
use crate::query::trace::Tracer;
use bytes::Bytes;
use std::time::{Duration, Instant};

/// Custom payload key marking a forwarded request (its value: the coordinator's node name).
pub const FORWARDED_KEY: &str = "ringgate-forwarded";
/// Custom payload key carrying the keyspace of a forwarded request.
pub const KEYSPACE_KEY: &str = "ringgate-keyspace";
/// Custom payload key of a traced forwarded request (empty), and of its answer: the owner's
/// trace events (`Tracer::encode_events`), which join the coordinator's session.
pub const TRACE_KEY: &str = "ringgate-trace";
/// How often a request for a partition without a live owner looks again (design: 100 ms).
pub const UNOWNED_RETRY_MS: u64 = 100;
/// Prepared statements one forwarded request may have prepared at the owner.
const MAX_REPREPARES: usize = 16;

/// Whether a request that answered NotOwner here goes to the owner: a statement request in
/// cluster mode that was not forwarded to this node already.
pub fn forwardable(shared: &Shared, env: &RequestEnvelope) -> bool {
    shared.engine.node.cluster.is_some()
        && matches!(
            env.request,
            Request::Query(_) | Request::Execute(_) | Request::Batch(_)
        )
        && !is_forwarded(env)
}

/// Whether `env` was forwarded by a coordinator tracing it: it is traced here and its events go
/// back with the answer instead of into this node's sessions.
pub fn wants_trace(env: &RequestEnvelope) -> bool {
    is_forwarded(env) && payload_value(env, TRACE_KEY).is_some()
}

/// The payload entry carrying this node's events of a forwarded traced request.
pub fn trace_payload(engine: &crate::query::Engine, t: &Tracer) -> (String, Bytes) {
    t.event("Answering the coordinator".to_string());
    (TRACE_KEY.to_string(), t.encode_events(engine.node.listen))
}

/// Whether `env` came from another node's forwarding.
pub fn is_forwarded(env: &RequestEnvelope) -> bool {
    payload_value(env, FORWARDED_KEY).is_some()
}

/// The keyspace a forwarded request runs in (None for a client's own request).
/// A batch log replay (`batchlog.rs`) carries its keyspace the same way.
pub fn forwarded_keyspace(env: &RequestEnvelope) -> Option<String> {
    let from_node = is_forwarded(env) || super::batchlog::is_replay(env);
    let ks = payload_value(env, KEYSPACE_KEY).filter(|_| from_node)?;
    String::from_utf8(ks.to_vec()).ok()
}

pub(super) fn payload_value<'a>(env: &'a RequestEnvelope, key: &str) -> Option<&'a Bytes> {
    let payload = env.custom_payload.as_ref()?;
    payload.iter().find(|(k, _)| k == key).map(|(_, v)| v)
}

/// Payload key of an owner's answer to a forwarded request whose partition is no longer its
/// own (split, handed off, moved on) or has no owner right now: nothing ran, so the coordinator
/// routes it again (within [`may_wait_for_owner`]) instead of relaying the error.
pub const NOT_OWNER_KEY: &str = "ringgate-not-owner";

/// Whether a request whose partition has no live owner (a takeover in progress) may look
/// again, `since` its first attempt: for up to the lease plus a second.
pub fn may_wait_for_owner(shared: &Shared, since: Instant) -> bool {
    let lease_ms = shared.config.cluster.lease_ms;
    since.elapsed() + Duration::from_millis(UNOWNED_RETRY_MS)
        <= Duration::from_millis(lease_ms + 1000)
}

/// Sends the request to node `owner` and returns its answer as this node's response.
pub async fn forward(
    shared: &Shared,
    env: &RequestEnvelope,
    keyspace: Option<String>,
    mut timestamp: impl FnMut() -> i64,
    owner: &str,
    tracer: Option<&Tracer>,
) -> (Response, ResponseExtras) {
    match forward_part(shared, env, keyspace, &mut timestamp, owner, tracer, &[]).await {
        Ok(a) => relayed(a),
        Err(e) => (Response::Error(e), ResponseExtras::NONE),
    }
}

/// `forward` with `extra` custom payload entries, giving the owner's answer as it came (a
/// spanning write's part, `spanning.rs`).
pub async fn forward_part(
    shared: &Shared,
    env: &RequestEnvelope,
    keyspace: Option<String>,
    mut timestamp: impl FnMut() -> i64,
    owner: &str,
    tracer: Option<&Tracer>,
    extra: &[(String, Bytes)],
) -> Result<Answer, ErrorResponse> {
    let engine = &shared.engine;
    let cluster =
        (engine.node.cluster.as_ref()).ok_or_else(|| unavailable("not a cluster".into()))?;
    // An owner that took the partition since this node last listed the members (it just
    // joined or restarted) is looked up in etcd rather than refused.
    let Some(addr) = cluster.member_now(owner).await.map(|m| m.advertise) else {
        return Err(unavailable(format!(
            "the owner of this request's partition, node {owner}, is not a live member"
        )));
    };
    let (req, keyspace) = for_owner(&env.request, keyspace, &mut timestamp);
    let mut payload = vec![(
        FORWARDED_KEY.to_string(),
        Bytes::from(cluster.name().to_string()),
    )];
    if let Some(ks) = &keyspace {
        payload.push((KEYSPACE_KEY.to_string(), Bytes::from(ks.clone())));
    }
    if tracer.is_some() {
        payload.push((TRACE_KEY.to_string(), Bytes::new()));
    }
    payload.extend_from_slice(extra);
    let trace = |m: String| {
        if let Some(t) = tracer {
            t.event(m)
        }
    };
    let read = is_read(engine, &env.request);
    let mut prepared: Vec<Bytes> = Vec::new();
    loop {
        trace(format!("Forwarded to {owner} ({addr})"));
        crate::metrics::global().forwarded_requests.inc();
        let began = Instant::now();
        let answer = shared.peers.request(&addr, &payload, &req).await;
        let micros = began.elapsed().as_micros();
        let mut answer = answer.map_err(|e| peer_error(&env.request, read, e))?;
        owner_events(&mut answer, tracer);
        trace(format!("Answer from {owner} after {micros} µs"));
        let Some(id) = unprepared_id(&answer) else {
            return Ok(answer);
        };
        if prepared.contains(&id) || prepared.len() >= MAX_REPREPARES {
            return Ok(answer);
        }
        let Ok(stmt) = engine.get_prepared(&id) else {
            return Ok(answer);
        };
        trace(format!("Preparing the statement on {owner}"));
        let prepare = Request::Prepare(Prepare {
            query: stmt.query.clone(),
            keyspace: None,
        });
        let mut prep_payload = vec![(FORWARDED_KEY.to_string(), payload[0].1.clone())];
        if let Some(ks) = &stmt.keyspace {
            prep_payload.push((KEYSPACE_KEY.to_string(), Bytes::from(ks.clone())));
        }
        let done = shared.peers.request(&addr, &prep_payload, &prepare).await;
        let done = done.map_err(|e| peer_error(&env.request, read, e))?;
        if done.opcode != Opcode::Result {
            return Ok(done);
        }
        prepared.push(id);
    }
}

/// Moves the owner's trace events out of its answer (the client never sees that payload) into
/// the coordinator's session.
fn owner_events(answer: &mut Answer, tracer: Option<&Tracer>) {
    let payload = std::mem::take(&mut answer.custom_payload);
    for (k, v) in payload {
        if k != TRACE_KEY {
            answer.custom_payload.push((k, v));
            continue;
        }
        if let (Some(t), Some((source, events))) = (tracer, crate::query::trace::decode_events(&v))
        {
            t.add_remote(source, events);
        }
    }
}

/// The request as the owner gets it (protocol v4): the coordinator's timestamp when the client
/// gave none; a v5 keyspace moves to the payload (returned), v5-only fields are dropped.
fn for_owner(
    req: &Request,
    keyspace: Option<String>,
    timestamp: &mut impl FnMut() -> i64,
) -> (Request, Option<String>) {
    let mut req = req.clone();
    let mut keyspace = keyspace;
    match &mut req {
        Request::Query(q) => {
            keyspace = q.params.keyspace.take().or(keyspace);
            q.params.now_in_seconds = None;
            q.params.timestamp.get_or_insert_with(&mut *timestamp);
        }
        Request::Execute(e) => {
            keyspace = e.params.keyspace.take().or(keyspace);
            e.result_metadata_id = None;
            e.params.now_in_seconds = None;
            e.params.timestamp.get_or_insert_with(&mut *timestamp);
        }
        Request::Batch(b) => {
            keyspace = b.keyspace.take().or(keyspace);
            b.now_in_seconds = None;
            b.timestamp.get_or_insert_with(&mut *timestamp);
        }
        _ => {}
    }
    (req, keyspace)
}

/// The id of an UNPREPARED error answer.
fn unprepared_id(a: &Answer) -> Option<Bytes> {
    if a.opcode != Opcode::Error {
        return None;
    }
    let mut body = a.body.clone();
    if read_int(&mut body).ok()? != error_code::UNPREPARED {
        return None;
    }
    read_string(&mut body).ok()?;
    read_short_bytes(&mut body).ok()
}

fn relayed(a: Answer) -> (Response, ResponseExtras) {
    let extras = ResponseExtras {
        tracing_id: None,
        warnings: a.warnings,
        custom_payload: a.custom_payload,
        request_charge: None,
    };
    let response = Response::Relayed {
        opcode: a.opcode,
        body: a.body,
    };
    (response, extras)
}

/// The answer to a request whose partition found no live owner within the lease plus a second.
pub fn no_owner() -> Response {
    Response::Error(unavailable(
        "no live node owns this request's partition (its owner is being replaced); try again"
            .into(),
    ))
}

pub(super) fn unavailable(message: String) -> ErrorResponse {
    ErrorResponse::with_extra(
        message,
        ErrorExtra::Unavailable {
            cl: 0x0001,
            required: 1,
            alive: 0,
        },
    )
}

/// A request that surely did not run: Unavailable; one that may have run: a timeout (its
/// outcome is unknown), as Cassandra answers when a replica does not answer in time.
pub(super) fn peer_error(req: &Request, read: bool, e: PeerError) -> ErrorResponse {
    match e {
        PeerError::Unreachable { .. } => unavailable(e.to_string()),
        PeerError::Lost { .. } if read => ErrorResponse::with_extra(
            format!("Operation timed out - received only 0 responses ({e})"),
            ErrorExtra::ReadTimeout {
                cl: 0x0001,
                received: 0,
                block_for: 1,
                data_present: false,
            },
        ),
        PeerError::Lost { .. } => ErrorResponse::with_extra(
            format!("Operation timed out - received only 0 responses ({e})"),
            ErrorExtra::WriteTimeout {
                cl: 0x0001,
                received: 0,
                block_for: 1,
                write_type: write_type(req).as_str().into(),
                contentions: None,
            },
        ),
    }
}

/// The protocol's write type of a forwarded write, for a timeout.
pub(super) fn write_type(req: &Request) -> crate::error::WriteType {
    use crate::protocol::request::batch_kind;
    match req {
        Request::Batch(b) if b.kind == batch_kind::UNLOGGED => {
            crate::error::WriteType::UnloggedBatch
        }
        Request::Batch(b) if b.kind == batch_kind::COUNTER => crate::error::WriteType::Counter,
        Request::Batch(_) => crate::error::WriteType::Batch,
        _ => crate::error::WriteType::Simple,
    }
}

/// Whether a forwarded statement only reads (a SELECT; a batch never does).
fn is_read(engine: &crate::query::Engine, req: &Request) -> bool {
    match req {
        Request::Query(q) => q
            .query
            .trim_start()
            .get(..6)
            .is_some_and(|w| w.eq_ignore_ascii_case("select")),
        Request::Execute(e) => engine
            .get_prepared(&e.id)
            .is_ok_and(|p| matches!(p.parsed.statement, crate::cql::ast::Statement::Select(_))),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::request::{Batch, Execute, Query, QueryParams};

    /// The owner gets the coordinator's timestamp only when the client gave none, and a v5
    /// keyspace travels in the payload (v4 cannot carry it), ahead of the session's.
    #[test]
    fn the_owner_gets_the_coordinators_timestamp_and_the_keyspace() {
        let mut next = 41;
        let mut ts = || {
            next += 1;
            next
        };
        let q = Request::Query(Query {
            query: "INSERT".into(),
            params: QueryParams {
                keyspace: Some("v5ks".into()),
                now_in_seconds: Some(7),
                ..Default::default()
            },
        });
        let (req, ks) = for_owner(&q, Some("session".into()), &mut ts);
        let Request::Query(q) = req else { panic!() };
        assert_eq!(
            (
                q.params.timestamp,
                q.params.keyspace,
                q.params.now_in_seconds
            ),
            (Some(42), None, None)
        );
        assert_eq!(ks.as_deref(), Some("v5ks"));

        let e = Request::Execute(Execute {
            id: Bytes::from_static(b"id"),
            result_metadata_id: Some(Bytes::from_static(b"m")),
            params: QueryParams {
                timestamp: Some(5),
                ..Default::default()
            },
        });
        let (req, ks) = for_owner(&e, Some("session".into()), &mut ts);
        let Request::Execute(e) = req else { panic!() };
        assert_eq!((e.params.timestamp, e.result_metadata_id), (Some(5), None));
        assert_eq!(ks.as_deref(), Some("session"));

        let b = Request::Batch(Batch {
            kind: 0,
            statements: Vec::new(),
            consistency: 1,
            serial_consistency: None,
            timestamp: None,
            keyspace: None,
            now_in_seconds: None,
        });
        let (req, _) = for_owner(&b, None, &mut ts);
        let Request::Batch(b) = req else { panic!() };
        assert_eq!(b.timestamp, Some(43));
    }

    /// The id is read from an UNPREPARED error body; other answers have none.
    #[test]
    fn unprepared_answers_give_their_id() {
        let mut out = bytes::BytesMut::new();
        let e = ErrorResponse::unprepared(
            "Prepared query with ID 0a not found",
            Bytes::from_static(b"\x0a"),
        );
        e.encode(&mut out, 4).unwrap();
        let answer = |opcode, body| Answer {
            opcode,
            warnings: Vec::new(),
            custom_payload: Vec::new(),
            body,
        };
        let body = out.freeze();
        assert_eq!(
            unprepared_id(&answer(Opcode::Error, body.clone())).as_deref(),
            Some(&b"\x0a"[..])
        );
        assert_eq!(unprepared_id(&answer(Opcode::Result, body)), None);
        let mut other = bytes::BytesMut::new();
        ErrorResponse::invalid("no").encode(&mut other, 4).unwrap();
        assert_eq!(unprepared_id(&answer(Opcode::Error, other.freeze())), None);
    }
}
