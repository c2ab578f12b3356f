package dev.sluice.spark.sql;

import dev.sluice.spark.Agg;
import dev.sluice.spark.SqlAggregates;
import java.util.Iterator;
import java.util.NoSuchElementException;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.unsafe.types.UTF8String;
import scala.Tuple2;

/**
 * The map side of a {@link SluiceAggregateExec}: each row's (key, value) for the engine, after a
 * small first level of aggregation on the task thread that switches itself off when it does not
 * pay.
 *
 * <p>A few hot keys (the DataFrame WordCount's 1,000 words) are cheapest to fold where the row is
 * read: a row that crosses into the engine costs its bytes' copy and the engine's hashing of them,
 * where a fold into a small table costs one hash and one compare. So rows first probe an
 * open-addressing table of {@link #SLOTS} slots (at most {@link #ENTRIES_MAX} keys, {@link
 * #PROBES_MAX} probes): a hit folds the value into the key's partial state, a miss in a table
 * with room inserts the key, any other row goes to the engine as it is. After {@link
 * #SAMPLE_ROWS} rows, if fewer than half were absorbed (many keys: the benchmark's aggregate over
 * 1M keys), the table stops being probed and every further row goes straight to the engine,
 * whose hash tables are built for that. When the input ends, the table's partial states follow.
 *
 * <p>Partial states must merge in the engine with single rows, so the engine's function is chosen
 * to match (see {@link #engineAgg}): a count becomes a sum of counts (a row is a count of 1), a sum
 * of ints a sum of longs (a partial sum leaves the int range), min and max stay.
 */
final class PreAggregator implements Iterator<Tuple2<Object, Object>> {
  /** Slots of the table (a power of two). */
  static final int SLOTS = 4096;
  /** Keys the table holds at most (half its slots, so probes stay short). */
  static final int ENTRIES_MAX = SLOTS / 2;
  /** Slots a row probes before it goes to the engine. */
  static final int PROBES_MAX = 8;
  /** Rows after which a table absorbing fewer than half of them is switched off. */
  static final int SAMPLE_ROWS = 1 << 16;

  private final Iterator<InternalRow> in;
  private final SluiceAggregateExec.Spec spec;
  private final boolean count;
  private final Object[] keys = new Object[SLOTS];
  private final long[] states = new long[SLOTS];
  private int entries;
  private boolean nullUsed;
  private long nullState;
  private boolean off;
  private long rows;
  private long absorbed;
  /** Once the input ended: the next slot to hand out (SLOTS + 1 after the null group). */
  private int flushAt = -1;
  private Tuple2<Object, Object> next;

  PreAggregator(Iterator<InternalRow> in, SluiceAggregateExec.Spec spec) {
    this.in = in;
    this.spec = spec;
    this.count = spec.agg() == Agg.COUNT;
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
      if (flushAt < 0 && in.hasNext()) {
        next = offer(in.next());
      } else if (!flushNext()) {
        return false;
      }
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
    if (r.isNullAt(k)) {
      nullState = nullUsed ? fold(nullState, v) : v;
      nullUsed = true;
      return null;
    }
    // The key read once: a Long, an Integer, or the row's string (not copied unless kept).
    Object key =
        switch (spec.keyKind()) {
          case SqlAggregates.KEY_LONG -> r.getLong(k);
          case SqlAggregates.KEY_INT -> r.getInt(k);
          default -> r.getUTF8String(k);
        };
    if (!off && absorb(key, v)) {
      return null;
    }
    return new Tuple2<>(engineKey(key), value(v));
  }

  /** Folds a row's value into the table if its key is there or fits; false if it goes on. */
  private boolean absorb(Object probe, long v) {
    rows++;
    if (rows == SAMPLE_ROWS && absorbed * 2 < rows) {
      off = true;
    }
    int h =
        probe instanceof Long x
            ? Long.hashCode(x * 0x9E3779B97F4A7C15L)
            : probe instanceof Integer x ? x * 0x9E3779B9 : probe.hashCode();
    int at = (h ^ (h >>> 16)) & (SLOTS - 1);
    for (int i = 0; i < PROBES_MAX; i++, at = (at + 1) & (SLOTS - 1)) {
      Object held = keys[at];
      if (held == null) {
        if (entries >= ENTRIES_MAX) {
          return false;
        }
        keys[at] = probe instanceof UTF8String s ? s.copy() : probe;
        states[at] = v;
        entries++;
        absorbed++;
        return true;
      }
      if (held.equals(probe)) {
        states[at] = fold(states[at], v);
        absorbed++;
        return true;
      }
    }
    return false;
  }

  /** Hands out the next partial state of the table once the input ended; false at the end. */
  private boolean flushNext() {
    if (flushAt < 0) {
      flushAt = 0;
    }
    while (flushAt < SLOTS) {
      int at = flushAt++;
      Object key = keys[at];
      if (key != null) {
        keys[at] = null;
        next = new Tuple2<>(engineKey(key), value(states[at]));
        return true;
      }
    }
    if (flushAt == SLOTS && nullUsed) {
      flushAt++;
      next = new Tuple2<>(null, value(nullState));
      return true;
    }
    return false;
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
