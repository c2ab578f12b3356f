package dev.sluice.spark.service;

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
 * <p>Spark's listener bus is asynchronous: a rerun stage submitted before the new assignment is in
 * place runs on the old one, and its map tasks keep their outputs on their executors where an owner
 * is gone (or, pushed at a generation replaced meanwhile, are read as missing, which fails the
 * read once more and opens another generation). Every such path reruns or keeps data; the daemons'
 * generations and commit checks keep an old assignment's data from ever being read as a new one's.
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

  @Override
  public void onTaskEnd(SparkListenerTaskEnd end) {
    if (!(end.reason() instanceof FetchFailed f)) {
      return;
    }
    int shuffle = ServiceStreams.shuffleOf(f.bmAddress());
    Watched w = shuffle < 0 ? null : shuffles.get(shuffle);
    if (w == null) {
      return;
    }
    int failed = ServiceStreams.generationIn(f.message());
    worker.execute(() -> reassign(shuffle, w, failed));
  }

  /** Opens the next generation of {@code shuffle} when a read of its current one failed. */
  private void reassign(int shuffle, Watched w, int failed) {
    Assignment now = w.cell().get();
    if (now == null || now.generation != failed || shuffles.get(shuffle) != w) {
      return;
    }
    try {
      Assignment next =
          daemons.register(shuffle, Daemons.nextGeneration(now.generation), w.partitions());
      if (!w.cell().replace(now, next)) {
        return;
      }
      LOG.warn(
          "Sluice: a read of shuffle {} at generation {} failed; its rerun goes to {} ({})",
          shuffle,
          now.generation,
          next.addresses(daemons.conf),
          next);
    } catch (IOException | RuntimeException e) {
      LOG.warn(
          "Sluice: a read of shuffle {} at generation {} failed and no daemon took a new one ({});"
              + " its rerun's map outputs stay on their executors",
          shuffle,
          now.generation,
          e.getMessage());
    }
  }
}
