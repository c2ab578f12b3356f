package dev.sluice.spark.sort;

/**
 * The heap arrays one reduce task decodes Sluice blocks into, shared by all the segments it reads
 * one after another: one array for a block's encoded bytes, and two for decoded records, handed
 * out in turn. Taking turns keeps the records of the block before readable while the next block
 * decodes, so a row pointed at its bytes stays valid until its reader is asked for the next row,
 * even when asking whether there is one ({@code hasNext}) decodes a block: the same guarantee
 * Spark's row deserializer gives. Sharing the arrays across a task's segments spares an
 * allocation per fetched segment.
 *
 * <p>Not thread-safe: a reduce task reads its segments on its own thread.
 */
public final class DecodeBuffers {
  /** The smallest array handed out, in bytes (most blocks are larger than this). */
  public static final int MIN_BYTES = 64 << 10;

  private byte[] frame = new byte[MIN_BYTES];
  private final byte[][] records = {new byte[0], new byte[0]};
  private int turn;

  /**
   * The array for a block's encoded bytes, at least {@code bytes} long; its first {@code keep}
   * bytes are those of the array returned before (the block's header, read first).
   */
  public byte[] frame(int bytes, int keep) {
    if (frame.length < bytes) {
      byte[] bigger = new byte[bytes];
      System.arraycopy(frame, 0, bigger, 0, keep);
      frame = bigger;
    }
    return frame;
  }

  /** Bytes of the arrays held: the largest block read so far, and the records of two. */
  public long heldBytes() {
    return (long) frame.length + records[0].length + records[1].length;
  }

  /**
   * The array to decode the next block's records into, at least {@code bytes} long: not the one
   * returned by the call before, whose records a caller may still be reading.
   */
  public byte[] nextRecords(int bytes) {
    turn ^= 1;
    if (records[turn].length < bytes) {
      records[turn] = new byte[Math.max(bytes, MIN_BYTES)];
    }
    return records[turn];
  }
}
