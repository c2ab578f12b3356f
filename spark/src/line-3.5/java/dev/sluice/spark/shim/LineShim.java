package dev.sluice.spark.shim;

import org.apache.spark.MapOutputStatistics;
import org.apache.spark.sql.execution.ShufflePartitionSpec;
import org.apache.spark.sql.execution.adaptive.ShufflePartitionsUtil$;
import scala.Option;
import scala.collection.immutable.Seq;

/**
 * What differs between the Spark lines Sluice builds for, Spark 3.5's side. Each line's source
 * folder ({@code src/line-L/java}, added by the Maven profile {@code spark-L}) has this class with
 * the same methods; the rest of Sluice calls only these where the lines differ. What 3.5 shares
 * with the other line before 4.1 comes from {@link EarlierLines}.
 */
public final class LineShim extends EarlierLines {
  private LineShim() {}

  /** Spark's coalescing of adaptive execution's shuffle partitions. */
  @SuppressWarnings({"unchecked", "rawtypes"})
  public static Seq<Seq<ShufflePartitionSpec>> coalescePartitions(
      Seq<Option<MapOutputStatistics>> stats,
      Seq<Option<Seq<ShufflePartitionSpec>>> specs,
      long advisoryBytes,
      int minPartitions,
      long minPartitionBytes) {
    // Scala 2.12's sequences: Spark 3.5 takes and gives scala.collection.Seq.
    scala.collection.Seq<scala.collection.Seq<ShufflePartitionSpec>> coalesced =
        ShufflePartitionsUtil$.MODULE$.coalescePartitions(
            (scala.collection.Seq) stats,
            (scala.collection.Seq) specs,
            advisoryBytes,
            minPartitions,
            minPartitionBytes);
    return Scala.map(coalesced, Scala::seq);
  }

  /**
   * Whether adaptive execution cuts the shuffles below a broadcast nested loop join or a cartesian
   * product to the minimum partition size rather than the advisory size (Spark 4.0 on; not 3.5).
   */
  public static boolean smallerTargetsBelowExplodingJoins() {
    return false;
  }
}
