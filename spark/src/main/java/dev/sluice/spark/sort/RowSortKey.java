package dev.sluice.spark.sort;

import dev.sluice.spark.api.Limits;
import dev.sluice.spark.api.SluiceException;
import dev.sluice.spark.api.SluiceSetting;
import java.io.Serializable;
import java.nio.ByteBuffer;
import java.util.Arrays;
import java.util.Objects;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.unsafe.Platform;

/**
 * A Spark SQL sort order over columns of an {@link UnsafeRow}, encoded as bytes that compare
 * (unsigned, lexicographically, a prefix first) exactly as Spark SQL orders the rows: the key the
 * engine sorts a {@code ORDER BY}'s rows by.
 *
 * <p>Each column in order of the sort:
 *
 * <ul>
 *   <li>a null flag byte: {@code NULLS FIRST} writes 0 for null and 1 otherwise, {@code NULLS
 *       LAST} the other way round; a null column writes nothing after its flag (two nulls are
 *       equal and the next columns stay aligned);
 *   <li>integral types (byte, short, int, long, and date and timestamps, which are an int and a
 *       long inside the row): big-endian with the sign bit flipped;
 *   <li>float and double: the IEEE bits with the sign bit flipped for positive values and all bits
 *       flipped for negative ones, after making {@code -0.0} equal to {@code 0.0} and every NaN
 *       the same NaN, larger than any number (Spark SQL's {@code compareDoubles});
 *   <li>boolean: one byte, false first;
 *   <li>decimal: one of at most 18 digits is a long inside the row and encodes as one; a wider
 *       one (Spark keeps its unscaled value as big-endian two's complement bytes, at most 16)
 *       is sign-extended to 16 bytes with the sign bit flipped. A column has one scale, so the
 *       unscaled values order as the decimals do;
 *   <li>string (UTF-8 binary collation) and binary, as the last column and ascending: the bytes
 *       themselves, which is {@code UTF8String}'s and Spark's binary order;
 *   <li>string and binary anywhere else: the bytes with every 0x00 written as 0x00 0xFF, then
 *       the terminator 0x00 0x00. No encoded value is a prefix of another, and a shorter value
 *       that is a prefix of a longer one ends in 0x00 0x00 where the longer one continues with a
 *       byte above 0x00 or with 0x00 0xFF, so it sorts first, and the next columns compare only
 *       between equal values;
 *   <li>descending: the value's encoded bytes complemented (the prefix-free encoding above makes
 *       that exact for strings too).
 * </ul>
 *
 * <p>Which orders qualify is decided on the driver ({@code dev.sluice.spark.sql.NativeSortRule});
 * this class only encodes, on the map side.
 */
public final class RowSortKey implements Serializable {
  private static final long serialVersionUID = 1L;

  public static final int BOOLEAN = 0;
  public static final int BYTE = 1;
  public static final int SHORT = 2;
  public static final int INT = 3;
  public static final int LONG = 4;
  public static final int FLOAT = 5;
  public static final int DOUBLE = 6;
  /** UTF-8 bytes or binary: variable width. */
  public static final int BYTES = 7;
  /** A decimal of more than 18 digits (16 bytes encoded). */
  public static final int DECIMAL = 8;
  /** Bytes of an encoded wide decimal: 38 digits fit 16 bytes of two's complement. */
  static final int DECIMAL_BYTES = 16;
  /** Bytes of the terminator of an escaped variable-width value. */
  private static final int TERMINATOR_BYTES = 2;

  private final int[] ordinals;
  private final int[] kinds;
  private final boolean[] descending;
  private final boolean[] nullsFirst;
  /** Bytes of every column's fixed part (flag and fixed-width value), non-null. */
  private final int fixedBytes;

  /** A sort key over the row's columns {@code ordinals}, each of kind {@code kinds[i]}. */
  public RowSortKey(int[] ordinals, int[] kinds, boolean[] descending, boolean[] nullsFirst) {
    int n = ordinals.length;
    if (n == 0 || kinds.length != n || descending.length != n || nullsFirst.length != n) {
      throw new IllegalArgumentException("a sort key needs one kind and direction per column");
    }
    int fixed = 0;
    for (int i = 0; i < n; i++) {
      if (kinds[i] < BOOLEAN || kinds[i] > DECIMAL) {
        throw new IllegalArgumentException("no sort key kind " + kinds[i]);
      }
      fixed += 1 + width(kinds[i]);
    }
    this.ordinals = ordinals.clone();
    this.kinds = kinds.clone();
    this.descending = descending.clone();
    this.nullsFirst = nullsFirst.clone();
    this.fixedBytes = fixed;
  }

  private static final String[] KIND_NAMES = {
    "boolean", "byte", "short", "int", "long", "float", "double", "bytes", "decimal"
  };

  /** Whether column {@code i} is a variable-width one written escaped (not last, or descending). */
  private boolean escaped(int i) {
    return kinds[i] == BYTES && (i != kinds.length - 1 || descending[i]);
  }

  /**
   * Equal columns, kinds and directions: the key is part of its plan node's canonical form, by
   * which Spark and {@code ShuffleReuse} find equal subtrees of a query.
   */
  @Override
  public boolean equals(Object o) {
    return o instanceof RowSortKey k
        && Arrays.equals(ordinals, k.ordinals)
        && Arrays.equals(kinds, k.kinds)
        && Arrays.equals(descending, k.descending)
        && Arrays.equals(nullsFirst, k.nullsFirst);
  }

  @Override
  public int hashCode() {
    return Objects.hash(
        Arrays.hashCode(ordinals),
        Arrays.hashCode(kinds),
        Arrays.hashCode(descending),
        Arrays.hashCode(nullsFirst));
  }

  /** The columns as plan output shows them: {@code [#2 bytes asc nulls first]}. */
  @Override
  public String toString() {
    StringBuilder s = new StringBuilder("[");
    for (int i = 0; i < ordinals.length; i++) {
      s.append(i == 0 ? "" : ", ").append('#').append(ordinals[i]).append(' ');
      s.append(KIND_NAMES[kinds[i]]).append(descending[i] ? " desc" : " asc");
      s.append(nullsFirst[i] ? " nulls first" : " nulls last");
    }
    return s.append(']').toString();
  }

  /** Bytes of a fixed-width kind's value (0 for {@link #BYTES}). */
  static int width(int kind) {
    switch (kind) {
      case BOOLEAN:
      case BYTE:
        return 1;
      case SHORT:
        return 2;
      case INT:
      case FLOAT:
        return 4;
      case LONG:
      case DOUBLE:
        return 8;
      case DECIMAL:
        return DECIMAL_BYTES;
      default:
        return 0;
    }
  }

  /** Bytes of {@code row}'s encoded key. */
  int bytes(UnsafeRow row) {
    long n = fixedBytes;
    for (int i = 0; i < ordinals.length; i++) {
      int o = ordinals[i];
      if (row.isNullAt(o)) {
        n -= width(kinds[i]);
      } else if (kinds[i] == BYTES) {
        long size = (int) row.getLong(o);
        n += escaped(i) ? size + zeros(row, o) + TERMINATOR_BYTES : size;
      }
    }
    // Strings of many zero bytes double in the key: past the record limit no record can carry it.
    if (n > Limits.RECORD_BYTES_MAX) {
      throw new SluiceException(
          "Sluice: a sort key of "
              + n
              + " bytes (its strings' zero bytes escaped) is larger than the record limit of "
              + Limits.sizeText(Limits.RECORD_BYTES_MAX)
              + "; run this sort on Spark SQL's own ("
              + SluiceSetting.SQL_SORT.key
              + "=false)");
    }
    return (int) n;
  }

  /** {@code row}'s encoded key. */
  public byte[] encode(UnsafeRow row) {
    byte[] k = new byte[bytes(row)];
    put(ByteBuffer.wrap(k).order(java.nio.ByteOrder.LITTLE_ENDIAN), row);
    return k;
  }

  /** Writes {@code row}'s encoded key at the buffer's position ({@link #bytes} of them). */
  void put(ByteBuffer b, UnsafeRow row) {
    for (int i = 0; i < ordinals.length; i++) {
      int o = ordinals[i];
      if (row.isNullAt(o)) {
        b.put((byte) (nullsFirst[i] ? 0 : 1));
        continue;
      }
      b.put((byte) (nullsFirst[i] ? 1 : 0));
      long flip = descending[i] ? -1L : 0L;
      switch (kinds[i]) {
        case BOOLEAN:
          b.put((byte) ((row.getBoolean(o) ? 1 : 0) ^ flip));
          break;
        case BYTE:
          b.put((byte) ((row.getByte(o) ^ Byte.MIN_VALUE) ^ flip));
          break;
        case SHORT:
          b.putShort(Short.reverseBytes((short) ((row.getShort(o) ^ Short.MIN_VALUE) ^ flip)));
          break;
        case INT:
          b.putInt(Integer.reverseBytes((int) ((row.getInt(o) ^ Integer.MIN_VALUE) ^ flip)));
          break;
        case LONG:
          b.putLong(Long.reverseBytes((row.getLong(o) ^ Long.MIN_VALUE) ^ flip));
          break;
        case FLOAT:
          b.putInt(Integer.reverseBytes((int) (floatBits(row.getFloat(o)) ^ flip)));
          break;
        case DOUBLE:
          b.putLong(Long.reverseBytes(doubleBits(row.getDouble(o)) ^ flip));
          break;
        case DECIMAL:
          putDecimal(b, row, o, (byte) flip);
          break;
        default:
          if (escaped(i)) {
            putEscaped(b, row, o, (byte) flip);
          } else {
            putBytes(b, row, o);
          }
      }
    }
  }

  /**
   * A wide decimal's unscaled value (big-endian two's complement, at most 16 bytes, in the row's
   * variable-length region) sign-extended to 16 bytes, sign bit flipped, then XOR {@code flip}.
   */
  private static void putDecimal(ByteBuffer b, UnsafeRow row, int ordinal, byte flip) {
    long offsetAndSize = row.getLong(ordinal);
    long at = row.getBaseOffset() + (offsetAndSize >>> 32);
    int size = (int) offsetAndSize;
    if (size < 1 || size > DECIMAL_BYTES) {
      throw new IllegalStateException(
          "a decimal of " + size + " bytes in column " + ordinal + " (1 to 16 expected)");
    }
    Object base = row.getBaseObject();
    byte sign = Platform.getByte(base, at) < 0 ? (byte) -1 : 0;
    for (int j = 0; j < DECIMAL_BYTES; j++) {
      int from = j - (DECIMAL_BYTES - size);
      byte v = from < 0 ? sign : Platform.getByte(base, at + from);
      if (j == 0) {
        v ^= Byte.MIN_VALUE;
      }
      b.put((byte) (v ^ flip));
    }
  }

  /** Zero bytes in a variable-width column (each is written as two when escaped). */
  private static int zeros(UnsafeRow row, int ordinal) {
    long offsetAndSize = row.getLong(ordinal);
    long at = row.getBaseOffset() + (offsetAndSize >>> 32);
    int size = (int) offsetAndSize;
    Object base = row.getBaseObject();
    int n = 0;
    for (int j = 0; j < size; j++) {
      if (Platform.getByte(base, at + j) == 0) {
        n++;
      }
    }
    return n;
  }

  /** A variable-width column escaped and terminated (see the class comment), XOR {@code flip}. */
  private static void putEscaped(ByteBuffer b, UnsafeRow row, int ordinal, byte flip) {
    long offsetAndSize = row.getLong(ordinal);
    long at = row.getBaseOffset() + (offsetAndSize >>> 32);
    int size = (int) offsetAndSize;
    Object base = row.getBaseObject();
    for (int j = 0; j < size; j++) {
      byte v = Platform.getByte(base, at + j);
      b.put((byte) (v ^ flip));
      if (v == 0) {
        b.put((byte) (0xFF ^ flip));
      }
    }
    b.put(flip);
    b.put(flip);
  }

  /** A float's order-preserving bits (see the class comment). */
  static int floatBits(float v) {
    int bits = v == 0.0f ? 0 : Float.floatToIntBits(v); // -0.0 is 0.0; one NaN
    return bits < 0 ? ~bits : bits ^ Integer.MIN_VALUE;
  }

  /** A double's order-preserving bits (see the class comment). */
  static long doubleBits(double v) {
    long bits = v == 0.0 ? 0L : Double.doubleToLongBits(v);
    return bits < 0 ? ~bits : bits ^ Long.MIN_VALUE;
  }

  /** A variable-width column's bytes, copied straight out of the row. */
  private static void putBytes(ByteBuffer b, UnsafeRow row, int ordinal) {
    long offsetAndSize = row.getLong(ordinal);
    int offset = (int) (offsetAndSize >>> 32);
    int size = (int) offsetAndSize;
    if (row.getBaseObject() instanceof byte[] bytes) {
      b.put(bytes, (int) (row.getBaseOffset() - Platform.BYTE_ARRAY_OFFSET) + offset, size);
    } else {
      b.put(row.getBinary(ordinal));
    }
  }
}
