package dev.sluice.spark;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.sluice.spark.api.BytesOrdering;
import dev.sluice.spark.examples.TeraSortJob;
import dev.sluice.spark.metrics.SluiceMetrics;
import java.io.IOException;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Random;
import org.apache.spark.api.java.JavaPairRDD;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.rdd.OrderedRDDFunctions;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import scala.Tuple2;
import scala.math.Ordering;
import scala.reflect.ClassTag;
import scala.reflect.ClassTag$;

/**
 * sortByKey with Scala's natural orderings (what {@code rdd.sortByKey()} uses) on real Spark:
 * map tasks sort in the engine, reduce tasks merge natively; the result must be the input in
 * key order, and the engine's merge must have run.
 */
class SortTest {
  private static JavaSparkContext sc;

  @BeforeAll
  static void start() throws IOException {
    sc = SparkContexts.start(SluiceShuffleManager.class.getName(), SparkContexts.scratch());
  }

  @AfterAll
  static void stop() {
    sc.stop();
  }

  /** Scala's {@code rdd.sortByKey(ascending = true, partitions)} with the given ordering. */
  @SuppressWarnings({"unchecked", "rawtypes"})
  private static <K, V> List<Tuple2<K, V>> sortByKey(
      JavaPairRDD<K, V> rdd, Ordering<?> ordering, int partitions) {
    ClassTag any = ClassTag$.MODULE$.Any();
    OrderedRDDFunctions f =
        new OrderedRDDFunctions(rdd.rdd(), (Ordering) ordering, any, any, any);
    return ((org.apache.spark.rdd.RDD<Tuple2<K, V>>) f.sortByKey(true, partitions))
        .toJavaRDD()
        .collect();
  }

  private static <K, V> void assertSortedPermutation(
      List<Tuple2<K, V>> in, List<Tuple2<K, V>> got, Comparator<K> order) {
    assertEquals(in.size(), got.size());
    for (int i = 1; i < got.size(); i++) {
      K a = got.get(i - 1)._1();
      K b = got.get(i)._1();
      assertTrue(order.compare(a, b) <= 0, "out of order at " + i + ": " + a + " > " + b);
    }
    Comparator<Tuple2<K, V>> whole =
        Comparator.<Tuple2<K, V>, K>comparing(Tuple2::_1, order)
            .thenComparing(t -> String.valueOf(t._2()));
    List<Tuple2<K, V>> want = new ArrayList<>(in);
    want.sort(whole);
    List<Tuple2<K, V>> sortedGot = new ArrayList<>(got);
    sortedGot.sort(whole);
    assertEquals(want, sortedGot, "the same records");
  }

  @Test
  void longKeysIncludingNegatives() {
    Random r = new Random(11);
    List<Tuple2<Long, String>> in = new ArrayList<>();
    for (int i = 0; i < 50_000; i++) {
      long k = r.nextInt(4) == 0 ? r.nextLong() : r.nextInt(2000) - 1000;
      in.add(new Tuple2<>(k, "v" + i));
    }
    long before = SluiceMetrics.sortedReads();
    List<Tuple2<Long, String>> got =
        sortByKey(sc.parallelizePairs(in, 4), Ordering.Long$.MODULE$, 5);
    assertSortedPermutation(in, got, Comparator.naturalOrder());
    assertTrue(SluiceMetrics.sortedReads() - before >= 5, "the engine merged every partition");
  }

  @Test
  void stringKeysInJavasOrder() {
    Random r = new Random(12);
    String[] pieces = {"a", "ab", "b", "é", "\uE000", "\uD83D\uDE00", "Z", ""};
    List<Tuple2<String, Integer>> in = new ArrayList<>();
    for (int i = 0; i < 30_000; i++) {
      StringBuilder b = new StringBuilder();
      for (int n = r.nextInt(4); n > 0; n--) {
        b.append(pieces[r.nextInt(pieces.length)]);
      }
      in.add(new Tuple2<>(b.toString(), i));
    }
    long before = SluiceMetrics.sortedReads();
    List<Tuple2<String, Integer>> got =
        sortByKey(sc.parallelizePairs(in, 3), Ordering.String$.MODULE$, 4);
    assertSortedPermutation(in, got, Comparator.naturalOrder());
    assertTrue(SluiceMetrics.sortedReads() > before, "the engine merged");
  }

  @Test
  void byteArrayKeysInUnsignedOrder() {
    Random r = new Random(14);
    byte[][] pieces = {{}, {0}, {0, 0}, {(byte) 0x7f}, {(byte) 0x80}, {(byte) 0xff}, {1, 2, 3}};
    List<Tuple2<byte[], Integer>> in = new ArrayList<>();
    for (int i = 0; i < 30_000; i++) {
      byte[] k;
      if (r.nextBoolean()) {
        k = new byte[r.nextInt(13)];
        r.nextBytes(k);
      } else {
        java.io.ByteArrayOutputStream b = new java.io.ByteArrayOutputStream();
        for (int n = r.nextInt(4); n > 0; n--) {
          b.writeBytes(pieces[r.nextInt(pieces.length)]);
        }
        k = b.toByteArray();
      }
      in.add(new Tuple2<>(k, i));
    }
    long before = SluiceMetrics.sortedReads();
    List<Tuple2<byte[], Integer>> got =
        sortByKey(sc.parallelizePairs(in, 4), BytesOrdering.INSTANCE, 4);
    assertEquals(in.size(), got.size());
    for (int i = 1; i < got.size(); i++) {
      byte[] a = got.get(i - 1)._1();
      byte[] b = got.get(i)._1();
      assertTrue(
          java.util.Arrays.compareUnsigned(a, b) <= 0,
          "out of order at " + i + ": " + java.util.Arrays.toString(a) + " > "
              + java.util.Arrays.toString(b));
    }
    // The same records: each value once, still with its own key.
    byte[][] keyOf = new byte[in.size()][];
    for (Tuple2<byte[], Integer> t : got) {
      assertTrue(keyOf[t._2()] == null, "value " + t._2() + " twice");
      keyOf[t._2()] = t._1();
    }
    for (Tuple2<byte[], Integer> t : in) {
      assertArrayEquals(t._1(), keyOf[t._2()], "key of value " + t._2());
    }
    assertTrue(SluiceMetrics.sortedReads() - before >= 4, "the engine merged every partition");
  }

  @Test
  void teraSortJobMatchesItsInput() {
    long records = 40_000;
    long[] got = TeraSortJob.run(sc, records, 3, 4);
    long inputSum = TeraSortJob.inputChecksum(sc, records, 3);
    assertEquals(records, got[0], "records");
    assertEquals(0, got[1], "keys out of order");
    assertEquals(inputSum, got[2], "checksum of the sorted records against the input's");
  }

  @Test
  void intKeys() {
    Random r = new Random(13);
    List<Tuple2<Integer, Long>> in = new ArrayList<>();
    for (int i = 0; i < 20_000; i++) {
      in.add(new Tuple2<>(r.nextInt(), (long) i));
    }
    List<Tuple2<Integer, Long>> got =
        sortByKey(sc.parallelizePairs(in, 4), Ordering.Int$.MODULE$, 3);
    assertSortedPermutation(in, got, Comparator.naturalOrder());
  }
}
