package dev.sluice.spark.shim;

import org.apache.spark.MapOutputStatistics;
import org.apache.spark.Partitioner;
import org.apache.spark.rdd.RDD;
import org.apache.spark.serializer.Serializer;
import org.apache.spark.shuffle.ShuffleWriteProcessor;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.plans.physical.Partitioning;
import org.apache.spark.sql.execution.exchange.ShuffleExchangeExec$;
import org.apache.spark.sql.execution.metric.SQLMetric;
import scala.Tuple2;
import scala.reflect.ClassTag$;
import org.apache.spark.sql.catalyst.expressions.UnsafeRowChecksum$;
import org.apache.spark.sql.internal.SQLConf;
import org.apache.spark.ShuffleDependency;
import org.apache.spark.scheduler.MapStatus;
import org.apache.spark.scheduler.MapStatus$;
import org.apache.spark.shuffle.checksum.RowBasedChecksum;
import org.apache.spark.sql.catalyst.expressions.aggregate.Sum;
import org.apache.spark.sql.execution.ShufflePartitionSpec;
import org.apache.spark.sql.execution.adaptive.ShufflePartitionsUtil$;
import org.apache.spark.storage.BlockManagerId;
import scala.Option;
import scala.collection.immutable.Seq;

/**
 * What differs between the Spark lines Sluice builds for, Spark 4.1's side. Each line's source
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
        stats, specs, advisoryBytes, minPartitions, minPartitionBytes);
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
    SQLConf conf = SQLConf.get();
    boolean fullRetry = conf.shuffleChecksumMismatchFullRetryEnabled();
    int n = conf.shuffleOrderIndependentChecksumEnabled() || fullRetry
        ? partitioner.numPartitions()
        : 0;
    return new ShuffleDependency<>(
        rows,
        partitioner,
        serializer,
        Option.empty(),
        Option.empty(),
        false,
        writer,
        UnsafeRowChecksum$.MODULE$.createUnsafeRowChecksums(n),
        fullRetry,
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
