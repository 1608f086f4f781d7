//! v5 segments (CRC24 header, CRC32 payload, optional lz4) reassembled into envelopes.
#![no_main]

#[path = "../bodies/segment.rs"]
mod body;

libfuzzer_sys::fuzz_target!(|data: &[u8]| body::run(data));
