//! The canned-answer server of `scripts/bench`: the protocol-loop limit that ringgate is
//! compared with. It answers every EXECUTE of a prepared statement with a canned response, so
//! the load generator, the network stack and frame handling are all it costs.
//!
//! Usage: bench_echo LISTEN_ADDR BACKEND_ADDR
//!
//! To stay tiny and still satisfy a real driver (topology queries, schema agreement, PREPARE
//! metadata), everything that is not a cached EXECUTE is relayed verbatim to a real ringgate at
//! BACKEND_ADDR over one backend connection per client connection (stream ids pass through).
//! The first EXECUTE of each prepared id is relayed too and its RESULT recorded; later EXECUTEs
//! of that id get the recorded response with their own stream id. Protocol v3/v4 framing without
//! compression (what the load generator speaks); anything else is only relayed.

use bytes::{Buf, Bytes, BytesMut};
use std::collections::HashMap;
use std::sync::Arc;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

const HEADER_BYTES: usize = 9;
const MAX_BODY_BYTES: usize = 256 << 20;
const OPCODE_RESULT: u8 = 0x08;
const OPCODE_EXECUTE: u8 = 0x0A;
const FLAG_COMPRESSION: u8 = 0x01;
/// Frames queued for one socket before its reader waits.
const QUEUE_FRAMES: usize = 4096;
/// The writer batches at most this many bytes per write call.
const WRITE_BATCH_BYTES: usize = 1 << 20;
/// Recorded responses per connection (one per prepared statement used).
const MAX_CANNED: usize = 1024;
/// EXECUTEs relayed and awaiting their response, per connection (one per stream id at most).
const MAX_PENDING: usize = 1 << 16;

/// Per connection: prepared id -> recorded response (flags, opcode, body), and the relayed
/// EXECUTEs awaiting their response (stream -> prepared id).
#[derive(Default)]
struct Canned {
    responses: HashMap<Bytes, (u8, Bytes)>,
    pending: HashMap<i16, Bytes>,
}

type Shared = Arc<parking_lot::Mutex<Canned>>;

/// A complete frame (header and body) split off `buf`, if there is one.
fn next_frame(buf: &mut BytesMut) -> std::io::Result<Option<Bytes>> {
    if buf.len() < HEADER_BYTES {
        return Ok(None);
    }
    let len = u32::from_be_bytes(buf[5..9].try_into().expect("4 bytes")) as usize;
    if len > MAX_BODY_BYTES {
        return Err(std::io::Error::other("frame too large"));
    }
    if buf.len() < HEADER_BYTES + len {
        buf.reserve(HEADER_BYTES + len - buf.len());
        return Ok(None);
    }
    Ok(Some(buf.split_to(HEADER_BYTES + len).freeze()))
}

fn stream_of(frame: &[u8]) -> i16 {
    i16::from_be_bytes([frame[2], frame[3]])
}

/// The prepared id of an uncompressed EXECUTE frame (its body starts with [short bytes]).
fn execute_id(frame: &Bytes) -> Option<Bytes> {
    if frame[4] != OPCODE_EXECUTE || frame[1] & FLAG_COMPRESSION != 0 {
        return None;
    }
    let mut body = frame.slice(HEADER_BYTES..);
    if body.len() < 2 {
        return None;
    }
    let n = body.get_u16() as usize;
    (body.len() >= n).then(|| body.slice(..n))
}

/// The recorded response to `request` with the request's stream id.
fn canned_response(request: &[u8], flags: u8, body: &Bytes) -> Bytes {
    let mut out = BytesMut::with_capacity(HEADER_BYTES + body.len());
    out.extend_from_slice(&[
        request[0] | 0x80,
        flags,
        request[2],
        request[3],
        OPCODE_RESULT,
    ]);
    out.extend_from_slice(&(body.len() as u32).to_be_bytes());
    out.extend_from_slice(body);
    out.freeze()
}

/// Client -> canned answer or backend.
async fn client_reader(
    mut rd: impl AsyncRead + Unpin,
    to_client: mpsc::Sender<Bytes>,
    to_backend: mpsc::Sender<Bytes>,
    canned: Shared,
) -> std::io::Result<()> {
    let mut buf = BytesMut::with_capacity(64 * 1024);
    loop {
        while let Some(frame) = next_frame(&mut buf)? {
            let Some(id) = execute_id(&frame) else {
                send(&to_backend, frame).await?;
                continue;
            };
            let hit = {
                let mut c = canned.lock();
                let hit = c.responses.get(&id).cloned();
                if hit.is_none() && c.pending.len() < MAX_PENDING {
                    c.pending.insert(stream_of(&frame), id);
                }
                hit
            };
            match hit {
                Some((flags, body)) => {
                    send(&to_client, canned_response(&frame, flags, &body)).await?
                }
                None => send(&to_backend, frame).await?,
            }
        }
        buf.reserve(64 * 1024);
        if rd.read_buf(&mut buf).await? == 0 {
            return Ok(());
        }
    }
}

/// Backend -> client, recording the first RESULT of each prepared id.
async fn backend_reader(
    mut rd: impl AsyncRead + Unpin,
    to_client: mpsc::Sender<Bytes>,
    canned: Shared,
) -> std::io::Result<()> {
    let mut buf = BytesMut::with_capacity(64 * 1024);
    loop {
        while let Some(frame) = next_frame(&mut buf)? {
            {
                let mut c = canned.lock();
                if let Some(id) = c.pending.remove(&stream_of(&frame)) {
                    let plain = frame[1] & FLAG_COMPRESSION == 0;
                    if frame[4] == OPCODE_RESULT && plain && c.responses.len() < MAX_CANNED {
                        c.responses
                            .insert(id, (frame[1], frame.slice(HEADER_BYTES..)));
                    }
                }
            }
            send(&to_client, frame).await?;
        }
        buf.reserve(64 * 1024);
        if rd.read_buf(&mut buf).await? == 0 {
            return Ok(());
        }
    }
}

async fn send(tx: &mpsc::Sender<Bytes>, frame: Bytes) -> std::io::Result<()> {
    tx.send(frame)
        .await
        .map_err(|_| std::io::Error::other("writer gone"))
}

/// Writes queued frames, batching whatever is queued into one write.
async fn writer(
    mut wr: impl tokio::io::AsyncWrite + Unpin,
    mut rx: mpsc::Receiver<Bytes>,
) -> std::io::Result<()> {
    let mut out = BytesMut::with_capacity(64 * 1024);
    while let Some(first) = rx.recv().await {
        out.extend_from_slice(&first);
        while out.len() < WRITE_BATCH_BYTES {
            match rx.try_recv() {
                Ok(f) => out.extend_from_slice(&f),
                Err(_) => break,
            }
        }
        wr.write_all(&out).await?;
        out.clear();
    }
    Ok(())
}

async fn connection(client: TcpStream, backend_addr: String) -> std::io::Result<()> {
    client.set_nodelay(true)?;
    let backend = TcpStream::connect(&backend_addr).await?;
    backend.set_nodelay(true)?;
    let (crd, cwr) = client.into_split();
    let (brd, bwr) = backend.into_split();
    let (to_client, client_rx) = mpsc::channel(QUEUE_FRAMES);
    let (to_backend, backend_rx) = mpsc::channel(QUEUE_FRAMES);
    let canned = Shared::default();
    tokio::spawn(writer(cwr, client_rx));
    tokio::spawn(writer(bwr, backend_rx));
    let back = tokio::spawn(backend_reader(brd, to_client.clone(), Arc::clone(&canned)));
    let res = client_reader(crd, to_client, to_backend, canned).await;
    back.abort();
    res
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (Some(listen), Some(backend)) = (args.get(1), args.get(2)) else {
        eprintln!("usage: bench_echo LISTEN_ADDR BACKEND_ADDR");
        std::process::exit(2);
    };
    let listener = TcpListener::bind(listen).await.expect("listen");
    loop {
        let Ok((sock, _)) = listener.accept().await else {
            continue;
        };
        let backend = backend.clone();
        tokio::spawn(async move {
            if let Err(e) = connection(sock, backend).await {
                eprintln!("bench_echo: connection ended: {e}");
            }
        });
    }
}
