package dev.sluice.spark.sort;

import java.io.Serializable;
import org.apache.spark.serializer.Serializer;
import org.apache.spark.serializer.SerializerInstance;

/**
 * The serializer of a Spark SQL exchange that Sluice sorts ({@code dev.sluice.spark.sql}): Spark
 * SQL's row serializer, plus the {@link RowSortKey} that {@link
 * SluiceShuffleManager#registerShuffle} reads to give the shuffle to the engine's sort. Records are
 * serialized exactly as the row serializer would (the map side writes its bytes through {@link
 * dev.sluice.spark.shuffle.UnsafeRowFastPath}, the reduce side reads them back with it), so
 * anything else that meets this serializer sees Spark SQL's own format.
 */
public final class SortedRowSerializer extends Serializer implements Serializable {
  private static final long serialVersionUID = 1L;

  /** Spark SQL's {@code UnsafeRowSerializer} for the exchange's rows. */
  private final Serializer rows;

  public final RowSortKey key;
  /** Columns of the rows. */
  public final int numFields;

  /** Spark SQL's row serializer inside, which carries the exchange's "data size" metric. */
  public Serializer rowSerializer() {
    return rows;
  }

  public SortedRowSerializer(Serializer rows, int numFields, RowSortKey key) {
    if (!RowFraming.SERIALIZER_CLASS.equals(rows.getClass().getName())) {
      throw new IllegalArgumentException(
          "a sorted row shuffle serializes with " + RowFraming.SERIALIZER_CLASS);
    }
    this.rows = rows;
    this.numFields = numFields;
    this.key = key;
  }

  @Override
  public SerializerInstance newInstance() {
    return rows.newInstance();
  }

  @Override
  public boolean supportsRelocationOfSerializedObjects() {
    return rows.supportsRelocationOfSerializedObjects();
  }
}
