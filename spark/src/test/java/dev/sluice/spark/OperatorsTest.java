package dev.sluice.spark;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.sluice.spark.api.Agg;
import dev.sluice.spark.examples.WordCountJob;
import dev.sluice.spark.metrics.SluiceMetrics;
import java.io.IOException;
import java.io.RandomAccessFile;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.stream.Stream;
import org.apache.spark.FetchFailed;
import org.apache.spark.api.java.JavaPairRDD;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.scheduler.SparkListener;
import org.apache.spark.scheduler.SparkListenerTaskEnd;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import scala.Tuple2;

/**
 * Sluice's offloaded operators on real Spark (local[2], Sluice as the shuffle manager): results
 * compared key for key with a plain Java fold of the same input; the records must have gone
 * through the engine's writer; a corrupt map output is a fetch failure and is recomputed.
 */
class OperatorsTest {
  private static JavaSparkContext sc;
  private static Path dir;
  private static final AtomicInteger FETCH_FAILURES = new AtomicInteger();

  @BeforeAll
  static void start() throws IOException {
    dir = SparkContexts.scratch();
    sc = SparkContexts.start(SluiceShuffleManager.class.getName(), dir);
    sc.sc()
        .addSparkListener(
            new SparkListener() {
              @Override
              public void onTaskEnd(SparkListenerTaskEnd end) {
                if (end.reason() instanceof FetchFailed) {
                  FETCH_FAILURES.incrementAndGet();
                }
              }
            });
  }

  @AfterAll
  static void stop() {
    sc.stop();
  }

  /** n pairs with keys drawn from {@code keys} distinct values (skewed toward small ones). */
  private static List<Tuple2<Long, Long>> longPairs(int n, int keys, long seed) {
    Random r = new Random(seed);
    List<Tuple2<Long, Long>> out = new ArrayList<>(n);
    for (int i = 0; i < n; i++) {
      long k = (long) (Math.pow(r.nextDouble(), 3) * keys);
      out.add(new Tuple2<>(k, r.nextLong() % 1_000_000L));
    }
    return out;
  }

  private static <K> Map<K, Long> fold(List<Tuple2<K, Long>> in, Agg agg) {
    Map<K, Long> m = new HashMap<>();
    for (Tuple2<K, Long> t : in) {
      long v = t._2();
      m.merge(
          t._1(),
          agg == Agg.COUNT ? 1L : v,
          (a, b) ->
              switch (agg) {
                case SUM -> a + b;
                case COUNT -> a + 1;
                case MIN -> Math.min(a, b);
                case MAX -> Math.max(a, b);
              });
    }
    return m;
  }

  @Test
  void longKeysEveryFunctionMatchesAPlainFold() {
    assertNull(Sluice.fallbackReason(sc.sc()), "the engine runs the operators here");
    List<Tuple2<Long, Long>> in = longPairs(60_000, 5_000, 1);
    JavaPairRDD<Long, Long> rdd = sc.parallelizePairs(in, 6);
    for (Agg agg : Agg.values()) {
      long recordsBefore = SluiceMetrics.recordsWritten();
      Map<Long, Long> got = Sluice.reduceByKey(rdd, agg).collectAsMap();
      assertEquals(fold(in, agg), new HashMap<>(got), agg.toString());
      // The task threads' first level folds the hot keys: fewer records reach the engine, and
      // each of the 6 map tasks still hands over at least one partial per key it saw.
      long written = SluiceMetrics.recordsWritten() - recordsBefore;
      assertTrue(written < in.size() / 2, agg + ": " + written + " records through the engine");
      assertTrue(written >= got.size(), agg + ": " + written + " records for every key");
    }
  }

  @Test
  void theRecordsAnOperatorWritesAreTheRecordsItsReduceTasksRead() {
    // Spark's UI shows a stage's records written beside the next stage's records read. The
    // engine aggregates on the map side, so what the data files hold (and the reduce tasks
    // read) is fewer records than the map tasks handed over: both are the files' count.
    List<Tuple2<Long, Long>> in = longPairs(60_000, 5_000, 3);
    StageTotals totals = StageTotals.watch(sc);
    try {
      long recordsBefore = SluiceMetrics.recordsWritten();
      Map<Long, Long> got = Sluice.reduceByKey(sc.parallelizePairs(in, 6), Agg.SUM).collectAsMap();
      assertEquals(fold(in, Agg.SUM), new HashMap<>(got));
      List<StageTotals.Totals> stages = new ArrayList<>(totals.stages(sc).values());
      assertEquals(2, stages.size(), "" + stages);
      long written = stages.get(0).recordsWritten;
      assertEquals(SluiceMetrics.recordsWritten() - recordsBefore, written, "" + stages);
      assertEquals(written, stages.get(1).recordsRead, "" + stages);
      assertTrue(written >= got.size() && written < in.size() / 2, "" + stages);
      // The UI's Peak Execution Memory: the map tasks' engine output and the reduce tasks'
      // operator hold execution memory, and report its peak as Spark's own writers and
      // aggregates do.
      assertTrue(stages.get(0).peakExecutionMemory > 0, "map stage: " + stages);
      assertTrue(stages.get(1).peakExecutionMemory > 0, "reduce stage: " + stages);
    } finally {
      totals.stop(sc);
    }
  }

  @Test
  void theFirstLevelSwitchesOffForManyKeysAndStaysExact() {
    // 2 map tasks of 70,000 records over 1M keys: few repeats, so each task's table stops. 12
    // reduce tasks keep each task's result under 1 MiB, sent directly: after the corruption
    // test's fetch failure, local mode unregisters the driver's block manager, and a larger result
    // (fetched from it) would be lost.
    List<Tuple2<Long, Long>> in = new ArrayList<>();
    Random r = new Random(17);
    for (int i = 0; i < 140_000; i++) {
      in.add(new Tuple2<>((long) r.nextInt(1_000_000), (long) r.nextInt(1000)));
    }
    JavaPairRDD<Long, Long> rdd = sc.parallelizePairs(in, 2);
    for (Agg agg : Agg.values()) {
      long offBefore = SluiceMetrics.opFirstLevelsOff();
      Map<Long, Long> got =
          Sluice.<Long, Long, Long>reduceByKey(rdd, agg, Long.class, 12).collectAsMap();
      assertEquals(fold(in, agg), new HashMap<>(got), agg.toString());
      assertEquals(2, SluiceMetrics.opFirstLevelsOff() - offBefore, agg + ": tables off");
    }
  }

  @Test
  void stringKeysIntegerValuesKeepTheirTypes() {
    Random r = new Random(2);
    List<Tuple2<String, Integer>> in = new ArrayList<>();
    for (int i = 0; i < 30_000; i++) {
      in.add(new Tuple2<>("w" + r.nextInt(700) + "é", r.nextInt(2_000_001) - 1_000_000));
    }
    JavaPairRDD<String, Integer> rdd = sc.parallelizePairs(in, 5);
    Map<String, Integer> min = new HashMap<>();
    Map<String, Integer> max = new HashMap<>();
    Map<String, Long> sum = new HashMap<>();
    for (Tuple2<String, Integer> t : in) {
      min.merge(t._1(), t._2(), Math::min);
      max.merge(t._1(), t._2(), Math::max);
      sum.merge(t._1(), (long) t._2(), Long::sum);
    }
    Map<String, Integer> gotMin =
        Sluice.<String, Integer, Integer>reduceByKey(rdd, Agg.MIN, Integer.class, 3).collectAsMap();
    Map<String, Integer> gotMax =
        Sluice.<String, Integer, Integer>reduceByKey(rdd, Agg.MAX, Integer.class, 7).collectAsMap();
    Map<String, Long> gotSum =
        Sluice.<String, Integer, Long>reduceByKey(rdd, Agg.SUM, Integer.class, 4).collectAsMap();
    assertEquals(min, new HashMap<>(gotMin));
    assertEquals(max, new HashMap<>(gotMax));
    assertEquals(sum, new HashMap<>(gotSum));
    assertTrue(gotMin.values().iterator().next() instanceof Integer);
  }

  @Test
  void doubleValuesWithIntegerKeys() {
    Random r = new Random(3);
    List<Tuple2<Integer, Double>> in = new ArrayList<>();
    for (int i = 0; i < 20_000; i++) {
      in.add(new Tuple2<>(r.nextInt(300), r.nextGaussian() * 100));
    }
    JavaPairRDD<Integer, Double> rdd = sc.parallelizePairs(in, 4);
    Map<Integer, Double> min = new HashMap<>();
    Map<Integer, Double> sum = new HashMap<>();
    for (Tuple2<Integer, Double> t : in) {
      min.merge(t._1(), t._2(), Math::min);
      sum.merge(t._1(), t._2(), Double::sum);
    }
    Map<Integer, Double> gotMin =
        Sluice.<Integer, Double, Double>reduceByKey(rdd, Agg.MIN, Double.class, 4).collectAsMap();
    Map<Integer, Double> gotSum =
        Sluice.<Integer, Double, Double>reduceByKey(rdd, Agg.SUM, Double.class, 4).collectAsMap();
    assertEquals(min, new HashMap<>(gotMin));
    assertEquals(sum.keySet(), gotSum.keySet());
    // Sums of doubles depend on the order of addition: equal to a relative 1e-9.
    for (Map.Entry<Integer, Double> e : sum.entrySet()) {
      double want = e.getValue();
      double got = gotSum.get(e.getKey());
      assertTrue(Math.abs(got - want) <= 1e-9 * Math.max(1, Math.abs(want)), e.getKey() + "");
    }
  }

  @Test
  void theBenchmarkJobAgreesWithSparksReduceByKey() {
    JavaPairRDD<Long, Long> in = dev.sluice.spark.examples.ReduceByKeyJob.pairs(sc, 150_001, 2_000, 3);
    Map<Long, Long> spark = new HashMap<>(in.reduceByKey(Long::sum, 4).collectAsMap());
    Map<Long, Long> sluice =
        new HashMap<>(Sluice.<Long, Long, Long>reduceByKey(in, Agg.SUM, Long.class, 5).collectAsMap());
    assertEquals(2_000, spark.size());
    assertEquals(spark, sluice);
    assertEquals(2_000, dev.sluice.spark.examples.ReduceByKeyJob.run(sc, 150_001, 2_000, 3, 4, true));
  }

  @Test
  void theWordCountJobAgreesWithSparksReduceByKey() {
    String text = dir.resolve("wordcount-text").toString();
    long words = WordCountJob.generate(sc, text, 300_000, 3);
    Map<String, Long> spark = new HashMap<>(WordCountJob.counts(sc, text, 4, false).collectAsMap());
    Map<String, Long> sluice = new HashMap<>(WordCountJob.counts(sc, text, 5, true).collectAsMap());
    assertEquals(WordCountJob.WORDS, spark.size(), "every word of the list occurs");
    assertEquals(words, spark.values().stream().mapToLong(Long::longValue).sum());
    assertEquals(spark, sluice);
    long[] summary = WordCountJob.run(sc, text, 4, true);
    assertEquals(WordCountJob.WORDS, summary[0]);
    assertEquals(words, summary[1]);
  }

  @Test
  @SuppressWarnings({"unchecked", "rawtypes"})
  void aValueOfAnotherTypeFailsTheJobWithAClearMessage() {
    JavaPairRDD ints = sc.parallelizePairs(List.of(new Tuple2<>(1L, 5), new Tuple2<>(2L, 6)), 1);
    Exception e =
        org.junit.jupiter.api.Assertions.assertThrows(
            Exception.class,
            () -> Sluice.reduceByKey((JavaPairRDD<Long, Long>) ints, Agg.SUM).collect());
    assertTrue(
        String.valueOf(e.getMessage()).contains("declared over Long values, got java.lang.Integer"),
        e.getMessage());
  }

  @Test
  void byteArrayKeysAreRefusedNotReducedApart() {
    // Spark's hash partitioner places an array by its identity: equal arrays would be reduced in
    // different partitions and come back as several keys.
    List<Tuple2<byte[], Long>> in = new ArrayList<>();
    for (int i = 0; i < 1_000; i++) {
      in.add(new Tuple2<>("k".getBytes(java.nio.charset.StandardCharsets.UTF_8), 1L));
    }
    Exception e =
        org.junit.jupiter.api.Assertions.assertThrows(
            Exception.class,
            () -> Sluice.reduceByKey(sc.parallelizePairs(in, 4), Agg.SUM, Long.class, 8).collect());
    assertTrue(String.valueOf(e.getMessage()).contains("not byte[]"), e.getMessage());
  }

  @Test
  void aStringKeyUtf8CannotEncodeIsRefusedNotMergedWithAnother() {
    // A lone surrogate would be encoded as '?', the same bytes as the key "?".
    Exception e =
        org.junit.jupiter.api.Assertions.assertThrows(
            Exception.class,
            () -> {
              List<String> keys = List.of("\uD800", "?", "a\uDC00b");
              Sluice.distinct(sc.parallelize(keys, 1), 1).collect();
            });
    assertTrue(String.valueOf(e.getMessage()).contains("unpaired surrogate"), e.getMessage());
    // Paired surrogates and '?' itself are keys like any other.
    List<String> fine = List.of("?", "\uD83D\uDE00", "a?b", "\uD83D\uDE00?");
    List<String> got = Sluice.distinct(sc.parallelize(fine, 2), 3).collect();
    assertEquals(new HashSet<>(fine), new HashSet<>(got));
  }

  @Test
  void distinctMatchesAHashSet() {
    Random r = new Random(4);
    List<String> in = new ArrayList<>();
    for (int i = 0; i < 40_000; i++) {
      in.add("k" + r.nextInt(9_000));
    }
    List<String> got = Sluice.distinct(sc.parallelize(in, 4), 6).collect();
    assertEquals(new HashSet<>(in).size(), got.size(), "no key twice");
    assertEquals(new HashSet<>(in), new HashSet<>(got));
  }

  @Test
  void aCorruptMapOutputIsRecomputedNotReadWrong() throws IOException {
    List<Tuple2<Long, Long>> in = longPairs(200_000, 100_000, 5);
    JavaPairRDD<Long, Long> sums = Sluice.reduceByKey(sc.parallelizePairs(in, 4), Agg.SUM, Long.class, 3);
    Map<Long, Long> want = fold(in, Agg.SUM);
    assertEquals(want, new HashMap<>(sums.collectAsMap()));
    // Flip one byte in the middle of every map output written so far; the second action reuses
    // the shuffle's map outputs, so its reduce tasks read the damaged files.
    int flipped = 0;
    try (Stream<Path> files = Files.walk(dir)) {
      for (Path p : files.filter(p -> p.toString().endsWith(".data")).toList()) {
        try (RandomAccessFile f = new RandomAccessFile(p.toFile(), "rw")) {
          if (f.length() > 200) {
            long at = f.length() / 2;
            f.seek(at);
            int b = f.read();
            f.seek(at);
            f.write(b ^ 0x5a);
            flipped++;
          }
        }
      }
    }
    assertTrue(flipped > 0, "map outputs to damage");
    int failuresBefore = FETCH_FAILURES.get();
    assertEquals(want, new HashMap<>(sums.collectAsMap()));
    assertTrue(FETCH_FAILURES.get() > failuresBefore, "the damage was detected as a fetch failure");
  }
}
