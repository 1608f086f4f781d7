//! Protocol v5 segment framing (v5 spec sections 2.1 to 2.3).
//!
//! After the server sends READY or AUTHENTICATE on a v5 connection, both directions carry
//! *segments* wrapping the envelopes (frames). All integers of the segment layer are
//! little-endian.
//!
//! Uncompressed segment:
//! ```text
//! 3 bytes: payload length (17 bits) | self-contained flag (bit 17) | padding
//! 3 bytes: CRC24 of those 3 bytes
//! payload (at most 131071 bytes)
//! 4 bytes: CRC32 of the payload
//! ```
//! LZ4 segment (when STARTUP negotiated `lz4`):
//! ```text
//! 5 bytes: compressed length (17 bits) | uncompressed length (17 bits) | self-contained (bit 34)
//! 3 bytes: CRC24 of those 5 bytes
//! compressed payload (an LZ4 block; stored as is when the uncompressed length is 0)
//! 4 bytes: CRC32 of the compressed payload
//! ```
//! We read both LZ4 forms but always send the compressed one, even when it is a little larger
//! than its input: the Python driver (3.x, up to 3.30 at least; Cassandra sends the stored form
//! too, and its users see the same failure) sizes a stored segment with the uncompressed
//! header's 3 bytes instead of 5, so when a socket read ends in such a segment's last two bytes
//! it consumes a truncated segment and then reads payload bytes as a header ("CRC mismatch on
//! header", the connection is closed). LZ4's worst case for [`MAX_LZ4_SEGMENT_PAYLOAD`] bytes
//! still fits the 17-bit compressed length.
//! CRC24 is Cassandra's (`Crc.crc24`: init 0x875060, polynomial 0x1974F0B, bytes fed least
//! significant first); CRC32 is zlib's CRC32 primed with the bytes `fa 2d 55 ca`.
//!
//! A self-contained segment holds one or more whole envelopes. An envelope larger than one
//! segment is split over consecutive non-self-contained segments, which then hold only it.

use bytes::{Buf, BufMut, Bytes, BytesMut};

use super::frame::{decode_envelope, FrameError, FrameHeader};

/// Largest payload of one segment (before compression for LZ4 segments).
pub const MAX_SEGMENT_PAYLOAD: usize = (1 << 17) - 1;
/// Largest payload of one LZ4 segment we send: LZ4's worst case for it (n + n / 255 + 16
/// bytes = 130,573) fits the 17-bit compressed length, so it is always sent compressed.
pub const MAX_LZ4_SEGMENT_PAYLOAD: usize = 127 * 1024;
/// Header length of an uncompressed segment.
pub const HEADER_LEN: usize = 6;
/// Header length of an LZ4 segment.
pub const LZ4_HEADER_LEN: usize = 8;
/// Trailer (CRC32) length.
pub const TRAILER_LEN: usize = 4;

const CRC24_INIT: u32 = 0x875060;
const CRC24_POLY: u32 = 0x1974F0B;
const CRC32_PRIMER: [u8; 4] = [0xFA, 0x2D, 0x55, 0xCA];

/// Cassandra's CRC24 over the `len` (1 to 8) least significant bytes of `bytes`, least
/// significant byte first.
pub fn crc24(mut bytes: u64, len: usize) -> u32 {
    let mut crc = CRC24_INIT;
    for _ in 0..len.min(8) {
        crc ^= ((bytes & 0xFF) as u32) << 16;
        bytes >>= 8;
        for _ in 0..8 {
            crc <<= 1;
            if crc & 0x100_0000 != 0 {
                crc ^= CRC24_POLY;
            }
        }
    }
    crc
}

/// The segment payload CRC32: zlib CRC32 of `fa 2d 55 ca` followed by `payload`.
pub fn crc32(payload: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&CRC32_PRIMER);
    h.update(payload);
    h.finalize()
}

/// Errors of the segment layer. All are fatal for the connection (close it; for
/// [`SegmentError::Frame`] a Protocol error reply on its stream may be sent first).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SegmentError {
    /// The segment header's CRC24 does not match.
    #[error("Corrupt segment header: CRC24 read {read:#08x}, computed {computed:#08x}")]
    HeaderCrc {
        /// CRC read from the wire.
        read: u32,
        /// CRC computed over the header.
        computed: u32,
    },
    /// The payload's CRC32 does not match.
    #[error("Corrupt segment payload: CRC32 read {read:#010x}, computed {computed:#010x}")]
    PayloadCrc {
        /// CRC read from the wire.
        read: u32,
        /// CRC computed over the payload.
        computed: u32,
    },
    /// An LZ4 segment failed to decompress to its declared length.
    #[error("Invalid LZ4 segment: {0}")]
    Lz4(String),
    /// A self-contained segment ended in the middle of an envelope.
    #[error("Self-contained segment ends inside an envelope ({0} bytes left over)")]
    IncompleteEnvelope(usize),
    /// Non-self-contained segments carried more than the one envelope they reassemble, or a
    /// self-contained segment interrupted the reassembly.
    #[error("Invalid multi-segment envelope: {0}")]
    BadReassembly(&'static str),
    /// An envelope inside the segments is invalid (unsupported version, too large).
    #[error("{0}")]
    Frame(#[from] FrameError),
}

/// The largest payload of one segment we send: [`MAX_LZ4_SEGMENT_PAYLOAD`] with `lz4`,
/// otherwise [`MAX_SEGMENT_PAYLOAD`].
pub fn max_payload(lz4: bool) -> usize {
    if lz4 {
        MAX_LZ4_SEGMENT_PAYLOAD
    } else {
        MAX_SEGMENT_PAYLOAD
    }
}

/// Appends `payload` to `out` as segments: one self-contained segment if it fits in
/// [`max_payload`] bytes, otherwise consecutive non-self-contained segments of at most that
/// size. `payload` is one or more whole encoded envelopes; when it needs more than one segment
/// it must be a single envelope (the spec's rule). Nothing is written for an empty payload.
/// With `lz4`, each segment is LZ4 compressed (see the module doc for why never stored).
pub fn encode_segments(payload: &[u8], out: &mut BytesMut, lz4: bool) {
    let max = max_payload(lz4);
    let self_contained = payload.len() <= max;
    for chunk in payload.chunks(max) {
        if lz4 {
            encode_lz4_segment(chunk, self_contained, out);
        } else {
            encode_plain_segment(chunk, self_contained, out);
        }
    }
}

fn put_le(out: &mut BytesMut, v: u64, n: usize) {
    out.put_slice(&v.to_le_bytes()[..n]);
}

fn encode_plain_segment(chunk: &[u8], self_contained: bool, out: &mut BytesMut) {
    let mut header = chunk.len() as u64;
    if self_contained {
        header |= 1 << 17;
    }
    out.reserve(HEADER_LEN + chunk.len() + TRAILER_LEN);
    put_le(out, header, 3);
    put_le(out, crc24(header, 3).into(), 3);
    out.put_slice(chunk);
    out.put_u32_le(crc32(chunk));
}

fn encode_lz4_segment(chunk: &[u8], self_contained: bool, out: &mut BytesMut) {
    let start = out.len();
    let max = lz4_flex::block::get_maximum_output_size(chunk.len());
    out.resize(start + LZ4_HEADER_LEN + max, 0);
    let payload_at = start + LZ4_HEADER_LEN;
    // A chunk of at most MAX_LZ4_SEGMENT_PAYLOAD bytes always compresses to a length that fits
    // 17 bits; the stored form remains only as a fallback that cannot be reached.
    let compressed = match lz4_flex::block::compress_into(chunk, &mut out[payload_at..]) {
        Ok(n) if n <= MAX_SEGMENT_PAYLOAD => Some(n),
        _ => None,
    };
    let (stored_len, uncompressed_len) = match compressed {
        Some(n) => (n, chunk.len()),
        None => {
            out[payload_at..payload_at + chunk.len()].copy_from_slice(chunk);
            (chunk.len(), 0)
        }
    };
    out.truncate(payload_at + stored_len);
    let mut header = stored_len as u64 | ((uncompressed_len as u64) << 17);
    if self_contained {
        header |= 1 << 34;
    }
    let header8 = header | (u64::from(crc24(header, 5)) << 40);
    out[start..payload_at].copy_from_slice(&header8.to_le_bytes());
    let crc = crc32(&out[payload_at..]);
    out.put_u32_le(crc);
}

/// One decoded segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Segment {
    /// Whether the payload holds only whole envelopes.
    pub self_contained: bool,
    /// The (decompressed) payload. For uncompressed segments it shares the input's storage.
    pub payload: BytesMut,
}

fn le(bytes: &[u8]) -> u64 {
    bytes
        .iter()
        .rev()
        .fold(0u64, |acc, &b| (acc << 8) | u64::from(b))
}

/// Decodes one segment from the front of `buf`: `Ok(None)` (nothing consumed) until a whole
/// segment is there. CRCs are verified; a mismatch is an error.
pub fn decode_segment(buf: &mut BytesMut, lz4: bool) -> Result<Option<Segment>, SegmentError> {
    if lz4 {
        if buf.len() < LZ4_HEADER_LEN {
            return Ok(None);
        }
        let header = le(&buf[..5]);
        let read = le(&buf[5..8]) as u32;
        let computed = crc24(header, 5);
        if read != computed {
            return Err(SegmentError::HeaderCrc { read, computed });
        }
        let stored_len = (header & 0x1FFFF) as usize;
        let uncompressed_len = ((header >> 17) & 0x1FFFF) as usize;
        let self_contained = header & (1 << 34) != 0;
        if buf.len() < LZ4_HEADER_LEN + stored_len + TRAILER_LEN {
            return Ok(None);
        }
        buf.advance(LZ4_HEADER_LEN);
        let stored = buf.split_to(stored_len);
        let read = buf.get_u32_le();
        let computed = crc32(&stored);
        if read != computed {
            return Err(SegmentError::PayloadCrc { read, computed });
        }
        let payload = if uncompressed_len == 0 {
            stored
        } else {
            let mut out = vec![0u8; uncompressed_len];
            let n = lz4_flex::block::decompress_into(&stored, &mut out)
                .map_err(|e| SegmentError::Lz4(e.to_string()))?;
            if n != uncompressed_len {
                return Err(SegmentError::Lz4(format!(
                    "decompressed {n} bytes, header says {uncompressed_len}"
                )));
            }
            BytesMut::from(&out[..])
        };
        Ok(Some(Segment {
            self_contained,
            payload,
        }))
    } else {
        if buf.len() < HEADER_LEN {
            return Ok(None);
        }
        let header = le(&buf[..3]);
        let read = le(&buf[3..6]) as u32;
        let computed = crc24(header, 3);
        if read != computed {
            return Err(SegmentError::HeaderCrc { read, computed });
        }
        let len = (header & 0x1FFFF) as usize;
        let self_contained = header & (1 << 17) != 0;
        if buf.len() < HEADER_LEN + len + TRAILER_LEN {
            return Ok(None);
        }
        buf.advance(HEADER_LEN);
        let payload = buf.split_to(len);
        let read = buf.get_u32_le();
        let computed = crc32(&payload);
        if read != computed {
            return Err(SegmentError::PayloadCrc { read, computed });
        }
        Ok(Some(Segment {
            self_contained,
            payload,
        }))
    }
}

/// Reads envelopes out of a stream of segments.
///
/// Feed it the connection's read buffer (the bytes after the v5 handshake); each call of
/// [`SegmentDecoder::next_envelope`] returns the next complete envelope, decoded as
/// [`decode_envelope`] would, or `None` when more bytes are needed. Envelopes of one
/// self-contained segment are returned one by one without copying; envelopes spread over
/// several segments are reassembled.
#[derive(Debug)]
pub struct SegmentDecoder {
    lz4: bool,
    max_body: usize,
    /// Envelopes left in the current self-contained segment.
    current: BytesMut,
    /// The envelope being reassembled from non-self-contained segments.
    large: BytesMut,
}

impl SegmentDecoder {
    /// A decoder for segments compressed with LZ4 or not, accepting envelope bodies up to
    /// `max_body` bytes.
    pub fn new(lz4: bool, max_body: usize) -> SegmentDecoder {
        SegmentDecoder {
            lz4,
            max_body,
            current: BytesMut::new(),
            large: BytesMut::new(),
        }
    }

    /// Whether part of a multi-segment envelope has arrived and the rest is awaited.
    pub fn has_partial(&self) -> bool {
        !self.large.is_empty()
    }

    /// Returns the next envelope (header and body), consuming segments from `buf` as needed.
    /// `Ok(None)` means more input is needed. Errors are fatal for the connection.
    pub fn next_envelope(
        &mut self,
        buf: &mut BytesMut,
    ) -> Result<Option<(FrameHeader, Bytes)>, SegmentError> {
        loop {
            if !self.current.is_empty() {
                return match decode_envelope(&mut self.current, self.max_body)? {
                    Some(env) => Ok(Some(env)),
                    None => {
                        let left = self.current.len();
                        self.current.clear();
                        Err(SegmentError::IncompleteEnvelope(left))
                    }
                };
            }
            let Some(segment) = decode_segment(buf, self.lz4)? else {
                return Ok(None);
            };
            if segment.self_contained {
                if !self.large.is_empty() {
                    return Err(SegmentError::BadReassembly(
                        "self-contained segment in the middle of a multi-segment envelope",
                    ));
                }
                self.current = segment.payload;
                continue;
            }
            self.large.extend_from_slice(&segment.payload);
            // Checks the header (version, size limit) as soon as it is there.
            if let Some(env) = decode_envelope(&mut self.large, self.max_body)? {
                if !self.large.is_empty() {
                    self.large.clear();
                    return Err(SegmentError::BadReassembly(
                        "bytes after the reassembled envelope",
                    ));
                }
                self.large = BytesMut::new();
                return Ok(Some(env));
            }
        }
    }

    /// Whether no partial envelope is buffered.
    pub fn is_idle(&self) -> bool {
        self.current.is_empty() && self.large.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::frame::Opcode;

    fn hex(s: &str) -> Vec<u8> {
        let s: String = s.split_whitespace().collect();
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    const READY: &str = "850000000200000000";
    const READY_SEGMENT: &str = "090002 a4c8c1 850000000200000000 4f5a5d99";

    #[test]
    fn crc24_matches_cassandra() {
        // Header 0x020009 (length 9, self-contained) from the READY vector.
        assert_eq!(crc24(0x020009, 3), 0xC1C8A4);
        // No bytes: the initial value.
        assert_eq!(crc24(0x123456, 0), CRC24_INIT);
    }

    #[test]
    fn crc32_is_primed() {
        assert_eq!(crc32(&hex(READY)), 0x995D5A4F);
        assert_ne!(crc32(b"x"), crc32fast::hash(b"x"));
    }

    #[test]
    fn ready_test_vector() {
        let mut out = BytesMut::new();
        encode_segments(&hex(READY), &mut out, false);
        assert_eq!(&out[..], &hex(READY_SEGMENT)[..]);
        let seg = decode_segment(&mut out, false).unwrap().unwrap();
        assert!(seg.self_contained);
        assert_eq!(&seg.payload[..], &hex(READY)[..]);
        assert!(out.is_empty());
    }

    fn envelope(stream: i16, body_len: usize) -> Vec<u8> {
        let mut out = BytesMut::new();
        FrameHeader {
            version: 5,
            is_response: false,
            flags: 0,
            stream,
            opcode: Opcode::Query,
            body_len: body_len as u32,
        }
        .encode(&mut out);
        out.extend((0..body_len).map(|i| (i * 7 % 251) as u8));
        out.to_vec()
    }

    #[test]
    fn several_envelopes_in_one_segment() {
        for lz4 in [false, true] {
            let mut payload = envelope(1, 10);
            payload.extend(envelope(2, 0));
            payload.extend(envelope(3, 5000));
            let mut wire = BytesMut::new();
            encode_segments(&payload, &mut wire, lz4);
            let mut dec = SegmentDecoder::new(lz4, 1 << 20);
            let mut streams = vec![];
            while let Some((h, body)) = dec.next_envelope(&mut wire).unwrap() {
                streams.push((h.stream, body.len()));
            }
            assert_eq!(streams, vec![(1, 10), (2, 0), (3, 5000)]);
            assert!(dec.is_idle());
        }
    }

    #[test]
    fn large_envelope_is_split_and_reassembled() {
        for lz4 in [false, true] {
            let env = envelope(9, 300_000);
            let mut wire = BytesMut::new();
            encode_segments(&env, &mut wire, lz4);
            // Three segments, none self-contained.
            let mut copy = wire.clone();
            let mut sizes = vec![];
            while let Some(seg) = decode_segment(&mut copy, lz4).unwrap() {
                assert!(!seg.self_contained);
                sizes.push(seg.payload.len());
            }
            let max = max_payload(lz4);
            assert_eq!(sizes, vec![max, max, env.len() - 2 * max]);
            // Followed by a small self-contained one; fed byte by byte at the end.
            encode_segments(&envelope(10, 3), &mut wire, lz4);
            let mut dec = SegmentDecoder::new(lz4, 1 << 20);
            let mut input = BytesMut::new();
            let mut got = vec![];
            for chunk in wire.chunks(4096) {
                input.extend_from_slice(chunk);
                while let Some((h, body)) = dec.next_envelope(&mut input).unwrap() {
                    got.push((h.stream, body));
                }
            }
            assert_eq!(got.len(), 2);
            assert_eq!(got[0].0, 9);
            assert_eq!(&got[0].1[..], &env[9..]);
            assert_eq!(got[1].0, 10);
        }
    }

    #[test]
    fn lz4_segments_are_always_sent_compressed() {
        // Compressible: smaller on the wire.
        let env = envelope(1, 20_000);
        let mut wire = BytesMut::new();
        encode_segments(&env, &mut wire, true);
        assert!(wire.len() < env.len());
        let header = le(&wire[..5]);
        assert_eq!((header >> 17) & 0x1FFFF, env.len() as u64);
        // Incompressible tiny payload: compressed all the same (uncompressed length set).
        let mut wire = BytesMut::new();
        encode_segments(&hex(READY), &mut wire, true);
        let header = le(&wire[..5]);
        assert_eq!((header >> 17) & 0x1FFFF, 9);
        assert_ne!(header & (1 << 34), 0);
        let seg = decode_segment(&mut wire, true).unwrap().unwrap();
        assert_eq!(&seg.payload[..], &hex(READY)[..]);
    }

    #[test]
    fn incompressible_lz4_segments_fit_their_length_fields() {
        // A pseudo-random envelope of several segments: every segment compressed, each
        // compressed length within 17 bits, and the whole decodes back.
        let mut env = envelope(3, 400_000);
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        for b in env[9..].iter_mut() {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            *b = x as u8;
        }
        let mut wire = BytesMut::new();
        encode_segments(&env, &mut wire, true);
        let mut back = Vec::new();
        let mut view = wire.clone();
        while !view.is_empty() {
            let header = le(&view[..5]);
            let stored = (header & 0x1FFFF) as usize;
            let uncompressed = ((header >> 17) & 0x1FFFF) as usize;
            assert!(uncompressed > 0 && uncompressed <= MAX_LZ4_SEGMENT_PAYLOAD);
            assert!(stored > uncompressed, "incompressible input grows a little");
            let seg = decode_segment(&mut view, true).unwrap().unwrap();
            assert!(!seg.self_contained);
            back.extend_from_slice(&seg.payload);
        }
        assert_eq!(back, env);
    }

    #[test]
    fn lz4_segments_stored_uncompressed_are_read() {
        // Other peers (the Python driver, Cassandra) send the stored form: length 0 = as is.
        let payload = hex(READY);
        let header = payload.len() as u64 | (1 << 34);
        let mut wire = BytesMut::new();
        wire.extend_from_slice(&(header | (u64::from(crc24(header, 5)) << 40)).to_le_bytes());
        wire.extend_from_slice(&payload);
        wire.put_u32_le(crc32(&payload));
        let seg = decode_segment(&mut wire, true).unwrap().unwrap();
        assert_eq!(&seg.payload[..], &payload[..]);
        assert!(seg.self_contained);
    }

    #[test]
    fn corruption_is_detected() {
        for lz4 in [false, true] {
            let mut wire = BytesMut::new();
            encode_segments(&envelope(1, 100), &mut wire, lz4);
            let header_len = if lz4 { LZ4_HEADER_LEN } else { HEADER_LEN };
            for i in 0..wire.len() {
                let mut bad = wire.clone();
                bad[i] ^= 0x01;
                let r = decode_segment(&mut bad, lz4);
                if i < header_len {
                    // A flipped header bit either fails the CRC24 or waits for a longer payload.
                    assert!(
                        matches!(r, Err(SegmentError::HeaderCrc { .. }) | Ok(None)),
                        "byte {i}: {r:?}"
                    );
                } else {
                    assert!(r.is_err(), "byte {i}: {r:?}");
                }
            }
        }
    }

    #[test]
    fn envelope_limits_apply_inside_segments() {
        // A segment holding an envelope header that claims a 1 GiB body.
        let mut env = envelope(4, 0);
        env[5..9].copy_from_slice(&(1u32 << 30).to_be_bytes());
        let mut wire = BytesMut::new();
        encode_segments(&env, &mut wire, false);
        let mut dec = SegmentDecoder::new(false, 1 << 20);
        assert!(matches!(
            dec.next_envelope(&mut wire),
            Err(SegmentError::Frame(FrameError::BodyTooLarge {
                stream: 4,
                ..
            }))
        ));
        // A self-contained segment ending mid-envelope.
        let env = envelope(4, 10);
        let mut wire = BytesMut::new();
        encode_segments(&env[..15], &mut wire, false);
        let mut dec = SegmentDecoder::new(false, 1 << 20);
        assert_eq!(
            dec.next_envelope(&mut wire),
            Err(SegmentError::IncompleteEnvelope(15))
        );
        // Unsupported version inside a segment.
        let mut env = envelope(4, 0);
        env[0] = 0x07;
        let mut wire = BytesMut::new();
        encode_segments(&env, &mut wire, false);
        let mut dec = SegmentDecoder::new(false, 1 << 20);
        assert!(matches!(
            dec.next_envelope(&mut wire),
            Err(SegmentError::Frame(FrameError::UnsupportedVersion {
                version: 7,
                ..
            }))
        ));
    }

    #[test]
    fn lz4_segment_with_wrong_uncompressed_length() {
        // Hand-build an LZ4 segment declaring 1000 uncompressed bytes for a block of 50.
        let data = vec![b'a'; 50];
        let block = lz4_flex::block::compress(&data);
        let header = block.len() as u64 | (1000u64 << 17) | (1 << 34);
        let mut wire = BytesMut::new();
        wire.put_slice(&(header | (u64::from(crc24(header, 5)) << 40)).to_le_bytes());
        wire.put_slice(&block);
        wire.put_u32_le(crc32(&block));
        assert!(matches!(
            decode_segment(&mut wire, true),
            Err(SegmentError::Lz4(_))
        ));
    }
}
