package dev.sluice.spark.shim;

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
import org.apache.spark.sql.execution.SparkPlan;
import org.apache.spark.sql.execution.adaptive.Cost;
import org.apache.spark.sql.execution.adaptive.SimpleCost;
import org.apache.spark.sql.execution.adaptive.SimpleCostEvaluator;
import org.apache.spark.sql.execution.exchange.ShuffleExchangeExec$;
import org.apache.spark.sql.execution.metric.SQLMetric;
import org.apache.spark.storage.BlockManagerId;
import scala.Option;
import scala.Tuple2;
import scala.collection.immutable.Seq;
import scala.reflect.ClassTag$;

/**
 * What Spark 3.5 and 4.0 share where 4.1 and later differ: no row checksum in a map status or a
 * shuffle dependency (SPARK-51756 added them in 4.1), a {@code Sum}'s overflow mode on the sum
 * itself, the shuffle dependency's constructor without checksums. Each of those lines' {@code
 * LineShim} extends this class (its static methods are called as {@code LineShim}'s); the folder
 * {@code src/line-before-4.1/java} is added by their profiles.
 */
abstract class EarlierLines {
  EarlierLines() {}

  /**
   * Adaptive execution's own cost of {@code plan} ({@code SimpleCostEvaluator}) with {@code
   * shuffles} more shuffles: the shuffle count is the value's low 32 bits (with a forced skew
   * join, the negated count of skew joins is the high bits), so they add to the value.
   */
  public static Cost costWithShuffles(SparkPlan plan, boolean forceSkewJoin, long shuffles) {
    SimpleCost spark = (SimpleCost) new SimpleCostEvaluator(forceSkewJoin).evaluateCost(plan);
    return new SimpleCost(spark.value() + shuffles);
  }

  /** A map task's status, without a row checksum: {@code rowChecksum} is unused. */
  public static MapStatus mapStatus(
      BlockManagerId location, long[] lengths, long mapId, long rowChecksum) {
    return MapStatus$.MODULE$.apply(location, lengths, mapId);
  }

  /** A sum's overflow mode (legacy, ANSI or TRY). */
  public static scala.Enumeration.Value evalMode(Sum sum) {
    return sum.evalMode();
  }

  /** Spark 3.5 and 4.0 have no row checksums (4.1 added them): none. */
  public static Object[] rowChecksums(ShuffleDependency<?, ?, ?> dep) {
    return new Object[0];
  }

  /** Never called before 4.1 ({@link #rowChecksums} gives none). */
  public static void updateRowChecksum(Object checksum, Object key, Object value) {
    throw new UnsupportedOperationException("no row checksums before Spark 4.1");
  }

  /** Never called before 4.1 ({@link #rowChecksums} gives none). */
  public static long rowChecksumValue(Object checksum) {
    throw new UnsupportedOperationException("no row checksums before Spark 4.1");
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
