package dev.sluice.spark.sql;

import dev.sluice.spark.SluiceShuffleManager;
import dev.sluice.spark.api.SluiceSetting;
import dev.sluice.spark.shim.Scala;
import dev.sluice.spark.shim.Strings;
import dev.sluice.spark.sort.RowSortKey;
import java.util.ArrayList;
import java.util.List;
import org.apache.spark.sql.catalyst.expressions.Alias;
import org.apache.spark.sql.catalyst.expressions.Alias$;
import org.apache.spark.sql.catalyst.expressions.Ascending$;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.expressions.AttributeReference;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.NamedExpression;
import org.apache.spark.sql.catalyst.expressions.NamedExpression$;
import org.apache.spark.sql.catalyst.expressions.NullsFirst$;
import org.apache.spark.sql.catalyst.expressions.SortOrder;
import org.apache.spark.sql.catalyst.plans.physical.RangePartitioning;
import org.apache.spark.sql.execution.ProjectExec;
import org.apache.spark.sql.execution.SortExec;
import org.apache.spark.sql.execution.SparkPlan;
import org.apache.spark.sql.execution.exchange.ShuffleExchangeExec;
import org.apache.spark.sql.types.BinaryType;
import org.apache.spark.sql.types.BooleanType;
import org.apache.spark.sql.types.ByteType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DateType;
import org.apache.spark.sql.types.Decimal;
import org.apache.spark.sql.types.DecimalType;
import org.apache.spark.sql.types.DoubleType;
import org.apache.spark.sql.types.FloatType;
import org.apache.spark.sql.types.IntegerType;
import org.apache.spark.sql.types.LongType;
import org.apache.spark.sql.types.ShortType;
import org.apache.spark.sql.types.TimestampNTZType;
import org.apache.spark.sql.types.TimestampType;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import scala.collection.immutable.Seq;

/**
 * Gives a Spark SQL global sort ({@code ORDER BY}, {@code orderBy}) to the Sluice engine.
 *
 * <p>Spark plans a global sort as a {@code ShuffleExchangeExec} with range partitioning (rows
 * sampled for the ranges' bounds, then each row sent to its range) and a {@code SortExec} in every
 * reduce task, which inserts each row into a sorter, sorts the pointers and iterates them. This
 * rule replaces the pair with a {@link SluiceSortExchangeExec}: the same range-partitioned
 * exchange, but the map tasks write each row with its sort key encoded ({@link RowSortKey}), the
 * engine's offload threads sort each partition's rows into runs, and each reduce task merges the
 * runs natively and reads the rows in order. The plan changes only when the shuffle manager is
 * Sluice and Sluice would run the shuffle (no I/O encryption, no push-based shuffle, no storage
 * plugin), and only for sort orders whose byte encoding is exactly Spark's order: columns or
 * deterministic expressions of boolean, integral, date, timestamp, float, double, decimal, string
 * (UTF-8 binary collation) or binary type, in any number, position and direction (an expression is
 * computed into a column by a {@code ProjectExec} below the node, which drops it after the read).
 * {@code spark.sluice.sqlSort=false} turns it off.
 *
 * <p>It runs among the physical preparation rules (as a columnar rule before the columnar
 * transitions, after Spark has placed the exchanges) and, with adaptive execution, as a query
 * stage preparation rule; there the sort is planned inside the stage that reads the exchange
 * (adaptive execution does not re-plan that exchange).
 */
public final class NativeSortRule extends SluiceRule {
  private static final Logger LOG = LoggerFactory.getLogger(NativeSortRule.class);

  @Override
  SluiceSetting setting() {
    return SluiceSetting.SQL_SORT;
  }

  @Override
  SparkPlan replace(SparkPlan node, boolean pinned) {
    return node instanceof SortExec sort ? replace(sort, pinned) : node;
  }

  /** The native form of a global sort over its range exchange, or the sort unchanged. */
  private static SparkPlan replace(SortExec sort, boolean pinned) {
    if (!sort.global()
        || !(sort.child() instanceof ShuffleExchangeExec exchange)
        || !(exchange.outputPartitioning() instanceof RangePartitioning range)
        || !range.ordering().equals(sort.sortOrder())
        || range.numPartitions() > SluiceShuffleManager.PARTITIONS_MAX) {
      return sort;
    }
    SparkPlan input = exchange.child();
    Seq<Attribute> output = Scala.seq(input.output());
    if (output.isEmpty()) {
      // Rows of no columns (every column pruned, the order by a scalar subquery, a count or an
      // OFFSET above): nothing for a native node to carry, so the sort stays Spark's.
      return sort;
    }
    List<Expression> computed = new ArrayList<>();
    RowSortKey key = keyOf(Scala.seq(sort.sortOrder()), output, computed);
    if (key == null) {
      LOG.debug("Sluice: sort by {} stays in Spark SQL (not a byte-ordered key)", sort.sortOrder());
      return sort;
    }
    if (!computed.isEmpty()) {
      // Expressions are computed into columns after the input's, as the exchange would evaluate
      // them per row (their errors included); the node drops them after the read.
      List<NamedExpression> columns = new ArrayList<>();
      output.foreach(a -> columns.add(a));
      for (Expression e : computed) {
        String name = "sluice_sort_key";
        columns.add(
            new Alias(
                e,
                name,
                NamedExpression$.MODULE$.newExprId(),
                Alias$.MODULE$.apply$default$4(e, name),
                Alias$.MODULE$.apply$default$5(e, name),
                Alias$.MODULE$.apply$default$6(e, name)));
      }
      input = new ProjectExec(Scala.seq(columns), input);
    }
    // Its reads are coalesced where adaptive execution would coalesce the exchange's: one Spark
    // placed for the sort, or a range repartition by columns alone; a user's count of partitions
    // (repartitionByRange(n, ...)) is kept, as Spark keeps it.
    boolean coalescable = !pinned && AdaptiveCoalesce.coalesces(exchange.shuffleOrigin());
    return new SluiceSortExchangeExec(
        Scala.seq(sort.sortOrder()), range.numPartitions(), input, key, coalescable, output.size());
  }

  /**
   * The byte encoding of {@code order} over rows of {@code output}, or null if it has none. A sort
   * expression that is not a column (deterministic, of an encodable type, over {@code output}) is
   * added to {@code computed} and keyed as column {@code output.size()} + its index there.
   */
  static RowSortKey keyOf(Seq<SortOrder> order, Seq<Attribute> output, List<Expression> computed) {
    int n = order.size();
    int[] ordinals = new int[n];
    int[] kinds = new int[n];
    boolean[] descending = new boolean[n];
    boolean[] nullsFirst = new boolean[n];
    for (int i = 0; i < n; i++) {
      SortOrder o = order.apply(i);
      Expression e = o.child();
      if (e instanceof AttributeReference a) {
        ordinals[i] = ordinal(a, output);
      } else if (e.deterministic()
          && e.references().forall(a -> ordinal(a, output) >= 0)) {
        ordinals[i] = output.size() + computed.size();
        computed.add(e);
      } else {
        return null;
      }
      kinds[i] = kindOf(e.dataType());
      descending[i] = o.direction() != Ascending$.MODULE$;
      nullsFirst[i] = o.nullOrdering() == NullsFirst$.MODULE$;
      if (ordinals[i] < 0 || kinds[i] < 0) {
        return null;
      }
    }
    return new RowSortKey(ordinals, kinds, descending, nullsFirst);
  }

  private static int ordinal(Attribute a, Seq<Attribute> output) {
    for (int i = 0; i < output.size(); i++) {
      if (output.apply(i).exprId().equals(a.exprId())) {
        return i;
      }
    }
    return -1;
  }

  /** The {@link RowSortKey} kind of a column type, or -1 if it is not byte-ordered. */
  static int kindOf(DataType t) {
    if (t instanceof BooleanType) {
      return RowSortKey.BOOLEAN;
    }
    if (t instanceof ByteType) {
      return RowSortKey.BYTE;
    }
    if (t instanceof ShortType) {
      return RowSortKey.SHORT;
    }
    if (t instanceof IntegerType || t instanceof DateType) {
      return RowSortKey.INT;
    }
    if (t instanceof LongType || t instanceof TimestampType || t instanceof TimestampNTZType) {
      return RowSortKey.LONG;
    }
    if (t instanceof FloatType) {
      return RowSortKey.FLOAT;
    }
    if (t instanceof DoubleType) {
      return RowSortKey.DOUBLE;
    }
    if (t instanceof DecimalType d) {
      return d.precision() <= Decimal.MAX_LONG_DIGITS() ? RowSortKey.LONG : RowSortKey.DECIMAL;
    }
    if (t instanceof BinaryType) {
      return RowSortKey.BYTES;
    }
    if (Strings.binaryOrdering(t)) {
      return RowSortKey.BYTES;
    }
    return -1;
  }
}
