package dev.sluice.spark.shuffle;

import dev.sluice.spark.api.SluiceSetting;
import dev.sluice.spark.jni.BlockCodec;
import dev.sluice.spark.jni.ChecksumAlgorithm;
import dev.sluice.spark.jni.OutputFormat;
import dev.sluice.spark.jni.SpillStrategy;
import java.util.Locale;
import org.apache.spark.SparkConf;
import org.apache.spark.SparkEnv;
import org.apache.spark.memory.MemoryMode;

/** Sluice's settings ({@code spark.sluice.*}) and what it takes from Spark's own. */
public final class SluiceConf {
  /**
   * The strategy {@link SluiceSetting#OPERATOR_SPILL} names in {@code conf}.
   *
   * @throws IllegalArgumentException for a value that is not a strategy
   */
  public static SpillStrategy spillStrategy(SparkConf conf) {
    return SpillStrategy.named(SluiceSetting.OPERATOR_SPILL.choice(conf));
  }

  public final int offloadThreads;
  /** {@link SluiceSetting#INLINE_WHEN_BUSY}. */
  public final boolean inlineWhenBusy;

  /** {@link SluiceSetting#PIN_OFFLOAD_THREADS}. */
  public final boolean pinOffloadThreads;
  /** {@link SluiceSetting#SEGMENT_BYTES}. */
  public final long segmentBytes;
  /** {@link SluiceSetting#LIQUID_OFFLOAD}. */
  public final boolean liquidOffload;

  public final long bufferPoolBytes;
  public final long memoryBudget;
  /** {@link SluiceSetting#OPERATOR_STATE_BYTES}. */
  public final long operatorStateBytes;
  /** Bytes of the direct buffer a map task fills before handing it over. */
  public final int bufferBytes;
  /** {@link SluiceSetting#RECORD_BYTES_MAX}. */
  final long recordBytesMax;
  /** {@link SluiceSetting#SQL_ROWS_DIRECT}. */
  public final boolean sqlRowsDirect;

  /**
   * How map outputs are written: Spark's codec as a block codec ({@code spark.shuffle.compress},
   * {@code spark.io.compression.codec}, zstd's level) and Spark's per-partition checksum ({@link
   * ChecksumAlgorithm#of}).
   */
  final OutputFormat output;
  /** Spark's codec, when Sluice writes another one instead (snappy, lzf); null otherwise. */
  final String codecReplaced;

  public SluiceConf(SparkConf conf) {
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
    BlockCodec codec;
    int level = 0;
    if (!conf.getBoolean("spark.shuffle.compress", true)) {
      codec = BlockCodec.NONE;
      codecReplaced = null;
    } else {
      String name = conf.get("spark.io.compression.codec", "lz4").toLowerCase(Locale.ROOT);
      if (name.contains("zstd")) {
        codec = BlockCodec.ZSTD;
        level = conf.getInt("spark.io.compression.zstd.level", 1);
        codecReplaced = null;
      } else {
        codec = BlockCodec.LZ4;
        codecReplaced = name.contains("lz4") ? null : name;
      }
    }
    output = new OutputFormat(codec, level, ChecksumAlgorithm.of(conf));
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
