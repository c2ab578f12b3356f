package dev.sluice.spark.ops;

import dev.sluice.spark.combine.GroupedCombine;
import dev.sluice.spark.jni.SluiceNative;
import dev.sluice.spark.metrics.SluiceMetrics;
import dev.sluice.spark.shuffle.ReduceMemory;
import dev.sluice.spark.shuffle.ReduceOperator;
import dev.sluice.spark.shuffle.ServiceReads;
import dev.sluice.spark.shuffle.SluiceSerializerManager;
import dev.sluice.spark.shuffle.SluiceShuffleHandle;
import dev.sluice.spark.shuffle.TaskSpillDir;
import dev.sluice.spark.sort.SortKind;
import dev.sluice.spark.sort.SortedRowSerializer;
import dev.sluice.spark.sort.SortedRows;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import org.apache.spark.InterruptibleIterator;
import org.apache.spark.TaskContext;
import org.apache.spark.shuffle.BlockStoreShuffleReader;
import org.apache.spark.shuffle.ShuffleReadMetricsReporter;
import org.apache.spark.shuffle.ShuffleReader;
import org.apache.spark.util.TaskCompletionListener;
import scala.Product2;
import scala.Tuple2;

/**
 * A reduce task's reader of a shuffle whose reduce side runs in the engine: an offloaded operator
 * ({@link dev.sluice.spark.Sluice}) or a sort ({@link SortKind}). Spark's own reader and fetch
 * machinery fetch the task's segments (a service shuffle's come from the daemons' streams,
 * {@link ServiceReads#feed}); each one's blocks are decoded, verified and taken in by one
 * native operator as the segment is read (a corrupt block is a fetch failure, as for any Sluice
 * shuffle). Once every segment is in, the operator finishes: an aggregate emits each key's result
 * once, which the task iterates a buffer of results per JNI call; a sort merges the map side's runs
 * and serves the records' serialized bytes in key order to the shuffle's deserializer. A shuffle
 * with an aggregator is such a sort, by key hash, and its records are folded as they pass ({@link
 * GroupedCombine}).
 */
public final class SluiceOpReader<K, C> implements ShuffleReader<K, C> {
  /** Bytes of the result buffer one JNI call fills (256 KiB; larger for a larger result). */
  public static final int RESULT_BUFFER_BYTES = 256 << 10;

  private final SluiceShuffleHandle<K, ?, C> handle;
  private final int startMapIndex;
  private final int endMapIndex;
  private final int startPartition;
  private final int endPartition;
  private final TaskContext context;
  private final ShuffleReadMetricsReporter metrics;

  public SluiceOpReader(
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
    OpSpec op = OpSpec.of(handle);
    TaskSpillDir spillDir = TaskSpillDir.create();
    Native results;
    try {
      results =
          new Native(
              SluiceNative.reduceOpen(
                  handle.engineOp(), startPartition, endPartition, spillDir.path()));
    } catch (RuntimeException e) {
      spillDir.remove();
      throw e;
    }
    // A sort keeps its runs, an aggregate its table, in memory Spark grants the task.
    ReduceMemory memory = new ReduceMemory(context, results.handle);
    results.memory = memory;
    context.addTaskCompletionListener(
        (TaskCompletionListener)
            ctx -> {
              results.close();
              spillDir.remove();
              memory.release();
            });
    ReduceOperator operator = new ReduceOperator(results.handle, memory);
    if (handle.service()) {
      // One stream per daemon; each segment's blocks go into the operator as it is read.
      ServiceReads.feed(handle, startMapIndex, endMapIndex, startPartition, endPartition, context,
          metrics, operator);
    } else {
      BlockStoreShuffleReader<K, C> fetch =
          SluiceSerializerManager.fetchReader(
              handle,
              startMapIndex,
              endMapIndex,
              startPartition,
              endPartition,
              context,
              metrics,
              operator);
      // Reading every fetched segment feeds the operator; the streams yield no records (for a
      // sort, Spark's reader then has nothing to sort).
      scala.collection.Iterator<Product2<K, C>> drained = fetch.read();
      while (drained.hasNext()) {
        drained.next();
      }
    }
    // The records read were counted as each block was fed (SluiceBlockInputStream).
    try {
      SluiceNative.reduceFinish(results.handle);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    memory.finished();
    SluiceMetrics.REDUCE_SPILLED_RUNS.addAndGet(SluiceNative.reduceSpilledRuns(results.handle));
    // Spark's spill metrics, as its own reduce-side sorter reports them.
    long[] spilled = SluiceNative.reduceSpillBytes(results.handle);
    context.taskMetrics().incDiskBytesSpilled(spilled[0]);
    context.taskMetrics().incMemoryBytesSpilled(spilled[1]);
    if (op != null) {
      return interruptible(new Results(op, results));
    }
    if (handle.sortKind() == SortKind.ROWS) {
      // Spark SQL rows: pointed at in the result buffers, not deserialized.
      SluiceMetrics.SORTED_READS.incrementAndGet();
      SortedRowSerializer rows = (SortedRowSerializer) handle.dependency().serializer();
      return interruptible(new SortedRows(results, rows.numFields));
    }
    scala.collection.Iterator records =
        handle
            .dependency()
            .serializer()
            .newInstance()
            .deserializeStream(new Values(results))
            .asKeyValueIterator();
    if (handle.sortKind() == SortKind.HASH) {
      // Records of equal key hash come one after another: folded in one pass.
      SluiceMetrics.GROUPED_READS.incrementAndGet();
      return interruptible(
          new GroupedCombine<>(
              handle.dependency().aggregator().get(),
              handle.dependency().mapSideCombine(),
              context,
              records));
    }
    SluiceMetrics.SORTED_READS.incrementAndGet();
    return interruptible(records);
  }

  /**
   * The results as the task reads them, its kill checked before each record, as Spark's reader
   * wraps whatever its sorter or aggregator returns: a task killed without an interrupt of its
   * thread (Spark's default, {@code spark.job.interruptOnCancel} off: a cancelled job, a losing
   * speculative copy) stops at its next record instead of reading on to the end.
   */
  @SuppressWarnings({"unchecked", "rawtypes"})
  private scala.collection.Iterator<Product2<K, C>> interruptible(scala.collection.Iterator it) {
    return new InterruptibleIterator<>(context, it);
  }

  /**
   * The native operator's results, a buffer at a time; frees the operator at the end.
   *
   * <p>The task's completion listener closes it, and a consumer on another thread (Spark's {@code
   * PipedRDD} writes a task's records to its child process from a thread of its own) may still be
   * reading then. The handle is a checked id, not a pointer (the native side's {@code handles}):
   * a close waits for a native call in flight, and a call after it fails with a {@code
   * SluiceException} naming the closed handle, never touching freed memory.
   */
  public static final class Native implements SortedRows.Chunks {
    private volatile long handle;
    /** The operator's grant of Spark's memory, given back when it closes. */
    private ReduceMemory memory;
    public ByteBuffer buf =
        ByteBuffer.allocateDirect(RESULT_BUFFER_BYTES).order(ByteOrder.LITTLE_ENDIAN);

    Native(long handle) {
      this.handle = handle;
      buf.limit(0);
    }

    /** Refills the buffer; returns the records in it, 0 at the end (and frees the operator). */
    @Override
    public int refill() {
      while (handle != 0) {
        buf.clear();
        long r = SluiceNative.reduceNext(handle, buf);
        int bytes = (int) (r & 0xffffffffL);
        int records = (int) (r >>> 32);
        if (records == 0 && bytes > 0) {
          buf = ByteBuffer.allocateDirect(bytes).order(ByteOrder.LITTLE_ENDIAN);
          continue;
        }
        if (records == 0) {
          buf.limit(0);
          close();
          return 0;
        }
        buf.limit(bytes);
        return records;
      }
      return 0;
    }

    @Override
    public ByteBuffer buffer() {
      return buf;
    }

    synchronized void close() {
      if (handle != 0) {
        long h = handle;
        handle = 0;
        if (memory != null) {
          memory.release();
        }
        SluiceNative.reduceClose(h);
      }
    }
  }

  /** An aggregate's (key, result) records. */
  private static final class Results
      extends scala.collection.AbstractIterator<Tuple2<Object, Object>> {
    private final OpSpec op;
    private final Native in;
    private int left;

    Results(OpSpec op, Native in) {
      this.op = op;
      this.in = in;
    }

    @Override
    public boolean hasNext() {
      if (left == 0) {
        left = in.refill();
      }
      return left > 0;
    }

    @Override
    public Tuple2<Object, Object> next() {
      if (!hasNext()) {
        throw new java.util.NoSuchElementException();
      }
      ByteBuffer buf = in.buf;
      int klen = buf.getInt();
      int vlen = buf.getInt();
      buf.getInt(); // the partition id
      Object key = op.getKey(buf, klen - 4);
      Object value = op.getResult(buf, vlen);
      left--;
      return new Tuple2<>(key, value);
    }
  }

  /** A sort's serialized records in key order, as one stream for the deserializer. */
  private static final class Values extends InputStream {
    private final Native in;

    Values(Native in) {
      this.in = in;
    }

    @Override
    public int read() {
      if (!in.buf.hasRemaining() && in.refill() == 0) {
        return -1;
      }
      return in.buf.get() & 0xff;
    }

    @Override
    public int read(byte[] b, int off, int len) {
      if (len == 0) {
        return 0;
      }
      if (!in.buf.hasRemaining() && in.refill() == 0) {
        return -1;
      }
      int n = Math.min(len, in.buf.remaining());
      in.buf.get(b, off, n);
      return n;
    }

    @Override
    public void close() {
      in.close();
    }
  }
}
