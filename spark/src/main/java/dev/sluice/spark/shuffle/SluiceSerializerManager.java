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
      return new SluiceBlockInputStream(s, blockId, operator, metrics);
    }
    return super.wrapStream(blockId, s);
  }
}
