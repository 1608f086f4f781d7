//! A minimal CQL native protocol v4 client for `ringgate admin`: STARTUP, PasswordAuthenticator
//! login, QUERY with one page of up to `PAGE_ROWS` rows, RESULT decoding into JSON values.
//! Blocking (std sockets, rustls for TLS): the CLI runs one statement at a time.

use crate::protocol::frame::{flags, FrameHeader, Opcode, HEADER_LEN, RESPONSE_BIT};
use crate::protocol::types::{
    read_bytes, read_bytes_map, read_int, read_short, read_string, read_string_list, read_uuid,
    write_bytes, write_consistency, write_long_string, write_string_map, DecodeResult,
};
use bytes::{Bytes, BytesMut};
use serde_json::Value;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

const VERSION: u8 = 0x04;
/// Largest response body accepted.
const MAX_BODY_BYTES: usize = 256 << 20;
/// Rows asked for per statement (admin views are small; this bounds them).
const PAGE_ROWS: i32 = 100_000;

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
        let mut body = BytesMut::new();
        write_string_map(&mut body, &[("CQL_VERSION", "3.0.0")]).map_err(|e| e.to_string())?;
        let (opcode, resp) = c.call(Opcode::Startup, &body)?;
        match opcode {
            Opcode::Ready => Ok(c),
            Opcode::Authenticate => {
                let (Some(user), Some(pass)) = (&o.username, &o.password) else {
                    return Err(
                        "the server requires a login: give --username and --password".into(),
                    );
                };
                let mut token = vec![0u8];
                token.extend_from_slice(user.as_bytes());
                token.push(0);
                token.extend_from_slice(pass.as_bytes());
                let mut body = BytesMut::new();
                write_bytes(&mut body, Some(&token)).map_err(|e| e.to_string())?;
                match c.call(Opcode::AuthResponse, &body)? {
                    (Opcode::AuthSuccess, _) => Ok(c),
                    (Opcode::Error, b) => Err(error_text(b)),
                    (other, _) => Err(format!(
                        "unexpected response {:#04x} to the login",
                        other.as_u8()
                    )),
                }
            }
            Opcode::Error => Err(error_text(resp)),
            other => Err(format!(
                "unexpected response {:#04x} to STARTUP",
                other.as_u8()
            )),
        }
    }

    /// Runs one statement (consistency ONE) and returns its first page.
    pub fn query(&mut self, cql: &str) -> Result<Table, String> {
        let mut body = BytesMut::new();
        write_long_string(&mut body, cql).map_err(|e| e.to_string())?;
        write_consistency(&mut body, 0x0001); // ONE
        body.extend_from_slice(&[0x04]); // page size follows
        body.extend_from_slice(&PAGE_ROWS.to_be_bytes());
        match self.call(Opcode::Query, &body)? {
            (Opcode::Result, b) => decode_result(b),
            (Opcode::Error, b) => Err(error_text(b)),
            (other, _) => Err(format!(
                "unexpected response {:#04x} to QUERY",
                other.as_u8()
            )),
        }
    }

    fn call(&mut self, opcode: Opcode, body: &[u8]) -> Result<(Opcode, Bytes), String> {
        let mut frame = BytesMut::with_capacity(HEADER_LEN + body.len());
        let header = FrameHeader {
            version: VERSION,
            is_response: false,
            flags: 0,
            stream: 0,
            opcode,
            body_len: body.len() as u32,
        };
        header.encode(&mut frame);
        frame.extend_from_slice(body);
        let io = |e: std::io::Error| format!("connection to the server failed: {e}");
        self.stream.write_all(&frame).map_err(io)?;
        self.stream.flush().map_err(io)?;
        let mut head = [0u8; HEADER_LEN];
        self.stream.read_exact(&mut head).map_err(io)?;
        if head[0] != (VERSION | RESPONSE_BIT) {
            return Err(format!("unexpected protocol version byte {:#04x}", head[0]));
        }
        if head[1] & flags::COMPRESSION != 0 {
            return Err("the server compressed a response it was not asked to".into());
        }
        let len = u32::from_be_bytes([head[5], head[6], head[7], head[8]]) as usize;
        if len > MAX_BODY_BYTES {
            return Err(format!("response of {len} bytes is too large"));
        }
        let mut body = vec![0u8; len];
        self.stream.read_exact(&mut body).map_err(io)?;
        // Flags: a tracing id, warnings and a custom payload precede the body proper.
        let mut r = Bytes::from(body);
        let skip = |r: &mut Bytes| -> DecodeResult<()> {
            if head[1] & flags::TRACING != 0 {
                read_uuid(r)?;
            }
            if head[1] & flags::WARNING != 0 {
                read_string_list(r)?;
            }
            if head[1] & flags::CUSTOM_PAYLOAD != 0 {
                read_bytes_map(r)?;
            }
            Ok(())
        };
        d(skip(&mut r))?;
        Ok((Opcode::from_u8(head[4]), r))
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

fn error_text(mut r: Bytes) -> String {
    match (read_int(&mut r), read_string(&mut r)) {
        (Ok(code), Ok(msg)) => format!("server error {code:#06x}: {msg}"),
        _ => "malformed error response".into(),
    }
}

/// A column type: its id (collections and other nested types are shown as hex).
fn type_option(r: &mut Bytes, depth: usize) -> Result<u16, String> {
    if depth > 16 {
        return Err("type nested too deeply".into());
    }
    let id = d(read_short(r))?;
    match id {
        0x0000 => {
            d(read_string(r))?;
        }
        0x0020 | 0x0022 => {
            type_option(r, depth + 1)?;
        }
        0x0021 => {
            type_option(r, depth + 1)?;
            type_option(r, depth + 1)?;
        }
        0x0030 => {
            d(read_string(r))?;
            d(read_string(r))?;
            for _ in 0..d(read_short(r))? {
                d(read_string(r))?;
                type_option(r, depth + 1)?;
            }
        }
        0x0031 => {
            for _ in 0..d(read_short(r))? {
                type_option(r, depth + 1)?;
            }
        }
        _ => {}
    }
    Ok(id)
}

/// A protocol decoding error as this client's error text.
fn d<T>(r: DecodeResult<T>) -> Result<T, String> {
    r.map_err(|e| format!("malformed response: {e}"))
}

fn decode_result(mut r: Bytes) -> Result<Table, String> {
    if d(read_int(&mut r))? != 2 {
        return Ok(Table::default()); // void, set keyspace, schema change
    }
    let flags = d(read_int(&mut r))?;
    let ncols = d(read_int(&mut r))?.max(0) as usize;
    if flags & 0x02 != 0 {
        d(read_bytes(&mut r))?;
    }
    if flags & 0x04 != 0 {
        return Err("the server sent rows without metadata".into());
    }
    if flags & 0x01 != 0 {
        d(read_string(&mut r))?;
        d(read_string(&mut r))?;
    }
    let mut columns = Vec::new();
    let mut types = Vec::new();
    for _ in 0..ncols {
        if flags & 0x01 == 0 {
            d(read_string(&mut r))?;
            d(read_string(&mut r))?;
        }
        columns.push(d(read_string(&mut r))?);
        types.push(type_option(&mut r, 0)?);
    }
    let nrows = d(read_int(&mut r))?.max(0) as usize;
    let mut rows = Vec::with_capacity(nrows.min(PAGE_ROWS as usize));
    for _ in 0..nrows {
        let mut row = Vec::with_capacity(ncols);
        for ty in &types {
            row.push(d(read_bytes(&mut r))?.map_or(Value::Null, |b| value(*ty, &b)));
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
        assert!(decode_result(Bytes::from_static(&[0, 0, 0, 2, 0, 0])).is_err());
        assert!(decode_result(Bytes::from_static(&[0, 0, 0, 1]))
            .unwrap()
            .rows
            .is_empty());
    }
}
