package dev.sluice.spark.jni;

import dev.sluice.spark.api.SluiceException;
import java.io.IOException;
import java.nio.ByteBuffer;

/**
 * The native engine's entry points (crate {@code sluice-jni}). Crossed once per buffer or block,
 * never per record. Every method turns a native error or panic into an exception: {@link
 * IOException} for corrupt or truncated data and failed writes, {@link SluiceException} for the
 * rest.
 *
 * <p>The library is loaded by {@link NativeLibrary} the first time this class is used, unless the
 * shuffle manager loaded it already (into one of Spark's local directories); where it cannot be
 * loaded, this class fails to initialise with that reason, and Sluice's callers check {@link
 * NativeLibrary#unavailableReason} first so that it never does.
 */
public final class SluiceNative {
  static {
    String why = NativeLibrary.unavailableReason();
    if (why != null) {
      throw new UnsatisfiedLinkError("Sluice's native library cannot be loaded: " + why);
    }
  }

  private SluiceNative() {}

  /**
   * Whether the calling thread should stop waiting in the engine: it was interrupted, or its Spark
   * task was killed (Spark marks the task before it interrupts the thread, and may not interrupt
   * it at all). The engine calls this from a waiting task thread after each slice of the wait
   * (crate {@code sluice-jni}, {@code stop.rs}) and then fails the wait with a {@link
   * SluiceException}, which Spark reports as the task killed.
   */
  static boolean stopRequested() {
    if (Thread.currentThread().isInterrupted()) {
      return true;
    }
    org.apache.spark.TaskContext task = org.apache.spark.TaskContext.get();
    return task != null && task.isInterrupted();
  }

  /**
   * Opens the process's engine; a later call gets the same engine, with its {@code inlineAtTasks}
   * applied (map tasks run their partitioning themselves while that many of them are open; 0:
   * never) and fails naming each other setting that differs from the engine's.
   */
  public static native void openEngine(EngineSettings settings);

  /**
   * Registers a host-partitioned shuffle running {@code op} on its map side (an offloaded
   * aggregation spilling by its {@link EngineOp#aggregate strategy}); returns its engine id.
   */
  public static native int registerShuffle(int partitions, int maps, EngineOp op);

  public static native void unregisterShuffle(int engineShuffle);

  /**
   * Starts a map attempt; returns its handle (freed by mapCommit or mapAbort). With {@code
   * rowChecksums} the records are Spark SQL rows (the value as {@code UnsafeRowSerializer} writes
   * it) and the engine keeps Spark's row checksum of each partition as they are handed over.
   */
  public static native long mapOpen(
      int engineShuffle,
      int mapIndex,
      int attempt,
      int partitions,
      boolean hostKeys,
      boolean rowChecksums);

  /**
   * The row checksums of the records handed over so far by an attempt opened with {@code
   * rowChecksums}: each partition's XOR of its rows' checksums, then each partition's SUM.
   */
  public static native long[] mapRowChecksums(long task);

  /**
   * Hands {@code records} records in {@code bytes} bytes of a direct buffer (variable layout, key
   * = partition id) to the engine; the buffer may be reused when this returns.
   */
  public static native void mapProduce(long task, ByteBuffer direct, int bytes, int records)
      throws IOException;

  /**
   * Writes the attempt's output to {@code dataFile} in {@code format}; returns each partition's
   * bytes, followed, if the format {@link OutputFormat#checksums has checksums}, by each
   * partition's checksum, and last the records the file holds. Frees the attempt, whether it
   * succeeds or not.
   */
  public static native long[] mapCommit(long task, String dataFile, OutputFormat format)
      throws IOException;

  /**
   * Writes the attempt's output so far to {@code spillFile} in {@code format}'s codec and frees it;
   * returns the bytes of each partition's segment in the file (the data file starts each
   * partition with these, in spill order).
   */
  public static native long[] mapSpill(long task, String spillFile, OutputFormat format)
      throws IOException;

  public static native void mapAbort(long task);

  /**
   * Bytes of native memory Sluice may hold outside Spark's memory manager with these settings
   * (buffer pool, free page pools, engine budget) and {@code reduceTasks} concurrent reduce tasks
   * (each an aggregate's state floor and one merge's read buffers).
   */
  public static native long unaccountedBytes(long bufferPoolBytes, long memoryBudget, int reduceTasks);

  /**
   * The engine's defaults for {@link #openEngine}'s settings: offload threads, buffer pool bytes,
   * memory budget bytes, operator state bytes, pin offload threads (0 or 1), segment bytes, liquid
   * offloading (0 or 1) ({@code bridge::host_defaults}); a test checks that {@link
   * SluiceSetting}'s defaults agree.
   */
  public static native long[] engineDefaults();

  /**
   * What the engine holds now, in bytes: map buffers, operator state, reduce results, free
   * partition pages, and the most free pages it keeps; all zero before it opens.
   */
  public static native long[] engineHeld();

  /** Waits in the engine that {@link #stopRequested} ended (a killed task's), in this process. */
  public static native long stoppedWaits();

  /** Map attempts opened and not yet committed or aborted, in this process. */
  public static native long liveMapAttempts();

  /** Reduce operators opened and not yet closed, in this process. */
  public static native long liveReduceOperators();

  /**
   * The bit {@link #frameInfo} sets for a segment trailer; the native side declares the same value
   * ({@code FRAME_TRAILER_FLAG} in {@code crates/sluice-engine/src/output/trailer.rs}), checked by
   * a test.
   */
  public static final long FRAME_TRAILER_FLAG = 1L << 62;

  /**
   * {@code frameLength | uncompressedLength << 32} of the block whose header starts the array, or
   * {@link #FRAME_TRAILER_FLAG} {@code |} its length for a segment trailer.
   */
  public static native long frameInfo(
      byte[] header, int shuffle, long map, int reduce, int reduceEnd, long offset)
      throws IOException;

  /**
   * Checks the segment trailer that starts the array against the records, blocks and CRC32C of
   * the blocks read since the last one ({@code expected}: the partition it must name, -1 for any);
   * returns its next non-empty partition.
   */
  public static native int segmentEnd(
      byte[] trailer,
      int shuffle,
      long map,
      int reduce,
      int reduceEnd,
      long offset,
      long records,
      int blocks,
      int crc,
      int expected)
      throws IOException;

  /**
   * Checks that a fetched segment ended right after a trailer ({@code lastNext}: its next
   * partition, -1 if none was read; {@code blocksAfter}: blocks read since) that leaves no
   * partition of the range unread.
   */
  public static native void fetchEnd(
      int shuffle, long map, int reduce, int reduceEnd, long offset, int lastNext, int blocksAfter)
      throws IOException;

  /**
   * Decodes one block of a segment of partitions {@code reduce} to {@code reduceEnd} (exclusive;
   * more than one for a batch fetch); returns {@code bytes | records << 32} of the values written
   * to out.
   */
  public static native long decodeValues(
      byte[] frame,
      int frameLength,
      int shuffle,
      long map,
      int reduce,
      int reduceEnd,
      long offset,
      byte[] out)
      throws IOException;

  /**
   * A reduce task's native final aggregate or sort-merge, whose spill files go to {@code
   * spillDir} (freed by reduceClose).
   */
  public static native long reduceOpen(
      EngineOp op, int startPartition, int endPartition, String spillDir);

  /** Decodes, verifies and merges one fetched block; returns its partial records. */
  public static native int reduceFeed(
      long aggregate, byte[] frame, int frameLength, int shuffle, long map, int reduce, long offset)
      throws IOException;

  /**
   * Memory Spark granted the reduce task for the operator's state (a sort keeps its runs in it, an
   * aggregate its table); true when the operator took it.
   */
  public static native boolean reduceGrant(long operator, long bytes);

  /**
   * Bytes the task must be granted before the operator takes a block of {@code upcoming} decoded
   * bytes within its memory (0 if it has room).
   */
  public static native long reduceShortfall(long operator, long upcoming);

  /**
   * The most bytes of state the reduce operator held at once (its floor and its grants together):
   * the task's peak execution memory for it.
   */
  public static native long reducePeakBytes(long operator);

  /**
   * Sorted runs the reduce operator wrote to disk for want of granted memory (after {@link
   * #reduceFinish}).
   */
  public static native long reduceSpilledRuns(long operator);

  /**
   * The bytes the reduce operator wrote to spill files (merge passes included) and the bytes those
   * records held in memory, as {@code {disk, memory}} (after {@link #reduceFinish}).
   */
  public static native long[] reduceSpillBytes(long operator);

  /**
   * Bytes the finished results hold in memory (after {@link #reduceFinish}): an aggregate's or a
   * distinct's emitted whole and not yet read, a sort's runs kept in memory; 0 for results merged
   * from spilled runs as they are read.
   */
  public static native long reduceHeldBytes(long operator);

  /**
   * Sends what the finished results hold in memory to disk: an aggregate's or a distinct's
   * emitted whole by {@link #reduceFinish} go to a spill file in the task's spill directory, read
   * back a buffer at a time; a sort's runs kept in memory go to a spill file its merge reads them
   * from. Returns the bytes no longer held in memory (0 before finish, for results merged from
   * spilled runs, or with about one buffer left).
   */
  public static native long reduceSpillResults(long operator);

  /**
   * Ends the operator's input: results are emitted whole, or merged from runs as they are read.
   * Returns the result count, or -1 where it is known only once they are read.
   */
  public static native long reduceFinish(long aggregate) throws IOException;

  /**
   * Copies results into the buffer; returns {@code bytes | records << 32}, 0 at the end, or the
   * bytes the next result needs (records 0) when it does not fit the buffer.
   */
  public static native long reduceNext(long aggregate, ByteBuffer direct);

  public static native void reduceClose(long aggregate);
}
