package dev.sluice.spark.service;

import dev.sluice.spark.jni.EngineOp;
import dev.sluice.spark.jni.ServiceNative;
import java.io.IOException;
import java.io.InputStream;
import java.util.Map;
import java.util.NoSuchElementException;
import java.util.function.BiFunction;
import org.apache.spark.shuffle.FetchFailedException;
import org.apache.spark.shuffle.ShuffleReadMetricsReporter;
import org.apache.spark.storage.BlockId;
import org.apache.spark.storage.BlockManagerId;
import org.apache.spark.storage.ShuffleBlockId;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import scala.Option;
import scala.Tuple2;

/**
 * A reduce task's input from the daemons: for each daemon that owns part of partitions {@code
 * start..end}, one read of its share (one request, not one per map output), each map index from the
 * attempt Spark's map output tracker registered. The blocks of one map's segment of one partition
 * come out as one stream, named as Spark names it ({@code shuffle_S_M_R}) and wrapped as Spark's
 * fetch iterator wraps a fetched block, so the readers above treat it as a fetched segment; the
 * stream pulls the daemon's blocks as it is read (one block, at most 4 MiB, in memory), and a
 * segment left half read is skipped to its end. A daemon that fails or refuses is a {@link
 * FetchFailedException} at the shuffle's service executor id (map index -1, {@link #failedAt}),
 * which has Spark unregister every pushed output of this shuffle, and no other, and rerun those
 * maps (Spark settings that unregister by host instead keep shuffles embedded: {@link
 * ServiceConf#sparkSettingsReason}); one that stays busy (serving its limit of connections) fails
 * the task alone, which Spark retries. A plain read whose connection ends under it (a daemon closes
 * a stream its reduce task left waiting past the daemon's stall limit) goes on from a new
 * connection after the blocks it took ({@link #resume}). A read given the shuffle's reduce-side
 * operator has the daemons run it first: each partition then comes as one segment, {@code
 * shuffle_S_-1_R}, holding the results over every winner.
 */
public final class ServiceStreams
    extends scala.collection.AbstractIterator<Tuple2<BlockId, InputStream>> {
  private static final Logger LOG = LoggerFactory.getLogger(ServiceStreams.class);

  /**
   * The block manager id a pushed map output's status names: an executor id of no executor's, one
   * per shuffle (so an executor's loss unregisters none of the shuffle's pushed outputs, and a
   * fetch failure at the daemons unregisters them all, Spark's {@code removeOutputsOnExecutor}), at
   * the host of the executor that wrote it. The host is what Spark's reduce-side locality reads: a
   * host the application's executors ran on, so that a reduce task whose input is partly pushed and
   * partly kept prefers hosts where it can run, as for kept outputs (a preference for a host no
   * executor ever runs on holds a stage's tasks back {@code spark.locality.wait} at each level, and
   * in local mode for ever), and a shuffle's pushed outputs, spread over the hosts that mapped,
   * rarely make a fifth of a partition's input at one host (no preference). What it costs: a worker
   * Spark loses as a whole unregisters the pushed outputs written on its host ({@code
   * removeOutputsOnHost}), and their maps run again, as with Spark's external shuffle service. The
   * port is one no daemon or shuffle service listens on: Spark's shuffle cleanup under its external
   * shuffle service asks the location of an output whose executor it does not know to delete its
   * blocks.
   */
  public static BlockManagerId location(int shuffle, String host) {
    return org.apache.spark.storage.BlockManagerId$.MODULE$.apply(
        LOCATION_PREFIX + shuffle, host, LOCATION_PORT, Option.empty());
  }

  /**
   * The block manager id a failed read at the daemons names in its {@code FetchFailedException}:
   * the shuffle's executor id (Spark's {@code removeOutputsOnExecutor} unregisters every pushed
   * output of it, whichever host wrote it), at a host of no executor's.
   */
  static BlockManagerId failedAt(int shuffle) {
    return location(shuffle, FAILURE_HOST);
  }

  private static final String LOCATION_PREFIX = "sluice-service-";
  private static final String FAILURE_HOST = "sluice-service";
  private static final int LOCATION_PORT = 1;

  private final Daemons daemons;
  private final int shuffle;
  private final Assignment assignment;
  private final int start;
  private final int end;
  private final int partitions;
  private final int[] maps;
  private final long[] attempts;
  private final Map<Integer, Long> attemptOf;
  /**
   * The segments Spark's map statuses say are not empty ({@link Winners#segments}): each daemon's
   * read must send every one of its share, else the read fails (a segment lost whole would pass
   * every block's and trailer's check). Not checked for a read the daemons reduce (its segments
   * are map -1's).
   */
  private final long[] expected;
  /** Which of {@link #expected} the open read has sent. */
  private final java.util.BitSet sent = new java.util.BitSet();

  /** What the open read may send next ({@link SegmentOrder}). */
  private final SegmentOrder order;
  /** Partitions {@code lo..hi} of the open read. */
  private int readLo;

  private int readHi;
  private final BiFunction<BlockId, InputStream, InputStream> wrap;
  /** Spark's {@code spark.shuffle.detectCorrupt}: a segment that fails to decode fails the fetch. */
  private final boolean detectCorrupt;

  private final ShuffleReadMetricsReporter metrics;
  /** The reduce-side operator the daemons run before they stream, or null for a plain read. */
  private final EngineOp reduce;

  /**
   * The owner being read ({@link Assignment}), or -1 before the first; its connection while its
   * read is open.
   */
  private int owner = -1;

  /**
   * The open read's connection, or 0. Handed between the reader and {@link #close} (the task's
   * completion listener, which may run on another thread) under {@link #handoff} only, so that a
   * connection is either given back by the reader or discarded by {@code close}, never both, and
   * none is borrowed after {@code close}.
   */
  private long connection;

  private final Object handoff = new Object();
  private volatile boolean closed;
  /** The next block, read ahead; null when none is waiting. */
  private byte[] ahead;

  private final long[] aheadMeta = new long[3];
  /** Blocks the open read has taken, over every connection it used ({@link #resume}). */
  private long readBlocks;
  /** Of those, the blocks its present connection carried. */
  private long connectionBlocks;

  /** Nanoseconds spent waiting on the daemons so far, and the whole milliseconds reported. */
  private long waitNanos;

  private long waitReported;

  private boolean done;
  /**
   * The failure thrown once, thrown again by every later call: a caller that catches it and reads
   * on must not get the next daemon's partitions as if this one's had been read.
   */
  private Throwable failure;
  /** The segment handed out last, until it has been read (or skipped) to its end. */
  private Segment open;

  public ServiceStreams(
      Daemons daemons,
      int shuffle,
      Assignment assignment,
      int start,
      int end,
      int partitions,
      Winners winners,
      BiFunction<BlockId, InputStream, InputStream> wrap,
      boolean detectCorrupt,
      ShuffleReadMetricsReporter metrics,
      EngineOp reduce) {
    this.daemons = daemons;
    this.shuffle = shuffle;
    this.assignment = assignment;
    this.start = start;
    this.end = end;
    this.partitions = partitions;
    this.attemptOf = winners.attemptOf();
    this.expected = winners.segments();
    this.order = new SegmentOrder(expected, winners.complete());
    this.maps = new int[attemptOf.size()];
    this.attempts = new long[attemptOf.size()];
    int i = 0;
    for (Map.Entry<Integer, Long> e : attemptOf.entrySet()) {
      maps[i] = e.getKey();
      attempts[i] = e.getValue();
      i++;
    }
    this.wrap = wrap;
    this.detectCorrupt = detectCorrupt;
    this.metrics = metrics;
    this.reduce = reduce;
    if (maps.length == 0 || start >= end) {
      done = true;
    }
  }

  /**
   * Throws the fetch failure of partition {@code reduce} (a checked exception to Java that Spark's
   * Scala code throws from its fetch iterator, so it is thrown unchecked here); declared to return
   * so that call sites read {@code throw failed(...)}.
   */
  private RuntimeException failed(int reduce, Throwable cause) {
    String where =
        owner >= 0 ? daemons.conf.daemons.get(assignment.daemon(owner)) : "no daemon";
    throw fail(
        new FetchFailedException(
            failedAt(shuffle),
            shuffle,
            -1L,
            -1,
            reduce,
            readFailure(start, end, where, assignment.generation, cause.getMessage()),
            cause));
  }

  /** Throws {@code e}, kept as this iterator's {@link #failure}. */
  private RuntimeException fail(Throwable e) {
    failure = e;
    done = true;
    throw ServiceStreams.<RuntimeException>unchecked(e);
  }

  /**
   * Counts the wait since {@code t0} as fetch wait, in whole milliseconds as Spark reports it, but
   * of all the waits so far: a read waits once per block, often for less than a millisecond,
   * which Spark's per-wait truncation would count as nothing (its fetches wait once per segment).
   */
  private void waited(long t0) {
    waitNanos += System.nanoTime() - t0;
    long ms = waitNanos / 1_000_000;
    metrics.incFetchWaitTime(ms - waitReported);
    waitReported = ms;
  }

  @SuppressWarnings("unchecked")
  private static <E extends Throwable> E unchecked(Throwable e) throws E {
    throw (E) e;
  }

  /** Reads the next block into {@link #ahead}, opening the next daemon's read as needed. */
  private void readAhead() {
    if (failure != null) {
      throw ServiceStreams.<RuntimeException>unchecked(failure);
    }
    while (ahead == null && !done) {
      try {
        long reading = connection;
        if (reading != 0) {
          long t0 = System.nanoTime();
          byte[] b;
          try {
            b = ServiceNative.readNext(reading, aheadMeta);
          } catch (ConnectionEndedException e) {
            if (!resumable()) {
              throw e;
            }
            resume(e);
            continue;
          } finally {
            waited(t0);
          }
          if (b != null) {
            readBlocks++;
            connectionBlocks++;
            ahead = b;
            return;
          }
          synchronized (handoff) {
            // Unless close() took it meanwhile.
            if (connection != 0) {
              daemons.giveBack(assignment.daemon(owner), connection);
              connection = 0;
            }
          }
          if (!closed) {
            checkSent();
          }
        }
        if (closed) {
          done = true;
          return;
        }
        int from = owner < 0 ? assignment.ownerOf(start, partitions) : owner + 1;
        if (from >= assignment.nodes() || assignment.first(from, partitions) >= end) {
          done = true;
          return;
        }
        owner = from;
        int lo = Math.max(start, assignment.first(owner, partitions));
        int hi = Math.min(end, assignment.first(owner + 1, partitions));
        if (lo >= hi) {
          continue;
        }
        // The wait for a connection and the read's start count as fetch wait, as its frames do.
        long t0 = System.nanoTime();
        long c = daemons.borrow(assignment.daemon(owner));
        if (!hold(c)) {
          return;
        }
        readLo = lo;
        readHi = hi;
        readBlocks = 0;
        connectionBlocks = 0;
        sent.clear();
        order.start(lo, hi);
        ServiceNative.readStart(
            c, shuffle, assignment.generation, lo, hi, maps, attempts, reduce, 0L);
        waited(t0);
        dev.sluice.spark.metrics.SluiceMetrics.SERVICE_READS.incrementAndGet();
      } catch (IOException e) {
        long c;
        synchronized (handoff) {
          c = connection;
          connection = 0;
        }
        if (closed) {
          // Its connection discarded under it by close(): the task has ended, and this is no
          // fetch failure (whose constructor would mark the task so).
          throw fail(new IOException("Sluice service: the read was closed", e));
        }
        if (owner >= 0) {
          daemons.failed(assignment.daemon(owner), c, e);
        }
        if (e instanceof DaemonBusyException) {
          // Alive and holding the data: the task fails and is retried, the map stage stays.
          throw fail(
              new IOException(
                  readFailure(
                      start,
                      end,
                      daemons.conf.daemons.get(assignment.daemon(owner)),
                      assignment.generation,
                      e.getMessage()),
                  e));
        }
        throw failed(start, e);
      }
    }
  }

  /**
   * Makes {@code c}, just borrowed, the read's connection, unless {@link #close} ran meanwhile:
   * then it is discarded, the iterator is done, and this answers false.
   */
  private boolean hold(long c) {
    synchronized (handoff) {
      if (closed) {
        daemons.discard(c);
        done = true;
        return false;
      }
      connection = c;
      return true;
    }
  }

  /**
   * Whether the open read, whose connection ended, may go on from a new one: a plain read (a
   * reduced one's results are computed anew, not resumed; it feeds a native operator, which takes
   * it to its end before the task hands out a row, so no slow reader stalls it), not closed, whose
   * connection carried a block since it was opened (so a daemon that ends every connection at
   * once fails the read instead of being asked again and again).
   */
  private boolean resumable() {
    return reduce == null && !closed && connectionBlocks > 0;
  }

  /**
   * Goes on with the open read, whose connection ended ({@code why}), on a new connection to the
   * same daemon: the same partitions and winners, less the {@link #readBlocks} blocks taken. A
   * daemon closes a stream its reader left waiting past its stall limit (a reduce task busy for
   * minutes with the last segment it was given); it then serves the rest. A daemon that died cannot
   * be reached, and a restarted one refuses the read: either is the fetch failure it was before.
   */
  private void resume(ConnectionEndedException why) throws IOException {
    long c;
    synchronized (handoff) {
      c = connection;
      connection = 0;
    }
    // Closes it (and, as after any connection that failed, the idle ones to the same daemon).
    daemons.failed(assignment.daemon(owner), c, why);
    long next = daemons.borrow(assignment.daemon(owner));
    if (!hold(next)) {
      return;
    }
    connectionBlocks = 0;
    LOG.warn(
        "Sluice service: shuffle {} partitions {}..{} at daemon {}: the connection ended after {}"
            + " blocks ({}); resuming on a new one",
        shuffle,
        readLo,
        readHi,
        daemons.conf.daemons.get(assignment.daemon(owner)),
        readBlocks,
        why.getMessage());
    ServiceNative.readStart(
        next, shuffle, assignment.generation, readLo, readHi, maps, attempts, null, readBlocks);
    dev.sluice.spark.metrics.SluiceMetrics.SERVICE_RESUMED_READS.incrementAndGet();
  }

  @Override
  public boolean hasNext() {
    if (open != null) {
      // The segment handed out last, skipped to its end if its reader stopped early.
      open.skipRest();
      open = null;
    }
    readAhead();
    return ahead != null;
  }

  @Override
  public Tuple2<BlockId, InputStream> next() {
    if (!hasNext()) {
      throw new NoSuchElementException();
    }
    int partition = (int) aheadMeta[0];
    int map = (int) aheadMeta[1];
    // A reduced read's segment is the partition's results over every winner: map -1.
    Long attempt =
        reduce != null && map == ServiceNative.REDUCED_MAP
            ? Long.valueOf(-1L)
            : attemptOf.get(map);
    if (attempt == null) {
      throw failed(partition, new IOException("the daemon sent map " + map + ", not asked for"));
    }
    String wrong = order.check(partition, map);
    if (wrong != null) {
      throw failed(partition, new IOException(wrong));
    }
    if (reduce == null) {
      int at = java.util.Arrays.binarySearch(expected, segment(partition, map));
      if (at >= 0) {
        sent.set(at);
      }
    }
    metrics.incRemoteBlocksFetched(1);
    BlockId id = new ShuffleBlockId(shuffle, attempt, partition);
    open = new Segment(partition, map);
    return new Tuple2<>(id, fetched(partition, wrap.apply(id, open)));
  }

  /**
   * Partition {@code partition}'s segment, decoded by {@code in}, as Spark's fetch iterator hands
   * out a fetched one: with {@code spark.shuffle.detectCorrupt} on (Spark's default), a failure to
   * read it (a corrupt, forged or truncated block the decoder found) is a fetch failure at the
   * daemons ({@link #failed}), as Spark's wrapper makes it of a fetched segment's, so that Spark
   * reruns the pushed maps instead of failing the task four times over the same bytes; with it
   * off, the failure fails the task, as under Spark's own shuffle. A failure this iterator threw
   * already (a daemon's, a busy one's, a closed read's) is thrown as it is.
   */
  InputStream fetched(int partition, InputStream in) {
    return new java.io.FilterInputStream(in) {
      private IOException raised(IOException e) {
        if (failure != null) {
          throw ServiceStreams.<RuntimeException>unchecked(failure);
        }
        if (!detectCorrupt) {
          return e;
        }
        throw failed(partition, e);
      }

      @Override
      public int read() throws IOException {
        try {
          return super.read();
        } catch (IOException e) {
          throw raised(e);
        }
      }

      @Override
      public int read(byte[] b, int off, int len) throws IOException {
        try {
          return super.read(b, off, len);
        } catch (IOException e) {
          throw raised(e);
        }
      }

      @Override
      public long skip(long n) throws IOException {
        try {
          return super.skip(n);
        } catch (IOException e) {
          throw raised(e);
        }
      }
    };
  }

  /**
   * One map's segment of one partition: the daemon's consecutive blocks of that (partition, map),
   * pulled as the stream is read.
   */
  private final class Segment extends InputStream {
    private final int partition;
    private final int map;
    private byte[] block;
    private int pos;
    private boolean ended;

    Segment(int partition, int map) {
      this.partition = partition;
      this.map = map;
      take();
    }

    /** Takes the block read ahead, which belongs to this segment. */
    private void take() {
      block = ahead;
      ahead = null;
      pos = 0;
      metrics.incRemoteBytesRead(block.length);
    }

    /** Moves to the segment's next block; false at its end. */
    private boolean advance() {
      if (ended) {
        return false;
      }
      readAhead();
      if (ahead != null && aheadMeta[0] == partition && (int) aheadMeta[1] == map) {
        take();
        return true;
      }
      ended = true;
      block = null;
      return false;
    }

    void skipRest() {
      while (advance()) {
        // Each block is taken and dropped.
      }
    }

    @Override
    public int read() {
      while (block != null && pos == block.length) {
        if (!advance()) {
          return -1;
        }
      }
      return block == null ? -1 : block[pos++] & 0xff;
    }

    @Override
    public int read(byte[] b, int off, int len) {
      if (len == 0) {
        return 0;
      }
      while (block != null && pos == block.length) {
        if (!advance()) {
          return -1;
        }
      }
      if (block == null) {
        return -1;
      }
      int n = Math.min(len, block.length - pos);
      System.arraycopy(block, pos, b, off, n);
      pos += n;
      return n;
    }

    @Override
    public int available() {
      return block == null ? 0 : block.length - pos;
    }
  }

  /** A segment's key in {@link Winners#segments}: its partition and map index. */
  static long segment(int partition, int mapIndex) {
    return ((long) partition << 32) | (mapIndex & 0xffffffffL);
  }

  /**
   * Throws the fetch failure of a daemon's read that ended without one of the segments of its
   * partitions {@link #readLo}..{@link #readHi} that Spark's map statuses say are not empty.
   */
  private void checkSent() {
    if (reduce != null) {
      return;
    }
    // The keys sort by partition, then map index: the read's share is one run of them.
    int from = java.util.Arrays.binarySearch(expected, segment(readLo, 0));
    for (int i = from >= 0 ? from : -from - 1; i < expected.length; i++) {
      long k = expected[i];
      int partition = (int) (k >>> 32);
      if (partition >= readHi) {
        break;
      }
      if (!sent.get(i)) {
        throw failed(
            partition,
            new IOException(
                "the daemon sent no segment of map index "
                    + (int) k
                    + " for partition "
                    + partition
                    + ", which its map status says is not empty"));
      }
    }
  }

  /** The message of a failed read, naming the generation read ({@link #generationIn}). */
  static String readFailure(int start, int end, String where, int generation, String cause) {
    return "Sluice service: reading partitions " + start + ".." + end + " from " + where + " ("
        + GENERATION_WORD + generation + "): " + cause;
  }

  /** What names the generation read in a fetch failure's message: {@code (generation 123)}. */
  private static final String GENERATION_WORD = "generation ";

  /**
   * The generation a fetch failure of a service read names in its message ({@link #failed}), or
   * -1 when it names none (not a read of this class's).
   */
  public static int generationIn(String message) {
    if (message == null) {
      return -1;
    }
    int at = message.indexOf("(" + GENERATION_WORD);
    if (at < 0) {
      return -1;
    }
    int from = at + 1 + GENERATION_WORD.length();
    int to = from;
    while (to < message.length() && Character.isDigit(message.charAt(to))) {
      to++;
    }
    try {
      return to > from && to < message.length() && message.charAt(to) == ')'
          ? Integer.parseInt(message.substring(from, to))
          : -1;
    } catch (NumberFormatException e) {
      return -1;
    }
  }

  /** The shuffle a service location names ({@link #location}), or -1 for any other. */
  public static int shuffleOf(BlockManagerId id) {
    if (id == null || !isService(id)) {
      return -1;
    }
    try {
      return Integer.parseInt(id.executorId().substring(LOCATION_PREFIX.length()));
    } catch (NumberFormatException e) {
      return -1;
    }
  }

  /** Whether a map status's location is a service shuffle's ({@link #location}). */
  public static boolean isService(BlockManagerId id) {
    return id.executorId().startsWith(LOCATION_PREFIX) && id.port() == LOCATION_PORT;
  }

  /**
   * What a read takes: the attempt Spark's map output tracker registered for each map index (the
   * winners the read names), and the segments its map statuses say are not empty, by {@link
   * #segment} key, sorted and each once (Spark lists no empty block; a batch of partitions is not
   * listed by partition, so none of its segments is), and whether those are all of them (no batch
   * hid any).
   */
  public record Winners(Map<Integer, Long> attemptOf, long[] segments, boolean complete) {}

  /**
   * The winners among {@code blocks} (the part of the map output tracker's {@code
   * getMapSizesByExecutorId} answer at the service's location).
   */
  @SuppressWarnings({"unchecked", "rawtypes"})
  public static Winners winners(Iterable<Tuple2<BlockManagerId, scala.collection.Seq>> blocks) {
    Map<Integer, Long> out = new java.util.TreeMap<>();
    long[] segments = new long[16];
    int n = 0;
    boolean complete = true;
    for (Tuple2<BlockManagerId, scala.collection.Seq> byAddress : blocks) {
      scala.collection.Iterator it = byAddress._2().iterator();
      while (it.hasNext()) {
        scala.Tuple3<BlockId, Object, Object> b = (scala.Tuple3) it.next();
        long mapId;
        if (b._1() instanceof ShuffleBlockId s) {
          mapId = s.mapId();
          if (n == segments.length) {
            segments = java.util.Arrays.copyOf(segments, 2 * n);
          }
          segments[n++] = segment(s.reduceId(), (Integer) b._3());
        } else if (b._1() instanceof org.apache.spark.storage.ShuffleBlockBatchId s) {
          mapId = s.mapId();
          complete = false;
        } else {
          throw new IllegalStateException("Sluice service: a block " + b._1() + " in a map status");
        }
        out.put((Integer) b._3(), mapId);
      }
    }
    long[] sorted = java.util.Arrays.copyOf(segments, n);
    java.util.Arrays.sort(sorted);
    int unique = 0;
    for (int i = 0; i < n; i++) {
      if (i == 0 || sorted[i] != sorted[i - 1]) {
        sorted[unique++] = sorted[i];
      }
    }
    return new Winners(out, java.util.Arrays.copyOf(sorted, unique), complete);
  }

  /**
   * Releases the connection of a read left unfinished (the task ended early); the reader, on
   * whichever thread, borrows none after this.
   */
  public void close() {
    long c;
    synchronized (handoff) {
      closed = true;
      c = connection;
      connection = 0;
    }
    if (c != 0) {
      daemons.discard(c);
    }
  }
}
