package dev.sluice.spark.shuffle;

import dev.sluice.spark.api.SluiceSetting;
import dev.sluice.spark.metrics.SluiceMetrics;
import dev.sluice.spark.sort.RowFraming;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.lang.reflect.Field;
import java.util.NoSuchElementException;
import org.apache.spark.InterruptibleIterator;
import org.apache.spark.ShuffleDependency;
import org.apache.spark.SparkConf;
import org.apache.spark.SparkEnv;
import org.apache.spark.TaskContext;
import org.apache.spark.io.CompressionCodec$;
import org.apache.spark.serializer.Serializer;
import org.apache.spark.shuffle.ShuffleReadMetricsReporter;
import org.apache.spark.shuffle.ShuffleReader;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.storage.BlockId;
import org.apache.spark.unsafe.Platform;
import scala.Product2;
import scala.Tuple2;

/**
 * A reduce task's reader of a Spark SQL row shuffle on Sluice (an exchange's {@link UnsafeRow}s,
 * serialized by {@code UnsafeRowSerializer}, with no aggregator and no key ordering). Spark's
 * fetch iterator fetches the task's segments as for any Sluice shuffle, each block is decoded and
 * verified natively into a heap array ({@link SluiceBlockInputStream}), and each row is pointed at
 * its bytes there. Spark's own reader would take every row through the serializer's
 * deserialization stream instead: a {@code DataInputStream} over a {@code BufferedInputStream},
 * four synchronized one-byte reads for the row's size and a copy of the row (measured as about
 * a tenth of the task CPU of TPC-H q09 and q21 at scale factor 10, under either shuffle; see
 * docs/benchmarks.md).
 *
 * <p>The rest is what Spark's reader does for such a shuffle: the same fetch iterator with the
 * same settings (contiguous partitions fetched as one when Spark's reader would), one record read
 * counted per row, the read metrics merged into the task's when the last row has been read, the
 * task's kill checked before each row ({@link InterruptibleIterator}), and each segment's fetched
 * buffer released when its rows are done. As with the serializer's stream, one row object is
 * reused: it is valid until the next call to {@code next()}, and {@code hasNext()} leaves it as
 * it is ({@link DecodeBuffers}). A corrupt or cut segment is raised through the stream Spark's
 * fetch iterator wrapped around the segment's, so it is a fetch failure exactly when it would be
 * one under Spark's reader.
 *
 * <p>Loaded only for Spark SQL shuffles, so the plugin needs Spark SQL on the class path only for
 * them.
 */
public final class RowShuffleReader<K, C> implements ShuffleReader<K, C> {
  private final SluiceShuffleHandle<K, ?, C> handle;
  /** The task's blocks by executor, as the map output tracker lists them. */
  @SuppressWarnings("rawtypes")
  private final scala.collection.Iterator blocks;

  private final TaskContext context;
  private final ShuffleReadMetricsReporter metrics;
  private final boolean shouldBatchFetch;

  /** The reduce partitions read, for a service shuffle's reads of the daemons. */
  private int startPartition;

  private int endPartition;

  /**
   * Whether this reader reads {@code handle}'s shuffle: Spark SQL rows that cross as they are
   * (no engine operator, sort or aggregator), with {@link SluiceSetting#SQL_ROWS_DIRECT} on, and
   * Spark not set to copy each fetched stream's start into memory first ({@code
   * spark.shuffle.detectCorrupt.useExtraMemory}, which would take bytes from the stream this
   * reader reads rows from).
   */
  public static boolean covers(SluiceShuffleHandle<?, ?, ?> handle, SparkConf conf) {
    ShuffleDependency<?, ?, ?> dep = handle.dependency();
    return handle.kind() instanceof ShuffleKind.Plain
        && dep.aggregator().isEmpty()
        && dep.keyOrdering().isEmpty()
        && !dep.mapSideCombine()
        && RowFraming.covers(dep.serializer())
        && SluiceSetting.SQL_ROWS_DIRECT.flag(conf)
        && !(Boolean) conf.get(config().SHUFFLE_DETECT_CORRUPT_MEMORY());
  }

  private static org.apache.spark.internal.config.package$ config() {
    return org.apache.spark.internal.config.package$.MODULE$;
  }

  @SuppressWarnings({"unchecked", "rawtypes"})
  public RowShuffleReader(
      SluiceShuffleHandle<K, ?, C> handle,
      scala.collection.Iterator blocks,
      TaskContext context,
      ShuffleReadMetricsReporter metrics,
      boolean shouldBatchFetch) {
    this.handle = handle;
    this.blocks = blocks;
    this.context = context;
    this.metrics = metrics;
    this.shouldBatchFetch = shouldBatchFetch;
  }

  /** The reader of a service shuffle's partitions {@code start..end} (from the daemons). */
  public RowShuffleReader<K, C> service(int start, int end) {
    this.startPartition = start;
    this.endPartition = end;
    return this;
  }

  /** Whether Spark's reader would fetch contiguous partitions as one (its own test, repeated). */
  private boolean batchFetch(SparkConf conf, Serializer serializer) {
    var c = config();
    boolean compressed = (Boolean) conf.get(c.SHUFFLE_COMPRESS());
    boolean concatenates =
        !compressed
            || CompressionCodec$.MODULE$.supportsConcatenationOfSerializedStreams(
                CompressionCodec$.MODULE$.createCodec(conf));
    return shouldBatchFetch
        && serializer.supportsRelocationOfSerializedObjects()
        && concatenates
        && !(Boolean) conf.get(c.SHUFFLE_USE_OLD_FETCH_PROTOCOL())
        && !(Boolean) conf.get(c.IO_ENCRYPTION_ENABLED());
  }

  /** The number of fields of the shuffle's rows, from its {@code UnsafeRowSerializer}. */
  static int numFields(Serializer serializer) {
    try {
      Field f = serializer.getClass().getDeclaredField("numFields");
      f.setAccessible(true);
      return f.getInt(serializer);
    } catch (ReflectiveOperationException | RuntimeException e) {
      throw new IllegalStateException(
          "Sluice: cannot read the row width of " + serializer.getClass().getName(), e);
    }
  }

  @Override
  @SuppressWarnings({"unchecked", "rawtypes"})
  public scala.collection.Iterator<Product2<K, C>> read() {
    SparkEnv env = SparkEnv.get();
    SparkConf conf = env.conf();
    Serializer serializer = handle.dependency().serializer();
    SluiceSerializerManager segments =
        new SluiceSerializerManager(env.serializer(), conf, null, metrics);
    boolean batch = batchFetch(conf, serializer);
    scala.collection.Iterator<Tuple2<BlockId, InputStream>> streams =
        handle.service()
            ? ServiceReads.streams(
                handle, blocks, startPartition, endPartition, context, metrics, segments, null,
                batch)
            : SegmentFetch.of(context, blocks, segments, metrics, batch);
    Rows rows = new Rows(streams, segments, numFields(serializer));
    return new InterruptibleIterator<>(context, (scala.collection.Iterator) rows);
  }

  /** The rows of every fetched segment, one after another. */
  private final class Rows extends scala.collection.AbstractIterator<Tuple2<Object, Object>> {
    private final scala.collection.Iterator<Tuple2<BlockId, InputStream>> streams;
    private final SluiceSerializerManager segments;
    private final UnsafeRow row;
    /** The null bits and fixed slots every row of the shuffle has. */
    private final int minRowBytes;

    private final Tuple2<Object, Object> pair;
    /** The segment being read and the stream Spark's fetch iterator wrapped around it. */
    private SluiceBlockInputStream segment;

    private InputStream fetched;
    /** The size of the row {@link #hasNext} found, or -1 when none is waiting. */
    private int waiting = -1;

    private boolean done;
    /** Rows handed out, for {@link SluiceMetrics#sqlRowsRead}. */
    private long served;

    Rows(
        scala.collection.Iterator<Tuple2<BlockId, InputStream>> streams,
        SluiceSerializerManager segments,
        int numFields) {
      this.streams = streams;
      this.segments = segments;
      this.row = new UnsafeRow(numFields);
      this.minRowBytes = RowFraming.fixedBytes(numFields);
      // The serializer's pairs carry the partition id as key 0; the exchange reads the value.
      this.pair = new Tuple2<>(0, row);
    }

    @Override
    public boolean hasNext() {
      while (waiting < 0 && !done) {
        if (segment != null) {
          int size;
          try {
            size = segment.advanceRow(minRowBytes);
          } catch (IOException e) {
            throw raise(e);
          }
          if (size >= 0) {
            waiting = size;
            break;
          }
          close();
        }
        if (streams.hasNext()) {
          Tuple2<BlockId, InputStream> next = streams.next();
          fetched = next._2();
          segment = segments.opened(next._1());
        } else {
          done = true;
          SluiceMetrics.SQL_ROWS_READ.addAndGet(served);
          context.taskMetrics().mergeShuffleReadMetrics();
        }
      }
      return waiting >= 0;
    }

    @Override
    public Tuple2<Object, Object> next() {
      if (!hasNext()) {
        throw new NoSuchElementException();
      }
      row.pointTo(
          segment.rowBytes(), Platform.BYTE_ARRAY_OFFSET + segment.rowOffset(), waiting);
      waiting = -1;
      metrics.incRecordsRead(1);
      served++;
      return pair;
    }

    /** Closes the segment's stream: Spark's wrapper releases the fetched buffer. */
    private void close() {
      try {
        fetched.close();
      } catch (IOException e) {
        throw new UncheckedIOException(e);
      } finally {
        segment = null;
        fetched = null;
      }
    }

    /**
     * {@code e} raised through Spark's wrapper of the segment's stream, as a read of it: Spark's
     * wrapper turns it into a fetch failure (with spark.shuffle.detectCorrupt on, its default)
     * and releases the buffer; otherwise the failure itself fails the task.
     */
    private RuntimeException raise(IOException e) {
      segment.raiseOnRead(e);
      try {
        fetched.read();
      } catch (IOException raised) {
        return new UncheckedIOException(raised);
      }
      return new UncheckedIOException(e);
    }
  }
}
