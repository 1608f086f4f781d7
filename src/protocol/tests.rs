//! Robustness tests across the protocol modules: truncation at every offset, random and mutated
//! input, and hostile lengths (with a check that they do not cause large allocations).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use bytes::{Bytes, BytesMut};

use super::compression::{compress_body, decompress_body, Compression};
use super::frame::{decode_envelope, FrameHeader, Opcode, DEFAULT_MAX_BODY};
use super::request::{decode_request, encode_request, tests::sample_requests};
use super::response::testing::decode_response;
use super::response::{encode_response, tests::sample_responses, ResponseExtras};
use super::v5::{decode_segment, encode_segments, SegmentDecoder};

// ---------------------------------------------------------------------------------------------
// Allocation tracking: records, per thread, the largest single allocation requested. It wraps
// the system allocator and only exists in this crate's unit-test binary.
// ---------------------------------------------------------------------------------------------

struct TrackingAlloc;

thread_local! {
    static LARGEST_ALLOC: Cell<usize> = const { Cell::new(0) };
}

fn note(size: usize) {
    let _ = LARGEST_ALLOC.try_with(|l| {
        if size > l.get() {
            l.set(size);
        }
    });
}

// SAFETY: every call is forwarded unchanged to `System`; the bookkeeping touches only a
// const-initialised thread-local `Cell`, which never allocates.
unsafe impl GlobalAlloc for TrackingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        System.alloc(layout)
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        System.alloc_zeroed(layout)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(new_size);
        System.realloc(ptr, layout, new_size)
    }
}

#[global_allocator]
static GLOBAL: TrackingAlloc = TrackingAlloc;

/// Runs `f` and returns its result with the largest allocation it made on this thread.
fn largest_alloc_during<T>(f: impl FnOnce() -> T) -> (T, usize) {
    LARGEST_ALLOC.with(|l| l.set(0));
    let out = f();
    (out, LARGEST_ALLOC.with(|l| l.get()))
}

const SMALL: usize = 64 * 1024;

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

/// Deterministic xorshift64 generator.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

fn header(version: u8, opcode: Opcode, flags: u8) -> FrameHeader {
    FrameHeader {
        version,
        is_response: false,
        flags,
        stream: 1,
        opcode,
        body_len: 0,
    }
}

/// Every sample request of every version as a complete frame.
fn request_frames() -> Vec<Vec<u8>> {
    let mut frames = vec![];
    for version in 3..=5 {
        for req in sample_requests(version) {
            let mut out = BytesMut::new();
            let payload = [("k".to_string(), Bytes::from_static(b"v"))];
            encode_request(&mut out, version, 2, true, Some(&payload), &req).unwrap();
            frames.push(out.to_vec());
        }
    }
    frames
}

/// Every sample response of every version as a complete frame, with extras.
fn response_frames() -> Vec<(u8, Vec<u8>)> {
    let extras = ResponseExtras {
        tracing_id: Some([3; 16]),
        warnings: vec!["w".into()],
        custom_payload: vec![(
            "RequestCharge".into(),
            Bytes::from_static(&[0x40, 0, 0, 0, 0, 0, 0, 0]),
        )],
        request_charge: None,
    };
    let mut frames = vec![];
    for version in 3..=5 {
        for resp in sample_responses(version) {
            let mut out = BytesMut::new();
            encode_response(&mut out, version, 1, &resp, &extras, Compression::None).unwrap();
            frames.push((version, out.to_vec()));
        }
    }
    frames
}

// ---------------------------------------------------------------------------------------------
// Truncation
// ---------------------------------------------------------------------------------------------

#[test]
fn truncated_request_frames_never_decode_or_panic() {
    for frame in request_frames() {
        for cut in 0..frame.len() {
            let mut buf = BytesMut::from(&frame[..cut]);
            assert_eq!(
                decode_envelope(&mut buf, DEFAULT_MAX_BODY),
                Ok(None),
                "cut {cut}"
            );
            assert_eq!(buf.len(), cut, "nothing consumed");
        }
        let mut buf = BytesMut::from(&frame[..]);
        let (h, body) = decode_envelope(&mut buf, DEFAULT_MAX_BODY)
            .unwrap()
            .unwrap();
        assert!(decode_request(&h, body.clone()).is_ok());
        for cut in 0..body.len() {
            assert!(
                decode_request(&h, body.slice(..cut)).is_err(),
                "{:?} body cut at {cut}",
                h.opcode
            );
        }
    }
}

#[test]
fn truncated_response_frames_never_decode_or_panic() {
    for (version, frame) in response_frames() {
        for cut in 0..frame.len() {
            let mut buf = BytesMut::from(&frame[..cut]);
            assert_eq!(decode_envelope(&mut buf, DEFAULT_MAX_BODY), Ok(None));
        }
        let mut buf = BytesMut::from(&frame[..]);
        let (h, body) = decode_envelope(&mut buf, DEFAULT_MAX_BODY)
            .unwrap()
            .unwrap();
        assert_eq!(h.version, version);
        assert!(decode_response(&h, body.clone()).is_ok());
        for cut in 0..body.len() {
            // Rows content is opaque to the decoder's length checks only at the very end; a
            // truncated rows body still fails its cell count check.
            assert!(
                decode_response(&h, body.slice(..cut)).is_err(),
                "{:?} cut at {cut}",
                h.opcode
            );
        }
    }
}

#[test]
fn truncated_segment_streams_wait_for_more() {
    for lz4 in [false, true] {
        let mut payload = Vec::new();
        for f in request_frames().into_iter().filter(|f| f[0] == 5) {
            payload.extend_from_slice(&f);
        }
        let mut wire = BytesMut::new();
        encode_segments(&payload, &mut wire, lz4);
        let expected = request_frames().iter().filter(|f| f[0] == 5).count();
        for cut in 0..wire.len() {
            let mut buf = BytesMut::from(&wire[..cut]);
            let mut dec = SegmentDecoder::new(lz4, DEFAULT_MAX_BODY);
            assert_eq!(dec.next_envelope(&mut buf), Ok(None), "cut {cut}");
        }
        let mut dec = SegmentDecoder::new(lz4, DEFAULT_MAX_BODY);
        let mut n = 0;
        while let Some((h, body)) = dec.next_envelope(&mut wire).unwrap() {
            decode_request(&h, body).unwrap();
            n += 1;
        }
        assert_eq!(n, expected);
    }
}

#[test]
fn truncated_compressed_bodies_fail_cleanly() {
    let body: Vec<u8> = (0..5000u32).flat_map(|i| (i % 13).to_be_bytes()).collect();
    for c in [Compression::Lz4, Compression::Snappy] {
        let mut out = BytesMut::new();
        compress_body(c, &body, &mut out).unwrap();
        for cut in 0..out.len() {
            if let Ok(got) = decompress_body(c, &out[..cut], 1 << 20) {
                assert_ne!(&got[..], &body[..], "{c:?} cut {cut}");
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Random and mutated input
// ---------------------------------------------------------------------------------------------

#[test]
fn random_garbage_never_panics() {
    let mut rng = XorShift(0x9E37_79B9_7F4A_7C15);
    for i in 0..20_000 {
        let len = rng.below(96);
        let data = rng.bytes(len);
        // Envelope decoder on raw garbage, and on garbage with a plausible header.
        let mut buf = BytesMut::from(&data[..]);
        let _ = decode_envelope(&mut buf, 1 << 16);
        let mut framed = vec![
            3 + (i % 3) as u8,
            rng.next() as u8,
            0,
            1,
            rng.below(0x12) as u8,
        ];
        framed.extend_from_slice(&(len as u32).to_be_bytes());
        framed.extend_from_slice(&data);
        let mut buf = BytesMut::from(&framed[..]);
        if let Ok(Some((h, body))) = decode_envelope(&mut buf, 1 << 16) {
            let _ = decode_request(&h, body.clone());
            let _ = decode_response(
                &FrameHeader {
                    is_response: true,
                    ..h
                },
                body,
            );
        }
        // Every request opcode with random flags and body.
        let opcode = Opcode::from_u8(rng.below(0x12) as u8);
        let h = header(3 + (i % 3) as u8, opcode, rng.next() as u8);
        let _ = decode_request(&h, Bytes::from(data.clone()));
        // Decompression and segments.
        let _ = decompress_body(Compression::Lz4, &data, 1 << 16);
        let _ = decompress_body(Compression::Snappy, &data, 1 << 16);
        let mut buf = BytesMut::from(&data[..]);
        let _ = decode_segment(&mut buf, i % 2 == 0);
        // Garbage wrapped in valid segments reaches the envelope parser.
        let mut wire = BytesMut::new();
        encode_segments(&framed, &mut wire, i % 2 == 0);
        let mut dec = SegmentDecoder::new(i % 2 == 0, 1 << 16);
        for _ in 0..4 {
            match dec.next_envelope(&mut wire) {
                Ok(Some((h, body))) => {
                    let _ = decode_request(&h, body);
                }
                _ => break,
            }
        }
    }
}

#[test]
fn mutated_valid_requests_never_panic() {
    let mut rng = XorShift(42);
    let frames = request_frames();
    for _ in 0..20_000 {
        let mut frame = frames[rng.below(frames.len())].clone();
        for _ in 0..1 + rng.below(4) {
            let at = rng.below(frame.len());
            frame[at] = rng.next() as u8;
        }
        let mut buf = BytesMut::from(&frame[..]);
        if let Ok(Some((h, body))) = decode_envelope(&mut buf, 1 << 16) {
            let _ = decode_request(&h, body);
        }
    }
}

#[test]
fn mutated_valid_responses_never_panic_the_test_decoder() {
    let mut rng = XorShift(7);
    let frames = response_frames();
    for _ in 0..10_000 {
        let (_, mut frame) = frames[rng.below(frames.len())].clone();
        let at = 9 + rng.below(frame.len().saturating_sub(9).max(1));
        if at < frame.len() {
            frame[at] = rng.next() as u8;
        }
        let mut buf = BytesMut::from(&frame[..]);
        if let Ok(Some((h, body))) = decode_envelope(&mut buf, 1 << 16) {
            let _ = decode_response(&h, body);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Hostile lengths
// ---------------------------------------------------------------------------------------------

fn frame_with(version: u8, opcode: Opcode, body: &[u8]) -> BytesMut {
    let mut out = BytesMut::new();
    FrameHeader {
        body_len: body.len() as u32,
        ..header(version, opcode, 0)
    }
    .encode(&mut out);
    out.extend_from_slice(body);
    out
}

#[test]
fn huge_declared_lengths_do_not_allocate() {
    let cases: Vec<(u8, Opcode, Vec<u8>)> = vec![
        // [string list] of 65535 strings.
        (4, Opcode::Register, b"\xff\xff\x00\x01a".to_vec()),
        // [string map] of 65535 pairs.
        (4, Opcode::Startup, b"\xff\xff\x00\x00".to_vec()),
        // [bytes] of 2^31-1 bytes.
        (4, Opcode::AuthResponse, b"\x7f\xff\xff\xff".to_vec()),
        // [long string] of 2^31-1 bytes.
        (4, Opcode::Query, b"\x7f\xff\xff\xffSELECT".to_vec()),
        // 65535 values.
        (
            4,
            Opcode::Query,
            b"\x00\x00\x00\x00\x00\x01\x01\xff\xff\x00\x00\x00\x00".to_vec(),
        ),
        // 65535 named values.
        (
            5,
            Opcode::Query,
            b"\x00\x00\x00\x00\x00\x01\x00\x00\x00\x41\xff\xff".to_vec(),
        ),
        // 65535 batch statements, then one with 65535 values.
        (
            4,
            Opcode::Batch,
            b"\x01\xff\xff\x00\x00\x00\x00\x00\x00".to_vec(),
        ),
        (
            4,
            Opcode::Batch,
            b"\x01\x00\x01\x01\x00\x00\xff\xff\x00\x00\x00\x01".to_vec(),
        ),
        // Custom payload [bytes map] of 65535 entries.
        (4, Opcode::Options, b"\xff\xff\x00".to_vec()),
    ];
    for (i, (version, opcode, body)) in cases.into_iter().enumerate() {
        let mut frame = frame_with(version, opcode, &body);
        if i == 8 {
            frame[1] = super::frame::flags::CUSTOM_PAYLOAD;
        }
        let (r, largest) = largest_alloc_during(|| {
            let (h, body) = decode_envelope(&mut frame, DEFAULT_MAX_BODY)
                .unwrap()
                .unwrap();
            decode_request(&h, body)
        });
        assert!(r.is_err(), "case {i} decoded: {r:?}");
        assert!(largest < SMALL, "case {i} allocated {largest} bytes");
    }

    // Frame header declaring 4 GiB, and one declaring 200 MiB (under the limit, not yet there).
    let mut buf = BytesMut::from(&b"\x04\x00\x00\x01\x07\xff\xff\xff\xff"[..]);
    let (r, largest) = largest_alloc_during(|| decode_envelope(&mut buf, DEFAULT_MAX_BODY));
    assert!(r.is_err());
    assert!(largest < SMALL);
    let mut buf = BytesMut::from(&b"\x04\x00\x00\x01\x07\x0c\x80\x00\x00abc"[..]);
    let (r, largest) = largest_alloc_during(|| decode_envelope(&mut buf, DEFAULT_MAX_BODY));
    assert_eq!(r, Ok(None));
    assert!(largest < SMALL);

    // LZ4 body declaring 200 MiB with a tiny block.
    let mut bomb = (200u32 << 20).to_be_bytes().to_vec();
    bomb.extend_from_slice(b"\x1f\x00\x01\x00\x00");
    let (r, largest) =
        largest_alloc_during(|| decompress_body(Compression::Lz4, &bomb, DEFAULT_MAX_BODY));
    assert!(r.is_err());
    assert!(largest < SMALL);
    // Snappy body declaring ~200 MiB.
    let (r, largest) = largest_alloc_during(|| {
        decompress_body(
            Compression::Snappy,
            b"\x80\x80\x80\x64\x00",
            DEFAULT_MAX_BODY,
        )
    });
    assert!(r.is_err());
    assert!(largest < SMALL);

    // A multi-segment envelope claiming 200 MiB only grows with the data received.
    let mut env = frame_with(5, Opcode::Query, &[]);
    env[5..9].copy_from_slice(&(200u32 << 20).to_be_bytes());
    env.resize(200_000, 0);
    let mut wire = BytesMut::new();
    encode_segments(&env, &mut wire, false);
    let mut dec = SegmentDecoder::new(false, DEFAULT_MAX_BODY);
    let (r, largest) = largest_alloc_during(|| dec.next_envelope(&mut wire));
    assert_eq!(r, Ok(None));
    assert!(largest < 1 << 20, "allocated {largest}");
}
