//! The stored row codec and storage keys: whatever bytes a row value or key holds, decoding
//! returns an error, never panics (a corrupt record must not take the server down).
//!
//! The body of fuzz target `row` (`fuzz_targets/row.rs`), shared with its bounded run in
//! `cargo test` (`tests/fuzz_bounded.rs`).

use bytes::Bytes;
use ringgate::cql::types::CqlType;
use ringgate::query::row::{decode_key, RowData};

/// Runs one input: returns, or panics on a finding.
pub fn run(data: &[u8]) {
    let _ = RowData::decode(&Bytes::copy_from_slice(data));
    let types = [
        (CqlType::Int, false),
        (CqlType::Text, true),
        (
            CqlType::Frozen(Box::new(CqlType::List(Box::new(CqlType::Blob)))),
            false,
        ),
    ];
    let clustering: Vec<(&CqlType, bool)> = types.iter().map(|(t, d)| (t, *d)).collect();
    for n in 0..=clustering.len() {
        let _ = decode_key(data, &clustering[..n]);
    }
}
