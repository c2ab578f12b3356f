package dev.sluice.spark.shuffle;

import dev.sluice.spark.combine.HashGroups;
import dev.sluice.spark.service.ServiceConf;
import org.apache.spark.ShuffleDependency;
import org.apache.spark.SparkConf;

/**
 * Which shuffles Sluice runs. A shuffle it does not cover goes to Spark's sort shuffle, alone.
 *
 * <ul>
 *   <li>The serializer must allow relocating serialized records (Kryo, Spark SQL's row
 *       serializer): the engine regroups records as bytes, and the reduce side reads one
 *       partition's records back to back as one stream. Java serialization does not allow it.
 *   <li>No I/O encryption (Sluice blocks are checksummed and compressed, not encrypted).
 *   <li>No push-based shuffle (the merged-block path is Spark's own).
 *   <li>No shuffle storage plugin other than Spark's local disk or Sluice's ({@link
 *       #STORAGE_PLUGIN_KEY}).
 *   <li>At most {@link #PARTITIONS_MAX} partitions (the engine's limit).
 * </ul>
 *
 * <p>Key orderings and aggregators are covered: a natural ordering is sorted by the engine ({@link
 * SortKind}), another one by Spark's reader after decoding; an aggregator's functions run on the
 * task threads over records the engine groups by key hash ({@link HashGroups}), or, with {@code
 * spark.sluice.groupedCombine=false}, as Spark runs them (map-side combine before the engine, the
 * reader's aggregation after decoding).
 */
public final class Coverage {
  /**
   * Spark's setting of the plugin its sort shuffle stores map outputs through ({@code
   * ShuffleDataIO}), and its default, the local disk. A user who names another one (a remote or
   * cloud store) expects every map output there; Sluice writes its own, so it leaves such an
   * application's shuffles to the sort shuffle, which also initializes the plugin's executor side.
   * Sluice's own plugin ({@link ServiceConf#STORAGE_PLUGIN}) is the local disk, with reliability
   * said in service mode.
   */
  static final String STORAGE_PLUGIN_KEY = ServiceConf.STORAGE_PLUGIN_KEY;

  static final String LOCAL_DISK_STORAGE =
      "org.apache.spark.shuffle.sort.io.LocalDiskShuffleDataIO";

  /** The engine's partition limit (2^24). */
  public static final int PARTITIONS_MAX = 1 << 24;

  private Coverage() {}

  /** Why the shuffle falls back to the sort shuffle, or null if Sluice runs it. */
  public static String fallbackReason(SparkConf conf, ShuffleDependency<?, ?, ?> dep) {
    if (!dep.serializer().supportsRelocationOfSerializedObjects()) {
      return "serializer "
          + dep.serializer().getClass().getName()
          + " cannot relocate serialized records (use Kryo: spark.serializer="
          + "org.apache.spark.serializer.KryoSerializer)";
    }
    String settings = settingsReason(conf);
    if (settings != null) {
      return settings;
    }
    int partitions = dep.partitioner().numPartitions();
    if (partitions > PARTITIONS_MAX) {
      return partitions + " partitions, more than the engine's " + PARTITIONS_MAX;
    }
    return null;
  }

  /**
   * Why no shuffle of this application can run on Sluice in this JVM, or null if they can: its
   * settings, or a native library this JVM cannot load ({@link
   * dev.sluice.spark.jni.NativeLibrary}).
   */
  public static String settingsReason(SparkConf conf) {
    String line = SparkLine.mismatchReason();
    if (line != null) {
      return line;
    }
    if (conf.getBoolean("spark.io.encryption.enabled", false)) {
      return "I/O encryption is on (spark.io.encryption.enabled)";
    }
    if (conf.getBoolean("spark.shuffle.push.enabled", false)) {
      return "push-based shuffle is on (spark.shuffle.push.enabled)";
    }
    String storage = conf.get(STORAGE_PLUGIN_KEY, LOCAL_DISK_STORAGE);
    if (!storage.equals(LOCAL_DISK_STORAGE) && !storage.equals(ServiceConf.STORAGE_PLUGIN)) {
      return "a shuffle storage plugin is set ("
          + STORAGE_PLUGIN_KEY
          + "="
          + storage
          + "), which only Spark's sort shuffle writes through";
    }
    String library = dev.sluice.spark.jni.NativeLibrary.unavailableReason();
    if (library != null) {
      return "Sluice's native library cannot be loaded in this JVM (" + library + ")";
    }
    return null;
  }

  /**
   * Why {@link dev.sluice.spark.Sluice}'s offloaded operators run as Spark's own operators here, or
   * null if the engine runs them: they need Sluice as the shuffle manager and the settings above.
   */
  public static String operatorFallbackReason(SparkConf conf, Object shuffleManager) {
    if (!(shuffleManager instanceof EngineShuffles)) {
      return "the shuffle manager is not Sluice (spark.shuffle.manager="
          + EngineShuffles.MANAGER_CLASS
          + ")";
    }
    return settingsReason(conf);
  }
}
