package dev.sluice.spark.shuffle;

import dev.sluice.spark.combine.MapCombiner;
import dev.sluice.spark.metrics.SluiceMetrics;
import dev.sluice.spark.sort.RowFraming;
import dev.sluice.spark.sort.RowSortKey;
import dev.sluice.spark.sort.SortKind;
import dev.sluice.spark.sort.SortedRowPartitioner;
import dev.sluice.spark.sort.SortedRowSerializer;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.ByteBuffer;
import java.util.Arrays;
import org.apache.spark.Partitioner;
import org.apache.spark.ShuffleDependency;
import org.apache.spark.TaskContext;
import org.apache.spark.serializer.SerializationStream;
import org.apache.spark.shuffle.IndexShuffleBlockResolver;
import org.apache.spark.shuffle.ShuffleWriteMetricsReporter;
import scala.Product2;
import scala.reflect.ClassTag$;

/**
 * A map task's writer: serializes each record with the shuffle's serializer into the engine's
 * buffer (see {@link NativeMapOutput}), then has the engine write the attempt's output.
 *
 * <p>Engine record: key = the partition id (u32 LE), value = the record's serialized bytes. The
 * serializer is relocatable (see {@link Coverage}), so each record's bytes can be cut out of one
 * serialization stream and later read back to back. For a shuffle the engine sorts ({@link
 * SortKind}), the key is followed by the record's key in its byte-comparable form; for Spark SQL
 * rows the engine sorts ({@link SortKind#ROWS}), by the row's sort columns ({@link RowSortKey}),
 * whose range is also the record's partition ({@link SortedRowPartitioner}).
 */
public final class SluiceShuffleWriter<K, V> extends NativeShuffleWriter<K, V> {

  public SluiceShuffleWriter(
      SluiceShuffleHandle<K, V, ?> handle,
      int engineShuffle,
      long mapId,
      TaskContext context,
      ShuffleWriteMetricsReporter metrics,
      SluiceConf settings,
      IndexShuffleBlockResolver resolver) {
    super(handle, engineShuffle, mapId, context, metrics, settings, resolver);
  }

  /**
   * One record's serialized bytes, readable without a copy. Unlike {@code ByteArrayOutputStream}
   * its writes are not synchronized: the serializer flushes into it once per record, and an
   * uncontended lock still costs an atomic operation per call.
   */
  private static final class Bytes extends OutputStream {
    private byte[] buf;
    private int count;

    Bytes(int size) {
      buf = new byte[size];
    }

    private void ensure(int more) {
      if (count + more > buf.length) {
        buf = Arrays.copyOf(buf, Math.max(buf.length * 2, count + more));
      }
    }

    @Override
    public void write(int b) {
      ensure(1);
      buf[count++] = (byte) b;
    }

    @Override
    public void write(byte[] b, int off, int len) {
      ensure(len);
      System.arraycopy(b, off, buf, count, len);
      count += len;
    }

    void reset() {
      count = 0;
    }

    int size() {
      return count;
    }

    byte[] array() {
      return buf;
    }
  }

  /** The attempt's partitioner, sort kind and serialization stream, set when it starts. */
  private Partitioner partitioner;

  private SortKind sortKind;
  private Bytes ser;
  private SerializationStream out;

  @Override
  public void write(scala.collection.Iterator<Product2<K, V>> records) throws IOException {
    ShuffleDependency<K, V, ?> dep = handle.dependency();
    partitioner = dep.partitioner();
    sortKind = handle.sortKind();
    boolean sorted = sortKind != SortKind.NONE;
    if (dep.mapSideCombine() && dep.aggregator().isEmpty()) {
      throw new IllegalStateException("map-side combine without an aggregator");
    }
    ser = new Bytes(4096);
    out = dep.serializer().newInstance().serializeStream(ser);
    // Spark SQL's rows reach the engine as UnsafeRowSerializer's bytes (whether or not they skip
    // it), so the engine computes their row checksums; a sorted row shuffle is Sluice's own.
    boolean rowRecords =
        !dep.mapSideCombine()
            && (sortKind == SortKind.ROWS
                || (!sorted && RowFraming.covers(dep.serializer())));
    openOutput(sorted, rowRecords);
    records = checksummed(records);
    long direct = 0;
    if (sortKind == SortKind.HASH && dep.mapSideCombine()) {
      // Grouped by key hash: a bounded combine on this thread, the reduce side folds the rest.
      new MapCombiner<>(dep.aggregator().get(), context, this::put).run(records);
    } else if (sortKind == SortKind.ROWS) {
      // Spark SQL rows the engine sorts (an ORDER BY, see dev.sluice.spark.sql).
      // The partition is the range of the row's encoded key (SortedRowPartitioner).
      SortedRowSerializer rowSer = (SortedRowSerializer) dep.serializer();
      SortedRowPartitioner ranges = (SortedRowPartitioner) partitioner;
      RowDataSize dataSize = RowDataSize.of(rowSer.rowSerializer());
      while (records.hasNext()) {
        UnsafeRowFastPath.writeSorted(output, ranges, records.next()._2(), rowSer.key, dataSize);
        direct++;
      }
      if (dataSize != null) {
        dataSize.publish();
      }
    } else {
      scala.collection.Iterator<? extends Product2<K, ?>> input =
          dep.mapSideCombine()
              ? dep.aggregator().get().combineValuesByKey(records, context)
              : records;
      // Spark SQL's rows skip the serializer (same bytes, one copy); see UnsafeRowFastPath.
      boolean rows =
          !sorted && settings.sqlRowsDirect && RowFraming.covers(dep.serializer());
      RowDataSize dataSize = rows ? RowDataSize.of(dep.serializer()) : null;
      while (input.hasNext()) {
        Product2<K, ?> r = input.next();
        K key = r._1();
        if (rows
            && UnsafeRowFastPath.write(output, partitioner.getPartition(key), r._2(), dataSize)) {
          direct++;
          continue;
        }
        put(key, r._2());
      }
      if (dataSize != null) {
        dataSize.publish();
      }
    }
    out.close();
    status = output.commit();
    SluiceMetrics.SQL_ROWS_DIRECT.addAndGet(direct);
  }

  /**
   * Serializes one record into the engine's buffer, keyed by its partition and, for a shuffle the
   * engine sorts, its key encoded in the sort's order.
   */
  private void put(Object key, Object value) throws IOException {
    int p = partitioner.getPartition(key);
    ser.reset();
    out.writeKey(key, ClassTag$.MODULE$.Any());
    out.writeValue(value, ClassTag$.MODULE$.Any());
    out.flush();
    int n = ser.size();
    boolean sorted = sortKind != SortKind.NONE;
    int sortBytes = sorted ? sortKind.bytes(key) : 0;
    ByteBuffer b = output.startRecord(p, sortBytes, n);
    if (sorted) {
      sortKind.put(b, key);
    }
    b.put(ser.array(), 0, n);
    output.added();
  }
}
