//! Textual forms of values: CQL literals (as cqlsh prints them), and the formatting helpers
//! (Java's number, date, time, inet and uuid texts) the JSON forms in `json.rs` share.

use std::fmt::Write as _;
use std::net::{Ipv4Addr, Ipv6Addr};

use num_bigint::BigInt;

use super::calendar::civil_from_days;
use super::codec::{parse_items, parse_tuple, parse_vector};
use super::literal::hex;
use super::{validate, vint};
use crate::cql::types::{quote_ident, CqlType};

// ---------------------------------------------------------------------------------------------
// shared formatting helpers
// ---------------------------------------------------------------------------------------------

pub(super) fn be_i64(v: &[u8]) -> i64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(v);
    i64::from_be_bytes(b)
}

/// Java's `Double.toString` / `Float.toString` layout for the shortest digits that identify
/// the value: plain notation for 10^-3 <= |x| < 10^7 (`100.0`, `0.001`), otherwise
/// `d.dddE±n` (`1.0E7`, `1.0E-4`).
fn java_fp_string(sci: String) -> String {
    // `sci` is Rust's `{:e}` form: `-1.2345e-5`, `1e7`, `0e0`
    let (neg, body) = match sci.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, sci.as_str()),
    };
    let (mant, exp) = body.split_once('e').unwrap_or((body, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let digits: String = mant.chars().filter(|c| *c != '.').collect();
    let mut s = String::new();
    if neg {
        s.push('-');
    }
    if digits.chars().all(|c| c == '0') {
        s.push_str("0.0");
        return s;
    }
    if (-3..7).contains(&exp) {
        if exp >= 0 {
            let int_len = exp as usize + 1;
            if digits.len() <= int_len {
                s.push_str(&digits);
                s.extend(std::iter::repeat_n('0', int_len - digits.len()));
                s.push_str(".0");
            } else {
                s.push_str(&digits[..int_len]);
                s.push('.');
                s.push_str(&digits[int_len..]);
            }
        } else {
            s.push_str("0.");
            s.extend(std::iter::repeat_n('0', (-exp - 1) as usize));
            s.push_str(&digits);
        }
    } else {
        s.push_str(&digits[..1]);
        s.push('.');
        if digits.len() > 1 {
            s.push_str(&digits[1..]);
        } else {
            s.push('0');
        }
        let _ = write!(s, "E{exp}");
    }
    s
}

pub(crate) fn java_double(x: f64) -> String {
    if x.is_nan() {
        "NaN".into()
    } else if x.is_infinite() {
        if x > 0.0 { "Infinity" } else { "-Infinity" }.into()
    } else {
        java_fp_string(format!("{x:e}"))
    }
}

pub(crate) fn java_float(x: f32) -> String {
    if x.is_nan() {
        "NaN".into()
    } else if x.is_infinite() {
        if x > 0.0 { "Infinity" } else { "-Infinity" }.into()
    } else {
        java_fp_string(format!("{x:e}"))
    }
}

/// Java's `BigDecimal.toString` (also Python's `str(Decimal)`, which cqlsh prints): plain
/// notation when the scale is non-negative and the adjusted exponent is at least -6,
/// scientific (`1E+3`, `-1.23E-12`) otherwise.
pub(crate) fn decimal_string(v: &[u8]) -> String {
    let scale = i32::from_be_bytes([v[0], v[1], v[2], v[3]]) as i64;
    let unscaled = BigInt::from_signed_bytes_be(&v[4..]);
    let neg = unscaled.sign() == num_bigint::Sign::Minus;
    let coeff = unscaled.magnitude().to_string();
    let adjusted = -scale + (coeff.len() as i64 - 1);
    let mut s = String::new();
    if neg {
        s.push('-');
    }
    if scale >= 0 && adjusted >= -6 {
        let scale = scale as usize;
        if scale == 0 {
            s.push_str(&coeff);
        } else if coeff.len() > scale {
            s.push_str(&coeff[..coeff.len() - scale]);
            s.push('.');
            s.push_str(&coeff[coeff.len() - scale..]);
        } else {
            s.push_str("0.");
            s.extend(std::iter::repeat_n('0', scale - coeff.len()));
            s.push_str(&coeff);
        }
    } else {
        s.push_str(&coeff[..1]);
        if coeff.len() > 1 {
            s.push('.');
            s.push_str(&coeff[1..]);
        }
        s.push('E');
        if adjusted > 0 {
            s.push('+');
        }
        let _ = write!(s, "{adjusted}");
    }
    s
}

/// Cassandra's `Duration.toString`: `-1y2mo3d4h5m6s7ms8us9ns`, empty for a zero duration.
pub(crate) fn duration_string(months: i32, days: i32, nanos: i64) -> String {
    fn append(s: &mut String, dividend: u64, divisor: u64, unit: &str) -> u64 {
        if dividend == 0 || dividend < divisor {
            return dividend;
        }
        let _ = write!(s, "{}{unit}", dividend / divisor);
        dividend % divisor
    }
    let mut s = String::new();
    if months < 0 || days < 0 || nanos < 0 {
        s.push('-');
    }
    let rem = append(&mut s, months.unsigned_abs() as u64, 12, "y");
    append(&mut s, rem, 1, "mo");
    append(&mut s, days.unsigned_abs() as u64, 1, "d");
    if nanos != 0 {
        let mut rem = append(&mut s, nanos.unsigned_abs(), 3_600_000_000_000, "h");
        rem = append(&mut s, rem, 60_000_000_000, "m");
        rem = append(&mut s, rem, 1_000_000_000, "s");
        rem = append(&mut s, rem, 1_000_000, "ms");
        rem = append(&mut s, rem, 1_000, "us");
        append(&mut s, rem, 1, "ns");
    }
    s
}

pub(super) const NANOS_PER_DAY: i64 = 86_400_000_000_000;

/// `hh:mm:ss.nnnnnnnnn` (Cassandra's `TimeSerializer.toString`, also what cqlsh prints).
pub(super) fn time_string(nanos: i64) -> String {
    let n = nanos.rem_euclid(NANOS_PER_DAY);
    let (sec, frac) = (n / 1_000_000_000, n % 1_000_000_000);
    format!(
        "{:02}:{:02}:{:02}.{:09}",
        sec / 3600,
        (sec / 60) % 60,
        sec % 60,
        frac
    )
}

pub(super) fn year_string(y: i64) -> String {
    if y < 0 {
        format!("-{:04}", -y)
    } else {
        format!("{y:04}")
    }
}

/// Julian calendar date of a day number (days since 1970-01-01).
fn julian_from_days(days: i64) -> (i64, u32, u32) {
    let jdn = days + 2_440_588;
    let c = jdn + 32_082;
    let d = (4 * c + 3).div_euclid(1461);
    let e = c - (1461 * d).div_euclid(4);
    let m = (5 * e + 2).div_euclid(153);
    let day = e - (153 * m + 2).div_euclid(5) + 1;
    let month = m + 3 - 12 * m.div_euclid(10);
    let year = d - 4800 + m.div_euclid(10);
    (year, month as u32, day as u32)
}

/// The first day of the Gregorian calendar in `java.util.GregorianCalendar` (1582-10-15).
const GREGORIAN_CUTOVER_DAY: i64 = -141_427;

/// A timestamp as Cassandra's JSON formatter prints it: `yyyy-MM-dd HH:mm:ss.SSSZ` in UTC,
/// through `java.text.SimpleDateFormat` (Julian calendar before 1582-10-15, years before 1 AD
/// printed as years of the BC era).
pub(super) fn timestamp_json_string(ms: i64) -> String {
    let days = ms.div_euclid(86_400_000);
    let ms_of_day = ms.rem_euclid(86_400_000);
    let (y, m, d) = if days < GREGORIAN_CUTOVER_DAY {
        julian_from_days(days)
    } else {
        civil_from_days(days)
    };
    let year_of_era = if y <= 0 { 1 - y } else { y };
    format!(
        "{:04}-{:02}-{:02} {:02}:{:02}:{:02}.{:03}Z",
        year_of_era,
        m,
        d,
        ms_of_day / 3_600_000,
        (ms_of_day / 60_000) % 60,
        (ms_of_day / 1000) % 60,
        ms_of_day % 1000
    )
}

/// Java's `InetAddress.getHostAddress`: IPv6 groups in lowercase hex without compression;
/// IPv4-mapped addresses become IPv4.
pub(super) fn inet_java_string(v: &[u8]) -> String {
    if v.len() == 4 {
        return Ipv4Addr::new(v[0], v[1], v[2], v[3]).to_string();
    }
    let mut a = [0u8; 16];
    a.copy_from_slice(v);
    let ip = Ipv6Addr::from(a);
    if let Some(v4) = ip.to_ipv4_mapped() {
        return v4.to_string();
    }
    ip.segments()
        .iter()
        .map(|s| format!("{s:x}"))
        .collect::<Vec<_>>()
        .join(":")
}

fn inet_cqlsh_string(v: &[u8]) -> String {
    if v.len() == 4 {
        return Ipv4Addr::new(v[0], v[1], v[2], v[3]).to_string();
    }
    let mut a = [0u8; 16];
    a.copy_from_slice(v);
    Ipv6Addr::from(a).to_string()
}

pub(super) fn uuid_string(v: &[u8]) -> String {
    let mut a = [0u8; 16];
    a.copy_from_slice(v);
    uuid::Uuid::from_bytes(a).hyphenated().to_string()
}

fn quote_cql_string(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

pub(super) fn json_string(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into())
}

// ---------------------------------------------------------------------------------------------
// CQL literals
// ---------------------------------------------------------------------------------------------

/// A value that has no literal of its own (the empty value of a non-string type, or bytes that
/// do not validate): `blobAsInt(0x...)` for native types, `0x...` otherwise.
fn opaque_literal(ty: &CqlType, v: &[u8]) -> String {
    let native = !matches!(
        ty,
        CqlType::List(_)
            | CqlType::Set(_)
            | CqlType::Map(_, _)
            | CqlType::Tuple(_)
            | CqlType::Udt(_)
            | CqlType::Vector(_, _)
            | CqlType::Custom(_)
            | CqlType::Blob
    );
    if native {
        let name = ty.to_string();
        let mut cap = name[..1].to_uppercase();
        cap.push_str(&name[1..]);
        format!("blobAs{cap}(0x{})", hex(v))
    } else {
        format!("0x{}", hex(v))
    }
}

/// Prints a value as a CQL literal, the way cqlsh shows values nested in collections (so that
/// the text can be pasted back into a statement):
///
/// * `text`, `ascii`: `'it''s'`; `blob`: `0x0102`; `boolean`: `true` / `false`;
/// * numbers: decimal digits; `float` / `double` in Java's shortest form (`1.5`, `1.0E20`,
///   `NaN`, `Infinity`); `decimal` as `BigDecimal.toString` (`1.50`, `1E+3`);
/// * `timestamp`: `'2024-01-02 03:04:05.678000+0000'` (cqlsh's format, UTC), or the number of
///   milliseconds outside years 1 to 9999; `date`: `'2024-01-02'`, or the raw unsigned day
///   number outside years 1 to 9999; `time`: `'03:04:05.678901234'`;
/// * `uuid`, `timeuuid`: bare; `inet`: `'127.0.0.1'`, `'::1'`; `duration`: `1h30m` (`0s` for a
///   zero duration, which Cassandra prints as an empty string);
/// * `[1, 2]`, `{1, 2}`, `{'k': 1}`, tuples `(1, 'a', null)`, UDTs `{f: 1, g: null}` (all
///   fields, quoted when needed), vectors `[1.0, 2.0]`.
///
/// The empty value of a non-string type and bytes that fail [`validate`] print as
/// `blobAsInt(0x...)` (native types) or `0x...`.
pub fn to_cql_literal(ty: &CqlType, v: &[u8]) -> String {
    let ty = ty.unfrozen();
    let string_like = matches!(
        ty,
        CqlType::Ascii | CqlType::Text | CqlType::Blob | CqlType::Custom(_)
    );
    if (v.is_empty() && !string_like) || validate(ty, v).is_err() {
        return opaque_literal(ty, v);
    }
    match ty {
        CqlType::Ascii | CqlType::Text => quote_cql_string(&String::from_utf8_lossy(v)),
        CqlType::Blob | CqlType::Custom(_) => format!("0x{}", hex(v)),
        CqlType::Boolean => (v[0] != 0).to_string(),
        CqlType::Tinyint => (v[0] as i8).to_string(),
        CqlType::Smallint => i16::from_be_bytes([v[0], v[1]]).to_string(),
        CqlType::Int => i32::from_be_bytes([v[0], v[1], v[2], v[3]]).to_string(),
        CqlType::Bigint | CqlType::Counter => be_i64(v).to_string(),
        CqlType::Varint => BigInt::from_signed_bytes_be(v).to_string(),
        CqlType::Decimal => decimal_string(v),
        CqlType::Float => java_float(f32::from_be_bytes([v[0], v[1], v[2], v[3]])),
        CqlType::Double => java_double(f64::from_bits(be_i64(v) as u64)),
        CqlType::Timestamp => {
            let ms = be_i64(v);
            let days = ms.div_euclid(86_400_000);
            let (y, m, d) = civil_from_days(days);
            if !(1..=9999).contains(&y) {
                return ms.to_string();
            }
            let r = ms.rem_euclid(86_400_000);
            format!(
                "'{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}.{:06}+0000'",
                r / 3_600_000,
                (r / 60_000) % 60,
                (r / 1000) % 60,
                (r % 1000) * 1000
            )
        }
        CqlType::Date => {
            let raw = u32::from_be_bytes([v[0], v[1], v[2], v[3]]);
            let (y, m, d) = civil_from_days(raw as i64 - (1i64 << 31));
            if (1..=9999).contains(&y) {
                format!("'{y:04}-{m:02}-{d:02}'")
            } else {
                raw.to_string()
            }
        }
        CqlType::Time => match be_i64(v) {
            n @ 0..NANOS_PER_DAY => format!("'{}'", time_string(n)),
            _ => opaque_literal(ty, v),
        },
        CqlType::Uuid | CqlType::Timeuuid => uuid_string(v),
        CqlType::Inet => format!("'{}'", inet_cqlsh_string(v)),
        CqlType::Duration => match vint::decode_duration(v) {
            Ok((0, 0, 0)) => "0s".into(),
            Ok((mo, d, n)) => duration_string(mo, d, n),
            Err(_) => opaque_literal(ty, v),
        },
        CqlType::List(elem) | CqlType::Set(elem) => {
            let items = parse_items(v, 1).unwrap_or_default();
            let parts: Vec<String> = items
                .iter()
                .map(|e| e.map_or("null".into(), |e| to_cql_literal(elem, e)))
                .collect();
            if matches!(ty, CqlType::List(_)) {
                format!("[{}]", parts.join(", "))
            } else {
                format!("{{{}}}", parts.join(", "))
            }
        }
        CqlType::Map(k, val) => {
            let items = parse_items(v, 2).unwrap_or_default();
            let parts: Vec<String> = items
                .chunks(2)
                .map(|kv| {
                    format!(
                        "{}: {}",
                        kv[0].map_or("null".into(), |x| to_cql_literal(k, x)),
                        kv[1].map_or("null".into(), |x| to_cql_literal(val, x))
                    )
                })
                .collect();
            format!("{{{}}}", parts.join(", "))
        }
        CqlType::Tuple(types) => {
            let comps = parse_tuple(v, types.len()).unwrap_or_default();
            let parts: Vec<String> = types
                .iter()
                .enumerate()
                .map(|(i, t)| match comps.get(i) {
                    Some(Some(c)) => to_cql_literal(t, c),
                    _ => "null".into(),
                })
                .collect();
            format!("({})", parts.join(", "))
        }
        CqlType::Udt(udt) => {
            let comps = parse_tuple(v, udt.fields.len()).unwrap_or_default();
            let parts: Vec<String> = udt
                .fields
                .iter()
                .enumerate()
                .map(|(i, (name, t))| {
                    let value = match comps.get(i) {
                        Some(Some(c)) => to_cql_literal(t, c),
                        _ => "null".into(),
                    };
                    format!("{}: {value}", quote_ident(name))
                })
                .collect();
            format!("{{{}}}", parts.join(", "))
        }
        CqlType::Vector(elem, dim) => {
            let elems = parse_vector(elem, *dim, v).unwrap_or_default();
            let parts: Vec<String> = elems.iter().map(|e| to_cql_literal(elem, e)).collect();
            format!("[{}]", parts.join(", "))
        }
        CqlType::Frozen(inner) => to_cql_literal(inner, v),
    }
}
