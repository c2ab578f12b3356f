package dev.sluice.spark.shuffle;

import dev.sluice.spark.sort.RowFraming;
import dev.sluice.spark.sort.RowSortKey;
import dev.sluice.spark.sort.SortedRowPartitioner;
import java.nio.ByteBuffer;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.unsafe.Platform;

/**
 * Spark SQL's shuffle records (an {@link UnsafeRow} per record, serialized by {@code
 * UnsafeRowSerializer}) written into the engine buffer without the serializer.
 *
 * <p>{@code UnsafeRowSerializer} writes a record as the row's size (a big-endian int) followed by
 * the row's bytes, and ignores the key (Spark SQL's exchange passes the partition id as the key,
 * already computed). Going through it costs, per record, a {@code DataOutputStream}, a {@code
 * BufferedOutputStream}, a flush into the writer's byte sink, and three copies of the row. This
 * class writes the same bytes straight into the engine buffer with one copy, so the reader and
 * the serializer's deserialization stream see exactly what the serializer would have written.
 *
 * <p>It is loaded only when the shuffle's serializer is {@code UnsafeRowSerializer}, so the
 * plugin does not need Spark SQL on the class path otherwise. A row whose bytes are not in a
 * {@code byte[]} (off-heap) is left to the serializer.
 */
public final class UnsafeRowFastPath {
  private UnsafeRowFastPath() {}

  /**
   * Writes {@code value} as one engine record for partition {@code partition}, counting its size
   * in {@code dataSize} (if not null) as the serializer would, or returns false (and writes
   * nothing) when it is not an on-heap {@link UnsafeRow}.
   */
  static boolean write(NativeMapOutput output, int partition, Object value, RowDataSize dataSize)
      throws java.io.IOException {
    if (!(value instanceof UnsafeRow row) || !(row.getBaseObject() instanceof byte[] bytes)) {
      return false;
    }
    int size = row.getSizeInBytes();
    if (dataSize != null) {
      dataSize.add(size);
    }
    long offset = row.getBaseOffset() - Platform.BYTE_ARRAY_OFFSET;
    int n = RowFraming.SIZE_BYTES + size;
    ByteBuffer b = output.startRecord(partition, 0, n);
    // The buffer is little-endian; the serializer's size is big-endian.
    b.putInt(Integer.reverseBytes(size));
    b.put(bytes, (int) offset, size);
    output.added();
    return true;
  }

  /**
   * Writes {@code value} (an {@link UnsafeRow}) as one engine record of a shuffle the engine sorts
   * by {@code key}: the row's encoded sort key after the partition id, which is the key's range
   * under {@code ranges}; the serializer's bytes as the value, its size counted in {@code
   * dataSize} (if not null) as the serializer would.
   */
  static void writeSorted(
      NativeMapOutput output,
      SortedRowPartitioner ranges,
      Object value,
      RowSortKey key,
      RowDataSize dataSize)
      throws java.io.IOException {
    if (!(value instanceof UnsafeRow row)) {
      throw new IllegalArgumentException(
          "a sorted row shuffle carries UnsafeRows, not " + value.getClass().getName());
    }
    byte[] k = key.encode(row);
    int size = row.getSizeInBytes();
    if (dataSize != null) {
      dataSize.add(size);
    }
    ByteBuffer b = output.startRecord(ranges.getPartition(k), k.length, RowFraming.SIZE_BYTES + size);
    b.put(k);
    b.putInt(Integer.reverseBytes(size));
    if (row.getBaseObject() instanceof byte[] bytes) {
      b.put(bytes, (int) (row.getBaseOffset() - Platform.BYTE_ARRAY_OFFSET), size);
    } else {
      b.put(row.getBytes());
    }
    output.added();
  }
}
