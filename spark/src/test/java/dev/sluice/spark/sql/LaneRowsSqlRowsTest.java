package dev.sluice.spark.sql;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.sluice.spark.ops.Lane;
import dev.sluice.spark.ops.LaneRecord;
import dev.sluice.spark.shim.Scala;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.function.LongUnaryOperator;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.BoundReference;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.catalyst.expressions.InterpretedUnsafeProjection;
import org.apache.spark.sql.catalyst.expressions.UnsafeProjection;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.sql.types.LongType$;
import org.junit.jupiter.api.Test;

/**
 * The task thread's first level of a lanes aggregate, read as the engine's writer reads it (one
 * record object, copied out before the next): every row's count and sum arrive exactly once,
 * each record in its key's partition, for keys that fold, that fill the table again and again, and
 * that switch it off.
 */
class LaneRowsSqlRowsTest {
  private static final int PARTITIONS = 7;
  private static final Lane[] LANES = {Lane.COUNT, Lane.SUM64};

  /** What the writer saw: per key, records, count and sum. */
  private record Seen(long records, Map<Long, long[]> groups) {}

  private static Seen drain(int rows, LongUnaryOperator keyOf) {
    // Rows of (key, 1, value): the key projection reads column 0, the lanes' inputs (the count
    // lane's 1 and the sum lane's value) columns 1 and 2.
    UnsafeProjection keys = project(List.of(column(0)));
    UnsafeProjection inputs = project(List.of(column(1), column(2)));
    UnsafeRow part = new UnsafeRow(1);
    part.pointTo(new byte[16], 16);
    UnsafeProjection partitionId =
        new UnsafeProjection() {
          @Override
          public UnsafeRow apply(InternalRow key) {
            part.setInt(0, (int) Math.floorMod(key.getLong(0), (long) PARTITIONS));
            return part;
          }
        };
    GenericInternalRow row = new GenericInternalRow(3);
    Iterator<InternalRow> in =
        new Iterator<>() {
          private int i;

          @Override
          public boolean hasNext() {
            return i < rows;
          }

          @Override
          public InternalRow next() {
            row.update(0, keyOf.applyAsLong(i));
            row.update(1, 1L);
            row.update(2, (long) i++);
            return row;
          }
        };
    LaneValues values = new LaneValues(LANES, new int[2], new int[2], new int[2]);
    LaneRows lanes = new LaneRows(in, values, keys, inputs, partitionId);
    Map<Long, long[]> groups = new HashMap<>();
    ByteBuffer out = ByteBuffer.allocate(256).order(ByteOrder.LITTLE_ENDIAN);
    long records = 0;
    while (lanes.hasNext()) {
      LaneRecord r = (LaneRecord) lanes.next()._1();
      out.clear();
      r.putKey(out);
      int keyBytes = out.position();
      assertEquals(r.keyBytes(), keyBytes);
      r.putValue(out);
      assertEquals(Lane.inputBytes(LANES), out.position() - keyBytes);
      UnsafeRow key = new UnsafeRow(1);
      key.pointTo(Arrays.copyOf(out.array(), keyBytes), keyBytes);
      long k = key.getLong(0);
      assertEquals(Math.floorMod(k, (long) PARTITIONS), r.partition(), "key " + k);
      assertEquals(Lane.SEEN, out.get(keyBytes + 8));
      long[] g = groups.computeIfAbsent(k, x -> new long[2]);
      g[0] += out.getLong(keyBytes);
      g[1] += out.getLong(keyBytes + 9);
      records++;
    }
    return new Seen(records, groups);
  }

  /** Spark's interpreted projection (its generated one needs the compiler's jars). */
  private static UnsafeProjection project(List<Expression> columns) {
    return InterpretedUnsafeProjection.createProjection(Scala.seq(columns));
  }

  private static Expression column(int i) {
    return new BoundReference(i, LongType$.MODULE$, false);
  }

  private static void assertExact(int rows, LongUnaryOperator keyOf, Seen seen) {
    Map<Long, long[]> want = new HashMap<>();
    for (int i = 0; i < rows; i++) {
      long[] g = want.computeIfAbsent(keyOf.applyAsLong(i), x -> new long[2]);
      g[0]++;
      g[1] += i;
    }
    assertEquals(want.keySet(), seen.groups().keySet());
    List<Long> wrong = new ArrayList<>();
    want.forEach(
        (k, g) -> {
          long[] s = seen.groups().get(k);
          if (s[0] != g[0] || s[1] != g[1]) {
            wrong.add(k);
          }
        });
    assertTrue(wrong.isEmpty(), "groups with a wrong count or sum: " + wrong);
  }

  @Test
  void fewKeysFoldOnTheTaskThread() {
    int rows = 200_000;
    LongUnaryOperator keyOf = i -> i % 4 - 2;
    Seen seen = drain(rows, keyOf);
    assertExact(rows, keyOf, seen);
    assertEquals(4, seen.records(), "four groups, one partial each");
  }

  @Test
  void manyKeysInRunsFillAndEmptyTheTable() {
    int rows = 150_000;
    // More keys than the table holds, cycling: it fills and empties while runs of 8 fold.
    long cycle = LaneRows.ENTRIES_MAX * 3L / 2;
    LongUnaryOperator keyOf = i -> (i / 8) % cycle;
    Seen seen = drain(rows, keyOf);
    assertExact(rows, keyOf, seen);
    assertTrue(seen.records() < rows / 4, seen.records() + " records");
  }

  @Test
  void keysTheTableHoldsFoldThoughSomeFindTheirProbesTaken() {
    int rows = 200_000;
    // Nearly as many keys as the table holds, cycling: at its load a few new keys find all their
    // probes taken; those rows go alone, and the table keeps every other group (were it emptied
    // for each such key, no key would recur in it before the next emptying).
    long cycle = LaneRows.ENTRIES_MAX * 15L / 16;
    LongUnaryOperator keyOf = i -> i % cycle;
    Seen seen = drain(rows, keyOf);
    assertExact(rows, keyOf, seen);
    assertTrue(seen.records() < rows / 20, seen.records() + " records");
    // Some rows did go alone: more records than groups.
    assertTrue(seen.records() > cycle, seen.records() + " records for " + cycle + " groups");
  }

  @Test
  void keysThatNeverRecurSwitchTheTableOff() {
    int rows = 200_000;
    SplittableRandom random = new SplittableRandom(7);
    long[] keys = new long[rows];
    for (int i = 0; i < rows; i++) {
      keys[i] = random.nextLong(150_000);
    }
    LongUnaryOperator keyOf = i -> keys[(int) i];
    Seen seen = drain(rows, keyOf);
    assertExact(rows, keyOf, seen);
    // Past the sample nearly every row passes through on its own.
    assertTrue(seen.records() > rows - LaneRows.SAMPLE_RECORDS / 2, seen.records() + " records");
  }
}
