package dev.sluice.spark.sql;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Supplier;
import org.apache.spark.ShuffleDependency;
import org.junit.jupiter.api.Test;

/**
 * Equal native nodes of one query asking for their shuffle at once: one of them makes it (a
 * {@code ShuffleDependency} registers its shuffle as it is built), the other gets the same one, or
 * the same failure.
 */
class ShuffleReuseSqlTest {
  /** How long a thread may take to reach the point a test waits for, in seconds. */
  private static final long WAIT_S = 30;

  /** A make that counts its calls, says it started, and returns once released. */
  private record Slow(
      AtomicInteger made,
      CountDownLatch making,
      CountDownLatch release,
      Supplier<ShuffleDependency<Object, Object, Object>> then)
      implements Supplier<ShuffleDependency<Object, Object, Object>> {
    Slow(Supplier<ShuffleDependency<Object, Object, Object>> then) {
      this(new AtomicInteger(), new CountDownLatch(1), new CountDownLatch(1), then);
    }

    @Override
    public ShuffleDependency<Object, Object, Object> get() {
      made.incrementAndGet();
      making.countDown();
      await(release);
      return then.get();
    }
  }

  @Test
  void equalNodesRacingMakeOneShuffle() throws Exception {
    Map<Object, CompletableFuture<ShuffleReuse.Shuffle>> shuffles = new ConcurrentHashMap<>();
    Slow slow = new Slow(() -> null);
    ExecutorService pool = Executors.newFixedThreadPool(2);
    try {
      Future<ShuffleReuse.Shuffle>[] both = race(pool, shuffles, slow);
      ShuffleReuse.Shuffle a = both[0].get(WAIT_S, TimeUnit.SECONDS);
      ShuffleReuse.Shuffle b = both[1].get(WAIT_S, TimeUnit.SECONDS);
      assertSame(a, b);
      assertEquals(1, slow.made().get());
      assertNotSame(a, ShuffleReuse.once(shuffles, "other", () -> null));
    } finally {
      pool.shutdownNow();
    }
  }

  @Test
  void aCallerWaitingForAMakeThatFailsGetsItsFailure() throws Exception {
    Map<Object, CompletableFuture<ShuffleReuse.Shuffle>> shuffles = new ConcurrentHashMap<>();
    IllegalStateException failure = new IllegalStateException("planning failed");
    Slow slow =
        new Slow(
            () -> {
              throw failure;
            });
    ExecutorService pool = Executors.newFixedThreadPool(2);
    try {
      Future<ShuffleReuse.Shuffle>[] both = race(pool, shuffles, slow);
      for (Future<ShuffleReuse.Shuffle> f : both) {
        ExecutionException e =
            assertThrows(ExecutionException.class, () -> f.get(WAIT_S, TimeUnit.SECONDS));
        assertSame(failure, e.getCause());
      }
      assertEquals(1, slow.made().get());
      assertEquals(Map.of(), shuffles);
    } finally {
      pool.shutdownNow();
    }
  }

  @Test
  void aMakeThatFailsLeavesTheKeyToTheNextCaller() {
    Map<Object, CompletableFuture<ShuffleReuse.Shuffle>> shuffles = new ConcurrentHashMap<>();
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

  /**
   * Two callers of key "k" on {@code pool}: the first is making its shuffle when the second asks,
   * and {@code slow} is released once the second waits for the first.
   */
  @SuppressWarnings("unchecked")
  private static Future<ShuffleReuse.Shuffle>[] race(
      ExecutorService pool,
      Map<Object, CompletableFuture<ShuffleReuse.Shuffle>> shuffles,
      Slow slow)
      throws InterruptedException {
    Future<ShuffleReuse.Shuffle> first = pool.submit(() -> ShuffleReuse.once(shuffles, "k", slow));
    await(slow.making());
    AtomicReference<Thread> second = new AtomicReference<>();
    Future<ShuffleReuse.Shuffle> other =
        pool.submit(
            () -> {
              second.set(Thread.currentThread());
              return ShuffleReuse.once(shuffles, "k", slow);
            });
    // The second caller waits for the first, which is still making its shuffle.
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(WAIT_S);
    while (second.get() == null || second.get().getState() != Thread.State.WAITING) {
      if (slow.made().get() > 1) {
        throw new AssertionError("both callers made the key's shuffle");
      }
      if (System.nanoTime() > deadline) {
        throw new AssertionError("the second caller never waited for the first");
      }
      Thread.sleep(1);
    }
    slow.release().countDown();
    return new Future[] {first, other};
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
