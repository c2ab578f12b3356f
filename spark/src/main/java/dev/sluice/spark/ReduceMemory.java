package dev.sluice.spark;

import org.apache.spark.TaskContext;
import org.apache.spark.memory.MemoryConsumer;
import org.apache.spark.memory.SparkOutOfMemoryError;

/**
 * A reduce task's memory for its native sort-merge, from Spark's execution memory: before each
 * fetched block goes to the merge, the block's decoded bytes are acquired from the task memory
 * manager (at least {@link #GRANT_MIN_BYTES} at a time) and granted to the native operator, which
 * keeps a run in memory only when its grant covers it and writes it to disk otherwise. Once Spark
 * grants less than asked, the task stops asking (every later run goes to disk), so a task short
 * of memory spills instead of failing, and its neighbours keep theirs. The memory is held until
 * the task ends: the runs are merged from where they are as the task reads, so Spark's requests
 * to spill ({@link #spill}) get nothing back.
 */
final class ReduceMemory extends MemoryConsumer {
  /** Least bytes asked of Spark at a time (4 MiB), so that small blocks do not ask each. */
  static final long GRANT_MIN_BYTES = 4L << 20;

  private final long operator;
  /** Bytes acquired from Spark (and granted to the operator). */
  private long held;
  /** Decoded bytes of the blocks handed to the operator. */
  private long needed;
  private boolean refused;

  ReduceMemory(TaskContext context, long operator) {
    super(
        context.taskMemoryManager(),
        context.taskMemoryManager().pageSizeBytes(),
        SluiceConf.nativeMemoryMode());
    this.operator = operator;
  }

  /** Accounts a block of {@code bytes} decoded bytes about to be handed to the operator. */
  void reserve(long bytes) {
    needed += bytes;
    if (refused || needed <= held) {
      return;
    }
    long ask = Math.max(needed - held, GRANT_MIN_BYTES);
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
  void release() {
    if (held > 0) {
      freeMemory(held);
      held = 0;
    }
  }
}
