//! Internal CQL connections to the other nodes of a cluster, for forwarding (`forward.rs`).
//!
//! Per peer address a bounded pool of `CONNS_PER_PEER` protocol v4 connections (v4: no
//! segment framing, and every node speaks it), opened on first use with STARTUP and no
//! compression. Many requests are in flight on one connection at once, told apart by stream id
//! (at most `MAX_IN_FLIGHT_PER_CONN`); a reader task hands each answer to its waiting request.
//!
//! With `auth.enabled` a peer asks for a login: the pool logs in as the first configured user
//! (the nodes of a cluster share their `[auth.users]`; every user may do everything).
//!
//! Deadlines: `CONNECT_MS` to connect and start, `REQUEST_MS` for an answer (below the
//! drivers' 10 s client timeout, so the client hears ours). A peer that cannot be reached is
//! marked down for `DOWN_MS`: requests to it fail at once instead of each waiting to connect.
//! A request that gets no answer in time closes its connection (the peer is stalled), failing
//! the others waiting on it; a stream id is only reused once its answer arrived or the
//! connection died, so a late answer never reaches another request.
//!
//! Errors say whether the request may have run there ([`PeerError::Lost`]: it was sent) or
//! surely did not ([`PeerError::Unreachable`]): the caller answers a timeout or Unavailable.

use crate::protocol::frame::{self, flags, FrameHeader, Opcode};
use crate::protocol::request::{encode_request, Request};
use crate::protocol::types::{read_bytes_map, read_string_list, read_uuid};
use bytes::{Bytes, BytesMut};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot, Semaphore};

const VERSION: u8 = 4;
const CONNS_PER_PEER: usize = 2;
const MAX_IN_FLIGHT_PER_CONN: usize = 1024;
const CONNECT_MS: u64 = 2_000;
pub const REQUEST_MS: u64 = 8_000;
const DOWN_MS: u64 = 1_000;
/// Largest answer body accepted from a peer (the protocol's frame limit).
const MAX_BODY_BYTES: usize = frame::DEFAULT_MAX_BODY;

#[derive(Debug, thiserror::Error)]
pub enum PeerError {
    /// Nothing was sent: the peer could not be reached or refused the connection.
    #[error("node {addr} cannot be reached: {why}")]
    Unreachable { addr: String, why: String },
    /// Sent, but no answer (deadline, or the connection died): it may have run there.
    #[error("no answer from node {addr}: {why}")]
    Lost { addr: String, why: String },
}

/// A peer's answer: its opcode, frame-level extras and the message body after them.
#[derive(Debug)]
pub struct Answer {
    pub opcode: Opcode,
    pub warnings: Vec<String>,
    pub custom_payload: Vec<(String, Bytes)>,
    pub body: Bytes,
}

/// The connections to every peer this node forwarded to.
#[derive(Default)]
pub struct PeerPool {
    peers: Mutex<HashMap<String, Arc<Peer>>>,
    /// (user, password) to log in with when a peer asks (`auth.enabled`).
    login: Option<(String, String)>,
}

#[derive(Default)]
struct Peer {
    conns: Mutex<Vec<Arc<Conn>>>,
    /// Serializes connecting, so a burst of requests opens one connection, not hundreds.
    connecting: tokio::sync::Mutex<()>,
    down_until: Mutex<Option<Instant>>,
    next: AtomicUsize,
}

type Waiter = oneshot::Sender<Result<(FrameHeader, Bytes), String>>;

struct Conn {
    out: mpsc::Sender<Bytes>,
    pending: Mutex<HashMap<i16, Waiter>>,
    free_ids: Mutex<Vec<i16>>,
    slots: Arc<Semaphore>,
    dead: AtomicBool,
    /// Closes the connection (its reader fails every request waiting on it).
    close: tokio::sync::Notify,
}

impl PeerPool {
    /// A pool that logs in as `login` when a peer asks for it.
    pub fn new(login: Option<(String, String)>) -> PeerPool {
        PeerPool {
            peers: Mutex::default(),
            login,
        }
    }

    /// Sends `req` with `payload` to the node at `addr` and waits for its answer.
    pub async fn request(
        &self,
        addr: &str,
        payload: &[(String, Bytes)],
        req: &Request,
    ) -> Result<Answer, PeerError> {
        let peer = Arc::clone(self.peers.lock().entry(addr.to_string()).or_default());
        let conn = peer.conn(addr, self.login.as_ref()).await?;
        let lost = |why: String| PeerError::Lost {
            addr: addr.to_string(),
            why,
        };
        let unreachable = |why: String| PeerError::Unreachable {
            addr: addr.to_string(),
            why,
        };
        let _slot = Arc::clone(&conn.slots)
            .acquire_owned()
            .await
            .map_err(|_| unreachable("connection closed".into()))?;
        let Some(stream) = conn.free_ids.lock().pop() else {
            return Err(unreachable("no free stream id".into()));
        };
        let mut frame = BytesMut::new();
        if let Err(e) = encode_request(&mut frame, VERSION, stream, false, Some(payload), req) {
            conn.free_ids.lock().push(stream);
            return Err(unreachable(format!("cannot encode the request: {e}")));
        }
        let (tx, rx) = oneshot::channel();
        conn.pending.lock().insert(stream, tx);
        if conn.dead.load(Ordering::Acquire) || conn.out.send(frame.freeze()).await.is_err() {
            conn.pending.lock().remove(&stream);
            conn.free_ids.lock().push(stream);
            return Err(unreachable("connection closed".into()));
        }
        let answer = tokio::time::timeout(Duration::from_millis(REQUEST_MS), rx).await;
        let (header, body) = match answer {
            Err(_) => {
                // A peer that answers nothing in this long is stalled (paused, overloaded):
                // the connection goes, so later requests find out at connect time (fast)
                // instead of each waiting out its deadline, and no stream id stays taken.
                conn.close.notify_one();
                return Err(lost(format!("no answer within {REQUEST_MS} ms")));
            }
            Ok(Err(_)) => return Err(lost("connection closed".into())),
            Ok(Ok(Err(why))) => return Err(lost(why)),
            Ok(Ok(Ok(frame))) => frame,
        };
        parse_answer(&header, body).map_err(lost)
    }
}

impl Peer {
    /// A live connection (round robin over the pool), opening one while under the pool size.
    async fn conn(
        &self,
        addr: &str,
        login: Option<&(String, String)>,
    ) -> Result<Arc<Conn>, PeerError> {
        if let Some(c) = self.pick(true) {
            return Ok(c);
        }
        if self.down_until.lock().is_some_and(|t| Instant::now() < t) {
            return Err(PeerError::Unreachable {
                addr: addr.to_string(),
                why: "it was unreachable a moment ago".into(),
            });
        }
        let _one = self.connecting.lock().await;
        if let Some(c) = self.pick(true) {
            return Ok(c);
        }
        match open(addr, login).await {
            Ok(c) => {
                *self.down_until.lock() = None;
                self.conns.lock().push(Arc::clone(&c));
                Ok(c)
            }
            Err(why) => {
                // An open connection still serves while a second cannot be opened.
                if let Some(c) = self.pick(false) {
                    return Ok(c);
                }
                *self.down_until.lock() = Some(Instant::now() + Duration::from_millis(DOWN_MS));
                Err(PeerError::Unreachable {
                    addr: addr.to_string(),
                    why,
                })
            }
        }
    }

    /// The next live connection; None when `want_full` and the pool has room for another.
    fn pick(&self, want_full: bool) -> Option<Arc<Conn>> {
        let mut conns = self.conns.lock();
        conns.retain(|c| !c.dead.load(Ordering::Acquire));
        if conns.is_empty() || (want_full && conns.len() < CONNS_PER_PEER) {
            return None;
        }
        let i = self.next.fetch_add(1, Ordering::Relaxed) % conns.len();
        Some(Arc::clone(&conns[i]))
    }
}

/// Connects and starts a protocol v4 session, then runs the connection's reader and writer.
async fn open(addr: &str, login: Option<&(String, String)>) -> Result<Arc<Conn>, String> {
    let deadline = Duration::from_millis(CONNECT_MS);
    let start = async {
        let mut s = TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
        let _ = s.set_nodelay(true);
        let mut startup = BytesMut::new();
        let opts = HashMap::from([("CQL_VERSION".to_string(), "3.0.0".to_string())]);
        encode_request(
            &mut startup,
            VERSION,
            0,
            false,
            None,
            &Request::Startup(opts),
        )
        .map_err(|e| e.to_string())?;
        s.write_all(&startup).await.map_err(|e| e.to_string())?;
        let mut buf = BytesMut::new();
        let (header, _) = read_frame(&mut s, &mut buf).await?;
        match header.opcode {
            Opcode::Ready => Ok((s, buf)),
            Opcode::Authenticate => match login {
                Some(login) => log_in(&mut s, &mut buf, login).await.map(|()| (s, buf)),
                None => Err("it asks for a login and this node has no user to log in as".into()),
            },
            other => Err(format!("unexpected answer {other:?} to STARTUP")),
        }
    };
    let (stream, buf) = tokio::time::timeout(deadline, start)
        .await
        .map_err(|_| format!("no connection within {CONNECT_MS} ms"))??;
    let (rd, wr) = stream.into_split();
    let (out, rx) = mpsc::channel(MAX_IN_FLIGHT_PER_CONN);
    let conn = Arc::new(Conn {
        out,
        pending: Mutex::new(HashMap::new()),
        free_ids: Mutex::new((0..MAX_IN_FLIGHT_PER_CONN as i16).rev().collect()),
        slots: Arc::new(Semaphore::new(MAX_IN_FLIGHT_PER_CONN)),
        dead: AtomicBool::new(false),
        close: tokio::sync::Notify::new(),
    });
    tokio::spawn(write_loop(wr, rx));
    tokio::spawn(read_loop(rd, buf, Arc::clone(&conn)));
    Ok(conn)
}

/// PasswordAuthenticator login (SASL PLAIN) on a connection just started.
async fn log_in(
    s: &mut TcpStream,
    buf: &mut BytesMut,
    (user, pass): &(String, String),
) -> Result<(), String> {
    let token = [&[0u8][..], user.as_bytes(), &[0], pass.as_bytes()].concat();
    let mut frame = BytesMut::new();
    let req = Request::AuthResponse(Some(Bytes::from(token)));
    encode_request(&mut frame, VERSION, 0, false, None, &req).map_err(|e| e.to_string())?;
    s.write_all(&frame).await.map_err(|e| e.to_string())?;
    let (header, body) = read_frame(s, buf).await?;
    match header.opcode {
        Opcode::AuthSuccess => Ok(()),
        Opcode::Error => {
            let mut body = body;
            let _ = crate::protocol::types::read_int(&mut body);
            let why = crate::protocol::types::read_string(&mut body).unwrap_or_default();
            Err(format!("it refused the login as {user}: {why}"))
        }
        other => Err(format!("unexpected answer {other:?} to the login")),
    }
}

async fn write_loop(mut wr: tokio::net::tcp::OwnedWriteHalf, mut rx: mpsc::Receiver<Bytes>) {
    let mut out = BytesMut::new();
    while let Some(first) = rx.recv().await {
        out.extend_from_slice(&first);
        while out.len() < (1 << 20) {
            match rx.try_recv() {
                Ok(f) => out.extend_from_slice(&f),
                Err(_) => break,
            }
        }
        if wr.write_all(&out).await.is_err() {
            break;
        }
        out.clear();
    }
}

/// Hands each answer to its request; when the connection ends, fails every request waiting.
async fn read_loop(mut rd: tokio::net::tcp::OwnedReadHalf, mut buf: BytesMut, conn: Arc<Conn>) {
    let why = loop {
        let next = tokio::select! {
            f = read_frame(&mut rd, &mut buf) => f,
            () = conn.close.notified() => Err(format!("closed: an answer took over {REQUEST_MS} ms")),
        };
        match next {
            Ok((header, body)) => {
                let waiter = conn.pending.lock().remove(&header.stream);
                if let Some(w) = waiter {
                    // A request that stopped waiting dropped its receiver: nothing to do.
                    let _ = w.send(Ok((header, body)));
                    conn.free_ids.lock().push(header.stream);
                }
            }
            Err(why) => break why,
        }
    };
    conn.dead.store(true, Ordering::Release);
    conn.slots.close();
    for (_, w) in conn.pending.lock().drain() {
        let _ = w.send(Err(why.clone()));
    }
}

/// Reads one response frame (uncompressed: none was negotiated).
async fn read_frame<R: AsyncReadExt + Unpin>(
    rd: &mut R,
    buf: &mut BytesMut,
) -> Result<(FrameHeader, Bytes), String> {
    loop {
        match frame::decode_envelope(buf, MAX_BODY_BYTES) {
            Ok(Some(f)) => return Ok(f),
            Ok(None) => {}
            Err(e) => return Err(e.to_string()),
        }
        buf.reserve(64 * 1024);
        match rd.read_buf(buf).await {
            Ok(0) => return Err("connection closed by the peer".into()),
            Ok(_) => {}
            Err(e) => return Err(e.to_string()),
        }
    }
}

/// Splits a response body into its frame-level extras and the message body.
fn parse_answer(header: &FrameHeader, mut body: Bytes) -> Result<Answer, String> {
    let bad = |e: crate::protocol::types::DecodeError| format!("malformed answer: {e}");
    if header.has_flag(flags::TRACING) {
        read_uuid(&mut body).map_err(bad)?;
    }
    let warnings = match header.has_flag(flags::WARNING) {
        true => read_string_list(&mut body).map_err(bad)?,
        false => Vec::new(),
    };
    let custom_payload = match header.has_flag(flags::CUSTOM_PAYLOAD) {
        true => read_bytes_map(&mut body).map_err(bad)?,
        false => Vec::new(),
    };
    Ok(Answer {
        opcode: header.opcode,
        warnings,
        custom_payload,
        body,
    })
}
