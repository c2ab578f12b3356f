//! Block codecs: none, lz4 (block format) and zstd with a level.
//!
//! A codec turns a block's uncompressed payload into its stored bytes and
//! back. Decompression always writes into a buffer sized from the header's
//! `uncompressed_len`, which the header check has already capped at
//! [`BLOCK_UNCOMPRESSED_BYTES_MAX`]; a stream that inflates to more or fewer
//! bytes is an error, never a reallocation.
//!
//! Compressed output is deterministic for a given codec, level and library
//! version (pinned in `Cargo.lock`); the golden fixtures rely on it.

use crate::format::error::FormatError;
use crate::format::limits::BLOCK_UNCOMPRESSED_BYTES_MAX;

/// Largest number of output bytes one stored lz4 byte can produce: a
/// match-length extension byte adds at most 255 bytes to its match.
pub const LZ4_EXPANSION_MAX: usize = 255;

/// Output bytes lz4's bound allows beyond [`LZ4_EXPANSION_MAX`] per stored
/// byte (the minimum match and the token's own length bits).
const LZ4_EXPANSION_SLACK_BYTES: usize = 64;

/// Largest number of output bytes one stored zstd byte can produce: the
/// densest zstd block is an RLE block, 4 bytes (a 3-byte block header and
/// the byte) standing for at most a block's 128 KiB.
pub const ZSTD_EXPANSION_MAX: usize = (128 << 10) / 4;

/// Smallest zstd level Sluice writes or accepts (zstd's fast levels).
pub const ZSTD_LEVEL_MIN: i8 = -7;
/// Largest zstd level Sluice writes or accepts.
pub const ZSTD_LEVEL_MAX: i8 = 22;

/// How a block's payload is stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Codec {
    /// Stored as is.
    None,
    /// lz4 block format (no frame), via `lz4_flex`.
    Lz4,
    /// One zstd frame at the given level.
    Zstd {
        /// Compression level, [`ZSTD_LEVEL_MIN`] to [`ZSTD_LEVEL_MAX`], not 0.
        level: i8,
    },
}

impl Codec {
    /// Codec id byte for [`Codec::None`].
    pub const ID_NONE: u8 = 0;
    /// Codec id byte for [`Codec::Lz4`].
    pub const ID_LZ4: u8 = 1;
    /// Codec id byte for [`Codec::Zstd`].
    pub const ID_ZSTD: u8 = 2;

    /// A zstd codec, checking the level.
    pub fn zstd(level: i32) -> Result<Self, FormatError> {
        match i8::try_from(level) {
            Ok(l) if l != 0 && (ZSTD_LEVEL_MIN..=ZSTD_LEVEL_MAX).contains(&l) => {
                Ok(Codec::Zstd { level: l })
            }
            _ => Err(FormatError::BadCodecLevel { codec: "zstd", level }),
        }
    }

    /// Short name, as used in errors and benchmark tables.
    pub fn name(self) -> &'static str {
        match self {
            Codec::None => "none",
            Codec::Lz4 => "lz4",
            Codec::Zstd { .. } => "zstd",
        }
    }

    /// Name with level, for example `zstd-3`.
    pub fn label(self) -> String {
        match self {
            Codec::Zstd { level } => format!("zstd-{level}"),
            other => other.name().to_owned(),
        }
    }

    /// Parses `none`, `lz4`, `zstd` (level 3) or `zstd-N`.
    pub fn parse(s: &str) -> Result<Self, String> {
        match s {
            "none" => Ok(Codec::None),
            "lz4" => Ok(Codec::Lz4),
            "zstd" => Ok(Codec::Zstd { level: 3 }),
            other => {
                let level = other
                    .strip_prefix("zstd-")
                    .and_then(|l| l.parse::<i32>().ok())
                    .ok_or_else(|| format!("unknown codec {other:?}: none, lz4, zstd, zstd-N"))?;
                Codec::zstd(level).map_err(|e| e.to_string())
            }
        }
    }

    /// The id and level bytes written in a block header.
    pub(crate) fn to_header(self) -> (u8, i8) {
        match self {
            Codec::None => (Self::ID_NONE, 0),
            Codec::Lz4 => (Self::ID_LZ4, 0),
            Codec::Zstd { level } => (Self::ID_ZSTD, level),
        }
    }

    /// The codec named by a header's id and level bytes, checked.
    pub(crate) fn from_header(id: u8, level: i8) -> Result<Self, FormatError> {
        let codec = match id {
            Self::ID_NONE => Codec::None,
            Self::ID_LZ4 => Codec::Lz4,
            Self::ID_ZSTD => return Codec::zstd(i32::from(level)),
            _ => return Err(FormatError::UnknownCodec { id }),
        };
        if level != 0 {
            return Err(FormatError::BadCodecLevel { codec: codec.name(), level: level.into() });
        }
        Ok(codec)
    }

    /// The most bytes `stored` bytes of this codec can inflate to: what a
    /// header may claim for them, checked before anything is allocated for
    /// the payload (a forged claim whose payload CRC was made valid as well
    /// is refused here, not after an allocation of its size).
    pub fn inflate_bound(self, stored: usize) -> usize {
        match self {
            Codec::None => stored,
            Codec::Lz4 => {
                stored.saturating_mul(LZ4_EXPANSION_MAX).saturating_add(LZ4_EXPANSION_SLACK_BYTES)
            }
            Codec::Zstd { .. } => stored.saturating_mul(ZSTD_EXPANSION_MAX),
        }
    }
}

impl std::fmt::Display for Codec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.label())
    }
}

/// Reusable compression state for one codec.
pub(crate) struct Compressor {
    codec: Codec,
    zstd: Option<zstd::bulk::Compressor<'static>>,
    scratch: Vec<u8>,
}

impl std::fmt::Debug for Compressor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Compressor").field("codec", &self.codec).finish_non_exhaustive()
    }
}

impl Compressor {
    pub(crate) fn new(codec: Codec) -> Result<Self, FormatError> {
        let zstd = match codec {
            Codec::Zstd { level } => Some(
                zstd::bulk::Compressor::new(i32::from(level))
                    .map_err(|e| FormatError::Compress { codec: "zstd", reason: e.to_string() })?,
            ),
            _ => None,
        };
        Ok(Compressor { codec, zstd, scratch: Vec::new() })
    }

    pub(crate) fn codec(&self) -> Codec {
        self.codec
    }

    /// Appends the compressed form of `input` to `out`. Not for [`Codec::None`].
    pub(crate) fn compress_append(
        &mut self,
        input: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<(), FormatError> {
        match (self.codec, self.zstd.as_mut()) {
            (Codec::Lz4, _) => {
                // Into the scratch, whose bytes are reused between calls, so
                // that the worst-case bound is not zero-filled per block;
                // copying the compressed bytes out costs less than that.
                let bound = lz4_flex::block::get_maximum_output_size(input.len());
                let n = lz4_flex::block::compress_into(input, room(&mut self.scratch, bound))
                    .map_err(|e| FormatError::Compress { codec: "lz4", reason: e.to_string() })?;
                out.extend_from_slice(&self.scratch[..n]);
            }
            (Codec::Zstd { .. }, Some(z)) => {
                // zstd writes from the start of a Vec, so compress into the
                // reused scratch and append the (small) result.
                self.scratch.clear();
                self.scratch.reserve(zstd::zstd_safe::compress_bound(input.len()));
                z.compress_to_buffer(input, &mut self.scratch)
                    .map_err(|e| FormatError::Compress { codec: "zstd", reason: e.to_string() })?;
                out.extend_from_slice(&self.scratch);
            }
            (codec, _) => {
                return Err(FormatError::Compress {
                    codec: codec.name(),
                    reason: "codec has no compressor".into(),
                })
            }
        }
        Ok(())
    }
}

/// The first `len` bytes of `buf`, which grows to at least `len` (only bytes
/// it never held are zero-filled): room for a call that overwrites it.
fn room(buf: &mut Vec<u8>, len: usize) -> &mut [u8] {
    if buf.len() < len {
        buf.resize(len, 0);
    }
    &mut buf[..len]
}

/// Reusable decompression state.
pub(crate) struct Decompressor {
    zstd: Option<zstd::bulk::Decompressor<'static>>,
}

impl std::fmt::Debug for Decompressor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Decompressor").finish_non_exhaustive()
    }
}

impl Decompressor {
    pub(crate) fn new() -> Self {
        Decompressor { zstd: None }
    }

    /// Inflates `stored` into `out` (cleared first), which ends up exactly
    /// `uncompressed_len` bytes long or the call fails.
    pub(crate) fn decompress(
        &mut self,
        codec: Codec,
        stored: &[u8],
        uncompressed_len: usize,
        out: &mut Vec<u8>,
    ) -> Result<(), FormatError> {
        debug_assert!(uncompressed_len <= BLOCK_UNCOMPRESSED_BYTES_MAX);
        match codec {
            Codec::None => {
                return Err(FormatError::decompress(codec, "stored blocks are not inflated"))
            }
            Codec::Lz4 => {
                // Refuse to allocate for a forged length the stored bytes
                // cannot possibly produce (the header check refuses it too).
                if uncompressed_len > codec.inflate_bound(stored.len()) {
                    return Err(FormatError::InconsistentLengths {
                        detail: format!(
                            "{} lz4 bytes cannot inflate to {uncompressed_len}",
                            stored.len()
                        ),
                    });
                }
                // Whatever `out` held is overwritten or cut off (only a
                // longer block than the last one zero-fills its extra bytes).
                let n = lz4_flex::block::decompress_into(stored, room(out, uncompressed_len))
                    .map_err(|e| FormatError::decompress(codec, e))?;
                out.truncate(n);
            }
            Codec::Zstd { .. } => {
                if self.zstd.is_none() {
                    self.zstd = Some(
                        zstd::bulk::Decompressor::new()
                            .map_err(|e| FormatError::decompress(codec, e))?,
                    );
                }
                let z = self
                    .zstd
                    .as_mut()
                    .ok_or_else(|| FormatError::decompress(codec, "decompressor unavailable"))?;
                // The frame header carries the content size (Sluice's encoder
                // always writes it); it must agree before anything is allocated.
                match zstd::zstd_safe::get_frame_content_size(stored) {
                    Ok(Some(n)) if n == uncompressed_len as u64 => {}
                    other => {
                        return Err(FormatError::InconsistentLengths {
                            detail: format!(
                                "zstd frame content size {other:?}, header says {uncompressed_len}"
                            ),
                        })
                    }
                }
                // A slice, not a Vec: zstd may write at most the announced
                // length, so a forged frame cannot grow the buffer.
                let n = z
                    .decompress_to_buffer(stored, room(out, uncompressed_len))
                    .map_err(|e| FormatError::decompress(codec, e))?;
                out.truncate(n);
            }
        }
        if out.len() != uncompressed_len {
            return Err(FormatError::InconsistentLengths {
                detail: format!(
                    "{} payload inflated to {} bytes, header says {uncompressed_len}",
                    codec.name(),
                    out.len()
                ),
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_bytes_round_trip() {
        for codec in [Codec::None, Codec::Lz4, Codec::Zstd { level: 1 }, Codec::Zstd { level: -7 }]
        {
            let (id, level) = codec.to_header();
            assert_eq!(Codec::from_header(id, level).ok(), Some(codec));
        }
        assert!(matches!(Codec::from_header(9, 0), Err(FormatError::UnknownCodec { id: 9 })));
        assert!(Codec::from_header(Codec::ID_LZ4, 1).is_err());
        assert!(Codec::from_header(Codec::ID_ZSTD, 0).is_err());
        assert!(Codec::from_header(Codec::ID_ZSTD, 23).is_err());
    }

    #[test]
    fn parse_names() {
        assert_eq!(Codec::parse("zstd-1"), Ok(Codec::Zstd { level: 1 }));
        assert_eq!(Codec::parse("lz4"), Ok(Codec::Lz4));
        assert!(Codec::parse("zstd-99").is_err());
        assert!(Codec::parse("gzip").is_err());
    }

    #[test]
    fn zstd_cannot_write_past_the_announced_length() {
        let input = vec![7u8; 10_000];
        let mut c = Compressor::new(Codec::Zstd { level: 3 }).expect("compressor");
        let mut stored = Vec::new();
        c.compress_append(&input, &mut stored).expect("compress");
        let mut d = Decompressor::new();
        let mut out = Vec::with_capacity(1 << 20);
        let err = d.decompress(Codec::Zstd { level: 3 }, &stored, 5_000, &mut out);
        assert!(err.is_err(), "inflating 10000 bytes into a 5000-byte promise must fail");
        assert!(out.len() <= 5_000);
        d.decompress(Codec::Zstd { level: 3 }, &stored, 10_000, &mut out).expect("inflate");
        assert_eq!(out, input);
    }

    #[test]
    fn implausible_lengths_are_refused_before_allocating() {
        let mut d = Decompressor::new();
        let mut out = Vec::new();
        let err = d.decompress(Codec::Lz4, &[0u8; 10], 1 << 20, &mut out).expect_err("lz4");
        assert!(matches!(err, FormatError::InconsistentLengths { .. }), "{err}");
        assert_eq!(out.capacity(), 0, "nothing may be allocated for a forged length");

        let mut c = Compressor::new(Codec::Zstd { level: 1 }).expect("compressor");
        let mut stored = Vec::new();
        c.compress_append(&[5u8; 1000], &mut stored).expect("compress");
        let err = d.decompress(Codec::Zstd { level: 1 }, &stored, 64 << 20, &mut out);
        assert!(matches!(err, Err(FormatError::InconsistentLengths { .. })), "{err:?}");
        assert_eq!(out.capacity(), 0);
    }

    #[test]
    fn the_compressors_stay_within_the_inflate_bound() {
        // The most compressible payloads (one byte repeated; the bounds are
        // per stored byte, so 16 MiB stands for any size), at every codec and
        // the zstd levels at both ends: what the encoder writes must pass the
        // header's bound, or a real block would be refused as forged.
        let input = vec![0u8; 16 << 20];
        for codec in [
            Codec::Lz4,
            Codec::Zstd { level: ZSTD_LEVEL_MIN },
            Codec::Zstd { level: 3 },
            Codec::Zstd { level: 19 },
        ] {
            let mut c = Compressor::new(codec).expect("compressor");
            let mut stored = Vec::new();
            c.compress_append(&input, &mut stored).expect("compress");
            assert!(
                input.len() <= codec.inflate_bound(stored.len()),
                "{codec}: {} bytes stored for {}, bound {}",
                stored.len(),
                input.len(),
                codec.inflate_bound(stored.len())
            );
            for small in [1usize, 2, 64, 4096] {
                let mut stored = Vec::new();
                c.compress_append(&input[..small], &mut stored).expect("compress");
                assert!(small <= codec.inflate_bound(stored.len()), "{codec}: {small} bytes");
            }
        }
    }
}
