package dev.sluice.spark.service;

import dev.sluice.spark.jni.ServiceNative;
import dev.sluice.spark.metrics.SluiceMetrics;
import java.io.File;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.StandardOpenOption;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A map attempt's output pushed to the daemons: its data file (each partition's segment of Sluice
 * blocks and trailer, back to back in partition order) read once, daemon by daemon (each owns a
 * contiguous range of partitions), each segment pushed to its daemon in chunks of about 1 MiB and
 * the attempt committed there before the next daemon's part; every daemon gets a commit, those
 * without data included, so that each can tell a winner that committed from one it never saw.
 *
 * <p>A push that fails (a daemon gone, refusing, or out of disk) abandons the attempt's pushes and
 * keeps its output on the executor that wrote it: the map status then names that executor, reduce
 * tasks fetch it as an embedded output, and whatever the attempt staged or committed at the other
 * daemons is never read (reads name only the attempts registered at the service's location). The
 * failed daemon is left out of this JVM's pushes for {@link Daemons#DOWN_NANOS}, so that later map
 * tasks do not wait on the same failure; a map task never fails, nor retries, for the service.
 */
public final class ServicePush {
  private static final Logger LOG = LoggerFactory.getLogger(ServicePush.class);

  private ServicePush() {}

  /** Bytes read from the data file per call. */
  static final int READ_BYTES = 1 << 20;

  /**
   * Pushes the attempt's output unless a daemon failed lately; true when the daemons hold it, false
   * when it stays on this executor (logged, and counted in {@code serviceFallbacks}).
   */
  public static boolean pushOrKeep(
      Daemons daemons,
      int shuffle,
      int generation,
      int mapIndex,
      long attempt,
      File data,
      long[] lengths) {
    String why = daemons.downReason();
    if (why == null) {
      try {
        push(daemons, shuffle, generation, mapIndex, attempt, data, lengths);
        return true;
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
   * The attempt's data file, opened; a local failure is unchecked, so that it fails the task
   * rather than passing for a daemon's (the output could not be served from here either).
   */
  private static FileChannel open(File data) {
    try {
      return FileChannel.open(data.toPath(), StandardOpenOption.READ);
    } catch (IOException e) {
      throw new UncheckedIOException("Sluice: opening " + data + " to push it", e);
    }
  }

  /** Reads up to {@code len} bytes at {@code at}; -1 at the file's end. */
  private static int read(FileChannel in, File data, byte[] buf, int len, long at) {
    try {
      return in.read(ByteBuffer.wrap(buf, 0, len), at);
    } catch (IOException e) {
      throw new UncheckedIOException("Sluice: reading " + data + " to push it", e);
    }
  }

  /**
   * Pushes and commits at one daemon after another, starting at the daemon {@code mapIndex} picks
   * (so that map tasks starting together spread over the daemons), each with one connection
   * borrowed for its part only: a map task holds one connection at a time, not one per daemon.
   */
  static void push(
      Daemons daemons,
      int shuffle,
      int generation,
      int mapIndex,
      long attempt,
      File data,
      long[] lengths)
      throws IOException {
    int nodes = daemons.conf.nodes();
    int partitions = lengths.length;
    long[] offsets = new long[partitions + 1];
    for (int p = 0; p < partitions; p++) {
      offsets[p + 1] = offsets[p] + lengths[p];
    }
    byte[] buf = new byte[READ_BYTES];
    try (FileChannel in = open(data)) {
      for (int k = 0; k < nodes; k++) {
        int d = (mapIndex + k) % nodes;
        try {
          pushTo(daemons, d, shuffle, generation, mapIndex, attempt, in, data, buf, offsets);
        } catch (IOException e) {
          daemons.markDown(d, e.getMessage());
          throw e;
        }
      }
    }
  }

  /** Daemon {@code d}'s partitions of the attempt's output, pushed and committed there. */
  private static void pushTo(
      Daemons daemons,
      int d,
      int shuffle,
      int generation,
      int mapIndex,
      long attempt,
      FileChannel in,
      File data,
      byte[] buf,
      long[] offsets)
      throws IOException {
    int partitions = offsets.length - 1;
    int nodes = daemons.conf.nodes();
    long connection = daemons.borrow(d);
    long push = ServiceNative.pushOpen(shuffle, generation, mapIndex, attempt);
    boolean ok = false;
    try {
      for (int p = Nodes.first(d, partitions, nodes); p < Nodes.first(d + 1, partitions, nodes);
          p++) {
        long at = offsets[p];
        while (at < offsets[p + 1]) {
          int n = read(in, data, buf, (int) Math.min(buf.length, offsets[p + 1] - at), at);
          if (n < 0) {
            throw new UncheckedIOException(
                new IOException(data + " ends inside partition " + p + " at byte " + at));
          }
          // Records ride in the segment's trailer, which the reader checks.
          ServiceNative.pushAdd(push, connection, p, 0, buf, 0, n);
          at += n;
        }
      }
      long committing = push;
      push = 0;
      ServiceNative.pushCommit(committing, connection);
      ok = true;
    } finally {
      if (push != 0) {
        ServiceNative.pushAbandon(push);
      }
      if (ok) {
        daemons.giveBack(d, connection);
      } else {
        daemons.discard(connection);
      }
    }
  }
}
