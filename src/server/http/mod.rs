//! The HTTP listener (`http.listen`, default 127.0.0.1:9180): Prometheus `/metrics`
//! (`exporter.rs`) and the live dashboard at `/` (`dashboard.rs`).
//!
//! A deliberately small HTTP/1.1 server: GET and HEAD only, one request per connection
//! (`Connection: close`), a request head of at most 8 KiB read within 5 s, at most 16
//! connections at once (more are closed at once). Pages are rendered on a blocking thread, so a
//! scrape of many tables never holds a runtime thread that CQL requests need.

mod dashboard;
mod exporter;
mod snapshot;

pub use exporter::SeriesLimits;

use crate::query::Engine;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Semaphore};

/// Largest request head (request line and headers) read.
const MAX_HEAD_BYTES: usize = 8 << 10;
/// Time a client has to send its request head, and to take the response.
const IO_TIMEOUT: Duration = Duration::from_secs(5);
/// HTTP connections served at once.
const MAX_CONNECTIONS: usize = 16;

/// Serves HTTP on `listener` until `shutdown` fires.
pub async fn run(
    listener: TcpListener,
    engine: Arc<Engine>,
    limits: SeriesLimits,
    mut shutdown: watch::Receiver<bool>,
) {
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((sock, _)) = accepted else {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                };
                let Ok(slot) = Arc::clone(&slots).try_acquire_owned() else {
                    continue; // dropped: closed
                };
                let engine = Arc::clone(&engine);
                tokio::spawn(async move {
                    let _ = tokio::time::timeout(IO_TIMEOUT * 2, serve(sock, engine, limits)).await;
                    drop(slot);
                });
            }
            _ = shutdown.changed() => return,
        }
    }
}

/// A response: status line, content type and body.
struct Reply {
    status: &'static str,
    content_type: &'static str,
    body: Vec<u8>,
}

impl Reply {
    fn text(status: &'static str, body: &str) -> Reply {
        Reply {
            status,
            content_type: "text/plain; charset=utf-8",
            body: body.as_bytes().to_vec(),
        }
    }
}

async fn serve(mut sock: TcpStream, engine: Arc<Engine>, limits: SeriesLimits) {
    let head = match tokio::time::timeout(IO_TIMEOUT, read_head(&mut sock)).await {
        Ok(Some(h)) => h,
        _ => return,
    };
    crate::metrics::global().http_requests.inc();
    let (method, path) = match parse_request_line(&head) {
        Some(x) => x,
        None => {
            let r = Reply::text("400 Bad Request", "bad request\n");
            return write_reply(&mut sock, r, false).await;
        }
    };
    let head_only = method == "HEAD";
    if method != "GET" && !head_only {
        let r = Reply::text("405 Method Not Allowed", "only GET and HEAD\n");
        return write_reply(&mut sock, r, false).await;
    }
    let reply = crate::storage::blocking::spawn(move || route(&engine, &path, limits))
        .await
        .unwrap_or_else(|_| Reply::text("500 Internal Server Error", "page failed\n"));
    write_reply(&mut sock, reply, head_only).await;
}

/// The page for a path (the query string is ignored).
fn route(engine: &Engine, path: &str, limits: SeriesLimits) -> Reply {
    let path = path.split('?').next().unwrap_or("");
    match path {
        "/metrics" => Reply {
            status: "200 OK",
            content_type: "text/plain; version=0.0.4; charset=utf-8",
            body: exporter::render(engine, limits).into_bytes(),
        },
        "/" => Reply {
            status: "200 OK",
            content_type: "text/html; charset=utf-8",
            body: dashboard::PAGE.as_bytes().to_vec(),
        },
        "/api/tables" => Reply {
            status: "200 OK",
            content_type: "application/json",
            body: dashboard::api_tables(engine, limits).into_bytes(),
        },
        _ => Reply::text("404 Not Found", "not found: try / or /metrics\n"),
    }
}

/// Reads up to the blank line ending the request head; None if the client closes first or
/// the head is over `MAX_HEAD_BYTES`.
async fn read_head(sock: &mut TcpStream) -> Option<String> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    loop {
        let n = sock.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            buf.truncate(end);
            return Some(String::from_utf8_lossy(&buf).into_owned());
        }
        if buf.len() > MAX_HEAD_BYTES {
            return None;
        }
    }
}

/// The method and path of `GET /path HTTP/1.1`.
fn parse_request_line(head: &str) -> Option<(String, String)> {
    let line = head.lines().next()?;
    let mut parts = line.split(' ');
    let (method, path, version) = (parts.next()?, parts.next()?, parts.next()?);
    if !version.starts_with("HTTP/1.") || !path.starts_with('/') || parts.next().is_some() {
        return None;
    }
    Some((method.to_string(), path.to_string()))
}

async fn write_reply(sock: &mut TcpStream, r: Reply, head_only: bool) {
    let head = format!(
        "HTTP/1.1 {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n",
        r.status,
        r.content_type,
        r.body.len()
    );
    let _ = tokio::time::timeout(IO_TIMEOUT, async {
        sock.write_all(head.as_bytes()).await?;
        if !head_only {
            sock.write_all(&r.body).await?;
        }
        sock.shutdown().await
    })
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_lines() {
        assert_eq!(
            parse_request_line("GET /metrics HTTP/1.1\r\nHost: x"),
            Some(("GET".into(), "/metrics".into()))
        );
        assert_eq!(parse_request_line("GET metrics HTTP/1.1"), None);
        assert_eq!(parse_request_line("GET / SPDY/3"), None);
        assert_eq!(parse_request_line(""), None);
    }
}
