//! Aggregate functions: count, min, max, sum and avg with Cassandra's result types.
//!
//! - `count(*)`/`count(1)` count rows and `count(col)` non-null values, as bigint.
//! - `min`/`max` return the column's type (Cassandra's comparator), null over no values.
//! - `sum` and `avg` return the column's type (counter: bigint); over no values they return 0.
//!   Integer sums wrap like Java's fixed-width arithmetic (Cassandra adds ints as ints), `avg` of
//!   integers divides a wide sum by the count (truncating), varint and decimal are exact.

use crate::cql::types::CqlType;
use crate::cql::value;
use num_bigint::BigInt;
use std::cmp::Ordering;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AggKind {
    CountRows,
    Count,
    Min,
    Max,
    Sum,
    Avg,
}

impl AggKind {
    pub fn from_name(name: &str) -> Option<AggKind> {
        Some(match name {
            "count" => AggKind::Count,
            "min" => AggKind::Min,
            "max" => AggKind::Max,
            "sum" => AggKind::Sum,
            "avg" => AggKind::Avg,
            _ => return None,
        })
    }
}

/// The result type of an aggregate over a column of type `ty`; None if the type is not allowed.
pub fn result_type(kind: AggKind, ty: &CqlType) -> Option<CqlType> {
    match kind {
        AggKind::CountRows | AggKind::Count => Some(CqlType::Bigint),
        AggKind::Min | AggKind::Max => Some(ty.clone()),
        AggKind::Sum | AggKind::Avg => match ty {
            CqlType::Tinyint
            | CqlType::Smallint
            | CqlType::Int
            | CqlType::Bigint
            | CqlType::Varint
            | CqlType::Float
            | CqlType::Double
            | CqlType::Decimal => Some(ty.clone()),
            CqlType::Counter => Some(CqlType::Bigint),
            _ => None,
        },
    }
}

#[derive(Debug, Clone)]
enum State {
    Count(i64),
    Extreme(Option<Vec<u8>>),
    Int {
        sum: i128,
        n: i64,
    },
    Big {
        sum: BigInt,
        n: i64,
    },
    Float {
        sum: f64,
        comp: f64,
        n: i64,
    },
    Decimal {
        unscaled: BigInt,
        scale: i32,
        n: i64,
    },
}

/// Accumulates one aggregate over rows.
#[derive(Debug, Clone)]
pub struct Accumulator {
    kind: AggKind,
    ty: CqlType,
    state: State,
}

fn decimal_parts(v: &[u8]) -> Option<(BigInt, i32)> {
    if v.len() < 4 {
        return None;
    }
    let scale = i32::from_be_bytes(v[0..4].try_into().ok()?);
    Some((BigInt::from_signed_bytes_be(&v[4..]), scale))
}

fn int_of(ty: &CqlType, v: &[u8]) -> Option<i128> {
    Some(match ty {
        CqlType::Tinyint => i8::from_be_bytes(v.try_into().ok()?) as i128,
        CqlType::Smallint => i16::from_be_bytes(v.try_into().ok()?) as i128,
        CqlType::Int => i32::from_be_bytes(v.try_into().ok()?) as i128,
        CqlType::Bigint | CqlType::Counter => i64::from_be_bytes(v.try_into().ok()?) as i128,
        _ => return None,
    })
}

fn int_bytes(ty: &CqlType, x: i128) -> Vec<u8> {
    match ty {
        CqlType::Tinyint => (x as i8).to_be_bytes().to_vec(),
        CqlType::Smallint => (x as i16).to_be_bytes().to_vec(),
        CqlType::Int => (x as i32).to_be_bytes().to_vec(),
        _ => (x as i64).to_be_bytes().to_vec(),
    }
}

impl Accumulator {
    pub fn new(kind: AggKind, ty: &CqlType) -> Accumulator {
        let state = match kind {
            AggKind::CountRows | AggKind::Count => State::Count(0),
            AggKind::Min | AggKind::Max => State::Extreme(None),
            AggKind::Sum | AggKind::Avg => match ty {
                CqlType::Varint => State::Big {
                    sum: BigInt::from(0),
                    n: 0,
                },
                CqlType::Float | CqlType::Double => State::Float {
                    sum: 0.0,
                    comp: 0.0,
                    n: 0,
                },
                CqlType::Decimal => State::Decimal {
                    unscaled: BigInt::from(0),
                    scale: 0,
                    n: 0,
                },
                _ => State::Int { sum: 0, n: 0 },
            },
        };
        Accumulator {
            kind,
            ty: ty.clone(),
            state,
        }
    }

    /// Adds one row's value (None: null; for `CountRows` the value is ignored).
    pub fn add(&mut self, v: Option<&[u8]>) {
        if self.kind == AggKind::CountRows {
            if let State::Count(n) = &mut self.state {
                *n += 1;
            }
            return;
        }
        // Nulls and empty values are skipped by every aggregate.
        let Some(v) = v.filter(|v| !v.is_empty()) else {
            return;
        };
        let ty = self.ty.clone();
        match &mut self.state {
            State::Count(n) => *n += 1,
            State::Extreme(cur) => {
                let replace = match cur {
                    None => true,
                    Some(c) => {
                        let o = value::compare(&ty, v, c);
                        (self.kind == AggKind::Min && o == Ordering::Less)
                            || (self.kind == AggKind::Max && o == Ordering::Greater)
                    }
                };
                if replace {
                    *cur = Some(v.to_vec());
                }
            }
            State::Int { sum, n } => {
                if let Some(x) = int_of(&ty, v) {
                    *sum += x;
                    *n += 1;
                }
            }
            State::Big { sum, n } => {
                *sum += BigInt::from_signed_bytes_be(v);
                *n += 1;
            }
            State::Float { sum, comp, n } => {
                let x = match ty {
                    CqlType::Float => v.try_into().map(f32::from_be_bytes).map(f64::from).ok(),
                    _ => v.try_into().map(f64::from_be_bytes).ok(),
                };
                if let Some(x) = x {
                    // Kahan summation keeps long sums accurate.
                    let y = x - *comp;
                    let t = *sum + y;
                    *comp = (t - *sum) - y;
                    *sum = t;
                    *n += 1;
                }
            }
            State::Decimal { unscaled, scale, n } => {
                if let Some((u, s)) = decimal_parts(v) {
                    // Align scales to the larger one.
                    if s > *scale {
                        *unscaled *= BigInt::from(10).pow((s - *scale) as u32);
                        *scale = s;
                        *unscaled += u;
                    } else {
                        *unscaled += u * BigInt::from(10).pow((*scale - s) as u32);
                    }
                    *n += 1;
                }
            }
        }
    }

    /// The aggregate's value (None: null).
    pub fn finish(&self) -> Option<Vec<u8>> {
        let avg = self.kind == AggKind::Avg;
        match &self.state {
            State::Count(n) => Some(n.to_be_bytes().to_vec()),
            State::Extreme(v) => v.clone(),
            State::Int { sum, n } => {
                let x = if avg {
                    if *n == 0 {
                        0
                    } else {
                        sum / *n as i128
                    }
                } else {
                    *sum
                };
                Some(int_bytes(&self.ty, x))
            }
            State::Big { sum, n } => {
                let x = if avg && *n > 0 {
                    sum / BigInt::from(*n)
                } else if avg {
                    BigInt::from(0)
                } else {
                    sum.clone()
                };
                Some(x.to_signed_bytes_be())
            }
            State::Float { sum, n, .. } => {
                let x = if avg {
                    if *n == 0 {
                        0.0
                    } else {
                        sum / *n as f64
                    }
                } else {
                    *sum
                };
                Some(match self.ty {
                    CqlType::Float => (x as f32).to_be_bytes().to_vec(),
                    _ => x.to_be_bytes().to_vec(),
                })
            }
            State::Decimal { unscaled, scale, n } => {
                let (u, s) = if avg && *n > 0 {
                    // Keep enough digits: Cassandra divides with DECIMAL128 (34 digits).
                    let extra = 34i32;
                    let scaled = unscaled * BigInt::from(10).pow(extra as u32);
                    (scaled / BigInt::from(*n), *scale + extra)
                } else if avg {
                    (BigInt::from(0), 0)
                } else {
                    (unscaled.clone(), *scale)
                };
                let (u, s) = strip_zeros(u, s, if avg { *scale } else { s });
                let mut out = s.to_be_bytes().to_vec();
                out.extend_from_slice(&u.to_signed_bytes_be());
                Some(out)
            }
        }
    }
}

/// Removes trailing zeros of a decimal down to `min_scale`.
fn strip_zeros(mut u: BigInt, mut s: i32, min_scale: i32) -> (BigInt, i32) {
    let ten = BigInt::from(10);
    let zero = BigInt::from(0);
    while s > min_scale && u != zero && (&u % &ten) == zero {
        u /= &ten;
        s -= 1;
    }
    (u, s)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(kind: AggKind, ty: &CqlType, vals: &[Option<Vec<u8>>]) -> Option<Vec<u8>> {
        let mut a = Accumulator::new(kind, ty);
        for v in vals {
            a.add(v.as_deref());
        }
        a.finish()
    }

    fn ints(v: &[i32]) -> Vec<Option<Vec<u8>>> {
        v.iter().map(|x| Some(x.to_be_bytes().to_vec())).collect()
    }

    #[test]
    fn counts_skip_nulls() {
        let mut vals = ints(&[1, 2, 3]);
        vals.push(None);
        assert_eq!(
            run(AggKind::Count, &CqlType::Int, &vals),
            Some(3i64.to_be_bytes().to_vec())
        );
        assert_eq!(
            run(AggKind::CountRows, &CqlType::Int, &vals),
            Some(4i64.to_be_bytes().to_vec())
        );
        assert_eq!(
            run(AggKind::Count, &CqlType::Int, &[]),
            Some(0i64.to_be_bytes().to_vec())
        );
    }

    #[test]
    fn min_max_sum_avg_of_ints() {
        let vals = ints(&[5, -7, 10, 2]);
        assert_eq!(
            run(AggKind::Min, &CqlType::Int, &vals),
            Some((-7i32).to_be_bytes().to_vec())
        );
        assert_eq!(
            run(AggKind::Max, &CqlType::Int, &vals),
            Some(10i32.to_be_bytes().to_vec())
        );
        assert_eq!(
            run(AggKind::Sum, &CqlType::Int, &vals),
            Some(10i32.to_be_bytes().to_vec())
        );
        // 10 / 4 truncates like Java integer division.
        assert_eq!(
            run(AggKind::Avg, &CqlType::Int, &vals),
            Some(2i32.to_be_bytes().to_vec())
        );
        assert_eq!(run(AggKind::Min, &CqlType::Int, &[]), None);
        assert_eq!(
            run(AggKind::Sum, &CqlType::Int, &[]),
            Some(0i32.to_be_bytes().to_vec())
        );
        // The average of big ints does not overflow its intermediate sum.
        let big = ints(&[i32::MAX, i32::MAX]);
        assert_eq!(
            run(AggKind::Avg, &CqlType::Int, &big),
            Some(i32::MAX.to_be_bytes().to_vec())
        );
    }

    #[test]
    fn doubles_and_decimals() {
        let d: Vec<Option<Vec<u8>>> = [1.5f64, 2.5, -1.0]
            .iter()
            .map(|x| Some(x.to_be_bytes().to_vec()))
            .collect();
        assert_eq!(
            run(AggKind::Sum, &CqlType::Double, &d),
            Some(3.0f64.to_be_bytes().to_vec())
        );
        assert_eq!(
            run(AggKind::Avg, &CqlType::Double, &d),
            Some(1.0f64.to_be_bytes().to_vec())
        );
        let dec = |u: i64, s: i32| {
            let mut v = s.to_be_bytes().to_vec();
            v.extend_from_slice(&BigInt::from(u).to_signed_bytes_be());
            Some(v)
        };
        // 1.5 + 2.25 = 3.75
        assert_eq!(
            run(AggKind::Sum, &CqlType::Decimal, &[dec(15, 1), dec(225, 2)]),
            dec(375, 2)
        );
        // avg(1, 2) = 1.5
        assert_eq!(
            run(AggKind::Avg, &CqlType::Decimal, &[dec(1, 0), dec(2, 0)]),
            dec(15, 1)
        );
        assert!(result_type(AggKind::Sum, &CqlType::Text).is_none());
    }
}
