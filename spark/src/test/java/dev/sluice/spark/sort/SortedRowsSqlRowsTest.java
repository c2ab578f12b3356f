package dev.sluice.spark.sort;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import dev.sluice.spark.api.SluiceException;
import java.io.ByteArrayOutputStream;
import java.nio.ByteBuffer;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Deque;
import java.util.List;
import java.util.Random;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.unsafe.Platform;
import org.junit.jupiter.api.Test;

/**
 * The native {@code ORDER BY} reader ({@link SortedRows}) on result buffers whose row sizes do not
 * fit them: the sizes came across the shuffle inside records whose own framing the engine checked,
 * so only this reader can find them wrong. It points each row inside its buffer or fails with a
 * {@link SluiceException}; a row it served stays as it was when {@code hasNext} refills.
 */
class SortedRowsSqlRowsTest {
  /** Result buffers handed out in turn, as the native merge would: (records, bytes) each. */
  private static final class Buffers implements SortedRows.Chunks {
    private final Deque<Object[]> left = new ArrayDeque<>();
    private ByteBuffer buf = ByteBuffer.allocate(0);

    Buffers add(int records, byte[] bytes) {
      left.add(new Object[] {records, bytes});
      return this;
    }

    @Override
    public int refill() {
      if (left.isEmpty()) {
        return 0;
      }
      Object[] next = left.poll();
      ByteBuffer direct = ByteBuffer.allocateDirect(Math.max(1, ((byte[]) next[1]).length));
      direct.put((byte[]) next[1]).flip();
      buf = direct;
      return (Integer) next[0];
    }

    @Override
    public ByteBuffer buffer() {
      return buf;
    }
  }

  private static byte[] framed(byte[]... rows) {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    for (byte[] r : rows) {
      out.writeBytes(ByteBuffer.allocate(4).putInt(r.length).array());
      out.writeBytes(r);
    }
    return out.toByteArray();
  }

  /** An 8-byte-aligned row of one long field (what UnsafeRow holds for a bigint column). */
  private static byte[] longRow(long v) {
    return ByteBuffer.allocate(16).order(java.nio.ByteOrder.LITTLE_ENDIAN).putLong(0).putLong(v).array();
  }

  /** Reads every row, checking each lies in its array and the one before it did not move. */
  private static List<byte[]> readAll(SortedRows rows) {
    List<byte[]> got = new ArrayList<>();
    UnsafeRow held = null;
    while (rows.hasNext()) {
      if (held != null) {
        assertArrayEquals(got.get(got.size() - 1), held.getBytes(), "a held row moved");
      }
      UnsafeRow row = (UnsafeRow) rows.next()._2();
      byte[] base = (byte[]) row.getBaseObject();
      long at = row.getBaseOffset() - Platform.BYTE_ARRAY_OFFSET;
      assertTrue(
          at >= 0 && at + row.getSizeInBytes() <= base.length,
          "row of " + row.getSizeInBytes() + " bytes at " + at + " of " + base.length);
      got.add(row.getBytes());
      held = row;
    }
    return got;
  }

  @Test
  void wholeRowsAcrossBuffersReadBack() {
    Buffers in =
        new Buffers()
            .add(2, framed(longRow(1), longRow(2)))
            .add(1, framed(longRow(3)));
    List<byte[]> got = readAll(new SortedRows(in, 1));
    assertEquals(3, got.size());
    assertArrayEquals(longRow(3), got.get(2));
  }

  @Test
  void aRowSizePastItsBufferIsRefused() {
    byte[] bytes = framed(longRow(1), longRow(2));
    // The second row's size says 4 KiB, the buffer has 16 bytes left: pointing the row there would
    // read past the array.
    ByteBuffer.wrap(bytes).putInt(20, 4096);
    SortedRows rows = new SortedRows(new Buffers().add(2, bytes), 1);
    rows.next();
    SluiceException e = assertThrows(SluiceException.class, rows::next);
    assertTrue(e.getMessage().contains("a row of 4096 bytes"), e.getMessage());
  }

  @Test
  void theFixedPartIsWhatSparksRowWriterWritesForFixedWidthFields() {
    for (int n : new int[] {0, 1, 2, 63, 64, 65, 200}) {
      org.apache.spark.sql.catalyst.expressions.codegen.UnsafeRowWriter w =
          new org.apache.spark.sql.catalyst.expressions.codegen.UnsafeRowWriter(n);
      w.resetRowWriter();
      for (int i = 0; i < n; i++) {
        w.write(i, (long) i);
      }
      assertEquals(w.getRow().getSizeInBytes(), RowFraming.fixedBytes(n), n + " fields");
    }
  }

  @Test
  void aRowSmallerThanItsFixedSlotsIsRefused() {
    // A row of one field is 16 bytes at least (null bits, one slot); an 8-byte one would have
    // Spark read its field from the next row's bytes.
    SortedRows rows = new SortedRows(new Buffers().add(2, framed(longRow(1), new byte[8])), 1);
    rows.next();
    SluiceException e = assertThrows(SluiceException.class, rows::next);
    assertTrue(e.getMessage().contains("a row of 8 bytes"), e.getMessage());
  }

  @Test
  void aBufferHoldingOtherThanItsRecordsIsRefused() {
    byte[] two = framed(longRow(1), longRow(2));
    SluiceException more =
        assertThrows(SluiceException.class, () -> readAll(new SortedRows(new Buffers().add(1, two), 1)));
    assertTrue(more.getMessage().contains("after its last record"), more.getMessage());
    SluiceException fewer =
        assertThrows(
            SluiceException.class, () -> readAll(new SortedRows(new Buffers().add(3, two), 1)));
    assertTrue(fewer.getMessage().contains("records missing"), fewer.getMessage());
  }

  /** Random buffers with one forged size or count: whole rows, or a SluiceException. */
  @Test
  void forgedBuffersReadWholeOrFail() {
    Random rnd = new Random(1129L);
    int refused = 0;
    for (int iter = 0; iter < 3000; iter++) {
      Buffers in = new Buffers();
      int buffers = 1 + rnd.nextInt(3);
      int forgedAt = rnd.nextInt(buffers);
      boolean changed = false;
      String what = "";
      for (int c = 0; c < buffers; c++) {
        int n = 1 + rnd.nextInt(5);
        byte[][] rows = new byte[n][];
        for (int i = 0; i < n; i++) {
          // Rows of one field: 16 bytes (null bits and its slot) and more.
          rows[i] = new byte[8 * (2 + rnd.nextInt(4))];
          rnd.nextBytes(rows[i]);
        }
        byte[] bytes = framed(rows);
        int records = n;
        if (c == forgedAt) {
          if (rnd.nextBoolean()) {
            // 0 records is the end of the results (the native side never hands out bytes then).
            records = 1 + rnd.nextInt(n + 2);
          } else {
            int r = rnd.nextInt(n);
            int at = 0;
            for (int i = 0; i < r; i++) {
              at += 4 + rows[i].length;
            }
            int size = rnd.nextBoolean() ? rnd.nextInt() : rows[r].length + rnd.nextInt(17) - 8;
            ByteBuffer.wrap(bytes).putInt(at, size);
            changed = size != rows[r].length;
            what = "row " + r + " of " + n + " sized " + size + " not " + rows[r].length;
          }
          changed |= records != n;
        }
        in.add(records, bytes);
      }
      try {
        readAll(new SortedRows(in, 1));
        if (changed) {
          fail("a forged buffer read without failing at iteration " + iter + ": " + what);
        }
      } catch (SluiceException e) {
        if (!changed) {
          fail("a buffer as written refused at iteration " + iter + ": " + e.getMessage());
        }
        refused++;
      }
    }
    assertTrue(refused > 1000, refused + " of 3000 refused");
  }
}
