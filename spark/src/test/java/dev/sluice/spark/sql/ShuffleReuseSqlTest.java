package dev.sluice.spark.sql;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Supplier;
import org.apache.spark.ShuffleDependency;
import org.junit.jupiter.api.Test;

/**
 * Equal native nodes of one query asking for their shuffle at once: one of them makes it (a
 * {@code ShuffleDependency} registers its shuffle as it is built), the other gets the same one.
 */
class ShuffleReuseSqlTest {
  /** How long a thread may take to reach the point a test waits for, in seconds. */
  private static final long WAIT_S = 30;

  @Test
  void equalNodesRacingMakeOneShuffle() throws Exception {
    Map<Object, ShuffleReuse.Once> shuffles = new ConcurrentHashMap<>();
    AtomicInteger made = new AtomicInteger();
    CountDownLatch making = new CountDownLatch(1);
    CountDownLatch release = new CountDownLatch(1);
    Supplier<ShuffleDependency<Object, Object, Object>> slow =
        () -> {
          made.incrementAndGet();
          making.countDown();
          await(release);
          return null;
        };
    ExecutorService pool = Executors.newFixedThreadPool(2);
    try {
      Future<ShuffleReuse.Shuffle> first =
          pool.submit(() -> ShuffleReuse.once(shuffles, "k", slow));
      await(making);
      Thread[] second = new Thread[1];
      Future<ShuffleReuse.Shuffle> other =
          pool.submit(
              () -> {
                second[0] = Thread.currentThread();
                return ShuffleReuse.once(shuffles, "k", slow);
              });
      // The second caller waits on the entry while the first is still making its shuffle.
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(WAIT_S);
      while (second[0] == null || second[0].getState() != Thread.State.BLOCKED) {
        if (made.get() > 1) {
          throw new AssertionError("both callers made the key's shuffle");
        }
        if (System.nanoTime() > deadline) {
          throw new AssertionError("the second caller never waited for the first");
        }
        Thread.sleep(1);
      }
      release.countDown();
      ShuffleReuse.Shuffle a = first.get(WAIT_S, TimeUnit.SECONDS);
      ShuffleReuse.Shuffle b = other.get(WAIT_S, TimeUnit.SECONDS);
      assertSame(a, b);
      assertEquals(1, made.get());
      assertNotSame(a, ShuffleReuse.once(shuffles, "other", () -> null));
    } finally {
      pool.shutdownNow();
    }
  }

  @Test
  void aMakeThatFailsLeavesTheKeyToTheNextCaller() {
    Map<Object, ShuffleReuse.Once> shuffles = new ConcurrentHashMap<>();
    assertThrows(
        IllegalStateException.class,
        () ->
            ShuffleReuse.once(
                shuffles,
                "k",
                () -> {
                  throw new IllegalStateException("planning failed");
                }));
    AtomicInteger made = new AtomicInteger();
    Supplier<ShuffleDependency<Object, Object, Object>> make =
        () -> {
          made.incrementAndGet();
          return null;
        };
    ShuffleReuse.Shuffle s = ShuffleReuse.once(shuffles, "k", make);
    assertSame(s, ShuffleReuse.once(shuffles, "k", make));
    assertEquals(1, made.get());
  }

  private static void await(CountDownLatch latch) {
    try {
      if (!latch.await(WAIT_S, TimeUnit.SECONDS)) {
        throw new AssertionError("timed out waiting for the other caller");
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new AssertionError(e);
    }
  }
}
