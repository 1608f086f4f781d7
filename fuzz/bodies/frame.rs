//! v3/v4 framing: envelopes out of a byte stream, then body decompression (lz4, snappy) and
//! request decoding, as the connection does with every frame it reads.
//!
//! The body of fuzz target `frame` (`fuzz_targets/frame.rs`), shared with its bounded run in
//! `cargo test` (`tests/fuzz_bounded.rs`).

use bytes::BytesMut;
use ringgate::protocol::compression::{decompress_body, Compression};
use ringgate::protocol::frame::decode_envelope;
use ringgate::protocol::request::decode_request;

const MAX_BODY: usize = 1 << 20;

/// Runs one input: returns, or panics on a finding.
pub fn run(data: &[u8]) {
    let mut buf = BytesMut::from(data);
    // Each frame consumes at least a header, so this ends.
    while let Ok(Some((header, body))) = decode_envelope(&mut buf, MAX_BODY) {
        for c in [Compression::Lz4, Compression::Snappy] {
            if let Ok(plain) = decompress_body(c, &body, MAX_BODY) {
                assert!(plain.len() <= MAX_BODY);
                let _ = decode_request(&header, plain);
            }
        }
        let _ = decode_request(&header, body);
    }
}
