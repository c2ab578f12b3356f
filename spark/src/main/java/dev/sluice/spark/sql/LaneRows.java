package dev.sluice.spark.sql;

import dev.sluice.spark.ops.GroupKey;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayDeque;
import java.util.Arrays;
import java.util.Iterator;
import java.util.NoSuchElementException;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.UnsafeProjection;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import scala.Tuple2;

/**
 * The map side of a lanes aggregate ({@link LaneAggregate}): each row's grouping columns as an
 * {@code UnsafeRow} (the engine's group key, with the partition Spark SQL's hash partitioning gives
 * it) and its lanes' inputs, after a first level of aggregation on the task thread.
 *
 * <p>The first level is a small open-addressing table of {@link #SLOTS} slots keyed by the key
 * row's bytes: a row whose key is there folds into its state; a new key takes a free slot within
 * {@link #PROBES_MAX} probes, and when the table is full (or the probes are) every group goes to
 * the engine as a partial and the table starts empty, which keeps runs of one key (TPC-H's
 * lineitem, ordered by its order key) folded. A TPC-H Q1 shape (four groups over millions of rows)
 * folds entirely here, as Spark's own partial aggregate would. After {@link #SAMPLE_RECORDS} rows,
 * a table that folded fewer than half of them into an existing group switches itself off and rows
 * go to the engine one by one, whose tables are built for many keys.
 */
final class LaneRows implements Iterator<Tuple2<Object, Object>> {
  /** Slots of the table (a power of two). */
  static final int SLOTS = 1024;
  /** Groups the table holds at most before it is emptied into the engine. */
  static final int ENTRIES_MAX = SLOTS / 2;
  /** Slots a new key probes. */
  static final int PROBES_MAX = 8;
  /** Rows after which a table folding fewer than half of them switches itself off. */
  static final int SAMPLE_RECORDS = 1 << 16;

  private final Iterator<InternalRow> in;
  private final LaneValues values;
  private final UnsafeProjection keys;
  private final UnsafeProjection inputs;
  private final UnsafeProjection partitionId;
  private final UnsafeRow[] held = new UnsafeRow[SLOTS];
  private final int[] hashes = new int[SLOTS];
  private final int[] partitions = new int[SLOTS];
  private final long[] states;
  private final long[] scratch;
  private final ArrayDeque<Tuple2<Object, Object>> ready = new ArrayDeque<>();
  private int entries;
  private long records;
  private long folded;
  private boolean off;
  private boolean drained;

  LaneRows(
      Iterator<InternalRow> in,
      LaneValues values,
      UnsafeProjection keys,
      UnsafeProjection inputs,
      UnsafeProjection partitionId) {
    this.in = in;
    this.values = values;
    this.keys = keys;
    this.inputs = inputs;
    this.partitionId = partitionId;
    this.states = new long[SLOTS * values.words];
    this.scratch = new long[values.words];
  }

  @Override
  public boolean hasNext() {
    while (ready.isEmpty()) {
      if (in.hasNext()) {
        offer(in.next());
      } else if (!drained) {
        drained = true;
        drain();
      } else {
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
    return ready.poll();
  }

  private void offer(InternalRow row) {
    UnsafeRow key = keys.apply(row);
    InternalRow v = inputs.apply(row);
    if (!off && ++records == SAMPLE_RECORDS && folded * 2 < records) {
      off = true;
      drain();
    }
    if (off) {
      Arrays.fill(scratch, 0);
      values.fold(v, scratch, 0);
      ready.add(pair(key.copy(), partition(key), scratch, 0));
      return;
    }
    int h = key.hashCode();
    int home = (h * 0x9E3779B9) >>> (32 - Integer.numberOfTrailingZeros(SLOTS));
    int free = -1;
    for (int p = 0; p < PROBES_MAX; p++) {
      int s = (home + p) & (SLOTS - 1);
      UnsafeRow k = held[s];
      if (k == null) {
        free = s;
        break;
      }
      if (hashes[s] == h && k.equals(key)) {
        values.fold(v, states, s * values.words);
        folded++;
        return;
      }
    }
    if (free < 0 || entries == ENTRIES_MAX) {
      drain();
      free = home;
    }
    UnsafeRow copy = key.copy();
    held[free] = copy;
    hashes[free] = h;
    partitions[free] = partition(copy);
    Arrays.fill(states, free * values.words, (free + 1) * values.words, 0);
    values.fold(v, states, free * values.words);
    entries++;
  }

  /** Sends every group of the table to the engine and empties it. */
  private void drain() {
    for (int s = 0; s < SLOTS; s++) {
      if (held[s] != null) {
        ready.add(pair(held[s], partitions[s], states, s * values.words));
        held[s] = null;
      }
    }
    entries = 0;
  }

  private int partition(UnsafeRow key) {
    return partitionId.apply(key).getInt(0);
  }

  private Tuple2<Object, Object> pair(UnsafeRow key, int partition, long[] st, int base) {
    ByteBuffer b = ByteBuffer.allocate(values.inputBytes).order(ByteOrder.LITTLE_ENDIAN);
    values.write(st, base, b);
    return new Tuple2<>(new GroupKey(partition, key.getBytes()), b.array());
  }
}
