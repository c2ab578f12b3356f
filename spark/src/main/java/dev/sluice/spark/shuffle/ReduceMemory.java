package dev.sluice.spark.shuffle;

import dev.sluice.spark.SluiceMetrics;
import dev.sluice.spark.jni.SluiceNative;
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
 * otherwise. Once Spark grants less than asked, the task stops asking, so a task short of memory
 * spills instead of failing, and its neighbours keep theirs. The memory is held until the task
 * ends: a sort's runs are merged from where they are as the task reads, and an aggregate reuses
 * what it spilled for its next table, so Spark's requests to spill ({@link #spill}) get nothing
 * back.
 */
public final class ReduceMemory extends MemoryConsumer {
  /** Least bytes asked of Spark at a time (4 MiB), so that small blocks do not ask each. */
  static final long GRANT_MIN_BYTES = 4L << 20;

  private final long operator;
  /** Bytes acquired from Spark (and granted to the operator). */
  private long held;

  private boolean refused;

  public ReduceMemory(TaskContext context, long operator) {
    super(
        context.taskMemoryManager(),
        context.taskMemoryManager().pageSizeBytes(),
        SluiceConf.nativeMemoryMode());
    this.operator = operator;
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
      held += got;
      SluiceNative.reduceGrant(operator, got);
    }
    if (got < ask) {
      refused = true;
      SluiceMetrics.REDUCE_SHORT_GRANTS.incrementAndGet();
    }
  }

  /** Runs are merged from memory as the task reads: nothing can be given back early. */
  @Override
  public long spill(long size, MemoryConsumer trigger) {
    return 0;
  }

  /** Returns the memory to Spark (the operator has been closed). */
  public void release() {
    if (held > 0) {
      freeMemory(held);
      held = 0;
    }
  }
}
