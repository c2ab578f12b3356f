package dev.sluice.spark;

import java.util.Locale;
import org.apache.spark.SparkConf;
import org.apache.spark.SparkEnv;
import org.apache.spark.memory.MemoryMode;

/** Sluice's settings ({@code spark.sluice.*}) and what it takes from Spark's own. */
final class SluiceConf {
  static final String OFFLOAD_THREADS = "spark.sluice.offloadThreads";
  static final String BUFFER_POOL = "spark.sluice.bufferPoolBytes";
  static final String MEMORY_BUDGET = "spark.sluice.memoryBudget";
  /**
   * Map-side state of an offloaded operator per map task before it spills (the engine's spilling
   * threshold; SmartShuffle's 16 MB by default).
   */
  static final String OPERATOR_STATE = "spark.sluice.operatorStateBytes";
  /**
   * How an offloaded aggregation's map side spills at that threshold: {@code evict} (the
   * default: a new key in a full bucket of a set-associative table evicts one of its groups;
   * 8-byte keys such as Long, other keys spill their state), {@code state} (emit every group and
   * start empty) or {@code input} (keep the groups, pass new keys through). Read when the shuffle
   * is registered.
   */
  static final String OPERATOR_SPILL = "spark.sluice.operatorSpill";
  static final String BUFFER = "spark.sluice.bufferBytes";
  /**
   * The largest shuffle record a map task may write (serialized, with its key and lengths), at most
   * {@link NativeMapOutput#RECORD_BYTES_MAX} (the default); a larger record fails its task naming
   * this setting.
   */
  static final String RECORD_BYTES = "spark.sluice.recordBytesMax";
  /** Whether Spark SQL's rows are written without the serializer ({@link UnsafeRowFastPath}). */
  static final String SQL_ROWS_DIRECT = "spark.sluice.sqlRowsDirect";
  /**
   * Whether shuffles with an aggregator (reduceByKey, groupByKey, combineByKey, distinct) are
   * grouped by key hash in the engine and folded in one pass ({@link HashGroups}); read when the
   * shuffle is registered.
   */
  static final String GROUPED_COMBINE = "spark.sluice.groupedCombine";
  /**
   * Whether map tasks run their own partitioning (instead of handing it to the offload threads)
   * while the executor's task slots are all taken by map tasks: every core then runs a task, and an
   * offload thread would only take time from them. Read when the executor opens its engine.
   */
  static final String INLINE_WHEN_BUSY = "spark.sluice.inlineWhenBusy";

  /**
   * The native code of {@link #OPERATOR_SPILL} in {@code conf} ({@link SpillStrategy}).
   *
   * @throws IllegalArgumentException for a value that is not a strategy
   */
  static int spillStrategy(SparkConf conf) {
    String v = conf.get(OPERATOR_SPILL, "evict");
    SpillStrategy s = SpillStrategy.named(v);
    if (s == null) {
      throw new IllegalArgumentException(
          OPERATOR_SPILL + " is '" + v.trim() + "'; one of state, input, evict expected");
    }
    return s.code;
  }

  /**
   * Codec ids as the native side reads them: the block format's codec ids ({@code
   * sluice_core::format::Codec::ID_*}; {@code contract.rs} checks both sides).
   */
  static final int CODEC_NONE = 0;

  static final int CODEC_LZ4 = 1;
  static final int CODEC_ZSTD = 2;

  final int offloadThreads;
  /** {@link #INLINE_WHEN_BUSY}. */
  final boolean inlineWhenBusy;

  final long bufferPoolBytes;
  final long memoryBudget;
  /** See {@link #OPERATOR_STATE}. */
  final long operatorStateBytes;
  /** Bytes of the direct buffer a map task fills before handing it over. */
  final int bufferBytes;
  /** {@link #RECORD_BYTES}. */
  final long recordBytesMax;
  /** See {@link #SQL_ROWS_DIRECT}. */
  final boolean sqlRowsDirect;

  final int codec;
  final int codecLevel;
  /** Spark's per-partition checksum of map outputs ({@link ChecksumAlgorithm}). */
  final ChecksumAlgorithm checksum;
  /** Spark's codec, when Sluice writes another one instead (snappy, lzf); null otherwise. */
  final String codecReplaced;

  SluiceConf(SparkConf conf) {
    offloadThreads = conf.getInt(OFFLOAD_THREADS, 1);
    inlineWhenBusy = conf.getBoolean(INLINE_WHEN_BUSY, true);
    bufferPoolBytes = conf.getSizeAsBytes(BUFFER_POOL, "64m");
    memoryBudget = conf.getSizeAsBytes(MEMORY_BUDGET, "256m");
    operatorStateBytes = conf.getSizeAsBytes(OPERATOR_STATE, "16m");
    bufferBytes = (int) Math.min(conf.getSizeAsBytes(BUFFER, "1m"), 64L << 20);
    recordBytesMax =
        conf.getSizeAsBytes(RECORD_BYTES, Long.toString(NativeMapOutput.RECORD_BYTES_MAX));
    if (recordBytesMax < 1 || recordBytesMax > NativeMapOutput.RECORD_BYTES_MAX) {
      throw new IllegalArgumentException(
          RECORD_BYTES
              + " is "
              + recordBytesMax
              + " bytes; it must be between 1 and "
              + NativeMapOutput.RECORD_BYTES_MAX
              + " ("
              + mebibytes(NativeMapOutput.RECORD_BYTES_MAX)
              + ", the largest Sluice block)");
    }
    sqlRowsDirect = conf.getBoolean(SQL_ROWS_DIRECT, true);
    checksum = ChecksumAlgorithm.of(conf);
    if (!conf.getBoolean("spark.shuffle.compress", true)) {
      codec = CODEC_NONE;
      codecLevel = 0;
      codecReplaced = null;
    } else {
      String name = conf.get("spark.io.compression.codec", "lz4").toLowerCase(Locale.ROOT);
      if (name.contains("zstd")) {
        codec = CODEC_ZSTD;
        codecLevel = conf.getInt("spark.io.compression.zstd.level", 1);
        codecReplaced = null;
      } else {
        codec = CODEC_LZ4;
        codecLevel = 0;
        codecReplaced = name.contains("lz4") ? null : name;
      }
    }
  }

  /** {@code bytes} in whole MiB when it is a multiple of one, else in bytes, for messages. */
  static String mebibytes(long bytes) {
    return bytes % (1 << 20) == 0 ? (bytes >> 20) + " MiB" : bytes + " bytes";
  }

  /**
   * The mode Spark's memory manager accounts Sluice's native memory in: off-heap when Spark's
   * off-heap memory is on, else on-heap execution memory (the memory is native either way).
   */
  static MemoryMode nativeMemoryMode() {
    return SparkEnv.get().conf().getBoolean("spark.memory.offHeap.enabled", false)
        ? MemoryMode.OFF_HEAP
        : MemoryMode.ON_HEAP;
  }
}
