//! Primitive notations of the native protocol (section 3 of the v4/v5 specs): readers and writers.
//!
//! Readers take a `&mut Bytes` cursor and consume what they read. Every read is bounds-checked
//! and returns a [`DecodeError`] instead of panicking. Byte payloads (`[bytes]`, `[short bytes]`,
//! `[value]`) are returned as `Bytes` slices of the input (no copy); strings are validated as
//! UTF-8 and returned as owned `String`s. Element counts of collections are checked against the
//! bytes that remain before anything is allocated, so a hostile count cannot allocate.
//!
//! Writers append to a `BytesMut`. Those whose length prefix could overflow (strings, byte
//! strings, lists) return an [`EncodeError`] instead of writing a wrong prefix.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use bytes::{Buf, BufMut, Bytes, BytesMut};

/// An error while decoding a protocol structure. Its `Display` text is meant to be sent back to the
/// client as the message of a Protocol error (0x000A).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// The input ended before the structure did.
    #[error(
        "Truncated message body: reading {what} needs {needed} bytes but only {remaining} remain"
    )]
    Truncated {
        /// The notation being read, e.g. `"[string]"`.
        what: &'static str,
        /// How many bytes it needed.
        needed: usize,
        /// How many bytes were left.
        remaining: usize,
    },
    /// A `[string]` or `[long string]` that is not valid UTF-8.
    #[error("Invalid UTF-8 in {what}")]
    InvalidUtf8 {
        /// The notation being read.
        what: &'static str,
    },
    /// A length prefix that is negative where that is not allowed (e.g. `[value]` below -2).
    #[error("Invalid length {len} for {what}")]
    InvalidLength {
        /// The notation being read.
        what: &'static str,
        /// The length read.
        len: i64,
    },
    /// A collection count larger than the remaining bytes could possibly hold.
    #[error("Invalid {what}: declares {count} elements but only {remaining} bytes remain")]
    TooManyElements {
        /// The notation being read.
        what: &'static str,
        /// The declared count.
        count: usize,
        /// The bytes left in the body.
        remaining: usize,
    },
    /// An `[inet]`/`[inetaddr]` whose address size is neither 4 nor 16.
    #[error("Invalid IP address length {0} (must be 4 or 16)")]
    InvalidInetLength(u8),
    /// A `[consistency]` code outside 0x0000..=0x000A.
    #[error("Unknown code {0} for a consistency level")]
    UnknownConsistency(u16),
}

/// An error while encoding a protocol structure: a value does not fit its length prefix, or a
/// structure is inconsistent with the protocol version.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EncodeError {
    /// A string, byte string or collection longer than its length prefix allows.
    #[error("{what} too long to encode: {len} > {max}")]
    TooLong {
        /// The notation being written, e.g. `"[string]"`.
        what: &'static str,
        /// Its actual length or element count.
        len: usize,
        /// The largest the prefix allows.
        max: usize,
    },
    /// A structure that cannot be encoded as given (e.g. a v5 PREPARED without metadata id).
    #[error("cannot encode: {0}")]
    Invalid(&'static str),
    /// The compressor failed.
    #[error("compression failed: {0}")]
    Compression(String),
}

/// Result of the readers in this module.
pub type DecodeResult<T> = Result<T, DecodeError>;

/// A bound value as sent in QUERY, EXECUTE and BATCH (`[value]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    /// Length -1: `null`.
    Null,
    /// Length -2: `not set`, leaves the existing value unchanged.
    Unset,
    /// A serialized value (a slice of the request body).
    Set(Bytes),
}

/// `[consistency]` codes.
pub mod consistency {
    /// ANY
    pub const ANY: u16 = 0x0000;
    /// ONE
    pub const ONE: u16 = 0x0001;
    /// TWO
    pub const TWO: u16 = 0x0002;
    /// THREE
    pub const THREE: u16 = 0x0003;
    /// QUORUM
    pub const QUORUM: u16 = 0x0004;
    /// ALL
    pub const ALL: u16 = 0x0005;
    /// LOCAL_QUORUM
    pub const LOCAL_QUORUM: u16 = 0x0006;
    /// EACH_QUORUM
    pub const EACH_QUORUM: u16 = 0x0007;
    /// SERIAL
    pub const SERIAL: u16 = 0x0008;
    /// LOCAL_SERIAL
    pub const LOCAL_SERIAL: u16 = 0x0009;
    /// LOCAL_ONE
    pub const LOCAL_ONE: u16 = 0x000A;

    /// The upper-case name Cassandra uses for a consistency code (`"LOCAL_QUORUM"`), or `None`
    /// for an unknown code.
    pub fn name(code: u16) -> Option<&'static str> {
        Some(match code {
            ANY => "ANY",
            ONE => "ONE",
            TWO => "TWO",
            THREE => "THREE",
            QUORUM => "QUORUM",
            ALL => "ALL",
            LOCAL_QUORUM => "LOCAL_QUORUM",
            EACH_QUORUM => "EACH_QUORUM",
            SERIAL => "SERIAL",
            LOCAL_SERIAL => "LOCAL_SERIAL",
            LOCAL_ONE => "LOCAL_ONE",
            _ => return None,
        })
    }
}

// ---------------------------------------------------------------------------------------------
// Readers
// ---------------------------------------------------------------------------------------------

#[inline]
fn need(buf: &Bytes, n: usize, what: &'static str) -> DecodeResult<()> {
    if buf.remaining() < n {
        Err(DecodeError::Truncated {
            what,
            needed: n,
            remaining: buf.remaining(),
        })
    } else {
        Ok(())
    }
}

/// Checks that `count` elements of at least `min_size` bytes each can fit in what remains.
#[inline]
fn check_count(buf: &Bytes, count: usize, min_size: usize, what: &'static str) -> DecodeResult<()> {
    if count.saturating_mul(min_size) > buf.remaining() {
        Err(DecodeError::TooManyElements {
            what,
            count,
            remaining: buf.remaining(),
        })
    } else {
        Ok(())
    }
}

/// Reads a `[byte]`.
pub fn read_byte(buf: &mut Bytes) -> DecodeResult<u8> {
    need(buf, 1, "[byte]")?;
    Ok(buf.get_u8())
}

/// Reads a `[short]` (unsigned 16 bits).
pub fn read_short(buf: &mut Bytes) -> DecodeResult<u16> {
    need(buf, 2, "[short]")?;
    Ok(buf.get_u16())
}

/// Reads an `[int]` (signed 32 bits).
pub fn read_int(buf: &mut Bytes) -> DecodeResult<i32> {
    need(buf, 4, "[int]")?;
    Ok(buf.get_i32())
}

/// Reads a `[long]` (signed 64 bits).
pub fn read_long(buf: &mut Bytes) -> DecodeResult<i64> {
    need(buf, 8, "[long]")?;
    Ok(buf.get_i64())
}

/// Reads a `[uuid]` (16 raw bytes).
pub fn read_uuid(buf: &mut Bytes) -> DecodeResult<[u8; 16]> {
    need(buf, 16, "[uuid]")?;
    let mut out = [0u8; 16];
    buf.copy_to_slice(&mut out);
    Ok(out)
}

fn read_utf8(buf: &mut Bytes, len: usize, what: &'static str) -> DecodeResult<String> {
    need(buf, len, what)?;
    let raw = buf.split_to(len);
    match std::str::from_utf8(&raw) {
        Ok(s) => Ok(s.to_owned()),
        Err(_) => Err(DecodeError::InvalidUtf8 { what }),
    }
}

/// Reads a `[string]`: a `[short]` length and that many UTF-8 bytes.
pub fn read_string(buf: &mut Bytes) -> DecodeResult<String> {
    need(buf, 2, "[string]")?;
    let len = buf.get_u16() as usize;
    read_utf8(buf, len, "[string]")
}

/// Reads a `[long string]`: an `[int]` length and that many UTF-8 bytes.
pub fn read_long_string(buf: &mut Bytes) -> DecodeResult<String> {
    need(buf, 4, "[long string]")?;
    let len = buf.get_i32();
    if len < 0 {
        return Err(DecodeError::InvalidLength {
            what: "[long string]",
            len: len.into(),
        });
    }
    read_utf8(buf, len as usize, "[long string]")
}

/// Reads a `[string list]`.
pub fn read_string_list(buf: &mut Bytes) -> DecodeResult<Vec<String>> {
    let n = read_short(buf)? as usize;
    check_count(buf, n, 2, "[string list]")?;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        out.push(read_string(buf)?);
    }
    Ok(out)
}

/// Reads `[bytes]`: `None` for a negative length (`null`), else a slice of the input.
pub fn read_bytes(buf: &mut Bytes) -> DecodeResult<Option<Bytes>> {
    let len = read_int(buf)?;
    if len < 0 {
        return Ok(None);
    }
    need(buf, len as usize, "[bytes]")?;
    Ok(Some(buf.split_to(len as usize)))
}

/// Reads `[short bytes]` as a slice of the input.
pub fn read_short_bytes(buf: &mut Bytes) -> DecodeResult<Bytes> {
    let len = read_short(buf)? as usize;
    need(buf, len, "[short bytes]")?;
    Ok(buf.split_to(len))
}

/// Reads a `[value]`: -1 is `Null`, -2 is `Unset`, other negative lengths are errors.
pub fn read_value(buf: &mut Bytes) -> DecodeResult<Value> {
    let len = read_int(buf)?;
    match len {
        -1 => Ok(Value::Null),
        -2 => Ok(Value::Unset),
        n if n < 0 => Err(DecodeError::InvalidLength {
            what: "[value]",
            len: n.into(),
        }),
        n => {
            need(buf, n as usize, "[value]")?;
            Ok(Value::Set(buf.split_to(n as usize)))
        }
    }
}

/// Reads `n` positional `[value]`s (the count having been read by the caller).
pub fn read_values(buf: &mut Bytes, n: usize) -> DecodeResult<Vec<Value>> {
    check_count(buf, n, 4, "[value] list")?;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        out.push(read_value(buf)?);
    }
    Ok(out)
}

/// Reads an `[inetaddr]`: a one-byte size (4 or 16) and the address bytes.
pub fn read_inetaddr(buf: &mut Bytes) -> DecodeResult<IpAddr> {
    let n = read_byte(buf)?;
    match n {
        4 => {
            need(buf, 4, "[inetaddr]")?;
            let mut a = [0u8; 4];
            buf.copy_to_slice(&mut a);
            Ok(IpAddr::V4(Ipv4Addr::from(a)))
        }
        16 => {
            need(buf, 16, "[inetaddr]")?;
            let mut a = [0u8; 16];
            buf.copy_to_slice(&mut a);
            Ok(IpAddr::V6(Ipv6Addr::from(a)))
        }
        other => Err(DecodeError::InvalidInetLength(other)),
    }
}

/// Reads an `[inet]`: an `[inetaddr]` followed by an `[int]` port.
pub fn read_inet(buf: &mut Bytes) -> DecodeResult<SocketAddr> {
    let ip = read_inetaddr(buf)?;
    let port = read_int(buf)?;
    let port = u16::try_from(port).map_err(|_| DecodeError::InvalidLength {
        what: "[inet] port",
        len: port.into(),
    })?;
    Ok(SocketAddr::new(ip, port))
}

/// Reads a `[consistency]` and checks that it is a known level.
pub fn read_consistency(buf: &mut Bytes) -> DecodeResult<u16> {
    let code = read_short(buf)?;
    if consistency::name(code).is_none() {
        return Err(DecodeError::UnknownConsistency(code));
    }
    Ok(code)
}

/// Reads a `[string map]` as key/value pairs in wire order.
pub fn read_string_map(buf: &mut Bytes) -> DecodeResult<Vec<(String, String)>> {
    let n = read_short(buf)? as usize;
    check_count(buf, n, 4, "[string map]")?;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let k = read_string(buf)?;
        let v = read_string(buf)?;
        out.push((k, v));
    }
    Ok(out)
}

/// Reads a `[string multimap]` as key/values pairs in wire order.
pub fn read_string_multimap(buf: &mut Bytes) -> DecodeResult<Vec<(String, Vec<String>)>> {
    let n = read_short(buf)? as usize;
    check_count(buf, n, 4, "[string multimap]")?;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let k = read_string(buf)?;
        let v = read_string_list(buf)?;
        out.push((k, v));
    }
    Ok(out)
}

/// Reads a `[bytes map]` as key/value pairs in wire order. A `null` value (negative length)
/// is returned as empty `Bytes`.
pub fn read_bytes_map(buf: &mut Bytes) -> DecodeResult<Vec<(String, Bytes)>> {
    let n = read_short(buf)? as usize;
    check_count(buf, n, 6, "[bytes map]")?;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let k = read_string(buf)?;
        let v = read_bytes(buf)?.unwrap_or_default();
        out.push((k, v));
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// Writers
// ---------------------------------------------------------------------------------------------

/// Writes a `[byte]`.
pub fn write_byte(out: &mut BytesMut, v: u8) {
    out.put_u8(v);
}

/// Writes a `[short]`.
pub fn write_short(out: &mut BytesMut, v: u16) {
    out.put_u16(v);
}

/// Writes an `[int]`.
pub fn write_int(out: &mut BytesMut, v: i32) {
    out.put_i32(v);
}

/// Writes a `[long]`.
pub fn write_long(out: &mut BytesMut, v: i64) {
    out.put_i64(v);
}

/// Writes a `[uuid]`.
pub fn write_uuid(out: &mut BytesMut, v: &[u8; 16]) {
    out.put_slice(v);
}

/// Writes a `[consistency]`.
pub fn write_consistency(out: &mut BytesMut, v: u16) {
    out.put_u16(v);
}

fn short_len(len: usize, what: &'static str) -> Result<u16, EncodeError> {
    u16::try_from(len).map_err(|_| EncodeError::TooLong {
        what,
        len,
        max: u16::MAX as usize,
    })
}

fn int_len(len: usize, what: &'static str) -> Result<i32, EncodeError> {
    i32::try_from(len).map_err(|_| EncodeError::TooLong {
        what,
        len,
        max: i32::MAX as usize,
    })
}

/// Writes a `[string]` (fails above 65535 bytes).
pub fn write_string(out: &mut BytesMut, s: &str) -> Result<(), EncodeError> {
    out.put_u16(short_len(s.len(), "[string]")?);
    out.put_slice(s.as_bytes());
    Ok(())
}

/// Writes a `[long string]`.
pub fn write_long_string(out: &mut BytesMut, s: &str) -> Result<(), EncodeError> {
    out.put_i32(int_len(s.len(), "[long string]")?);
    out.put_slice(s.as_bytes());
    Ok(())
}

/// Writes a `[string list]`.
pub fn write_string_list<S: AsRef<str>>(out: &mut BytesMut, list: &[S]) -> Result<(), EncodeError> {
    out.put_u16(short_len(list.len(), "[string list]")?);
    for s in list {
        write_string(out, s.as_ref())?;
    }
    Ok(())
}

/// Writes `[bytes]`; `None` is written as length -1 (`null`).
pub fn write_bytes(out: &mut BytesMut, v: Option<&[u8]>) -> Result<(), EncodeError> {
    match v {
        None => out.put_i32(-1),
        Some(b) => {
            out.put_i32(int_len(b.len(), "[bytes]")?);
            out.put_slice(b);
        }
    }
    Ok(())
}

/// Writes `[short bytes]`.
pub fn write_short_bytes(out: &mut BytesMut, v: &[u8]) -> Result<(), EncodeError> {
    out.put_u16(short_len(v.len(), "[short bytes]")?);
    out.put_slice(v);
    Ok(())
}

/// Writes a `[value]` (-1 for `Null`, -2 for `Unset`).
pub fn write_value(out: &mut BytesMut, v: &Value) -> Result<(), EncodeError> {
    match v {
        Value::Null => out.put_i32(-1),
        Value::Unset => out.put_i32(-2),
        Value::Set(b) => {
            out.put_i32(int_len(b.len(), "[value]")?);
            out.put_slice(b);
        }
    }
    Ok(())
}

/// Writes an `[inetaddr]` (size byte and address bytes).
pub fn write_inetaddr(out: &mut BytesMut, ip: &IpAddr) {
    match ip {
        IpAddr::V4(a) => {
            out.put_u8(4);
            out.put_slice(&a.octets());
        }
        IpAddr::V6(a) => {
            out.put_u8(16);
            out.put_slice(&a.octets());
        }
    }
}

/// Writes an `[inet]` (address and `[int]` port).
pub fn write_inet(out: &mut BytesMut, addr: &SocketAddr) {
    write_inetaddr(out, &addr.ip());
    out.put_i32(addr.port().into());
}

/// Writes a `[string map]`.
pub fn write_string_map<K: AsRef<str>, V: AsRef<str>>(
    out: &mut BytesMut,
    map: &[(K, V)],
) -> Result<(), EncodeError> {
    out.put_u16(short_len(map.len(), "[string map]")?);
    for (k, v) in map {
        write_string(out, k.as_ref())?;
        write_string(out, v.as_ref())?;
    }
    Ok(())
}

/// Writes a `[string multimap]`.
pub fn write_string_multimap<K: AsRef<str>, V: AsRef<str>>(
    out: &mut BytesMut,
    map: &[(K, Vec<V>)],
) -> Result<(), EncodeError> {
    out.put_u16(short_len(map.len(), "[string multimap]")?);
    for (k, v) in map {
        write_string(out, k.as_ref())?;
        write_string_list(out, v)?;
    }
    Ok(())
}

/// Writes a `[bytes map]`.
pub fn write_bytes_map<K: AsRef<str>>(
    out: &mut BytesMut,
    map: &[(K, Bytes)],
) -> Result<(), EncodeError> {
    out.put_u16(short_len(map.len(), "[bytes map]")?);
    for (k, v) in map {
        write_string(out, k.as_ref())?;
        write_bytes(out, Some(v))?;
    }
    Ok(())
}

/// Writes a `[short]` element count, failing above 65535.
pub fn write_short_count(
    out: &mut BytesMut,
    n: usize,
    what: &'static str,
) -> Result<(), EncodeError> {
    out.put_u16(short_len(n, what)?);
    Ok(())
}

/// Writes an `[int]` element count, failing above `i32::MAX`.
pub fn write_int_count(
    out: &mut BytesMut,
    n: usize,
    what: &'static str,
) -> Result<(), EncodeError> {
    out.put_i32(int_len(n, what)?);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(v: &[u8]) -> Bytes {
        Bytes::copy_from_slice(v)
    }

    #[test]
    fn ints_round_trip() {
        let mut out = BytesMut::new();
        write_byte(&mut out, 0xAB);
        write_short(&mut out, 0xFFFE);
        write_int(&mut out, -5);
        write_long(&mut out, i64::MIN + 1);
        write_uuid(&mut out, &[7; 16]);
        let mut buf = out.freeze();
        assert_eq!(read_byte(&mut buf).unwrap(), 0xAB);
        assert_eq!(read_short(&mut buf).unwrap(), 0xFFFE);
        assert_eq!(read_int(&mut buf).unwrap(), -5);
        assert_eq!(read_long(&mut buf).unwrap(), i64::MIN + 1);
        assert_eq!(read_uuid(&mut buf).unwrap(), [7; 16]);
        assert!(buf.is_empty());
        assert!(matches!(
            read_byte(&mut buf),
            Err(DecodeError::Truncated { .. })
        ));
    }

    #[test]
    fn string_layouts() {
        let mut out = BytesMut::new();
        write_string(&mut out, "héllo").unwrap();
        assert_eq!(&out[..], b"\x00\x06h\xc3\xa9llo");
        out.clear();
        write_long_string(&mut out, "ab").unwrap();
        assert_eq!(&out[..], b"\x00\x00\x00\x02ab");
        let mut buf = out.freeze();
        assert_eq!(read_long_string(&mut buf).unwrap(), "ab");
    }

    #[test]
    fn string_errors() {
        assert_eq!(
            read_string(&mut b(b"\x00\x02\xff\xfe")),
            Err(DecodeError::InvalidUtf8 { what: "[string]" })
        );
        assert!(matches!(
            read_string(&mut b(b"\x00\x05ab")),
            Err(DecodeError::Truncated {
                needed: 5,
                remaining: 2,
                ..
            })
        ));
        assert!(matches!(
            read_long_string(&mut b(b"\xff\xff\xff\xff")),
            Err(DecodeError::InvalidLength { len: -1, .. })
        ));
        let long = "x".repeat(70_000);
        assert!(matches!(
            write_string(&mut BytesMut::new(), &long),
            Err(EncodeError::TooLong { len: 70_000, .. })
        ));
    }

    #[test]
    fn hostile_counts_rejected_before_allocating() {
        // A [string list] claiming 65535 entries with 4 bytes behind it.
        let err = read_string_list(&mut b(b"\xff\xff\x00\x00\x00\x00")).unwrap_err();
        assert!(matches!(
            err,
            DecodeError::TooManyElements {
                count: 65535,
                remaining: 4,
                ..
            }
        ));
        // [bytes] of 2^31-1 bytes.
        let err = read_bytes(&mut b(b"\x7f\xff\xff\xff\x00")).unwrap_err();
        assert!(matches!(
            err,
            DecodeError::Truncated {
                needed: 0x7fff_ffff,
                ..
            }
        ));
        // Values count check.
        assert!(read_values(&mut b(b"\x00\x00\x00\x01"), 2).is_err());
    }

    #[test]
    fn bytes_and_values_are_zero_copy_slices() {
        let mut out = BytesMut::new();
        write_bytes(&mut out, Some(b"abc")).unwrap();
        write_bytes(&mut out, None).unwrap();
        write_value(&mut out, &Value::Unset).unwrap();
        write_value(&mut out, &Value::Null).unwrap();
        write_value(&mut out, &Value::Set(b(b"xy"))).unwrap();
        write_short_bytes(&mut out, b"id").unwrap();
        out.put_i32(-3);
        let frozen = out.freeze();
        let base = frozen.as_ptr() as usize;
        let mut buf = frozen.clone();
        let v = read_bytes(&mut buf).unwrap().unwrap();
        assert_eq!(&v[..], b"abc");
        assert_eq!(v.as_ptr() as usize, base + 4, "must point into the input");
        assert_eq!(read_bytes(&mut buf).unwrap(), None);
        assert_eq!(read_value(&mut buf).unwrap(), Value::Unset);
        assert_eq!(read_value(&mut buf).unwrap(), Value::Null);
        assert_eq!(read_value(&mut buf).unwrap(), Value::Set(b(b"xy")));
        assert_eq!(&read_short_bytes(&mut buf).unwrap()[..], b"id");
        assert!(matches!(
            read_value(&mut buf),
            Err(DecodeError::InvalidLength { len: -3, .. })
        ));
    }

    #[test]
    fn inet_round_trip_and_errors() {
        let v4: SocketAddr = "10.1.2.3:9042".parse().unwrap();
        let v6: SocketAddr = "[::1]:19042".parse().unwrap();
        let mut out = BytesMut::new();
        write_inet(&mut out, &v4);
        assert_eq!(&out[..], b"\x04\x0a\x01\x02\x03\x00\x00\x23\x52");
        write_inet(&mut out, &v6);
        let mut buf = out.freeze();
        assert_eq!(read_inet(&mut buf).unwrap(), v4);
        assert_eq!(read_inet(&mut buf).unwrap(), v6);
        assert_eq!(
            read_inet(&mut b(b"\x05\x01\x02\x03\x04\x05")),
            Err(DecodeError::InvalidInetLength(5))
        );
        assert!(read_inet(&mut b(b"\x04\x01\x02\x03\x04\x00\x01\x00\x00")).is_err());
    }

    #[test]
    fn maps_round_trip() {
        let mut out = BytesMut::new();
        write_string_map(
            &mut out,
            &[("CQL_VERSION", "3.0.0"), ("COMPRESSION", "lz4")],
        )
        .unwrap();
        write_string_multimap(
            &mut out,
            &[("COMPRESSION".to_string(), vec!["lz4", "snappy"])],
        )
        .unwrap();
        write_bytes_map(&mut out, &[("k", b(b"\x01\x02"))]).unwrap();
        write_string_list(&mut out, &["a", "b"]).unwrap();
        let mut buf = out.freeze();
        assert_eq!(
            read_string_map(&mut buf).unwrap(),
            vec![
                ("CQL_VERSION".to_string(), "3.0.0".to_string()),
                ("COMPRESSION".to_string(), "lz4".to_string())
            ]
        );
        assert_eq!(
            read_string_multimap(&mut buf).unwrap(),
            vec![(
                "COMPRESSION".to_string(),
                vec!["lz4".to_string(), "snappy".to_string()]
            )]
        );
        assert_eq!(
            read_bytes_map(&mut buf).unwrap(),
            vec![("k".to_string(), b(b"\x01\x02"))]
        );
        assert_eq!(read_string_list(&mut buf).unwrap(), vec!["a", "b"]);
        assert!(buf.is_empty());
    }

    #[test]
    fn consistency_checked() {
        assert_eq!(
            read_consistency(&mut b(b"\x00\x0a")).unwrap(),
            consistency::LOCAL_ONE
        );
        assert_eq!(
            read_consistency(&mut b(b"\x00\x0b")),
            Err(DecodeError::UnknownConsistency(11))
        );
        assert_eq!(
            consistency::name(consistency::LOCAL_QUORUM),
            Some("LOCAL_QUORUM")
        );
    }
}
