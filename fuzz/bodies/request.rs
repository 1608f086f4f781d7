//! Request bodies of every opcode and version (QUERY, EXECUTE, BATCH, STARTUP, ...), with the
//! header built from the first bytes so the fuzzer need not find a valid envelope first.
//!
//! The body of fuzz target `request` (`fuzz_targets/request.rs`), shared with its bounded run in
//! `cargo test` (`tests/fuzz_bounded.rs`).

use bytes::Bytes;
use ringgate::protocol::frame::{FrameHeader, Opcode};
use ringgate::protocol::request::decode_request;

/// Runs one input: returns, or panics on a finding.
pub fn run(data: &[u8]) {
    if data.len() < 3 {
        return;
    }
    let body = Bytes::copy_from_slice(&data[3..]);
    let header = FrameHeader {
        version: 3 + data[0] % 3,
        is_response: false,
        flags: data[1],
        stream: 1,
        opcode: Opcode::from_u8(data[2] % 0x11),
        body_len: body.len() as u32,
    };
    let _ = decode_request(&header, body);
}
