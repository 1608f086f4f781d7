//! v3/v4 framing: envelopes out of a byte stream, then body decompression (lz4, snappy) and
//! request decoding, as the connection does with every frame it reads.
#![no_main]

#[path = "../bodies/frame.rs"]
mod body;

libfuzzer_sys::fuzz_target!(|data: &[u8]| body::run(data));
