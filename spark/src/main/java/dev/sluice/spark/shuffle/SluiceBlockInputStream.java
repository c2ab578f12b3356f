package dev.sluice.spark.shuffle;

import dev.sluice.spark.jni.SluiceNative;
import dev.sluice.spark.metrics.SluiceMetrics;
import dev.sluice.spark.sort.DecodeBuffers;
import dev.sluice.spark.sort.RowFraming;
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
 * partition boundary, is a fetch failure too (see {@code
 * crates/sluice-engine/src/output/trailer.rs}).
 *
 * <p>For an offloaded operator shuffle the stream has a native reduce operator: each verified
 * block is merged into it instead, and the stream serves no bytes (it ends once the segment has
 * been consumed). Spark's reader counts the records it deserializes, none here, so the stream
 * counts the records it feeds to the operator in the task's read metrics, before Spark's reader
 * merges them into the task's.
 *
 * <p>A Spark SQL row shuffle's reader ({@link RowShuffleReader}) does not read the stream as
 * bytes: it asks for one row at a time ({@link #advanceRow}) and points its row at the row's bytes
 * in the decoded block, which must hold exactly the records the block says it holds, each whole.
 */
public final class SluiceBlockInputStream extends InputStream {
  /** Bytes of a block header, and of a segment trailer. */
  static final int HEADER_BYTES = 36;

  /** Where a block header holds its stored payload's CRC32C, little-endian. */
  static final int PAYLOAD_CRC_AT = 28;

  /**
   * A block whose header claims more uncompressed bytes than this has its payload's CRC32C checked
   * here before the array to decode it into is made (the native decoder checks it again): a forged
   * or torn header alone cannot have the task allocate up to the record limit. Blocks this large
   * hold large records only; the check costs a pass over their stored bytes.
   */
  static final int CHECKED_ALLOCATION_BYTES = 8 << 20;

  /**
   * The frame grows by at most this, or twice what has arrived, before the bytes of a block's body
   * are seen: a header whose stored length runs past the stream's end fails having allocated at
   * most about twice what came.
   */
  static final int BODY_STEP_BYTES = 4 << 20;

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

  /** Where blocks are read and decoded: the reading task's, shared by its segments. */
  private final DecodeBuffers buffers;

  private byte[] frame;
  private byte[] values = new byte[0];
  private int pos;
  private int limit;
  /** Offset of the next block in the segment. */
  private long offset;

  /** Offset of the block whose records are in {@code values}. */
  private long blockOffset;

  /** Records of that block not yet served as rows ({@link #advanceRow}). */
  private int blockRowsLeft;

  /** The row {@link #advanceRow} found: its offset in {@link #rowBytes}. */
  private int rowOffset;

  /** Whether bytes were served through {@link #read}: rows cannot be served after that. */
  private boolean servedBytes;

  /** A failure to raise from the next read, set by {@link #raiseOnRead}. */
  private IOException pending;

  private boolean eof;

  /** Records, blocks and the CRC32C of the blocks' bytes since the segment's last trailer. */
  private long segmentRecords;

  private int segmentBlocks;
  private final CRC32C segmentCrc = new CRC32C();

  /**
   * The partition the next trailer must name: the segment's first partition, then each trailer's
   * next one. A batch's first partition is never empty (Spark fetches only the partitions its
   * map statuses say are not, and a batch starts at one of them), so a batch whose first segment
   * is missing, as when an index offset was shifted to a later partition's start, is found.
   */
  private int expectedPartition;

  /** The last trailer's next non-empty partition; -1 before the first trailer. */
  private int lastNext = -1;

  SluiceBlockInputStream(
      InputStream in,
      BlockId id,
      ReduceOperator operator,
      ShuffleReadMetricsReporter metrics,
      DecodeBuffers buffers) {
    this.in = in;
    this.buffers = buffers;
    this.frame = buffers.frame(HEADER_BYTES, 0);
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
    this.expectedPartition = reduce;
  }

  /** The segment's block name, as Spark names it. */
  private String segment() {
    String name = "shuffle_" + shuffle + "_" + map + "_" + reduce;
    if (reduceEnd != reduce + 1) {
      name += "_" + reduceEnd;
    }
    return name;
  }

  private String where() {
    return segment() + " at byte " + offset;
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
      if ((info & SluiceNative.FRAME_TRAILER_FLAG) != 0) {
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
    readBody(frameLen);
    int records;
    if (operator != null) {
      records = operator.feed(frame, frameLen, uncompressed, shuffle, map, reduce, offset);
      metrics.incRecordsRead(records);
      pos = 0;
      limit = 0;
    } else {
      if (uncompressed > CHECKED_ALLOCATION_BYTES) {
        checkPayload(frameLen);
      }
      values = buffers.nextRecords(uncompressed);
      long r =
          SluiceNative.decodeValues(
              frame, frameLen, shuffle, map, reduce, reduceEnd, offset, values);
      records = (int) (r >>> 32);
      pos = 0;
      limit = (int) (r & 0xffffffffL);
      blockRowsLeft = records;
    }
    segmentCrc.update(frame, 0, frameLen);
    segmentRecords += records;
    segmentBlocks++;
    blockOffset = offset;
    offset += frameLen;
    SluiceMetrics.BLOCKS_DECODED.incrementAndGet();
  }

  /**
   * Reads the body of the block whose header is in {@code frame}, {@code frameLen} bytes in all,
   * growing the frame as its bytes arrive ({@link #BODY_STEP_BYTES}), not to what the header says
   * before they do.
   */
  private void readBody(int frameLen) throws IOException {
    int have = HEADER_BYTES;
    while (have < frameLen) {
      int want =
          frame.length >= frameLen
              ? frameLen
              : (int) Math.min(frameLen, Math.max(2L * have, BODY_STEP_BYTES));
      frame = buffers.frame(want, have);
      have += in.readNBytes(frame, have, want - have);
      if (have < want) {
        throw new IOException(
            "truncated Sluice block in " + where() + ": " + have + " of " + frameLen + " bytes");
      }
    }
  }

  /** Throws unless the payload of the block in {@code frame} matches its header's CRC32C. */
  private void checkPayload(int frameLen) throws IOException {
    java.util.zip.CRC32C c = new java.util.zip.CRC32C();
    c.update(frame, HEADER_BYTES, frameLen - HEADER_BYTES);
    int stored =
        java.nio.ByteBuffer.wrap(frame)
            .order(java.nio.ByteOrder.LITTLE_ENDIAN)
            .getInt(PAYLOAD_CRC_AT);
    if ((int) c.getValue() != stored) {
      throw new IOException(
          "Sluice block in "
              + where()
              + ": block payload checksum mismatch: stored "
              + String.format("%#010x", stored)
              + ", computed "
              + String.format("%#010x", (int) c.getValue()));
    }
  }

  /**
   * Finds the next record of a Spark SQL row shuffle, framed as Spark's row serializer frames it
   * (the row's size as a big-endian int, then the row): returns the row's size, its bytes at
   * {@link #rowOffset()} in {@link #rowBytes()}, or -1 at the end of the segment. The bytes stay
   * where they are until the call after next (see {@link DecodeBuffers}).
   *
   * @param minRowBytes the smallest size a row of the shuffle can have: its null bits and one
   *     8-byte slot per field ({@link RowFraming#fixedBytes}); a smaller one would have Spark read
   *     its fields from the next row's bytes or past the array
   * @throws IOException when a block's records are not whole rows: a size that runs past the
   *     block's bytes, is below {@code minRowBytes} or is not a whole number of 8-byte words, a
   *     block with bytes after its
   *     last record, with no records, or with fewer
   *     rows than records (the
   *     writer puts each record whole in one block, and the block's checksum held, so this is a
   *     writer's fault or a forged block); or when the segment is corrupt, as for {@link #read}
   */
  int advanceRow(int minRowBytes) throws IOException {
    if (servedBytes || operator != null) {
      throw new IllegalStateException("rows asked of a stream read as bytes: " + where());
    }
    while (pos == limit) {
      if (blockRowsLeft != 0) {
        throw rowError(blockRowsLeft + " of its records missing");
      }
      if (!nextBlock()) {
        return -1;
      }
      if (blockRowsLeft == 0) {
        // The writer never writes a block of no records; decoding past one would take the
        // array whose rows the caller may still hold (DecodeBuffers hands out two in turn).
        throw rowError("no records");
      }
    }
    int left = limit - pos;
    if (blockRowsLeft == 0) {
      throw rowError(left + " bytes after its last record");
    }
    if (left < RowFraming.SIZE_BYTES) {
      throw rowError("a row size cut after " + left + " bytes");
    }
    int size = RowFraming.sizeAt(values, pos);
    if (size < minRowBytes
        || size > left - RowFraming.SIZE_BYTES
        || size % RowFraming.ROW_ALIGN_BYTES != 0) {
      throw rowError(
          "a row of " + size + " bytes at byte " + pos + " of its " + limit + " decoded bytes");
    }
    rowOffset = pos + RowFraming.SIZE_BYTES;
    pos = rowOffset + size;
    blockRowsLeft--;
    return size;
  }

  /** The decoded bytes of the row {@link #advanceRow} found. */
  byte[] rowBytes() {
    return values;
  }

  /** The offset of that row's bytes in {@link #rowBytes}. */
  int rowOffset() {
    return rowOffset;
  }

  private IOException rowError(String what) {
    return new IOException(
        "Sluice block at byte " + blockOffset + " of " + segment() + " does not hold whole rows: "
            + what);
  }

  /**
   * Makes the next read throw {@code e}: a failure found while serving rows is raised through the
   * stream Spark's fetch iterator wrapped around this one, which turns it into a fetch failure
   * exactly as for a failure while reading bytes.
   */
  void raiseOnRead(IOException e) {
    pending = e;
  }

  private void servingBytes() throws IOException {
    if (pending != null) {
      IOException e = pending;
      pending = null;
      throw e;
    }
    servedBytes = true;
  }

  @Override
  public int read() throws IOException {
    servingBytes();
    while (pos == limit) {
      if (!nextBlock()) {
        return -1;
      }
    }
    return values[pos++] & 0xff;
  }

  @Override
  public int read(byte[] b, int off, int len) throws IOException {
    servingBytes();
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
