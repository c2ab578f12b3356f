//! Spark's shuffle checksums: one checksum per reduce partition of a map
//! output, over the partition's segment as written to the data file, kept
//! by Spark in `shuffle_S_M_0.checksum.ALGORITHM` beside the index. When a
//! fetched block turns out corrupt, Spark's fetcher sends the checksum of
//! the bytes it received to the block's owner, which recomputes the
//! checksum of the bytes on disk and compares the three: a mismatch
//! between the file's checksum and the recomputed one is a disk fault, the
//! other a network fault (`Cause` in Spark's `ShuffleChecksumHelper`).
//!
//! The algorithms are Spark's (`spark.shuffle.checksum.algorithm`) with the
//! values of `java.util.zip.Adler32`, `CRC32` and `CRC32C`, so the JVM's
//! recomputation agrees bit for bit. The codes crossing JNI are declared
//! here and in `ChecksumAlgorithm.java`; a test checks they agree.

use crc_fast::{CrcAlgorithm, Digest};

use crate::error::{EngineError, EngineResult};

/// No checksum file (`spark.shuffle.checksum.enabled=false`).
pub const CHECKSUM_NONE: i32 = 0;
/// `ADLER32`, Spark's default.
pub const CHECKSUM_ADLER32: i32 = 1;
/// `CRC32`.
pub const CHECKSUM_CRC32: i32 = 2;
/// `CRC32C`.
pub const CHECKSUM_CRC32C: i32 = 3;

/// Which checksum a map output's partitions get.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Algorithm {
    /// `java.util.zip.Adler32`.
    Adler32,
    /// `java.util.zip.CRC32` (CRC-32/ISO-HDLC).
    Crc32,
    /// `java.util.zip.CRC32C` (CRC-32/ISCSI).
    Crc32c,
}

impl Algorithm {
    /// The algorithm of a JNI code, `None` for [`CHECKSUM_NONE`].
    pub fn from_code(code: i32) -> EngineResult<Option<Algorithm>> {
        match code {
            CHECKSUM_NONE => Ok(None),
            CHECKSUM_ADLER32 => Ok(Some(Algorithm::Adler32)),
            CHECKSUM_CRC32 => Ok(Some(Algorithm::Crc32)),
            CHECKSUM_CRC32C => Ok(Some(Algorithm::Crc32c)),
            other => Err(EngineError::Argument(format!("unknown checksum algorithm code {other}"))),
        }
    }
}

/// A running checksum of one partition's segment.
pub enum Running {
    /// Adler-32.
    Adler32(adler2::Adler32),
    /// A CRC of the `crc-fast` crate.
    Crc(Box<Digest>),
}

impl std::fmt::Debug for Running {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Running").field(&self.value()).finish()
    }
}

impl Running {
    /// A checksum over no bytes yet.
    pub fn new(algorithm: Algorithm) -> Running {
        match algorithm {
            Algorithm::Adler32 => Running::Adler32(adler2::Adler32::new()),
            Algorithm::Crc32 => Running::Crc(Box::new(Digest::new(CrcAlgorithm::Crc32IsoHdlc))),
            Algorithm::Crc32c => Running::Crc(Box::new(Digest::new(CrcAlgorithm::Crc32Iscsi))),
        }
    }

    /// Adds `data`.
    pub fn update(&mut self, data: &[u8]) {
        match self {
            Running::Adler32(a) => a.write_slice(data),
            Running::Crc(d) => d.update(data),
        }
    }

    /// The checksum so far, as `java.util.zip.Checksum.getValue` gives it.
    pub fn value(&self) -> u64 {
        match self {
            Running::Adler32(a) => u64::from(a.checksum()),
            Running::Crc(d) => d.finalize() & 0xFFFF_FFFF,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(algorithm: Algorithm, data: &[u8]) -> u64 {
        let mut r = Running::new(algorithm);
        r.update(data);
        r.value()
    }

    #[test]
    fn check_values_are_the_jdk_ones() {
        // The catalogue check values of each algorithm over "123456789"
        // (java.util.zip gives the same).
        assert_eq!(of(Algorithm::Adler32, b"123456789"), 0x091E_01DE);
        assert_eq!(of(Algorithm::Crc32, b"123456789"), 0xCBF4_3926);
        assert_eq!(of(Algorithm::Crc32c, b"123456789"), 0xE306_9283);
        // Of no bytes: Adler32 starts at 1, the CRCs at 0.
        assert_eq!(of(Algorithm::Adler32, b""), 1);
        assert_eq!(of(Algorithm::Crc32, b""), 0);
    }

    #[test]
    fn pieces_equal_the_whole() {
        let data: Vec<u8> = (0..100_000u32).map(|i| (i * 7 + i / 13) as u8).collect();
        for a in [Algorithm::Adler32, Algorithm::Crc32, Algorithm::Crc32c] {
            let mut r = Running::new(a);
            for piece in data.chunks(4093) {
                r.update(piece);
            }
            assert_eq!(r.value(), of(a, &data), "{a:?}");
        }
    }

    #[test]
    fn codes_map_to_algorithms() {
        assert_eq!(Algorithm::from_code(CHECKSUM_NONE).ok(), Some(None));
        assert_eq!(Algorithm::from_code(CHECKSUM_ADLER32).ok(), Some(Some(Algorithm::Adler32)));
        assert_eq!(Algorithm::from_code(CHECKSUM_CRC32).ok(), Some(Some(Algorithm::Crc32)));
        assert_eq!(Algorithm::from_code(CHECKSUM_CRC32C).ok(), Some(Some(Algorithm::Crc32c)));
        assert!(Algorithm::from_code(4).is_err());
    }
}
