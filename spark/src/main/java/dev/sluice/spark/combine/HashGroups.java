package dev.sluice.spark.combine;

import java.nio.ByteBuffer;

/**
 * The sort key of a shuffle with an aggregator (reduceByKey, groupByKey, combineByKey, distinct):
 * the record's key hash, so that the engine's sort brings each key's records together and the
 * reduce side folds them in one pass ({@link GroupedCombine}) instead of building a hash map of
 * every key in the Java heap.
 *
 * <p>Equal hashes need not mean equal keys: the reduce side compares keys within a run of equal
 * hashes. Equal keys must have equal hashes in every executor, and {@code hashCode} only promises
 * that within one JVM (an enum's or a plain object's hash is its identity). So a key's hash is
 * used only for classes whose {@code hashCode} is a function of the value ({@link #trusted}: the
 * boxed primitives, String, and Scala tuples of them); any other key is tagged {@link
 * #TAG_OTHER} with hash 0. Those sort after all others in their partition, and the reduce side
 * hands them to Spark's own aggregator.
 *
 * <p>Encoding, {@link #KEY_BYTES} bytes after the partition id: the tag byte ({@link #TAG_HASHED}
 * or {@link #TAG_OTHER}), then the hash big-endian.
 */
public final class HashGroups {
  /** Bytes of the encoded key. */
  public static final int KEY_BYTES = 5;
  /** Tag of a key whose hash is its value's. */
  static final byte TAG_HASHED = 0;
  /** Tag of any other key (hash 0): sorted last, aggregated by Spark. */
  static final byte TAG_OTHER = 1;
  /** Nesting of tuples inside tuples that {@link #trusted} follows. */
  private static final int TUPLE_DEPTH_MAX = 4;

  private HashGroups() {}

  /** Whether {@code key}'s hash is the same in every JVM. */
  static boolean trusted(Object key) {
    return trusted(key, 0);
  }

  private static boolean trusted(Object key, int depth) {
    if (key == null) {
      return true;
    }
    Class<?> c = key.getClass();
    if (c == Long.class
        || c == Integer.class
        || c == String.class
        || c == Short.class
        || c == Byte.class
        || c == Character.class
        || c == Boolean.class
        || c == Double.class
        || c == Float.class) {
      return true;
    }
    if (depth >= TUPLE_DEPTH_MAX) {
      return false;
    }
    // Scala tuples hash their elements (MurmurHash3.productHash), so they are as trusted as those.
    if (c == scala.Tuple2.class) {
      scala.Tuple2<?, ?> t = (scala.Tuple2<?, ?>) key;
      return trusted(t._1(), depth + 1) && trusted(t._2(), depth + 1);
    }
    if (c == scala.Tuple3.class) {
      scala.Tuple3<?, ?, ?> t = (scala.Tuple3<?, ?, ?>) key;
      return trusted(t._1(), depth + 1)
          && trusted(t._2(), depth + 1)
          && trusted(t._3(), depth + 1);
    }
    return false;
  }

  /** The key's hash (0 for null). */
  static int hash(Object key) {
    return key == null ? 0 : key.hashCode();
  }

  /** Writes {@code key}'s encoding at the (little-endian) buffer's position. */
  public static void put(ByteBuffer b, Object key) {
    if (trusted(key)) {
      b.put(TAG_HASHED);
      b.putInt(Integer.reverseBytes(hash(key)));
    } else {
      b.put(TAG_OTHER);
      b.putInt(0);
    }
  }
}
