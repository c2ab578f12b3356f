package dev.sluice.spark.service;

import dev.sluice.spark.jni.ServiceNative;
import java.io.IOException;
import java.io.InterruptedIOException;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedDeque;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLongArray;
import java.util.concurrent.atomic.AtomicReferenceArray;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.IntFunction;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The connections of one JVM to an application's daemons: authenticated connections kept for
 * reuse per daemon (a task borrows one, gives it back when its request or read ended cleanly, and
 * a connection left mid-read is closed, never reused), and the driver's requests to every daemon
 * (register, unregister, renew the lease on a timer, end the application), sent to up to {@link
 * #REQUEST_THREADS} daemons at once: a shuffle's registration costs the driver about one round
 * trip, not one per daemon in turn.
 */
public final class Daemons {
  private static final Logger LOG = LoggerFactory.getLogger(Daemons.class);
  private static final ConcurrentHashMap<String, Daemons> POOLS = new ConcurrentHashMap<>();

  /** Idle connections kept per daemon, at most. */
  public static final int IDLE_PER_DAEMON = 16;

  /**
   * How long an idle connection is kept for reuse: well under the daemon's idle timeout (300 s),
   * so that a borrowed connection is never one the daemon has closed, and short, so that the
   * connections a stage's tasks opened at once do not hold the daemon's connection slots (its
   * {@code --max-connections}) long after the stage.
   */
  public static final long IDLE_KEEP_NANOS = 30_000_000_000L;

  /** How often idle connections older than {@link #IDLE_KEEP_NANOS} are closed. */
  public static final long IDLE_SWEEP_MS = 10_000;

  /**
   * How long a task's connect tries a daemon that answers busy again before the refusal fails the
   * push (the map output then stays on its executor) or the read (the task is retried).
   */
  public static final long TASK_BUSY_WAIT_MS = 30_000;

  /**
   * The same for the driver's requests (register, unregister, renew, end): short, so that a new
   * generation's registration ends within {@link CurrentAssignment#PENDING_WAIT_MS}.
   */
  public static final long DRIVER_BUSY_WAIT_MS = 5_000;

  /** One thread per JVM that closes idle connections past their keep time, every pool's. */
  private static final ScheduledExecutorService SWEEPER =
      Executors.newSingleThreadScheduledExecutor(
          r -> {
            Thread t = new Thread(r, "sluice-service-idle");
            t.setDaemon(true);
            return t;
          });

  /** Daemons that a request to every daemon goes to at once, at most (a driver thread each). */
  public static final int REQUEST_THREADS = 16;

  /** 2026-01-01T00:00:00Z in milliseconds: generations count seconds from it. */
  private static final long GENERATION_EPOCH_MS = 1_767_225_600_000L;

  public final ServiceConf conf;

  /**
   * The generation this driver registers its shuffles with: the seconds since 2026 when this pool
   * was made, so that a later run under the same application name replaces what an earlier one
   * left at the daemons (and an earlier one's attempts can never pass for a later one's).
   */
  public final int generation;

  /**
   * How long a daemon that failed a push or a registration is left out of this JVM's pushes and
   * registrations: map outputs written meanwhile for shuffles it owns part of stay on their
   * executors rather than each waiting on the same failure, and shuffles registered meanwhile are
   * assigned over the other daemons.
   */
  public static final long DOWN_NANOS = 30_000_000_000L;

  private final List<ConcurrentLinkedDeque<long[]>> idle = new ArrayList<>();
  /** Per daemon: until when (System.nanoTime) it takes no pushes, and why; 0 when it does. */
  private final AtomicLongArray downUntil;

  private final AtomicReferenceArray<String> downWhy;
  private ScheduledExecutorService renewer;
  private volatile java.util.concurrent.ScheduledFuture<?> sweeping;
  private ExecutorService requests;
  private volatile boolean closed;

  private Daemons(ServiceConf conf) {
    this.conf = conf;
    this.generation = secondsSince2026();
    for (int i = 0; i < conf.nodes(); i++) {
      idle.add(new ConcurrentLinkedDeque<>());
    }
    downUntil = new AtomicLongArray(conf.nodes());
    downWhy = new AtomicReferenceArray<>(conf.nodes());
    leaseConnections = new AtomicLongArray(conf.nodes());
  }

  /**
   * Leaves daemon {@code d} out of this JVM's pushes and registrations for {@link #DOWN_NANOS}
   * after it failed one ({@code why}); the first failure after it was up is logged.
   */
  public void markDown(int d, String why) {
    long now = System.nanoTime();
    downWhy.set(d, why);
    long before = downUntil.getAndSet(d, Math.max(1, now + DOWN_NANOS));
    if (before == 0 || before - now < 0) {
      LOG.warn(
          "Sluice: daemon {} failed ({}); left out of pushes and new registrations for {} s",
          conf.daemons.get(d),
          why,
          DOWN_NANOS / 1_000_000_000L);
    }
  }

  /**
   * Whether a push that failed with {@code e} leaves its daemon out ({@link #markDown}): a
   * connection that failed, or a refusal that says the daemon cannot take pushes (a full disk, a
   * shutdown, a key it does not take). Not a killed task ({@link InterruptedIOException}), a newer
   * generation ({@link StaleGenerationException}: the daemon serves it), nor a refusal of the
   * request for what it names ({@link RequestRefusedException}: a commit that does not match, a
   * shuffle the daemon does not hold), nor the task's own failure that is no {@link IOException}.
   */
  public static boolean leftOutAfter(Throwable e) {
    return e instanceof IOException
        && !(e instanceof InterruptedIOException)
        && !(e instanceof StaleGenerationException)
        && !(e instanceof RequestRefusedException);
  }

  /** Whether daemon {@code d} failed lately in this JVM. */
  public boolean isDown(int d) {
    long until = downUntil.get(d);
    return until != 0 && until - System.nanoTime() > 0;
  }

  /**
   * Why a push now under {@code a} would go to an owner that failed lately, or null when none
   * did.
   */
  public String downReason(Assignment a) {
    long now = System.nanoTime();
    for (int k = 0; k < a.nodes(); k++) {
      int d = a.daemon(k);
      long until = downUntil.get(d);
      if (until != 0 && until - now > 0) {
        return "daemon " + conf.daemons.get(d) + " failed lately: " + downWhy.get(d);
      }
    }
    return null;
  }

  /** This JVM's pool for the application and daemons of {@code conf}. */
  public static Daemons of(ServiceConf conf) {
    return POOLS.computeIfAbsent(
        conf.identity(),
        k -> {
          Daemons pool = new Daemons(conf);
          pool.sweeping =
              SWEEPER.scheduleWithFixedDelay(
                  pool::closeStale, IDLE_SWEEP_MS, IDLE_SWEEP_MS, TimeUnit.MILLISECONDS);
          return pool;
        });
  }

  /**
   * How long the first connect tries a busy daemon before a task looks at the pool again (a
   * connection this JVM gave back meanwhile holds one of the daemon's slots, and is the one to
   * take); each later look waits twice as long, up to {@link #BUSY_RECHECK_MAX_MS}, so that the
   * client's own waits between tries (doubling from 50 ms to 2 s within one connect) keep
   * growing rather than starting over every second.
   */
  public static final long BUSY_RECHECK_MS = 1_000;

  /** The longest a task's connect tries a busy daemon between two looks at the pool. */
  public static final long BUSY_RECHECK_MAX_MS = 8_000;

  /**
   * A connection to daemon {@code d} for a task: an idle one, or a new one; a busy daemon is
   * tried for {@link #TASK_BUSY_WAIT_MS}, the pool looked at again after {@link
   * #BUSY_RECHECK_MS}, then after twice as long each time. An interrupted task (killed,
   * cancelled) stops waiting.
   */
  public long borrow(int d) throws IOException {
    long deadline = System.nanoTime() + TASK_BUSY_WAIT_MS * 1_000_000L;
    long recheckMs = BUSY_RECHECK_MS;
    while (true) {
      long c = idleOne(d);
      if (c != 0) {
        return c;
      }
      long leftMs = Math.max(0, (deadline - System.nanoTime()) / 1_000_000L);
      try {
        return connect(d, Math.min(recheckMs, leftMs));
      } catch (DaemonBusyException e) {
        if (leftMs <= recheckMs) {
          throw e;
        }
        if (Thread.currentThread().isInterrupted()) {
          InterruptedIOException stop =
              new InterruptedIOException("interrupted while waiting on a busy daemon");
          stop.initCause(e);
          throw stop;
        }
      }
      recheckMs = Math.min(BUSY_RECHECK_MAX_MS, recheckMs * 2);
    }
  }

  /**
   * As {@link #borrow}, a busy daemon refused at once: for what may be given up (asking a daemon
   * to drop an abandoned attempt's chunks, which it frees with the shuffle anyway).
   */
  public long borrowNow(int d) throws IOException {
    long c = idleOne(d);
    return c != 0 ? c : connect(d, 0);
  }

  /**
   * Closes native push {@code push} of an attempt that will not commit at daemon {@code d}, asking
   * the daemon, where it is not down in this JVM, to drop what the attempt staged there ({@code
   * DropAttempt}, on a connection of the pool or a new one); true when it did. Best effort: a
   * daemon that cannot be asked frees the chunks with the shuffle, or after {@code
   * STAGED_IDLE_LIMIT} (30 minutes) without a push. The handle is closed either way.
   */
  public boolean drop(int d, long push) {
    if (isDown(d)) {
      ServiceNative.pushAbandon(push);
      return false;
    }
    long connection = 0;
    try {
      connection = borrowNow(d);
      ServiceNative.pushDrop(push, connection);
      giveBack(d, connection);
      return true;
    } catch (Throwable e) {
      if (connection != 0) {
        failed(d, connection, e);
      } else {
        ServiceNative.pushAbandon(push);
      }
      return false;
    }
  }

  /**
   * Asks daemon {@code d}, where it is not down in this JVM, to drop what map attempt {@code
   * attempt} of map {@code map} committed there ({@code DropAttempt} by the attempt's identity, its
   * push closed already): an attempt whose output stays on its executor after its push to another
   * daemon failed, so that no read will name it there; true when it did. Best effort: a daemon
   * that cannot be asked frees the blocks with the shuffle.
   */
  public boolean dropCommitted(int d, int shuffle, int generation, int map, long attempt) {
    if (isDown(d)) {
      return false;
    }
    long connection = 0;
    try {
      connection = borrowNow(d);
      ServiceNative.dropAttempt(connection, shuffle, generation, map, attempt);
      giveBack(d, connection);
      return true;
    } catch (Throwable e) {
      if (connection != 0) {
        failed(d, connection, e);
      }
      return false;
    }
  }

  /** Closes, in every daemon's pool, the idle connections older than {@link #IDLE_KEEP_NANOS}. */
  private void closeStale() {
    long now = System.nanoTime();
    for (ConcurrentLinkedDeque<long[]> q : idle) {
      // Given back at the head: the oldest are at the tail.
      long[] c;
      while ((c = q.peekLast()) != null && now - c[1] >= IDLE_KEEP_NANOS) {
        if (q.removeLastOccurrence(c)) {
          ServiceNative.close(c[0]);
        }
      }
    }
  }

  /** An idle connection to daemon {@code d} young enough to reuse and still open, or 0. */
  private long idleOne(int d) {
    long now = System.nanoTime();
    long[] c;
    while ((c = idle.get(d).pollFirst()) != null) {
      // One the daemon closed (it restarted, or exited) is not handed out: a push on it would
      // fail and leave a live daemon out of this JVM's pushes.
      if (now - c[1] < IDLE_KEEP_NANOS && ServiceNative.stillOpen(c[0])) {
        return c[0];
      }
      ServiceNative.close(c[0]);
    }
    return 0;
  }

  /** A new authenticated connection to daemon {@code d}, a busy one tried for {@code busyMs}. */
  private long connect(int d, long busyMs) throws IOException {
    return ServiceNative.connect(
        conf.daemons.get(d), conf.app, conf.key, ServiceConf.LEASE_MS, busyMs, false);
  }

  /** Gives a connection back: kept when it can take the next request, closed otherwise. */
  public void giveBack(int d, long connection) {
    if (connection == 0) {
      return;
    }
    if (!closed && ServiceNative.idle(connection) && idle.get(d).size() < IDLE_PER_DAEMON) {
      long[] kept = {connection, System.nanoTime()};
      idle.get(d).addFirst(kept);
      // Closed meanwhile: close() may have emptied the pool before this one went in.
      if (closed && idle.get(d).removeFirstOccurrence(kept)) {
        ServiceNative.close(connection);
      }
    } else {
      ServiceNative.close(connection);
    }
  }

  /** Closes a connection that is not to be reused (a read left mid-stream). */
  public void discard(long connection) {
    if (connection != 0) {
      ServiceNative.close(connection);
    }
  }

  /**
   * Closes {@code connection} to daemon {@code d}, whose request failed with {@code why}; when the
   * connection itself failed (not a {@link DaemonRefusedException}, an answer of a live daemon),
   * every idle one to that daemon too: a daemon killed or restarted broke them all, and the next
   * request to it is to open a fresh connection (to the restarted process) rather than fail on
   * the next stale one.
   */
  public void failed(int d, long connection, Throwable why) {
    discard(connection);
    // A live daemon's answer, or a task stopped while it waited on one (busy).
    if (why instanceof DaemonRefusedException || why.getCause() instanceof DaemonRefusedException) {
      return;
    }
    long[] c;
    while ((c = idle.get(d).pollFirst()) != null) {
      ServiceNative.close(c[0]);
    }
  }

  /**
   * Sends one request to every daemon, to up to {@link #REQUEST_THREADS} at once; the first
   * failure in daemon order, after every daemon answered or failed (each wait is bounded by the
   * client's connect and reply timeouts).
   */
  public void onEvery(int what, int shuffle, int partitions) throws IOException {
    IOException[] failed = each(d -> request(d, what, shuffle, generation, partitions), false);
    for (IOException e : failed) {
      if (e != null) {
        throw e;
      }
    }
  }

  /**
   * Registers generation {@code generation} of a shuffle of {@code partitions} partitions at every
   * daemon that has not failed lately ({@link #markDown}), at once; its assignment over those that
   * took it. A daemon that fails the registration is left out (the log names it), and marked down
   * when its connection failed (not when it refused: it is alive); none taking it is the first
   * failure.
   *
   * @throws IOException when no daemon registered the generation
   */
  public Assignment register(int shuffle, int generation, int partitions) throws IOException {
    IOException[] failed =
        each(d -> request(d, ServiceNative.REGISTER, shuffle, generation, partitions), true);
    int[] owners = new int[failed.length];
    int n = 0;
    IOException first = null;
    for (int d = 0; d < failed.length; d++) {
      if (failed[d] == null) {
        owners[n++] = d;
      } else {
        if (first == null) {
          first = failed[d];
        }
        if (!(failed[d] instanceof LeftOut) && !(failed[d] instanceof DaemonRefusedException)) {
          markDown(d, failed[d].getMessage());
        }
      }
    }
    if (n == 0) {
      throw first;
    }
    if (first != null) {
      LOG.warn(
          "Sluice: shuffle {} generation {} goes to {} of {} daemons: {}",
          shuffle,
          generation,
          n,
          failed.length,
          first.getMessage());
    }
    return new Assignment(generation, java.util.Arrays.copyOf(owners, n));
  }

  /**
   * Deletes shuffle {@code shuffle} at the owners of {@code old} that {@code next} leaves out (a
   * daemon that failed the new registration or was skipped as down lately): what they hold of
   * the old generation no registered output names any more. Best effort, one daemon after the
   * other: one that cannot be reached keeps it until the application ends (each failure is
   * logged).
   */
  public void unregisterLeftOut(int shuffle, Assignment old, Assignment next) {
    for (int k = 0; k < old.nodes(); k++) {
      int d = old.daemon(k);
      if (next.owns(d)) {
        continue;
      }
      IOException e = request(d, ServiceNative.UNREGISTER, shuffle, 0, 0);
      if (e == null) {
        LOG.info(
            "Sluice: shuffle {} deleted at {}, left out of generation {}",
            shuffle,
            conf.daemons.get(d),
            next.generation);
      } else {
        LOG.warn(
            "Sluice: shuffle {} left at {} (out of generation {}): {}",
            shuffle,
            conf.daemons.get(d),
            next.generation,
            e.getMessage());
      }
    }
  }

  /**
   * The generation after {@code previous} for a shuffle's new assignment: above it, and at least
   * the seconds since 2026 now, so that it stays above any earlier run's under the same name.
   */
  public static int nextGeneration(int previous) {
    return Math.max(previous + 1, secondsSince2026());
  }

  private static int secondsSince2026() {
    return (int) Math.max(0, (System.currentTimeMillis() - GENERATION_EPOCH_MS) / 1000);
  }

  /** A daemon not asked, as it failed lately ({@link #markDown}). */
  private static final class LeftOut extends IOException {
    private static final long serialVersionUID = 1L;

    LeftOut(String why) {
      super(why);
    }
  }

  /**
   * One request to every daemon (those down lately left out when {@code skipDown}), to up to
   * {@link #REQUEST_THREADS} at once; each daemon's failure, or null, after all answered or failed.
   */
  private IOException[] each(IntFunction<IOException> request, boolean skipDown) {
    int nodes = conf.nodes();
    long now = System.nanoTime();
    List<Future<IOException>> answers = new ArrayList<>(nodes);
    ExecutorService pool = nodes > 1 ? requestPool() : null;
    for (int d = 0; d < nodes; d++) {
      int daemon = d;
      long until = downUntil.get(d);
      if (skipDown && until != 0 && until - now > 0) {
        answers.add(
            CompletableFuture.completedFuture(
                new LeftOut(
                    "daemon " + conf.daemons.get(d) + " failed lately: " + downWhy.get(d))));
      } else {
        answers.add(
            pool == null
                ? CompletableFuture.completedFuture(request.apply(daemon))
                : pool.submit(() -> request.apply(daemon)));
      }
    }
    IOException[] failed = new IOException[nodes];
    for (int d = 0; d < nodes; d++) {
      try {
        failed[d] = answers.get(d).get();
      } catch (InterruptedException ie) {
        Thread.currentThread().interrupt();
        failed[d] = new IOException("interrupted while waiting on the daemons", ie);
      } catch (ExecutionException ee) {
        failed[d] = new IOException(ee.getCause().getMessage(), ee.getCause());
      }
    }
    return failed;
  }

  /**
   * One request to daemon {@code d}; its failure, or null. A pooled connection that fails (the
   * daemon restarted since it was opened) is followed by one try on a fresh connection: these
   * requests (register, unregister, renew, end) can be repeated.
   */
  private IOException request(int d, int what, int shuffle, int gen, int partitions) {
    long c = idleOne(d);
    if (c != 0) {
      try {
        ServiceNative.request(c, what, shuffle, gen, partitions);
        giveBack(d, c);
        return null;
      } catch (IOException | RuntimeException e) {
        failed(d, c, e);
        if (e instanceof DaemonRefusedException refused) {
          return refused;
        }
      }
    }
    c = 0;
    try {
      c = connect(d, DRIVER_BUSY_WAIT_MS);
      ServiceNative.request(c, what, shuffle, gen, partitions);
      giveBack(d, c);
      return null;
    } catch (IOException | RuntimeException e) {
      failed(d, c, e);
      return e instanceof IOException io ? io : new IOException(e.getMessage(), e);
    }
  }

  private synchronized ExecutorService requestPool() {
    if (requests == null) {
      AtomicInteger n = new AtomicInteger();
      int threads = Math.min(REQUEST_THREADS, conf.nodes());
      ThreadPoolExecutor pool =
          new ThreadPoolExecutor(
              threads,
              threads,
              60,
              TimeUnit.SECONDS,
              new LinkedBlockingQueue<>(),
              r -> {
                Thread t = new Thread(r, "sluice-service-request-" + n.incrementAndGet());
                t.setDaemon(true);
                return t;
              });
      // Idle between shuffles: the threads go after a minute and come back on the next request.
      pool.allowCoreThreadTimeOut(true);
      requests = pool;
    }
    return requests;
  }

  /**
   * How long a renewal tries a busy daemon for the lease's own connection: half the renewal
   * period (the lease is ten periods long).
   */
  public static final long LEASE_BUSY_WAIT_MS = ServiceConf.RENEW_MS / 2;

  /**
   * The lease's own connection to each daemon (0 while none): held by the renewer between
   * renewals, outside the pool and its sweep, so that renewing never needs a new connection slot
   * at a daemon that tasks' connections fill (the pool closes idle connections after 30 s, and
   * renewals come every 60 s). It is a lease connection: it takes one of the slots the daemon keeps
   * for leases beside its {@code --max-connections}, so that it never keeps a task out either. A
   * renewal every 60 s keeps it under the daemon's idle timeout.
   */
  private final AtomicLongArray leaseConnections;

  /**
   * Held by a renewal round; {@link #close} takes it before ending the application, so that a
   * round under way cannot renew (and so recreate, empty) the application after its end.
   */
  private final ReentrantLock renewing = new ReentrantLock();

  /**
   * Renews the application's lease at every daemon now, each on the lease's connection to it (a
   * new one where none is held or the held one failed); the number of daemons that failed, each
   * failure logged. What the renewer runs every {@code RENEW_MS}; public for the tests.
   */
  public int renewNow() {
    IOException[] failed;
    // One round at a time (the renewer's and a test's): each daemon's held connection is
    // taken and put back by one round only.
    renewing.lock();
    try {
      if (closed) {
        return 0;
      }
      failed = each(this::renewAt, false);
    } finally {
      renewing.unlock();
    }
    int n = 0;
    for (int d = 0; d < failed.length; d++) {
      if (failed[d] != null) {
        n++;
        LOG.warn(
            "Sluice: renewing the service lease of {} at {}: {}",
            conf.app,
            conf.daemons.get(d),
            failed[d].getMessage());
      }
    }
    return n;
  }

  /** The lease's connection to daemon {@code d} held now, or 0 (for the tests). */
  public long leaseConnection(int d) {
    return leaseConnections.get(d);
  }

  /** Renews the lease at daemon {@code d} on the lease's connection; the failure, or null. */
  private IOException renewAt(int d) {
    long c = leaseConnections.getAndSet(d, 0);
    if (c != 0) {
      try {
        ServiceNative.request(c, ServiceNative.RENEW, 0, 0, 0);
        keepLeaseConnection(d, c);
        return null;
      } catch (IOException | RuntimeException e) {
        // The daemon restarted, or refused: a fresh connection below says which.
        ServiceNative.close(c);
      }
    }
    c = 0;
    try {
      c =
          ServiceNative.connect(
              conf.daemons.get(d), conf.app, conf.key, ServiceConf.LEASE_MS, LEASE_BUSY_WAIT_MS,
              true);
      ServiceNative.request(c, ServiceNative.RENEW, 0, 0, 0);
      keepLeaseConnection(d, c);
      return null;
    } catch (IOException | RuntimeException e) {
      if (c != 0) {
        ServiceNative.close(c);
      }
      return e instanceof IOException io ? io : new IOException(e.getMessage(), e);
    }
  }

  /** Keeps {@code c} as daemon {@code d}'s lease connection, or closes it once the pool closed. */
  private void keepLeaseConnection(int d, long c) {
    leaseConnections.set(d, c);
    if (closed && leaseConnections.compareAndSet(d, c, 0)) {
      ServiceNative.close(c);
    }
  }

  /** On the driver: renews the application's lease at every daemon every {@code RENEW_MS}. */
  public synchronized void renewLeases() {
    if (renewer != null) {
      return;
    }
    renewer =
        Executors.newSingleThreadScheduledExecutor(
            r -> {
              Thread t = new Thread(r, "sluice-service-lease");
              t.setDaemon(true);
              return t;
            });
    renewer.scheduleWithFixedDelay(
        () -> {
          try {
            renewNow();
          } catch (RuntimeException e) {
            LOG.warn("Sluice: renewing the service lease of {}: {}", conf.app, e.getMessage());
          }
        },
        ServiceConf.RENEW_MS,
        ServiceConf.RENEW_MS,
        TimeUnit.MILLISECONDS);
  }

  /** Closes every idle connection and stops the renewer; on the driver, ends the application. */
  public void close(boolean endApplication) {
    closed = true;
    synchronized (this) {
      if (sweeping != null) {
        sweeping.cancel(false);
      }
      if (renewer != null) {
        // Not interrupted: a round under way finishes its requests (each bounded) rather than
        // leave them running on the request threads past the wait below.
        renewer.shutdown();
        renewer = null;
      }
    }
    // A round under way ends before the application does (outside this object's lock, which its
    // requests take), so that it cannot renew, and so recreate empty, an ended application. Past
    // the wait (a daemon busy for all of LEASE_BUSY_WAIT_MS) the application ends anyway, and a
    // late renewal's empty application lapses with its lease.
    boolean roundEnded = false;
    try {
      roundEnded = renewing.tryLock(2 * LEASE_BUSY_WAIT_MS, TimeUnit.MILLISECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    if (roundEnded) {
      renewing.unlock();
    }
    synchronized (this) {
      closeNow(endApplication);
    }
  }

  private void closeNow(boolean endApplication) {
    for (int d = 0; d < leaseConnections.length(); d++) {
      long c = leaseConnections.getAndSet(d, 0);
      if (c != 0) {
        ServiceNative.close(c);
      }
    }
    if (endApplication) {
      try {
        onEvery(ServiceNative.END_APPLICATION, 0, 0);
      } catch (IOException | RuntimeException e) {
        LOG.warn(
            "Sluice: ending {} at the daemons: {} (their leases delete it)",
            conf.app,
            e.getMessage());
      }
    }
    if (requests != null) {
      requests.shutdown();
      requests = null;
    }
    for (ConcurrentLinkedDeque<long[]> q : idle) {
      long[] c;
      while ((c = q.pollFirst()) != null) {
        ServiceNative.close(c[0]);
      }
    }
    POOLS.remove(conf.identity(), this);
  }
}
