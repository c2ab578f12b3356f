package dev.sluice.spark.shim;

import org.apache.spark.MapOutputStatistics;
import org.apache.spark.Partitioner;
import org.apache.spark.ShuffleDependency;
import org.apache.spark.rdd.RDD;
import org.apache.spark.scheduler.MapStatus;
import org.apache.spark.scheduler.MapStatus$;
import org.apache.spark.serializer.Serializer;
import org.apache.spark.shuffle.ShuffleWriteProcessor;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.expressions.aggregate.Sum;
import org.apache.spark.sql.catalyst.plans.physical.Partitioning;
import org.apache.spark.sql.execution.ShufflePartitionSpec;
import org.apache.spark.sql.execution.adaptive.ShufflePartitionsUtil$;
import org.apache.spark.sql.execution.exchange.ShuffleExchangeExec$;
import org.apache.spark.sql.execution.metric.SQLMetric;
import org.apache.spark.storage.BlockManagerId;
import scala.Option;
import scala.Tuple2;
import scala.collection.immutable.Seq;
import scala.reflect.ClassTag$;

/**
 * What differs between the Spark lines Sluice builds for, Spark 3.5's side. Each line's source
 * folder ({@code src/line-L/java}, added by the Maven profile {@code spark-L}) has this class with
 * the same methods; the rest of Sluice calls only these where the lines differ.
 */
public final class LineShim {
  private LineShim() {}

  /** A map task's status; Spark 3.5 has no row checksum, so {@code rowChecksum} is unused. */
  public static MapStatus mapStatus(
      BlockManagerId location, long[] lengths, long mapId, long rowChecksum) {
    return MapStatus$.MODULE$.apply(location, lengths, mapId);
  }

  /** A sum's overflow mode (legacy, ANSI or TRY). */
  public static scala.Enumeration.Value evalMode(Sum sum) {
    return sum.evalMode();
  }

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

  /** Spark 3.5 has no row checksums (Spark 4.1 added them): none. */
  public static Object[] rowChecksums(ShuffleDependency<?, ?, ?> dep) {
    return new Object[0];
  }

  /** Never called on 3.5 ({@link #rowChecksums} gives none). */
  public static void updateRowChecksum(Object checksum, Object key, Object value) {
    throw new UnsupportedOperationException("Spark 3.5 has no row checksums");
  }

  /** Never called on 3.5 ({@link #rowChecksums} gives none). */
  public static long rowChecksumValue(Object checksum) {
    throw new UnsupportedOperationException("Spark 3.5 has no row checksums");
  }

  /**
   * A Spark SQL shuffle of rows (key ignored) that Sluice plans itself, with what Spark's {@code
   * ShuffleExchangeExec.prepareShuffleDependency} gives its own: the row checksums of Spark 4.1
   * and later where the session asks for them.
   */
  public static ShuffleDependency<Object, InternalRow, InternalRow> rowDependency(
      RDD<Tuple2<Object, InternalRow>> rows,
      Partitioner partitioner,
      Serializer serializer,
      ShuffleWriteProcessor writer) {
    return new ShuffleDependency<>(
        rows,
        partitioner,
        serializer,
        Option.empty(),
        Option.empty(),
        false,
        writer,
        ClassTag$.MODULE$.Any(),
        ClassTag$.MODULE$.apply(InternalRow.class),
        ClassTag$.MODULE$.apply(InternalRow.class));
  }

  /**
   * Spark SQL's shuffle dependency for {@code partitioning} of {@code input}'s rows, as Spark's own
   * exchange builds it ({@code ShuffleExchangeExec.prepareShuffleDependency}).
   */
  public static ShuffleDependency<Object, InternalRow, InternalRow> prepareShuffleDependency(
      RDD<InternalRow> input,
      Seq<Attribute> output,
      Partitioning partitioning,
      Serializer serializer,
      scala.collection.immutable.Map<String, SQLMetric> writeMetrics) {
    return ShuffleExchangeExec$.MODULE$.prepareShuffleDependency(
        input, output, partitioning, serializer, writeMetrics);
  }
}
