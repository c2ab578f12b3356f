package dev.sluice.spark.shuffle;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import dev.sluice.spark.sort.DecodeBuffers;
import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import org.apache.spark.storage.BlockId;
import org.apache.spark.storage.ShuffleBlockBatchId;
import org.apache.spark.storage.ShuffleBlockId;
import org.junit.jupiter.api.Test;

/**
 * The Java decoder of fetched Spark SQL row segments ({@link SluiceBlockInputStream#advanceRow})
 * on bytes that pass every CRC but were forged, or written by a writer with a bug: it serves
 * exactly the rows written or fails with an {@link IOException} (which Spark's fetch iterator
 * turns into a fetch failure), never reads past an array, never moves a row the caller holds, and
 * never serves a batch short.
 */
class ForgedSegmentTest {
  private static final int SHUFFLE = 0;
  private static final long MAP = 7;

  /** What reading a segment gave: copies of its rows, and the failure it ended with, if any. */
  record Read(List<byte[]> rows, IOException failure) {}

  /**
   * Reads every row of {@code bytes} as a reduce task does, checking on the way that each row
   * lies inside its array and that the row served before is untouched when the next is found.
   */
  static Read read(byte[] bytes, BlockId id) {
    return read(bytes, id, 0);
  }

  /** {@link #read(byte[], BlockId)} of rows at least {@code minRowBytes} long. */
  static Read read(byte[] bytes, BlockId id, int minRowBytes) {
    SluiceBlockInputStream in =
        new SluiceBlockInputStream(
            new ByteArrayInputStream(bytes), id, null, null, new DecodeBuffers());
    List<byte[]> rows = new ArrayList<>();
    byte[] held = null;
    int heldAt = 0;
    IOException failure = null;
    while (true) {
      int size;
      try {
        size = in.advanceRow(minRowBytes);
      } catch (IOException e) {
        failure = e;
        size = -1;
      }
      if (held != null) {
        byte[] was = rows.get(rows.size() - 1);
        assertArrayEquals(
            was,
            Arrays.copyOfRange(held, heldAt, heldAt + was.length),
            "the row the caller holds moved while the next was found");
      }
      if (size < 0) {
        return new Read(rows, failure);
      }
      held = in.rowBytes();
      heldAt = in.rowOffset();
      assertTrue(
          heldAt >= 0 && size >= 0 && (long) heldAt + size <= held.length,
          "row of " + size + " bytes at " + heldAt + " in a " + held.length + "-byte array");
      rows.add(Arrays.copyOfRange(held, heldAt, heldAt + size));
    }
  }

  static BlockId id(int start, int end) {
    return end == start + 1
        ? new ShuffleBlockId(SHUFFLE, MAP, start)
        : new ShuffleBlockBatchId(SHUFFLE, MAP, start, end);
  }

  /** A row's bytes: {@code s}, padded with zeros to whole 8-byte words as a row is. */
  private static byte[] bytes(String s) {
    byte[] b = s.getBytes(java.nio.charset.StandardCharsets.UTF_8);
    return Arrays.copyOf(b, (b.length + 7) / 8 * 8);
  }

  private static void assertRows(List<String> want, Read got) {
    assertNull(got.failure(), () -> "unexpected failure: " + got.failure());
    assertEquals(
        want.stream().map(w -> Arrays.toString(bytes(w))).toList(),
        got.rows().stream().map(Arrays::toString).toList());
  }

  private static IOException assertFails(Read got, String says) {
    assertNotNull(got.failure(), "read " + got.rows().size() + " rows and no failure");
    String msg = got.failure().getMessage();
    assertTrue(msg.contains(says), msg);
    return got.failure();
  }

  @Test
  void aSegmentAndABatchReadBackWhole() {
    List<List<byte[]>> parts = new ArrayList<>();
    parts.add(List.of());
    parts.add(List.of(Forge.block(1, List.of(Forge.row(bytes("a")), Forge.row(bytes("bb"))))));
    parts.add(List.of());
    parts.add(
        List.of(
            Forge.block(3, List.of(Forge.row(bytes("ccc")))),
            Forge.block(3, List.of(Forge.row(bytes("")), Forge.row(bytes("d"))))));
    List<Integer> at = new ArrayList<>();
    byte[] out = Forge.output(parts, at);
    assertRows(List.of("a", "bb"), read(Arrays.copyOfRange(out, at.get(1), at.get(2)), id(1, 2)));
    assertRows(
        List.of("a", "bb", "ccc", "", "d"),
        read(Arrays.copyOfRange(out, at.get(1), at.get(4)), id(1, 4)));
  }

  @Test
  void aBlockLargerThanTheCriticalDecodeLimitReadsBackWhole() {
    // A block of more than 4 MiB (a large row) is decoded with its bytes copied in and out of the
    // JVM, not in critical sections that would hold off the garbage collector while it inflates;
    // the rows come out the same, around a small block decoded in place.
    byte[] big = new byte[6 << 20];
    for (int i = 0; i < big.length; i++) {
      big[i] = (byte) (i * 31 + 7);
    }
    List<List<byte[]>> parts = new ArrayList<>();
    parts.add(List.of());
    parts.add(
        List.of(
            Forge.block(1, List.of(Forge.row(bytes("a")))),
            Forge.block(1, List.of(Forge.row(big), Forge.row(bytes("bb")))),
            Forge.block(1, List.of(Forge.row(bytes("ccc"))))));
    List<Integer> at = new ArrayList<>();
    byte[] out = Forge.output(parts, at);
    Read got = read(Arrays.copyOfRange(out, at.get(1), out.length), id(1, 2));
    assertNull(got.failure(), () -> "unexpected failure: " + got.failure());
    assertEquals(4, got.rows().size());
    assertArrayEquals(bytes("a"), got.rows().get(0));
    assertArrayEquals(big, got.rows().get(1));
    assertArrayEquals(bytes("bb"), got.rows().get(2));
    assertArrayEquals(bytes("ccc"), got.rows().get(3));
  }

  /** Reads {@code bytes} as one segment with {@code buffers}; the failure it must end with. */
  private static IOException readFails(byte[] bytes, DecodeBuffers buffers, String says) {
    SluiceBlockInputStream in =
        new SluiceBlockInputStream(new ByteArrayInputStream(bytes), id(1, 2), null, null, buffers);
    try {
      int size = in.advanceRow(0);
      fail("a row of " + size + " bytes");
    } catch (IOException e) {
      assertTrue(e.getMessage().contains(says), e.getMessage());
      return e;
    }
    return null;
  }

  @Test
  void aHeaderClaimingMoreBytesThanArriveAllocatesAboutWhatArrived() {
    // A header with valid CRC whose stored (and uncompressed) length is 600 MiB, then 1 KiB of
    // body and the stream's end: the read fails as truncated with the frame grown by one step,
    // not to 600 MiB first.
    int claimed = 600 << 20;
    byte[] bytes = new byte[Forge.HEADER_BYTES + 1024];
    System.arraycopy(Forge.header(0, 1, claimed, claimed, 0), 0, bytes, 0, Forge.HEADER_BYTES);
    DecodeBuffers buffers = new DecodeBuffers();
    readFails(bytes, buffers, "truncated Sluice block");
    assertTrue(
        buffers.heldBytes() <= SluiceBlockInputStream.BODY_STEP_BYTES,
        buffers.heldBytes() + " bytes held for 1 KiB that arrived");
  }

  @Test
  void aPayloadFailingItsCrcIsRefusedBeforeItsRecordsArrayIsMade() {
    // An lz4 block of 64 KiB stored claiming 15 MiB uncompressed (within lz4's 255 bytes per
    // stored byte), whose payload does not match its CRC: refused as corrupt before the 15 MiB
    // array to decode into is made (the native decoder would refuse it too, after).
    int stored = 64 << 10;
    byte[] bytes = new byte[Forge.HEADER_BYTES + stored];
    System.arraycopy(Forge.header(1, 1, 15 << 20, stored, 12345), 0, bytes, 0, Forge.HEADER_BYTES);
    DecodeBuffers buffers = new DecodeBuffers();
    readFails(bytes, buffers, "block payload checksum mismatch");
    assertTrue(buffers.heldBytes() < 1 << 20, buffers.heldBytes() + " bytes held");
  }

  @Test
  void aClaimItsStoredBytesCannotInflateToIsRefusedWithBothCrcsValid() {
    // A forger makes both CRCs valid: 4 KiB of lz4 (or zstd) claiming 700 MiB. No codec inflates
    // 4 KiB that far (lz4 at most 255 bytes per stored byte, zstd 32,768), so the header is
    // refused before the 700 MiB array to decode into is made.
    int stored = 4096;
    for (int[] codec : new int[][] {{1, 0}, {2, 3}}) { // lz4; zstd at level 3
      byte[] bytes = new byte[Forge.HEADER_BYTES + stored];
      int crc = Forge.crc(bytes, Forge.HEADER_BYTES, stored);
      byte[] header = Forge.header(codec[0], codec[1], 1, 700 << 20, stored, crc);
      System.arraycopy(header, 0, bytes, 0, Forge.HEADER_BYTES);
      DecodeBuffers buffers = new DecodeBuffers();
      readFails(bytes, buffers, "cannot inflate");
      assertTrue(buffers.heldBytes() < 1 << 20, buffers.heldBytes() + " bytes held");
    }
  }

  @Test
  void aRowSmallerThanItsFixedSlotsIsRefused() {
    // Rows of two fields have 8 bytes of null bits and two 8-byte slots (RowFraming.fixedBytes(2),
    // checked against rows Spark writes in SortedRowsSqlRowsTest): a 16-byte row would have Spark
    // read its second field from the next row.
    int min = 24;
    byte[] whole = new byte[24];
    List<Integer> at = new ArrayList<>();
    byte[] out =
        Forge.output(
            List.of(List.of(Forge.block(0, List.of(Forge.row(whole), Forge.row(new byte[16]))))),
            at);
    Read got = read(Arrays.copyOfRange(out, at.get(0), at.get(1)), id(0, 1), min);
    assertFails(got, "a row of 16 bytes");
    assertEquals(1, got.rows().size());
  }

  @Test
  void aBlockOfNoRecordsIsRefusedAndTheHeldRowStays() {
    // Two rows, a block of none (the writer never writes one), one row: finding the third row
    // decoded two blocks, the second into the array that held the second row.
    List<byte[]> blocks =
        Forge.list(
            Forge.block(2, List.of(Forge.row(bytes("first")), Forge.row(bytes("second")))),
            Forge.block(2, List.of()),
            Forge.block(2, List.of(Forge.row(bytes("third-one")))));
    List<Integer> at = new ArrayList<>();
    byte[] out = Forge.output(List.of(List.of(), List.of(), blocks), at);
    Read got = read(Arrays.copyOfRange(out, at.get(2), at.get(3)), id(2, 3));
    assertFails(got, "no records");
    assertEquals(2, got.rows().size());
  }

  @Test
  void aBatchMissingItsFirstSegmentIsRefused() {
    // Partitions 3, 4 and 5 fetched as one batch, served from partition 4's start (an index
    // offset shifted by one segment): each trailer still holds, partition 3's rows are missing.
    List<List<byte[]>> parts = new ArrayList<>();
    for (int p = 0; p < 6; p++) {
      parts.add(p < 3 ? List.of() : List.of(Forge.block(p, List.of(Forge.row(bytes("p" + p))))));
    }
    List<Integer> at = new ArrayList<>();
    byte[] out = Forge.output(parts, at);
    assertRows(List.of("p3", "p4", "p5"), read(Arrays.copyOfRange(out, at.get(3), at.get(6)), id(3, 6)));
    // Partition 4's row is served before its trailer is read; the failure then fails the task,
    // and with it whatever the task made of the rows.
    assertFails(read(Arrays.copyOfRange(out, at.get(4), at.get(6)), id(3, 6)), "partition 3 was due");
  }

  @Test
  void aTrailerNamingAPartitionNoIntCanHoldIsAFetchFault() {
    // A trailer's next partition is a u32; past 2^31 it names nothing the reader can: refused as
    // bad bytes (an IOException, so a fetch failure), not as a bad argument failing the task.
    List<byte[]> blocks = Forge.list(Forge.block(0, List.of(Forge.row(bytes("x")))));
    byte[] data = blocks.get(0);
    byte[] trailer = Forge.trailer(0, 0x8000_0001, blocks);
    byte[] seg = ByteBuffer.allocate(data.length + trailer.length).put(data).put(trailer).array();
    assertFails(read(seg, id(0, 1)), "out of range");
  }

  @Test
  void aRowSizeThatIsNotARowIsRefused() {
    // The record's own framing holds (the engine checks it); the row serializer's size inside
    // the value says more bytes than the value has.
    byte[] value = ByteBuffer.allocate(12).putInt(1 << 20).putLong(0x41414141).array();
    List<byte[]> blocks = Forge.list(Forge.block(0, List.of(Forge.row(bytes("ok")), value)));
    List<Integer> at = new ArrayList<>();
    byte[] out = Forge.output(List.of(blocks), at);
    Read got = read(out, id(0, 1));
    assertFails(got, "a row of 1048576 bytes");
    assertEquals(1, got.rows().size());
    // Within the record, but not whole 8-byte words: not a row either.
    byte[] odd = ByteBuffer.allocate(12).putInt(7).putLong(0x41414141).array();
    byte[] out2 = Forge.output(List.of(Forge.list(Forge.block(0, List.of(odd)))), new ArrayList<>());
    assertFails(read(out2, id(0, 1)), "a row of 7 bytes");
  }

  /**
   * Random segments and batches, each read whole first, then with one forgery whose CRCs are made
   * valid: a payload byte changed, a record count changed, a block dropped or a block of no
   * records put in (the trailer made to agree), the bytes cut, the start moved to a later
   * segment, a row's size or a trailer's next partition changed. Every read ends in the rows
   * written or an IOException, within bounds and leaving held rows alone; those forgeries that
   * change which rows there are must fail.
   */
  @Test
  void forgedSegmentsReadWholeOrFail() {
    Random rnd = new Random(20261129L);
    int[] failed = new int[9];
    int[] kinds = new int[9];
    for (int iter = 0; iter < 3000; iter++) {
      int start = rnd.nextInt(3);
      int n = 1 + rnd.nextInt(4);
      int total = start + n + rnd.nextInt(3);
      List<List<byte[]>> parts = new ArrayList<>();
      List<List<List<byte[]>>> values = new ArrayList<>();
      List<String> want = new ArrayList<>();
      for (int p = 0; p < total; p++) {
        List<byte[]> blocks = new ArrayList<>();
        List<List<byte[]>> vals = new ArrayList<>();
        boolean empty = p != start && rnd.nextInt(10) < 3;
        for (int b = 0; !empty && b < 1 + rnd.nextInt(3); b++) {
          List<byte[]> rows = new ArrayList<>();
          for (int r = 0; r < 1 + rnd.nextInt(4); r++) {
            byte[] row = new byte[8 * rnd.nextInt(5)];
            rnd.nextBytes(row);
            rows.add(Forge.row(row));
            if (p >= start && p < start + n) {
              want.add(Arrays.toString(row));
            }
          }
          vals.add(rows);
          blocks.add(Forge.block(p, rows));
        }
        parts.add(blocks);
        values.add(vals);
      }
      List<Integer> at = new ArrayList<>();
      byte[] out = Forge.output(parts, at);
      int from = at.get(start);
      int to = at.get(start + n);
      BlockId id = id(start, start + n);
      Read whole = read(Arrays.copyOfRange(out, from, to), id);
      assertNull(whole.failure());
      assertEquals(want, whole.rows().stream().map(Arrays::toString).toList());

      int kind = rnd.nextInt(9);
      int p = start + rnd.nextInt(n);
      while (parts.get(p).isEmpty()) {
        p = start + rnd.nextInt(n);
      }
      int b = rnd.nextInt(parts.get(p).size());
      byte[] block = parts.get(p).get(b);
      int payload = block.length - Forge.HEADER_BYTES;
      byte[] forged;
      boolean mustFail;
      switch (kind) {
        case 0 -> { // a payload byte
          int i = rnd.nextInt(payload);
          byte v = (byte) rnd.nextInt(256);
          mustFail = false;
          parts.get(p).set(b, Forge.withPayloadByte(block, i, v));
          forged = slice(parts, start, n, null);
        }
        case 1 -> { // the header's record count
          int count = ByteBuffer.wrap(block).order(ByteOrder.LITTLE_ENDIAN).getInt(16);
          int other = Math.max(0, count + (rnd.nextBoolean() ? 1 : -1) * (1 + rnd.nextInt(3)));
          mustFail = other != count;
          parts.get(p).set(b, Forge.withRecordCount(block, other));
          forged = slice(parts, start, n, null);
        }
        case 2 -> { // a block dropped, the trailer made to agree: fewer rows, all valid
          if (parts.get(p).size() == 1) {
            continue;
          }
          parts.get(p).remove(b);
          mustFail = false;
          forged = slice(parts, start, n, null);
        }
        case 3 -> { // a block of no records put in, the trailer made to agree
          parts.get(p).add(b, Forge.block(p, List.of()));
          mustFail = true;
          forged = slice(parts, start, n, null);
        }
        case 4 -> { // cut short
          forged = Arrays.copyOfRange(out, from, from + rnd.nextInt(to - from));
          mustFail = true;
        }
        case 5 -> { // started at a later non-empty segment
          int q = p + 1;
          while (q < start + n && parts.get(q).isEmpty()) {
            q++;
          }
          if (q == start + n) {
            continue;
          }
          forged = Arrays.copyOfRange(out, at.get(q), to);
          mustFail = true;
        }
        case 6 -> { // a row's size inside its record, record framing kept
          List<byte[]> rows = new ArrayList<>(values.get(p).get(b));
          int r = rnd.nextInt(rows.size());
          byte[] v = rows.get(r).clone();
          int size = rnd.nextBoolean() ? rnd.nextInt() : v.length - 4 + 8 * (rnd.nextInt(3) - 1);
          ByteBuffer.wrap(v).putInt(0, size);
          rows.set(r, v);
          mustFail = size != v.length - 4;
          parts.get(p).set(b, Forge.block(p, rows));
          forged = slice(parts, start, n, null);
        }
        case 7 -> { // a record keyed to another partition
          List<byte[]> rows = values.get(p).get(b);
          int[] keys = new int[rows.size()];
          Arrays.fill(keys, p);
          int other = rnd.nextInt(total + 2);
          keys[rnd.nextInt(keys.length)] = other;
          // Another partition of the same batch reaches the same task; any other must not.
          mustFail = other < start || other >= start + n;
          parts.get(p).set(b, Forge.block(keys, rows, rows.size()));
          forged = slice(parts, start, n, null);
        }
        default -> { // a trailer's next partition
          int next = rnd.nextBoolean() ? rnd.nextInt() : p + rnd.nextInt(4) - 1;
          forged = slice(parts, start, n, new int[] {p, next});
          mustFail = false;
        }
      }
      kinds[kind]++;
      Read got = read(forged, id);
      if (got.failure() == null) {
        if (mustFail) {
          fail("forgery " + kind + " at iteration " + iter + " read " + got.rows().size() + " rows");
        }
        if (kind == 8) {
          assertEquals(want, got.rows().stream().map(Arrays::toString).toList(), "forgery 8");
        }
        if (kind == 0) {
          assertEquals(want.size(), got.rows().size(), "forgery 0 at iteration " + iter);
        }
      } else {
        failed[kind]++;
      }
    }
    for (int k : new int[] {1, 3, 4, 5, 6, 7}) {
      assertTrue(kinds[k] > 100 && failed[k] > 0, "forgery " + k + ": " + failed[k] + "/" + kinds[k]);
    }
  }

  /**
   * The segment of partitions {@code start..start+n} of a map output made of {@code parts}, with
   * the trailer of {@code nextOf[0]} naming {@code nextOf[1]} as its next partition if given.
   */
  private static byte[] slice(List<List<byte[]>> parts, int start, int n, int[] nextOf) {
    java.io.ByteArrayOutputStream out = new java.io.ByteArrayOutputStream();
    for (int p = start; p < start + n; p++) {
      List<byte[]> blocks = parts.get(p);
      if (blocks.isEmpty()) {
        continue;
      }
      int next = p + 1;
      while (next < parts.size() && parts.get(next).isEmpty()) {
        next++;
      }
      if (nextOf != null && nextOf[0] == p) {
        next = nextOf[1];
      }
      blocks.forEach(out::writeBytes);
      out.writeBytes(Forge.trailer(p, next, blocks));
    }
    return out.toByteArray();
  }
}
