package dev.sluice.spark.sql;

import dev.sluice.spark.api.Agg;
import dev.sluice.spark.combine.FoldTable;
import dev.sluice.spark.ops.SqlAggregates;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.NoSuchElementException;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.unsafe.types.UTF8String;
import scala.Tuple2;

/**
 * The map side of a {@link SluiceAggregateExec}: each row's (key, value) for the engine, after a
 * small first level of aggregation on the task thread that switches itself off when it does not
 * pay.
 *
 * <p>Rows first go through a {@link FoldTable} (a few hot keys, the DataFrame WordCount's 1,000
 * words, are cheapest to fold where the row is read); a row it refuses goes to the engine as it
 * is, and once it switches itself off (many keys: the benchmark's aggregate over 1M keys) every
 * row does, into the engine's hash tables built for that. When the input ends, the table's
 * partial states follow. A key string points into the row's buffer, so the table keeps a copy.
 *
 * <p>Partial states must merge in the engine with single rows, so the engine's function is chosen
 * to match (see {@link #engineAgg}): a count becomes a sum of counts (a row is a count of 1), a sum
 * of ints a sum of longs (a partial sum leaves the int range), min and max stay.
 */
final class PreAggregator implements Iterator<Tuple2<Object, Object>> {
  private final Iterator<InternalRow> in;
  private final SluiceAggregateExec.Spec spec;
  private final boolean count;
  private final FoldTable table;
  /** The table's partial states, once the input ended. */
  private Iterator<Tuple2<Object, Object>> partials;
  private Tuple2<Object, Object> next;

  PreAggregator(Iterator<InternalRow> in, SluiceAggregateExec.Spec spec) {
    this.in = in;
    this.spec = spec;
    this.count = spec.agg() == Agg.COUNT;
    this.table = new FoldTable(this::fold, k -> k instanceof UTF8String u ? u.copy() : k);
  }

  /** The engine's function for {@code spec}'s aggregate over rows and partial states. */
  static Agg engineAgg(SluiceAggregateExec.Spec spec) {
    return spec.agg() == Agg.COUNT ? Agg.SUM : spec.agg();
  }

  /** The engine's value type for {@code spec} (see the class comment). */
  static int engineValueType(SluiceAggregateExec.Spec spec) {
    return spec.agg() == Agg.MIN || spec.agg() == Agg.MAX
        ? spec.valueType()
        : SqlAggregates.VALUE_LONG;
  }

  @Override
  public boolean hasNext() {
    while (next == null) {
      if (partials == null && in.hasNext()) {
        next = offer(in.next());
        continue;
      }
      if (partials == null) {
        List<Tuple2<Object, Object>> states = new ArrayList<>();
        table.drain((k, state) -> states.add(new Tuple2<>(engineKey(k), value(state))));
        partials = states.iterator();
      }
      if (!partials.hasNext()) {
        return false;
      }
      next = partials.next();
    }
    return true;
  }

  @Override
  public Tuple2<Object, Object> next() {
    if (!hasNext()) {
      throw new NoSuchElementException();
    }
    Tuple2<Object, Object> t = next;
    next = null;
    return t;
  }

  /** The row as an engine pair, or null when the table absorbed it. */
  private Tuple2<Object, Object> offer(InternalRow r) {
    int k = spec.keyOrdinal();
    int vo = spec.valueOrdinal();
    long v = count ? 1 : spec.valueType() == SqlAggregates.VALUE_INT ? r.getInt(vo) : r.getLong(vo);
    // The key read once: null, a Long, an Integer, or the row's string (not copied unless kept).
    Object key =
        r.isNullAt(k)
            ? null
            : switch (spec.keyKind()) {
              case SqlAggregates.KEY_LONG -> r.getLong(k);
              case SqlAggregates.KEY_INT -> r.getInt(k);
              default -> r.getUTF8String(k);
            };
    if (table.absorb(key, v)) {
      return null;
    }
    return new Tuple2<>(engineKey(key), value(v));
  }

  private long fold(long state, long v) {
    switch (spec.agg()) {
      case MIN:
        return Math.min(state, v);
      case MAX:
        return Math.max(state, v);
      default:
        if (spec.exact()) {
          try {
            return Math.addExact(state, v);
          } catch (ArithmeticException e) {
            throw SqlAggregates.overflow("the task thread's first level");
          }
        }
        return state + v;
    }
  }

  /** A key as the engine takes it: a string as its UTF-8 bytes. */
  private static Object engineKey(Object key) {
    return key instanceof UTF8String s ? s.getBytes() : key;
  }

  /** A value or partial state as the engine's value type takes it. */
  private Object value(long v) {
    return engineValueType(spec) == SqlAggregates.VALUE_INT ? (Object) (int) v : (Object) v;
  }
}
