package dev.sluice.spark.service;

import dev.sluice.spark.jni.ServiceNative;
import dev.sluice.spark.metrics.SluiceMetrics;
import java.io.File;
import java.io.IOException;
import java.io.InterruptedIOException;
import java.util.Arrays;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.SynchronousQueue;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * A map attempt's output pushed to its shuffle's daemons while the map still runs (DShuffle's
 * pipelining of the shuffle's I/O with the map's work): each spill of the attempt's output, the
 * ones Spark's memory manager asks for and those the writer makes every {@code
 * service.pushWhileMappingBytes}, is pushed from its spill file on a thread of its own while the
 * task maps on, and the commit then pushes only the rest.
 *
 * <p>Why the bytes line up: the data file starts each partition's segment with that partition's
 * segments of the spill files, in spill order, copied byte for byte, then the blocks still in
 * memory and the trailer. A daemon concatenates one attempt's chunks of a partition in their
 * order, so pushing the spills' segments first and, at commit, each data-file segment from
 * {@link #pushed} bytes on gives the daemon the data file's segment exactly. Each owner's chunks
 * go through one native push (one sequence of chunks) for the whole attempt, settled after every
 * spill so that the connection, borrowed for that spill only, goes back to the pool.
 *
 * <p>Spills are pushed one after another, in order, never two of one attempt at once. A failure
 * (a daemon gone, refusing, a stale generation) stops the early pushes; the commit then keeps the
 * output on the executor as for any failed push ({@link ServicePush}): the data file holds all of
 * it, so nothing is lost, and what was staged at the daemons is never committed. The commit waits
 * for the pushes queued before it ({@link #await}); an attempt that ends without committing stops
 * those not begun and drops its pushes when the running one ends ({@link #abandon}); a spill file
 * removed under a running push fails that push, which then stops.
 */
public final class EarlyPush {
  private static final AtomicInteger THREADS = new AtomicInteger();

  /** Threads pushing spills, one per attempt at a time; idle ones go after a minute. */
  private static final ExecutorService POOL =
      new ThreadPoolExecutor(
          0,
          Integer.MAX_VALUE,
          60,
          TimeUnit.SECONDS,
          new SynchronousQueue<>(),
          r -> {
            Thread t = new Thread(r, "sluice-early-push-" + THREADS.incrementAndGet());
            t.setDaemon(true);
            return t;
          });

  private final Daemons daemons;
  private final Assignment assignment;
  private final int shuffle;
  private final int mapIndex;
  private final long attempt;

  /** Each owner's native push, 0 until its first chunk; touched by one thread at a time. */
  private final long[] pushers;

  /** Bytes of each partition pushed so far; read only after {@link #await}. */
  private final long[] pushed;

  /** The last queued spill's push; each runs after the one before. */
  private CompletableFuture<Void> tail = CompletableFuture.completedFuture(null);

  /** Why the early pushes stopped, or null. */
  private volatile String failure;

  /** Set when the attempt ends without committing: queued spills are not pushed. */
  private volatile boolean cancelled;

  private EarlyPush(
      Daemons daemons,
      Assignment assignment,
      int shuffle,
      int mapIndex,
      long attempt,
      int partitions) {
    this.daemons = daemons;
    this.assignment = assignment;
    this.shuffle = shuffle;
    this.mapIndex = mapIndex;
    this.attempt = attempt;
    this.pushers = new long[assignment.nodes()];
    this.pushed = new long[partitions];
  }

  /** The early pushes of one map attempt of a service shuffle. */
  public static EarlyPush of(
      ServiceConf conf,
      int shuffle,
      Assignment assignment,
      int mapIndex,
      long attempt,
      int partitions) {
    return new EarlyPush(Daemons.of(conf), assignment, shuffle, mapIndex, attempt, partitions);
  }

  /**
   * Queues the spill file {@code spill}, whose partitions' segments are {@code lengths} bytes
   * long, to be pushed after those queued before; returns at once. The file must stay until
   * {@link #await} or {@link #abandon} returns.
   */
  public synchronized void submit(File spill, long[] lengths) {
    if (failure != null || cancelled) {
      return;
    }
    long[] own = lengths.clone();
    tail = tail.thenRunAsync(() -> pushSpillOrStop(spill, own), POOL);
  }

  /** {@link #pushSpill}, any throwable it lets out stopping the early pushes (never the chain). */
  private void pushSpillOrStop(File spill, long[] lengths) {
    try {
      pushSpill(spill, lengths);
    } catch (Throwable e) {
      failure = "pushing a spill: " + e;
    }
  }

  /** Whether the early pushes go on (none failed, the attempt did not end). */
  public boolean live() {
    return failure == null && !cancelled;
  }

  /**
   * Waits for the queued spills' pushes; null when every one reached its daemons, else why they
   * stopped. A task killed meanwhile stops waiting ({@link InterruptedIOException}, its
   * interrupt kept): its abort abandons the pushes.
   */
  public String await() throws InterruptedIOException {
    CompletableFuture<Void> last;
    synchronized (this) {
      last = tail;
    }
    try {
      last.get();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new InterruptedIOException(
          "interrupted waiting for the early pushes of map " + mapIndex);
    } catch (ExecutionException e) {
      return "pushing a spill: " + e.getCause();
    }
    return failure;
  }

  /** Bytes of each partition the daemons hold of this attempt (call after {@link #await}). */
  long pushed(int partition) {
    return pushed[partition];
  }

  /**
   * Owner {@code k}'s native push, given to the caller (which commits or abandons it), or 0 when
   * none was opened (call after {@link #await}).
   */
  long take(int k) {
    long p = pushers[k];
    pushers[k] = 0;
    return p;
  }

  /**
   * Stops queued pushes and drops every push not taken once the one running (if any) ends, on its
   * thread: the attempt will not commit what it staged, and a task ending (killed, failed) does
   * not wait on a daemon for it. Each daemon not down in this JVM is asked to drop what the
   * attempt staged there ({@code DropAttempt}); one that cannot be asked keeps it until the
   * shuffle is unregistered.
   */
  public void abandon() {
    cancelled = true;
    CompletableFuture<Void> last;
    synchronized (this) {
      last = tail;
    }
    // On the pool even when the pushes are over: dropping asks each daemon over the network.
    last.whenCompleteAsync((v, e) -> dropPushers(), POOL);
  }

  private void dropPushers() {
    for (int k = 0; k < pushers.length; k++) {
      long p = take(k);
      if (p != 0) {
        drop(assignment.daemon(k), p);
      }
    }
  }

  /** Push {@code p} closed, daemon {@code d} asked to drop its chunks where it is not down. */
  private void drop(int d, long p) {
    if (daemons.drop(d, p)) {
      SluiceMetrics.SERVICE_EARLY_DROPS.incrementAndGet();
    }
  }

  /** One spill's segments to each owner of the partitions it has bytes of, owner by owner. */
  private void pushSpill(File spill, long[] lengths) {
    if (failure != null || cancelled) {
      return;
    }
    String down = daemons.downReason(assignment);
    if (down != null) {
      failure = down;
      return;
    }
    int partitions = lengths.length;
    if (partitions != pushed.length) {
      failure = "a spill of " + partitions + " partitions, the shuffle has " + pushed.length;
      return;
    }
    long[] offsets = new long[partitions + 1];
    for (int p = 0; p < partitions; p++) {
      offsets[p + 1] = offsets[p] + lengths[p];
    }
    int nodes = assignment.nodes();
    for (int i = 0; i < nodes && failure == null && !cancelled; i++) {
      int k = (mapIndex + i) % nodes;
      int lo = assignment.first(k, partitions);
      int hi = assignment.first(k + 1, partitions);
      if (offsets[hi] > offsets[lo]) {
        pushTo(k, spill, lo, Arrays.copyOfRange(offsets, lo, hi), offsets, hi);
      }
    }
    if (failure == null) {
      for (int p = 0; p < partitions; p++) {
        pushed[p] += lengths[p];
      }
      SluiceMetrics.SERVICE_EARLY_PUSHES.incrementAndGet();
    }
  }

  private void pushTo(int k, File spill, int lo, long[] starts, long[] offsets, int hi) {
    int d = assignment.daemon(k);
    long connection = 0;
    try {
      connection = daemons.borrow(d);
      if (pushers[k] == 0) {
        pushers[k] = ServiceNative.pushOpen(shuffle, assignment.generation, mapIndex, attempt);
      }
      long[] ends = Arrays.copyOfRange(offsets, lo + 1, hi + 1);
      ServiceNative.pushFile(pushers[k], connection, spill.getAbsolutePath(), lo, starts, ends);
      ServiceNative.pushSettle(pushers[k], connection);
    } catch (Throwable e) {
      if (connection != 0) {
        daemons.failed(d, connection, e);
      }
      if (Daemons.leftOutAfter(e)) {
        daemons.markDown(d, e.getMessage());
      }
      failure = "pushing a spill to " + daemons.conf.daemons.get(d) + ": " + e.getMessage();
      return;
    }
    daemons.giveBack(d, connection);
  }
}
