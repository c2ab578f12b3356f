package dev.sluice.spark.shuffle;

import dev.sluice.spark.jni.EngineOp;
import dev.sluice.spark.service.Daemons;
import dev.sluice.spark.service.ServiceConf;
import dev.sluice.spark.service.ServiceStreams;
import java.io.InputStream;
import java.util.ArrayList;
import java.util.List;
import org.apache.spark.InterruptibleIterator;
import org.apache.spark.SparkEnv;
import org.apache.spark.TaskContext;
import org.apache.spark.serializer.SerializerInstance;
import org.apache.spark.shuffle.ShuffleReadMetricsReporter;
import org.apache.spark.shuffle.ShuffleReader;
import org.apache.spark.storage.BlockId;
import org.apache.spark.storage.BlockManagerId;
import scala.Product2;
import scala.Tuple2;

/**
 * A service shuffle's reduce side: the task's partitions read from the daemons that own them
 * ({@link ServiceStreams}), each map index from the attempt Spark's map output tracker
 * registered, and each segment wrapped and decoded as a fetched one; the outputs of map attempts
 * whose push failed (kept on their executors, {@link dev.sluice.spark.service.ServicePush}) are
 * fetched from there. A plain shuffle's records come out as Spark's reader hands them over for a
 * shuffle without aggregator or ordering (the plain ones that go to the daemons): deserialized in
 * order, counted, and stopped by a task kill; a shuffle with a native reduce operator feeds its
 * segments to it instead ({@link #feed}).
 */
public final class ServiceReads<K, C> implements ShuffleReader<K, C> {
  private final SluiceShuffleHandle<K, ?, C> handle;
  private final int startMapIndex;
  private final int endMapIndex;
  private final int startPartition;
  private final int endPartition;
  private final TaskContext context;
  private final ShuffleReadMetricsReporter metrics;

  public ServiceReads(
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

  /**
   * The segments of partitions {@code start..end} of the maps {@code blocks} names (the map output
   * tracker's answer for the task): first those kept on their executors (their push failed),
   * fetched from there as embedded outputs are; then those at the service's location, read from
   * the daemons, one stream per daemon, closed with the task; with {@code reduce} (the shuffle's
   * native reduce operator) where {@code service.reduceAtDaemon} chooses it ({@link
   * ServiceConf#reducesAtDaemon}), the daemons run it over each partition before they stream it.
   * {@code batch}: whether the kept outputs' contiguous partitions are fetched as one, as an
   * embedded read of the same shuffle would fetch them.
   */
  @SuppressWarnings({"unchecked", "rawtypes"})
  static scala.collection.Iterator<Tuple2<BlockId, InputStream>> streams(
      SluiceShuffleHandle<?, ?, ?> handle,
      scala.collection.Iterator blocks,
      int start,
      int end,
      TaskContext context,
      ShuffleReadMetricsReporter metrics,
      SluiceSerializerManager segments,
      EngineOp reduce,
      boolean batch) {
    List<Tuple2<BlockManagerId, scala.collection.Seq>> atService = new ArrayList<>();
    List<Tuple2<BlockManagerId, scala.collection.Seq>> kept = new ArrayList<>();
    while (blocks.hasNext()) {
      Tuple2<BlockManagerId, scala.collection.Seq> byAddress = (Tuple2) blocks.next();
      (ServiceStreams.isService(byAddress._1()) ? atService : kept).add(byAddress);
    }
    ServiceConf conf = ServiceConf.of(SparkEnv.get().conf());
    ServiceStreams s =
        new ServiceStreams(
            Daemons.of(conf),
            handle.shuffleId(),
            handle.assignment(),
            start,
            end,
            handle.dependency().partitioner().numPartitions(),
            ServiceStreams.winners(atService),
            (id, in) -> segments.wrapStream(id, in),
            SparkEnv.get().conf().getBoolean("spark.shuffle.detectCorrupt", true),
            metrics,
            conf.reducesAtDaemon(reduce) ? reduce : null);
    context.addTaskCompletionListener(
        (org.apache.spark.util.TaskCompletionListener) ctx -> s.close());
    if (kept.isEmpty()) {
      return s;
    }
    return SegmentFetch.chain(
        SegmentFetch.of(context, SegmentFetch.over((List) kept), segments, metrics, batch), s);
  }

  /**
   * The segments of partitions {@code start..end} of maps {@code startMap..endMap}, as the map
   * output tracker lists them ({@link #streams}), decoded into {@code operator} where it is not
   * null.
   */
  private static scala.collection.Iterator<Tuple2<BlockId, InputStream>> streams(
      SluiceShuffleHandle<?, ?, ?> handle,
      int startMap,
      int endMap,
      int start,
      int end,
      TaskContext context,
      ShuffleReadMetricsReporter metrics,
      ReduceOperator operator) {
    SparkEnv env = SparkEnv.get();
    return streams(
        handle,
        env.mapOutputTracker()
            .getMapSizesByExecutorId(handle.shuffleId(), startMap, endMap, start, end),
        start,
        end,
        context,
        metrics,
        new SluiceSerializerManager(env.serializer(), env.conf(), operator, metrics),
        operator != null ? handle.engineOp() : null,
        false);
  }

  /**
   * Feeds the segments of partitions {@code start..end} of maps {@code startMap..endMap} into a
   * native reduce operator (a sort's merge, an aggregate's final table): each segment's blocks are
   * decoded, verified, counted and merged as its stream is read to its end.
   */
  public static void feed(
      SluiceShuffleHandle<?, ?, ?> handle,
      int startMap,
      int endMap,
      int start,
      int end,
      TaskContext context,
      ShuffleReadMetricsReporter metrics,
      ReduceOperator operator) {
    scala.collection.Iterator<Tuple2<BlockId, InputStream>> streams =
        streams(handle, startMap, endMap, start, end, context, metrics, operator);
    byte[] sink = new byte[1];
    while (streams.hasNext()) {
      // A killed task (a speculative copy that lost, a cancelled job) feeds no more segments.
      context.killTaskIfInterrupted();
      Tuple2<BlockId, InputStream> next = streams.next();
      try (InputStream in = next._2()) {
        // A stream into an operator serves no bytes: it ends once every block was merged.
        if (in.read(sink) >= 0) {
          throw new IllegalStateException(
              "Sluice: segment " + next._1() + " served bytes instead of feeding its operator");
        }
      } catch (java.io.IOException e) {
        throw new java.io.UncheckedIOException(e);
      }
    }
    context.taskMetrics().mergeShuffleReadMetrics();
  }

  @Override
  @SuppressWarnings({"unchecked", "rawtypes"})
  public scala.collection.Iterator<Product2<K, C>> read() {
    scala.collection.Iterator<Tuple2<BlockId, InputStream>> streams =
        streams(
            handle,
            startMapIndex,
            endMapIndex,
            startPartition,
            endPartition,
            context,
            metrics,
            null);
    SerializerInstance ser = handle.dependency().serializer().newInstance();
    scala.collection.Iterator<Product2<K, C>> records =
        new scala.collection.AbstractIterator<Product2<K, C>>() {
          /** The records of the segment being read; null before the first. */
          private scala.collection.Iterator<Tuple2<Object, Object>> current;

          @Override
          public boolean hasNext() {
            while (current == null || !current.hasNext()) {
              if (!streams.hasNext()) {
                context.taskMetrics().mergeShuffleReadMetrics();
                return false;
              }
              Tuple2<BlockId, InputStream> next = streams.next();
              current = ser.deserializeStream(next._2()).asKeyValueIterator();
            }
            return true;
          }

          @Override
          public Product2<K, C> next() {
            if (!hasNext()) {
              throw new java.util.NoSuchElementException();
            }
            Product2<K, C> r = (Product2<K, C>) current.next();
            metrics.incRecordsRead(1);
            return r;
          }
        };
    return new InterruptibleIterator<>(context, records);
  }
}
