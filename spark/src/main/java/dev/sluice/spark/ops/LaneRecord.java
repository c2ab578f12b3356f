package dev.sluice.spark.ops;

import java.nio.ByteBuffer;

/**
 * A record of a Spark SQL aggregate by several columns as its map tasks hand it to the engine:
 * the bytes of the grouping columns' {@code UnsafeRow} (binary equality is Spark's own
 * hash-aggregate key equality), the partition Spark SQL's hash partitioning of those columns gives
 * it (computed where the row was read), and the lanes' inputs. The map side hands over one object
 * for every record, refilled by each {@code next()} of its iterator, which {@link SluiceOpWriter}
 * copies into the engine's buffer before it asks for the next: no object per row. Results come
 * back with the key bytes alone.
 */
public interface LaneRecord {
  /** The record's reduce partition. */
  int partition();

  /** The key's length in bytes. */
  int keyBytes();

  /** Copies the key's bytes into {@code out} at its position. */
  void putKey(ByteBuffer out);

  /** Writes the lanes' inputs (the operator's value width) into {@code out} at its position. */
  void putValue(ByteBuffer out);
}
