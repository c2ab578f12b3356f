package dev.sluice.spark.shuffle;

import dev.sluice.spark.shim.LineShim;
import org.apache.spark.ShuffleDependency;

/**
 * Spark's order-independent row checksum of one map attempt (Spark 4.1 and later; Spark 4.2
 * computes it by default for SQL shuffles), reported in the attempt's {@code MapStatus} as Spark's
 * own writers report it, so that the scheduler's check of a rerun (two attempts of one map
 * partition whose values differ wrote different rows) works with Sluice.
 *
 * <p>A shuffle dependency carries one {@code RowBasedChecksum} per reduce partition (empty when
 * the check is off). Each (key, value) pair the map task writes goes to its partition's checksum
 * before any map-side combine, as in Spark's writers; a partition's value is {@code xor ^
 * rotateLeft(sum, 27)} of its rows' checksums, and the attempt's is the partitions' values folded
 * as {@code acc * 31 + value} in partition order ({@code getAggregatedChecksumValue}).
 *
 * <p>Spark SQL's rows ({@code UnsafeRowChecksum}: a row's checksum is XXH64, seed 0, of its
 * bytes) are checksummed natively, in the pass that hands each buffer of rows to the engine
 * ({@code crates/sluice-jni/src/row_checksum.rs}), when the records the writer hands over are
 * the rows' serialized bytes; any other checksum class, or records of another form, are updated
 * here, per record, through Spark's own objects.
 */
final class RowChecksums {
  /** The class of Spark SQL's row checksum, which the engine computes. */
  static final String UNSAFE_ROW_CHECKSUM =
      "org.apache.spark.sql.catalyst.expressions.UnsafeRowChecksum";

  /**
   * The rotation that mixes a partition's SUM into its XOR (Spark's {@code ROTATE_POSITIONS};
   * {@code SUM_ROTATION_BITS} in the native side, which a test checks against this).
   */
  static final int SUM_ROTATION_BITS = 27;

  /** The factor of Spark's fold of the partitions' values into the attempt's. */
  static final long FOLD_FACTOR = 31L;

  private final Object[] checksums;

  /** Whether the engine computes the checksums (the Java objects stay untouched). */
  final boolean inEngine;

  private RowChecksums(Object[] checksums, boolean inEngine) {
    this.checksums = checksums;
    this.inEngine = inEngine;
  }

  /**
   * The attempt's checksums for {@code dep}, or null when it has none (Spark 4.0, or the check
   * off); {@code rowRecords} when every record the writer hands over is a row as Spark's {@code
   * UnsafeRowSerializer} writes it, so that the engine can compute Spark SQL's row checksums.
   */
  static RowChecksums of(ShuffleDependency<?, ?, ?> dep, boolean rowRecords) {
    Object[] cs = LineShim.rowChecksums(dep);
    if (cs == null || cs.length == 0) {
      return null;
    }
    boolean rows = rowRecords && cs.length == dep.partitioner().numPartitions();
    for (Object c : cs) {
      rows &= c != null && c.getClass().getName().equals(UNSAFE_ROW_CHECKSUM);
    }
    return new RowChecksums(cs, rows);
  }

  /** Adds one pair of partition {@code partition}, unless the engine computes the checksums. */
  void update(int partition, Object key, Object value) {
    if (!inEngine) {
      LineShim.updateRowChecksum(checksums[partition], key, value);
    }
  }

  /**
   * The attempt's value: from the engine's per-partition XOR and SUM ({@code engine}, each
   * partition's XOR then each one's SUM) where it computes them, else from Spark's objects.
   */
  long value(long[] engine) {
    int n = checksums.length;
    if (inEngine && (engine == null || engine.length != 2 * n)) {
      throw new IllegalStateException(
          "the engine's row checksums cover "
              + (engine == null ? 0 : engine.length / 2)
              + " partitions, the shuffle has "
              + n);
    }
    long acc = 0;
    for (int p = 0; p < n; p++) {
      long v =
          inEngine
              ? engine[p] ^ Long.rotateLeft(engine[n + p], SUM_ROTATION_BITS)
              : LineShim.rowChecksumValue(checksums[p]);
      acc = acc * FOLD_FACTOR + v;
    }
    return acc;
  }
}
