package dev.sluice.spark;

import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.sluice.spark.api.Agg;
import dev.sluice.spark.metrics.SluiceMetrics;
import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Function;
import org.apache.spark.HashPartitioner;
import org.apache.spark.api.java.JavaFutureAction;
import org.apache.spark.api.java.JavaPairRDD;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.rdd.OrderedRDDFunctions;
import org.apache.spark.scheduler.SparkListener;
import org.apache.spark.scheduler.SparkListenerTaskEnd;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import scala.Tuple2;
import scala.math.Ordering;

/**
 * A cancelled job's reduce task stops at its next record when its thread is not interrupted
 * (Spark's default, {@code spark.job.interruptOnCancel} off), on each of the reader's native
 * paths, as Spark's own reader does (Spark's {@code JobCancellationSuite}, "interruptible iterator
 * of shuffle reader"): a key ordering merged in the engine, an offloaded operator's results, and
 * Spark's aggregator over records grouped by key hash.
 */
class CancelTest {
  /**
   * Records each job's one reduce task (one reduce partition in each case) would take; the action
   * sleeps {@link #SLEEP_MS} on each.
   */
  private static final int RECORDS = 3_000;

  private static final long SLEEP_MS = 5;

  /** Records the running job's reduce task took; the first one opens {@link #started}. */
  private static final AtomicInteger TAKEN = new AtomicInteger();

  private static volatile CountDownLatch started;

  private static JavaSparkContext sc;
  private static Path dir;

  @BeforeAll
  static void start() throws IOException {
    dir = SparkContexts.scratch();
    sc = SparkContexts.start(SluiceShuffleManager.class.getName(), dir);
  }

  @AfterAll
  static void stop() {
    sc.stop();
  }

  private static JavaPairRDD<Long, Long> pairs() {
    List<Tuple2<Long, Long>> in = new ArrayList<>(RECORDS);
    for (long i = 0; i < RECORDS; i++) {
      in.add(new Tuple2<>(i, i));
    }
    return sc.parallelizePairs(in, 4);
  }

  /**
   * Runs {@code reduce(pairs)}'s records through a slow action, cancels the job once its reduce
   * task took one, waits for that task to end, and checks it took fewer than all of them.
   */
  private static void stopsEarly(
      String what, Function<JavaPairRDD<Long, Long>, JavaPairRDD<?, ?>> reduce) throws Exception {
    TAKEN.set(0);
    started = new CountDownLatch(1);
    CountDownLatch ended = new CountDownLatch(1);
    SparkListener listener =
        new SparkListener() {
          @Override
          public void onTaskEnd(SparkListenerTaskEnd end) {
            if ("ResultTask".equals(end.taskType())) {
              ended.countDown();
            }
          }
        };
    sc.sc().addSparkListener(listener);
    sc.setLocalProperty("spark.job.interruptOnCancel", "false");
    try {
      JavaFutureAction<Void> job =
          reduce
              .apply(pairs())
              .foreachAsync(
                  r -> {
                    started.countDown();
                    Thread.sleep(SLEEP_MS);
                    TAKEN.incrementAndGet();
                  });
      assertTrue(started.await(60, TimeUnit.SECONDS), what + ": the reduce task did not start");
      job.cancel(true);
      // Unread, a reduce task takes RECORDS x SLEEP_MS (15 s): it ends well within the wait.
      assertTrue(ended.await(120, TimeUnit.SECONDS), what + ": the reduce task did not end");
      int taken = TAKEN.get();
      assertTrue(taken < RECORDS, what + ": the cancelled task read on, " + taken + " records");
    } finally {
      sc.setLocalProperty("spark.job.interruptOnCancel", null);
      sc.sc().removeSparkListener(listener);
    }
  }

  @SuppressWarnings({"unchecked", "rawtypes"})
  private static JavaPairRDD<Long, Long> sortedWithin(
      JavaPairRDD<Long, Long> rdd, HashPartitioner partitioner) {
    scala.reflect.ClassTag any = scala.reflect.ClassTag$.MODULE$.Any();
    OrderedRDDFunctions f =
        new OrderedRDDFunctions(rdd.rdd(), (Ordering) Ordering.Long$.MODULE$, any, any, any);
    return JavaPairRDD.fromRDD(f.repartitionAndSortWithinPartitions(partitioner), any, any);
  }

  @Test
  void aKeyOrderingMergedInTheEngine() throws Exception {
    long before = SluiceMetrics.sortedReads();
    // Scala's rdd.repartitionAndSortWithinPartitions: Ordering.Long, which the engine sorts by (the
    // Java API's comparators it does not).
    stopsEarly("sort", p -> sortedWithin(p, new HashPartitioner(1)));
    assertTrue(SluiceMetrics.sortedReads() > before, "the sort was not merged in the engine");
  }

  @Test
  void anOffloadedOperatorsResults() throws Exception {
    assertNull(Sluice.fallbackReason(sc.sc()), "the engine runs the operators here");
    stopsEarly("offloaded sum", p -> Sluice.reduceByKey(p, Agg.SUM, Long.class, 1));
  }

  @Test
  void sparksAggregatorOverRecordsGroupedByHash() throws Exception {
    long before = SluiceMetrics.groupedReads();
    stopsEarly("reduceByKey", p -> p.reduceByKey(Long::sum, 1));
    assertTrue(
        SluiceMetrics.groupedReads() > before, "the aggregator did not read grouped records");
  }
}
