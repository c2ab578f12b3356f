package dev.sluice.spark.shuffle;

import org.apache.spark.Partitioner;
import org.apache.spark.TaskContext;
import org.apache.spark.scheduler.MapStatus;
import org.apache.spark.shuffle.IndexShuffleBlockResolver;
import org.apache.spark.shuffle.ShuffleWriteMetricsReporter;
import org.apache.spark.shuffle.ShuffleWriter;
import scala.Option;
import scala.Product2;

/**
 * What Sluice's map-side writers share: the map attempt's engine output ({@link
 * NativeMapOutput}), its status once committed, and Spark's end-of-task protocol (an attempt
 * that did not commit is dropped, its memory and spill files freed).
 */
public abstract class NativeShuffleWriter<K, V> extends ShuffleWriter<K, V> {
  protected final SluiceShuffleHandle<K, V, ?> handle;
  private final int engineShuffle;
  private final long mapId;
  protected final TaskContext context;
  private final ShuffleWriteMetricsReporter metrics;
  protected final SluiceConf settings;
  private final IndexShuffleBlockResolver resolver;

  protected NativeMapOutput output;
  protected MapStatus status;

  /** The attempt's row checksums, set when its output opens; null when the shuffle has none. */
  private RowChecksums rows;

  protected NativeShuffleWriter(
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

  /**
   * Opens the attempt's engine output; {@code hostKeys} when keys carry more than the id. The
   * output is dropped when the task ends if it did not commit, whatever way the task ended (an
   * {@code Error} thrown in {@code write} skips Spark's {@code stop}), so no native attempt
   * outlives its task.
   */
  protected final NativeMapOutput openOutput(boolean hostKeys) {
    return openOutput(hostKeys, false);
  }

  /**
   * {@link #openOutput(boolean)}, where {@code rowRecords} says that every record handed over is
   * a Spark SQL row as {@code UnsafeRowSerializer} writes it, so that the engine computes the
   * shuffle's row checksums ({@link RowChecksums}) as the rows cross; otherwise {@link
   * #checksummed} updates them.
   */
  protected final NativeMapOutput openOutput(boolean hostKeys, boolean rowRecords) {
    rows = RowChecksums.of(handle.dependency(), rowRecords);
    NativeMapOutput opened =
        new NativeMapOutput(
            engineShuffle,
            handle.shuffleId(),
            mapId,
            handle.numMaps(),
            handle.dependency().partitioner().numPartitions(),
            hostKeys,
            context,
            metrics,
            settings,
            resolver,
            rows,
            handle.assignment(),
            handle.kind() instanceof ShuffleKind.Operator);
    output = opened;
    context.addTaskCompletionListener(
        (org.apache.spark.util.TaskCompletionListener) ctx -> opened.abort());
    return opened;
  }

  /**
   * {@code records}, each pair added to its partition's row checksum as it passes (before any
   * map-side combine, as Spark's writers do), where the shuffle has row checksums the engine does
   * not compute; {@code records} itself otherwise. Call after {@link #openOutput}.
   */
  protected final scala.collection.Iterator<Product2<K, V>> checksummed(
      scala.collection.Iterator<Product2<K, V>> records) {
    RowChecksums r = rows;
    if (r == null || r.inEngine) {
      return records;
    }
    Partitioner partitioner = handle.dependency().partitioner();
    return new scala.collection.AbstractIterator<Product2<K, V>>() {
      @Override
      public boolean hasNext() {
        return records.hasNext();
      }

      @Override
      public Product2<K, V> next() {
        Product2<K, V> pair = records.next();
        r.update(partitioner.getPartition(pair._1()), pair._1(), pair._2());
        return pair;
      }
    };
  }

  @Override
  public final Option<MapStatus> stop(boolean success) {
    if (output != null) {
      output.abort();
    }
    if (success && status != null) {
      return Option.apply(status);
    }
    return Option.empty();
  }

  @Override
  public final long[] getPartitionLengths() {
    return output == null ? null : output.lengths();
  }
}
