package dev.sluice.spark.sort;

import dev.sluice.spark.ops.SluiceOpReader;
import dev.sluice.spark.shuffle.DecodeBuffers;
import dev.sluice.spark.shuffle.UnsafeRowFastPath;
import java.nio.ByteBuffer;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.unsafe.Platform;
import scala.Tuple2;

/**
 * A native sort's Spark SQL rows, in key order, straight from the merge's result buffers: each
 * buffer holds whole records in the row serializer's format (the row's size, big-endian, then the
 * row), is copied once into a heap array, and each row is pointed at its bytes there. This skips
 * what the row serializer's deserialization stream costs per row (a buffered stream read byte by
 * byte for the size, and a copy of the row). As with that stream, the row object is reused: it
 * is valid until the next call to {@link #next}; {@link #hasNext} refills into the other of two
 * arrays ({@link DecodeBuffers}), so it leaves the row's bytes as they are.
 */
public final class SortedRows extends scala.collection.AbstractIterator<Tuple2<Object, Object>> {
  private final SluiceOpReader.Native in;
  private final UnsafeRow row;
  private final Tuple2<Object, Object> pair;
  private final DecodeBuffers buffers = new DecodeBuffers();
  private byte[] chunk;
  private int pos;
  private int left;

  public SortedRows(SluiceOpReader.Native in, int numFields) {
    this.in = in;
    this.row = new UnsafeRow(numFields);
    this.pair = new Tuple2<>(null, row);
  }

  @Override
  public boolean hasNext() {
    if (left == 0) {
      left = in.refill();
      if (left > 0) {
        ByteBuffer b = in.buf;
        int n = b.remaining();
        chunk = buffers.nextRecords(n);
        b.get(chunk, 0, n);
        pos = 0;
      }
    }
    return left > 0;
  }

  @Override
  public Tuple2<Object, Object> next() {
    if (!hasNext()) {
      throw new java.util.NoSuchElementException();
    }
    int size = UnsafeRowFastPath.sizeAt(chunk, pos);
    row.pointTo(chunk, Platform.BYTE_ARRAY_OFFSET + pos + UnsafeRowFastPath.SIZE_BYTES, size);
    pos += UnsafeRowFastPath.SIZE_BYTES + size;
    left--;
    return pair;
  }
}
