package dev.sluice.spark;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import org.apache.spark.SparkEnv;
import org.apache.spark.TaskContext;
import org.apache.spark.shuffle.BlockStoreShuffleReader;
import org.apache.spark.shuffle.ShuffleReadMetricsReporter;
import org.apache.spark.shuffle.ShuffleReader;
import org.apache.spark.util.TaskCompletionListener;
import scala.Product2;
import scala.Tuple2;

/**
 * A reduce task's reader of an offloaded operator shuffle ({@link Sluice}). Spark's own reader
 * and fetch machinery fetch the task's segments; each one's blocks are decoded, verified and
 * merged into one native final aggregate as the segment is read (a corrupt block is a fetch
 * failure, as for any Sluice shuffle). Once every segment is in, the aggregate emits each key's
 * result once and the task iterates them, a buffer of results per JNI call.
 */
final class SluiceOpReader<K, C> implements ShuffleReader<K, C> {
  /** Bytes of the result buffer one JNI call fills (256 KiB; larger for a larger result). */
  static final int RESULT_BUFFER_BYTES = 256 << 10;

  private final SluiceShuffleHandle<K, ?, C> handle;
  private final int startMapIndex;
  private final int endMapIndex;
  private final int startPartition;
  private final int endPartition;
  private final TaskContext context;
  private final ShuffleReadMetricsReporter metrics;

  SluiceOpReader(
      SluiceShuffleHandle<K, ?, C> handle,
      int startMapIndex,
      int endMapIndex,
      int startPartition,
      int endPartition,
      TaskContext context,
      ShuffleReadMetricsReporter metrics) {
    this.handle = handle;
    this.startMapIndex = startMapIndex;
    this.endMapIndex = endMapIndex;
    this.startPartition = startPartition;
    this.endPartition = endPartition;
    this.context = context;
    this.metrics = metrics;
  }

  @Override
  @SuppressWarnings({"unchecked", "rawtypes"})
  public scala.collection.Iterator<Product2<K, C>> read() {
    OpSpec op = handle.op();
    Results results =
        new Results(op, SluiceNative.reduceOpen(op.agg.code, op.valueType, startPartition, endPartition));
    context.addTaskCompletionListener((TaskCompletionListener) ctx -> results.close());
    SparkEnv env = SparkEnv.get();
    scala.collection.Iterator blocks =
        env.mapOutputTracker()
            .getMapSizesByExecutorId(
                handle.shuffleId(), startMapIndex, endMapIndex, startPartition, endPartition);
    BlockStoreShuffleReader<K, C> fetch =
        new BlockStoreShuffleReader<K, C>(
            handle,
            blocks,
            context,
            metrics,
            new SluiceSerializerManager(env.serializer(), env.conf(), results.aggregate),
            env.blockManager(),
            env.mapOutputTracker(),
            false);
    // Reading every fetched segment feeds the aggregate; the streams yield no records.
    scala.collection.Iterator<Product2<K, C>> drained = fetch.read();
    while (drained.hasNext()) {
      drained.next();
    }
    long n;
    try {
      n = SluiceNative.reduceFinish(results.aggregate);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    metrics.incRecordsRead(n);
    return (scala.collection.Iterator) results;
  }

  /** The aggregate's results, decoded a buffer at a time; frees the aggregate at the end. */
  private static final class Results extends scala.collection.AbstractIterator<Tuple2<Object, Object>> {
    private final OpSpec op;
    private long aggregate;
    private ByteBuffer buf = ByteBuffer.allocateDirect(RESULT_BUFFER_BYTES).order(ByteOrder.LITTLE_ENDIAN);
    private int left;

    Results(OpSpec op, long aggregate) {
      this.op = op;
      this.aggregate = aggregate;
      buf.limit(0);
    }

    @Override
    public boolean hasNext() {
      while (left == 0) {
        if (aggregate == 0) {
          return false;
        }
        buf.clear();
        long r = SluiceNative.reduceNext(aggregate, buf);
        int bytes = (int) (r & 0xffffffffL);
        left = (int) (r >>> 32);
        if (left == 0 && bytes > 0) {
          buf = ByteBuffer.allocateDirect(bytes).order(ByteOrder.LITTLE_ENDIAN);
          continue;
        }
        if (left == 0) {
          close();
          return false;
        }
        buf.limit(bytes);
      }
      return true;
    }

    @Override
    public Tuple2<Object, Object> next() {
      if (!hasNext()) {
        throw new java.util.NoSuchElementException();
      }
      int klen = buf.getInt();
      buf.getInt(); // the value's length: 8
      buf.getInt(); // the partition id
      Object key = OpSpec.getKey(buf, klen - 4);
      Object value = op.getResult(buf);
      left--;
      return new Tuple2<>(key, value);
    }

    void close() {
      if (aggregate != 0) {
        long a = aggregate;
        aggregate = 0;
        SluiceNative.reduceClose(a);
      }
    }
  }
}
