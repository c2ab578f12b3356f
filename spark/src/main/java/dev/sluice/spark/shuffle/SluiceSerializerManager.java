package dev.sluice.spark.shuffle;

import dev.sluice.spark.sort.DecodeBuffers;
import java.io.IOException;
import java.io.InputStream;
import java.util.HashSet;
import java.util.Set;
import org.apache.spark.SparkConf;
import org.apache.spark.SparkEnv;
import org.apache.spark.TaskContext;
import org.apache.spark.serializer.Serializer;
import org.apache.spark.serializer.SerializerManager;
import org.apache.spark.shuffle.BaseShuffleHandle;
import org.apache.spark.shuffle.BlockStoreShuffleReader;
import org.apache.spark.shuffle.ShuffleReadMetricsReporter;
import org.apache.spark.shuffle.sort.SortShuffleManager;
import org.apache.spark.storage.BlockId;
import org.apache.spark.storage.ShuffleBlockBatchId;
import org.apache.spark.storage.ShuffleBlockId;

/**
 * Spark's serializer manager with one change, for the reader of a Sluice shuffle: a fetched
 * shuffle block's stream is decoded as Sluice blocks (verified, decompressed natively) instead
 * of being unwrapped with Spark's codec. Everything else is Spark's. For an offloaded operator
 * shuffle, the blocks go to the reading task's native aggregate.
 */
public final class SluiceSerializerManager extends SerializerManager {
  /** The native reduce operator of an operator shuffle's reader, or null. */
  private final ReduceOperator operator;
  /** The reading task's shuffle read metrics, where records fed to the operator are counted. */
  private final ShuffleReadMetricsReporter metrics;
  /** The reading task's decode buffers, shared by its segments. */
  private final DecodeBuffers buffers = new DecodeBuffers();
  /** The segment stream made last, and the block it reads. */
  private SluiceBlockInputStream last;

  /** The blocks whose streams went to {@link #operator}. */
  private final Set<BlockId> fed = new HashSet<>();

  private BlockId lastId;

  public SluiceSerializerManager(
      Serializer defaultSerializer,
      SparkConf conf,
      ReduceOperator operator,
      ShuffleReadMetricsReporter metrics) {
    super(defaultSerializer, conf);
    this.operator = operator;
    this.metrics = metrics;
  }

  @Override
  public InputStream wrapStream(BlockId blockId, InputStream s) {
    if (blockId instanceof ShuffleBlockId || blockId instanceof ShuffleBlockBatchId) {
      if (operator != null && !fed.add(blockId)) {
        // Spark's fetch iterator fetches a block again when reading its start into memory
        // (spark.shuffle.detectCorrupt.useExtraMemory) found it corrupt: that read went into the
        // operator, so feeding the block again would count its first records twice. The error
        // makes Spark report the block as a fetch failure instead (it was corrupt once).
        return refetched(blockId);
      }
      last = new SluiceBlockInputStream(s, blockId, operator, metrics, buffers);
      lastId = blockId;
      return last;
    }
    return super.wrapStream(blockId, s);
  }

  /** A stream of a block fed to the operator before, which fails to be read. */
  private static InputStream refetched(BlockId blockId) {
    return new InputStream() {
      @Override
      public int read() throws IOException {
        throw new IOException(
            "Sluice: " + blockId + " was fetched again after its blocks went into the task's"
                + " native operator (a corrupt block re-fetched); fed twice, its records would"
                + " count twice");
      }
    };
  }

  /**
   * The segment stream this manager made for {@code blockId}, which Spark's fetch iterator has
   * just handed out (wrapped in its own stream, which releases the fetched buffer on close). The
   * iterator wraps each block's stream as it hands the block out, so it is the last one made.
   *
   * @throws IllegalStateException when the last stream made is for another block
   */
  SluiceBlockInputStream opened(BlockId blockId) {
    if (last == null || !blockId.equals(lastId)) {
      throw new IllegalStateException(
          "Sluice: the fetch iterator handed out " + blockId + " but the last segment opened was "
              + lastId);
    }
    return last;
  }

  /**
   * Spark's reader over a Sluice shuffle's segments: Spark's fetch machinery, with each fetched
   * segment decoded as Sluice blocks ({@link SluiceSerializerManager}); into the native reduce
   * operator {@code operator} when it is not null (which accounts each block first).
   */
  @SuppressWarnings({"unchecked", "rawtypes"})
  public static <K, C> BlockStoreShuffleReader<K, C> fetchReader(
      SluiceShuffleHandle<K, ?, C> handle,
      int startMapIndex,
      int endMapIndex,
      int startPartition,
      int endPartition,
      TaskContext context,
      ShuffleReadMetricsReporter metrics,
      ReduceOperator operator) {
    SparkEnv env = SparkEnv.get();
    scala.collection.Iterator blocks =
        env.mapOutputTracker()
            .getMapSizesByExecutorId(
                handle.shuffleId(), startMapIndex, endMapIndex, startPartition, endPartition);
    return new BlockStoreShuffleReader<K, C>(
        (BaseShuffleHandle<K, ?, C>) handle,
        blocks,
        context,
        metrics,
        new SluiceSerializerManager(env.serializer(), env.conf(), operator, metrics),
        env.blockManager(),
        env.mapOutputTracker(),
        // Contiguous partitions of a map output in one fetch (adaptive execution's coalesced
        // reads), as Spark's own reader decides it; Spark's reader then checks that the
        // serializer relocates records and the codec concatenates. A native operator reads one
        // partition's blocks at a time, so it fetches partition by partition.
        operator == null
            && SortShuffleManager.canUseBatchFetch(startPartition, endPartition, context));
  }
}
