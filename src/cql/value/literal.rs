//! CQL constants to serialized values, and the parsers for the textual forms Cassandra accepts
//! (`AbstractType.fromString` of each type).

use std::net::{Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

use num_bigint::{BigInt, BigUint, Sign};

use super::{validate, vint, ValueError};
use crate::cql::ast::Literal;
use crate::cql::types::CqlType;

/// A `duration`: months, days and nanoseconds, all of the same sign.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DurationValue {
    pub months: i32,
    pub days: i32,
    pub nanoseconds: i64,
}

/// The serialized form of a duration: three signed VInts (months, days, nanoseconds).
pub fn encode_duration(d: DurationValue) -> Vec<u8> {
    let mut out = Vec::with_capacity(12);
    vint::put_signed(d.months as i64, &mut out);
    vint::put_signed(d.days as i64, &mut out);
    vint::put_signed(d.nanoseconds, &mut out);
    out
}

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

fn java_parse_i32(s: &str) -> Option<i32> {
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

// ---------------------------------------------------------------------------------------------
// Calendar arithmetic (proleptic Gregorian, year 0 = 1 BC), independent of chrono's range.
// ---------------------------------------------------------------------------------------------

/// Days since 1970-01-01 of a proleptic Gregorian date.
pub(crate) fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400; // [0, 399]
    let mp = (m as i64 + 9) % 12; // March = 0
    let doy = (153 * mp + 2) / 5 + d as i64 - 1; // [0, 365]
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy; // [0, 146096]
    era * 146097 + doe - 719468
}

/// The proleptic Gregorian date of a day number (days since 1970-01-01).
pub(crate) fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719468;
    let era = if z >= 0 { z } else { z - 146096 } / 146097;
    let doe = z - era * 146097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

pub(crate) fn is_leap(y: i64) -> bool {
    y.rem_euclid(4) == 0 && (y.rem_euclid(100) != 0 || y.rem_euclid(400) == 0)
}

pub(crate) fn month_length(y: i64, m: u32) -> u32 {
    match m {
        4 | 6 | 9 | 11 => 30,
        2 if is_leap(y) => 29,
        2 => 28,
        _ => 31,
    }
}

/// `^-?\d+$`
fn is_raw_integer(s: &str) -> bool {
    let d = s.strip_prefix('-').unwrap_or(s);
    !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit())
}

// ---------------------------------------------------------------------------------------------
// timestamp
// ---------------------------------------------------------------------------------------------

/// A cursor over ASCII text for the date/time grammars.
struct Scan<'a> {
    b: &'a [u8],
    i: usize,
}

impl<'a> Scan<'a> {
    fn new(s: &'a str) -> Self {
        Scan {
            b: s.as_bytes(),
            i: 0,
        }
    }
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }
    fn eat(&mut self, c: u8) -> bool {
        if self.peek() == Some(c) {
            self.i += 1;
            true
        } else {
            false
        }
    }
    /// Between `min` and `max` ASCII digits; returns (value, count).
    fn digits(&mut self, min: usize, max: usize) -> Option<(i64, usize)> {
        let start = self.i;
        let mut v: i64 = 0;
        while self.i - start < max {
            match self.peek() {
                Some(d) if d.is_ascii_digit() => {
                    v = v * 10 + (d - b'0') as i64;
                    self.i += 1;
                }
                _ => break,
            }
        }
        let n = self.i - start;
        if n < min {
            self.i = start;
            return None;
        }
        Some((v, n))
    }
    fn rest(&self) -> &'a [u8] {
        &self.b[self.i..]
    }
    fn at_end(&self) -> bool {
        self.i == self.b.len()
    }
}

/// A zone offset in seconds from forms `Z`, `+h`, `+hh`, `+hhmm`, `+hh:mm`, `+hh:mm:ss`,
/// `+hhmmss`, or `None`.
fn parse_offset(s: &[u8], allow_single_digit_hour: bool, allow_seconds: bool) -> Option<i64> {
    if s == b"Z" {
        return Some(0);
    }
    let (&sign, rest) = s.split_first()?;
    let neg = match sign {
        b'+' => false,
        b'-' => true,
        _ => return None,
    };
    let all_digits = |x: &[u8]| x.iter().all(|c| c.is_ascii_digit());
    let num = |x: &[u8]| x.iter().fold(0i64, |a, &c| a * 10 + (c - b'0') as i64);
    let (h, m, sec) = match rest.len() {
        1 if allow_single_digit_hour && all_digits(rest) => (num(rest), 0, 0),
        2 if all_digits(rest) => (num(rest), 0, 0),
        4 if all_digits(rest) => (num(&rest[..2]), num(&rest[2..]), 0),
        5 if rest[2] == b':' && all_digits(&rest[..2]) && all_digits(&rest[3..]) => {
            (num(&rest[..2]), num(&rest[3..]), 0)
        }
        6 if allow_seconds && all_digits(rest) => {
            (num(&rest[..2]), num(&rest[2..4]), num(&rest[4..]))
        }
        8 if allow_seconds
            && rest[2] == b':'
            && rest[5] == b':'
            && all_digits(&rest[..2])
            && all_digits(&rest[3..5])
            && all_digits(&rest[6..]) =>
        {
            (num(&rest[..2]), num(&rest[3..5]), num(&rest[6..]))
        }
        _ => return None,
    };
    if h > 18 || m > 59 || sec > 59 {
        return None;
    }
    let total = h * 3600 + m * 60 + sec;
    if total > 18 * 3600 {
        return None;
    }
    Some(if neg { -total } else { total })
}

/// The zone suffix of a timestamp (everything after the date or time), as an offset in
/// seconds. Without a zone Cassandra uses the server's default time zone; ringgate uses UTC.
fn parse_zone(rest: &[u8]) -> Option<i64> {
    if rest.is_empty() {
        return Some(0);
    }
    if let Some(r) = rest.strip_prefix(b" ") {
        // " X": Z, +hh, +hhmm
        if let Some(o) = parse_offset_x(r) {
            return Some(o);
        }
        // " z" / " zzzz": a zone name or id; only the fixed UTC zones are known here
        for prefix in [&b"UTC"[..], b"GMT", b"UT", b"Z"] {
            if let Some(after) = r.strip_prefix(prefix) {
                if after.is_empty() {
                    return Some(0);
                }
                if prefix != b"Z" {
                    return parse_offset(after, true, true);
                }
            }
        }
        // a zone id may also be a plain offset
        return parse_offset(r, true, true);
    }
    // "X" or "XXX"
    parse_offset_x(rest).or_else(|| {
        if rest.len() == 6 && rest[3] == b':' {
            parse_offset(rest, false, false)
        } else {
            None
        }
    })
}

/// Java's offset pattern `X`: `Z`, `+hh` or `+hhmm`.
fn parse_offset_x(s: &[u8]) -> Option<i64> {
    if s == b"Z" || s.len() == 3 || s.len() == 5 {
        parse_offset(s, false, false)
    } else {
        None
    }
}

/// Parses a timestamp as Cassandra 5.0's `TimestampSerializer.dateStringToTimestamp`:
///
/// * `now` (any case): the current time;
/// * an integer (`^-?\d+$`): milliseconds since the epoch;
/// * `yyyy-mm-dd` followed by ` ` or `T` and `hh:mm[:ss][.f…]` (1 to 9 fraction digits,
///   truncated to milliseconds; one- or two-digit month, day, hour, minute and second), with an
///   optional zone;
/// * `yyyy-mm-dd` alone or with a zone (midnight).
///
/// Zones: `Z`, `+hh`, `+hhmm`, `+hh:mm` directly after the time; after a space also `UTC`,
/// `GMT`, `UT` (optionally followed by an offset) and offsets. Named regional zones
/// (`Europe/Paris`, `PST`) are not supported. Without a zone the time is taken as UTC
/// (Cassandra uses the server's default zone, which is UTC on a standard deployment). Days
/// past the end of the month are clamped to its last day, as Java's smart resolver does
/// (`2021-02-30` is February 28th).
pub fn parse_timestamp(s: &str) -> Result<i64, ValueError> {
    if s.eq_ignore_ascii_case("now") {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0);
        return Ok(now);
    }
    if is_raw_integer(s) {
        return s.parse::<i64>().map_err(|_| {
            ValueError::marshal(format!("Unable to make long (for date) from: '{s}'"))
        });
    }
    parse_datetime(s)
        .ok_or_else(|| ValueError::marshal(format!("Unable to parse a date/time from '{s}'")))
}

fn parse_datetime(s: &str) -> Option<i64> {
    let mut sc = Scan::new(s);
    let (year, ydigits) = sc.digits(1, 10)?;
    if !(1..=999_999_999).contains(&year) {
        return None;
    }
    if !sc.eat(b'-') {
        return None;
    }
    let (month, mdigits) = sc.digits(1, 2)?;
    if !sc.eat(b'-') {
        return None;
    }
    let (day, ddigits) = sc.digits(1, 2)?;
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) {
        return None;
    }
    let mut ms_of_day: i64 = 0;
    let has_time = matches!(sc.peek(), Some(b'T') | Some(b' '))
        && sc.rest().get(1).is_some_and(|c| c.is_ascii_digit());
    if has_time {
        sc.i += 1;
        let (hour, _) = sc.digits(1, 2)?;
        if !sc.eat(b':') {
            return None;
        }
        let (minute, _) = sc.digits(1, 2)?;
        let mut second = 0;
        if sc.peek() == Some(b':') && sc.rest().get(1).is_some_and(|c| c.is_ascii_digit()) {
            sc.i += 1;
            second = sc.digits(1, 2)?.0;
        }
        let mut millis = 0;
        let mut frac_zero = true;
        if sc.eat(b'.') {
            let start = sc.i;
            let (_, n) = sc.digits(0, 9)?;
            let frac = &sc.b[start..start + n];
            frac_zero = frac.iter().all(|&c| c == b'0');
            for k in 0..3 {
                millis = millis * 10 + frac.get(k).map_or(0, |&c| (c - b'0') as i64);
            }
        }
        if minute > 59 || second > 59 {
            return None;
        }
        let hour = match hour {
            0..=23 => hour,
            // Java's smart resolver reads 24:00 as the end of the day
            24 if minute == 0 && second == 0 && frac_zero => 24,
            _ => return None,
        };
        ms_of_day = ((hour * 60 + minute) * 60 + second) * 1000 + millis;
    } else if ydigits < 4 || mdigits != 2 || ddigits != 2 {
        // the date-only formats are yyyy-MM-dd
        return None;
    }
    let offset = parse_zone(sc.rest())?;
    let day = day.min(month_length(year, month as u32) as i64);
    let days = days_from_civil(year, month as u32, day as u32) as i128;
    let ms = days * 86_400_000 + ms_of_day as i128 - offset as i128 * 1000;
    i64::try_from(ms).ok()
}

// ---------------------------------------------------------------------------------------------
// date
// ---------------------------------------------------------------------------------------------

/// Parses a `date` as Cassandra's `SimpleDateSerializer.dateStringToDays`, returning the
/// serialized unsigned day number (2^31 is 1970-01-01):
///
/// * an integer (`^-?\d+$`) is the raw unsigned day number, 0 to 2^32 - 1;
/// * otherwise `yyyy-mm-dd` (an optional sign, up to 9 year digits, one- or two-digit month
///   and day), a valid date between -5877641-06-23 and 5881580-07-11.
pub fn parse_date(s: &str) -> Result<u32, ValueError> {
    if is_raw_integer(s) {
        return s
            .parse::<i64>()
            .ok()
            .and_then(|v| u32::try_from(v).ok())
            .ok_or_else(|| {
                ValueError::marshal(format!(
                    "Unable to make unsigned int (for date) from: '{s}'"
                ))
            });
    }
    let coerce =
        || ValueError::marshal(format!("Unable to coerce '{s}' to a formatted date (long)"));
    let mut sc = Scan::new(s);
    let neg = if sc.eat(b'-') {
        true
    } else {
        sc.eat(b'+');
        false
    };
    let (y, _) = sc.digits(1, 9).ok_or_else(coerce)?;
    let year = if neg { -y } else { y };
    if !sc.eat(b'-') {
        return Err(coerce());
    }
    let (month, _) = sc.digits(1, 2).ok_or_else(coerce)?;
    if !sc.eat(b'-') {
        return Err(coerce());
    }
    let (day, _) = sc.digits(1, 2).ok_or_else(coerce)?;
    if !sc.at_end()
        || !(1..=12).contains(&month)
        || day < 1
        || day > month_length(year, month as u32) as i64
    {
        return Err(coerce());
    }
    let days = days_from_civil(year, month as u32, day as u32);
    if days < i32::MIN as i64 {
        return Err(ValueError::marshal(format!(
            "Input date {s} is less than min supported date -5877641-06-23"
        )));
    }
    if days > i32::MAX as i64 {
        return Err(ValueError::marshal(format!(
            "Input date {s} is greater than max supported date 5881580-07-11"
        )));
    }
    Ok((days + (1i64 << 31)) as u32)
}

// ---------------------------------------------------------------------------------------------
// time
// ---------------------------------------------------------------------------------------------

const NANOS_PER_DAY: i64 = 86_400_000_000_000;

/// Parses a `time` as Cassandra's `TimeSerializer.timeStringToLong`, returning nanoseconds
/// since midnight:
///
/// * an integer (`^-?\d+$`) is the raw number of nanoseconds, 0 to 86399999999999;
/// * otherwise `hh:mm:ss[.fffffffff]` (surrounding whitespace ignored, 1 to 9 fraction
///   digits).
pub fn parse_time(s: &str) -> Result<i64, ValueError> {
    if is_raw_integer(s) {
        return s
            .parse::<i64>()
            .ok()
            .filter(|v| (0..NANOS_PER_DAY).contains(v))
            .ok_or_else(|| {
                ValueError::marshal(format!("Unable to make long (for time) from: '{s}'"))
            });
    }
    parse_time_strictly(s).ok_or_else(|| {
        ValueError::marshal(format!(
            "(TimeType) Unable to coerce '{s}' to a formatted time (long)"
        ))
    })
}

fn parse_time_strictly(s: &str) -> Option<i64> {
    let t = s.trim_matches(|c: char| c <= ' ');
    let first = t.find(':')?;
    let second = first + 1 + t[first + 1..].find(':')?;
    if first == 0 || second >= t.len() - 1 {
        return None;
    }
    let hour = java_parse_i32(&t[..first])?;
    if !(0..24).contains(&hour) {
        return None;
    }
    let minute = java_parse_i32(&t[first + 1..second])?;
    if !(0..60).contains(&minute) {
        return None;
    }
    let period = t[second + 1..].find('.').map(|p| p + second + 1);
    let (sec, nanos) = match period {
        Some(p) if p < t.len() - 1 => {
            let sec = java_parse_i32(&t[second + 1..p])?;
            let frac = &t[p + 1..];
            if frac.len() > 9 || !frac.as_bytes()[0].is_ascii_digit() {
                return None;
            }
            let padded = format!("{frac:0<9}");
            (sec, java_parse_i32(&padded)?)
        }
        Some(_) => return None,
        None => (java_parse_i32(&t[second + 1..])?, 0),
    };
    if !(0..60).contains(&sec) {
        return None;
    }
    Some(((hour as i64 * 60 + minute as i64) * 60 + sec as i64) * 1_000_000_000 + nanos as i64)
}

// ---------------------------------------------------------------------------------------------
// duration
// ---------------------------------------------------------------------------------------------

const NANOS_PER_MICRO: i64 = 1_000;
const NANOS_PER_MILLI: i64 = 1_000_000;
const NANOS_PER_SECOND: i64 = 1_000_000_000;
const NANOS_PER_MINUTE: i64 = 60 * NANOS_PER_SECOND;
const NANOS_PER_HOUR: i64 = 60 * NANOS_PER_MINUTE;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Unit {
    Years = 1,
    Months,
    Weeks,
    Days,
    Hours,
    Minutes,
    Seconds,
    Millis,
    Micros,
    Nanos,
}

impl Unit {
    fn name(self) -> &'static str {
        match self {
            Unit::Years => "years",
            Unit::Months => "months",
            Unit::Weeks => "weeks",
            Unit::Days => "days",
            Unit::Hours => "hours",
            Unit::Minutes => "minutes",
            Unit::Seconds => "seconds",
            Unit::Millis => "milliseconds",
            Unit::Micros => "microseconds",
            Unit::Nanos => "nanoseconds",
        }
    }

    fn from_index(i: u8) -> Unit {
        [
            Unit::Years,
            Unit::Months,
            Unit::Weeks,
            Unit::Days,
            Unit::Hours,
            Unit::Minutes,
            Unit::Seconds,
            Unit::Millis,
            Unit::Micros,
            Unit::Nanos,
        ][(i - 1) as usize]
    }
}

/// Cassandra's `Duration.Builder`: units in order, totals within range.
struct DurationBuilder {
    negative: bool,
    months: i64,
    days: i64,
    nanos: i64,
    current: u8,
}

impl DurationBuilder {
    fn new(negative: bool) -> Self {
        DurationBuilder {
            negative,
            months: 0,
            days: 0,
            nanos: 0,
            current: 0,
        }
    }

    fn add(&mut self, unit: Unit, n: i64) -> Result<(), ValueError> {
        let idx = unit as u8;
        if idx == self.current {
            return Err(ValueError::invalid(format!(
                "Invalid duration. The {} are specified multiple times",
                unit.name()
            )));
        }
        if idx < self.current {
            return Err(ValueError::invalid(format!(
                "Invalid duration. The {} should be after {}",
                Unit::from_index(self.current).name(),
                unit.name()
            )));
        }
        self.current = idx;
        let too_big = |what: &str| {
            ValueError::invalid(format!(
                "Invalid duration. The total number of {what} must be less or equal to {}",
                i32::MAX
            ))
        };
        let (field, per, what, max) = match unit {
            Unit::Years => (&mut self.months, 12, "months", i32::MAX as i64),
            Unit::Months => (&mut self.months, 1, "months", i32::MAX as i64),
            Unit::Weeks => (&mut self.days, 7, "days", i32::MAX as i64),
            Unit::Days => (&mut self.days, 1, "days", i32::MAX as i64),
            Unit::Hours => (&mut self.nanos, NANOS_PER_HOUR, "nanoseconds", i64::MAX),
            Unit::Minutes => (&mut self.nanos, NANOS_PER_MINUTE, "nanoseconds", i64::MAX),
            Unit::Seconds => (&mut self.nanos, NANOS_PER_SECOND, "nanoseconds", i64::MAX),
            Unit::Millis => (&mut self.nanos, NANOS_PER_MILLI, "nanoseconds", i64::MAX),
            Unit::Micros => (&mut self.nanos, NANOS_PER_MICRO, "nanoseconds", i64::MAX),
            Unit::Nanos => (&mut self.nanos, 1, "nanoseconds", i64::MAX),
        };
        if n > (max - *field) / per {
            return Err(too_big(what));
        }
        *field += n * per;
        Ok(())
    }

    fn build(self) -> DurationValue {
        let s = if self.negative { -1 } else { 1 };
        DurationValue {
            months: (s * self.months) as i32,
            days: (s * self.days) as i32,
            nanoseconds: s * self.nanos,
        }
    }
}

/// Parses a duration as Cassandra's `Duration.from`, in any of its three forms, each
/// optionally preceded by `-`:
///
/// * units: `1y2mo3w4d5h6m7s8ms9us10ns` (`µs` also means microseconds; units case-insensitive,
///   each at most once and in this order);
/// * ISO 8601: `P1Y2M3DT4H5M6S` (any part may be omitted) or `P3W`;
/// * ISO 8601 alternative: `P0001-02-03T04:05:06`.
pub fn parse_duration(input: &str) -> Result<DurationValue, ValueError> {
    let (negative, source) = match input.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, input),
    };
    let unable = || ValueError::invalid(format!("Unable to convert '{source}' to a duration"));
    let number = |d: &str| d.parse::<i64>().map_err(|_| unable());
    let mut b = DurationBuilder::new(negative);
    if let Some(body) = source.strip_prefix('P') {
        if let Some(weeks) = body.strip_suffix('W') {
            if weeks.is_empty() || !weeks.bytes().all(|c| c.is_ascii_digit()) {
                return Err(unable());
            }
            b.add(Unit::Weeks, number(weeks)?)?;
        } else if source.contains('-') {
            let bb = body.as_bytes();
            let shape = b"dddd-dd-ddTdd:dd:dd";
            if bb.len() != shape.len()
                || !bb.iter().zip(shape).all(|(&c, &p)| {
                    if p == b'd' {
                        c.is_ascii_digit()
                    } else {
                        c == p
                    }
                })
            {
                return Err(unable());
            }
            b.add(Unit::Years, number(&body[0..4])?)?;
            b.add(Unit::Months, number(&body[5..7])?)?;
            b.add(Unit::Days, number(&body[8..10])?)?;
            b.add(Unit::Hours, number(&body[11..13])?)?;
            b.add(Unit::Minutes, number(&body[14..16])?)?;
            b.add(Unit::Seconds, number(&body[17..19])?)?;
        } else {
            // P(nY)?(nM)?(nD)?(T(nH)?(nM)?(nS)?)?
            let (date_part, time_part) = match body.find('T') {
                Some(t) => (&body[..t], Some(&body[t + 1..])),
                None => (body, None),
            };
            let mut parts: Vec<(Unit, i64)> = Vec::new();
            iso_parts(
                date_part,
                &[
                    (b'Y', Unit::Years),
                    (b'M', Unit::Months),
                    (b'D', Unit::Days),
                ],
                &mut parts,
            )
            .ok_or_else(unable)?;
            if let Some(tp) = time_part {
                iso_parts(
                    tp,
                    &[
                        (b'H', Unit::Hours),
                        (b'M', Unit::Minutes),
                        (b'S', Unit::Seconds),
                    ],
                    &mut parts,
                )
                .ok_or_else(unable)?;
            }
            for (unit, n) in parts {
                b.add(unit, n)?;
            }
        }
        return Ok(b.build());
    }
    // standard format: one or more (\d+)(unit), covering the whole text
    let bytes = source.as_bytes();
    let mut i = 0;
    if bytes.is_empty() {
        return Err(unable());
    }
    while i < bytes.len() {
        let start = i;
        while i < bytes.len() && bytes[i].is_ascii_digit() {
            i += 1;
        }
        if i == start {
            return Err(unable());
        }
        let n = number(&source[start..i])?;
        let rest = &source[i..];
        let lower: String = rest.chars().take(2).collect::<String>().to_lowercase();
        let (unit, len) = if lower.starts_with("mo") {
            (Unit::Months, 2)
        } else if lower.starts_with("ms") {
            (Unit::Millis, 2)
        } else if lower.starts_with("us") {
            (Unit::Micros, 2)
        } else if lower.starts_with("µs") {
            (Unit::Micros, 'µ'.len_utf8() + 1)
        } else if lower.starts_with("ns") {
            (Unit::Nanos, 2)
        } else {
            match lower.chars().next() {
                Some('y') => (Unit::Years, 1),
                Some('w') => (Unit::Weeks, 1),
                Some('d') => (Unit::Days, 1),
                Some('h') => (Unit::Hours, 1),
                Some('s') => (Unit::Seconds, 1),
                Some('m') => (Unit::Minutes, 1),
                _ => return Err(unable()),
            }
        };
        b.add(unit, n)?;
        i += len;
    }
    Ok(b.build())
}

/// The `(\d+)X` groups of one half of an ISO 8601 duration, in the order of `units`.
fn iso_parts(s: &str, units: &[(u8, Unit)], out: &mut Vec<(Unit, i64)>) -> Option<()> {
    let b = s.as_bytes();
    let mut i = 0;
    let mut next_unit = 0;
    while i < b.len() {
        let start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        if i == start || i == b.len() {
            return None;
        }
        let pos = units[next_unit..].iter().position(|(c, _)| *c == b[i])? + next_unit;
        out.push((units[pos].1, s[start..i].parse().ok()?));
        next_unit = pos + 1;
        i += 1;
    }
    Some(())
}
