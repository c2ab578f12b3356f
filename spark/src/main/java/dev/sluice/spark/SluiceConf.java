package dev.sluice.spark;

import java.util.Locale;
import org.apache.spark.SparkConf;
import org.apache.spark.SparkEnv;
import org.apache.spark.memory.MemoryMode;

/** Sluice's settings ({@code spark.sluice.*}) and what it takes from Spark's own. */
final class SluiceConf {
  /**
   * The native code of {@link SluiceSetting#OPERATOR_SPILL} in {@code conf} ({@link
   * SpillStrategy}).
   *
   * @throws IllegalArgumentException for a value that is not a strategy
   */
  static int spillStrategy(SparkConf conf) {
    return SpillStrategy.named(SluiceSetting.OPERATOR_SPILL.choice(conf)).code;
  }

  /**
   * Codec ids as the native side reads them: the block format's codec ids ({@code
   * sluice_core::format::Codec::ID_*}; {@code contract.rs} checks both sides).
   */
  static final int CODEC_NONE = 0;

  static final int CODEC_LZ4 = 1;
  static final int CODEC_ZSTD = 2;

  final int offloadThreads;
  /** {@link SluiceSetting#INLINE_WHEN_BUSY}. */
  final boolean inlineWhenBusy;

  /** {@link SluiceSetting#PIN_OFFLOAD_THREADS}. */
  final boolean pinOffloadThreads;
  /** {@link SluiceSetting#SEGMENT_BYTES}. */
  final long segmentBytes;
  /** {@link SluiceSetting#LIQUID_OFFLOAD}. */
  final boolean liquidOffload;

  final long bufferPoolBytes;
  final long memoryBudget;
  /** {@link SluiceSetting#OPERATOR_STATE_BYTES}. */
  final long operatorStateBytes;
  /** Bytes of the direct buffer a map task fills before handing it over. */
  final int bufferBytes;
  /** {@link SluiceSetting#RECORD_BYTES_MAX}. */
  final long recordBytesMax;
  /** {@link SluiceSetting#SQL_ROWS_DIRECT}. */
  final boolean sqlRowsDirect;

  final int codec;
  final int codecLevel;
  /** Spark's per-partition checksum of map outputs ({@link ChecksumAlgorithm}). */
  final ChecksumAlgorithm checksum;
  /** Spark's codec, when Sluice writes another one instead (snappy, lzf); null otherwise. */
  final String codecReplaced;

  SluiceConf(SparkConf conf) {
    offloadThreads = SluiceSetting.OFFLOAD_THREADS.integer(conf);
    inlineWhenBusy = SluiceSetting.INLINE_WHEN_BUSY.flag(conf);
    pinOffloadThreads = SluiceSetting.PIN_OFFLOAD_THREADS.flag(conf);
    segmentBytes = SluiceSetting.SEGMENT_BYTES.bytes(conf);
    liquidOffload = SluiceSetting.LIQUID_OFFLOAD.flag(conf);
    bufferPoolBytes = SluiceSetting.BUFFER_POOL_BYTES.bytes(conf);
    memoryBudget = SluiceSetting.MEMORY_BUDGET.bytes(conf);
    operatorStateBytes = SluiceSetting.OPERATOR_STATE_BYTES.bytes(conf);
    bufferBytes = (int) SluiceSetting.BUFFER_BYTES.bytes(conf);
    recordBytesMax = SluiceSetting.RECORD_BYTES_MAX.bytes(conf);
    sqlRowsDirect = SluiceSetting.SQL_ROWS_DIRECT.flag(conf);
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

  /** {@code bytes} in the largest binary unit that divides it (bytes, KiB ... TiB), for messages. */
  static String sizeText(long bytes) {
    String[] units = {"bytes", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    while (u + 1 < units.length && bytes != 0 && bytes % 1024 == 0) {
      bytes /= 1024;
      u++;
    }
    return bytes == 1 && u == 0 ? "1 byte" : bytes + " " + units[u];
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
