//! v5 segments (CRC24 header, CRC32 payload, optional lz4) reassembled into envelopes.
#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use ringgate::protocol::request::decode_request;
use ringgate::protocol::v5::SegmentDecoder;

fuzz_target!(|data: &[u8]| {
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
});
