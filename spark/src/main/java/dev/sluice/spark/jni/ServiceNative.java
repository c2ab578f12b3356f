package dev.sluice.spark.jni;

import java.io.IOException;

/**
 * The service's client side in the native library ({@code crates/sluice-jni/src/calls/service.rs}
 * over {@code sluice-service}'s client): connections to daemons, a map attempt's pushes and
 * commit, a read of one stream. Handles are ids checked on every call, never pointers. A daemon's
 * refusal or a failed connection is an {@code IOException} naming the daemon; a bad argument an
 * {@code IllegalArgumentException}.
 */
public final class ServiceNative {
  static {
    String why = NativeLibrary.unavailableReason();
    if (why != null) {
      throw new UnsatisfiedLinkError("Sluice's native library cannot be loaded: " + why);
    }
  }

  private ServiceNative() {}

  /** {@link #request}: registers a shuffle. */
  public static final int REGISTER = 0;
  /** {@link #request}: deletes a shuffle's data. */
  public static final int UNREGISTER = 1;
  /** {@link #request}: extends the application's lease. */
  public static final int RENEW = 2;
  /** {@link #request}: deletes all of the application's data. */
  public static final int END_APPLICATION = 3;

  /**
   * Connects to a daemon ({@code ip:port}) and authenticates; the connection's handle. A daemon
   * that answers busy (it serves its {@code --max-connections}) is tried again, after jittered
   * waits, for {@code busyWaitMs}; past it, its refusal is a {@code DaemonBusyException}. A
   * {@code leaseOnly} connection takes one of the slots the daemon keeps for leases' connections
   * beside its {@code --max-connections}, and may send only {@link #RENEW}.
   */
  public static native long connect(
      String address, String app, String keyHex, long leaseMs, long busyWaitMs, boolean leaseOnly)
      throws IOException;

  /** Closes a connection. */
  public static native void close(long connection);

  /** Whether a connection has no read half done (so it may serve the next request). */
  public static native boolean idle(long connection);

  /**
   * Whether an idle connection still reaches its daemon: nothing waits to be read on it (a daemon
   * sends nothing unasked, so what is there is the end of a daemon that exited, restarted or closed
   * it). Checked without waiting, before a pooled connection is reused.
   */
  public static native boolean stillOpen(long connection);

  /** One of {@link #REGISTER}, {@link #UNREGISTER}, {@link #RENEW}, {@link #END_APPLICATION}. */
  public static native void request(
      long connection, int what, int shuffle, int generation, int partitions) throws IOException;

  /** Opens a map attempt's push to one daemon; its handle. */
  public static native long pushOpen(int shuffle, int generation, int map, long attempt);

  /**
   * Adds partitions {@code first .. first + starts.length - 1} of the file at {@code path} (a data
   * file, or a spill file while the map runs) to a push: partition {@code first + i} is the
   * file's bytes {@code starts[i] .. ends[i]}, read natively and sent in chunks of about 1 MiB as
   * they fill. A daemon's failure is an {@code IOException}; a file that cannot be read, a {@code
   * SluiceException} (the task's own fault).
   */
  public static native void pushFile(
      long push, long connection, String path, int first, long[] starts, long[] ends)
      throws IOException;

  /**
   * Sends what is pending and waits for every chunk's acknowledgement, so that {@code connection}
   * may serve another request and the push go on later over another connection.
   */
  public static native void pushSettle(long push, long connection) throws IOException;

  /**
   * Sends what is pending and commits the attempt at the daemon (the push handle is closed either
   * way); true when first of its map index there.
   */
  public static native boolean pushCommit(long push, long connection) throws IOException;

  /**
   * Has the daemon drop what map attempt {@code attempt} of map {@code map} staged or committed
   * there: a commit taken back, its push handle closed already (refused for the attempt a read
   * there named as its map's winner).
   */
  public static native void dropAttempt(
      long connection, int shuffle, int generation, int map, long attempt) throws IOException;

  /** Drops a push that will not commit (what it staged stays at the daemon). */
  public static native void pushAbandon(long push);

  /**
   * Closes a push that will not commit and has the daemon drop what it staged of it (the handle
   * is closed either way).
   */
  public static native void pushDrop(long push, long connection) throws IOException;

  /**
   * Starts a read of partitions {@code start..end}, each map index from its winning attempt; with
   * {@code reduce} not null, the daemon runs that reduce-side operator over each partition first
   * and sends it as one segment of map {@link #REDUCED_MAP}. With {@code skip} above 0 (and {@code
   * reduce} null), the same read resumed on a new connection after its first {@code skip} blocks.
   */
  public static native void readStart(
      long connection,
      int shuffle,
      int generation,
      int start,
      int end,
      int[] maps,
      long[] attempts,
      EngineOp reduce,
      long skip)
      throws IOException;

  /**
   * Bytes the service's client may hold for one task outside Spark's memory manager, at most (a
   * read's frame and block, a push's gathered records, unacknowledged frames and file buffer;
   * {@code calls::service::task_buffer_bytes}).
   */
  public static native long taskBufferBytes();

  /**
   * Map outputs one read names, at most ({@code
   * sluice_service::protocol::limits::MAX_WINNERS_PER_READ}): a shuffle of more map tasks stays
   * embedded, since every read of it would fail alike.
   */
  public static final int MAX_MAPS_PER_READ = 1 << 18;

  /**
   * The map index of a reduced read's segments ({@code sluice_service::protocol::REDUCED_MAP},
   * {@code u32::MAX}, as a Java int).
   */
  public static final int REDUCED_MAP = -1;

  /**
   * The read's next block ({@code meta}: partition, map index, records), or null at its end once
   * the end's totals matched the stream.
   */
  public static native byte[] readNext(long connection, long[] meta) throws IOException;

  /** The daemon that owns a reduce partition, as the native side computes it. */
  public static native int nodeOf(int partition, int partitions, int nodes);
}
