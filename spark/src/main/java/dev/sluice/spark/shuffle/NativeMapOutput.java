package dev.sluice.spark.shuffle;

import dev.sluice.spark.api.Limits;
import dev.sluice.spark.api.SluiceException;
import dev.sluice.spark.api.SluiceSetting;
import dev.sluice.spark.jni.SluiceNative;
import dev.sluice.spark.metrics.SluiceMetrics;
import dev.sluice.spark.service.Assignment;
import dev.sluice.spark.service.Daemons;
import dev.sluice.spark.service.EarlyPush;
import dev.sluice.spark.service.ServiceConf;
import dev.sluice.spark.service.ServicePush;
import dev.sluice.spark.service.ServiceStreams;
import dev.sluice.spark.shim.LineShim;
import java.io.File;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.List;
import org.apache.spark.SparkEnv;
import org.apache.spark.TaskContext;
import org.apache.spark.memory.MemoryConsumer;
import org.apache.spark.memory.SparkOutOfMemoryError;
import org.apache.spark.scheduler.MapStatus;
import org.apache.spark.shuffle.IndexShuffleBlockResolver;
import org.apache.spark.shuffle.ShuffleWriteMetricsReporter;
import org.apache.spark.storage.BlockManagerId;
import org.apache.spark.storage.StorageUtils;

/**
 * One map attempt's side of the engine: a direct buffer the writer fills with engine records
 * ({@code klen:u32le vlen:u32le key value}), handed over whole when full (one JNI call per
 * buffer), and the commit that has the engine write Spark's data file and Spark write the index.
 *
 * <p>The output the engine holds for the attempt (about the bytes handed over) is accounted in
 * the task's execution memory: each buffer's bytes are acquired from Spark's task memory manager
 * before it crosses. When Spark cannot grant them, even after spilling other consumers and
 * calling this one's {@link #spill}, the engine writes the output so far to a spill file in
 * Spark's local directories and frees it; the commit then puts each partition's spilled segments
 * ahead of the rest.
 *
 * <p>Spark's consumers of one task spill for each other, and so does this one: when another
 * consumer of the task (the sort before a sort-merge join, an aggregate's hash map, anything the
 * task's rows pass through before they reach the writer) asks for memory Spark cannot grant, the
 * task memory manager calls {@link #spill}, and the engine's output so far goes to disk and its
 * memory back to the pool. The engine is only ever asked to spill on the task's own thread, which
 * makes every call on the attempt's handle: a request made there comes between two hand-overs
 * (the writer is pulling its next row), never during one. A request from any other thread gets
 * nothing.
 *
 * <p>In service mode the spills are pushed to the daemons while the map runs ({@link EarlyPush})
 * once the output's bytes so far would be pushed at commit ({@link ServiceConf#keepReason}: not
 * under the sizes below which an output stays on its executor), the spills before queued first, and
 * a shuffle the engine does not combine at the map side (every one but an offloaded operator's)
 * spills every {@code service.pushWhileMappingBytes} handed over for that alone, at most {@link
 * #FORCED_SPILLS_MAX} times, so that a large output crosses the network while it is still being
 * mapped instead of after; the commit pushes the rest. Such spills count in Spark's spill metrics
 * as any other: they are written to disk.
 */
public final class NativeMapOutput extends MemoryConsumer {
  /** Bytes of the two lengths in front of each record. */
  public static final int LENGTHS_BYTES = 8;

  /** Bytes of the partition id that starts every record's key. */
  static final int PARTITION_KEY_BYTES = 4;

  private final int shuffleId;
  private final long mapId;
  private final ShuffleWriteMetricsReporter metrics;
  private final SluiceConf settings;
  private final IndexShuffleBlockResolver resolver;
  /** The record staging buffer, this thread's {@link SpareBuffer}; null once given back. */
  private ByteBuffer buf;

  private long task;
  /** Records in {@code buf}, and in all. */
  private int inBuffer;

  private long records;
  /** Records the committed data file holds (the engine's count). */
  private long fileRecords;
  /**
   * A buffer of its own for a record larger than {@code buf}, handed over once it is written and
   * freed then.
   */
  private ByteBuffer oversized;

  private File dataTmp;
  private long[] lengths;
  private long[] checksums = new long[0];
  /**
   * Execution memory Spark granted for the engine's output since the last spill: {@link #inMemory}
   * or less, where Spark granted less than a hand-over took (which then spills at once).
   */
  private long held;

  /**
   * Bytes handed over since the last spill, which the engine holds in memory until it writes them
   * out: what a spill reports as memory spilled, as Spark's sorters report the size of what they
   * spill.
   */
  private long inMemory;

  /**
   * The most {@link #inMemory} was, reported once as the task's peak execution memory when the
   * output ends ({@link #abort}), as Spark's own shuffle writers report their sorters' peak.
   */
  private long peak;

  /** The task's thread, the only one that calls the engine with {@link #task}. */
  private final Thread owner;

  /** Where the task's spill metrics go. */
  private final TaskContext context;

  /** A spill that failed: its records are lost, so the attempt must fail. */
  private IOException spillFailure;

  /** Spark's row checksums of the attempt (Spark 4.1 and later), or null when it has none. */
  private final RowChecksums rows;

  /** The shuffle's generation and owners at the service's daemons, or null: the output stays. */
  private final Assignment service;

  /** The service's settings where {@link #service} is set, else null. */
  private final ServiceConf serviceConf;

  /** The spills pushed while the map runs, or null (embedded, or a small output so far). */
  private EarlyPush early;

  /** Bytes handed over after which the output is spilled to be pushed early; 0: never. */
  private final long pushEveryBytes;

  /**
   * Spills an attempt makes to push early, at most (64: 512 MiB at the default 8 MiB); the rest
   * of a larger output is pushed at commit. The commit opens every spill file at once.
   */
  static final int FORCED_SPILLS_MAX = 64;

  /** Spills made to push early so far. */
  private int forcedSpills;

  /**
   * The spills made before the output was large enough to be pushed ({@link #pushable}), in order:
   * queued ahead of the next spill once it is, so that what the early pushes send of each
   * partition is always the start of its segment in the data file.
   */
  private final List<Spill> unpushed = new ArrayList<>();

  /** A spill file and the lengths of its partitions' segments. */
  private record Spill(File file, long[] segments) {}

  /** The shuffle's map tasks, for the size of the shuffle this output estimates. */
  private final int maps;

  /** Bytes handed over to the engine so far (records, before compression). */
  private long handedOver;

  NativeMapOutput(
      int engineShuffle,
      int shuffleId,
      long mapId,
      int maps,
      int partitions,
      boolean hostKeys,
      TaskContext context,
      ShuffleWriteMetricsReporter metrics,
      SluiceConf settings,
      IndexShuffleBlockResolver resolver,
      RowChecksums rows,
      Assignment service,
      boolean combines) {
    super(
        context.taskMemoryManager(),
        context.taskMemoryManager().pageSizeBytes(),
        SluiceConf.nativeMemoryMode());
    this.shuffleId = shuffleId;
    this.mapId = mapId;
    this.maps = maps;
    this.metrics = metrics;
    this.settings = settings;
    this.resolver = resolver;
    this.owner = Thread.currentThread();
    this.context = context;
    this.rows = rows;
    this.service = service;
    this.serviceConf = service == null ? null : ServiceConf.of(SparkEnv.get().conf());
    // A forced spill would cut a map-side combine short; such shuffles push only the spills
    // Spark's memory manager asks for.
    this.pushEveryBytes =
        serviceConf == null || combines ? 0 : serviceConf.pushWhileMappingBytes;
    this.buf = SpareBuffer.take(settings.bufferBytes);
    try {
      this.task =
          SluiceNative.mapOpen(
              engineShuffle,
              context.partitionId(),
              context.attemptNumber(),
              partitions,
              hostKeys,
              rows != null && rows.inEngine);
    } catch (RuntimeException | Error e) {
      // No writer holds this output yet, so no abort will give the buffer back.
      SpareBuffer.giveBack(buf, owner);
      throw e;
    }
  }

  /**
   * A little-endian buffer with room for one record of {@code need} bytes (lengths included) at
   * its position; the caller writes the record and then calls {@link #added}.
   */
  public ByteBuffer room(int need) throws IOException {
    if (need <= buf.remaining()) {
      return buf;
    }
    if (need > settings.recordBytesMax) {
      throw new SluiceException(
          "Sluice: a shuffle record of "
              + need
              + " bytes (serialized, with its key) is larger than the record limit of "
              + Limits.sizeText(settings.recordBytesMax)
              + " ("
              + SluiceSetting.RECORD_BYTES_MAX.key
              + ", at most "
              + Limits.sizeText(Limits.RECORD_BYTES_MAX)
              + "); raise it, or run this job on Spark's sort shuffle"
              + " (spark.shuffle.manager=sort)");
    }
    flush();
    if (need <= buf.capacity()) {
      return buf;
    }
    oversized = ByteBuffer.allocateDirect(need).order(ByteOrder.LITTLE_ENDIAN);
    return oversized;
  }

  /**
   * Room for one engine record of partition {@code partition} whose key is the partition id
   * (u32) followed by {@code keyExtra} bytes and whose value is {@code valueBytes} bytes: writes
   * the two lengths and the partition id and returns the buffer, positioned at the rest of the
   * key; the caller writes it and the value, then calls {@link #added}.
   */
  ByteBuffer startRecord(int partition, int keyExtra, int valueBytes) throws IOException {
    long need = (long) LENGTHS_BYTES + PARTITION_KEY_BYTES + keyExtra + valueBytes;
    ByteBuffer b = room((int) Math.min(need, Integer.MAX_VALUE));
    b.putInt(PARTITION_KEY_BYTES + keyExtra).putInt(valueBytes).putInt(partition);
    return b;
  }

  /** The record just written to the buffer {@link #room} gave is complete. */
  public void added() throws IOException {
    records++;
    if (oversized != null) {
      ByteBuffer big = oversized;
      oversized = null;
      try {
        handOver(big, big.position(), 1);
      } finally {
        // The engine copied the record: the buffer's memory (up to the record limit, outside
        // Spark's accounting) goes back now, not when a collection finds the buffer.
        StorageUtils.dispose(big);
      }
      return;
    }
    inBuffer++;
  }

  private void flush() throws IOException {
    if (inBuffer > 0) {
      handOver(buf, buf.position(), inBuffer);
      buf.clear();
      inBuffer = 0;
    }
  }

  /**
   * Accounts {@code bytes} more engine output (spilling when Spark grants less); hands over; then
   * ends a killed task ({@code TaskKilledException}). The engine's waits end on a kill (its stop
   * check), but a task waits only while the buffer pool is full, and the writer's loop pulls rows
   * from code that may never check the kill (Spark's own writers end on their file I/O, which an
   * interrupt closes): without the check here a task whose engine keeps up would run on after its
   * kill.
   */
  private void handOver(ByteBuffer b, int bytes, int count) throws IOException {
    long got;
    try {
      got = acquireMemory(bytes);
    } catch (SparkOutOfMemoryError e) {
      got = 0;
    }
    if (spillFailure != null) {
      // Spark's memory manager turned the failed spill into an out-of-memory error (caught
      // above); the records it took are gone, so the task fails with the spill's own error.
      throw spillFailure;
    }
    held += got;
    inMemory += bytes;
    peak = Math.max(peak, inMemory);
    handedOver += bytes;
    try {
      SluiceNative.mapProduce(task, b, bytes, count);
    } catch (SluiceException e) {
      throw named(e);
    }
    if (got < bytes) {
      // Not even a spill of everything else made room: the output so far, this buffer included,
      // goes to disk now.
      spillOutput();
    } else if (pushEveryBytes > 0 && held >= pushEveryBytes && pushesEarly()) {
      // Enough for the daemons to take while the map goes on.
      forcedSpills++;
      spillOutput();
    }
    context.killTaskIfInterrupted();
  }

  /**
   * Whether a forced spill would be pushed: fewer than {@link #FORCED_SPILLS_MAX} so far, no early
   * push failed, and, before the first, the output so far large enough to be pushed ({@link
   * #pushable}) and no owner of the shuffle failed lately in this JVM.
   */
  private boolean pushesEarly() {
    if (forcedSpills >= FORCED_SPILLS_MAX) {
      return false;
    }
    return early != null
        ? early.live()
        : pushable() && Daemons.of(serviceConf).downReason(service) == null;
  }

  /**
   * Whether the bytes handed over so far would be pushed at commit
   * ({@link ServiceConf#keepReason}): a shuffle's early pushes start only then, with the spills
   * made before queued first ({@link #unpushed}).
   */
  private boolean pushable() {
    return serviceConf.keepReason(handedOver, maps) == null;
  }

  /**
   * Spark asks for memory back, for this writer's own hand-over or for another consumer of the
   * task: on the task's thread (between two hand-overs) the engine's output so far is spilled and
   * all its memory freed; on any other thread nothing is.
   */
  @Override
  public long spill(long size, MemoryConsumer trigger) throws IOException {
    if (Thread.currentThread() != owner || task == 0 || held == 0) {
      return 0;
    }
    return spillOutput();
  }

  /** Has the engine write the output so far to a spill file; frees its memory. */
  private long spillOutput() throws IOException {
    if (spillFailure != null) {
      throw spillFailure;
    }
    File f = SparkEnv.get().blockManager().diskBlockManager().createTempShuffleBlock()._2();
    long[] segments;
    try {
      segments = SluiceNative.mapSpill(task, f.getAbsolutePath(), settings.output);
    } catch (IOException e) {
      spillFailure = e;
      throw e;
    }
    long bytes = 0;
    for (long s : segments) {
      bytes += s;
    }
    if (serviceConf != null) {
      if (early == null && pushable()) {
        early =
            EarlyPush.of(
                serviceConf, shuffleId, service, context.partitionId(), mapId, segments.length);
        for (Spill before : unpushed) {
          early.submit(before.file(), before.segments());
        }
        unpushed.clear();
      }
      if (early != null) {
        early.submit(f, segments);
      } else {
        unpushed.add(new Spill(f, segments));
      }
    }
    SluiceMetrics.MAP_SPILLS.incrementAndGet();
    SluiceMetrics.SPILL_BYTES.addAndGet(bytes);
    // What Spark's own sorters report for a spill: the size in memory of what it wrote out, the
    // bytes it wrote; not its time as shuffle write time, which is the final output's alone (their
    // spills write through metrics of their own).
    context.taskMetrics().incMemoryBytesSpilled(inMemory);
    context.taskMetrics().incDiskBytesSpilled(bytes);
    inMemory = 0;
    long freed = held;
    if (freed > 0) {
      freeMemory(freed);
      held = 0;
    }
    return freed;
  }

  private void releaseMemory() {
    if (held > 0) {
      freeMemory(held);
      held = 0;
    }
    inMemory = 0;
  }

  /**
   * Hands over the last buffer, has the engine write the data file and Spark the index (which
   * settles racing attempts), reports the write metrics, and returns the map status.
   */
  public MapStatus commit() throws IOException {
    flush();
    File dataFile = resolver.getDataFile(shuffleId, mapId);
    dataTmp = resolver.createTempFile(dataFile);
    long rowChecksum = 0;
    if (early != null) {
      // The commit removes the spill files the early pushes read.
      early.await();
      context.killTaskIfInterrupted();
    }
    // Write time is the data file's: not the wait for the early pushes (the network's), as the
    // push at the end is not counted either.
    long t0 = System.nanoTime();
    try {
      if (rows != null) {
        rowChecksum = rows.value(rows.inEngine ? SluiceNative.mapRowChecksums(task) : null);
      }
      long[] written;
      // The engine takes the attempt whatever the commit comes to; until here, what throws
      // leaves it to the abort.
      long handle = task;
      task = 0;
      try {
        written = SluiceNative.mapCommit(handle, dataTmp.getAbsolutePath(), settings.output);
      } catch (SluiceException e) {
        throw named(e);
      }
      int perPartition = settings.output.checksums() ? 2 : 1;
      int partitions = (written.length - 1) / perPartition;
      lengths = java.util.Arrays.copyOf(written, partitions);
      checksums = java.util.Arrays.copyOfRange(written, partitions, written.length - 1);
      // The records in the data file: fewer than were handed over where the engine aggregates
      // them (an offloaded operator), as many otherwise; reduce tasks read exactly these.
      fileRecords = written[written.length - 1];
    } finally {
      releaseMemory();
    }
    // Spark writes the index and, with checksums, the checksum file (as its own writers do).
    resolver.writeMetadataFileAndCommit(shuffleId, mapId, lengths, checksums, dataTmp);
    long total = 0;
    for (long l : lengths) {
      total += l;
    }
    SluiceMetrics.MAP_OUTPUTS.incrementAndGet();
    SluiceMetrics.BYTES_WRITTEN.addAndGet(total);
    SluiceMetrics.RECORDS_WRITTEN.addAndGet(fileRecords);
    metrics.incBytesWritten(total);
    metrics.incRecordsWritten(fileRecords);
    metrics.incWriteTime(System.nanoTime() - t0);
    BlockManagerId location = SparkEnv.get().blockManager().shuffleServerId();
    if (service != null) {
      // A killed attempt (a speculative copy that lost) pushes nothing more.
      context.killTaskIfInterrupted();
    }
    if (service != null
        && ServicePush.pushOrKeep(
            serviceConf,
            shuffleId,
            service,
            context.partitionId(),
            maps,
            mapId,
            dataFile,
            lengths,
            early)) {
      // The daemons keep the output from here; the local files are not read again.
      resolver.removeDataByMap(shuffleId, mapId);
      location = ServiceStreams.location(shuffleId, location.host());
      SluiceMetrics.SERVICE_MAP_OUTPUTS.incrementAndGet();
    }
    // Spark's row checksum (4.1 and later; 0 where the shuffle has none, as Spark's writers say).
    return LineShim.mapStatus(location, lengths, mapId, rowChecksum);
  }

  /**
   * An engine failure of this attempt under Spark's names for it: the engine numbers shuffles
   * its own way (its ids are unique in the process, Spark's only in one application).
   */
  private SluiceException named(SluiceException e) {
    return new SluiceException(
        "Spark shuffle " + shuffleId + ", map id " + mapId + ": " + e.getMessage(), e);
  }

  /** Drops an attempt that did not commit, and its temporary file. */
  void abort() {
    if (early != null) {
      // Queued pushes of spill files are not begun; the pushes are dropped when the running one
      // ends (one that finds its file gone fails and stops).
      early.abandon();
    }
    if (task != 0) {
      long t = task;
      task = 0;
      SluiceNative.mapAbort(t);
    }
    releaseMemory();
    // Every path ends here (the task's completion listener aborts a committed output too).
    if (peak > 0) {
      context.taskMetrics().incPeakExecutionMemory(peak);
      peak = 0;
    }
    SpareBuffer.giveBack(buf, owner);
    buf = null;
    if (dataTmp != null && dataTmp.exists() && !dataTmp.delete()) {
      dataTmp.deleteOnExit();
    }
  }

  long[] lengths() {
    return lengths;
  }
}
