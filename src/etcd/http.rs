//! A minimal HTTP/1.1 client for etcd's JSON gateway: one `POST` per connection
//! (`Connection: close`), response bodies by `Content-Length`, chunked transfer coding, or up to
//! the close, all bounded in bytes. Deadlines are the caller's (`tokio::time::timeout`).
//!
//! Why one connection per request: the control plane sends a few requests per second, a local
//! connect costs ~0.1 ms, and a closed connection can never hand a late answer to the next
//! request. Keep-alive is a later optimisation if the ownership traffic needs it.

use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

/// Status line plus headers.
const MAX_HEAD_BYTES: usize = 16 * 1024;

#[derive(Debug)]
pub struct Response {
    pub status: u16,
    pub body: Vec<u8>,
}

#[derive(Debug)]
pub enum HttpError {
    /// Nothing was sent: the connection could not be made.
    Connect(std::io::Error),
    /// The request may have reached the server.
    Io(std::io::Error),
    /// The answer is not HTTP/1.1 we understand, or exceeds a bound.
    Malformed(String),
}

pub async fn connect(addr: &str) -> Result<TcpStream, HttpError> {
    let stream = TcpStream::connect(addr).await.map_err(HttpError::Connect)?;
    let _ = stream.set_nodelay(true);
    Ok(stream)
}

/// Sends `POST path` with a JSON body on `stream` and reads the answer's head.
pub async fn send(
    stream: TcpStream,
    host: &str,
    path: &str,
    body: &[u8],
) -> Result<(BufReader<TcpStream>, u16, Framing), HttpError> {
    let mut stream = BufReader::new(stream);
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let w = stream.get_mut();
    w.write_all(head.as_bytes()).await.map_err(HttpError::Io)?;
    w.write_all(body).await.map_err(HttpError::Io)?;
    w.flush().await.map_err(HttpError::Io)?;
    let (status, framing) = read_head(&mut stream).await?;
    Ok((stream, status, framing))
}

/// Sends `POST path` with a JSON body on `stream` and reads the whole answer.
pub async fn post(
    stream: TcpStream,
    host: &str,
    path: &str,
    body: &[u8],
    max_body_bytes: usize,
) -> Result<Response, HttpError> {
    let (mut stream, status, framing) = send(stream, host, path, body).await?;
    let body = match framing {
        Framing::Length(n) if n > max_body_bytes => return Err(too_large(n, max_body_bytes)),
        Framing::Length(n) => {
            let mut b = vec![0; n];
            stream.read_exact(&mut b).await.map_err(HttpError::Io)?;
            b
        }
        Framing::Chunked => read_chunked(&mut stream, max_body_bytes).await?,
        Framing::Close => {
            let mut b = Vec::new();
            let limit = max_body_bytes as u64 + 1;
            (&mut stream)
                .take(limit)
                .read_to_end(&mut b)
                .await
                .map_err(HttpError::Io)?;
            if b.len() > max_body_bytes {
                return Err(too_large(b.len(), max_body_bytes));
            }
            b
        }
    };
    Ok(Response { status, body })
}

pub(super) fn too_large(n: usize, max: usize) -> HttpError {
    HttpError::Malformed(format!("response body of {n}+ bytes exceeds {max} bytes"))
}

pub enum Framing {
    Length(usize),
    Chunked,
    Close,
}

pub(super) async fn read_line<R: AsyncBufRead + Unpin>(
    r: &mut R,
    budget: &mut usize,
) -> Result<String, HttpError> {
    let mut line = Vec::new();
    let limit = *budget as u64 + 1;
    (&mut *r)
        .take(limit)
        .read_until(b'\n', &mut line)
        .await
        .map_err(HttpError::Io)?;
    if line.len() > *budget {
        return Err(HttpError::Malformed(format!(
            "header longer than {MAX_HEAD_BYTES} bytes"
        )));
    }
    if !line.ends_with(b"\n") {
        // The server went away mid-answer (killed, restarted): not a malformed answer.
        let eof = std::io::ErrorKind::UnexpectedEof;
        return Err(HttpError::Io(std::io::Error::new(
            eof,
            "connection closed mid-answer",
        )));
    }
    *budget -= line.len();
    String::from_utf8(line)
        .map(|s| s.trim_end().to_string())
        .map_err(|_| HttpError::Malformed("response head is not UTF-8".into()))
}

async fn read_head<R: AsyncBufRead + Unpin>(r: &mut R) -> Result<(u16, Framing), HttpError> {
    let mut budget = MAX_HEAD_BYTES;
    let status_line = read_line(r, &mut budget).await?;
    let status = status_line
        .strip_prefix("HTTP/1.")
        .and_then(|s| s.get(2..5))
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| HttpError::Malformed(format!("bad status line {status_line:?}")))?;
    let mut framing = Framing::Close;
    loop {
        let line = read_line(r, &mut budget).await?;
        if line.is_empty() {
            return Ok((status, framing));
        }
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        let (name, value) = (name.trim().to_ascii_lowercase(), value.trim());
        if name == "transfer-encoding" && value.eq_ignore_ascii_case("chunked") {
            framing = Framing::Chunked;
        } else if name == "content-length" && !matches!(framing, Framing::Chunked) {
            let n = value
                .parse()
                .map_err(|_| HttpError::Malformed(format!("bad Content-Length {value:?}")))?;
            framing = Framing::Length(n);
        }
    }
}

async fn read_chunked<R: AsyncBufRead + Unpin>(
    r: &mut R,
    max: usize,
) -> Result<Vec<u8>, HttpError> {
    let mut body = Vec::new();
    loop {
        let mut budget = MAX_HEAD_BYTES;
        let line = read_line(r, &mut budget).await?;
        let size_text = line.split(';').next().unwrap_or("").trim();
        let size = usize::from_str_radix(size_text, 16)
            .map_err(|_| HttpError::Malformed(format!("bad chunk size {line:?}")))?;
        if size == 0 {
            // Trailers, up to the empty line.
            while !read_line(r, &mut budget).await?.is_empty() {}
            return Ok(body);
        }
        if body.len() + size > max {
            return Err(too_large(body.len() + size, max));
        }
        let start = body.len();
        body.resize(start + size, 0);
        r.read_exact(&mut body[start..])
            .await
            .map_err(HttpError::Io)?;
        read_line(r, &mut budget).await?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn reads_chunked_and_bounds_it() {
        let raw = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;x=y\r\nde\r\n0\r\n\r\n";
        let mut r = &raw[..];
        let (status, framing) = read_head(&mut r).await.unwrap();
        assert_eq!(status, 200);
        assert!(matches!(framing, Framing::Chunked));
        let mut again = r;
        assert_eq!(read_chunked(&mut r, 100).await.unwrap(), b"abcde");
        assert!(matches!(
            read_chunked(&mut again, 4).await,
            Err(HttpError::Malformed(_))
        ));
    }

    #[tokio::test]
    async fn a_cut_answer_is_an_io_error() {
        let mut r = &b"HTTP/1.1 200 OK\r\nContent-Le"[..];
        assert!(matches!(read_head(&mut r).await, Err(HttpError::Io(_))));
    }

    #[tokio::test]
    async fn refuses_an_endless_head() {
        let raw = vec![b'a'; MAX_HEAD_BYTES + 10];
        let mut r = &raw[..];
        assert!(matches!(
            read_head(&mut r).await,
            Err(HttpError::Malformed(_))
        ));
    }
}
