package dev.sluice.spark.examples;

import dev.sluice.spark.api.BytesOrdering;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Iterator;
import java.util.List;
import java.util.SplittableRandom;
import org.apache.spark.SparkConf;
import org.apache.spark.api.java.JavaPairRDD;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.rdd.OrderedRDDFunctions;
import org.apache.spark.rdd.RDD;
import scala.Tuple2;
import scala.math.Ordering;
import scala.reflect.ClassTag;
import scala.reflect.ClassTag$;

/**
 * HiBench's TeraSort as an RDD job (HiBench's {@code ScalaTeraSort} sorts {@code (byte[] key,
 * byte[] value)} pairs with {@code sortByKey}): TeraGen's records, a 10-byte random key and a
 * 90-byte value (the row id in 12 digits and 78 random hex digits, which lz4 cannot shrink much,
 * so the shuffle moves about the input's size), generated inside the map tasks
 * and sorted by key in unsigned byte order ({@link BytesOrdering}, which Sluice sorts in the
 * engine; under another shuffle manager the same job sorts in Spark's reader).
 */
public final class TeraSortJob {
  /** TeraGen's key and value sizes (bytes). */
  public static final int KEY_BYTES = 10;

  public static final int VALUE_BYTES = 90;

  /** Digits of the row id at the start of each value. */
  private static final int ID_DIGITS = 12;

  private static final byte[] HEX = "0123456789abcdef".getBytes(StandardCharsets.US_ASCII);

  private TeraSortJob() {}

  /** TeraGen's records, {@code records} in all over {@code slices} map tasks. */
  public static JavaPairRDD<byte[], byte[]> teragen(
      JavaSparkContext sc, long records, int slices) {
    return Slices.ids(sc, slices)
        .flatMapToPair(
            slice -> {
              long first = Slices.first(records, slices, slice);
              long n = Slices.share(records, slices, slice);
              SplittableRandom r = new SplittableRandom(0x7e7a + slice);
              return new Iterator<Tuple2<byte[], byte[]>>() {
                long row = first;

                @Override
                public boolean hasNext() {
                  return row < first + n;
                }

                @Override
                public Tuple2<byte[], byte[]> next() {
                  byte[] key = new byte[KEY_BYTES];
                  r.nextBytes(key);
                  byte[] value = new byte[VALUE_BYTES];
                  long digits = row;
                  for (int d = ID_DIGITS - 1; d >= 0; d--) {
                    value[d] = (byte) ('0' + digits % 10);
                    digits /= 10;
                  }
                  long bits = 0;
                  for (int d = ID_DIGITS; d < VALUE_BYTES; d++) {
                    if ((d - ID_DIGITS) % 16 == 0) {
                      bits = r.nextLong();
                    }
                    value[d] = HEX[(int) (bits & 15)];
                    bits >>>= 4;
                  }
                  row++;
                  return new Tuple2<>(key, value);
                }
              };
            });
  }

  /** The records sorted by key into {@code partitions} range partitions. */
  @SuppressWarnings({"unchecked", "rawtypes"})
  public static JavaPairRDD<byte[], byte[]> sorted(
      JavaSparkContext sc, long records, int slices, int partitions) {
    ClassTag any = ClassTag$.MODULE$.Any();
    RDD<Tuple2<byte[], byte[]>> out =
        new OrderedRDDFunctions(
                teragen(sc, records, slices).rdd(), (Ordering) BytesOrdering.INSTANCE, any, any, any)
            .sortByKey(true, partitions);
    return JavaPairRDD.fromRDD(out, any, any);
  }

  /**
   * Sorts and checks, as valsort does: returns {@code {records, keys out of order, checksum}},
   * where the checksum sums a hash of every record (order-independent, so the same input under any
   * shuffle manager gives the same sum) and keys out of order counts adjacent records, within and
   * across partitions, whose keys decrease.
   */
  public static long[] run(JavaSparkContext sc, long records, int slices, int partitions) {
    List<Object[]> parts =
        sorted(sc, records, slices, partitions)
            .mapPartitionsWithIndex(
                (Integer i, Iterator<Tuple2<byte[], byte[]>> it) -> {
                  long count = 0;
                  long unordered = 0;
                  long sum = 0;
                  byte[] first = null;
                  byte[] last = null;
                  while (it.hasNext()) {
                    Tuple2<byte[], byte[]> t = it.next();
                    if (last != null && Arrays.compareUnsigned(last, t._1()) > 0) {
                      unordered++;
                    }
                    if (first == null) {
                      first = t._1();
                    }
                    last = t._1();
                    sum += hash(t);
                    count++;
                  }
                  List<Object[]> one = new ArrayList<>();
                  one.add(new Object[] {i, count, unordered, sum, first, last});
                  return one.iterator();
                },
                true)
            .collect();
    Object[][] byIndex = new Object[parts.size()][];
    for (Object[] p : parts) {
      byIndex[(Integer) p[0]] = p;
    }
    long[] out = new long[3];
    byte[] previous = null;
    for (Object[] p : byIndex) {
      out[0] += (Long) p[1];
      out[1] += (Long) p[2];
      out[2] += (Long) p[3];
      byte[] first = (byte[]) p[4];
      if (first == null) {
        continue;
      }
      if (previous != null && Arrays.compareUnsigned(previous, first) > 0) {
        out[1]++;
      }
      previous = (byte[]) p[5];
    }
    return out;
  }

  /** The checksum {@link #run} computes, over the generated input (no shuffle). */
  public static long inputChecksum(JavaSparkContext sc, long records, int slices) {
    return teragen(sc, records, slices).map(TeraSortJob::hash).reduce(Long::sum);
  }

  private static long hash(Tuple2<byte[], byte[]> t) {
    return 31L * Arrays.hashCode(t._1()) + Arrays.hashCode(t._2());
  }

  public static void main(String[] args) {
    long records = args.length > 0 ? Long.parseLong(args[0]) : 10_000_000L;
    try (JavaSparkContext sc = new JavaSparkContext(new SparkConf().setAppName("TeraSort"))) {
      long t0 = System.nanoTime();
      int p = sc.defaultParallelism();
      long[] r = run(sc, records, p, p);
      System.out.printf(
          "%d records sorted, %d out of order, checksum %d, in %.2f s%n",
          r[0], r[1], r[2], (System.nanoTime() - t0) / 1e9);
    }
  }
}
