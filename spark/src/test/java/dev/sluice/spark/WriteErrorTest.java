package dev.sluice.spark;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.sluice.spark.metrics.SluiceMetrics;
import java.io.IOException;
import java.util.Iterator;
import org.apache.spark.SparkException;
import org.apache.spark.api.java.JavaSparkContext;
import org.junit.jupiter.api.Test;
import scala.Tuple2;

/**
 * A map task whose records throw a {@code java.lang.Error} part-way through {@code write()}:
 * Spark's shuffle writer protocol calls {@code stop(false)} only for an {@code Exception}, so only
 * the task-completion listener frees the native attempt. The engine's count of live attempts must
 * be back to zero once the job has failed, the next job must still run, and the engine must hold
 * no buffer, operator or result bytes after it.
 */
class WriteErrorTest {
  static final int RECORDS = 50_000;

  /** Records of one task; task 1 throws an AssertionError (an Error) after 20,000 records. */
  static Iterator<Tuple2<Integer, Integer>> records(int task) {
    return new Iterator<Tuple2<Integer, Integer>>() {
      int j;

      @Override
      public boolean hasNext() {
        return j < RECORDS;
      }

      @Override
      public Tuple2<Integer, Integer> next() {
        if (task == 1 && j == 20_000) {
          throw new AssertionError("sluice test: an Error thrown inside write()");
        }
        j++;
        return new Tuple2<>(j % 101, 1);
      }
    };
  }

  /** The engine's live attempts once no task of the context is running (waits up to 60 s). */
  static long liveAttemptsOnceTasksEnd(JavaSparkContext sc) {
    long deadline = System.nanoTime() + 60_000_000_000L;
    while (System.nanoTime() < deadline
        && (sc.statusTracker().getActiveStageIds().length > 0
            || SluiceMetrics.liveMapAttempts() > 0)) {
      try {
        Thread.sleep(50);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        break;
      }
    }
    return SluiceMetrics.liveMapAttempts();
  }

  @Test
  void anErrorInWriteLeavesNoNativeAttemptAlive() throws IOException {
    JavaSparkContext sc =
        SparkContexts.start(SluiceShuffleManager.class.getName(), SparkContexts.scratch());
    try {
      SparkException e =
          assertThrows(
              SparkException.class,
              () ->
                  sc.parallelize(java.util.Arrays.asList(0, 1, 2, 3), 4)
                      .mapPartitionsToPair(it -> records(it.next()))
                      .partitionBy(new org.apache.spark.HashPartitioner(5))
                      .count());
      assertTrue(e.getMessage().contains("an Error thrown inside write()"), e.getMessage());
      // The job's other tasks are killed when it fails and end on their own threads.
      assertEquals(0, liveAttemptsOnceTasksEnd(sc), "native map attempts left alive");
      // The executor and the engine go on: a later job over the same shuffle manager works.
      long n =
          sc.parallelize(java.util.Arrays.asList(0, 2, 3), 3)
              .mapPartitionsToPair(it -> records(it.next()))
              .partitionBy(new org.apache.spark.HashPartitioner(5))
              .count();
      assertEquals(3L * RECORDS, n);
      assertEquals(0, liveAttemptsOnceTasksEnd(sc));
      // Nor does the failed attempt leave bytes in the engine: buffers, operator state and
      // results are all given back, free pages stay within their limit.
      long[] held = SluiceMetrics.engineHeld();
      assertEquals(
          "0,0,0",
          held[0] + "," + held[1] + "," + held[2],
          "engine bytes left: " + java.util.Arrays.toString(held));
      assertTrue(held[3] <= held[4], java.util.Arrays.toString(held));
    } finally {
      sc.stop();
    }
  }
}
