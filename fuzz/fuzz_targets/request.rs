//! Request bodies of every opcode and version (QUERY, EXECUTE, BATCH, STARTUP, ...), with the
//! header built from the first bytes so the fuzzer need not find a valid envelope first.
#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use ringgate::protocol::frame::{FrameHeader, Opcode};
use ringgate::protocol::request::decode_request;

fuzz_target!(|data: &[u8]| {
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
});
