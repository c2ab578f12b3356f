package dev.sluice.spark.service;

import dev.sluice.spark.jni.ServiceNative;
import java.io.IOException;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import org.apache.spark.FetchFailed;
import org.apache.spark.SparkContext;
import org.apache.spark.scheduler.SparkListener;
import org.apache.spark.scheduler.SparkListenerTaskEnd;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The driver's answer to a failed read at the daemons: a new generation of the shuffle, assigned
 * over the daemons that take it, for the stages Spark submits next.
 *
 * <p>A reduce task whose read at the daemons fails ends with a fetch failure at the shuffle's
 * service location, naming the generation it read ({@link ServiceStreams#generationIn}). Spark
 * then unregisters every output of the shuffle at the service (map index -1) and, about 200 ms
 * later, resubmits the map stage and the failed one, serializing their tasks with the shuffle's
 * handle. This listener sees the task's end first: when the failure names the shuffle's current
 * generation, it registers the next one ({@link Daemons#nextGeneration}) at every daemon that has
 * not failed lately and puts the new {@link Assignment} in the handle's {@link
 * CurrentAssignment} (the cell, not the handle, is held here, so Spark's context cleaner still
 * sees the shuffle's dependency go), so the rerun map tasks push to the live daemons (a daemon
 * that died is left out; one restarted empty is taken back), and the rerun reduce tasks read them
 * there. A daemon registering a newer generation drops the older's
 * data, which no registered map output names any more. Failures naming an older generation (more
 * tasks of the same failed stage, a stale stage's stragglers) change nothing, so one failure opens
 * one generation.
 *
 * <p>The listener begins the replacement in the handle's cell as it sees the task's end (no I/O
 * there) and registers on a thread of its own; Spark's serialization of the rerun stage waits for
 * the registration ({@link CurrentAssignment#PENDING_WAIT_MS} at most). Only a listener bus
 * delivering the task's end later than Spark resubmits (about 200 ms) lets a rerun start on the old
 * assignment: its map tasks then keep their outputs on their executors where an owner is gone, or,
 * pushed at a generation replaced meanwhile, are found missing at the next read, which fails once
 * more and opens another generation. A fetch failure Spark ignores (from a stage attempt already
 * superseded) still opens a generation when it names the current one, and the live attempt's next
 * read fails once more the same way. Every such path reruns or keeps data; the daemons' generation
 * and commit checks keep an old assignment's data from ever being read as a new one's. Once the
 * new assignment is in the cell, the shuffle is deleted at the old owners it leaves out ({@link
 * Daemons#unregisterLeftOut}); one that cannot be reached (dead, most often) keeps the older
 * generation's data until Spark unregisters the shuffle or the application ends.
 */
public final class ServiceFailures extends SparkListener {
  private static final Logger LOG = LoggerFactory.getLogger(ServiceFailures.class);

  /** The listener of the current SparkContext (one per context). */
  private static ServiceFailures current;

  private final SparkContext context;
  private final Daemons daemons;
  private final ConcurrentHashMap<Integer, Watched> shuffles = new ConcurrentHashMap<>();

  /** Registrations run here, off the listener bus (a daemon gone can take a connect timeout). */
  private final ExecutorService worker;

  private ServiceFailures(SparkContext context, Daemons daemons) {
    this.context = context;
    this.daemons = daemons;
    ThreadPoolExecutor pool =
        new ThreadPoolExecutor(
            1,
            1,
            60,
            TimeUnit.SECONDS,
            new LinkedBlockingQueue<>(),
            r -> {
              Thread t = new Thread(r, "sluice-service-reassign");
              t.setDaemon(true);
              return t;
            });
    pool.allowCoreThreadTimeOut(true);
    this.worker = pool;
  }

  /** A service shuffle's partitions and its handle's assignment. */
  private record Watched(int partitions, CurrentAssignment cell) {}

  /**
   * Watches service shuffle {@code shuffle} of {@code partitions} partitions for failed reads,
   * under {@code context}'s listener bus (added with the context's first service shuffle).
   */
  public static synchronized void watch(
      SparkContext context,
      Daemons daemons,
      int shuffle,
      int partitions,
      CurrentAssignment cell) {
    if (current == null || current.context != context || current.daemons != daemons) {
      current = new ServiceFailures(context, daemons);
      context.addSparkListener(current);
    }
    current.shuffles.put(shuffle, new Watched(partitions, cell));
  }

  /** Stops watching {@code shuffle} (Spark unregistered it). */
  public static synchronized void forget(int shuffle) {
    if (current != null) {
      current.shuffles.remove(shuffle);
    }
  }

  /** Stops watching (the context stops): queued registrations are dropped. */
  public static synchronized void stop() {
    if (current != null) {
      current.worker.shutdownNow();
      current.shuffles.clear();
      current = null;
    }
  }

  @Override
  public void onTaskEnd(SparkListenerTaskEnd end) {
    if (!(end.reason() instanceof FetchFailed f)) {
      return;
    }
    int shuffle = ServiceStreams.shuffleOf(f.bmAddress());
    Watched w = shuffle < 0 ? null : shuffles.get(shuffle);
    if (w == null || !w.cell().begin(ServiceStreams.generationIn(f.message()))) {
      return;
    }
    Assignment failed = w.cell().get();
    try {
      worker.execute(() -> reassign(shuffle, w, failed));
    } catch (RuntimeException e) {
      // Stopped meanwhile.
      w.cell().end(null);
    }
  }

  /** Registers the next generation of {@code shuffle} after a read of {@code failed} failed. */
  private void reassign(int shuffle, Watched w, Assignment failed) {
    Assignment next = null;
    try {
      next = daemons.register(shuffle, Daemons.nextGeneration(failed.generation), w.partitions());
      LOG.warn(
          "Sluice: a read of shuffle {} at generation {} failed; its rerun goes to {} ({})",
          shuffle,
          failed.generation,
          next.addresses(daemons.conf),
          next);
    } catch (IOException | RuntimeException e) {
      LOG.warn(
          "Sluice: a read of shuffle {} at generation {} failed and no daemon took a new one ({});"
              + " its rerun's map outputs stay on their executors",
          shuffle,
          failed.generation,
          e.getMessage());
    } finally {
      w.cell().end(next);
    }
    if (next != null && shuffles.get(shuffle) == w) {
      // After the rerun has its assignment: the old generation's data at daemons left out.
      daemons.unregisterLeftOut(shuffle, failed, next);
    }
    if (next != null && shuffles.get(shuffle) != w) {
      // Spark unregistered the shuffle while the new generation was being registered.
      try {
        daemons.onEvery(ServiceNative.UNREGISTER, shuffle, 0);
      } catch (IOException | RuntimeException e) {
        LOG.warn(
            "Sluice: unregistering shuffle {}: {} (the lease deletes it)", shuffle, e.getMessage());
      }
    }
  }
}
