//! A minimal CQL native protocol v4 client for `ringgate admin`: STARTUP, PasswordAuthenticator
//! login, QUERY with one page of up to `PAGE_ROWS` rows, RESULT decoding into JSON values.
//! Blocking (std sockets, rustls for TLS): the CLI runs one statement at a time.

use serde_json::Value;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

const VERSION: u8 = 0x04;
const RESPONSE: u8 = 0x80;
/// Largest response body accepted.
const MAX_BODY_BYTES: usize = 256 << 20;
/// Rows asked for per statement (admin views are small; this bounds them).
const PAGE_ROWS: i32 = 100_000;

mod op {
    pub const ERROR: u8 = 0x00;
    pub const STARTUP: u8 = 0x01;
    pub const READY: u8 = 0x02;
    pub const AUTHENTICATE: u8 = 0x03;
    pub const QUERY: u8 = 0x07;
    pub const RESULT: u8 = 0x08;
    pub const AUTH_RESPONSE: u8 = 0x0F;
    pub const AUTH_SUCCESS: u8 = 0x10;
}

/// How to reach and log in to the server.
pub struct ConnectOptions {
    pub host: String,
    pub username: Option<String>,
    pub password: Option<String>,
    /// TLS, trusting the certificates in this PEM file.
    pub tls_ca: Option<std::path::PathBuf>,
    /// Longest wait for one response (maintenance commands can take long).
    pub timeout: Duration,
}

trait Stream: Read + Write {}
impl<T: Read + Write> Stream for T {}

pub struct Client {
    stream: Box<dyn Stream>,
}

/// A statement's result: column names and rows of JSON values (empty for a void result).
#[derive(Debug, Default)]
pub struct Table {
    pub columns: Vec<String>,
    pub rows: Vec<Vec<Value>>,
}

impl Client {
    pub fn connect(o: &ConnectOptions) -> Result<Client, String> {
        let tcp = TcpStream::connect(&o.host)
            .map_err(|e| format!("cannot connect to {}: {e}", o.host))?;
        tcp.set_read_timeout(Some(o.timeout))
            .map_err(|e| e.to_string())?;
        let _ = tcp.set_nodelay(true);
        let stream: Box<dyn Stream> = match &o.tls_ca {
            Some(ca) => Box::new(tls(tcp, &o.host, ca)?),
            None => Box::new(tcp),
        };
        let mut c = Client { stream };
        let mut body = Vec::new();
        put_string_map(&mut body, &[("CQL_VERSION", "3.0.0")]);
        let (opcode, resp) = c.call(op::STARTUP, &body)?;
        match opcode {
            op::READY => Ok(c),
            op::AUTHENTICATE => {
                let (Some(user), Some(pass)) = (&o.username, &o.password) else {
                    return Err(
                        "the server requires a login: give --username and --password".into(),
                    );
                };
                let mut token = vec![0u8];
                token.extend_from_slice(user.as_bytes());
                token.push(0);
                token.extend_from_slice(pass.as_bytes());
                let mut body = Vec::new();
                body.extend_from_slice(&(token.len() as i32).to_be_bytes());
                body.extend_from_slice(&token);
                match c.call(op::AUTH_RESPONSE, &body)? {
                    (op::AUTH_SUCCESS, _) => Ok(c),
                    (op::ERROR, b) => Err(error_text(&b)),
                    (other, _) => Err(format!("unexpected response {other:#04x} to the login")),
                }
            }
            op::ERROR => Err(error_text(&resp)),
            other => Err(format!("unexpected response {other:#04x} to STARTUP")),
        }
    }

    /// Runs one statement (consistency ONE) and returns its first page.
    pub fn query(&mut self, cql: &str) -> Result<Table, String> {
        let mut body = Vec::new();
        body.extend_from_slice(&(cql.len() as i32).to_be_bytes());
        body.extend_from_slice(cql.as_bytes());
        body.extend_from_slice(&1u16.to_be_bytes()); // ONE
        body.push(0x04); // page size follows
        body.extend_from_slice(&PAGE_ROWS.to_be_bytes());
        match self.call(op::QUERY, &body)? {
            (op::RESULT, b) => decode_result(&b),
            (op::ERROR, b) => Err(error_text(&b)),
            (other, _) => Err(format!("unexpected response {other:#04x} to QUERY")),
        }
    }

    fn call(&mut self, opcode: u8, body: &[u8]) -> Result<(u8, Vec<u8>), String> {
        let mut frame = vec![VERSION, 0, 0, 0, opcode];
        frame.extend_from_slice(&(body.len() as u32).to_be_bytes());
        frame.extend_from_slice(body);
        let io = |e: std::io::Error| format!("connection to the server failed: {e}");
        self.stream.write_all(&frame).map_err(io)?;
        self.stream.flush().map_err(io)?;
        let mut head = [0u8; 9];
        self.stream.read_exact(&mut head).map_err(io)?;
        if head[0] != (VERSION | RESPONSE) {
            return Err(format!("unexpected protocol version byte {:#04x}", head[0]));
        }
        if head[1] & 0x01 != 0 {
            return Err("the server compressed a response it was not asked to".into());
        }
        let len = u32::from_be_bytes([head[5], head[6], head[7], head[8]]) as usize;
        if len > MAX_BODY_BYTES {
            return Err(format!("response of {len} bytes is too large"));
        }
        let mut body = vec![0u8; len];
        self.stream.read_exact(&mut body).map_err(io)?;
        // Flags: a tracing id, warnings and a custom payload precede the body proper.
        let mut r = Reader::new(&body);
        if head[1] & 0x02 != 0 {
            r.take(16)?;
        }
        if head[1] & 0x08 != 0 {
            for _ in 0..r.short()? {
                r.string()?;
            }
        }
        if head[1] & 0x04 != 0 {
            for _ in 0..r.short()? {
                r.string()?;
                r.bytes()?;
            }
        }
        Ok((head[4], r.rest().to_vec()))
    }
}

fn tls(tcp: TcpStream, host: &str, ca: &std::path::Path) -> Result<impl Read + Write, String> {
    use tokio_rustls::rustls;
    let pem = std::fs::read(ca).map_err(|e| format!("cannot read {}: {e}", ca.display()))?;
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls_pemfile::certs(&mut &pem[..]) {
        let cert = cert.map_err(|e| format!("bad certificate in {}: {e}", ca.display()))?;
        roots
            .add(cert)
            .map_err(|e| format!("bad certificate in {}: {e}", ca.display()))?;
    }
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let name = host
        .rsplit_once(':')
        .map_or(host, |(h, _)| h)
        .trim_matches(['[', ']']);
    let server_name = rustls::pki_types::ServerName::try_from(name.to_string())
        .map_err(|e| format!("bad host name {name}: {e}"))?;
    let conn = rustls::ClientConnection::new(std::sync::Arc::new(config), server_name)
        .map_err(|e| e.to_string())?;
    Ok(rustls::StreamOwned::new(conn, tcp))
}

fn put_string_map(out: &mut Vec<u8>, pairs: &[(&str, &str)]) {
    out.extend_from_slice(&(pairs.len() as u16).to_be_bytes());
    for (k, v) in pairs {
        for s in [k, v] {
            out.extend_from_slice(&(s.len() as u16).to_be_bytes());
            out.extend_from_slice(s.as_bytes());
        }
    }
}

fn error_text(body: &[u8]) -> String {
    let mut r = Reader::new(body);
    match (r.int(), r.string()) {
        (Ok(code), Ok(msg)) => format!("server error {code:#06x}: {msg}"),
        _ => "malformed error response".into(),
    }
}

/// Reads the protocol's notations from a body; every read is bounds-checked.
struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    fn new(buf: &'a [u8]) -> Reader<'a> {
        Reader { buf }
    }
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        if n > self.buf.len() {
            return Err("truncated response".into());
        }
        let (head, rest) = self.buf.split_at(n);
        self.buf = rest;
        Ok(head)
    }
    fn short(&mut self) -> Result<u16, String> {
        Ok(u16::from_be_bytes(
            self.take(2)?.try_into().expect("2 bytes"),
        ))
    }
    fn int(&mut self) -> Result<i32, String> {
        Ok(i32::from_be_bytes(
            self.take(4)?.try_into().expect("4 bytes"),
        ))
    }
    fn string(&mut self) -> Result<String, String> {
        let n = self.short()? as usize;
        Ok(String::from_utf8_lossy(self.take(n)?).into_owned())
    }
    fn bytes(&mut self) -> Result<Option<&'a [u8]>, String> {
        let n = self.int()?;
        if n < 0 {
            return Ok(None);
        }
        self.take(n as usize).map(Some)
    }
    fn rest(&self) -> &'a [u8] {
        self.buf
    }
}

/// A column type: its id (collections and other nested types are shown as hex).
fn type_option(r: &mut Reader, depth: usize) -> Result<u16, String> {
    if depth > 16 {
        return Err("type nested too deeply".into());
    }
    let id = r.short()?;
    match id {
        0x0000 => {
            r.string()?;
        }
        0x0020 | 0x0022 => {
            type_option(r, depth + 1)?;
        }
        0x0021 => {
            type_option(r, depth + 1)?;
            type_option(r, depth + 1)?;
        }
        0x0030 => {
            r.string()?;
            r.string()?;
            for _ in 0..r.short()? {
                r.string()?;
                type_option(r, depth + 1)?;
            }
        }
        0x0031 => {
            for _ in 0..r.short()? {
                type_option(r, depth + 1)?;
            }
        }
        _ => {}
    }
    Ok(id)
}

fn decode_result(body: &[u8]) -> Result<Table, String> {
    let mut r = Reader::new(body);
    if r.int()? != 2 {
        return Ok(Table::default()); // void, set keyspace, schema change
    }
    let flags = r.int()?;
    let ncols = r.int()?.max(0) as usize;
    if flags & 0x02 != 0 {
        r.bytes()?;
    }
    if flags & 0x04 != 0 {
        return Err("the server sent rows without metadata".into());
    }
    if flags & 0x01 != 0 {
        r.string()?;
        r.string()?;
    }
    let mut columns = Vec::new();
    let mut types = Vec::new();
    for _ in 0..ncols {
        if flags & 0x01 == 0 {
            r.string()?;
            r.string()?;
        }
        columns.push(r.string()?);
        types.push(type_option(&mut r, 0)?);
    }
    let nrows = r.int()?.max(0) as usize;
    let mut rows = Vec::with_capacity(nrows.min(PAGE_ROWS as usize));
    for _ in 0..nrows {
        let mut row = Vec::with_capacity(ncols);
        for ty in &types {
            row.push(r.bytes()?.map_or(Value::Null, |b| value(*ty, b)));
        }
        rows.push(row);
    }
    Ok(Table { columns, rows })
}

/// A cell as JSON: text, numbers and booleans as such, uuids and addresses as text, other
/// types as hex.
fn value(ty: u16, b: &[u8]) -> Value {
    let int = |b: &[u8]| -> Option<i64> {
        match b.len() {
            1 => Some(b[0] as i8 as i64),
            2 => Some(i16::from_be_bytes(b.try_into().ok()?) as i64),
            4 => Some(i32::from_be_bytes(b.try_into().ok()?) as i64),
            8 => Some(i64::from_be_bytes(b.try_into().ok()?)),
            _ => None,
        }
    };
    let v = match ty {
        0x0001 | 0x000D => Some(Value::from(String::from_utf8_lossy(b).into_owned())),
        0x0002 | 0x0005 | 0x0009 | 0x000B | 0x0013 | 0x0014 => int(b).map(Value::from),
        0x0004 => b.first().map(|x| Value::from(*x != 0)),
        0x0007 => b
            .try_into()
            .ok()
            .map(|a| Value::from(f64::from_be_bytes(a))),
        0x0008 => b
            .try_into()
            .ok()
            .map(|a| Value::from(f32::from_be_bytes(a) as f64)),
        0x000C | 0x000F => uuid::Uuid::from_slice(b)
            .ok()
            .map(|u| Value::from(u.to_string())),
        0x0010 => inet(b).map(|a| Value::from(a.to_string())),
        _ => None,
    };
    v.unwrap_or_else(|| Value::from(b.iter().map(|x| format!("{x:02x}")).collect::<String>()))
}

fn inet(b: &[u8]) -> Option<std::net::IpAddr> {
    if let Ok(a) = <[u8; 4]>::try_from(b) {
        return Some(a.into());
    }
    <[u8; 16]>::try_from(b).ok().map(Into::into)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_decode_by_type() {
        assert_eq!(value(0x000D, b"abc"), Value::from("abc"));
        assert_eq!(value(0x0002, &7i64.to_be_bytes()), Value::from(7));
        assert_eq!(value(0x0009, &(-2i32).to_be_bytes()), Value::from(-2));
        assert_eq!(value(0x0007, &1.5f64.to_be_bytes()), Value::from(1.5));
        assert_eq!(value(0x0004, &[1]), Value::from(true));
        assert_eq!(value(0x0003, &[0xab]), Value::from("ab"));
        // A wrong length is shown as hex, never a panic.
        assert_eq!(value(0x0002, &[1, 2, 3]), Value::from("010203"));
    }

    #[test]
    fn truncated_results_are_errors() {
        assert!(decode_result(&[0, 0, 0, 2, 0, 0]).is_err());
        assert!(decode_result(&[0, 0, 0, 1]).unwrap().rows.is_empty());
    }
}
