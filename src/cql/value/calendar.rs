//! Calendar and clock parsing: proleptic Gregorian day arithmetic (year 0 = 1 BC, beyond
//! chrono's range) and the `fromString` parsers of `timestamp`, `date` and `time`, as
//! Cassandra 5.0's serializers accept them.

use super::literal::java_parse_i32;
use super::ValueError;

// ---------------------------------------------------------------------------------------------
// Calendar arithmetic (proleptic Gregorian, year 0 = 1 BC), independent of chrono's range.
// ---------------------------------------------------------------------------------------------

/// Days since 1970-01-01 of a proleptic Gregorian date.
pub(crate) fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400; // [0, 399]
    let mp = (m as i64 + 9) % 12; // March = 0
    let doy = (153 * mp + 2) / 5 + d as i64 - 1; // [0, 365]
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy; // [0, 146096]
    era * 146097 + doe - 719468
}

/// The proleptic Gregorian date of a day number (days since 1970-01-01).
pub(crate) fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719468;
    let era = if z >= 0 { z } else { z - 146096 } / 146097;
    let doe = z - era * 146097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

pub(crate) fn is_leap(y: i64) -> bool {
    y.rem_euclid(4) == 0 && (y.rem_euclid(100) != 0 || y.rem_euclid(400) == 0)
}

pub(crate) fn month_length(y: i64, m: u32) -> u32 {
    match m {
        4 | 6 | 9 | 11 => 30,
        2 if is_leap(y) => 29,
        2 => 28,
        _ => 31,
    }
}

/// `^-?\d+$`
fn is_raw_integer(s: &str) -> bool {
    let d = s.strip_prefix('-').unwrap_or(s);
    !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit())
}

// ---------------------------------------------------------------------------------------------
// timestamp
// ---------------------------------------------------------------------------------------------

/// A cursor over ASCII text for the date/time grammars.
struct Scan<'a> {
    b: &'a [u8],
    i: usize,
}

impl<'a> Scan<'a> {
    fn new(s: &'a str) -> Self {
        Scan {
            b: s.as_bytes(),
            i: 0,
        }
    }
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }
    fn eat(&mut self, c: u8) -> bool {
        if self.peek() == Some(c) {
            self.i += 1;
            true
        } else {
            false
        }
    }
    /// Between `min` and `max` ASCII digits; returns (value, count).
    fn digits(&mut self, min: usize, max: usize) -> Option<(i64, usize)> {
        let start = self.i;
        let mut v: i64 = 0;
        while self.i - start < max {
            match self.peek() {
                Some(d) if d.is_ascii_digit() => {
                    v = v * 10 + (d - b'0') as i64;
                    self.i += 1;
                }
                _ => break,
            }
        }
        let n = self.i - start;
        if n < min {
            self.i = start;
            return None;
        }
        Some((v, n))
    }
    fn rest(&self) -> &'a [u8] {
        &self.b[self.i..]
    }
    fn at_end(&self) -> bool {
        self.i == self.b.len()
    }
}

/// A zone offset in seconds from forms `Z`, `+h`, `+hh`, `+hhmm`, `+hh:mm`, `+hh:mm:ss`,
/// `+hhmmss`, or `None`.
fn parse_offset(s: &[u8], allow_single_digit_hour: bool, allow_seconds: bool) -> Option<i64> {
    if s == b"Z" {
        return Some(0);
    }
    let (&sign, rest) = s.split_first()?;
    let neg = match sign {
        b'+' => false,
        b'-' => true,
        _ => return None,
    };
    let all_digits = |x: &[u8]| x.iter().all(|c| c.is_ascii_digit());
    let num = |x: &[u8]| x.iter().fold(0i64, |a, &c| a * 10 + (c - b'0') as i64);
    let (h, m, sec) = match rest.len() {
        1 if allow_single_digit_hour && all_digits(rest) => (num(rest), 0, 0),
        2 if all_digits(rest) => (num(rest), 0, 0),
        4 if all_digits(rest) => (num(&rest[..2]), num(&rest[2..]), 0),
        5 if rest[2] == b':' && all_digits(&rest[..2]) && all_digits(&rest[3..]) => {
            (num(&rest[..2]), num(&rest[3..]), 0)
        }
        6 if allow_seconds && all_digits(rest) => {
            (num(&rest[..2]), num(&rest[2..4]), num(&rest[4..]))
        }
        8 if allow_seconds
            && rest[2] == b':'
            && rest[5] == b':'
            && all_digits(&rest[..2])
            && all_digits(&rest[3..5])
            && all_digits(&rest[6..]) =>
        {
            (num(&rest[..2]), num(&rest[3..5]), num(&rest[6..]))
        }
        _ => return None,
    };
    if h > 18 || m > 59 || sec > 59 {
        return None;
    }
    let total = h * 3600 + m * 60 + sec;
    if total > 18 * 3600 {
        return None;
    }
    Some(if neg { -total } else { total })
}

/// The zone suffix of a timestamp (everything after the date or time), as an offset in
/// seconds. Without a zone Cassandra uses the server's default time zone; ringgate uses UTC.
fn parse_zone(rest: &[u8]) -> Option<i64> {
    if rest.is_empty() {
        return Some(0);
    }
    if let Some(r) = rest.strip_prefix(b" ") {
        // " X": Z, +hh, +hhmm
        if let Some(o) = parse_offset_x(r) {
            return Some(o);
        }
        // " z" / " zzzz": a zone name or id; only the fixed UTC zones are known here
        for prefix in [&b"UTC"[..], b"GMT", b"UT", b"Z"] {
            if let Some(after) = r.strip_prefix(prefix) {
                if after.is_empty() {
                    return Some(0);
                }
                if prefix != b"Z" {
                    return parse_offset(after, true, true);
                }
            }
        }
        // a zone id may also be a plain offset
        return parse_offset(r, true, true);
    }
    // "X" or "XXX"
    parse_offset_x(rest).or_else(|| {
        if rest.len() == 6 && rest[3] == b':' {
            parse_offset(rest, false, false)
        } else {
            None
        }
    })
}

/// Java's offset pattern `X`: `Z`, `+hh` or `+hhmm`.
fn parse_offset_x(s: &[u8]) -> Option<i64> {
    if s == b"Z" || s.len() == 3 || s.len() == 5 {
        parse_offset(s, false, false)
    } else {
        None
    }
}

/// Parses a timestamp as Cassandra 5.0's `TimestampSerializer.dateStringToTimestamp`:
///
/// * `now` (any case): the current time;
/// * an integer (`^-?\d+$`): milliseconds since the epoch;
/// * `yyyy-mm-dd` followed by ` ` or `T` and `hh:mm[:ss][.f…]` (1 to 9 fraction digits,
///   truncated to milliseconds; one- or two-digit month, day, hour, minute and second), with an
///   optional zone;
/// * `yyyy-mm-dd` alone or with a zone (midnight).
///
/// Zones: `Z`, `+hh`, `+hhmm`, `+hh:mm` directly after the time; after a space also `UTC`,
/// `GMT`, `UT` (optionally followed by an offset) and offsets. Named regional zones
/// (`Europe/Paris`, `PST`) are not supported. Without a zone the time is taken as UTC
/// (Cassandra uses the server's default zone, which is UTC on a standard deployment). Days
/// past the end of the month are clamped to its last day, as Java's smart resolver does
/// (`2021-02-30` is February 28th).
pub fn parse_timestamp(s: &str) -> Result<i64, ValueError> {
    if s.eq_ignore_ascii_case("now") {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0);
        return Ok(now);
    }
    if is_raw_integer(s) {
        return s.parse::<i64>().map_err(|_| {
            ValueError::marshal(format!("Unable to make long (for date) from: '{s}'"))
        });
    }
    parse_datetime(s)
        .ok_or_else(|| ValueError::marshal(format!("Unable to parse a date/time from '{s}'")))
}

fn parse_datetime(s: &str) -> Option<i64> {
    let mut sc = Scan::new(s);
    let (year, ydigits) = sc.digits(1, 10)?;
    if !(1..=999_999_999).contains(&year) {
        return None;
    }
    if !sc.eat(b'-') {
        return None;
    }
    let (month, mdigits) = sc.digits(1, 2)?;
    if !sc.eat(b'-') {
        return None;
    }
    let (day, ddigits) = sc.digits(1, 2)?;
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) {
        return None;
    }
    let mut ms_of_day: i64 = 0;
    let has_time = matches!(sc.peek(), Some(b'T') | Some(b' '))
        && sc.rest().get(1).is_some_and(|c| c.is_ascii_digit());
    if has_time {
        sc.i += 1;
        let (hour, _) = sc.digits(1, 2)?;
        if !sc.eat(b':') {
            return None;
        }
        let (minute, _) = sc.digits(1, 2)?;
        let mut second = 0;
        if sc.peek() == Some(b':') && sc.rest().get(1).is_some_and(|c| c.is_ascii_digit()) {
            sc.i += 1;
            second = sc.digits(1, 2)?.0;
        }
        let mut millis = 0;
        let mut frac_zero = true;
        if sc.eat(b'.') {
            let start = sc.i;
            let (_, n) = sc.digits(0, 9)?;
            let frac = &sc.b[start..start + n];
            frac_zero = frac.iter().all(|&c| c == b'0');
            for k in 0..3 {
                millis = millis * 10 + frac.get(k).map_or(0, |&c| (c - b'0') as i64);
            }
        }
        if minute > 59 || second > 59 {
            return None;
        }
        let hour = match hour {
            0..=23 => hour,
            // Java's smart resolver reads 24:00 as the end of the day
            24 if minute == 0 && second == 0 && frac_zero => 24,
            _ => return None,
        };
        ms_of_day = ((hour * 60 + minute) * 60 + second) * 1000 + millis;
    } else if ydigits < 4 || mdigits != 2 || ddigits != 2 {
        // the date-only formats are yyyy-MM-dd
        return None;
    }
    let offset = parse_zone(sc.rest())?;
    let day = day.min(month_length(year, month as u32) as i64);
    let days = days_from_civil(year, month as u32, day as u32) as i128;
    let ms = days * 86_400_000 + ms_of_day as i128 - offset as i128 * 1000;
    i64::try_from(ms).ok()
}

// ---------------------------------------------------------------------------------------------
// date
// ---------------------------------------------------------------------------------------------

/// Parses a `date` as Cassandra's `SimpleDateSerializer.dateStringToDays`, returning the
/// serialized unsigned day number (2^31 is 1970-01-01):
///
/// * an integer (`^-?\d+$`) is the raw unsigned day number, 0 to 2^32 - 1;
/// * otherwise `yyyy-mm-dd` (an optional sign, up to 9 year digits, one- or two-digit month
///   and day), a valid date between -5877641-06-23 and 5881580-07-11.
pub fn parse_date(s: &str) -> Result<u32, ValueError> {
    if is_raw_integer(s) {
        return s
            .parse::<i64>()
            .ok()
            .and_then(|v| u32::try_from(v).ok())
            .ok_or_else(|| {
                ValueError::marshal(format!(
                    "Unable to make unsigned int (for date) from: '{s}'"
                ))
            });
    }
    let coerce =
        || ValueError::marshal(format!("Unable to coerce '{s}' to a formatted date (long)"));
    let mut sc = Scan::new(s);
    let neg = if sc.eat(b'-') {
        true
    } else {
        sc.eat(b'+');
        false
    };
    let (y, _) = sc.digits(1, 9).ok_or_else(coerce)?;
    let year = if neg { -y } else { y };
    if !sc.eat(b'-') {
        return Err(coerce());
    }
    let (month, _) = sc.digits(1, 2).ok_or_else(coerce)?;
    if !sc.eat(b'-') {
        return Err(coerce());
    }
    let (day, _) = sc.digits(1, 2).ok_or_else(coerce)?;
    if !sc.at_end()
        || !(1..=12).contains(&month)
        || day < 1
        || day > month_length(year, month as u32) as i64
    {
        return Err(coerce());
    }
    let days = days_from_civil(year, month as u32, day as u32);
    if days < i32::MIN as i64 {
        return Err(ValueError::marshal(format!(
            "Input date {s} is less than min supported date -5877641-06-23"
        )));
    }
    if days > i32::MAX as i64 {
        return Err(ValueError::marshal(format!(
            "Input date {s} is greater than max supported date 5881580-07-11"
        )));
    }
    Ok((days + (1i64 << 31)) as u32)
}

// ---------------------------------------------------------------------------------------------
// time
// ---------------------------------------------------------------------------------------------

const NANOS_PER_DAY: i64 = 86_400_000_000_000;

/// Parses a `time` as Cassandra's `TimeSerializer.timeStringToLong`, returning nanoseconds
/// since midnight:
///
/// * an integer (`^-?\d+$`) is the raw number of nanoseconds, 0 to 86399999999999;
/// * otherwise `hh:mm:ss[.fffffffff]` (surrounding whitespace ignored, 1 to 9 fraction
///   digits).
pub fn parse_time(s: &str) -> Result<i64, ValueError> {
    if is_raw_integer(s) {
        return s
            .parse::<i64>()
            .ok()
            .filter(|v| (0..NANOS_PER_DAY).contains(v))
            .ok_or_else(|| {
                ValueError::marshal(format!("Unable to make long (for time) from: '{s}'"))
            });
    }
    parse_time_strictly(s).ok_or_else(|| {
        ValueError::marshal(format!(
            "(TimeType) Unable to coerce '{s}' to a formatted time (long)"
        ))
    })
}

fn parse_time_strictly(s: &str) -> Option<i64> {
    let t = s.trim_matches(|c: char| c <= ' ');
    let first = t.find(':')?;
    let second = first + 1 + t[first + 1..].find(':')?;
    if first == 0 || second >= t.len() - 1 {
        return None;
    }
    let hour = java_parse_i32(&t[..first])?;
    if !(0..24).contains(&hour) {
        return None;
    }
    let minute = java_parse_i32(&t[first + 1..second])?;
    if !(0..60).contains(&minute) {
        return None;
    }
    let period = t[second + 1..].find('.').map(|p| p + second + 1);
    let (sec, nanos) = match period {
        Some(p) if p < t.len() - 1 => {
            let sec = java_parse_i32(&t[second + 1..p])?;
            let frac = &t[p + 1..];
            if frac.len() > 9 || !frac.as_bytes()[0].is_ascii_digit() {
                return None;
            }
            let padded = format!("{frac:0<9}");
            (sec, java_parse_i32(&padded)?)
        }
        Some(_) => return None,
        None => (java_parse_i32(&t[second + 1..])?, 0),
    };
    if !(0..60).contains(&sec) {
        return None;
    }
    Some(((hour as i64 * 60 + minute as i64) * 60 + sec as i64) * 1_000_000_000 + nanos as i64)
}
