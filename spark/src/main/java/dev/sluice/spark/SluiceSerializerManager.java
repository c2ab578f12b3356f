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

  SluiceSerializerManager(Serializer defaultSerializer, SparkConf conf, long aggregate) {
    super(defaultSerializer, conf);
    this.aggregate = aggregate;
  }

  @Override
  public InputStream wrapStream(BlockId blockId, InputStream s) {
    if (blockId instanceof ShuffleBlockId) {
      return new SluiceBlockInputStream(s, (ShuffleBlockId) blockId, aggregate);
    }
    return super.wrapStream(blockId, s);
  }
}
