//! Decoding a ROWS result's content in engine-level tests (`tests/engine/`,
//! `tests/contract_only.rs`, `tests/engine_races.rs`): `[int length][bytes]` per cell, a
//! negative length for null, row after row.

/// The cells of a result's content, in order (None: null).
pub fn cells(content: &[u8]) -> Vec<Option<Vec<u8>>> {
    let mut b = content;
    let mut out = Vec::new();
    while b.len() >= 4 {
        let n = i32::from_be_bytes(b[..4].try_into().unwrap());
        b = &b[4..];
        if n < 0 {
            out.push(None);
        } else {
            out.push(Some(b[..n as usize].to_vec()));
            b = &b[n as usize..];
        }
    }
    out
}
