package dev.sluice.spark.combine;

import java.util.Arrays;
import java.util.Objects;
import java.util.function.LongBinaryOperator;
import java.util.function.UnaryOperator;

/**
 * A task thread's first level of aggregation in front of the engine: a small open-addressing table
 * that folds a long value into each key's partial state, for the offloaded operators ({@link
 * OpPreAggregator}) and Spark SQL's aggregates ({@code sql.PreAggregator}).
 *
 * <p>A few hot keys (a WordCount's 1,000 words) are cheapest to fold where the record is read: a
 * record that crosses into the engine costs its key's encoding and the engine's hashing of its
 * bytes, where a fold here costs one hash and one compare. Records probe {@link #SLOTS} slots (at
 * most {@link #ENTRIES_MAX} keys, {@link #PROBES_MAX} probes from the key's home slot): a hit
 * folds, a miss in a table with room inserts the key, any other record is refused and goes to the
 * engine as it is. After {@link #SAMPLE_RECORDS} records, if fewer than half were absorbed (many
 * keys: the engine's own tables are built for that), the table refuses everything. The null key
 * has a slot of its own. At the end the caller takes the partial states ({@link #drain}), which
 * the engine merges with single records: a count must run there as a sum of counts.
 */
public final class FoldTable {
  /** Where {@link #drain} hands the partial states: a key and its state. */
  public interface Sink<E extends Exception> {
    void write(Object key, long state) throws E;
  }

  /** Slots of the table (a power of two). */
  public static final int SLOTS = 4096;
  /** Keys the table holds at most (half its slots, so probes stay short). */
  public static final int ENTRIES_MAX = SLOTS / 2;
  /** Slots a record probes before it is refused. */
  public static final int PROBES_MAX = 8;
  /** Records after which a table absorbing fewer than half of them switches itself off. */
  public static final int SAMPLE_RECORDS = 1 << 16;

  private static final int SHIFT = 32 - Integer.numberOfTrailingZeros(SLOTS);
  private static final Object EMPTY = new Object();

  private final LongBinaryOperator fold;
  private final UnaryOperator<Object> keep;
  private final Object[] keys = new Object[SLOTS];
  private final long[] states = new long[SLOTS];
  private final int[] hashes = new int[SLOTS];
  private int entries;
  private boolean nullUsed;
  private long nullState;
  private long records;
  private long absorbed;
  private boolean off;

  /**
   * A table folding with {@code fold(state, value)}; {@code keep} makes the copy of a key that the
   * table holds (a key that points into a reused buffer must be copied).
   */
  public FoldTable(LongBinaryOperator fold, UnaryOperator<Object> keep) {
    this.fold = fold;
    this.keep = keep;
    Arrays.fill(keys, EMPTY);
  }

  /** Whether the table switched itself off. */
  public boolean off() {
    return off;
  }

  /** Folds one record into the table; false if it must go to the engine as it is. */
  public boolean absorb(Object key, long v) {
    if (off) {
      return false;
    }
    if (++records == SAMPLE_RECORDS && absorbed * 2 < records) {
      off = true;
      return false;
    }
    if (key == null) {
      nullState = nullUsed ? fold.applyAsLong(nullState, v) : v;
      nullUsed = true;
      absorbed++;
      return true;
    }
    int h = key.hashCode();
    int home = (h * 0x9E3779B9) >>> SHIFT;
    for (int p = 0; p < PROBES_MAX; p++) {
      int s = (home + p) & (SLOTS - 1);
      Object held = keys[s];
      if (held == EMPTY) {
        if (entries == ENTRIES_MAX) {
          return false;
        }
        keys[s] = keep.apply(key);
        hashes[s] = h;
        states[s] = v;
        entries++;
        absorbed++;
        return true;
      }
      if (hashes[s] == h && Objects.equals(held, key)) {
        states[s] = fold.applyAsLong(states[s], v);
        absorbed++;
        return true;
      }
    }
    return false;
  }

  /** Hands every partial state to {@code out} and empties the table. */
  public <E extends Exception> void drain(Sink<E> out) throws E {
    for (int s = 0; s < SLOTS; s++) {
      if (keys[s] != EMPTY) {
        Object k = keys[s];
        keys[s] = EMPTY;
        out.write(k, states[s]);
      }
    }
    entries = 0;
    if (nullUsed) {
      nullUsed = false;
      out.write(null, nullState);
    }
  }
}
