package dev.sluice.spark;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.sluice.spark.api.SluiceSetting;
import dev.sluice.spark.combine.GroupedCombine;
import dev.sluice.spark.combine.HashGroups;
import dev.sluice.spark.combine.MapCombiner;
import dev.sluice.spark.metrics.SluiceMetrics;
import java.io.IOException;
import java.io.Serializable;
import java.math.BigInteger;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import org.apache.spark.HashPartitioner;
import org.apache.spark.SparkConf;
import org.apache.spark.api.java.JavaPairRDD;
import org.apache.spark.api.java.JavaSparkContext;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import scala.Tuple2;

/**
 * Spark's own aggregations (reduceByKey, aggregateByKey, combineByKey, groupByKey) on Sluice's
 * hash-grouped path ({@link HashGroups}, {@link MapCombiner}, {@link GroupedCombine}), on real
 * Spark in local[2]: each result compared key for key with a plain Java fold of the same input,
 * with the path each case is built to take checked through {@link SluiceMetrics}.
 */
class GroupedCombineTest {
  private static JavaSparkContext sc;

  @BeforeAll
  static void start() throws IOException {
    sc = SparkContexts.start(SluiceShuffleManager.class.getName(), SparkContexts.scratch());
  }

  @AfterAll
  static void stop() {
    sc.stop();
  }

  /** Task t's n records: keys uniform in [0, keys), values in [0, 1000). */
  static Iterator<Tuple2<Long, Long>> uniform(int t, int n, long keys) {
    SplittableRandom r = new SplittableRandom(0x5eed + t);
    List<Tuple2<Long, Long>> out = new ArrayList<>(n);
    for (int i = 0; i < n; i++) {
      out.add(new Tuple2<>(r.nextLong(keys), r.nextLong(1000)));
    }
    return out.iterator();
  }

  static JavaPairRDD<Long, Long> uniformRdd(int tasks, int perTask, long keys) {
    List<Integer> ids = new ArrayList<>();
    for (int t = 0; t < tasks; t++) {
      ids.add(t);
    }
    return sc.parallelize(ids, tasks).flatMapToPair(t -> uniform(t, perTask, keys));
  }

  static <K> Map<K, Long> sums(Iterable<? extends Tuple2<K, Long>> records) {
    Map<K, Long> want = new HashMap<>();
    for (Tuple2<K, Long> r : records) {
      want.merge(r._1(), r._2(), Long::sum);
    }
    return want;
  }

  /** Asserts equal maps, naming the first keys that differ (the maps are large). */
  static <K, V> void assertSameMap(Map<K, V> want, Map<K, V> got) {
    List<String> diff = new ArrayList<>();
    for (Map.Entry<K, V> e : want.entrySet()) {
      if (!got.containsKey(e.getKey())
          || !java.util.Objects.equals(got.get(e.getKey()), e.getValue())) {
        diff.add(describe(e.getKey()) + ": want " + e.getValue() + ", got " + got.get(e.getKey()));
      }
    }
    for (K k : got.keySet()) {
      if (!want.containsKey(k)) {
        diff.add(describe(k) + ": not wanted, got " + got.get(k));
      }
    }
    assertTrue(
        diff.isEmpty(),
        diff.size() + " keys differ: " + diff.subList(0, Math.min(10, diff.size())));
  }

  /**
   * The result as a Java map, each key asserted to come once ({@code collectAsMap} would merge
   * keys that Scala's cooperative equality equates, such as 20L and 20).
   */
  static <K, V> Map<K, V> collect(JavaPairRDD<K, V> rdd) {
    Map<K, V> m = new HashMap<>();
    for (Tuple2<K, V> t : rdd.collect()) {
      assertTrue(!m.containsKey(t._1()), "key " + describe(t._1()) + " came twice");
      m.put(t._1(), t._2());
    }
    return m;
  }

  static String describe(Object k) {
    return k == null ? "null" : k + " (" + k.getClass().getSimpleName() + ")";
  }

  @Test
  void manyKeysSwitchTheTableOffAndStayExact() {
    int tasks = 2;
    int perTask = 3 * MapCombiner.SAMPLE_RECORDS / 2;
    List<Tuple2<Long, Long>> all = new ArrayList<>();
    for (int t = 0; t < tasks; t++) {
      uniform(t, perTask, 400_000).forEachRemaining(all::add);
    }
    long offBefore = SluiceMetrics.mapCombinesOff();
    long groupedBefore = SluiceMetrics.groupedReads();
    Map<Long, Long> got =
        collect(uniformRdd(tasks, perTask, 400_000).reduceByKey(Long::sum, 5));
    assertSameMap(sums(all), got);
    assertEquals(tasks, SluiceMetrics.mapCombinesOff() - offBefore, "every map task's table off");
    assertEquals(5, SluiceMetrics.groupedReads() - groupedBefore, "every reduce task folded runs");
  }

  @Test
  void hotKeysAndHashCollisionsFoldExactly() {
    // Long keys i and i << 32 share Long.hashCode (i), (i << 32) | i hashes to 0: runs of
    // several keys.
    List<Tuple2<Long, Long>> in = new ArrayList<>();
    SplittableRandom r = new SplittableRandom(3);
    for (int i = 0; i < 60_000; i++) {
      long base = r.nextLong(300);
      long key =
          switch (r.nextInt(4)) {
            case 0 -> base;
            case 1 -> base << 32;
            case 2 -> (base << 32) | base;
            default -> r.nextLong(8); // hot keys
          };
      in.add(new Tuple2<>(key, r.nextLong(-500, 500)));
    }
    long offBefore = SluiceMetrics.mapCombinesOff();
    Map<Long, Long> got =
        collect(sc.parallelizePairs(in, 3).reduceByKey(Long::sum, 4));
    assertSameMap(sums(in), got);
    assertEquals(0, SluiceMetrics.mapCombinesOff() - offBefore, "hot keys keep the table on");
    assertEquals(Long.hashCode(7L), Long.hashCode(7L << 32), "the keys above do collide");
  }

  /** A key class Sluice does not trust to hash alike in every JVM. */
  static final class Point implements Serializable {
    final int x;
    final int y;

    Point(int x, int y) {
      this.x = x;
      this.y = y;
    }

    @Override
    public boolean equals(Object o) {
      return o instanceof Point p && p.x == x && p.y == y;
    }

    @Override
    public int hashCode() {
      return 31 * x + y;
    }

    @Override
    public String toString() {
      return "Point(" + x + ", " + y + ")";
    }
  }

  @Test
  void untrustedKeysGoToSparksAggregatorBesideTrustedOnes() {
    List<Tuple2<Object, Long>> in = new ArrayList<>();
    SplittableRandom r = new SplittableRandom(5);
    for (int i = 0; i < 40_000; i++) {
      int k = r.nextInt(200);
      Object key =
          switch (r.nextInt(6)) {
            case 0 -> (long) k;
            case 1 -> "s" + k;
            case 2 -> new Point(k, k % 7);
            case 3 -> new Tuple2<>(k % 13, "t" + k);
            case 4 -> new Tuple2<>(new Point(k % 5, 1), k);
            default -> k < 20 ? null : k;
          };
      in.add(new Tuple2<>(key, (long) r.nextInt(100)));
    }
    Map<Object, Long> got =
        collect(sc.parallelizePairs(in, 4).reduceByKey(Long::sum, 3));
    assertSameMap(sums(in), got);
    assertTrue(got.containsKey(null), "the null key is a group");
    assertTrue(got.containsKey(new Point(1, 1)), "untrusted keys arrive");
  }

  /** A count that turns into a BigInteger at 50: a combiner the map table cannot hold. */
  static Object add(Object a, Object b) {
    BigInteger s =
        BigInteger.valueOf(((Number) a).longValue())
            .add(BigInteger.valueOf(((Number) b).longValue()));
    return s.compareTo(BigInteger.valueOf(50)) < 0 ? (Object) s.longValue() : s;
  }

  @Test
  void combinersTheTableCannotHoldGoToSparksCombine() {
    List<Tuple2<Integer, Long>> in = new ArrayList<>();
    SplittableRandom r = new SplittableRandom(9);
    for (int i = 0; i < 30_000; i++) {
      in.add(new Tuple2<>(r.nextInt(100), r.nextLong(40)));
    }
    JavaPairRDD<Integer, Long> rdd = sc.parallelizePairs(in, 3);
    long sparkBefore = SluiceMetrics.mapCombinesBySpark();
    // Sets from the first record on.
    Map<Integer, HashSet<Long>> sets =
        collect(
            rdd.aggregateByKey(
                new HashSet<Long>(),
                4,
                (s, v) -> {
                  s.add(v);
                  return s;
                },
                (a, b) -> {
                  a.addAll(b);
                  return a;
                }));
    Map<Integer, HashSet<Long>> wantSets = new HashMap<>();
    for (Tuple2<Integer, Long> t : in) {
      wantSets.computeIfAbsent(t._1(), k -> new HashSet<>()).add(t._2());
    }
    assertSameMap(wantSets, sets);
    // Numbers first, a BigInteger once a key's count reaches 50 within a task.
    Map<Integer, Object> counts =
        collect(
            rdd.combineByKey(v -> (Object) 1L, (c, v) -> add(c, 1L), GroupedCombineTest::add, 5));
    Map<Integer, Long> wantCounts = new HashMap<>();
    for (Tuple2<Integer, Long> t : in) {
      wantCounts.merge(t._1(), 1L, Long::sum);
    }
    Map<Integer, Long> gotCounts = new HashMap<>();
    counts.forEach((k, c) -> gotCounts.put(k, ((Number) c).longValue()));
    assertSameMap(wantCounts, gotCounts);
    assertEquals(
        6, SluiceMetrics.mapCombinesBySpark() - sparkBefore, "both jobs' 3 map tasks each");
  }

  @Test
  void withoutMapSideCombineValuesAreFoldedOnTheReduceSide() {
    JavaPairRDD<Long, Long> rdd = uniformRdd(3, 20_000, 3_000);
    List<Tuple2<Long, Long>> in = rdd.collect();
    Map<Long, List<Long>> want = new HashMap<>();
    for (Tuple2<Long, Long> t : in) {
      want.computeIfAbsent(t._1(), k -> new ArrayList<>()).add(t._2());
    }
    want.values().forEach(Collections::sort);
    Map<Long, List<Long>> got = new HashMap<>();
    for (Tuple2<Long, Iterable<Long>> g : rdd.groupByKey(4).collect()) {
      List<Long> vs = new ArrayList<>();
      g._2().forEach(vs::add);
      Collections.sort(vs);
      assertEquals(null, got.put(g._1(), vs), "each key once");
    }
    assertSameMap(want, got);
    // combineByKey with the map-side combine off: (sum, count) per key.
    Map<Long, Tuple2<Long, Long>> avg =
        collect(
            rdd.combineByKey(
                v -> new Tuple2<>(v, 1L),
                (c, v) -> new Tuple2<>(c._1() + v, c._2() + 1),
                (a, b) -> new Tuple2<>(a._1() + b._1(), a._2() + b._2()),
                new HashPartitioner(3),
                false,
                null));
    Map<Long, Tuple2<Long, Long>> wantAvg = new HashMap<>();
    want.forEach(
        (k, vs) ->
            wantAvg.put(
                k, new Tuple2<>(vs.stream().mapToLong(Long::longValue).sum(), (long) vs.size())));
    assertSameMap(wantAvg, avg);
  }

  /** Index of the long String key of record j of task t (of {@code keys}). */
  static int longKeyIndex(int t, int j, int keys) {
    return (t * 7 + j * 13) % keys;
  }

  @Test
  void longStringKeysAreWrittenOutBeforeTheyFillTheHeap() {
    // 300 keys of 40,000 characters (80,000 bytes counted each): 24 MB of resident keys, past
    // the table's 16 MiB bound, so the table is written out while the task runs.
    int keys = 300;
    int perTask = 1_000;
    Map<String, Long> got =
        collect(
            sc.parallelize(List.of(0, 1), 2)
                .flatMapToPair(
                    t -> {
                      List<Tuple2<String, Long>> out = new ArrayList<>();
                      for (int j = 0; j < perTask; j++) {
                        out.add(new Tuple2<>(longKeyIndex(t, j, keys) + "x".repeat(40_000), 1L));
                      }
                      return out.iterator();
                    })
                .reduceByKey(Long::sum, 3)
                .mapToPair(kv -> new Tuple2<>(kv._1().substring(0, kv._1().length() - 40_000), kv._2())));
    Map<String, Long> want = new HashMap<>();
    for (int t = 0; t < 2; t++) {
      for (int j = 0; j < perTask; j++) {
        want.merge(String.valueOf(longKeyIndex(t, j, keys)), 1L, Long::sum);
      }
    }
    assertSameMap(want, got);
  }

  @Test
  void distinctAndCountByKeyRunOnTheSamePath() {
    List<Tuple2<String, Long>> in = new ArrayList<>();
    SplittableRandom r = new SplittableRandom(13);
    for (int i = 0; i < 20_000; i++) {
      in.add(new Tuple2<>("k" + r.nextInt(700), r.nextLong(3)));
    }
    JavaPairRDD<String, Long> rdd = sc.parallelizePairs(in, 3);
    long groupedBefore = SluiceMetrics.groupedReads();
    assertEquals(new HashSet<>(in), new HashSet<>(rdd.distinct(4).collect()));
    Map<String, Long> counts = new HashMap<>();
    for (Tuple2<String, Long> t : in) {
      counts.merge(t._1(), 1L, Long::sum);
    }
    Map<String, Long> got = new HashMap<>();
    rdd.countByKey().forEach((k, v) -> got.put(k, (Long) v));
    assertEquals(counts, got);
    assertTrue(SluiceMetrics.groupedReads() - groupedBefore >= 4, "distinct folded by hash");
  }

  @Test
  void theSettingOffKeepsSparksCombineWithTheSameResult() throws IOException {
    // A second context in this JVM: stop the shared one for the duration.
    sc.stop();
    JavaSparkContext off =
        SparkContexts.start(
            SluiceShuffleManager.class.getName(),
            SparkContexts.scratch(),
            new SparkConf().set(SluiceSetting.GROUPED_COMBINE.key, "false"));
    try {
      List<Tuple2<Long, Long>> in = new ArrayList<>();
      uniform(0, 50_000, 5_000).forEachRemaining(in::add);
      long groupedBefore = SluiceMetrics.groupedReads();
      long mapsBefore = SluiceMetrics.mapOutputs();
      Map<Long, Long> got =
          collect(off.parallelizePairs(in, 2).reduceByKey(Long::sum, 3));
      assertSameMap(sums(in), got);
      assertEquals(0, SluiceMetrics.groupedReads() - groupedBefore);
      assertEquals(2, SluiceMetrics.mapOutputs() - mapsBefore, "still written by Sluice");
    } finally {
      off.stop();
      sc = SparkContexts.start(SluiceShuffleManager.class.getName(), SparkContexts.scratch());
    }
  }
}
