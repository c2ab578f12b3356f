package dev.sluice.spark;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import org.apache.spark.Partitioner;
import org.apache.spark.ShuffleDependency;
import org.apache.spark.TaskContext;
import org.apache.spark.shuffle.IndexShuffleBlockResolver;
import org.apache.spark.shuffle.ShuffleWriteMetricsReporter;
import scala.Product2;

/**
 * A map task's writer for an offloaded operator shuffle ({@link Sluice}): no Java serialization;
 * each (key, value) pair is written into the engine's buffer as the engine's own record (see
 * {@link OpSpec}), and the engine partitions and partially aggregates it on its offload threads.
 */
final class SluiceOpWriter<K, V> extends NativeShuffleWriter<K, V> {

  SluiceOpWriter(
      SluiceShuffleHandle<K, V, ?> handle,
      int engineShuffle,
      long mapId,
      TaskContext context,
      ShuffleWriteMetricsReporter metrics,
      SluiceConf settings,
      IndexShuffleBlockResolver resolver) {
    super(handle, engineShuffle, mapId, context, metrics, settings, resolver);
  }

  @Override
  public void write(scala.collection.Iterator<Product2<K, V>> records) throws IOException {
    ShuffleDependency<K, V, ?> dep = handle.dependency();
    OpSpec op = handle.op();
    Partitioner partitioner = dep.partitioner();
    NativeMapOutput output = openOutput(true);
    int valueBytes = op.valueBytes();
    while (records.hasNext()) {
      Product2<K, V> r = records.next();
      K key = r._1();
      byte[] utf8 =
          key instanceof String s
              ? s.getBytes(StandardCharsets.UTF_8)
              : key instanceof byte[] bytes ? bytes : null;
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
}
