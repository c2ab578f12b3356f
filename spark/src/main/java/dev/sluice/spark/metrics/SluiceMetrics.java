package dev.sluice.spark.metrics;

import dev.sluice.spark.jni.SluiceNative;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Process-wide totals of what ran through Sluice in this JVM (an executor, or the driver in local
 * mode), beside Spark's per-task metrics: for tests and benchmarks to see which shuffles Sluice
 * carried.
 */
public final class SluiceMetrics {
  public static final AtomicLong MAP_OUTPUTS = new AtomicLong();
  public static final AtomicLong BYTES_WRITTEN = new AtomicLong();
  public static final AtomicLong RECORDS_WRITTEN = new AtomicLong();
  public static final AtomicLong BLOCKS_DECODED = new AtomicLong();
  public static final AtomicLong MAP_SPILLS = new AtomicLong();
  public static final AtomicLong SORTED_READS = new AtomicLong();
  public static final AtomicLong SPILL_BYTES = new AtomicLong();
  public static final AtomicLong SQL_ROWS_DIRECT = new AtomicLong();
  public static final AtomicLong SQL_ROWS_READ = new AtomicLong();
  public static final AtomicLong REDUCE_SHORT_GRANTS = new AtomicLong();
  public static final AtomicLong REDUCE_SPILLED_RUNS = new AtomicLong();
  public static final AtomicLong REDUCE_GIVEN_BACK = new AtomicLong();
  public static final AtomicLong GROUPED_READS = new AtomicLong();
  public static final AtomicLong MAP_COMBINES_OFF = new AtomicLong();
  public static final AtomicLong MAP_COMBINES_BY_SPARK = new AtomicLong();
  public static final AtomicLong OP_FIRST_LEVELS_OFF = new AtomicLong();
  public static final AtomicLong SQL_NATIVE_NODES = new AtomicLong();
  /** Map attempts whose output went to the service's daemons. */
  public static final AtomicLong SERVICE_MAP_OUTPUTS = new AtomicLong();
  /** Map attempts of service shuffles whose output stayed on the executor (a push failed). */
  public static final AtomicLong SERVICE_FALLBACKS = new AtomicLong();
  /** Map attempts of service shuffles kept on the executor as small (ServiceConf.keepReason). */
  public static final AtomicLong SERVICE_SMALL_KEPT = new AtomicLong();
  /** Reduce-side reads served by the service's daemons (one per daemon a task read from). */
  public static final AtomicLong SERVICE_READS = new AtomicLong();
  /** Of those, reads resumed on a new connection after theirs ended under them. */
  public static final AtomicLong SERVICE_RESUMED_READS = new AtomicLong();
  /** Spills of map attempts pushed to the service's daemons while their maps ran. */
  public static final AtomicLong SERVICE_EARLY_PUSHES = new AtomicLong();
  /** Early pushes of attempts that did not commit whose staged chunks a daemon dropped. */
  public static final AtomicLong SERVICE_EARLY_DROPS = new AtomicLong();
  /** Pushes a daemon refused (a full disk...) whose staged chunks it was asked to drop, and did. */
  public static final AtomicLong SERVICE_REFUSED_DROPS = new AtomicLong();
  /** Commits taken back: a daemon dropped an attempt that committed there, then failed elsewhere. */
  public static final AtomicLong SERVICE_COMMITS_DROPPED = new AtomicLong();

  private SluiceMetrics() {}

  /**
   * Map attempts the engine holds for this process's tasks: opened and not yet committed or
   * dropped. Zero once every task has ended, whatever way it ended.
   */
  public static long liveMapAttempts() {
    // A JVM that cannot load the library opens no attempt.
    return dev.sluice.spark.jni.NativeLibrary.unavailableReason() != null
        ? 0
        : SluiceNative.liveMapAttempts();
  }

  /**
   * Native reduce operators (offloaded aggregates, native sorts, grouped reads) open in this
   * process: zero once every task that read through one has ended.
   */
  public static long liveReduceOperators() {
    return dev.sluice.spark.jni.NativeLibrary.unavailableReason() != null
        ? 0
        : SluiceNative.liveReduceOperators();
  }

  /**
   * What this process's engine holds now, in bytes: {@code [map buffers, operator state, reduce
   * results, free partition pages, most free pages kept]}. Once every task has ended the first
   * three are 0 and the free pages within their limit; anything else a finished task left behind.
   */
  public static long[] engineHeld() {
    return dev.sluice.spark.jni.NativeLibrary.unavailableReason() != null
        ? new long[5]
        : SluiceNative.engineHeld();
  }

  /**
   * Waits of task threads in the engine (for the map buffer pool, for an attempt's segments) that
   * ended because the task was killed or its thread interrupted, in this process.
   */
  public static long stoppedWaits() {
    return dev.sluice.spark.jni.NativeLibrary.unavailableReason() != null
        ? 0
        : SluiceNative.stoppedWaits();
  }

  /** Map attempts whose output went to the service's daemons. */
  public static long serviceMapOutputs() {
    return SERVICE_MAP_OUTPUTS.get();
  }

  /** Map attempts of service shuffles whose output stayed on their executor: a push failed. */
  public static long serviceFallbacks() {
    return SERVICE_FALLBACKS.get();
  }

  /**
   * Map attempts of service shuffles whose output stayed on their executor because it, or the
   * shuffle it estimates, was smaller than {@code spark.sluice.service.minPushBytes} or {@code
   * spark.sluice.service.minShuffleBytes}.
   */
  public static long serviceSmallKept() {
    return SERVICE_SMALL_KEPT.get();
  }

  /** Reads of a reduce task's partitions from one daemon each. */
  public static long serviceReads() {
    return SERVICE_READS.get();
  }

  /**
   * Reads of the daemons resumed on a new connection after theirs ended under them (a daemon
   * closes a stream its reader left waiting past its stall limit): one per new connection.
   */
  public static long serviceResumedReads() {
    return SERVICE_RESUMED_READS.get();
  }

  /** Spills of map attempts pushed to the daemons while their maps ran. */
  public static long serviceEarlyPushes() {
    return SERVICE_EARLY_PUSHES.get();
  }

  /** Early pushes of attempts that did not commit, dropped at their daemon. */
  public static long serviceEarlyDrops() {
    return SERVICE_EARLY_DROPS.get();
  }

  /** Pushes a daemon refused whose staged chunks it then dropped. */
  public static long serviceRefusedDrops() {
    return SERVICE_REFUSED_DROPS.get();
  }

  /** Commits at daemons taken back after the attempt's push failed at another daemon. */
  public static long serviceCommitsDropped() {
    return SERVICE_COMMITS_DROPPED.get();
  }

  /** Map attempts whose output Sluice wrote. */
  public static long mapOutputs() {
    return MAP_OUTPUTS.get();
  }

  /** Bytes of Sluice blocks written to shuffle data files. */
  public static long bytesWritten() {
    return BYTES_WRITTEN.get();
  }

  /** Records map tasks handed to the engine. */
  public static long recordsWritten() {
    return RECORDS_WRITTEN.get();
  }

  /** Blocks reduce tasks decoded and verified. */
  public static long blocksDecoded() {
    return BLOCKS_DECODED.get();
  }

  /** Times a map task's output was spilled because Spark's memory manager refused more. */
  public static long mapSpills() {
    return MAP_SPILLS.get();
  }

  /** Bytes written to map-side spill files. */
  public static long spillBytes() {
    return SPILL_BYTES.get();
  }

  /**
   * Spark SQL rows written without the serializer ({@link
   * dev.sluice.spark.shuffle.UnsafeRowFastPath}).
   */
  public static long sqlRowsDirect() {
    return SQL_ROWS_DIRECT.get();
  }

  /**
   * Spark SQL rows reduce tasks pointed at in decoded blocks, without the serializer ({@link
   * dev.sluice.spark.shuffle.RowShuffleReader}).
   */
  public static long sqlRowsRead() {
    return SQL_ROWS_READ.get();
  }

  /**
   * Reduce tasks of a native sort or aggregate that Spark's memory manager granted less memory
   * than their operator lacked ({@link dev.sluice.spark.shuffle.ReduceMemory}).
   */
  public static long reduceShortGrants() {
    return REDUCE_SHORT_GRANTS.get();
  }

  /**
   * Sorted runs reduce tasks wrote to disk because their granted memory did not cover them (a
   * native sort's runs, a native aggregate's tables).
   */
  public static long reduceSpilledRuns() {
    return REDUCE_SPILLED_RUNS.get();
  }

  /**
   * Times a native sort or aggregate whose input had ended sent what it held in memory to disk and
   * gave its grant back to Spark, because another consumer of its task asked for memory ({@link
   * dev.sluice.spark.shuffle.ReduceMemory#spill}).
   */
  public static long reduceGivenBack() {
    return REDUCE_GIVEN_BACK.get();
  }

  /** Reduce tasks whose records the engine merged into key order (a native sortByKey). */
  public static long sortedReads() {
    return SORTED_READS.get();
  }

  /**
   * Reduce tasks that folded runs of equal key hash ({@link
   * dev.sluice.spark.combine.GroupedCombine}).
   */
  public static long groupedReads() {
    return GROUPED_READS.get();
  }

  /**
   * Map tasks whose combine table switched itself off ({@link
   * dev.sluice.spark.combine.MapCombiner}).
   */
  public static long mapCombinesOff() {
    return MAP_COMBINES_OFF.get();
  }

  /** Map tasks whose combiners the table could not hold, so Spark combined the rest. */
  public static long mapCombinesBySpark() {
    return MAP_COMBINES_BY_SPARK.get();
  }

  /** Map tasks of an offloaded operator whose first level switched itself off. */
  public static long opFirstLevelsOff() {
    return OP_FIRST_LEVELS_OFF.get();
  }

  /**
   * Native nodes Sluice's SQL rules put in plans in this JVM (the driver's): each replacement
   * counted once per planning pass that made it.
   */
  public static long sqlNativeNodes() {
    return SQL_NATIVE_NODES.get();
  }
}
