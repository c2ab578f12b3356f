package dev.sluice.spark.sort;

import dev.sluice.spark.api.BytesOrdering;
import org.apache.spark.Partitioner;

/**
 * The partitioner of a Spark SQL sort that Sluice runs ({@code dev.sluice.spark.sql}): Spark's
 * {@link org.apache.spark.RangePartitioner}, sampled over the rows' encoded sort keys ({@link
 * RowSortKey}) and comparing them as bytes ({@link BytesOrdering}), which orders them as Spark SQL
 * orders the rows. The map writer encodes each row's key once and uses it both to pick the range
 * and as the engine's sort key, instead of Spark's per-row key projection and the generated
 * comparisons of its range search. Its keys are the encoded keys; the shuffle's records carry no
 * key of their own.
 */
public final class SortedRowPartitioner extends Partitioner {
  private static final long serialVersionUID = 1L;

  private final Partitioner ranges;

  /** {@code ranges} partitions encoded keys ({@code byte[]}) in {@link BytesOrdering}. */
  public SortedRowPartitioner(Partitioner ranges) {
    this.ranges = ranges;
  }

  @Override
  public int numPartitions() {
    return ranges.numPartitions();
  }

  @Override
  public int getPartition(Object encodedKey) {
    if (!(encodedKey instanceof byte[])) {
      throw new IllegalArgumentException("a sorted row shuffle partitions encoded keys");
    }
    return ranges.getPartition(encodedKey);
  }
}
