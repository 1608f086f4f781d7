//! The CQL native protocol, versions 3, 4 and 5: frame codec, requests, responses, compression
//! and the v5 segment layer.
//!
//! Everything here is synchronous and works on `bytes` buffers; no I/O. Decoders never panic on
//! any input: every read is bounds-checked and returns a typed error whose text can be sent to the
//! client in a Protocol error. Decoded payloads (`[bytes]`, `[value]`) are slices of the frame
//! body, not copies.
//!
//! Typical server loop (pre-v5, or v5 before the STARTUP exchange completes):
//! 1. [`frame::decode_envelope`] on the connection's read buffer;
//! 2. if the COMPRESSION flag is set (and version < 5), [`compression::decompress_body`];
//! 3. [`request::decode_request`];
//! 4. answer with [`response::encode_response`].
//!
//! In v5, after READY/AUTHENTICATE, read with [`v5::SegmentDecoder`] and wrap the encoded
//! responses with [`v5::encode_segments`].

pub mod compression;
pub mod frame;
pub mod request;
pub mod response;
pub mod types;
pub mod v5;

#[cfg(test)]
mod tests;
