package dev.sluice.spark.shuffle;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;

/**
 * One direct buffer per thread, lent to one map output at a time and kept between the thread's
 * map tasks (Spark's executors pool their task threads). A fresh direct buffer costs its size in
 * zeroed, page-faulted memory, and its memory comes back only when the garbage collector finds the
 * buffer unreachable; once the JVM's direct memory limit is reached, each allocation forces a full
 * collection ({@code java.nio.Bits.reserveMemory}). A map task's buffer is its record staging
 * area, the same size for every task, so one per thread serves them all. A second output open on
 * the same thread (none is in Spark's task model) gets a buffer of its own; a buffer given back on
 * another thread than the one that took it is left to the collector.
 */
final class SpareBuffer {
  private static final ThreadLocal<ByteBuffer> SPARE = new ThreadLocal<>();

  private SpareBuffer() {}

  /** A cleared little-endian direct buffer of {@code bytes}: this thread's spare, or a new one. */
  static ByteBuffer take(int bytes) {
    ByteBuffer b = SPARE.get();
    if (b != null && b.capacity() == bytes) {
      SPARE.remove();
      b.clear();
      return b;
    }
    return ByteBuffer.allocateDirect(bytes).order(ByteOrder.LITTLE_ENDIAN);
  }

  /**
   * Keeps {@code b} as this thread's spare, if {@code owner} (the thread that took it) is this one;
   * the caller uses {@code b} no more.
   */
  static void giveBack(ByteBuffer b, Thread owner) {
    if (b != null && Thread.currentThread() == owner) {
      SPARE.set(b);
    }
  }
}
