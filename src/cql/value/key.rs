//! The order-preserving, self-delimiting key encoding described in the module documentation.

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
/// bounds the memory a corrupt key can make [`decode_key`] allocate.
const MAX_EXPANSION: u64 = 1 << 24;

/// Appends the key encoding of the serialized value `v` of type `ty` to `out`: ascending, or
/// descending (every byte complemented) when `desc`. See the module documentation for the
/// format and its guarantees. Never fails: values that do not have their type's structure get
/// an encoding that sorts after all well-formed values.
pub fn encode_key(ty: &CqlType, v: &[u8], desc: bool, out: &mut Vec<u8>) {
    let start = out.len();
    enc(ty, v, out);
    if desc {
        for b in &mut out[start..] {
            *b = !*b;
        }
    }
}

/// Reads one key component of type `ty` from the front of `input` (ascending, or descending
/// when `desc`), advances `input` past it and returns the exact serialized value it encodes.
pub fn decode_key(ty: &CqlType, input: &mut &[u8], desc: bool) -> Result<Vec<u8>, ValueError> {
    let mut r = Reader {
        buf: input,
        pos: 0,
        mask: if desc { 0xFF } else { 0x00 },
    };
    let v = dec(ty, &mut r)?;
    *input = &input[r.pos..];
    Ok(v)
}

// ---------------------------------------------------------------------------------------------
// writing
// ---------------------------------------------------------------------------------------------

fn put_esc(out: &mut Vec<u8>, v: &[u8]) {
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
    for b in &mut out[start..] {
        *b = !*b;
    }
}

fn put_invalid(out: &mut Vec<u8>, v: &[u8]) {
    out.push(INVALID);
    put_esc(out, v);
}

fn put_item(out: &mut Vec<u8>, ty: &CqlType, item: Option<&[u8]>) {
    match item {
        None => out.push(ITEM_NULL),
        Some(x) => {
            out.push(ITEM_VALUE);
            enc(ty, x, out);
        }
    }
}

/// Fixed-size types: `transform` writes the order-defining bytes of a well-formed value.
fn enc_fixed(out: &mut Vec<u8>, v: &[u8], size: usize, transform: impl Fn(&[u8], &mut Vec<u8>)) {
    match fixed_class(v, size) {
        Class::Empty => out.push(EMPTY),
        Class::Valid => {
            out.push(PRESENT);
            transform(v, out);
        }
        Class::Invalid => put_invalid(out, v),
    }
}

fn signed(v: &[u8], out: &mut Vec<u8>) {
    out.push(v[0] ^ 0x80);
    out.extend_from_slice(&v[1..]);
}

fn raw(v: &[u8], out: &mut Vec<u8>) {
    out.extend_from_slice(v);
}

fn enc(ty: &CqlType, v: &[u8], out: &mut Vec<u8>) {
    match ty.unfrozen() {
        CqlType::Ascii
        | CqlType::Text
        | CqlType::Blob
        | CqlType::Inet
        | CqlType::Duration
        | CqlType::Custom(_) => put_esc(out, v),
        CqlType::Tinyint => enc_fixed(out, v, 1, signed),
        CqlType::Smallint => enc_fixed(out, v, 2, signed),
        CqlType::Int => enc_fixed(out, v, 4, signed),
        CqlType::Bigint | CqlType::Counter | CqlType::Timestamp => enc_fixed(out, v, 8, signed),
        CqlType::Date => enc_fixed(out, v, 4, raw),
        CqlType::Time => enc_fixed(out, v, 8, raw),
        CqlType::Boolean => enc_fixed(out, v, 1, raw),
        CqlType::Float => enc_fixed(out, v, 4, |v, out| {
            let bits = u32::from_be_bytes([v[0], v[1], v[2], v[3]]);
            if f32::from_bits(bits).is_nan() {
                out.extend_from_slice(&float_bits_order(FLOAT_NAN).to_be_bytes());
                out.extend_from_slice(v);
            } else {
                out.extend_from_slice(&float_bits_order(bits).to_be_bytes());
            }
        }),
        CqlType::Double => enc_fixed(out, v, 8, |v, out| {
            let mut b = [0u8; 8];
            b.copy_from_slice(v);
            let bits = u64::from_be_bytes(b);
            if f64::from_bits(bits).is_nan() {
                out.extend_from_slice(&double_bits_order(DOUBLE_NAN).to_be_bytes());
                out.extend_from_slice(v);
            } else {
                out.extend_from_slice(&double_bits_order(bits).to_be_bytes());
            }
        }),
        CqlType::Uuid => enc_fixed(out, v, 16, |v, out| out.extend_from_slice(&uuid_order(v))),
        CqlType::Timeuuid => enc_fixed(out, v, 16, |v, out| {
            out.extend_from_slice(&timeuuid_order(v))
        }),
        CqlType::Varint => {
            if v.is_empty() {
                out.push(EMPTY);
                return;
            }
            let (m, pad) = varint_minimal(v);
            if m[0] & 0x80 != 0 {
                out.push(0x01);
                put_uvar_inv(out, m.len() as u64);
            } else {
                out.push(0x02);
                put_uvar(out, m.len() as u64);
            }
            out.extend_from_slice(m);
            put_uvar(out, pad as u64);
        }
        CqlType::Decimal => match decimal_class(v) {
            Class::Empty => out.push(EMPTY),
            Class::Invalid => put_invalid(out, v),
            Class::Valid => {
                let n = DecimalNorm::new(v);
                match n.sign {
                    0 => {
                        out.push(0x02);
                        out.extend_from_slice(&n.scale.to_be_bytes());
                    }
                    1 => {
                        out.push(0x03);
                        out.extend_from_slice(&((n.exp as u64) ^ (1 << 63)).to_be_bytes());
                        out.extend(n.digits.iter().map(|d| d - b'0' + 1));
                        out.push(0x00);
                        put_uvar(out, n.zeros);
                    }
                    _ => {
                        out.push(0x01);
                        out.extend_from_slice(&(!((n.exp as u64) ^ (1 << 63))).to_be_bytes());
                        out.extend(n.digits.iter().map(|d| !(d - b'0' + 1)));
                        out.push(0xFF);
                        put_uvar(out, n.zeros);
                    }
                }
                put_uvar(out, n.pad as u64);
            }
        },
        CqlType::List(elem) | CqlType::Set(elem) => enc_items(out, v, &[elem]),
        CqlType::Map(k, val) => enc_items(out, v, &[k, val]),
        CqlType::Tuple(types) => enc_tuple(out, v, &types.iter().collect::<Vec<_>>()),
        CqlType::Udt(udt) => enc_tuple(
            out,
            v,
            &udt.fields.iter().map(|(_, t)| t).collect::<Vec<_>>(),
        ),
        CqlType::Vector(elem, dim) => match vector_class(elem, *dim, v) {
            (Class::Empty, _) => out.push(EMPTY),
            (Class::Invalid, _) => put_invalid(out, v),
            (Class::Valid, elems) => {
                out.push(PRESENT);
                for e in elems {
                    enc(elem, e, out);
                }
            }
        },
        CqlType::Frozen(inner) => enc(inner, v, out),
    }
}

fn enc_items(out: &mut Vec<u8>, v: &[u8], types: &[&CqlType]) {
    if v.is_empty() {
        out.push(EMPTY);
        return;
    }
    match parse_items(v, types.len() as u64) {
        Ok(items) => {
            out.push(PRESENT);
            for (i, item) in items.iter().enumerate() {
                put_item(out, types[i % types.len()], *item);
            }
            out.push(ITEM_END);
        }
        Err(_) => put_invalid(out, v),
    }
}

fn enc_tuple(out: &mut Vec<u8>, v: &[u8], types: &[&CqlType]) {
    match tuple_class(v, types.len()) {
        (Class::Empty, _, _) => out.push(EMPTY),
        (Class::Invalid, _, _) => put_invalid(out, v),
        (Class::Valid, comps, trailing) => {
            out.push(PRESENT);
            for (i, c) in comps.iter().enumerate() {
                put_item(out, types[i], *c);
            }
            out.push(ITEM_END);
            put_uvar(out, trailing as u64);
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

impl Reader<'_> {
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

    fn len(&mut self, n: u64) -> Result<usize, ValueError> {
        usize::try_from(n)
            .ok()
            .filter(|&n| n <= self.buf.len() - self.pos)
            .ok_or_else(|| ValueError::corrupt("length beyond the end of the key"))
    }
}

fn bad_marker(m: u8) -> ValueError {
    ValueError::corrupt(format!("unexpected marker byte 0x{m:02x}"))
}

/// Reads the marker of a fixed-size type: `Ok(None)` for the empty value, `Err(Ok(v))` when
/// the value was encoded as invalid, `Ok(Some(()))` when the payload follows.
fn dec_fixed(
    r: &mut Reader,
    payload: impl FnOnce(&mut Reader) -> Result<Vec<u8>, ValueError>,
) -> Result<Vec<u8>, ValueError> {
    match r.byte()? {
        EMPTY => Ok(Vec::new()),
        PRESENT => payload(r),
        INVALID => r.escaped(),
        m => Err(bad_marker(m)),
    }
}

fn unsigned_of_signed(mut v: Vec<u8>) -> Vec<u8> {
    v[0] ^= 0x80;
    v
}

fn dec(ty: &CqlType, r: &mut Reader) -> Result<Vec<u8>, ValueError> {
    match ty.unfrozen() {
        CqlType::Ascii
        | CqlType::Text
        | CqlType::Blob
        | CqlType::Inet
        | CqlType::Duration
        | CqlType::Custom(_) => r.escaped(),
        CqlType::Tinyint => dec_fixed(r, |r| r.bytes(1).map(unsigned_of_signed)),
        CqlType::Smallint => dec_fixed(r, |r| r.bytes(2).map(unsigned_of_signed)),
        CqlType::Int => dec_fixed(r, |r| r.bytes(4).map(unsigned_of_signed)),
        CqlType::Bigint | CqlType::Counter | CqlType::Timestamp => {
            dec_fixed(r, |r| r.bytes(8).map(unsigned_of_signed))
        }
        CqlType::Date => dec_fixed(r, |r| r.bytes(4)),
        CqlType::Time => dec_fixed(r, |r| r.bytes(8)),
        CqlType::Boolean => dec_fixed(r, |r| r.bytes(1)),
        CqlType::Float => dec_fixed(r, |r| {
            let t = u32::from_be_bytes(r.array::<4>()?);
            if t == float_bits_order(FLOAT_NAN) {
                let raw = r.array::<4>()?;
                if !f32::from_bits(u32::from_be_bytes(raw)).is_nan() {
                    return Err(ValueError::corrupt("NaN key without a NaN"));
                }
                return Ok(raw.to_vec());
            }
            // the transform is its own kind of involution: undo by the top bit of `t`
            let bits = if t & 0x8000_0000 != 0 {
                t ^ 0x8000_0000
            } else {
                !t
            };
            Ok(bits.to_be_bytes().to_vec())
        }),
        CqlType::Double => dec_fixed(r, |r| {
            let t = u64::from_be_bytes(r.array::<8>()?);
            if t == double_bits_order(DOUBLE_NAN) {
                let raw = r.array::<8>()?;
                if !f64::from_bits(u64::from_be_bytes(raw)).is_nan() {
                    return Err(ValueError::corrupt("NaN key without a NaN"));
                }
                return Ok(raw.to_vec());
            }
            let top = 0x8000_0000_0000_0000u64;
            let bits = if t & top != 0 { t ^ top } else { !t };
            Ok(bits.to_be_bytes().to_vec())
        }),
        CqlType::Uuid => dec_fixed(r, |r| Ok(uuid_order_back(&r.array::<16>()?).to_vec())),
        CqlType::Timeuuid => dec_fixed(r, |r| Ok(timeuuid_order_back(&r.array::<16>()?).to_vec())),
        CqlType::Varint => {
            let m = match r.byte()? {
                EMPTY => return Ok(Vec::new()),
                0x01 => {
                    let n = r.uvar_inv()?;
                    let n = r.len(n)?;
                    r.bytes(n)?
                }
                0x02 => {
                    let n = r.uvar()?;
                    let n = r.len(n)?;
                    r.bytes(n)?
                }
                m => return Err(bad_marker(m)),
            };
            if m.is_empty() {
                return Err(ValueError::corrupt("empty varint magnitude"));
            }
            let pad = r.uvar()?;
            Ok(with_padding(&m, pad)?)
        }
        CqlType::Decimal => dec_decimal(r),
        CqlType::List(elem) | CqlType::Set(elem) => dec_items(r, &[elem]),
        CqlType::Map(k, v) => dec_items(r, &[k, v]),
        CqlType::Tuple(types) => dec_tuple(r, &types.iter().collect::<Vec<_>>()),
        CqlType::Udt(udt) => dec_tuple(r, &udt.fields.iter().map(|(_, t)| t).collect::<Vec<_>>()),
        CqlType::Vector(elem, dim) => match r.byte()? {
            EMPTY => Ok(Vec::new()),
            INVALID => r.escaped(),
            PRESENT => {
                let mut elems = Vec::new();
                for _ in 0..*dim {
                    elems.push(dec(elem, r)?);
                }
                let refs: Vec<&[u8]> = elems.iter().map(|e| e.as_slice()).collect();
                Ok(encode_vector(elem, &refs))
            }
            m => Err(bad_marker(m)),
        },
        CqlType::Frozen(inner) => dec(inner, r),
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

fn dec_decimal(r: &mut Reader) -> Result<Vec<u8>, ValueError> {
    let marker = r.byte()?;
    let (scale, unscaled) = match marker {
        EMPTY => return Ok(Vec::new()),
        INVALID => return r.escaped(),
        0x02 => {
            let scale = i32::from_be_bytes(r.array::<4>()?);
            (scale, BigInt::from(0))
        }
        0x01 | 0x03 => {
            let negative = marker == 0x01;
            let mut e = u64::from_be_bytes(r.array::<8>()?);
            if negative {
                e = !e;
            }
            let exp = (e ^ (1 << 63)) as i64;
            let mut digits = String::new();
            loop {
                let mut d = r.byte()?;
                if negative {
                    d = !d;
                }
                match d {
                    0x00 => break,
                    1..=10 => digits.push((b'0' + d - 1) as char),
                    _ => return Err(ValueError::corrupt("bad decimal digit")),
                }
            }
            let zeros = r.uvar()?;
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
    let pad = r.uvar()?;
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

fn dec_item(r: &mut Reader, ty: &CqlType) -> Result<Option<Option<Vec<u8>>>, ValueError> {
    match r.byte()? {
        ITEM_END => Ok(None),
        ITEM_NULL => Ok(Some(None)),
        ITEM_VALUE => Ok(Some(Some(dec(ty, r)?))),
        m => Err(bad_marker(m)),
    }
}

fn dec_items(r: &mut Reader, types: &[&CqlType]) -> Result<Vec<u8>, ValueError> {
    match r.byte()? {
        EMPTY => Ok(Vec::new()),
        INVALID => r.escaped(),
        PRESENT => {
            let mut body = Vec::new();
            let mut count: u64 = 0;
            while let Some(item) = dec_item(r, types[(count % types.len() as u64) as usize])? {
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

fn dec_tuple(r: &mut Reader, types: &[&CqlType]) -> Result<Vec<u8>, ValueError> {
    match r.byte()? {
        EMPTY => Ok(Vec::new()),
        INVALID => r.escaped(),
        PRESENT => {
            let mut out = Vec::new();
            let mut count = 0usize;
            loop {
                let ty = types.get(count).copied();
                let item = match r.byte()? {
                    ITEM_END => break,
                    ITEM_NULL => None,
                    ITEM_VALUE => Some(dec(
                        ty.ok_or_else(|| ValueError::corrupt("too many tuple components"))?,
                        r,
                    )?),
                    m => return Err(bad_marker(m)),
                };
                if ty.is_none() {
                    return Err(ValueError::corrupt("too many tuple components"));
                }
                put_wire_item(&mut out, item.as_deref());
                count += 1;
            }
            let trailing = r.uvar()?;
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
pub(crate) fn esc_for_tests(v: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    put_esc(&mut out, v);
    out
}
