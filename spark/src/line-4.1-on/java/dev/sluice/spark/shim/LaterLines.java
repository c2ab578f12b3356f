package dev.sluice.spark.shim;

import org.apache.spark.ShuffleDependency;
import org.apache.spark.scheduler.MapStatus;
import org.apache.spark.scheduler.MapStatus$;
import org.apache.spark.shuffle.checksum.RowBasedChecksum;
import org.apache.spark.sql.catalyst.expressions.UnsafeRowChecksum$;
import org.apache.spark.sql.catalyst.expressions.aggregate.Sum;
import org.apache.spark.sql.internal.SQLConf;
import org.apache.spark.storage.BlockManagerId;

/**
 * What Spark 4.1 and every later line share where 4.0 differs: the row checksum in a map status
 * (SPARK-51756), a shuffle dependency's row checksums, a {@code Sum}'s evaluation context. Each
 * line's {@code LineShim} from 4.1 on extends this class (its static methods are called as {@code
 * LineShim}'s); the folder {@code src/line-4.1-on/java} is added by the profiles of those lines.
 */
abstract class LaterLines {
  LaterLines() {}

  /** A map task's status with the row checksum Spark 4.1 added (SPARK-51756). */
  public static MapStatus mapStatus(
      BlockManagerId location, long[] lengths, long mapId, long rowChecksum) {
    return MapStatus$.MODULE$.apply(location, lengths, mapId, rowChecksum);
  }

  /** A sum's overflow mode (legacy, ANSI or TRY). */
  public static scala.Enumeration.Value evalMode(Sum sum) {
    return sum.evalContext().evalMode();
  }

  /**
   * The shuffle's row checksums (Spark's {@code RowBasedChecksum}, one per reduce partition),
   * empty when it has none.
   */
  public static Object[] rowChecksums(ShuffleDependency<?, ?, ?> dep) {
    return dep.rowBasedChecksums();
  }

  /** Adds one (key, value) pair to a checksum {@link #rowChecksums} gave. */
  public static void updateRowChecksum(Object checksum, Object key, Object value) {
    ((RowBasedChecksum) checksum).update(key, value);
  }

  /** A checksum's value, as Spark's writers read it ({@code RowBasedChecksum.getValue}). */
  public static long rowChecksumValue(Object checksum) {
    return ((RowBasedChecksum) checksum).getValue();
  }

  /** Whether the session asks for a full retry of a stage whose rerun changed its rows. */
  static boolean fullRetry() {
    return SQLConf.get().shuffleChecksumMismatchFullRetryEnabled();
  }

  /**
   * Spark SQL's row checksums for a shuffle of {@code partitions} partitions, as Spark's own
   * exchange makes them: one per partition where the session asks for them, none otherwise.
   */
  static RowBasedChecksum[] sessionRowChecksums(int partitions) {
    boolean on = SQLConf.get().shuffleOrderIndependentChecksumEnabled() || fullRetry();
    return UnsafeRowChecksum$.MODULE$.createUnsafeRowChecksums(on ? partitions : 0);
  }

  /**
   * Whether adaptive execution cuts the shuffles below a broadcast nested loop join or a cartesian
   * product to the minimum partition size rather than the advisory size (Spark 4.0 on, {@code
   * CoalesceShufflePartitions.isExplodingJoin}).
   */
  public static boolean smallerTargetsBelowExplodingJoins() {
    return true;
  }
}
