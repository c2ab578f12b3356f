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
 * What differs between the Spark lines Sluice builds for, Spark 4.0's side. Each line's source
 * folder ({@code src/line-L/java}, added by the Maven profile {@code spark-L}) has this class with
 * the same methods; the rest of Sluice calls only these where the lines differ.
 */
public final class LineShim {
  private LineShim() {}

  /** A map task's status; Spark 4.0 has no row checksum, so {@code rowChecksum} is unused. */
  public static MapStatus mapStatus(
      BlockManagerId location, long[] lengths, long mapId, long rowChecksum) {
    return MapStatus$.MODULE$.apply(location, lengths, mapId);
  }

  /** A sum's overflow mode (legacy, ANSI or TRY). */
  public static scala.Enumeration.Value evalMode(Sum sum) {
    return sum.evalMode();
  }

  /** Spark's coalescing of adaptive execution's shuffle partitions. */
  public static Seq<Seq<ShufflePartitionSpec>> coalescePartitions(
      Seq<Option<MapOutputStatistics>> stats,
      Seq<Option<Seq<ShufflePartitionSpec>>> specs,
      long advisoryBytes,
      int minPartitions,
      long minPartitionBytes) {
    return ShufflePartitionsUtil$.MODULE$.coalescePartitions(
        stats, specs, advisoryBytes, minPartitions, minPartitionBytes);
  }
}
