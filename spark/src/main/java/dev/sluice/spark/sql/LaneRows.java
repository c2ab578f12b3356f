package dev.sluice.spark.sql;

import dev.sluice.spark.ops.LaneRecord;
import java.nio.ByteBuffer;
import java.util.Arrays;
import java.util.Iterator;
import java.util.NoSuchElementException;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.UnsafeProjection;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.unsafe.Platform;
import scala.Tuple2;

/**
 * The map side of a lanes aggregate ({@link LaneAggregate}): each row's grouping columns as an
 * {@code UnsafeRow} (the engine's group key, with the partition Spark SQL's hash partitioning gives
 * it) and its lanes' inputs, after a first level of aggregation on the task thread.
 *
 * <p>The first level is a small open-addressing table of {@link #SLOTS} slots keyed by the key
 * row's bytes: a row whose key is there folds into its state; a new key takes a free slot within
 * {@link #PROBES_MAX} probes (a row whose probes are all taken goes to the engine alone), and when
 * the table holds {@link #ENTRIES_MAX} groups every group goes to
 * the engine as a partial and the table starts empty, which keeps runs of one key (TPC-H's
 * lineitem, ordered by its order key) folded. A TPC-H Q1 shape (four groups over millions of rows)
 * folds entirely here, as Spark's own partial aggregate would. After {@link #SAMPLE_RECORDS} rows,
 * a table that folded fewer than half of them into an existing group switches itself off and rows
 * go to the engine one by one, whose tables are built for many keys.
 *
 * <p>Records leave as one {@link LaneRecord}, this object, refilled by each {@link #next}: the key
 * of a row passed through is the key projection's own row, the state the scratch words; a full
 * table is swapped with a second one whose groups leave one by one while the first fills again.
 * Nothing is allocated per row but a new group's key copy.
 */
final class LaneRows implements Iterator<Tuple2<Object, Object>>, LaneRecord {
  /** Slots of the table (a power of two). */
  static final int SLOTS = 4096;
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
  private final int[] hashes = new int[SLOTS];
  private final long[] scratch;
  /** What every {@link #next} returns: this record. */
  private final Tuple2<Object, Object> pair = new Tuple2<>(this, null);
  /** The table that folds. */
  private UnsafeRow[] held = new UnsafeRow[SLOTS];
  private int[] partitions = new int[SLOTS];
  private long[] states;
  /** The table being emptied, from slot {@link #leaving} on. */
  private UnsafeRow[] left = new UnsafeRow[SLOTS];
  private int[] leftPartitions = new int[SLOTS];
  private long[] leftStates;
  private int leaving = SLOTS;
  /** The record {@link #next} returns. */
  private UnsafeRow key;
  private int partition;
  private long[] state;
  private int stateAt;
  private boolean ready;
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
    this.leftStates = new long[SLOTS * values.words];
    this.scratch = new long[values.words];
  }

  @Override
  public boolean hasNext() {
    while (!ready && !leave()) {
      if (in.hasNext()) {
        offer(in.next());
      } else if (!drained) {
        drained = true;
        empty();
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
    ready = false;
    return pair;
  }

  @Override
  public int partition() {
    return partition;
  }

  @Override
  public int keyBytes() {
    return key.getSizeInBytes();
  }

  @Override
  public void putKey(ByteBuffer out) {
    if (key.getBaseObject() instanceof byte[] bytes) {
      out.put(bytes, (int) (key.getBaseOffset() - Platform.BYTE_ARRAY_OFFSET), keyBytes());
    } else {
      out.put(key.getBytes());
    }
  }

  @Override
  public void putValue(ByteBuffer out) {
    values.write(state, stateAt, out);
  }

  /** Takes row {@code row}: folds it, or makes it the record (ready), or starts a group. */
  private void offer(InternalRow row) {
    UnsafeRow k = keys.apply(row);
    InternalRow v = inputs.apply(row);
    if (!off && ++records == SAMPLE_RECORDS && folded * 2 < records) {
      off = true;
      empty();
    }
    if (off) {
      alone(k, v);
      return;
    }
    int h = k.hashCode();
    int home = (h * 0x9E3779B9) >>> (32 - Integer.numberOfTrailingZeros(SLOTS));
    int free = -1;
    for (int p = 0; p < PROBES_MAX; p++) {
      int s = (home + p) & (SLOTS - 1);
      UnsafeRow other = held[s];
      if (other == null) {
        free = s;
        break;
      }
      if (hashes[s] == h && other.equals(k)) {
        values.fold(v, states, s * values.words);
        folded++;
        return;
      }
    }
    if (entries == ENTRIES_MAX) {
      empty();
      free = home;
    } else if (free < 0) {
      // The key's probes met other keys only: the row goes to the engine alone and the table
      // keeps its groups (emptying it here would cost every group for one key).
      alone(k, v);
      return;
    }
    UnsafeRow copy = k.copy();
    held[free] = copy;
    hashes[free] = h;
    partitions[free] = partition(copy);
    Arrays.fill(states, free * values.words, (free + 1) * values.words, 0);
    values.fold(v, states, free * values.words);
    entries++;
  }

  /** Makes row {@code v} of key {@code k} the record, a group of its own. */
  private void alone(UnsafeRow k, InternalRow v) {
    Arrays.fill(scratch, 0);
    values.fold(v, scratch, 0);
    record(k, partition(k), scratch, 0);
  }

  /**
   * Swaps the table with the emptied one: its groups leave one by one ({@link #leave}) and the
   * table starts empty. Called only once every group of the last swap has left.
   */
  private void empty() {
    UnsafeRow[] rows = left;
    int[] parts = leftPartitions;
    long[] st = leftStates;
    left = held;
    leftPartitions = partitions;
    leftStates = states;
    held = rows;
    partitions = parts;
    states = st;
    leaving = 0;
    entries = 0;
  }

  /** Makes the next group of the emptied table the record; false when none is left. */
  private boolean leave() {
    while (leaving < SLOTS) {
      int s = leaving++;
      UnsafeRow k = left[s];
      if (k != null) {
        left[s] = null;
        record(k, leftPartitions[s], leftStates, s * values.words);
        return true;
      }
    }
    return false;
  }

  private void record(UnsafeRow k, int p, long[] st, int at) {
    key = k;
    partition = p;
    state = st;
    stateAt = at;
    ready = true;
  }

  private int partition(UnsafeRow k) {
    return partitionId.apply(k).getInt(0);
  }
}
