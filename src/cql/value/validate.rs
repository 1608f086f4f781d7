//! `validate`: what Cassandra 5.0's serializers accept.

use super::codec::{self, read_i32};
use super::{vint, ValueError};
use crate::cql::types::CqlType;

fn len_err(msg: &str, len: usize) -> ValueError {
    ValueError::marshal(format!("{msg} ({len})"))
}

/// Checks that `v` is a valid serialized value of type `ty`, as Cassandra's
/// `TypeSerializer.validate` does, with its messages:
///
/// * `int`, `bigint`, `counter`, `float`, `double`, `timestamp`, `uuid`, `timeuuid`,
///   `boolean`: the exact size or empty (`Expected 4 or 0 byte int (3)`);
/// * `tinyint`, `smallint`, `date`, `time`: the exact size, not empty;
/// * `decimal`: empty or at least 4 bytes; `varint`, `blob`, custom types: anything;
/// * `ascii`: bytes below 0x80; `text`: UTF-8 as Cassandra's validator defines it (which also
///   accepts the modified-UTF-8 null `C0 80`);
/// * `inet`: empty, 4 or 16 bytes; `timeuuid`: version 1;
/// * `duration`: three VInts, months and days within 32 bits, all of the same sign;
/// * collections: fully parsed, no null element, no trailing byte, each element valid;
/// * tuples and UDTs: fewer components than the type is fine, more is not, nulls allowed;
/// * vectors: exactly `n` valid elements, not empty.
pub fn validate(ty: &CqlType, v: &[u8]) -> Result<(), ValueError> {
    let len = v.len();
    match ty.unfrozen() {
        CqlType::Ascii => {
            if let Some(&b) = v.iter().find(|&&b| b >= 0x80) {
                return Err(ValueError::marshal(format!(
                    "Invalid byte for ascii: {}",
                    b as i8
                )));
            }
            Ok(())
        }
        CqlType::Text => {
            if cassandra_utf8_valid(v) {
                Ok(())
            } else {
                Err(ValueError::marshal("String didn't validate."))
            }
        }
        CqlType::Blob | CqlType::Varint | CqlType::Custom(_) => Ok(()),
        CqlType::Boolean if len > 1 => Err(len_err("Expected 1 or 0 byte value", len)),
        CqlType::Tinyint if len != 1 => Err(len_err("Expected 1 byte for a tinyint", len)),
        CqlType::Smallint if len != 2 => Err(len_err("Expected 2 bytes for a smallint", len)),
        CqlType::Int if len != 4 && len != 0 => Err(len_err("Expected 4 or 0 byte int", len)),
        CqlType::Bigint | CqlType::Counter if len != 8 && len != 0 => {
            Err(len_err("Expected 8 or 0 byte long", len))
        }
        CqlType::Float if len != 4 && len != 0 => {
            Err(len_err("Expected 4 or 0 byte value for a float", len))
        }
        CqlType::Double if len != 8 && len != 0 => {
            Err(len_err("Expected 8 or 0 byte value for a double", len))
        }
        CqlType::Timestamp if len != 8 && len != 0 => {
            Err(len_err("Expected 8 or 0 byte long for date", len))
        }
        CqlType::Date if len != 4 => Err(len_err("Expected 4 byte long for date", len)),
        CqlType::Time if len != 8 => Err(len_err("Expected 8 byte long for time", len)),
        CqlType::Uuid if len != 16 && len != 0 => Err(len_err("UUID should be 16 or 0 bytes", len)),
        CqlType::Timeuuid => {
            if len == 0 {
                return Ok(());
            }
            if len != 16 {
                return Err(len_err("UUID should be 16 or 0 bytes", len));
            }
            if v[6] & 0xF0 != 0x10 {
                // Cassandra 5.0 reports the high nibble of the *first* byte here
                return Err(ValueError::marshal(format!(
                    "Invalid version for TimeUUID type: 0x{:x}",
                    v[0] >> 4
                )));
            }
            Ok(())
        }
        CqlType::Decimal if len != 0 && len < 4 => {
            Err(len_err("Expected 0 or at least 4 bytes", len))
        }
        CqlType::Inet if !matches!(len, 0 | 4 | 16) => Err(ValueError::marshal(format!(
            "Expected 4 or 16 byte inetaddress; got {}",
            super::literal::hex(v)
        ))),
        CqlType::Duration => vint::decode_duration(v).map(|_| ()),
        CqlType::List(elem) => validate_collection(v, "list", &[elem]),
        CqlType::Set(elem) => validate_collection(v, "set", &[elem]),
        CqlType::Map(k, val) => validate_collection(v, "map", &[k, val]),
        CqlType::Tuple(types) => validate_tuple(v, types.iter().map(|t| (t, None))),
        CqlType::Udt(udt) => {
            validate_tuple(v, udt.fields.iter().map(|(n, t)| (t, Some(n.as_str()))))
        }
        CqlType::Vector(elem, dim) => validate_vector(v, elem, *dim, ty.unfrozen()),
        CqlType::Frozen(inner) => validate(inner, v),
        _ => Ok(()),
    }
}

/// Lists, sets and maps (`types` holds the element type, or the key and value types).
fn validate_collection(v: &[u8], kind: &str, types: &[&CqlType]) -> Result<(), ValueError> {
    let not_enough = || ValueError::marshal(format!("Not enough bytes to read a {kind}"));
    if v.is_empty() {
        return Err(not_enough());
    }
    let n = read_i32(v, 0).ok_or_else(not_enough)?;
    if n < 0 {
        return Err(ValueError::marshal(format!(
            "The data cannot be deserialized as a {kind}"
        )));
    }
    let mut pos = 4;
    for _ in 0..n {
        for ty in types {
            let size = read_i32(v, pos).ok_or_else(not_enough)?;
            pos += 4;
            if size < 0 {
                return Err(ValueError::marshal("Null value read when not allowed"));
            }
            let end = pos + size as usize;
            let elem = v.get(pos..end).ok_or_else(not_enough)?;
            pos = end;
            validate(ty, elem)?;
        }
    }
    if pos != v.len() {
        return Err(ValueError::marshal(format!(
            "Unexpected extraneous bytes after {kind} value"
        )));
    }
    Ok(())
}

/// Tuples (component names `None`) and UDTs (field names given), with their own messages.
fn validate_tuple<'a>(
    v: &[u8],
    fields: impl Iterator<Item = (&'a CqlType, Option<&'a str>)>,
) -> Result<(), ValueError> {
    let mut pos = 0;
    let mut is_udt = false;
    for (i, (ty, name)) in fields.enumerate() {
        is_udt = name.is_some();
        if pos == v.len() {
            // fewer components than declared: fields added after the value was written
            return Ok(());
        }
        let what = match name {
            Some(n) => format!("{i}th field {n}"),
            None => format!("{i}th component"),
        };
        let size = read_i32(v, pos).ok_or_else(|| {
            ValueError::marshal(format!("Not enough bytes to read size of {what}"))
        })?;
        pos += 4;
        if size < 0 {
            continue;
        }
        let end = pos + size as usize;
        let comp = v
            .get(pos..end)
            .ok_or_else(|| ValueError::marshal(format!("Not enough bytes to read {what}")))?;
        pos = end;
        if let Err(e) = validate(ty, comp) {
            return Err(match name {
                Some(n) => {
                    ValueError::marshal(format!("Failure validating the {i}th field {n}; {e}"))
                }
                None => e,
            });
        }
    }
    if pos != v.len() {
        return Err(ValueError::marshal(if is_udt {
            "Invalid remaining data after end of UDT value"
        } else {
            "Invalid remaining data after end of tuple value"
        }));
    }
    Ok(())
}

fn validate_vector(v: &[u8], elem: &CqlType, dim: u32, ty: &CqlType) -> Result<(), ValueError> {
    if v.is_empty() {
        return Err(ValueError::marshal("Invalid empty vector value"));
    }
    let not_enough = || ValueError::marshal(format!("Not enough bytes to read a {ty}"));
    let mut rest = v;
    match codec::fixed_len(elem) {
        Some(size) => {
            if (v.len() as u64) < size as u64 * dim as u64 {
                return Err(not_enough());
            }
            for _ in 0..dim {
                let (e, tail) = rest.split_at(size);
                validate(elem, e)?;
                rest = tail;
            }
        }
        None => {
            for _ in 0..dim {
                if rest.is_empty() {
                    return Err(not_enough());
                }
                let n = vint::get_unsigned(&mut rest).ok_or_else(not_enough)?;
                if n > rest.len() as u64 {
                    return Err(not_enough());
                }
                let (e, tail) = rest.split_at(n as usize);
                validate(elem, e)?;
                rest = tail;
            }
        }
    }
    if !rest.is_empty() {
        return Err(ValueError::marshal(format!(
            "Unexpected {} extraneous bytes after {ty} value",
            rest.len()
        )));
    }
    Ok(())
}

/// Cassandra's `UTF8Serializer.UTF8Validator`, byte for byte. It is laxer than the UTF-8
/// standard in places (it accepts the modified-UTF-8 null `C0 80`, surrogate code points, and
/// lead bytes `F5`-`F7`; after `E0` and `F0` it only excludes the overlong second bytes) and
/// that is what Cassandra stores, so it is reproduced exactly.
pub(crate) fn cassandra_utf8_valid(v: &[u8]) -> bool {
    #[derive(Clone, Copy)]
    enum St {
        Start,
        Two,
        Two80,
        ThreeA0Bf,
        Cont1,
        Cont2,
        Four90Bf,
        Cont3,
    }
    let cont = |b: u8| b & 0xC0 == 0x80;
    let mut st = St::Start;
    for &b in v {
        st = match st {
            St::Start => match b {
                0x00..=0x7F => St::Start,
                0xC0 => St::Two80,
                0xC1..=0xDF if b & 0x1E == 0 => return false,
                0xC1..=0xDF => St::Two,
                0xE0 => St::ThreeA0Bf,
                0xE1..=0xEF => St::Cont2,
                0xF0 => St::Four90Bf,
                0xF1..=0xF7 => St::Cont3,
                _ => return false,
            },
            St::Two => {
                if !cont(b) {
                    return false;
                }
                St::Start
            }
            St::Two80 => {
                if b != 0x80 {
                    return false;
                }
                St::Start
            }
            St::ThreeA0Bf => {
                if b & 0xE0 == 0x80 {
                    return false;
                }
                St::Cont1
            }
            St::Cont1 => {
                if !cont(b) {
                    return false;
                }
                St::Start
            }
            St::Cont2 => {
                if !cont(b) {
                    return false;
                }
                St::Cont1
            }
            St::Four90Bf => {
                if b & 0x30 == 0 {
                    return false;
                }
                St::Cont2
            }
            St::Cont3 => {
                if !cont(b) {
                    return false;
                }
                St::Cont2
            }
        };
    }
    matches!(st, St::Start)
}
