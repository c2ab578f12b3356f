package dev.sluice.spark.api;

import java.util.Arrays;
import scala.math.Ordering;

/**
 * The natural order of {@code byte[]} keys: bytes compared unsigned, left to right, a prefix before
 * any longer key it starts (as {@link Arrays#compareUnsigned(byte[], byte[])}, Hadoop's {@code
 * WritableComparator.compareBytes} and TeraSort's key order). Scala has no implicit ordering for
 * arrays, so a {@code sortByKey} over {@code byte[]} keys names one; naming this one lets Sluice
 * sort those keys in the engine ({@link dev.sluice.spark.sort.SortKind}), where any other ordering
 * leaves the sort to Spark's reader.
 *
 * <pre>{@code
 * new OrderedRDDFunctions(rdd, BytesOrdering.INSTANCE, keyTag, valueTag, pairTag).sortByKey(true,
 * n) }</pre>
 *
 * (Scala: {@code implicit val ord: Ordering[Array[Byte]] =
 * dev.sluice.spark.api.BytesOrdering.INSTANCE} before {@code rdd.sortByKey()}.) The same object
 * works under any shuffle manager.
 */
public final class BytesOrdering implements Ordering<byte[]> {
  private static final long serialVersionUID = 1L;

  /** The one instance; deserialization resolves to it. */
  public static final BytesOrdering INSTANCE = new BytesOrdering();

  private BytesOrdering() {}

  @Override
  public int compare(byte[] x, byte[] y) {
    return Arrays.compareUnsigned(x, y);
  }

  private Object readResolve() {
    return INSTANCE;
  }

  @Override
  public String toString() {
    return "BytesOrdering (unsigned lexicographic)";
  }
}
