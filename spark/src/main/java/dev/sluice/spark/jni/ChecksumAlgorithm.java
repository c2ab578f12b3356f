package dev.sluice.spark.jni;

import java.util.Locale;
import org.apache.spark.SparkConf;

/**
 * Spark's shuffle checksum algorithms ({@code spark.shuffle.checksum.algorithm}) with the codes
 * that cross JNI to {@code mapCommit}; the native side declares the same codes in {@code
 * crates/sluice-engine/src/output/checksum.rs}, and a Rust test reads this file to check that they agree.
 * The engine computes each partition's checksum while it writes the data file; Spark writes them
 * to the map output's checksum file and uses them to tell a disk fault from a network fault when
 * a fetched block is corrupt.
 */
public enum ChecksumAlgorithm {
  NONE(0),
  ADLER32(1),
  CRC32(2),
  CRC32C(3);

  /** The code passed to the native side. */
  public final int code;

  ChecksumAlgorithm(int code) {
    this.code = code;
  }

  /**
   * The algorithm Spark's own writers would use under {@code conf}: none when {@code
   * spark.shuffle.checksum.enabled} is false; an unknown name is refused, as Spark refuses it.
   */
  public static ChecksumAlgorithm of(SparkConf conf) {
    if (!conf.getBoolean("spark.shuffle.checksum.enabled", true)) {
      return NONE;
    }
    String name = conf.get("spark.shuffle.checksum.algorithm", "ADLER32").toUpperCase(Locale.ROOT);
    try {
      ChecksumAlgorithm a = valueOf(name);
      if (a != NONE) {
        return a;
      }
    } catch (IllegalArgumentException e) {
      // Reported below.
    }
    throw new IllegalArgumentException(
        "spark.shuffle.checksum.algorithm=" + name + ": Sluice writes ADLER32, CRC32 or CRC32C");
  }
}
