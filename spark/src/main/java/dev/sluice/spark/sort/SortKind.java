package dev.sluice.spark.sort;

import dev.sluice.spark.api.BytesOrdering;
import dev.sluice.spark.combine.HashGroups;
import java.nio.ByteBuffer;
import scala.math.Ordering;

/**
 * The kinds of key Sluice sorts natively (a {@code sortByKey}): the ascending natural order of
 * Long, Integer or String keys, as Scala's implicit orderings give it, and of {@code byte[]} keys
 * under {@link BytesOrdering}. Each key is encoded so that
 * comparing the bytes (unsigned, lexicographically, a prefix first) orders keys exactly as the
 * ordering does:
 *
 * <ul>
 *   <li>Long, Integer: big-endian with the sign bit flipped (negative numbers first).
 *   <li>String: its UTF-16 code units, big-endian, which is {@link String#compareTo}'s order
 *       (UTF-8 would differ for characters beyond U+FFFF against U+E000..U+FFFF).
 *   <li>byte[]: the bytes themselves.
 * </ul>
 *
 * Another ordering (descending, a custom comparator, Java's comparator wrappers) is not native:
 * such a shuffle still runs on Sluice and Spark's reader sorts its records. Spark SQL's sorts have
 * a kind of their own, {@link #ROWS}: the key is encoded from the row's columns ({@link
 * RowSortKey}).
 */
public enum SortKind {
  /** Not sorted by the engine. */
  NONE,
  LONG,
  INT,
  STRING,
  BYTES,
  /**
   * Spark SQL rows sorted by some of their columns ({@link RowSortKey}, {@link
   * SortedRowSerializer}).
   */
  ROWS,
  /**
   * Records of a shuffle with an aggregator, grouped by key hash for a one-pass fold on the
   * reduce side ({@link HashGroups}); not an order anyone sees.
   */
  HASH;

  /** The key kind an ordering sorts natively, or {@link #NONE}. */
  public static SortKind of(Ordering<?> ordering) {
    if (ordering == Ordering.Long$.MODULE$) {
      return LONG;
    }
    if (ordering == Ordering.Int$.MODULE$) {
      return INT;
    }
    if (ordering == Ordering.String$.MODULE$) {
      return STRING;
    }
    if (ordering instanceof BytesOrdering) {
      return BYTES;
    }
    return NONE;
  }

  /** Bytes of {@code key} encoded; {@link #NONE} and {@link #ROWS} encode no key here. */
  public int bytes(Object key) {
    switch (this) {
      case LONG:
        return 8;
      case INT:
        return 4;
      case BYTES:
        return ((byte[]) key).length;
      case HASH:
        return HashGroups.KEY_BYTES;
      case STRING:
        return 2 * ((String) key).length();
      default:
        throw new IllegalStateException(this + " keys are not encoded one by one");
    }
  }

  /** Writes {@code key} encoded at the (little-endian) buffer's position. */
  public void put(ByteBuffer b, Object key) {
    switch (this) {
      case LONG:
        b.putLong(Long.reverseBytes((Long) key ^ Long.MIN_VALUE));
        return;
      case INT:
        b.putInt(Integer.reverseBytes((Integer) key ^ Integer.MIN_VALUE));
        return;
      case BYTES:
        b.put((byte[]) key);
        return;
      case HASH:
        HashGroups.put(b, key);
        return;
      case STRING:
        String s = (String) key;
        for (int i = 0; i < s.length(); i++) {
          b.putShort(Short.reverseBytes((short) s.charAt(i)));
        }
        return;
      default:
        throw new IllegalStateException(this + " keys are not encoded one by one");
    }
  }
}
