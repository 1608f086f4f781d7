//! Cassandra's native scalar functions on serialized values: time conversions (toDate,
//! toTimestamp, toUnixTimestamp, dateOf, unixTimestampOf, minTimeuuid, maxTimeuuid), blob
//! conversions (`blobAsX`, `XAsBlob`) and CAST between native types.

use crate::cql::types::CqlType;
use crate::cql::value;
use num_bigint::BigInt;

/// 100ns intervals between 1582-10-15 and 1970-01-01.
const UUID_EPOCH_OFFSET: i64 = 0x01B2_1DD2_1381_4000;
const DAY_MS: i64 = 86_400_000;
const DATE_EPOCH: i64 = 1 << 31;

fn native(name: &str) -> Option<CqlType> {
    match name {
        "counter" | "duration" => CqlType::native_from_name(name),
        other => CqlType::native_from_name(other),
    }
}

/// The return type of function `name` (lower case, without keyspace) for arguments of the
/// types given, or Cassandra's error.
pub fn return_type(name: &str, args: &[CqlType]) -> Result<CqlType, String> {
    let arity = |n: usize| -> Result<(), String> {
        if args.len() == n {
            Ok(())
        } else {
            Err(format!(
                "Invalid number of arguments in call to function system.{name}: {n} required but {} provided",
                args.len()
            ))
        }
    };
    let arg = |i: usize| args[i].unfrozen().clone();
    let wrong = |i: usize| {
        format!(
            "Type error: {} cannot be passed as argument {i} of function system.{name} of type {}",
            args[i],
            match name {
                "dateof" | "unixtimestampof" => "timeuuid",
                "mintimeuuid" | "maxtimeuuid" => "timestamp",
                _ => "timeuuid",
            }
        )
    };
    let time_arg = |ok: &[CqlType]| -> Result<(), String> {
        arity(1)?;
        if ok.contains(&arg(0)) {
            Ok(())
        } else {
            Err(wrong(0))
        }
    };
    use CqlType as T;
    Ok(match name {
        "now" | "currenttimeuuid" => {
            arity(0)?;
            T::Timeuuid
        }
        "uuid" => {
            arity(0)?;
            T::Uuid
        }
        "currenttimestamp" => {
            arity(0)?;
            T::Timestamp
        }
        "currentdate" => {
            arity(0)?;
            T::Date
        }
        "currenttime" => {
            arity(0)?;
            T::Time
        }
        "todate" => {
            time_arg(&[T::Timeuuid, T::Timestamp, T::Date])?;
            T::Date
        }
        "totimestamp" => {
            time_arg(&[T::Timeuuid, T::Timestamp, T::Date])?;
            T::Timestamp
        }
        "tounixtimestamp" => {
            time_arg(&[T::Timeuuid, T::Timestamp, T::Date])?;
            T::Bigint
        }
        "dateof" => {
            time_arg(&[T::Timeuuid])?;
            T::Timestamp
        }
        "unixtimestampof" => {
            time_arg(&[T::Timeuuid])?;
            T::Bigint
        }
        "mintimeuuid" | "maxtimeuuid" => {
            time_arg(&[T::Timestamp])?;
            T::Timeuuid
        }
        _ => {
            if let Some(t) = name.strip_prefix("blobas").and_then(native) {
                arity(1)?;
                if arg(0) != T::Blob {
                    return Err(format!(
                        "Type error: {} cannot be passed as argument 0 of function system.{name} of type blob",
                        args[0]
                    ));
                }
                return Ok(t);
            }
            if let Some(t) = name.strip_suffix("asblob").and_then(native) {
                arity(1)?;
                if arg(0) != t && !(t == T::Text && arg(0) == T::Ascii) {
                    return Err(format!(
                        "Type error: {} cannot be passed as argument 0 of function system.{name} of type {t}",
                        args[0]
                    ));
                }
                return Ok(T::Blob);
            }
            return Err(format!("Unknown function '{name}'"));
        }
    })
}

fn be_i64(v: &[u8]) -> Option<i64> {
    <[u8; 8]>::try_from(v).ok().map(i64::from_be_bytes)
}

/// Milliseconds since the epoch of a timeuuid, timestamp or date value.
fn millis(ty: &CqlType, v: &[u8]) -> Option<i64> {
    match ty.unfrozen() {
        CqlType::Timestamp => be_i64(v),
        CqlType::Date => <[u8; 4]>::try_from(v)
            .ok()
            .map(|b| (u32::from_be_bytes(b) as i64 - DATE_EPOCH) * DAY_MS),
        CqlType::Timeuuid if v.len() == 16 => {
            let t = ((v[6] as i64 & 0x0F) << 56)
                | ((v[7] as i64) << 48)
                | ((v[4] as i64) << 40)
                | ((v[5] as i64) << 32)
                | u32::from_be_bytes([v[0], v[1], v[2], v[3]]) as i64;
            Some((t - UUID_EPOCH_OFFSET).div_euclid(10_000))
        }
        _ => None,
    }
}

fn timeuuid_at(ms: i64, extra: i64, lsb: u64) -> Vec<u8> {
    let t = (ms.saturating_mul(10_000) + extra + UUID_EPOCH_OFFSET) as u64;
    let mut b = Vec::with_capacity(16);
    b.extend_from_slice(&((t & 0xFFFF_FFFF) as u32).to_be_bytes());
    b.extend_from_slice(&(((t >> 32) & 0xFFFF) as u16).to_be_bytes());
    b.extend_from_slice(&((((t >> 48) & 0x0FFF) as u16) | 0x1000).to_be_bytes());
    b.extend_from_slice(&lsb.to_be_bytes());
    b
}

/// Whether a function result of type `ret` may be assigned to a receiver of type `receiver`:
/// Cassandra's `isValueCompatibleWith` (the bytes are valid as they are): the same type, any
/// type into a blob, bigint and timestamp either way, int/bigint/timestamp into varint, ascii
/// into text.
pub fn value_compatible(receiver: &CqlType, ret: &CqlType) -> bool {
    use CqlType::*;
    let (r, v) = (receiver.unfrozen(), ret.unfrozen());
    r == v
        || matches!(
            (r, v),
            (Blob, _)
                | (Timestamp, Bigint)
                | (Bigint, Timestamp)
                | (Varint, Int | Bigint | Timestamp)
                | (Text, Ascii)
        )
}

/// Calls function `name` (already type-checked by [`return_type`]) on argument values.
/// A null argument gives null.
pub fn call(
    name: &str,
    types: &[CqlType],
    args: &[Option<&[u8]>],
) -> Result<Option<Vec<u8>>, String> {
    let now = crate::clock::system_micros;
    match name {
        "now" | "currenttimeuuid" => return Ok(Some(super::eval::new_timeuuid().to_vec())),
        "uuid" => return Ok(Some(uuid::Uuid::new_v4().as_bytes().to_vec())),
        "currenttimestamp" => return Ok(Some((now() / 1000).to_be_bytes().to_vec())),
        "currentdate" => {
            let days = now().div_euclid(86_400_000_000) + DATE_EPOCH;
            return Ok(Some((days as u32).to_be_bytes().to_vec()));
        }
        "currenttime" => {
            return Ok(Some(
                (now().rem_euclid(86_400_000_000) * 1000)
                    .to_be_bytes()
                    .to_vec(),
            ))
        }
        _ => {}
    }
    let Some(Some(v)) = args.first() else {
        return Ok(None);
    };
    let ty = &types[0];
    // An empty value of a non-blob type is null to the time functions; blob conversions keep
    // it (Cassandra: textAsBlob('') is an empty blob, blobAsText(0x) an empty text).
    let conversion = name.ends_with("asblob") || name.starts_with("blobas");
    if v.is_empty() && !conversion && !matches!(ty.unfrozen(), CqlType::Blob) {
        return Ok(None);
    }
    let ms = || millis(ty, v).ok_or_else(|| format!("Invalid argument to {name}"));
    Ok(Some(match name {
        "todate" => ((ms()?.div_euclid(DAY_MS) + DATE_EPOCH) as u32)
            .to_be_bytes()
            .to_vec(),
        "totimestamp" | "dateof" => ms()?.to_be_bytes().to_vec(),
        "tounixtimestamp" | "unixtimestampof" => ms()?.to_be_bytes().to_vec(),
        "mintimeuuid" => timeuuid_at(ms()?, 0, 0x8080_8080_8080_8080),
        "maxtimeuuid" => timeuuid_at(ms()?, 9999, 0x7f7f_7f7f_7f7f_7f7f),
        _ => {
            if let Some(t) = name.strip_prefix("blobas").and_then(native) {
                if value::validate(&t, v).is_err() {
                    return Err(format!(
                        "In call to function system.{name}, value 0x{} is not a valid binary representation for type {t}",
                        hex(v)
                    ));
                }
            }
            v.to_vec()
        }
    }))
}

fn hex(v: &[u8]) -> String {
    v.iter().map(|b| format!("{b:02x}")).collect()
}

/// A numeric value for CAST.
enum Num {
    Int(i128),
    Big(BigInt),
    Float(f64),
    Dec(String),
}

fn num_of(ty: &CqlType, v: &[u8]) -> Option<Num> {
    Some(match ty.unfrozen() {
        CqlType::Tinyint => Num::Int(*v.first()? as i8 as i128),
        CqlType::Smallint => Num::Int(i16::from_be_bytes(v.try_into().ok()?) as i128),
        CqlType::Int => Num::Int(i32::from_be_bytes(v.try_into().ok()?) as i128),
        CqlType::Bigint | CqlType::Counter => Num::Int(be_i64(v)? as i128),
        CqlType::Varint => Num::Big(BigInt::from_signed_bytes_be(v)),
        CqlType::Float => Num::Float(f32::from_be_bytes(v.try_into().ok()?) as f64),
        CqlType::Double => Num::Float(f64::from_bits(be_i64(v)? as u64)),
        CqlType::Decimal => {
            let lit = value::to_cql_literal(ty, v);
            Num::Dec(lit)
        }
        _ => return None,
    })
}

pub(crate) fn is_numeric(t: &CqlType) -> bool {
    matches!(
        t.unfrozen(),
        CqlType::Tinyint
            | CqlType::Smallint
            | CqlType::Int
            | CqlType::Bigint
            | CqlType::Counter
            | CqlType::Varint
            | CqlType::Float
            | CqlType::Double
            | CqlType::Decimal
    )
}

/// Whether CAST from `from` to `to` exists (Cassandra's CastFcts).
pub fn cast_allowed(from: &CqlType, to: &CqlType) -> bool {
    let (f, t) = (from.unfrozen(), to.unfrozen());
    f == t
        || (is_numeric(f) && is_numeric(t) && !matches!(t, CqlType::Counter))
        || matches!(t, CqlType::Text | CqlType::Ascii)
        || matches!(
            (f, t),
            (CqlType::Timestamp | CqlType::Timeuuid, CqlType::Date)
                | (CqlType::Date | CqlType::Timeuuid, CqlType::Timestamp)
        )
}

/// CAST of a value.
pub fn cast(from: &CqlType, to: &CqlType, v: &[u8]) -> Option<Vec<u8>> {
    let (f, t) = (from.unfrozen(), to.unfrozen());
    if f == t {
        return Some(v.to_vec());
    }
    if v.is_empty() {
        return None;
    }
    match t {
        CqlType::Text | CqlType::Ascii => {
            let s = match f {
                CqlType::Text | CqlType::Ascii => String::from_utf8_lossy(v).into_owned(),
                _ => {
                    let lit = value::to_cql_literal(f, v);
                    lit.strip_prefix('\'')
                        .and_then(|x| x.strip_suffix('\''))
                        .map(|x| x.replace("''", "'"))
                        .unwrap_or(lit)
                }
            };
            return Some(s.into_bytes());
        }
        CqlType::Date | CqlType::Timestamp if !is_numeric(f) => {
            let ms = millis(f, v)?;
            return Some(if matches!(t, CqlType::Date) {
                ((ms.div_euclid(DAY_MS) + DATE_EPOCH) as u32)
                    .to_be_bytes()
                    .to_vec()
            } else {
                ms.to_be_bytes().to_vec()
            });
        }
        _ => {}
    }
    let n = num_of(f, v)?;
    let as_i128 = |n: &Num| -> i128 {
        match n {
            Num::Int(i) => *i,
            Num::Big(b) => {
                let bytes = b.to_signed_bytes_be();
                let mut buf = [if b.sign() == num_bigint::Sign::Minus {
                    0xFF
                } else {
                    0
                }; 16];
                let take = bytes.len().min(16);
                buf[16 - take..].copy_from_slice(&bytes[bytes.len() - take..]);
                i128::from_be_bytes(buf)
            }
            // Java's (long) of a double saturates; NaN is 0
            Num::Float(x) => *x as i64 as i128,
            Num::Dec(s) => s
                .split(['.', 'E', 'e'])
                .next()
                .and_then(|i| i.parse::<i128>().ok())
                .unwrap_or(0),
        }
    };
    let as_f64 = |n: &Num| -> f64 {
        match n {
            Num::Int(i) => *i as f64,
            Num::Big(b) => b.to_string().parse().unwrap_or(f64::NAN),
            Num::Float(x) => *x,
            Num::Dec(s) => s.parse().unwrap_or(f64::NAN),
        }
    };
    Some(match t {
        CqlType::Tinyint => vec![as_i128(&n) as i8 as u8],
        CqlType::Smallint => (as_i128(&n) as i16).to_be_bytes().to_vec(),
        CqlType::Int => (as_i128(&n) as i32).to_be_bytes().to_vec(),
        CqlType::Bigint => (as_i128(&n) as i64).to_be_bytes().to_vec(),
        CqlType::Float => (as_f64(&n) as f32).to_be_bytes().to_vec(),
        CqlType::Double => as_f64(&n).to_be_bytes().to_vec(),
        CqlType::Varint => match &n {
            Num::Big(b) => b.to_signed_bytes_be(),
            other => BigInt::from(as_i128(other)).to_signed_bytes_be(),
        },
        CqlType::Decimal => {
            let text = match &n {
                Num::Int(i) => i.to_string(),
                Num::Big(b) => b.to_string(),
                Num::Float(x) => value::to_cql_literal(&CqlType::Double, &x.to_be_bytes()),
                Num::Dec(s) => s.clone(),
            };
            value::literal_to_bytes(&CqlType::Decimal, &crate::cql::ast::Literal::Float(text))
                .ok()?
        }
        _ => return None,
    })
}
