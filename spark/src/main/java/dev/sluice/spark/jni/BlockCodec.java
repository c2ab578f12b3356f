package dev.sluice.spark.jni;

/**
 * The codecs of Sluice's blocks with the block format's codec ids ({@code
 * sluice_core::format::Codec::ID_*}); {@code crates/sluice-jni/tests/contract.rs} checks both
 * sides.
 */
public enum BlockCodec {
  NONE(0),
  LZ4(1),
  ZSTD(2);

  /** The block format's codec id. */
  public final int code;

  BlockCodec(int code) {
    this.code = code;
  }
}
