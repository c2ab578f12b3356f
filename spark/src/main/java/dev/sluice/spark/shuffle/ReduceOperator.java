package dev.sluice.spark.shuffle;

import dev.sluice.spark.jni.SluiceNative;

/**
 * A reduce task's native operator (a final aggregate or a sort-merge: the engine's {@code
 * ReduceTask}, {@code crates/sluice-engine/src/reduce/task.rs}) as the fetch path feeds it: the
 * native handle together with the task's memory for it, so that every verified block is accounted
 * before it is merged ({@link ReduceMemory}). Passed through Spark's reader as this object ({@link
 * SluiceSerializerManager#fetchReader}, {@link SluiceSerializerManager}, {@link
 * SluiceBlockInputStream}) rather than as a bare handle; a plain shuffle's reader has none (null).
 */
public final class ReduceOperator {
  /** The native operator; owned and freed by the reader that opened it. */
  final long handle;

  private final ReduceMemory memory;

  public ReduceOperator(long handle, ReduceMemory memory) {
    if (handle == 0 || memory == null) {
      throw new IllegalArgumentException("a reduce operator needs its native handle and memory");
    }
    this.handle = handle;
    this.memory = memory;
  }

  /**
   * Accounts a block of {@code uncompressed} decoded bytes, then decodes, verifies and merges the
   * block ({@code frameLen} bytes of {@code frame}, block {@code offset} of map {@code map}'s
   * segment for partition {@code reduce}); returns the records it carried.
   */
  int feed(
      byte[] frame, int frameLen, int uncompressed, int shuffle, long map, int reduce, long offset)
      throws java.io.IOException {
    memory.reserve(uncompressed);
    return SluiceNative.reduceFeed(handle, frame, frameLen, shuffle, map, reduce, offset);
  }
}
