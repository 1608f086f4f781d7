//! Cassandra's variable-length integers (`VIntCoding`), used by `duration` values and by the
//! element lengths of variable-size vectors.
//!
//! Unsigned form: the number of leading one bits of the first byte is the number of extra
//! bytes that follow (0 to 8); the remaining bits of the first byte and the extra bytes hold
//! the value, big-endian. Signed values are zig-zag encoded first (`(n << 1) ^ (n >> 63)`).

use super::ValueError;

/// Number of bytes the unsigned encoding of `value` takes (1 to 9).
pub(crate) fn unsigned_size(value: u64) -> usize {
    let magnitude = (value | 1).leading_zeros() as i32; // 0..=63
                                                        // Java's integer division truncates: (0 - 1) / 7 == 0
    (9 - (magnitude - 1) / 7) as usize
}

pub(crate) fn put_unsigned(value: u64, out: &mut Vec<u8>) {
    let size = unsigned_size(value);
    if size == 1 {
        out.push(value as u8);
        return;
    }
    let extra = size - 1;
    let start = out.len();
    for i in 0..size {
        // byte i of the big-endian representation over `size` bytes
        let shift = 8 * (size - 1 - i);
        out.push(if shift >= 64 {
            0
        } else {
            (value >> shift) as u8
        });
    }
    // mark the extra-byte count with leading ones in the first byte
    let mask = !(0xFFu32 >> extra) as u8;
    out[start] |= mask;
}

pub(crate) fn put_signed(value: i64, out: &mut Vec<u8>) {
    put_unsigned(((value << 1) ^ (value >> 63)) as u64, out);
}

/// Reads an unsigned VInt, advancing `input`; `None` if it is truncated.
pub(crate) fn get_unsigned(input: &mut &[u8]) -> Option<u64> {
    let (&first, rest) = input.split_first()?;
    let extra = first.leading_ones() as usize;
    if rest.len() < extra {
        return None;
    }
    let mut value = if extra >= 8 {
        0
    } else {
        (first & (0xFF >> extra)) as u64
    };
    for &b in &rest[..extra] {
        value = (value << 8) | b as u64;
    }
    *input = &rest[extra..];
    Some(value)
}

pub(crate) fn get_signed(input: &mut &[u8]) -> Option<i64> {
    let n = get_unsigned(input)?;
    Some(((n >> 1) as i64) ^ -((n & 1) as i64))
}

/// Decodes a serialized `duration` into `(months, days, nanoseconds)`.
///
/// Errors with Cassandra's messages for values [`super::validate`] rejects.
pub fn decode_duration(v: &[u8]) -> Result<(i32, i32, i64), ValueError> {
    if v.len() < 3 {
        return Err(ValueError::marshal(format!(
            "Expected at least 3 bytes for a duration ({})",
            v.len()
        )));
    }
    let mut input = v;
    let truncated = || ValueError::marshal("Not enough bytes to read a duration");
    let months = get_signed(&mut input).ok_or_else(truncated)?;
    let days = get_signed(&mut input).ok_or_else(truncated)?;
    let nanos = get_signed(&mut input).ok_or_else(truncated)?;
    let months = i32::try_from(months).map_err(|_| {
        ValueError::marshal(format!(
            "The duration months must be a 32 bits integer but was: {months}"
        ))
    })?;
    let days = i32::try_from(days).map_err(|_| {
        ValueError::marshal(format!(
            "The duration days must be a 32 bits integer but was: {days}"
        ))
    })?;
    let all_pos = months >= 0 && days >= 0 && nanos >= 0;
    let all_neg = months <= 0 && days <= 0 && nanos <= 0;
    if !(all_pos || all_neg) {
        return Err(ValueError::marshal(format!(
            "The duration months, days and nanoseconds must be all of the same sign ({months}, {days}, {nanos})"
        )));
    }
    Ok((months, days, nanos))
}
