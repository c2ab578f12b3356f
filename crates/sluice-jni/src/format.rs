//! How a host has a map attempt's output written: Java's `OutputFormat`
//! (block codec and level, Spark's per-partition checksum), read by field
//! so the two sides share one typed spec rather than a tuple of ints.

use jni::objects::JObject;
use jni::JNIEnv;
use sluice_core::format::Codec;
use sluice_engine::output::checksum::Algorithm;

use crate::error::{BridgeError, BridgeResult};
use crate::fields;

/// A Java `OutputFormat` as its fields hold it (codes not yet checked).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostFormat {
    /// The block format's codec id (`Codec::ID_*`); Java's `BlockCodec.code`.
    pub codec: i32,
    /// The zstd level, else 0.
    pub level: i32,
    /// Spark's checksum algorithm code (`sluice_engine::output::checksum`'s
    /// `CHECKSUM_*`); Java's `ChecksumAlgorithm.code`.
    pub checksum: i32,
}

impl HostFormat {
    /// Reads a Java `OutputFormat`; a null object is an argument error.
    pub fn read(env: &mut JNIEnv<'_>, format: &JObject<'_>) -> BridgeResult<Self> {
        let [codec, level, checksum] =
            fields::ints(env, format, "OutputFormat", ["codec", "level", "checksum"])?;
        Ok(HostFormat { codec, level, checksum })
    }

    /// The blocks' codec; an unknown id or a zstd level out of range is an
    /// argument error.
    pub fn codec(self) -> BridgeResult<Codec> {
        let level = self.level;
        match u8::try_from(self.codec) {
            Ok(Codec::ID_NONE) => Ok(Codec::None),
            Ok(Codec::ID_LZ4) => Ok(Codec::Lz4),
            Ok(Codec::ID_ZSTD) => Codec::zstd(level)
                .map_err(|e| BridgeError::Argument(format!("zstd level {level}: {e}"))),
            _ => Err(BridgeError::Argument(format!("unknown codec id {}", self.codec))),
        }
    }

    /// Spark's checksum algorithm, none for [`CHECKSUM_NONE`]; an unknown
    /// code is an error.
    ///
    /// [`CHECKSUM_NONE`]: sluice_engine::output::checksum::CHECKSUM_NONE
    pub fn checksum(self) -> BridgeResult<Option<Algorithm>> {
        Ok(Algorithm::from_code(self.checksum)?)
    }
}
