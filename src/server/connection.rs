//! One client connection: a reader that decodes frames and dispatches requests (many in flight,
//! answered as they complete), and a writer task that batches responses into few writes.

use super::{convert, Shared};
use crate::protocol::compression::{self, Compression};
use crate::protocol::frame::{self, flags, FrameError, FrameHeader};
use crate::protocol::request::{
    self, BatchStatementKind, QueryParams, Request, RequestEnvelope, Value, Values,
};
use crate::protocol::response::{
    encode_response, ErrorResponse, Event, Response, ResponseExtras, ResultBody,
};
use crate::protocol::v5::{self, SegmentDecoder};
use crate::query::{BatchItem, Binds, BoundValue, Outcome, QueryOptions, Session};
use bytes::{Bytes, BytesMut};
use std::sync::Arc;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, watch, Semaphore};

/// What the reader hands the writer.
enum Out {
    /// A complete response envelope.
    Frame(Bytes),
    /// From now on wrap envelopes in v5 segments.
    StartSegments { lz4: bool },
}

/// Per-connection protocol state.
struct State {
    version: Option<u8>,
    compression: Compression,
    started: bool,
    authenticated: bool,
    /// v5 after READY/AUTHENTICATE: segment decoder for incoming bytes.
    segments: Option<SegmentDecoder>,
    /// Pushes SCHEMA_CHANGE events after REGISTER; stopped when the connection ends.
    forwarder: Option<tokio::task::JoinHandle<()>>,
    session: Session,
    /// The keyspace set by USE, shared with the request tasks of this connection.
    keyspace: Arc<parking_lot::Mutex<Option<String>>>,
    /// Requests in flight (backpressure: the reader waits for a slot).
    in_flight: Arc<Semaphore>,
    /// The client's address (recorded in traces).
    peer: std::net::SocketAddr,
    /// Whether responses may carry a custom payload (the `RequestCharge`). Drivers that name
    /// themselves in STARTUP (DRIVER_NAME: the DataStax drivers, the scylla drivers) parse the
    /// payload flag; some minimal clients (cdrs-tokio) do not and would misread the body, so they
    /// get no payload unless they send one themselves. `protocol.request_charge` overrides this
    /// for all clients or none.
    payloads: bool,
}

const READ_CHUNK: usize = 64 * 1024;
/// Writer batches at most this many bytes per write call.
const WRITE_BATCH_BYTES: usize = 1 << 20;

pub async fn serve<S>(
    stream: S,
    peer: std::net::SocketAddr,
    shared: Arc<Shared>,
    mut shutdown: watch::Receiver<bool>,
) where
    S: AsyncRead + AsyncWrite + Send + 'static,
{
    let (mut rd, wr) = tokio::io::split(stream);
    let max_in_flight = shared.config.limits.max_in_flight_per_connection;
    let (tx, rx) = mpsc::channel::<Out>(max_in_flight + 16);
    let writer = tokio::spawn(write_loop(wr, rx));
    let in_flight = Arc::new(Semaphore::new(max_in_flight));
    let mut st = State {
        version: None,
        compression: Compression::None,
        started: false,
        authenticated: !shared.config.auth.enabled,
        segments: None,
        forwarder: None,
        session: Session::default(),
        keyspace: Arc::new(parking_lot::Mutex::new(None)),
        in_flight: Arc::clone(&in_flight),
        peer,
        payloads: false,
    };
    let max_body = shared.config.limits.max_frame_bytes.0 as usize;
    let mut buf = BytesMut::with_capacity(READ_CHUNK);
    'conn: loop {
        // Decode and dispatch every complete frame in the buffer.
        loop {
            let next = match &mut st.segments {
                Some(dec) => match dec.next_envelope(&mut buf) {
                    Ok(f) => f,
                    Err(e) => {
                        tracing::debug!(error = %e, "closing connection: bad v5 segment");
                        break 'conn;
                    }
                },
                None => match frame::decode_envelope(&mut buf, max_body) {
                    Ok(f) => f,
                    Err(e) => {
                        send_frame_error(&tx, &e).await;
                        break 'conn;
                    }
                },
            };
            let Some((header, body)) = next else { break };
            if !dispatch(&shared, &mut st, &tx, header, body).await {
                break 'conn;
            }
        }
        buf.reserve(READ_CHUNK);
        tokio::select! {
            n = rd.read_buf(&mut buf) => match n {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            },
            _ = shutdown.changed() => break,
        }
    }
    // Let in-flight requests finish, then close the writer.
    if let Some(f) = st.forwarder.take() {
        f.abort();
    }
    let _ = in_flight.acquire_many(max_in_flight as u32).await;
    drop(tx);
    let _ = writer.await;
}

async fn send_frame_error(tx: &mpsc::Sender<Out>, e: &FrameError) {
    let (resp, version) = match e {
        FrameError::UnsupportedVersion { version, .. } => {
            (ErrorResponse::unsupported_version(*version), 4)
        }
        // Cassandra answers an oversized frame with Invalid; ringgate reports it as a protocol
        // error on the frame's stream (framing is lost, so the connection closes after it).
        other => (ErrorResponse::protocol(other.to_string()), 4),
    };
    let mut out = BytesMut::new();
    if encode_response(
        &mut out,
        version,
        e.stream(),
        &Response::Error(resp),
        &ResponseExtras::NONE,
        Compression::None,
    )
    .is_ok()
    {
        let _ = tx.send(Out::Frame(out.freeze())).await;
    }
}

fn encode(
    version: u8,
    stream: i16,
    resp: &Response,
    extras: &ResponseExtras,
    compression: Compression,
) -> Bytes {
    let mut out = BytesMut::with_capacity(256);
    if let Err(e) = encode_response(&mut out, version, stream, resp, extras, compression) {
        out.clear();
        let err = Response::Error(ErrorResponse::server(format!(
            "cannot encode response: {e}"
        )));
        let _ = encode_response(
            &mut out,
            version,
            stream,
            &err,
            &ResponseExtras::NONE,
            Compression::None,
        );
    }
    out.freeze()
}

fn protocol_error(version: u8, stream: i16, msg: impl Into<String>) -> Out {
    Out::Frame(encode(
        version,
        stream,
        &Response::Error(ErrorResponse::protocol(msg)),
        &ResponseExtras::NONE,
        Compression::None,
    ))
}

/// Handles one frame; returns false when the connection must close.
async fn dispatch(
    shared: &Arc<Shared>,
    st: &mut State,
    tx: &mpsc::Sender<Out>,
    header: FrameHeader,
    body: Bytes,
) -> bool {
    let version = *st.version.get_or_insert(header.version);
    let stream = header.stream;
    if header.version != version {
        let _ = tx.send(protocol_error(version, stream, format!(
            "Invalid message version. Got {} but previous messages on this connection had version {version}",
            header.version
        ))).await;
        return false;
    }
    // Pre-v5 bodies may be compressed per frame.
    let body = if header.has_flag(flags::COMPRESSION) && version < 5 {
        if st.compression == Compression::None {
            let _ = tx
                .send(protocol_error(
                    version,
                    stream,
                    "Received a compressed frame but no compression was negotiated",
                ))
                .await;
            return true;
        }
        match compression::decompress_body(
            st.compression,
            &body,
            shared.config.limits.max_frame_bytes.0 as usize,
        ) {
            Ok(b) => b,
            Err(e) => {
                let _ = tx
                    .send(protocol_error(
                        version,
                        stream,
                        format!("Cannot decompress frame body: {e}"),
                    ))
                    .await;
                return true;
            }
        }
    } else {
        body
    };
    let env = match request::decode_request(&header, body) {
        Ok(env) => env,
        Err(e) => {
            let _ = tx
                .send(protocol_error(version, stream, e.to_string()))
                .await;
            return true;
        }
    };
    let ok = |resp: Response| {
        Out::Frame(encode(
            version,
            stream,
            &resp,
            &ResponseExtras::NONE,
            Compression::None,
        ))
    };
    match env.request {
        Request::Options => {
            let supported = vec![
                (
                    "CQL_VERSION".to_string(),
                    vec![crate::schema::system::CQL_VERSION.to_string()],
                ),
                (
                    "COMPRESSION".to_string(),
                    vec!["lz4".to_string(), "snappy".to_string()],
                ),
                (
                    "PROTOCOL_VERSIONS".to_string(),
                    vec!["3/v3".into(), "4/v4".into(), "5/v5".into()],
                ),
            ];
            let _ = tx.send(ok(Response::Supported(supported))).await;
            true
        }
        Request::Startup(opts) => {
            if st.started {
                let _ = tx
                    .send(protocol_error(
                        version,
                        stream,
                        "Unexpected message STARTUP, the connection is already initialised",
                    ))
                    .await;
                return true;
            }
            let comp = opts.get("COMPRESSION").map(String::as_str).unwrap_or("");
            let comp = match Compression::from_startup_option(comp) {
                Ok(c) if version >= 5 && c == Compression::Snappy => {
                    let _ = tx
                        .send(protocol_error(
                            version,
                            stream,
                            "snappy compression is not supported with protocol v5; use lz4",
                        ))
                        .await;
                    return true;
                }
                Ok(c) => c,
                Err(e) => {
                    let _ = tx
                        .send(protocol_error(version, stream, e.to_string()))
                        .await;
                    return true;
                }
            };
            st.compression = comp;
            st.started = true;
            st.payloads =
                (shared.config.protocol.request_charge).sent(opts.contains_key("DRIVER_NAME"));
            let resp = if st.authenticated {
                Response::Ready
            } else {
                Response::Authenticate("org.apache.cassandra.auth.PasswordAuthenticator".into())
            };
            // READY too carries its (zero) charge for drivers that read payloads.
            let extras = zero_charge(st.payloads);
            let frame = encode(version, stream, &resp, &extras, Compression::None);
            let _ = tx.send(Out::Frame(frame)).await;
            if version >= 5 {
                let lz4 = comp == Compression::Lz4;
                st.segments = Some(SegmentDecoder::new(
                    lz4,
                    shared.config.limits.max_frame_bytes.0 as usize,
                ));
                let _ = tx.send(Out::StartSegments { lz4 }).await;
            }
            true
        }
        Request::AuthResponse(token) => {
            if !st.started || st.authenticated {
                let _ = tx
                    .send(protocol_error(
                        version,
                        stream,
                        "Unexpected message AUTH_RESPONSE",
                    ))
                    .await;
                return true;
            }
            let frame = match super::auth::check_plain(&shared.config.auth, token.as_deref()) {
                Ok(user) => {
                    st.authenticated = true;
                    tracing::debug!(user, "authenticated");
                    Response::AuthSuccess(None)
                }
                Err(msg) => Response::Error(ErrorResponse::new(
                    crate::protocol::response::error_code::BAD_CREDENTIALS,
                    msg,
                )),
            };
            let extras = zero_charge(st.payloads);
            let _ = tx
                .send(Out::Frame(encode(
                    version,
                    stream,
                    &frame,
                    &extras,
                    st.compression,
                )))
                .await;
            true
        }
        req => {
            if !st.started {
                let _ = tx
                    .send(protocol_error(
                        version,
                        stream,
                        format!(
                            "Unexpected message {:?}, expecting STARTUP or OPTIONS",
                            req.opcode()
                        ),
                    ))
                    .await;
                return true;
            }
            if !st.authenticated {
                let _ = tx
                    .send(Out::Frame(encode(
                        version,
                        stream,
                        &Response::Error(ErrorResponse::new(
                            crate::protocol::response::error_code::UNAUTHORIZED,
                            "You have not logged in",
                        )),
                        &ResponseExtras::NONE,
                        Compression::None,
                    )))
                    .await;
                return true;
            }
            if let Request::Register(events) = &req {
                if let Some(bad) = events.iter().find(|e| {
                    !matches!(
                        e.as_str(),
                        "TOPOLOGY_CHANGE" | "STATUS_CHANGE" | "SCHEMA_CHANGE"
                    )
                }) {
                    let _ = tx
                        .send(protocol_error(
                            version,
                            stream,
                            format!("Invalid value '{bad}' for Type"),
                        ))
                        .await;
                    return true;
                }
                if st.forwarder.is_none() && events.iter().any(|e| e == "SCHEMA_CHANGE") {
                    st.forwarder = Some(spawn_event_forwarder(
                        shared,
                        tx.clone(),
                        version,
                        st.compression,
                    ));
                }
                let extras = zero_charge(st.payloads);
                let _ = tx
                    .send(Out::Frame(encode(
                        version,
                        stream,
                        &Response::Ready,
                        &extras,
                        st.compression,
                    )))
                    .await;
                return true;
            }
            // Backpressure: wait for a slot before reading more.
            let Ok(permit) = Arc::clone(&st.in_flight).acquire_owned().await else {
                return false;
            };
            // Requests that may wait run on the blocking pool: fsync commits, and server-side
            // retry (a request may be held for up to throughput.server_side_retry_max_ms).
            let blocking = shared.config.storage.sync == crate::storage::SyncMode::Fsync
                || shared.engine.limits.throughput.server_side_retry;
            let shared = Arc::clone(shared);
            let tx = tx.clone();
            let compression = st.compression;
            if env.custom_payload.is_some() {
                st.payloads = shared.config.protocol.request_charge.sent(true);
            }
            let payloads = st.payloads;
            let env = RequestEnvelope {
                request: req,
                ..env
            };
            let mut sess = st.session.clone();
            sess.keyspace = st.keyspace.lock().clone();
            let peer = st.peer.ip();
            let run = move || {
                let mut sess = sess;
                execute(&shared, &mut sess, &env, version, peer)
            };
            let keyspace_cell = Arc::clone(&st.keyspace);
            tokio::spawn(async move {
                let produced = if blocking {
                    match tokio::task::spawn_blocking(run).await {
                        Ok(r) => r,
                        Err(_) => return,
                    }
                } else {
                    run()
                };
                let mut produced = produced;
                if !payloads {
                    produced.extras.custom_payload.clear();
                }
                if let Some(ks) = produced.keyspace {
                    *keyspace_cell.lock() = Some(ks);
                }
                let _ = tx
                    .send(Out::Frame(encode(
                        version,
                        stream,
                        &produced.response,
                        &produced.extras,
                        compression,
                    )))
                    .await;
                drop(permit);
            });
            true
        }
    }
}

fn binds(values: &Values) -> Binds {
    let conv = |v: &Value| match v {
        Value::Null => BoundValue::Null,
        Value::Unset => BoundValue::Unset,
        Value::Set(b) => BoundValue::Value(b.clone()),
    };
    match values {
        Values::None => Binds::None,
        Values::Positional(v) => Binds::Positional(v.iter().map(conv).collect()),
        Values::Named(v) => Binds::Named(v.iter().map(|(n, x)| (n.clone(), conv(x))).collect()),
    }
}

fn options(p: &QueryParams) -> QueryOptions {
    QueryOptions {
        binds: binds(&p.values),
        page_size: p.page_size,
        paging_state: p.paging_state.clone(),
        timestamp: p.timestamp,
        // SERIAL (0x0008) and LOCAL_SERIAL (0x0009) reads.
        serial: matches!(p.consistency, 0x0008 | 0x0009),
        keyspace: p.keyspace.clone(),
        ..Default::default()
    }
}

/// What a request produced besides its response body.
struct Produced {
    response: Response,
    /// The keyspace a USE switched to.
    keyspace: Option<String>,
    extras: ResponseExtras,
}

/// Runs a QUERY/PREPARE/EXECUTE/BATCH.
fn execute(
    shared: &Shared,
    session: &mut Session,
    env: &RequestEnvelope,
    version: u8,
    client: std::net::IpAddr,
) -> Produced {
    let engine = &shared.engine;
    let mut opts = match &env.request {
        Request::Query(q) => options(&q.params),
        Request::Execute(e) => options(&e.params),
        Request::Batch(b) => QueryOptions {
            timestamp: b.timestamp,
            keyspace: b.keyspace.clone(),
            batch_kind: Some(match b.kind {
                crate::protocol::request::batch_kind::UNLOGGED => {
                    crate::cql::ast::BatchKind::Unlogged
                }
                crate::protocol::request::batch_kind::COUNTER => {
                    crate::cql::ast::BatchKind::Counter
                }
                _ => crate::cql::ast::BatchKind::Logged,
            }),
            ..Default::default()
        },
        _ => QueryOptions::default(),
    };
    let tracer = env.tracing.then(|| opts.ctx.start_trace());
    let result: Result<(ResultBody, Option<String>), crate::query::QueryError> = (|| {
        match &env.request {
            Request::Query(q) => {
                let out = engine.query(session, &q.query, &opts)?;
                Ok(finish(shared, out, q.params.skip_metadata))
            }
            Request::Prepare(p) => {
                let prepared = engine.prepare(session, &p.query, p.keyspace.as_deref())?;
                Ok((convert::prepared(&prepared, version), None))
            }
            Request::Execute(e) => {
                let prepared = engine.get_prepared(&e.id)?;
                let out = engine.execute(session, &prepared, &opts)?;
                Ok(finish(shared, out, e.params.skip_metadata))
            }
            Request::Batch(b) => {
                let mut owned = Vec::new();
                let mut prepared = Vec::new();
                for s in &b.statements {
                    match &s.kind {
                        BatchStatementKind::Query(text) => {
                            let parsed = crate::cql::parse(text)
                                .map_err(|e| crate::query::QueryError::Syntax(e.to_string()))?;
                            owned.push((parsed, s.values.clone()));
                        }
                        BatchStatementKind::Prepared(id) => {
                            prepared.push((engine.get_prepared(id)?, s.values.clone()));
                        }
                    }
                }
                let mut items: Vec<BatchItem> = Vec::new();
                // Keep the statement order of the batch.
                let (mut oi, mut pi) = (0, 0);
                for s in &b.statements {
                    match &s.kind {
                        BatchStatementKind::Query(_) => {
                            let (p, v) = &owned[oi];
                            oi += 1;
                            items.push(BatchItem {
                                parsed: p,
                                keyspace: None,
                                binds: binds(&Values::Positional(v.clone())),
                            });
                        }
                        BatchStatementKind::Prepared(_) => {
                            let (p, v) = &prepared[pi];
                            pi += 1;
                            items.push(BatchItem {
                                parsed: &p.parsed,
                                keyspace: p.keyspace.clone(),
                                binds: binds(&Values::Positional(v.clone())),
                            });
                        }
                    }
                }
                let out = engine.batch(session, &items, &opts)?;
                Ok(finish(shared, out, false))
            }
            _ => Err(crate::query::QueryError::Server(
                "unexpected request".into(),
            )),
        }
    })();
    let (response, keyspace) = match result {
        Ok((body, ks)) => (Response::Result(body), ks),
        Err(e) => (Response::Error(convert::error(&e)), None),
    };
    let charge = opts.ctx.charge();
    if let Some(t) = &tracer {
        let (request, text, consistency) = match &env.request {
            Request::Query(q) => (
                "Execute CQL3 query",
                q.query.clone(),
                Some(q.params.consistency),
            ),
            Request::Execute(e) => (
                "Execute CQL3 prepared query",
                engine
                    .get_prepared(&e.id)
                    .map(|p| p.query.clone())
                    .unwrap_or_default(),
                Some(e.params.consistency),
            ),
            Request::Prepare(p) => ("Preparing CQL3 query", p.query.clone(), None),
            Request::Batch(b) => (
                "Execute batch of CQL3 queries",
                String::new(),
                Some(b.consistency),
            ),
            _ => ("", String::new(), None),
        };
        t.event("Request complete".to_string());
        let mut params = std::collections::BTreeMap::new();
        if !text.is_empty() {
            params.insert("query".to_string(), text);
        }
        if let Some(cl) = consistency {
            params.insert(
                "consistency_level".to_string(),
                crate::protocol::types::consistency::name(cl)
                    .unwrap_or("ONE")
                    .to_string(),
            );
        }
        let command = match &env.request {
            Request::Prepare(_) => "PREPARE",
            _ => "QUERY",
        };
        engine
            .traces
            .record(t.finish(client, command, request, params));
    }
    let extras = ResponseExtras {
        tracing_id: tracer.as_ref().map(|t| t.session_id),
        warnings: opts.ctx.take_warnings(),
        // The request charge (Cosmos DB's custom payload) on every response, errors included
        // (what was consumed before the error) and zero charges (PREPARE); left out later for
        // clients that cannot parse payloads (see `State::payloads`).
        custom_payload: request_charge(charge),
    };
    Produced {
        response,
        keyspace,
        extras,
    }
}

/// The `RequestCharge` custom payload: an 8-byte big-endian double.
fn request_charge(ru: f64) -> Vec<(String, Bytes)> {
    vec![(
        "RequestCharge".to_string(),
        Bytes::copy_from_slice(&ru.to_be_bytes()),
    )]
}

/// The extras of a response that consumed nothing (READY, AUTH_SUCCESS): a zero charge for
/// clients that read payloads, nothing for the others.
fn zero_charge(payloads: bool) -> ResponseExtras {
    ResponseExtras {
        custom_payload: if payloads {
            request_charge(0.0)
        } else {
            Vec::new()
        },
        ..ResponseExtras::NONE
    }
}

fn finish(shared: &Shared, out: Outcome, skip_metadata: bool) -> (ResultBody, Option<String>) {
    let ks = match &out {
        Outcome::SetKeyspace(k) => Some(k.clone()),
        _ => None,
    };
    if let Outcome::SchemaChange(c) = &out {
        let _ = shared
            .events
            .send(Arc::new(Event::SchemaChange(convert::schema_change(c))));
    }
    (convert::outcome(out, skip_metadata), ks)
}

fn spawn_event_forwarder(
    shared: &Arc<Shared>,
    tx: mpsc::Sender<Out>,
    version: u8,
    compression: Compression,
) -> tokio::task::JoinHandle<()> {
    let mut rx = shared.events.subscribe();
    tokio::spawn(async move {
        loop {
            match rx.recv().await {
                Ok(ev) => {
                    let frame = encode(
                        version,
                        -1,
                        &Response::Event((*ev).clone()),
                        &ResponseExtras::NONE,
                        compression,
                    );
                    if tx.send(Out::Frame(frame)).await.is_err() {
                        break;
                    }
                }
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                Err(_) => break,
            }
        }
    })
}

/// Writes responses, batching whatever is queued into one write.
async fn write_loop<W: AsyncRead + AsyncWrite + Send + 'static>(
    mut wr: tokio::io::WriteHalf<W>,
    mut rx: mpsc::Receiver<Out>,
) {
    let mut segments: Option<bool> = None;
    let mut out = BytesMut::with_capacity(64 * 1024);
    let mut pending = BytesMut::new();
    while let Some(first) = rx.recv().await {
        let mut msg = Some(first);
        while let Some(m) = msg.take() {
            match m {
                Out::Frame(f) => match segments {
                    None => out.extend_from_slice(&f),
                    Some(_) => pending.extend_from_slice(&f),
                },
                Out::StartSegments { lz4 } => {
                    flush_segments(&mut pending, &mut out, segments);
                    segments = Some(lz4);
                }
            }
            if out.len() + pending.len() >= WRITE_BATCH_BYTES {
                break;
            }
            msg = rx.try_recv().ok();
        }
        flush_segments(&mut pending, &mut out, segments);
        if wr.write_all(&out).await.is_err() {
            break;
        }
        out.clear();
        if wr.flush().await.is_err() {
            break;
        }
    }
    let _ = wr.shutdown().await;
}

/// Wraps queued v5 envelopes into segments (several envelopes share a self-contained segment;
/// a large envelope is split across segments).
fn flush_segments(pending: &mut BytesMut, out: &mut BytesMut, segments: Option<bool>) {
    if pending.is_empty() {
        return;
    }
    let lz4 = segments.unwrap_or(false);
    if pending.len() <= v5::MAX_SEGMENT_PAYLOAD {
        v5::encode_segments(pending, out, lz4);
    } else {
        // Split at envelope boundaries: each group fits a segment, or is one large envelope.
        let mut rest = pending.split().freeze();
        while !rest.is_empty() {
            let mut take = 0;
            loop {
                if rest.len() < take + frame::HEADER_LEN {
                    break;
                }
                let len = u32::from_be_bytes(rest[take + 5..take + 9].try_into().expect("4 bytes"))
                    as usize;
                let size = frame::HEADER_LEN + len;
                if take > 0 && take + size > v5::MAX_SEGMENT_PAYLOAD {
                    break;
                }
                take += size;
                if take >= v5::MAX_SEGMENT_PAYLOAD {
                    break;
                }
            }
            let take = take.clamp(1, rest.len());
            let chunk = rest.split_to(take);
            v5::encode_segments(&chunk, out, lz4);
        }
    }
    pending.clear();
}
