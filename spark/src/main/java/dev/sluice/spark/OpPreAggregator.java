package dev.sluice.spark;

import java.io.IOException;
import java.util.Arrays;
import java.util.Objects;

/**
 * The map task thread's first level of an offloaded operator over integers ({@link
 * Sluice#reduceByKey} with {@link OpSpec#firstLevel}): a few hot keys (a WordCount's 1,000 words)
 * are cheapest to fold where the record is read, because a record that crosses into the engine
 * costs its key's encoding and the engine's hashing of its bytes, where a fold into a small table
 * costs one hash and one compare.
 *
 * <p>Records probe an open-addressing table of {@link #SLOTS} slots (at most {@link #ENTRIES_MAX}
 * keys, {@link #PROBES_MAX} probes): a hit folds the value into the key's partial state, a miss in
 * a table with room inserts the key, any other record goes to the engine as it is. After {@link
 * #SAMPLE_RECORDS} records, if fewer than half were absorbed (many keys: the engine's own tables
 * are built for that), the table stops being probed. When the input ends the partial states
 * follow, as records of the same shape: the engine merges them with single records because a
 * count runs there as a sum of counts and a sum of ints as a sum of longs ({@link
 * OpSpec#engineValueType}). Doubles have no first level: the engine's min and max order them
 * totally (-0.0 below 0.0), Java's {@code Math.min} does not.
 */
final class OpPreAggregator {
  /** Where records go: a key and its value or partial state, as {@link OpSpec#engineValue}. */
  interface Sink {
    void write(Object key, long value) throws IOException;
  }

  /** Slots of the table (a power of two). */
  static final int SLOTS = 4096;
  /** Keys the table holds at most (half its slots, so probes stay short). */
  static final int ENTRIES_MAX = SLOTS / 2;
  /** Slots a record probes before it goes to the engine. */
  static final int PROBES_MAX = 8;
  /** Records after which a table absorbing fewer than half of them is switched off. */
  static final int SAMPLE_RECORDS = 1 << 16;

  private static final int SHIFT = 32 - Integer.numberOfTrailingZeros(SLOTS);
  private static final Object EMPTY = new Object();

  private final Agg agg;
  private final Object[] keys = new Object[SLOTS];
  private final long[] states = new long[SLOTS];
  private final int[] hashes = new int[SLOTS];
  private int entries;
  private long records;
  private long absorbed;
  private boolean off;

  OpPreAggregator(OpSpec op) {
    if (!op.firstLevel) {
      throw new IllegalArgumentException("no first level for " + op.agg + " over doubles");
    }
    this.agg = op.agg;
    Arrays.fill(keys, EMPTY);
  }

  /** Folds one record into the table; false if it must go to the engine as it is. */
  boolean offer(Object key, long v) {
    if (off) {
      return false;
    }
    if (++records == SAMPLE_RECORDS && absorbed * 2 < records) {
      off = true;
      SluiceMetrics.OP_FIRST_LEVELS_OFF.incrementAndGet();
    }
    int h = key == null ? 0 : key.hashCode();
    int home = (h * 0x9E3779B9) >>> SHIFT;
    for (int p = 0; p < PROBES_MAX; p++) {
      int s = (home + p) & (SLOTS - 1);
      Object k = keys[s];
      if (k == EMPTY) {
        if (entries == ENTRIES_MAX) {
          return false;
        }
        keys[s] = key;
        hashes[s] = h;
        states[s] = v;
        entries++;
        absorbed++;
        return true;
      }
      if (hashes[s] == h && Objects.equals(k, key)) {
        states[s] = fold(states[s], v);
        absorbed++;
        return true;
      }
    }
    return false;
  }

  private long fold(long state, long v) {
    switch (agg) {
      case MIN:
        return Math.min(state, v);
      case MAX:
        return Math.max(state, v);
      default:
        return state + v; // a sum (wrapping, as the engine's), or a count of counts
    }
  }

  /** Writes every partial state to {@code out} and empties the table. */
  void drain(Sink out) throws IOException {
    for (int s = 0; s < SLOTS; s++) {
      if (keys[s] != EMPTY) {
        out.write(keys[s], states[s]);
        keys[s] = EMPTY;
      }
    }
    entries = 0;
  }
}
