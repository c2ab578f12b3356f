package dev.sluice.spark.shuffle;

import dev.sluice.spark.SluiceMetrics;
import dev.sluice.spark.jni.SluiceNative;
import java.io.IOException;
import java.io.InputStream;
import java.util.zip.CRC32C;
import org.apache.spark.shuffle.ShuffleReadMetricsReporter;
import org.apache.spark.storage.BlockId;
import org.apache.spark.storage.ShuffleBlockBatchId;
import org.apache.spark.storage.ShuffleBlockId;

/**
 * The records of one fetched partition segment (or of a batch of contiguous partitions' segments,
 * fetched as one): reads it block by block (a 36-byte header whose
 * lengths the native side checks first, then the block), has each block decoded and verified
 * natively, and serves the serialized records it carried, back to back. A corrupt, forged or
 * truncated block is an {@link IOException} naming the block and its offset in the segment;
 * Spark's fetch iterator turns it into a fetch failure, so the map output is recomputed.
 *
 * <p>Each non-empty partition's segment ends with a trailer that counts its records and blocks
 * and carries a CRC32C of their bytes; the stream checks each trailer natively, and that the
 * fetched bytes end right after one, so a segment cut at a block boundary, or a batch cut at a
 * partition boundary, is a fetch failure too (see {@code crates/sluice-engine/src/output/trailer.rs}).
 *
 * <p>For an offloaded operator shuffle the stream has a native reduce operator: each verified
 * block is merged into it instead, and the stream serves no bytes (it ends once the segment has
 * been consumed). Spark's reader counts the records it deserializes, none here, so the stream
 * counts the records it feeds to the operator in the task's read metrics, before Spark's reader
 * merges them into the task's.
 */
public final class SluiceBlockInputStream extends InputStream {
  /** Bytes of a block header, and of a segment trailer. */
  static final int HEADER_BYTES = 36;

  /**
   * The bit {@code frameInfo} sets for a segment trailer; the native side declares the same value
   * ({@code FRAME_TRAILER_FLAG} in {@code crates/sluice-engine/src/output/trailer.rs}), checked by a test.
   */
  static final long FRAME_TRAILER_FLAG = 1L << 62;

  private final InputStream in;
  private final int shuffle;
  private final long map;
  private final int reduce;
  /** One past the last partition of the segment (more than one for a batch fetch). */
  private final int reduceEnd;
  /** The native reduce operator blocks are merged into, or null to serve the values. */
  private final ReduceOperator operator;
  /** Where records fed to the operator are counted. */
  private final ShuffleReadMetricsReporter metrics;

  private byte[] frame = new byte[64 << 10];
  private byte[] values = new byte[0];
  private int pos;
  private int limit;
  /** Offset of the next block in the segment. */
  private long offset;

  private boolean eof;

  /** Records, blocks and the CRC32C of the blocks' bytes since the segment's last trailer. */
  private long segmentRecords;

  private int segmentBlocks;
  private final CRC32C segmentCrc = new CRC32C();

  /** The partition the next trailer must name; -1 for any (a batch's first). */
  private int expectedPartition;

  /** The last trailer's next non-empty partition; -1 before the first trailer. */
  private int lastNext = -1;

  SluiceBlockInputStream(
      InputStream in,
      BlockId id,
      ReduceOperator operator,
      ShuffleReadMetricsReporter metrics) {
    this.in = in;
    this.metrics = metrics;
    this.operator = operator;
    if (id instanceof ShuffleBlockBatchId batch) {
      // Contiguous partitions fetched as one segment (Spark's batch fetch): their segments lie
      // back to back in the data file, and Sluice blocks concatenate.
      if (operator != null) {
        throw new IllegalArgumentException("a native reduce operator reads one partition: " + id);
      }
      this.shuffle = batch.shuffleId();
      this.map = batch.mapId();
      this.reduce = batch.startReduceId();
      this.reduceEnd = batch.endReduceId();
    } else {
      ShuffleBlockId one = (ShuffleBlockId) id;
      this.shuffle = one.shuffleId();
      this.map = one.mapId();
      this.reduce = one.reduceId();
      this.reduceEnd = one.reduceId() + 1;
    }
    this.expectedPartition = reduceEnd == reduce + 1 ? reduce : -1;
  }

  private String where() {
    String name = "shuffle_" + shuffle + "_" + map + "_" + reduce;
    if (reduceEnd != reduce + 1) {
      name += "_" + reduceEnd;
    }
    return name + " at byte " + offset;
  }

  /**
   * Decodes the next block into {@code values} (or feeds it to the operator); false at the end of
   * the segment. A segment trailer is checked against what was counted since the last one and
   * skipped; the end of the stream is checked against the last trailer.
   */
  private boolean nextBlock() throws IOException {
    if (eof) {
      return false;
    }
    while (true) {
      int n = in.readNBytes(frame, 0, HEADER_BYTES);
      if (n == 0) {
        eof = true;
        // Throws when the segment was cut short (no trailer last, or one that says a
        // partition of the batch is still to come).
        SluiceNative.fetchEnd(shuffle, map, reduce, reduceEnd, offset, lastNext, segmentBlocks);
        return false;
      }
      if (n < HEADER_BYTES) {
        throw new IOException(
            "truncated Sluice block in " + where() + ": " + n + " of " + HEADER_BYTES
                + " header bytes");
      }
      long info = SluiceNative.frameInfo(frame, shuffle, map, reduce, reduceEnd, offset);
      if ((info & FRAME_TRAILER_FLAG) != 0) {
        lastNext =
            SluiceNative.segmentEnd(
                frame,
                shuffle,
                map,
                reduce,
                reduceEnd,
                offset,
                segmentRecords,
                segmentBlocks,
                (int) segmentCrc.getValue(),
                expectedPartition);
        expectedPartition = lastNext;
        segmentRecords = 0;
        segmentBlocks = 0;
        segmentCrc.reset();
        offset += HEADER_BYTES;
        continue;
      }
      readBlock((int) (info & 0xffffffffL), (int) (info >>> 32));
      return true;
    }
  }

  /** Reads the rest of the block whose header is in {@code frame}, and decodes it. */
  private void readBlock(int frameLen, int uncompressed) throws IOException {
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
    int records;
    if (operator != null) {
      records = operator.feed(frame, frameLen, uncompressed, shuffle, map, reduce, offset);
      metrics.incRecordsRead(records);
      pos = 0;
      limit = 0;
    } else {
      if (values.length < uncompressed) {
        values = new byte[Math.max(uncompressed, 64 << 10)];
      }
      long r =
          SluiceNative.decodeValues(
              frame, frameLen, shuffle, map, reduce, reduceEnd, offset, values);
      records = (int) (r >>> 32);
      pos = 0;
      limit = (int) (r & 0xffffffffL);
    }
    segmentCrc.update(frame, 0, frameLen);
    segmentRecords += records;
    segmentBlocks++;
    offset += frameLen;
    SluiceMetrics.BLOCKS_DECODED.incrementAndGet();
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
