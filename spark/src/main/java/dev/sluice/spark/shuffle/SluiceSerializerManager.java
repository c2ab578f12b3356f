package dev.sluice.spark.shuffle;

import java.io.InputStream;
import org.apache.spark.SparkConf;
import org.apache.spark.serializer.Serializer;
import org.apache.spark.serializer.SerializerManager;
import org.apache.spark.shuffle.ShuffleReadMetricsReporter;
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
      last = new SluiceBlockInputStream(s, blockId, operator, metrics, buffers);
      lastId = blockId;
      return last;
    }
    return super.wrapStream(blockId, s);
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
}
