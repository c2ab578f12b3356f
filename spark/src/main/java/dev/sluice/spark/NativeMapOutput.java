package dev.sluice.spark;

import java.io.File;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import org.apache.spark.SparkEnv;
import org.apache.spark.TaskContext;
import org.apache.spark.scheduler.MapStatus;
import org.apache.spark.scheduler.MapStatus$;
import org.apache.spark.shuffle.IndexShuffleBlockResolver;
import org.apache.spark.shuffle.ShuffleWriteMetricsReporter;

/**
 * One map attempt's side of the engine: a direct buffer the writer fills with engine records
 * ({@code klen:u32le vlen:u32le key value}), handed over whole when full (one JNI call per
 * buffer), and the commit that has the engine write Spark's data file and Spark write the index.
 */
final class NativeMapOutput {
  /** Bytes of the two lengths in front of each record. */
  static final int LENGTHS_BYTES = 8;

  private final int shuffleId;
  private final long mapId;
  private final ShuffleWriteMetricsReporter metrics;
  private final SluiceConf settings;
  private final IndexShuffleBlockResolver resolver;
  private final ByteBuffer buf;

  private long task;
  /** Records in {@code buf}, and in all. */
  private int inBuffer;

  private long records;
  /** A buffer of its own for a record larger than {@code buf}, handed over once it is written. */
  private ByteBuffer oversized;

  private File dataTmp;
  private long[] lengths;

  NativeMapOutput(
      int engineShuffle,
      int shuffleId,
      long mapId,
      int partitions,
      boolean hostKeys,
      TaskContext context,
      ShuffleWriteMetricsReporter metrics,
      SluiceConf settings,
      IndexShuffleBlockResolver resolver) {
    this.shuffleId = shuffleId;
    this.mapId = mapId;
    this.metrics = metrics;
    this.settings = settings;
    this.resolver = resolver;
    this.buf = ByteBuffer.allocateDirect(settings.bufferBytes).order(ByteOrder.LITTLE_ENDIAN);
    this.task =
        SluiceNative.mapOpen(
            engineShuffle, context.partitionId(), context.attemptNumber(), partitions, hostKeys);
  }

  /**
   * A little-endian buffer with room for one record of {@code need} bytes (lengths included) at
   * its position; the caller writes the record and then calls {@link #added}.
   */
  ByteBuffer room(int need) throws IOException {
    if (need <= buf.remaining()) {
      return buf;
    }
    flush();
    if (need <= buf.capacity()) {
      return buf;
    }
    oversized = ByteBuffer.allocateDirect(need).order(ByteOrder.LITTLE_ENDIAN);
    return oversized;
  }

  /** The record just written to the buffer {@link #room} gave is complete. */
  void added() throws IOException {
    records++;
    if (oversized != null) {
      ByteBuffer big = oversized;
      oversized = null;
      SluiceNative.mapProduce(task, big, big.position(), 1);
      return;
    }
    inBuffer++;
  }

  private void flush() throws IOException {
    if (inBuffer > 0) {
      SluiceNative.mapProduce(task, buf, buf.position(), inBuffer);
      buf.clear();
      inBuffer = 0;
    }
  }

  /**
   * Hands over the last buffer, has the engine write the data file and Spark the index (which
   * settles racing attempts), reports the write metrics, and returns the map status.
   */
  MapStatus commit() throws IOException {
    flush();
    long t0 = System.nanoTime();
    File dataFile = resolver.getDataFile(shuffleId, mapId);
    dataTmp = resolver.createTempFile(dataFile);
    long handle = task;
    task = 0;
    lengths =
        SluiceNative.mapCommit(
            handle, dataTmp.getAbsolutePath(), settings.codec, settings.codecLevel);
    resolver.writeMetadataFileAndCommit(shuffleId, mapId, lengths, new long[0], dataTmp);
    long total = 0;
    for (long l : lengths) {
      total += l;
    }
    SluiceMetrics.MAP_OUTPUTS.incrementAndGet();
    SluiceMetrics.BYTES_WRITTEN.addAndGet(total);
    SluiceMetrics.RECORDS_WRITTEN.addAndGet(records);
    metrics.incBytesWritten(total);
    metrics.incRecordsWritten(records);
    metrics.incWriteTime(System.nanoTime() - t0);
    return MapStatus$.MODULE$.apply(SparkEnv.get().blockManager().shuffleServerId(), lengths, mapId);
  }

  /** Drops an attempt that did not commit, and its temporary file. */
  void abort() {
    if (task != 0) {
      long t = task;
      task = 0;
      SluiceNative.mapAbort(t);
    }
    if (dataTmp != null && dataTmp.exists() && !dataTmp.delete()) {
      dataTmp.deleteOnExit();
    }
  }

  long[] lengths() {
    return lengths;
  }
}
