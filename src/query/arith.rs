//! Arithmetic operators (`+ - * / %`, unary `-`) with Cassandra's rules (OperationFcts):
//! the result type of two numbers is the widest of the operand types (floating point if either
//! is; `varint`/`decimal` when a side is unbounded), fixed-width integers wrap as Java's do,
//! `decimal` division keeps at least 32 significant digits (Cassandra's DecimalType), and
//! `timestamp`/`date` +/- `duration` move the time (months by calendar); `text`/`ascii` `+`
//! concatenates.

use super::QueryError;
use crate::cql::ast::{BinaryOp, Literal};
use crate::cql::types::CqlType;
use crate::cql::value;
use num_bigint::{BigInt, Sign};

/// Cassandra's DecimalType: precision of + - *, and the scale bounds of division.
const MAX_PRECISION: usize = 10_000;
const MIN_SCALE: i64 = 32;
const MAX_SCALE: i64 = 1000;
/// Larger operands (over ~21,000 decimal digits) are refused rather than computed: their
/// decimal digit counts and products would take the server's CPU.
const MAX_OPERAND_BITS: u64 = 70_000;

pub fn symbol(op: BinaryOp) -> char {
    match op {
        BinaryOp::Add => '+',
        BinaryOp::Sub => '-',
        BinaryOp::Mul => '*',
        BinaryOp::Div => '/',
        BinaryOp::Mod => '%',
    }
}

fn function_name(op: BinaryOp) -> &'static str {
    match op {
        BinaryOp::Add => "_add",
        BinaryOp::Sub => "_substract",
        BinaryOp::Mul => "_multiply",
        BinaryOp::Div => "_divide",
        BinaryOp::Mod => "_modulo",
    }
}

pub fn is_numeric(t: &CqlType) -> bool {
    super::functions::is_numeric(t)
}

/// (size in bytes, unbounded = usize::MAX; floating point)
fn shape(t: &CqlType) -> (usize, bool) {
    match t.unfrozen() {
        CqlType::Tinyint => (1, false),
        CqlType::Smallint => (2, false),
        CqlType::Int => (4, false),
        CqlType::Bigint | CqlType::Counter => (8, false),
        CqlType::Float => (4, true),
        CqlType::Double => (8, true),
        CqlType::Decimal => (usize::MAX, true),
        _ => (usize::MAX, false),
    }
}

/// The type Cassandra prefers for an untyped numeric literal: int, bigint or varint for
/// integers; double for floats (decimal when a double cannot hold it).
pub fn literal_type(l: &Literal) -> Option<CqlType> {
    match l {
        Literal::Integer(s) => Some(match s.parse::<i64>() {
            Ok(v) if i32::try_from(v).is_ok() => CqlType::Int,
            Ok(_) => CqlType::Bigint,
            Err(_) => CqlType::Varint,
        }),
        Literal::Float(s) => Some(
            if value::literal_to_bytes(&CqlType::Double, l).is_ok() || s.contains("NaN") {
                CqlType::Double
            } else {
                CqlType::Decimal
            },
        ),
        Literal::Duration(_) => Some(CqlType::Duration),
        Literal::String(_) => Some(CqlType::Text),
        Literal::Boolean(_) => Some(CqlType::Boolean),
        Literal::Uuid(_) => Some(CqlType::Uuid),
        Literal::Blob(_) => Some(CqlType::Blob),
        Literal::Null => None,
    }
}

/// The result type of `l op r`, or Cassandra's error (`names` are the operands as written).
pub fn result_type(
    op: BinaryOp,
    l: &CqlType,
    r: &CqlType,
    names: (&str, &str),
) -> Result<CqlType, String> {
    let (l, r) = (l.unfrozen(), r.unfrozen());
    if is_numeric(l) && is_numeric(r) {
        let (ls, lf) = shape(l);
        let (rs, rf) = shape(r);
        let size = ls.max(rs);
        return Ok(match (lf || rf, size) {
            (true, 4) => CqlType::Float,
            (true, 8) => CqlType::Double,
            (true, _) => CqlType::Decimal,
            (false, 1) => CqlType::Tinyint,
            (false, 2) => CqlType::Smallint,
            (false, 4) => CqlType::Int,
            (false, 8) => CqlType::Bigint,
            (false, _) => CqlType::Varint,
        });
    }
    // string concatenation (Cassandra 5.0): ascii + ascii is ascii, any other mix is text
    if op == BinaryOp::Add
        && matches!(l, CqlType::Text | CqlType::Ascii)
        && matches!(r, CqlType::Text | CqlType::Ascii)
    {
        return Ok(if *l == CqlType::Ascii && *r == CqlType::Ascii {
            CqlType::Ascii
        } else {
            CqlType::Text
        });
    }
    if matches!(op, BinaryOp::Add | BinaryOp::Sub)
        && matches!(l, CqlType::Timestamp | CqlType::Date)
        && matches!(r, CqlType::Duration)
    {
        return Ok(l.clone());
    }
    Err(format!(
        "the '{}' operation is not supported between {} and {}",
        symbol(op),
        names.0,
        names.1
    ))
}

fn failure(op: char, lt: &CqlType, rt: Option<&CqlType>, msg: &str) -> QueryError {
    let (name, args, text) = match rt {
        Some(rt) => (
            function_name_of(op),
            vec![lt.to_string(), rt.to_string()],
            format!("the operation '{lt} {op} {rt}' failed: {msg}"),
        ),
        None => (
            "_negate",
            vec![lt.to_string()],
            format!("the operation '{op}{lt}' failed: {msg}"),
        ),
    };
    QueryError::FunctionFailure {
        message: text,
        function: name.to_string(),
        arg_types: args,
    }
}

fn function_name_of(op: char) -> &'static str {
    [
        BinaryOp::Add,
        BinaryOp::Sub,
        BinaryOp::Mul,
        BinaryOp::Div,
        BinaryOp::Mod,
    ]
    .into_iter()
    .find(|o| symbol(*o) == op)
    .map(function_name)
    .unwrap_or("_add")
}

/// A number decoded from its type.
#[derive(Clone, Debug)]
enum Num {
    Int(i64),
    Big(BigInt),
    F32(f32),
    F64(f64),
    /// unscaled, scale
    Dec(BigInt, i32),
}

fn decode(t: &CqlType, v: &[u8]) -> Option<Num> {
    Some(match t.unfrozen() {
        CqlType::Tinyint => Num::Int(*v.first()? as i8 as i64),
        CqlType::Smallint => Num::Int(i16::from_be_bytes(v.try_into().ok()?) as i64),
        CqlType::Int => Num::Int(i32::from_be_bytes(v.try_into().ok()?) as i64),
        CqlType::Bigint | CqlType::Counter => Num::Int(i64::from_be_bytes(v.try_into().ok()?)),
        CqlType::Varint => Num::Big(BigInt::from_signed_bytes_be(v)),
        CqlType::Float => Num::F32(f32::from_be_bytes(v.try_into().ok()?)),
        CqlType::Double => Num::F64(f64::from_be_bytes(v.try_into().ok()?)),
        CqlType::Decimal => {
            let scale = i32::from_be_bytes(v.get(..4)?.try_into().ok()?);
            Num::Dec(BigInt::from_signed_bytes_be(&v[4..]), scale)
        }
        _ => return None,
    })
}

impl Num {
    fn as_i64(&self) -> i64 {
        match self {
            Num::Int(i) => *i,
            _ => 0,
        }
    }
    fn as_big(&self) -> BigInt {
        match self {
            Num::Int(i) => BigInt::from(*i),
            Num::Big(b) => b.clone(),
            _ => BigInt::from(0),
        }
    }
    fn as_f32(&self) -> f32 {
        match self {
            Num::Int(i) => *i as f32,
            Num::F32(f) => *f,
            Num::F64(f) => *f as f32,
            _ => 0.0,
        }
    }
    fn as_f64(&self) -> f64 {
        match self {
            Num::Int(i) => *i as f64,
            Num::F32(f) => *f as f64,
            Num::F64(f) => *f,
            _ => 0.0,
        }
    }
    /// Java's `toBigDecimal`: exact for decimal and varint, `BigDecimal.valueOf(double)` (the
    /// shortest decimal of the double, at least one fraction digit) for the others.
    fn as_dec(&self) -> Result<(BigInt, i32), &'static str> {
        match self {
            Num::Dec(u, s) => Ok((u.clone(), *s)),
            Num::Big(b) => Ok((b.clone(), 0)),
            other => {
                let d = other.as_f64();
                if d.is_nan() {
                    return Err("A NaN cannot be converted into a decimal");
                }
                if d.is_infinite() {
                    return Err("An infinite number cannot be converted into a decimal");
                }
                Ok(java_double_decimal(d))
            }
        }
    }
}

/// `new BigDecimal(Double.toString(d))`.
fn java_double_decimal(d: f64) -> (BigInt, i32) {
    let sci = format!("{:e}", d.abs());
    let (mant, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let digits: String = mant.chars().filter(|c| c.is_ascii_digit()).collect();
    let n = digits.len() as i32;
    let abs = d.abs();
    // Java prints plain between 10^-3 and 10^7, else d.dddE±n; both keep one fraction digit.
    let scale = if (1e-3..1e7).contains(&abs) || abs == 0.0 {
        (n - 1 - exp).max(1)
    } else {
        (n - 1).max(1) - exp
    };
    let shift = scale - (n - 1 - exp);
    let mut u: BigInt = digits.parse().unwrap_or_default();
    if shift > 0 {
        u *= BigInt::from(10).pow(shift as u32);
    }
    if d.is_sign_negative() {
        u = -u;
    }
    (u, scale)
}

fn digits(u: &BigInt) -> usize {
    if u.sign() == Sign::NoSign {
        1
    } else {
        u.magnitude().to_str_radix(10).len()
    }
}

fn pow10(n: usize) -> BigInt {
    BigInt::from(10).pow(n as u32)
}

/// `|q| / 10^drop` rounded half-up, with q's sign.
fn round_half_up(q: &BigInt, drop: usize) -> BigInt {
    let neg = q.sign() == Sign::Minus;
    let mag = BigInt::from(q.magnitude().clone());
    let div = pow10(drop);
    let (mut kept, rest) = (&mag / &div, &mag % &div);
    let twice: BigInt = &rest * BigInt::from(2);
    if twice >= div {
        kept += 1;
    }
    if neg {
        -kept
    } else {
        kept
    }
}

/// Rounds to MAX_PRECISION significant digits (Cassandra's MathContext(10000), half-up).
fn round_dec(u: BigInt, s: i32) -> Result<(BigInt, i32), &'static str> {
    let n = digits(&u);
    if n <= MAX_PRECISION {
        return Ok((u, s));
    }
    let drop = n - MAX_PRECISION;
    let scale = i32::try_from(s as i64 - drop as i64).map_err(|_| "Overflow")?;
    Ok((round_half_up(&u, drop), scale))
}

/// Brings two decimals to the same scale.
fn align(a: &(BigInt, i32), b: &(BigInt, i32)) -> Result<(BigInt, BigInt, i32), &'static str> {
    let s = a.1.max(b.1);
    let grow = |x: &(BigInt, i32)| -> Result<BigInt, &'static str> {
        let by = (s as i64 - x.1 as i64) as usize;
        if by > MAX_PRECISION {
            return Err("Overflow");
        }
        Ok(&x.0 * pow10(by))
    };
    Ok((grow(a)?, grow(b)?, s))
}

fn dec_op(op: BinaryOp, a: (BigInt, i32), b: (BigInt, i32)) -> Result<(BigInt, i32), &'static str> {
    if a.0.bits() > MAX_OPERAND_BITS || b.0.bits() > MAX_OPERAND_BITS {
        return Err("Overflow");
    }
    let zero = BigInt::from(0);
    let ten = BigInt::from(10);
    let undefined = |a: &BigInt| {
        if *a == BigInt::from(0) {
            "Division undefined"
        } else {
            "Division by zero"
        }
    };
    match op {
        BinaryOp::Add | BinaryOp::Sub => {
            let (x, y, s) = align(&a, &b)?;
            round_dec(if op == BinaryOp::Add { x + y } else { x - y }, s)
        }
        BinaryOp::Mul => {
            if digits(&a.0) + digits(&b.0) > 2 * MAX_PRECISION {
                return Err("Overflow");
            }
            let s = i32::try_from(a.1 as i64 + b.1 as i64).map_err(|_| "Overflow")?;
            round_dec(a.0 * b.0, s)
        }
        BinaryOp::Div => {
            if b.0 == zero {
                return Err(undefined(&a.0));
            }
            // Cassandra's DecimalType.divide: at least 32 significant digits (and never fewer
            // decimals than either operand, at most 1000), rounded half-up, trailing zeros
            // stripped.
            let first = (digits(&a.0) as i64 - a.1 as i64) - (digits(&b.0) as i64 - b.1 as i64);
            let scale = (MIN_SCALE - first)
                .max(a.1 as i64)
                .max(b.1 as i64)
                .clamp(MIN_SCALE, MAX_SCALE);
            // q = a / b * 10^scale = a.0 * 10^(scale - a.1 + b.1) / b.0
            let e = scale - a.1 as i64 + b.1 as i64;
            if e.unsigned_abs() > (2 * MAX_PRECISION) as u64 {
                return Err("Overflow");
            }
            let (num, den) = if e >= 0 {
                (&a.0 * pow10(e as usize), b.0.clone())
            } else {
                (a.0.clone(), &b.0 * pow10((-e) as usize))
            };
            // round half-up on the magnitude: (2|num| + |den|) / (2|den|)
            let neg = (num.sign() == Sign::Minus) != (den.sign() == Sign::Minus);
            let (n, d) = (
                BigInt::from(num.magnitude().clone()),
                BigInt::from(den.magnitude().clone()),
            );
            let mut q: BigInt = (&n * BigInt::from(2) + &d) / (&d * BigInt::from(2));
            if neg {
                q = -q;
            }
            let mut scale = scale;
            if q == zero {
                return Ok((zero, 0));
            }
            while (&q % &ten) == zero {
                q /= &ten;
                scale -= 1;
            }
            Ok((q, i32::try_from(scale).map_err(|_| "Overflow")?))
        }
        BinaryOp::Mod => {
            if b.0 == zero {
                return Err(undefined(&a.0));
            }
            let (x, y, s) = align(&a, &b)?;
            let q = &x / &y;
            // the integral quotient takes the preferred scale (trailing zeros permitting); the
            // remainder's scale is that of a - q * b
            let preferred = a.1 as i64 - b.1 as i64;
            let q_scale = if preferred >= 0 || q == zero {
                preferred
            } else {
                let mut tz = 0i64;
                let mut m = q.clone();
                while tz < -preferred && (&m % &ten) == zero {
                    m /= &ten;
                    tz += 1;
                }
                -tz
            };
            let rem = x - q * y;
            let rs = (a.1 as i64).max(q_scale + b.1 as i64);
            let rs = i32::try_from(rs).map_err(|_| "Overflow")?;
            // rem is at scale s; bring it to rs
            Ok(if rs >= s {
                (rem * pow10((rs - s) as usize), rs)
            } else {
                (rem / pow10((s - rs) as usize), rs)
            })
        }
    }
}

fn int_op(op: BinaryOp, a: i64, b: i64, bits: u32) -> Result<i64, &'static str> {
    let wrap = |v: i64| -> i64 {
        match bits {
            8 => v as i8 as i64,
            16 => v as i16 as i64,
            32 => v as i32 as i64,
            _ => v,
        }
    };
    Ok(wrap(match op {
        BinaryOp::Add => a.wrapping_add(b),
        BinaryOp::Sub => a.wrapping_sub(b),
        BinaryOp::Mul => a.wrapping_mul(b),
        BinaryOp::Div if b == 0 => return Err("/ by zero"),
        BinaryOp::Div => a.wrapping_div(b),
        BinaryOp::Mod if b == 0 => return Err("/ by zero"),
        BinaryOp::Mod => a.wrapping_rem(b),
    }))
}

fn encode_int(t: &CqlType, v: i64) -> Vec<u8> {
    match t {
        CqlType::Tinyint => vec![v as i8 as u8],
        CqlType::Smallint => (v as i16).to_be_bytes().to_vec(),
        CqlType::Int => (v as i32).to_be_bytes().to_vec(),
        _ => v.to_be_bytes().to_vec(),
    }
}

/// `l op r` for values of types `lt` and `rt` (checked by [`result_type`], which gave `ret`).
/// A null or empty operand gives null.
pub fn apply(
    op: BinaryOp,
    lt: &CqlType,
    l: Option<&[u8]>,
    rt: &CqlType,
    r: Option<&[u8]>,
    ret: &CqlType,
) -> Result<Option<Vec<u8>>, QueryError> {
    let (Some(l), Some(r)) = (l, r) else {
        return Ok(None);
    };
    if l.is_empty() || r.is_empty() {
        return Ok(None);
    }
    let fail = |m: &str| failure(symbol(op), lt.unfrozen(), Some(rt.unfrozen()), m);
    let bad = || fail("invalid operand");
    let ret = ret.unfrozen();
    if matches!(ret, CqlType::Timestamp | CqlType::Date) {
        return temporal(op, ret, l, r).map(Some).map_err(|m| fail(&m));
    }
    if matches!(ret, CqlType::Text | CqlType::Ascii) {
        return Ok(Some([l, r].concat()));
    }
    let a = decode(lt, l).ok_or_else(bad)?;
    let b = decode(rt, r).ok_or_else(bad)?;
    Ok(Some(match ret {
        CqlType::Tinyint | CqlType::Smallint | CqlType::Int | CqlType::Bigint => {
            let bits = match ret {
                CqlType::Tinyint => 8,
                CqlType::Smallint => 16,
                CqlType::Int => 32,
                _ => 64,
            };
            encode_int(ret, int_op(op, a.as_i64(), b.as_i64(), bits).map_err(fail)?)
        }
        CqlType::Varint => {
            let (x, y) = (a.as_big(), b.as_big());
            let zero = BigInt::from(0);
            let v = match op {
                BinaryOp::Add => x + y,
                BinaryOp::Sub => x - y,
                BinaryOp::Mul => {
                    if x.bits() + y.bits() > 8 * MAX_OPERAND_BITS {
                        return Err(fail("result too large"));
                    }
                    x * y
                }
                BinaryOp::Div | BinaryOp::Mod if y == zero => {
                    return Err(fail("BigInteger divide by zero"))
                }
                BinaryOp::Div => x / y,
                BinaryOp::Mod => x % y,
            };
            v.to_signed_bytes_be()
        }
        CqlType::Float => float_op(op, a.as_f32(), b.as_f32()).to_be_bytes().to_vec(),
        CqlType::Double => float_op(op, a.as_f64(), b.as_f64()).to_be_bytes().to_vec(),
        CqlType::Decimal => {
            let x = a.as_dec().map_err(fail)?;
            let y = b.as_dec().map_err(fail)?;
            let (u, s) = dec_op(op, x, y).map_err(fail)?;
            value::decimal_bytes(&u, s)
        }
        _ => return Err(bad()),
    }))
}

/// IEEE arithmetic, as Java's float and double (`%` is fmod, division by zero is infinite).
fn float_op<
    F: std::ops::Add<Output = F>
        + std::ops::Sub<Output = F>
        + std::ops::Mul<Output = F>
        + std::ops::Div<Output = F>
        + std::ops::Rem<Output = F>,
>(
    op: BinaryOp,
    x: F,
    y: F,
) -> F {
    match op {
        BinaryOp::Add => x + y,
        BinaryOp::Sub => x - y,
        BinaryOp::Mul => x * y,
        BinaryOp::Div => x / y,
        BinaryOp::Mod => x % y,
    }
}

/// `-v` for a value of type `t`.
pub fn negate(t: &CqlType, v: Option<&[u8]>) -> Result<Option<Vec<u8>>, QueryError> {
    let Some(v) = v else { return Ok(None) };
    if v.is_empty() {
        return Ok(None);
    }
    let t = t.unfrozen();
    let n = decode(t, v).ok_or_else(|| failure('-', t, None, "invalid operand"))?;
    Ok(Some(match (t, n) {
        (CqlType::Varint, Num::Big(b)) => (-b).to_signed_bytes_be(),
        (CqlType::Float, Num::F32(f)) => (-f).to_be_bytes().to_vec(),
        (CqlType::Double, Num::F64(f)) => (-f).to_be_bytes().to_vec(),
        (CqlType::Decimal, Num::Dec(u, s)) => value::decimal_bytes(&-u, s),
        (t, Num::Int(i)) => encode_int(t, i.wrapping_neg()),
        _ => return Err(failure('-', t, None, "invalid operand")),
    }))
}

const DAY_MS: i64 = 86_400_000;

/// timestamp/date +/- duration, as Cassandra's `Duration.addTo` (months by calendar, clamping the
/// day of month; days and nanoseconds as fixed lengths).
fn temporal(op: BinaryOp, ret: &CqlType, l: &[u8], r: &[u8]) -> Result<Vec<u8>, String> {
    let (months, days, nanos) = value::decode_duration(r).map_err(|e| e.to_string())?;
    let sign: i64 = if op == BinaryOp::Sub { -1 } else { 1 };
    let ms = match ret {
        CqlType::Date => {
            if nanos != 0 {
                let d = value::to_cql_literal(&CqlType::Duration, r);
                return Err(format!("The duration must have a day precision. Was: {d}"));
            }
            let d = u32::from_be_bytes(l.try_into().map_err(|_| "invalid date")?);
            (d as i64 - (1i64 << 31)) * DAY_MS
        }
        _ => i64::from_be_bytes(l.try_into().map_err(|_| "invalid timestamp")?),
    };
    let (months, days, nanos) = (sign * months as i64, sign * days as i64, sign * nanos);
    let out = if months == 0 {
        ms.wrapping_add(days.wrapping_mul(DAY_MS))
            .wrapping_add(nanos / 1_000_000)
    } else {
        let day = ms.div_euclid(DAY_MS);
        let in_day = ms.rem_euclid(DAY_MS);
        let (y, m, d) = value::civil_from_days(day);
        let total = y * 12 + (m as i64 - 1) + months;
        let (ny, nm) = (total.div_euclid(12), total.rem_euclid(12) as u32 + 1);
        let nd = d.min(value::month_length(ny, nm));
        let base = value::days_from_civil(ny, nm, nd) + days;
        base.wrapping_mul(DAY_MS)
            .wrapping_add(in_day)
            .wrapping_add(nanos / 1_000_000)
    };
    Ok(match ret {
        CqlType::Date => {
            let d = out.div_euclid(DAY_MS) + (1i64 << 31);
            let d = u32::try_from(d).map_err(|_| "date out of range".to_string())?;
            d.to_be_bytes().to_vec()
        }
        _ => out.to_be_bytes().to_vec(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dec(s: &str) -> (BigInt, i32) {
        value::parse_decimal(s).unwrap()
    }
    fn show(d: (BigInt, i32)) -> String {
        value::to_cql_literal(&CqlType::Decimal, &value::decimal_bytes(&d.0, d.1))
    }
    fn int_as_dec(i: i64) -> (BigInt, i32) {
        Num::Int(i).as_dec().unwrap()
    }

    #[test]
    fn decimals_as_cassandra() {
        // From Cassandra's OperationFctsTest (a tinyint 1, b smallint 2, c int 3, d bigint 4,
        // g varint 7, h decimal 8.5).
        let h = || dec("8.5");
        assert_eq!(
            show(dec_op(BinaryOp::Add, h(), int_as_dec(1)).unwrap()),
            "9.5"
        );
        assert_eq!(
            show(dec_op(BinaryOp::Mul, int_as_dec(1), h()).unwrap()),
            "8.50"
        );
        assert_eq!(
            show(dec_op(BinaryOp::Mul, (BigInt::from(7), 0), h()).unwrap()),
            "59.5"
        );
        assert_eq!(
            show(dec_op(BinaryOp::Div, h(), int_as_dec(3)).unwrap()),
            "2.83333333333333333333333333333333"
        );
        assert_eq!(
            show(dec_op(BinaryOp::Div, int_as_dec(1), h()).unwrap()),
            "0.11764705882352941176470588235294"
        );
        assert_eq!(show(dec_op(BinaryOp::Div, h(), h()).unwrap()), "1");
        assert_eq!(
            show(dec_op(BinaryOp::Div, (BigInt::from(7), 0), dec("6.5")).unwrap()),
            "1.07692307692307692307692307692308"
        );
        assert_eq!(
            show(dec_op(BinaryOp::Div, dec("100"), dec("4")).unwrap()),
            "25"
        );
        assert_eq!(
            show(dec_op(BinaryOp::Div, h(), int_as_dec(2)).unwrap()),
            "4.25"
        );
        assert_eq!(
            show(dec_op(BinaryOp::Mod, int_as_dec(1), h()).unwrap()),
            "1.0"
        );
        assert_eq!(
            show(dec_op(BinaryOp::Mod, (BigInt::from(7), 0), h()).unwrap()),
            "7"
        );
        assert_eq!(show(dec_op(BinaryOp::Mod, h(), h()).unwrap()), "0.0");
        assert_eq!(
            show(dec_op(BinaryOp::Mod, h(), int_as_dec(3)).unwrap()),
            "2.5"
        );
        let big = dec("123456789112345678921234567893123456");
        assert_eq!(
            show(dec_op(BinaryOp::Mod, big.clone(), dec("2")).unwrap()),
            "0"
        );
        assert_eq!(
            show(dec_op(BinaryOp::Mod, big, int_as_dec(2)).unwrap()),
            "0.0"
        );
        assert_eq!(
            dec_op(BinaryOp::Div, h(), dec("0")).unwrap_err(),
            "Division by zero"
        );
        // float 5.5 as Java's BigDecimal.valueOf(double)
        assert_eq!(show(Num::F32(5.5).as_dec().unwrap()), "5.5");
        assert_eq!(show(Num::F64(1e7).as_dec().unwrap()), "1.0E+7");
        assert_eq!(show(Num::F64(0.001).as_dec().unwrap()), "0.001");
    }

    #[test]
    fn huge_operands_fail_instead_of_spinning() {
        let huge = (BigInt::from(1) << 200_000u32, 0);
        assert_eq!(
            dec_op(BinaryOp::Mul, huge.clone(), huge.clone()),
            Err("Overflow")
        );
        assert_eq!(
            dec_op(
                BinaryOp::Add,
                (BigInt::from(1), i32::MIN),
                (BigInt::from(1), 0)
            ),
            Err("Overflow")
        );
        assert_eq!(
            dec_op(
                BinaryOp::Div,
                (BigInt::from(1), i32::MAX),
                (BigInt::from(3), i32::MIN)
            ),
            Err("Overflow")
        );
        let big = value::decimal_bytes(&(BigInt::from(1) << 200_000u32), 0);
        let r = apply(
            BinaryOp::Mul,
            &CqlType::Decimal,
            Some(&big),
            &CqlType::Decimal,
            Some(&big),
            &CqlType::Decimal,
        );
        assert!(matches!(r, Err(QueryError::FunctionFailure { .. })));
        let v = (BigInt::from(1) << 400_000u32).to_signed_bytes_be();
        let r = apply(
            BinaryOp::Mul,
            &CqlType::Varint,
            Some(&v),
            &CqlType::Varint,
            Some(&v),
            &CqlType::Varint,
        );
        assert!(matches!(r, Err(QueryError::FunctionFailure { .. })));
    }

    #[test]
    fn integers_wrap_like_java() {
        assert_eq!(
            int_op(BinaryOp::Add, i32::MAX as i64, 1, 32),
            Ok(i32::MIN as i64)
        );
        assert_eq!(int_op(BinaryOp::Div, i64::MIN, -1, 64), Ok(i64::MIN));
        assert_eq!(int_op(BinaryOp::Mod, -7, 3, 32), Ok(-1));
        assert_eq!(int_op(BinaryOp::Div, 1, 0, 8), Err("/ by zero"));
        assert_eq!(int_op(BinaryOp::Mul, 100, 2, 8), Ok(-56));
    }

    #[test]
    fn result_types() {
        use CqlType as T;
        let rt = |a: T, b: T| result_type(BinaryOp::Add, &a, &b, ("a", "b")).unwrap();
        assert_eq!(rt(T::Int, T::Bigint), T::Bigint);
        assert_eq!(rt(T::Int, T::Float), T::Float);
        assert_eq!(rt(T::Bigint, T::Float), T::Double);
        assert_eq!(rt(T::Varint, T::Float), T::Decimal);
        assert_eq!(rt(T::Tinyint, T::Smallint), T::Smallint);
        assert_eq!(rt(T::Counter, T::Int), T::Bigint);
        assert_eq!(rt(T::Varint, T::Bigint), T::Varint);
        assert_eq!(rt(T::Timestamp, T::Duration), T::Timestamp);
        assert_eq!(rt(T::Ascii, T::Ascii), T::Ascii);
        assert_eq!(rt(T::Ascii, T::Text), T::Text);
        assert!(result_type(BinaryOp::Sub, &T::Text, &T::Text, ("a", "b")).is_err());
        assert!(result_type(BinaryOp::Mul, &T::Timestamp, &T::Duration, ("a", "b")).is_err());
        assert_eq!(
            result_type(BinaryOp::Add, &T::Boolean, &T::Int, ("b", "1")).unwrap_err(),
            "the '+' operation is not supported between b and 1"
        );
    }

    #[test]
    fn months_clamp_to_month_end() {
        // 2024-01-31 + 1mo = 2024-02-29
        let jan31 = value::days_from_civil(2024, 1, 31) * DAY_MS;
        let mo = value::encode_duration(value::DurationValue {
            months: 1,
            days: 0,
            nanoseconds: 0,
        });
        let out = temporal(
            BinaryOp::Add,
            &CqlType::Timestamp,
            &jan31.to_be_bytes(),
            &mo,
        )
        .unwrap();
        let ms = i64::from_be_bytes(out.try_into().unwrap());
        assert_eq!(ms, value::days_from_civil(2024, 2, 29) * DAY_MS);
    }
}
