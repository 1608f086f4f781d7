//! TEMPORARY stub of the value layer (replaced by the full implementation on merge).
#![allow(dead_code)]
use super::ast::Literal;
use super::types::CqlType;
use std::cmp::Ordering;

#[derive(Debug, thiserror::Error)]
pub enum ValueError {
    #[error("{0}")]
    Invalid(String),
}

pub fn validate(ty: &CqlType, v: &[u8]) -> Result<(), ValueError> {
    let want = match ty.unfrozen() {
        CqlType::Int => Some(4),
        CqlType::Bigint | CqlType::Timestamp | CqlType::Double | CqlType::Counter => Some(8),
        CqlType::Float => Some(4),
        CqlType::Boolean => Some(1),
        CqlType::Uuid | CqlType::Timeuuid => Some(16),
        _ => None,
    };
    if let Some(n) = want {
        if !v.is_empty() && v.len() != n {
            return Err(ValueError::Invalid(format!("Expected {n} or 0 byte value ({})", v.len())));
        }
    }
    if matches!(ty, CqlType::Text) && std::str::from_utf8(v).is_err() {
        return Err(ValueError::Invalid("String didn't validate.".into()));
    }
    Ok(())
}

pub fn literal_to_bytes(ty: &CqlType, lit: &Literal) -> Result<Vec<u8>, ValueError> {
    let bad = || ValueError::Invalid(format!("Invalid literal {lit:?} for type {ty}"));
    Ok(match (ty.unfrozen(), lit) {
        (CqlType::Int, Literal::Integer(s)) => s.parse::<i32>().map_err(|_| bad())?.to_be_bytes().to_vec(),
        (CqlType::Bigint | CqlType::Counter | CqlType::Timestamp, Literal::Integer(s)) => {
            s.parse::<i64>().map_err(|_| bad())?.to_be_bytes().to_vec()
        }
        (CqlType::Double, Literal::Integer(s) | Literal::Float(s)) => {
            s.parse::<f64>().map_err(|_| bad())?.to_be_bytes().to_vec()
        }
        (CqlType::Float, Literal::Integer(s) | Literal::Float(s)) => {
            s.parse::<f32>().map_err(|_| bad())?.to_be_bytes().to_vec()
        }
        (CqlType::Text | CqlType::Ascii, Literal::String(s)) => s.as_bytes().to_vec(),
        (CqlType::Blob, Literal::Blob(b)) => b.clone(),
        (CqlType::Boolean, Literal::Boolean(b)) => vec![*b as u8],
        (CqlType::Uuid | CqlType::Timeuuid, Literal::Uuid(s)) => {
            uuid::Uuid::parse_str(s).map_err(|_| bad())?.as_bytes().to_vec()
        }
        _ => return Err(bad()),
    })
}

pub fn compare(ty: &CqlType, a: &[u8], b: &[u8]) -> Ordering {
    let (mut x, mut y) = (Vec::new(), Vec::new());
    encode_key(ty, a, false, &mut x);
    encode_key(ty, b, false, &mut y);
    x.cmp(&y)
}

pub fn encode_key(ty: &CqlType, v: &[u8], desc: bool, out: &mut Vec<u8>) {
    let start = out.len();
    match ty {
        CqlType::Int | CqlType::Bigint | CqlType::Timestamp if !v.is_empty() => {
            out.push(1);
            out.push(v[0] ^ 0x80);
            out.extend_from_slice(&v[1..]);
        }
        _ => {
            out.push(1);
            for &b in v {
                out.push(b);
                if b == 0 {
                    out.push(0xff);
                }
            }
            out.extend_from_slice(&[0, 1]);
        }
    }
    if desc {
        for b in &mut out[start..] {
            *b = !*b;
        }
    }
}

pub fn decode_key(ty: &CqlType, input: &mut &[u8], desc: bool) -> Result<Vec<u8>, ValueError> {
    let bad = || ValueError::Invalid("bad key".into());
    let get = |i: usize, inp: &[u8]| -> Result<u8, ValueError> {
        inp.get(i).map(|b| if desc { !b } else { *b }).ok_or_else(bad)
    };
    let _tag = get(0, input)?;
    let fixed = match ty {
        CqlType::Int => Some(4),
        CqlType::Bigint | CqlType::Timestamp => Some(8),
        _ => None,
    };
    if let Some(n) = fixed {
        let mut out = Vec::with_capacity(n);
        for i in 0..n {
            out.push(get(1 + i, input)?);
        }
        out[0] ^= 0x80;
        *input = &input[1 + n..];
        return Ok(out);
    }
    let mut out = Vec::new();
    let mut i = 1;
    loop {
        let b = get(i, input)?;
        if b == 0 {
            let n = get(i + 1, input)?;
            if n == 1 {
                *input = &input[i + 2..];
                return Ok(out);
            }
            out.push(0);
            i += 2;
        } else {
            out.push(b);
            i += 1;
        }
    }
}

pub fn to_json(ty: &CqlType, v: &[u8]) -> String {
    match ty {
        CqlType::Text | CqlType::Ascii => serde_json::Value::String(String::from_utf8_lossy(v).into_owned()).to_string(),
        _ => format!("\"0x{}\"", v.iter().map(|b| format!("{b:02x}")).collect::<String>()),
    }
}
