package dev.sluice.spark.shuffle;

import dev.sluice.spark.api.SluiceException;
import dev.sluice.spark.jni.SluiceNative;
import dev.sluice.spark.metrics.SluiceMetrics;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.spark.TaskContext;
import org.apache.spark.memory.MemoryConsumer;
import org.apache.spark.memory.SparkOutOfMemoryError;

/**
 * A reduce task's memory for its native operator, from Spark's execution memory. Before each
 * fetched block goes to the operator, the operator says how many bytes it lacks to take the
 * block's decoded bytes (a sort-merge: every byte fed so far, since it may keep each run; an
 * aggregate: its table's state now plus the block); that shortfall is acquired from the task
 * memory manager (at least {@link #GRANT_MIN_BYTES} at a time) and granted to the operator, which
 * keeps a run or a group in memory only when its grant covers it and writes sorted runs to disk
 * otherwise. Once Spark grants less than the operator lacks, the task stops asking, so a task
 * short of memory spills instead of failing, and its neighbours keep theirs.
 *
 * <p>While the input is fed, the memory is the operator's own: Spark's requests to spill ({@link
 * #spill}) get nothing back. Once the input has ended ({@link #finished}), the grant is cut to what
 * the results hold in memory: nothing for an aggregate or a distinct that spilled (its results
 * are merged from its runs on disk as the task reads them), all of it for one whose results were
 * emitted whole, a sort's runs kept in memory. When another consumer of the same task asks for
 * memory (a sort or a hash aggregate of Spark's above the operator, in the same task), what the
 * results hold goes to a spill file in the task's spill directory (results not yet read, or a
 * sort's runs, which its merge then reads from disk) and the whole grant goes back to Spark.
 */
public final class ReduceMemory extends MemoryConsumer {
  /** Least bytes asked of Spark at a time (4 MiB), so that small blocks do not ask each. */
  static final long GRANT_MIN_BYTES = 4L << 20;

  private final long operator;

  /**
   * Bytes acquired from Spark (and granted to the operator). Taken whole by whichever of {@link
   * #spill} (a thread asking the task memory manager for memory, under its lock) and {@link
   * #release} (the thread that closes the operator, perhaps a pipe's writer thread) comes first,
   * so that it is freed once; a lock here would be taken in the opposite order to the task
   * memory manager's by the two.
   */
  private final AtomicLong held = new AtomicLong();

  /** The most {@link #held} was. */
  private long peak;

  /** Whether the peak was reported (the first {@link #release}). */
  private boolean peakReported;

  private boolean refused;

  /** The operator's input has ended: its results wait to be read. */
  private volatile boolean finished;

  private final TaskContext context;

  public ReduceMemory(TaskContext context, long operator) {
    super(
        context.taskMemoryManager(),
        context.taskMemoryManager().pageSizeBytes(),
        SluiceConf.nativeMemoryMode());
    this.operator = operator;
    this.context = context;
  }

  /** Accounts a block of {@code bytes} decoded bytes about to be handed to the operator. */
  void reserve(long bytes) {
    if (refused) {
      return;
    }
    long shortfall = SluiceNative.reduceShortfall(operator, bytes);
    if (shortfall <= 0) {
      return;
    }
    long ask = Math.max(shortfall, GRANT_MIN_BYTES);
    long got;
    try {
      got = acquireMemory(ask);
    } catch (SparkOutOfMemoryError e) {
      got = 0;
    }
    if (got > 0) {
      peak = Math.max(peak, held.addAndGet(got));
      SluiceNative.reduceGrant(operator, got);
    }
    if (got < shortfall) {
      // Less than the operator lacks (not merely less than the rounded-up ask, which still lets
      // the block in): the task stops asking.
      refused = true;
      SluiceMetrics.REDUCE_SHORT_GRANTS.incrementAndGet();
    }
  }

  /**
   * The operator's input has ended ({@code reduceFinish}): the grant beyond what its results hold
   * in memory goes back to Spark, and the results may go to disk.
   */
  public void finished() {
    finished = true;
    long keep = SluiceNative.reduceHeldBytes(operator);
    long h;
    do {
      h = held.get();
      if (h <= keep) {
        return;
      }
    } while (!held.compareAndSet(h, keep));
    freeMemory(h - keep);
  }

  /**
   * Another consumer of the task asks for memory: once the input has ended, what the results hold
   * in memory goes to disk and the whole grant is given back. Asked by this consumer itself (while
   * it reserves), before the input ended, or with nothing held: nothing.
   */
  @Override
  public long spill(long size, MemoryConsumer trigger) {
    if (trigger == this || !finished || held.get() == 0) {
      return 0;
    }
    long[] before;
    long[] after;
    try {
      before = SluiceNative.reduceSpillBytes(operator);
      if (SluiceNative.reduceSpillResults(operator) <= 0) {
        return 0;
      }
      after = SluiceNative.reduceSpillBytes(operator);
    } catch (SluiceException e) {
      if (held.get() == 0) {
        // Closed on another thread meanwhile (its grant went back with it): nothing to give.
        return 0;
      }
      // The spill itself failed (a full disk): the operator is as it was, its results whole in
      // memory, but the task fails here, as it would with Spark's own spillable collections.
      throw e;
    }
    if (after[0] > before[0]) {
      SluiceMetrics.REDUCE_SPILLED_RUNS.incrementAndGet();
    }
    SluiceMetrics.REDUCE_GIVEN_BACK.incrementAndGet();
    context.taskMetrics().incDiskBytesSpilled(after[0] - before[0]);
    context.taskMetrics().incMemoryBytesSpilled(after[1] - before[1]);
    long freed = held.getAndSet(0);
    if (freed > 0) {
      freeMemory(freed);
    }
    return freed;
  }

  /** Returns the memory to Spark (the operator closes: results read, or the task ended). */
  public void release() {
    long freed = held.getAndSet(0);
    if (freed > 0) {
      freeMemory(freed);
    }
    if (!peakReported) {
      // The task's peak execution memory, as Spark's own aggregates and sorts report theirs: the
      // most the operator's state held (its floor counted, which Spark did not grant), or the
      // most Spark granted, whichever is more. The operator is still open on the first release
      // (its close releases first); a later one reports nothing.
      peakReported = true;
      long most = peak;
      try {
        most = Math.max(most, SluiceNative.reducePeakBytes(operator));
      } catch (SluiceException e) {
        // Closed on another thread meanwhile: the grants' peak is what is known.
      }
      if (most > 0) {
        context.taskMetrics().incPeakExecutionMemory(most);
      }
    }
  }
}
