package dev.sluice.spark.sql;

import dev.sluice.spark.api.BytesOrdering;
import dev.sluice.spark.shim.LineShim;
import dev.sluice.spark.shim.Scala;
import dev.sluice.spark.sort.RowSortKey;
import dev.sluice.spark.sort.SortedRowPartitioner;
import dev.sluice.spark.sort.SortedRowSerializer;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import org.apache.spark.MapOutputStatistics;
import org.apache.spark.RangePartitioner;
import org.apache.spark.ShuffleDependency;
import org.apache.spark.rdd.RDD;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.SortOrder;
import org.apache.spark.sql.catalyst.expressions.UnsafeProjection;
import org.apache.spark.sql.catalyst.expressions.UnsafeProjection$;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.sql.catalyst.plans.physical.Partitioning;
import org.apache.spark.sql.catalyst.plans.physical.RangePartitioning;
import org.apache.spark.sql.execution.ShuffledRowRDD;
import org.apache.spark.sql.execution.SparkPlan;
import org.apache.spark.sql.execution.UnsafeRowSerializer;
import org.apache.spark.sql.execution.exchange.ShuffleExchangeExec$;
import org.apache.spark.sql.execution.metric.SQLMetric;
import scala.Option;
import scala.Tuple2;
import scala.collection.immutable.Map;
import scala.collection.immutable.Seq;
import scala.reflect.ClassTag$;

/**
 * A global sort whose exchange is sorted by the Sluice engine: it stands for Spark SQL's {@code
 * SortExec(global)} over a range-partitioned {@code ShuffleExchangeExec} ({@link
 * NativeSortRule}). Its shuffle is range-partitioned as Spark SQL's (Spark's range partitioner,
 * sampled the same way, but over the rows' encoded sort keys; rows in the row serializer's
 * format); its serializer carries the {@link RowSortKey}, so that the map tasks sort runs of rows
 * natively and each reduce task merges them. Its output is range-partitioned and sorted, with no
 * sort in the reduce tasks. A sort by expressions reads them from columns its child appends after
 * the {@code width} columns of its output ({@link NativeSortRule}); the read drops them.
 */
public final class SluiceSortExchangeExec extends NativePlan {
  private static final long serialVersionUID = 1L;

  private final Seq<SortOrder> sortOrder;
  private final int numPartitions;
  private final SparkPlan child;
  private final RowSortKey key;
  /**
   * Whether the reads may be coalesced as adaptive execution coalesces ({@link AdaptiveCoalesce}).
   */
  private final boolean coalescable;
  /** Columns of the output: the child's first ones (the rest are computed sort keys). */
  private final int width;
  private final ExchangeMetrics metrics;
  /** The shuffled rows, made once (the driver side of the plan). */
  private transient RDD<InternalRow> shuffled;

  /** The ranges it read where it coalesced them ({@link AdaptiveCoalesce}), or 0. */
  private transient volatile int coalesced;

  public SluiceSortExchangeExec(
      Seq<SortOrder> sortOrder,
      int numPartitions,
      SparkPlan child,
      RowSortKey key,
      boolean coalescable,
      int width) {
    if (width < 1 || width > child.output().size()) {
      throw new IllegalArgumentException(
          "an output of " + width + " of the child's " + child.output().size() + " columns");
    }
    this.sortOrder = sortOrder;
    this.numPartitions = numPartitions;
    this.child = child;
    this.key = key;
    this.coalescable = coalescable;
    this.width = width;
    this.metrics = new ExchangeMetrics(sparkContext());
  }

  @Override
  public Seq<Attribute> output() {
    List<Attribute> out = new ArrayList<>(width);
    for (int i = 0; i < width; i++) {
      out.add(child.output().apply(i));
    }
    return Scala.seq(out);
  }

  @Override
  public Seq<SparkPlan> children() {
    return Scala.seq(List.of(child));
  }

  @Override
  public Partitioning outputPartitioning() {
    // Once read in coalesced ranges, as many as it read, as Spark's coalesced read reports them.
    int read = coalesced;
    return new RangePartitioning(sortOrder, read > 0 ? read : numPartitions);
  }

  @Override
  public Seq<SortOrder> outputOrdering() {
    return sortOrder;
  }

  @Override
  public Map<String, SQLMetric> metrics() {
    return metrics.all();
  }

  /**
   * The shuffled rows: the child's rows sampled for the ranges of their encoded keys (Spark's
   * range partitioner over the encoded keys, sampled as Spark SQL samples), then shuffled with
   * each row's range found and its key encoded once in the map writer. Equal nodes of one query
   * (a sorted CTE read twice) sample and shuffle once ({@link ShuffleReuse}), as Spark reuses its
   * own equal exchanges; each reads the shared shuffle.
   */
  @Override
  @SuppressWarnings("unchecked")
  public synchronized RDD<InternalRow> doExecute() {
    if (shuffled == null) {
      ShuffleReuse.Shuffle shuffle =
          ShuffleReuse.shared(
              this,
              List.of("global sort", canonicalized()),
              () -> (ShuffleDependency<Object, Object, Object>) (Object) dependency());
      ShuffleDependency<Object, InternalRow, InternalRow> dep =
          (ShuffleDependency<Object, InternalRow, InternalRow>) (Object) shuffle.dependency();
      QueryCleanup.track(this, dep.shuffleId());
      // The ranges the sample gave: fewer than asked when it holds fewer distinct keys, as under
      // Spark's own range exchange. The read covers exactly those: cut as adaptive execution
      // cuts where it may, else one task per range. The map stage runs on its own for the cut,
      // once for all the nodes that share it ({@link ShuffleReuse.Shuffle#materialize}).
      int ranged = dep.partitioner().numPartitions();
      Option<MapOutputStatistics> stats =
          coalescable && conf().coalesceShufflePartitionsEnabled() && ranged > 1
              ? shuffle.materialize()
              : Option.empty();
      int[] bounds =
          stats.isDefined()
              ? AdaptiveCoalesce.bounds(conf(), sparkContext(), stats.get(), ranged)
              : null;
      RDD<InternalRow> read;
      if (bounds != null && bounds.length - 1 < ranged) {
        read = new ShuffledRowRDD(dep, metrics.read, AdaptiveCoalesce.specs(bounds));
        coalesced = bounds.length - 1;
      } else {
        read = new ShuffledRowRDD(dep, metrics.read);
      }
      shuffled = width < child.output().size() ? dropComputedKeys(read) : read;
    }
    return shuffled;
  }

  /** The range-partitioned shuffle of the child's rows, keyed by their encoded sort keys. */
  private ShuffleDependency<Object, InternalRow, InternalRow> dependency() {
    RDD<InternalRow> input = child.execute();
    RowSortKey k = key;
    RDD<Tuple2<byte[], Object>> keys =
        input.toJavaRDD().map(r -> new Tuple2<byte[], Object>(k.encode((UnsafeRow) r), null)).rdd();
    RangePartitioner<byte[], Object> ranges =
        new RangePartitioner<>(
            numPartitions,
            keys,
            true,
            conf().rangeExchangeSampleSizePerPartition(),
            BytesOrdering.INSTANCE,
            ClassTag$.MODULE$.apply(byte[].class));
    RDD<Tuple2<Object, InternalRow>> rows =
        input.toJavaRDD().map(r -> new Tuple2<Object, InternalRow>(null, r)).rdd();
    SortedRowSerializer serializer =
        new SortedRowSerializer(
            new UnsafeRowSerializer(child.output().size(), metrics.dataSize),
            child.output().size(),
            key);
    return LineShim.rowDependency(
        rows,
        new SortedRowPartitioner(ranges),
        serializer,
        ShuffleExchangeExec$.MODULE$.createShuffleWriteProcessor(metrics.write));
  }

  /** The rows without the sort key columns the child computed after the output's. */
  private RDD<InternalRow> dropComputedKeys(RDD<InternalRow> rows) {
    Seq<Expression> kept = Scala.map(output(), a -> (Expression) a);
    Seq<Attribute> all = Scala.seq(child.output());
    return rows.toJavaRDD()
        .mapPartitions(
            (Iterator<InternalRow> it) -> {
              UnsafeProjection project = UnsafeProjection$.MODULE$.create(kept, all);
              return SluiceRule.mapped(it, r -> (InternalRow) project.apply(r));
            })
        .rdd();
  }

  @Override
  protected SparkPlan withChildren(List<SparkPlan> newChildren) {
    return new SluiceSortExchangeExec(
        sortOrder, numPartitions, newChildren.get(0), key, coalescable, width);
  }

  @Override
  public String nodeName() {
    return "SluiceSortExchange";
  }

  // The plan node as a product (constructor arguments), which Spark's tree operations use to
  // copy and print it.

  @Override
  public int productArity() {
    return 6;
  }

  @Override
  public Object productElement(int n) {
    switch (n) {
      case 0:
        return sortOrder;
      case 1:
        return numPartitions;
      case 2:
        return child;
      case 3:
        return key;
      case 4:
        return coalescable;
      case 5:
        return width;
      default:
        throw new IndexOutOfBoundsException(n);
    }
  }

  @Override
  public boolean canEqual(Object that) {
    return that instanceof SluiceSortExchangeExec;
  }

  public SparkPlan child() {
    return child;
  }
}
