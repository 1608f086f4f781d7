//! `compare`: Cassandra's comparators, and the order-defining transforms shared with the key
//! encoding (`super::key`), so that both cannot drift apart.

use std::cmp::Ordering;

use num_bigint::{BigInt, Sign};

use super::codec::{parse_items, parse_tuple, parse_vector};
use crate::cql::types::CqlType;

/// Compares two serialized values of type `ty` as Cassandra 5.0 does:
///
/// * `tinyint`, `smallint`, `int`, `bigint`, `counter`, `timestamp`: signed numeric order;
/// * `varint`, `decimal`: numeric value, whatever the encoding (`decimal` 1.0 equals 1.00,
///   `varint` 0x01 equals 0x0001);
/// * `float`, `double`: Java's `Float.compare` / `Double.compare` (-0.0 < 0.0, every NaN is
///   equal to every other NaN and greater than +Infinity);
/// * `boolean`: false < true (every non-zero byte is true);
/// * `ascii`, `text`, `blob`, `inet`, `duration`, `date`, `time`, custom types: unsigned
///   byte order (for `date` that is the unsigned day number; `time` values are non-negative
///   nanoseconds, so byte order is numeric order);
/// * `uuid` (UUIDType): version first; then, for version 1, the timestamp, otherwise the most
///   significant 8 bytes unsigned; then the least significant 8 bytes unsigned;
/// * `timeuuid` (TimeUUIDType): the timestamp, then the clock sequence and node compared as
///   *signed* bytes;
/// * frozen `list`/`set`: element by element, then the shorter first; `map`: key, value, key,
///   value…, then the shorter first;
/// * tuples and UDTs: component by component, null before any value, and trailing null
///   components are ignored (`(1)` equals `(1, null)`), as `TupleType.compareCustom` in 5.0;
/// * vectors: element by element.
///
/// The empty value sorts before every other value of its type. Values that do not have the
/// structure of their type (which [`super::validate`] rejects) sort after all well-formed
/// values, among themselves by unsigned bytes; this never panics.
pub fn compare(ty: &CqlType, a: &[u8], b: &[u8]) -> Ordering {
    match ty.unfrozen() {
        CqlType::Ascii
        | CqlType::Text
        | CqlType::Blob
        | CqlType::Inet
        | CqlType::Duration
        | CqlType::Custom(_) => a.cmp(b),
        CqlType::Tinyint => fixed(a, b, 1, cmp_signed),
        CqlType::Smallint => fixed(a, b, 2, cmp_signed),
        CqlType::Int => fixed(a, b, 4, cmp_signed),
        CqlType::Bigint | CqlType::Counter | CqlType::Timestamp => fixed(a, b, 8, cmp_signed),
        CqlType::Date => fixed(a, b, 4, |x, y| x.cmp(y)),
        CqlType::Time => fixed(a, b, 8, |x, y| x.cmp(y)),
        CqlType::Boolean => fixed(a, b, 1, |x, y| (x[0] != 0).cmp(&(y[0] != 0))),
        CqlType::Float => fixed(a, b, 4, |x, y| float_order(x).cmp(&float_order(y))),
        CqlType::Double => fixed(a, b, 8, |x, y| double_order(x).cmp(&double_order(y))),
        CqlType::Uuid => fixed(a, b, 16, |x, y| uuid_order(x).cmp(&uuid_order(y))),
        CqlType::Timeuuid => fixed(a, b, 16, |x, y| timeuuid_order(x).cmp(&timeuuid_order(y))),
        CqlType::Varint => match (a.is_empty(), b.is_empty()) {
            (false, false) => cmp_varint(a, b),
            (ea, eb) => eb.cmp(&ea),
        },
        CqlType::Decimal => {
            let (ca, cb) = (decimal_class(a), decimal_class(b));
            match (ca, cb) {
                (Class::Valid, Class::Valid) => {
                    let (na, nb) = (DecimalNorm::new(a), DecimalNorm::new(b));
                    na.cmp_value(&nb)
                }
                _ => cmp_classes(ca, cb, a, b),
            }
        }
        CqlType::List(elem) | CqlType::Set(elem) => cmp_items(&[elem], a, b),
        CqlType::Map(k, v) => cmp_items(&[k, v], a, b),
        CqlType::Tuple(types) => cmp_tuple(&types.iter().collect::<Vec<_>>(), a, b),
        CqlType::Udt(udt) => {
            cmp_tuple(&udt.fields.iter().map(|(_, t)| t).collect::<Vec<_>>(), a, b)
        }
        CqlType::Vector(elem, dim) => cmp_vector(elem, *dim, a, b),
        CqlType::Frozen(inner) => compare(inner, a, b),
    }
}

/// How a value relates to the structure of its type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Class {
    Empty,
    Valid,
    Invalid,
}

pub(crate) fn fixed_class(v: &[u8], size: usize) -> Class {
    match v.len() {
        0 => Class::Empty,
        n if n == size => Class::Valid,
        _ => Class::Invalid,
    }
}

pub(crate) fn decimal_class(v: &[u8]) -> Class {
    match v.len() {
        0 => Class::Empty,
        // a scale without an unscaled value cannot be read back by Java's BigInteger
        1..=4 => Class::Invalid,
        _ => Class::Valid,
    }
}

fn cmp_classes(ca: Class, cb: Class, a: &[u8], b: &[u8]) -> Ordering {
    match (ca, cb) {
        (Class::Invalid, Class::Invalid) => a.cmp(b),
        _ => ca.cmp(&cb),
    }
}

fn fixed(a: &[u8], b: &[u8], size: usize, f: impl Fn(&[u8], &[u8]) -> Ordering) -> Ordering {
    let (ca, cb) = (fixed_class(a, size), fixed_class(b, size));
    match (ca, cb) {
        (Class::Valid, Class::Valid) => f(a, b),
        _ => cmp_classes(ca, cb, a, b),
    }
}

/// Two's complement big-endian integers of the same length.
fn cmp_signed(a: &[u8], b: &[u8]) -> Ordering {
    (a[0] ^ 0x80)
        .cmp(&(b[0] ^ 0x80))
        .then_with(|| a[1..].cmp(&b[1..]))
}

/// The transform making IEEE bits sort as Java's `Float.compare`: negative numbers have all
/// bits flipped, others only the sign bit.
pub(crate) fn float_bits_order(bits: u32) -> u32 {
    if bits & 0x8000_0000 != 0 {
        !bits
    } else {
        bits ^ 0x8000_0000
    }
}

pub(crate) fn double_bits_order(bits: u64) -> u64 {
    if bits & 0x8000_0000_0000_0000 != 0 {
        !bits
    } else {
        bits ^ 0x8000_0000_0000_0000
    }
}

pub(crate) const FLOAT_NAN: u32 = 0x7FC0_0000;
pub(crate) const DOUBLE_NAN: u64 = 0x7FF8_0000_0000_0000;

/// Order key of a 4-byte float (NaNs all mapped to the canonical NaN, as `floatToIntBits`).
pub(crate) fn float_order(v: &[u8]) -> u32 {
    let bits = u32::from_be_bytes([v[0], v[1], v[2], v[3]]);
    if f32::from_bits(bits).is_nan() {
        float_bits_order(FLOAT_NAN)
    } else {
        float_bits_order(bits)
    }
}

pub(crate) fn double_order(v: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(v);
    let bits = u64::from_be_bytes(b);
    if f64::from_bits(bits).is_nan() {
        double_bits_order(DOUBLE_NAN)
    } else {
        double_bits_order(bits)
    }
}

/// `(x << 48) | ((x << 16) & 0xFFFF00000000) | (x >>> 32)`: the most significant long of a
/// version 1 uuid reordered as time_hi (with the version), time_mid, time_low.
pub(crate) fn reorder_timestamp(x: u64) -> u64 {
    (x << 48) | ((x << 16) & 0xFFFF_0000_0000) | (x >> 32)
}

pub(crate) fn reorder_timestamp_back(x: u64) -> u64 {
    (x << 32) | ((x >> 16) & 0xFFFF_0000) | (x >> 48)
}

fn be64(v: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&v[..8]);
    u64::from_be_bytes(b)
}

/// 16 bytes whose unsigned order is UUIDType's order.
pub(crate) fn uuid_order(v: &[u8]) -> [u8; 16] {
    let msb = be64(&v[..8]);
    let version = (msb >> 12) & 0xF;
    let hi = if version == 1 {
        reorder_timestamp(msb)
    } else {
        (version << 60) | ((msb >> 4) & 0x0FFF_FFFF_FFFF_F000) | (msb & 0xFFF)
    };
    let mut out = [0u8; 16];
    out[..8].copy_from_slice(&hi.to_be_bytes());
    out[8..].copy_from_slice(&v[8..16]);
    out
}

pub(crate) fn uuid_order_back(k: &[u8; 16]) -> [u8; 16] {
    let hi = be64(&k[..8]);
    let version = hi >> 60;
    let msb = if version == 1 {
        reorder_timestamp_back(hi)
    } else {
        ((hi << 4) & 0xFFFF_FFFF_FFFF_0000) | (version << 12) | (hi & 0xFFF)
    };
    let mut out = [0u8; 16];
    out[..8].copy_from_slice(&msb.to_be_bytes());
    out[8..].copy_from_slice(&k[8..]);
    out
}

/// 16 bytes whose unsigned order is TimeUUIDType's order (lsb bytes compared signed).
pub(crate) fn timeuuid_order(v: &[u8]) -> [u8; 16] {
    let mut out = [0u8; 16];
    out[..8].copy_from_slice(&reorder_timestamp(be64(&v[..8])).to_be_bytes());
    for i in 8..16 {
        out[i] = v[i] ^ 0x80;
    }
    out
}

pub(crate) fn timeuuid_order_back(k: &[u8; 16]) -> [u8; 16] {
    let mut out = [0u8; 16];
    out[..8].copy_from_slice(&reorder_timestamp_back(be64(&k[..8])).to_be_bytes());
    for i in 8..16 {
        out[i] = k[i] ^ 0x80;
    }
    out
}

/// The minimal two's complement form of a non-empty varint and the number of redundant sign
/// bytes in front of it.
pub(crate) fn varint_minimal(v: &[u8]) -> (&[u8], usize) {
    let mut i = 0;
    while i + 1 < v.len()
        && ((v[i] == 0x00 && v[i + 1] & 0x80 == 0) || (v[i] == 0xFF && v[i + 1] & 0x80 != 0))
    {
        i += 1;
    }
    (&v[i..], i)
}

fn cmp_varint(a: &[u8], b: &[u8]) -> Ordering {
    let (ma, _) = varint_minimal(a);
    let (mb, _) = varint_minimal(b);
    let (na, nb) = (ma[0] & 0x80 != 0, mb[0] & 0x80 != 0);
    match (na, nb) {
        (true, false) => Ordering::Less,
        (false, true) => Ordering::Greater,
        (false, false) => ma.len().cmp(&mb.len()).then_with(|| ma.cmp(mb)),
        (true, true) => mb.len().cmp(&ma.len()).then_with(|| ma.cmp(mb)),
    }
}

/// A non-zero decimal written `±0.d1…dn × 10^exp` with `d1 ≠ 0`, `dn ≠ 0`, plus what is
/// needed to rebuild the exact original serialization.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DecimalNorm {
    /// -1, 0 or 1.
    pub sign: i8,
    /// The decimal exponent (meaningless for zero).
    pub exp: i64,
    /// ASCII digits of the magnitude without trailing zeros (empty for zero).
    pub digits: Vec<u8>,
    /// Trailing zeros removed from the unscaled value.
    pub zeros: u64,
    /// Redundant sign bytes of the unscaled varint.
    pub pad: usize,
    /// The original scale.
    pub scale: i32,
}

impl DecimalNorm {
    /// `v` must have at least 5 bytes (`decimal_class` is `Valid`).
    pub(crate) fn new(v: &[u8]) -> Self {
        let scale = i32::from_be_bytes([v[0], v[1], v[2], v[3]]);
        let (min, pad) = varint_minimal(&v[4..]);
        let unscaled = BigInt::from_signed_bytes_be(min);
        let sign = match unscaled.sign() {
            Sign::Minus => -1,
            Sign::NoSign => 0,
            Sign::Plus => 1,
        };
        if sign == 0 {
            return DecimalNorm {
                sign,
                exp: 0,
                digits: Vec::new(),
                zeros: 0,
                pad,
                scale,
            };
        }
        let mut digits = unscaled.magnitude().to_string().into_bytes();
        let kept = digits.iter().rposition(|&d| d != b'0').map_or(0, |p| p + 1);
        let zeros = (digits.len() - kept) as u64;
        digits.truncate(kept);
        let exp = digits.len() as i64 + zeros as i64 - scale as i64;
        DecimalNorm {
            sign,
            exp,
            digits,
            zeros,
            pad,
            scale,
        }
    }

    /// Numeric comparison (`BigDecimal.compareTo`).
    pub(crate) fn cmp_value(&self, other: &Self) -> Ordering {
        match self.sign.cmp(&other.sign) {
            Ordering::Equal => {}
            o => return o,
        }
        let magnitude = self
            .exp
            .cmp(&other.exp)
            .then_with(|| self.digits.cmp(&other.digits));
        match self.sign {
            1 => magnitude,
            -1 => magnitude.reverse(),
            _ => Ordering::Equal,
        }
    }
}

/// One item of a composite: null sorts before any value.
fn cmp_opt(ty: &CqlType, a: Option<&[u8]>, b: Option<&[u8]>) -> Ordering {
    match (a, b) {
        (Some(x), Some(y)) => compare(ty, x, y),
        (x, y) => x.is_some().cmp(&y.is_some()),
    }
}

fn items_class(v: &[u8], per_entry: u64) -> (Class, Vec<Option<&[u8]>>) {
    if v.is_empty() {
        return (Class::Empty, Vec::new());
    }
    match parse_items(v, per_entry) {
        Ok(items) if (items.len() as u64).is_multiple_of(per_entry) => (Class::Valid, items),
        _ => (Class::Invalid, Vec::new()),
    }
}

/// Lists and sets (`types` = [element]) or maps (`types` = [key, value]).
fn cmp_items(types: &[&CqlType], a: &[u8], b: &[u8]) -> Ordering {
    let per = types.len() as u64;
    let (ca, ia) = items_class(a, per);
    let (cb, ib) = items_class(b, per);
    if (ca, cb) != (Class::Valid, Class::Valid) {
        return cmp_classes(ca, cb, a, b);
    }
    for (i, (x, y)) in ia.iter().zip(ib.iter()).enumerate() {
        let o = cmp_opt(types[i % types.len()], *x, *y);
        if o != Ordering::Equal {
            return o;
        }
    }
    ia.len().cmp(&ib.len())
}

/// Tuple components without their trailing nulls, and how many trailing nulls there were.
pub(crate) fn tuple_class(v: &[u8], types: usize) -> (Class, Vec<Option<&[u8]>>, usize) {
    if v.is_empty() {
        return (Class::Empty, Vec::new(), 0);
    }
    match parse_tuple(v, types) {
        Ok(mut comps) => {
            let kept = comps.iter().rposition(|c| c.is_some()).map_or(0, |p| p + 1);
            let trailing = comps.len() - kept;
            comps.truncate(kept);
            (Class::Valid, comps, trailing)
        }
        Err(_) => (Class::Invalid, Vec::new(), 0),
    }
}

fn cmp_tuple(types: &[&CqlType], a: &[u8], b: &[u8]) -> Ordering {
    let (ca, ia, _) = tuple_class(a, types.len());
    let (cb, ib, _) = tuple_class(b, types.len());
    if (ca, cb) != (Class::Valid, Class::Valid) {
        return cmp_classes(ca, cb, a, b);
    }
    for (i, (x, y)) in ia.iter().zip(ib.iter()).enumerate() {
        let o = cmp_opt(types[i], *x, *y);
        if o != Ordering::Equal {
            return o;
        }
    }
    ia.len().cmp(&ib.len())
}

pub(crate) fn vector_class<'a>(elem: &CqlType, dim: u32, v: &'a [u8]) -> (Class, Vec<&'a [u8]>) {
    if v.is_empty() {
        return (Class::Empty, Vec::new());
    }
    match parse_vector(elem, dim, v) {
        Ok(e) => (Class::Valid, e),
        Err(_) => (Class::Invalid, Vec::new()),
    }
}

fn cmp_vector(elem: &CqlType, dim: u32, a: &[u8], b: &[u8]) -> Ordering {
    let (ca, ea) = vector_class(elem, dim, a);
    let (cb, eb) = vector_class(elem, dim, b);
    if (ca, cb) != (Class::Valid, Class::Valid) {
        return cmp_classes(ca, cb, a, b);
    }
    for (x, y) in ea.iter().zip(eb.iter()) {
        let o = compare(elem, x, y);
        if o != Ordering::Equal {
            return o;
        }
    }
    Ordering::Equal
}
