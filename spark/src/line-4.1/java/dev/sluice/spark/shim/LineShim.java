package dev.sluice.spark.shim;

import org.apache.spark.MapOutputStatistics;
import org.apache.spark.Partitioner;
import org.apache.spark.ShuffleDependency;
import org.apache.spark.rdd.RDD;
import org.apache.spark.serializer.Serializer;
import org.apache.spark.shuffle.ShuffleWriteProcessor;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.plans.physical.Partitioning;
import org.apache.spark.sql.execution.ShufflePartitionSpec;
import org.apache.spark.sql.execution.SparkPlan;
import org.apache.spark.sql.execution.adaptive.Cost;
import org.apache.spark.sql.execution.adaptive.ShufflePartitionsUtil$;
import org.apache.spark.sql.execution.adaptive.SimpleCost;
import org.apache.spark.sql.execution.adaptive.SimpleCostEvaluator;
import org.apache.spark.sql.execution.exchange.ShuffleExchangeExec$;
import org.apache.spark.sql.execution.metric.SQLMetric;
import org.apache.spark.sql.internal.SQLConf;
import scala.Option;
import scala.Tuple2;
import scala.collection.immutable.Seq;
import scala.reflect.ClassTag$;

/**
 * What differs between the Spark lines Sluice builds for, Spark 4.1's side. Each line's source
 * folder ({@code src/line-L/java}, added by the Maven profile {@code spark-L}) has this class with
 * the same methods; the rest of Sluice calls only these where the lines differ. What 4.1 and the
 * lines after it share comes from {@link LaterLines}.
 */
public final class LineShim extends LaterLines {
  private LineShim() {}

  /**
   * Adaptive execution's own cost of {@code plan} ({@code SimpleCostEvaluator}) with {@code
   * shuffles} more shuffles: the shuffle count is the value's low 32 bits (with a forced skew
   * join, the negated count of skew joins is the high bits), so they add to the value.
   */
  public static Cost costWithShuffles(SparkPlan plan, boolean forceSkewJoin, long shuffles) {
    SimpleCost spark = (SimpleCost) new SimpleCostEvaluator(forceSkewJoin).evaluateCost(plan);
    return new SimpleCost(spark.value() + shuffles);
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
        minPartitionBytes);
  }

  /**
   * A Spark SQL shuffle of rows (key ignored) that Sluice plans itself, with what Spark's {@code
   * ShuffleExchangeExec.prepareShuffleDependency} gives its own: the row checksums the session
   * asks for.
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
        sessionRowChecksums(partitioner.numPartitions()),
        fullRetry(),
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
        input,
        output,
        partitioning,
        serializer,
        writeMetrics);
  }
}
