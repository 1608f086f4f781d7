//! One client connection: a reader that decodes frames and dispatches requests (many in flight,
//! answered as they complete), and a writer task that batches responses into few writes.

use super::call::{rejoined_since, zero_charge, Call};
use super::gathered::{Framing, Gathered};
use super::handshake::HandshakeClock;
use super::out_budget::OutBudget;
use super::prepared_memo::PreparedMemo;
use super::quickack::QuickAck;
use super::Shared;
use crate::protocol::compression::{self, Compression};
use crate::protocol::frame::{self, flags, FrameError, FrameHeader};
use crate::protocol::request::{self, Request, RequestEnvelope};
use crate::protocol::response::{encode_response, ErrorResponse, Response, ResponseExtras};
use crate::protocol::v5::{self, SegmentDecoder};
use crate::query::Session;
use bytes::{Bytes, BytesMut};
use std::sync::Arc;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, watch, Semaphore, TryAcquireError};

/// What the reader hands the writer.
enum Out {
    /// A complete response envelope.
    Frame(Bytes),
    /// A request's response envelope, counted in the connection's `OutBudget` until written.
    Response(Bytes),
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
    /// Pushes the events the client REGISTERed for; stopped when the connection ends.
    forwarder: Option<tokio::task::JoinHandle<()>>,
    /// The event types registered so far (a later REGISTER adds to them).
    registered: Vec<&'static str>,
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
    /// Failed logins on this connection (it closes after a few).
    auth_failures: u32,
    /// Cluster mode: the node's lease generation when the connection opened (see
    /// [`rejoined_since`]).
    joined: Option<u64>,
    /// Opened before the node joined again: what it holds is refused, then it closes.
    stale: bool,
    /// Bytes of this connection's responses not yet written (requests wait when over).
    unsent: Arc<OutBudget>,
    /// Request body bytes (decompressed) held by requests in flight.
    request_bytes: Arc<Semaphore>,
    /// Requests this read may still run in the read loop (`INLINE_PER_READ`).
    inline_left: usize,
    /// The answers of the requests this read ran in the read loop, not yet handed to the writer.
    gathered: Gathered,
    /// The statements this connection executed last (`prepared_memo.rs`).
    prepared: PreparedMemo,
}

const READ_CHUNK: usize = 64 * 1024;
/// Point requests one read runs in the read loop at most (`spawn_request`); the rest of the
/// frames it brought run as tasks, which the other runtime threads can take, so one busy
/// connection holds its thread for a bounded time (64 point requests, well under a
/// millisecond) and still spreads over the cores. With 32, a tenth of the bench's 4 x 32
/// point requests became tasks (the driver puts more than 32 on one connection at times),
/// each about 1,800 instructions dearer.
const INLINE_PER_READ: usize = 64;
/// Writer batches at most this many bytes per write call.
const WRITE_BATCH_BYTES: usize = 1 << 20;

pub async fn serve<S>(
    stream: S,
    peer: std::net::SocketAddr,
    shared: Arc<Shared>,
    mut shutdown: watch::Receiver<bool>,
    pending: super::handshake::Pending,
) where
    S: AsyncRead + AsyncWrite + std::os::unix::io::AsRawFd + Send + 'static,
{
    // `rd` below keeps the stream, and so the descriptor, open for as long as this is used.
    let quickack = QuickAck::new(stream.as_raw_fd());
    let (mut rd, wr) = tokio::io::split(stream);
    let max_in_flight = shared.config.limits.max_in_flight_per_connection;
    let (tx, rx) = mpsc::channel::<Out>(max_in_flight + 16);
    let unsent = Arc::new(OutBudget::new(
        shared.config.limits.max_unsent_bytes_per_connection.0 as usize,
        Arc::clone(&shared.unsent),
    ));
    let in_flight = Arc::new(Semaphore::new(max_in_flight));
    let others = InFlight {
        slots: Arc::clone(&in_flight),
        max: max_in_flight,
    };
    let store = Arc::clone(&shared.engine.store);
    let writer = tokio::spawn(write_loop(wr, rx, Arc::clone(&unsent), others, store));
    let mut st = State {
        version: None,
        compression: Compression::None,
        started: false,
        authenticated: !shared.config.auth.enabled,
        segments: None,
        forwarder: None,
        registered: Vec::new(),
        session: Session::default(),
        keyspace: Arc::new(parking_lot::Mutex::new(None)),
        in_flight: Arc::clone(&in_flight),
        peer,
        payloads: false,
        auth_failures: 0,
        joined: shared
            .engine
            .node
            .cluster
            .as_ref()
            .map(|n| n.lease_generation()),
        stale: false,
        unsent,
        request_bytes: Arc::new(Semaphore::new(
            shared.config.limits.max_in_flight_request_bytes.0 as usize,
        )),
        inline_left: INLINE_PER_READ,
        gathered: Gathered::default(),
        prepared: PreparedMemo::default(),
    };
    let max_body = shared.config.limits.max_frame_bytes.0 as usize;
    let mut handshake = HandshakeClock::new(pending, &shared.config.limits);
    let mut buf = BytesMut::with_capacity(READ_CHUNK);
    let idle_timeout_ms = shared.config.limits.idle_timeout_ms;
    'conn: loop {
        st.inline_left = INLINE_PER_READ;
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
            let Some((header, body)) = next else {
                if !buf.is_empty() || st.segments.as_ref().is_some_and(|d| d.has_partial()) {
                    // A frame arrived in part: ACK it now, or a Nagle client waits for our
                    // delayed ACK before it sends the rest (see quickack.rs).
                    quickack.ack_now();
                }
                break;
            };
            if !dispatch(&shared, &mut st, &tx, header, body).await {
                break 'conn;
            }
            handshake.progress(st.started, st.authenticated);
        }
        hand_over(&mut st, &tx).await;
        if st.stale {
            break;
        }
        buf.reserve(READ_CHUNK);
        tokio::select! {
            n = rd.read_buf(&mut buf) => match n {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            },
            _ = shutdown.changed() => break,
            why = handshake.expired() => {
                tracing::debug!(%peer, why, "closing connection");
                break;
            }
            () = idle_for(idle_timeout_ms) => {
                // Idle only if no request is still running (a long scan sends nothing back
                // to us while it runs) and every response was written (a slow reader is
                // not idle); otherwise wait another period.
                if in_flight.available_permits() == max_in_flight && st.unsent.is_drained() {
                    tracing::debug!(%peer, "closing connection: idle for limits.idle_timeout_ms");
                    break;
                }
            }
        }
    }
    // Let in-flight requests finish, then close the writer.
    hand_over(&mut st, &tx).await;
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
    encode_into(&mut out, version, stream, resp, extras, compression);
    out.freeze()
}

/// Appends the response frame to `out`; a response that cannot be encoded is answered with a
/// Server error instead.
pub(super) fn encode_into(
    out: &mut BytesMut,
    version: u8,
    stream: i16,
    resp: &Response,
    extras: &ResponseExtras,
    compression: Compression,
) {
    // `encode_response` leaves `out` as it was when it fails.
    if let Err(e) = encode_response(out, version, stream, resp, extras, compression) {
        let err = Response::Error(ErrorResponse::server(format!(
            "cannot encode response: {e}"
        )));
        let _ = encode_response(
            out,
            version,
            stream,
            &err,
            &ResponseExtras::NONE,
            Compression::None,
        );
    }
}

/// Hands the answers gathered in the read loop to the writer (see `gathered.rs`).
async fn hand_over(st: &mut State, tx: &mpsc::Sender<Out>) {
    if let Some(answers) = st.gathered.take() {
        let _ = tx.send(Out::Response(answers)).await;
    }
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
    let reply = Reply {
        tx,
        version,
        stream,
    };
    let (env, body_bytes) = match decode_envelope(shared, st, &header, body) {
        Ok(decoded) => decoded,
        Err(msg) => return reply.protocol_error(msg).await,
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
            reply
                .send(
                    &Response::Supported(supported),
                    &ResponseExtras::NONE,
                    Compression::None,
                )
                .await;
            true
        }
        Request::Startup(opts) => startup(shared, st, &reply, &opts).await,
        Request::AuthResponse(token) => auth_response(shared, st, &reply, token.as_deref()).await,
        req => {
            if !st.started {
                return reply
                    .protocol_error(format!(
                        "Unexpected message {:?}, expecting STARTUP or OPTIONS",
                        req.opcode()
                    ))
                    .await;
            }
            if !st.authenticated {
                let refused = Response::Error(ErrorResponse::new(
                    crate::protocol::response::error_code::UNAUTHORIZED,
                    "You have not logged in",
                ));
                reply
                    .send(&refused, &ResponseExtras::NONE, Compression::None)
                    .await;
                return true;
            }
            if let Request::Register(events) = &req {
                return register(shared, st, &reply, events).await;
            }
            if rejoined_since(shared, st.joined) {
                // Answered, not dropped: the sender learns that it surely did not run (a peer
                // forwarding it answers its client Unavailable, not a timeout of unknown
                // outcome); the connection closes once what was read is answered.
                if !st.stale {
                    tracing::info!(peer = %st.peer, "closing a connection opened before this \
                        node lost its lease: the requests it holds may be stale");
                }
                st.stale = true;
                let refused = super::forward::unavailable(
                    "not run: this node lost its cluster lease after this connection opened \
                     (paused or cut off); reconnect"
                        .into(),
                );
                let none = ResponseExtras::NONE;
                reply
                    .send(&Response::Error(refused), &none, st.compression)
                    .await;
                return true;
            }
            let env = RequestEnvelope {
                request: req,
                ..env
            };
            spawn_request(shared, st, tx, env, body_bytes).await
        }
    }
}

/// Where the answers to one frame go: its connection's writer, version and stream.
struct Reply<'a> {
    tx: &'a mpsc::Sender<Out>,
    version: u8,
    stream: i16,
}

impl Reply<'_> {
    async fn send(&self, resp: &Response, extras: &ResponseExtras, compression: Compression) {
        let frame = encode(self.version, self.stream, resp, extras, compression);
        let _ = self.tx.send(Out::Frame(frame)).await;
    }

    /// Sends a protocol error; the connection stays open (returns true for `dispatch`).
    async fn protocol_error(&self, msg: impl Into<String>) -> bool {
        let _ = self
            .tx
            .send(protocol_error(self.version, self.stream, msg))
            .await;
        true
    }
}

/// The frame's request, with its body decompressed (pre-v5 bodies may be compressed per
/// frame) and the body's size (the request keeps slices of it until it completes: counted
/// in `request_bytes`); Err: the protocol error to answer.
fn decode_envelope(
    shared: &Shared,
    st: &State,
    header: &FrameHeader,
    body: Bytes,
) -> Result<(RequestEnvelope, usize), String> {
    let body = if header.has_flag(flags::COMPRESSION) && header.version < 5 {
        if st.compression == Compression::None {
            return Err("Received a compressed frame but no compression was negotiated".into());
        }
        compression::decompress_body(
            st.compression,
            &body,
            shared.config.limits.max_frame_bytes.0 as usize,
        )
        .map_err(|e| format!("Cannot decompress frame body: {e}"))?
    } else {
        body
    };
    let body_bytes = body.len();
    let env = request::decode_request(header, body).map_err(|e| e.to_string())?;
    Ok((env, body_bytes))
}

/// STARTUP: compression, payloads, then READY or AUTHENTICATE (v5: segments from here on).
async fn startup(
    shared: &Shared,
    st: &mut State,
    reply: &Reply<'_>,
    opts: &std::collections::HashMap<String, String>,
) -> bool {
    if st.started {
        return reply
            .protocol_error("Unexpected message STARTUP, the connection is already initialised")
            .await;
    }
    let comp = opts.get("COMPRESSION").map(String::as_str).unwrap_or("");
    let comp = match Compression::from_startup_option(comp) {
        Ok(c) if reply.version >= 5 && c == Compression::Snappy => {
            return reply
                .protocol_error("snappy compression is not supported with protocol v5; use lz4")
                .await;
        }
        Ok(c) => c,
        Err(e) => return reply.protocol_error(e.to_string()).await,
    };
    st.compression = comp;
    st.started = true;
    st.payloads = (shared.config.protocol.request_charge).sent(opts.contains_key("DRIVER_NAME"));
    let resp = if st.authenticated {
        Response::Ready
    } else {
        Response::Authenticate("org.apache.cassandra.auth.PasswordAuthenticator".into())
    };
    // READY too carries its (zero) charge for drivers that read payloads.
    reply
        .send(&resp, &zero_charge(st.payloads), Compression::None)
        .await;
    if reply.version >= 5 {
        let lz4 = comp == Compression::Lz4;
        st.segments = Some(SegmentDecoder::new(
            lz4,
            shared.config.limits.max_frame_bytes.0 as usize,
        ));
        let _ = reply.tx.send(Out::StartSegments { lz4 }).await;
    }
    true
}

/// AUTH_RESPONSE: checks the credentials (after the peer's failure delay); repeated failures
/// close the connection (after the last error is sent).
async fn auth_response(
    shared: &Shared,
    st: &mut State,
    reply: &Reply<'_>,
    token: Option<&[u8]>,
) -> bool {
    if !st.started || st.authenticated {
        return reply
            .protocol_error("Unexpected message AUTH_RESPONSE")
            .await;
    }
    // Waits first when this peer has been failing, whatever the outcome.
    let ip = st.peer.ip();
    tokio::time::sleep(shared.auth_guard.delay(ip)).await;
    let resp = match shared.authenticator.check_plain(token) {
        Ok(user) => {
            st.authenticated = true;
            st.session.logged_in = true;
            shared.auth_guard.succeeded(ip);
            tracing::debug!(user, "authenticated");
            Response::AuthSuccess(None)
        }
        Err(msg) => {
            st.auth_failures += 1;
            shared.auth_guard.failed(ip);
            Response::Error(ErrorResponse::new(
                crate::protocol::response::error_code::BAD_CREDENTIALS,
                msg,
            ))
        }
    };
    reply
        .send(&resp, &zero_charge(st.payloads), st.compression)
        .await;
    st.auth_failures < super::auth_guard::MAX_FAILURES_PER_CONNECTION
}

/// REGISTER: the events of the registered types are forwarded (topology and status change
/// only in cluster mode, `cluster_events.rs`).
async fn register(
    shared: &Arc<Shared>,
    st: &mut State,
    reply: &Reply<'_>,
    events: &[String],
) -> bool {
    if let Some(bad) = events.iter().find(|e| {
        !matches!(
            e.as_str(),
            "TOPOLOGY_CHANGE" | "STATUS_CHANGE" | "SCHEMA_CHANGE"
        )
    }) {
        return reply
            .protocol_error(format!("Invalid value '{bad}' for Type"))
            .await;
    }
    for kind in ["TOPOLOGY_CHANGE", "STATUS_CHANGE", "SCHEMA_CHANGE"] {
        if events.iter().any(|e| e == kind) && !st.registered.contains(&kind) {
            st.registered.push(kind);
        }
    }
    if let Some(old) = st.forwarder.take() {
        old.abort();
    }
    if !st.registered.is_empty() {
        st.forwarder = Some(spawn_event_forwarder(
            shared,
            reply.tx.clone(),
            reply.version,
            st.compression,
            st.registered.clone(),
        ));
    }
    reply
        .send(&Response::Ready, &zero_charge(st.payloads), st.compression)
        .await;
    true
}

/// A QUERY/PREPARE/EXECUTE/BATCH: waits for a slot and room for its body, then runs in the
/// read loop (a prepared point request, `Call::runs_inline`, within the read's inline budget)
/// or in a task of its own; returns false when the connection is closing.
async fn spawn_request(
    shared: &Arc<Shared>,
    st: &mut State,
    tx: &mpsc::Sender<Out>,
    env: RequestEnvelope,
    body_bytes: usize,
) -> bool {
    // Backpressure: wait for a slot, and for room for the body (a body larger than the
    // budget takes all of it), before reading more; the answers gathered so far go out first.
    let permit = match Arc::clone(&st.in_flight).try_acquire_owned() {
        Ok(p) => p,
        Err(TryAcquireError::Closed) => return false,
        Err(TryAcquireError::NoPermits) => {
            hand_over(st, tx).await;
            let Ok(p) = Arc::clone(&st.in_flight).acquire_owned().await else {
                return false;
            };
            p
        }
    };
    let budget = shared.config.limits.max_in_flight_request_bytes.0;
    let want = body_bytes.min(budget as usize).min(u32::MAX as usize) as u32;
    let body_permit = match Arc::clone(&st.request_bytes).try_acquire_many_owned(want) {
        Ok(p) => p,
        Err(TryAcquireError::Closed) => return false,
        Err(TryAcquireError::NoPermits) => {
            hand_over(st, tx).await;
            let Ok(p) = Arc::clone(&st.request_bytes).acquire_many_owned(want).await else {
                return false;
            };
            p
        }
    };
    if env.custom_payload.is_some() {
        st.payloads = shared.config.protocol.request_charge.sent(true);
    }
    let env = Arc::new(env);
    let mut sess = st.session.clone();
    sess.keyspace = match super::forward::is_forwarded(&env) || super::batchlog::is_replay(&env) {
        true => super::forward::forwarded_keyspace(&env),
        false => st.keyspace.lock().clone(),
    };
    let started = std::time::Instant::now();
    let prepared = match &env.request {
        Request::Execute(e) => st.prepared.get(&shared.engine, &e.id),
        _ => None,
    };
    let call = Call::new(
        Arc::clone(shared),
        Arc::clone(&env),
        sess,
        (st.peer.ip(), st.joined),
        prepared,
    );
    // Inline while this read's budget lasts and the client reads its answers (a request over
    // the out budget waits, which only a task may).
    if st.inline_left > 0 && st.unsent.has_room() && call.runs_inline() {
        st.inline_left -= 1;
        if let Some(mut produced) = call.run_inline() {
            settle_answer(
                &env.request,
                &mut produced,
                started,
                st.payloads,
                &st.keyspace,
            );
            let framing = Framing {
                version: env.version,
                stream: env.stream,
                compression: st.compression,
            };
            let (resp, extras) = (&produced.response, &produced.extras);
            st.gathered.push(&framing, resp, extras, &st.unsent);
            if st.gathered.is_full() {
                hand_over(st, tx).await;
            }
            return true;
        }
    }
    let answer = Answer {
        tx: tx.clone(),
        version: env.version,
        stream: env.stream,
        compression: st.compression,
        payloads: st.payloads,
        keyspace: Arc::clone(&st.keyspace),
        unsent: Arc::clone(&st.unsent),
        started,
    };
    tokio::spawn(async move {
        // Not while the client leaves earlier answers unread (see out_budget.rs).
        answer.unsent.wait_for_room().await;
        let Some((produced, lingering)) = call.run().await else {
            return;
        };
        answer.send(&env.request, produced).await;
        // Answered at its deadline: the slot stays taken until its storage call ends.
        if let Some(call) = lingering {
            let _ = call.await;
        }
        drop(permit);
        drop(body_permit);
    });
    true
}

/// Where a request's answer goes, and how it is sent.
struct Answer {
    tx: mpsc::Sender<Out>,
    version: u8,
    stream: i16,
    compression: Compression,
    /// See `State::payloads`.
    payloads: bool,
    /// The connection's keyspace, which a USE sets.
    keyspace: Arc<parking_lot::Mutex<Option<String>>>,
    unsent: Arc<OutBudget>,
    started: std::time::Instant,
}

impl Answer {
    /// Records the request's metrics and queues its response for the writer.
    async fn send(&self, request: &Request, mut produced: super::call::Produced) {
        settle_answer(
            request,
            &mut produced,
            self.started,
            self.payloads,
            &self.keyspace,
        );
        let frame = encode(
            self.version,
            self.stream,
            &produced.response,
            &produced.extras,
            self.compression,
        );
        self.unsent.queued(frame.len());
        let _ = self.tx.send(Out::Response(frame)).await;
    }
}

/// What every answer goes through before it is encoded: the request's metrics, the payloads
/// this client may read (see `State::payloads`), the keyspace a USE chose.
fn settle_answer(
    request: &Request,
    produced: &mut super::call::Produced,
    started: std::time::Instant,
    payloads: bool,
    keyspace: &parking_lot::Mutex<Option<String>>,
) {
    super::request_metrics::record(request, &produced.response, started);
    if !payloads {
        // A forwarded request's trace goes back to its coordinator regardless.
        let trace = super::forward::TRACE_KEY;
        produced.extras.custom_payload.retain(|(k, _)| k == trace);
        produced.extras.request_charge = None;
    }
    if let Some(ks) = produced.keyspace.take() {
        *keyspace.lock() = Some(ks);
    }
}

fn spawn_event_forwarder(
    shared: &Arc<Shared>,
    tx: mpsc::Sender<Out>,
    version: u8,
    compression: Compression,
    registered: Vec<&'static str>,
) -> tokio::task::JoinHandle<()> {
    let mut rx = shared.events.subscribe();
    tokio::spawn(async move {
        loop {
            match rx.recv().await {
                Ok(ev) if !registered.contains(&ev.event_type()) => {}
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

/// Completes after `timeout_ms` (re-armed by every read, since the reader's select drops it);
/// never with 0.
async fn idle_for(timeout_ms: u64) {
    if timeout_ms == 0 {
        std::future::pending::<()>().await;
    }
    tokio::time::sleep(std::time::Duration::from_millis(timeout_ms)).await;
}

/// The connection's request slots, which the writer reads to tell whether more answers are coming.
struct InFlight {
    slots: Arc<Semaphore>,
    max: usize,
}

impl InFlight {
    /// More requests in flight than the one whose answer was just queued (a request task frees
    /// its slot after queueing its answer).
    fn others(&self) -> bool {
        self.max - self.slots.available_permits() > 1
    }
}

/// Writes responses, batching whatever is queued into one write. While other requests of the
/// connection are in flight, it yields once after the first response of a batch: a request
/// task's send wakes this task into the runtime's next-to-run slot, so without the yield it
/// would write each response alone, one `send` syscall per response (0.95 per prepared read
/// under `scripts/bench`, about a third of the server's CPU); yielding lets the request tasks
/// already queued on this thread finish and queue theirs first. It also yields while commits
/// wait for the journal to reach the OS (`Store::settle_commits`): the other connections'
/// read loops already queued run first and commit, and the journal write that this writer
/// or the first of them makes covers them all (with 64 connections x 4 requests in flight, one
/// journal `write` per batch of answers of each connection before). A lone request's answer
/// on an idle server is written at once.
async fn write_loop<W: AsyncRead + AsyncWrite + Send + 'static>(
    mut wr: tokio::io::WriteHalf<W>,
    mut rx: mpsc::Receiver<Out>,
    unsent: Arc<OutBudget>,
    in_flight: InFlight,
    store: Arc<dyn crate::storage::Store>,
) {
    let mut segments: Option<bool> = None;
    let mut out = BytesMut::with_capacity(64 * 1024);
    let mut pending = BytesMut::new();
    while let Some(first) = rx.recv().await {
        if in_flight.others() || store.has_unsettled_commits() {
            tokio::task::yield_now().await;
        }
        let mut msg = Some(first);
        let mut counted = 0;
        while let Some(m) = msg.take() {
            if let Out::Response(f) = &m {
                counted += f.len();
            }
            match m {
                Out::Frame(f) | Out::Response(f) => match segments {
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
        // No answer before its commit survives kill -9 (one journal write for all of them).
        if let Err(e) = store.settle_commits() {
            tracing::error!(error = %e, "cannot write the journal: closing the connection unanswered");
            break;
        }
        if wr.write_all(&out).await.is_err() {
            break;
        }
        out.clear();
        if wr.flush().await.is_err() {
            break;
        }
        unsent.written(counted);
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
    let max = v5::max_payload(lz4);
    if pending.len() <= max {
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
                if take > 0 && take + size > max {
                    break;
                }
                take += size;
                if take >= max {
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
