package dev.sluice.spark.shuffle;

import java.io.InputStream;
import java.util.Iterator;
import java.util.List;
import java.util.NoSuchElementException;
import org.apache.spark.SparkConf;
import org.apache.spark.SparkEnv;
import org.apache.spark.TaskContext;
import org.apache.spark.shuffle.ShuffleReadMetricsReporter;
import org.apache.spark.storage.BlockId;
import org.apache.spark.storage.BlockManager;
import org.apache.spark.storage.ShuffleBlockFetcherIterator;
import org.apache.spark.util.SystemClock;
import scala.Tuple2;

/**
 * A reduce task's segments fetched from the executors that wrote them: Spark's fetch iterator
 * with the settings Spark's own reader gives it, each fetched stream wrapped by {@link
 * SluiceSerializerManager} (decoded and verified block by block), released at the task's end.
 * Also the two small iterators a reader that reads some segments from elsewhere (the service's
 * daemons) needs to put them in one sequence, written in Java so that they are the same on Scala
 * 2.12 and 2.13.
 */
final class SegmentFetch {
  private SegmentFetch() {}

  private static org.apache.spark.internal.config.package$ config() {
    return org.apache.spark.internal.config.package$.MODULE$;
  }

  /**
   * The fetched segments of {@code blocks} (the map output tracker's answer: block manager ids and
   * their blocks), contiguous partitions fetched as one where {@code batch}.
   */
  @SuppressWarnings({"unchecked", "rawtypes"})
  static scala.collection.Iterator<Tuple2<BlockId, InputStream>> of(
      TaskContext context,
      scala.collection.Iterator blocks,
      SluiceSerializerManager segments,
      ShuffleReadMetricsReporter metrics,
      boolean batch) {
    SparkEnv env = SparkEnv.get();
    SparkConf conf = env.conf();
    BlockManager bm = env.blockManager();
    var c = config();
    ShuffleBlockFetcherIterator fetch =
        new ShuffleBlockFetcherIterator(
            context,
            bm.blockStoreClient(),
            bm,
            env.mapOutputTracker(),
            blocks,
            (id, s) -> segments.wrapStream(id, s),
            (Long) conf.get(c.REDUCER_MAX_SIZE_IN_FLIGHT()) * 1024 * 1024,
            (Integer) conf.get(c.REDUCER_MAX_REQS_IN_FLIGHT()),
            (Integer) conf.get(c.REDUCER_MAX_BLOCKS_IN_FLIGHT_PER_ADDRESS()),
            (Long) conf.get(c.MAX_REMOTE_BLOCK_SIZE_FETCH_TO_MEM()),
            (Integer) conf.get(c.SHUFFLE_MAX_ATTEMPTS_ON_NETTY_OOM()),
            (Boolean) conf.get(c.SHUFFLE_DETECT_CORRUPT()),
            (Boolean) conf.get(c.SHUFFLE_DETECT_CORRUPT_MEMORY()),
            (Boolean) conf.get(c.SHUFFLE_CHECKSUM_ENABLED()),
            (String) conf.get(c.SHUFFLE_CHECKSUM_ALGORITHM()),
            metrics,
            batch,
            new SystemClock());
    return (scala.collection.Iterator) fetch.toCompletionIterator();
  }

  /** A Scala iterator over a Java list. */
  static <T> scala.collection.Iterator<T> over(List<T> list) {
    Iterator<T> it = list.iterator();
    return new scala.collection.AbstractIterator<T>() {
      @Override
      public boolean hasNext() {
        return it.hasNext();
      }

      @Override
      public T next() {
        return it.next();
      }
    };
  }

  /** {@code first}'s elements, then {@code second}'s. */
  static <T> scala.collection.Iterator<T> chain(
      scala.collection.Iterator<T> first, scala.collection.Iterator<T> second) {
    return new scala.collection.AbstractIterator<T>() {
      @Override
      public boolean hasNext() {
        return first.hasNext() || second.hasNext();
      }

      @Override
      public T next() {
        if (first.hasNext()) {
          return first.next();
        }
        if (second.hasNext()) {
          return second.next();
        }
        throw new NoSuchElementException();
      }
    };
  }
}
