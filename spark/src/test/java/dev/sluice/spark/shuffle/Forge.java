package dev.sluice.spark.shuffle;

import java.io.ByteArrayOutputStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.List;
import java.util.zip.CRC32C;

/**
 * Sluice blocks and segment trailers built byte by byte, as {@code docs/wire-format.md} lays them
 * out (variable layout, codec none), with valid CRCs: what a forger, or a writer with a bug,
 * produces. The tests change what the CRCs cannot catch and read the bytes back through the Java
 * decoders.
 */
final class Forge {
  static final int HEADER_BYTES = SluiceBlockInputStream.HEADER_BYTES;

  private Forge() {}

  /** A Spark SQL row shuffle's record value: the row's size, big-endian, then the row. */
  static byte[] row(byte[] bytes) {
    return ByteBuffer.allocate(4 + bytes.length).putInt(bytes.length).put(bytes).array();
  }

  /** A block of one record per value, each keyed by {@code partition}. */
  static byte[] block(int partition, List<byte[]> values) {
    int[] partitions = new int[values.size()];
    java.util.Arrays.fill(partitions, partition);
    return block(partitions, values, values.size());
  }

  /** A block whose header counts {@code records} records (which may not be the values'). */
  static byte[] block(int[] partitions, List<byte[]> values, int records) {
    ByteArrayOutputStream payload = new ByteArrayOutputStream();
    for (int i = 0; i < values.size(); i++) {
      byte[] v = values.get(i);
      ByteBuffer r = le(12 + v.length);
      r.putInt(4).putInt(v.length).putInt(partitions[i]).put(v);
      payload.writeBytes(r.array());
    }
    return block(payload.toByteArray(), records);
  }

  /** A block around {@code payload} as it is, counting {@code records} records. */
  static byte[] block(byte[] payload, int records) {
    ByteBuffer h = le(HEADER_BYTES + payload.length);
    h.put(new byte[] {'S', 'L', 'B', 'K', 1, 0, 0, 1});
    h.putShort((short) 0).putShort((short) 0).putInt(0);
    h.putInt(records).putInt(payload.length).putInt(payload.length);
    h.putInt(crc(payload, 0, payload.length));
    h.putInt(crc(h.array(), 0, 32));
    h.put(payload);
    return h.array();
  }

  /**
   * A header alone, variable layout, with a valid header CRC: {@code codec} (0 none, 1 lz4), its
   * record count, uncompressed and stored lengths and payload CRC as given.
   */
  static byte[] header(int codec, int records, int uncompressed, int stored, int payloadCrc) {
    return header(codec, 0, records, uncompressed, stored, payloadCrc);
  }

  /** As above, with the codec's level byte (zstd's level; 0 for the others). */
  static byte[] header(
      int codec, int level, int records, int uncompressed, int stored, int payloadCrc) {
    ByteBuffer h = le(HEADER_BYTES);
    h.put(new byte[] {'S', 'L', 'B', 'K', 1, (byte) codec, (byte) level, 1});
    h.putShort((short) 0).putShort((short) 0).putInt(0);
    h.putInt(records).putInt(uncompressed).putInt(stored).putInt(payloadCrc);
    h.putInt(crc(h.array(), 0, 32));
    return h.array();
  }

  /** {@code block} with its payload's byte {@code at} set to {@code value}, CRCs made valid. */
  static byte[] withPayloadByte(byte[] block, int at, byte value) {
    byte[] b = block.clone();
    b[HEADER_BYTES + at] = value;
    return resealed(b);
  }

  /** {@code block} with its header's record count set to {@code records}, CRC made valid. */
  static byte[] withRecordCount(byte[] block, int records) {
    byte[] b = block.clone();
    ByteBuffer.wrap(b).order(ByteOrder.LITTLE_ENDIAN).putInt(16, records);
    return resealed(b);
  }

  private static byte[] resealed(byte[] b) {
    ByteBuffer h = ByteBuffer.wrap(b).order(ByteOrder.LITTLE_ENDIAN);
    h.putInt(28, crc(b, HEADER_BYTES, b.length - HEADER_BYTES));
    h.putInt(32, crc(b, 0, 32));
    return b;
  }

  /** The trailer ending a segment of {@code partition} made of {@code blocks}. */
  static byte[] trailer(int partition, int next, List<byte[]> blocks) {
    CRC32C c = new CRC32C();
    long records = 0;
    for (byte[] b : blocks) {
      c.update(b);
      records += ByteBuffer.wrap(b).order(ByteOrder.LITTLE_ENDIAN).getInt(16);
    }
    return trailer(partition, next, records, blocks.size(), (int) c.getValue());
  }

  static byte[] trailer(int partition, int next, long records, int blocks, int crc) {
    ByteBuffer t = le(HEADER_BYTES);
    t.put(new byte[] {'S', 'L', 'S', 'E', 2, 0, 0, 0});
    t.putInt(partition).putInt(next).putLong(records).putInt(blocks).putInt(crc);
    t.putInt(crc(t.array(), 0, 32));
    return t.array();
  }

  /**
   * A map output's data: the segments of the partitions in {@code byPartition} (the blocks of
   * each; an empty list is an empty partition), back to back, each non-empty one ending with its
   * trailer; {@code offsets} gets each partition's start, and the end.
   */
  static byte[] output(List<List<byte[]>> byPartition, List<Integer> offsets) {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    int n = byPartition.size();
    for (int p = 0; p < n; p++) {
      offsets.add(out.size());
      List<byte[]> blocks = byPartition.get(p);
      if (blocks.isEmpty()) {
        continue;
      }
      int next = p + 1;
      while (next < n && byPartition.get(next).isEmpty()) {
        next++;
      }
      blocks.forEach(out::writeBytes);
      out.writeBytes(trailer(p, next, blocks));
    }
    offsets.add(out.size());
    return out.toByteArray();
  }

  static List<byte[]> list(byte[]... items) {
    return new ArrayList<>(List.of(items));
  }

  private static ByteBuffer le(int n) {
    return ByteBuffer.allocate(n).order(ByteOrder.LITTLE_ENDIAN);
  }

  static int crc(byte[] b, int off, int len) {
    CRC32C c = new CRC32C();
    c.update(b, off, len);
    return (int) c.getValue();
  }
}
