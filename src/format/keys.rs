//! Data keys of tables: where every row and partition header of a table lives in the store.
//!
//! Key: `[storage id: u64 BE][token: u64 BE, sign bit flipped][partition key, escaped][kind]
//! [clustering components, order-preserving]`. Sorting the keys byte-wise gives Cassandra's order:
//! by token, then partition key bytes, then clustering order (ASC/DESC per column).
//! Kind 0x01 is the partition header (static cells and partition deletion), 0x02 a row.
//! The partition key is escaped (0x00 becomes 0x00 0xFF, terminated by 0x00 0x01) so that no
//! partition's keys are a prefix of another's. Building these keys happens here only
//! (`row_key`, `header_key`, `partition_prefix`).

use super::CorruptRow;
use crate::cql::types::CqlType;
use crate::cql::value;
use crate::schema::{PartitionKeyKind, TableDef};
use crate::tokens::Token;
use bytes::Bytes;
use smallvec::SmallVec;

pub const KIND_HEADER: u8 = 0x01;
pub const KIND_ROW: u8 = 0x02;
/// The token as an order-preserving unsigned big-endian value.
pub fn token_bytes(t: Token) -> [u8; 8] {
    ((t as u64) ^ (1 << 63)).to_be_bytes()
}

pub fn token_from_bytes(b: [u8; 8]) -> Token {
    (u64::from_be_bytes(b) ^ (1 << 63)) as i64
}

/// The token a data key (or size record key) holds after its storage id; None for a key too
/// short to hold one.
pub fn key_token(key: &[u8]) -> Option<Token> {
    Some(token_from_bytes(key.get(8..16)?.try_into().ok()?))
}

/// Appends `[storage id][token]` — the start of every key of a table at a token.
pub fn token_prefix(storage_id: u64, token: Token, out: &mut Vec<u8>) {
    out.extend_from_slice(&storage_id.to_be_bytes());
    out.extend_from_slice(&token_bytes(token));
}

/// Appends the escaped partition key: 0x00 becomes 0x00 0xFF, terminated by 0x00 0x01.
pub fn escape(bytes: &[u8], out: &mut Vec<u8>) {
    for &b in bytes {
        out.push(b);
        if b == 0 {
            out.push(0xff);
        }
    }
    out.extend_from_slice(&[0, 1]);
}

fn unescape(input: &mut &[u8]) -> Result<Vec<u8>, CorruptRow> {
    // Most keys hold no 0x00: copy up to the terminator at once, into a buffer of the exact
    // size (a `Bytes` made from it then needs no second allocation; scans decode every key).
    let first_zero = input.iter().position(|&b| b == 0);
    if let Some(end) = first_zero.filter(|&z| input.get(z + 1) == Some(&1)) {
        let out = input[..end].to_vec();
        *input = &input[end + 2..];
        return Ok(out);
    }
    let mut out = Vec::with_capacity(input.len());
    let mut i = 0;
    loop {
        match (input.get(i), input.get(i + 1)) {
            (Some(0), Some(1)) => {
                *input = &input[i + 2..];
                return Ok(out);
            }
            (Some(0), Some(0xff)) => {
                out.push(0);
                i += 2;
            }
            (Some(0), _) | (None, _) => return Err(CorruptRow("partition key escape")),
            (Some(&b), _) => {
                out.push(b);
                i += 1;
            }
        }
    }
}

/// Appends `escaped`, a whole escaped partition key without its terminator, unescaped to
/// `out`; false when it is not one (a 0x00 not followed by 0xFF: the real terminator came
/// earlier). Written through a stack buffer of `UNESCAPE_CHUNK_BYTES`, appended as it fills:
/// scans unescape most keys (keys of small integers hold several 0x00 bytes), and a
/// `Vec::push` per byte, or a search for the terminator, cost half as much again.
fn unescape_whole(escaped: &[u8], out: &mut Vec<u8>) -> bool {
    let mut chunk = [0u8; UNESCAPE_CHUNK_BYTES];
    let (mut i, mut n) = (0, 0);
    while let Some(&b) = escaped.get(i) {
        if b == 0 {
            if escaped.get(i + 1) != Some(&0xff) {
                return false;
            }
            i += 2;
        } else {
            i += 1;
        }
        if n == UNESCAPE_CHUNK_BYTES {
            out.extend_from_slice(&chunk);
            n = 0;
        }
        chunk[n] = b;
        n += 1;
    }
    out.extend_from_slice(&chunk[..n]);
    true
}

const UNESCAPE_CHUNK_BYTES: usize = 64;

/// The key prefix of one partition: `[storage id][token][escaped key]`.
pub fn partition_prefix(storage_id: u64, token: Token, pk: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(16 + pk.len() + 8);
    token_prefix(storage_id, token, &mut k);
    escape(pk, &mut k);
    k
}

/// Appends the clustering part of a row key: the order-preserving parts of every column, then the
/// suffixes that make the exact bytes recoverable (see `value::encode_composite_key`).
pub fn encode_clustering(types: &[(&CqlType, bool)], values: &[Bytes], out: &mut Vec<u8>) {
    let cols: Vec<(&CqlType, &[u8], bool)> = types
        .iter()
        .zip(values)
        .map(|((ty, desc), v)| (*ty, &v[..], *desc))
        .collect();
    value::encode_composite_key(&cols, out);
}

/// Appends only the order part for a prefix of the clustering columns: every row whose first
/// columns equal these values has a key starting with these bytes.
pub fn encode_clustering_prefix<V: AsRef<[u8]>>(
    types: &[(&CqlType, bool)],
    values: &[V],
    out: &mut Vec<u8>,
) {
    let cols: Vec<(&CqlType, &[u8], bool)> = types
        .iter()
        .zip(values)
        .map(|((ty, desc), v)| (*ty, v.as_ref(), *desc))
        .collect();
    let start = out.len();
    let order = value::encode_composite_key(&cols, out);
    out.truncate(start + order);
}

/// The smallest key greater than every key starting with `k` (None: there is none).
pub fn prefix_successor_or_empty(mut k: Vec<u8>) -> Option<Vec<u8>> {
    while let Some(&last) = k.last() {
        if last == 0xff {
            k.pop();
        } else {
            *k.last_mut().expect("non-empty") += 1;
            return Some(k);
        }
    }
    None
}

/// A decoded row key.
#[derive(Debug)]
pub struct DecodedKey {
    pub token: Token,
    pub pk: Bytes,
    pub kind: u8,
    /// The clustering values (most tables have one or two clustering columns: kept inline).
    pub clustering: SmallVec<[Bytes; 2]>,
    /// Bytes of the key before its kind byte: the partition's key prefix (`partition_prefix`).
    pub prefix_len: usize,
}

/// Decodes a data key; `clustering`: the table's clustering columns (`clustering_types`).
pub fn decode_key(key: &[u8], clustering: &[(&CqlType, bool)]) -> Result<DecodedKey, CorruptRow> {
    check_len(key)?;
    let (pk, prefix_len) = partition_key(key)?;
    with_partition(key, clustering, pk, prefix_len)
}

/// Decodes the keys of a scan: the partition key of a run of keys of one partition is
/// unescaped once and shared (every row of a partition read carries it; decoding it per row
/// was about a third of a 10-row slice's key decoding).
#[derive(Default)]
pub struct KeyDecoder {
    /// The last key's partition prefix (`partition_prefix`; empty before the first key): the
    /// escaping makes no partition's prefix a prefix of another's, so a key that starts with
    /// it belongs to the same partition.
    prefix: Vec<u8>,
    pk: Bytes,
}

impl KeyDecoder {
    /// As [`decode_key`].
    pub fn decode(
        &mut self,
        key: &[u8],
        clustering: &[(&CqlType, bool)],
    ) -> Result<DecodedKey, CorruptRow> {
        check_len(key)?;
        if self.prefix.is_empty() || !key.starts_with(&self.prefix) {
            let (pk, prefix_len) = partition_key(key)?;
            self.pk = pk;
            self.prefix.clear();
            self.prefix.extend_from_slice(&key[..prefix_len]);
        }
        with_partition(key, clustering, self.pk.clone(), self.prefix.len())
    }
}

/// Whether `key` can hold a storage id, a token and a partition key's terminator.
fn check_len(key: &[u8]) -> Result<(), CorruptRow> {
    match key.len() < 17 {
        true => Err(CorruptRow("short key")),
        false => Ok(()),
    }
}

/// The partition key of a data key (long enough: `check_len`), unescaped, and the length of
/// the key's partition prefix.
fn partition_key(key: &[u8]) -> Result<(Bytes, usize), CorruptRow> {
    let mut rest = &key[16..];
    let pk = Bytes::from(unescape(&mut rest)?);
    Ok((pk, key.len() - rest.len()))
}

/// The rest of `key` decoded after its partition prefix of `prefix_len` bytes, which holds
/// `pk`.
fn with_partition(
    key: &[u8],
    clustering: &[(&CqlType, bool)],
    pk: Bytes,
    prefix_len: usize,
) -> Result<DecodedKey, CorruptRow> {
    let token = key_token(key).expect("length checked");
    let (&kind, mut rest) = key[prefix_len..]
        .split_first()
        .ok_or(CorruptRow("missing kind"))?;
    let mut values = SmallVec::new();
    if kind == KIND_ROW && !clustering.is_empty() {
        value::decode_composite_key_with(clustering, &mut rest, |v| values.push(v.into()))
            .map_err(|_| CorruptRow("clustering value"))?;
    }
    Ok(DecodedKey {
        token,
        pk,
        kind,
        clustering: values,
        prefix_len,
    })
}

/// The token and partition key of a row key without clustering values (a table without
/// clustering columns); None for any other key (a header, a row with clustering values, a key
/// that does not decode). The partition key is borrowed from `key` when it holds no 0x00 byte,
/// else unescaped into `buf`.
pub fn plain_row_key<'a>(key: &'a [u8], buf: &'a mut Vec<u8>) -> Option<(Token, &'a [u8])> {
    let token = key_token(key)?;
    let escaped = key.get(16..)?.strip_suffix(&[0, 1, KIND_ROW])?;
    if !escaped.contains(&0) {
        return Some((token, escaped));
    }
    buf.clear();
    unescape_whole(escaped, buf).then_some((token, &buf[..]))
}

/// The token of a partition key (serialized as Cassandra hashes it): Murmur3 of the whole key,
/// or for hierarchical (MultiHash) tables the concatenated per-level hashes.
pub fn table_token(table: &TableDef, pk: &[u8]) -> Token {
    match table.options.partition_key_kind {
        PartitionKeyKind::Hash => crate::tokens::token_of(pk),
        PartitionKeyKind::MultiHash => {
            let n = table.partition_key.len();
            match crate::tokens::split_composite(pk, n) {
                Some(parts) => crate::tokens::multihash_token(&parts),
                None => crate::tokens::token_of(pk),
            }
        }
    }
}

/// The types and DESC flags of a table's clustering columns, in order (for the key codec).
pub fn clustering_types(table: &TableDef) -> Vec<(&CqlType, bool)> {
    table
        .clustering_columns()
        .map(|c| (&c.ty, c.desc))
        .collect()
}

/// The storage key of row `clustering` of partition `pk`.
pub fn row_key(table: &TableDef, pk: &[u8], clustering: &[Bytes]) -> Vec<u8> {
    let mut k = partition_prefix(table.storage_id, table_token(table, pk), pk);
    k.push(KIND_ROW);
    encode_clustering(&clustering_types(table), clustering, &mut k);
    k
}

/// The storage key of the header of partition `pk` (static cells, partition deletion).
pub fn header_key(table: &TableDef, pk: &[u8]) -> Vec<u8> {
    let mut k = partition_prefix(table.storage_id, table_token(table, pk), pk);
    k.push(KIND_HEADER);
    k
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_escape_round_trip() {
        for pk in [&b""[..], b"a\0b", b"\0\0", b"\xff\x00\x01"] {
            let mut k = partition_prefix(7, -3, pk);
            k.push(KIND_HEADER);
            let d = decode_key(&k, &[]).unwrap();
            assert_eq!(&d.pk[..], pk);
            assert_eq!(d.token, -3);
            assert_eq!(d.kind, KIND_HEADER);
        }
        assert!(token_bytes(-1) < token_bytes(0));
        assert!(token_bytes(i64::MIN) < token_bytes(i64::MAX));
    }

    proptest::proptest! {
        /// `plain_row_key` finds what `decode_key` finds in a row key without clustering
        /// values, and nothing in any other key.
        #[test]
        fn plain_row_keys_read_as_decode_key(
            pk in proptest::collection::vec(proptest::sample::select(vec![0u8, 1, 2, 7, 0xfe, 0xff]), 0..12),
            token: i64,
        ) {
            let mut buf = Vec::new();
            let mut k = partition_prefix(7, token, &pk);
            k.push(KIND_ROW);
            let d = decode_key(&k, &[]).unwrap();
            let found = plain_row_key(&k, &mut buf).map(|(t, p)| (t, p.to_vec()));
            proptest::prop_assert_eq!(found, Some((d.token, d.pk.to_vec())));
            proptest::prop_assert_eq!(&d.pk[..], &pk[..]);
            for end in 0..k.len() {
                proptest::prop_assert_eq!(plain_row_key(&k[..end], &mut buf), None);
            }
            k.push(0);
            proptest::prop_assert_eq!(plain_row_key(&k, &mut buf), None);
            let mut h = partition_prefix(7, token, &pk);
            h.push(KIND_HEADER);
            proptest::prop_assert_eq!(plain_row_key(&h, &mut buf), None);
        }

        /// One `KeyDecoder` fed keys of partitions that share bytes (keys that are prefixes of
        /// each other, escaped zeros, equal tokens), headers, rows and cut keys in any order
        /// decodes each as a fresh `decode_key` does, and each key's own partition key.
        #[test]
        fn a_key_decoder_decodes_as_decode_key(
            keys in proptest::collection::vec((
                proptest::collection::vec(proptest::sample::select(vec![0u8, 1, 0xff, b'a']), 0..4),
                0i64..2,
                proptest::option::of(proptest::collection::vec(proptest::num::u8::ANY, 0..3)),
                proptest::option::of(0usize..40),
            ), 0..40),
        ) {
            let text = CqlType::Text;
            let types = [(&text, true)];
            let mut decoder = KeyDecoder::default();
            for (pk, token, clustering, cut) in keys {
                let mut k = partition_prefix(7, token, &pk);
                match &clustering {
                    Some(c) => {
                        k.push(KIND_ROW);
                        encode_clustering(&types, &[Bytes::from(c.clone())], &mut k);
                    }
                    None => k.push(KIND_HEADER),
                }
                let k = &k[..cut.map_or(k.len(), |c| c.min(k.len()))];
                let fresh = decode_key(k, &types);
                let got = decoder.decode(k, &types);
                let shown = |d: Result<DecodedKey, CorruptRow>| format!("{d:?}");
                proptest::prop_assert_eq!(shown(got), shown(fresh));
                if cut.is_none() {
                    let d = decoder.decode(k, &types).unwrap();
                    proptest::prop_assert_eq!(&d.pk[..], &pk[..]);
                    proptest::prop_assert_eq!(d.clustering.first().map(|c| c.to_vec()), clustering);
                }
            }
        }
    }
}
