//! JSON forms of values: Cassandra's JSON output (`toJSONString`, for `SELECT JSON` and
//! `toJson()`) and JSON input (`fromJSONObject`, for `INSERT JSON` and `fromJson()`).

use num_bigint::BigInt;
use serde_json::Value as Json;

use super::calendar::{civil_from_days, parse_date, parse_time, parse_timestamp};
use super::codec::{
    encode_map, encode_set, encode_tuple, encode_vector, parse_items, parse_tuple, parse_vector,
};
use super::duration::{encode_duration, parse_duration};
use super::literal::{
    ascii_from_string, decimal_from_string, hex, java_parse_f32, java_parse_f64, parse_bigint,
    parse_bigint_text, parse_inet, parse_int, parse_smallint, parse_tinyint, timeuuid_from_string,
    uuid_from_string,
};
use super::text::{
    be_i64, decimal_string, duration_string, inet_java_string, java_double, java_float,
    json_string, time_string, timestamp_json_string, uuid_string, year_string, NANOS_PER_DAY,
};
use super::{validate, vint, ValueError};
use crate::cql::types::CqlType;

// ---------------------------------------------------------------------------------------------
// JSON output
// ---------------------------------------------------------------------------------------------

/// A value in Cassandra's JSON format (`toJson()`, `SELECT JSON`), following each type's
/// `toJSONString`:
///
/// * `text`, `ascii`: JSON strings; `blob`: `"0x0102"`; `boolean`: `true` / `false`;
/// * integers, `varint`, `counter`: JSON numbers; `decimal`: `BigDecimal.toString` (`1.50`,
///   `-1.23E-12`); `float`, `double`: Java's `toString` (`123123.0`), `null` for NaN and
///   infinities;
/// * `timestamp`: `"2024-01-02 03:04:05.678Z"` (UTC, Java's calendar); `date`:
///   `"2024-01-02"`; `time`: `"03:04:05.678901234"`; `duration`: `"1h30m"`;
/// * `uuid`, `timeuuid`: strings; `inet`: `"127.0.0.1"`, `"0:0:0:0:0:0:0:1"` (Java's form);
/// * lists, sets, vectors: `[1, 2]`; tuples: `[1, "a", null]`; maps: `{"k": 1}` with keys that
///   are not JSON strings turned into strings (`{"1": "a"}`); UDTs: `{"a": 1, "\"Name\"": 2}`
///   with every field, `null` when missing.
///
/// The empty value of a non-string type prints as `""`; bytes that fail [`validate`] print as
/// a `"0x..."` string.
pub fn to_json(ty: &CqlType, v: &[u8]) -> String {
    let ty = ty.unfrozen();
    let string_like = matches!(
        ty,
        CqlType::Ascii | CqlType::Text | CqlType::Blob | CqlType::Custom(_)
    );
    if v.is_empty() && !string_like {
        return "\"\"".into();
    }
    if validate(ty, v).is_err() {
        return format!("\"0x{}\"", hex(v));
    }
    match ty {
        CqlType::Ascii | CqlType::Text => json_string(&String::from_utf8_lossy(v)),
        CqlType::Blob | CqlType::Custom(_) => format!("\"0x{}\"", hex(v)),
        CqlType::Boolean => (v[0] != 0).to_string(),
        CqlType::Tinyint => (v[0] as i8).to_string(),
        CqlType::Smallint => i16::from_be_bytes([v[0], v[1]]).to_string(),
        CqlType::Int => i32::from_be_bytes([v[0], v[1], v[2], v[3]]).to_string(),
        CqlType::Bigint | CqlType::Counter => be_i64(v).to_string(),
        CqlType::Varint => BigInt::from_signed_bytes_be(v).to_string(),
        CqlType::Decimal => decimal_string(v),
        CqlType::Float => {
            let x = f32::from_be_bytes([v[0], v[1], v[2], v[3]]);
            if x.is_finite() {
                java_float(x)
            } else {
                "null".into()
            }
        }
        CqlType::Double => {
            let x = f64::from_bits(be_i64(v) as u64);
            if x.is_finite() {
                java_double(x)
            } else {
                "null".into()
            }
        }
        CqlType::Timestamp => format!("\"{}\"", timestamp_json_string(be_i64(v))),
        CqlType::Date => {
            let raw = u32::from_be_bytes([v[0], v[1], v[2], v[3]]);
            let (y, m, d) = civil_from_days(raw as i64 - (1i64 << 31));
            format!("\"{}-{m:02}-{d:02}\"", year_string(y))
        }
        CqlType::Time => match be_i64(v) {
            n @ 0..NANOS_PER_DAY => format!("\"{}\"", time_string(n)),
            _ => format!("\"0x{}\"", hex(v)),
        },
        CqlType::Uuid | CqlType::Timeuuid => format!("\"{}\"", uuid_string(v)),
        CqlType::Inet => format!("\"{}\"", inet_java_string(v)),
        CqlType::Duration => match vint::decode_duration(v) {
            Ok((mo, d, n)) => json_string(&duration_string(mo, d, n)),
            Err(_) => format!("\"0x{}\"", hex(v)),
        },
        CqlType::List(elem) | CqlType::Set(elem) => {
            let items = parse_items(v, 1).unwrap_or_default();
            let parts: Vec<String> = items
                .iter()
                .map(|e| e.map_or("null".into(), |e| to_json(elem, e)))
                .collect();
            format!("[{}]", parts.join(", "))
        }
        CqlType::Map(k, val) => {
            let items = parse_items(v, 2).unwrap_or_default();
            let parts: Vec<String> = items
                .chunks(2)
                .map(|kv| {
                    let key = kv[0].map_or("null".into(), |x| to_json(k, x));
                    let key = if key.starts_with('"') {
                        key
                    } else {
                        json_string(&key)
                    };
                    let value = kv[1].map_or("null".into(), |x| to_json(val, x));
                    format!("{key}: {value}")
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
                    Some(Some(c)) => to_json(t, c),
                    _ => "null".into(),
                })
                .collect();
            format!("[{}]", parts.join(", "))
        }
        CqlType::Udt(udt) => {
            let comps = parse_tuple(v, udt.fields.len()).unwrap_or_default();
            let parts: Vec<String> = udt
                .fields
                .iter()
                .enumerate()
                .map(|(i, (name, t))| {
                    let name = if *name != name.to_lowercase() {
                        format!("\"{name}\"")
                    } else {
                        name.clone()
                    };
                    let value = match comps.get(i) {
                        Some(Some(c)) => to_json(t, c),
                        _ => "null".into(),
                    };
                    format!("{}: {value}", json_string(&name))
                })
                .collect();
            format!("{{{}}}", parts.join(", "))
        }
        CqlType::Vector(elem, dim) => {
            let elems = parse_vector(elem, *dim, v).unwrap_or_default();
            let parts: Vec<String> = elems.iter().map(|e| to_json(elem, e)).collect();
            format!("[{}]", parts.join(", "))
        }
        CqlType::Frozen(inner) => to_json(inner, v),
    }
}

// ---------------------------------------------------------------------------------------------
// JSON input
// ---------------------------------------------------------------------------------------------

/// The simple class name Java (Jackson) gives a parsed JSON value, for error messages.
fn java_class(j: &Json) -> &'static str {
    match j {
        Json::Null => "null",
        Json::Bool(_) => "Boolean",
        Json::Number(n) => {
            if let Some(i) = n.as_i64() {
                if i32::try_from(i).is_ok() {
                    "Integer"
                } else {
                    "Long"
                }
            } else if n.is_u64() {
                "BigInteger"
            } else {
                "Double"
            }
        }
        Json::String(_) => "String",
        Json::Array(_) => "ArrayList",
        Json::Object(_) => "LinkedHashMap",
    }
}

/// Java's `toString` of a parsed JSON value, for error messages and numeric conversions.
fn java_to_string(j: &Json) -> String {
    match j {
        Json::Null => "null".into(),
        Json::Bool(b) => b.to_string(),
        Json::Number(n) => {
            if n.is_f64() {
                java_double(n.as_f64().unwrap_or(f64::NAN))
            } else {
                n.to_string()
            }
        }
        Json::String(s) => s.clone(),
        Json::Array(a) => format!(
            "[{}]",
            a.iter().map(java_to_string).collect::<Vec<_>>().join(", ")
        ),
        Json::Object(o) => format!(
            "{{{}}}",
            o.iter()
                .map(|(k, v)| format!("{k}={}", java_to_string(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

fn expected(what: &str, j: &Json) -> ValueError {
    ValueError::marshal(format!(
        "Expected {what}, but got a {}: {}",
        java_class(j),
        java_to_string(j)
    ))
}

/// A collection, tuple or UDT given as a JSON string holds JSON itself.
fn decode_nested(j: &Json) -> Result<std::borrow::Cow<'_, Json>, ValueError> {
    match j {
        Json::String(s) => serde_json::from_str::<Json>(s)
            .map(std::borrow::Cow::Owned)
            .map_err(|e| ValueError::marshal(format!("Could not decode JSON string '{s}': {e}"))),
        other => Ok(std::borrow::Cow::Borrowed(other)),
    }
}

fn hex_decode(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

/// Converts a parsed JSON value to the serialized value of type `ty` (`fromJson()`, `INSERT
/// JSON`), following each type's `fromJSONObject`: numbers or strings for numeric types
/// (`int` and `bigint` only take integral numbers that fit), strings for text, dates, times,
/// uuids, inets and durations, `"0x..."` strings for blobs, lists for lists, sets, tuples and
/// vectors, objects for maps (keys are strings converted to the key type) and UDTs (unquoted
/// field names are case-insensitive, `"\"Name\""` is case-sensitive, missing fields are null).
/// A collection, tuple or UDT may also be given as a string containing its JSON.
///
/// JSON `null` at the top level is not a value: it yields [`ValueError::Null`] and the caller
/// stores a null. Numbers are as precise as `serde_json` parsed them (integers beyond 64 bits
/// and decimals beyond a double's precision should be given as strings, as Cassandra's own
/// documentation recommends).
pub fn from_json(ty: &CqlType, json: &Json) -> Result<Vec<u8>, ValueError> {
    let ty = ty.unfrozen();
    if json.is_null() {
        return Err(ValueError::Null("null has no serialized value"));
    }
    match ty {
        CqlType::Ascii => match json {
            Json::String(s) => ascii_from_string(s),
            _ => Err(expected("an ascii string", json)),
        },
        CqlType::Text => match json {
            Json::String(s) => Ok(s.as_bytes().to_vec()),
            _ => Err(expected("a UTF-8 string", json)),
        },
        CqlType::Blob => {
            let reason = match json {
                Json::String(s) => match s.strip_prefix("0x") {
                    Some(h) => match hex_decode(h) {
                        Some(b) => return Ok(b),
                        None => format!("cannot parse '{h}' as hex bytes"),
                    },
                    None => format!("String representation of blob is missing 0x prefix: {s}"),
                },
                other => format!(
                    "class java.lang.{} cannot be cast to class java.lang.String",
                    java_class(other)
                ),
            };
            Err(ValueError::marshal(format!(
                "Value '{}' is not a valid blob representation: {reason}",
                java_to_string(json)
            )))
        }
        CqlType::Custom(name) => match json {
            Json::String(s) => s.strip_prefix("0x").and_then(hex_decode).ok_or_else(|| {
                ValueError::Unsupported(format!("Cannot convert '{s}' to the custom type '{name}'"))
            }),
            _ => Err(ValueError::Unsupported(format!(
                "Cannot convert {} to the custom type '{name}'",
                java_to_string(json)
            ))),
        },
        CqlType::Boolean => match json {
            Json::Bool(b) => Ok(vec![*b as u8]),
            Json::String(s) if s.is_empty() || s.eq_ignore_ascii_case("false") => Ok(vec![0]),
            Json::String(s) if s.eq_ignore_ascii_case("true") => Ok(vec![1]),
            Json::String(s) => Err(ValueError::marshal(format!(
                "Unable to make boolean from '{s}'"
            ))),
            _ => Err(expected("a boolean value", json)),
        },
        CqlType::Tinyint
        | CqlType::Smallint
        | CqlType::Int
        | CqlType::Bigint
        | CqlType::Counter
            if json.as_str() == Some("") =>
        {
            // `fromString("")` is the empty value for these types
            Ok(Vec::new())
        }
        CqlType::Tinyint => match json {
            Json::String(_) | Json::Number(_) => parse_tinyint(&java_to_string(json)),
            _ => Err(expected("a byte value", json)),
        },
        CqlType::Smallint => match json {
            Json::String(_) | Json::Number(_) => parse_smallint(&java_to_string(json)),
            _ => Err(expected("a short value", json)),
        },
        CqlType::Int => match json {
            Json::String(s) => parse_int(s),
            Json::Number(n) if java_class(json) == "Integer" => {
                Ok((n.as_i64().unwrap_or(0) as i32).to_be_bytes().to_vec())
            }
            _ => Err(expected("an int value", json)),
        },
        CqlType::Bigint | CqlType::Counter => match json {
            Json::String(s) => parse_bigint(s),
            Json::Number(n) if n.as_i64().is_some() => {
                Ok(n.as_i64().unwrap_or(0).to_be_bytes().to_vec())
            }
            _ => Err(expected("a bigint value", json)),
        },
        CqlType::Varint => {
            let text = java_to_string(json);
            parse_bigint_text(&text)
                .filter(|_| !matches!(json, Json::Array(_) | Json::Object(_)))
                .map(|v| v.to_signed_bytes_be())
                .ok_or_else(|| {
                    ValueError::marshal(format!(
                        "Value '{text}' is not a valid representation of a varint value"
                    ))
                })
        }
        CqlType::Float => match json {
            Json::String(s) => {
                if s.is_empty() {
                    return Ok(Vec::new());
                }
                java_parse_f32(s)
                    .map(|x| x.to_be_bytes().to_vec())
                    .ok_or_else(|| ValueError::marshal(format!("Unable to make float from '{s}'")))
            }
            Json::Number(n) => {
                let x = match n.as_i64() {
                    Some(i) => i as f32,
                    None => n.as_f64().unwrap_or(f64::NAN) as f32,
                };
                Ok(x.to_be_bytes().to_vec())
            }
            _ => Err(expected("a float value", json)),
        },
        CqlType::Double => match json {
            Json::String(s) => {
                if s.is_empty() {
                    return Ok(Vec::new());
                }
                java_parse_f64(s)
                    .map(|x| x.to_be_bytes().to_vec())
                    .ok_or_else(|| ValueError::marshal(format!("Unable to make double from '{s}'")))
            }
            Json::Number(n) => Ok(n.as_f64().unwrap_or(f64::NAN).to_be_bytes().to_vec()),
            _ => Err(expected("a double value", json)),
        },
        CqlType::Decimal => {
            let text = java_to_string(json);
            if let Json::String(s) = json {
                if s.is_empty() {
                    return Ok(Vec::new());
                }
            }
            match json {
                Json::String(_) | Json::Number(_) => decimal_from_string(&text).ok(),
                _ => None,
            }
            .ok_or_else(|| {
                ValueError::marshal(format!(
                    "Value '{text}' is not a valid representation of a decimal value"
                ))
            })
        }
        CqlType::Timestamp => match json {
            Json::Number(n) if n.as_i64().is_some() => {
                Ok(n.as_i64().unwrap_or(0).to_be_bytes().to_vec())
            }
            Json::String(s) if s.is_empty() => Ok(Vec::new()),
            Json::String(s) => Ok(parse_timestamp(s)?.to_be_bytes().to_vec()),
            _ => Err(expected(
                "a long or a datestring representation of a timestamp value",
                json,
            )),
        },
        CqlType::Date => match json {
            Json::String(s) => Ok(parse_date(s)?.to_be_bytes().to_vec()),
            _ => Err(expected("a string representation of a date value", json)),
        },
        CqlType::Time => match json {
            Json::String(s) => Ok(parse_time(s)?.to_be_bytes().to_vec()),
            _ => Err(expected("a string representation of a time value", json)),
        },
        CqlType::Uuid => match json {
            Json::String(s) => uuid_from_string(s),
            _ => Err(expected("a string representation of a uuid", json)),
        },
        CqlType::Timeuuid => match json {
            Json::String(s) => timeuuid_from_string(s),
            _ => Err(expected("a string representation of a timeuuid", json)),
        },
        CqlType::Inet => match json {
            Json::String(s) if s.is_empty() => Ok(Vec::new()),
            Json::String(s) => parse_inet(s),
            _ => Err(expected("a string representation of an inet value", json)),
        },
        CqlType::Duration => match json {
            Json::String(s) => Ok(encode_duration(parse_duration(s)?)),
            _ => Err(expected("a string representation of a duration", json)),
        },
        CqlType::List(elem) => {
            let j = decode_nested(json)?;
            let Json::Array(items) = j.as_ref() else {
                return Err(expected("a list", &j));
            };
            let mut elems = Vec::with_capacity(items.len());
            for item in items {
                if item.is_null() {
                    return Err(ValueError::marshal("Invalid null element in list"));
                }
                elems.push(from_json(elem, item)?);
            }
            let refs: Vec<Option<&[u8]>> = elems.iter().map(|e| Some(e.as_slice())).collect();
            Ok(super::encode_list(&refs))
        }
        CqlType::Set(elem) => {
            let j = decode_nested(json)?;
            let Json::Array(items) = j.as_ref() else {
                return Err(expected("a list (representing a set)", &j));
            };
            let mut elems = Vec::with_capacity(items.len());
            for item in items {
                if item.is_null() {
                    return Err(ValueError::marshal("Invalid null element in set"));
                }
                elems.push(from_json(elem, item)?);
            }
            let refs: Vec<&[u8]> = elems.iter().map(|e| e.as_slice()).collect();
            Ok(encode_set(elem, &refs))
        }
        CqlType::Map(k, val) => {
            let j = decode_nested(json)?;
            let Json::Object(map) = j.as_ref() else {
                return Err(expected("a map", &j));
            };
            let mut entries = Vec::with_capacity(map.len());
            for (key, value) in map {
                if value.is_null() {
                    return Err(ValueError::marshal("Invalid null value in map"));
                }
                let kb = from_json(k, &Json::String(key.clone()))?;
                let vb = from_json(val, value)?;
                entries.push((kb, vb));
            }
            let refs: Vec<(&[u8], &[u8])> = entries
                .iter()
                .map(|(a, b)| (a.as_slice(), b.as_slice()))
                .collect();
            Ok(encode_map(k, &refs))
        }
        CqlType::Tuple(types) => {
            let j = decode_nested(json)?;
            let Json::Array(items) = j.as_ref() else {
                return Err(expected("a list representation of a tuple", &j));
            };
            if items.len() > types.len() {
                return Err(ValueError::marshal(format!(
                    "Tuple contains extra items (expected {}): {}",
                    types.len(),
                    java_to_string(&j)
                )));
            }
            if items.len() < types.len() {
                return Err(ValueError::marshal(format!(
                    "Tuple is missing items (expected {}): {}",
                    types.len(),
                    java_to_string(&j)
                )));
            }
            let mut comps = Vec::with_capacity(items.len());
            for (t, item) in types.iter().zip(items) {
                comps.push(if item.is_null() {
                    None
                } else {
                    Some(from_json(t, item)?)
                });
            }
            let refs: Vec<Option<&[u8]>> = comps.iter().map(|c| c.as_deref()).collect();
            Ok(encode_tuple(&refs))
        }
        CqlType::Udt(udt) => {
            let j = decode_nested(json)?;
            let Json::Object(map) = j.as_ref() else {
                return Err(expected("a map", &j));
            };
            // Cassandra's JsonUtils.handleCaseSensitivity
            let mut fields: Vec<(String, &Json)> = Vec::with_capacity(map.len());
            for (key, value) in map {
                let name = if key.len() >= 2 && key.starts_with('"') && key.ends_with('"') {
                    key[1..key.len() - 1].to_string()
                } else {
                    key.to_lowercase()
                };
                fields.retain(|(n, _)| *n != name);
                fields.push((name, value));
            }
            if let Some((unknown, _)) = fields
                .iter()
                .find(|(n, _)| !udt.fields.iter().any(|(f, _)| f == n))
            {
                return Err(ValueError::marshal(format!(
                    "Unknown field '{unknown}' in value of user defined type {}",
                    udt.name
                )));
            }
            let mut comps = Vec::with_capacity(udt.fields.len());
            for (name, t) in &udt.fields {
                let value = fields.iter().find(|(n, _)| n == name).map(|(_, v)| *v);
                comps.push(match value {
                    None | Some(Json::Null) => None,
                    Some(v) => Some(from_json(t, v)?),
                });
            }
            let refs: Vec<Option<&[u8]>> = comps.iter().map(|c| c.as_deref()).collect();
            Ok(encode_tuple(&refs))
        }
        CqlType::Vector(elem, dim) => {
            let j = decode_nested(json)?;
            let Json::Array(items) = j.as_ref() else {
                return Err(expected("a list", &j));
            };
            if items.len() != *dim as usize {
                return Err(ValueError::marshal(format!(
                    "List had incorrect size: expected {dim} but given {}; {}",
                    items.len(),
                    java_to_string(&j)
                )));
            }
            let mut elems = Vec::with_capacity(items.len());
            for item in items {
                if item.is_null() {
                    return Err(ValueError::marshal("Invalid null element in list"));
                }
                elems.push(from_json(elem, item)?);
            }
            let refs: Vec<&[u8]> = elems.iter().map(|e| e.as_slice()).collect();
            Ok(encode_vector(elem, &refs))
        }
        CqlType::Frozen(inner) => from_json(inner, json),
    }
}
