package dev.sluice.spark;

import dev.sluice.spark.api.SluiceSetting;
import dev.sluice.spark.service.ServiceConf;
import dev.sluice.spark.shuffle.Coverage;
import dev.sluice.spark.shuffle.EngineShuffles;
import java.util.Map;
import org.apache.spark.SparkConf;
import org.apache.spark.shuffle.api.ShuffleDataIO;
import org.apache.spark.shuffle.api.ShuffleDriverComponents;
import org.apache.spark.shuffle.api.ShuffleExecutorComponents;
import org.apache.spark.shuffle.sort.io.LocalDiskShuffleDataIO;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Sluice's shuffle storage plugin ({@code spark.shuffle.sort.io.plugin.class=}{@value
 * ServiceConf#STORAGE_PLUGIN}): Spark's local disk for everything it stores, except that in service
 * mode ({@code spark.sluice.mode=service}) it tells Spark that map output outlives the executor
 * that wrote it ({@code ShuffleDriverComponents.supportsReliableStorage}), as a remote shuffle
 * service's plugin does.
 *
 * <p>What Spark does with that: dynamic allocation runs without its external shuffle service (with
 * {@code spark.dynamicAllocation.shuffleTracking.enabled=false}, idle executors are given back
 * although their map tasks' output is still read); an executor or host lost unregisters none of
 * the map outputs it wrote, and a running map stage does not resubmit the tasks that finished
 * there. Under this plugin every map output of a service shuffle is pushed ({@link
 * ServiceConf#reliableStorage}: {@code service.minPushBytes} and {@code service.minShuffleBytes}
 * are not applied), so the daemons hold them.
 *
 * <p>Reliability is said only where every shuffle Sluice can foresee goes to the daemons ({@link
 * #unreliableReason}): Sluice is the shuffle manager, the settings let it run the application's
 * shuffles ({@link Coverage#settingsReason}, {@link ServiceConf#sparkSettingsReason}), RDD
 * shuffles are Kryo's (Java serialization sends them to Spark's sort shuffle) and Spark's
 * aggregators are hash-grouped ({@code spark.sluice.groupedCombine}). What can still live on an
 * executor comes from a failure or a rare shape: an output a failed push kept there, a shuffle no
 * daemon registered, an ordering Sluice does not sort. Such an output is found lost by the next
 * read, whose fetch failure makes Spark unregister it and rerun its map tasks; a map stage that is
 * not deterministic, lost so after its result stage has finished tasks, fails the job, as under
 * Spark's external shuffle service when a host goes.
 */
public final class SluiceShuffleDataIO implements ShuffleDataIO {
  private static final Logger LOG = LoggerFactory.getLogger(SluiceShuffleDataIO.class);

  /** The serializer whose RDD shuffles Sluice runs (it relocates serialized records). */
  static final String KRYO = "org.apache.spark.serializer.KryoSerializer";

  private final SparkConf conf;
  private final LocalDiskShuffleDataIO local;

  public SluiceShuffleDataIO(SparkConf conf) {
    this.conf = conf;
    local = new LocalDiskShuffleDataIO(conf);
  }

  /**
   * Why the plugin does not say, under {@code conf}, that map output outlives its executor, or
   * null where it says so.
   */
  public static String unreliableReason(SparkConf conf) {
    if (!ServiceConf.inServiceMode(conf)) {
      return "embedded mode: map output lives on the executors";
    }
    if (!conf.get("spark.shuffle.manager", "").equals(EngineShuffles.MANAGER_CLASS)) {
      return "the shuffle manager is not Sluice's";
    }
    String settings = Coverage.settingsReason(conf);
    if (settings == null) {
      settings = ServiceConf.sparkSettingsReason(conf);
    }
    if (settings != null) {
      return "shuffles stay on the executors: " + settings;
    }
    if (!conf.get("spark.serializer", "").equals(KRYO)) {
      return "RDD shuffles go to Spark's sort shuffle unless spark.serializer=" + KRYO;
    }
    if (!SluiceSetting.GROUPED_COMBINE.flag(conf)) {
      return "Spark's aggregators read their shuffles on the executors under "
          + SluiceSetting.GROUPED_COMBINE.key
          + "=false";
    }
    return null;
  }

  @Override
  public ShuffleExecutorComponents executor() {
    return local.executor();
  }

  /** The driver's side: it decides once whether to say the storage is reliable, and logs why not. */
  @Override
  public ShuffleDriverComponents driver() {
    ShuffleDriverComponents disk = local.driver();
    String unreliable = unreliableReason(conf);
    if (unreliable != null) {
      LOG.warn(
          "Sluice's storage plugin does not say map output outlives its executor ({}): dynamic"
              + " allocation needs Spark's shuffle service or shuffle tracking",
          unreliable);
    }
    boolean reliable = unreliable == null;
    return new ShuffleDriverComponents() {
      @Override
      public Map<String, String> initializeApplication() {
        return disk.initializeApplication();
      }

      @Override
      public void cleanupApplication() {
        disk.cleanupApplication();
      }

      @Override
      public void registerShuffle(int shuffleId) {
        disk.registerShuffle(shuffleId);
      }

      @Override
      public void removeShuffle(int shuffleId, boolean blocking) {
        disk.removeShuffle(shuffleId, blocking);
      }

      @Override
      public boolean supportsReliableStorage() {
        return reliable;
      }
    };
  }
}
