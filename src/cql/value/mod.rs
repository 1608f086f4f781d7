//! CQL values: validation, literal conversion, comparison, order-preserving key encoding and
//! the textual forms (CQL literal, JSON), all on the native-protocol serialization of a value.
//!
//! A value is always handled as the content of a native-protocol `[bytes]`: `int` is 4 bytes
//! big-endian, `text` is UTF-8, a list is `[int n]` then n × `[int len][bytes]`, and so on. A
//! *null* is not a value (it has no bytes); where nulls can appear inside a value (tuple and UDT
//! components) they are `Option::None` in the helpers here and `[int -1]` on the wire. An *empty*
//! value (zero bytes) is a real value that Cassandra accepts for most fixed-size types (`int`
//! accepts 0 or 4 bytes) and that sorts before every other value of its type.
//!
//! `CqlType::Frozen(t)` is treated exactly as `t` everywhere in this module: freezing only
//! changes how a column is stored cell by cell, not the serialized value.
//!
//! # Public API
//!
//! * [`validate`]: what Cassandra 5.0's serializers accept.
//! * [`literal_to_bytes`]: a CQL constant for a receiver of a type (`Constants.Literal` rules).
//! * [`compare`]: Cassandra's comparator for the type.
//! * [`encode_key`] / [`decode_key`] and, for keys of several columns,
//!   [`encode_composite_key`] / [`decode_composite_key`]: the order-preserving,
//!   self-delimiting key encoding described below.
//! * [`to_cql_literal`], [`to_json`], [`from_json`]: textual forms.
//! * Builders ([`encode_list`], [`encode_set`], [`encode_map`], [`encode_tuple`],
//!   [`encode_udt`], [`encode_vector`]) and readers ([`collection_elements`], [`map_entries`],
//!   [`tuple_components`], [`vector_elements`]) for composite values; the readers return slices
//!   of their input.
//! * Parsers for the textual forms Cassandra accepts ([`parse_timestamp`], [`parse_date`],
//!   [`parse_time`], [`parse_duration`], [`parse_decimal`], [`parse_inet`], [`parse_uuid`]),
//!   and the VInt coding of durations ([`encode_duration`], [`decode_duration`]).
//!
//! # Key encoding (on-disk format)
//!
//! [`encode_key`] maps a serialized value `v` of type `T` to bytes `K(v)` such that for any two
//! values `a`, `b` of `T`:
//!
//! * if `compare(T, a, b)` is `Less` (`Greater`) then `K(a) < K(b)` (`>`), comparing bytes as
//!   unsigned, lexicographically;
//! * `K(a) == K(b)` if and only if `a == b` byte for byte, and [`decode_key`] returns the exact
//!   original bytes;
//! * no key is a proper prefix of another key of the same type (the encoding is
//!   self-delimiting), so keys can be concatenated and [`decode_key`] knows where each ends.
//!
//! Cassandra considers some distinct serializations equal: `decimal` 1.0 and 1.00, NaNs with
//! different payloads, `boolean` 0x01 and 0x02, `varint` 0x01 and 0x0001, tuples with and
//! without trailing nulls. So a key has two parts: the **order part** `O(v)`, identical for
//! values that compare equal, and the **suffix** `S(v)`, holding what is needed to rebuild the
//! exact bytes; `K(v) = O(v) S(v)`. Inside a composite value (collection, tuple, UDT, vector)
//! the elements' order parts are nested in the composite's order part, and the elements'
//! suffixes are appended, in the same depth-first order, to the composite's suffix: equal
//! elements with different bytes never decide the order of the composite. For keys of several
//! columns, [`encode_composite_key`] writes `O(v1) … O(vn) S(v1) … S(vn)`, which orders rows
//! exactly as Cassandra's clustering comparator does and whose order parts identify the rows
//! Cassandra considers the same.
//!
//! A descending key is the bitwise complement of the ascending key (`!b` for every byte): since
//! ascending keys are prefix-free, complementing reverses their order exactly.
//!
//! Building blocks used below:
//!
//! * `esc(bytes)`: every `0x00` byte becomes `00 FF`, any other byte is copied, and the string
//!   ends with `00 00`. Order-preserving for unsigned byte-string order, prefix-free.
//! * `uvar(n)`: an unsigned integer as one byte `k` (its minimal number of big-endian bytes,
//!   `0` for zero) followed by those `k` bytes. Order-preserving, prefix-free. `!uvar(n)` (each
//!   byte complemented) is order-reversing and prefix-free.
//!
//! Values whose bytes do not have the structure of their type (a 3-byte `int`, a list whose
//! lengths overrun the value) cannot be stored (they fail [`validate`]) but still get a
//! deterministic encoding: order part `FE esc(v)`, empty suffix, after every well-formed value.
//! [`compare`] orders them the same way.
//!
//! Per type (`v` is the serialized value; "empty" means zero bytes; suffixes are empty unless
//! given):
//!
//! | type | order part `O(v)` | suffix `S(v)` |
//! |---|---|---|
//! | `ascii`, `text`, `blob`, `inet`, `duration`, custom | `esc(v)` (Cassandra compares these as unsigned bytes; the empty value is the smallest string) | |
//! | `tinyint`, `smallint`, `int`, `bigint`, `counter`, `timestamp` | empty: `00`; else `01` then `v` with the sign bit of its first byte flipped | |
//! | `date`, `time` | empty: `00`; else `01 v` (Cassandra compares them as unsigned bytes) | |
//! | `boolean` | empty: `00`; false: `01 00`; true: `01 01` | true: the original byte |
//! | `float`, `double` | empty: `00`; else `01 t(bits)`, where `t` flips all bits of a negative number and only the sign bit of a positive one (Java's `Float.compare` order, -0.0 < 0.0), and every NaN uses the canonical NaN's bits (all NaNs equal, greater than +Infinity) | NaN: the original 4 or 8 bytes |
//! | `uuid` | empty: `00`; else `01` + 16 bytes: for version 1 the most significant long reordered as `time_hi time_mid time_low` (the version nibble first, then the timestamp), for other versions the version nibble moved to the front; then the least significant 8 bytes unchanged (UUIDType: version, then time for v1 / unsigned msb, then unsigned lsb) | |
//! | `timeuuid` | empty: `00`; else `01` + the reordered msb as for a v1 `uuid`, then the 8 lsb bytes each XOR `0x80` (TimeUUIDType compares the lsb as *signed* bytes) | |
//! | `varint` | empty: `00`; negative: `01 !uvar(len) m`; zero or positive: `02 uvar(len) m`; where `m` is the minimal two's complement form and `len` its length | `uvar(p)`, `p` the number of redundant sign bytes of the original |
//! | `decimal` | empty: `00`; negative: `01 !e' !d'… FF`; zero: `02`; positive: `03 e' d'… 00`; where the value is `0.d1d2…dn × 10^e` with `d1 ≠ 0`, `dn ≠ 0`, `e'` is `e` as 8 bytes big-endian with the sign bit flipped and `d'` is each digit + 1 | zero: the original scale (4 bytes) then `uvar(p)`; otherwise `uvar(z) uvar(p)`, with `z` the trailing zeros removed from the unscaled value and `p` the redundant sign bytes of the unscaled varint |
//! | `list`, `set` (frozen) | empty: `00`; else `01`, then per element `01` (null) or `02 O(element)`, then `00` | the elements' suffixes |
//! | `map` (frozen) | as a list of `key, value, key, value, …` | the keys' and values' suffixes |
//! | `tuple`, UDT | empty: `00`; else `01`, then per component up to the last non-null one `01` (null) or `02 O(component)`, then `00` (Cassandra 5.0 compares `(1)` and `(1, null)` equal) | the components' suffixes, then `uvar(n)` with `n` the number of trailing null components written explicitly |
//! | `vector<T, n>` | empty: `00`; else `01 O(e1) … O(en)` | the elements' suffixes |
//!
//! Elements inside composite values use the ascending encoding of their type; the whole key is
//! complemented for a descending column.

mod calendar;
mod codec;
mod compare;
mod duration;
mod json;
mod key;
mod literal;
mod normalize;
mod text;
mod validate;
mod vint;

#[cfg(test)]
mod tests;

pub(crate) use calendar::{civil_from_days, days_from_civil, month_length};
pub use calendar::{parse_date, parse_time, parse_timestamp};
pub use codec::{
    collection_elements, encode_list, encode_map, encode_set, encode_tuple, encode_udt,
    encode_vector, map_entries, tuple_components, vector_elements, ElementIter, MapEntry,
};
pub use compare::compare;
pub use duration::{encode_duration, parse_duration, DurationValue};
pub use json::{from_json, to_json};
pub use key::{
    decode_composite_key, decode_composite_key_with, decode_key, encode_composite_key, encode_key,
    key_has_no_suffix,
};
pub(crate) use literal::decimal_bytes;
pub use literal::{literal_to_bytes, parse_decimal, parse_inet, parse_uuid};
pub use normalize::normalize;
pub use text::to_cql_literal;
pub use validate::validate;
pub use vint::decode_duration;

/// Errors of this module. Where Cassandra has a message for the same failure, `Display` gives
/// it word for word (`MarshalException` and `InvalidRequestException` texts, which Cassandra
/// sends to clients as `Invalid` errors).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ValueError {
    /// A constant whose kind the receiver type does not accept, e.g. a string for an `int`.
    /// Cassandra's message names the column, which this module does not know: use
    /// [`ValueError::for_column`] to build `Invalid STRING constant (abc) for "col" of type int`.
    #[error("Invalid {kind} constant ({text}) for type {ty}")]
    InvalidConstant {
        /// Cassandra's constant kind: `STRING`, `INTEGER`, `UUID`, `FLOAT`, `BOOLEAN`, `HEX`
        /// or `DURATION`.
        kind: &'static str,
        /// The constant as Cassandra prints it (`0x...` for blobs).
        text: String,
        /// The receiver type as CQL prints it.
        ty: String,
    },
    /// A value or text that the type's serializer or parser rejects (Cassandra's
    /// `MarshalException`), with Cassandra's message.
    #[error("{0}")]
    Marshal(String),
    /// A request-level rejection (Cassandra's `InvalidRequestException`), e.g. a duration
    /// whose units are out of order.
    #[error("{0}")]
    InvalidRequest(String),
    /// `NULL` was given where a value is needed. The caller normally handles `NULL` before
    /// calling into this module; counters cannot be null at all.
    #[error("{0}")]
    Null(&'static str),
    /// Something Cassandra would accept that this implementation does not support (for
    /// instance host names for `inet`, which Cassandra resolves through DNS).
    #[error("{0}")]
    Unsupported(String),
    /// A key passed to [`decode_key`] that no value encodes to.
    #[error("corrupt key encoding: {0}")]
    CorruptKey(String),
}

impl ValueError {
    pub(crate) fn marshal(msg: impl Into<String>) -> Self {
        ValueError::Marshal(msg.into())
    }

    pub(crate) fn invalid(msg: impl Into<String>) -> Self {
        ValueError::InvalidRequest(msg.into())
    }

    pub(crate) fn corrupt(msg: impl Into<String>) -> Self {
        ValueError::CorruptKey(msg.into())
    }

    /// The message Cassandra sends for this error when the receiver is the column `column`.
    /// Only [`ValueError::InvalidConstant`] mentions the column; the other messages are
    /// returned unchanged.
    pub fn for_column(&self, column: &str) -> String {
        match self {
            ValueError::InvalidConstant { kind, text, ty } => {
                format!("Invalid {kind} constant ({text}) for \"{column}\" of type {ty}")
            }
            other => other.to_string(),
        }
    }
}
