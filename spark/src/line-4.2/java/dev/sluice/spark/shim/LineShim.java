package dev.sluice.spark.shim;

import org.apache.spark.MapOutputStatistics;
import org.apache.spark.scheduler.MapStatus;
import org.apache.spark.scheduler.MapStatus$;
import org.apache.spark.sql.catalyst.expressions.aggregate.Sum;
import org.apache.spark.sql.execution.ShufflePartitionSpec;
import org.apache.spark.sql.execution.adaptive.ShufflePartitionsUtil$;
import org.apache.spark.storage.BlockManagerId;
import scala.Option;
import scala.collection.immutable.Seq;

/**
 * What differs between the Spark lines Sluice builds for, Spark 4.2's side. Each line's source
 * folder ({@code src/line-L/java}, added by the Maven profile {@code spark-L}) has this class with
 * the same methods; the rest of Sluice calls only these where the lines differ.
 */
public final class LineShim {
  private LineShim() {}

  /** A map task's status with the row checksum Spark 4.1 added (SPARK-51756). */
  public static MapStatus mapStatus(
      BlockManagerId location, long[] lengths, long mapId, long rowChecksum) {
    return MapStatus$.MODULE$.apply(location, lengths, mapId, rowChecksum);
  }

  /** A sum's overflow mode (legacy, ANSI or TRY). */
  public static scala.Enumeration.Value evalMode(Sum sum) {
    return sum.evalContext().evalMode();
  }

  /** Spark's coalescing of adaptive execution's shuffle partitions. */
  public static Seq<Seq<ShufflePartitionSpec>> coalescePartitions(
      Seq<Option<MapOutputStatistics>> stats,
      Seq<Option<Seq<ShufflePartitionSpec>>> specs,
      long advisoryBytes,
      int minPartitions,
      long minPartitionBytes) {
    return ShufflePartitionsUtil$.MODULE$.coalescePartitions(
        stats,
        specs,
        advisoryBytes,
        minPartitions,
        minPartitionBytes,
        ShufflePartitionsUtil$.MODULE$.coalescePartitions$default$6());
  }
}
