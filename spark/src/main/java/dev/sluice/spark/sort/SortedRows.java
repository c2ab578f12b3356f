package dev.sluice.spark.sort;

import dev.sluice.spark.api.SluiceException;
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
 *
 * <p>The row sizes are bytes that crossed the shuffle: the engine checked each block's CRCs and
 * record framing, not the row serializer's framing inside a record's value. So each size is checked
 * against the buffer before a row is pointed at it (a row past the array would read whatever lies
 * after it; a row is a whole number of 8-byte words, at least its null bits and fixed slots), and a buffer must hold exactly the records it
 * says it holds; anything else is a {@link SluiceException} naming the buffer and the offset.
 */
public final class SortedRows extends scala.collection.AbstractIterator<Tuple2<Object, Object>> {
  /** Where the merged records come from: a native sort's result buffers, refilled in turn. */
  public interface Chunks {
    /** Refills {@link #buffer}; returns the records in it, 0 at the end. */
    int refill();

    /** The records {@link #refill} put between the buffer's position and its limit. */
    ByteBuffer buffer();
  }

  private final Chunks in;
  private final UnsafeRow row;
  /** The null bits and fixed slots every row has ({@link RowFraming#fixedBytes}). */
  private final int minRowBytes;

  private final Tuple2<Object, Object> pair;
  private final DecodeBuffers buffers = new DecodeBuffers();
  private byte[] chunk;
  private int pos;
  /** Bytes of records in {@link #chunk}. */
  private int end;

  private int left;
  /** Result buffers read so far, to name the one at fault. */
  private long chunks;

  public SortedRows(Chunks in, int numFields) {
    this.in = in;
    this.row = new UnsafeRow(numFields);
    this.minRowBytes = RowFraming.fixedBytes(numFields);
    this.pair = new Tuple2<>(null, row);
  }

  @Override
  public boolean hasNext() {
    if (left == 0) {
      if (chunk != null && pos != end) {
        throw notWhole((end - pos) + " bytes after its last record");
      }
      left = in.refill();
      if (left > 0) {
        ByteBuffer b = in.buffer();
        end = b.remaining();
        chunk = buffers.nextRecords(end);
        b.get(chunk, 0, end);
        pos = 0;
        chunks++;
      }
    }
    return left > 0;
  }

  @Override
  public Tuple2<Object, Object> next() {
    if (!hasNext()) {
      throw new java.util.NoSuchElementException();
    }
    int room = end - pos - RowFraming.SIZE_BYTES;
    if (room < 0) {
      throw notWhole(left + " of its records missing");
    }
    int size = RowFraming.sizeAt(chunk, pos);
    if (size < minRowBytes || size > room || size % RowFraming.ROW_ALIGN_BYTES != 0) {
      throw notWhole("a row of " + size + " bytes where " + room + " are left");
    }
    row.pointTo(chunk, Platform.BYTE_ARRAY_OFFSET + pos + RowFraming.SIZE_BYTES, size);
    pos += RowFraming.SIZE_BYTES + size;
    left--;
    return pair;
  }

  private SluiceException notWhole(String what) {
    return new SluiceException(
        "the native sort's result buffer "
            + chunks
            + " does not hold whole rows at byte "
            + pos
            + " of "
            + end
            + ": "
            + what);
  }
}
