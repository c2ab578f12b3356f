package dev.sluice.spark.service;

import dev.sluice.spark.jni.ServiceNative;
import java.io.File;
import java.io.FileInputStream;
import java.io.IOException;
import java.io.InputStream;

/**
 * A map attempt's output pushed to the daemons: its data file (each partition's segment of Sluice
 * blocks and trailer, back to back in partition order) read once, each segment pushed to the
 * daemon that owns the partition in chunks of about 1 MiB, then a commit at every daemon, those
 * without data included, so that each can tell a winner that committed from one it never saw.
 * Any failure abandons the pushes and fails the attempt; nothing it staged is ever read.
 */
public final class ServicePush {
  private ServicePush() {}

  /** Bytes read from the data file per call. */
  static final int READ_BYTES = 1 << 20;

  public static void push(
      Daemons daemons,
      int shuffle,
      int generation,
      int mapIndex,
      long attempt,
      File data,
      long[] lengths)
      throws IOException {
    int nodes = daemons.conf.nodes();
    long[] connections = new long[nodes];
    long[] pushes = new long[nodes];
    boolean ok = false;
    try {
      for (int d = 0; d < nodes; d++) {
        connections[d] = daemons.borrow(d);
        pushes[d] = ServiceNative.pushOpen(shuffle, generation, mapIndex, attempt);
      }
      byte[] buf = new byte[READ_BYTES];
      try (InputStream in = new FileInputStream(data)) {
        for (int p = 0; p < lengths.length; p++) {
          int d = Nodes.of(p, lengths.length, nodes);
          long left = lengths[p];
          while (left > 0) {
            int n = in.read(buf, 0, (int) Math.min(buf.length, left));
            if (n < 0) {
              throw new IOException(
                  data + " ends inside partition " + p + ", " + left + " bytes short");
            }
            // Records ride in the segment's trailer, which the reader checks.
            ServiceNative.pushAdd(pushes[d], connections[d], p, 0, buf, 0, n);
            left -= n;
          }
        }
      }
      for (int d = 0; d < nodes; d++) {
        long p = pushes[d];
        pushes[d] = 0;
        ServiceNative.pushCommit(p, connections[d]);
      }
      ok = true;
    } finally {
      for (int d = 0; d < nodes; d++) {
        if (pushes[d] != 0) {
          ServiceNative.pushAbandon(pushes[d]);
        }
        if (ok) {
          daemons.giveBack(d, connections[d]);
        } else {
          daemons.discard(connections[d]);
        }
      }
    }
  }
}
