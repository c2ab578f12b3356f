package dev.sluice.spark;

import java.util.Map;
import java.util.TreeMap;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.executor.TaskMetrics;
import org.apache.spark.scheduler.SparkListener;
import org.apache.spark.scheduler.SparkListenerTaskEnd;

/**
 * Spark's task metrics summed by stage, as its scheduler and UI see them: what each task reported
 * at its end (successful tasks only, as the UI's stage totals).
 */
final class StageTotals extends SparkListener {
  /** One stage's sums. */
  static final class Totals {
    long recordsWritten;
    long recordsRead;
    long memoryBytesSpilled;
    long diskBytesSpilled;
    long peakExecutionMemory;

    @Override
    public String toString() {
      return "written "
          + recordsWritten
          + ", read "
          + recordsRead
          + ", spilled "
          + memoryBytesSpilled
          + " B memory / "
          + diskBytesSpilled
          + " B disk, peak execution memory "
          + peakExecutionMemory
          + " B";
    }
  }

  private final Map<Integer, Totals> byStage = new TreeMap<>();

  /** Starts counting the tasks of {@code sc} that end from now on. */
  static StageTotals watch(JavaSparkContext sc) {
    // Events of tasks that ended before this call are not this watch's.
    drain(sc);
    StageTotals t = new StageTotals();
    sc.sc().addSparkListener(t);
    return t;
  }

  @Override
  public synchronized void onTaskEnd(SparkListenerTaskEnd end) {
    TaskMetrics m = end.taskMetrics();
    if (m == null || !end.taskInfo().successful()) {
      return;
    }
    Totals t = byStage.computeIfAbsent(end.stageId(), s -> new Totals());
    t.recordsWritten += m.shuffleWriteMetrics().recordsWritten();
    t.recordsRead += m.shuffleReadMetrics().recordsRead();
    t.memoryBytesSpilled += m.memoryBytesSpilled();
    t.diskBytesSpilled += m.diskBytesSpilled();
    t.peakExecutionMemory += m.peakExecutionMemory();
  }

  /** Each stage's sums so far, in stage order, once every event posted so far was delivered. */
  Map<Integer, Totals> stages(JavaSparkContext sc) {
    drain(sc);
    synchronized (this) {
      return new TreeMap<>(byStage);
    }
  }

  /** Waits until the listener bus delivered every event posted so far. */
  private static void drain(JavaSparkContext sc) {
    try {
      sc.sc().listenerBus().waitUntilEmpty();
    } catch (java.util.concurrent.TimeoutException e) {
      throw new IllegalStateException("Spark's listener bus did not drain", e);
    }
  }

  /** Removes the listener. */
  void stop(JavaSparkContext sc) {
    sc.sc().removeSparkListener(this);
  }
}
