package dev.sluice.spark;

import java.io.ByteArrayOutputStream;
import java.io.File;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import org.apache.spark.Partitioner;
import org.apache.spark.ShuffleDependency;
import org.apache.spark.SparkEnv;
import org.apache.spark.TaskContext;
import org.apache.spark.scheduler.MapStatus;
import org.apache.spark.scheduler.MapStatus$;
import org.apache.spark.serializer.SerializationStream;
import org.apache.spark.shuffle.IndexShuffleBlockResolver;
import org.apache.spark.shuffle.ShuffleWriteMetricsReporter;
import org.apache.spark.shuffle.ShuffleWriter;
import scala.Option;
import scala.Product2;
import scala.reflect.ClassTag$;

/**
 * A map task's writer: serializes each record with the shuffle's serializer into a direct buffer
 * and hands full buffers to the engine (one JNI call per buffer), then has the engine write the
 * attempt's output and commits it with Spark's index file.
 *
 * <p>Buffer layout, the engine's variable-length records: {@code klen:u32le vlen:u32le key value},
 * with key = the partition id (u32 LE) and value = the record's serialized bytes. The serializer is
 * relocatable (see {@link Coverage}), so each record's bytes can be cut out of one serialization
 * stream and later read back to back.
 */
final class SluiceShuffleWriter<K, V, C> extends ShuffleWriter<K, V> {
  /** Bytes in front of each record in the buffer: two lengths and the partition-id key. */
  static final int RECORD_PREFIX_BYTES = 12;

  private final SluiceShuffleHandle<K, V, C> handle;
  private final int engineShuffle;
  private final long mapId;
  private final TaskContext context;
  private final ShuffleWriteMetricsReporter metrics;
  private final SluiceConf settings;
  private final IndexShuffleBlockResolver resolver;

  private long task;
  private long[] lengths;
  private MapStatus status;
  private File dataTmp;

  SluiceShuffleWriter(
      SluiceShuffleHandle<K, V, C> handle,
      int engineShuffle,
      long mapId,
      TaskContext context,
      ShuffleWriteMetricsReporter metrics,
      SluiceConf settings,
      IndexShuffleBlockResolver resolver) {
    this.handle = handle;
    this.engineShuffle = engineShuffle;
    this.mapId = mapId;
    this.context = context;
    this.metrics = metrics;
    this.settings = settings;
    this.resolver = resolver;
  }

  /** A byte stream whose array can be read without a copy. */
  private static final class Bytes extends ByteArrayOutputStream {
    Bytes(int size) {
      super(size);
    }

    byte[] array() {
      return buf;
    }
  }

  @Override
  @SuppressWarnings("unchecked")
  public void write(scala.collection.Iterator<Product2<K, V>> records) throws IOException {
    ShuffleDependency<K, V, C> dep = handle.dependency();
    Partitioner partitioner = dep.partitioner();
    int partitions = partitioner.numPartitions();
    scala.collection.Iterator<? extends Product2<K, ?>> input = records;
    if (dep.mapSideCombine()) {
      if (dep.aggregator().isEmpty()) {
        throw new IllegalStateException("map-side combine without an aggregator");
      }
      input = dep.aggregator().get().combineValuesByKey(records, context);
    }
    Bytes ser = new Bytes(4096);
    SerializationStream out = dep.serializer().newInstance().serializeStream(ser);
    ByteBuffer buf = ByteBuffer.allocateDirect(settings.bufferBytes).order(ByteOrder.LITTLE_ENDIAN);
    task =
        SluiceNative.mapOpen(engineShuffle, context.partitionId(), context.attemptNumber(), partitions);
    long count = 0;
    int inBuffer = 0;
    while (input.hasNext()) {
      Product2<K, ?> r = input.next();
      K key = r._1();
      int p = partitioner.getPartition(key);
      ser.reset();
      out.writeKey(key, ClassTag$.MODULE$.Any());
      out.writeValue(r._2(), ClassTag$.MODULE$.Any());
      out.flush();
      int n = ser.size();
      int need = RECORD_PREFIX_BYTES + n;
      if (need > buf.remaining()) {
        if (inBuffer > 0) {
          SluiceNative.mapProduce(task, buf, buf.position(), inBuffer);
          buf.clear();
          inBuffer = 0;
        }
        if (need > buf.capacity()) {
          // A record larger than the buffer travels in a buffer of its own.
          ByteBuffer big = ByteBuffer.allocateDirect(need).order(ByteOrder.LITTLE_ENDIAN);
          put(big, p, ser.array(), n);
          SluiceNative.mapProduce(task, big, need, 1);
          count++;
          continue;
        }
      }
      put(buf, p, ser.array(), n);
      inBuffer++;
      count++;
    }
    if (inBuffer > 0) {
      SluiceNative.mapProduce(task, buf, buf.position(), inBuffer);
    }
    out.close();

    long t0 = System.nanoTime();
    File dataFile = resolver.getDataFile(dep.shuffleId(), mapId);
    dataTmp = resolver.createTempFile(dataFile);
    long handleNow = task;
    task = 0;
    lengths =
        SluiceNative.mapCommit(
            handleNow, dataTmp.getAbsolutePath(), settings.codec, settings.codecLevel);
    resolver.writeMetadataFileAndCommit(dep.shuffleId(), mapId, lengths, new long[0], dataTmp);
    long total = 0;
    for (long l : lengths) {
      total += l;
    }
    SluiceMetrics.MAP_OUTPUTS.incrementAndGet();
    SluiceMetrics.BYTES_WRITTEN.addAndGet(total);
    SluiceMetrics.RECORDS_WRITTEN.addAndGet(count);
    metrics.incBytesWritten(total);
    metrics.incRecordsWritten(count);
    metrics.incWriteTime(System.nanoTime() - t0);
    status =
        MapStatus$.MODULE$.apply(SparkEnv.get().blockManager().shuffleServerId(), lengths, mapId);
  }

  private static void put(ByteBuffer b, int partition, byte[] bytes, int n) {
    b.putInt(4).putInt(n).putInt(partition).put(bytes, 0, n);
  }

  @Override
  public Option<MapStatus> stop(boolean success) {
    if (task != 0) {
      long t = task;
      task = 0;
      SluiceNative.mapAbort(t);
    }
    if (dataTmp != null && dataTmp.exists() && !dataTmp.delete()) {
      dataTmp.deleteOnExit();
    }
    if (success && status != null) {
      return Option.apply(status);
    }
    return Option.empty();
  }

  @Override
  public long[] getPartitionLengths() {
    return lengths;
  }
}
