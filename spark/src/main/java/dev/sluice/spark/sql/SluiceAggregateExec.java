package dev.sluice.spark.sql;

import dev.sluice.spark.Agg;
import dev.sluice.spark.RangeShuffledRDD;
import dev.sluice.spark.SqlAggregates;
import java.io.Serializable;
import java.util.Iterator;
import java.util.List;
import org.apache.spark.ShuffleDependency;
import org.apache.spark.rdd.RDD;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.catalyst.expressions.NamedExpression;
import org.apache.spark.sql.catalyst.expressions.UnsafeProjection;
import org.apache.spark.sql.catalyst.expressions.UnsafeProjection$;
import org.apache.spark.sql.catalyst.plans.physical.Partitioning;
import org.apache.spark.sql.execution.SparkPlan;
import org.apache.spark.unsafe.types.UTF8String;
import scala.Tuple2;
import scala.collection.immutable.IndexedSeq;
import scala.collection.immutable.Seq;

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
 */
public final class SluiceAggregateExec extends SparkPlan {
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
  /** The aggregated rows, made once (on the driver; later actions reuse the shuffle). */
  private transient RDD<InternalRow> aggregated;

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
        SluiceRule.toSeq(List.of(group, result)),
        resultExpressions,
        numPartitions,
        partitioning,
        child,
        spec,
        coalescable);
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
      boolean coalescable) {
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
  }

  @Override
  public Seq<Attribute> output() {
    return resultExpressions.map(NamedExpression::toAttribute).toSeq();
  }

  @Override
  public Seq<SparkPlan> children() {
    return SluiceRule.toSeq(List.of(child));
  }

  @Override
  public Partitioning outputPartitioning() {
    return partitioning;
  }

  @Override
  public synchronized RDD<InternalRow> doExecute() {
    if (aggregated == null) {
      aggregated = aggregate();
    }
    return aggregated;
  }

  private RDD<InternalRow> aggregate() {
    if (form instanceof LaneAggregate lanes) {
      return aggregateLanes(lanes);
    }
    Spec s = (Spec) form;
    RDD<Tuple2<Object, Object>> pairs =
        child
            .execute()
            .toJavaRDD()
            .mapPartitions(
                (Iterator<InternalRow> rows) ->
                    (Iterator<Tuple2<Object, Object>>) new PreAggregator(rows, s))
            .rdd();
    RDD<Tuple2<Object, Object>> results =
        SqlAggregates.aggregate(
            pairs,
            numPartitions,
            PreAggregator.engineAgg(s),
            PreAggregator.engineValueType(s),
            s.exact());
    if (coalescable) {
      results = coalesced(results);
    }
    Seq<Expression> exprs = resultExpressions.map(e -> (Expression) e).toSeq();
    boolean stringKey = s.keyKind() == SqlAggregates.KEY_STRING;
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

  private RDD<InternalRow> aggregateLanes(LaneAggregate l) {
    RDD<Tuple2<Object, Object>> pairs =
        child
            .execute()
            .toJavaRDD()
            .mapPartitions((Iterator<InternalRow> rows) -> l.map(rows))
            .rdd();
    RDD<Tuple2<Object, Object>> results =
        SqlAggregates.aggregateLanes(pairs, numPartitions, l.lanes());
    if (coalescable) {
      results = coalesced(results);
    }
    return results
        .toJavaRDD()
        .mapPartitions((Iterator<Tuple2<Object, Object>> it) -> l.reduce(it))
        .rdd();
  }

  /** The aggregated shuffle read in coalesced ranges where its partitions are small. */
  @SuppressWarnings({"unchecked", "rawtypes"})
  private RDD<Tuple2<Object, Object>> coalesced(RDD<Tuple2<Object, Object>> shuffled) {
    ShuffleDependency<Object, Object, Object> dep =
        (ShuffleDependency<Object, Object, Object>) shuffled.dependencies().head();
    int[] bounds = AdaptiveCoalesce.bounds(conf(), dep, numPartitions);
    if (bounds.length - 1 == numPartitions) {
      return shuffled;
    }
    return (RDD) new RangeShuffledRDD<>(dep, bounds);
  }

  @Override
  public SparkPlan withNewChildrenInternal(IndexedSeq<SparkPlan> newChildren) {
    return new SluiceAggregateExec(
        inputs,
        resultExpressions,
        numPartitions,
        partitioning,
        newChildren.apply(0),
        form,
        coalescable);
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

  // The plan node as a product (constructor arguments), which Spark's tree operations use to
  // copy, canonicalize and print it.

  @Override
  public int productArity() {
    return 7;
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
