//! A streamed HTTP/1.1 answer read as newline-delimited messages: how the gateway sends a gRPC
//! stream (one JSON object per line, usually one per chunk, but a line may span chunks).
//! Each line is bounded in bytes; the end of the body is `None`.

use super::http::{read_line, too_large, Framing, HttpError};
use tokio::io::{AsyncReadExt, BufReader};
use tokio::net::TcpStream;

pub struct LineStream {
    r: BufReader<TcpStream>,
    framing: Framing,
    /// Bytes left in the current chunk (chunked) or in the body (Length).
    left: usize,
    done: bool,
    buf: Vec<u8>,
    max_line_bytes: usize,
}

impl LineStream {
    pub fn new(r: BufReader<TcpStream>, framing: Framing, max_line_bytes: usize) -> LineStream {
        let left = match framing {
            Framing::Length(n) => n,
            _ => 0,
        };
        LineStream {
            r,
            framing,
            left,
            done: false,
            buf: Vec::new(),
            max_line_bytes,
        }
    }

    /// The next line without its newline, or None at the end of the body.
    pub async fn next_line(&mut self) -> Result<Option<Vec<u8>>, HttpError> {
        loop {
            if let Some(at) = self.buf.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = self.buf.drain(..=at).take(at).collect();
                return Ok(Some(line));
            }
            if self.buf.len() > self.max_line_bytes {
                return Err(too_large(self.buf.len(), self.max_line_bytes));
            }
            if self.done {
                return Ok((!self.buf.is_empty()).then(|| std::mem::take(&mut self.buf)));
            }
            self.fill().await?;
        }
    }

    /// Reads more of the body into `buf` (or marks its end).
    async fn fill(&mut self) -> Result<(), HttpError> {
        let mut budget = 4096;
        if matches!(self.framing, Framing::Chunked) && self.left == 0 {
            let line = read_line(&mut self.r, &mut budget).await?;
            let size = line.split(';').next().unwrap_or("").trim();
            self.left = usize::from_str_radix(size, 16)
                .map_err(|_| HttpError::Malformed(format!("bad chunk size {line:?}")))?;
            if self.left == 0 {
                self.done = true;
            }
            return Ok(());
        }
        if matches!(self.framing, Framing::Length(_)) && self.left == 0 {
            self.done = true;
            return Ok(());
        }
        let want = match self.framing {
            Framing::Close => 8192,
            _ => self.left.min(8192),
        };
        let start = self.buf.len();
        self.buf.resize(start + want, 0);
        let n = self
            .r
            .read(&mut self.buf[start..])
            .await
            .map_err(HttpError::Io)?;
        self.buf.truncate(start + n);
        if n == 0 {
            if matches!(self.framing, Framing::Close) {
                self.done = true;
                return Ok(());
            }
            let eof = std::io::ErrorKind::UnexpectedEof;
            return Err(HttpError::Io(std::io::Error::new(
                eof,
                "connection closed mid-stream",
            )));
        }
        if !matches!(self.framing, Framing::Close) {
            self.left -= n;
            if self.left == 0 && matches!(self.framing, Framing::Chunked) {
                read_line(&mut self.r, &mut budget).await?; // the chunk's CRLF
            }
        }
        Ok(())
    }
}
