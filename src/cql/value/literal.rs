//! CQL constants to serialized values, and the parsers for the textual forms Cassandra accepts
//! (`AbstractType.fromString`) of the number, string, uuid and inet types; the calendar types'
//! parsers are in `calendar.rs`, the duration's in `duration.rs`.

use std::net::{Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

use num_bigint::{BigInt, BigUint, Sign};

use super::calendar::{parse_date, parse_time, parse_timestamp};
use super::duration::{encode_duration, parse_duration};
use super::{validate, ValueError};
use crate::cql::ast::Literal;
use crate::cql::types::CqlType;

/// The kind Cassandra gives a constant (`Constants.Type`) and the constant as it prints it.
fn kind_and_text(lit: &Literal) -> (&'static str, String) {
    match lit {
        Literal::String(s) => ("STRING", s.clone()),
        Literal::Integer(t) => ("INTEGER", t.clone()),
        Literal::Float(t) => ("FLOAT", t.clone()),
        Literal::Boolean(b) => ("BOOLEAN", b.to_string()),
        Literal::Uuid(t) => ("UUID", t.clone()),
        Literal::Blob(b) => ("HEX", format!("0x{}", hex(b))),
        Literal::Duration(t) => ("DURATION", t.clone()),
        Literal::Null => ("NULL", "null".to_string()),
    }
}

pub(crate) fn hex(b: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(b.len() * 2);
    for &x in b {
        s.push(DIGITS[(x >> 4) as usize] as char);
        s.push(DIGITS[(x & 15) as usize] as char);
    }
    s
}

/// Converts a CQL constant to the serialized value of a receiver of type `ty`, following
/// Cassandra 5.0's `Constants.Literal`: first whether the constant's kind is assignable to the
/// type at all (otherwise [`ValueError::InvalidConstant`]), then the type's `fromString`.
///
/// Accepted kinds per type:
///
/// * `ascii`, `text`: strings (`ascii` rejects non-ASCII characters);
/// * `blob`: hex constants; `tinyint` also takes a one-byte hex constant (a quirk of
///   Cassandra's type inference that makes `0x05` an exact match for `tinyint`);
/// * `boolean`: `true` / `false`;
/// * `tinyint`, `smallint`, `int`, `bigint`, `counter`, `varint`: integers, range-checked;
/// * `float`, `double`, `decimal`: integers and floats (`NaN`, `Infinity` for the binary types;
///   `decimal` keeps the written scale: `1.50` has scale 2);
/// * `timestamp`: integers (milliseconds since the epoch) and strings in any format
///   [`parse_timestamp`] accepts; the empty string gives the empty value;
/// * `date`: strings `yyyy-mm-dd` and integers (raw unsigned days, 2^31 = 1970-01-01);
/// * `time`: strings `hh:mm:ss[.fffffffff]` and integers (nanoseconds of the day);
/// * `uuid`: uuid constants; `timeuuid`: uuid constants of version 1. Cassandra does not
///   accept quoted strings for these types (`Invalid STRING constant`), nor does this.
/// * `inet`: strings holding an IPv4 or IPv6 address; the empty string gives the empty value;
/// * `duration`: duration constants (an integer constant is assignable but never parses);
/// * custom types: hex constants (raw bytes); other constants are unsupported here.
///
/// Collections, tuples, UDTs and vectors take no constant; the caller builds them from their
/// elements with [`super::encode_list`] and friends. `NULL` yields [`ValueError::Null`].
pub fn literal_to_bytes(ty: &CqlType, lit: &Literal) -> Result<Vec<u8>, ValueError> {
    let ty = ty.unfrozen();
    if let Literal::Null = lit {
        return Err(ValueError::Null(if ty.is_counter() {
            "Invalid null value for counter increment/decrement"
        } else {
            "null has no serialized value"
        }));
    }
    let (kind, text) = kind_and_text(lit);
    let not_assignable = || ValueError::InvalidConstant {
        kind,
        text: text.clone(),
        ty: ty.to_string(),
    };
    match (ty, lit) {
        (CqlType::Custom(_), Literal::Blob(b)) => Ok(b.clone()),
        (CqlType::Custom(name), _) => Err(ValueError::Unsupported(format!(
            "Cannot convert a {kind} constant ({text}) to the custom type '{name}'"
        ))),
        (CqlType::Ascii, Literal::String(s)) => ascii_from_string(s),
        (CqlType::Text, Literal::String(s)) => Ok(s.as_bytes().to_vec()),
        (CqlType::Blob, Literal::Blob(b)) => Ok(b.clone()),
        (CqlType::Tinyint, Literal::Blob(b)) => {
            validate(ty, b)?;
            Ok(b.clone())
        }
        (CqlType::Boolean, Literal::Boolean(b)) => Ok(vec![*b as u8]),
        (CqlType::Tinyint, Literal::Integer(t)) => parse_tinyint(t),
        (CqlType::Smallint, Literal::Integer(t)) => parse_smallint(t),
        (CqlType::Int, Literal::Integer(t)) => parse_int(t),
        (CqlType::Bigint | CqlType::Counter, Literal::Integer(t)) => parse_bigint(t),
        (CqlType::Varint, Literal::Integer(t)) => parse_varint(t),
        (CqlType::Float, Literal::Integer(t) | Literal::Float(t)) => parse_float(t),
        (CqlType::Double, Literal::Integer(t) | Literal::Float(t)) => parse_double(t),
        (CqlType::Decimal, Literal::Integer(t) | Literal::Float(t)) => decimal_from_string(t),
        (CqlType::Timestamp, Literal::String(t) | Literal::Integer(t)) => {
            if t.is_empty() {
                Ok(Vec::new())
            } else {
                Ok(parse_timestamp(t)?.to_be_bytes().to_vec())
            }
        }
        (CqlType::Date, Literal::String(t) | Literal::Integer(t)) => {
            Ok(parse_date(t)?.to_be_bytes().to_vec())
        }
        (CqlType::Time, Literal::String(t) | Literal::Integer(t)) => {
            Ok(parse_time(t)?.to_be_bytes().to_vec())
        }
        (CqlType::Uuid, Literal::Uuid(t)) => uuid_from_string(t),
        (CqlType::Timeuuid, Literal::Uuid(t)) => timeuuid_from_string(t),
        (CqlType::Inet, Literal::String(t)) => {
            if t.is_empty() {
                Ok(Vec::new())
            } else {
                parse_inet(t)
            }
        }
        (CqlType::Duration, Literal::Duration(t) | Literal::Integer(t)) => {
            Ok(encode_duration(parse_duration(t)?))
        }
        _ => Err(not_assignable()),
    }
}

// ---------------------------------------------------------------------------------------------
// Per-type `fromString`
// ---------------------------------------------------------------------------------------------

pub(crate) fn ascii_from_string(s: &str) -> Result<Vec<u8>, ValueError> {
    if let Some(c) = s.chars().find(|c| !c.is_ascii()) {
        return Err(ValueError::marshal(format!(
            "Invalid ASCII character in string literal: java.nio.charset.UnmappableCharacterException: Input length = {}",
            c.len_utf16()
        )));
    }
    Ok(s.as_bytes().to_vec())
}

/// Java's `Long.parseLong`: an optional sign and ASCII digits.
fn java_parse_i64(s: &str) -> Option<i64> {
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse::<i64>().ok()
}

pub(super) fn java_parse_i32(s: &str) -> Option<i32> {
    java_parse_i64(s).and_then(|v| i32::try_from(v).ok())
}

pub(crate) fn parse_tinyint(t: &str) -> Result<Vec<u8>, ValueError> {
    java_parse_i64(t)
        .and_then(|v| i8::try_from(v).ok())
        .map(|v| v.to_be_bytes().to_vec())
        .ok_or_else(|| ValueError::marshal(format!("Unable to make byte from '{t}'")))
}

pub(crate) fn parse_smallint(t: &str) -> Result<Vec<u8>, ValueError> {
    java_parse_i64(t)
        .and_then(|v| i16::try_from(v).ok())
        .map(|v| v.to_be_bytes().to_vec())
        .ok_or_else(|| ValueError::marshal(format!("Unable to make short from '{t}'")))
}

pub(crate) fn parse_int(t: &str) -> Result<Vec<u8>, ValueError> {
    java_parse_i32(t)
        .map(|v| v.to_be_bytes().to_vec())
        .ok_or_else(|| ValueError::marshal(format!("Unable to make int from '{t}'")))
}

pub(crate) fn parse_bigint(t: &str) -> Result<Vec<u8>, ValueError> {
    java_parse_i64(t)
        .map(|v| v.to_be_bytes().to_vec())
        .ok_or_else(|| ValueError::marshal(format!("Unable to make long from '{t}'")))
}

/// Java's `new BigInteger(String)`: an optional sign and ASCII digits.
pub(crate) fn parse_bigint_text(t: &str) -> Option<BigInt> {
    let (sign, digits) = match t.as_bytes().first() {
        Some(b'-') => (Sign::Minus, &t[1..]),
        Some(b'+') => (Sign::Plus, &t[1..]),
        _ => (Sign::Plus, t),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let mag = BigUint::from_str(digits).ok()?;
    Some(BigInt::from_biguint(sign, mag))
}

pub(crate) fn parse_varint(t: &str) -> Result<Vec<u8>, ValueError> {
    parse_bigint_text(t)
        .map(|v| v.to_signed_bytes_be())
        .ok_or_else(|| ValueError::marshal(format!("unable to make int from '{t}'")))
}

/// Java's `Double.parseDouble` grammar without hexadecimal floats: surrounding whitespace, an
/// optional sign, `NaN`, `Infinity` or a decimal number with an optional exponent, and an
/// optional `f`/`F`/`d`/`D` suffix. Returns the normalized decimal text for Rust's parser.
fn java_float_text(s: &str) -> Option<String> {
    let t = s.trim_matches(|c: char| c <= ' ');
    let (neg, body) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let sign = if neg { "-" } else { "" };
    if body == "NaN" {
        return Some("NaN".to_string());
    }
    if body == "Infinity" {
        return Some(format!("{sign}inf"));
    }
    let body = body.strip_suffix(['f', 'F', 'd', 'D']).unwrap_or(body);
    let b = body.as_bytes();
    let mut i = 0;
    let int_start = i;
    while i < b.len() && b[i].is_ascii_digit() {
        i += 1;
    }
    let int_digits = i - int_start;
    let mut frac_digits = 0;
    if i < b.len() && b[i] == b'.' {
        i += 1;
        let f = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        frac_digits = i - f;
    }
    if int_digits + frac_digits == 0 {
        return None;
    }
    if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
        i += 1;
        if i < b.len() && (b[i] == b'+' || b[i] == b'-') {
            i += 1;
        }
        let e = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        if i == e {
            return None;
        }
    }
    if i != b.len() {
        return None;
    }
    Some(format!("{sign}{body}"))
}

pub(crate) fn java_parse_f64(s: &str) -> Option<f64> {
    java_float_text(s)?.parse::<f64>().ok()
}

pub(crate) fn java_parse_f32(s: &str) -> Option<f32> {
    java_float_text(s)?.parse::<f32>().ok()
}

pub(crate) fn parse_float(t: &str) -> Result<Vec<u8>, ValueError> {
    java_parse_f32(t)
        .map(|v| v.to_bits().to_be_bytes().to_vec())
        .ok_or_else(|| ValueError::marshal(format!("Unable to make float from '{t}'")))
}

pub(crate) fn parse_double(t: &str) -> Result<Vec<u8>, ValueError> {
    java_parse_f64(t)
        .map(|v| v.to_bits().to_be_bytes().to_vec())
        .ok_or_else(|| ValueError::marshal(format!("Unable to make double from '{t}'")))
}

/// Parses a decimal as Java's `new BigDecimal(String)` does, returning `(unscaled, scale)`:
/// `1.50` is `(150, 2)`, `1E+3` is `(1, -3)`, `-.5` is `(-5, 1)`.
pub fn parse_decimal(s: &str) -> Option<(BigInt, i32)> {
    let b = s.as_bytes();
    let mut i = 0;
    let neg = match b.first() {
        Some(b'-') => {
            i += 1;
            true
        }
        Some(b'+') => {
            i += 1;
            false
        }
        _ => false,
    };
    let mut digits = String::new();
    let mut frac: i64 = 0;
    let mut seen_point = false;
    while i < b.len() {
        match b[i] {
            d if d.is_ascii_digit() => {
                digits.push(d as char);
                if seen_point {
                    frac += 1;
                }
            }
            b'.' if !seen_point => seen_point = true,
            _ => break,
        }
        i += 1;
    }
    if digits.is_empty() {
        return None;
    }
    let mut exp: i64 = 0;
    if i < b.len() {
        if b[i] != b'e' && b[i] != b'E' {
            return None;
        }
        i += 1;
        let eneg = match b.get(i) {
            Some(b'-') => {
                i += 1;
                true
            }
            Some(b'+') => {
                i += 1;
                false
            }
            _ => false,
        };
        let start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            // Java rejects exponents that do not fit an int
            exp = exp.checked_mul(10)?.checked_add((b[i] - b'0') as i64)?;
            if exp > i32::MAX as i64 + 1 {
                return None;
            }
            i += 1;
        }
        if i == start || i != b.len() {
            return None;
        }
        if eneg {
            exp = -exp;
        }
        if exp > i32::MAX as i64 {
            return None;
        }
    }
    let scale = frac - exp;
    let scale = i32::try_from(scale).ok()?;
    let mag = BigUint::from_str(&digits).ok()?;
    let sign = if neg { Sign::Minus } else { Sign::Plus };
    Some((BigInt::from_biguint(sign, mag), scale))
}

pub(crate) fn decimal_bytes(unscaled: &BigInt, scale: i32) -> Vec<u8> {
    let mut out = scale.to_be_bytes().to_vec();
    out.extend_from_slice(&unscaled.to_signed_bytes_be());
    out
}

pub(crate) fn decimal_from_string(t: &str) -> Result<Vec<u8>, ValueError> {
    parse_decimal(t)
        .map(|(u, s)| decimal_bytes(&u, s))
        .ok_or_else(|| ValueError::marshal(format!("unable to make BigDecimal from '{t}'")))
}

/// A uuid in the `8-4-4-4-12` hexadecimal form (any case), as `UUIDType` requires.
pub fn parse_uuid(s: &str) -> Option<[u8; 16]> {
    let b = s.as_bytes();
    if b.len() != 36 {
        return None;
    }
    for (i, &c) in b.iter().enumerate() {
        let ok = if matches!(i, 8 | 13 | 18 | 23) {
            c == b'-'
        } else {
            c.is_ascii_hexdigit()
        };
        if !ok {
            return None;
        }
    }
    uuid::Uuid::parse_str(s).ok().map(|u| *u.as_bytes())
}

pub(crate) fn uuid_from_string(t: &str) -> Result<Vec<u8>, ValueError> {
    if t.is_empty() {
        return Ok(Vec::new());
    }
    parse_uuid(t)
        .map(|u| u.to_vec())
        .ok_or_else(|| ValueError::marshal(format!("Unable to make UUID from '{t}'")))
}

pub(crate) fn timeuuid_from_string(t: &str) -> Result<Vec<u8>, ValueError> {
    if t.is_empty() {
        return Ok(Vec::new());
    }
    let u = parse_uuid(t)
        .ok_or_else(|| ValueError::marshal(format!("Unknown timeuuid representation: {t}")))?;
    if u[6] >> 4 != 1 {
        return Err(ValueError::marshal(
            "TimeUUID supports only version 1 UUIDs",
        ));
    }
    Ok(u.to_vec())
}

/// An IP address literal as `InetAddress.getByName` reads it: dotted IPv4, IPv6 (optionally
/// in brackets, optionally with a `%scope` that is dropped), IPv4-mapped IPv6 addresses
/// (`::ffff:1.2.3.4`) becoming 4-byte IPv4 addresses as in Java. Host names, which Cassandra
/// resolves through DNS, are rejected.
pub fn parse_inet(s: &str) -> Result<Vec<u8>, ValueError> {
    let err = || ValueError::marshal(format!("Unable to make inet address from '{s}'"));
    if let Ok(v4) = Ipv4Addr::from_str(s) {
        return Ok(v4.octets().to_vec());
    }
    let inner = s
        .strip_prefix('[')
        .and_then(|r| r.strip_suffix(']'))
        .unwrap_or(s);
    let addr = inner.split('%').next().unwrap_or(inner);
    if !addr.contains(':') {
        return Err(err());
    }
    let v6 = Ipv6Addr::from_str(addr).map_err(|_| err())?;
    if let Some(v4) = v6.to_ipv4_mapped() {
        return Ok(v4.octets().to_vec());
    }
    Ok(v6.octets().to_vec())
}
