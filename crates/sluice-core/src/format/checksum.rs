//! CRC32C (Castagnoli; `CRC-32/ISCSI`), the checksum of every block.
//!
//! Computed by the `crc-fast` crate, which picks the widest carry-less
//! multiply folding the CPU offers at run time (VPCLMULQDQ with AVX-512,
//! PCLMULQDQ, or ARM PMULL), about twice the speed of a `crc32`
//! instruction loop here (`docs/benchmarks.md`, "Design measurements");
//! that matters because every byte a shuffle moves is checksummed once on
//! write and once on read. The value is the standard CRC32C (check value
//! `0xE3069283` for `"123456789"`), so other implementations (Java's
//! `java.util.zip.CRC32C`, Celeborn, ext4) agree.

use crc_fast::{CrcAlgorithm, Digest};

/// CRC32C of `data`.
#[inline]
pub fn crc32c(data: &[u8]) -> u32 {
    // The algorithm is 32 bits wide; the crate returns it in a u64.
    (crc_fast::checksum(CrcAlgorithm::Crc32Iscsi, data) & 0xFFFF_FFFF) as u32
}

/// An incremental CRC32C over data that arrives in pieces.
#[derive(Clone)]
pub struct Crc32c {
    digest: Digest,
}

impl std::fmt::Debug for Crc32c {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Crc32c").field("value", &self.value()).finish()
    }
}

impl Default for Crc32c {
    fn default() -> Self {
        Self::new()
    }
}

impl Crc32c {
    /// A checksum over no bytes yet.
    pub fn new() -> Self {
        Crc32c { digest: Digest::new(CrcAlgorithm::Crc32Iscsi) }
    }

    /// Adds `data` to the checksummed bytes.
    #[inline]
    pub fn update(&mut self, data: &[u8]) {
        self.digest.update(data);
    }

    /// The CRC32C of everything added so far.
    pub fn value(&self) -> u32 {
        (self.digest.finalize() & 0xFFFF_FFFF) as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn standard_check_values() {
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
        assert_eq!(crc32c(b""), 0);
        // RFC 3720 (iSCSI) B.4: 32 bytes of zeros and of 0xFF.
        assert_eq!(crc32c(&[0u8; 32]), 0x8A91_36AA);
        assert_eq!(crc32c(&[0xFFu8; 32]), 0x62A8_AB43);
    }

    #[test]
    fn incremental_matches_one_shot() {
        let data: Vec<u8> = (0..100_000u32).map(|i| (i * 31 % 251) as u8).collect();
        for split in [0, 1, 7, 4096, 65_537, 99_999] {
            let mut c = Crc32c::new();
            c.update(&data[..split]);
            c.update(&data[split..]);
            assert_eq!(c.value(), crc32c(&data), "split at {split}");
        }
    }
}
