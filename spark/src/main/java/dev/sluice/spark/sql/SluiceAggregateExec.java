package dev.sluice.spark.sql;

import dev.sluice.spark.api.Agg;
import dev.sluice.spark.ops.SqlAggregates;
import dev.sluice.spark.shim.Scala;
import dev.sluice.spark.sort.RangeShuffledRDD;
import java.io.Serializable;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Iterator;
import java.util.List;
import java.util.Objects;
import org.apache.spark.MapOutputStatistics;
import org.apache.spark.ShuffleDependency;
import org.apache.spark.api.java.function.FlatMapFunction;
import org.apache.spark.rdd.RDD;
import org.apache.spark.shuffle.ShuffleWriteProcessor;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.expressions.AttributeSet;
import org.apache.spark.sql.catalyst.expressions.AttributeSet$;
import org.apache.spark.sql.catalyst.expressions.ExprId$;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.catalyst.expressions.NamedExpression;
import org.apache.spark.sql.catalyst.expressions.UnsafeProjection;
import org.apache.spark.sql.catalyst.expressions.UnsafeProjection$;
import org.apache.spark.sql.catalyst.plans.physical.HashPartitioning;
import org.apache.spark.sql.catalyst.plans.physical.Partitioning;
import org.apache.spark.sql.catalyst.plans.physical.PartitioningCollection;
import org.apache.spark.sql.catalyst.plans.physical.UnknownPartitioning;
import org.apache.spark.sql.execution.SparkPlan;
import org.apache.spark.sql.execution.exchange.ShuffleExchangeExec$;
import org.apache.spark.sql.execution.metric.SQLMetric;
import org.apache.spark.unsafe.types.UTF8String;
import scala.Option;
import scala.Tuple2;
import scala.collection.immutable.Seq;
import scala.runtime.AbstractPartialFunction;

/**
 * A Spark SQL aggregate run whole by the Sluice engine: it stands for a final {@code
 * HashAggregateExec} over a hash-partitioned {@code ShuffleExchangeExec} over a partial {@code
 * HashAggregateExec} ({@link NativeAggregateRule}). Map tasks take each row's key and value into
 * the engine's buffers (after a small first level of aggregation that switches itself off where
 * it does not pay, {@link PreAggregator}); the engine aggregates them partially per destination
 * on its offload
 * threads and exactly in each reduce task, which turns each (key, result) into the final
 * aggregate's output row. The partitions are placed as Spark SQL's hash partitioning of the key
 * places them, so the node keeps the final aggregate's output partitioning.
 *
 * <p>Two copies of one native aggregate (a CTE a query uses twice, TPC-DS q23) compare equal once
 * their expression ids are normalized ({@link NativePlan}; the lanes' form by {@link
 * LaneAggregate#equals}), so an exchange of Spark's above them runs its map stage once, as above
 * two equal aggregates of Spark's own.
 */
public final class SluiceAggregateExec extends NativePlan {
  private static final long serialVersionUID = 1L;

  /** What the map side reads from each row and what the engine computes. */
  public record Spec(
      int keyOrdinal, int keyKind, int valueOrdinal, int valueType, Agg agg, boolean exact)
      implements Serializable {}

  /** The one-key form's (group, result) attributes its output is computed from; empty for lanes. */
  private final Seq<Attribute> inputs;
  private final Seq<NamedExpression> resultExpressions;
  private final int numPartitions;
  private final Partitioning partitioning;
  private final SparkPlan child;
  /** What the engine computes: a {@link Spec} (one key, one function), a {@link LaneAggregate}. */
  private final Serializable form;
  /** Whether the reads may be coalesced as adaptive execution does ({@link AdaptiveCoalesce}). */
  private final boolean coalescable;
  /** The reads a join's coalescing chose ({@link JoinCoalesce}), or {@link Cut#NONE}. */
  private final Cut cut;

  /**
   * Reads chosen for the node by a join's coalescing: the bounds of its ranges ({@code [0, ...,
   * numPartitions]}) and the {@link ShuffleReuse} key of the shuffle whose statistics chose them,
   * which the node then reads (its map stage ran on a copy of the child prepared for execution,
   * which the node's own child, prepared later by adaptive execution, need not equal exactly).
   */
  static final class Cut implements Serializable {
    private static final long serialVersionUID = 1L;
    static final Cut NONE = new Cut(List.of(), null);

    final List<Integer> bounds;
    /** On the driver only (a plan: not sent with tasks). */
    final transient Object key;

    Cut(List<Integer> bounds, Object key) {
      this.bounds = bounds;
      this.key = key;
    }

    @Override
    public boolean equals(Object o) {
      return o instanceof Cut c && c.bounds.equals(bounds) && Objects.equals(c.key, key);
    }

    @Override
    public int hashCode() {
      return bounds.hashCode();
    }

    @Override
    public String toString() {
      return bounds.isEmpty() ? "" : (bounds.size() - 1) + " ranges";
    }
  }

  /** The aggregated rows, made once (on the driver; later actions reuse the shuffle). */
  private transient RDD<InternalRow> aggregated;

  /**
   * The node's shuffle metrics, as those of the exchange it stands for (made on first use: Spark's
   * tree operations make many copies of a node that never run; a copy of this node shares them):
   * the writes of the shuffle it made (an equal node's, where it reads that one's, {@link
   * ShuffleReuse}) and its own reads.
   */
  private transient volatile ExchangeMetrics metrics;

  /** Whether this copy's made attributes are bound by position ({@link #doCanonicalize}). */
  private transient boolean madeBound;

  /**
   * The ranges this node read in where it cut them by its own statistics ({@link
   * AdaptiveCoalesce}), or null: its partitioning from then on, as Spark's coalesced read reports
   * one (a cached query's plan is read by later queries with the partitioning it reports).
   */
  private transient volatile List<Integer> coalesced;

  /** The one-key, one-function form, its output computed from {@code group} and {@code result}. */
  public SluiceAggregateExec(
      Attribute group,
      Attribute result,
      Seq<NamedExpression> resultExpressions,
      int numPartitions,
      Partitioning partitioning,
      SparkPlan child,
      Spec spec,
      boolean coalescable) {
    this(
        Scala.seq(List.of(group, result)),
        resultExpressions,
        numPartitions,
        partitioning,
        child,
        spec,
        coalescable,
        Cut.NONE);
  }

  /**
   * The node as its product elements give it (Spark's tree operations copy it through this one):
   * {@code form} is a {@link Spec} with {@code inputs} its (group, result), or a {@link
   * LaneAggregate} with no inputs.
   */
  public SluiceAggregateExec(
      Seq<Attribute> inputs,
      Seq<NamedExpression> resultExpressions,
      int numPartitions,
      Partitioning partitioning,
      SparkPlan child,
      Serializable form,
      boolean coalescable,
      Cut cut) {
    if (!(form instanceof Spec || form instanceof LaneAggregate)) {
      throw new IllegalArgumentException("not an aggregate Sluice computes: " + form);
    }
    this.inputs = inputs;
    this.resultExpressions = resultExpressions;
    this.numPartitions = numPartitions;
    this.partitioning = partitioning;
    this.child = child;
    this.form = form;
    this.coalescable = coalescable;
    this.cut = cut;
  }

  @Override
  public Seq<Attribute> output() {
    return Scala.map(resultExpressions, NamedExpression::toAttribute);
  }

  /**
   * The attributes the node makes itself, as {@code HashAggregateExec} declares them: those its
   * result expressions read beside its child's columns (the aggregate's results), and its output
   * columns that are not its child's (the aliases of its results and of grouping expressions,
   * {@code GROUP BY key % 5}), which its partitioning names. Without them Spark's plan check finds
   * the node's inputs missing.
   */
  @Override
  public AttributeSet producedAttributes() {
    List<Expression> made = new ArrayList<>();
    (form instanceof LaneAggregate l ? l.produced() : inputs).foreach(made::add);
    AttributeSet columns = child.outputSet();
    for (Attribute a : Scala.asJava(output())) {
      if (!columns.contains(a)) {
        made.add(a);
      }
    }
    return AttributeSet$.MODULE$.apply(Scala.seq(made));
  }

  @Override
  public Seq<SparkPlan> children() {
    return Scala.seq(List.of(child));
  }

  @Override
  public Partitioning outputPartitioning() {
    List<Integer> bounds = cut.bounds.isEmpty() && coalesced != null ? coalesced : cut.bounds;
    if (bounds.isEmpty()) {
      return partitioning;
    }
    return coalesced(partitioning, bounds);
  }

  /**
   * {@code p} read in the ranges between consecutive {@code bounds}, as Spark's coalesced shuffle
   * read reports it: a hash partitioning keeps its placement in fewer partitions (each of a
   * collection too) where Spark can say so ({@link CoalescedHash}), anything else is only as many
   * partitions.
   */
  private static Partitioning coalesced(Partitioning p, List<Integer> bounds) {
    if (p instanceof HashPartitioning h && CoalescedHash.AVAILABLE) {
      return CoalescedHash.of(h, bounds);
    }
    if (p instanceof PartitioningCollection c) {
      return new PartitioningCollection(Scala.map(c.partitionings(), x -> coalesced(x, bounds)));
    }
    return new UnknownPartitioning(bounds.size() - 1);
  }

  /**
   * The node's metrics, made once (under a lock of their own: {@link #doExecute} holds the node's
   * while its map stage runs, and the UI's plan description asks for them meanwhile).
   */
  private ExchangeMetrics exchangeMetrics() {
    ExchangeMetrics m = metrics;
    if (m == null) {
      synchronized (ExchangeMetrics.class) {
        m = metrics;
        if (m == null) {
          m = new ExchangeMetrics(sparkContext());
          metrics = m;
        }
      }
    }
    return m;
  }

  /** This copy of {@code other}, showing {@code other}'s metrics: one node to Spark's UI. */
  SluiceAggregateExec sharingMetrics(SluiceAggregateExec other) {
    metrics = other.exchangeMetrics();
    return this;
  }

  @Override
  public scala.collection.immutable.Map<String, SQLMetric> metrics() {
    return exchangeMetrics().shuffle();
  }

  @Override
  public synchronized RDD<InternalRow> doExecute() {
    if (aggregated == null) {
      aggregated = aggregate();
    }
    return aggregated;
  }

  private RDD<InternalRow> aggregate() {
    ShuffleReuse.Shuffle shuffle = shuffled();
    QueryCleanup.track(this, shuffle.dependency().shuffleId());
    RDD<Tuple2<Object, Object>> results = read(shuffle);
    if (form instanceof LaneAggregate l) {
      return results
          .toJavaRDD()
          .mapPartitions((Iterator<Tuple2<Object, Object>> it) -> l.reduce(it))
          .rdd();
    }
    Seq<Expression> exprs = Scala.map(resultExpressions, e -> (Expression) e);
    boolean stringKey = ((Spec) form).keyKind() == SqlAggregates.KEY_STRING;
    return results
        .toJavaRDD()
        .mapPartitions(
            (Iterator<Tuple2<Object, Object>> it) -> {
              UnsafeProjection project = UnsafeProjection$.MODULE$.create(exprs, inputs);
              GenericInternalRow row = new GenericInternalRow(2);
              return SluiceRule.mapped(
                  it,
                  t -> {
                    Object k = t._1();
                    row.update(0, stringKey && k != null ? UTF8String.fromBytes((byte[]) k) : k);
                    row.update(1, t._2());
                    return (InternalRow) project.apply(row);
                  });
            })
        .rdd();
  }

  /**
   * The engine's shuffle of this node (its map side over the child's rows), shared with an equal
   * node of the same query ({@link ShuffleReuse}).
   */
  private ShuffleReuse.Shuffle shuffled() {
    return ShuffleReuse.shared(
        this,
        shuffleKey(),
        () -> {
          ShuffleWriteProcessor writes =
              ShuffleExchangeExec$.MODULE$.createShuffleWriteProcessor(exchangeMetrics().write);
          if (form instanceof LaneAggregate l) {
            return SqlAggregates.aggregateLanes(pairs(l::map), numPartitions, l.lanes(), writes);
          }
          Spec s = (Spec) form;
          return SqlAggregates.aggregate(
              pairs(rows -> (Iterator<Tuple2<Object, Object>>) new PreAggregator(rows, s)),
              numPartitions,
              PreAggregator.engineAgg(s),
              PreAggregator.engineValueType(s),
              s.exact(),
              writes);
        });
  }

  /** The child's rows as the engine's (key, value) pairs, each partition through {@code map}. */
  private RDD<Tuple2<Object, Object>> pairs(
      FlatMapFunction<Iterator<InternalRow>, Tuple2<Object, Object>> map) {
    return child.execute().toJavaRDD().mapPartitions(map).rdd();
  }

  /**
   * The reads of the aggregated shuffle, after its map stage ran ({@link
   * ShuffleReuse.Shuffle#materialize}): in the ranges a join's coalescing chose ({@link
   * JoinCoalesce}), in ranges cut by its own statistics where nothing relies on its partition
   * count ({@link AdaptiveCoalesce}), or one task per partition.
   */
  @SuppressWarnings({"unchecked", "rawtypes"})
  private RDD<Tuple2<Object, Object>> read(ShuffleReuse.Shuffle shuffle) {
    Option<MapOutputStatistics> stats = shuffle.materialize();
    List<Integer> bounds = cut.bounds;
    int[] b;
    if (!bounds.isEmpty()) {
      b = bounds.stream().mapToInt(x -> x).toArray();
    } else if (coalescable && stats.isDefined()) {
      b = AdaptiveCoalesce.bounds(conf(), sparkContext(), stats.get(), numPartitions);
    } else {
      b = AdaptiveCoalesce.identity(numPartitions);
    }
    if (bounds.isEmpty() && b.length - 1 != numPartitions) {
      coalesced = Arrays.stream(b).boxed().toList();
    }
    return (RDD)
        new RangeShuffledRDD<>(
            (ShuffleDependency) shuffle.dependency(), b, exchangeMetrics().reads());
  }

  /**
   * Runs the map stage (once per query, {@link ShuffleReuse}) and returns its statistics, or none
   * when the child has no partitions: what a join's coalescing needs of this node.
   */
  Option<MapOutputStatistics> mapStatistics() {
    return shuffled().materialize();
  }

  /** Whether a join's coalescing may choose this node's reads. */
  boolean pinned() {
    return !coalescable && cut.bounds.isEmpty();
  }

  /**
   * What the node's shuffle computes ({@link ShuffleReuse}): its child's canonical plan, the
   * partition count and the map side's work, or the key a join's coalescing gave it.
   */
  Object shuffleKey() {
    if (!cut.bounds.isEmpty()) {
      return cut.key;
    }
    Object mapSide = form instanceof LaneAggregate l ? l.mapSide() : form;
    return List.of(child.canonicalized(), numPartitions, mapSide);
  }

  int numPartitions() {
    return numPartitions;
  }

  /** This node reading the shuffle of {@code key} in the ranges {@code b}. */
  SluiceAggregateExec withCut(int[] b, Object key) {
    List<Integer> list = new ArrayList<>();
    for (int x : b) {
      list.add(x);
    }
    SluiceAggregateExec cut =
        new SluiceAggregateExec(
            inputs,
            resultExpressions,
            numPartitions,
            partitioning,
            child,
            form,
            coalescable,
            new Cut(List.copyOf(list), key));
    // The same node for adaptive execution: the logical link it maps stages back by.
    cut.copyTagsFrom(this);
    return cut.sharingMetrics(this);
  }

  @Override
  protected SparkPlan withChildren(List<SparkPlan> newChildren) {
    SluiceAggregateExec copy =
        new SluiceAggregateExec(
            inputs,
            resultExpressions,
            numPartitions,
            partitioning,
            newChildren.get(0),
            form,
            coalescable,
            cut);
    copy.metrics = metrics;
    return copy;
  }

  @Override
  public String nodeName() {
    return "SluiceAggregate";
  }

  @Override
  public String simpleString(int maxFields) {
    if (!(form instanceof Spec spec)) {
      return nodeName() + " " + form + ", output " + output().mkString("[", ", ", "]");
    }
    return nodeName()
        + " "
        + spec.agg()
        + (spec.exact() ? " (exact)" : "")
        + " by "
        + inputs.head()
        + ", output "
        + output().mkString("[", ", ", "]");
  }

  /**
   * The node with its expression ids normalized, as Spark compares plans ({@code sameResult}, the
   * reuse of an exchange or a query stage above it). Spark's own normalization binds references to
   * the child's columns by position; the attributes the node makes itself (the aggregate's results,
   * {@link #producedAttributes}) are bound here first, each to an id of its position (negative, so
   * that none can be taken for a column of the child), as {@code HashAggregateExec} binds its
   * aggregate attributes. Without this, two copies of one aggregate written twice in a query (each
   * with its own result ids) compare unequal and Spark runs the exchange above them twice.
   */
  @Override
  public SparkPlan doCanonicalize() {
    if (madeBound) {
      return super.doCanonicalize();
    }
    Seq<Attribute> made = form instanceof LaneAggregate l ? l.produced() : inputs;
    AbstractPartialFunction<Expression, Expression> bind =
        ShuffleReuse.byPosition(made, (i, a) -> a.withExprId(ExprId$.MODULE$.apply(-1L - i)));
    SluiceAggregateExec bound =
        new SluiceAggregateExec(
            Scala.map(inputs, a -> (Attribute) a.transformUp(bind)),
            Scala.map(resultExpressions, e -> (NamedExpression) ((Expression) e).transformUp(bind)),
            numPartitions,
            partitioning instanceof Expression p
                ? (Partitioning) p.transformUp(bind)
                : partitioning,
            child,
            form,
            coalescable,
            cut);
    bound.madeBound = true;
    return bound.canonicalized();
  }

  // The plan node as a product (constructor arguments), which Spark's tree operations use to
  // copy, canonicalize and print it.

  @Override
  public int productArity() {
    return 8;
  }

  @Override
  public Object productElement(int n) {
    return switch (n) {
      case 0 -> inputs;
      case 1 -> resultExpressions;
      case 2 -> numPartitions;
      case 3 -> partitioning;
      case 4 -> child;
      case 5 -> form;
      case 6 -> coalescable;
      case 7 -> cut;
      default -> throw new IndexOutOfBoundsException(n);
    };
  }

  @Override
  public boolean canEqual(Object that) {
    return that instanceof SluiceAggregateExec;
  }

  public SparkPlan child() {
    return child;
  }
}
