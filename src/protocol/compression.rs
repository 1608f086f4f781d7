//! Body compression for protocol v3/v4 frames (spec v4 section 5).
//!
//! The algorithm is chosen by the STARTUP `COMPRESSION` option and applies to frame bodies that
//! have the COMPRESSION header flag. LZ4 bodies are a 4-byte big-endian uncompressed length
//! followed by an LZ4 block; Snappy bodies are raw Snappy. In protocol v5 compression happens in
//! the segment layer instead (LZ4 only, see [`super::v5`]) and the header flag is ignored.

use bytes::{BufMut, Bytes, BytesMut};

/// The compression negotiated on a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Compression {
    /// No compression.
    #[default]
    None,
    /// LZ4 block compression with a big-endian length prefix.
    Lz4,
    /// Raw Snappy.
    Snappy,
}

/// Errors of compression and decompression. Decompression errors are fatal for the frame: the
/// server should answer a Protocol error on the frame's stream.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CompressionError {
    /// STARTUP asked for an algorithm we do not implement.
    #[error("Unknown compression algorithm: {0}")]
    UnknownAlgorithm(String),
    /// The body declares an uncompressed size above the caller's limit.
    #[error("Decompressed body would be {declared} bytes, more than the limit of {max}")]
    TooLarge {
        /// Declared uncompressed size.
        declared: u64,
        /// The limit passed by the caller.
        max: usize,
    },
    /// The compressed body is malformed.
    #[error("Invalid {algorithm} compressed body: {detail}")]
    Corrupt {
        /// `"lz4"` or `"snappy"`.
        algorithm: &'static str,
        /// What went wrong.
        detail: String,
    },
}

impl Compression {
    /// Parses the value of STARTUP's `COMPRESSION` option (case-insensitive, as Cassandra does):
    /// `"lz4"` or `"snappy"`. An empty string means no compression.
    pub fn from_startup_option(name: &str) -> Result<Compression, CompressionError> {
        if name.is_empty() {
            Ok(Compression::None)
        } else if name.eq_ignore_ascii_case("lz4") {
            Ok(Compression::Lz4)
        } else if name.eq_ignore_ascii_case("snappy") {
            Ok(Compression::Snappy)
        } else {
            Err(CompressionError::UnknownAlgorithm(name.to_string()))
        }
    }

    /// The name used in STARTUP/SUPPORTED (`"lz4"`, `"snappy"`), `None` for no compression.
    pub fn name(self) -> Option<&'static str> {
        match self {
            Compression::None => None,
            Compression::Lz4 => Some("lz4"),
            Compression::Snappy => Some("snappy"),
        }
    }
}

/// Decompresses a pre-v5 frame body. Refuses (before allocating) bodies whose declared
/// uncompressed size exceeds `max`. With `Compression::None` the body is returned unchanged.
pub fn decompress_body(
    compression: Compression,
    body: &[u8],
    max: usize,
) -> Result<Bytes, CompressionError> {
    match compression {
        Compression::None => Ok(Bytes::copy_from_slice(body)),
        Compression::Lz4 => {
            let corrupt = |detail: String| CompressionError::Corrupt {
                algorithm: "lz4",
                detail,
            };
            if body.len() < 4 {
                return Err(corrupt("missing the 4-byte length prefix".into()));
            }
            let declared = u32::from_be_bytes([body[0], body[1], body[2], body[3]]);
            if declared as u64 > max as u64 {
                return Err(CompressionError::TooLarge {
                    declared: declared.into(),
                    max,
                });
            }
            let declared = declared as usize;
            // An LZ4 block expands at most ~255x; reject impossible sizes before allocating.
            if declared > (body.len() - 4).saturating_mul(256).saturating_add(64) {
                return Err(corrupt(format!(
                    "declared length {declared} is impossible for {} compressed bytes",
                    body.len() - 4
                )));
            }
            let mut out = vec![0u8; declared];
            let n = lz4_flex::block::decompress_into(&body[4..], &mut out)
                .map_err(|e| corrupt(e.to_string()))?;
            if n != declared {
                return Err(corrupt(format!(
                    "decompressed {n} bytes, expected {declared}"
                )));
            }
            Ok(Bytes::from(out))
        }
        Compression::Snappy => {
            let corrupt = |detail: String| CompressionError::Corrupt {
                algorithm: "snappy",
                detail,
            };
            let declared = snap::raw::decompress_len(body).map_err(|e| corrupt(e.to_string()))?;
            if declared > max {
                return Err(CompressionError::TooLarge {
                    declared: declared as u64,
                    max,
                });
            }
            // A Snappy element expands at most 64 bytes out of 3; reject impossible sizes.
            if declared > body.len().saturating_mul(32).saturating_add(64) {
                return Err(corrupt(format!(
                    "declared length {declared} is impossible for {} compressed bytes",
                    body.len()
                )));
            }
            let mut out = vec![0u8; declared];
            let n = snap::raw::Decoder::new()
                .decompress(body, &mut out)
                .map_err(|e| corrupt(e.to_string()))?;
            out.truncate(n);
            Ok(Bytes::from(out))
        }
    }
}

/// Compresses `body` and appends the result to `out` (with the LZ4 length prefix for LZ4).
/// With `Compression::None`, `body` is appended unchanged.
pub fn compress_body(
    compression: Compression,
    body: &[u8],
    out: &mut BytesMut,
) -> Result<(), CompressionError> {
    match compression {
        Compression::None => out.extend_from_slice(body),
        Compression::Lz4 => {
            let len = u32::try_from(body.len()).map_err(|_| CompressionError::TooLarge {
                declared: body.len() as u64,
                max: u32::MAX as usize,
            })?;
            out.put_u32(len);
            let start = out.len();
            let max_len = lz4_flex::block::get_maximum_output_size(body.len());
            out.resize(start + max_len, 0);
            let n = lz4_flex::block::compress_into(body, &mut out[start..]).map_err(|e| {
                CompressionError::Corrupt {
                    algorithm: "lz4",
                    detail: e.to_string(),
                }
            })?;
            out.truncate(start + n);
        }
        Compression::Snappy => {
            let start = out.len();
            out.resize(start + snap::raw::max_compress_len(body.len()), 0);
            let n = snap::raw::Encoder::new()
                .compress(body, &mut out[start..])
                .map_err(|e| CompressionError::Corrupt {
                    algorithm: "snappy",
                    detail: e.to_string(),
                })?;
            out.truncate(start + n);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<u8> {
        let mut v = Vec::new();
        for i in 0..2000u32 {
            v.extend_from_slice(format!("row {} value {};", i % 17, i % 5).as_bytes());
        }
        v
    }

    #[test]
    fn parse_startup_option() {
        assert_eq!(
            Compression::from_startup_option("lz4"),
            Ok(Compression::Lz4)
        );
        assert_eq!(
            Compression::from_startup_option("LZ4"),
            Ok(Compression::Lz4)
        );
        assert_eq!(
            Compression::from_startup_option("snappy"),
            Ok(Compression::Snappy)
        );
        assert_eq!(Compression::from_startup_option(""), Ok(Compression::None));
        assert!(Compression::from_startup_option("zstd").is_err());
        assert_eq!(Compression::Lz4.name(), Some("lz4"));
    }

    #[test]
    fn lz4_round_trip_and_layout() {
        let body = sample();
        let mut out = BytesMut::new();
        compress_body(Compression::Lz4, &body, &mut out).unwrap();
        assert_eq!(&out[..4], &(body.len() as u32).to_be_bytes());
        assert!(
            out.len() < body.len() / 2,
            "repetitive input must shrink: {} -> {}",
            body.len(),
            out.len()
        );
        // The block after the prefix is a plain LZ4 block.
        assert_eq!(
            lz4_flex::block::decompress(&out[4..], body.len()).unwrap(),
            body
        );
        let back = decompress_body(Compression::Lz4, &out, body.len()).unwrap();
        assert_eq!(&back[..], &body[..]);
        // One byte under the declared size is refused.
        assert!(matches!(
            decompress_body(Compression::Lz4, &out, body.len() - 1),
            Err(CompressionError::TooLarge { .. })
        ));
    }

    #[test]
    fn lz4_empty_and_corrupt() {
        let mut out = BytesMut::new();
        compress_body(Compression::Lz4, b"", &mut out).unwrap();
        assert_eq!(
            decompress_body(Compression::Lz4, &out, 10).unwrap().len(),
            0
        );
        assert!(decompress_body(Compression::Lz4, b"\x00\x00", 10).is_err());
        // Declared 1000 bytes but the block yields less.
        let mut bad = 1000u32.to_be_bytes().to_vec();
        bad.extend_from_slice(&lz4_flex::block::compress(b"hello hello hello"));
        assert!(matches!(
            decompress_body(Compression::Lz4, &bad, 1 << 20),
            Err(CompressionError::Corrupt { .. })
        ));
    }

    #[test]
    fn lz4_bomb_is_refused_before_allocating() {
        // 4 GiB - 1 declared, a few bytes of block.
        let bomb = b"\xff\xff\xff\xff\x1f\x00\x01\x00";
        assert!(matches!(
            decompress_body(Compression::Lz4, bomb, 256 << 20),
            Err(CompressionError::TooLarge { .. })
        ));
        // 200 MB declared, under the limit, but impossible for 4 compressed bytes.
        let mut bomb = (200u32 << 20).to_be_bytes().to_vec();
        bomb.extend_from_slice(b"\x1f\x00\x01\x00");
        assert!(matches!(
            decompress_body(Compression::Lz4, &bomb, 256 << 20),
            Err(CompressionError::Corrupt { .. })
        ));
    }

    #[test]
    fn snappy_round_trip_and_limits() {
        let body = sample();
        let mut out = BytesMut::from(&b"pre"[..]);
        compress_body(Compression::Snappy, &body, &mut out).unwrap();
        assert_eq!(&out[..3], b"pre");
        let compressed = &out[3..];
        assert_eq!(
            snap::raw::Decoder::new()
                .decompress_vec(compressed)
                .unwrap(),
            body
        );
        assert_eq!(
            &decompress_body(Compression::Snappy, compressed, body.len()).unwrap()[..],
            &body[..]
        );
        assert!(matches!(
            decompress_body(Compression::Snappy, compressed, 100),
            Err(CompressionError::TooLarge { .. })
        ));
        // A varint header declaring ~4 GB.
        assert!(
            decompress_body(Compression::Snappy, b"\xff\xff\xff\xff\x0f\x00", 1 << 20).is_err()
        );
        assert!(decompress_body(Compression::Snappy, b"\x05\x00", 1 << 20).is_err());
    }
}
