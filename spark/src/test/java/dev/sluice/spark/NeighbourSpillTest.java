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
import java.util.concurrent.ConcurrentLinkedQueue;
import org.apache.spark.TaskContext;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.memory.MemoryConsumer;
import org.apache.spark.memory.MemoryMode;
import org.junit.jupiter.api.Test;
import scala.Tuple2;

/**
 * Spark's consumers of one task spill for each other, and Sluice's map output is one of them: a
 * map task whose rows pass through another memory consumer before they reach Sluice's writer (the
 * sort before a sort-merge join, an aggregate's hash map) gets the memory it asks for while the
 * writer holds the task's share, because the writer spills the engine's output. Without that the
 * other consumer fails the task with Spark's out-of-memory error (TPC-H q04 at sf 10).
 */
class NeighbourSpillTest {
  static final int TASKS = 4;
  static final int PER_TASK = 200_000;
  static final int KEYS = 997;
  /**
   * What the other consumer asks for (7.5 MiB), once the task holds at least {@link #HELD_BYTES}
   * (all of it the writer's) in the second half of its rows: more than the task's share of the
   * pool (about 9.6 MiB with two tasks running) leaves beside the writer's memory, less than the
   * whole share.
   */
  static final long ASK_BYTES = 15L << 19;

  static final long HELD_BYTES = 5L << 19;

  /** Per task: bytes the other consumer asked for and got. */
  static final ConcurrentLinkedQueue<long[]> GRANTS = new ConcurrentLinkedQueue<>();

  /** Another consumer of the task's memory, like Spark's sorters: it holds what it got. */
  static final class Neighbour extends MemoryConsumer {
    Neighbour(TaskContext context) {
      super(
          context.taskMemoryManager(),
          context.taskMemoryManager().pageSizeBytes(),
          MemoryMode.ON_HEAP);
    }

    long take(long bytes) {
      return acquireMemory(bytes);
    }

    void release() {
      freeMemory(getUsed());
    }

    @Override
    public long spill(long size, MemoryConsumer trigger) {
      return 0;
    }
  }

  /**
   * Task t's records; in the second half, once the writer holds {@link #HELD_BYTES} of output,
   * the neighbour asks for {@link #ASK_BYTES} and holds them to the task's end.
   */
  static Iterator<Tuple2<Integer, String>> records(int t) {
    TaskContext context = TaskContext.get();
    return new Iterator<Tuple2<Integer, String>>() {
      int j;
      boolean asked;

      @Override
      public boolean hasNext() {
        return j < PER_TASK;
      }

      @Override
      public Tuple2<Integer, String> next() {
        if (!asked
            && j >= PER_TASK / 2
            && context.taskMemoryManager().getMemoryConsumptionForThisTask() >= HELD_BYTES) {
          asked = true;
          Neighbour n = new Neighbour(context);
          GRANTS.add(new long[] {ASK_BYTES, n.take(ASK_BYTES)});
          context.addTaskCompletionListener(
              (org.apache.spark.util.TaskCompletionListener) c -> n.release());
        }
        int k = (int) ((t * 1_000_003L + j) % KEYS);
        return new Tuple2<>(k, SpillTest.value(t, j++));
      }
    };
  }

  @Test
  void anotherConsumerOfTheTaskGetsTheMapOutputsMemory() throws IOException {
    // As SpillTest: about 19 MiB of execution memory, half of it for each of two tasks at a
    // time, each of which writes about 22 MiB of serialized output.
    JavaSparkContext sc = SpillTest.smallMemory();
    try {
      GRANTS.clear();
      List<Integer> tasks = new ArrayList<>();
      for (int t = 0; t < TASKS; t++) {
        tasks.add(t);
      }
      long spillsBefore = SluiceMetrics.mapSpills();
      Map<Integer, Long> got =
          new HashMap<>(
              sc.parallelize(tasks, TASKS)
                  .flatMapToPair(NeighbourSpillTest::records)
                  .groupByKey(5)
                  .mapValues(
                      vs -> {
                        long h = 0;
                        for (String v : vs) {
                          h += v.hashCode();
                        }
                        return h;
                      })
                  .collectAsMap());
      Map<Integer, Long> want = new HashMap<>();
      for (int t = 0; t < TASKS; t++) {
        for (int j = 0; j < PER_TASK; j++) {
          int k = (int) ((t * 1_000_003L + j) % KEYS);
          want.merge(k, (long) SpillTest.value(t, j).hashCode(), Long::sum);
        }
      }
      assertEquals(want, got, "every record arrived once");
      assertEquals(TASKS, GRANTS.size(), "one request per map task");
      for (long[] g : GRANTS) {
        assertEquals(g[0], g[1], "the neighbour got all it asked for");
      }
      assertTrue(SluiceMetrics.mapSpills() > spillsBefore, "the map output spilled");
    } finally {
      sc.stop();
    }
  }
}
