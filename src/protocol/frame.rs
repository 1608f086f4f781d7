//! The 9-byte frame header ("envelope" in v5) and the envelope decoder.
//!
//! ```text
//! version(1) flags(1) stream(2, signed) opcode(1) length(4)   then `length` bytes of body
//! ```
//! The top bit of `version` is the direction (0 request, 1 response). Protocol versions 3, 4 and
//! 5 share this layout. In v5 envelopes travel inside segments (see [`super::v5`]) once the
//! STARTUP exchange is over, but their header is the same.

use bytes::{Buf, Bytes, BytesMut};

/// Length of the frame header in protocol v3 and later.
pub const HEADER_LEN: usize = 9;

/// Lowest protocol version accepted.
pub const MIN_VERSION: u8 = 3;
/// Highest protocol version accepted.
pub const MAX_VERSION: u8 = 5;
/// Direction bit of the version byte: set on responses.
pub const RESPONSE_BIT: u8 = 0x80;
/// The list of versions as Cassandra prints it in its version error.
pub const SUPPORTED_VERSIONS_TEXT: &str = "3/v3, 4/v4, 5/v5";
/// The largest body the spec allows (256 MiB); a sensible `max_body` for [`decode_envelope`].
pub const DEFAULT_MAX_BODY: usize = 256 * 1024 * 1024;

/// Header flag bits.
pub mod flags {
    /// The body is compressed with the algorithm agreed in STARTUP (ignored in v5).
    pub const COMPRESSION: u8 = 0x01;
    /// Request: tracing wanted. Response: the body starts with the tracing session `[uuid]`.
    pub const TRACING: u8 = 0x02;
    /// A `[bytes map]` custom payload precedes the message body (after tracing id and warnings).
    pub const CUSTOM_PAYLOAD: u8 = 0x04;
    /// Response: a `[string list]` of warnings precedes the message body (after the tracing id).
    pub const WARNING: u8 = 0x08;
    /// The client opts in to a beta protocol version.
    pub const USE_BETA: u8 = 0x10;
}

/// The message type of a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Opcode {
    /// 0x00 ERROR (response)
    Error,
    /// 0x01 STARTUP (request)
    Startup,
    /// 0x02 READY (response)
    Ready,
    /// 0x03 AUTHENTICATE (response)
    Authenticate,
    /// 0x05 OPTIONS (request)
    Options,
    /// 0x06 SUPPORTED (response)
    Supported,
    /// 0x07 QUERY (request)
    Query,
    /// 0x08 RESULT (response)
    Result,
    /// 0x09 PREPARE (request)
    Prepare,
    /// 0x0A EXECUTE (request)
    Execute,
    /// 0x0B REGISTER (request)
    Register,
    /// 0x0C EVENT (response)
    Event,
    /// 0x0D BATCH (request)
    Batch,
    /// 0x0E AUTH_CHALLENGE (response)
    AuthChallenge,
    /// 0x0F AUTH_RESPONSE (request)
    AuthResponse,
    /// 0x10 AUTH_SUCCESS (response)
    AuthSuccess,
    /// Any other byte. The envelope decoder accepts it (the frame length is still known);
    /// `decode_request` rejects it with a protocol error on that stream.
    Unknown(u8),
}

impl Opcode {
    /// Maps a wire byte to an opcode (never fails: unknown bytes become `Unknown`).
    pub fn from_u8(b: u8) -> Opcode {
        match b {
            0x00 => Opcode::Error,
            0x01 => Opcode::Startup,
            0x02 => Opcode::Ready,
            0x03 => Opcode::Authenticate,
            0x05 => Opcode::Options,
            0x06 => Opcode::Supported,
            0x07 => Opcode::Query,
            0x08 => Opcode::Result,
            0x09 => Opcode::Prepare,
            0x0A => Opcode::Execute,
            0x0B => Opcode::Register,
            0x0C => Opcode::Event,
            0x0D => Opcode::Batch,
            0x0E => Opcode::AuthChallenge,
            0x0F => Opcode::AuthResponse,
            0x10 => Opcode::AuthSuccess,
            other => Opcode::Unknown(other),
        }
    }

    /// The wire byte of this opcode.
    pub fn as_u8(self) -> u8 {
        match self {
            Opcode::Error => 0x00,
            Opcode::Startup => 0x01,
            Opcode::Ready => 0x02,
            Opcode::Authenticate => 0x03,
            Opcode::Options => 0x05,
            Opcode::Supported => 0x06,
            Opcode::Query => 0x07,
            Opcode::Result => 0x08,
            Opcode::Prepare => 0x09,
            Opcode::Execute => 0x0A,
            Opcode::Register => 0x0B,
            Opcode::Event => 0x0C,
            Opcode::Batch => 0x0D,
            Opcode::AuthChallenge => 0x0E,
            Opcode::AuthResponse => 0x0F,
            Opcode::AuthSuccess => 0x10,
            Opcode::Unknown(b) => b,
        }
    }
}

/// A decoded frame header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameHeader {
    /// Protocol version, without the direction bit (3, 4 or 5 once decoded).
    pub version: u8,
    /// Direction bit: `true` for a response frame. A server must reject request frames that
    /// have it set (`decode_request` does).
    pub is_response: bool,
    /// Raw flag bits (see [`flags`]).
    pub flags: u8,
    /// Stream id; requests use non-negative ids, events use -1.
    pub stream: i16,
    /// Message type.
    pub opcode: Opcode,
    /// Length of the body that follows the header.
    pub body_len: u32,
}

impl FrameHeader {
    /// Whether `flag` (one of [`flags`]) is set.
    pub fn has_flag(&self, flag: u8) -> bool {
        self.flags & flag != 0
    }

    /// Writes the 9 header bytes.
    /// One append: five `put_*` calls each checked the buffer's room (about 260 instructions
    /// per response, callgrind).
    pub fn encode(&self, out: &mut BytesMut) {
        let dir = if self.is_response { RESPONSE_BIT } else { 0 };
        let [s0, s1] = self.stream.to_be_bytes();
        let [l0, l1, l2, l3] = self.body_len.to_be_bytes();
        out.extend_from_slice(&[
            (self.version & 0x7F) | dir,
            self.flags,
            s0,
            s1,
            self.opcode.as_u8(),
            l0,
            l1,
            l2,
            l3,
        ]);
    }
}

/// Errors of [`decode_envelope`]. Nothing is consumed from the buffer. Answer an ERROR with
/// [`FrameError::error_code`] and `to_string()` as message on [`FrameError::stream`], then close
/// the connection (for `BodyTooLarge` Cassandra instead discards the `9 + body_len` bytes of the
/// frame and keeps the connection; a server may do the same).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// The version byte is not 3, 4 or 5 (after removing the direction bit). The text is the one
    /// Cassandra sends; drivers downgrade on seeing "unsupported protocol version" in it.
    #[error("Invalid or unsupported protocol version ({version}); supported versions are (3/v3, 4/v4, 5/v5)")]
    UnsupportedVersion {
        /// The version byte without the direction bit.
        version: u8,
        /// The stream id read from the header (one byte for versions 1 and 2, else two bytes).
        stream: i16,
    },
    /// The declared body length is larger than the limit. The connection's framing is lost.
    #[error("Request is too big: length {body_len} exceeds maximum allowed length {max}.")]
    BodyTooLarge {
        /// The stream id of the offending frame.
        stream: i16,
        /// The declared length.
        body_len: u32,
        /// The limit passed to the decoder.
        max: usize,
    },
}

impl FrameError {
    /// The error code of the reply, as Cassandra sends it: Protocol error (0x000A) for an
    /// unsupported version, Invalid (0x2200) for a too large frame.
    pub fn error_code(&self) -> i32 {
        use super::response::error_code;
        match self {
            FrameError::UnsupportedVersion { .. } => error_code::PROTOCOL,
            FrameError::BodyTooLarge { .. } => error_code::INVALID,
        }
    }

    /// The stream id the error reply must carry.
    pub fn stream(&self) -> i16 {
        match self {
            FrameError::UnsupportedVersion { stream, .. }
            | FrameError::BodyTooLarge { stream, .. } => *stream,
        }
    }
}

/// Decodes one frame (envelope) from the front of `buf`.
///
/// Returns `Ok(None)` when `buf` does not yet hold a complete frame (nothing is consumed), or
/// `Ok(Some((header, body)))` after consuming the header and body from `buf`; `body` shares
/// `buf`'s storage (no copy). Frames of both directions are returned (`header.is_response`);
/// unknown opcodes are returned as `Opcode::Unknown`. The body is returned as sent: if the
/// COMPRESSION flag is set (pre-v5), decompress it with [`super::compression::decompress_body`].
///
/// Errors (nothing consumed; the connection must be closed after replying, see [`FrameError`]):
/// an unsupported version (detected from the first 3 or 4 bytes, before a full header arrives),
/// or `body_len > max_body`.
pub fn decode_envelope(
    buf: &mut BytesMut,
    max_body: usize,
) -> Result<Option<(FrameHeader, Bytes)>, FrameError> {
    let Some(&first) = buf.first() else {
        return Ok(None);
    };
    let version = first & 0x7F;
    if !(MIN_VERSION..=MAX_VERSION).contains(&version) {
        // v1/v2 headers have a one-byte stream id, later ones a two-byte one.
        let stream = if version >= 3 {
            if buf.len() < 4 {
                return Ok(None);
            }
            i16::from_be_bytes([buf[2], buf[3]])
        } else {
            if buf.len() < 3 {
                return Ok(None);
            }
            i16::from(buf[2] as i8)
        };
        return Err(FrameError::UnsupportedVersion { version, stream });
    }
    if buf.len() < HEADER_LEN {
        return Ok(None);
    }
    let header = FrameHeader {
        version,
        is_response: first & RESPONSE_BIT != 0,
        flags: buf[1],
        stream: i16::from_be_bytes([buf[2], buf[3]]),
        opcode: Opcode::from_u8(buf[4]),
        body_len: u32::from_be_bytes([buf[5], buf[6], buf[7], buf[8]]),
    };
    let body_len = header.body_len as usize;
    if body_len > max_body {
        return Err(FrameError::BodyTooLarge {
            stream: header.stream,
            body_len: header.body_len,
            max: max_body,
        });
    }
    if buf.len() - HEADER_LEN < body_len {
        return Ok(None);
    }
    buf.advance(HEADER_LEN);
    let body = buf.split_to(body_len).freeze();
    Ok(Some((header, body)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opcodes_round_trip() {
        for b in 0..=255u8 {
            assert_eq!(Opcode::from_u8(b).as_u8(), b);
        }
        assert_eq!(Opcode::from_u8(0x0A), Opcode::Execute);
        assert_eq!(Opcode::from_u8(0x04), Opcode::Unknown(4));
    }

    #[test]
    fn decodes_a_frame_and_leaves_the_rest() {
        let mut buf = BytesMut::from(
            &b"\x04\x00\x00\x07\x05\x00\x00\x00\x00\x04\x02\x01\x00\x0b\x00\x00\x00\x02hiXX"[..],
        );
        let (h, body) = decode_envelope(&mut buf, 100).unwrap().unwrap();
        assert_eq!(
            h,
            FrameHeader {
                version: 4,
                is_response: false,
                flags: 0,
                stream: 7,
                opcode: Opcode::Options,
                body_len: 0
            }
        );
        assert!(body.is_empty());
        let (h, body) = decode_envelope(&mut buf, 100).unwrap().unwrap();
        assert_eq!(h.version, 4);
        assert_eq!(h.flags, 0x02);
        assert!(h.has_flag(flags::TRACING));
        assert_eq!(h.stream, 0x0100);
        assert_eq!(h.opcode, Opcode::Register);
        assert_eq!(&body[..], b"hi");
        assert_eq!(&buf[..], b"XX");
        assert_eq!(decode_envelope(&mut buf, 100), Ok(None));
        assert_eq!(&buf[..], b"XX", "incomplete input is not consumed");
    }

    #[test]
    fn header_encode_round_trips() {
        let h = FrameHeader {
            version: 5,
            is_response: true,
            flags: flags::WARNING | flags::TRACING,
            stream: -1,
            opcode: Opcode::Event,
            body_len: 3,
        };
        let mut buf = BytesMut::new();
        h.encode(&mut buf);
        assert_eq!(&buf[..], b"\x85\x0a\xff\xff\x0c\x00\x00\x00\x03");
        buf.extend_from_slice(b"abc");
        assert_eq!(decode_envelope(&mut buf, 3).unwrap().unwrap().0, h);
    }

    #[test]
    fn unsupported_versions_carry_version_and_stream() {
        // The python driver probes with 0x42 (DSE v2) and a 9-byte header.
        let mut buf = BytesMut::from(&b"\x42\x00\x00\x05\x05\x00\x00\x00\x00"[..]);
        let err = decode_envelope(&mut buf, 100).unwrap_err();
        assert_eq!(
            err,
            FrameError::UnsupportedVersion {
                version: 0x42,
                stream: 5
            }
        );
        assert_eq!(err.stream(), 5);
        assert_eq!(err.error_code(), 0x000A);
        assert_eq!(
            err.to_string(),
            "Invalid or unsupported protocol version (66); supported versions are (3/v3, 4/v4, 5/v5)"
        );
        assert!(err
            .to_string()
            .to_lowercase()
            .contains("unsupported protocol version"));
        // v2 (8-byte header, one-byte stream); detected before a full header is there.
        let mut buf = BytesMut::from(&b"\x02\x00\x09"[..]);
        assert_eq!(
            decode_envelope(&mut buf, 100),
            Err(FrameError::UnsupportedVersion {
                version: 2,
                stream: 9
            })
        );
        let mut buf = BytesMut::from(&b"\x06\x00"[..]);
        assert_eq!(decode_envelope(&mut buf, 100), Ok(None));
        buf.extend_from_slice(b"\x00\x01");
        assert_eq!(
            decode_envelope(&mut buf, 100),
            Err(FrameError::UnsupportedVersion {
                version: 6,
                stream: 1
            })
        );
        // Version 0 and 0x7F.
        assert!(decode_envelope(&mut BytesMut::from(&b"\x00\x00\x00\x00"[..]), 9).is_err());
        assert!(decode_envelope(&mut BytesMut::from(&b"\xff\x00\x00\x00"[..]), 9).is_err());
    }

    #[test]
    fn oversized_body_is_rejected_from_the_header() {
        let mut buf = BytesMut::from(&b"\x04\x00\x00\x03\x07\xff\xff\xff\xff"[..]);
        let err = decode_envelope(&mut buf, DEFAULT_MAX_BODY).unwrap_err();
        assert_eq!(
            err,
            FrameError::BodyTooLarge {
                stream: 3,
                body_len: u32::MAX,
                max: DEFAULT_MAX_BODY
            }
        );
        assert_eq!(err.stream(), 3);
        assert_eq!(err.error_code(), 0x2200);
        assert_eq!(
            err.to_string(),
            "Request is too big: length 4294967295 exceeds maximum allowed length 268435456."
        );
        // Exactly max is fine (then waits for more bytes).
        let mut buf = BytesMut::from(&b"\x04\x00\x00\x03\x07\x00\x00\x00\x10"[..]);
        assert_eq!(decode_envelope(&mut buf, 16), Ok(None));
        assert!(decode_envelope(&mut buf, 15).is_err());
    }

    #[test]
    fn every_prefix_waits_for_more() {
        let frame = b"\x05\x04\x00\x01\x07\x00\x00\x00\x03abc";
        for cut in 0..frame.len() {
            let mut buf = BytesMut::from(&frame[..cut]);
            assert_eq!(decode_envelope(&mut buf, 1024), Ok(None), "cut at {cut}");
            assert_eq!(buf.len(), cut);
        }
    }
}
