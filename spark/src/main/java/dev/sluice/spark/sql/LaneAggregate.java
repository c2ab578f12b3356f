package dev.sluice.spark.sql;

import dev.sluice.spark.api.SluiceException;
import dev.sluice.spark.ops.Lane;
import dev.sluice.spark.ops.SqlAggregates;
import dev.sluice.spark.shim.LineShim;
import dev.sluice.spark.shim.Scala;
import dev.sluice.spark.shim.Strings;
import dev.sluice.spark.sort.RowFraming;
import java.io.Serializable;
import java.math.BigInteger;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Iterator;
import java.util.List;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.Alias;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.expressions.AttributeReference;
import org.apache.spark.sql.catalyst.expressions.EvalMode$;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.catalyst.expressions.If;
import org.apache.spark.sql.catalyst.expressions.IsNull;
import org.apache.spark.sql.catalyst.expressions.JoinedRow;
import org.apache.spark.sql.catalyst.expressions.Literal;
import org.apache.spark.sql.catalyst.expressions.NamedExpression;
import org.apache.spark.sql.catalyst.expressions.Or;
import org.apache.spark.sql.catalyst.expressions.UnsafeProjection$;
import org.apache.spark.sql.catalyst.expressions.UnsafeProjection;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.sql.catalyst.expressions.aggregate.AggregateExpression;
import org.apache.spark.sql.catalyst.expressions.aggregate.AggregateFunction;
import org.apache.spark.sql.catalyst.expressions.aggregate.Average;
import org.apache.spark.sql.catalyst.expressions.aggregate.Count;
import org.apache.spark.sql.catalyst.expressions.aggregate.DeclarativeAggregate;
import org.apache.spark.sql.catalyst.expressions.aggregate.Max;
import org.apache.spark.sql.catalyst.expressions.aggregate.Min;
import org.apache.spark.sql.catalyst.expressions.aggregate.Sum;
import org.apache.spark.sql.catalyst.plans.physical.HashPartitioning;
import org.apache.spark.sql.types.BooleanType;
import org.apache.spark.sql.types.ByteType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DateType;
import org.apache.spark.sql.types.Decimal;
import org.apache.spark.sql.types.DecimalType;
import org.apache.spark.sql.types.IntegerType;
import org.apache.spark.sql.types.LongType$;
import org.apache.spark.sql.types.LongType;
import org.apache.spark.sql.types.ShortType;
import org.apache.spark.sql.types.TimestampNTZType;
import org.apache.spark.sql.types.TimestampType;
import scala.Tuple2;
import scala.collection.immutable.Seq;

/**
 * A Spark SQL aggregate by any number of grouping columns with several functions, run by the engine
 * as lanes ({@link Lane}): what {@link NativeAggregateRule} builds where one key and one function
 * do not describe the aggregate (TPC-H's sums of decimals by an order key, by three columns, its
 * Q1 of eight functions by two strings).
 *
 * <p>Map side ({@link LaneRows}): the grouping columns become an {@code UnsafeRow} whose bytes are
 * the engine's group key (binary equality is Spark's own hash-aggregate key equality; the partition
 * is Spark's {@code HashPartitioning} of those columns, so the node keeps the final aggregate's
 * output partitioning), and each function's values feed one or two lanes:
 *
 * <ul>
 *   <li>{@code count(...)}: a count lane of each row's 1 or 0 (0 when an argument is null);
 *   <li>{@code sum} of a byte, short, int or long: a 64-bit sum lane; of a decimal: a 128-bit sum
 *       lane of the unscaled values;
 *   <li>{@code avg} of a decimal or an integer: a 128-bit sum lane and a count lane of its non-null
 *       values (an integer average's sum becomes Spark's double buffer, rounded once);
 *   <li>{@code min}, {@code max} of integers, dates, timestamps or decimals of up to 18 digits.
 * </ul>
 *
 * Identical lanes are shared ({@code sum(x)} and {@code avg(x)} sum {@code x} once).
 *
 * <p>Reduce side: each group's lane states become the functions' aggregation buffers exactly as
 * Spark's own final aggregate would hold them (a sum is null until a value was seen; a decimal sum
 * beyond its buffer's precision is null, as Spark's {@code UnsafeRow} buffer stores it; an ANSI
 * long sum that overflowed fails with Spark's error), and Spark's own {@code evaluateExpression}
 * of each function and the final aggregate's result expressions make the output row, so the
 * precision checks, divisions and ANSI errors are Spark's. Two differences are documented: the
 * engine's decimal sums are exact, where Spark's intermediate sums turn null when one of them
 * leaves the buffer's precision (38 digits or 10 more than the input's) even if the total would
 * not; an integer average's sum is the exact sum rounded once to a double, where Spark adds
 * doubles (the same while its sums stay below 2^53).
 */
final class LaneAggregate implements Serializable {
  private static final long serialVersionUID = 1L;

  /** How a function's buffer is made from its lanes. */
  private static final int OUT_COUNT = 0;

  private static final int OUT_SUM_LONG = 1;
  private static final int OUT_SUM_DECIMAL = 2;
  private static final int OUT_AVG_DECIMAL = 3;
  private static final int OUT_MIN_MAX = 4;
  private static final int OUT_AVG_DOUBLE = 5;

  /** One function's buffer: how, from which lanes, into which type. */
  private record Output(int how, int lane, int countLane, DataType type, boolean ansi)
      implements Serializable {}

  private final LaneValues values;
  private final Seq<Expression> keyExprs;
  private final Seq<Expression> valueExprs;
  private final Seq<Attribute> input;
  private final Seq<Expression> partitionId;
  private final Seq<Attribute> keyAttrs;
  private final Output[] outputs;
  private final int bufferWidth;
  private final Seq<Expression> evalExprs;
  private final Seq<Attribute> evalInputs;
  private final Seq<Expression> resultExprs;
  private final Seq<Attribute> resultInputs;
  /** The final aggregate's functions, over {@code input}: what the node computes, for equality. */
  private final Seq<AggregateExpression> functions;
  /** For plan strings. */
  private final String description;

  /** {@link #canonical}, made on first use. */
  private transient Object canonical;

  private LaneAggregate(
      LaneValues values,
      Seq<Expression> keyExprs,
      Seq<Expression> valueExprs,
      Seq<Attribute> input,
      Seq<Expression> partitionId,
      Seq<Attribute> keyAttrs,
      Output[] outputs,
      int bufferWidth,
      Seq<Expression> evalExprs,
      Seq<Attribute> evalInputs,
      Seq<Expression> resultExprs,
      Seq<Attribute> resultInputs,
      Seq<AggregateExpression> functions,
      String description) {
    this.values = values;
    this.keyExprs = keyExprs;
    this.valueExprs = valueExprs;
    this.input = input;
    this.partitionId = partitionId;
    this.keyAttrs = keyAttrs;
    this.outputs = outputs;
    this.bufferWidth = bufferWidth;
    this.evalExprs = evalExprs;
    this.evalInputs = evalInputs;
    this.resultExprs = resultExprs;
    this.resultInputs = resultInputs;
    this.functions = functions;
    this.description = description;
  }

  Lane[] lanes() {
    return values.lanes();
  }

  /** The attributes the reduce side makes: the functions' results (and the keys, read back). */
  Seq<Attribute> produced() {
    return resultInputs;
  }

  @Override
  public String toString() {
    return description;
  }

  /**
   * What the node computes, free of expression ids: the map side ({@link #mapSide}), each
   * function's buffer, the functions over the input by position and the reduce side's expressions
   * over their inputs by position. Two forms are equal when these are: Spark's canonical plans
   * compare a node's constructor arguments, so that two copies of one native aggregate (a CTE that
   * a query uses twice, TPC-DS q23, or one aggregate written out twice) compare equal, and Spark
   * reuses an exchange above them as it does above two equal aggregates of its own, instead of
   * running that exchange's map stage twice. The functions stand for the expressions that evaluate
   * their buffers, as in Spark's own aggregate: those carry the position in the query's text that
   * an overflow error names (a decimal sum's), which differs between two copies of one aggregate.
   */
  private Object canonical() {
    if (canonical == null) {
      // The results' names and ids are the node's output, which its plan compares by position.
      List<Expression> results = new ArrayList<>();
      resultExprs.foreach(e -> results.add(e instanceof Alias a ? a.child() : e));
      canonical =
          List.of(
              mapSide(),
              Arrays.asList(outputs),
              bufferWidth,
              ShuffleReuse.positional(functions, input),
              ShuffleReuse.positional(Scala.seq(results), resultInputs));
    }
    return canonical;
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof LaneAggregate l && canonical().equals(l.canonical());
  }

  @Override
  public int hashCode() {
    return canonical().hashCode();
  }

  /**
   * The lanes form of a final aggregate ({@code keys}: its grouping attributes, {@code functions}
   * its aggregate expressions, {@code aggregateAttributes} their results) over a partial one
   * grouping {@code partialKeys} over {@code input}, hash-partitioned by {@code hash}; null (and a
   * reason in {@code why[0]}) when the engine cannot compute it as Spark does.
   */
  static LaneAggregate of(
      Seq<NamedExpression> partialKeys,
      Seq<NamedExpression> keys,
      Seq<AggregateExpression> functions,
      Seq<Attribute> aggregateAttributes,
      Seq<NamedExpression> resultExpressions,
      Seq<Attribute> input,
      HashPartitioning hash,
      String[] why) {
    List<Expression> keyExprs = new ArrayList<>();
    List<Attribute> keyAttrs = new ArrayList<>();
    for (int i = 0; i < partialKeys.size(); i++) {
      if (!(partialKeys.apply(i) instanceof AttributeReference a)
          || !(keys.apply(i) instanceof Attribute fa)
          || !fa.exprId().equals(a.exprId())
          || !groupable(a.dataType())) {
        why[0] = "grouping by " + partialKeys.apply(i);
        return null;
      }
      keyExprs.add(a);
      keyAttrs.add(a.toAttribute());
    }
    Seq<Attribute> keySeq = Scala.seq(keyAttrs);
    if (!hash.references()
        .forall(r -> keyAttrs.stream().anyMatch(k -> k.exprId().equals(r.exprId())))) {
      why[0] = "partitioned by " + hash.expressions();
      return null;
    }
    Builder b = new Builder();
    List<Output> outputs = new ArrayList<>();
    List<Attribute> bufferAttrs = new ArrayList<>();
    List<Expression> evalExprs = new ArrayList<>(keyAttrs);
    for (int i = 0; i < functions.size(); i++) {
      AggregateExpression ae = functions.apply(i);
      AggregateFunction f = ae.aggregateFunction();
      Output out = ae.isDistinct() || ae.filter().isDefined() ? null : b.output(f);
      if (out == null || !(f instanceof DeclarativeAggregate d) || !buffers(out, d)) {
        why[0] = "function " + ae;
        return null;
      }
      outputs.add(out);
      d.aggBufferAttributes().foreach(a -> bufferAttrs.add(a));
      evalExprs.add(d.evaluateExpression());
    }
    if (b.lanes.size() > Lane.LANES_MAX) {
      why[0] = b.lanes.size() + " lanes";
      return null;
    }
    List<Attribute> evalInputs = new ArrayList<>(keyAttrs);
    evalInputs.addAll(bufferAttrs);
    List<Attribute> resultInputs = new ArrayList<>(keyAttrs);
    aggregateAttributes.foreach(a -> resultInputs.add(a));
    LaneValues values =
        new LaneValues(
            b.lanes.toArray(new Lane[0]),
            b.reads.stream().mapToInt(x -> x).toArray(),
            b.precisions.stream().mapToInt(x -> x).toArray(),
            b.scales.stream().mapToInt(x -> x).toArray());
    return new LaneAggregate(
        values,
        Scala.seq(keyExprs),
        Scala.seq(b.exprs),
        input,
        Scala.seq(List.of(hash.partitionIdExpression())),
        keySeq,
        outputs.toArray(new Output[0]),
        bufferAttrs.size(),
        Scala.seq(evalExprs),
        Scala.seq(evalInputs),
        Scala.map(resultExpressions, e -> (Expression) e),
        Scala.seq(resultInputs),
        functions,
        functions.mkString(", ") + " by " + keySeq.mkString(", ") + " in " + b.lanes.size()
            + " lanes");
  }

  /** Whether Spark's buffer of {@code d} is what {@code out} makes. */
  private static boolean buffers(Output out, DeclarativeAggregate d) {
    Seq<AttributeReference> a = Scala.seq(d.aggBufferAttributes());
    return switch (out.how()) {
      case OUT_COUNT -> a.size() == 1 && a.apply(0).dataType() instanceof LongType;
      case OUT_SUM_LONG -> a.size() == 1 && a.apply(0).dataType() instanceof LongType;
      case OUT_SUM_DECIMAL ->
          a.size() == 2
              && a.apply(0).dataType().equals(out.type())
              && a.apply(1).dataType() instanceof BooleanType;
      case OUT_AVG_DECIMAL, OUT_AVG_DOUBLE ->
          a.size() == 2
              && a.apply(0).dataType().equals(out.type())
              && a.apply(1).dataType() instanceof LongType;
      default -> a.size() == 1 && a.apply(0).dataType().equals(out.type());
    };
  }

  /** Types whose {@code UnsafeRow} bytes are equal exactly when Spark groups values together. */
  private static boolean groupable(DataType t) {
    return t instanceof LongType
        || t instanceof IntegerType
        || t instanceof ShortType
        || t instanceof ByteType
        || t instanceof BooleanType
        || t instanceof DateType
        || t instanceof TimestampType
        || t instanceof TimestampNTZType
        || t instanceof DecimalType
        || Strings.binaryEquality(t);
  }

  /** Collects the lanes and their value expressions, sharing identical ones. */
  private static final class Builder {
    final List<Lane> lanes = new ArrayList<>();
    final List<Expression> exprs = new ArrayList<>();
    final List<Integer> reads = new ArrayList<>();
    final List<Integer> precisions = new ArrayList<>();
    final List<Integer> scales = new ArrayList<>();

    Output output(AggregateFunction f) {
      if (f instanceof Count c) {
        Expression anyNull = null;
        for (int i = 0; i < c.children().size(); i++) {
          Expression e = c.children().apply(i);
          if (e.nullable()) {
            anyNull = anyNull == null ? new IsNull(e) : new Or(anyNull, new IsNull(e));
          }
        }
        Expression one = longLiteral(1);
        Expression v = anyNull == null ? one : new If(anyNull, longLiteral(0), one);
        int l = lane(Lane.COUNT, v, LaneValues.READ_LONG, 0, 0);
        return new Output(OUT_COUNT, l, -1, null, false);
      }
      if (f instanceof Sum s && LineShim.evalMode(s) != EvalMode$.MODULE$.TRY()) {
        Expression x = s.child();
        boolean ansi = LineShim.evalMode(s) == EvalMode$.MODULE$.ANSI();
        if (x.dataType() instanceof DecimalType d) {
          int l = lane(Lane.SUM128, x, LaneValues.READ_DECIMAL, d.precision(), d.scale());
          return new Output(OUT_SUM_DECIMAL, l, -1, s.dataType(), ansi);
        }
        int read = integral(x.dataType());
        if (read < 0 || !(s.dataType() instanceof LongType)) {
          return null;
        }
        int l = lane(Lane.SUM64, x, read, 0, 0);
        return new Output(OUT_SUM_LONG, l, -1, LongType$.MODULE$, ansi);
      }
      if (f instanceof Average a && a.evalMode() != EvalMode$.MODULE$.TRY()) {
        Expression x = a.child();
        DataType t = x.dataType();
        int read = t instanceof DecimalType ? LaneValues.READ_DECIMAL : integral(t);
        if (read < 0) {
          return null;
        }
        int sum =
            t instanceof DecimalType d
                ? lane(Lane.SUM128, x, read, d.precision(), d.scale())
                : lane(Lane.SUM128, x, read, 0, 0);
        Expression counted =
            x.nullable() ? new If(new IsNull(x), longLiteral(0), longLiteral(1)) : longLiteral(1);
        int count = lane(Lane.COUNT, counted, LaneValues.READ_LONG, 0, 0);
        DataType sumType = a.aggBufferAttributes().apply(0).dataType();
        int how = t instanceof DecimalType ? OUT_AVG_DECIMAL : OUT_AVG_DOUBLE;
        return new Output(how, sum, count, sumType, false);
      }
      boolean min = f instanceof Min;
      if (min || f instanceof Max) {
        Expression x = f.children().apply(0);
        DataType t = x.dataType();
        int read = integral(t);
        if (t instanceof DateType) {
          read = LaneValues.READ_INT;
        } else if (t instanceof TimestampType || t instanceof TimestampNTZType) {
          read = LaneValues.READ_LONG;
        } else if (t instanceof DecimalType d && d.precision() <= Decimal.MAX_LONG_DIGITS()) {
          Lane kind = min ? Lane.MIN64 : Lane.MAX64;
          int l = lane(kind, x, LaneValues.READ_DECIMAL, d.precision(), d.scale());
          return new Output(OUT_MIN_MAX, l, -1, t, false);
        }
        if (read < 0) {
          return null;
        }
        int l = lane(min ? Lane.MIN64 : Lane.MAX64, x, read, 0, 0);
        return new Output(OUT_MIN_MAX, l, -1, t, false);
      }
      return null;
    }

    private static Expression longLiteral(long v) {
      return Literal.create((Object) v, LongType$.MODULE$);
    }

    private static int integral(DataType t) {
      if (t instanceof LongType) {
        return LaneValues.READ_LONG;
      }
      if (t instanceof IntegerType) {
        return LaneValues.READ_INT;
      }
      if (t instanceof ShortType) {
        return LaneValues.READ_SHORT;
      }
      if (t instanceof ByteType) {
        return LaneValues.READ_BYTE;
      }
      return -1;
    }

    private int lane(Lane kind, Expression e, int read, int precision, int scale) {
      for (int i = 0; i < lanes.size(); i++) {
        if (lanes.get(i) == kind && exprs.get(i).semanticEquals(e)) {
          return i;
        }
      }
      lanes.add(kind);
      exprs.add(e);
      reads.add(read);
      precisions.add(precision);
      scales.add(scale);
      return lanes.size() - 1;
    }
  }

  /**
   * What the map side computes, free of expression ids ({@link ShuffleReuse}): the lanes, the key
   * and value expressions over the child's columns by position, the partition of a key row.
   */
  Object mapSide() {
    return List.of(
        Arrays.asList(values.lanes()),
        ShuffleReuse.positional(keyExprs, input),
        ShuffleReuse.positional(valueExprs, input),
        ShuffleReuse.positional(partitionId, keyAttrs));
  }

  /** The map side: each row's group key and lane inputs (see {@link LaneRows}). */
  Iterator<Tuple2<Object, Object>> map(Iterator<InternalRow> rows) {
    UnsafeProjection keys = UnsafeProjection$.MODULE$.create(keyExprs, input);
    UnsafeProjection inputs = UnsafeProjection$.MODULE$.create(valueExprs, input);
    UnsafeProjection partition = UnsafeProjection$.MODULE$.create(partitionId, keyAttrs);
    return new LaneRows(rows, values, keys, inputs, partition);
  }

  /** The reduce side: each (key bytes, lane states) result as the final aggregate's output row. */
  Iterator<InternalRow> reduce(Iterator<Tuple2<Object, Object>> results) {
    UnsafeProjection eval = UnsafeProjection$.MODULE$.create(evalExprs, evalInputs);
    UnsafeProjection result = UnsafeProjection$.MODULE$.create(resultExprs, resultInputs);
    UnsafeRow key = new UnsafeRow(keyAttrs.size());
    int keyMin = RowFraming.fixedBytes(keyAttrs.size());
    GenericInternalRow buffer = new GenericInternalRow(bufferWidth);
    JoinedRow joined = new JoinedRow();
    long[] st = new long[values.words];
    return SluiceRule.mapped(
        results,
        t -> {
          byte[] k = (byte[]) t._1();
          if (k.length < keyMin || k.length % RowFraming.ROW_ALIGN_BYTES != 0) {
            // Spark's getters would read the key's fields past its array.
            throw new SluiceException(
                "a native aggregate's group key of "
                    + k.length
                    + " bytes is no row of "
                    + keyAttrs.size()
                    + " fields (at least "
                    + keyMin
                    + " bytes, whole 8-byte words)");
          }
          key.pointTo(k, k.length);
          ByteBuffer s = ByteBuffer.wrap((byte[]) t._2()).order(ByteOrder.LITTLE_ENDIAN);
          for (int i = 0; i < st.length; i++) {
            st[i] = s.getLong();
          }
          fill(st, buffer);
          return (InternalRow) result.apply(eval.apply(joined.apply(key, buffer)));
        });
  }

  /** Spark's aggregation buffers of every function from the lane states. */
  private void fill(long[] st, GenericInternalRow buffer) {
    int at = 0;
    for (Output o : outputs) {
      int w = values.at(o.lane());
      switch (o.how()) {
        case OUT_COUNT -> buffer.update(at++, st[w]);
        case OUT_SUM_LONG -> {
          if ((st[w + 1] & Lane.OVERFLOW) != 0 && o.ansi()) {
            throw SqlAggregates.overflow("the engine's sum of a group");
          }
          buffer.update(at++, (st[w + 1] & Lane.SEEN) != 0 ? (Object) st[w] : null);
        }
        case OUT_SUM_DECIMAL -> {
          boolean seen = (st[w + 2] & Lane.SEEN) != 0;
          buffer.update(at++, seen ? decimal(st, w, (DecimalType) o.type()) : null);
          buffer.update(at++, !seen);
        }
        case OUT_AVG_DECIMAL -> {
          buffer.update(at++, decimal(st, w, (DecimalType) o.type()));
          buffer.update(at++, st[values.at(o.countLane())]);
        }
        case OUT_AVG_DOUBLE -> {
          // The exact sum rounded once (Spark adds doubles: equal while its partial sums are
          // exact, below 2^53).
          buffer.update(at++, (Object) wide(st[w], st[w + 1]).doubleValue());
          buffer.update(at++, st[values.at(o.countLane())]);
        }
        default -> {
          boolean seen = (st[w + 1] & Lane.SEEN) != 0;
          buffer.update(at++, seen ? typed(st[w], o.type()) : null);
        }
      }
    }
  }

  /**
   * A 128-bit sum lane as a decimal of {@code type}, or null when it overflowed or leaves the
   * type's precision (as Spark's {@code UnsafeRow} buffer stores a decimal that does not fit).
   */
  private static Decimal decimal(long[] st, int w, DecimalType type) {
    if ((st[w + 2] & Lane.OVERFLOW) != 0) {
      return null;
    }
    long lo = st[w];
    long hi = st[w + 1];
    Decimal d =
        hi == (lo >> 63)
            ? Decimal.apply(java.math.BigDecimal.valueOf(lo, type.scale()))
            : Decimal.apply(new java.math.BigDecimal(wide(lo, hi), type.scale()));
    return d.changePrecision(type.precision(), type.scale()) ? d : null;
  }

  /** A 128-bit two's complement integer of two words. */
  private static BigInteger wide(long lo, long hi) {
    return BigInteger.valueOf(hi).shiftLeft(64).add(new BigInteger(Long.toUnsignedString(lo)));
  }

  /** A min or max lane's value as its column's type. */
  private static Object typed(long v, DataType t) {
    if (t instanceof DecimalType d) {
      return Decimal.createUnsafe(v, d.precision(), d.scale());
    }
    if (t instanceof IntegerType || t instanceof DateType) {
      return (int) v;
    }
    if (t instanceof ShortType) {
      return (short) v;
    }
    if (t instanceof ByteType) {
      return (byte) v;
    }
    return v;
  }
}
