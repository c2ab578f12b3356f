package dev.sluice.spark;

import java.io.IOException;
import java.io.InputStream;
import org.apache.spark.storage.ShuffleBlockId;

/**
 * The records of one fetched partition segment: reads it block by block (a 36-byte header whose
 * lengths the native side checks first, then the block), has each block decoded and verified
 * natively, and serves the serialized records it carried, back to back. A corrupt, forged or
 * truncated block is an {@link IOException} naming the block and its offset in the segment;
 * Spark's fetch iterator turns it into a fetch failure, so the map output is recomputed.
 *
 * <p>For an offloaded operator shuffle the stream has a native reduce aggregate: each verified
 * block is merged into it instead, and the stream serves no bytes (it ends once the segment has
 * been consumed).
 */
final class SluiceBlockInputStream extends InputStream {
  /** Bytes of a block header. */
  static final int HEADER_BYTES = 36;

  private final InputStream in;
  private final int shuffle;
  private final long map;
  private final int reduce;
  /** The native reduce aggregate blocks are merged into, or 0 to serve the values. */
  private final long aggregate;
  /** Spark's memory for what the operator keeps, acquired block by block; or null. */
  private final ReduceMemory memory;

  private byte[] frame = new byte[64 << 10];
  private byte[] values = new byte[0];
  private int pos;
  private int limit;
  /** Offset of the next block in the segment. */
  private long offset;

  private boolean eof;

  SluiceBlockInputStream(
      InputStream in, ShuffleBlockId id, long aggregate, ReduceMemory memory) {
    this.in = in;
    this.aggregate = aggregate;
    this.memory = memory;
    this.shuffle = id.shuffleId();
    this.map = id.mapId();
    this.reduce = id.reduceId();
  }

  private String where() {
    return "shuffle_" + shuffle + "_" + map + "_" + reduce + " at byte " + offset;
  }

  /** Decodes the next block into {@code values}; false at the end of the segment. */
  private boolean nextBlock() throws IOException {
    if (eof) {
      return false;
    }
    int n = in.readNBytes(frame, 0, HEADER_BYTES);
    if (n == 0) {
      eof = true;
      return false;
    }
    if (n < HEADER_BYTES) {
      throw new IOException(
          "truncated Sluice block in " + where() + ": " + n + " of " + HEADER_BYTES
              + " header bytes");
    }
    long info = SluiceNative.frameInfo(frame, shuffle, map, reduce, offset);
    int frameLen = (int) (info & 0xffffffffL);
    int uncompressed = (int) (info >>> 32);
    if (frame.length < frameLen) {
      byte[] bigger = new byte[frameLen];
      System.arraycopy(frame, 0, bigger, 0, HEADER_BYTES);
      frame = bigger;
    }
    int body = frameLen - HEADER_BYTES;
    int got = in.readNBytes(frame, HEADER_BYTES, body);
    if (got < body) {
      throw new IOException(
          "truncated Sluice block in " + where() + ": " + (HEADER_BYTES + got) + " of "
              + frameLen + " bytes");
    }
    if (aggregate != 0) {
      if (memory != null) {
        memory.reserve(uncompressed);
      }
      SluiceNative.reduceFeed(aggregate, frame, frameLen, shuffle, map, reduce, offset);
      pos = 0;
      limit = 0;
    } else {
      if (values.length < uncompressed) {
        values = new byte[Math.max(uncompressed, 64 << 10)];
      }
      long r = SluiceNative.decodeValues(frame, frameLen, shuffle, map, reduce, offset, values);
      pos = 0;
      limit = (int) (r & 0xffffffffL);
    }
    offset += frameLen;
    SluiceMetrics.BLOCKS_DECODED.incrementAndGet();
    return true;
  }

  @Override
  public int read() throws IOException {
    while (pos == limit) {
      if (!nextBlock()) {
        return -1;
      }
    }
    return values[pos++] & 0xff;
  }

  @Override
  public int read(byte[] b, int off, int len) throws IOException {
    if (len == 0) {
      return 0;
    }
    while (pos == limit) {
      if (!nextBlock()) {
        return -1;
      }
    }
    int n = Math.min(len, limit - pos);
    System.arraycopy(values, pos, b, off, n);
    pos += n;
    return n;
  }

  @Override
  public int available() {
    return limit - pos;
  }

  @Override
  public void close() throws IOException {
    in.close();
  }
}
