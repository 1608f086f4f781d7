//! `duration` values: the months/days/nanoseconds value, its VInt serialization, and the
//! parser of Cassandra's three textual forms (`Duration.from`).

use super::{vint, ValueError};

/// A `duration`: months, days and nanoseconds, all of the same sign.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DurationValue {
    pub months: i32,
    pub days: i32,
    pub nanoseconds: i64,
}

/// The serialized form of a duration: three signed VInts (months, days, nanoseconds).
pub fn encode_duration(d: DurationValue) -> Vec<u8> {
    let mut out = Vec::with_capacity(12);
    vint::put_signed(d.months as i64, &mut out);
    vint::put_signed(d.days as i64, &mut out);
    vint::put_signed(d.nanoseconds, &mut out);
    out
}

// ---------------------------------------------------------------------------------------------
// duration
// ---------------------------------------------------------------------------------------------

const NANOS_PER_MICRO: i64 = 1_000;
const NANOS_PER_MILLI: i64 = 1_000_000;
const NANOS_PER_SECOND: i64 = 1_000_000_000;
const NANOS_PER_MINUTE: i64 = 60 * NANOS_PER_SECOND;
const NANOS_PER_HOUR: i64 = 60 * NANOS_PER_MINUTE;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Unit {
    Years = 1,
    Months,
    Weeks,
    Days,
    Hours,
    Minutes,
    Seconds,
    Millis,
    Micros,
    Nanos,
}

impl Unit {
    fn name(self) -> &'static str {
        match self {
            Unit::Years => "years",
            Unit::Months => "months",
            Unit::Weeks => "weeks",
            Unit::Days => "days",
            Unit::Hours => "hours",
            Unit::Minutes => "minutes",
            Unit::Seconds => "seconds",
            Unit::Millis => "milliseconds",
            Unit::Micros => "microseconds",
            Unit::Nanos => "nanoseconds",
        }
    }

    fn from_index(i: u8) -> Unit {
        [
            Unit::Years,
            Unit::Months,
            Unit::Weeks,
            Unit::Days,
            Unit::Hours,
            Unit::Minutes,
            Unit::Seconds,
            Unit::Millis,
            Unit::Micros,
            Unit::Nanos,
        ][(i - 1) as usize]
    }
}

/// Cassandra's `Duration.Builder`: units in order, totals within range.
struct DurationBuilder {
    negative: bool,
    months: i64,
    days: i64,
    nanos: i64,
    current: u8,
}

impl DurationBuilder {
    fn new(negative: bool) -> Self {
        DurationBuilder {
            negative,
            months: 0,
            days: 0,
            nanos: 0,
            current: 0,
        }
    }

    fn add(&mut self, unit: Unit, n: i64) -> Result<(), ValueError> {
        let idx = unit as u8;
        if idx == self.current {
            return Err(ValueError::invalid(format!(
                "Invalid duration. The {} are specified multiple times",
                unit.name()
            )));
        }
        if idx < self.current {
            return Err(ValueError::invalid(format!(
                "Invalid duration. The {} should be after {}",
                Unit::from_index(self.current).name(),
                unit.name()
            )));
        }
        self.current = idx;
        let too_big = |what: &str| {
            ValueError::invalid(format!(
                "Invalid duration. The total number of {what} must be less or equal to {}",
                i32::MAX
            ))
        };
        let (field, per, what, max) = match unit {
            Unit::Years => (&mut self.months, 12, "months", i32::MAX as i64),
            Unit::Months => (&mut self.months, 1, "months", i32::MAX as i64),
            Unit::Weeks => (&mut self.days, 7, "days", i32::MAX as i64),
            Unit::Days => (&mut self.days, 1, "days", i32::MAX as i64),
            Unit::Hours => (&mut self.nanos, NANOS_PER_HOUR, "nanoseconds", i64::MAX),
            Unit::Minutes => (&mut self.nanos, NANOS_PER_MINUTE, "nanoseconds", i64::MAX),
            Unit::Seconds => (&mut self.nanos, NANOS_PER_SECOND, "nanoseconds", i64::MAX),
            Unit::Millis => (&mut self.nanos, NANOS_PER_MILLI, "nanoseconds", i64::MAX),
            Unit::Micros => (&mut self.nanos, NANOS_PER_MICRO, "nanoseconds", i64::MAX),
            Unit::Nanos => (&mut self.nanos, 1, "nanoseconds", i64::MAX),
        };
        if n > (max - *field) / per {
            return Err(too_big(what));
        }
        *field += n * per;
        Ok(())
    }

    fn build(self) -> DurationValue {
        let s = if self.negative { -1 } else { 1 };
        DurationValue {
            months: (s * self.months) as i32,
            days: (s * self.days) as i32,
            nanoseconds: s * self.nanos,
        }
    }
}

/// Parses a duration as Cassandra's `Duration.from`, in any of its three forms, each
/// optionally preceded by `-`:
///
/// * units: `1y2mo3w4d5h6m7s8ms9us10ns` (`µs` also means microseconds; units case-insensitive,
///   each at most once and in this order);
/// * ISO 8601: `P1Y2M3DT4H5M6S` (any part may be omitted) or `P3W`;
/// * ISO 8601 alternative: `P0001-02-03T04:05:06`.
pub fn parse_duration(input: &str) -> Result<DurationValue, ValueError> {
    let (negative, source) = match input.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, input),
    };
    let unable = || ValueError::invalid(format!("Unable to convert '{source}' to a duration"));
    let number = |d: &str| d.parse::<i64>().map_err(|_| unable());
    let mut b = DurationBuilder::new(negative);
    if let Some(body) = source.strip_prefix('P') {
        if let Some(weeks) = body.strip_suffix('W') {
            if weeks.is_empty() || !weeks.bytes().all(|c| c.is_ascii_digit()) {
                return Err(unable());
            }
            b.add(Unit::Weeks, number(weeks)?)?;
        } else if source.contains('-') {
            let bb = body.as_bytes();
            let shape = b"dddd-dd-ddTdd:dd:dd";
            if bb.len() != shape.len()
                || !bb.iter().zip(shape).all(|(&c, &p)| {
                    if p == b'd' {
                        c.is_ascii_digit()
                    } else {
                        c == p
                    }
                })
            {
                return Err(unable());
            }
            b.add(Unit::Years, number(&body[0..4])?)?;
            b.add(Unit::Months, number(&body[5..7])?)?;
            b.add(Unit::Days, number(&body[8..10])?)?;
            b.add(Unit::Hours, number(&body[11..13])?)?;
            b.add(Unit::Minutes, number(&body[14..16])?)?;
            b.add(Unit::Seconds, number(&body[17..19])?)?;
        } else {
            // P(nY)?(nM)?(nD)?(T(nH)?(nM)?(nS)?)?
            let (date_part, time_part) = match body.find('T') {
                Some(t) => (&body[..t], Some(&body[t + 1..])),
                None => (body, None),
            };
            let mut parts: Vec<(Unit, i64)> = Vec::new();
            iso_parts(
                date_part,
                &[
                    (b'Y', Unit::Years),
                    (b'M', Unit::Months),
                    (b'D', Unit::Days),
                ],
                &mut parts,
            )
            .ok_or_else(unable)?;
            if let Some(tp) = time_part {
                iso_parts(
                    tp,
                    &[
                        (b'H', Unit::Hours),
                        (b'M', Unit::Minutes),
                        (b'S', Unit::Seconds),
                    ],
                    &mut parts,
                )
                .ok_or_else(unable)?;
            }
            for (unit, n) in parts {
                b.add(unit, n)?;
            }
        }
        return Ok(b.build());
    }
    // standard format: one or more (\d+)(unit), covering the whole text
    let bytes = source.as_bytes();
    let mut i = 0;
    if bytes.is_empty() {
        return Err(unable());
    }
    while i < bytes.len() {
        let start = i;
        while i < bytes.len() && bytes[i].is_ascii_digit() {
            i += 1;
        }
        if i == start {
            return Err(unable());
        }
        let n = number(&source[start..i])?;
        let rest = &source[i..];
        let lower: String = rest.chars().take(2).collect::<String>().to_lowercase();
        let (unit, len) = if lower.starts_with("mo") {
            (Unit::Months, 2)
        } else if lower.starts_with("ms") {
            (Unit::Millis, 2)
        } else if lower.starts_with("us") {
            (Unit::Micros, 2)
        } else if lower.starts_with("µs") {
            (Unit::Micros, 'µ'.len_utf8() + 1)
        } else if lower.starts_with("ns") {
            (Unit::Nanos, 2)
        } else {
            match lower.chars().next() {
                Some('y') => (Unit::Years, 1),
                Some('w') => (Unit::Weeks, 1),
                Some('d') => (Unit::Days, 1),
                Some('h') => (Unit::Hours, 1),
                Some('s') => (Unit::Seconds, 1),
                Some('m') => (Unit::Minutes, 1),
                _ => return Err(unable()),
            }
        };
        b.add(unit, n)?;
        i += len;
    }
    Ok(b.build())
}

/// The `(\d+)X` groups of one half of an ISO 8601 duration, in the order of `units`.
fn iso_parts(s: &str, units: &[(u8, Unit)], out: &mut Vec<(Unit, i64)>) -> Option<()> {
    let b = s.as_bytes();
    let mut i = 0;
    let mut next_unit = 0;
    while i < b.len() {
        let start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        if i == start || i == b.len() {
            return None;
        }
        let pos = units[next_unit..].iter().position(|(c, _)| *c == b[i])? + next_unit;
        out.push((units[pos].1, s[start..i].parse().ok()?));
        next_unit = pos + 1;
        i += 1;
    }
    Some(())
}
