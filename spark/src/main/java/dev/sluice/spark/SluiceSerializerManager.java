package dev.sluice.spark;

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
final class SluiceSerializerManager extends SerializerManager {
  /** The native reduce aggregate of an operator shuffle's reader, or 0. */
  private final long aggregate;
  /** The task's memory for a native sort's runs, or null. */
  private final ReduceMemory memory;
  /** The reading task's shuffle read metrics, where records fed to the operator are counted. */
  private final ShuffleReadMetricsReporter metrics;

  SluiceSerializerManager(
      Serializer defaultSerializer,
      SparkConf conf,
      long aggregate,
      ReduceMemory memory,
      ShuffleReadMetricsReporter metrics) {
    super(defaultSerializer, conf);
    this.aggregate = aggregate;
    this.memory = memory;
    this.metrics = metrics;
  }

  @Override
  public InputStream wrapStream(BlockId blockId, InputStream s) {
    if (blockId instanceof ShuffleBlockId || blockId instanceof ShuffleBlockBatchId) {
      return new SluiceBlockInputStream(s, blockId, aggregate, memory, metrics);
    }
    return super.wrapStream(blockId, s);
  }
}
