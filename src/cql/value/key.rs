//! The order-preserving, self-delimiting key encoding described in the module documentation.
//!
//! Every value is encoded in two parts: the *order part*, which alone defines the order and is
//! identical for values Cassandra compares as equal, and the *suffix*, the extra information
//! needed to rebuild the exact serialized bytes. Inside a composite value the order parts of
//! the elements are nested in the composite's order part and their suffixes are collected, in
//! the same depth-first order, into the composite's suffix. A key is the order part followed
//! by the suffix; a multi-column key ([`encode_composite_key`]) is all the order parts followed
//! by all the suffixes.

use num_bigint::{BigInt, BigUint, Sign};

use super::codec::{encode_vector, parse_items};
use super::compare::{
    decimal_class, double_bits_order, fixed_class, float_bits_order, timeuuid_order,
    timeuuid_order_back, tuple_class, uuid_order, uuid_order_back, varint_minimal, vector_class,
    Class, DecimalNorm, DOUBLE_NAN, FLOAT_NAN,
};
use super::ValueError;
use crate::cql::types::CqlType;

const EMPTY: u8 = 0x00;
const PRESENT: u8 = 0x01;
const INVALID: u8 = 0xFE;
const ITEM_END: u8 = 0x00;
const ITEM_NULL: u8 = 0x01;
const ITEM_VALUE: u8 = 0x02;

/// Largest run of redundant sign bytes or stripped decimal zeros a decoded key may ask for;
/// bounds the memory a corrupt key can make the decoder allocate.
const MAX_EXPANSION: u64 = 1 << 24;

fn complement(bytes: &mut [u8]) {
    for b in bytes {
        *b = !*b;
    }
}

/// Appends the key encoding of the serialized value `v` of type `ty` to `out`: ascending, or
/// descending (every byte complemented) when `desc`. See the module documentation for the
/// format and its guarantees. Never fails: values that do not have their type's structure get
/// an encoding that sorts after all well-formed values.
///
/// Keys of several columns may be concatenated; they then compare column by column, except
/// that a column whose values Cassandra considers equal while their bytes differ (`decimal`
/// 1.0 and 1.00) is ordered by those bytes before the next column is looked at. Use
/// [`encode_composite_key`] to get Cassandra's order in that case too.
pub fn encode_key(ty: &CqlType, v: &[u8], desc: bool, out: &mut Vec<u8>) {
    let start = out.len();
    let mut suffix = Vec::new();
    enc(ty, v, out, &mut suffix);
    out.extend_from_slice(&suffix);
    if desc {
        complement(&mut out[start..]);
    }
}

/// Reads one key written by [`encode_key`] (ascending, or descending when `desc`) from the
/// front of `input`, advances `input` past it and returns the exact serialized value.
pub fn decode_key(ty: &CqlType, input: &mut &[u8], desc: bool) -> Result<Vec<u8>, ValueError> {
    let mask = if desc { 0xFF } else { 0x00 };
    let mut probe = Reader::new(input, 0, mask);
    skip(ty, &mut probe)?;
    let mut ord = Reader::new(input, 0, mask);
    let mut suf = Reader::new(input, probe.pos, mask);
    let v = dec(ty, &mut ord, &mut suf)?;
    if ord.pos != probe.pos {
        return Err(ValueError::corrupt("order part and suffix disagree"));
    }
    *input = &input[suf.pos..];
    Ok(v)
}

/// Appends the key of a row made of several columns, `(type, value, descending)` each: the
/// order parts of all the columns, then their suffixes. Such keys compare exactly as
/// Cassandra's clustering comparator compares the rows (column by column, each ascending or
/// descending, values Cassandra considers equal being equal), with the suffixes only breaking
/// ties between different serializations of equal values.
///
/// Returns the length of the order parts: two rows that Cassandra considers the same row have
/// the same first `n` bytes, so a store can detect them with a prefix lookup.
pub fn encode_composite_key(columns: &[(&CqlType, &[u8], bool)], out: &mut Vec<u8>) -> usize {
    let start = out.len();
    let mut suffixes = Vec::new();
    for (ty, v, desc) in columns {
        let col = out.len();
        let suf = suffixes.len();
        enc(ty, v, out, &mut suffixes);
        if *desc {
            complement(&mut out[col..]);
            complement(&mut suffixes[suf..]);
        }
    }
    let order_len = out.len() - start;
    out.extend_from_slice(&suffixes);
    order_len
}

/// Reads a key written by [`encode_composite_key`] for columns of the given types and
/// directions from the front of `input`, advances `input` past it and returns the exact
/// serialized values.
pub fn decode_composite_key(
    columns: &[(&CqlType, bool)],
    input: &mut &[u8],
) -> Result<Vec<Vec<u8>>, ValueError> {
    let mut values = Vec::with_capacity(columns.len());
    decode_composite_key_with(columns, input, |v| values.push(v))?;
    Ok(values)
}

/// [`decode_composite_key`] handing each value to `each`, in order (scans decode a key per
/// row: no list of their own).
pub fn decode_composite_key_with(
    columns: &[(&CqlType, bool)],
    input: &mut &[u8],
    mut each: impl FnMut(Vec<u8>),
) -> Result<(), ValueError> {
    let mask = |desc: bool| if desc { 0xFF } else { 0x00 };
    let mut probe = Reader::new(input, 0, 0);
    for (ty, desc) in columns {
        probe.mask = mask(*desc);
        skip(ty, &mut probe)?;
    }
    let mut ord = Reader::new(input, 0, 0);
    let mut suf = Reader::new(input, probe.pos, 0);
    for (ty, desc) in columns {
        ord.mask = mask(*desc);
        suf.mask = mask(*desc);
        each(dec(ty, &mut ord, &mut suf)?);
    }
    if ord.pos != probe.pos {
        return Err(ValueError::corrupt("order part and suffix disagree"));
    }
    *input = &input[suf.pos..];
    Ok(())
}

/// Whether every value of `ty` has a key without a suffix: its key is then its order part, so
/// two values Cassandra compares as equal have the same key bytes, and a row whose clustering
/// values are all of such types is found by the exact key a query's values encode to (a point
/// lookup), never under another serialization of equal values. Tuples and UDTs always write a
/// suffix (their trailing-null count); booleans, floating point, varint and decimal may.
pub fn key_has_no_suffix(ty: &CqlType) -> bool {
    match ty {
        CqlType::Ascii
        | CqlType::Text
        | CqlType::Blob
        | CqlType::Inet
        | CqlType::Duration
        | CqlType::Custom(_)
        | CqlType::Tinyint
        | CqlType::Smallint
        | CqlType::Int
        | CqlType::Bigint
        | CqlType::Counter
        | CqlType::Timestamp
        | CqlType::Date
        | CqlType::Time
        | CqlType::Uuid
        | CqlType::Timeuuid => true,
        CqlType::List(elem) | CqlType::Set(elem) | CqlType::Vector(elem, _) => {
            key_has_no_suffix(elem)
        }
        CqlType::Map(k, v) => key_has_no_suffix(k) && key_has_no_suffix(v),
        CqlType::Frozen(inner) => key_has_no_suffix(inner),
        CqlType::Boolean
        | CqlType::Float
        | CqlType::Double
        | CqlType::Varint
        | CqlType::Decimal
        | CqlType::Tuple(_)
        | CqlType::Udt(_) => false,
    }
}

// ---------------------------------------------------------------------------------------------
// writing
// ---------------------------------------------------------------------------------------------

pub(crate) fn put_esc(out: &mut Vec<u8>, v: &[u8]) {
    for &b in v {
        if b == 0 {
            out.extend_from_slice(&[0x00, 0xFF]);
        } else {
            out.push(b);
        }
    }
    out.extend_from_slice(&[0x00, 0x00]);
}

fn put_uvar(out: &mut Vec<u8>, n: u64) {
    let bytes = n.to_be_bytes();
    let skip = (n.leading_zeros() / 8) as usize;
    out.push((8 - skip) as u8);
    out.extend_from_slice(&bytes[skip..]);
}

fn put_uvar_inv(out: &mut Vec<u8>, n: u64) {
    let start = out.len();
    put_uvar(out, n);
    complement(&mut out[start..]);
}

fn put_invalid(out: &mut Vec<u8>, v: &[u8]) {
    out.push(INVALID);
    put_esc(out, v);
}

fn put_item(ord: &mut Vec<u8>, suf: &mut Vec<u8>, ty: &CqlType, item: Option<&[u8]>) {
    match item {
        None => ord.push(ITEM_NULL),
        Some(x) => {
            ord.push(ITEM_VALUE);
            enc(ty, x, ord, suf);
        }
    }
}

/// Fixed-size types: `transform` writes the order-defining bytes of a well-formed value and
/// its suffix.
fn enc_fixed(
    ord: &mut Vec<u8>,
    suf: &mut Vec<u8>,
    v: &[u8],
    size: usize,
    transform: impl Fn(&[u8], &mut Vec<u8>, &mut Vec<u8>),
) {
    match fixed_class(v, size) {
        Class::Empty => ord.push(EMPTY),
        Class::Valid => {
            ord.push(PRESENT);
            transform(v, ord, suf);
        }
        Class::Invalid => put_invalid(ord, v),
    }
}

fn signed(v: &[u8], ord: &mut Vec<u8>, _: &mut Vec<u8>) {
    ord.push(v[0] ^ 0x80);
    ord.extend_from_slice(&v[1..]);
}

fn raw(v: &[u8], ord: &mut Vec<u8>, _: &mut Vec<u8>) {
    ord.extend_from_slice(v);
}

fn enc(ty: &CqlType, v: &[u8], ord: &mut Vec<u8>, suf: &mut Vec<u8>) {
    match ty {
        CqlType::Ascii
        | CqlType::Text
        | CqlType::Blob
        | CqlType::Inet
        | CqlType::Duration
        | CqlType::Custom(_) => put_esc(ord, v),
        CqlType::Tinyint => enc_fixed(ord, suf, v, 1, signed),
        CqlType::Smallint => enc_fixed(ord, suf, v, 2, signed),
        CqlType::Int => enc_fixed(ord, suf, v, 4, signed),
        CqlType::Bigint | CqlType::Counter | CqlType::Timestamp => {
            enc_fixed(ord, suf, v, 8, signed)
        }
        CqlType::Date => enc_fixed(ord, suf, v, 4, raw),
        CqlType::Time => enc_fixed(ord, suf, v, 8, raw),
        CqlType::Boolean => enc_fixed(ord, suf, v, 1, |v, ord, suf| {
            if v[0] == 0 {
                ord.push(0x00);
            } else {
                ord.push(0x01);
                suf.push(v[0]);
            }
        }),
        CqlType::Float => enc_fixed(ord, suf, v, 4, |v, ord, suf| {
            let bits = u32::from_be_bytes([v[0], v[1], v[2], v[3]]);
            if f32::from_bits(bits).is_nan() {
                ord.extend_from_slice(&float_bits_order(FLOAT_NAN).to_be_bytes());
                suf.extend_from_slice(v);
            } else {
                ord.extend_from_slice(&float_bits_order(bits).to_be_bytes());
            }
        }),
        CqlType::Double => enc_fixed(ord, suf, v, 8, |v, ord, suf| {
            let mut b = [0u8; 8];
            b.copy_from_slice(v);
            let bits = u64::from_be_bytes(b);
            if f64::from_bits(bits).is_nan() {
                ord.extend_from_slice(&double_bits_order(DOUBLE_NAN).to_be_bytes());
                suf.extend_from_slice(v);
            } else {
                ord.extend_from_slice(&double_bits_order(bits).to_be_bytes());
            }
        }),
        CqlType::Uuid => enc_fixed(ord, suf, v, 16, |v, ord, _| {
            ord.extend_from_slice(&uuid_order(v))
        }),
        CqlType::Timeuuid => enc_fixed(ord, suf, v, 16, |v, ord, _| {
            ord.extend_from_slice(&timeuuid_order(v))
        }),
        CqlType::Varint => {
            if v.is_empty() {
                ord.push(EMPTY);
                return;
            }
            let (m, pad) = varint_minimal(v);
            if m[0] & 0x80 != 0 {
                ord.push(0x01);
                put_uvar_inv(ord, m.len() as u64);
            } else {
                ord.push(0x02);
                put_uvar(ord, m.len() as u64);
            }
            ord.extend_from_slice(m);
            put_uvar(suf, pad as u64);
        }
        CqlType::Decimal => match decimal_class(v) {
            Class::Empty => ord.push(EMPTY),
            Class::Invalid => put_invalid(ord, v),
            Class::Valid => {
                let n = DecimalNorm::new(v);
                match n.sign {
                    0 => {
                        ord.push(0x02);
                        suf.extend_from_slice(&n.scale.to_be_bytes());
                    }
                    1 => {
                        ord.push(0x03);
                        ord.extend_from_slice(&((n.exp as u64) ^ (1 << 63)).to_be_bytes());
                        ord.extend(n.digits.iter().map(|d| d - b'0' + 1));
                        ord.push(0x00);
                        put_uvar(suf, n.zeros);
                    }
                    _ => {
                        ord.push(0x01);
                        ord.extend_from_slice(&(!((n.exp as u64) ^ (1 << 63))).to_be_bytes());
                        ord.extend(n.digits.iter().map(|d| !(d - b'0' + 1)));
                        ord.push(0xFF);
                        put_uvar(suf, n.zeros);
                    }
                }
                put_uvar(suf, n.pad as u64);
            }
        },
        CqlType::List(elem) | CqlType::Set(elem) => enc_items(ord, suf, v, &[elem]),
        CqlType::Map(k, val) => enc_items(ord, suf, v, &[k, val]),
        CqlType::Tuple(types) => enc_tuple(ord, suf, v, &types.iter().collect::<Vec<_>>()),
        CqlType::Udt(udt) => enc_tuple(
            ord,
            suf,
            v,
            &udt.fields.iter().map(|(_, t)| t).collect::<Vec<_>>(),
        ),
        CqlType::Vector(elem, dim) => match vector_class(elem, *dim, v) {
            (Class::Empty, _) => ord.push(EMPTY),
            (Class::Invalid, _) => put_invalid(ord, v),
            (Class::Valid, elems) => {
                ord.push(PRESENT);
                for e in elems {
                    enc(elem, e, ord, suf);
                }
            }
        },
        CqlType::Frozen(inner) => enc(inner, v, ord, suf),
    }
}

fn enc_items(ord: &mut Vec<u8>, suf: &mut Vec<u8>, v: &[u8], types: &[&CqlType]) {
    if v.is_empty() {
        ord.push(EMPTY);
        return;
    }
    match parse_items(v, types.len() as u64) {
        Ok(items) => {
            ord.push(PRESENT);
            for (i, item) in items.iter().enumerate() {
                put_item(ord, suf, types[i % types.len()], *item);
            }
            ord.push(ITEM_END);
        }
        Err(_) => put_invalid(ord, v),
    }
}

fn enc_tuple(ord: &mut Vec<u8>, suf: &mut Vec<u8>, v: &[u8], types: &[&CqlType]) {
    match tuple_class(v, types.len()) {
        (Class::Empty, _, _) => ord.push(EMPTY),
        (Class::Invalid, _, _) => put_invalid(ord, v),
        (Class::Valid, comps, trailing) => {
            ord.push(PRESENT);
            for (i, c) in comps.iter().enumerate() {
                put_item(ord, suf, types[i], *c);
            }
            ord.push(ITEM_END);
            put_uvar(suf, trailing as u64);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// reading
// ---------------------------------------------------------------------------------------------

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    mask: u8,
}

impl<'a> Reader<'a> {
    fn new(buf: &'a [u8], pos: usize, mask: u8) -> Self {
        Reader { buf, pos, mask }
    }

    fn byte(&mut self) -> Result<u8, ValueError> {
        let b = *self
            .buf
            .get(self.pos)
            .ok_or_else(|| ValueError::corrupt("truncated key"))?;
        self.pos += 1;
        Ok(b ^ self.mask)
    }

    fn bytes(&mut self, n: usize) -> Result<Vec<u8>, ValueError> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.buf.len())
            .ok_or_else(|| ValueError::corrupt("truncated key"))?;
        let v = self.buf[self.pos..end]
            .iter()
            .map(|b| b ^ self.mask)
            .collect();
        self.pos = end;
        Ok(v)
    }

    fn skip_bytes(&mut self, n: usize) -> Result<(), ValueError> {
        self.pos = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.buf.len())
            .ok_or_else(|| ValueError::corrupt("truncated key"))?;
        Ok(())
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], ValueError> {
        let v = self.bytes(N)?;
        let mut a = [0u8; N];
        a.copy_from_slice(&v);
        Ok(a)
    }

    fn escaped(&mut self) -> Result<Vec<u8>, ValueError> {
        let mut out = Vec::new();
        loop {
            match self.byte()? {
                0x00 => match self.byte()? {
                    0x00 => return Ok(out),
                    0xFF => out.push(0),
                    _ => return Err(ValueError::corrupt("bad escape in byte string")),
                },
                b => out.push(b),
            }
        }
    }

    fn uvar_with(&mut self, invert: u8) -> Result<u64, ValueError> {
        let k = (self.byte()? ^ invert) as usize;
        if k > 8 {
            return Err(ValueError::corrupt("bad length prefix"));
        }
        let mut n = 0u64;
        for _ in 0..k {
            n = (n << 8) | (self.byte()? ^ invert) as u64;
        }
        Ok(n)
    }

    fn uvar(&mut self) -> Result<u64, ValueError> {
        self.uvar_with(0x00)
    }

    fn uvar_inv(&mut self) -> Result<u64, ValueError> {
        self.uvar_with(0xFF)
    }

    fn len(&self, n: u64) -> Result<usize, ValueError> {
        usize::try_from(n)
            .ok()
            .filter(|&n| n <= self.buf.len() - self.pos)
            .ok_or_else(|| ValueError::corrupt("length beyond the end of the key"))
    }
}

fn bad_marker(m: u8) -> ValueError {
    ValueError::corrupt(format!("unexpected marker byte 0x{m:02x}"))
}

/// The size of the order-defining payload of a fixed-size type.
fn fixed_payload(ty: &CqlType) -> Option<usize> {
    Some(match ty {
        CqlType::Tinyint | CqlType::Boolean => 1,
        CqlType::Smallint => 2,
        CqlType::Int | CqlType::Date | CqlType::Float => 4,
        CqlType::Bigint
        | CqlType::Counter
        | CqlType::Timestamp
        | CqlType::Time
        | CqlType::Double => 8,
        CqlType::Uuid | CqlType::Timeuuid => 16,
        _ => return None,
    })
}

/// Moves `r` past the order part of a value of type `ty` (first decoding pass, to find where
/// the suffixes start).
fn skip(ty: &CqlType, r: &mut Reader) -> Result<(), ValueError> {
    if let Some(n) = fixed_payload(ty) {
        return match r.byte()? {
            EMPTY => Ok(()),
            PRESENT => r.skip_bytes(n),
            INVALID => r.escaped().map(|_| ()),
            m => Err(bad_marker(m)),
        };
    }
    match ty {
        CqlType::Ascii
        | CqlType::Text
        | CqlType::Blob
        | CqlType::Inet
        | CqlType::Duration
        | CqlType::Custom(_) => r.escaped().map(|_| ()),
        CqlType::Varint => match r.byte()? {
            EMPTY => Ok(()),
            0x01 => {
                let n = r.uvar_inv()?;
                let n = r.len(n)?;
                r.skip_bytes(n)
            }
            0x02 => {
                let n = r.uvar()?;
                let n = r.len(n)?;
                r.skip_bytes(n)
            }
            m => Err(bad_marker(m)),
        },
        CqlType::Decimal => match r.byte()? {
            EMPTY | 0x02 => Ok(()),
            INVALID => r.escaped().map(|_| ()),
            m @ (0x01 | 0x03) => {
                r.skip_bytes(8)?;
                let end = if m == 0x01 { 0xFF } else { 0x00 };
                while r.byte()? != end {}
                Ok(())
            }
            m => Err(bad_marker(m)),
        },
        CqlType::List(elem) | CqlType::Set(elem) => skip_items(r, &[elem], None),
        CqlType::Map(k, v) => skip_items(r, &[k, v], None),
        CqlType::Tuple(types) => {
            skip_items(r, &types.iter().collect::<Vec<_>>(), Some(types.len()))
        }
        CqlType::Udt(udt) => {
            let types: Vec<&CqlType> = udt.fields.iter().map(|(_, t)| t).collect();
            skip_items(r, &types, Some(types.len()))
        }
        CqlType::Vector(elem, dim) => match r.byte()? {
            EMPTY => Ok(()),
            INVALID => r.escaped().map(|_| ()),
            PRESENT => {
                for _ in 0..*dim {
                    skip(elem, r)?;
                }
                Ok(())
            }
            m => Err(bad_marker(m)),
        },
        CqlType::Frozen(inner) => skip(inner, r),
        _ => Err(ValueError::corrupt("unexpected type")),
    }
}

/// Collections (types cycle) and tuples (at most `max` components, types in order).
fn skip_items(r: &mut Reader, types: &[&CqlType], max: Option<usize>) -> Result<(), ValueError> {
    match r.byte()? {
        EMPTY => Ok(()),
        INVALID => r.escaped().map(|_| ()),
        PRESENT => {
            let mut i = 0usize;
            loop {
                let m = r.byte()?;
                if m == ITEM_END {
                    return Ok(());
                }
                if max.is_some_and(|max| i >= max) {
                    return Err(ValueError::corrupt("too many tuple components"));
                }
                match m {
                    ITEM_NULL => {}
                    ITEM_VALUE => skip(types[i % types.len()], r)?,
                    m => return Err(bad_marker(m)),
                }
                i += 1;
            }
        }
        m => Err(bad_marker(m)),
    }
}

/// Reads the marker of a fixed-size type and dispatches.
fn dec_fixed(
    ord: &mut Reader,
    suf: &mut Reader,
    payload: impl FnOnce(&mut Reader, &mut Reader) -> Result<Vec<u8>, ValueError>,
) -> Result<Vec<u8>, ValueError> {
    match ord.byte()? {
        EMPTY => Ok(Vec::new()),
        PRESENT => payload(ord, suf),
        INVALID => ord.escaped(),
        m => Err(bad_marker(m)),
    }
}

fn unsigned_of_signed(mut v: Vec<u8>) -> Vec<u8> {
    v[0] ^= 0x80;
    v
}

fn dec(ty: &CqlType, ord: &mut Reader, suf: &mut Reader) -> Result<Vec<u8>, ValueError> {
    match ty {
        CqlType::Ascii
        | CqlType::Text
        | CqlType::Blob
        | CqlType::Inet
        | CqlType::Duration
        | CqlType::Custom(_) => ord.escaped(),
        CqlType::Tinyint => dec_fixed(ord, suf, |o, _| o.bytes(1).map(unsigned_of_signed)),
        CqlType::Smallint => dec_fixed(ord, suf, |o, _| o.bytes(2).map(unsigned_of_signed)),
        CqlType::Int => dec_fixed(ord, suf, |o, _| o.bytes(4).map(unsigned_of_signed)),
        CqlType::Bigint | CqlType::Counter | CqlType::Timestamp => {
            dec_fixed(ord, suf, |o, _| o.bytes(8).map(unsigned_of_signed))
        }
        CqlType::Date => dec_fixed(ord, suf, |o, _| o.bytes(4)),
        CqlType::Time => dec_fixed(ord, suf, |o, _| o.bytes(8)),
        CqlType::Boolean => dec_fixed(ord, suf, |o, s| match o.byte()? {
            0x00 => Ok(vec![0]),
            0x01 => {
                let b = s.byte()?;
                if b == 0 {
                    return Err(ValueError::corrupt("false boolean in a true key"));
                }
                Ok(vec![b])
            }
            m => Err(bad_marker(m)),
        }),
        CqlType::Float => dec_fixed(ord, suf, |o, s| {
            let t = u32::from_be_bytes(o.array::<4>()?);
            if t == float_bits_order(FLOAT_NAN) {
                let raw = s.array::<4>()?;
                if !f32::from_bits(u32::from_be_bytes(raw)).is_nan() {
                    return Err(ValueError::corrupt("NaN key without a NaN"));
                }
                return Ok(raw.to_vec());
            }
            // undo the transform: positive numbers have the top bit set in `t`
            let bits = if t & 0x8000_0000 != 0 {
                t ^ 0x8000_0000
            } else {
                !t
            };
            Ok(bits.to_be_bytes().to_vec())
        }),
        CqlType::Double => dec_fixed(ord, suf, |o, s| {
            let t = u64::from_be_bytes(o.array::<8>()?);
            if t == double_bits_order(DOUBLE_NAN) {
                let raw = s.array::<8>()?;
                if !f64::from_bits(u64::from_be_bytes(raw)).is_nan() {
                    return Err(ValueError::corrupt("NaN key without a NaN"));
                }
                return Ok(raw.to_vec());
            }
            let top = 0x8000_0000_0000_0000u64;
            let bits = if t & top != 0 { t ^ top } else { !t };
            Ok(bits.to_be_bytes().to_vec())
        }),
        CqlType::Uuid => dec_fixed(ord, suf, |o, _| {
            Ok(uuid_order_back(&o.array::<16>()?).to_vec())
        }),
        CqlType::Timeuuid => dec_fixed(ord, suf, |o, _| {
            Ok(timeuuid_order_back(&o.array::<16>()?).to_vec())
        }),
        CqlType::Varint => {
            let m = match ord.byte()? {
                EMPTY => return Ok(Vec::new()),
                0x01 => {
                    let n = ord.uvar_inv()?;
                    let n = ord.len(n)?;
                    ord.bytes(n)?
                }
                0x02 => {
                    let n = ord.uvar()?;
                    let n = ord.len(n)?;
                    ord.bytes(n)?
                }
                m => return Err(bad_marker(m)),
            };
            if m.is_empty() {
                return Err(ValueError::corrupt("empty varint magnitude"));
            }
            let pad = suf.uvar()?;
            with_padding(&m, pad)
        }
        CqlType::Decimal => dec_decimal(ord, suf),
        CqlType::List(elem) | CqlType::Set(elem) => dec_items(ord, suf, &[elem]),
        CqlType::Map(k, v) => dec_items(ord, suf, &[k, v]),
        CqlType::Tuple(types) => dec_tuple(ord, suf, &types.iter().collect::<Vec<_>>()),
        CqlType::Udt(udt) => dec_tuple(
            ord,
            suf,
            &udt.fields.iter().map(|(_, t)| t).collect::<Vec<_>>(),
        ),
        CqlType::Vector(elem, dim) => match ord.byte()? {
            EMPTY => Ok(Vec::new()),
            INVALID => ord.escaped(),
            PRESENT => {
                let mut elems = Vec::new();
                for _ in 0..*dim {
                    elems.push(dec(elem, ord, suf)?);
                }
                let refs: Vec<&[u8]> = elems.iter().map(|e| e.as_slice()).collect();
                Ok(encode_vector(elem, &refs))
            }
            m => Err(bad_marker(m)),
        },
        CqlType::Frozen(inner) => dec(inner, ord, suf),
    }
}

/// A minimal two's complement value with `pad` redundant sign bytes in front.
fn with_padding(m: &[u8], pad: u64) -> Result<Vec<u8>, ValueError> {
    if pad > MAX_EXPANSION {
        return Err(ValueError::corrupt("implausible varint padding"));
    }
    let sign = if m[0] & 0x80 != 0 { 0xFF } else { 0x00 };
    let mut out = vec![sign; pad as usize];
    out.extend_from_slice(m);
    Ok(out)
}

fn dec_decimal(ord: &mut Reader, suf: &mut Reader) -> Result<Vec<u8>, ValueError> {
    let marker = ord.byte()?;
    let (scale, unscaled) = match marker {
        EMPTY => return Ok(Vec::new()),
        INVALID => return ord.escaped(),
        0x02 => {
            let scale = i32::from_be_bytes(suf.array::<4>()?);
            (scale, BigInt::from(0))
        }
        0x01 | 0x03 => {
            let negative = marker == 0x01;
            let mut e = u64::from_be_bytes(ord.array::<8>()?);
            if negative {
                e = !e;
            }
            let exp = (e ^ (1 << 63)) as i64;
            let mut digits = String::new();
            loop {
                let mut d = ord.byte()?;
                if negative {
                    d = !d;
                }
                match d {
                    0x00 => break,
                    1..=10 => digits.push((b'0' + d - 1) as char),
                    _ => return Err(ValueError::corrupt("bad decimal digit")),
                }
            }
            let zeros = suf.uvar()?;
            if digits.is_empty() || zeros > MAX_EXPANSION {
                return Err(ValueError::corrupt("bad decimal magnitude"));
            }
            let scale = (digits.len() as i64)
                .checked_add(zeros as i64)
                .and_then(|n| n.checked_sub(exp))
                .and_then(|s| i32::try_from(s).ok())
                .ok_or_else(|| ValueError::corrupt("decimal scale out of range"))?;
            let mut mag: BigUint = digits
                .parse()
                .map_err(|_| ValueError::corrupt("bad decimal digits"))?;
            if zeros > 0 {
                mag *= BigUint::from(10u32).pow(zeros as u32);
            }
            let sign = if negative { Sign::Minus } else { Sign::Plus };
            (scale, BigInt::from_biguint(sign, mag))
        }
        m => return Err(bad_marker(m)),
    };
    let pad = suf.uvar()?;
    let mut out = scale.to_be_bytes().to_vec();
    out.extend_from_slice(&with_padding(&unscaled.to_signed_bytes_be(), pad)?);
    Ok(out)
}

/// Appends the `[int len][bytes]` form of an item.
fn put_wire_item(out: &mut Vec<u8>, item: Option<&[u8]>) {
    match item {
        Some(b) => {
            out.extend_from_slice(&(b.len() as i32).to_be_bytes());
            out.extend_from_slice(b);
        }
        None => out.extend_from_slice(&(-1i32).to_be_bytes()),
    }
}

fn dec_items(
    ord: &mut Reader,
    suf: &mut Reader,
    types: &[&CqlType],
) -> Result<Vec<u8>, ValueError> {
    match ord.byte()? {
        EMPTY => Ok(Vec::new()),
        INVALID => ord.escaped(),
        PRESENT => {
            let mut body = Vec::new();
            let mut count: u64 = 0;
            loop {
                let ty = types[(count % types.len() as u64) as usize];
                let item = match ord.byte()? {
                    ITEM_END => break,
                    ITEM_NULL => None,
                    ITEM_VALUE => Some(dec(ty, ord, suf)?),
                    m => return Err(bad_marker(m)),
                };
                put_wire_item(&mut body, item.as_deref());
                count += 1;
            }
            if !count.is_multiple_of(types.len() as u64) {
                return Err(ValueError::corrupt("map key without a value"));
            }
            let n = i32::try_from(count / types.len() as u64)
                .map_err(|_| ValueError::corrupt("too many collection elements"))?;
            let mut out = n.to_be_bytes().to_vec();
            out.extend_from_slice(&body);
            Ok(out)
        }
        m => Err(bad_marker(m)),
    }
}

fn dec_tuple(
    ord: &mut Reader,
    suf: &mut Reader,
    types: &[&CqlType],
) -> Result<Vec<u8>, ValueError> {
    match ord.byte()? {
        EMPTY => Ok(Vec::new()),
        INVALID => ord.escaped(),
        PRESENT => {
            let mut out = Vec::new();
            let mut count = 0usize;
            loop {
                let m = ord.byte()?;
                if m == ITEM_END {
                    break;
                }
                let ty = *types
                    .get(count)
                    .ok_or_else(|| ValueError::corrupt("too many tuple components"))?;
                let item = match m {
                    ITEM_NULL => None,
                    ITEM_VALUE => Some(dec(ty, ord, suf)?),
                    m => return Err(bad_marker(m)),
                };
                put_wire_item(&mut out, item.as_deref());
                count += 1;
            }
            let trailing = suf.uvar()?;
            if trailing > (types.len() - count) as u64 {
                return Err(ValueError::corrupt("too many trailing nulls"));
            }
            for _ in 0..trailing {
                put_wire_item(&mut out, None);
            }
            Ok(out)
        }
        m => Err(bad_marker(m)),
    }
}

#[cfg(test)]
mod suffix_tests {
    use super::*;

    /// Serialized sample values, well-formed and not (empty, wrong length), for `ty`.
    fn samples(ty: &CqlType) -> Vec<Vec<u8>> {
        let mut v = vec![vec![], vec![0x00], vec![0x80, 0x01, 0x02]];
        v.extend((0u8..4).map(|b| vec![b; 4]));
        v.extend((0u8..4).map(|b| vec![0xFF - b; 8]));
        v.push(vec![0x00; 16]);
        v.push(vec![0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x07]);
        if matches!(ty, CqlType::Frozen(_)) {
            // A one-element list/set: count 1, element of 4 bytes.
            v.push(vec![0, 0, 0, 1, 0, 0, 0, 4, 0, 0, 0, 9]);
        }
        v
    }

    #[test]
    fn types_without_suffix_encode_every_value_as_its_order_part() {
        let int_list = CqlType::Frozen(Box::new(CqlType::List(Box::new(CqlType::Int))));
        let exact = [
            CqlType::Text,
            CqlType::Blob,
            CqlType::Int,
            CqlType::Bigint,
            CqlType::Timestamp,
            CqlType::Date,
            CqlType::Time,
            CqlType::Uuid,
            CqlType::Timeuuid,
            CqlType::Inet,
            int_list,
        ];
        for ty in &exact {
            assert!(key_has_no_suffix(ty), "{ty:?}");
            for v in samples(ty) {
                for desc in [false, true] {
                    let mut k = Vec::new();
                    let order = encode_composite_key(&[(ty, &v, desc)], &mut k);
                    assert_eq!(order, k.len(), "{ty:?} {v:?} desc={desc}");
                }
            }
        }
    }

    #[test]
    fn types_with_suffixes_are_not_exact() {
        // Values whose keys carry a suffix: a point lookup by another serialization of an
        // equal value would miss the stored row.
        let cases: [(CqlType, Vec<u8>); 5] = [
            (CqlType::Boolean, vec![0x02]),
            (CqlType::Double, f64::NAN.to_be_bytes().to_vec()),
            (CqlType::Varint, vec![0x00, 0x05]),
            (CqlType::Decimal, vec![0, 0, 0, 2, 0x64]),
            (
                CqlType::Tuple(vec![CqlType::Int]),
                vec![0, 0, 0, 4, 0, 0, 0, 1],
            ),
        ];
        for (ty, v) in &cases {
            assert!(!key_has_no_suffix(ty), "{ty:?}");
            let mut k = Vec::new();
            let order = encode_composite_key(&[(ty, v, false)], &mut k);
            assert!(order < k.len(), "{ty:?} has a suffix for {v:?}");
        }
    }
}
