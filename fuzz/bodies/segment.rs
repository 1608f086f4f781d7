//! v5 segments (CRC24 header, CRC32 payload, optional lz4) reassembled into envelopes.
//!
//! The body of fuzz target `segment` (`fuzz_targets/segment.rs`), shared with its bounded run in
//! `cargo test` (`tests/fuzz_bounded.rs`).

use bytes::BytesMut;
use ringgate::protocol::request::decode_request;
use ringgate::protocol::v5::SegmentDecoder;

/// Runs one input: returns, or panics on a finding.
pub fn run(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let mut decoder = SegmentDecoder::new(mode & 1 == 1, 1 << 20);
    let mut buf = BytesMut::from(rest);
    // Bounded: every envelope or segment consumes input.
    for _ in 0..rest.len() + 1 {
        match decoder.next_envelope(&mut buf) {
            Ok(Some((header, body))) => {
                let _ = decode_request(&header, body);
            }
            _ => break,
        }
    }
}
