package dev.sluice.spark.ops;

import dev.sluice.spark.shuffle.NativeMapOutput;
import dev.sluice.spark.shuffle.NativeShuffleWriter;
import dev.sluice.spark.shuffle.SluiceConf;
import dev.sluice.spark.shuffle.SluiceShuffleHandle;
import java.io.IOException;
import java.nio.ByteBuffer;
import org.apache.spark.Partitioner;
import org.apache.spark.TaskContext;
import org.apache.spark.shuffle.IndexShuffleBlockResolver;
import org.apache.spark.shuffle.ShuffleWriteMetricsReporter;
import scala.Product2;

/**
 * A map task's writer for an offloaded operator shuffle ({@link dev.sluice.spark.Sluice}): no Java
 * serialization; each (key, value) pair is written into the engine's buffer as the engine's own
 * record (see {@link OpSpec}), and the engine partitions and partially aggregates it on its offload
 * threads, after a small first level on the task thread ({@link OpPreAggregator}) where the
 * operator has one.
 */
public final class SluiceOpWriter<K, V> extends NativeShuffleWriter<K, V> {
  private final Partitioner partitioner;

  public SluiceOpWriter(
      SluiceShuffleHandle<K, V, ?> handle,
      int engineShuffle,
      long mapId,
      TaskContext context,
      ShuffleWriteMetricsReporter metrics,
      SluiceConf settings,
      IndexShuffleBlockResolver resolver) {
    super(handle, engineShuffle, mapId, context, metrics, settings, resolver);
    this.partitioner = handle.dependency().partitioner();
  }

  @Override
  public void write(scala.collection.Iterator<Product2<K, V>> records) throws IOException {
    OpSpec op = OpSpec.of(handle);
    NativeMapOutput output = openOutput(true);
    records = checksummed(records);
    if (op.lanes != null) {
      writeLanes(records, output, op.valueBytes());
      return;
    }
    OpPreAggregator first = op.firstLevel ? new OpPreAggregator(op) : null;
    while (records.hasNext()) {
      Product2<K, V> r = records.next();
      K key = r._1();
      long v = op.engineValue(r._2());
      if (first == null || !first.offer(key, v)) {
        put(output, op, key, v);
      }
    }
    if (first != null) {
      first.drain((k, state) -> put(output, op, k, state));
    }
    status = output.commit();
  }

  /**
   * Writes the records of a lanes aggregate: each key a {@link LaneRecord} that carries its
   * partition and writes its key and value bytes straight into the engine's buffer.
   */
  private void writeLanes(
      scala.collection.Iterator<Product2<K, V>> records, NativeMapOutput output, int valueBytes)
      throws IOException {
    while (records.hasNext()) {
      LaneRecord r = (LaneRecord) records.next()._1();
      int keyBytes = 4 + 1 + r.keyBytes();
      ByteBuffer b = output.room(NativeMapOutput.LENGTHS_BYTES + keyBytes + valueBytes);
      b.putInt(keyBytes).putInt(valueBytes).putInt(r.partition());
      b.put(OpSpec.KEY_STRING);
      r.putKey(b);
      int at = b.position();
      r.putValue(b);
      if (b.position() - at != valueBytes) {
        throw new IllegalArgumentException(
            "a lanes value of " + (b.position() - at) + " bytes, the operator takes " + valueBytes);
      }
      output.added();
    }
    status = output.commit();
  }

  /** Writes one engine record: the key's partition and encoding, then the value. */
  private void put(NativeMapOutput output, OpSpec op, Object key, long value)
      throws IOException {
    byte[] utf8 = op.keyUtf8(key);
    int keyBytes = 4 + OpSpec.keyBytes(key, utf8);
    int valueBytes = op.valueBytes();
    ByteBuffer b = output.room(NativeMapOutput.LENGTHS_BYTES + keyBytes + valueBytes);
    b.putInt(keyBytes).putInt(valueBytes).putInt(partitioner.getPartition(key));
    OpSpec.putKey(b, key, utf8);
    op.putValue(b, value);
    output.added();
  }
}
