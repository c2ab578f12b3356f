package dev.sluice.spark.sort;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.sluice.spark.api.Limits;
import dev.sluice.spark.api.SluiceException;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.junit.jupiter.api.Test;

/** The length of a sort key whose strings hold zero bytes, which its encoding escapes. */
class RowSortKeySqlRowsTest {
  /** A key by a string (escaped: another column follows), then an int. */
  private static final RowSortKey KEY =
      new RowSortKey(
          new int[] {0, 1},
          new int[] {RowSortKey.BYTES, RowSortKey.INT},
          new boolean[] {false, false},
          new boolean[] {true, true});

  /** A row of two fields: a string of {@code size} bytes {@code fill}, and the int 7. */
  private static UnsafeRow row(int size, byte fill) {
    int fixed = 8 + 2 * 8;
    byte[] bytes = new byte[fixed + ((size + 7) & ~7)];
    java.util.Arrays.fill(bytes, fixed, fixed + size, fill);
    UnsafeRow r = new UnsafeRow(2);
    r.pointTo(bytes, bytes.length);
    r.setLong(0, ((long) fixed << 32) | size);
    r.setInt(1, 7);
    return r;
  }

  @Test
  void aStringsZeroBytesAreCountedTwice() {
    // Flag, 3 bytes with their zero escaped (4), terminator (2); flag, int (4).
    UnsafeRow r = row(3, (byte) 0);
    byte[] k = KEY.encode(r);
    assertEquals(1 + 3 + 3 + 2 + 1 + 4, k.length);
    assertArrayEquals(new byte[] {1, 0, -1, 0, -1, 0, -1, 0, 0}, java.util.Arrays.copyOf(k, 9));
  }

  @Test
  void aKeyPastTheRecordLimitIsRefused() {
    // 400 MiB of zero bytes escape to 800 MiB: over the limit of 768 MiB, and once past 1 GiB
    // of them an int would have wrapped. The row itself is under the limit.
    int size = 400 << 20;
    assertTrue(2L * size > Limits.RECORD_BYTES_MAX && size < Limits.RECORD_BYTES_MAX);
    SluiceException e = assertThrows(SluiceException.class, () -> KEY.encode(row(size, (byte) 0)));
    assertTrue(e.getMessage().contains("sort key of " + (1 + 2L * size + 2 + 1 + 4)), e.getMessage());
    // The same length of other bytes fits.
    assertEquals(1 + size + 2 + 1 + 4, KEY.bytes(row(size, (byte) 'a')));
  }
}
