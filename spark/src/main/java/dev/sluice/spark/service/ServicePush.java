package dev.sluice.spark.service;

import dev.sluice.spark.jni.ServiceNative;
import dev.sluice.spark.metrics.SluiceMetrics;
import java.io.File;
import java.io.IOException;
import java.io.InterruptedIOException;
import java.util.Arrays;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A map attempt's output pushed to the daemons of its shuffle's {@link Assignment}: its data file
 * (each partition's segment of Sluice blocks and trailer, back to back in partition order) read
 * once by the native side, owner by owner (each owns a contiguous range of partitions), each
 * segment pushed in chunks of about 1 MiB and the attempt committed there before the next owner's
 * part; every owner gets a commit, those without data included, so that each can tell a winner
 * that committed from one it never saw.
 *
 * <p>Where the attempt pushed spills while it ran ({@link EarlyPush}), each owner's part goes on
 * through the same native push (its chunks continue that sequence) and each partition's segment
 * from the bytes its spills already sent.
 *
 * <p>An output smaller than {@link ServiceConf#minPushBytes}, or of a shuffle it estimates smaller
 * than {@link ServiceConf#minShuffleBytes} ({@link ServiceConf#keepReason}), is not pushed: it
 * stays on the executor like a failed push's (below), without marking any daemon down, and is
 * counted in {@code serviceSmallKept}. A shuffle whose outputs are all kept is read as an embedded
 * one (no reduce task reads from a daemon). An output whose spills were pushed while it mapped
 * ({@code early}) is pushed whole: its first parts are at the daemons already, and its map task
 * began pushing early only once its bytes so far would be pushed.
 *
 * <p>A push that fails (a daemon gone, refusing, or out of disk) abandons the attempt's pushes (a
 * daemon that refused, being up, is asked to drop what the attempt staged there) and keeps its
 * output on the executor that wrote it: the map status then names that executor, reduce
 * tasks fetch it as an embedded output, and what the attempt committed at the daemons before the
 * failure is never read (reads name only the attempts registered at the service's location), so
 * those daemons are asked to drop it ({@link Daemons#dropCommitted}). The
 * failed daemon is left out of this JVM's pushes for {@link Daemons#DOWN_NANOS}, so that later map
 * tasks do not wait on the same failure; a map task never fails, nor retries, for the service. A
 * push refused as of a stale generation (the driver assigned the shuffle anew while this attempt
 * ran: {@link StaleGenerationException}) keeps the output here too, without marking the daemon
 * down: it is alive and serves the newer generation; so does one refused for what it names ({@link
 * RequestRefusedException}: a commit that does not match what the daemon staged, a shuffle it does
 * not hold, a map whose winner a read there already named: Spark ran the map again after losing
 * that winner's status with its host, and this attempt, kept here, is read from here while the
 * other maps' outputs stay at the daemons). A data file that cannot be read is the task's own
 * fault and fails it.
 */
public final class ServicePush {
  private static final Logger LOG = LoggerFactory.getLogger(ServicePush.class);

  private ServicePush() {}

  /**
   * Pushes the attempt's output unless it is small or a daemon failed lately; true when the daemons
   * hold it, false when it stays on this executor (counted in {@code serviceSmallKept}, or logged
   * and counted in {@code serviceFallbacks}). {@code early}, the attempt's pushes while it ran or
   * null, has been awaited; what of it is not committed here is dropped when the task ends ({@link
   * EarlyPush#abandon}, from the output's abort).
   */
  public static boolean pushOrKeep(
      ServiceConf conf,
      int shuffle,
      Assignment assignment,
      int mapIndex,
      int maps,
      long attempt,
      File data,
      long[] lengths,
      EarlyPush early)
      throws InterruptedIOException {
    long bytes = 0;
    for (long l : lengths) {
      bytes += l;
    }
    String small = early == null ? conf.keepReason(bytes, maps) : null;
    if (small != null) {
      SluiceMetrics.SERVICE_SMALL_KEPT.incrementAndGet();
      LOG.debug(
          "Sluice: map {} (attempt {}) of shuffle {} stays on this executor: {}",
          mapIndex,
          attempt,
          shuffle,
          small);
      return false;
    }
    Daemons daemons = Daemons.of(conf);
    String why = early == null ? null : early.await();
    if (why == null) {
      why = daemons.downReason(assignment);
    }
    if (why == null) {
      try {
        push(daemons, shuffle, assignment, mapIndex, attempt, data, lengths, early);
        return true;
      } catch (InterruptedIOException e) {
        // The task was killed: it reports no output, and no daemon is at fault.
        throw e;
      } catch (IOException e) {
        why = e.getMessage();
      }
    }
    SluiceMetrics.SERVICE_FALLBACKS.incrementAndGet();
    LOG.info(
        "Sluice: map {} (attempt {}) of shuffle {} stays on this executor: {}",
        mapIndex,
        attempt,
        shuffle,
        why);
    return false;
  }

  /**
   * Pushes and commits at one owner after another, starting at the owner {@code mapIndex} picks
   * (so that map tasks starting together spread over the daemons), each with one connection
   * borrowed for its part only: a map task holds one connection at a time, not one per daemon.
   * Each partition's segment goes from the bytes {@code early} (or null) already pushed on.
   */
  static void push(
      Daemons daemons,
      int shuffle,
      Assignment assignment,
      int mapIndex,
      long attempt,
      File data,
      long[] lengths,
      EarlyPush early)
      throws IOException {
    int nodes = assignment.nodes();
    int partitions = lengths.length;
    long[] starts = new long[partitions];
    long[] ends = new long[partitions];
    long at = 0;
    for (int p = 0; p < partitions; p++) {
      long sent = early == null ? 0 : early.pushed(p);
      if (sent > lengths[p]) {
        throw new IOException(
            "partition " + p + ": " + sent + " bytes pushed early, " + lengths[p] + " in all");
      }
      starts[p] = at + sent;
      at += lengths[p];
      ends[p] = at;
    }
    int committed = 0;
    try {
      for (; committed < nodes; committed++) {
        int k = (mapIndex + committed) % nodes;
        try {
          long opened = early == null ? 0 : early.take(k);
          pushTo(daemons, assignment, k, shuffle, mapIndex, attempt, data, starts, ends, opened);
        } catch (IOException e) {
          if (Daemons.leftOutAfter(e)) {
            daemons.markDown(assignment.daemon(k), e.getMessage());
          }
          throw e;
        }
      }
    } finally {
      if (committed < nodes) {
        takeBack(daemons, assignment, shuffle, mapIndex, attempt, committed);
      }
    }
  }

  /**
   * Takes back the attempt's commits at the first {@code committed} owners of its push order (its
   * push failed at the next one, so its output stays on the executor and no read will name it at
   * the daemons): each is asked to drop the attempt, counted in {@code serviceCommitsDropped}.
   */
  private static void takeBack(
      Daemons daemons,
      Assignment assignment,
      int shuffle,
      int mapIndex,
      long attempt,
      int committed) {
    int nodes = assignment.nodes();
    for (int i = 0; i < committed; i++) {
      int d = assignment.daemon((mapIndex + i) % nodes);
      if (daemons.dropCommitted(d, shuffle, assignment.generation, mapIndex, attempt)) {
        SluiceMetrics.SERVICE_COMMITS_DROPPED.incrementAndGet();
      }
    }
  }

  /**
   * Owner {@code k}'s partitions of the attempt's output (partition {@code p} the data file's bytes
   * {@code starts[p]..ends[p]}), pushed and committed there through {@code opened}, the push the
   * attempt's spills went through (or 0: a new one).
   */
  private static void pushTo(
      Daemons daemons,
      Assignment assignment,
      int k,
      int shuffle,
      int mapIndex,
      long attempt,
      File data,
      long[] starts,
      long[] ends,
      long opened)
      throws IOException {
    int partitions = starts.length;
    int d = assignment.daemon(k);
    int lo = assignment.first(k, partitions);
    int hi = assignment.first(k + 1, partitions);
    long push = opened;
    Throwable failure = null;
    long connection;
    try {
      connection = daemons.borrow(d);
    } catch (IOException e) {
      if (push != 0) {
        ServiceNative.pushAbandon(push);
      }
      throw e;
    }
    if (push == 0) {
      push = ServiceNative.pushOpen(shuffle, assignment.generation, mapIndex, attempt);
    }
    try {
      if (lo < hi) {
        ServiceNative.pushFile(
            push,
            connection,
            data.getAbsolutePath(),
            lo,
            Arrays.copyOfRange(starts, lo, hi),
            Arrays.copyOfRange(ends, lo, hi));
      }
      // Every chunk acknowledged first: a refusal of the last ones comes here, the push still
      // open, so that the daemon can be asked to drop what the attempt staged (below).
      ServiceNative.pushSettle(push, connection);
      long committing = push;
      push = 0;
      ServiceNative.pushCommit(committing, connection);
    } catch (Throwable e) {
      failure = e;
      daemons.failed(d, connection, e);
      throw e;
    } finally {
      if (push != 0
          && failure instanceof DaemonRefusedException
          && !(failure instanceof StaleGenerationException)) {
        // The daemon answered: it is up, and what the attempt staged there before the refusal
        // (a full disk, a shutdown) would hold its memory or disk until the shuffle goes. It is
        // asked to drop it.
        if (daemons.drop(d, push)) {
          SluiceMetrics.SERVICE_REFUSED_DROPS.incrementAndGet();
        }
      } else if (push != 0) {
        ServiceNative.pushAbandon(push);
      }
    }
    daemons.giveBack(d, connection);
  }
}
