package dev.sluice.spark;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import org.apache.spark.Partitioner;
import org.apache.spark.ShuffleDependency;
import org.apache.spark.TaskContext;
import org.apache.spark.scheduler.MapStatus;
import org.apache.spark.shuffle.IndexShuffleBlockResolver;
import org.apache.spark.shuffle.ShuffleWriteMetricsReporter;
import org.apache.spark.shuffle.ShuffleWriter;
import scala.Option;
import scala.Product2;

/**
 * A map task's writer for an offloaded operator shuffle ({@link Sluice}): no Java serialization;
 * each (key, value) pair is written into the engine's buffer as the engine's own record (see
 * {@link OpSpec}), and the engine partitions and partially aggregates it on its offload threads.
 */
final class SluiceOpWriter<K, V> extends ShuffleWriter<K, V> {
  private final SluiceShuffleHandle<K, V, ?> handle;
  private final int engineShuffle;
  private final long mapId;
  private final TaskContext context;
  private final ShuffleWriteMetricsReporter metrics;
  private final SluiceConf settings;
  private final IndexShuffleBlockResolver resolver;

  private NativeMapOutput output;
  private MapStatus status;

  SluiceOpWriter(
      SluiceShuffleHandle<K, V, ?> handle,
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

  @Override
  public void write(scala.collection.Iterator<Product2<K, V>> records) throws IOException {
    ShuffleDependency<K, V, ?> dep = handle.dependency();
    OpSpec op = handle.op();
    Partitioner partitioner = dep.partitioner();
    output =
        new NativeMapOutput(
            engineShuffle,
            dep.shuffleId(),
            mapId,
            partitioner.numPartitions(),
            true,
            context,
            metrics,
            settings,
            resolver);
    int valueBytes = op.valueBytes();
    while (records.hasNext()) {
      Product2<K, V> r = records.next();
      K key = r._1();
      byte[] utf8 = key instanceof String ? ((String) key).getBytes(StandardCharsets.UTF_8) : null;
      int keyBytes = 4 + OpSpec.keyBytes(key, utf8);
      V value = r._2();
      ByteBuffer b = output.room(NativeMapOutput.LENGTHS_BYTES + keyBytes + valueBytes);
      b.putInt(keyBytes).putInt(valueBytes).putInt(partitioner.getPartition(key));
      OpSpec.putKey(b, key, utf8);
      op.putValue(b, value);
      output.added();
    }
    status = output.commit();
  }

  @Override
  public Option<MapStatus> stop(boolean success) {
    if (output != null) {
      output.abort();
    }
    if (success && status != null) {
      return Option.apply(status);
    }
    return Option.empty();
  }

  @Override
  public long[] getPartitionLengths() {
    return output == null ? null : output.lengths();
  }
}
