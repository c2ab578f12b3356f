package dev.sluice.spark;

import java.io.InputStream;
import org.apache.spark.SparkConf;
import org.apache.spark.serializer.Serializer;
import org.apache.spark.serializer.SerializerManager;
import org.apache.spark.storage.BlockId;
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

  SluiceSerializerManager(
      Serializer defaultSerializer, SparkConf conf, long aggregate, ReduceMemory memory) {
    super(defaultSerializer, conf);
    this.aggregate = aggregate;
    this.memory = memory;
  }

  @Override
  public InputStream wrapStream(BlockId blockId, InputStream s) {
    if (blockId instanceof ShuffleBlockId) {
      return new SluiceBlockInputStream(s, (ShuffleBlockId) blockId, aggregate, memory);
    }
    return super.wrapStream(blockId, s);
  }
}
