package dev.sluice.spark.sort;

import org.apache.spark.serializer.Serializer;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;

/**
 * The framing of Spark SQL's shuffle rows as {@code UnsafeRowSerializer} writes them: each row's
 * size as a big-endian int, then the row's bytes, whose size is a multiple of the row's 8-byte
 * words. The map side writes rows in it without the serializer ({@code
 * shuffle.UnsafeRowFastPath}), and the readers of plain and sorted row shuffles point rows at it
 * in decoded blocks.
 */
public final class RowFraming {
  /** The serializer whose format this is. */
  public static final String SERIALIZER_CLASS =
      "org.apache.spark.sql.execution.UnsafeRowSerializer";

  /** Bytes of the row size in front of the row. */
  public static final int SIZE_BYTES = 4;

  /** An {@code UnsafeRow}'s size is a multiple of this many bytes (its words). */
  public static final int ROW_ALIGN_BYTES = 8;

  private RowFraming() {}

  /** The row size the framing puts at {@code at} in {@code bytes} (big-endian). */
  public static int sizeAt(byte[] bytes, int at) {
    return (bytes[at] & 0xff) << 24
        | (bytes[at + 1] & 0xff) << 16
        | (bytes[at + 2] & 0xff) << 8
        | (bytes[at + 3] & 0xff);
  }

  /**
   * The bytes every {@code UnsafeRow} of {@code numFields} fields has before its variable-length
   * part: its null bits and one 8-byte slot per field. A row a reader is handed that is smaller
   * has Spark's getters read past it.
   */
  public static int fixedBytes(int numFields) {
    return UnsafeRow.calculateBitSetWidthInBytes(numFields) + ROW_ALIGN_BYTES * numFields;
  }

  /** Whether {@code serializer} writes records in this framing. */
  public static boolean covers(Serializer serializer) {
    return serializer.getClass().getName().equals(SERIALIZER_CLASS);
  }
}
