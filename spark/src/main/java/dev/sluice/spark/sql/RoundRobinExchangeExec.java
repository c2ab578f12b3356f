package dev.sluice.spark.sql;

import dev.sluice.spark.shim.LineShim;
import dev.sluice.spark.shim.Scala;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.spark.ShuffleDependency;
import org.apache.spark.rdd.DeterministicLevel;
import org.apache.spark.rdd.RDD;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.plans.physical.Partitioning;
import org.apache.spark.sql.catalyst.plans.physical.RoundRobinPartitioning;
import org.apache.spark.sql.execution.ShuffledRowRDD;
import org.apache.spark.sql.execution.SparkPlan;
import org.apache.spark.sql.execution.UnsafeRowSerializer;
import org.apache.spark.sql.execution.metric.SQLMetric;
import org.apache.spark.sql.internal.SQLConf;
import scala.collection.immutable.Map;
import scala.collection.immutable.Seq;

/**
 * Spark SQL's {@code repartition(n)} (a round-robin exchange) without Spark's local sort where the
 * sort cannot change the result ({@link RoundRobinRule}).
 *
 * <p>Round robin deals a map task's rows to the partitions in the order the task reads them. If a
 * retried task read its rows in another order, rows would land in other partitions than in the
 * first attempt, and reduce tasks that had read the first attempt's output would lose or repeat
 * rows; Spark SQL therefore sorts every map task's rows (by hash, then bytes) before dealing them
 * ({@code spark.sql.execution.sortBeforeRepartition}, on by default), whatever the input. That
 * sort is most of a repartition's map-side work, and it buys nothing when every attempt reads its
 * rows in the same order. Spark's {@code DETERMINATE} level does not prove that (every root RDD
 * is {@code DETERMINATE} unless it says otherwise, a Python RDD whose rows come in another order
 * on each attempt too), so the input plan must pass {@link StableOrder}'s allow-list (ranges, file
 * scans and cached tables of those, under deterministic projections and filters) and its RDD be
 * {@code DETERMINATE}.
 * This node builds Spark's own shuffle dependency ({@code
 * ShuffleExchangeExec.prepareShuffleDependency}: partitioner, serializer, write metrics), with the
 * sort off when both hold; Spark then builds the dealing as an order-sensitive map whose output
 * stays {@code DETERMINATE}, so the scheduler retries it as any
 * determinate stage. Any other input keeps Spark's sort. The node is not an adaptive query stage
 * (as the other native nodes): its map stage runs as a parent stage of the job that reads it,
 * which is how a user-set partition count ({@code REPARTITION_BY_NUM}, the only origin the rule
 * takes) is read under adaptive execution anyway.
 */
public final class RoundRobinExchangeExec extends NativePlan {
  private static final long serialVersionUID = 1L;
  private static final AtomicLong UNSORTED = new AtomicLong();
  private static final AtomicLong SORTED = new AtomicLong();

  private final int numPartitions;
  private final SparkPlan child;
  private final ExchangeMetrics metrics;
  /** The shuffled rows, made once (the driver side of the plan). */
  private transient RDD<InternalRow> shuffled;

  public RoundRobinExchangeExec(int numPartitions, SparkPlan child) {
    this.numPartitions = numPartitions;
    this.child = child;
    this.metrics = new ExchangeMetrics(sparkContext());
  }

  /** Round-robin shuffles this JVM prepared without Spark's sort (input order proven stable). */
  public static long unsortedShuffles() {
    return UNSORTED.get();
  }

  /** Round-robin shuffles this node prepared with Spark's sort (input order not proven). */
  public static long sortedShuffles() {
    return SORTED.get();
  }

  @Override
  public Seq<Attribute> output() {
    return Scala.seq(child.output());
  }

  @Override
  public Seq<SparkPlan> children() {
    return Scala.seq(List.of(child));
  }

  @Override
  public Partitioning outputPartitioning() {
    return new RoundRobinPartitioning(numPartitions);
  }

  @Override
  public Map<String, SQLMetric> metrics() {
    return metrics.all();
  }

  /**
   * The rows dealt, the shuffle made once per query for equal nodes ({@link ShuffleReuse}): a
   * repartitioned CTE that a query reads twice, or a multi-table insert from one repartitioned
   * source, deals its rows once, as Spark's reuse of its own equal exchanges does.
   */
  @Override
  @SuppressWarnings("unchecked")
  public synchronized RDD<InternalRow> doExecute() {
    if (shuffled == null) {
      ShuffleDependency<?, ?, ?> dep =
          ShuffleReuse.shared(
                  this,
                  List.of("round robin", numPartitions, child.canonicalized()),
                  () -> (ShuffleDependency<Object, Object, Object>) (Object) dependency())
              .dependency();
      QueryCleanup.track(this, dep.shuffleId());
      shuffled =
          new ShuffledRowRDD(
              (ShuffleDependency<Object, InternalRow, InternalRow>) dep, metrics.read);
    }
    return shuffled;
  }

  /** Spark's dependency of the exchange, with the sort off where the input order is stable. */
  private ShuffleDependency<Object, InternalRow, InternalRow> dependency() {
    RDD<InternalRow> input = child.execute();
    boolean determinate =
        StableOrder.proven(child)
            && input.outputDeterministicLevel() == DeterministicLevel.DETERMINATE();
    // Spark reads the setting while it builds the dependency, on this thread: the session's
    // settings with the sort off, for this one call.
    SQLConf settings = SQLConf.get().clone();
    if (determinate) {
      settings.setConfString(SQLConf.SORT_BEFORE_REPARTITION().key(), "false");
    }
    ShuffleDependency<Object, InternalRow, InternalRow> dep =
        SQLConf.withExistingConf(
            settings,
            () ->
                LineShim.prepareShuffleDependency(
                    input,
                    Scala.seq(child.output()),
                    outputPartitioning(),
                    new UnsafeRowSerializer(child.output().size(), metrics.dataSize),
                    metrics.write));
    (determinate ? UNSORTED : SORTED).incrementAndGet();
    return dep;
  }

  @Override
  protected SparkPlan withChildren(List<SparkPlan> newChildren) {
    return new RoundRobinExchangeExec(numPartitions, newChildren.get(0));
  }

  @Override
  public String nodeName() {
    return "SluiceRoundRobinExchange";
  }

  // The plan node as a product (constructor arguments), which Spark's tree operations use to
  // copy and print it.

  @Override
  public int productArity() {
    return 2;
  }

  @Override
  public Object productElement(int n) {
    switch (n) {
      case 0:
        return numPartitions;
      case 1:
        return child;
      default:
        throw new IndexOutOfBoundsException(n);
    }
  }

  @Override
  public boolean canEqual(Object that) {
    return that instanceof RoundRobinExchangeExec;
  }

  public SparkPlan child() {
    return child;
  }
}
