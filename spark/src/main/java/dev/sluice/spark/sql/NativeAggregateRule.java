package dev.sluice.spark.sql;

import dev.sluice.spark.SluiceShuffleManager;
import dev.sluice.spark.api.Agg;
import dev.sluice.spark.api.SluiceSetting;
import dev.sluice.spark.ops.SqlAggregates;
import dev.sluice.spark.shim.LineShim;
import dev.sluice.spark.shim.Scala;
import dev.sluice.spark.shim.Strings;
import java.util.ArrayList;
import java.util.List;
import org.apache.spark.SparkConf;
import org.apache.spark.sql.catalyst.expressions.Alias;
import org.apache.spark.sql.catalyst.expressions.Alias$;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.expressions.AttributeReference;
import org.apache.spark.sql.catalyst.expressions.EvalMode$;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.Literal;
import org.apache.spark.sql.catalyst.expressions.NamedExpression;
import org.apache.spark.sql.catalyst.expressions.NamedExpression$;
import org.apache.spark.sql.catalyst.expressions.aggregate.AggregateExpression;
import org.apache.spark.sql.catalyst.expressions.aggregate.AggregateFunction;
import org.apache.spark.sql.catalyst.expressions.aggregate.Count;
import org.apache.spark.sql.catalyst.expressions.aggregate.Final$;
import org.apache.spark.sql.catalyst.expressions.aggregate.Max;
import org.apache.spark.sql.catalyst.expressions.aggregate.Min;
import org.apache.spark.sql.catalyst.expressions.aggregate.Partial$;
import org.apache.spark.sql.catalyst.expressions.aggregate.Sum;
import org.apache.spark.sql.catalyst.plans.physical.HashPartitioning;
import org.apache.spark.sql.execution.ProjectExec;
import org.apache.spark.sql.execution.SparkPlan;
import org.apache.spark.sql.execution.aggregate.HashAggregateExec;
import org.apache.spark.sql.execution.exchange.ENSURE_REQUIREMENTS$;
import org.apache.spark.sql.execution.exchange.ShuffleExchangeExec;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.IntegerType;
import org.apache.spark.sql.types.LongType;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import scala.collection.immutable.Seq;

/**
 * Gives a Spark SQL aggregate to the Sluice engine, whole.
 *
 * <p>Spark plans {@code groupBy(k).agg(f(v))} as a partial {@code HashAggregateExec} in each map
 * task (Spark's hash map of the task's groups, in Java), a {@code ShuffleExchangeExec}
 * hash-partitioned by the key, and a final {@code HashAggregateExec} in each reduce task. This rule
 * replaces the three with one {@link SluiceAggregateExec}: the map tasks only copy each row's key
 * and value into the engine's buffers, and the engine aggregates on its offload threads (partial
 * per destination, spilling by its own threshold) and in each reduce task (exact, spilling sorted
 * runs), as for {@code Sluice.reduceByKey}.
 *
 * <p>The plan changes only when the shuffle manager is Sluice and the engine can run offloaded
 * operators (no I/O encryption, no push-based shuffle, no storage plugin but Sluice's), {@code
 * spark.sluice.sqlAggregate} is not false (at its default, auto, only where {@link AggregateCost}
 * finds the engine faster than Spark's generated code; true takes every shape below), and the
 * aggregate is exactly one the engine computes as Spark SQL does:
 *
 * <ul>
 *   <li>one grouping column of long, int or string (UTF-8 binary collation) type (nulls form
 *       one group, as in Spark);
 *   <li>one aggregate, not distinct and without a filter: {@code count(*)}, {@code count(1)} or
 *       {@code count} of a non-nullable expression; {@code sum}, {@code min} or {@code max} of a
 *       non-nullable long or int column or deterministic expression (computed into a column by
 *       a {@code ProjectExec} below the node). A sum in ANSI mode (Spark 4's default) fails on
 *       overflow, as Spark's does; {@code try_sum} stays Spark's.
 * </ul>
 *
 * <p>Any other aggregate by one or more columns of integer, date, timestamp, decimal, boolean or
 * string type with counts, sums and averages of integers and decimals, and min and max of
 * integers, dates, timestamps and decimals of up to 18 digits (nullable values, expressions,
 * ANSI or legacy mode) takes the lanes form ({@link LaneAggregate}): the grouping columns'
 * {@code UnsafeRow} is the engine's key and each function one or two lanes of one state.
 *
 * <p>Anything else keeps Spark's plan (nondeterministic expressions such as {@code rand()}, which
 * Spark seeds per partition; double sums and averages, whose result depends on the order
 * of additions; distinct aggregates; collations; collect_list and other imperative aggregates); a
 * debug-level log line says why. Like {@link
 * NativeSortRule} it runs among the physical preparation rules and, with adaptive execution, as a
 * query stage preparation rule (the exchange is then not an adaptive query stage).
 */
public final class NativeAggregateRule extends SluiceRule {
  private static final Logger LOG = LoggerFactory.getLogger(NativeAggregateRule.class);
  /** {@code spark.sluice.sqlAggregate}: no aggregate runs in the engine. */
  private static final String OFF = "false";
  /** {@code spark.sluice.sqlAggregate}: every aggregate the engine computes as Spark does. */
  private static final String EVERY_SHAPE = "true";

  @Override
  SluiceSetting setting() {
    return SluiceSetting.SQL_AGGREGATE;
  }

  @Override
  boolean enabled(String value) {
    return !setting().choice(value).equals(OFF);
  }

  /** Whether the session asked for every aggregate the engine computes, not only those that pay. */
  private boolean everyShape() {
    SluiceSetting s = setting();
    return s.choice(conf().getConfString(s.key, s.defaultValue)).equals(EVERY_SHAPE);
  }

  @Override
  String fallbackReason(SparkConf conf) {
    return SqlAggregates.fallbackReason(conf);
  }

  @Override
  SparkPlan replace(SparkPlan node, boolean pinned) {
    return node instanceof HashAggregateExec agg ? replace(agg, pinned) : node;
  }

  /** The native form of a final aggregate over its exchange and partial aggregate, or it as is. */
  private SparkPlan replace(HashAggregateExec fin, boolean pinned) {
    if (!(fin.child() instanceof ShuffleExchangeExec exchange)
        || exchange.shuffleOrigin() != ENSURE_REQUIREMENTS$.MODULE$
        || !(exchange.outputPartitioning() instanceof HashPartitioning hash)
        || hash.numPartitions() > SluiceShuffleManager.PARTITIONS_MAX
        || !(exchange.child() instanceof HashAggregateExec partial)) {
      return fin;
    }
    // A nondeterministic expression (rand() in a result) is evaluated by Spark per partition
    // with a seed it initialises, and a subquery's result is handed only to Spark's own nodes;
    // the native node would compute other values, or none at all.
    if (!portable(fin) || !portable(partial)) {
      LOG.debug("Sluice: aggregate stays in Spark SQL (an expression only Spark evaluates)");
      return fin;
    }
    if (pinned
        && !CoalescedHash.AVAILABLE
        && conf().adaptiveExecutionEnabled()
        && conf().coalesceShufflePartitionsEnabled()) {
      // Spark 3.5.0: a join (or a repartition ending the query) relies on this aggregate's
      // partitions, and the node cannot say that it reads coalesced ranges of them (Spark's own
      // read there claims a hash partitioning of fewer partitions); adaptive execution would
      // undo the coalescing of the join's sides ({@link JoinCoalesce}), which Spark's own
      // aggregate gets.
      LOG.debug("Sluice: aggregate stays in Spark SQL (joined, and no coalesced hash partitioning)");
      return fin;
    }
    if (!everyShape() && !AggregateCost.paysNatively(partial)) {
      LOG.debug("Sluice: aggregate stays in Spark SQL (auto: {})", AggregateCost.WHY_SPARK);
      return fin;
    }
    SparkPlan one = replaceOne(fin, partial, hash, pinned);
    return one != fin ? one : lanes(fin, partial, hash, pinned);
  }

  /**
   * Whether the native node can evaluate every expression of {@code agg} (keys, functions,
   * results) itself ({@link SluiceRule#portable}).
   */
  private static boolean portable(HashAggregateExec agg) {
    return agg.groupingExpressions().forall(e -> portable((Expression) e))
        && agg.aggregateExpressions().forall(e -> portable((Expression) e))
        && agg.resultExpressions().forall(e -> portable((Expression) e));
  }

  /**
   * The lanes form of a final aggregate over its exchange and partial aggregate ({@link
   * LaneAggregate}), or it as is.
   */
  private static SparkPlan lanes(
      HashAggregateExec fin, HashAggregateExec partial, HashPartitioning hash, boolean pinned) {
    int n = fin.aggregateExpressions().size();
    if (n == 0
        || partial.aggregateExpressions().size() != n
        || fin.groupingExpressions().isEmpty()
        || partial.groupingExpressions().size() != fin.groupingExpressions().size()) {
      return fin;
    }
    for (int i = 0; i < n; i++) {
      AggregateExpression fae = fin.aggregateExpressions().apply(i);
      AggregateExpression pae = partial.aggregateExpressions().apply(i);
      if (fae.mode() != Final$.MODULE$
          || pae.mode() != Partial$.MODULE$
          || pae.isDistinct()
          || pae.filter().isDefined()
          || !fae.aggregateFunction().equals(pae.aggregateFunction())) {
        return fin;
      }
    }
    String[] why = new String[1];
    LaneAggregate lanes =
        LaneAggregate.of(
            Scala.seq(partial.groupingExpressions()),
            Scala.seq(fin.groupingExpressions()),
            Scala.seq(partial.aggregateExpressions()),
            Scala.seq(fin.aggregateAttributes()),
            Scala.seq(fin.resultExpressions()),
            Scala.seq(partial.child().output()),
            hash,
            why);
    if (lanes == null) {
      LOG.debug("Sluice: aggregate stays in Spark SQL ({})", why[0]);
      return fin;
    }
    return new SluiceAggregateExec(
        Scala.seq(List.<Attribute>of()),
        Scala.seq(fin.resultExpressions()),
        hash.numPartitions(),
        fin.outputPartitioning(),
        partial.child(),
        lanes,
        !pinned,
        SluiceAggregateExec.Cut.NONE);
  }

  /** The one-key, one-function form (see the class comment), or {@code fin} as it is. */
  private static SparkPlan replaceOne(
      HashAggregateExec fin, HashAggregateExec partial, HashPartitioning hash, boolean pinned) {
    if (fin.groupingExpressions().size() != 1
        || fin.aggregateExpressions().size() != 1
        || partial.groupingExpressions().size() != 1
        || partial.aggregateExpressions().size() != 1) {
      return fin;
    }
    AggregateExpression fae = fin.aggregateExpressions().apply(0);
    AggregateExpression pae = partial.aggregateExpressions().apply(0);
    NamedExpression pkey = partial.groupingExpressions().apply(0);
    if (fae.mode() != Final$.MODULE$
        || pae.mode() != Partial$.MODULE$
        || fae.isDistinct()
        || fae.filter().isDefined()
        || pae.filter().isDefined()
        || !fae.aggregateFunction().equals(pae.aggregateFunction())
        || !(pkey instanceof AttributeReference keyAttr)
        || !hash.expressions().apply(0).semanticEquals(pkey.toAttribute())
        || hash.expressions().size() != 1) {
      return fin;
    }
    Seq<Attribute> input = Scala.seq(partial.child().output());
    int keyOrdinal = ordinal(keyAttr, input);
    int keyKind = keyKindOf(keyAttr.dataType());
    if (keyOrdinal < 0 || keyKind < 0) {
      LOG.debug("Sluice: aggregate by {} stays in Spark SQL (key type)", keyAttr);
      return fin;
    }
    Expression[] computed = new Expression[1];
    SluiceAggregateExec.Spec spec =
        specOf(fae.aggregateFunction(), input, keyOrdinal, keyKind, computed);
    if (spec == null) {
      LOG.debug("Sluice: {} stays in Spark SQL (not an engine aggregate)", fae);
      return fin;
    }
    SparkPlan source = partial.child();
    if (computed[0] != null) {
      // The aggregated expression is computed into a last column, as the partial aggregate
      // would compute it per row (its errors included).
      List<NamedExpression> columns = new ArrayList<>();
      input.foreach(a -> columns.add(a));
      String name = "sluice_value";
      columns.add(
          new Alias(
              computed[0],
              name,
              NamedExpression$.MODULE$.newExprId(),
              Alias$.MODULE$.apply$default$4(computed[0], name),
              Alias$.MODULE$.apply$default$5(computed[0], name),
              Alias$.MODULE$.apply$default$6(computed[0], name)));
      source = new ProjectExec(Scala.seq(columns), source);
    }
    return new SluiceAggregateExec(
        fin.groupingExpressions().apply(0).toAttribute(),
        fin.aggregateAttributes().apply(0),
        Scala.seq(fin.resultExpressions()),
        hash.numPartitions(),
        fin.outputPartitioning(),
        source,
        spec,
        !pinned);
  }

  /**
   * What the engine computes for {@code f}, or null if it cannot compute it as Spark does. An
   * aggregate of an expression (deterministic, non-nullable, long or int) reads a column appended
   * to the input: the expression is handed back in {@code computed[0]}.
   */
  private static SluiceAggregateExec.Spec specOf(
      AggregateFunction f,
      Seq<Attribute> input,
      int keyOrdinal,
      int keyKind,
      Expression[] computed) {
    if (f instanceof Count count) {
      if (count.children().size() != 1) {
        return null;
      }
      Expression c = count.children().apply(0);
      boolean everyRow = (c instanceof Literal lit && lit.value() != null) || !c.nullable();
      return everyRow
          ? new SluiceAggregateExec.Spec(
              keyOrdinal, keyKind, -1, SqlAggregates.VALUE_LONG, Agg.COUNT, false)
          : null;
    }
    Agg agg;
    boolean exact = false;
    Expression child;
    if (f instanceof Sum sum) {
      if (LineShim.evalMode(sum) == EvalMode$.MODULE$.TRY()) {
        return null;
      }
      agg = Agg.SUM;
      exact = LineShim.evalMode(sum) == EvalMode$.MODULE$.ANSI();
      child = sum.child();
    } else if (f instanceof Min min) {
      agg = Agg.MIN;
      child = min.child();
    } else if (f instanceof Max max) {
      agg = Agg.MAX;
      child = max.child();
    } else {
      return null;
    }
    int valueType = valueTypeOf(child.dataType());
    if (child.nullable() || valueType < 0) {
      return null;
    }
    int valueOrdinal;
    if (child instanceof AttributeReference v) {
      valueOrdinal = ordinal(v, input);
    } else if (child.deterministic() && child.references().forall(a -> ordinal(a, input) >= 0)) {
      valueOrdinal = input.size();
      computed[0] = child;
    } else {
      valueOrdinal = -1;
    }
    if (valueOrdinal < 0) {
      return null;
    }
    return new SluiceAggregateExec.Spec(keyOrdinal, keyKind, valueOrdinal, valueType, agg, exact);
  }

  private static int keyKindOf(DataType t) {
    if (t instanceof LongType) {
      return SqlAggregates.KEY_LONG;
    }
    if (t instanceof IntegerType) {
      return SqlAggregates.KEY_INT;
    }
    if (Strings.binaryEquality(t)) {
      return SqlAggregates.KEY_STRING;
    }
    return -1;
  }

  private static int valueTypeOf(DataType t) {
    if (t instanceof LongType) {
      return SqlAggregates.VALUE_LONG;
    }
    if (t instanceof IntegerType) {
      return SqlAggregates.VALUE_INT;
    }
    return -1;
  }

  private static int ordinal(Attribute a, Seq<Attribute> output) {
    for (int i = 0; i < output.size(); i++) {
      if (output.apply(i).exprId().equals(a.exprId())) {
        return i;
      }
    }
    return -1;
  }
}
