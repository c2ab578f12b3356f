package dev.sluice.spark.jni;

/**
 * How a map attempt's output is written ({@link SluiceNative#mapCommit}, {@link
 * SluiceNative#mapSpill}): the blocks' codec and level and Spark's per-partition checksum. One
 * typed object the native side reads by field ({@code sluice_jni::format::HostFormat::read}), not
 * a tuple of ints; a spill reads only the codec.
 */
public final class OutputFormat {
  /** {@link BlockCodec#code}; read natively. */
  final int codec;
  /** The zstd level (0 for the other codecs); read natively. */
  final int level;
  /** {@link ChecksumAlgorithm#code}; read natively. */
  final int checksum;

  private final ChecksumAlgorithm algorithm;

  public OutputFormat(BlockCodec codec, int level, ChecksumAlgorithm checksum) {
    this.codec = codec.code;
    this.level = level;
    this.checksum = checksum.code;
    this.algorithm = checksum;
  }

  /** Whether a commit returns each partition's checksum after its length. */
  public boolean checksums() {
    return algorithm != ChecksumAlgorithm.NONE;
  }
}
