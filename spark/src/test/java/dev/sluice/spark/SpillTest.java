package dev.sluice.spark;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.sluice.spark.metrics.SluiceMetrics;
import java.io.IOException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.apache.spark.SparkConf;
import org.apache.spark.api.java.JavaPairRDD;
import org.apache.spark.api.java.JavaSparkContext;
import org.junit.jupiter.api.Test;
import scala.Tuple2;

/**
 * Map output within the executor's memory: with Spark's execution memory cut to a few MiB, map
 * tasks whose output is several times that spill through the engine, and the reduce side still
 * sees every record once.
 */
class SpillTest {
  static final int TASKS = 4;
  static final int PER_TASK = 200_000;
  static final int KEYS = 997;

  /** The value of record j of task t: 100 characters that depend on both. */
  static String value(int t, int j) {
    StringBuilder b = new StringBuilder(100);
    long x = t * 1_000_003L + j;
    while (b.length() < 100) {
      x = x * 6364136223846793005L + 1442695040888963407L;
      b.append(Long.toHexString(x));
    }
    return b.substring(0, 100);
  }

  /** Task t's records (static: the closure must not capture the test instance). */
  static Iterator<Tuple2<Integer, String>> records(int t) {
    return new Iterator<Tuple2<Integer, String>>() {
      int j;

      @Override
      public boolean hasNext() {
        return j < PER_TASK;
      }

      @Override
      public Tuple2<Integer, String> next() {
        int k = (int) ((t * 1_000_003L + j) % KEYS);
        return new Tuple2<>(k, value(t, j++));
      }
    };
  }

  /**
   * A Sluice context whose memory manager has 32 MiB and no reserve: about 19 MiB of execution and
   * storage memory, at most half of it for each of two concurrent tasks.
   */
  static JavaSparkContext smallMemory() throws IOException {
    SparkConf small =
        new SparkConf()
            .set("spark.testing.memory", String.valueOf(32L << 20))
            .set("spark.testing.reservedMemory", "0");
    return SparkContexts.start(
        SluiceShuffleManager.class.getName(), SparkContexts.scratch(), small);
  }

  @Test
  void mapOutputSpillsAndEveryRecordArrivesOnce() throws IOException {
    // Each of two concurrent tasks writes about 22 MiB of serialized output.
    JavaSparkContext sc = smallMemory();
    try {
      List<Integer> tasks = new ArrayList<>();
      for (int t = 0; t < TASKS; t++) {
        tasks.add(t);
      }
      JavaPairRDD<Integer, String> records =
          sc.parallelize(tasks, TASKS)
              .flatMapToPair(SpillTest::records);
      long spillsBefore = SluiceMetrics.mapSpills();
      long spillBytesBefore = SluiceMetrics.spillBytes();
      long recordsBefore = SluiceMetrics.recordsWritten();
      StageTotals totals = StageTotals.watch(sc);
      // groupByKey: no map-side combine, every record crosses the shuffle.
      Map<Integer, Tuple2<Long, Long>> got =
          new HashMap<>(
              records
                  .groupByKey(5)
                  .mapValues(
                      vs -> {
                        long n = 0;
                        long h = 0;
                        for (String v : vs) {
                          n++;
                          h += v.hashCode();
                        }
                        return new Tuple2<>(n, h);
                      })
                  .collectAsMap());
      Map<Integer, Tuple2<Long, Long>> want = new HashMap<>();
      for (int t = 0; t < TASKS; t++) {
        for (int j = 0; j < PER_TASK; j++) {
          int k = (int) ((t * 1_000_003L + j) % KEYS);
          long h = value(t, j).hashCode();
          want.merge(k, new Tuple2<>(1L, h), (a, b) -> new Tuple2<>(a._1() + b._1(), a._2() + b._2()));
        }
      }
      assertEquals(want, got);
      assertEquals(
          (long) TASKS * PER_TASK,
          SluiceMetrics.recordsWritten() - recordsBefore,
          "the shuffle ran through Sluice");
      assertTrue(
          SluiceMetrics.mapSpills() - spillsBefore >= TASKS,
          "map tasks spilled: " + (SluiceMetrics.mapSpills() - spillsBefore));
      // Spark's spill metrics of the map stage (its UI's Spill columns): the bytes the spill
      // files took, exactly, and the execution memory they gave back.
      StageTotals.Totals map = totals.stages(sc).values().iterator().next();
      assertEquals(SluiceMetrics.spillBytes() - spillBytesBefore, map.diskBytesSpilled, "" + map);
      assertTrue(map.memoryBytesSpilled >= 8L << 20, "" + map);
    } finally {
      sc.stop();
    }
  }

  /**
   * A record larger than the execution memory Spark grants the task is handed over all the same
   * and spilled at once: Spark's memory-spilled metric counts the whole of it, as Spark's sorters
   * count the size of what they spill, not only the part Spark granted.
   */
  @Test
  void recordsSparkGrantsTooLittleForCountAsMemorySpilled() throws IOException {
    JavaSparkContext sc = smallMemory();
    try {
      StageTotals totals = StageTotals.watch(sc);
      // One map task of three records of 24 MiB of random bytes each: each more than all of
      // Spark's execution memory (about 19 MiB), so Spark grants a hand-over less than it takes;
      // nothing for lz4 to compress.
      long count =
          sc.parallelize(List.of(0), 1)
              .flatMapToPair(x -> randomRecords(3, 24 << 20))
              .partitionBy(new org.apache.spark.HashPartitioner(2))
              .count();
      assertEquals(3, count);
      StageTotals.Totals map = totals.stages(sc).values().iterator().next();
      assertTrue(map.diskBytesSpilled > 24L << 20, "the records were spilled: " + map);
      // Incompressible records take on disk what they took in memory, and a little framing.
      assertTrue(
          map.memoryBytesSpilled >= map.diskBytesSpilled * 95 / 100,
          "memory spilled counts every record spilled: " + map);
      assertTrue(
          map.peakExecutionMemory >= 24L << 20,
          "the peak counts what the engine held: " + map);
    } finally {
      sc.stop();
    }
  }

  /** {@code n} records of {@code bytes} random bytes, made one at a time. */
  static Iterator<Tuple2<Integer, byte[]>> randomRecords(int n, int bytes) {
    Random r = new Random(42);
    return new Iterator<Tuple2<Integer, byte[]>>() {
      int i;

      @Override
      public boolean hasNext() {
        return i < n;
      }

      @Override
      public Tuple2<Integer, byte[]> next() {
        byte[] b = new byte[bytes];
        r.nextBytes(b);
        return new Tuple2<>(i++, b);
      }
    };
  }
}
