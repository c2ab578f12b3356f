package dev.sluice.spark.shuffle;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;

/** One map output's staging buffer per thread, lent to one output at a time. */
final class SpareBufferTest {
  private static final int BYTES = 4096;

  @Test
  void aBufferGivenBackIsTheThreadsNextOneCleared() {
    ByteBuffer first = SpareBuffer.take(BYTES);
    assertTrue(first.isDirect());
    assertEquals(ByteOrder.LITTLE_ENDIAN, first.order());
    first.putLong(7).limit(100);
    SpareBuffer.giveBack(first, Thread.currentThread());
    ByteBuffer second = SpareBuffer.take(BYTES);
    assertSame(first, second);
    assertEquals(0, second.position());
    assertEquals(BYTES, second.limit());
    SpareBuffer.giveBack(second, Thread.currentThread());
  }

  @Test
  void twoOutputsOpenOnOneThreadHoldTwoBuffers() {
    ByteBuffer a = SpareBuffer.take(BYTES);
    SpareBuffer.giveBack(a, Thread.currentThread());
    ByteBuffer b = SpareBuffer.take(BYTES);
    ByteBuffer c = SpareBuffer.take(BYTES);
    assertNotSame(b, c);
    SpareBuffer.giveBack(c, Thread.currentThread());
    SpareBuffer.giveBack(b, Thread.currentThread());
  }

  @Test
  void anotherSizeIsANewBuffer() {
    ByteBuffer small = SpareBuffer.take(BYTES);
    SpareBuffer.giveBack(small, Thread.currentThread());
    ByteBuffer big = SpareBuffer.take(2 * BYTES);
    assertNotSame(small, big);
    assertEquals(2 * BYTES, big.capacity());
  }

  @Test
  void aBufferGivenBackOnAnotherThreadIsNotKept() throws Exception {
    ByteBuffer mine = SpareBuffer.take(BYTES);
    Thread owner = Thread.currentThread();
    AtomicReference<ByteBuffer> theirs = new AtomicReference<>();
    Thread other =
        new Thread(
            () -> {
              SpareBuffer.giveBack(mine, owner);
              theirs.set(SpareBuffer.take(BYTES));
            });
    other.start();
    other.join();
    assertNotSame(mine, theirs.get());
    // Nor on the owner's thread: it was never given back there.
    assertNotSame(mine, SpareBuffer.take(BYTES));
  }
}
